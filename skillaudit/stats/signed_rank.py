"""Paired differences of a continuous measure (tokens, time, a graded score), the task as the unit:
the Wilcoxon signed-rank test, the Hodges-Lehmann estimate and the interval that inverts the test.

`signed_rank_test(d)` drops zero differences (Wilcoxon's method) and ranks the rest by |d| (ties get
their mean rank). Its null distribution is exact where that is cheap: the exact distribution of
the positive rank sum without ties (n <= `EXACT_MAX`), the 2^n sign flips of the mid-ranks with ties
(n <= `FLIP_MAX`); else the normal approximation with the tie correction (no continuity
correction). These are scipy.stats.wilcoxon's `method="exact"`, its permutation method and
`method="asymptotic"`, `zero_method="wilcox"` (tests/test_signed_rank.py checks them against scipy).

`hodges_lehmann(d)` is the median of the Walsh averages (d_i + d_j) / 2, i <= j, and its interval is
the set of shifts theta at which `signed_rank_test(d - theta)` does not reject: found by bisection on
the same p-value function, so the interval excludes 0 exactly when p <= 1 - level (up to the
bisection's tolerance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: the exact null distribution of the rank sum is used up to this many non-zero differences (no ties)
EXACT_MAX = 400
#: with tied |d|, the 2^n sign flips of the mid-ranks are enumerated up to this many (scipy's
#: permutation method enumerates them all up to 13 too)
FLIP_MAX = 13
#: Walsh averages are formed up to this many differences (n (n + 1) / 2 of them); beyond, bisection
WALSH_MAX = 3000


@dataclass(frozen=True)
class SignedRank:
    """A two-sided signed-rank test: p, the positive rank sum, the differences used (zeros dropped)
    and how p was computed (`test`)."""

    p: float
    statistic: float
    n: int
    test: str


def _ranks(a: np.ndarray) -> tuple[np.ndarray, bool]:
    """Mid-ranks (1-based) of `a` and whether any value is tied."""
    order = np.argsort(a, kind="stable")
    s = a[order]
    ranks = np.empty(a.size, dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    ends = np.r_[starts[1:], s.size]
    mid = (starts + ends + 1) / 2.0  # mean of 1-based ranks starts+1 .. ends
    ranks[order] = np.repeat(mid, ends - starts)
    return ranks, bool((ends - starts > 1).any())


@lru_cache(maxsize=64)
def _exact_counts(n: int) -> np.ndarray:
    """Counts of sign assignments giving each positive rank sum 0 .. n(n+1)/2 (ranks 1..n, no ties)."""
    top = n * (n + 1) // 2
    c = np.zeros(top + 1, dtype=np.float64)
    c[0] = 1.0
    for k in range(1, n + 1):
        c[k:] = c[k:] + c[:-k].copy()
    return c


@lru_cache(maxsize=16)
def _signs(n: int) -> np.ndarray:
    """Every assignment of n signs, as 0/1 rows (2^n x n)."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)


def signed_rank_test(d: np.ndarray) -> SignedRank:
    """Two-sided Wilcoxon signed-rank test of the differences `d` (zeros dropped)."""
    d = np.asarray(d, dtype=np.float64)
    d = d[d != 0]
    n = int(d.size)
    if n == 0:
        return SignedRank(1.0, 0.0, 0, "Wilcoxon signed-rank (no non-zero difference)")
    ranks, ties = _ranks(np.abs(d))
    t_plus = float(ranks[d > 0].sum())
    total = n * (n + 1) / 2.0
    if not ties and n <= EXACT_MAX:
        c = _exact_counts(n)
        k = round(t_plus)
        lo = c[: k + 1].sum() / c.sum()
        hi = c[k:].sum() / c.sum()
        return SignedRank(float(min(1.0, 2.0 * min(lo, hi))), t_plus, n, "Wilcoxon signed-rank, exact")
    if ties and n <= FLIP_MAX:
        sums = _signs(n) @ ranks
        mean = total / 2.0
        tol = 1e-9 * max(1.0, total)
        p = float(np.mean(np.abs(sums - mean) >= abs(t_plus - mean) - tol))
        return SignedRank(min(1.0, p), t_plus, n, "Wilcoxon signed-rank, exact over the 2^n sign flips (ties)")
    mean = total / 2.0
    _, counts = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((counts**3 - counts).sum()) / 48.0
    if var <= 0:
        return SignedRank(1.0, t_plus, n, "Wilcoxon signed-rank, normal approximation")
    z = (t_plus - mean) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return SignedRank(float(min(1.0, p)), t_plus, n, "Wilcoxon signed-rank, normal approximation (tie-corrected)")


@dataclass(frozen=True)
class ShiftEstimate:
    """Hodges-Lehmann estimate of the paired shift, its interval and the signed-rank test at 0."""

    estimate: float | None
    ci: tuple[float, float] | None
    p: float
    n: int  # all differences, zeros included
    test: str


def _walsh(d: np.ndarray) -> np.ndarray | None:
    """The sorted Walsh averages (d_i + d_j) / 2, i <= j; None above WALSH_MAX differences."""
    if d.size > WALSH_MAX:
        return None
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


def _shift_root(d: np.ndarray) -> float:
    """The Hodges-Lehmann shift without the Walsh averages: the root of T+(d - theta) = n(n+1)/4."""
    lo, hi = float(d.min()), float(d.max())
    half = d.size * (d.size + 1) / 4.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        x = d - mid
        r, _ = _ranks(np.abs(x))
        if float(r[x > 0].sum()) > half:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _interval(lo: float, hi: float) -> tuple[float, float] | None:
    """(lo, hi), or None when every difference was equal (no interval, not a zero-width one)."""
    return None if hi - lo <= 1e-12 * max(1.0, abs(lo)) else (lo, hi)


def _exact_interval(walsh: np.ndarray, n: int, alpha: float) -> tuple[float, float] | None:
    """The exact signed-rank interval of n distinct differences: [W_(c+1), W_(M-c)] of their sorted
    Walsh averages `walsh`, c the largest rank sum with P(T+ <= c) <= alpha / 2 (the shifts the
    exact test does not reject: T+(theta) counts the Walsh averages above theta). None when no
    shift is rejected."""
    counts = _exact_counts(n)
    cdf = np.cumsum(counts) / counts.sum()
    below = np.flatnonzero(cdf <= alpha / 2.0 + 1e-12)
    if below.size == 0:
        return None
    c = int(below[-1])
    return _interval(float(walsh[c]), float(walsh[walsh.size - c - 1]))


def hodges_lehmann(d: np.ndarray, level: float = 0.95, closed_form: bool = True) -> ShiftEstimate:
    """The Hodges-Lehmann shift of the paired differences `d` with the interval that inverts the
    signed-rank test (`signed_rank_test(d - theta)`), and that test's p at 0. Distinct differences
    (n <= EXACT_MAX) take the closed form of that interval (`closed_form=False`: bisection, as
    with ties)."""
    d = np.asarray(d, dtype=np.float64)
    d = d[np.isfinite(d)]
    n = int(d.size)
    at0 = signed_rank_test(d)
    if n == 0:
        return ShiftEstimate(None, None, 1.0, 0, at0.test)
    walsh = _walsh(d)
    est = float(np.median(walsh)) if walsh is not None else _shift_root(d)
    alpha = 1.0 - level
    if closed_form and walsh is not None and n <= EXACT_MAX and np.unique(d).size == n:  # the exact test at every shift
        return ShiftEstimate(est, _exact_interval(walsh, n, alpha), at0.p, n, at0.test)
    span = float(d.max() - d.min()) or max(abs(float(d.max())), 1.0)

    def rejects(theta: float) -> bool:
        return signed_rank_test(d - theta).p <= alpha

    def edge(inside: float, outside: float) -> float:
        for _ in range(40):  # the span / 2^40: far below any measure's resolution
            mid = (inside + outside) / 2.0
            if rejects(mid):
                outside = mid
            else:
                inside = mid
        return inside

    ci: tuple[float, float] | None = None
    if not rejects(est):
        low_out, high_out = float(d.min()) - span, float(d.max()) + span
        if rejects(low_out) and rejects(high_out):  # a bounded interval: enough differences to reject far shifts
            lo, hi = edge(est, low_out), edge(est, high_out)
            if walsh is not None:  # the test changes only at a Walsh average: the edges are two of them
                lo, hi = float(walsh[np.abs(walsh - lo).argmin()]), float(walsh[np.abs(walsh - hi).argmin()])
            ci = _interval(lo, hi)
    return ShiftEstimate(est, ci, at0.p, n, at0.test)


def ratio_estimate(enabled: np.ndarray, disabled: np.ndarray, level: float = 0.95) -> ShiftEstimate:
    """The enabled / disabled ratio of a positive measure: Hodges-Lehmann of the per-task log ratios,
    exponentiated with its interval (tasks with a value <= 0 on either side are left out)."""
    a, b = np.asarray(enabled, dtype=np.float64), np.asarray(disabled, dtype=np.float64)
    ok = (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b)
    r = hodges_lehmann(np.log(a[ok]) - np.log(b[ok]), level)
    return ShiftEstimate(None if r.estimate is None else math.exp(r.estimate),
                         None if r.ci is None else (math.exp(r.ci[0]), math.exp(r.ci[1])), r.p, r.n, r.test)
