"""The audit report: content on a simulated library, escaping, round trip, atomic replacement."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from _factories import make_skill, pair

from skillaudit.errors import OutputError
from skillaudit.report import build_audit, load_audit, write_report
from skillaudit.report import write as write_mod
from skillaudit.runs.simulate import simulate

SIM = {"n_tasks": 900, "n_skills": 12, "n_harmful": 2, "n_helpful": 1, "epochs": 2, "seed": 4}


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One simulated library with two planted harmful skills, audited once for the module."""
    root = tmp_path_factory.mktemp("sim")
    sim = simulate(**SIM)
    runs_path, lib_dir = sim.write(root / "data")
    result = build_audit([str(runs_path)], str(lib_dir), embedder="tfidf", n_boot=500, seed=0)
    out = root / "report"
    written = write_report(result, out, inputs=[runs_path, lib_dir])
    return {"sim": sim, "runs": runs_path, "skills": lib_dir, "result": result, "out": out,
            "written": written}


def test_report_names_the_planted_harmful_skills(simulated):
    """The planted harmful skills top the ranking, are recommended for pruning and are named in the headline."""
    sim, out = simulated["sim"], simulated["out"]
    harmful = sim.ids("harmful")
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    top = [r["skill_id"] for r in doc["skills"]["skills"][: len(harmful)]]
    assert sorted(top) == harmful
    actions = {r["skill_id"]: r["action"] for r in doc["recommendations"]["recommendations"]}
    assert all(actions[h] == "prune" for h in harmful)
    assert all(actions[h] not in ("prune", "rewrite") for h in sim.ids("helpful"))
    assert doc["headline"]["verdict"] == "hurts"
    for h in harmful:
        assert h in doc["headline"]["action"]
    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    for text in (html, md):
        assert "The skill library hurts where it is used" in text
        assert "projection, not a measurement" in text
        assert "Noise floor" in text
        for h in harmful:
            assert h in text
    with (out / "skills.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == SIM["n_skills"]
    assert sorted(r["skill_id"] for r in rows[: len(harmful)]) == harmful
    assert {r["action"] for r in rows[: len(harmful)]} == {"prune"}
    # each row names the rule that decided its action, as prune --json does
    rules = {r["skill_id"]: r["rule"] for r in doc["recommendations"]["recommendations"]}
    assert all(r["rule"] == rules[r["skill_id"]] and r["rule"] for r in rows), rows
    for h in harmful:
        assert f"| prune ({rules[h]}) |" in md


def test_report_folder_holds_every_file(simulated):
    """The report folder holds report.html/md, audit.json, skills.csv, the graph export and the figures."""
    out = simulated["out"]
    for name in ("report.html", "report.md", "audit.json", "skills.csv", "skill_graph.graphml"):
        assert (out / name).is_file(), name
    figs = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert figs == sorted(["skill_net.png", "decomposition.png", "funnel.png", "embedding_map.png"])
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["schema"] == "skillaudit.audit/v1"
    assert {"metrics", "skills", "clusters", "recommendations", "graph", "inputs"} <= set(doc)
    assert doc["metrics"]["schema"] == "skillaudit.metrics/v1"
    assert doc["skills"]["schema"] == "skillaudit.rank/v1"
    assert doc["recommendations"]["schema"] == "skillaudit.prune/v1"
    assert doc["clusters"]["schema"] == "skillaudit.clusters/v1"
    assert {"clusters", "near_duplicates", "communities", "interference", "map"} <= set(doc["clusters"])
    runs_in = doc["inputs"]["runs"][0]
    assert len(runs_in["sha256"]) == 64 and runs_in["bytes"] == Path(simulated["runs"]).stat().st_size
    assert doc["inputs"]["skillaudit_version"] and doc["inputs"]["library"]["n_skills"] == SIM["n_skills"]


def test_html_is_self_contained(simulated):
    """report.html embeds its figures as data URIs and references nothing outside itself."""
    html = (simulated["out"] / "report.html").read_text(encoding="utf-8")
    assert html.count('src="data:image/png;base64,') == 4
    assert "<script" not in html.lower()
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html.lower()
    assert "Content-Security-Policy" in html


def test_audit_json_round_trips(simulated):
    """audit.json reads back to the same document, and re-rendering it reproduces report.md and report.html."""
    out = simulated["out"]
    raw = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    loaded = load_audit(out / "audit.json")
    assert loaded.to_dict() == raw
    assert {**simulated["result"].document.to_dict(), "figures": raw["figures"]} == raw
    again = write_mod.rerender(out)
    assert again["report.md"] == (out / "report.md").read_text(encoding="utf-8")
    assert again["report.html"] == (out / "report.html").read_text(encoding="utf-8")


def test_html_escapes_untrusted_text(tmp_path, write_jsonl):
    """Script in a skill's description and body, a retrieved id and a task id never reaches the HTML as markup."""
    evil = "<script>alert(1)</script>"
    lib = tmp_path / "lib"
    make_skill(lib, "xss-skill", description=f"'{evil} breaks pages'", body=f"## When to apply\n{evil}\n")
    make_skill(lib, "plain-skill", description="Harmless.")
    recs = []
    for i in range(30):
        recs += pair(f"{evil}-{i}", i % 3 == 0, i % 2 == 0, retrieved=["xss-skill", evil] if i < 20 else None)
    for i in range(10):
        recs += pair(f"p{i}", True, False, retrieved=["plain-skill"])
    runs = write_jsonl(recs)
    result = build_audit([str(runs)], str(lib), embedder="tfidf", n_boot=200)
    out = tmp_path / "report"
    write_report(result, out, inputs=[runs, lib])
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "<script" not in md.replace("`<script>alert(1)</script>`", "")
    with (out / "skills.csv").open(encoding="utf-8") as fh:
        ids = {r["skill_id"] for r in csv.DictReader(fh)}
    assert evil in ids


def test_failed_audit_leaves_previous_report(simulated, tmp_path, monkeypatch):
    """When a figure step raises, the previous report folder is byte-for-byte intact and no temp folder is left."""
    out = tmp_path / "report"
    write_report(simulated["result"], out, inputs=[simulated["runs"], simulated["skills"]])
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def boom(doc):
        raise RuntimeError("figure step failed")

    monkeypatch.setattr(write_mod.figures_mod, "render_all", boom)
    with pytest.raises(RuntimeError, match="figure step failed"):
        write_report(simulated["result"], out, inputs=[simulated["runs"], simulated["skills"]])
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_out_refuses_foreign_folders_and_inputs(simulated, tmp_path):
    """--out is never a folder of other files, a file, or a folder holding the audit's own inputs."""
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me")
    with pytest.raises(OutputError, match="not a skillaudit report"):
        write_report(simulated["result"], foreign)
    assert (foreign / "todo.txt").read_text() == "keep me"
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(OutputError, match="not a folder"):
        write_report(simulated["result"], a_file)
    with pytest.raises(OutputError, match="would overwrite the input"):
        write_report(simulated["result"], Path(simulated["runs"]).parent, inputs=[simulated["runs"]])
    empty = tmp_path / "empty"
    empty.mkdir()
    write_report(simulated["result"], empty)
    assert (empty / "report.html").is_file()


def test_skills_csv_neutralises_formulas():
    """A skill id or reason starting with '=' is written to skills.csv as text, not a formula."""
    doc = {
        "skills": {"skills": [{"skill_id": "=HYPERLINK(\"x\")", "n_retrieved": 3, "b": 0, "c": 3, "net": -3,
                               "share": -3.0, "rae_k": -1.0, "p_value": 0.25, "q_value": 0.25}],
                   "descriptions": {}},
        "recommendations": {"recommendations": [{"skill_id": "=HYPERLINK(\"x\")", "action": "needs-data",
                                                 "reason": "@SUM(1)", "evidence": {}}]},
    }
    rows = list(csv.DictReader(write_mod.skills_csv(doc).splitlines()))
    assert rows[0]["skill_id"].startswith("'=") and rows[0]["reason"].startswith("'@")
    assert rows[0]["net"] == "-3"


def test_audit_without_library(tmp_path, write_jsonl):
    """Without --skills the report still renders: no clusters section data, a note says why."""
    recs = []
    for i in range(40):
        recs += pair(f"t{i}", i % 4 != 0, i % 3 == 0, retrieved=["a", "b"][: 1 + i % 2] if i < 30 else None,
                     model="m", benchmark="x")
    runs = write_jsonl(recs)
    result = build_audit([str(runs)], None, n_boot=200)
    assert result.clusters is None
    out = tmp_path / "r"
    write_report(result, out, inputs=[runs])
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "No skill library was given" in html
    assert not (out / "figures" / "embedding_map.png").exists()


def test_large_graph_sections_are_bounded(tmp_path, write_jsonl, monkeypatch):
    """A co-retrieval graph over the export cap is exported as its backbone, interference is cut, and notes say so."""
    import networkx as nx
    import numpy as np

    from skillaudit.analysis.graph import co_retrieval_graph, interference
    from skillaudit.audit import flow as build_mod
    from skillaudit.runs import load_runs

    rng = np.random.default_rng(5)
    recs = []
    for i in range(1500):
        got = sorted({f"s{int(x)}" for x in rng.choice(20, size=int(rng.integers(1, 5)))})
        harm = {"s0", "s1"} <= set(got) and rng.random() < 0.6
        recs += pair(f"t{i}", not harm and rng.random() < 0.6, harm or rng.random() < 0.55, retrieved=got)
    runs = write_jsonl(recs)
    paired = load_runs([str(runs)])
    full = co_retrieval_graph(paired)
    n_inter = len(interference(paired))
    assert n_inter >= 2
    monkeypatch.setattr(build_mod, "MAX_GRAPH_EDGES", 40)
    monkeypatch.setattr(build_mod, "MAX_INTERFERENCE", 1)
    audit = build_audit([str(runs)], None, n_boot=100, regression_boot=0)
    result = audit.document
    graph = result.graph
    assert graph["co_retrieval_edges"] == full.number_of_edges() > graph["export_co_retrieval_edges"]
    assert graph["interference_total"] == n_inter and len(graph["interference"]) == 1
    assert any("backbone" in n for n in result.notes) and any("do worse together" in n for n in result.notes)
    out = tmp_path / "r"
    write_report(audit, out, inputs=[runs])
    exported = nx.read_graphml(out / "skill_graph.graphml")
    assert exported.number_of_edges() == graph["export_co_retrieval_edges"]
    assert set(exported.nodes) == set(full.nodes)
    assert exported.graph["co_retrieval_edges"] == full.number_of_edges()
    assert all(full.edges[u, v]["weight"] == d["weight"] for u, v, d in exported.edges(data=True))
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "keeps their backbone" in md and f"Showing 1 of {n_inter} pairs" in md


def test_headline_names_a_benchmark_whose_arms_say_injection_hurts_when_pooling_hides_it():
    """The pooled arms say the retrieved skills do worse than random content, gsm8k's own arms say injection hurts: the sentence adds "on gsm8k alone, injection hurts, not these skills"; when the pooled sentence already says so, nothing is added."""
    from skillaudit.decide.headline import _injection_sentence

    groups = [
        {"model": "m", "benchmark": "mbpp_plus", "injection_text": "the retrieved skills do worse than random content (...)"},
        {"model": "m", "benchmark": "gsm8k", "injection_text": "injection hurts, not these skills (random arm: ...)"},
        {"model": "other", "benchmark": "math", "injection_text": "injection hurts, not these skills (...)"},
    ]
    pooled = "the retrieved skills do worse than random content (random arm: ...)"
    assert _injection_sentence(groups, "m", pooled) == (
        pooled + "; on gsm8k alone, injection hurts, not these skills (a control arm did as badly as the retrieved skills)")
    already = "injection hurts, not these skills (random arm: ...)"
    assert _injection_sentence(groups, "m", already) == already
    assert _injection_sentence(groups, "m", None) is None


def test_headline_names_the_skills_to_prune_rewrite_and_merge():
    """The recommended line names the skills of each action (at most 4, then an ellipsis), not only their number."""
    from skillaudit.decide.headline import headline

    group = {"model": "m", "benchmark": "*", "reportable": True, "rae": -0.1, "rae_ci": [-0.2, -0.01],
             "p_cond": 0.01, "cond_b": 2, "cond_c": 12, "n_cond": 100, "n_cond_tasks": 100, "n_pairs": 120}
    recs = [{"scope": "skill", "skill_id": s, "action": a} for s, a in
            [("bad", "prune"), ("twin-a", "merge"), ("twin-b", "merge"), ("mixed", "rewrite"),
             *[(f"dup-{i}", "merge") for i in range(3)]]]
    out = headline({"groups": [group]}, {"recommendations": recs, "projected": {}})
    assert out["action"] == ("Recommended: prune 1 (bad); rewrite 1 (mixed); "
                             "merge 5 (twin-a, twin-b, dup-0, dup-1, …).")


def _three_model_headline(name="skill-number-{i:02d}-with-a-long-name"):
    from skillaudit.decide.headline import headline

    groups = [{"model": m, "benchmark": "*", "reportable": True, "rae": rae, "rae_ci": [rae - 0.08, rae + 0.07],
               "p_cond": p, "cond_b": b, "cond_c": c, "n_cond": 120, "n_cond_tasks": 120, "n_pairs": 150,
               "selection_warning": "tasks that searched were easier" if m == "model-a" else None}
              for m, rae, p, b, c in [("model-a", -0.12, 0.001, 3, 17), ("model-b", 0.02, 0.6, 6, 4),
                                      ("model-c-with-a-rather-long-name-v2", -0.021, 0.046, 0, 4)]]
    library = [{"model": "model-a", "benchmark": "*", "verdict": "skill-specific", "direction": "harm",
                "heterogeneity_p": 0.004, "reportable": True, "text": "Skills differ (...)"}]
    recs = [{"scope": "skill", "skill_id": name.format(i=i), "action": a, "models": ["model-a"]}
            for i, a in enumerate(["prune"] * 3 + ["rewrite"] * 2 + ["merge"] * 6)]
    recs.append({"scope": "library", "action": "reduce-depth", "model": "model-a", "benchmark": "gsm8k"})
    verify = {"rows": [{"skill_id": None, "measured": -0.05, "measured_ci": [-0.1, 0.0], "n_rerun": 30,
                        "excluded": ["skill-number-00-with-a-long-name"], "model": "model-a",
                        "rae_before": -0.12, "projected": -0.08}]}
    return headline({"groups": groups}, {"recommendations": recs, "projected": {}}, library, verify)


def test_terminal_headline_is_at_most_8_lines_of_100_characters_and_names_the_skills():
    """Three models, a library-level action, 11 skills to act on and a measured re-run: the terminal
    headline keeps to 8 lines of at most 100 characters, gives each model its verdict with the
    interval, flips, tasks and p, and names the skills to act on (the action wins over the
    warnings and the measured line, which stay in the report)."""
    from skillaudit.report.headline import terminal_lines

    h = _three_model_headline()
    lines = terminal_lines(h)
    assert len(lines) <= 8 and max(len(ln) for ln in lines) <= 100, lines
    assert lines[0] == "The skill library helps some models and hurts others" or lines[0].startswith("The skill")
    assert lines[1].split() == ["model", "verdict", "RAE", "pp", "[95%", "CI]", "rescued/harmed", "tasks", "p"]
    assert lines[2].split() == ["model-a", "hurts", "-12.0", "[-20.0,", "-5.0]", "3/17", "120", "0.001"]
    assert lines[3].split()[:2] == ["model-b", "unclear"] and lines[3].split()[-1] == "0.600"
    assert lines[4].split()[1:4] == ["unclear:", "4", "flips"] and lines[4].split()[0].startswith("model-c-with-a")
    text = " ".join(" ".join(lines).split())
    assert "model-a entries differ (heterogeneity p = 0.004)" in text
    assert "retrieve fewer skills per call for model-a on gsm8k" in text
    # each action with its count, and as many names as fit in two lines (the report has them all)
    assert "prune 3: skill-number-00-with-a-long-name, skill-number-01-with-a-long-name" in text
    assert lines[-1].endswith(" …")
    short = terminal_lines(_three_model_headline(name="s{i}"))
    assert "prune 3: s0, s1, s2; rewrite 2: s3, s4; merge 6: s5, s6, s7, s8, s9, s10" in " ".join(" ".join(short).split())
    # with room, the measured re-run and the warnings are printed too
    roomy = terminal_lines(h, max_lines=14)
    assert any(ln.startswith("  Measured by re-runs without skill-number-00-with-a-long-name") for ln in roomy)
    assert any(ln.startswith("  ⚠ model-a: tasks that searched differ") for ln in roomy)
    assert max(len(ln) for ln in roomy) <= 100


def test_terminal_headline_summarises_models_beyond_four():
    """Six models: one line of counts (the CLI prints the full table after the headline)."""
    from skillaudit.decide.headline import headline
    from skillaudit.report.headline import terminal_lines

    groups = [{"model": f"m{i}", "benchmark": "*", "reportable": True, "rae": -0.1, "rae_ci": [-0.2, -0.05],
               "p_cond": 0.001, "cond_b": 1, "cond_c": 12, "n_cond": 90, "n_cond_tasks": 90, "n_pairs": 90}
              for i in range(6)]
    groups[5] = {**groups[5], "rae": 0.01, "rae_ci": [-0.05, 0.06], "p_cond": 0.8}
    lines = terminal_lines(headline({"groups": groups}, None))
    assert len(lines) <= 8 and lines[1] == "  6 models: 5 hurt, 1 unclear (one row per model below)", lines
