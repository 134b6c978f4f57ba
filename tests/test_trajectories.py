"""Agents' own logs to skill use: one reader per format, each on a real file (README of
../shared/data/real/trajectories gives the hand reading), and the shared detection rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from skillaudit.importers.trajectories import read_trial
from skillaudit.importers.trajectories._rules import Uses, skill_files
from skillaudit.importers.trajectories.atif import read_trajectory_json
from skillaudit.importers.trajectories.claude_code import read_claude_code
from skillaudit.importers.trajectories.gemini_session import read_gemini_session

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
TRAJ = REAL / "trajectories"
needs_real = pytest.mark.skipif(not TRAJ.is_dir(), reason="../shared/data/real is absent")


def _uses(*commands: str, calls: tuple = ()) -> Uses:
    u = Uses()
    for c in commands:
        u.command(c)
    for name, args in calls:
        u.tool_call(name, args)
    return u


def test_running_a_skill_script_without_reading_skill_md_is_use():
    """A script of the skill run through a shell, or read with a read tool, is a use (not an
    opening); SKILL.md read is an opening too; the path is kept whole."""
    u = _uses("python3 /root/.codex/skills/pdf/scripts/fill.py in.pdf", "cd /x && bash ~/.agents/skills/sh/run.sh",
              calls=(("Read", {"file_path": "/root/.claude/skills/docx/SKILL.md"}),
                     ("read_file", {"file_path": "/root/.gemini/skills/mesh/references/units.md"})))
    assert u.rules == {"pdf": "shell run", "sh": "shell run", "docx": "read", "mesh": "read"}
    assert list(u.opened) == ["docx"]
    assert list(u.files["pdf"]) == ["/root/.codex/skills/pdf/scripts/fill.py"]


def test_writes_listings_and_mentions_are_not_use():
    """Writing a file whose content or path names a skill folder, listing the skills folder (or a
    skill's), a heredoc body, a redirection target or a copy's destination: none is use."""
    u = _uses("ls /root/.claude/skills/", "ls -la /root/.claude/skills/x/scripts", "mkdir -p /root/skills/new/scripts",
              "echo hi > /root/.claude/skills/w/notes.md", "cp /tmp/a.py /root/skills/dest/a.py",
              "cat > /tmp/x.py <<EOF\nsys.path.append('/root/skills/heredoc/scripts')\nEOF",
              "find / -path '*skills/found/SKILL.md'",
              calls=(("write_file", {"file_path": "/root/run.py", "content": "open('/root/.gemini/skills/m/s.py')"}),
                     ("Write", {"file_path": "/root/.claude/skills/written/SKILL.md", "content": "x"}),
                     ("Edit", {"file_path": "/root/.claude/skills/edited/SKILL.md"}),
                     ("list_directory", {"path": "/root/.gemini/skills/listed"})))
    assert u.rules == {}


def test_activation_calls_of_each_agent_and_opencode_paths():
    u = _uses("head -5 .opencode/skill/oc/SKILL.md",
              calls=(("activate_skill", {"name": "g"}), ("Skill", {"skill": "c"}), ("load_skill", '{"name": "t"}'),
                     ("bash_command", {"keystrokes": "cat /runtime/skills/k/SKILL.md\n"})))
    assert u.rules == {"oc": "shell read", "g": "activation", "c": "activation", "t": "activation", "k": "shell read"}
    assert skill_files("see skills/ and skills/x/") == []


def test_hostile_commands_are_linear():
    """Many unterminated heredocs, a 100k-character token and unbalanced quotes stay fast and quiet."""
    import time

    t = time.perf_counter()
    _uses("cat <<E\n" * 20_000, "skills/" + "a" * 100_000, "'" + "skills/x/y " * 5000)
    assert time.perf_counter() - t < 2


@needs_real
def test_atif_gemini_cli_by_hand():
    """Gemini CLI's ATIF: mesh-analysis activated (step 2) and its script read (step 6); the
    written paths of steps 3 and 13 are not use; ATIF lists nothing offered."""
    t = read_trajectory_json(str(TRAJ / "atif-gemini-cli-3d-scan-calc" / "trajectory.json"))
    assert t.format == "ATIF v1.2" and t.problem is None
    assert t.used == ("mesh-analysis",) and dict(t.rules) == {"mesh-analysis": "activation"}
    assert dict(t.files) == {"mesh-analysis": ("/root/.gemini/skills/mesh-analysis/scripts/mesh_tool.py",)}
    assert not t.offered_known and t.offered == ("mesh-analysis",)  # a used skill is always offered


@needs_real
def test_gemini_cli_session_by_hand():
    """The same run's own session JSON: offered from the activate_skill description, same use."""
    t = read_gemini_session(str(TRAJ / "gemini-cli-session-3d-scan-calc" / "gemini-cli.trajectory.json"))
    assert t.offered_known and t.offered == ("mesh-analysis",) and t.used == ("mesh-analysis",)
    assert dict(t.rules) == {"mesh-analysis": "activation"} and t.opened == ("mesh-analysis",)


@needs_real
def test_terminus_episode_list_by_hand():
    """SkillsBench's terminus-2 episode list: pymatgen and sympy offered, pymatgen loaded."""
    t = read_trajectory_json(str(TRAJ / "terminus-2-skills-crystallographic-wyckoff" / "trajectory.json"))
    assert t.format == "SkillsBench terminus-2 episode list"
    assert t.offered_known and t.offered == ("pymatgen", "sympy") and t.used == ("pymatgen",)


@needs_real
def test_harbor_terminus2_atif_offered_one_used_none():
    """The Harbor 0.26.0 terminus-2 pair made here: ATIF v1.8, status-report offered in the first
    prompt's <available_skills>, never used; the no-skills trial lists nothing."""
    skill = REAL / "harbor-terminus2-local" / "t2-skill" / "status-report__ADecrE3"
    t = read_trial(str(skill))
    assert (t.format, t.offered, t.offered_known, t.used) == ("ATIF v1.8", ("status-report",), True, ())
    off = read_trial(str(REAL / "harbor-terminus2-local" / "t2-noskill" / "status-report__dGtJhFu"))
    assert off.offered == () and off.used == ()


@needs_real
def test_claude_code_through_the_shared_rules():
    """Claude Code: docx used on offer-letter-generator (a Skill call), nothing on threejs-to-obj."""
    cc = REAL / "harbor" / "claude-code" / "main-with-skills-pass2"
    offer = read_claude_code(str(next(cc.glob("offer-letter-generator__*/agent/claude-code.txt"))))
    assert offer.used == ("docx",) and offer.complete and offer.format == "Claude Code stream-json"
    three = read_claude_code(str(next(cc.glob("threejs-to-obj__*/agent/claude-code.txt"))))
    assert three.used == () and three.offered == ("obj-exporter",)


@needs_real
def test_trial_folder_sniffing_and_unreadable_logs(tmp_path):
    """read_trial picks the reader by what the folder holds; an unreadable trajectory is 'use
    unknown' (a problem), never 'no use'; a symlinked log is not followed."""
    trial = tmp_path / "t"
    (trial / "agent").mkdir(parents=True)
    shutil.copy(TRAJ / "gemini-cli-session-3d-scan-calc" / "gemini-cli.trajectory.json", trial / "agent")
    assert read_trial(str(trial)).format == "Gemini CLI session JSON"
    (trial / "agent" / "gemini-cli.trajectory.json").unlink()
    (trial / "agent" / "trajectory.json").write_text("{not json")
    t = read_trial(str(trial))
    assert t.problem is not None and t.used == ()
    (trial / "agent" / "trajectory.json").write_text(json.dumps({"schema_version": "v9", "steps": []}))
    assert "neither ATIF" in read_trial(str(trial)).problem
    (trial / "agent" / "trajectory.json").unlink()
    (trial / "agent" / "trajectory.json").symlink_to(TRAJ / "atif-gemini-cli-3d-scan-calc" / "trajectory.json")
    assert read_trial(str(trial)).problem is not None


# ---------------------------------------------------------------- arm integrity
MINIMAX = REAL / "minimax-claude-code" / "minimax-m2.1+claude-code"


def _leaky_job(tmp_path: Path) -> Path:
    """The MiniMax jobs with one no-skills trial given a Claude Code log that runs a pdf script
    (without reading SKILL.md) and one with-skills trial whose log says no skill was offered."""
    root = tmp_path / "minimax"
    shutil.copytree(MINIMAX, root)
    leak = root / "no_skills" / "data-to-d3__66zhFdt"
    (leak / "agent").mkdir()
    lines = [{"type": "system", "subtype": "init", "skills": []},
             {"type": "assistant", "message": {"content": [
                 {"type": "tool_use", "name": "Bash",
                  "input": {"command": "python3 /root/.claude/skills/pdf/scripts/extract.py in.pdf"}}]}},
             {"type": "result", "subtype": "success"}]
    (leak / "agent" / "claude-code.txt").write_text("\n".join(json.dumps(x) for x in lines))
    broken = root / "skills" / "hvac-control__3UhE6BN" / "agent" / "claude-code.txt"
    first, *rest = broken.read_text().splitlines()
    init = json.loads(first)
    init["skills"] = []
    broken.write_text("\n".join([json.dumps(init), *[r for r in rest if '"Skill"' not in r]]))
    return root


@needs_real
def test_a_leaked_no_skills_trial_is_named_in_the_note_the_headline_and_fails_check(tmp_path):
    """A no-skills trial that ran a skill's script is a leak: named in the import note, in the audit
    headline before any figure, and `check` fails on it (exit 1, a line naming the trial) unless
    --allow-leaks; a with-skills trial offered nothing is a broken arm, named the same way."""
    from click.testing import CliRunner

    from skillaudit.cli import cli

    root = _leaky_job(tmp_path)
    log = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["import", "harbor", str(root), "-o", str(log)])
    assert res.exit_code == 0, res.output
    assert "arm integrity: 1 without-skills trial(s) used skills (a leak" in res.output
    assert "data-to-d3__66zhFdt used pdf" in res.output
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    leak = next(r for r in recs if r["meta"]["trial"] == "data-to-d3__66zhFdt")
    assert leak["condition"] == "disabled" and leak["retrievals"][0]["skills"] == ["pdf"]
    assert leak["meta"]["use_rules"] == {"pdf": "shell run"}
    res = CliRunner().invoke(cli, ["audit", str(log), "--out", str(tmp_path / "rep"), "-q",
                                   "--embedder", "tfidf", "--bootstrap", "200"])
    assert res.exit_code == 0, res.output
    second = " ".join(ln.strip() for ln in res.output.splitlines()[1:3])
    assert second.startswith("⚠ arm integrity: 1 run(s) without skills used skills (leak): data-to-d3__66zhFdt "
                             "(pdf); 1 run(s) with skills were given none (broken arm): hvac-control__3UhE6BN")
    res = CliRunner().invoke(cli, ["check", str(log)])
    assert res.exit_code == 1
    assert ("FAIL integrity: leak: claude-code:minimax/MiniMax-M2.1 data-to-d3 (epoch 1), trial "
            "data-to-d3__66zhFdt: the run without skills used pdf") in res.output
    assert "FAIL integrity: broken arm: claude-code:minimax/MiniMax-M2.1 hvac-control (epoch 1), trial " \
           "hvac-control__3UhE6BN" in res.output
    res = CliRunner().invoke(cli, ["check", str(log), "--allow-leaks"])
    assert res.exit_code == 0 and "FAIL" not in res.output


@needs_real
def test_the_real_jobs_fail_closed_where_the_leak_check_could_not_run(tmp_path):
    """The MiniMax jobs as published: no leak and no broken arm, but the without-skills trials kept
    no agent log while their with-skills partners' were read: the leak check could not run for them,
    so `check` fails closed naming each (exit 1), and --allow-leaks accepts it."""
    from click.testing import CliRunner

    from skillaudit.cli import cli

    log = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["import", "harbor", str(MINIMAX), "-o", str(log)])
    assert res.exit_code == 0
    assert ("note: arm integrity: the leak check was not possible for 16 without-skills trial(s) whose "
            "with-skills partner's log was read") in res.output
    res = CliRunner().invoke(cli, ["check", str(log)])
    assert res.exit_code == 1, res.output
    fails = [ln for ln in res.output.splitlines() if ln.startswith("FAIL")]
    assert len(fails) == 16 and all(ln.startswith("FAIL integrity: leak check not possible: ") for ln in fails)
    assert ("FAIL integrity: leak check not possible: claude-code:minimax/MiniMax-M2.1 data-to-d3 (epoch 1), "
            "trial data-to-d3__66zhFdt: no agent/ trajectory; its with-skills partner's log was read") in fails
    assert "leak:" not in res.output and "broken arm" not in res.output
    res = CliRunner().invoke(cli, ["check", str(log), "--allow-leaks"])
    assert res.exit_code == 0 and "FAIL" not in res.output


# ---------------------------------------------------------------- Codex and OpenHands (scripted traces)
def test_codex_exec_json_scripted_trace(tmp_path):
    """A `codex exec --json` trace written to the documented schema: a skill script run through
    `bash -lc` is use (shell run) without SKILL.md, a SKILL.md cat is an opening (shell read), a
    file_change naming a skill path is not, an MCP read tool counts; turn.completed closes the run."""
    from skillaudit.importers.trajectories.codex import read_codex

    events = [
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i0", "type": "command_execution",
                                            "command": "bash -lc 'ls /root/.codex/skills'", "exit_code": 0}},
        {"type": "item.completed", "item": {"id": "i1", "type": "command_execution",
                                            "command": "bash -lc 'python3 /root/.codex/skills/pdf/scripts/fill.py in.pdf'",
                                            "aggregated_output": "ok", "exit_code": 0, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "i2", "item_type": "command_execution",
                                            "command": "bash -lc 'cat /root/.codex/skills/docx/SKILL.md'"}},
        {"type": "item.completed", "item": {"id": "i3", "type": "file_change",
                                            "changes": [{"path": "/root/.codex/skills/new/SKILL.md", "kind": "add"}]}},
        {"type": "item.completed", "item": {"id": "i4", "type": "mcp_tool_call", "server": "fs", "tool": "read_file",
                                            "arguments": {"path": "/root/.codex/skills/xlsx/references/api.md"}}},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}},
    ]
    p = tmp_path / "codex.txt"
    p.write_text("\n".join(json.dumps(e) for e in events) + "\nnot json\n")
    t = read_codex(str(p))
    assert dict(t.rules) == {"pdf": "shell run", "docx": "shell read", "xlsx": "read"}
    assert t.opened == ("docx",) and t.complete and not t.offered_known
    p.write_text("\n".join(json.dumps(e) for e in events[:-1]))
    assert read_codex(str(p)).complete is False
    p.write_text("nothing here\n")
    assert read_codex(str(p)).problem is not None


def test_codex_mcp_reads_of_skill_files_count_only_when_they_succeed(tmp_path):
    """Issue 53: a completed `read_mcp_resource` whose uri names a skill's SKILL.md is a read and an
    opening (rule "mcp read"); the same call failed (status failed, an error: the real
    invoice-fraud-detection trial's three reads) is not."""
    from skillaudit.importers.trajectories.codex import read_codex

    def mcp(i, skill, ok):
        item = {"id": f"i{i}", "type": "mcp_tool_call", "server": "local", "tool": "read_mcp_resource",
                "arguments": {"server": "local", "uri": f"file:/root/.codex/skills/{skill}/SKILL.md"},
                "result": {"contents": [{"text": "---"}]} if ok else None,
                "error": None if ok else {"message": "resources/read failed: unknown MCP server 'local'"},
                "status": "completed" if ok else "failed"}
        return {"type": "item.completed", "item": item}

    events = [{"type": "thread.started"}, mcp(1, "pdf", False), mcp(2, "xlsx", True), {"type": "turn.completed"}]
    p = tmp_path / "codex.txt"
    p.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    t = read_codex(str(p))
    assert dict(t.rules) == {"xlsx": "mcp read"} and t.opened == ("xlsx",)


def test_openhands_scripted_trace(tmp_path):
    """An OpenHands saved trajectory written to the documented schema: `run` of a skill script, a
    `read` and an `edit` view are use; `write` and `edit` create are not; finish closes the run."""
    from skillaudit.importers.trajectories.openhands import read_openhands

    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "do it"}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "bash /workspace/.agents/skills/sh/run.sh"}},
        {"id": 2, "source": "agent", "observation": "run", "content": "done", "extras": {}},
        {"id": 3, "source": "agent", "action": "read", "args": {"path": "/root/.agents/skills/pdf/SKILL.md"}},
        {"id": 4, "source": "agent", "action": "edit", "args": {"command": "view", "path": "/root/.agents/skills/xl/a.md"}},
        {"id": 5, "source": "agent", "action": "write", "args": {"path": "/root/.agents/skills/w/SKILL.md", "content": "x"}},
        {"id": 6, "source": "agent", "action": "edit", "args": {"command": "create", "path": "/root/.agents/skills/c/x.py"}},
        {"id": 7, "source": "agent", "action": "finish", "args": {"outputs": {}}},
    ]
    p = tmp_path / "openhands.trajectory.json"
    p.write_text(json.dumps(events))
    t = read_openhands(str(p))
    assert dict(t.rules) == {"sh": "shell run", "pdf": "read", "xl": "read"} and t.opened == ("pdf",) and t.complete
    p.write_text(json.dumps({"history": events[:-1]}))
    assert read_openhands(str(p)).complete is False
    trial = tmp_path / "trial"
    (trial / "agent").mkdir(parents=True)
    (trial / "agent" / "openhands.trajectory.json").write_text(json.dumps(events))
    assert read_trial(str(trial)).format == "OpenHands trajectory"


def test_a_script_that_imports_a_skills_code_and_runs_uses_the_skill():
    """Issue 53: a heredoc fed to python that puts a skill's scripts folder on sys.path (the real
    3d-scan-calc Codex trial's shape) or runs under PYTHONPATH=<skill folder> uses that skill (rule
    "imported"); the same script written with cat > file is not run, so not use."""
    from skillaudit.importers.trajectories._rules import Uses

    cases = [
        ("/bin/bash -lc \"python - <<'PY'\nimport sys, json\nsys.path.append('/root/.codex/skills/mesh-analysis/scripts')"
         "\nfrom mesh_tool import MeshAnalyzer\nPY\"", {"mesh-analysis": "imported"}),
        ("PYTHONPATH=/root/.claude/skills/pdf python3 - <<EOF\nimport fill\nEOF", {"pdf": "imported"}),
        ("python3 - <<EOF\nimport sys; sys.path.insert(0, \"/root/.claude/skills/pdf\")\nEOF", {"pdf": "imported"}),
        ("cat > run.py <<'EOF'\nimport sys\nsys.path.append('/root/.codex/skills/mesh-analysis/scripts')\nEOF", {}),
    ]
    for cmd, want in cases:
        u = Uses()
        u.command(cmd)
        assert dict(u.rules) == want, cmd


def test_listings_show_skills_seen_never_used():
    """Issue 53: what a listing of a skills folder shows is seen (present), never use: ls (plain and
    -l), find, Gemini CLI's list_directory and its shell framing; a listing of one skill's folder
    that printed something shows that skill; a failed listing or output mixed with another command's
    shows nothing."""
    u = Uses()
    u.shell_output("/bin/bash -lc 'ls /root/.codex/skills'", "fuzzy-match\npdf\nREADME.md\n.system\n")
    u.shell_output("ls -la /root/.agents/skills/", "total 8\ndrwxr-xr-x 2 root root 4096 Jan 1 00:00 ..\n"
                                                   "drwxr-xr-x 3 root root 4096 Jan 1 00:00 pca-decomposition\n")
    u.shell_output("find /root/.claude/skills -name SKILL.md", "/root/.claude/skills/a-b/SKILL.md\n")
    u.shell_output("ls /root/.codex/skills/mesh-analysis", "SKILL.md\nscripts\n")
    u.shell_output("ls /root/.codex/skills/nope", "ls: cannot access '/root/.codex/skills/nope': No such file")
    u.shell_output("ls /root/.codex/skills; cat notes", "zzz\n")
    u.shell_output("cat /root/.codex/skills/x/SKILL.md", "yyy\n")
    u.tool_call("list_directory", {"dir_path": "/root/.gemini/skills"},
                "Directory listing for /root/.gemini/skills:\n[DIR] threejs\n[FILE] notes.txt", )
    u.tool_call("run_shell_command", {"command": "ls /root/.gemini/skills"},
                "Command: ls /root/.gemini/skills\nDirectory: (root)\nOutput: obj-export\nError: (none)\nExit Code: 0")
    assert list(u.seen) == ["fuzzy-match", "pdf", "pca-decomposition", "a-b", "mesh-analysis", "threejs",
                            "obj-export"]
    assert u.rules == {}  # a listing is never use
    u.log_line("WARN failed to load skill /root/.codex/skills/threejs/SKILL.md: invalid YAML")
    assert u.unloadable == {"threejs": "invalid YAML"}


# ---------------------------------------------------------------- JSON logs streamed (issue 53)
@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 22])
def test_json_items_equals_a_whole_parse_at_every_chunk_boundary(tmp_path, monkeypatch, chunk):
    """The streamed top level equals json.load of the same document whatever the chunk size cuts
    (numbers, escapes, multi-byte characters, long strings, nested arrays, empty arrays, pretty
    printing); bad documents are one line naming the file and the character offset."""
    from skillaudit.importers.trajectories import stream

    monkeypatch.setattr(stream, "CHUNK", chunk)
    docs = [
        {"schema_version": "ATIF-v1.8", "n": 1234567890123, "f": -1.5e-7, "t": True, "z": None, "e": [],
         "steps": [{"id": i, "s": "é—✓\\\"x" * (i % 3), "deep": [[1, [2.25, {"a": "b"}]]], "big": "y" * 300}
                   for i in range(12)], "tail": {"k": [3, 4]}},
        [{"episode": 0, "prompt": "p"}, 12, "s", [], {}],
        {}, [],
    ]
    for i, doc in enumerate(docs):
        for indent in (None, 1):
            p = tmp_path / f"d{i}-{indent}.json"
            p.write_text(json.dumps(doc, indent=indent, ensure_ascii=False), encoding="utf-8")
            got = list(stream.json_items(str(p)))
            if isinstance(doc, list):
                assert got == [(None, x) for x in doc]
            else:
                want = []
                for k, v in doc.items():
                    want += [(k, stream.ARRAY), *((k, x) for x in v)] if isinstance(v, list) else [(k, v)]
                assert got == want
    bad = tmp_path / "bad.json"
    for text, what in (('{"a": [1, 2 3]}', "expected ',' or ']' between array elements"), ('{"a": tru}', "Expecting value"),
                       ('[1, 2', "expected ',' or ']'"), ('{"a": "unterminated', "Unterminated string"),
                       ('[1] x', "extra data"), ('"just a string"', "top level")):
        bad.write_text(text)
        with pytest.raises(stream.InputError, match=what) as exc:
            list(stream.json_items(str(bad)))
        assert str(exc.value).startswith(f"{bad}:") and "\n" not in str(exc.value)


def test_streamed_readers_read_what_the_whole_document_says(tmp_path):
    """ATIF, the Gemini CLI session, OpenHands' events and the episode list give the same skill use
    streamed as the real files' hand readings (the real-file tests above) and on constructed ones."""
    from skillaudit.importers.trajectories.openhands import read_openhands

    p = tmp_path / "oh.json"
    p.write_text(json.dumps({"history": [{"action": "run", "args": {"command": "bash /x/skills/sh/run.sh"}},
                                         {"action": "finish", "args": {}}]}, indent=2))
    t = read_openhands(str(p))
    assert dict(t.rules) == {"sh": "shell run"} and t.complete
    p.write_text(json.dumps({"history": "no"}))
    assert read_openhands(str(p)).problem is not None
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"messages": [{"toolCalls": [{"name": "activate_skill", "args": {"name": "pdf"},
                                                          "status": "success"}]}]}))
    assert "not a Gemini CLI session" in read_gemini_session(str(g)).problem  # no sessionId: unreadable
    g.write_text(json.dumps({"sessionId": "s", "messages": [{"toolCalls": [
        {"name": "activate_skill", "args": {"name": "pdf"}, "status": "success",
         "description": "Activates (Available: 'pdf', 'docx')"}]}]}, indent=4))
    t = read_gemini_session(str(g))
    assert t.used == ("pdf",) and t.offered == ("pdf", "docx") and t.offered_known


@pytest.mark.parametrize("block", [1, 5, 64, 1 << 22])
def test_log_lines_with_gives_each_matching_line_once_at_any_block_size(tmp_path, monkeypatch, block):
    """Only lines holding a match come back, whole and once (two matches in a line), in order,
    wherever the block boundary falls; a line over MAX_LOG_LINE is skipped (not held); the last
    line without a newline counts."""
    import re

    from skillaudit.importers.trajectories import base

    monkeypatch.setattr(base, "BLOCK", block)
    monkeypatch.setattr(base, "MAX_LOG_LINE", 40)
    lines = [b'{"a":1}\n', b'{"tool_use":1,"tool_use":2}\n', b"x" * 100 + b'"tool_use"\n', b"plain\n",
             b'{"init":true}\n', b'"tool_use" last']
    p = tmp_path / "log.txt"
    p.write_bytes(b"".join(lines))
    got = list(base.log_lines_with(str(p), re.compile(rb'"tool_use"|"init"')))
    assert got == [lines[1], lines[4], lines[5]]


def test_claude_code_listings_show_skills_seen(tmp_path):
    """Issue 53: a Claude Code `Bash` ls of the skills folder and its tool_result (a user line) show
    the skills present: seen, not used; an LS tool's result the same; an error result shows nothing;
    tool results of other calls are never parsed."""
    lines = [{"type": "system", "subtype": "init", "skills": []},
             {"type": "assistant", "message": {"content": [
                 {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls ~/.claude/skills"}},
                 {"type": "tool_use", "id": "t2", "name": "LS", "input": {"path": "/root/.agents/skills"}},
                 {"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "ls /x/skills/"}},
                 {"type": "tool_use", "id": "t4", "name": "Bash", "input": {"command": "cat notes.txt"}}]}},
             {"type": "user", "message": {"content": [
                 {"type": "tool_result", "tool_use_id": "t1", "content": "pdf\ndocx\n"},
                 {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "- threejs/\n"}]},
                 {"type": "tool_result", "tool_use_id": "t3", "content": "secret\n", "is_error": True},
                 {"type": "tool_result", "tool_use_id": "t4", "content": "skills/nope/SKILL.md\n"}]}},
             {"type": "result", "subtype": "success"}]
    p = tmp_path / "claude-code.txt"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    t = read_claude_code(str(p))
    assert t.used == () and t.seen == ("pdf", "docx", "threejs") and t.complete
