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
         "condition 'self-generated' is neither with-skills nor without-skills "
         "(map it with --enabled-value / --disabled-value)"),
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


# ---------------------------------------------------------------- the published SkillsBench files
REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
REGISTRY = REAL / "skillsbench-results-registry.json"
needs_real = pytest.mark.skipif(not REGISTRY.is_file(), reason="../shared/data/real is absent")


def _figures(path: Path) -> list[tuple]:
    from skillaudit.analysis.metrics import compute_metrics

    res = compute_metrics(load_runs([str(path)]), n_boot=200, seed=1)
    return [(g.model, g.benchmark, g.n_pairs, g.n_tasks, g.oae, g.oae_ci, g.mcnemar_p, g.oae_p_test,
             g.b, g.c, g.acc_enabled, g.acc_disabled) for g in res.groups]


@needs_real
def test_registry_totals_per_agent_equal_pass_counts() -> None:
    """Each agent's imported passes per condition equal the registry's passCount sums, out of its trials sums."""
    rows = json.loads(REGISTRY.read_text())
    records, report = import_skillsbench([str(REGISTRY)])
    want: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        side = "enabled" if r["condition"] == "With Skills" else "disabled"
        acc = want.setdefault((r["model"], side), [0, 0])
        acc[0] += r["passCount"]
        acc[1] += r["trials"]
    got: dict[tuple[str, str], list[int]] = {}
    for r in records:
        acc = got.setdefault((r["model"], r["condition"]), [0, 0])
        acc[0] += r["correct"]
        acc[1] += 1
    assert got == want and len({m for m, _ in got}) == 18
    assert report.pairs == sum(r["trials"] for r in rows) // 2 and not report.unpaired
    assert all(r["use_logged"] is False and r["offered"] == [f"{r['task_id']}/skills"]
               for r in records if r["condition"] == "enabled")


@needs_real
def test_registry_order_changes_no_figure(tmp_path: Path) -> None:
    """Reversing the registry's rows gives the same records (but for their source index) and the same metrics."""
    rows = json.loads(REGISTRY.read_text())
    rev = tmp_path / "rev.json"
    rev.write_text(json.dumps(rows[::-1]))
    out = []
    for src in (REGISTRY, rev):
        records, _ = import_skillsbench([str(src)])
        path = tmp_path / f"{src.stem}.jsonl"
        write_records(records, str(path))
        for r in records:
            del r["meta"]["source"]
        out.append((records, _figures(path)))
    assert out[0][0] == out[1][0]
    assert out[0][1] == out[1][1]
    assert all(f[7] == "exact sign-flip test of each task's summed flips" for f in out[0][1])


@needs_real
def test_oae_test_is_task_level_whatever_the_trial_order(tmp_path: Path) -> None:
    """Re-numbering the disabled trials within each task changes neither the OAE, its CI and its p
    nor the b and c counts shown beside them (the tasks' summed flips, issue 51 F6)."""
    records, _ = import_skillsbench([str(REGISTRY)])
    path = tmp_path / "a.jsonl"
    write_records(records, str(path))
    for r in records:
        if r["condition"] == "disabled":
            r["epoch"] = 4 - r["epoch"]  # passes last instead of first
    shuffled = tmp_path / "b.jsonl"
    write_records(records, str(shuffled))
    a, b = _figures(path), _figures(shuffled)
    assert [f[:8] for f in a] == [f[:8] for f in b]
    assert [f[8:10] for f in a] == [f[8:10] for f in b]  # task-level counts: no trial order in them


def test_condition_names_and_value_maps(tmp_path: Path) -> None:
    """'With Skills', 'no_skills', 'NO SKILLS' match; --enabled-value / --disabled-value map other names."""
    rows = [{"task": "t", "model": "m", "condition": c, "trials": 2, "passCount": k}
            for c, k in (("With Skills", 2), ("no_skills", 0))]
    p = tmp_path / "reg.json"
    p.write_text(json.dumps(rows))
    records, report = import_skillsbench([str(p)])
    assert report.pairs == 2 and sum(r["correct"] for r in records) == 2
    rows = [{"task": "t", "model": "m", "condition": c, "trials": 1, "passCount": 1}
            for c in ("Curated Skills ", "BASELINE")]
    p.write_text(json.dumps(rows))
    _, report = import_skillsbench([str(p)])
    assert report.pairs == 0 and "--disabled-value" in report.unpaired[0].reason
    _, report = import_skillsbench([str(p)], disabled_values=["baseline"])
    assert report.pairs == 1


def test_registry_row_with_more_passes_than_trials_names_the_row(tmp_path: Path) -> None:
    """A k-of-n row with k > n is one error naming the file and the row."""
    p = tmp_path / "reg.json"
    p.write_text(json.dumps([{"task": "t", "model": "m", "condition": "No Skills", "trials": 3, "passCount": 4}]))
    with pytest.raises(ImportFormatError, match=r"reg\.json: \[0\]: \"passCount\" 4 exceeds \"trials\" 3"):
        import_skillsbench([str(p)])


@needs_real
def test_leaderboard_nested_trials_and_infrastructure_failures(tmp_path: Path) -> None:
    """Trials nested in results[].results[] are found; score_eligible false / error_type trials are error records."""
    src = REAL / "skillsbench-leaderboard" / "019e515b-26ad-7510-983f-f8f9f2db5ac6.json"
    data = json.loads(src.read_text())
    trials = data["results"][0]["results"]
    _, report = import_skillsbench([str(src)])
    assert report.enabled_read == len(trials) == 5
    assert {u.where for u in report.unpaired} == {f"{src}: results[0].results[{i}]" for i in range(5)}
    assert all(u.key.startswith("participant 019e4ed1") for u in report.unpaired)
    # the same submission with every trial an infrastructure failure, plus disabled partners
    for i, t in enumerate(trials):
        t.update(score_eligible=False, infra_failure_type="sandbox_timeout" if i % 2 else None,
                 error_type=None if i % 2 else "verifier_error", passed=False, reward=0.0)
    data["results"][0]["results"] = trials + [
        {**t, "condition": "without_skills", "score_eligible": True, "infra_failure_type": None,
         "error_type": None} for t in trials]
    bad = tmp_path / "infra.json"
    bad.write_text(json.dumps(data))
    records, report = import_skillsbench([str(bad)])
    assert records == [] and report.pairs == 0
    errs = [u for u in report.unpaired if u.condition == "enabled"]
    assert len(errs) == 5 and all(u.reason.startswith("error record (infrastructure, not a failure)") for u in errs)
    assert any("5 error record(s)" in n for n in report.notes)


def test_a_numeric_reward_is_kept_as_the_records_score(tmp_path: Path) -> None:
    """A trial's numeric reward (partial credit 0.45) is the record's `score`; pass/fail keys give none."""
    rows = [{"task": "t", "condition": "with-skills", "reward": 0.45},
            {"task": "t", "condition": "without-skills", "verifier_result": {"rewards": {"reward": 0.2}}},
            {"task": "u", "condition": "with-skills", "success": True},
            {"task": "u", "condition": "without-skills", "success": False}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    records, _ = import_skillsbench([str(path)], threshold=0.4)
    got = {(r["task_id"], r["condition"]): (r["correct"], r.get("score")) for r in records}
    assert got == {("t", "enabled"): (True, 0.45), ("t", "disabled"): (False, 0.2),
                   ("u", "enabled"): (True, None), ("u", "disabled"): (False, None)}
