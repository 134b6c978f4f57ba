"""Harbor importer: job/trial folders, sides from options or path words, error records, Claude Code skill use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.errors import ImportFormatError
from skillaudit.importers.harbor import _side_of_text, import_harbor, read_claude_code

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "harbor"
CC = REAL / "claude-code"
needs_real = pytest.mark.skipif(not CC.is_dir(), reason="../shared/data/real is absent")


@needs_real
def test_claude_code_pairs_carry_the_skills_their_trajectories_used():
    """offer-letter-generator used docx; threejs-to-obj was offered obj-exporter and used none."""
    records, report = import_harbor([str(CC / "main-with-skills-pass2"), str(CC / "main-without-skills-pass2")])
    assert report.pairs == 2 and report.records == 4
    by = {(r["task_id"], r["condition"]): r for r in records}
    offer = by[("offer-letter-generator", "enabled")]
    assert offer["retrievals"][0]["skills"] == ["docx"] and offer["offered"] == ["docx"] and offer["correct"]
    three = by[("threejs-to-obj", "enabled")]
    assert three["retrievals"] == [] and three["offered"] == ["obj-exporter"] and "use_logged" not in three
    assert {r["model"] for r in records} == {"claude-code:claude-haiku-4-5@20251001"}
    assert by[("offer-letter-generator", "disabled")]["correct"] is False
    assert "the word 'with-skills' in the path" in report.naming
    missing = [n for n in report.notes if "are not on disk" in n]
    assert len(missing) == 2 and "208 are not on disk" in missing[0]


@needs_real
def test_gemini_cli_pairs_from_its_flattened_paths_alone():
    """The Gemini CLI trial files pair from the skills / noskills words of their names; no trajectory is said so."""
    records, report = import_harbor([str(REAL / "gemini-cli")])
    assert report.pairs == 1
    en = next(r for r in records if r["condition"] == "enabled")
    assert en["use_logged"] is False and en["model"] == "gemini-cli:google/gemini-3-flash-preview"
    assert "the word 'noskills' in the path" in report.naming and "the word 'skills' in the path" in report.naming
    assert any("without a readable trajectory" in n for n in report.notes)


@needs_real
def test_explicit_sides_and_error_records(tmp_path):
    """--enabled/--disabled decide the side; exception_info, no verifier result and a text reward are error records."""
    job = tmp_path / "run-a"
    shutil.copytree(CC / "main-with-skills-pass2", job)
    trial = next(p for p in job.iterdir() if p.name.startswith("threejs"))
    for i, change in enumerate(({"exception_info": {"exception_type": "AgentTimeoutError"}},
                                {"verifier_result": None}, {"verifier_result": {"rewards": {"reward": "n/a"}}})):
        copy = job / f"{trial.name}-{i}"
        shutil.copytree(trial, copy)
        d = json.loads((copy / "result.json").read_text())
        d.update(change, trial_name=copy.name)
        (copy / "result.json").write_text(json.dumps(d))
    _, report = import_harbor(enabled=[str(job)], disabled=[str(CC / "main-without-skills-pass2")])
    assert report.pairs == 2
    reasons = sorted(u.reason for u in report.unpaired if u.condition == "enabled")
    assert reasons == ["error record (not a failure): no verifier result",
                       "error record (not a failure): the reward is not a number (n/a)",
                       "error record (not a failure): the trial raised AgentTimeoutError (exception_info)"]
    assert "--enabled" in report.naming


def test_path_words():
    """Path words decide the side; both sides' words in one path is ambiguous; skillsbench is no side word."""
    assert _side_of_text("jobs/main-without-skills-pass2/t__x")[:2] == ("disabled", "without-skills")
    assert _side_of_text("x__skills__citation-check")[:2] == ("enabled", "skills")
    assert _side_of_text("no-skills/run")[:2] == ("disabled", "no-skills")
    assert _side_of_text("skillsbench/run")[:2] == (None, None)
    assert _side_of_text("with-skills/vs/noskills")[2] is True


def _trial(folder: Path, **over) -> Path:
    folder.mkdir(parents=True)
    d = {"task_name": "t1", "trial_name": folder.name, "config": {"agent": {"name": "codex", "model_name": "m"}},
         "verifier_result": {"rewards": {"reward": 1.0}}, "exception_info": None}
    d.update(over)
    (folder / "result.json").write_text(json.dumps(d))
    return folder


def test_bad_input_names_the_file_and_place(tmp_path):
    """A task_id object instead of task_name, an ambiguous path, or invalid JSON: one line naming the file, exit 2."""
    bad = _trial(tmp_path / "with-skills" / "t1__a", task_name=None, task_id={"path": "/x"})
    with pytest.raises(ImportFormatError, match=r"t1__a/result\.json: task_name: expected the task's name"):
        import_harbor([str(tmp_path / "with-skills")])
    amb = _trial(tmp_path / "with-skills-vs-noskills" / "t1__b")
    with pytest.raises(ImportFormatError, match=r"names both sides"):
        import_harbor([str(amb.parent)])
    (bad / "result.json").write_text("{not json")
    res = CliRunner().invoke(cli, ["import", "harbor", str(bad), "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1].startswith(f"Error: {bad}/result.json:1: not valid JSON")
    assert not (tmp_path / "o.jsonl").exists()


def test_other_agents_trajectories_are_named_not_guessed(tmp_path):
    """A trial with an agent file skillaudit cannot read says so and its use is not logged."""
    on = _trial(tmp_path / "skills" / "t1__a")
    (on / "agent").mkdir()
    (on / "agent" / "codex.txt").write_text("{}\n")
    _trial(tmp_path / "noskills" / "t1__b", verifier_result={"rewards": {"reward": 0.0}})
    records, _ = import_harbor([str(tmp_path / "skills"), str(tmp_path / "noskills")])
    en = next(r for r in records if r["condition"] == "enabled")
    assert en["use_logged"] is False and "agent/codex.txt is not a trajectory format" in en["meta"]["no_trajectory"]


def test_claude_code_reads_skill_md_reads_and_dedupes_offers(tmp_path):
    """Duplicate init skills collapse; a Read or Bash of skills/<name>/SKILL.md counts as a use."""
    lines = [
        {"type": "system", "subtype": "init", "skills": ["a", "b", "a"]},
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "Read", "input": {"file_path": "/root/.claude/skills/b/SKILL.md"}},
            {"type": "tool_use", "name": "Bash", "input": {"command": "cat /x/skills/c/SKILL.md | head"}}]}},
        "not json at all",
    ]
    p = tmp_path / "claude-code.txt"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    t = read_claude_code(str(p))
    assert t.offered == ("a", "b") and t.used == ("b", "c") and t.problem is None
