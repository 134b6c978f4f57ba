"""Exact and mid-p McNemar, the task-level sign-flip test, design effects, Wilson,
Benjamini-Hochberg and the task-level bootstrap."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from skillaudit import stats as stats_module
from skillaudit.stats import (
    bh_qvalues,
    binom_half_cdf,
    bootstrap_totals,
    design_effect,
    mcnemar_exact,
    mcnemar_midp,
    paired_bootstrap_ci,
    paired_test,
    percentile_ci,
    sign_flip_pvalue,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 0, 1.0),
        (10, 2, 2 * (1 + 12 + 66) / 4096),  # 0.0385742...
        (0, 5, 2 / 32),
        (2, 10, 2 * (1 + 12 + 66) / 4096),
        (3, 3, 1.0),
        (1, 0, 1.0),
        (7, 0, 2 / 128),
    ],
)
def test_mcnemar_exact_matches_hand_computed_binomial(b, c, expected):
    """The exact McNemar p is 2 * P(X <= min(b, c)) for X ~ Bin(b + c, 1/2), capped at 1."""
    assert mcnemar_exact(b, c) == pytest.approx(expected, abs=1e-12)


def test_mcnemar_is_vectorised():
    """Arrays of counts give an array of p-values."""
    p = mcnemar_exact(np.array([0, 10, 0]), np.array([0, 2, 5]))
    assert p.tolist() == pytest.approx([1.0, 158 / 4096, 0.0625])


def test_binomial_cdf_equals_exact_fractions():
    """P(X <= k) for X ~ Bin(n, 1/2) is within 1e-12 (relative) of the exact rational value for every k, n <= 80."""
    from fractions import Fraction
    from math import comb

    n = np.repeat(np.arange(81), np.arange(81) + 3)
    k = np.concatenate([np.arange(-1, m + 2) for m in range(81)])
    got = binom_half_cdf(k, n)
    for kk, nn, g in zip(k.tolist(), n.tolist(), got.tolist(), strict=True):
        exact = float(Fraction(sum(comb(nn, i) for i in range(max(0, min(kk, nn) + 1))), 2**nn))
        assert g == pytest.approx(exact, rel=1e-12, abs=0.0), (kk, nn)


def test_binomial_cdf_agrees_with_scipy_at_large_n():
    """Up to a million trials the written-out CDF stays within scipy's own rounding of bdtr (1e-8 relative)."""
    from scipy.special import bdtr

    rng = np.random.default_rng(5)
    for top in (100, 10_000, 1_000_000):
        n = rng.integers(1, top, size=400)
        k = (n // 2 - np.abs(rng.normal(0, 3 * np.sqrt(n)))).astype(np.int64).clip(0)
        want = bdtr(k, n, 0.5)
        got = binom_half_cdf(k, n)
        ok = want > 1e-290
        assert np.allclose(got[ok], want[ok], rtol=1e-8, atol=0.0)
        assert np.all(got[~ok] < 1e-280)
    assert binom_half_cdf(np.array([[0, 1], [2, 3]]), 3).shape == (2, 2)


def test_wilson_interval_known_value():
    """Wilson 95% interval of 8/10 matches the textbook value (0.490, 0.943)."""
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert all(np.isnan(wilson_interval(0, 0)))


def test_bh_qvalues_against_hand_computation():
    """q_i = min over j >= i of p_(j) * m / j, in the original order; NaN stays NaN."""
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.20])
    # sorted: 0.01, 0.03, 0.04, 0.20 (m=4): raw 0.04, 0.06, 0.0533, 0.20 -> monotone 0.04, 0.0533, 0.0533, 0.2
    q = bh_qvalues(p)
    assert q[0] == pytest.approx(0.04)
    assert q[2] == pytest.approx(0.16 / 3)
    assert q[1] == pytest.approx(0.16 / 3)
    assert np.isnan(q[3]) and q[4] == pytest.approx(0.20)


def test_bootstrap_totals_patterns_equal_index_resampling():
    """The multinomial-over-patterns bootstrap has the same distribution as resampling indices."""
    rng = np.random.default_rng(3)
    units = rng.integers(0, 2, size=(200, 2)).astype(float)
    fast = bootstrap_totals(units, 4000, 1)
    idx = rng.integers(0, 200, size=(4000, 200))
    slow = units[idx].sum(axis=1)
    assert fast.mean(axis=0) == pytest.approx(slow.mean(axis=0), rel=0.02)
    assert fast.std(axis=0) == pytest.approx(slow.std(axis=0), rel=0.08)


def test_bootstrap_is_deterministic_given_seed():
    """The same seed gives the same resamples; another seed gives others."""
    units = np.random.default_rng(0).integers(0, 3, size=(50, 3)).astype(float)
    assert np.array_equal(bootstrap_totals(units, 100, 7), bootstrap_totals(units, 100, 7))
    assert not np.array_equal(bootstrap_totals(units, 100, 7), bootstrap_totals(units, 100, 8))


def test_bootstrap_falls_back_for_varied_units():
    """Units with many distinct rows are resampled by index, with the right totals' mean."""
    units = np.random.default_rng(0).normal(size=(6000, 1))
    tot = bootstrap_totals(units, 200, 0)
    assert tot.shape == (200, 1)
    assert tot.mean() == pytest.approx(units.sum(), abs=4 * units.std() * np.sqrt(6000) / np.sqrt(200))


def test_index_resampling_totals_are_the_drawn_units_sums(monkeypatch):
    """The index path's totals are, resample by resample, the sums of the units it drew (chunk by chunk)."""
    import skillaudit.stats as st

    units = np.random.default_rng(4).integers(0, 50, size=(900, 3)).astype(float)
    monkeypatch.setattr(st, "_CHUNK_CELLS", 900 * 2 * 7)  # 7 resamples per chunk: several chunks
    got = st.bootstrap_totals(units, 30, 5)
    rng = np.random.default_rng(5)
    want = np.vstack([units[rng.integers(0, 900, size=(m, 900))].sum(axis=1) for m in (7, 7, 7, 7, 2)])
    assert np.array_equal(got, want)


def test_paired_bootstrap_keeps_epochs_of_a_task_together():
    """With one task observed in several epochs every resample is that task: no interval (NaN), never
    a zero-width one; with two tasks the resamples vary and an interval is given."""
    units = np.zeros(4, dtype=int)
    flips = np.array([[1.0, 1], [-1, 1], [0, 1], [1, 1]])
    ci = paired_bootstrap_ci(units, flips, lambda t: (t[:, 0] / t[:, 1])[:, None], n_boot=500)
    assert np.isnan(ci[0]).all()
    ci = paired_bootstrap_ci(np.array([0, 0, 1, 1]), flips, lambda t: (t[:, 0] / t[:, 1])[:, None], n_boot=500)
    assert ci[0][0] < ci[0][1]


def test_bootstrap_coverage_on_simulated_data():
    """About 95% of RAE intervals cover the true effect over many simulated paired runs."""
    rng = np.random.default_rng(42)
    p_b, p_c, n, reps = 0.20, 0.10, 300, 300  # true paired effect 0.10
    covered = 0
    for _ in range(reps):
        u = rng.random(n)
        flip = np.where(u < p_b, 1.0, np.where(u < p_b + p_c, -1.0, 0.0))
        vals = np.column_stack([np.ones(n), flip])
        ci = paired_bootstrap_ci(np.arange(n), vals, lambda t: (t[:, 1] / t[:, 0])[:, None],
                                 n_boot=2000, seed=int(rng.integers(1 << 30)))[0]
        covered += ci[0] <= 0.10 <= ci[1]
    assert 0.91 <= covered / reps <= 0.98


def test_percentile_ci_ignores_nan():
    """Resamples where a statistic is undefined (NaN) are ignored, not propagated."""
    s = np.array([[np.nan], [1.0], [2.0], [3.0]])
    ci = percentile_ci(s, level=0.5)
    assert ci[0].tolist() == pytest.approx([1.5, 2.5])


def test_distinct_rows_matches_numpy_unique():
    """Packed-key distinct rows agree with numpy's row-wise unique, negatives and floats included."""
    from skillaudit.stats import distinct_rows

    rng = np.random.default_rng(0)
    for values in (rng.integers(-3, 4, size=(500, 5)).astype(float), rng.normal(size=(50, 3)).round(1)):
        rows, counts = distinct_rows(values)
        ref_rows, ref_counts = np.unique(values, axis=0, return_counts=True)
        got = sorted(zip(map(tuple, rows), counts.tolist(), strict=True))
        assert got == sorted(zip(map(tuple, ref_rows), ref_counts.tolist(), strict=True))


def test_distinct_rows_of_a_wide_table_warn_nothing():
    """Issue 52 F11: 300 columns of spans up to 50 (a key space far beyond float64): numpy's
    row-wise unique, and no RuntimeWarning (warnings are errors here)."""
    import warnings

    from skillaudit.stats import distinct_rows

    values = np.random.default_rng(1).integers(0, 50, size=(40, 300)).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, counts = distinct_rows(values)
    assert counts.sum() == 40 and rows.shape[1] == 300


# ---------------------------------------------------------------- task-level tests
def test_mcnemar_exact_and_midp_agree_with_statsmodels_and_scipy():
    """Exact McNemar equals statsmodels' exact test; mid-p equals 2 (P(X < k) + P(X = k)/2) from scipy."""
    from scipy.stats import binom
    from statsmodels.stats.contingency_tables import mcnemar

    for b, c in [(0, 0), (1, 0), (3, 9), (12, 4), (20, 21), (0, 17), (40, 25)]:
        ref = mcnemar([[5, b], [c, 7]], exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(ref, rel=1e-10)
        n, k = b + c, min(b, c)
        mid = 1.0 if n == 0 else min(1.0, 2 * (binom.cdf(k - 1, n, 0.5) + 0.5 * binom.pmf(k, n, 0.5)))
        assert mcnemar_midp(b, c) == pytest.approx(mid, rel=1e-10, abs=1e-15)
        assert mcnemar_midp(b, c) <= mcnemar_exact(b, c)


def test_sign_flip_equals_brute_force_enumeration():
    """The exact sign-flip p-value equals enumerating all 2^n sign patterns of the tasks' sums."""
    rng = np.random.default_rng(5)
    for _ in range(150):
        sums = rng.integers(-4, 5, size=rng.integers(1, 10))
        mags = np.abs(sums)
        null = np.array([np.dot(eps, mags) for eps in itertools.product((-1, 1), repeat=sums.size)])
        t = abs(int(sums.sum()))
        exact = 1.0 if t == 0 else min(1.0, 2 * float(np.mean(null >= t)))
        mid = 1.0 if t == 0 else min(1.0, 2 * float(np.mean(null > t) + 0.5 * np.mean(null == t)))
        counts = np.bincount(mags, minlength=5)
        assert sign_flip_pvalue(counts, int(sums.sum())) == pytest.approx(exact, abs=1e-12)
        assert sign_flip_pvalue(counts, int(sums.sum()), mid_p=True) == pytest.approx(mid, abs=1e-12)


def test_sign_flip_on_unit_sums_is_the_mcnemar_test():
    """With every task's summed flip in {-1, 0, 1} the sign-flip test is McNemar on the tasks."""
    assert sign_flip_pvalue(np.array([4, 12]), 12 - 0) == mcnemar_exact(12, 0)
    counts = np.array([0, 9 + 3])
    assert sign_flip_pvalue(counts, 9 - 3) == mcnemar_exact(9, 3)
    assert sign_flip_pvalue(counts, 9 - 3, mid_p=True) == mcnemar_midp(9, 3)


def test_sign_flip_normal_branch_is_close_to_the_exact_distribution(monkeypatch):
    """Past the exact limit the normal approximation (lattice-corrected) is within 0.003 of the exact p."""
    rng = np.random.default_rng(2)
    sums = rng.integers(-5, 6, size=4000)
    counts = np.bincount(np.abs(sums))
    for shift in (0, 60, 160, 320):
        total = int(sums.sum()) + shift
        normal = sign_flip_pvalue(counts, total)
        monkeypatch.setattr(stats_module, "_EXACT_SIGN_FLIP", 10**9)
        exact = sign_flip_pvalue(counts, total)
        monkeypatch.undo()
        assert normal == pytest.approx(exact, abs=3e-3)


def test_paired_test_uses_mcnemar_with_one_pair_per_task_and_task_sums_otherwise():
    """One pair per task: exact McNemar on (b, c); epochs: the sign-flip test on each task's summed flips."""
    flips = np.array([1, 1, 1, -1, 0, 1, 1])
    assert paired_test(np.arange(7), flips) == mcnemar_exact(5, 1)
    units = np.array([0, 0, 0, 1, 2, 2, 3])  # task sums 3, -1, 1, 1
    assert paired_test(units, flips) == sign_flip_pvalue(np.bincount([3, 1, 1, 1]), 4)
    assert paired_test(units, flips) != mcnemar_exact(5, 1)


def test_task_level_test_keeps_its_level_where_pooled_mcnemar_does_not():
    """No effect, 5 epochs repeating each task's response: the sign-flip test rejects at most 6% at 5%, pooled McNemar over 9%."""
    rng = np.random.default_rng(0)
    task_level = pooled = 0
    n_sets, n_tasks, epochs = 400, 60, 5
    units = np.repeat(np.arange(n_tasks), epochs)
    for _ in range(n_sets):
        lean = rng.choice([-1, 1], size=n_tasks) * rng.uniform(0, 0.8, n_tasks)  # per-task, symmetric
        u = rng.random(n_tasks * epochs)
        flips = np.where(u < np.abs(lean[units]), np.sign(lean[units]), 0).astype(int)
        flips[rng.random(flips.size) < 0.1] *= -1
        task_level += paired_test(units, flips) <= 0.05
        pooled += mcnemar_exact(int((flips > 0).sum()), int((flips < 0).sum())) <= 0.05
    assert task_level / n_sets <= 0.06
    assert pooled / n_sets > 0.09


def test_design_effect_is_one_for_independent_epochs_and_the_epoch_count_for_identical_ones():
    """Independent epochs give a design effect near 1; epochs that repeat each other give m."""
    rng = np.random.default_rng(1)
    units = np.repeat(np.arange(2000), 4)
    independent = rng.choice([-1, 0, 1], size=units.size)
    assert design_effect(units, independent) == pytest.approx(1.0, abs=0.1)
    repeated = np.repeat(rng.choice([-1, 0, 1], size=2000), 4)
    assert design_effect(units, repeated) == pytest.approx(4.0)
    assert design_effect(np.arange(10), rng.choice([-1, 1], size=10)) == 1.0


def test_p_text_writes_three_decimals_or_below_a_thousandth():
    """p_text gives "p < 0.001" below a thousandth and three decimals otherwise (0.0495 rounds to 0.050 and 1 stays 1.000)."""
    from skillaudit.stats import p_text

    assert [p_text(x) for x in (0.0, 0.00099, 0.001, 0.0495, 0.125, 1.0)] == [
        "p < 0.001", "p < 0.001", "p = 0.001", "p = 0.050", "p = 0.125", "p = 1.000"]


# ---------------------------------------------------------------- issue 27: intervals that invert their test
def _tango_brute(b: int, c: int, n: int, d: float) -> float:
    """Tango's score statistic with the restricted MLE found numerically (independent of stats.py)."""
    from scipy.optimize import minimize_scalar

    lo, hi = max(0.0, -d) + 1e-12, (1 - d) / 2 - 1e-12

    def nll(p21: float) -> float:
        out = -c * np.log(p21) - b * np.log(p21 + d) if b or c else 0.0
        return out - (n - b - c) * np.log(max(1 - 2 * p21 - d, 1e-300))

    p21 = minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
    return (b - c - n * d) / np.sqrt(n * (2 * p21 + d * (1 - d)))


def test_tango_interval_endpoints_are_where_an_independent_score_statistic_hits_z():
    """Tango's interval ends where a numerically maximised restricted likelihood gives |T| = 1.96."""
    from skillaudit.stats import tango_interval

    for b, c, n in ((0, 4, 143), (3, 23, 112), (10, 2, 50), (5, 5, 30)):
        lo, hi = tango_interval(b, c, n)
        assert lo < (b - c) / n < hi
        assert abs(_tango_brute(b, c, n, lo) - 1.959964) < 2e-3
        assert abs(_tango_brute(b, c, n, hi) + 1.959964) < 2e-3


def test_score_test_is_statsmodels_mcnemar_without_correction_and_the_interval_agrees():
    """One pair per task: p is statsmodels' asymptotic McNemar; the Tango interval excludes 0 iff p <= 0.05."""
    from statsmodels.stats.contingency_tables import mcnemar

    from skillaudit.stats import paired_score

    for b, c in ((0, 4), (0, 3), (3, 23), (7, 7), (1, 8), (0, 0)):
        n = 143
        flips = np.r_[np.ones(b), -np.ones(c), np.zeros(n - b - c)]
        sc = paired_score(np.arange(n), flips)
        if b + c:
            ref = mcnemar([[50, b], [c, n - 50 - b - c]], exact=False, correction=False).pvalue
            assert abs(sc.p - ref) < 1e-9
        lo, hi = sc.ci
        assert hi > lo  # never zero-width
        assert (lo > 0 or hi < 0) == (sc.p <= 0.05)


def test_clustered_score_does_not_depend_on_how_epochs_are_paired():
    """Three epochs per task: re-pairing a task's epochs (same per-task sums) changes no figure."""
    from skillaudit.stats import paired_score

    units = np.repeat(np.arange(50), 3)
    a = np.zeros(150)
    a[[0, 1, 2, 3, 4, 9]] = -1
    a[[10]] = 1
    a[[11]] = -1  # task 3: +1 and -1 cancel
    b = a.copy()
    b[[10, 11]] = 0  # the same task sums
    sa, sb = paired_score(units, a), paired_score(units, b)
    assert sa.p == sb.p and sa.ci == sb.ci
    # Durkalski's statistic: sum S / sqrt(sum S^2) = -6 / sqrt(9 + 4 + 1 + 0)
    z = 6 / np.sqrt(14)
    assert abs(sa.p - math.erfc(z / math.sqrt(2))) < 1e-12


def test_by_qvalues_match_statsmodels_fdr_by():
    """Benjamini-Yekutieli q-values equal statsmodels' multipletests(method='fdr_by')."""
    from statsmodels.stats.multitest import multipletests

    from skillaudit.stats import by_qvalues

    p = np.random.default_rng(3).uniform(size=40) ** 3
    assert np.allclose(by_qvalues(p), multipletests(p, method="fdr_by")[1])


def test_tarone_screen_leaves_out_hypotheses_that_cannot_reach_significance():
    """Tarone: with minimum p-values [1e-4, 1e-3, 0.2, 0.5], only the first two can reach alpha / K."""
    from skillaudit.stats import tarone_testable

    assert tarone_testable(np.array([1e-4, 1e-3, 0.2, 0.5]), 0.05).tolist() == [True, True, False, False]
    assert tarone_testable(np.array([np.nan, 0.9]), 0.05).tolist() == [False, False]


def test_skellam_test_matches_scipy():
    """The exact Poisson-difference test equals 2 * min(cdf, sf) of scipy.stats.skellam."""
    from scipy.stats import skellam

    from skillaudit.stats import skellam_test

    for d, mu1, mu2 in ((-5, 1.0, 1.5), (4, 2.0, 0.5), (0, 3.0, 3.0), (-12, 4.0, 9.0)):
        p, _, a, b = skellam_test(d, mu1, mu2)
        ref = min(1.0, 2 * min(skellam.cdf(d, mu1, mu2), skellam.sf(d - 1, mu1, mu2)))
        assert abs(p - ref) < 1e-9
        assert a <= round(mu1 - mu2) <= b


def test_batched_skellam_in_c_equals_the_python_test():
    """`_perm.skellam` (every exact test of `stratified_relative` in one call) gives skellam_test's
    p, smallest p and acceptance region on 3,000 random tests, lambdas 0 to 1,500 included."""
    from skillaudit.analysis import _perm
    from skillaudit.stats import skellam_test

    rng = np.random.default_rng(11)
    rows, want = [], []
    for _ in range(3000):
        lu, lv = (float(rng.choice([0.0, rng.exponential(3), rng.uniform(0, 1500)])) for _ in range(2))
        lo, hi = -int(rng.integers(0, 60)), int(rng.integers(0, 60))
        d = int(rng.integers(lo, hi + 1))
        level = float(rng.choice([0.95, 0.9, 0.99]))
        rows.append((d, lu, lv, lo, hi, level))
        want.append(skellam_test(d, lu, lv, level, (lo, hi)))
    arr = np.array(rows)
    out = np.zeros((len(rows), 4))
    out[:, 0] = 1 - arr[:, 5]
    _perm.skellam(np.ascontiguousarray(arr[:, :5]), out)
    want = np.array(want, dtype=np.float64)
    np.testing.assert_allclose(out[:, :2], want[:, :2], rtol=1e-9, atol=1e-300)
    assert np.array_equal(out[:, 2:], want[:, 2:])
    with pytest.raises(ValueError, match="out of range"):
        _perm.skellam(np.array([[5.0, 1.0, 1.0, 0.0, 2.0]]), np.zeros((1, 4)))


def test_stratified_effects_are_the_same_without_the_c_loop(monkeypatch):
    """stratified_relative gives the same effects, intervals and p-values with the batched C test
    and with skellam_test called per skill (an install without a compiler)."""
    from skillaudit.analysis import library_effect
    from skillaudit.stats._csr import Csr

    rng = np.random.default_rng(3)
    n, p = 3000, 40
    cols = [np.sort(rng.choice(p, size=int(rng.integers(1, 4)), replace=False)) for _ in range(n)]
    indptr = np.concatenate([[0], np.cumsum([c.size for c in cols])])
    X = Csr(np.ones(indptr[-1]), np.concatenate(cols), indptr, (n, p))
    baseline = rng.random(n) < 0.4
    y = np.where(baseline, -1.0 * (rng.random(n) < 0.2), 1.0 * (rng.random(n) < 0.15))
    units, strata = rng.integers(0, 800, n), rng.integers(0, 2, n)
    with_c = library_effect.stratified_relative(X, y, baseline, units, strata)
    monkeypatch.setattr(library_effect, "_perm", None)
    without = library_effect.stratified_relative(X, y, baseline, units, strata)
    for field in ("effect", "ci", "p", "q", "p_min"):
        np.testing.assert_allclose(getattr(with_c, field), getattr(without, field), rtol=1e-9, atol=1e-300)
    assert np.array_equal(with_c.testable, without.testable) and np.isfinite(with_c.p).sum() > 30
