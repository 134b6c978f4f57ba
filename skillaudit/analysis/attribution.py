"""Per-skill attribution tables of the retrieval-triggered effect (DESIGN §2).

For every pair in S_call (the enabled run got at least one skill back) with deduplicated retrieved
set K and flip f = y+ - y- in {-1, 0, +1}:

- exposure counts: n_k, b_k, c_k, net_k = b_k - c_k, rae_k = net_k / n_k, a p-value per skill
  (exact McNemar when every task has one epoch, else the task-level sign-flip test of
  `stats.paired_sign_test`) and a Benjamini-Hochberg q across the skills retrieved at least once
  (skills never retrieved were not tested: their p and q are null);
- additive share: each k in K gets f * w_k with weights summing to 1 over K (`equal`, `rank`,
  `score`), so the shares of all skills add up to cond_b - cond_c exactly;
- exclusive counts: the same counts over the pairs where k was the only skill retrieved;
- regression (`skillaudit.analysis.regression`): each skill's additive effect on the flip rate with a
  task-level interval, aliases where skills were never retrieved apart;
- library level (`skillaudit.analysis.library_effect`): the library's mean effect per injected skill, the
  heterogeneity test, and each skill's effect relative to the library average of the others.

Verdicts are per model: `attribute_models` runs all of this per model (or pooled, with model as a
stratum, when asked). Everything is sparse matrix products over the pair x skill matrix; no
per-pair Python loops. Without a bootstrap nothing here imports scipy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from skillaudit.analysis.library_effect import (
    MIN_TESTED,
    N_PERMUTATIONS,
    VS_LIBRARY_WORDS,
    LibraryEffect,
    _merged_design,
    library_effect,
    stratified_relative,
    with_measured_differences,
)
from skillaudit.analysis.methods import regression_words
from skillaudit.analysis.regression import SkillEffectRegression
from skillaudit.errors import InputError
from skillaudit.runs import PairedRuns
from skillaudit.stats import bh_qvalues, mcnemar_exact, mcnemar_midp, sign_flip_pvalue
from skillaudit.stats._csr import Csr

if TYPE_CHECKING:
    import scipy.sparse as sp

SCHEMA = "skillaudit.rank/v1"
SCHEMES = ("equal", "rank", "score")


class AttributionError(InputError):
    """Attribution cannot be computed with the options given (unknown scheme, ...)."""

# ---------------------------------------------------------------- results
def _nums(x: np.ndarray) -> list[float | None]:
    """Each element of a float array as a Python float, None where it is not finite."""
    return [v if ok else None for v, ok in zip(x.tolist(), np.isfinite(x).tolist(), strict=True)]


def _skill_preferences(X: Csr, pref: np.ndarray, units: np.ndarray, level: float,
                       mid_p: bool) -> list[dict[str, Any] | None]:
    """Per skill (column of X), `metrics.preference_figures` of the judged pairs that retrieved it."""
    from skillaudit.analysis.metrics import preference_figures
    from skillaudit.runs.records import PREFERENCE_NONE

    row_of = X.row_index()
    judged = pref[row_of] != PREFERENCE_NONE
    rows, cols = row_of[judged], X.indices[judged]
    order = np.argsort(cols, kind="stable")
    rows, cols = rows[order], cols[order]
    bounds = np.searchsorted(cols, np.arange(X.shape[1] + 1))
    return [preference_figures(pref[rows[a:b]], units[rows[a:b]], level, mid_p) if b > a else None
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]


def _dataclass_rows(cls: type, columns: dict[str, list[Any]]) -> list[Any]:
    """`cls(**row)` for each row of `columns` (one value list per field)."""
    names = tuple(columns)
    return [cls(**dict(zip(names, row, strict=True))) for row in zip(*columns.values(), strict=True)]


def _pairs(x: np.ndarray) -> list[tuple[float, float] | None]:
    """Each row of an n x 2 float array as a tuple, None where it is not all finite."""
    return [tuple(v) if ok else None for v, ok in zip(x.tolist(), np.isfinite(x).all(axis=1).tolist(), strict=True)]


@dataclass(frozen=True)
class SkillAttribution:
    """One skill's row of the `rank` table (fractions, not percentage points)."""

    skill_id: str
    n_retrieved: int
    b: int
    c: int
    net: int
    share: float
    rae_k: float | None
    p_value: float | None  # exact McNemar on (b, c); None when never retrieved (not tested)
    q_value: float | None  # BH over the skills retrieved at least once
    exclusive_n: int
    exclusive_b: int
    exclusive_c: int
    in_library: bool | None  # None when no library was given
    coef: float | None = None  # regression: additive effect on the flip rate
    coef_ci: tuple[float, float] | None = None
    coef_q: float | None = None  # BH over bootstrap p-values of the identifiable coefficients
    identifiable: bool | None = None  # None when the regression was not run
    aliases: tuple[str, ...] = ()
    alias_coef: float | None = None  # joint effect of this skill and its aliases
    alias_coef_ci: tuple[float, float] | None = None
    # vs the library: net flips per retrieving pair minus what the other skills' pairs of the same
    # kind of task (same disabled outcome, retrieved-set size, model and benchmark) would give
    # (library_effect.stratified_relative): exact test, the interval inverting it, BY q over the
    # skills with enough retrieving tasks to be judged (null elsewhere)
    relative_effect: float | None = None
    relative_ci: tuple[float, float] | None = None
    relative_p: float | None = None
    relative_q: float | None = None
    expected_net: float | None = None  # rescues minus harms the library's rates predict here
    relative_testable: bool | None = None  # enough retrieving tasks to reach significance
    n_tasks: int = 0  # distinct tasks among the n_retrieved pairs (the unit of p_value)
    model: str | None = None  # the model these runs are of ('*' when models were pooled)
    # from re-runs with random subsets of the retrieved skills withheld (mask arms), where they exist
    causal_effect: float | None = None
    causal_ci: tuple[float, float] | None = None
    causal_q: float | None = None
    causal_relative: float | None = None
    causal_relative_ci: tuple[float, float] | None = None
    causal_n_withheld: int = 0
    # the library's text differs from the one the runs saw (provenance.py); None = not known
    edited: bool | None = None
    # the judged outcome on the pairs that retrieved the skill (`metrics.preference_figures`);
    # None when none of them was judged
    preference: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "skill_id": self.skill_id, "n_retrieved": self.n_retrieved, "n_tasks": self.n_tasks,
            "b": self.b, "c": self.c,
            "net": self.net, "share": self.share, "rae_k": self.rae_k, "p_value": self.p_value,
            "q_value": self.q_value, "exclusive_n": self.exclusive_n,
            "exclusive_b": self.exclusive_b, "exclusive_c": self.exclusive_c,
            "in_library": self.in_library, "coef": self.coef,
            "coef_ci": list(self.coef_ci) if self.coef_ci else None, "coef_q": self.coef_q,
            "identifiable": self.identifiable, "aliases": list(self.aliases),
            "alias_coef": self.alias_coef,
            "alias_coef_ci": list(self.alias_coef_ci) if self.alias_coef_ci else None,
            "relative_effect": self.relative_effect,
            "relative_ci": list(self.relative_ci) if self.relative_ci else None,
            "relative_p": self.relative_p, "relative_q": self.relative_q,
            "expected_net": self.expected_net, "relative_testable": self.relative_testable,
            "causal_effect": self.causal_effect,
            "causal_ci": list(self.causal_ci) if self.causal_ci else None,
            "causal_q": self.causal_q, "causal_relative": self.causal_relative,
            "causal_relative_ci": list(self.causal_relative_ci) if self.causal_relative_ci else None,
            "causal_n_withheld": self.causal_n_withheld,
            "edited": self.edited, "preference": self.preference,
        }


@dataclass(frozen=True)
class AttributionResult:
    """Per-skill rows (most harmful first) and the S_call totals they decompose."""

    skills: tuple[SkillAttribution, ...]
    totals: dict[str, int]
    settings: dict[str, Any]
    skill_ids: tuple[str, ...] = ()  # column order of `co_retrieval`
    co_retrieval: Csr = field(default_factory=lambda: Csr.of(np.zeros((0, 0))), repr=False, compare=False)
    library: LibraryEffect | None = None  # the library-level verdict of these runs (regression on)
    # the regression's resamples (n_boot x skills, columns in `skill_ids` order) or its sandwich
    # covariance, for intervals of contrasts between skills (merge directions)
    effect_samples: np.ndarray | None = field(default=None, repr=False, compare=False)
    effect_cov: Any = field(default=None, repr=False, compare=False)
    causal: dict[str, Any] | None = None  # the mask surrogate's summary (runs, tasks, validation)
    # differences already computed (`prefetch_differences`, `difference`): (a, b) -> result
    _differences: dict[tuple[str, str], Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _by_id: dict[str, SkillAttribution] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def model(self) -> str | None:
        return self.settings.get("model")

    def get(self, skill_id: str) -> SkillAttribution | None:
        if len(self._by_id) != len(self.skills):  # built once (the merge rule asks thousands of times)
            self._by_id.clear()
            self._by_id.update((s.skill_id, s) for s in self.skills)
        return self._by_id.get(skill_id)

    def partners(self, skill_id: str) -> list[tuple[str, int]]:
        """Skills retrieved together with `skill_id`, most frequent first: [(id, n_together)]."""
        if skill_id not in self.skill_ids:
            return []
        i = self.skill_ids.index(skill_id)
        row = self.co_retrieval.row(i)
        row[i] = 0
        order = np.lexsort((np.arange(row.size), -row))
        return [(self.skill_ids[j], int(row[j])) for j in order if row[j] > 0]

    def prefetch_differences(self, pairs: Sequence[tuple[str, str]]) -> None:
        """`difference(a, b)` for many pairs at once (a near-duplicate partner per skill: thousands in
        a large library): the sandwich path forms every contrast's variance from one dense inverse
        (`SandwichCov.difference_vars`) instead of two conjugate-gradient solves each."""
        if self.effect_cov is None or self._resampled:
            return
        todo = [(a, b, rows) for a, b in dict.fromkeys(pairs)
                if (a, b) not in self._differences and (rows := self._identified(a, b)) is not None]
        if todo:
            self._from_cov(todo)

    def difference(self, a: str, b: str) -> tuple[float, tuple[float, float]] | None:
        """coef(a) - coef(b) and its interval from the same task-level resamples (paired: both
        skills' coefficients come from each resample together); None when either coefficient is
        not identifiable or there are no intervals."""
        if (a, b) not in self._differences:
            self._differences[(a, b)] = self._difference(a, b)
        return self._differences[(a, b)]

    @property
    def _resampled(self) -> bool:
        return self.effect_samples is not None and bool(self.effect_samples.shape[0])

    def _identified(self, a: str, b: str) -> tuple[SkillAttribution, SkillAttribution] | None:
        """Both rows, when both coefficients are identifiable (else no difference is formed)."""
        ra, rb = self.get(a), self.get(b)
        if ra is None or rb is None or ra.coef is None or rb.coef is None or not (ra.identifiable and rb.identifiable):
            return None
        return ra, rb

    def _from_cov(self, todo: list[tuple[str, str, tuple[SkillAttribution, SkillAttribution]]]) -> None:
        """Normal intervals of coef(a) - coef(b) from the sandwich covariance, for each (a, b, rows)."""
        from statistics import NormalDist

        cov, col_group = self.effect_cov
        index = {s: i for i, s in enumerate(self.skill_ids)}
        var = cov.difference_vars(np.array([(col_group[index[a]], col_group[index[b]]) for a, b, _ in todo],
                                            dtype=np.int64))
        z = NormalDist().inv_cdf(0.5 + float(self.settings.get("level", 0.95)) / 2)
        for (a, b, (ra, rb)), v in zip(todo, var.tolist(), strict=True):
            diff, se = float(ra.coef - rb.coef), float(np.sqrt(max(v, 0.0)))  # type: ignore[operator]
            self._differences[(a, b)] = (diff, (diff - z * se, diff + z * se))

    def _difference(self, a: str, b: str) -> tuple[float, tuple[float, float]] | None:
        rows = self._identified(a, b)
        if rows is None:
            return None
        if self._resampled:
            level = float(self.settings.get("level", 0.95))
            ia, ib = self.skill_ids.index(a), self.skill_ids.index(b)
            d = self.effect_samples[:, ia] - self.effect_samples[:, ib]  # type: ignore[index]
            lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2])
            return float(rows[0].coef - rows[1].coef), (float(lo), float(hi))  # type: ignore[operator]
        if self.effect_cov is not None:
            self._from_cov([(a, b, rows)])
            return self._differences[(a, b)]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "skills": [s.to_dict() for s in self.skills],
            "totals": dict(self.totals),
            "library": [self.library.to_dict()] if self.library is not None else [],
            "causal": self.causal,
        }


# ---------------------------------------------------------------- computation
def indicator(runs: PairedRuns) -> sp.csr_matrix:
    """Pairs x skills 0/1 retrieval matrix (float64, scipy CSR)."""
    x = runs.ranks.tocsr().astype(np.float64, copy=True)
    x.data[:] = 1.0
    return x


def share_weights(runs: PairedRuns, scheme: str = "equal") -> tuple[sp.csr_matrix, int]:
    """Pairs x skills weights (scipy CSR), each retrieving row summing to 1; and how many rows fell back to equal.

    `equal`: 1/|K|. `rank`: proportional to 1/rank. `score`: proportional to the retrieval score;
    a row with any missing, non-finite or negative score, or scores summing to 0, falls back to
    equal weights (counted in the second return value).
    """
    import scipy.sparse as sp

    vals, fallback = _share_values(runs, scheme)
    r = runs.retrieval
    return sp.csr_matrix((vals, r.indices.copy(), r.indptr.copy()), shape=r.shape), fallback


def _share_values(runs: PairedRuns, scheme: str) -> tuple[np.ndarray, int]:
    """`share_weights`' values, one per entry of `runs.retrieval`, and the fallback count."""
    if scheme not in SCHEMES:
        raise AttributionError(f"unknown attribution scheme {scheme!r} (expected one of {', '.join(SCHEMES)})")
    ranks = runs.retrieval
    n_rows = ranks.shape[0]
    row_of = ranks.row_index()
    fallback = 0
    if scheme == "equal":
        vals = np.ones(ranks.nnz)
    elif scheme == "rank":
        vals = 1.0 / ranks.data.astype(np.float64)
    else:
        vals = runs.retrieval_scores.astype(np.float64)
        bad_entry = ~np.isfinite(vals) | (vals < 0)
        bad_row = np.bincount(row_of, weights=bad_entry, minlength=n_rows) > 0
        row_sum = np.bincount(row_of, weights=np.where(bad_entry, 0.0, vals), minlength=n_rows)
        bad_row |= (row_sum <= 0) & (np.diff(ranks.indptr) > 0)
        vals = np.where(bad_row[row_of], 1.0, vals)
        fallback = int(bad_row.sum())
    row_sum = np.bincount(row_of, weights=vals, minlength=n_rows)
    return vals / row_sum[row_of], fallback


def _task_skill_sums(entry_units: np.ndarray, cols: np.ndarray, flips: np.ndarray, p: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (task, skill) that occurs among the entries (a pair's retrieval of a skill): its skill
    column, its summed flips S (all the task's pairs retrieving it) and its number of pairs."""
    key = entry_units.astype(np.int64) * p + cols
    uniq, inv, per_key = np.unique(key, return_inverse=True, return_counts=True)
    sums = np.rint(np.bincount(inv.ravel(), weights=flips, minlength=uniq.size)).astype(np.int64)
    return uniq % p, sums, per_key


def _task_level_bc(col: np.ndarray, sums: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Per skill, the rescues and harms its tasks' summed flips count: sum of max(S, 0) and of
    max(-S, 0) (which epoch or trial pairs with which cannot change them)."""
    return (np.bincount(col, weights=np.maximum(sums, 0), minlength=p).astype(np.int64),
            np.bincount(col, weights=np.maximum(-sums, 0), minlength=p).astype(np.int64))


def _skill_tests(X: Csr, row_of: np.ndarray, f: np.ndarray, units: np.ndarray, b_k: np.ndarray,
                 c_k: np.ndarray, mid_p: bool
                 ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Per skill: the p-value of "no effect where retrieved" with the task as the unit, the number
    of distinct tasks among its pairs, and, when some task had several pairs retrieving it, the
    task-level rescue and harm counts (`_task_level_bc`; None: the pair counts b_k, c_k are those).

    A task's pairs retrieving k (its epochs) are summed into one signed count S; with one pair per
    task that is the exact McNemar test on (b_k, c_k), otherwise the exact sign-flip test of the
    tasks' sums (`stats.sign_flip_pvalue`).
    """
    p = X.shape[1]
    col, sums, per_key = _task_skill_sums(units[row_of], X.indices, f[row_of], p)
    n_tasks = np.bincount(col, minlength=p)
    test = mcnemar_midp if mid_p else mcnemar_exact
    if per_key.size == 0 or per_key.max() == 1:
        return np.asarray(test(b_k, c_k), dtype=np.float64).reshape(p), n_tasks, None
    task_bc = _task_level_bc(col, sums, p)
    pos = np.bincount(col, weights=sums > 0, minlength=p).astype(np.int64)
    neg = np.bincount(col, weights=sums < 0, minlength=p).astype(np.int64)
    pvals = np.asarray(test(pos, neg), dtype=np.float64).reshape(p)
    mag = np.abs(sums)
    top = int(mag.max()) if mag.size else 0
    big = np.bincount(col, weights=mag > 1, minlength=p) > 0  # skills whose tasks' sums exceed 1
    if big.any():
        counts = np.bincount(col * (top + 1) + mag, minlength=p * (top + 1)).reshape(p, top + 1)
        net = np.bincount(col, weights=sums, minlength=p).astype(np.int64)
        cache: dict[tuple[bytes, int], float] = {}
        for j in np.flatnonzero(big).tolist():
            k = (counts[j, 1:].tobytes(), abs(int(net[j])))
            if k not in cache:
                cache[k] = sign_flip_pvalue(counts[j], int(net[j]), mid_p=mid_p)
            pvals[j] = cache[k]
    return pvals, n_tasks, task_bc


def _label(names: tuple[str, ...], index: np.ndarray) -> str:
    """The one name of `names` used by `index`, or '*' when several are."""
    used = np.unique(index)
    return names[int(used[0])] if used.size == 1 else "*"


def attribute(
    runs: PairedRuns,
    library: Any = None,
    scheme: str = "equal",
    regression: bool = True,
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 1.0,
    level: float = 0.95,
    mid_p: bool = False,
    n_perm: int = N_PERMUTATIONS,
    min_cond: int = 10,
    arms: Any = None,
    cells: Sequence[tuple[int, Csr, np.ndarray]] = (),
    cell_results: list[Any] | None = None,
    mc_stop: bool = True,
) -> AttributionResult:
    """Per-skill exposure counts, additive shares, exclusive counts and (optionally) regression.

    Skills are the union of the ids retrieved in `runs` and the ids of `library`; a library skill
    no pair retrieved appears with n_retrieved = 0 and null p/q (no test was possible). With a
    library, retrieved ids missing from it have `in_library = False`; without one, `in_library`
    is None. Rows are sorted by net ascending (most harmful first), ties by share, then id.

    `runs` is judged as one population: pass one model's pairs (`attribute_models` does) for
    per-model verdicts. With the regression and resamples on, the result carries the library-level
    effect and each skill's effect relative to the library average (`skillaudit.analysis.library_effect`).
    `cells` are (benchmark index, merged design, tested columns) of this population's (model,
    benchmark) cells, whose heterogeneity tests share this one's permutations; their results go to
    `cell_results` (see `attribute_models`).
    """
    lib_ids: tuple[str, ...] = tuple(library.ids) if library is not None else ()
    extra = tuple(sorted(set(lib_ids) - set(runs.skills)))
    ids = tuple(runs.skills) + extra
    p = len(ids)
    hits = runs.retrieval
    # 0/1 retrieval matrix; library skills nobody retrieved are its last, empty, columns
    X = Csr(np.ones(hits.nnz), hits.indices, hits.indptr, (hits.shape[0], p))
    w, fallback = _share_values(runs, scheme)

    f = runs.flip.astype(np.float64)
    units = runs.unit_ids()
    in_cond = runs.retrieved
    totals = {
        "cond_b": int(((f > 0) & in_cond).sum()),
        "cond_c": int(((f < 0) & in_cond).sum()),
        "n_cond": int(in_cond.sum()),
        "n_cond_tasks": int(np.unique(units[in_cond]).size),
    }
    model = _label(runs.models, runs.model) if runs.n_pairs else None
    benchmark = _label(runs.benchmarks, runs.benchmark) if runs.n_pairs else None

    reg: SkillEffectRegression | None = None
    coef_q = np.full(p, np.nan)
    co: Csr | None = None
    lib_effect = None
    if regression:
        reg, co, lib_effect = _regression_step(
            runs, X, f, units, model or "*", benchmark or "*", alpha=alpha, n_boot=n_boot, seed=seed,
            level=level, n_perm=n_perm, min_cond=min_cond, cells=cells, cell_results=cell_results,
            mc_stop=mc_stop)
        coef_q = bh_qvalues(np.where(reg.identifiable_, reg.coef_p_, np.nan))
    if co is None:
        co = X.gram()
    rows_c = np.flatnonzero(in_cond)
    strat = stratified_relative(
        X.take_rows(rows_c), f[rows_c], runs.y_neg[rows_c], units[rows_c],
        (runs.model.astype(np.int64) * len(runs.benchmarks) + runs.benchmark)[rows_c], level=level)

    lib_set = set(lib_ids)
    # one value list per field: one conversion per column, not per skill (fields left out keep
    # their defaults: the regression's, when there is none)
    columns, n_k, clustered = _exposure_columns(X, w, f, runs.n_skills_retrieved, units, mid_p)
    columns |= {
        "skill_id": list(ids),
        "in_library": [sid in lib_set for sid in ids] if library is not None else [None] * p,
        "model": [model] * p,
    }
    if reg is not None:
        columns |= {
            "coef": _nums(reg.coef_), "coef_ci": _pairs(reg.coef_ci_), "coef_q": _nums(coef_q),
            "identifiable": reg.identifiable_.tolist(),
            "aliases": [tuple(ids[a] for a in al.tolist()) if al.size else () for al in reg.aliases_],
            "alias_coef": _nums(reg.alias_coef_), "alias_coef_ci": _pairs(reg.alias_coef_ci_),
        }
    columns |= {
        "relative_effect": _nums(strat.effect), "relative_ci": _pairs(strat.ci),
        "relative_p": _nums(strat.p), "relative_q": _nums(strat.q),
        "expected_net": _nums(strat.expected_net),
        "relative_testable": [bool(t) if n else None for t, n in zip(strat.testable.tolist(), n_k.tolist(), strict=True)],
    }
    causal = None
    if arms is not None and arms.n:  # per-skill causal effects from mask re-runs
        got_columns, causal, lib_effect = _causal_step(runs, arms, ids, lib_effect, n_boot=n_boot, seed=seed,
                                                       level=level, alpha=alpha)
        columns |= got_columns
    if runs.preference is not None:  # judged outcomes: each skill's retrieving pairs, the task as the unit
        columns["preference"] = _skill_preferences(X, runs.preference, units, level, mid_p)
    rows_out = _dataclass_rows(SkillAttribution, columns)
    rows_out.sort(key=lambda r: (r.net, r.share, r.skill_id))
    n_units = int(np.unique(units).size)
    settings = {
        "model": model,
        "benchmark": benchmark,
        "attribution": scheme,
        "regression": bool(regression),
        "ridge_alpha": alpha,
        "bootstrap": n_boot if regression else 0,
        "regression_interval": getattr(reg, "interval_method_", None),
        "mc_stop": "on" if mc_stop else "off",
        "seed": seed,
        "level": level,
        "n_pairs": runs.n_pairs,
        "n_tasks": n_units,
        "score_fallback_pairs": fallback,
        "p_value": _p_value_method(mid_p, clustered, n_units == runs.n_pairs),
        "untested": "skills never retrieved have null p/q and are not counted in BH",
    }
    settings["method"] = {  # each figure's estimator, as it ran (`analysis.methods`)
        "p": settings["p_value"] + "; q: Benjamini-Hochberg over the tested skills",
        "coef": "ridge regression of each pair's flip on the skills it retrieved (alpha "
                f"{alpha:g}); interval: {regression_words(settings)}" if regression else "no regression",
        "share": f"each pair's flip split among its retrieved skills ({scheme} weights)",
        "coef_interval": regression_words(settings),
        "vs_library": VS_LIBRARY_WORDS,
    }
    samples = cov = None
    if reg is not None and reg.interval_method_ == "bootstrap":
        samples = reg.boot_coef_
    elif reg is not None and reg.group_cov_ is not None:
        cov = (reg.group_cov_, reg.col_group_)
    return AttributionResult(skills=tuple(rows_out), totals=totals, settings=settings,
                             skill_ids=ids, co_retrieval=co, library=lib_effect,
                             effect_samples=samples, effect_cov=cov, causal=causal)


def _exposure_columns(X: Csr, w: np.ndarray, f: np.ndarray, n_skills: np.ndarray, units: np.ndarray,
                      mid_p: bool) -> tuple[dict[str, list[Any]], np.ndarray, bool]:
    """Each skill's exposure counts, additive share, exclusive counts and exact test:
    (their columns, retrieval counts n_k, whether the tests were clustered by task)."""
    p = X.shape[1]
    # X's entries counted by skill and by their pair's class (no flip, rescue, harm; +3 when the
    # skill was retrieved alone) in one bincount, not X' @ a pairs x 7 matrix
    pair_class = (f > 0) + 2 * (f < 0) + 3 * (n_skills == 1)
    row_of = X.row_index()
    by_class = np.bincount(pair_class[row_of] * p + X.indices, minlength=6 * p)
    by_class = by_class.reshape(6, p).astype(np.int64)
    n_k, ex_n = by_class.sum(axis=0), by_class[3:].sum(axis=0)
    b_k, c_k = by_class[1] + by_class[4], by_class[2] + by_class[5]
    share = np.bincount(X.indices, weights=w * f[row_of], minlength=p)  # W' f
    retrieved = n_k > 0
    tests, n_tasks, task_bc = _skill_tests(X, row_of, f, units, b_k, c_k, mid_p)
    clustered = task_bc is not None
    ex_b, ex_c = by_class[4], by_class[5]
    if task_bc is not None:  # several pairs per task: task-level counts, the exclusive ones likewise
        b_k, c_k = task_bc
        alone = (n_skills == 1)[row_of]
        col, sums, _ = _task_skill_sums(units[row_of[alone]], X.indices[alone], f[row_of[alone]], p)
        ex_b, ex_c = _task_level_bc(col, sums, p)
    pvals = np.where(retrieved, tests, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        rae = np.where(retrieved, (b_k - c_k) / np.maximum(n_k, 1), np.nan)
    columns = {
        "n_retrieved": n_k.tolist(), "b": b_k.tolist(), "c": c_k.tolist(), "net": (b_k - c_k).tolist(),
        "share": share.tolist(), "rae_k": _nums(rae), "p_value": _nums(pvals), "q_value": _nums(bh_qvalues(pvals)),
        "exclusive_n": ex_n.tolist(), "exclusive_b": ex_b.tolist(), "exclusive_c": ex_c.tolist(),
        "n_tasks": n_tasks.tolist(),
    }
    return columns, n_k, clustered


def _regression_step(runs: PairedRuns, X: Csr, f: np.ndarray, units: np.ndarray, model: str, benchmark: str, *,
                     alpha: float, n_boot: int, seed: int, level: float, n_perm: int, min_cond: int,
                     cells: Sequence[tuple[int, Csr, np.ndarray]], cell_results: list[Any] | None,
                     mc_stop: bool = True) -> tuple[SkillEffectRegression, Csr | None, Any]:
    """The ridge regression on the retrieval-triggered pairs and the library-level effect it feeds:
    (fitted regression, X'X when the fit saw every retrieval else None, library effect). The
    regression's own relative effects (shrunk) are superseded by the stratified ones."""
    rows = np.flatnonzero(runs.retrieved)
    x_call = X.take_rows(rows)
    reg = SkillEffectRegression(alpha=alpha, n_boot=n_boot, level=level, random_state=seed)
    reg.fit(x_call, f[rows], groups=units[rows] if n_boot > 0 else None)
    co = reg.gram_ if x_call.nnz == X.nnz else None  # every retrieval is in S_call: X'X is the fit's
    strata = (runs.model.astype(np.int64) * len(runs.benchmarks) + runs.benchmark)[rows]
    row_bench = runs.benchmark[rows]
    subsets = [(np.flatnonzero(row_bench == bi), z_c, tested_c) for bi, z_c, tested_c in cells]
    lib_effect, _shrunk_relative = library_effect(
        reg, x_call, f[rows], units[rows], strata, model=model, benchmark=benchmark, n_perm=n_perm,
        seed=seed, level=level, min_cond=min_cond, baseline=runs.y_neg[rows], subsets=subsets,
        subset_results=cell_results, mc_stop=mc_stop)
    return reg, co, lib_effect


def _causal_step(runs: PairedRuns, arms: Any, ids: tuple[str, ...], lib_effect: Any, *, n_boot: int, seed: int,
                 level: float, alpha: float) -> tuple[dict[str, list[Any]], dict[str, Any] | None, Any]:
    """Per-skill causal effects from mask re-runs: (their columns, the summary, the library effect
    updated with the skills the re-runs measured as differing)."""
    from skillaudit.analysis.counterfactual import causal_effects

    ce = causal_effects(runs, arms, n_boot=max(n_boot, 0), seed=seed, level=level, alpha=alpha)
    if ce is None:
        return {}, None, lib_effect
    got = [ce.get(sid) or {} for sid in ids]
    columns = {
        "causal_effect": [g.get("causal_effect") for g in got],
        "causal_ci": [tuple(g["causal_ci"]) if g.get("causal_ci") else None for g in got],
        "causal_q": [g.get("causal_q") for g in got],
        "causal_relative": [g.get("causal_relative") for g in got],
        "causal_relative_ci": [tuple(g["causal_relative_ci"]) if g.get("causal_relative_ci") else None
                               for g in got],
        "causal_n_withheld": [int(g.get("causal_n_withheld", 0)) for g in got],
    }
    causal = {k: v for k, v in ce.to_dict().items() if k != "skills"}
    if lib_effect is not None:
        rows_c = [g for g in ce.to_dict()["skills"] if g["causal_q"] <= 0.10]
        differing = ([g["skill_id"] for g in rows_c if g["causal_relative_ci"][1] < 0]
                     or [g["skill_id"] for g in rows_c if g["causal_relative_ci"][0] > 0])
        lib_effect = with_measured_differences(lib_effect, differing, ce.n_runs)
    return columns, causal, lib_effect


def _p_value_method(mid_p: bool, clustered: bool, one_pair_per_task: bool) -> str:
    """The settings' words for the per-skill p-values."""
    return ("mid-p " if mid_p else "exact ") + (
        "sign-flip test of each task's summed flips (tasks with several epochs)" if clustered
        else "McNemar (one pair per task)" if one_pair_per_task
        else "McNemar (tasks have several pairs, but each skill was retrieved by at most one pair "
             "of a task)")


@dataclass(frozen=True)
class ModelAttributions:
    """`attribute` per model (verdicts are per model), or once over all models pooled.

    `results` has one AttributionResult per model in run order (one with model '*' when pooled);
    `library` every library-level verdict: per model pooled over its benchmarks ('*'), and per
    (model, benchmark) cell when a model has several benchmarks.
    """

    results: tuple[AttributionResult, ...]
    library: tuple[LibraryEffect, ...]
    pooled: bool
    settings: dict[str, Any]

    @property
    def skills(self) -> tuple[SkillAttribution, ...]:
        return tuple(r for res in self.results for r in res.skills)

    @property
    def totals(self) -> dict[str, int]:
        keys = ("cond_b", "cond_c", "n_cond", "n_cond_tasks")
        return {k: sum(int(res.totals.get(k, 0)) for res in self.results) for k in keys}

    def pooled_rows(self) -> list[SkillAttribution]:
        """One row per skill for what is judged over all pairs (clusters, graphs): a single
        population's rows as they are, else each skill's counts summed over the models (model '*';
        model-specific estimates left out)."""
        if len(self.results) == 1:
            return list(self.results[0].skills)
        keys = ("n_retrieved", "n_tasks", "b", "c", "net", "share", "exclusive_n", "exclusive_b",
                "exclusive_c")
        sums: dict[str, dict[str, Any]] = {}
        for res in self.results:
            for r in res.skills:
                acc = sums.setdefault(r.skill_id, {"in_library": r.in_library, "edited": r.edited,
                                                   **dict.fromkeys(keys, 0)})
                for k in keys:
                    acc[k] += getattr(r, k)
        out = [SkillAttribution(skill_id=sid, rae_k=(v["net"] / v["n_retrieved"] if v["n_retrieved"] else None),
                                p_value=None, q_value=None, model="*", **v) for sid, v in sums.items()]
        return sorted(out, key=lambda r: (r.net, r.share, r.skill_id))

    def for_model(self, model: str) -> AttributionResult | None:
        for res in self.results:
            if res.model == model:
                return res
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "skills": [s.to_dict() for s in self.skills],
            "totals": self.totals,
            "models": [{"model": res.model, "totals": dict(res.totals),
                        "settings": res.settings, "causal": res.causal} for res in self.results],
            "library": [e.to_dict() for e in self.library],
        }


def _cell_fit(runs: PairedRuns, n_boot: int, seed: int, alpha: float, level: float) -> dict[str, Any]:
    """The regression a library-level verdict of `runs` needs, and its inputs."""
    hits = runs.retrieval
    X = Csr(np.ones(hits.nnz), hits.indices, hits.indptr, hits.shape)
    rows = np.flatnonzero(runs.retrieved)
    x_call = X.take_rows(rows)
    f = runs.flip.astype(np.float64)[rows]
    units = runs.unit_ids()[rows]
    # only the library-level figures are kept: no per-skill intervals (for wide libraries, no dense
    # factorisation either: the sandwich's products come from conjugate gradients)
    reg = SkillEffectRegression(alpha=alpha, n_boot=n_boot, level=level, random_state=seed,
                                skill_intervals=False)
    reg.fit(x_call, f, groups=units if n_boot > 0 else None)
    strata = (runs.model.astype(np.int64) * len(runs.benchmarks) + runs.benchmark)[rows]
    model = _label(runs.models, runs.model) if runs.n_pairs else "*"
    benchmark = _label(runs.benchmarks, runs.benchmark) if runs.n_pairs else "*"
    return {"reg": reg, "X": x_call, "y": f, "units": units, "strata": strata, "model": model,
            "benchmark": benchmark, "baseline": runs.y_neg[rows]}


def library_verdict(runs: PairedRuns, n_boot: int = 2000, seed: int = 0, alpha: float = 1.0,
                    level: float = 0.95, n_perm: int = N_PERMUTATIONS, min_cond: int = 10,
                    fitted: dict[str, Any] | None = None,
                    heterogeneity: tuple[float, float, int] | None = None, mc_stop: bool = True) -> LibraryEffect:
    """The library-level effect of `runs` alone (the regression and the heterogeneity test, none of
    the per-skill tables). `fitted`: `_cell_fit`'s result, when already computed;
    `heterogeneity`: the test's result when it was computed with a larger population's
    permutations (`attribute_models`)."""
    c = fitted or _cell_fit(runs, n_boot, seed, alpha, level)
    return library_effect(c["reg"], c["X"], c["y"], c["units"], c["strata"], model=c["model"],
                          benchmark=c["benchmark"], n_perm=n_perm, seed=seed, level=level,
                          min_cond=min_cond, baseline=c["baseline"], relative=False,
                          heterogeneity=heterogeneity, mc_stop=mc_stop)[0]


def attribute_models(
    runs: PairedRuns,
    library: Any = None,
    *,
    pooled: bool = False,
    scheme: str = "equal",
    regression: bool = True,
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 1.0,
    level: float = 0.95,
    mid_p: bool = False,
    n_perm: int = N_PERMUTATIONS,
    min_cond: int = 10,
    arms: Any = None,
    jobs: int = 1,
    mc_stop: bool = True,
) -> ModelAttributions:
    """`attribute` per model (a skill can help one model and hurt another), or pooled over the
    models with model as a stratum (tasks resampled and permuted within their model) when asked.

    `jobs` > 1 judges the models in that many forked worker processes (each seeded as in one
    process: the result is the same for any `jobs`); 0 picks one per core for large inputs.
    `mc_stop` (default): permutation tests stop once their Monte Carlo interval is clear of the
    level the verdict reads; False runs every permutation (`--mc-stop off`)."""
    kw = {"scheme": scheme, "regression": regression, "n_boot": n_boot, "seed": seed,
          "alpha": alpha, "level": level, "mid_p": mid_p, "n_perm": n_perm, "min_cond": min_cond,
          "mc_stop": mc_stop}
    present = [runs.models[i] for i in np.unique(runs.model)] if runs.n_pairs else []
    groups: list[str | None] = [None] if (pooled or len(present) <= 1) else list(present)
    work = (runs, library, arms, kw)
    workers = _model_workers(jobs, len(groups), runs.n_pairs)
    if workers > 1:
        outs = _in_workers(work, groups, workers)
    else:
        outs = [_attribute_one(work, m) for m in groups]
    results = [res for res, _ in outs]
    effects = [e for _, found in outs for e in found]
    settings = {**(results[0].settings if results else {}), "pooled_models": bool(pooled),
                "models": [r.model for r in results]}
    settings.pop("model", None)
    settings.pop("benchmark", None)
    return ModelAttributions(results=tuple(results), library=tuple(effects), pooled=bool(pooled),
                             settings=settings)


#: below this many pairs `attribute_models(jobs=0)` stays in one process (forking costs ~0.1 s)
_PARALLEL_PAIRS = 50_000


def _model_workers(jobs: int, n_groups: int, n_pairs: int) -> int:
    import os

    if jobs == 0:
        jobs = (os.cpu_count() or 1) if n_pairs >= _PARALLEL_PAIRS else 1
    return max(1, min(jobs, n_groups))


_WORK: Any = None  # what forked workers read (set just before the pool forks)


def _in_workers(work: Any, groups: list[str | None], workers: int) -> list[Any]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _WORK
    _WORK = work
    # what every worker would import on its own (~0.2 s each), imported once before the fork
    import scipy.linalg
    import scipy.sparse
    import scipy.special  # noqa: F401

    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_one_blas_thread) as pool:
            return list(pool.map(_attribute_worker, groups))
    finally:
        _WORK = None


def _one_blas_thread() -> None:
    """Each worker holds one core: BLAS threads on top would oversubscribe it."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1)


def _attribute_worker(m: str | None) -> Any:
    return _attribute_one(_WORK, m)


def _attribute_one(work: Any, m: str | None) -> tuple[AttributionResult, list[LibraryEffect]]:
    """One model's (or the pooled) attribution and its library verdicts: the model's, then its cells'."""
    runs, library, arms, kw = work
    regression, n_boot, seed, alpha, level = kw["regression"], kw["n_boot"], kw["seed"], kw["alpha"], kw["level"]
    sub = runs if m is None else runs.select(model=m)
    sub_arms = None
    if arms is not None:
        sub_arms = arms if m is None else arms.restricted(np.flatnonzero(runs.model == runs.models.index(m)))
    bench = np.unique(sub.benchmark)
    fits: list[tuple[int, PairedRuns, dict[str, Any]]] = []
    shared: list[tuple[int, Csr, np.ndarray]] = []
    if regression and n_boot > 0 and bench.size > 1:
        # each (model, benchmark) cell's verdict; their heterogeneity tests are computed from
        # the model's permutations (a within-block permutation of the model's tasks is one of
        # each cell's), which saves each cell's own permutation work
        for bi in bench.tolist():
            cell = sub.subset(sub.benchmark == bi)
            fit = _cell_fit(cell, n_boot, seed, alpha, level)
            fits.append((bi, cell, fit))
            reg_c = fit["reg"]
            tested_c = reg_c.group_n_ >= MIN_TESTED
            if (reg_c.interval_method_ is not None and int(tested_c.sum()) >= 2
                    and fit["X"].shape[0] >= kw["min_cond"] and reg_c.n_groups_):
                shared.append((bi, _merged_design(fit["X"], reg_c.col_group_, reg_c.n_groups_), tested_c))
    found: list[Any] = []
    res = attribute(sub, library, arms=sub_arms, cells=shared, cell_results=found, **kw)
    effects: list[LibraryEffect] = [res.library] if res.library is not None else []
    het_of = dict(zip([bi for bi, _, _ in shared], found, strict=False)) if len(found) == len(shared) else {}
    for bi, cell, fit in fits:
        effects.append(library_verdict(cell, n_boot=n_boot, seed=seed, alpha=alpha, level=level,
                                       n_perm=kw["n_perm"], min_cond=kw["min_cond"], fitted=fit,
                                       heterogeneity=het_of.get(bi), mc_stop=kw["mc_stop"]))
    return res, effects


def attribute_ids(result: AttributionResult, ids: Sequence[str]) -> list[SkillAttribution]:
    """The rows of `ids` in the order given (missing ids are skipped)."""
    by_id = {s.skill_id: s for s in result.skills}
    return [by_id[i] for i in ids if i in by_id]
