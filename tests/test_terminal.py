"""Terminal control sequences from logs and skills never reach the terminal raw (issue 16, item 9)."""

from __future__ import annotations

import json

import pytest
from _factories import make_skill, pair
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.util.term import clean

OSC0 = "\x1b]0;pwned\x07"  # set the window title
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # write the clipboard
CSI8 = "\x9b2J"  # C1 CSI: clear the screen on terminals that read 8-bit controls
MODEL = f"qwen{OSC0}{CSI8}"
SKILL = f"set{OSC52}-ops"
RAW = ("\x1b", "\x07", "\x9b")


def test_clean_escapes_controls_visibly():
    assert clean(OSC0) == "\\x1b]0;pwned\\x07"
    assert clean("a\u202eb\x7fc\rd") == "a\\u202eb\\x7fc\\x0dd"
    assert clean("plain text\n\twith ünïcode ✓") == "plain text\n\twith ünïcode ✓"
    assert clean(7) == "7"


@pytest.fixture
def hostile(tmp_path):
    recs = []
    for i in range(30):
        recs += pair(f"t{i}{OSC0}", i % 3 != 0, i % 2 == 0, retrieved=[SKILL, "[bold]markup[/bold]"] if i % 2 else None,
                     model=MODEL, benchmark=f"bench{OSC52}")
    recs.append({"task_id": f"lonely{OSC0}", "condition": "on", "correct": True, "model": MODEL})
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs))
    lib = tmp_path / "skills"
    make_skill(lib, "set-ops")
    bad = lib / f"bad{OSC0}"
    bad.mkdir()
    (bad / "SKILL.md").write_text(f"---\nname: bad\ndescription: d{OSC52}\n---\nbody\n")
    return runs, lib


def _assert_clean(res) -> None:
    for stream in (res.stdout, res.stderr):
        for raw in RAW:
            assert raw not in stream, repr(stream[:2000])


@pytest.mark.parametrize("args", [
    ["metrics", "--bootstrap", "0"],
    ["rank", "--bootstrap", "0"],
    ["prune", "--embedder", "none", "--bootstrap", "0"],
    ["validate"],
])
def test_no_raw_controls_in_metrics_rank_prune(hostile, args):
    runs, lib = hostile
    extra = ["--skills", str(lib)] if args[0] in ("rank", "prune") else []
    res = CliRunner().invoke(cli, [*args, str(runs), *extra])
    assert res.exit_code == 0, res.output
    _assert_clean(res)
    shown = res.stdout + res.stderr
    if args[0] == "rank":
        assert "set\\x1b]52" in shown  # visible, not acted on
        assert "[bold]markup" in shown  # rich markup from a log is text
    if args[0] != "validate":
        assert "warning: 1 record(s) without their other condition" in res.stderr
        assert "lonely\\x1b]0;pwned\\x07" in res.stderr


@pytest.mark.filterwarnings("error::UserWarning")  # a missing-glyph warning would print the raw character
def test_no_raw_controls_in_audit(hostile, tmp_path):
    runs, lib = hostile
    res = CliRunner().invoke(cli, ["audit", str(runs), "--skills", str(lib), "--out", str(tmp_path / "rep"),
                                   "--embedder", "tfidf", "--bootstrap", "50", "--regression-bootstrap", "0"])
    assert res.exit_code == 0, res.output
    _assert_clean(res)
    assert "qwen\\x1b]0;pwned\\x07" in res.stdout
    report = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")  # `cat report.md` is a terminal too
    for raw in RAW:
        assert raw not in report
    assert "qwen\\\\x1b" in report  # shown (Markdown-escaped backslash), not acted on


def test_no_raw_controls_in_errors_and_validate_skills(hostile, tmp_path):
    runs, lib = hostile
    res = CliRunner().invoke(cli, ["validate", "--skills", str(lib)])
    assert res.exit_code == 1
    _assert_clean(res)
    assert "bad\\x1b]0;pwned\\x07" in res.stdout
    dup = tmp_path / "dup.jsonl"
    dup.write_text("".join(json.dumps(r) + "\n" for r in pair(f"t{OSC0}", True, True, model=MODEL) * 2))
    res = CliRunner().invoke(cli, ["metrics", str(dup)])
    assert res.exit_code == 2
    _assert_clean(res)
    assert res.output.startswith("Error: ") and len(res.output.splitlines()) == 1
    res = CliRunner().invoke(cli, ["metrics", str(runs), "--strict"])
    assert res.exit_code == 2
    _assert_clean(res)
