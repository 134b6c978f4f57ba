"""The analysis of counterfactual runs (DESIGN §3.1b): read the arm records, join them to the main
pairs, and say what they show (control-arm effects, per-skill causal effects of masks).

This module only reads logs that already exist; the side that *produces* arm records (`skillaudit
run --arms`: replaying a logged tool call, drawing masks, choosing what the tool returns) is
`skillaudit.engine.arm_runner`. Named apart so "what do the re-runs show?" and "how are they run?"
never share a file name.

An arm record is a variant of a main pair's **enabled** run that replays its own tool call(s)
and changes only what the tool returned (`random`, `filler`, `empty`, `corrupted`, `mask`,
`pruned`), or a second **disabled** run with another seed (`replicate`, the A/A noise floor). The
main readers (`runs.load_runs`) set arm records aside and count them; `inputs.load_inputs` keeps
their lines while it reads the runs and checks them (`parse_arm_lines`) and joins them to the
pairs (`join_arms`) when asked; `load_arms` does the same in a second pass over the files.

What the arms measure, per model (and benchmark), on the main pairs they join:

- **content effect** of arm A = mean(y+ - y_A) over S_call pairs with an A record: the same
  decision to search, different content; ~0 when the retrieved skills are no better than A's;
- **context effect** of A = mean(y_A - y-): what A's tool result does compared with no tool;
- **A/A flip rate** = share of pairs whose `replicate` differs from the disabled run: how many
  flips happen with no change at all, next to (b + c) / n.

Arm effects (content, context, A/A) get the score interval of a paired difference and the test it
inverts (`stats.paired_score`: Tango, Rao-Scott over tasks with epochs or several masks), so an
interval excludes 0 exactly when the p beside it is <= 0.05; per-skill causal effects from masks
keep a task-level bootstrap. `mask` records feed the per-skill
causal surrogate (`causal_effects`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillaudit.runs import PairedRuns
from skillaudit.runs.arms import (  # noqa: F401  (re-exported: the reading side moved to runs/)
    ARM_NEEDLE,
    ARMS,
    CONTROL_ARMS,
    DISABLED_ARMS,
    ENABLED_ARMS,
    ArmLines,
    ArmRecords,
    _ids,
    _shown,
    _str,
    join_arms,
    load_arms,
    parse_arm_lines,
)
from skillaudit.stats import (
    bh_qvalues,
    bootstrap_totals,
    p_text,
    paired_test,
    percentile_ci,
    unit_sums,
)


# ---------------------------------------------------------------- what the arms show
@dataclass(frozen=True)
class ArmEffect:
    """One arm's effects in one (model, benchmark) cell (fractions)."""

    arm: str
    n: int  # arm records joined (pairs x masks)
    n_tasks: int
    content_effect: float | None  # mean(y+ - y_arm) on S_call (enabled arms)
    content_ci: list[float] | None
    context_effect: float | None  # mean(y_arm - y-) (enabled arms); replicate: mean(y_rep - y-)
    context_ci: list[float] | None
    p: float | None  # task-level test of the content effect (replicate: of the A/A difference)
    accuracy: float | None  # mean(y_arm)
    flip_between: float | None = None  # replicate: (b + c) / n between the conditions on the same pairs
    context_p: float | None = None  # task-level test of the context effect (enabled arms)
    content_flips: int = 0  # pairs (x masks) where the enabled run and the arm differ
    context_flips: int = 0  # pairs (x masks) where the arm and the disabled run differ
    test: str = "score McNemar (Tango)"  # the score test the intervals invert (`stats.paired_score`)
    mid_p: bool = False  # p from the mid-p task-level test instead

    def method(self) -> dict[str, str]:
        """The intervals and p of this arm's effects in words, as computed (`_scored`)."""
        from skillaudit.analysis.methods import P_COND_MID_P_WORDS

        return {"interval": f"Tango score interval inverting the {self.test} test",
                "p": P_COND_MID_P_WORDS if self.mid_p else f"the {self.test} test the interval inverts"}

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "n_tasks": self.n_tasks, "content_effect": self.content_effect,
                "content_ci": self.content_ci, "context_effect": self.context_effect,
                "context_ci": self.context_ci, "p": self.p, "context_p": self.context_p,
                "accuracy": self.accuracy, "method": self.method()}


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _mean_ci(units: np.ndarray, cols: np.ndarray, n_boot: int, seed: int, level: float
             ) -> tuple[list[float | None], list[list[float] | None]]:
    """Point estimates and task-bootstrap CIs of column means cols[:, 1:] / cols[:, 0]."""
    tot = cols.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        point = [_num(t / tot[0]) if tot[0] else None for t in tot[1:]]
    if n_boot <= 0 or tot[0] == 0:
        return point, [None] * (cols.shape[1] - 1)
    _, inv = np.unique(units, return_inverse=True)
    totals = bootstrap_totals(unit_sums(inv.ravel(), cols), n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = totals[:, 1:] / totals[:, :1]
    cis = percentile_ci(ratios, level)
    return point, [None if not np.isfinite(c).all() else [float(c[0]), float(c[1])] for c in cis]


def _scored(u: np.ndarray, diff: np.ndarray, level: float, mid_p: bool) -> tuple[list[float] | None, float, str]:
    """The score interval of a mean paired difference (Tango; Rao-Scott over tasks) and the test it
    inverts (`stats.paired_score`), so an interval excludes 0 exactly when p <= 1 - level; with
    `mid_p`, the mid-p task-level test instead (then they can disagree, as in `metrics`)."""
    from skillaudit.stats import paired_score

    sc = paired_score(u, diff.astype(np.int64), level)
    ci = None if sc.ci is None or not np.isfinite(sc.ci).all() else [float(sc.ci[0]), float(sc.ci[1])]
    return ci, (paired_test(u, diff.astype(np.int64), mid_p=True) if mid_p else sc.p), sc.test


def arm_effects(runs: PairedRuns, arms: ArmRecords, *, n_boot: int = 2000, seed: int = 0,
                level: float = 0.95, mid_p: bool = False) -> tuple[dict[str, ArmEffect], float | None, int]:
    """Per arm its effects on the pairs of `runs` (one cell), the A/A flip rate and its pair count.

    `arms` must be restricted to `runs` (`ArmRecords.restricted`). Enabled arms count only pairs
    in S_call (the same decision to search); `replicate` counts every pair.
    """
    units = runs.unit_ids()
    y_pos, y_neg = runs.y_pos.astype(np.float64), runs.y_neg.astype(np.float64)
    in_call = runs.retrieved
    out: dict[str, ArmEffect] = {}
    aa_rate, aa_n = None, 0
    for name in arms.names:
        rows = arms.of(name)
        p_ix = arms.pair[rows]
        keep = np.ones(rows.size, dtype=bool) if name in DISABLED_ARMS else in_call[p_ix]
        rows, p_ix = rows[keep], p_ix[keep]
        if rows.size == 0:
            continue
        y_arm = arms.correct[rows].astype(np.float64)
        u = units[p_ix]
        if name in DISABLED_ARMS:
            diff = y_arm - y_neg[p_ix]
            cols = np.column_stack([np.ones(rows.size), diff, np.abs(diff), y_arm])
            (ctx, aa, acc), _ = _mean_ci(u, cols, 0, seed, level)
            ctx_ci, ctx_p, test = _scored(u, diff, level, mid_p)
            aa_rate, aa_n = aa, int(rows.size)
            between = float(np.abs(y_pos[p_ix] - y_neg[p_ix]).mean())
            out[name] = ArmEffect(name, int(rows.size), int(np.unique(u).size), None, None, ctx, ctx_ci,
                                  ctx_p, acc, between, context_flips=int(np.count_nonzero(diff)), test=test,
                                  mid_p=mid_p)
            continue
        content = y_pos[p_ix] - y_arm
        context = y_arm - y_neg[p_ix]
        cols = np.column_stack([np.ones(rows.size), content, context, y_arm])
        (ce, xe, acc), _ = _mean_ci(u, cols, 0, seed, level)
        ce_ci, ce_p, test = _scored(u, content, level, mid_p)
        xe_ci, xe_p, _ = _scored(u, context, level, mid_p)
        out[name] = ArmEffect(name, int(rows.size), int(np.unique(u).size), ce, ce_ci, xe, xe_ci,
                              ce_p, acc, context_p=xe_p, content_flips=int(np.count_nonzero(content)),
                              context_flips=int(np.count_nonzero(context)), test=test, mid_p=mid_p)
    return out, aa_rate, aa_n


def _p_of(p: float | None) -> str:
    return "" if p is None else " " + p_text(p)


#: an arm's claim (injection hurts, skills do worse or better than the control) needs this many flips
MIN_ARM_FLIPS = 5


def injection_verdict(effects: dict[str, ArmEffect], alpha: float = 0.05) -> str | None:
    """One sentence when the control arms say whether the harm is in the content or in injecting.

    Harm whose content effect is ~0 (a control arm's content effect interval covers 0) while the
    control arm's context effect is below 0: "injection hurts, not these skills". A content effect
    below 0 with the interval excluding 0: the retrieved skills do worse than the control. Each
    claim needs the task-level test of the same differences to agree (p <= `alpha`; the score test
    the interval inverts agrees by construction; the check matters under --mid-p).
    """
    parts = []
    for name in CONTROL_ARMS:
        e = effects.get(name)
        if e is None or e.content_ci is None or e.context_ci is None:
            continue
        ce, xe = e.content_effect or 0.0, e.context_effect or 0.0
        what = (f"{name} arm: content effect {ce * 100:+.1f} pp [{e.content_ci[0] * 100:+.1f}, "
                f"{e.content_ci[1] * 100:+.1f}]{_p_of(e.p)}, context effect {xe * 100:+.1f} pp "
                f"[{e.context_ci[0] * 100:+.1f}, {e.context_ci[1] * 100:+.1f}]{_p_of(e.context_p)}, "
                f"{e.n_tasks} tasks")
        # a claim needs its test to agree and at least MIN_ARM_FLIPS differing pairs (the floor of
        # a library verdict): 0 vs 4 flips gives a score p of 0.046, not evidence to act on
        content_sure = e.p is not None and e.p <= alpha and e.content_flips >= MIN_ARM_FLIPS
        context_sure = e.context_p is not None and e.context_p <= alpha and e.context_flips >= MIN_ARM_FLIPS
        if e.content_ci[0] <= 0 <= e.content_ci[1] and e.context_ci[1] < 0 and context_sure:
            parts.append(f"injection hurts, not these skills ({what})")
        elif e.content_ci[1] < 0 and content_sure:
            parts.append(f"the retrieved skills do worse than {name} content ({what})")
        elif e.content_ci[0] > 0 and content_sure:
            parts.append(f"the retrieved skills do better than {name} content ({what})")
        else:
            parts.append(f"no clear difference from {name} content ({what})")
    return "; ".join(parts) if parts else None


# ---------------------------------------------------------------- per-skill causal effects (mask)
@dataclass(frozen=True)
class CausalEffects:
    """Per skill, from re-runs with random subsets of the retrieved skills withheld (mask arms).

    `effect[k]`: the change in the pass rate when k is kept rather than withheld, from a linear
    surrogate y = a_task + sum_k b_k kept_k fitted within tasks (task fixed effects; the main
    enabled run counts as the mask that keeps everything). Intervals: task-level bootstrap; q: BH.
    `validation`: Spearman rank correlation of predicted and observed outcomes on held-out masks
    (each task's masks in turn left out), with the number of held-out runs.
    """

    skills: tuple[str, ...]
    effect: np.ndarray
    ci: np.ndarray
    p: np.ndarray
    q: np.ndarray
    n_withheld: np.ndarray  # re-runs with the skill withheld
    relative: np.ndarray  # effect minus the mean of the others' (weighted by re-runs withheld)
    relative_ci: np.ndarray
    n_runs: int
    n_tasks: int
    validation: float | None
    n_validation: int

    def get(self, skill_id: str) -> dict[str, Any] | None:
        if skill_id not in self.skills:
            return None
        i = self.skills.index(skill_id)
        if not np.isfinite(self.effect[i]):
            return None
        return {"causal_effect": float(self.effect[i]), "causal_ci": _interval(self.ci[i]),
                "causal_p": float(self.p[i]), "causal_q": float(self.q[i]),
                "causal_n_withheld": int(self.n_withheld[i]),
                "causal_relative": float(self.relative[i]),
                "causal_relative_ci": _interval(self.relative_ci[i])}

    def to_dict(self) -> dict[str, Any]:
        rows = [{"skill_id": s, **(self.get(s) or {})} for s in self.skills if self.get(s)]
        return {"n_runs": self.n_runs, "n_tasks": self.n_tasks, "validation_spearman": self.validation,
                "n_validation": self.n_validation, "skills": rows,
                "method": "within-task linear surrogate on kept indicators (task fixed effects, ridge), "
                          "task-level bootstrap CIs, BH q; validation: Spearman of predicted vs "
                          "observed outcomes on held-out masks"}


def _mask_design(runs: PairedRuns, arms: ArmRecords
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], int]:
    """Rows = the mask runs (first) plus each masked pair's main enabled run (everything kept)."""
    rows = arms.of("mask")
    rows = rows[runs.retrieved[arms.pair[rows]]]
    kept = arms.kept.take_rows(rows).toarray() > 0
    withheld = arms.withheld.take_rows(rows).toarray() > 0
    used = np.flatnonzero((kept | withheld).any(axis=0))
    pairs = np.unique(arms.pair[rows])
    # the main enabled run of each masked pair: every retrieved skill kept
    full = np.zeros((pairs.size, len(arms.skills)), dtype=bool)
    hits = runs.retrieval
    for j, pi in enumerate(pairs.tolist()):
        cols = hits.indices[hits.indptr[pi]:hits.indptr[pi + 1]]
        full[j, cols] = True
    design = np.vstack([kept, full])[:, used].astype(np.float64)
    y = np.concatenate([arms.correct[rows], runs.y_pos[pairs]]).astype(np.float64)
    units = runs.unit_ids()
    u = np.concatenate([units[arms.pair[rows]], units[pairs]])
    return design, y, u, [arms.skills[i] for i in used.tolist()], int(rows.size)


def _within(design: np.ndarray, y: np.ndarray, unit: np.ndarray, w: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Design and outcomes centred within each task (task fixed effects), optionally weighted."""
    w = np.ones(y.size) if w is None else w
    sw = np.bincount(unit, weights=w)
    with np.errstate(invalid="ignore", divide="ignore"):
        my = np.bincount(unit, weights=w * y) / sw
        mx = np.stack([np.bincount(unit, weights=w * design[:, j]) / sw for j in range(design.shape[1])], axis=1) \
            if design.shape[1] else np.zeros((sw.size, 0))
    return design - mx[unit], y - my[unit]


def _ridge(xc: np.ndarray, yc: np.ndarray, w: np.ndarray, alpha: float) -> np.ndarray:
    a = (xc * w[:, None]).T @ xc + alpha * np.eye(xc.shape[1])
    return np.linalg.solve(a, (xc * w[:, None]).T @ yc)


def _interval(ci: np.ndarray) -> list[float] | None:
    """An interval as a list, None where it has no width (every resample the same: one task
    withheld, or none) or is undefined: a zero-width interval claims a certainty it does not have."""
    lo, hi = float(ci[0]), float(ci[1])
    return [lo, hi] if np.isfinite(lo) and np.isfinite(hi) and hi > lo else None


def causal_effects(runs: PairedRuns, arms: ArmRecords, *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95, alpha: float = 1.0) -> CausalEffects | None:
    """Per-skill causal effects from the mask arms of one population (None without masks)."""
    if "mask" not in arms.names or arms.of("mask").size == 0:
        return None
    design, y, u, ids, n_mask = _mask_design(runs, arms)
    if not ids:
        return None
    _, unit = np.unique(u, return_inverse=True)
    unit = unit.ravel()
    n_units = int(unit.max()) + 1
    xc, yc = _within(design, y, unit)
    beta = _ridge(xc, yc, np.ones(y.size), alpha)
    rng = np.random.default_rng(seed)
    boots = np.empty((max(n_boot, 0), len(ids)))
    for b in range(boots.shape[0]):  # tasks resampled with all their runs; centring per resample
        m = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units)).astype(np.float64)
        w = m[unit]
        xb, yb = _within(design, y, unit, w)
        boots[b] = _ridge(np.nan_to_num(xb), np.nan_to_num(yb), w, alpha)
    lo, hi = (1 - level) / 2, (1 + level) / 2
    ci = np.quantile(boots, [lo, hi], axis=0).T if boots.shape[0] else np.full((len(ids), 2), np.nan)
    if boots.shape[0]:
        p = np.clip(2 * np.minimum((boots <= 0).mean(axis=0), (boots >= 0).mean(axis=0)), 1 / boots.shape[0], 1)
    else:
        p = np.full(len(ids), np.nan)
    # validation: leave one mask run of each task out in turn, predict it from the rest
    pred, obs = [], []
    mask_rows = np.arange(n_mask)
    folds = np.zeros(y.size, dtype=np.int64)
    order = np.lexsort((np.arange(y.size), unit))
    pos_in_task = np.empty(y.size, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(unit[order])) + 1]
    for s, e in zip(starts, np.r_[starts[1:], y.size], strict=True):
        pos_in_task[order[s:e]] = np.arange(e - s)
    folds[:] = pos_in_task
    for f in np.unique(folds[mask_rows]).tolist():
        test = mask_rows[folds[mask_rows] == f]
        train = np.setdiff1d(np.arange(y.size), test)
        if train.size < 2:
            continue
        w = np.zeros(y.size)
        w[train] = 1.0
        xt, yt = _within(design, y, unit, w)
        b = _ridge(np.nan_to_num(xt[train]), np.nan_to_num(yt[train]), np.ones(train.size), alpha)
        sw = np.bincount(unit, weights=w, minlength=n_units)
        with np.errstate(invalid="ignore", divide="ignore"):
            a = (np.bincount(unit, weights=w * (y - design @ b), minlength=n_units)) / sw
        has = np.isfinite(a[unit[test]])
        pred += (a[unit[test]] + design[test] @ b)[has].tolist()
        obs += y[test][has].tolist()
    validation = _spearman(np.array(pred), np.array(obs)) if len(pred) >= 5 else None
    all_ids = tuple(ids)
    col = {s: i for i, s in enumerate(arms.skills)}
    withheld_all = arms.withheld.take_rows(arms.of("mask")).toarray() > 0
    n_withheld = np.array([int(withheld_all[:, col[s]].sum()) for s in all_ids])
    # relative to the other entries: each effect minus the mean of the others', weighted by how
    # often they were withheld (c_k (b_k - mean), as for the regression's relative effects)
    wts = n_withheld.astype(np.float64)
    big_w = max(float(wts.sum()), 1e-12)
    c = big_w / np.maximum(big_w - wts, 1e-12)
    relative = c * (beta - float(wts @ beta) / big_w)
    if boots.shape[0]:
        rel_b = c[None, :] * (boots - (boots @ wts / big_w)[:, None])
        relative_ci = np.quantile(rel_b, [lo, hi], axis=0).T
    else:
        relative_ci = np.full((len(ids), 2), np.nan)
    return CausalEffects(skills=all_ids, effect=beta, ci=ci, p=p, q=bh_qvalues(p), n_withheld=n_withheld,
                         relative=relative, relative_ci=relative_ci, n_runs=int(n_mask), n_tasks=n_units,
                         validation=validation, n_validation=len(pred))


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rank correlation (average ranks for ties), None when either side is constant."""
    def ranks(x: np.ndarray) -> np.ndarray:
        order = np.argsort(x, kind="stable")
        r = np.empty(x.size)
        xs = x[order]
        starts = np.r_[0, np.flatnonzero(np.diff(xs)) + 1]
        ends = np.r_[starts[1:], x.size]
        for s, e in zip(starts, ends, strict=True):
            r[order[s:e]] = (s + e - 1) / 2.0
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def summarize(effects: dict[str, ArmEffect], aa_rate: float | None, aa_n: int) -> dict[str, Any]:
    """The `arms` / `aa_flip_rate` fields of a metrics group."""
    return {"arms": {k: v.to_dict() for k, v in effects.items()}, "aa_flip_rate": aa_rate,
            "aa_pairs": aa_n}


def names_in(records: Sequence[ArmRecords | None]) -> list[str]:
    return sorted({n for r in records if r is not None for n in r.names})
