"""Task files through the agent protocol: planted pair counts, logged loads, and --reuse re-running exactly what changed."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli

REPO = Path(__file__).resolve().parents[1]

AGENT = '''
"""A deterministic agent: loads the skill the task names (if any) and answers from a table."""
CALLS = []

def agent(task, skills):
    plan = PLAN[task["id"]]
    if skills is None:
        return plan["off"]
    if plan.get("load"):
        body = skills.load(plan["load"])
        assert body is not None
    return {"answer": plan["on"], "usage": {"prompt_tokens": 100 + (50 if plan.get("load") else 0),
                                           "completion_tokens": 10}}

def boom(task, skills):
    raise RuntimeError("no luck")

def wrong_type(task, skills):
    return 42

def one_arg(task):
    return ""

def slow(task, skills):
    import time
    time.sleep(1.5)
    return "42"
'''


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    # planted: t0-t3 load counter-frequency-counting; t0,t1 rescued (b=2), t2 harmed (c=1), t3 both right;
    # t4 loads nothing (outside S_call) and is rescued anyway; t5 loads percent-change and nothing flips
    plan = {
        "t0": {"load": "counter-frequency-counting", "on": "42", "off": "41"},
        "t1": {"load": "counter-frequency-counting", "on": "42", "off": "0"},
        "t2": {"load": "counter-frequency-counting", "on": "7", "off": "42"},
        "t3": {"load": "counter-frequency-counting", "on": "42", "off": "42"},
        "t4": {"on": "42", "off": "1"},
        "t5": {"load": "percent-change", "on": "1", "off": "1"},
    }
    mod = tmp_path / "planted_agent.py"
    mod.write_text(AGENT + f"\nPLAN = {json.dumps(plan)}\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": t, "prompt": f"question {t}", "answer": "42", "match": "number"}) + "\n"
                             for t in plan))
    skills = tmp_path / "skills"
    shutil.copytree(REPO / "skills", skills)
    sys.path.insert(0, str(tmp_path))
    sys.modules.pop("planted_agent", None)
    return tasks, skills


def _run(*args: str):
    return CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)


def test_planted_counts_loads_and_reuse(tmp_path):
    tasks, skills = _setup(tmp_path)
    out = tmp_path / "a.jsonl"
    res = _run("--tasks", str(tasks), "--agent", "planted_agent:agent", "--skills", str(skills),
               "--out", str(out), "--quiet")
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 12 and all(r["error"] is None for r in recs)
    en = {r["task_id"]: r for r in recs if r["condition"] == "enabled"}
    dis = {r["task_id"]: r for r in recs if r["condition"] == "disabled"}
    s_call = {t for t, r in en.items() if r["invoked"]}
    assert s_call == {"t0", "t1", "t2", "t3", "t5"}
    b = sum(en[t]["correct"] and not dis[t]["correct"] for t in s_call)
    c = sum(dis[t]["correct"] and not en[t]["correct"] for t in s_call)
    assert (b, c) == (2, 1)
    assert en["t0"]["meta"]["loaded"] == ["counter-frequency-counting"]
    call = en["t0"]["retrievals"][0]
    assert call["tool"] == "load_skill" and call["skills"][0]["id"] == "counter-frequency-counting"
    assert len(call["skills"][0]["hash"]) == 16
    # the loaded paired figures agree with the library's loader
    from skillaudit.runs import load_runs

    paired = load_runs([str(out)])
    assert paired.n_pairs == 6 and int(paired.invoked.sum()) == 5

    # edit a skill no episode loaded (and no search ran): nothing is re-run
    (skills / "heapq-k-largest" / "SKILL.md").write_text(
        (skills / "heapq-k-largest" / "SKILL.md").read_text() + "\nOne more line.\n")
    out2 = tmp_path / "b.jsonl"
    res = _run("--tasks", str(tasks), "--agent", "planted_agent:agent", "--skills", str(skills),
               "--out", str(out2), "--reuse", str(out), "--quiet")
    assert res.exit_code == 0, res.output
    assert "re-ran 0 of 12 episodes (nothing changed)" in res.output
    assert len(out2.read_text().splitlines()) == 12

    # edit a loaded skill: exactly the 4 episodes that loaded it are re-run
    p = skills / "counter-frequency-counting" / "SKILL.md"
    p.write_text(p.read_text() + "\nAn extra tip.\n")
    res = CliRunner().invoke(cli, ["run", "--tasks", str(tasks), "--agent", "planted_agent:agent", "--skills",
                                   str(skills), "--out", str(tmp_path / "c.jsonl"), "--reuse", str(out2),
                                   "--dry-run"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert plan["schema"] == "skillaudit.plan/v1" and plan["rerun"] == 4 and plan["copied"] == 8
    assert sorted(r["task_id"] for r in plan["episodes_to_rerun"]) == ["t0", "t1", "t2", "t3"]
    assert plan["estimated_tokens"] == 4 * 160
    out3 = tmp_path / "c.jsonl"
    res = _run("--tasks", str(tasks), "--agent", "planted_agent:agent", "--skills", str(skills),
               "--out", str(out3), "--reuse", str(out2), "--quiet")
    assert "re-ran 4 of 12 episodes (4 a skill it was shown changed)" in res.output
    assert len(out3.read_text().splitlines()) == 12
    assert load_runs([str(out3)]).n_pairs == 6


def test_agent_errors_become_records_and_all_errors_exit_2(tmp_path):
    tasks, skills = _setup(tmp_path)
    out = tmp_path / "e.jsonl"
    res = _run("--tasks", str(tasks), "--agent", "planted_agent:boom", "--skills", str(skills), "--out", str(out),
               "--quiet")
    assert res.exit_code == 2
    assert res.output.strip().endswith(f"Error: {out}: every one of the 12 record(s) of this run is an error "
                                       "(see their 'error' field)")
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["error"].startswith("agent: planted_agent:boom raised RuntimeError on task t")
    res = _run("--tasks", str(tasks), "--agent", "planted_agent:wrong_type", "--skills", str(skills),
               "--out", str(tmp_path / "w.jsonl"), "--quiet")
    assert res.exit_code == 2
    assert "returned a int answer" in (tmp_path / "w.jsonl").read_text()


@pytest.mark.parametrize("row, message", [
    ({"id": "x", "prompt": "p"}, "has no checker"),
    ({"id": "x", "prompt": "p", "answer": "1", "match": "fuzzy"}, "unknown match 'fuzzy'"),
    ({"id": "x", "prompt": "p", "checker": "no_such_module_xyz:f"}, "cannot be imported"),
    ({"id": "x", "prompt": "p", "tests": ["assert f(y) == 1"]}, "must be literals"),
])
def test_bad_task_file_is_one_line_exit_2(tmp_path, row, message):
    _tasks, skills = _setup(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "ok", "prompt": "p", "answer": "1"}) + "\n" + json.dumps(row) + "\n")
    res = _run("--tasks", str(bad), "--agent", "planted_agent:agent", "--skills", str(skills),
               "--out", str(tmp_path / "o.jsonl"))
    assert res.exit_code == 2
    assert f"{bad}:2:" in res.output and message in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "o.jsonl").exists()


def test_wrong_agent_signature_exit_2(tmp_path):
    tasks, skills = _setup(tmp_path)
    res = _run("--tasks", str(tasks), "--agent", "planted_agent:one_arg", "--skills", str(skills),
               "--out", str(tmp_path / "o.jsonl"))
    assert res.exit_code == 2 and "--agent planted_agent:one_arg" in res.output and "2 positional" in res.output


def test_bundled_task_file_scores_each_checker_kind():
    from skillaudit.tasks.taskfile import TaskFileScorer, load_task_file

    tasks = {t.task_id: t for t in load_task_file(REPO / "examples" / "tasks" / "tasks.jsonl")}
    kinds = {t.data["kind"] for t in tasks.values()}
    assert kinds == {"tests", "answer", "checker"}
    assert {t.data.get("match") for t in tasks.values()} >= {"number", "math", "normalized", "regex"}
    sc = TaskFileScorer()
    assert sc.score(tasks["math/discount"], "so \\boxed{54.00}")[0].correct
    assert not sc.score(tasks["math/discount"], "so \\boxed{56}")[0].correct
    assert sc.score(tasks["text/unit"], "The answer is: Ohm.")[0].correct
    assert sc.score(tasks["math/percent-change"], "it rose 30%")[0].correct
    assert not TaskFileScorer(threshold=1.0).score(tasks["math/percent-change"], "about 30.5")[0].correct
    assert TaskFileScorer(threshold=0.5).score(tasks["math/percent-change"], "about 30.5")[0].correct


def test_tests_checker_runs_in_sandbox_and_answer_cannot_fake_equality():
    from skillaudit.sandbox import process as _sandbox
    from skillaudit.tasks.taskfile import TaskFileScorer, load_task_file

    if not _sandbox.isolation_status()[0]:
        pytest.skip("sandbox cannot isolate here")
    task = next(t for t in load_task_file(REPO / "examples" / "tasks" / "tasks.jsonl") if t.task_id == "code/gcd-list")
    sc = TaskFileScorer()
    good = "```python\nimport math\nfrom functools import reduce\ndef gcd_list(nums):\n    return reduce(math.gcd, nums)\n```"
    assert sc.score(task, good)[0].correct
    liar = "```python\nclass Eq:\n    def __eq__(self, o):\n        return True\ndef gcd_list(nums):\n    return Eq()\n```"
    score, _ = sc.score(task, liar)
    assert not score.correct
    # the sandboxed process gets only the code and the call arguments, never the expected values
    assert task.data["calls"] == [[[12, 18, 24]], [[7, 13]], [[5]]]


def test_yaml_task_file_epochs_shard_resume_and_hang(tmp_path):
    _tasks, skills = _setup(tmp_path)
    y = tmp_path / "t.yaml"
    y.write_text("tasks:\n" + "".join(f"  - id: t{i}\n    prompt: question t{i}\n    answer: '42'\n    match: number\n"
                                        for i in range(6)))
    out = tmp_path / "y.jsonl"
    args = ["--tasks", str(y), "--agent", "planted_agent:agent", "--skills", str(skills), "--out", str(out),
            "--epochs", "2", "--shard", "1/2", "--quiet"]
    assert _run(*args).exit_code == 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted({r["task_id"] for r in recs}) == ["t0", "t2", "t4"] and len(recs) == 12
    assert {r["epoch"] for r in recs} == {1, 2} and {r["benchmark"] for r in recs} == {"t"}
    res = _run(*args[:-1])  # resume: nothing left to do
    assert res.exit_code == 0 and "wrote 0 record(s), skipped 12 already logged" in res.output
    bad = tmp_path / "b.yaml"
    bad.write_text("- id: a\n  prompt: p\n  answer: '1'\n- id: b\n  prompt: p\n")
    res = _run("--tasks", str(bad), "--agent", "planted_agent:agent", "--skills", str(skills), "--out", str(tmp_path / "z"))
    assert res.exit_code == 2 and f"{bad}:4:" in res.output and "has no checker" in res.output
    res = _run("--tasks", str(y), "--agent", "planted_agent:slow", "--skills", str(skills), "--out",
               str(tmp_path / "h.jsonl"), "--task-id", "t0", "--episode-timeout", "0.3", "--quiet")
    assert res.exit_code == 2
    rec = json.loads((tmp_path / "h.jsonl").read_text().splitlines()[0])
    assert rec["error"] == "agent: planted_agent:slow did not return within 0.3s on task t0"
