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
import json, resource, sys, time
t = time.perf_counter()
{code}
print(json.dumps({{"s": time.perf_counter() - t, "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "out": out}}))
"""

CASES = {
    "math answer after 300k newlines": (
        "from skillaudit.harness.score import extract_math_answer as f; out = f('The answer:' + '\\n' * 300_000)",
        None),
    "150k 'functions.search_skills:{'": (
        "from skillaudit.harness.agent import parse_text_tool_calls as f\n"
        "calls = f('functions.search_skills:{' * 150_000)\n"
        "out = [len(calls), calls[0].name, calls[0].arguments]", [32, "search_skills", None]),
    "final answer after 300k newlines": (
        "from skillaudit.harness.taskfile import final_answer as f; out = f('The answer is' + '\\n' * 300_000)",
        "The answer is"),
    "5,000-deep JSON inside <tool_call>": (
        "from skillaudit.harness.agent import parse_text_tool_calls as f\n"
        "calls = f('<tool_call>' + '{\\x22a\\x22:' * 5000 + '1' + '}' * 5000 + '</tool_call>')\n"
        "out = [len(calls), calls[0].name]", [1, None]),
    "21 MB code reply": (
        "from skillaudit.harness.score import code_or_failure as f\n"
        "code, bad = f('```python\\n' + 'x = 1\\n' * 3_500_000 + '```')\n"
        "out = [code, bad.correct, bad.reason.split(',')[0]]", ["", False, "the reply is 21"]),
    "correct function plus an unparseable constant": (
        "from skillaudit.harness.score import extract_code as f\n"
        "out = f('```python\\ndef g(a):\\n    return a\\nX = ' + '-' * 50_000 + '1\\n```')",
        "def g(a):\n    return a"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_hostile_reply_is_bounded(case):
    code, want = CASES[case]
    p = subprocess.run([sys.executable, "-c", RUN.format(code=code)], capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["s"] < 5 and got["mb"] < 500, got
    if want is not None:
        assert got["out"] == want


def test_unparseable_code_is_a_wrong_answer_not_an_error(monkeypatch):
    """Code whose parse fails on its shape (a unary chain, RecursionError or MemoryError in the
    parser) gives no code: the task scorer then says 'no code', a failure."""
    from skillaudit.harness import score

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
