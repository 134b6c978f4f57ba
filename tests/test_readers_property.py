"""Property tests of every reader of untrusted text (issue 48): whatever bytes a model, a task file
or an agent log holds, each reader returns or raises its one-line error (InputError) within a time
budget; never another exception. hypothesis draws the inputs (derandomized: CI is reproducible)."""

from __future__ import annotations

import json
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from skillaudit.errors import InputError  # noqa: E402

FAST = settings(max_examples=150, deadline=2000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
# text with the characters the parsers look for, often
PIECES = st.sampled_from(["{", "}", "[", "]", '"', ":", ",", "\n", " ", "\\", "<tool_call>", "</tool_call>",
                          "functions.search_skills:", "answer is", "####", "\\boxed{", "```python\n", "```",
                          "skills/", "SKILL.md", "def f(", "assert ", "-", "(", ")", "name", "a", "1"])
HOSTILE = st.lists(st.one_of(PIECES, st.text(max_size=20)), max_size=200).map("".join)
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                       lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                       max_leaves=20)


def _timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    assert time.perf_counter() - t < 2
    return out


@FAST
@given(HOSTILE)
def test_reply_parsers_never_raise(text):
    from skillaudit.agents.agent import parse_text_tool_calls
    from skillaudit.sandbox.score import code_or_failure, extract_math_answer
    from skillaudit.tasks.taskfile import final_answer

    _timed(parse_text_tool_calls, text)
    _timed(extract_math_answer, text)
    _timed(final_answer, text)
    _timed(code_or_failure, text)


@FAST
@given(st.lists(st.one_of(JSONISH.map(json.dumps), HOSTILE), max_size=12))
def test_agent_log_readers_never_raise(tmp_path_factory, lines):
    from skillaudit.importers.trajectories.atif import read_trajectory_json
    from skillaudit.importers.trajectories.claude_code import read_claude_code
    from skillaudit.importers.trajectories.codex import read_codex
    from skillaudit.importers.trajectories.gemini_session import read_gemini_session
    from skillaudit.importers.trajectories.openhands import read_openhands

    d = tmp_path_factory.mktemp("logs")
    jsonl = d / "log.txt"
    jsonl.write_text("\n".join(lines))
    doc = d / "doc.json"
    doc.write_text(lines[0] if lines else "")
    for fn, path in ((read_claude_code, jsonl), (read_codex, jsonl), (read_trajectory_json, doc),
                     (read_gemini_session, doc), (read_openhands, doc)):
        t = _timed(fn, str(path))
        assert t.problem is None or isinstance(t.problem, str)


@FAST
@given(st.lists(st.one_of(JSONISH, st.dictionaries(st.sampled_from(["id", "prompt", "answer", "match", "tests",
                                                                    "entry_point", "checker", "grader"]),
                                                   JSONISH, max_size=6)), min_size=1, max_size=5))
def test_task_file_reader_raises_only_its_one_line_error(tmp_path_factory, rows):
    from skillaudit.tasks.taskfile import load_task_file

    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        _timed(load_task_file, path)
    except InputError as exc:
        assert "\n" not in str(exc)
