"""Issue 54: every method sentence is generated from the estimator that produced the number beside
it. The report (Markdown and HTML), every --help and the audit's progress lines, on the bundled sample
and a simulated log with epochs, name the methods the metrics' result says it ran, and none of the
hand-written phrases that drifted (a bootstrap for the score intervals, exact McNemar for the score
test, a 0.50 tf-idf threshold)."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from skillaudit.analysis.methods import NEAR_DUPLICATE_THRESHOLD, interval_summary
from skillaudit.cli import cli

DRIFTED = ("CIs from a task-level paired bootstrap", "confidence intervals from a task-level paired bootstrap",
           "exact McNemar when each task ran once", "0.50 tfidf", "bootstrap with 20,000 resamples",
           "0 = no CIs", "CIs: task-level paired bootstrap",
           "regression effects (task-level bootstrap CI)", "A permutation test: each retrieving task",
           "pooled exact McNemar p", "pooled McNemar p ≤", "Task-level bootstrap CIs")


def _helps() -> dict[str, str]:
    out = {}

    def walk(cmd: click.Command, path: list[str]) -> None:
        res = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200)
        out[" ".join(path) or "skillaudit"] = res.output
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(cli, [])
    return out


def test_no_help_text_names_a_method_the_code_does_not_use():
    helps = _helps()
    assert len(helps) > 15
    for name, text in helps.items():
        for phrase in DRIFTED:
            assert phrase not in text, (name, phrase)
    flat = " ".join(helps["metrics"].split())
    assert "Tango score intervals inverting the score McNemar test" in flat
    from skillaudit.analysis.methods import TASK_TEST_WORDS

    assert TASK_TEST_WORDS in " ".join(helps["clusters"].split()).replace("- ", "-")  # click wraps at hyphens
    assert "pooled exact McNemar" not in helps["clusters"]
    for cmd in ("audit", "prune", "clusters"):
        text = " ".join(helps[cmd].split())
        assert ", ".join(f"{v:.2f} {k}" for k, v in NEAR_DUPLICATE_THRESHOLD.items()) in text, cmd


def _audit(tmp_path, runs, skills, name):
    out = tmp_path / name
    res = CliRunner().invoke(cli, ["audit", *runs, "--skills", skills, "--out", str(out), "--embedder", "tfidf",
                                   "--bootstrap", "400"])
    assert res.exit_code == 0, res.output
    return out, res.output


def _check(out, progress: str) -> None:
    doc = json.loads((out / "audit.json").read_text())
    method = doc["metrics"]["method"]
    groups = doc["metrics"]["groups"]
    # the sentence names exactly the tests the groups ran, and the bootstrap as it ran
    assert method["tests"]["p_cond"] == sorted({g["p_cond_test"] for g in groups})
    for g in groups:
        for fig, test in g["score_test"].items():
            assert test in method["intervals"][fig]
    assert "400 resamples" in method["intervals"]["agg_lift"] and "seed 0" in method["intervals"]["agg_lift"]
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert method["sentence"] in md
    for phrase in DRIFTED:
        assert phrase not in md and phrase not in html, phrase
    if doc["clusters"]:  # the clusters' caption: the pooled test as `analysis.clusters` ran it
        t = doc["clusters"]["harm_test"]
        from skillaudit.analysis.methods import TASK_TEST_WORDS

        assert t["test"] == TASK_TEST_WORDS
        import html as _html

        words = f"({t['pooled']}, tested with the task as the unit ({t['test']}): p ≤ {t['alpha']:g})"
        assert _html.escape(words).replace("&#x27;", "&#39;") in html and words in md
    for e in doc["library"]:  # the library table's caption: each entry's own estimators
        assert e["method"]["mean"] in md and e["method"]["heterogeneity"] in md
    settings = doc["skills"]["settings"]
    if settings.get("regression_interval") == "bootstrap":
        assert f"The ridge regression (task-level bootstrap percentiles, {settings['bootstrap']:,} resamples" in md
        assert f"The ridge regression ({settings['method']['coef_interval']})" in md
    assert f"paired metrics for {sum(g['n_pairs'] for g in groups if g['benchmark'] == '*'):,} pairs" in progress
    assert interval_summary(400) in " ".join(progress.split())


def test_the_report_and_progress_name_the_estimators_that_ran(tmp_path):
    from skillaudit.demo import demo_paths
    from skillaudit.runs.simulate import simulate

    demo = demo_paths()
    out, progress = _audit(tmp_path, [str(p) for p in demo.runs], str(demo.skills), "sample")
    _check(out, progress)
    doc = json.loads((out / "audit.json").read_text())
    assert doc["metrics"]["method"]["tests"]["p_cond"] == ["score McNemar (Tango)"]
    sim = tmp_path / "sim"
    simulate(n_tasks=200, n_skills=12, epochs=3, seed=4).write(sim)  # epochs: the cluster-adjusted test
    out, progress = _audit(tmp_path, [str(sim / "runs.jsonl")], str(sim / "skills"), "epochs")
    _check(out, progress)
    doc = json.loads((out / "audit.json").read_text())
    assert any("Durkalski" in t for t in doc["metrics"]["method"]["tests"]["p_cond"])
    assert "Durkalski" in doc["metrics"]["method"]["sentence"]


def test_rank_json_names_the_estimators_it_ran(tmp_path):
    """rank --json carries settings.method: the per-skill test, the regression's interval as it ran
    (bootstrap resamples, or none with --no-regression) and the share scheme."""
    from skillaudit.demo import demo_paths

    demo = demo_paths()
    res = CliRunner().invoke(cli, ["rank", *map(str, demo.runs), "--skills", str(demo.skills), "--bootstrap", "150",
                                   "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)["settings"]
    assert s["method"]["p"].startswith(s["p_value"])
    from skillaudit.analysis.regression import MIN_INTERVAL_TASKS

    assert s["method"]["coef"].endswith("interval: task-level bootstrap percentiles, 150 resamples (none below "
                                        f"{MIN_INTERVAL_TASKS} retrieving tasks)")
    assert s["method"]["coef_interval"] in s["method"]["coef"]
    # the table's caption is these words, not its own
    text = CliRunner().invoke(cli, ["rank", *map(str, demo.runs), "--skills", str(demo.skills), "--bootstrap",
                                    "150"], terminal_width=400).output
    assert " ".join(text.split()).count(f"p: {s['method']['p']}; coef: {s['method']['coef']}; vs library: "
                                        f"{s['method']['vs_library']}.") == len(s["models"])
    assert s["method"]["share"] == f"each pair's flip split among its retrieved skills ({s['attribution']} weights)"


def test_metrics_table_title_names_the_interval_the_result_used():
    """`metrics`'s table title is the result's own method (the RAE interval as it ran), not a fixed phrase."""
    from skillaudit.demo import demo_paths

    demo = demo_paths()
    runs = [*map(str, demo.runs)]
    doc = json.loads(CliRunner().invoke(cli, ["metrics", *runs, "--bootstrap", "100", "--json"]).output)
    text = CliRunner().invoke(cli, ["metrics", *runs, "--bootstrap", "100"], terminal_width=400).output
    rae = doc["method"]["intervals"]["rae"]
    assert f"95% CI of RAE: {rae}, task-level" in " ".join(text.split())
