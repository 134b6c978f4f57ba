"""Skill reach: of the skills a model was offered, how many it opened, from the runs' `offered` lists;
prune and audit judge the offered skills when no --skills is given; "unused" only where use was logged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.analysis.reach import skill_reach
from skillaudit.cli import cli
from skillaudit.runs.inputs import load_inputs

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
MINIMAX = REAL / "minimax-claude-code" / "minimax-m2.1+claude-code"
needs_real = pytest.mark.skipif(not MINIMAX.is_dir(), reason="../shared/data/real is absent")
FAST = ["--embedder", "tfidf", "--bootstrap", "200"]


def _log(path: Path, n_tasks: int = 6) -> Path:
    """Model m, 6 tasks, each offered its own two skills (t<i>-a, t<i>-b) plus `shared`: t0 and t1
    open `shared`, t2 opens t2-a, t3's log was cut, t4 did not log its use (its offered list kept),
    t5 did not log its use and lists nothing (its trajectory is missing)."""
    lines = []
    for t in range(n_tasks):
        common = {"task_id": f"t{t}", "model": "m", "benchmark": "b"}
        offered = [f"t{t}-a", f"t{t}-b", "shared"]
        en: dict = {"correct": t % 2 == 0, "offered": offered, "retrievals": [], "meta": {}}
        if t in (0, 1):
            en["retrievals"] = [{"query": None, "skills": ["shared"]}]
        if t == 2:
            en["retrievals"] = [{"query": None, "skills": ["t2-a"]}]
        if t == 3:
            en["meta"] = {"trajectory_cut": True}
        if t == 4:
            en = {"correct": True, "offered": offered, "use_logged": False}
        if t == 5:
            en = {"correct": False, "use_logged": False}
        lines.append({**common, "condition": "enabled", **en})
        lines.append({**common, "condition": "disabled", "correct": False})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_reach_counts_offered_opened_tasks_and_says_when_it_is_a_floor(tmp_path):
    """By hand: offered on 5 runs (t5 lists nothing) = 5 x 2 own skills + shared = 11 skills;
    opened shared and t2-a = 2; 5 tasks offered skills, 3 used any; 1 cut log, 1 unlogged run."""
    inputs = load_inputs([str(_log(tmp_path / "r.jsonl"))], offered=True)
    [r] = skill_reach(inputs.runs, inputs.offered)
    assert (r.n_offered, r.opened, r.n_tasks_offered, r.n_tasks_used) == (11, ("shared", "t2-a"), 5, 3)
    assert (r.n_runs, r.n_cut, r.n_unlogged) == (5, 1, 1)
    assert r.sentence() == ("opened 2 of 11 offered skills (5 tasks offered skills, 3 used any); 1 of 5 logs "
                            "end before the agent finished, use not logged on 1 run: a floor")


def test_reach_is_the_same_whatever_the_record_order(tmp_path):
    """Reversing the log's lines changes no reach figure."""
    log = _log(tmp_path / "r.jsonl")
    rev = tmp_path / "rev.jsonl"
    rev.write_text("".join(reversed(log.read_text().splitlines(keepends=True))))
    a, b = (skill_reach(i.runs, i.offered) for i in (load_inputs([str(log)], offered=True), load_inputs([str(rev)], offered=True)))
    assert a == b


def test_prune_without_skills_judges_the_offered_ones_and_unused_only_where_logged(tmp_path):
    """No --skills: one line says the offered skills stand for the library. Without t5: a skill
    offered only where use was logged and never opened is unused (S001, cut logs included, said in
    a line); t4's skills (its run did not log its use) are "use not logged" (S000). With t5 (an
    unlogged run that lists nothing, on a task no other run lists): any skill may have been given
    to it, so no never-opened skill is called unused."""
    log = _log(tmp_path / "r.jsonl", n_tasks=5)
    res = CliRunner().invoke(cli, ["prune", str(log), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    action = {r["skill_id"]: (r["action"], r["rule"]) for r in doc["recommendations"] if r.get("skill_id")}
    assert action["t0-a"] == ("unused", "S001") and action["t3-b"] == ("unused", "S001")
    assert action["t4-a"] == ("needs-data", "S000") and action["t4-b"] == ("needs-data", "S000")
    assert action["shared"][0] != "unused" and len(action) == 11
    text = CliRunner().invoke(cli, ["prune", str(log)])
    assert text.exit_code == 0
    assert "warning: no --skills: judging the skills the runs say were offered (11;" in text.output
    assert "1 with-skills log(s) end before the agent finished (cut)" in text.output
    res = CliRunner().invoke(cli, ["prune", str(_log(tmp_path / "r6.jsonl")), "--json"])
    action = {r["skill_id"]: r["action"] for r in json.loads(res.stdout)["recommendations"] if r.get("skill_id")}
    assert "unused" not in action.values() and action["t0-a"] == "needs-data"


def test_prune_without_skills_or_offered_lists_is_one_line(tmp_path):
    """Runs that do not list what they offered give prune nothing to judge without --skills: exit 2."""
    log = tmp_path / "r.jsonl"
    log.write_text('{"task_id":"a","condition":"enabled","correct":true,"retrievals":[]}\n'
                   '{"task_id":"a","condition":"disabled","correct":true}\n')
    res = CliRunner().invoke(cli, ["prune", str(log)])
    assert res.exit_code == 2
    assert res.output == "Error: --skills is required: these runs do not list the skills they were offered\n"
    res = CliRunner().invoke(cli, ["prune", str(_log(tmp_path / "o.jsonl")), "--apply", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--apply needs --skills" in res.output


@needs_real
def test_minimax_headline_reach_and_prune_by_hand_count(tmp_path):
    """MiniMax M2.1 under Claude Code, imported from its Harbor jobs: by hand the agent was offered
    24 skills on 11 tasks and opened 1 (pdf, on court-form-filling); every kept trajectory was cut
    at 16,000 characters, so the headline says it is a floor, before any per-skill advice; one
    with-skills trial did not log its use, said once; prune runs without --skills and calls the 4
    skills of civ6 (whose one trial is unlogged) 'use not logged', never 'unused'."""
    log = tmp_path / "mm.jsonl"
    assert CliRunner().invoke(cli, ["import", "harbor", str(MINIMAX), "-o", str(log), "-q"]).exit_code == 0
    res = CliRunner().invoke(cli, ["audit", str(log), "--out", str(tmp_path / "rep"), "-q", *FAST])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    reach = next(i for i, ln in enumerate(lines) if ln.startswith("  Reach: "))
    text = " ".join(ln.strip() for ln in lines[reach:reach + 2])
    assert text.startswith("Reach: claude-code:minimax/MiniMax-M2.1 opened 1 of 24 offered skills (11 tasks "
                           "offered skills, 1 used any); 16 of 16 logs end before the agent finished: a floor")
    assert reach < next(i for i, ln in enumerate(lines) if "No skill is reliably" in ln or "Act on" in ln)
    # said at most once on the terminal (the 8-line headline drops the warnings line first: the
    # integrity line, for the without-skills trials with no log, comes before it), and in report.md
    assert res.output.count("use not logged on 1 of 17 runs") <= 1
    assert "arm integrity: 16 run(s) without skills could not be checked for leaks" in res.output
    assert "Skill use not logged: no RAE" not in res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "11 tasks (17 pairs)" in md and "threejs" not in md
    assert md.count("use not logged on 1 of 17 with-skills runs") == 1
    doc = json.loads((tmp_path / "rep" / "audit.json").read_text())
    [r] = doc["headline"]["reach"] if "reach" in doc["headline"] else [v["reach"] for v in doc["headline"]["per_model"]]
    assert (r["n_offered"], r["opened"], r["n_tasks_offered"], r["n_tasks_used"]) == (24, ["pdf"], 11, 1)
    res = CliRunner().invoke(cli, ["prune", str(log), "--json"])
    assert res.exit_code == 0, res.output
    action = {x["skill_id"]: x["action"] for x in json.loads(res.stdout)["recommendations"] if x.get("skill_id")}
    assert len(action) == 24
    civ6 = {"civ6lib", "hex-grid-spatial", "map-optimization-strategy", "sqlite-map-parser"}
    assert {k for k, v in action.items() if v == "needs-data"} == civ6 | {"pdf"}
    assert sum(v == "unused" for v in action.values()) == 19


def test_offered_only_runs_judge_no_skill_without_a_library(tmp_path):
    """Runs that logged no use at all (the SkillsBench registry's shape) give prune one line, and the
    audit no per-skill rows from the offered list: only the task bundles speak for them."""
    log = tmp_path / "r.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for t in range(3) for r in (
        {"task_id": f"t{t}", "condition": "enabled", "correct": True, "use_logged": False, "offered": [f"t{t}/skills"]},
        {"task_id": f"t{t}", "condition": "disabled", "correct": False})))
    res = CliRunner().invoke(cli, ["prune", str(log)])
    assert res.exit_code == 2 and "these runs say which skills were offered, not which were used" in res.output
    res = CliRunner().invoke(cli, ["audit", str(log), "--out", str(tmp_path / "rep"), "-q", *FAST])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "rep" / "audit.json").read_text())
    assert not [r for r in doc["recommendations"]["recommendations"] if r.get("skill_id")]


def test_reach_makes_no_of_n_from_lists_that_are_only_use(tmp_path):
    """Issue 53: runs whose importer saw no offered list (meta.offered_from "unknown": "offered" is
    only what they used) give "used k skills ...; the offered list was not logged", never "opened k of
    k offered"; mixed with runs that did list it, they are left out of the "of n" and said so; prune
    without --skills calls them the skills the runs used."""
    lines = []
    for t, used in enumerate((["a"], ["a", "b"], ["c"])):
        common = {"task_id": f"t{t}", "model": "m"}
        lines.append({**common, "condition": "enabled", "correct": True, "offered": used,
                      "meta": {"offered_from": "unknown"},
                      "retrievals": [{"query": None, "skills": used, "error": None}]})
        lines.append({**common, "condition": "disabled", "correct": False})
    log = tmp_path / "u.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    inputs = load_inputs([str(log)], offered=True)
    [r] = skill_reach(inputs.runs, inputs.offered, inputs.offered_unknown)
    assert r.sentence() == ("used 3 skills on 3 tasks; the offered list was not logged (no agent log, lock.json, "
                            "config or --offered lists it), so there is no 'of n'")
    lines.append({"task_id": "t9", "model": "m", "condition": "enabled", "correct": False, "offered": ["a", "d", "e"],
                  "retrievals": [{"query": None, "skills": ["d"], "error": None}]})
    lines.append({"task_id": "t9", "model": "m", "condition": "disabled", "correct": False})
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    inputs = load_inputs([str(log)], offered=True)
    [r] = skill_reach(inputs.runs, inputs.offered, inputs.offered_unknown)
    assert r.sentence() == ("opened 1 of 3 offered skills (1 task offered skills, 1 used any); 3 more runs did "
                            "not log what they were offered (left out)")
    res = CliRunner().invoke(cli, ["prune", str(log)])
    assert res.exit_code == 0 and ("judging the skills the runs say were offered, and those used where no "
                                   "offered list was logged (5;") in res.output
