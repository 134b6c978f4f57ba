"""SkillsBench-style importer: per-trial results with with-skills / without-skills conditions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillaudit.errors import ImportFormatError
from skillaudit.importers import write_records
from skillaudit.importers.skillsbench import import_skillsbench
from skillaudit.runs import load_runs

TRIALS = [
    {"task_id": "3d-scan-calc", "condition": "with-skills", "trial": 0, "reward": 1.0,
     "agent": "claude-code", "model": "opus", "skills_used": ["stl-parsing", "mass-calc"]},
    {"task_id": "3d-scan-calc", "condition": "without-skills", "trial": 0, "reward": 0.0,
     "agent": "claude-code", "model": "opus"},
    {"task_id": "3d-scan-calc", "condition": "with-skills", "trial": 1, "reward": 0.5,
     "agent": "claude-code", "model": "opus", "skills_used": ["stl-parsing"]},
    {"task_id": "3d-scan-calc", "condition": "without-skills", "trial": 1, "reward": 1.0,
     "agent": "claude-code", "model": "opus"},
    {"task_id": "lean4-proof", "condition": "no-skill", "trial": 0, "passed": True,
     "agent": "claude-code", "model": "opus"},
    {"task_id": "lean4-proof", "condition": "with-skill", "trial": 0, "passed": False,
     "agent": "claude-code", "model": "opus", "retrievals": [{"query": "lean", "skills": [{"id": "lean-tactics", "score": 2}]}]},
    {"task_id": "lean4-proof", "condition": "self-generated", "trial": 0, "passed": True,
     "agent": "claude-code", "model": "opus"},
    {"task_id": "cve-fix", "condition": "with-skills", "trial": 0, "reward": 1.0,
     "agent": "claude-code", "model": "opus", "exception_info": {"exception_message": "AgentTimeoutError"}},
    {"task_id": "cve-fix", "condition": "without-skills", "trial": 0, "reward": 0.0,
     "agent": "claude-code", "model": "opus"},
]


def test_jsonl_trials_pair_by_task_and_trial(tmp_path: Path) -> None:
    """Trials pair on (agent:model, task, trial); reward >= 1 is a pass; 0-based trials become epochs 1.."""
    path = tmp_path / "trials.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TRIALS))
    records, report = import_skillsbench([str(path)])
    got = {(r["task_id"], r["epoch"], r["condition"]): r["correct"] for r in records}
    assert got == {
        ("3d-scan-calc", 1, "enabled"): True, ("3d-scan-calc", 1, "disabled"): False,
        ("3d-scan-calc", 2, "enabled"): False, ("3d-scan-calc", 2, "disabled"): True,
        ("lean4-proof", 1, "enabled"): False, ("lean4-proof", 1, "disabled"): True,
    }
    assert {r["model"] for r in records} == {"claude-code:opus"}
    assert {r["benchmark"] for r in records} == {"skillsbench"}
    key = "claude-code:opus/skillsbench/{} epoch 1"
    assert {(u.key, u.condition, u.reason) for u in report.unpaired} == {
        (key.format("lean4-proof"), "self-generated",
         "condition 'self-generated' is neither with-skills nor without-skills"),
        (key.format("cve-fix"), "enabled", "the trial errored: AgentTimeoutError"),
        (key.format("cve-fix"), "disabled", "no enabled run with this key"),
    }
    assert (report.enabled_read, report.disabled_read) == (4, 4)
    out = tmp_path / "runs.jsonl"
    write_records(records, str(out))
    runs = load_runs([str(out)])
    assert runs.n_pairs == 3 and set(runs.skills) == {"stl-parsing", "mass-calc", "lean-tactics"}


def test_json_object_with_trials_and_threshold(tmp_path: Path) -> None:
    """A JSON {"trials": [...]} file reads the same; --threshold turns partial rewards into passes."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"trials": TRIALS[:4]}))
    records, _ = import_skillsbench([str(path)], threshold=0.5)
    got = {(r["epoch"], r["condition"]): r["correct"] for r in records}
    assert got[(2, "enabled")] is True
    assert records[0]["meta"]["source"] == f"{path}: trials[0]"


def test_trials_without_index_are_numbered_in_file_order(tmp_path: Path) -> None:
    """Without a trial index, trials of one task and condition become epochs 1, 2, ... in file order."""
    rows = [{"task": "t", "condition": c, "success": ok}
            for c, ok in (("with-skills", True), ("with-skills", False), ("without-skills", False),
                          ("without-skills", False))]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    records, report = import_skillsbench([str(path)])
    assert [(r["epoch"], r["condition"], r["correct"]) for r in records] == [
        (1, "enabled", True), (1, "disabled", False), (2, "enabled", False), (2, "disabled", False)]
    assert any("list no skills used" in n for n in report.notes)


def test_missing_condition_is_a_format_error(tmp_path: Path) -> None:
    """A trial without a condition fails naming the file and line."""
    path = tmp_path / "t.jsonl"
    path.write_text('{"task_id": "a", "reward": 1}\n')
    with pytest.raises(ImportFormatError, match=rf"^{path}:1: a trial needs a \"condition\""):
        import_skillsbench([str(path)])
