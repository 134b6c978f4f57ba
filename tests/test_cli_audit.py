"""`skillaudit audit` and `skillaudit compare` from the command line, and the bundled demo."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import skillaudit.demo as demo_mod
from skillaudit.cli import cli
from skillaudit.runs.simulate import simulate

REPO = Path(__file__).resolve().parents[1]
FAST = ["--embedder", "tfidf", "--bootstrap", "200"]


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small simulated demo folder: sample_runs/runs.jsonl and skills/ (two models)."""
    root = tmp_path_factory.mktemp("demo")
    sim = simulate(n_tasks=300, n_skills=10, n_harmful=1, n_helpful=1, models=("model-a", "model-b"), seed=2)
    runs, lib = sim.write(root / "tmp")
    (root / "sample_runs").mkdir()
    shutil.move(str(runs), root / "sample_runs" / "runs.jsonl")
    shutil.move(str(lib), root / "skills")
    return root


def _invoke(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_audit_writes_report_and_says_where(sim_dir, tmp_path):
    """audit prints the headline and the report's path on stdout, progress on stderr, and writes the folder."""
    out = tmp_path / "rep"
    res = _invoke(["audit", str(sim_dir / "sample_runs" / "runs.jsonl"), "--skills", str(sim_dir / "skills"),
                   "--out", str(out), *FAST])
    assert res.exit_code == 0, res.output
    assert f"Report: {out.resolve() / 'report.html'}" in res.stdout
    assert "where it is used" in res.stdout.splitlines()[0] or "Too few" in res.stdout.splitlines()[0]
    assert "skillaudit: drawing figures" in res.stderr
    assert "skillaudit:" not in res.stdout
    assert (out / "figures" / "figure1.png").is_file()  # two models: the paper's Figure 1
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Aggregate lift against RAE per model" in html


def test_audit_json_is_clean_and_quiet_is_silent(sim_dir, tmp_path):
    """--json prints exactly one audit document on stdout; --quiet leaves stderr without progress."""
    out = tmp_path / "rep"
    res = _invoke(["audit", str(sim_dir / "sample_runs" / "runs.jsonl"), "--skills", str(sim_dir / "skills"),
                   "--out", str(out), "--json", "--quiet", *FAST])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "skillaudit.audit/v1"
    assert doc["report"]["report"] == str(out.resolve() / "report.html")
    assert "skillaudit:" not in res.stderr
    on_disk = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert {k: v for k, v in doc.items() if k != "report"} == on_disk


def test_demo_default_from_another_cwd(sim_dir, tmp_path, monkeypatch):
    """With no RUNS and no --skills, audit finds the bundled demo wherever it is run from."""
    monkeypatch.setattr(demo_mod, "_candidates", lambda: [sim_dir])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = _invoke(["audit", "--quiet", *FAST])
    assert res.exit_code == 0, res.output
    report = elsewhere / "skillaudit-report" / "report.html"
    assert report.is_file()
    doc = json.loads((report.parent / "audit.json").read_text(encoding="utf-8"))
    assert doc["inputs"]["demo"] is True
    assert doc["inputs"]["library"]["path"] == str(sim_dir / "skills")


def test_demo_without_sample_runs_is_a_clear_error(tmp_path, monkeypatch):
    """A demo folder with skills but no sample runs fails with one line and exit 2, writing nothing."""
    shutil.copytree(REPO / "skills", tmp_path / "skills")
    (tmp_path / "sample_runs").mkdir()
    monkeypatch.setattr(demo_mod, "_candidates", lambda: [tmp_path])
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["audit", *FAST])
    assert res.exit_code == 2
    assert "the bundled demo has no sample runs yet" in res.output
    assert not (tmp_path / "skillaudit-report").exists()


def test_audit_usage_errors(tmp_path, sim_dir):
    """--skills without RUNS is a usage error; --out on a foreign folder is refused before any work."""
    res = CliRunner().invoke(cli, ["audit", "--skills", str(sim_dir / "skills")])
    assert res.exit_code == 2 and "give the run logs" in res.output
    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "a.txt").write_text("mine")
    res = CliRunner().invoke(cli, ["audit", str(sim_dir / "sample_runs" / "runs.jsonl"), "--out", str(foreign), *FAST])
    assert res.exit_code == 2 and "not a skillaudit report" in res.output
    assert (foreign / "a.txt").read_text() == "mine"


def test_compare_table_json_and_figure(sim_dir, tmp_path):
    """compare prints one row per model, a skillaudit.compare/v1 document with --json, and writes Figure 1."""
    runs = str(sim_dir / "sample_runs" / "runs.jsonl")
    res = _invoke(["compare", runs, "--bootstrap", "200", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "model-a" in res.stdout and "model-b" in res.stdout
    png = tmp_path / "fig1.png"
    res = _invoke(["compare", runs, "--bootstrap", "200", "--json", "--out", str(png)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "skillaudit.compare/v1"
    assert [m["model"] for m in doc["models"]] == ["model-a", "model-b"]
    assert {"agg_lift", "agg_lift_ci", "rae", "rae_ci", "sign_disagreement"} <= set(doc["models"][0])
    assert png.read_bytes().startswith(b"\x89PNG")
    res = CliRunner().invoke(cli, ["compare", runs, "--out", runs])
    assert res.exit_code == 2 and "is one of the run logs" in res.output


def test_compare_prints_the_task_level_test_its_interval_inverts(tmp_path):
    """With 5 epochs per task compare's p is metrics' task-level p_cond (not the pooled-pair McNemar),
    in the table and in --json, and the note under the table names that test."""
    sim = simulate(n_tasks=120, n_skills=6, n_harmful=1, n_helpful=0, epochs=5, task_noise=2.0,
                   models=("model-a", "model-b"), seed=4)
    runs, _ = sim.write(tmp_path / "sim")
    doc = json.loads(_invoke(["compare", str(runs), "--bootstrap", "0", "--json"]).stdout)
    met = json.loads(_invoke(["metrics", str(runs), "--bootstrap", "0", "--json"]).stdout)
    pooled = {g["model"]: g for g in met["groups"] if g["benchmark"] == "*"}
    for row in doc["models"]:
        g = pooled[row["model"]]
        assert row["p_cond"] == g["p_cond"] and row["p_cond_test"] == g["p_cond_test"]
        assert "task as the unit" in row["p_cond_test"]
        assert row["n_cond_tasks"] < g["n_cond"]  # epochs: fewer tasks than pairs
    assert any(abs(r["p_cond"] - r["mcnemar_p_cond"]) > 1e-6 for r in doc["models"])
    out = _invoke(["compare", str(runs), "--bootstrap", "0", "--quiet"]).stdout
    assert f"p: {doc['models'][0]['p_cond_test']} on the retrieval-triggered pairs" in out
    from skillaudit.report.render import pval
    for row in doc["models"]:
        line = next(ln for ln in out.splitlines() if row["model"] in ln)
        assert pval(row["p_cond"]) in line


def test_skills_that_help_some_tasks_and_hurt_others_are_called_both_ways(tmp_path):
    """Issue 51 F3: skills rescue 35% of the runs that fail without them and harm 35% of those that
    pass (18% noise flips elsewhere): RAE nets them out, and the audit headline says "both ways"
    with the rates, and prune gives the library-level L003 with the same rates; where retrieving
    pairs flip like the others the headline does not."""
    import orjson

    from skillaudit.runs.simulate import two_sided

    recs, _ = two_sided(1)
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    res = _invoke(["audit", str(runs), "--out", str(tmp_path / "rep"), *FAST])
    assert res.exit_code == 0, res.output
    assert "The skill library helps some tasks and hurts others where it is used" in res.stdout
    assert re.search(r"sim-model\s+both ways\s+-4\.1", res.stdout), res.stdout
    head = json.loads((tmp_path / "rep" / "audit.json").read_text())["headline"]
    text = head["per_model"][0]["text"]
    assert text.startswith("skills work both ways where they are used: they rescue 36% of the runs that fail "
                           "without skills and harm 35% of those that pass, against 16% and 22% on "
                           "pairs that retrieved no skill (one-sided Fisher exact"), text
    sim = simulate(n_tasks=40, n_skills=20, n_harmful=0, n_helpful=0, seed=1)
    _, lib = sim.write(tmp_path / "lib")
    res = _invoke(["prune", str(runs), "--skills", str(lib), "--bootstrap", "200", "--embedder", "none"])
    assert res.exit_code == 0, res.output
    assert "gate-retrieval for sim-model (sim-bench): L003 skills work both ways" in res.stdout
    assert "rescue 36% / harm 35% vs 16% / 22% without a skill" in res.stdout
    flat, _ = two_sided(1, rescue=0.18, harm=0.18)
    runs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in flat))
    res = _invoke(["audit", str(runs), "--out", str(tmp_path / "rep2"), *FAST])
    assert res.exit_code == 0 and "both ways" not in res.stdout


def _has_sample_runs() -> bool:
    return any((REPO / "sample_runs").glob("*.jsonl"))


@pytest.mark.skipif(not _has_sample_runs(), reason="sample_runs/*.jsonl not committed yet (issue 5)")
def test_real_demo_from_another_cwd(tmp_path):
    """`skillaudit audit` with no arguments audits the committed sample runs, run from an unrelated folder."""
    env = {**os.environ, "SKILLAUDIT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "skillaudit.cli", "audit", "--quiet", *FAST],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Report: " in proc.stdout
    doc = json.loads((tmp_path / "skillaudit-report" / "audit.json").read_text(encoding="utf-8"))
    assert doc["inputs"]["demo"] is True and doc["inputs"]["library"]["n_skills"] >= 20
    # the demo states whether its harm is library-wide or in specific entries, with the test
    head = proc.stdout.split("Report: ")[0].splitlines()
    assert len(head) <= 8 and max(map(len, head)) <= 100, head  # the terminal headline
    assert "Library level: " in proc.stdout and "heterogeneity p" in proc.stdout
    for e in doc["library"]:
        assert e["verdict"] in ("library-wide", "skill-specific", "none")
        if e["heterogeneity_p"] is not None:  # untested where too few tasks retrieved (partial SmolLM run)
            assert 0 < e["heterogeneity_p"] <= 1 and e["n_permutations"] >= 199
    assert any(e["heterogeneity_p"] is not None for e in doc["library"])
    assert all(v["library_verdict"] in ("library-wide", "skill-specific", "none")
               for v in doc["headline"]["per_model"])
    html = (tmp_path / "skillaudit-report" / "report.html").read_text(encoding="utf-8")
    assert "Is the harm library-wide or in specific entries?" in html


def test_wheel_ships_the_demo(tmp_path):
    """A non-editable build (wheel) carries the demo library and sample runs as package data, and finds them."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "skillaudit", src / "skillaudit", symlinks=True, ignore=ignore)
    shutil.copytree(REPO / "skills", src / "skills")
    shutil.copytree(REPO / "sample_runs", src / "sample_runs")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    n_skills = len(list((REPO / "skills").glob("*/SKILL.md")))
    assert len([n for n in names if n.startswith("skillaudit/demo/skills/") and n.endswith("/SKILL.md")]) == n_skills
    assert "skillaudit/report/templates/report.html.j2" in names
    n_runs = len(list((REPO / "sample_runs").glob("*.jsonl")))
    assert len([n for n in names if n.startswith("skillaudit/demo/sample_runs/") and n.endswith(".jsonl")]) == n_runs
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import skillaudit, skillaudit.demo as d, pathlib, sys\n"
        f"assert skillaudit.__file__.startswith({str(site)!r}), skillaudit.__file__\n"
        "root = pathlib.Path(str(d._candidates()[0]))\n"
        "print(len(list((root / 'skills').glob('*/SKILL.md'))), (root / 'sample_runs').is_dir())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(n_skills), "True"]


def test_audit_surfaces_the_library_verdict_everywhere(tmp_path):
    """On pure dilution the terminal headline, report banner, audit.json and skills.csv all carry the library-wide verdict."""
    from skillaudit.runs.simulate import scenario

    runs, lib = scenario("dilution", seed=0).write(tmp_path / "sim")
    out = tmp_path / "report"
    res = _invoke(["audit", str(runs), "--skills", str(lib), "--out", str(out), "--quiet", "--embedder",
                   "tfidf", "--bootstrap", "1000"])
    assert res.exit_code == 0, res.output
    assert "harm is library-wide (heterogeneity p" in res.stdout
    assert "Act on: gate retrieval for" in res.stdout or "Act on: retrieve fewer skills per call for" in res.stdout
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert [e["verdict"] for e in doc["library"]] == ["library-wide"]
    lib_recs = [r for r in doc["recommendations"]["recommendations"] if r["scope"] == "library"]
    assert [r["action"] for r in lib_recs] in (["gate-retrieval"], ["reduce-depth"])
    assert not [r for r in doc["recommendations"]["recommendations"] if r["action"] == "prune"]
    assert "Harm is library-wide" in (out / "report.html").read_text(encoding="utf-8")
    assert "Harm is library-wide" in (out / "report.md").read_text(encoding="utf-8")
    header = (out / "skills.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert {"relative_effect", "relative_q", "model", "n_tasks"} <= set(header)


REAL_REGISTRY = REPO.parent / "shared" / "data" / "real" / "skillsbench-results-registry.json"


def _offered_only_log(path: Path) -> Path:
    """Two agents, 30 tasks, 3 trials, skills offered but their use not logged; agent-a is helped a lot."""
    import random

    rng = random.Random(5)
    lines = []
    for agent, lift in (("agent-a", 0.5), ("agent-b", 0.0)):
        for t in range(30):
            base = rng.random() * 0.5
            for e in (1, 2, 3):
                common = {"task_id": f"t{t}", "model": agent, "benchmark": "sb", "epoch": e}
                lines.append({**common, "condition": "enabled", "correct": rng.random() < base + lift,
                              "use_logged": False, "offered": [f"t{t}/skills"]})
                lines.append({**common, "condition": "disabled", "correct": rng.random() < base})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_audit_of_offered_only_runs_reports_the_access_effect(tmp_path):
    """Runs that only say which skills were offered get the access effect per agent, never a '0 retrieved' verdict."""
    log = _offered_only_log(tmp_path / "offered.jsonl")
    res = _invoke(["audit", str(log), "--out", str(tmp_path / "rep"), "-q", *FAST])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.splitlines()[0] == "Offering the skills helps (skill use not logged)"
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith("  agent-")}
    assert "  model    verdict  OAE pp [95% CI]" in out
    assert rows["agent-a"][1] == "helps" and float(rows["agent-a"][2]) > 0 and rows["agent-b"][1] == "unclear"
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "skill use not logged: this is the effect of offering the skills; offering the skills helps: OAE +" in md
    assert "cluster-adjusted score McNemar (Durkalski; task as the unit)" in md  # the test its CI inverts
    assert "  Task bundles: none of 30 harmed more runs than it rescued across 2 agents" in out
    assert "  Skill use not logged: no RAE, Δskip, funnel or per-skill verdicts (see the report)" in out
    assert "Without skill-use logs these runs cannot say" in md
    md = (tmp_path / "rep" / "report.md").read_text()
    for text in (out, md):
        assert "retrieved skills to tell" not in text and " 0 tasks" not in text
        assert "Too few" not in text
    assert "| not logged |" in md
    doc = json.loads((tmp_path / "rep" / "audit.json").read_text())
    assert doc["headline"]["bundles"]["n_bundles"] == 30 and doc["library"] == []


def test_offered_only_report_names_nothing_that_is_not_in_the_runs(tmp_path):
    """The offered-only report (tasks t0..t29, agents agent-a/b) holds no task, skill or agent of
    another data set: no fixed sentence about SkillsBench's threejs-to-obj or Claude Code."""
    log = _offered_only_log(tmp_path / "offered.jsonl")
    assert _invoke(["audit", str(log), "--out", str(tmp_path / "rep"), "-q", *FAST]).exit_code == 0
    for name in ("report.md", "report.html", "audit.json"):
        text = (tmp_path / "rep" / name).read_text()
        for foreign in ("threejs", "obj-exporter", "offer-letter", "Claude Code offered", "haiku"):
            assert foreign not in text, (name, foreign)
    md = (tmp_path / "rep" / "report.md").read_text()
    # tasks as tasks (a task of each agent is its own unit), pairs as pairs
    assert md.splitlines()[2].startswith("60 tasks (180 pairs) · ")


def _partly_logged_log(path: Path) -> Path:
    """One model, 20 tasks: 8 retrieve (6 harms, 0 rescues), 8 retrieve nothing (flips: 2 rescues),
    4 did not log their use; those 4 are all rescues, so counting them as 'skipped' would move Δskip."""
    lines = []
    for t in range(20):
        common = {"task_id": f"t{t}", "model": "m", "benchmark": "b"}
        if t < 8:
            en = {"correct": t >= 6, "retrievals": [{"query": "q", "skills": ["s1"]}]}
            dis = True
        elif t < 16:
            en, dis = {"correct": t < 10, "retrievals": []}, False
        else:
            en, dis = {"correct": True, "use_logged": False, "offered": ["s1", "s2"]}, False
        lines.append({**common, "condition": "enabled", **en})
        lines.append({**common, "condition": "disabled", "correct": dis})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_partial_use_logging_is_said_once_and_figures_use_the_logged_runs(tmp_path):
    """4 of 20 with-skills runs did not log their use: RAE is on the 8 retrieving pairs, Δskip on the
    8 logged non-retrieving ones (2 rescues: +25.0 pp; with the unlogged 4 it would be +50.0), OAE
    on all 20; the terminal says it once as a warning, with no 'Skill use not logged: no RAE' line and
    no task-bundle section; the report says it in the model's sentence."""
    log = _partly_logged_log(tmp_path / "partial.jsonl")
    res = _invoke(["metrics", str(log), "--json"])
    assert res.exit_code == 0, res.output
    [g] = [g for g in json.loads(res.output)["groups"] if g["benchmark"] == "*"]
    assert (g["n_cond"], g["n_skip"], g["n_use_unlogged"]) == (8, 8, 4)
    assert g["rae"] == pytest.approx(-6 / 8) and g["delta_skip"] == pytest.approx(2 / 8)
    assert g["oae"] == pytest.approx((2 + 4 - 6) / 20)  # rescues 2 skipped + 4 unlogged, harms 6
    assert (g["skip_b"], g["skip_c"]) == (2, 0)
    res = _invoke(["audit", str(log), "--out", str(tmp_path / "rep"), "-q", *FAST])
    assert res.exit_code == 0, res.output
    assert res.output.count("use not logged on 4 of 20 runs") == 1
    assert "Skill use not logged" not in res.output and "Task bundles" not in res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert md.count("skill use not logged on 4 of 20 with-skills runs: RAE, Δskip and the per-skill "
                    "figures use the 16 logged ones, OAE all 20") == 1
    assert "Without skill-use logs these runs cannot say" not in md


@pytest.mark.skipif(not REAL_REGISTRY.is_file(), reason="../shared/data/real is absent")
def test_audit_of_the_skillsbench_registry_names_every_agent_and_the_worst_bundles(tmp_path):
    """The imported SkillsBench registry: an access effect with a CI for each of the 18 agents and the most harmful task bundles."""
    log = tmp_path / "sb.jsonl"
    assert _invoke(["import", "skillsbench", str(REAL_REGISTRY), "-o", str(log), "-q"]).exit_code == 0
    res = _invoke(["audit", str(log), "--out", str(tmp_path / "rep"), "-q", *FAST])
    assert res.exit_code == 0, res.output
    table = res.output.split("All 18 models:\n")[1].splitlines()
    assert table[0].split()[:6] == ["model", "verdict", "OAE", "pp", "[95%", "CI]"]
    per_agent = table[1:19]  # one row per agent, each with its verdict, interval, flips, tasks and p
    assert "  18 models: " in res.output and len(set(per_agent)) == 18
    assert all(re.search(r"\) +(helps|hurts|unclear) +[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\] +\d+/\d+ +87 ", ln)
               for ln in per_agent), per_agent
    assert "    exam-block-sequencing: 3/5, -7.4 pp, p 0.727, q 1" in res.output  # the most harmful bundle
    assert " 0 tasks" not in res.output and "Too few" not in res.output
