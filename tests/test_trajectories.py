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
