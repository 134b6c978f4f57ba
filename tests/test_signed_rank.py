"""The signed-rank test and Hodges-Lehmann interval of `skillaudit.stats.signed_rank` against scipy's
wilcoxon and by simulation (size, coverage, the interval agreeing with the test)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from skillaudit.stats.signed_rank import hodges_lehmann, ratio_estimate, signed_rank_test


@pytest.mark.parametrize("seed", range(12))
def test_equals_scipy_exact_permutation_and_asymptotic(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 60))
    d = rng.normal(0.3, 1.0, n)  # no ties: exact
    ours = signed_rank_test(d)
    ref = stats.wilcoxon(d, zero_method="wilcox", method="exact")
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-9) and "exact" in ours.test
    # ties and zeros, few: every sign flip (scipy's permutation method enumerates them all)
    small = rng.integers(-3, 4, size=int(rng.integers(5, 13))).astype(float)
    if np.count_nonzero(small) >= 2 and np.unique(np.abs(small[small != 0])).size < np.count_nonzero(small):
        ref = stats.wilcoxon(small, zero_method="wilcox", method=stats.PermutationMethod())
        assert signed_rank_test(small).p == pytest.approx(ref.pvalue, rel=1e-9)
    # ties, many: the tie-corrected normal approximation
    big = rng.integers(-20, 25, size=300).astype(float)
    ref = stats.wilcoxon(big, zero_method="wilcox", method="asymptotic", correction=False)
    assert signed_rank_test(big).p == pytest.approx(ref.pvalue, rel=1e-9)


def test_hodges_lehmann_is_the_median_of_walsh_averages_and_its_interval_inverts_the_test():
    rng = np.random.default_rng(3)
    for _ in range(40):
        d = rng.standard_t(3, size=int(rng.integers(6, 80))) + rng.normal(0, 0.5)
        r = hodges_lehmann(d)
        i, j = np.triu_indices(d.size)
        assert r.estimate == pytest.approx(np.median((d[i] + d[j]) / 2))
        if r.ci is not None:
            assert r.ci[0] <= r.estimate <= r.ci[1]
            excluded = not (r.ci[0] <= 0 <= r.ci[1])
            assert excluded == (r.p <= 0.05) or min(abs(r.ci[0]), abs(r.ci[1])) < 1e-6


@pytest.mark.parametrize("shape", ["normal", "skewed", "discrete"])
def test_size_and_coverage_by_simulation(shape):
    """2,000 data sets per shape, 8-60 tasks: under the null, p <= 0.05 in 3-6% of them; the interval
    covers the true shift in >= 93%."""
    rng = np.random.default_rng({"normal": 11, "skewed": 12, "discrete": 13}[shape])
    rejected = covered = with_ci = 0
    sims = 2000
    for _ in range(sims):
        n = int(rng.integers(8, 61))
        if shape == "normal":
            noise = rng.normal(0, 1, n)
        elif shape == "skewed":  # symmetric about 0 but heavy tailed (log-normal magnitudes)
            noise = rng.lognormal(0, 1, n) * rng.choice([-1, 1], n)
        else:  # token counts: discrete, with ties
            noise = rng.integers(-50, 51, n).astype(float)
        rejected += signed_rank_test(noise).p <= 0.05
        shift = 2.5
        r = hodges_lehmann(noise + shift)
        if r.ci is not None:
            with_ci += 1
            covered += r.ci[0] <= shift <= r.ci[1]
    assert 0.03 <= rejected / sims <= 0.06, rejected / sims
    assert with_ci > 0.95 * sims and covered / with_ci >= 0.93, covered / with_ci


def test_ratio_of_a_positive_measure():
    rng = np.random.default_rng(5)
    off = rng.lognormal(10, 1, 80)
    on = off * 1.6 * rng.lognormal(0, 0.2, 80)
    r = ratio_estimate(on, off)
    assert r.ci is not None and r.ci[0] <= 1.6 <= r.ci[1] and r.ci[0] > 1.3 and r.p < 1e-6
    # tasks with a zero (not logged) on either side are left out
    assert ratio_estimate(np.r_[on, 0.0], np.r_[off, 5.0]).n == 80


def test_equal_differences_have_no_zero_width_interval():
    r = hodges_lehmann(np.full(30, 0.4))
    assert r.estimate == pytest.approx(0.4) and r.ci is None and r.p < 1e-6


def test_the_exact_interval_equals_inverting_the_test_by_bisection():
    """Distinct differences: the closed form [W_(c+1), W_(M-c)] equals the shifts found by bisecting
    on the test (the general path), and the test at each edge just inside does not reject."""
    import skillaudit.stats.signed_rank as sr

    rng = np.random.default_rng(9)
    for _ in range(30):
        d = rng.normal(rng.normal(), 1.0, int(rng.integers(6, 70)))
        fast = sr.hodges_lehmann(d)
        slow_ci = sr.hodges_lehmann(d, closed_form=False).ci
        assert fast.ci is not None and slow_ci is not None
        assert fast.ci == pytest.approx(slow_ci, abs=1e-9)
