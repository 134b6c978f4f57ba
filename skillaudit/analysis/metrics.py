"""Paired metrics per (model, benchmark) and pooled per model: OAE, RAE, delta_skip, lift.

All rates are ratios of column totals over pairs (epochs pooled: counts are summed before any
rate), so one function computes them for the observed data and for every bootstrap resample.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from skillaudit.analysis.methods import metrics_method
from skillaudit.runs import PairedRuns
from skillaudit.runs.records import JUDGE_AA_NONE, PREFERENCE_NONE
from skillaudit.stats import (
    design_effect,
    mcnemar_exact,
    paired_bootstrap_ci,
    paired_score,
    paired_test,
    q_text,
    task_level_counts,
    wilson_interval,
)

SCHEMA = "skillaudit.metrics/v1"

# Column order of the per-pair design used by `_statistics`. b - c = y+ - y- pair by pair, so these
# six totals determine every rate; fewer columns mean fewer distinct task patterns to resample.
# The skipped side ("s") is the pairs whose use was logged and retrieved nothing: a pair whose
# enabled run did not record its skill use is in OAE only, neither retrieved nor skipped.
_COLS = ("one", "r", "yp", "yn", "yp_r", "yn_r", "s", "yp_s", "yn_s")
_STATS = ("oae", "rae", "delta_skip", "agg_lift", "selection_gap", "skip_minus_rae")


def _columns(runs: PairedRuns) -> np.ndarray:
    """The per-pair design: the first 6 of `_COLS` when every pair logged its use (the skipped side
    is then the rest: fewer columns to resample), all 9 otherwise."""
    r = runs.retrieved
    yp, yn = runs.y_pos, runs.y_neg
    cols = [np.ones_like(r), r, yp, yn, yp & r, yn & r]
    unlogged = runs.use_unlogged
    if unlogged.any():
        s = ~r & ~unlogged
        cols += [s, yp & s, yn & s]
    return np.column_stack(cols).astype(np.float64)


def _statistics(t: np.ndarray) -> np.ndarray:
    """(B x 6 or 9) totals -> (B x 6) statistics in `_STATS` order; NaN where a side is empty."""
    one, r, yp, yn, yp_r, yn_r = (t[:, i] for i in range(6))
    if t.shape[1] == 9:
        skip, yp_s, yn_s = t[:, 6], t[:, 7], t[:, 8]
    else:
        skip, yp_s, yn_s = one - r, yp - yp_r, yn - yn_r
    with np.errstate(divide="ignore", invalid="ignore"):
        oae = np.where(one > 0, (yp - yn) / one, np.nan)
        rae = np.where(r > 0, (yp_r - yn_r) / r, np.nan)
        dskip = np.where(skip > 0, (yp_s - yn_s) / skip, np.nan)
        lift = np.where((r > 0) & (skip > 0), yp_r / r - yp_s / skip, np.nan)
        gap = np.where((r > 0) & (skip > 0), yn_r / r - yn_s / skip, np.nan)
    return np.column_stack([oae, rae, dskip, lift, gap, dskip - rae])


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _ci(row: np.ndarray) -> list[float | None] | None:
    lo, hi = (_num(v) for v in row)
    return None if lo is None or hi is None else [lo, hi]


@dataclass(frozen=True)
class GroupMetrics:
    """Every figure of one (model, benchmark) cell; benchmark '*' pools a model's benchmarks."""

    model: str
    benchmark: str
    n_pairs: int
    n_tasks: int
    n_cond: int
    n_skip: int
    trigger_rate: float | None
    acc_enabled: float | None
    acc_disabled: float | None
    acc_enabled_ci: list[float] | None
    acc_disabled_ci: list[float] | None
    b: int
    c: int
    cond_b: int
    cond_c: int
    skip_b: int
    skip_c: int
    oae: float | None
    rae: float | None
    delta_skip: float | None
    agg_lift: float | None
    selection_gap: float | None
    sign_disagreement: bool
    reportable: bool
    oae_ci: list[float] | None
    rae_ci: list[float] | None
    agg_lift_ci: list[float] | None
    delta_skip_ci: list[float] | None
    selection_gap_ci: list[float] | None
    mcnemar_p: float  # the OAE test: exact McNemar with one pair per task, else task-level (oae_p_test)
    mcnemar_p_cond: float  # exact McNemar on the pooled retrieving pairs (every epoch as a task): reference only
    funnel: dict[str, Any]
    # the p-value the verdict uses: task-level (sign-flip test of each task's summed flips) when
    # any retrieving task has several epochs, else the exact McNemar (mid-p when asked)
    p_cond: float = 1.0
    p_cond_test: str = "exact McNemar"
    n_cond_tasks: int = 0
    skip_minus_rae_ci: list[float] | None = None  # delta_skip - RAE (task-level bootstrap)
    # counterfactual arms (skillaudit.analysis.counterfactual), where the runs have them
    arms: dict[str, Any] = field(default_factory=dict)
    aa_flip_rate: float | None = None
    aa_pairs: int = 0
    aa_between_flip_rate: float | None = None  # (b + c) / n on the pairs with a replicate
    injection_text: str | None = None
    # which test `mcnemar_p` is: the pair-level exact McNemar only when every task has one pair;
    # with several trials per task (epochs, k-of-n counts) the sign-flip test of each task's summed
    # flips, which no re-ordering of trials within a task can change
    oae_p_test: str = "exact McNemar"
    # the score tests that the OAE / RAE / delta_skip intervals invert (each interval excludes 0
    # exactly when its score p <= 1 - level); RAE's is p_cond unless mid-p was asked for
    score_p: dict[str, float] = field(default_factory=dict)
    score_test: dict[str, str] = field(default_factory=dict)
    max_pairs_per_task: int = 1
    # do retrieving pairs flip both ways more than a comparator (stats.ExcessFlips.to_dict)
    both_ways: dict[str, Any] | None = None
    # pairs whose enabled run says which skills were offered but not which were used
    # ("use_logged": false): retrieval-conditioned figures (RAE, S_call) cannot be computed there
    n_use_unlogged: int = 0
    # the judged pairwise outcome (`preference` on the enabled records; `preference_figures`), None
    # when no pair of the group was judged
    preference: dict[str, Any] | None = None

    @property
    def selection_warning(self) -> str | None:
        """A sentence when the agent's choice to search looks tied to how tasks fare, else None.

        RAE is measured where the enabled run searched and got skills back; that choice is made
        by the run being measured. When the retrieving tasks were already easier or harder
        without skills (selection gap CI excludes 0), or the skipped tasks moved the other way
        from the retrieving ones (delta_skip - RAE CI excludes 0, opposite signs), RAE is the
        effect on the tasks where the agent chose to search, not on a random task.
        """
        if not self.reportable:
            return None
        parts = []
        gap, gci = self.selection_gap, self.selection_gap_ci
        if gap is not None and gci and (gci[0] > 0 or gci[1] < 0):
            parts.append(f"tasks that retrieved skills were already {'easier' if gap > 0 else 'harder'} "
                         f"without them (disabled accuracy {gap * 100:+.1f} pp vs skipped tasks, "
                         f"95% CI {gci[0] * 100:+.1f} to {gci[1] * 100:+.1f})")
        d, r, dci = self.delta_skip, self.rae, self.skip_minus_rae_ci
        if d is not None and r is not None and d * r < 0 and dci and (dci[0] > 0 or dci[1] < 0):
            parts.append(f"skipped tasks moved the other way (Δskip {d * 100:+.1f} pp vs RAE "
                         f"{r * 100:+.1f} pp; difference 95% CI {dci[0] * 100:+.1f} to {dci[1] * 100:+.1f})")
        if not parts:
            return None
        return ("The agent's choice to search is tied to how tasks fare: " + "; ".join(parts)
                + ". RAE conditions on that choice: it is the effect where the agent searched and got "
                "skills back, not the effect of giving skills to a random task.")

    @property
    def follows_failure(self) -> str | None:
        """A sentence when retrieval follows failure: the runs that searched lost with skills while
        the runs that skipped gained (RAE < 0, the intervals of Δskip and of Δskip - RAE above 0), the
        shape of an agent that searches because it is failing; else None. Then a harm measured
        where it searched is not evidence against its skills (issue 52 F10)."""
        d, r, dci, sci = self.delta_skip, self.rae, self.skip_minus_rae_ci, self.delta_skip_ci
        if (not self.reportable or d is None or r is None or not dci or not sci
                or not (r < 0 and sci[0] > 0 and dci[0] > 0)):
            return None
        return (f"retrieval follows failure on {self.model}: the runs that searched lost with skills (RAE "
                f"{r * 100:+.1f} pp) while those that skipped gained (Δskip {d * 100:+.1f} pp; difference 95% "
                f"CI {dci[0] * 100:+.1f} to {dci[1] * 100:+.1f})")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "selection_warning": self.selection_warning,
                "follows_failure": self.follows_failure}


@dataclass(frozen=True)
class MetricsResult:
    """All groups plus the settings and input counts they came from."""

    groups: tuple[GroupMetrics, ...]
    settings: dict[str, Any]
    n_unpaired: int = 0
    n_error_pairs: int = 0

    def method(self) -> dict[str, Any]:
        """The estimators behind every figure, named from what ran (the groups' own tests, the
        settings' resamples): `intervals` per figure, `tests` per p, and `sentence`, the words every
        renderer prints under the table (the report, `metrics`, the progress line)."""
        return metrics_method(self.settings, [g.score_test for g in self.groups],
                              [g.p_cond_test for g in self.groups], [g.oae_p_test for g in self.groups])

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "method": self.method(),
            "unpaired_records": self.n_unpaired,
            "error_pairs": self.n_error_pairs,
            "groups": [g.to_dict() for g in self.groups],
        }


def group_metrics(
    runs: PairedRuns,
    model: str,
    benchmark: str,
    *,
    min_cond: int = 10,
    n_boot: int = 20_000,
    seed: int = 0,
    level: float = 0.95,
    mid_p: bool = False,
    arms: Any = None,
) -> GroupMetrics:
    """Metrics of the pairs in `runs` (already narrowed to one group); `arms` its arm records
    (`ArmRecords.restricted` to these pairs), when there are some."""
    cols = _columns(runs)
    tot = cols.sum(axis=0)
    one, r, yp, yn = (int(v) for v in tot[:4])
    rescue = runs.y_pos & ~runs.y_neg
    harm = runs.y_neg & ~runs.y_pos
    b, c = int(rescue.sum()), int(harm.sum())
    b_r, c_r = int((rescue & runs.retrieved).sum()), int((harm & runs.retrieved).sum())
    mcnemar_pairs = float(mcnemar_exact(b_r, c_r))  # the pooled pairs' test, epochs counted as tasks
    units = runs.unit_ids()
    per_task = np.bincount(units) if units.size else np.zeros(0, dtype=np.int64)
    max_per_task = int(per_task.max()) if per_task.size else 0
    skipped = ~runs.retrieved & ~runs.use_unlogged
    # with several pairs per task, counts of the tasks' summed flips: no pairing of epochs or
    # trials can change them (pair counts otherwise, which equal them)
    skip_b, skip_c = int((rescue & skipped).sum()), int((harm & skipped).sum())
    if max_per_task > 1:
        b, c = task_level_counts(units, runs.flip)
        b_r, c_r = task_level_counts(units[runs.retrieved], runs.flip[runs.retrieved])
        skip_b, skip_c = task_level_counts(units[skipped], runs.flip[skipped])
    point = _statistics(tot[None, :])[0]
    oae, rae, dskip, lift, gap, _ = (_num(v) for v in point)
    in_cond = runs.retrieved
    cond_units = units[in_cond]
    n_cond_tasks = int(np.unique(cond_units).size)
    clustered = n_cond_tasks < int(in_cond.sum())
    # OAE, RAE and delta_skip: Tango's score interval with the score test it inverts (Rao-Scott
    # design effect over tasks when tasks have several epochs); the other figures: bootstrap
    flip = runs.flip
    scored = [paired_score(units[m], flip[m], level) for m in (np.ones(one, dtype=bool), in_cond, skipped)]
    rae_score = scored[1]
    if mid_p:
        p_cond = paired_test(cond_units, flip[in_cond], mid_p=True)
        p_test = "mid-p " + ("sign-flip test of each task's summed flips" if clustered else "McNemar")
    else:
        p_cond, p_test = rae_score.p, rae_score.test
    if one and n_boot > 0:
        cis = paired_bootstrap_ci(units, cols, _statistics, n_boot=n_boot, seed=seed, level=level)
    else:
        cis = np.full((len(_STATS), 2), np.nan)
    for row, sc in zip((0, 1, 2), scored, strict=True):
        cis[row] = sc.ci if sc.ci is not None else (np.nan, np.nan)
    n_unlogged = int(runs.use_unlogged.sum())
    if one and n_unlogged == one:  # no run says what it used: "skipped" would mean "not logged"
        dskip = None
        cis[2] = np.nan
    if max_per_task > 1:
        p_oae = float(paired_test(units, runs.flip, mid_p=mid_p))
        oae_test = ("mid-p " if mid_p else "exact ") + "sign-flip test of each task's summed flips"
    else:
        p_oae = float(mcnemar_exact(b, c))
        oae_test = "exact McNemar"
    has_answer = runs.adhered >= 0
    retrieved = runs.retrieved
    adh_known = int((has_answer & retrieved).sum())
    funnel = {
        "pairs": one,
        "invoked": int(runs.invoked.sum()),
        "retrieved": r,
        "adhered": int(((runs.adhered == 1) & retrieved).sum()) if adh_known else None,
        "adherence_known": adh_known,
        "effective": b_r,
    }
    arm_fields: dict[str, Any] = {}
    if arms is not None and arms.n:
        from skillaudit.analysis.counterfactual import arm_effects, injection_verdict

        effects, aa_rate, aa_n = arm_effects(runs, arms, n_boot=n_boot, seed=seed, level=level, mid_p=mid_p)
        arm_fields = {"arms": {k: v.to_dict() for k, v in effects.items()}, "aa_flip_rate": aa_rate,
                      "aa_pairs": aa_n, "injection_text": injection_verdict(effects),
                      "aa_between_flip_rate": effects["replicate"].flip_between if "replicate" in effects else None}
    both = _both_ways(runs, units, skipped, arms)
    arm_fields["preference"] = preference_figures(runs.preference, units, level, mid_p)
    if arm_fields["preference"] is not None:
        arm_fields["preference"]["judge_aa"] = judge_aa_figures(runs.judge_aa, units, level)
    return GroupMetrics(
        model=model,
        benchmark=benchmark,
        n_pairs=one,
        n_tasks=int(np.unique(units).size),
        n_cond=r,
        n_skip=int(tot[6]) if tot.size == 9 else one - r,
        trigger_rate=r / one if one else None,
        acc_enabled=yp / one if one else None,
        acc_disabled=yn / one if one else None,
        acc_enabled_ci=_ci(np.array(_task_wilson(units, runs.y_pos, level))),
        acc_disabled_ci=_ci(np.array(_task_wilson(units, runs.y_neg, level))),
        b=b,
        c=c,
        cond_b=b_r,
        cond_c=c_r,
        skip_b=skip_b,
        skip_c=skip_c,
        oae=oae,
        rae=rae,
        delta_skip=dskip,
        agg_lift=lift,
        selection_gap=gap,
        sign_disagreement=bool(lift is not None and rae is not None and lift * rae < 0),
        reportable=r >= min_cond,
        oae_ci=_ci(cis[0]),
        rae_ci=_ci(cis[1]),
        delta_skip_ci=_ci(cis[2]),
        agg_lift_ci=_ci(cis[3]),
        selection_gap_ci=_ci(cis[4]),
        skip_minus_rae_ci=_ci(cis[5]),
        mcnemar_p=p_oae,
        mcnemar_p_cond=mcnemar_pairs,
        funnel=funnel,
        p_cond=float(p_cond),
        p_cond_test=p_test,
        n_cond_tasks=n_cond_tasks,
        oae_p_test=oae_test,
        score_p={"oae": scored[0].p, "rae": scored[1].p, "delta_skip": scored[2].p},
        score_test={"oae": scored[0].test, "rae": scored[1].test, "delta_skip": scored[2].test},
        max_pairs_per_task=max_per_task,
        n_use_unlogged=n_unlogged,
        both_ways=both.to_dict() if both is not None else None,
        **arm_fields,
    )


#: a comparator for the both-ways test needs at least this many pairs
MIN_COMPARATOR_PAIRS = 20
#: a both-ways verdict needs at least this many rescues and as many harms
MIN_BOTH_WAYS_FLIPS = 5


def both_ways_words(w: dict[str, Any]) -> str:
    """The rates behind a both-ways verdict (`stats.ExcessFlips.to_dict`) in words, with the test
    that produced them; the audit's sentence, L003 and S202 all say it this way."""
    return (f"rescue {w['rescue_rate'] * 100:.0f}% of the runs that fail without skills and harm "
            f"{w['harm_rate'] * 100:.0f}% of those that pass, against {w['ref_rescue_rate'] * 100:.0f}% and "
            f"{w['ref_harm_rate'] * 100:.0f}% on {w['comparator']} ({w['test']}: p {q_text(w['p_rescue'])} and "
            f"{q_text(w['p_harm'])}; an association)")


def works_both_ways(g: dict[str, Any], alpha: float = 0.05) -> bool:
    """A metrics group (`to_dict`) whose retrieving pairs flip both ways more than its comparator:
    each direction's test p <= alpha, with at least MIN_BOTH_WAYS_FLIPS rescues and harms."""
    w = g.get("both_ways")
    return bool(w and w["p"] <= alpha and min(g.get("cond_b", 0), g.get("cond_c", 0)) >= MIN_BOTH_WAYS_FLIPS)


def _both_ways(runs: PairedRuns, units: np.ndarray, skipped: np.ndarray, arms: Any) -> Any:
    """The both-ways test (`stats.excess_flips`) of the retrieving pairs against the replicate arm
    (a second run without skills on the same tasks) where there is one, else against the pairs that
    retrieved nothing; None without retrieving pairs or a comparator of MIN_COMPARATOR_PAIRS."""
    from skillaudit.stats import excess_flips

    cond = runs.retrieved
    if not cond.any():
        return None
    y_neg, flip = runs.y_neg, runs.flip
    if arms is not None and arms.n and "replicate" in arms.names:
        rows = arms.of("replicate")
        if rows.size >= MIN_COMPARATOR_PAIRS:
            p_ix = arms.pair[rows]
            ref_flip = arms.correct[rows].astype(np.int64) - y_neg[p_ix].astype(np.int64)
            return excess_flips(units[cond], y_neg[cond], flip[cond], units[p_ix], y_neg[p_ix], ref_flip,
                                "the replicate arm (a second run without skills)")
    if int(skipped.sum()) >= MIN_COMPARATOR_PAIRS:
        return excess_flips(units[cond], y_neg[cond], flip[cond], units[skipped], y_neg[skipped],
                            flip[skipped], "pairs that retrieved no skill")
    return None


def _task_wilson(units: np.ndarray, y: np.ndarray, level: float) -> tuple[float, float]:
    """Wilson interval of an accuracy with the task as the unit: counts divided by the design effect
    of the epochs (`stats.design_effect`), so 100 tasks x 3 identical epochs count as 100 tasks."""
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return (float("nan"), float("nan"))
    deff = design_effect(units, y)
    return wilson_interval(float(y.sum()) / deff, y.size / deff, level)


def preference_figures(pref: np.ndarray | None, units: np.ndarray, level: float = 0.95,
                       mid_p: bool = False) -> dict[str, Any] | None:
    """Wins, ties and losses of the judged pairs (`PairedRuns.preference`: 1, 0, -1; -2 not judged)
    with the effect (wins - losses) / judged pairs, the Tango score interval and the score test it
    inverts (cluster-adjusted over tasks with epochs, `stats.paired_score`), and the exact task-level
    test (`stats.paired_test`: the sign test of wins against losses with one pair per task, which is
    scipy's binomtest; the sign-flip test of each task's summed preferences with epochs). Ties are
    not flips. None when no pair was judged."""
    if pref is None:
        return None
    judged = pref != PREFERENCE_NONE
    if not judged.any():
        return None
    from skillaudit.stats import paired_score, paired_test

    v, u = pref[judged].astype(np.int64), units[judged]
    sc = paired_score(u, v, level)
    ci = None if sc.ci is None or not np.isfinite(sc.ci).all() else [float(sc.ci[0]), float(sc.ci[1])]
    return {"wins": int((v > 0).sum()), "ties": int((v == 0).sum()), "losses": int((v < 0).sum()),
            "n_pairs": int(v.size), "n_tasks": int(np.unique(u).size), "effect": sc.estimate, "ci": ci,
            "p": sc.p, "test": sc.test, "p_exact": paired_test(u, v, mid_p=mid_p),
            "test_exact": ("mid-p " if mid_p else "") + ("exact sign test of wins against losses"
                                                           if np.unique(u).size == v.size else
                                                           "exact sign-flip test of each task's summed preferences")}


def judge_aa_figures(aa: np.ndarray | None, units: np.ndarray, level: float = 0.95) -> dict[str, Any] | None:
    """The judge's own flip rate: of the A/A checks logged (`PairedRuns.judge_aa`: one answer judged
    against a copy of itself in both orders, as the pair was), the share that gave a verdict instead
    of a tie, with its Wilson interval over tasks (`_task_wilson`: epochs count by their design
    effect). A pairwise verdict is worth reading only against this rate. None when nothing was checked."""
    if aa is None:
        return None
    checked = aa != JUDGE_AA_NONE
    if not checked.any():
        return None
    flips = (aa[checked] == 1).astype(np.float64)
    lo, hi = _task_wilson(units[checked], flips, level)
    return {"checks": int(checked.sum()), "flips": int(flips.sum()), "rate": float(flips.mean()),
            "ci": [float(lo), float(hi)], "n_tasks": int(np.unique(units[checked]).size),
            "interval": "Wilson score interval, epochs counted by their design effect"}


def compute_metrics(
    runs: PairedRuns,
    *,
    min_cond: int = 10,
    n_boot: int = 20_000,
    seed: int = 0,
    level: float = 0.95,
    mid_p: bool = False,
    arms: Any = None,
) -> MetricsResult:
    """One group per (model, benchmark) present, then one pooled group per model (`'*'`).

    `arms`: the runs' arm records (`skillaudit.analysis.counterfactual.load_arms`); each group then also reports the
    arms' content and context effects and the A/A flip rate."""
    kw = {"min_cond": min_cond, "n_boot": n_boot, "seed": seed, "level": level, "mid_p": mid_p}
    groups: list[GroupMetrics] = []

    def cell(mask: np.ndarray, model_name: str, bench: str) -> GroupMetrics:
        sub_arms = arms.restricted(np.flatnonzero(mask)) if arms is not None else None
        return group_metrics(runs.subset(mask), model_name, bench, arms=sub_arms, **kw)

    for mi in np.unique(runs.model):
        in_model = runs.model == mi
        model_name = runs.models[mi]
        for bi in np.unique(runs.benchmark[in_model]):
            groups.append(cell(in_model & (runs.benchmark == bi), model_name, runs.benchmarks[bi]))
        groups.append(cell(in_model, model_name, "*"))
    return MetricsResult(
        groups=tuple(groups),
        settings={"min_cond": min_cond, "bootstrap": n_boot, "seed": seed, "level": level,
                  "mid_p": mid_p},
        n_unpaired=runs.n_unpaired,
        n_error_pairs=runs.n_error_pairs,
    )


def top_k_of_files(paths: tuple[str, ...] | list[str]) -> dict[int | None, list[str]]:
    """Input files grouped by the retrieval depth their enabled records logged (`meta.top_k`).

    A file is one run, so one depth; a file whose records log several depths is an error (split it
    by depth). Records of this harness from before `top_k` was logged used 3; a file with no
    harness records falls in the `None` group (depth not logged).
    """
    import orjson

    from skillaudit.errors import RunLogError
    from skillaudit.runs.records import _open

    groups: dict[int | None, list[str]] = {}
    for path in paths:
        if path == "-":
            raise RunLogError("--by-top-k reads each file on its own: give the logs as files, not '-'")
        name, fh = _open(path)
        seen: set[int | None] = set()
        try:
            for lineno, line in enumerate(fh, 1):
                if b'"enabled"' not in line or (b'"top_k"' not in line and b'"harness"' not in line):
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    raise RunLogError(f"{name}:{lineno}: invalid JSON") from None
                if not isinstance(rec, dict) or rec.get("condition") != "enabled" or rec.get("arm") is not None:
                    continue
                meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
                k = meta.get("top_k", 3 if "harness" in meta else None)
                if k is not None and (type(k) is not int or k < 1):
                    raise RunLogError(f"{name}:{lineno}: 'meta.top_k' must be an integer >= 1")
                seen.add(k)
        except OSError as exc:
            raise RunLogError(f"{name}: cannot read: {exc.strerror or exc}") from None
        finally:
            fh.close()
        if len(seen) > 1:
            raise RunLogError(f"{name}: holds runs of several retrieval depths "
                              f"({', '.join(str(k) for k in sorted(k for k in seen if k is not None))}); "
                              "--by-top-k needs one depth per file")
        groups.setdefault(next(iter(seen)) if seen else None, []).append(path)
    return groups
