"""Library level: mean effect per injected skill, the heterogeneity test, relative effects, verdicts."""

from __future__ import annotations

import itertools

import numpy as np
import orjson
import pytest

from skillaudit.analysis import library_effect as library_effect_module
from skillaudit.analysis import regression as regression_module
from skillaudit.analysis.attribution import attribute
from skillaudit.analysis.library_effect import (
    _merged_design,
    _permutation_plan,
    heterogeneity_test,
    permutation_variance,
)
from skillaudit.analysis.regression import SkillEffectRegression
from skillaudit.runs import read_text_records
from skillaudit.runs.simulate import collinear_pair, scenario
from skillaudit.stats._csr import Csr


def _runs(rows):
    """rows: (task, epoch, y_pos, y_neg, skills) -> PairedRuns through the real loader."""
    lines = []
    for task, epoch, y_pos, y_neg, skills in rows:
        common = {"task_id": f"t{task}", "epoch": epoch, "model": "m"}
        en = {**common, "condition": "enabled", "correct": bool(y_pos)}
        if skills:
            en["retrievals"] = [{"query": "q", "skills": [{"id": s} for s in skills]}]
        lines += [orjson.dumps(en).decode(), orjson.dumps({**common, "condition": "disabled",
                                                           "correct": bool(y_neg)}).decode()]
    return read_text_records("\n".join(lines) + "\n")


def _world(seed, n_tasks=150, n_skills=8, epochs=2, harm=None, derail=0.0, by_difficulty=False):
    """Random retrieval of 1-3 skills per task (the same in every epoch); `harm` maps a skill to the
    extra probability it derails a passing run; `derail` applies to every injected skill alike.
    With `by_difficulty`, skill s0 is retrieved only by tasks that pass without skills."""
    rng = np.random.default_rng(seed)
    harm = harm or {}
    rows = []
    for t in range(n_tasks):
        p_pass = rng.uniform(0.1, 0.9)
        k = int(rng.integers(1, 4))
        skills = [f"s{j}" for j in rng.choice(n_skills, size=k, replace=False)]
        for e in range(1, epochs + 1):
            y_neg = rng.random() < p_pass
            if by_difficulty:
                skills = ["s0", *skills[1:]] if y_neg else [s for s in skills if s != "s0"] or ["s1"]
            y_pos = rng.random() < p_pass if rng.random() < 0.5 else y_neg
            for s in skills:
                if rng.random() < derail + harm.get(s, 0.0):
                    y_pos = False
            rows.append((t, e, y_pos, y_neg, skills))
    return _runs(rows)


def _fit(runs, n_boot=300):
    rows = np.flatnonzero(runs.retrieved)
    h = runs.retrieval
    X = Csr(np.ones(h.nnz), h.indices, h.indptr, h.shape).take_rows(rows)
    y = runs.flip.astype(float)[rows]
    units = runs.unit_ids()[rows]
    reg = SkillEffectRegression(n_boot=n_boot, random_state=0).fit(X, y, units)
    return reg, X, y, units, runs.y_neg[rows]


def test_mean_effect_is_the_unpenalised_mean_flip_per_injected_skill():
    """mean_effect = sum of flips / injected skills (N), with the score interval of the mean flip per pair scaled by pairs / N around it."""
    from skillaudit.stats import paired_score

    runs = _world(1, derail=0.2)
    res = attribute(runs, n_boot=300)
    rows = np.flatnonzero(runs.retrieved)
    flips, big_n = runs.flip[rows], int(np.diff(runs.retrieval.indptr)[rows].sum())
    assert res.library.mean_effect == pytest.approx(flips.sum() / big_n, rel=1e-12)
    sc = paired_score(runs.unit_ids()[rows], flips.astype(np.int64), 0.95)
    lo, hi = res.library.mean_effect_ci
    assert (lo, hi) == pytest.approx((sc.ci[0] * rows.size / big_n, sc.ci[1] * rows.size / big_n))
    assert lo < res.library.mean_effect < hi
    assert res.library.flip_p == pytest.approx(sc.p)


def _by_hand_stratified(runs, skill, reference, judged):
    """Expected net of `skill`'s retrieving pairs (those `judged` keeps) from the rescue and harm
    rates (+1/2 over +1) of the `reference` pairs without it in the same (disabled outcome,
    retrieved-set size) stratum."""
    rows = np.flatnonzero(runs.retrieved)
    ids = list(runs.skills)
    k = ids.index(skill)
    h = runs.retrieval
    sets = [set(h.indices[h.indptr[i]:h.indptr[i + 1]].tolist()) for i in rows]
    size = [min(len(x), 4) for x in sets]
    yneg, flip = runs.y_neg[rows], np.abs(runs.flip[rows])
    expected = 0.0
    for i, x in enumerate(sets):
        if k not in x or not judged(x):
            continue
        same = [j for j in range(rows.size) if size[j] == size[i] and yneg[j] == yneg[i]
                and k not in sets[j] and reference(sets[j])]
        rate = (sum(flip[j] for j in same) + 0.5) / (len(same) + 1.0)
        expected += -rate if yneg[i] else rate
    observed = sum(int(runs.flip[rows[i]]) for i, x in enumerate(sets) if k in x and judged(x))
    return expected, observed, sum(k in x and judged(x) for x in sets)


def test_relative_effect_is_observed_minus_expected_net_on_the_same_kind_of_task():
    """relative_effect_k = (observed net - net the other skills' rates predict in its strata) / n_k, by hand; the second pass leaves the first pass's worse skill out of the reference and judges the others on their pairs without it."""
    runs = _world(2, harm={"s3": 0.6}, n_tasks=300)
    res = attribute(runs, n_boot=0)
    by_id = {s.skill_id: s for s in res.skills}
    assert by_id["s3"].relative_q <= 0.1 and by_id["s3"].relative_effect < 0
    s3 = list(runs.skills).index("s3")
    for s in ("s1", "s3", "s5"):
        judged = (lambda x: True) if s == "s3" else (lambda x: s3 not in x)
        expected, observed, n_k = _by_hand_stratified(runs, s, lambda x: s3 not in x, judged)
        assert by_id[s].expected_net == pytest.approx(expected, rel=1e-9)
        assert by_id[s].relative_effect == pytest.approx((observed - expected) / n_k, rel=1e-9)


def test_relative_interval_inverts_its_exact_test():
    """Over many worlds the relative CI excludes 0 exactly when relative_p <= 0.05, and a skill on fewer than 5 tasks gets no q."""
    seen = 0
    for seed in range(12):
        res = attribute(_world(seed, n_tasks=120, harm={"s1": 0.3}), n_boot=0)
        for s in res.skills:
            if s.relative_ci is None or s.relative_p is None:
                continue
            seen += 1
            lo, hi = s.relative_ci
            assert lo < hi
            assert (lo > 0 or hi < 0) == (s.relative_p <= 0.05), (seed, s.skill_id, s.relative_ci, s.relative_p)
            if s.n_tasks < 5:
                assert s.relative_q is None and s.relative_testable is False
    assert seen >= 90


def test_heterogeneity_test_is_exact_under_its_null():
    """Outcomes independent of which skills were retrieved: p <= 0.05 in at most 7% and p <= 0.2 in 12-28% of 300 data sets."""
    p = []
    for seed in range(300):
        reg, X, y, units, base = _fit(_world(seed, n_tasks=80, derail=0.15), n_boot=0)
        Z = _merged_design(X, reg.col_group_, reg.n_groups_)
        p.append(heterogeneity_test(Z, y, units, np.zeros(y.size, int), reg.group_n_ >= 5,
                                    n_perm=199, seed=seed, baseline=base)[1])
    p = np.array(p)
    assert (p <= 0.05).mean() <= 0.07
    assert 0.12 <= (p <= 0.2).mean() <= 0.28


def test_heterogeneity_test_finds_a_skill_that_differs():
    """One skill of 8 derailing passing runs half the time, 300 tasks x 2 epochs: p <= 0.01 in at least 18 of 20 data sets."""
    hits = 0
    for seed in range(20):
        reg, X, y, units, base = _fit(_world(seed, n_tasks=300, harm={"s2": 0.5}), n_boot=0)
        Z = _merged_design(X, reg.col_group_, reg.n_groups_)
        hits += heterogeneity_test(Z, y, units, np.zeros(y.size, int), reg.group_n_ >= 5,
                                   n_perm=499, seed=seed, baseline=base)[1] <= 0.01
    assert hits >= 18


def test_permutation_variance_is_the_variance_of_the_score_over_shuffles():
    """V_g, U_g's variance when residuals are shuffled within their cells, agrees with the variance
    of U_g over 20,000 real shuffles (within 5%) on columns that fill a cell partly, mostly or
    wholly (variance 0)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    n = 60
    cell = np.repeat([0, 1, 2], [30, 20, 10])
    y = rng.random(n) < 0.4
    r = y - (np.bincount(cell, weights=y) / np.bincount(cell))[cell]
    cols = [np.isin(np.arange(n), rng.choice(30, 6, replace=False)),  # a fifth of cell 0
            (cell == 1) & (np.arange(n) % 10 != 0),  # most of cell 1
            cell == 2,  # all of cell 2: shuffling cannot move it
            (np.arange(n) % 3 == 0)]  # across cells
    zt = sp.csr_matrix(np.array(cols, dtype=float))
    v = permutation_variance(zt, cell, r)
    shuffled = np.empty((20_000, len(cols)))
    for i in range(shuffled.shape[0]):
        rp = r.copy()
        for c in range(3):
            idx = np.flatnonzero(cell == c)
            rp[idx] = rp[rng.permutation(idx)]
        shuffled[i] = zt @ rp
    emp = shuffled.var(axis=0)
    assert v[2] == 0.0 and emp[2] < 1e-20
    np.testing.assert_allclose(v[[0, 1, 3]], emp[[0, 1, 3]], rtol=0.05)


def test_a_harmful_skill_that_fills_its_cells_is_not_masked():
    """Issue 51 F2's shape (a harmful skill retrieved with an innocent one by a quarter of 800
    tasks, the innocent alone in 4%): the like-with-like test rejects in 11 of seeds 0-11 (n_g in
    place of U_g's permutation variance: 8 of 12), the two-null test in at least 9; the harmful
    skill is pruned, rewritten or sent to mask arms in all 12 and never kept under a library
    verdict."""
    from skillaudit.analysis.library_effect import heterogeneity_tests
    from skillaudit.decide.recommend import recommend

    found = like = 0
    for seed in range(12):
        recs, truth = collinear_pair(seed)
        runs = read_text_records("".join(orjson.dumps(r).decode() + "\n" for r in recs))
        res = attribute(runs, n_boot=200, seed=seed)
        lib = res.library
        if lib.heterogeneity_p <= 0.05:
            assert lib.verdict == "skill-specific"
            found += 1
        reg, X, y, units, base = _fit(runs, n_boot=0)
        Z = _merged_design(X, reg.col_group_, reg.n_groups_)
        like += heterogeneity_tests(Z, y, units, np.zeros(y.size, int), reg.group_n_ >= 5, (), 999, seed,
                                    baseline=base)[0][1] <= 0.05
        bad = next(s for s, k in truth.items() if k == "harmful")
        r = recommend(runs, res).get(bad)
        assert r.action in ("prune", "rewrite") or "--arms mask" in r.reason, (seed, r.reason)
        assert r.rule != "S502"
    assert like >= 11 and found >= 9, (like, found)


def test_sequential_stopping_keeps_the_level_and_the_fixed_tests_decisions():
    """With decide_at=0.05 on 300 null data sets, p <= 0.05 in at most 7%, most tests stop at 200 permutations, and the decision equals the 999-permutation test's in at least 98%."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    rejected = same = early = 0
    for seed in range(300):
        reg, X, y, units, base = _fit(_world(seed, n_tasks=80, derail=0.15), n_boot=0)
        Z = _merged_design(X, reg.col_group_, reg.n_groups_)
        args = (Z, y, units, np.zeros(y.size, int), reg.group_n_ >= 5)
        seq = heterogeneity_tests(*args, n_perm=999, seed=seed, baseline=base, decide_at=0.05)[0]
        full = heterogeneity_tests(*args, n_perm=999, seed=seed, baseline=base)[0]
        assert full[2] == 999 and seq[2] in (200, 500, 999)
        assert seq[0] == full[0]  # the same statistic; only the number of permutations differs
        rejected += seq[1] <= 0.05
        same += (seq[1] <= 0.05) == (full[1] <= 0.05)
        early += seq[2] == 200
    assert rejected / 300 <= 0.07
    assert same / 300 >= 0.98
    assert early / 300 >= 0.7


def test_sequential_stopping_settles_a_clear_difference_after_200_permutations():
    """One skill derailing passing runs half the time (300 tasks x 2 epochs): the sequential test stops at 200 permutations with p = 1/201 in at least 18 of 20 data sets."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    hits = 0
    for seed in range(20):
        reg, X, y, units, base = _fit(_world(seed, n_tasks=300, harm={"s2": 0.5}), n_boot=0)
        Z = _merged_design(X, reg.col_group_, reg.n_groups_)
        _stat, p, b = heterogeneity_tests(Z, y, units, np.zeros(y.size, int), reg.group_n_ >= 5,
                                         n_perm=2000, seed=seed, baseline=base, decide_at=0.05)[0]
        hits += b == 200 and p == pytest.approx(1 / 201)
    assert hits >= 18


def test_comparing_like_with_like_keeps_skills_of_easy_tasks_from_looking_worse():
    """Every skill derails alike but s0 is retrieved only by tasks that pass without skills: comparing pairs of the same disabled outcome keeps the test at its level, ignoring it does not."""
    with_base = without = 0
    for seed in range(60):
        reg, X, y, units, base = _fit(_world(seed, derail=0.3, by_difficulty=True), n_boot=0)
        Z = _merged_design(X, reg.col_group_, reg.n_groups_)
        args = (Z, y, units, np.zeros(y.size, int), reg.group_n_ >= 5)
        with_base += heterogeneity_test(*args, n_perm=199, seed=seed, baseline=base)[1] <= 0.05
        without += heterogeneity_test(*args, n_perm=199, seed=seed)[1] <= 0.05
    assert with_base / 60 <= 0.1
    assert without / 60 >= 0.5


def test_tasks_are_permuted_whole_within_blocks_of_the_same_profile():
    """Tasks share a block only with the same stratum and sorted classes; each row maps to (task, position)."""
    units = np.array([0, 0, 1, 1, 2, 3])
    k = np.array([6, 2, 2, 6, 2, 2])  # task 0 and 1 have classes {2, 6}; 2 and 3 have {2}
    strata = np.array([0, 0, 0, 0, 0, 1])
    block, _, pos, row_at = _permutation_plan(units, k, strata)
    assert block[0] == block[1] and block[2] != block[3] and block[0] != block[2]
    assert row_at[0].tolist() == [1, 0] and row_at[1].tolist() == [2, 3]  # ordered by class
    assert pos.tolist() == [1, 0, 0, 1, 0, 0]


def test_verdicts_library_wide_skill_specific_and_none():
    """Dilution is library-wide with a library recommendation; planted entries are skill-specific; no effect is none."""
    wide = attribute(scenario("dilution", seed=0).runs(), n_boot=500).library
    assert wide.verdict == "library-wide" and wide.direction == "harm"
    assert wide.recommendation in ("gate-retrieval", "reduce-depth")
    assert "Harm is library-wide" in wide.text and "rather than prune entries" in wide.text
    specific = attribute(scenario("two-harmful", seed=0).runs(), n_boot=500).library
    assert specific.verdict == "skill-specific" and specific.heterogeneity_p <= 0.05
    null = attribute(_world(4, n_tasks=300), n_boot=500).library
    assert null.verdict == "none" and null.recommendation is None


def test_a_handful_of_flips_gets_no_library_verdict():
    """0 rescues vs 4 harms on 143 tasks: the score test (p = 0.046) and the interval it inverts agree, but fewer than 5 flips give no library verdict; 14 harms do."""
    rng = np.random.default_rng(7)
    rows = []
    for t in range(143):
        skills = [f"s{j}" for j in rng.choice(6, size=int(rng.integers(1, 4)), replace=False)]
        rows.append((t, 1, False, t < 4, skills))  # tasks 0-3 pass without skills, fail with them
    lib = attribute(_runs(rows), n_boot=2000).library
    assert lib.mean_effect_ci[1] < 0 and lib.flip_p == pytest.approx(0.0455, abs=1e-4)
    assert lib.verdict == "none" and lib.direction is None and lib.recommendation is None
    assert lib.text.startswith("Too few flips to place the library's harm")
    assert "0 rescues vs 4 harms on 143 tasks" in lib.text and "score test p = 0.046" in lib.text
    assert lib.text.endswith("no library verdict (one needs at least 5 flips)")
    rows = [(t, 1, False, t < 14, skills) for t, (_, _, _, _, skills) in enumerate(rows)]
    many = attribute(_runs(rows), n_boot=2000).library  # 14 harms: the test agrees
    assert many.flip_p < 0.001 and many.verdict == "library-wide" and many.direction == "harm"


def test_reduce_depth_only_when_harm_grows_with_the_number_of_skills():
    """Per-skill derailing (more skills, more harm) gives reduce-depth; harm per injection alone gives gate-retrieval."""
    per_skill = attribute(_world(5, n_tasks=600, derail=0.25), n_boot=500).library
    assert per_skill.depth_slope < 0 and per_skill.recommendation == "reduce-depth"
    rng = np.random.default_rng(6)
    rows = []
    for t in range(600):
        skills = [f"s{j}" for j in rng.choice(8, size=int(rng.integers(1, 4)), replace=False)]
        y_neg = bool(rng.random() < 0.6)
        rows.append((t, 1, y_neg and rng.random() > 0.4, y_neg, skills))
    per_injection = attribute(_runs(rows), n_boot=500).library
    assert per_injection.verdict == "library-wide"
    assert per_injection.recommendation == "gate-retrieval"


def test_sandwich_path_gives_intervals_close_to_the_bootstrap(monkeypatch):
    """For wide libraries the mean and relative intervals come from the sandwich and agree with the bootstrap."""
    runs = _world(7, n_tasks=800, harm={"s1": 0.3}, derail=0.1)
    boot = attribute(runs, n_boot=2000)
    monkeypatch.setattr(regression_module, "_MAX_BOOT_SKILLS", 3)
    sand = attribute(runs, n_boot=2000)
    assert sand.settings["regression_interval"] == "sandwich"
    assert sand.library.mean_effect == pytest.approx(boot.library.mean_effect)
    width = lambda ci: ci[1] - ci[0]  # noqa: E731
    assert width(sand.library.mean_effect_ci) == pytest.approx(width(boot.library.mean_effect_ci), rel=0.2)
    for s in sand.skills:
        b = boot.get(s.skill_id)
        if s.relative_ci and b.relative_ci:
            assert width(s.relative_ci) == pytest.approx(width(b.relative_ci), rel=0.2)
    assert sand.library.verdict == boot.library.verdict


def _two_strata(seed, **kw):
    """One world split into two strata by task parity, and stratum 0's own merged design."""
    runs = _world(seed, **kw)
    reg, X, y, units, base = _fit(runs, n_boot=0)
    Z = _merged_design(X, reg.col_group_, reg.n_groups_)
    task_no = np.array([int(runs.tasks[t][1:]) for t in runs.task[np.flatnonzero(runs.retrieved)]])
    strata = task_no % 2
    rows0 = np.flatnonzero(strata == 0)
    x0 = X.take_rows(rows0)
    reg0 = SkillEffectRegression(n_boot=0).fit(x0, y[rows0], units[rows0])
    z0 = _merged_design(x0, reg0.col_group_, reg0.n_groups_)
    return (Z, y, units, strata, reg.group_n_ >= 5, base), (rows0, z0, reg0.group_n_ >= 5)


def test_a_cell_tested_with_the_model_permutations_is_exact_under_its_null():
    """A stratum's test computed from the whole population's permutations: p <= 0.05 in at most 7% and p <= 0.2 in 12-28% of 300 null data sets."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    p = []
    for seed in range(300):
        (Z, y, units, strata, tested, base), sub = _two_strata(seed, n_tasks=120, derail=0.15)
        found = heterogeneity_tests(Z, y, units, strata, tested, [sub], n_perm=199, seed=seed, baseline=base)
        assert found[1] is not None
        p.append(found[1][1])
    p = np.array(p)
    assert (p <= 0.05).mean() <= 0.07
    assert 0.12 <= (p <= 0.2).mean() <= 0.28


def test_a_cell_tested_with_the_model_permutations_agrees_with_its_own_test():
    """The shared test of a stratum has the stand-alone test's statistic exactly and nearly its p-value (999 permutations each)."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    for seed in range(5):
        (Z, y, units, strata, tested, base), (rows0, z0, tested0) = _two_strata(
            seed, n_tasks=300, harm={"s2": 0.25})
        shared = heterogeneity_tests(Z, y, units, strata, tested, [(rows0, z0, tested0)], n_perm=999,
                                     seed=seed, baseline=base)[1]
        alone = heterogeneity_test(z0, y[rows0], units[rows0], strata[rows0], tested0, n_perm=999,
                                   seed=seed, baseline=base[rows0])
        assert shared[0] == pytest.approx(alone[0], rel=1e-12) and shared[2] == alone[2] == 999
        assert abs(shared[1] - alone[1]) <= 0.05


def test_a_cell_whose_classes_differ_is_left_to_its_own_test():
    """A subset whose rows' retrieved-set sizes differ under its own design is not tested with shared permutations (None)."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    (Z, y, units, strata, tested, base), (rows0, z0, tested0) = _two_strata(1, n_tasks=100)
    short = Csr.from_coo(np.arange(rows0.size), np.zeros(rows0.size, dtype=np.int64), np.ones(rows0.size),
                         (rows0.size, z0.shape[1]))  # every row one column: sizes differ from Z's
    found = heterogeneity_tests(Z, y, units, strata, tested, [(rows0, short, tested0)], n_perm=199, baseline=base)
    assert found[0] is not None and found[1] is None


def test_rank_cell_verdicts_use_the_shared_test(monkeypatch):
    """attribute_models runs one permutation test per model for its cells too, and each cell's verdict has the stand-alone test's statistic."""
    from skillaudit.analysis import library_effect as le
    from skillaudit.analysis.attribution import attribute_models, library_verdict

    calls = []
    real = le.heterogeneity_tests
    monkeypatch.setattr(le, "heterogeneity_tests", lambda *a, **k: calls.append(len(a[5])) or real(*a, **k))

    rows = []
    for t in range(240):
        rng = np.random.default_rng(t)
        skills = [f"s{j}" for j in rng.choice(8, size=int(rng.integers(1, 4)), replace=False)]
        y_neg = rng.random() < 0.5
        y_pos = (rng.random() < 0.5) if "s2" not in skills else False
        rows.append((t, 1, y_pos, y_neg, skills))
    lines = []
    for task, epoch, y_pos, y_neg, skills in rows:
        common = {"task_id": f"t{task}", "epoch": epoch, "model": "m", "benchmark": f"b{task % 2}"}
        lines.append(orjson.dumps({**common, "condition": "enabled", "correct": bool(y_pos),
                                   "retrievals": [{"query": "q", "skills": [{"id": s} for s in skills]}]}).decode())
        lines.append(orjson.dumps({**common, "condition": "disabled", "correct": bool(y_neg)}).decode())
    runs = read_text_records("\n".join(lines) + "\n")
    res = attribute_models(runs, n_boot=300, n_perm=499)
    # the model's two tests (like with like, then plain flips, which runs because the first
    # rejects), each with its two cells as subsets; no test of their own
    assert calls == [2, 2]
    cells = [e for e in res.library if e.benchmark != "*"]
    assert sorted(e.benchmark for e in cells) == ["b0", "b1"]
    for e in cells:
        alone = library_verdict(runs.select(benchmark=e.benchmark), n_boot=300, n_perm=499)
        assert e.heterogeneity_stat == pytest.approx(alone.heterogeneity_stat, rel=1e-12)
        assert e.mean_effect == pytest.approx(alone.mean_effect, rel=1e-12)
        # both stop where their permutations settle the verdict (sequential), at most at 499
        assert e.n_permutations <= 499 and abs(e.heterogeneity_p - alone.heterogeneity_p) <= 0.06


def _split_world(seed, n_tasks=500):
    """Odd tasks: skill s2 derails passing runs 80% more often; even tasks: every skill derails alike."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        p_pass = rng.uniform(0.2, 0.9)
        skills = [f"s{j}" for j in rng.choice(8, size=int(rng.integers(1, 4)), replace=False)]
        for e in (1, 2):
            y_neg = rng.random() < p_pass
            y_pos = rng.random() < p_pass if rng.random() < 0.5 else y_neg
            for s in skills:
                if rng.random() < 0.15 + (0.8 if (t % 2 and s == "s2") else 0.0):
                    y_pos = False
            rows.append((t, e, y_pos, y_neg, skills))
    runs = _runs(rows)
    reg, X, y, units, base = _fit(runs, n_boot=0)
    Z = _merged_design(X, reg.col_group_, reg.n_groups_)
    strata = np.array([int(runs.tasks[t][1:]) for t in runs.task[np.flatnonzero(runs.retrieved)]]) % 2
    rows0 = np.flatnonzero(strata == 0)
    x0 = X.take_rows(rows0)
    reg0 = SkillEffectRegression(n_boot=0).fit(x0, y[rows0], units[rows0])
    sub = (rows0, _merged_design(x0, reg0.col_group_, reg0.n_groups_), reg0.group_n_ >= 5)
    return (Z, y, units, strata, reg.group_n_ >= 5, base), sub


def test_a_subset_left_undecided_after_the_population_stopped_stays_exact():
    """The population test stops at 200 permutations (a clear harm in stratum 1); the null stratum 0 goes on permuting alone: p <= 0.05 in at most 7% of 200 data sets."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    p, stopped, alone = [], 0, 0
    for seed in range(200):
        args, sub = _split_world(seed)
        whole, cell = heterogeneity_tests(*args[:5], [sub], n_perm=999, seed=seed, baseline=args[5],
                                          decide_at=0.05)
        stopped += whole[2] == 200
        alone += whole[2] == 200 and cell[2] > 200  # went on permuting its stratum alone
        p.append(cell[1])
    assert stopped >= 180 and alone >= 10
    assert (np.array(p) <= 0.05).mean() <= 0.07


# ---------------------------------------------------------------- the C permutation loop (_perm)
needs_kernel = pytest.mark.skipif(library_effect_module._perm is None, reason="skillaudit.analysis._perm was not built")


@needs_kernel
def test_the_c_shuffle_draws_what_numpy_permuted_draws():
    """_perm.shuffle leaves the array and the generator as numpy's Generator.permuted does, block by block, over 40 random layouts."""
    from skillaudit.analysis import _perm

    for seed in range(40):
        g = np.random.default_rng(seed)
        n, b = int(g.integers(1, 500)), int(g.integers(1, 40))
        cuts = np.unique(np.concatenate([[0, n], g.integers(0, n + 1, size=int(g.integers(0, 25)))]))
        blocks = [(int(s), int(e)) for s, e in itertools.pairwise(cuts.tolist()) if e - s > 1]
        start = np.broadcast_to(g.permutation(n).astype(np.int32), (b, n)).copy()
        ref_rng, c_rng = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
        ref = start.copy()
        for s, e in blocks:
            ref[:, s:e] = ref_rng.permuted(ref[:, s:e], axis=1)
        got = start.copy()
        bounds = np.array(blocks, dtype=np.int32).reshape(-1, 2)
        _perm.shuffle(c_rng.bit_generator.capsule, got, bounds[:, 0].copy(), bounds[:, 1].copy())
        assert np.array_equal(got, ref)
        assert c_rng.integers(2**62) == ref_rng.integers(2**62)  # the same draws were used up


@needs_kernel
def test_the_c_loop_gives_the_numpy_tests_numbers_bit_for_bit():
    """With and without the C loop, the test of a population and of its strata has the same statistic, p and number of permutations, exactly (sequential stopping on and off)."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    for seed in range(6):
        args, sub = _split_world(seed)
        for decide in (None, 0.05):
            c = heterogeneity_tests(*args[:5], [sub], n_perm=999, seed=seed, baseline=args[5], decide_at=decide)
            ref = heterogeneity_tests(*args[:5], [sub], n_perm=999, seed=seed, baseline=args[5],
                                      decide_at=decide, use_kernel=False)
            assert c == ref
        (Z, y, units, strata, tested, base), two = _two_strata(seed, n_tasks=200, harm={"s2": 0.2})
        c = heterogeneity_tests(Z, y, units, strata, tested, [two], n_perm=499, seed=seed, baseline=base)
        assert c == heterogeneity_tests(Z, y, units, strata, tested, [two], n_perm=499, seed=seed,
                                        baseline=base, use_kernel=False)


@needs_kernel
def test_the_c_loop_refuses_indices_out_of_range():
    """_perm.stats and _perm.shuffle check every index they will read: out of range is a ValueError, not a read past the array."""
    from skillaudit.analysis import _perm

    shuffled = np.zeros((2, 3), dtype=np.int32)
    rs, ps, r_at = np.array([0, 1], np.int32), np.array([0, 0], np.int32), np.zeros(3)
    design = (np.array([0, 2], np.int32), np.array([0, 1], np.int32), np.ones(2), np.ones(1), 0, np.empty(4))
    _perm.stats(shuffled, rs, ps, 1, r_at, [design])  # in range: fine
    with pytest.raises(ValueError, match="design row out of range"):
        _perm.stats(shuffled, rs, ps, 1, r_at, [(*design[:4], 1, design[5])])
    with pytest.raises(ValueError, match="shuffled out of range"):
        _perm.stats(np.full((2, 3), 3, np.int32), rs, ps, 1, r_at, [design])
    with pytest.raises(ValueError, match="rs or ps out of range"):
        _perm.stats(shuffled, np.array([0, 3], np.int32), ps, 1, r_at, [design])
    with pytest.raises(TypeError, match="rs: expected a contiguous int32 array"):
        _perm.stats(shuffled, rs.astype(np.int64), ps, 1, r_at, [design])
    with pytest.raises(ValueError, match="block out of range"):
        _perm.shuffle(np.random.default_rng(0).bit_generator.capsule, shuffled, np.array([0], np.int32),
                      np.array([4], np.int32))


def test_without_the_c_loop_the_numpy_path_runs(monkeypatch):
    """With skillaudit.analysis._perm missing (no C compiler at install), the test runs in numpy and gives the numbers the C loop gives."""
    from skillaudit.analysis.library_effect import heterogeneity_tests

    args, sub = _split_world(3)
    with_c = heterogeneity_tests(*args[:5], [sub], n_perm=499, seed=3, baseline=args[5], decide_at=0.05)
    monkeypatch.setattr(library_effect_module, "_perm", None)
    assert heterogeneity_tests(*args[:5], [sub], n_perm=499, seed=3, baseline=args[5], decide_at=0.05) == with_c


def test_skills_differ_holds_its_level_over_topics_of_different_difficulty():
    """Issue 52 F7: a null library over 8 topics of different difficulty (runs are samples of each
    task's pass rate, no skill does anything): the like-with-like test alone says the skills differ
    in most of 12 data sets, the two-null test (both must reject) in at most 2."""
    from skillaudit.analysis.library_effect import both_heterogeneity_tests, heterogeneity_tests
    from skillaudit.runs.simulate import topic_difficulty

    like = both = 0
    for seed in range(12):
        recs, _ = topic_difficulty(seed, n_tasks=600, skills_per_topic=4, spread=2.0)
        runs = read_text_records("".join(orjson.dumps(r).decode() + "\n" for r in recs))
        reg, X, y, units, base = _fit(runs, n_boot=0)
        Z = _merged_design(X, reg.col_group_, reg.n_groups_)
        strata, tested = np.zeros(y.size, int), reg.group_n_ >= 5
        like += heterogeneity_tests(Z, y, units, strata, tested, (), 499, seed, baseline=base)[0][1] <= 0.05
        both += both_heterogeneity_tests(Z, y, units, strata, tested, (), 499, seed, base, 0.05)[0][1] <= 0.05
    assert like >= 8 and both <= 2, (like, both)


def test_row_ids_are_numpys_distinct_rows():
    """_row_ids packs integer rows into one key where it fits and otherwise sorts rows: either way
    numpy's unique(axis=0) inverse, negative values and overflowing ranges included."""
    from skillaudit.analysis.library_effect import _row_ids

    rng = np.random.default_rng(0)
    for _ in range(200):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 6))
        big = rng.random() < 0.3
        cols = [rng.integers(-(2**40) if big else -3, 2**40 if big else 9, n) for _ in range(k)]
        if rng.random() < 0.3:
            cols[0] = cols[0] > 0  # a bool column
        want = np.unique(np.column_stack(cols), axis=0, return_inverse=True)[1].ravel()
        assert np.array_equal(_row_ids(cols), want)
