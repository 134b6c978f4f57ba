"""Hostile replies outside the sandbox (issue 48, steps 1a-1b): answer, code and tool-call extraction
stay linear and bounded, and an answer that cannot be parsed is a wrong answer, never an error.

Each case runs in its own process (the test process holds torch, so its peak memory says nothing of
the case's) with a 5 s and 500 MB budget; bench/hostile_replies.py prints the figures."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RUN = """
import json, sys, time
t = time.perf_counter()
{code}
print(json.dumps({{"s": time.perf_counter() - t, "out": out}}))
"""

# The case runs in a process forked from a small launcher, which reports the case's peak RSS from
# wait4: Linux carries a forked process's parent's RSS high-water mark through exec, so a process
# started from pytest (which holds torch) would report pytest's peak instead of its own.
LAUNCHER = """
import json, os, sys
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.dup2(w, 1)
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
os.close(w)
out = b""
while chunk := os.read(r, 65536):
    out += chunk
_, status, usage = os.wait4(pid, 0)
res = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else {}
print(json.dumps({**res, "rc": os.waitstatus_to_exitcode(status), "mb": usage.ru_maxrss / 1024}))
"""


def run_case(code: str) -> dict:
    p = subprocess.run([sys.executable, "-c", LAUNCHER, RUN.format(code=code)], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0, p.stderr[-2000:]
    return got

CASES = {
    "math answer after 300k newlines": (
        "from skillaudit.sandbox.score import extract_math_answer as f; out = f('The answer:' + '\\n' * 300_000)",
        None),
    "150k 'functions.search_skills:{'": (
        "from skillaudit.agents.agent import parse_text_tool_calls as f\n"
        "calls = f('functions.search_skills:{' * 150_000)\n"
        "out = [len(calls), calls[0].name, calls[0].arguments]", [32, "search_skills", None]),
    "final answer after 300k newlines": (
        "from skillaudit.tasks.taskfile import final_answer as f; out = f('The answer is' + '\\n' * 300_000)",
        "The answer is"),
    "5,000-deep JSON inside <tool_call>": (
        "from skillaudit.agents.agent import parse_text_tool_calls as f\n"
        "calls = f('<tool_call>' + '{\\x22a\\x22:' * 5000 + '1' + '}' * 5000 + '</tool_call>')\n"
        "out = [len(calls), calls[0].name]", [1, None]),
    "21 MB code reply": (
        "from skillaudit.sandbox.score import code_or_failure as f\n"
        "code, bad = f('```python\\n' + 'x = 1\\n' * 3_500_000 + '```')\n"
        "out = [code, bad.correct, bad.reason.split(',')[0]]", ["", False, "the reply is 21"]),
    "correct function plus an unparseable constant": (
        "from skillaudit.sandbox.score import extract_code as f\n"
        "out = f('```python\\ndef g(a):\\n    return a\\nX = ' + '-' * 50_000 + '1\\n```')",
        "def g(a):\n    return a"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_hostile_reply_is_bounded(case):
    code, want = CASES[case]
    got = run_case(code)
    assert got["s"] < 5 and got["mb"] < 500, got
    if want is not None:
        assert got["out"] == want


def test_unparseable_code_is_a_wrong_answer_not_an_error(monkeypatch):
    """Code whose parse fails on its shape (a unary chain, RecursionError or MemoryError in the
    parser) gives no code: the task scorer then says 'no code', a failure."""
    from skillaudit.sandbox import score

    hostile = "```python\nX = " + "-" * 50_000 + "1\n```"  # MemoryError in Python's parser
    assert score.extract_code(hostile) == ""
    monkeypatch.setenv("SKILLAUDIT_MAX_REPLY_CHARS", "100")
    code, bad = score.code_or_failure("x" * 101)
    assert code == "" and bad is not None and not bad.correct
    assert bad.reason == "the reply is 101 characters, over the 100 whose code is parsed (SKILLAUDIT_MAX_REPLY_CHARS)"
    assert resource.getrlimit(resource.RLIMIT_AS)  # the test itself made no assumption on limits


def test_a_hostile_reply_is_scored_a_failure_and_the_run_goes_on(tmp_path):
    """A run whose disabled reply to one GSM8K task is "The answer:" + 300k newlines: that record is
    a scored failure (no error), the other records are written, the run exits 0."""
    from _harness_fakes import (
        GSM8K_ROWS,
        ScriptedServer,
        chat_reply,
        native_call,
        write_library,
        write_rows,
    )
    from click.testing import CliRunner

    from skillaudit.cli import cli

    def responder(path, body):
        msgs = body["messages"]
        user = msgs[1]["content"]
        if "tools" in body and not any(m["role"] == "tool" for m in msgs):
            return chat_reply(None, [native_call(user[:40])], "tool_calls")
        if "Tom has 3 apples" in user and "tools" not in body:
            return chat_reply("The answer:" + "\n" * 300_000)
        return chat_reply("\\boxed{7}")

    data = write_rows(tmp_path / "data" / "g.jsonl", GSM8K_ROWS)
    lib = write_library(tmp_path / "skills")
    out = tmp_path / "runs.jsonl"
    with ScriptedServer(responder) as srv:
        res = CliRunner().invoke(cli, ["run", "--benchmark", "gsm8k", "--data", str(data), "--skills", str(lib),
                                       "--endpoint", srv.url, "--model", "m", "--tool-mode", "native",
                                       "--retries", "0", "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 2 * len(GSM8K_ROWS) and all(r["error"] is None for r in recs)
    hostile = next(r for r in recs if r["condition"] == "disabled" and r["task_id"] == "gsm8k/0")
    assert hostile["correct"] is False


# ---------------------------------------------------------------- task files and user regexes (step 2)
def _cli(args: list[str], tmp_path: Path, env: dict | None = None):
    import os

    from test_documents import cli

    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return cli(args, tmp_path)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.mark.parametrize("name,content,needle", [
    ("deep.jsonl", '{"id": "t", "prompt": "p", "answer": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
     "deep.jsonl:1: nested deeper than 100 levels"),
    ("deep.yaml", "- " + "[" * 20_000 + "]" * 20_000 + "\n", "deep.yaml: nested too deeply to be a task file"),
    ("laughs.yaml", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
     + "tasks: [{id: t, prompt: *i, answer: '1', match: exact}]\n", "laughs.yaml: YAML aliases are not allowed"),
    ("unary.jsonl", json.dumps({"id": "t", "prompt": "p", "entry_point": "f",
                                "tests": ["assert f(1) == " + "-" * 100_000 + "1"]}) + "\n",
     "unary.jsonl:1: `tests`: an assertion nested too deeply to parse"),
])
def test_hostile_task_files_are_one_line(tmp_path, name, content, needle):
    """A task file 100k deep (JSON), 20k deep (YAML), a billion-laughs YAML, an assertion whose parse
    overflows: one line naming the file (and line), exit 2, within 5 s and 500 MB."""
    from test_documents import assert_one_line_exit_2

    path = tmp_path / name
    path.write_text(content)
    skills = tmp_path / "skills" / "a"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: a\ndescription: d\n---\nbody\n")
    res = _cli(["run", "--tasks", str(path), "--agent", "nowhere:agent", "--skills", str(tmp_path / "skills"),
                "--out", str(tmp_path / "o.jsonl")], tmp_path)
    assert_one_line_exit_2(res, needle)


def test_an_oversized_task_file_is_refused_before_it_is_read(tmp_path):
    """A task file over SKILLAUDIT_MAX_DOCUMENT_MB (a 3 GB sparse file here) is one line, not an OOM."""
    from test_documents import assert_one_line_exit_2

    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        fh.truncate(3 << 30)
    res = _cli(["run", "--tasks", str(big), "--agent", "nowhere:agent", "--skills", str(tmp_path),
                "--out", str(tmp_path / "o.jsonl")], tmp_path)
    assert_one_line_exit_2(res, "big.jsonl: larger than 128 MiB")


def test_a_users_regex_runs_with_a_timeout():
    """A catastrophic pattern of the task file's own on an attacker's reply: a scored failure after
    about a second, with the reason, never a hang."""
    import time

    from skillaudit.tasks.benchmarks import Task
    from skillaudit.tasks.taskfile import score_answer

    task = Task("t", "tasks", "p", {"kind": "answer", "answer": r"(a|aa)+$", "match": "regex"})
    t = time.perf_counter()
    score, _ = score_answer(task, "a" * 60 + "!")
    assert time.perf_counter() - t < 10
    assert not score.correct and score.reason == "the regex /(a|aa)+$/ took over 1 s on the reply: no match"
    ok, _ = score_answer(Task("t", "tasks", "p", {"kind": "answer", "answer": r"\bforty[- ]two\b", "match": "regex"}),
                         "it is forty-two")
    assert ok.correct


# ---------------------------------------------------------------- SKILL.md and agent-log caps (step 3)
def test_huge_skill_files_are_skipped_with_a_line_not_read(tmp_path):
    """A 6 GB sparse SKILL.md and a 100 MB one of short lines, beside a good skill: each is reported
    (file, 'larger than 4 MiB: not read') and skipped; the good skill loads; any command with
    --skills stays within 5 s and 500 MB."""
    from test_documents import cli

    lib = tmp_path / "skills"
    for name in ("good", "sparse", "lines"):
        (lib / name).mkdir(parents=True)
    (lib / "good" / "SKILL.md").write_text("---\nname: good\ndescription: fine\n---\nbody\n")
    with (lib / "sparse" / "SKILL.md").open("wb") as fh:
        fh.truncate(6 << 30)
    with (lib / "lines" / "SKILL.md").open("w") as fh:
        fh.write("---\nname: lines\ndescription: d\n---\n")
        fh.write("a line\n" * ((100 << 20) // 7))
    _code, err, cpu, rss = cli(["validate", "--skills", str(lib)], tmp_path)
    assert cpu < 5 and rss < 500, (cpu, rss)
    assert "sparse/SKILL.md: larger than 4 MiB: not read" in err + (tmp_path / "cli.out").read_text()
    assert "lines/SKILL.md: larger than 4 MiB: not read" in err + (tmp_path / "cli.out").read_text()
    from skillaudit.library import load_library

    assert load_library(lib).ids == ("good",)


def test_a_jsonl_library_with_a_huge_line_reports_that_line(tmp_path, monkeypatch):
    from skillaudit.library import load_library

    monkeypatch.setenv("SKILLAUDIT_MAX_SKILL_MB", "1")
    lib = tmp_path / "lib.jsonl"
    lib.write_text(json.dumps({"id": "a", "description": "d", "body": "x" * (2 << 20)}) + "\n"
                   + json.dumps({"id": "b", "description": "d", "body": "ok"}) + "\n")
    loaded = load_library(lib)
    assert loaded.ids == ("b",)
    assert any("lib.jsonl:1: larger than 1 MiB: not read" in w for w in loaded.warnings)


def test_a_long_agent_log_is_streamed(tmp_path):
    """A 40 MB Claude Code log of tool outputs is read in bounded memory (in its own process):
    only the init, tool_use and result lines are parsed; the skill used at the end is seen."""
    path = tmp_path / "claude-code.txt"
    with path.open("w") as fh:
        fh.write(json.dumps({"type": "system", "subtype": "init", "skills": ["pdf"]}) + "\n")
        line = json.dumps({"type": "user", "message": {"content": [{"type": "tool_result", "content": "x" * 2000}]}})
        fh.write((line + "\n") * 20_000)
        fh.write(json.dumps({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "Skill", "input": {"skill": "pdf"}}]}}) + "\n")
        fh.write('{"type":"result","subtype":"success"}\n')
    code = ("from skillaudit.importers.trajectories.claude_code import read_claude_code as f\n"
            f"traj = f({str(path)!r})\nout = [list(traj.used), traj.complete]")
    got = run_case(code)
    assert got["out"] == [["pdf"], True] and got["s"] < 5 and got["mb"] < 150, got


# ---------------------------------------------------------------- limits the environment set (step 4)
def test_a_lower_ulimit_v_is_fitted_and_said_once(tmp_path):
    """Under an address-space hard limit of 3 GiB (ulimit -v), a sandboxed run asking for 4 GiB is
    set up within the allowed limit instead of failing in preexec_fn, and the lowering is said."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "from skillaudit.sandbox.process import FITTED, Limits, run_python\n"
        "res, _ = run_python('print(6 * 7)', limits=Limits(memory_mb=4096, timeout_s=20))\n"
        "out = [res.returncode, res.stdout.strip(), list(FITTED)]")
    got = run_case(code)
    rc, stdout, fitted = got["out"]
    assert (rc, stdout) == (0, "42"), got
    assert fitted == ["sandbox: the environment's hard limit on address space (ulimit -v) is below the 4096 asked "
                      "for; sandboxed runs use 3072"]


def _trial(folder: Path, task: str, reward: float, log: list | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({
        "task_name": task, "trial_name": folder.name, "config": {"agent": {"name": "a", "model_name": "m"}},
        "verifier_result": {"rewards": {"reward": reward}}, "exception_info": None}))
    if log is not None:
        (folder / "agent").mkdir()
        (folder / "agent" / "claude-code.txt").write_text("\n".join(json.dumps(x) for x in log) + "\n")


def test_harbor_folders_with_wrong_types_and_symlinks(tmp_path):
    """A job result.json whose trial_results is 5, a Claude Code init line whose skills is 5, and a
    trial folder that is a symbolic link to / : the import reads the rest, says which link it did
    not follow, and stays within 5 s and 500 MB (no walk of the host)."""
    from test_documents import cli

    on, off = tmp_path / "with-skills", tmp_path / "without-skills"
    _trial(on / "t__a", "t", 1.0, [{"type": "system", "subtype": "init", "skills": 5},
                                   {"type": "result", "subtype": "success"}])
    _trial(off / "t__b", "t", 0.0)
    (on / "result.json").write_text(json.dumps({"n_total_trials": 1, "trial_results": 5, "stats": 5}))
    (on / "evil__c").symlink_to("/")
    out = tmp_path / "o.jsonl"
    code, err, cpu, rss = cli(["import", "harbor", str(on), str(off), "-o", str(out)], tmp_path)
    assert code == 0, err
    assert cpu < 5 and rss < 500, (cpu, rss)
    assert f"1 symbolic link(s) inside the inputs were not followed: {on / 'evil__c'}" in err
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 2 and next(r for r in recs if r["condition"] == "enabled")["retrievals"] == []
