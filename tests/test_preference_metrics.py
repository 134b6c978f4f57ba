"""Issue 56 step 1b: metrics on the judged outcome. Wins and losses are flips, ties are not; the
exact test is scipy's binomtest with one pair per task; the score test and its Tango interval keep
their size and coverage by simulation, with one pair per task and with epochs (cluster-adjusted)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from skillaudit.analysis.metrics import preference_figures
from skillaudit.cli import cli


def test_metrics_json_groups_carry_the_preference(tmp_path):
    rng = np.random.default_rng(2)
    prefs = rng.choice(["win", "tie", "loss"], size=60, p=[0.45, 0.2, 0.35])
    recs = []
    for i, p in enumerate(prefs):
        recs += [{"task_id": f"t{i}", "condition": "enabled", "correct": True, "preference": str(p)},
                 {"task_id": f"t{i}", "condition": "disabled", "correct": True}]
    recs += [{"task_id": "unjudged", "condition": c, "correct": True} for c in ("enabled", "disabled")]
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0", "--json"]).stdout)
    pref = doc["groups"][0]["preference"]
    w, t, lo = (int((prefs == k).sum()) for k in ("win", "tie", "loss"))
    assert (pref["wins"], pref["ties"], pref["losses"], pref["n_pairs"], pref["n_tasks"]) == (w, t, lo, 60, 60)
    assert pref["effect"] == pytest.approx((w - lo) / 60)
    assert pref["p_exact"] == pytest.approx(stats.binomtest(w, w + lo, 0.5).pvalue, rel=1e-9)
    assert pref["test_exact"] == "exact sign test of wins against losses"
    assert (pref["ci"][0] > 0 or pref["ci"][1] < 0) == (pref["p"] <= 0.05)  # the interval inverts its test


def test_no_judged_pair_no_preference(tmp_path):
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps({"task_id": "t", "condition": c, "correct": True}) + "\n"
                           for c in ("enabled", "disabled")))
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(log), "--bootstrap", "0", "--json"]).stdout)
    assert doc["groups"][0]["preference"] is None


@pytest.mark.parametrize("epochs", [1, 3])
def test_size_and_coverage_by_simulation(epochs):
    """2,000 simulated sets of 20-120 tasks: with no effect the score test rejects in 3-6% of them;
    with an effect the interval covers it in >= 93%. With epochs a task's judgments share a task
    effect (they are not independent), which the cluster-adjusted test accounts for."""
    rng = np.random.default_rng(40 + epochs)
    sims, rejected, covered = 2000, 0, 0
    for s in range(sims):
        n = int(rng.integers(20, 121))
        units = np.repeat(np.arange(n), epochs)
        tie = rng.uniform(0.1, 0.5)
        if s % 2 == 0:  # null: wins and losses equally likely within every task
            lean = np.repeat(rng.uniform(-0.3, 0.3, n) * 0, epochs)
        else:
            lean = np.repeat(np.clip(rng.normal(0.15, 0.25, n), -0.9, 0.9), epochs)
        pw = (1 - tie) * (1 + lean) / 2
        r = rng.random(units.size)
        pref = np.where(r < pw, 1, np.where(r < 1 - tie, -1, 0)).astype(np.int8)
        f = preference_figures(pref, units)
        if s % 2 == 0:
            rejected += f["p"] <= 0.05
        else:
            true = float(np.mean((1 - np.repeat(tie, 1)) * np.clip(lean[::epochs], -0.9, 0.9)))
            covered += f["ci"] is not None and f["ci"][0] <= true <= f["ci"][1]
    size, cover = rejected / (sims / 2), covered / (sims / 2)
    assert 0.03 <= size <= 0.06, size
    assert cover >= 0.93, cover


def test_rank_json_rows_carry_each_skills_judged_outcome(tmp_path):
    """Per skill, the judged pairs that retrieved it: wins, ties, losses and the same tests."""
    rng = np.random.default_rng(4)
    recs, truth = [], {"a": [], "b": []}
    for i in range(80):
        skill = "a" if i % 2 else "b"
        p = str(rng.choice(["win", "tie", "loss"], p=[0.6, 0.1, 0.3] if skill == "a" else [0.3, 0.2, 0.5]))
        truth[skill].append(p)
        recs += [{"task_id": f"t{i}", "condition": "enabled", "correct": True, "retrieved": [skill],
                  "preference": p}, {"task_id": f"t{i}", "condition": "disabled", "correct": True}]
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    doc = json.loads(CliRunner().invoke(cli, ["rank", str(log), "--bootstrap", "0", "--json"]).stdout)
    rows = {r["skill_id"]: r for r in doc["skills"]}
    for skill, prefs in truth.items():
        got = rows[skill]["preference"]
        w, lo = prefs.count("win"), prefs.count("loss")
        assert (got["wins"], got["ties"], got["losses"]) == (w, prefs.count("tie"), lo)
        assert got["p_exact"] == pytest.approx(stats.binomtest(w, w + lo, 0.5).pvalue, rel=1e-9)
