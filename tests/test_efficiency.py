"""Efficiency effects (issue 56 step 3a): paired token and time differences per model, the task as
the unit, in `metrics --json` and audit.json; a measure logged as 0 everywhere or never is "not
logged", never a zero effect."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.stats.signed_rank import hodges_lehmann, ratio_estimate

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "minimax-claude-code"


def _records(rng, n_tasks=30, epochs=2):
    out, truth = [], {}
    for t in range(n_tasks):
        base = float(rng.integers(1_000, 50_000))
        for e in range(1, epochs + 1):
            for cond, factor in (("enabled", 1.5), ("disabled", 1.0)):
                prompt = int(base * factor * rng.uniform(0.9, 1.1))
                lat = round(10.0 * factor * rng.uniform(0.8, 1.2), 3)
                out.append({"task_id": f"t{t}", "epoch": e, "condition": cond, "correct": bool(rng.random() < 0.5),
                            "model": "m", "meta": {"usage": {"prompt_tokens": prompt, "completion_tokens": 0},
                                                   "latency_s": lat}})
                truth.setdefault((t, cond), []).append((prompt, lat))
    return out, truth


def test_per_task_means_then_the_signed_rank_shift_and_ratio(tmp_path):
    rng = np.random.default_rng(0)
    recs, truth = _records(rng)
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0", "--json"]).stdout)
    (model,) = doc["efficiency"]["models"]
    got = {m["measure"]: m for m in model["measures"]}
    for k, name in ((0, "prompt_tokens"), (1, "latency_s")):
        on = np.array([np.mean([v[k] for v in truth[(t, "enabled")]]) for t in range(30)])
        off = np.array([np.mean([v[k] for v in truth[(t, "disabled")]]) for t in range(30)])
        shift, ratio = hodges_lehmann(on - off), ratio_estimate(on, off)
        m = got[name]
        assert m["logged"] and m["n_tasks"] == 30 and m["n_pairs"] == 60
        assert m["difference"] == pytest.approx(shift.estimate) and m["p"] == pytest.approx(shift.p)
        assert m["difference_ci"] == pytest.approx(list(shift.ci))
        assert m["ratio"] == pytest.approx(ratio.estimate) and 1.3 < m["ratio_ci"][0] <= 1.5 <= m["ratio_ci"][1]
    # reported as 0 in every trial: not logged, not a zero effect
    assert got["completion_tokens"]["logged"] is False and got["completion_tokens"]["difference"] is None
    assert "signed-rank" in doc["efficiency"]["method"]["test"]


def test_no_cost_fields_no_efficiency_figures(tmp_path):
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps({"task_id": f"t{i}", "condition": c, "correct": True}) + "\n"
                           for i in range(5) for c in ("enabled", "disabled")))
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0", "--json"]).stdout)
    assert all(not m["logged"] for mod in doc["efficiency"]["models"] for m in mod["measures"])


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/real is absent")
def test_real_minimax_jobs_show_token_and_time_differences(tmp_path):
    """The MiniMax / Claude Code Harbor jobs carry input tokens and agent time, and log 0 output tokens
    in every trial: the first two are paired effects, the third is not logged."""
    out = tmp_path / "mm.jsonl"
    res = CliRunner().invoke(cli, ["import", "harbor", str(REAL), "--output", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(out), "--bootstrap", "0", "--json"]).stdout)
    (model,) = doc["efficiency"]["models"]
    got = {m["measure"]: m for m in model["measures"]}
    assert got["prompt_tokens"]["logged"] and got["prompt_tokens"]["n_tasks"] >= 8
    assert got["latency_s"]["logged"] and got["latency_s"]["n_pairs"] == 17
    assert got["completion_tokens"]["logged"] is False
    # cached input tokens apart from the fresh ones (Harbor's n_cache_tokens); no cost in these files: no row
    assert got["cached_tokens"]["logged"] and got["cached_tokens"]["n_pairs"] == got["prompt_tokens"]["n_pairs"]
    assert "cost_usd" not in got
    # the with-skills job ran 9 of its trials at timeout multiplier 4, the without-skills one all at 2
    assert got["latency_s"]["timeouts"].startswith("the conditions ran under different time limits: with skills "
                                                   "timeout x4 (9), timeout x2 (8); without timeout x2 (17)")
    assert got["prompt_tokens"]["timeouts"] is None
    for name in ("prompt_tokens", "latency_s"):
        m = got[name]
        lo, hi = m["difference_ci"]
        assert lo <= m["difference"] <= hi and (lo > 0 or hi < 0) == (m["p"] <= 0.05)


def test_audit_json_carries_the_efficiency_section(tmp_path):
    rng = np.random.default_rng(1)
    recs, _ = _records(rng, n_tasks=12, epochs=1)
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "report"
    res = CliRunner().invoke(cli, ["audit", str(log), "--out", str(out), "--bootstrap", "100", "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())
    assert doc["efficiency"]["schema"] == "skillaudit.efficiency/v1"
    assert {m["measure"] for m in doc["efficiency"]["models"][0]["measures"]} == {
        "prompt_tokens", "completion_tokens", "latency_s"}


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/real is absent")
def test_the_report_and_metrics_show_the_efficiency_table_with_its_method(tmp_path):
    out = tmp_path / "mm.jsonl"
    CliRunner().invoke(cli, ["import", "harbor", str(REAL), "--output", str(out)])
    rep = tmp_path / "report"
    res = CliRunner().invoke(cli, ["audit", str(out), "--out", str(rep), "--bootstrap", "100", "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads((rep / "audit.json").read_text())
    md = (rep / "report.md").read_text()
    assert "## Efficiency: tokens and time with vs without skills" in md
    assert doc["efficiency"]["method"]["test"] in md  # the words the estimator carries
    assert "| wall time |" in md and "completion tokens" in md.split("## Efficiency")[1].split("##")[0]
    assert "![Cost ratios with vs without skills](figures/efficiency.png)" in md
    assert (rep / "figures" / "efficiency.png").read_bytes().startswith(b"\x89PNG")
    assert "Cost ratios with vs without skills" in (rep / "report.html").read_text()
    text = CliRunner().invoke(cli, ["metrics", str(out), "--bootstrap", "100"], terminal_width=200).output
    assert "Efficiency, with minus without skills:" in text and "wall time" in text


def test_a_graded_score_gets_its_paired_difference_where_records_carry_one(tmp_path):
    """`score` (e.g. a verifier reward with partial credit) on both records of a pair: the per-task
    difference with the signed-rank test and Hodges-Lehmann interval, no ratio; absent: no row."""
    rng = np.random.default_rng(8)
    recs, diffs = [], []
    for t in range(40):
        off = float(rng.uniform(0, 0.8))
        on = float(min(1.0, off + rng.normal(0.1, 0.05)))
        diffs.append(on - off)
        recs += [{"task_id": f"t{t}", "condition": "enabled", "correct": on >= 0.5, "score": on},
                 {"task_id": f"t{t}", "condition": "disabled", "correct": off >= 0.5, "score": off}]
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0", "--json"]).stdout)
    got = {m["measure"]: m for m in doc["efficiency"]["models"][0]["measures"]}
    want = hodges_lehmann(np.array(diffs))
    assert got["score"]["difference"] == pytest.approx(want.estimate) and got["score"]["p"] == pytest.approx(want.p)
    assert got["score"]["ratio"] is None and got["score"]["n_tasks"] == 40
    log.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "score"}) + "\n" for r in recs))
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0", "--json"]).stdout)
    assert "score" not in {m["measure"] for m in doc["efficiency"]["models"][0]["measures"]}


def test_cached_tokens_and_cost_are_paired_where_logged(tmp_path):
    """`usage.cached_tokens` (or OpenAI's `prompt_tokens_details.cached_tokens`) and `meta.cost_usd`
    get their own paired rows; a model that logs neither gets no row for them."""
    recs = []
    for t in range(10):
        for cond, f in (("enabled", 2.0), ("disabled", 1.0)):
            usage = {"prompt_tokens": int(1000 * f) + t, "completion_tokens": 10}
            usage.update({"cached_tokens": int(600 * f) + t} if t % 2 else
                         {"prompt_tokens_details": {"cached_tokens": int(600 * f) + t}})
            recs.append({"task_id": f"t{t}", "condition": cond, "correct": True, "model": "m",
                         "meta": {"usage": usage, "cost_usd": round(0.01 * f + 0.001 * t, 5)}})
            recs.append({"task_id": f"t{t}", "condition": cond, "correct": True, "model": "plain",
                         "meta": {"usage": {"prompt_tokens": 100, "completion_tokens": 5}}})
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0", "--json"]).stdout)
    by = {m["model"]: {x["measure"]: x for x in m["measures"]} for m in doc["efficiency"]["models"]}
    assert by["m"]["cached_tokens"]["difference"] == pytest.approx(600) and by["m"]["cached_tokens"]["n_tasks"] == 10
    assert by["m"]["cost_usd"]["difference"] == pytest.approx(0.01) and by["m"]["cost_usd"]["ratio"] > 1.5
    assert "cached_tokens" not in by["plain"] and "cost_usd" not in by["plain"]
    res = CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0"])
    assert "m: cost +$0.0100 , ratio 1.71× [1.59, 1.83]" in res.output and "$0.0245 with vs $0.0145 without" in res.output


CLAUDE = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "harbor" / "claude-code"


@pytest.mark.skipif(not CLAUDE.is_dir(), reason="../shared/data/real is absent")
def test_real_claude_code_trials_take_tokens_cost_and_turns_from_claude_codes_result_event(tmp_path):
    """Harbor left these trials' agent_result null; Claude Code's own final `result` event carries
    usage, total_cost_usd and num_turns: the records keep them and the efficiency table pairs them."""
    out = tmp_path / "cc.jsonl"
    res = CliRunner().invoke(cli, ["import", "harbor", str(CLAUDE / "main-with-skills-pass2"),
                                   str(CLAUDE / "main-without-skills-pass2"), "--output", str(out)])
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    for r in recs:
        folder = Path(r["meta"]["source"]).parent
        ev = [json.loads(x) for x in (folder / "agent" / "claude-code.txt").read_text().splitlines()
              if '"type":"result"' in x][-1]
        u = ev["usage"]
        assert r["meta"]["usage"] == {"prompt_tokens": u["input_tokens"] + u["cache_creation_input_tokens"]
                                      + u["cache_read_input_tokens"], "completion_tokens": u["output_tokens"],
                                      "cached_tokens": u["cache_read_input_tokens"]}
        assert r["meta"]["cost_usd"] == pytest.approx(ev["total_cost_usd"]) and r["meta"]["turns"] == ev["num_turns"]
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(out), "--bootstrap", "0", "--json"]).stdout)
    got = {m["measure"]: m for m in doc["efficiency"]["models"][0]["measures"]}
    assert all(got[k]["logged"] and got[k]["n_tasks"] == 2 for k in
               ("prompt_tokens", "cached_tokens", "completion_tokens", "cost_usd", "turns", "latency_s"))


def test_the_efficiency_figure_is_drawn_only_where_a_ratio_is():
    from skillaudit.report.figures import efficiency_ratios

    assert efficiency_ratios(None) is None and efficiency_ratios({"models": []}) is None
    doc = {"models": [{"model": "m", "measures": [
        {"measure": "prompt_tokens", "words": "prompt tokens", "logged": True, "ratio": 9.7, "ratio_ci": [9.0, 12.4]},
        {"measure": "score", "words": "graded score", "logged": True, "ratio": None, "ratio_ci": None},
        {"measure": "completion_tokens", "words": "completion tokens", "logged": False, "ratio": None}]}]}
    assert efficiency_ratios(doc).startswith(b"\x89PNG")


def test_rank_gives_each_skill_its_paired_score_difference_where_records_are_graded(tmp_path):
    """Graded outcomes per skill: over the pairs whose enabled run was shown the skill, epochs
    averaged per task, the Hodges-Lehmann shift of enabled - disabled with its signed-rank p."""
    rng = np.random.default_rng(3)
    recs, diffs = [], {"a": [], "b": []}
    for t in range(24):
        sk = "a" if t % 2 else "b"
        per = []
        for e in (1, 2):
            s_on, s_off = float(rng.uniform(0.3, 1.0)) if sk == "a" else 0.2, float(rng.uniform(0.0, 0.5))
            per.append(s_on - s_off)
            recs += [{"task_id": f"t{t}", "epoch": e, "condition": "enabled", "correct": s_on >= 0.5, "score": s_on,
                      "retrievals": [{"query": "q", "skills": [{"id": sk, "score": 1.0}]}]},
                     {"task_id": f"t{t}", "epoch": e, "condition": "disabled", "correct": s_off >= 0.5, "score": s_off}]
        diffs[sk].append(np.mean(per))
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    lib = tmp_path / "skills"
    for s in "ab":
        (lib / s).mkdir(parents=True)
        (lib / s / "SKILL.md").write_text(f"---\nname: {s}\ndescription: Use for {s}.\n---\nDo {s}.\n")
    res = CliRunner().invoke(cli, ["rank", str(log), "--skills", str(lib), "--json", "--bootstrap", "0"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)["skill_scores"]["default"]
    for sk in "ab":
        want = hodges_lehmann(np.array(diffs[sk]))
        assert got[sk]["n_tasks"] == 12 and got[sk]["difference"] == pytest.approx(want.estimate)
        assert got[sk]["p"] == pytest.approx(want.p) and got[sk]["difference_ci"] == pytest.approx(list(want.ci))
    assert got["a"]["difference"] > 0 > got["b"]["difference"]
