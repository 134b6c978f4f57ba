"""Paired metrics against hand-computed cases and the OAE identity."""

from __future__ import annotations

import numpy as np
import pytest
from _factories import pair

from skillaudit.analysis.metrics import compute_metrics
from skillaudit.runs import load_runs

# t1 b cond, t2 c cond, t3 cond no flip, t4 b skip, t5 skip, t6 c skip (invoked, empty), t7 b cond
HAND = (
    pair("t1", True, False, retrieved=["a"])
    + pair("t2", False, True, retrieved=["a", "b"])
    + pair("t3", True, True, retrieved=["b"])
    + pair("t4", True, False)
    + pair("t5", False, False)
    + pair("t6", False, True, retrieved=[])
    + pair("t7", True, False, retrieved=["a"])
)


def test_every_metric_matches_hand_computation(write_jsonl):
    """Counts, OAE, RAE, delta_skip, aggregate lift and selection gap equal the hand values."""
    g = compute_metrics(load_runs([write_jsonl(HAND)]), n_boot=200).groups[0]
    assert (g.n_pairs, g.n_cond, g.n_skip) == (7, 4, 3)
    assert (g.b, g.c, g.cond_b, g.cond_c, g.skip_b, g.skip_c) == (3, 2, 2, 1, 1, 1)
    assert g.acc_enabled == pytest.approx(4 / 7) and g.acc_disabled == pytest.approx(3 / 7)
    assert g.oae == pytest.approx(1 / 7)
    assert g.rae == pytest.approx(1 / 4)
    assert g.delta_skip == pytest.approx(0.0)
    assert g.agg_lift == pytest.approx(3 / 4 - 1 / 3)
    assert g.selection_gap == pytest.approx(2 / 4 - 1 / 3)
    assert g.sign_disagreement is False
    assert g.reportable is False  # 4 < 10
    assert g.mcnemar_p == pytest.approx(1.0) and g.mcnemar_p_cond == pytest.approx(1.0)
    assert g.funnel == {"pairs": 7, "invoked": 5, "retrieved": 4, "adhered": None,
                        "adherence_known": 0, "effective": 2}


def test_sign_disagreement_when_lift_and_rae_disagree(write_jsonl):
    """Easy retrieved tasks give a positive lift while the same tasks got worse with skills."""
    recs = []
    for i in range(10):  # retrieved, easy: pass disabled, 8 of 10 still pass enabled -> 2 harms
        recs += pair(f"r{i}", i >= 2, True, retrieved=["s"])
    for i in range(10):  # skipped, hard: fail both
        recs += pair(f"s{i}", False, False)
    g = compute_metrics(load_runs([write_jsonl(recs)]), n_boot=200).groups[0]
    assert g.agg_lift == pytest.approx(0.8) and g.rae == pytest.approx(-0.2)
    assert g.sign_disagreement is True and g.reportable is True
    assert g.selection_gap == pytest.approx(1.0)


def test_oae_identity_holds_on_random_logs(write_jsonl):
    """OAE = (n_cond/n_pairs) RAE + (n_skip/n_pairs) delta_skip on random data."""
    rng = np.random.default_rng(5)
    recs = []
    for i in range(200):
        r = rng.random() < 0.4
        recs += pair(f"t{i}", bool(rng.random() < 0.5), bool(rng.random() < 0.5),
                     retrieved=["a"] if r else None, model="m", benchmark=f"b{i % 2}")
    res = compute_metrics(load_runs([write_jsonl(recs)]), n_boot=100)
    assert len(res.groups) == 3 and res.groups[-1].benchmark == "*"
    for g in res.groups:
        lhs = g.oae
        rhs = g.n_cond / g.n_pairs * g.rae + g.n_skip / g.n_pairs * g.delta_skip
        assert lhs == pytest.approx(rhs, abs=1e-12)
        assert g.b - g.c == (g.cond_b - g.cond_c) + (g.skip_b - g.skip_c)


def test_epochs_are_pooled_before_rates(write_jsonl):
    """Counts are summed over epochs: 3 epochs of one task count as 3 pairs of one task."""
    recs = (pair("t", True, False, retrieved=["a"], epoch=1) + pair("t", True, True, retrieved=["a"], epoch=2)
            + pair("t", False, False, retrieved=["a"], epoch=3) + pair("u", False, True, retrieved=["a"]))
    g = compute_metrics(load_runs([write_jsonl(recs)]), n_boot=100).groups[0]
    assert (g.n_pairs, g.n_tasks, g.n_cond, g.cond_b, g.cond_c) == (4, 2, 4, 1, 1)
    assert g.rae == pytest.approx(0.0)


def test_undefined_rates_are_none(write_jsonl):
    """With nothing retrieved, RAE, lift and selection gap are None, not NaN or zero."""
    g = compute_metrics(load_runs([write_jsonl(pair("t", True, False) + pair("u", False, False))]),
                        n_boot=100).groups[0]
    assert g.rae is None and g.agg_lift is None and g.selection_gap is None and g.rae_ci is None
    assert g.sign_disagreement is False and g.oae == pytest.approx(0.5)


def test_pooled_group_per_model(write_jsonl):
    """Each model gets its (model, benchmark) groups and one pooled '*' group."""
    recs = (pair("t", True, False, model="m1", benchmark="x") + pair("t", True, True, model="m1", benchmark="y")
            + pair("t", False, True, model="m2", benchmark="x"))
    res = compute_metrics(load_runs([write_jsonl(recs)]), n_boot=50)
    assert [(g.model, g.benchmark, g.n_pairs) for g in res.groups] == [
        ("m1", "x", 1), ("m1", "y", 1), ("m1", "*", 2), ("m2", "x", 1), ("m2", "*", 1)]


def test_ci_contains_point_estimate_and_is_seeded(write_jsonl):
    """Bootstrap intervals bracket the estimate and repeat exactly with the same seed."""
    rng = np.random.default_rng(1)
    recs = []
    for i in range(120):
        recs += pair(f"t{i}", bool(rng.random() < 0.6), bool(rng.random() < 0.5), retrieved=["a"] if i % 2 else None)
    runs = load_runs([write_jsonl(recs)])
    a, b = compute_metrics(runs, n_boot=2000, seed=3).groups[0], compute_metrics(runs, n_boot=2000, seed=3).groups[0]
    assert a.rae_ci == b.rae_ci
    assert a.rae_ci[0] <= a.rae <= a.rae_ci[1] and a.oae_ci[0] <= a.oae <= a.oae_ci[1]
    assert a.agg_lift_ci[0] <= a.agg_lift <= a.agg_lift_ci[1]


def test_rae_interval_covers_and_agrees_with_its_test_on_sparse_one_sided_flips():
    """0.028 harm, no rescue, 143 tasks (issue 27): over 150 data sets the RAE interval covers the
    truth in >= 90% and excludes 0 exactly when the displayed p <= 0.05; never zero-width."""
    import orjson

    from skillaudit.runs import read_text_records
    from skillaudit.runs.simulate import sparse_flips

    cover = 0
    for seed in range(150):
        recs, truth = sparse_flips(seed)
        runs = read_text_records("".join(orjson.dumps(r).decode() + "\n" for r in recs), name="<s>")
        g = compute_metrics(runs, n_boot=0).groups[-1]
        lo, hi = g.rae_ci
        assert hi > lo
        assert (lo > 0 or hi < 0) == (g.p_cond <= 0.05)
        cover += lo <= truth <= hi
    assert cover >= 0.90 * 150


def test_accuracy_interval_counts_tasks_not_epochs():
    """100 tasks x 3 identical epochs, half passing: the Wilson interval of 100 tasks, [40.4, 59.6]."""
    import orjson

    from skillaudit.runs import read_text_records

    recs = []
    for t in range(100):
        for e in (1, 2, 3):
            ok = t < 50
            common = {"task_id": f"t{t}", "model": "m", "benchmark": "b", "epoch": e}
            recs.append({**common, "condition": "enabled", "correct": ok, "retrievals": []})
            recs.append({**common, "condition": "disabled", "correct": ok})
    runs = read_text_records("".join(orjson.dumps(r).decode() + "\n" for r in recs), name="<s>")
    g = compute_metrics(runs, n_boot=0).groups[-1]
    assert [round(v * 100, 1) for v in g.acc_enabled_ci] == [40.4, 59.6]


def test_k_of_n_counts_do_not_depend_on_how_trials_are_numbered(write_jsonl):
    """Issue 51 F6: 3 trials per side, 2 passes with skills and 1 without on task t, 1 and 2 on u:
    however the trials are numbered, metrics' rescues/harms are the tasks' summed flips (1 and 1)
    and rank's per-skill b/c too; the pair-level counts would read 2/1 or 1/0 by numbering."""
    from skillaudit.analysis.attribution import attribute

    def trials(order_on, order_off):
        recs = []
        for task, on, off in (("t", [True, True, False], [True, False, False]),
                              ("u", [True, False, False], [True, True, False])):
            for e in range(3):
                recs += [{"task_id": task, "condition": "enabled", "epoch": e + 1, "correct": on[order_on[e]],
                          "retrievals": [{"query": "q", "skills": [{"id": "a"}], "error": None}]},
                         {"task_id": task, "condition": "disabled", "epoch": e + 1, "correct": off[order_off[e]]}]
        return load_runs([write_jsonl(recs)])

    seen = set()
    for order_on, order_off in (((0, 1, 2), (0, 1, 2)), ((0, 2, 1), (1, 2, 0)), ((2, 1, 0), (0, 1, 2))):
        runs = trials(order_on, order_off)
        g = compute_metrics(runs, n_boot=0).groups[0]
        row = attribute(runs, n_boot=0).get("a")
        seen.add((g.b, g.c, g.cond_b, g.cond_c, row.b, row.c, row.exclusive_b, row.exclusive_c, g.p_cond))
        pair_level = (int((runs.flip > 0).sum()), int((runs.flip < 0).sum()))
    assert seen == {(1, 1, 1, 1, 1, 1, 1, 1, g.p_cond)}
    assert pair_level != (1, 1)
