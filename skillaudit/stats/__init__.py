"""Statistics: exact McNemar, task-level paired bootstrap, Wilson intervals, Benjamini-Hochberg.

Layer (pyproject.toml `[tool.importlinter]`): May import errors only (numpy, scipy).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

# Above this many distinct unit patterns the bootstrap resamples unit indices in chunks instead.
_MAX_PATTERNS = 4096
_CHUNK_CELLS = 8_000_000


def mcnemar_exact(b: int | np.ndarray, c: int | np.ndarray) -> float | np.ndarray:
    """Two-sided exact McNemar p-value: binomial test of b successes in b + c trials at 1/2.

    Returns 1.0 where b + c = 0 (no discordant pairs, no evidence either way).
    """
    b_arr = np.asarray(b, dtype=np.int64)
    c_arr = np.asarray(c, dtype=np.int64)
    n = b_arr + c_arr
    k = np.minimum(b_arr, c_arr)
    p = np.minimum(1.0, 2.0 * binom_half_cdf(k, n))
    p = np.where(n == 0, 1.0, p)
    return float(p) if p.ndim == 0 else p


def binom_half_cdf(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """P(X <= k) for X ~ Binomial(n, 1/2), elementwise, for 0 <= k <= n (scipy.special.bdtr(k, n, 0.5)).

    Written out because scipy.special takes a quarter of a second to import. The largest term
    C(n, k) / 2^n comes from lgamma; the rest of the sum runs down from it by the exact term
    ratios i / (n - i + 1), largest terms first, until the terms stop counting. The error is
    lgamma's cancellation at large n, as in cephes' incomplete beta behind bdtr: both are within
    about 1e-13 (n = 100) to 1e-10 (n = 20,000) of the exact value, relative (tested).
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    shape = np.broadcast_shapes(k.shape, n.shape)
    k, n = np.broadcast_to(k, shape).ravel(), np.broadcast_to(n, shape).ravel()
    out = np.ones(k.size)
    # above the median the complement is the small side: P(X <= k) = 1 - P(X <= n - k - 1)
    upper = 2 * k >= n
    kk = np.where(upper, n - k - 1, k)
    live = np.flatnonzero((kk >= 0) & (k < n))
    if live.size:
        lg = np.vectorize(math.lgamma, otypes=[float])
        nn, ks = n[live].astype(np.float64), kk[live].astype(np.float64)
        top = np.exp(lg(nn + 1) - lg(ks + 1) - lg(nn - ks + 1) - nn * math.log(2.0))
        total = np.ones(live.size)  # the sum over i <= k of term(i) / term(k)
        term = np.ones(live.size)
        act = np.arange(live.size)
        j = 0
        while act.size:
            j += 1
            act = act[ks[act] >= j]
            term_a = term[act] * (ks[act] - j + 1) / (nn[act] - ks[act] + j)
            term[act] = term_a
            total[act] += term_a
            act = act[term_a > 1e-18 * total[act]]
        tail = top * total
        out[live] = np.where(upper[live], 1.0 - tail, tail)
    out[k < 0] = 0.0
    out[k >= n] = 1.0
    return out.reshape(shape)


def wilson_interval(k: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion k/n; (nan, nan) when n = 0 (fractional counts: an
    effective sample size after a design effect)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (float(max(0.0, centre - half)), float(min(1.0, centre + half)))


def p_text(p: float) -> str:
    """A p-value as verdict sentences and the report write it: "p < 0.001" or "p = 0.042"."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def q_text(q: float | None) -> str:
    """A p- or q-value where a reason cites it bare: "<0.001", "0.042" ("–" for None)."""
    return "–" if q is None else ("<0.001" if q < 0.001 else f"{q:.3f}")


def pp_text(x: float | None) -> str:
    """A fraction as verdict sentences write it, in percentage points: 0.052 -> "+5.2 pp" ("–" for None)."""
    return "–" if x is None else f"{x * 100:+.1f} pp"


def ci_text(ci: Any) -> str:
    """An interval of fractions after an effect: " [+1.0, +9.4]" ("" for None)."""
    return "" if not ci else f" [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]"


def bh_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values); NaN inputs stay NaN and are not counted."""
    p = np.asarray(p, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return q
    order = ok[np.argsort(p[ok], kind="stable")]
    ranked = p[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    q[order] = np.minimum(ranked, 1.0)
    return q


def unit_sums(units: np.ndarray, values: np.ndarray, n_units: int | None = None) -> np.ndarray:
    """Sum the per-pair rows of `values` (pairs x K) into per-unit rows (units x K)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    n_units = int(units.max()) + 1 if n_units is None and units.size else (n_units or 0)
    out = np.empty((n_units, values.shape[1]))
    for k in range(values.shape[1]):
        out[:, k] = np.bincount(units, weights=values[:, k], minlength=n_units)
    return out


def distinct_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a 2-D array and how often each occurs.

    Integer-valued rows are packed into one int64 key (mixed radix) so that a 1-D sort does the
    work; other arrays use numpy's row-wise unique.
    """
    lo = values.min(axis=0)
    span = values.max(axis=0) - lo + 1
    # the key space is the product of the spans: summed as logs (a product of 150+ spans overflows
    # float64 and warned "overflow encountered in reduce" on every wide library)
    if np.all(values == np.round(values)) and float(np.log2(span.astype(float)).sum()) < 62.0:
        radix = np.concatenate([[1], np.cumprod(span[::-1].astype(np.int64))[:-1]])[::-1]
        keys = ((values - lo).astype(np.int64) * radix).sum(axis=1)
        _, first, counts = np.unique(keys, return_index=True, return_counts=True)
        return values[first], counts
    return np.unique(values, axis=0, return_counts=True)


def bootstrap_totals(
    unit_values: np.ndarray, n_boot: int, seed: int | np.random.Generator = 0
) -> np.ndarray:
    """Column totals of `n_boot` resamples (with replacement) of the rows of `unit_values`.

    Units with identical rows are interchangeable, so resampling n units is a multinomial draw
    over the distinct row patterns: a (n_boot x patterns) @ (patterns x K) product, exact and
    independent of the number of tasks. Falls back to chunked index resampling when rows are
    too varied for that to pay off.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n = unit_values.shape[0]
    k = unit_values.shape[1]
    if n == 0:
        return np.zeros((n_boot, k))
    patterns, counts = distinct_rows(unit_values)
    n_pat = patterns.shape[0]
    # a multinomial draw costs one binomial per pattern, index resampling one draw per unit
    if n_pat <= _MAX_PATTERNS and n_pat * 8 <= max(n, 512):
        out = np.empty((n_boot, k))
        probs = counts / n
        step = max(1, _CHUNK_CELLS // (2 * n_pat))  # bounded memory: weights are B x patterns
        for start in range(0, n_boot, step):
            stop = min(n_boot, start + step)
            weights = rng.multinomial(n, probs, size=stop - start)
            out[start:stop] = weights @ patterns
        return out
    out = np.empty((n_boot, k))
    chunk = max(1, _CHUNK_CELLS // (2 * n))  # the draws and their counts: two B x n arrays
    values = np.asarray(unit_values, dtype=np.float64)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        # how often each resample drew each unit, then one product (not a gather per column)
        idx += (np.arange(stop - start) * n)[:, None]
        times = np.bincount(idx.ravel(), minlength=(stop - start) * n).reshape(stop - start, n)
        out[start:stop] = times.astype(np.float64) @ values
    return out


def percentile_ci(samples: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Percentile interval per column of `samples` (resamples x statistics); NaNs are ignored. A
    column whose resamples all agree gets NaN, not a zero-width interval: resampling one task (or
    tasks that all give the same value) measures no uncertainty, it cannot rule any out."""
    samples = np.asarray(samples, dtype=float)
    if samples.ndim == 1:
        samples = samples[:, None]
    alpha = (1 - level) / 2
    out = np.full((samples.shape[1], 2), np.nan)
    for j in range(samples.shape[1]):
        col = samples[:, j]
        col = col[~np.isnan(col)]
        if col.size and col.max() > col.min():
            out[j] = np.quantile(col, [alpha, 1 - alpha])
    return out


def paired_bootstrap_ci(
    units: np.ndarray,
    values: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_boot: int = 20_000,
    seed: int = 0,
    level: float = 0.95,
) -> np.ndarray:
    """Task-level paired bootstrap CIs.

    `units` gives each pair's task unit (all epochs of a task share one), `values` the per-pair
    columns whose totals define the statistics, `statistic` maps totals (B x K) to statistics
    (B x S). Returns an (S x 2) array of percentile intervals.
    """
    _, inverse = np.unique(units, return_inverse=True)
    per_unit = unit_sums(inverse.ravel(), values)
    totals = bootstrap_totals(per_unit, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = statistic(totals)
    return percentile_ci(stats, level)


# ---------------------------------------------------------------- task-level paired tests
def binom_half_pmf(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """P(X = k) for X ~ Binomial(n, 1/2), elementwise (0 outside 0 <= k <= n)."""
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    shape = np.broadcast_shapes(k.shape, n.shape)
    k, n = np.broadcast_to(k, shape).ravel(), np.broadcast_to(n, shape).ravel()
    out = np.zeros(k.size)
    ok = (k >= 0) & (k <= n)
    if ok.any():
        lg = np.vectorize(math.lgamma, otypes=[float])
        nn, kk = n[ok].astype(np.float64), k[ok].astype(np.float64)
        out[ok] = np.exp(lg(nn + 1) - lg(kk + 1) - lg(nn - kk + 1) - nn * math.log(2.0))
    return out.reshape(shape)


def mcnemar_midp(b: int | np.ndarray, c: int | np.ndarray) -> float | np.ndarray:
    """Two-sided mid-p McNemar: 2 * (P(X < k) + P(X = k) / 2), k = min(b, c), X ~ Binomial(b + c, 1/2).

    Less conservative than the exact test (its size is closer to the nominal level on average,
    not bounded by it); 1.0 where b + c = 0.
    """
    b_arr = np.asarray(b, dtype=np.int64)
    c_arr = np.asarray(c, dtype=np.int64)
    n = b_arr + c_arr
    k = np.minimum(b_arr, c_arr)
    p = 2.0 * binom_half_cdf(k, n) - binom_half_pmf(k, n)
    p = np.where(n == 0, 1.0, np.minimum(1.0, p))
    return float(p) if p.ndim == 0 else p


#: above this many summed magnitudes the sign-flip distribution is taken as normal (the exact
#: convolution grows with it; the normal approximation is then within ~1e-4 of it)
_EXACT_SIGN_FLIP = 20_000


def _sign_flip_dist(mags: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact null distribution of sum_u eps_u * |S_u| (eps_u = +-1 with probability 1/2 each).

    `mags`/`counts`: each distinct magnitude s >= 1 and how many units have it. Returns the pmf on
    the integer grid and the value of its first cell.
    """
    pmf = np.ones(1)
    lo = 0
    for s, m in zip(mags.tolist(), counts.tolist(), strict=True):
        j = np.arange(m + 1)
        kernel = np.zeros(2 * s * m + 1)
        kernel[2 * s * j] = binom_half_pmf(j, m)  # s * (2j - m): j of the m units flipped up
        pmf = np.convolve(pmf, kernel)
        lo -= s * m
    return pmf, lo


def sign_flip_pvalue(mag_counts: np.ndarray, total: int, mid_p: bool = False) -> float:
    """Two-sided p of the task-level sign-flip (randomization) test of a sum of per-task flips.

    Each task u contributes S_u, the sum of its pairs' flips y+ - y- over epochs. Under "skills
    have no effect" the two conditions of a task are exchangeable, so each S_u is as likely as
    -S_u: the null distribution of sum_u S_u is that of sum_u eps_u |S_u| with random signs.
    `mag_counts[s]` = how many tasks have |S_u| = s (index 0 is ignored), `total` = sum_u S_u.
    p = min(1, 2 P(T >= |total|)) (mid-p: 2 (P(T > |total|) + P(T = |total|) / 2)). With every
    |S_u| <= 1 this is the exact (or mid-p) McNemar test on the tasks' signs.
    """
    mag_counts = np.asarray(mag_counts, dtype=np.int64)
    mags = np.flatnonzero(mag_counts[1:] > 0) + 1
    counts = mag_counts[mags]
    t = abs(int(total))
    if mags.size == 0 or t == 0:
        return 1.0
    if mags.max() == 1:  # every task's flips sum to -1, 0 or +1: the sign test on the tasks
        m = int(counts[0])
        b, c = (m + t) // 2, (m - t) // 2
        return float(mcnemar_midp(b, c) if mid_p else mcnemar_exact(b, c))
    if int((mags * counts).sum()) > _EXACT_SIGN_FLIP:
        sd = math.sqrt(float((mags.astype(np.float64) ** 2 * counts).sum()))
        step = 2 * math.gcd(*mags.tolist())  # the lattice of possible totals
        z = (t - (0 if mid_p else step / 2)) / sd
        return float(min(1.0, 2.0 * (1.0 - NormalDist().cdf(z))))
    pmf, lo = _sign_flip_dist(mags, counts)
    at = t - lo  # the cell of +|total|
    upper = float(pmf[at:].sum())
    p = 2.0 * (upper - pmf[at] / 2) if mid_p else 2.0 * upper
    return float(min(1.0, p))


def task_sums(units: np.ndarray, values: np.ndarray, n_units: int | None = None) -> np.ndarray:
    """Per-task sums of per-pair values (e.g. flips): the quantity task-level tests resample."""
    n_units = int(units.max()) + 1 if n_units is None and units.size else (n_units or 0)
    return np.bincount(units, weights=np.asarray(values, dtype=np.float64), minlength=n_units)


def paired_test(units: np.ndarray, flips: np.ndarray, mid_p: bool = False) -> float:
    """The p-value of "no effect" for paired flips, with the task as the unit.

    One pair per task: the exact McNemar test on (b, c) (mid-p with `mid_p`). Several epochs of a
    task: the exact sign-flip test of `sign_flip_pvalue` on the tasks' summed flips, because
    epochs of one task are not independent evidence.
    """
    flips = np.asarray(flips)
    if flips.size == 0:
        return 1.0
    _, inv, per_unit = np.unique(units, return_inverse=True, return_counts=True)
    if per_unit.max() == 1:
        b, c = int((flips > 0).sum()), int((flips < 0).sum())
        return float(mcnemar_midp(b, c) if mid_p else mcnemar_exact(b, c))
    sums = np.rint(task_sums(inv.ravel(), flips)).astype(np.int64)
    mag = np.bincount(np.abs(sums))
    return sign_flip_pvalue(mag, int(sums.sum()), mid_p=mid_p)


def design_effect(units: np.ndarray, values: np.ndarray) -> float:
    """How much epochs of one task repeat each other: Var(task sums) / (pairs per task * Var(pair)).

    1 when epochs are independent (or there is one per task); up to the mean number of pairs per
    task when they always agree. Pairs needed / design effect = independent observations; a power
    calculation in pairs becomes one in tasks as pairs * design effect / pairs per task.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return 1.0
    _, inv, m = np.unique(units, return_inverse=True, return_counts=True)
    if m.max() == 1:
        return 1.0
    mu = values.mean()
    var_pair = float(((values - mu) ** 2).mean())
    if var_pair <= 0:
        return 1.0
    sums = task_sums(inv.ravel(), values, m.size)
    var_unit = float(((sums - m * mu) ** 2).sum() / m.sum())
    return float(min(max(var_unit / var_pair, 1.0), m.mean()))


# ---------------------------------------------------------------- intervals that invert their test
def _tango_t(b: float, c: float, n: float, d: float) -> float:
    """Tango's (1998) score statistic of H0: (b - c) / n = d for paired binary data.

    b, c: discordant counts (b = failed without, passed with); n: pairs. The restricted maximum
    likelihood estimate of P(c-type pair) under H0 is the root of 2n p^2 + B p + C with
    B = -b - c + (2n - b + c) d, C = -c d (1 - d); the statistic is
    (b - c - n d) / sqrt(n (2 p~ + d (1 - d))). At d = 0 it is (b - c) / sqrt(b + c): the
    McNemar score statistic.
    """
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * d
    c_ = -c * d * (1.0 - d)
    disc = max(b_ * b_ - 4.0 * a_ * c_, 0.0)
    p21 = (math.sqrt(disc) - b_) / (2.0 * a_)
    var = n * (2.0 * p21 + d * (1.0 - d))
    num = b - c - n * d
    if var <= 0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


def tango_interval(b: float, c: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Tango's score interval for the paired difference (b - c) / n: the values d that the score
    test of `_tango_t` does not reject at 1 - level (Fagerland, Lydersen & Laake 2014 recommend
    it). Never zero-width for n > 0; (nan, nan) for n = 0. Counts may be fractional (design-effect
    scaled, `paired_score`)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    est = (b - c) / n

    def root(lo: float, hi: float, target: float) -> float:
        # T is decreasing in d: find d in [lo, hi] with T(d) = target
        for _ in range(80):
            mid = (lo + hi) / 2
            if _tango_t(b, c, n, mid) > target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    eps = 1e-12
    lower = -1.0 if _tango_t(b, c, n, -1.0 + eps) <= z else root(-1.0 + eps, est, z)
    upper = 1.0 if _tango_t(b, c, n, 1.0 - eps) >= -z else root(est, 1.0 - eps, -z)
    return (float(lower), float(upper))


def cluster_design_effect(units: np.ndarray, flips: np.ndarray) -> float:
    """Rao-Scott design effect of a paired difference over clustered pairs (Durkalski et al. 2003):
    sum over tasks of (summed flips)^2 over the sum of their absolute values, at least 1; 1 without
    any task whose flips do not cancel. It depends on the tasks' sums only, so not on how the
    epochs (trials) of a task are ordered or paired."""
    s = _task_flip_sums(units, flips)
    d = float(np.abs(s).sum())
    return max(1.0, float((s * s).sum()) / d) if d else 1.0


def _task_flip_sums(units: np.ndarray, flips: np.ndarray) -> np.ndarray:
    _, inv = np.unique(units, return_inverse=True)
    return np.bincount(inv.ravel(), weights=np.asarray(flips, dtype=np.float64))


def task_level_counts(units: np.ndarray, flips: np.ndarray) -> tuple[int, int]:
    """(rescues, harms) as the tasks' summed flips S_u count them: sum of max(S_u, 0) and of
    max(-S_u, 0). Equal to the pair counts with one pair per task; with epochs or k-of-n trials,
    which trial pairs with which cannot change them (`paired_score` tests the same counts)."""
    if not np.asarray(units).size:
        return 0, 0
    sums = _task_flip_sums(units, flips)
    return round(float(np.maximum(sums, 0).sum())), round(float(np.maximum(-sums, 0).sum()))


@dataclass(frozen=True)
class PairedScore:
    """A paired difference (b - c) / n with the score test and the interval that inverts it."""

    estimate: float | None
    ci: tuple[float, float] | None
    p: float
    design_effect: float
    test: str


def paired_score(units: np.ndarray, flips: np.ndarray, level: float = 0.95) -> PairedScore:
    """Score test and Tango interval of the mean flip, the task as the unit.

    One pair per task: Tango's interval and the McNemar score test (b - c) / sqrt(b + c), which is
    the interval's test at 0. Several epochs per task: each task's summed flips S_u count as
    max(S_u, 0) rescues and max(-S_u, 0) harms (pairing the epochs of a task differently cannot
    change them), and both are computed on those counts divided by the Rao-Scott design effect
    D = sum S_u^2 / sum |S_u| of `cluster_design_effect` (b / D, c / D, n / D); at 0 the test is
    Durkalski's clustered McNemar, sum of S_u over the root of sum of S_u^2. The interval
    excludes 0 exactly when p <= 1 - level.
    """
    flips = np.asarray(flips)
    n = flips.size
    if n == 0:
        return PairedScore(None, None, 1.0, 1.0, "score McNemar (Tango)")
    clustered = np.unique(units).size < n
    if clustered:
        b, c = (float(v) for v in task_level_counts(units, flips))
        deff = cluster_design_effect(units, flips)
    else:
        b, c = float((flips > 0).sum()), float((flips < 0).sum())
        deff = 1.0
    bs, cs, ns = b / deff, c / deff, n / deff
    z = (bs - cs) / math.sqrt(bs + cs) if bs + cs > 0 else 0.0
    p = float(min(1.0, 2.0 * (1.0 - NormalDist().cdf(abs(z)))))
    lo, hi = tango_interval(bs, cs, ns, level)
    test = ("cluster-adjusted score McNemar (Durkalski; task as the unit)" if clustered
            else "score McNemar (Tango)")
    return PairedScore((b - c) / n, (lo, hi), p, deff, test)


def by_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Yekutieli adjusted p-values (FDR under any dependence): BH times sum_{i<=m} 1/i,
    capped at 1; NaN inputs stay NaN and are not counted (statsmodels' fdr_by)."""
    p = np.asarray(p, dtype=float)
    m = int((~np.isnan(p)).sum())
    if m == 0:
        return np.full(p.shape, np.nan)
    return np.minimum(bh_qvalues(p) * float(np.sum(1.0 / np.arange(1, m + 1))), 1.0)


def tarone_testable(p_min: np.ndarray, alpha: float) -> np.ndarray:
    """Tarone's (1990) screen for discrete tests: the hypotheses whose smallest achievable p-value
    can reach alpha / K, with K the smallest number such that at most K hypotheses can. The others
    cannot be rejected whatever their data and are not counted in the multiplicity correction."""
    p_min = np.asarray(p_min, dtype=float)
    ok = ~np.isnan(p_min)
    for k in range(1, int(ok.sum()) + 1):
        sel = ok & (p_min <= alpha / k)
        if int(sel.sum()) <= k:
            return sel
    return np.zeros(p_min.shape, dtype=bool)


_LOG_FACTORIAL = np.zeros(1)  # log k! for k = 0, 1, ...: grown on demand, shared by every test


def _log_factorial(top: int) -> np.ndarray:
    """log k! for k = 0..top (math.lgamma's values, computed once per k: recomputing them for every
    Skellam test was ~1/6 of default rank at 200k pairs; scipy stays unimported for rank)."""
    global _LOG_FACTORIAL
    have = _LOG_FACTORIAL.size
    if have <= top:
        more = np.array([math.lgamma(k + 1.0) for k in range(have, max(top + 1, 2 * have))])
        _LOG_FACTORIAL = np.concatenate([_LOG_FACTORIAL, more])
    return _LOG_FACTORIAL[: top + 1]


def _poisson_pmf(lam: float, top: int) -> np.ndarray:
    k = np.arange(top + 1, dtype=np.float64)
    lg = _log_factorial(top)
    if lam <= 0:
        out = np.zeros(top + 1)
        out[0] = 1.0
        return out
    return np.exp(k * math.log(lam) - lam - lg)


def skellam_test(d_obs: int, lam_up: float, lam_down: float, level: float = 0.95,
                 d_range: tuple[int, int] | None = None) -> tuple[float, float, int, int]:
    """Two-sided exact test of an observed difference D = U - V of independent Poisson counts with
    means lam_up, lam_down (Skellam distribution): p = min(1, 2 min(P(D <= d), P(D >= d))).

    Returns (p, smallest achievable p, a, b) with [a, b] the acceptance region at 1 - level (the
    values of D the test does not reject); inverting it over shifts of D gives the interval. The
    smallest achievable p is over `d_range` (the values D can take given the data's size: a skill
    retrieved on n0 failing and n1 passing pairs has D in [-n1, n0]), for Tarone's screen.
    """
    lo_d, hi_d = d_range if d_range is not None else (d_obs, d_obs)
    top_u = int(lam_up + 12 * math.sqrt(lam_up + 1) + 12 + max(d_obs, hi_d, 0))
    top_v = int(lam_down + 12 * math.sqrt(lam_down + 1) + 12 + max(-d_obs, -lo_d, 0))
    pu, pv = _poisson_pmf(lam_up, top_u), _poisson_pmf(lam_down, top_v)
    pmf = np.convolve(pu, pv[::-1])  # index i <-> D = i - top_v
    cdf = np.cumsum(pmf)
    sf = np.cumsum(pmf[::-1])[::-1]
    two = np.minimum(1.0, 2.0 * np.minimum(cdf, sf))
    i = d_obs + top_v
    p = float(two[i])
    p_min = float(min(two[lo_d + top_v], two[hi_d + top_v]))
    acc = np.flatnonzero(two > 1 - level)
    a, b = (int(acc[0]) - top_v, int(acc[-1]) - top_v) if acc.size else (d_obs, d_obs)
    return min(p, 1.0), p_min, a, b


# ---------------------------------------------------------------- flips both ways
def fisher_greater(k1: int, n1: int, k2: int, n2: int) -> float:
    """One-sided Fisher exact p of "rate 1 > rate 2": P(X >= k1) for X hypergeometric with
    k1 + k2 events among n1 + n2, n1 drawn (scipy.stats.fisher_exact(..., 'greater'))."""
    k1, n1, k2, n2 = (int(v) for v in (k1, n1, k2, n2))
    if n1 <= 0 or n2 < 0 or k1 <= 0:
        return 1.0
    big_n, big_k = n1 + n2, k1 + k2
    hi = min(n1, big_k)
    if k1 > hi:
        return 0.0
    lf = _log_factorial(big_n)
    x = np.arange(k1, hi + 1)
    log_pmf = (lf[big_k] - lf[x] - lf[big_k - x] + lf[big_n - big_k] - lf[n1 - x]
               - lf[big_n - big_k - n1 + x] - lf[big_n] + lf[n1] + lf[big_n - n1])
    return float(min(1.0, np.exp(log_pmf).sum()))


@dataclass(frozen=True)
class ExcessFlips:
    """Do skills flip outcomes both ways more than a comparator does (`excess_flips`)?

    Rescues are counted among pairs that fail without skills, harms among pairs that pass, on the
    retrieving pairs and on the comparator's (pairs that retrieved nothing, or the replicate arm:
    a second run without skills); each direction gets a one-sided test, and "both ways" holds when
    both reject (p = the larger of the two: an intersection-union test, exact at its level)."""

    rescue_rate: float
    harm_rate: float
    ref_rescue_rate: float
    ref_harm_rate: float
    p_rescue: float
    p_harm: float
    n_fail: int  # retrieving pairs that fail without skills (rescue chances)
    n_pass: int
    ref_n_fail: int
    ref_n_pass: int
    comparator: str
    test: str = "one-sided Fisher exact per direction on task-level counts (Rao-Scott), both must reject"

    @property
    def p(self) -> float:
        return max(self.p_rescue, self.p_harm)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "p": self.p}


def _scaled_counts(units: np.ndarray, events: np.ndarray) -> tuple[int, int]:
    """(events, trials) divided by the epochs' design effect, rounded: tasks, not pairs."""
    if events.size == 0:
        return 0, 0
    deff = design_effect(units, events.astype(np.float64))
    return round(float(events.sum()) / deff), max(round(events.size / deff), 1)


def excess_flips(units: np.ndarray, y_neg: np.ndarray, flip: np.ndarray, ref_units: np.ndarray,
                 ref_y_neg: np.ndarray, ref_flip: np.ndarray, comparator: str) -> ExcessFlips | None:
    """The both-ways test of retrieving pairs (units, disabled outcome, flip) against a comparator's
    pairs; None when either side has no pair that fails or none that passes without skills."""
    y_neg, ref_y_neg = np.asarray(y_neg, bool), np.asarray(ref_y_neg, bool)
    flip, ref_flip = np.asarray(flip), np.asarray(ref_flip)
    out: list[float] = []
    sizes: list[int] = []
    for fails, up in ((True, 1), (False, -1)):
        mine = ~y_neg if fails else y_neg
        ref = ~ref_y_neg if fails else ref_y_neg
        if not mine.any() or not ref.any():
            return None
        k1, n1 = _scaled_counts(units[mine], flip[mine] == up)
        k2, n2 = _scaled_counts(ref_units[ref], ref_flip[ref] == up)
        out += [float((flip[mine] == up).mean()), float((ref_flip[ref] == up).mean()), fisher_greater(k1, n1, k2, n2)]
        sizes += [int(mine.sum()), int(ref.sum())]
    return ExcessFlips(out[0], out[3], out[1], out[4], out[2], out[5], sizes[0], sizes[2], sizes[1], sizes[3],
                       comparator)
