"""Efficiency effects: what offering the skills does to tokens and time, per model, the task as the unit.

Most harm skills do is not a wrong answer but more tokens, turns and time for the same result. For
each model and each measure the runs log (`meta.usage.prompt_tokens`, `meta.usage.completion_tokens`,
`meta.latency_s`; Harbor's `agent_result` and `agent_execution` become these on import), every pair
whose two records both logged it gives a difference enabled - disabled; a task's epochs are averaged
(the task is the unit); the shift is the Hodges-Lehmann estimate with the interval that inverts the
Wilcoxon signed-rank test beside it (`skillaudit.stats.signed_rank`), and the ratio enabled /
disabled the same on the per-task log ratios, exponentiated.

A measure no pair logged on both sides, or that a producer reports as 0 in every trial of the model
(MiniMax's `n_output_tokens`), is "not logged": never a zero effect.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from skillaudit.stats import bh_qvalues
from skillaudit.stats.signed_rank import EXACT_MAX, FLIP_MAX, hodges_lehmann, ratio_estimate

SCHEMA = "skillaudit.efficiency/v1"
#: measure -> (its words, its unit)
MEASURES = {"score": ("graded score (the record's `score`, e.g. a verifier reward)", "points"),
            "prompt_tokens": ("prompt tokens (cached included)", "tokens"),
            "cached_tokens": ("cached prompt tokens (of the prompt tokens)", "tokens"),
            "completion_tokens": ("completion tokens", "tokens"),
            "cost_usd": ("cost", "USD"),
            "turns": ("agent turns", "turns"),
            "latency_s": ("wall time", "s")}
METHOD = {"unit": "the task (its epochs' differences averaged)",
          "difference": "Hodges-Lehmann shift of the per-task differences (enabled - disabled); interval: the "
                        "shifts the Wilcoxon signed-rank test does not reject",
          "ratio": "Hodges-Lehmann shift of the per-task log ratios (enabled / disabled), exponentiated, with "
                   "its interval",
          "test": "Wilcoxon signed-rank test of the per-task differences (zeros dropped): exact without ties "
                  f"(up to {EXACT_MAX} tasks), every sign flip with ties (up to {FLIP_MAX}), else the tie-corrected "
                  "normal approximation"}


@dataclass(frozen=True)
class MeasureEffect:
    """One measure's paired effect for one model (None everywhere when not logged)."""

    measure: str
    logged: bool
    n_tasks: int
    n_pairs: int
    mean_enabled: float | None
    mean_disabled: float | None
    difference: float | None
    difference_ci: tuple[float, float] | None
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    p: float | None
    test: str | None
    #: time only: the conditions ran under different time limits (`meta.timeout`), said beside the effect
    timeouts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        words, unit = MEASURES[self.measure]
        return {"measure": self.measure, "words": words, "unit": unit, "logged": self.logged,
                "n_tasks": self.n_tasks, "n_pairs": self.n_pairs,
                "mean_enabled": self.mean_enabled, "mean_disabled": self.mean_disabled,
                "difference": self.difference,
                "difference_ci": list(self.difference_ci) if self.difference_ci else None,
                "ratio": self.ratio, "ratio_ci": list(self.ratio_ci) if self.ratio_ci else None,
                "p": self.p, "test": self.test, "timeouts": self.timeouts}


@dataclass(frozen=True)
class ModelEfficiency:
    model: str
    measures: tuple[MeasureEffect, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "measures": [m.to_dict() for m in self.measures]}


def _model_name(name: Any) -> str:
    """A model as the cost table logged it; a record without one is the readers' "default"."""
    return "default" if name is None else str(name)


#: measures reported only where logged (most producers log neither; "not logged" for them is noise)
_WHERE_LOGGED = ("score", "cached_tokens", "cost_usd", "turns")


def _not_logged(measure: str, n_pairs: int = 0) -> MeasureEffect:
    return MeasureEffect(measure, False, 0, n_pairs, None, None, None, None, None, None, None, None)


def _effect(measure: str, task: np.ndarray, on: np.ndarray, off: np.ndarray, level: float) -> MeasureEffect:
    """`on`, `off`: the measure of each pair's enabled and disabled record (nan: not logged)."""
    both = np.isfinite(on) & np.isfinite(off)
    if not both.any() or not (np.any(on[both] != 0) or np.any(off[both] != 0)):
        return _not_logged(measure, int(both.sum()))
    t, a, b = task[both], on[both], off[both]
    _, unit = np.unique(t, return_inverse=True)
    unit = unit.ravel()
    k = np.bincount(unit).astype(np.float64)
    mean_on, mean_off = np.bincount(unit, weights=a) / k, np.bincount(unit, weights=b) / k
    shift = hodges_lehmann(mean_on - mean_off, level)
    ratio = ratio_estimate(mean_on, mean_off, level) if measure != "score" else None  # a score is not a cost
    return MeasureEffect(measure, True, int(k.size), int(both.sum()), float(mean_on.mean()), float(mean_off.mean()),
                         shift.estimate, shift.ci, ratio.estimate if ratio is not None and ratio.n else None,
                         ratio.ci if ratio is not None and ratio.n else None, shift.p, shift.test)


def _timeouts(labels: list[Any], on: np.ndarray, off: np.ndarray) -> str | None:
    """A sentence when the enabled and disabled records ran under different time limits, else None."""
    def counts(ids: np.ndarray) -> dict[str, int]:
        u, k = np.unique(ids, return_counts=True)
        return {str(labels[i]) if labels[i] is not None else "not logged": int(c) for i, c in zip(u.tolist(), k.tolist(), strict=True)}

    a, b = counts(on), counts(off)
    if set(a) == set(b):
        return None

    def words(c: dict[str, int]) -> str:
        return ", ".join(f"{k} ({v})" for k, v in sorted(c.items(), key=lambda kv: -kv[1]))

    return (f"the conditions ran under different time limits: with skills {words(a)}; without {words(b)} "
            "(trials): a time difference mixes the skills' effect with the limits'")


def efficiency(table: Any, level: float = 0.95) -> list[ModelEfficiency]:
    """Per model (as logged), each measure's paired effect, from the cost columns the inputs kept
    (`skillaudit.runs.costs.CostTable`, `load_inputs(cost=True)`)."""
    f: dict[str, Any] = table.freeze().frozen
    en_rec, dis_rec = f["en_rec"], f["dis_rec"]
    pairs = np.flatnonzero((en_rec >= 0) & (dis_rec >= 0))
    if pairs.size == 0:
        return []
    en, dis = en_rec[pairs], dis_rec[pairs]
    key = f["b"][pairs].astype(np.int64) * (int(f["t"].max()) + 1 if f["t"].size else 1) + f["t"][pairs]
    has_u, tok, lat = f["has_u"], f["tok"].astype(np.float64), f["lat"]
    score = f["score"]
    values = {
        "score": (score[en], score[dis]),
        "prompt_tokens": (np.where(has_u[en], tok[en, 0], np.nan), np.where(has_u[dis], tok[dis, 0], np.nan)),
        "cached_tokens": (f["cached"][en], f["cached"][dis]),
        "completion_tokens": (np.where(has_u[en], tok[en, 1], np.nan), np.where(has_u[dis], tok[dis, 1], np.nan)),
        "cost_usd": (f["usd"][en], f["usd"][dis]),
        "turns": (f["turns"][en], f["turns"][dis]),
        "latency_s": (lat[en], lat[dis]),
    }
    out = []
    models = f["m"][pairs]
    tmo = f["timeout"]
    for mi in np.unique(models).tolist():
        sel = models == mi
        effects = [_effect(name, key[sel], on[sel], off[sel], level) for name, (on, off) in values.items()]
        limits = _timeouts(f["timeouts"], tmo[en[sel]], tmo[dis[sel]])
        effects = [replace(e, timeouts=limits) if e.measure == "latency_s" and e.logged and limits else e
                   for e in effects if e.measure not in _WHERE_LOGGED or e.logged]  # a score only where graded
        out.append(ModelEfficiency(_model_name(f["models"][mi]), tuple(effects)))
    return out


def efficiency_doc(table: Any, level: float = 0.95) -> dict[str, Any] | None:
    """The `efficiency` object of `metrics --json` (None without cost columns)."""
    if table is None:
        return None
    return {"schema": SCHEMA, "method": dict(METHOD), "level": level,
            "models": [m.to_dict() for m in efficiency(table, level)]}


# ---------------------------------------------------------------- per skill
#: a cost ratio (enabled / disabled) whose interval lies above this is an efficiency harm (rule S107)
RATIO_FLOOR = 1.5
#: the per-skill measures: tokens (prompt + completion, where usage is logged) and wall time
SKILL_MEASURES = {"tokens": "tokens (prompt + completion)", "latency_s": "wall time"}


class _Shown:
    """The paired records of a cost table and, per skill shown on an enabled run, its pair: what the
    per-skill figures (`skill_efficiency`, `skill_scores`) read."""

    def __init__(self, f: dict[str, Any], pairs: np.ndarray) -> None:
        self.f, self.pairs = f, pairs
        self.en, self.dis = f["en_rec"][pairs], f["dis_rec"][pairs]
        self.n_t = int(f["t"].max()) + 1 if f["t"].size else 1
        self.task = f["b"][pairs].astype(np.int64) * self.n_t + f["t"][pairs]
        self.span = int(self.task.max()) + 1
        self.models = f["m"][pairs]
        pair_of = np.full(int(f["n_rec"]), -1, np.int64)
        pair_of[self.en] = np.arange(pairs.size)
        ep = pair_of[f["shown_rec"]]
        keep = ep >= 0
        self.ep, self.sk = ep[keep], f["shown_skill"][keep].astype(np.int64)

    @classmethod
    def of(cls, table: Any) -> _Shown | None:
        if table is None:
            return None
        f: dict[str, Any] = table.freeze().frozen
        pairs = np.flatnonzero((f["en_rec"] >= 0) & (f["dis_rec"] >= 0))
        if pairs.size == 0 or f["shown_rec"].size == 0:
            return None
        return cls(f, pairs)


def skill_efficiency(table: Any, level: float = 0.95, floor: float = RATIO_FLOOR,
                     min_tasks: int = 5) -> dict[str, dict[str, dict[str, Any]]]:
    """model -> skill -> {measure: {ratio, ratio_ci, p, n_tasks, relative_ratio, relative_ci, relative_p,
    relative_q}} for the skills that
    could be an efficiency harm: at least `min_tasks` retrieving tasks whose median per-task ratio
    is above `floor` (the screen is a vectorised median; the intervals are formed only for the skills
    it keeps, so a large library whose skills cost little costs no interval). `relative_*`: the
    skill's per-task log ratios against the median of the model's retrieving tasks of the same
    benchmark (a skill retrieved where every skill costs much is not singled out), BH q over the
    screened skills of the model and measure."""
    sh = _Shown.of(table)
    if sh is None:
        return {}
    f, en, dis, task, n_t, models, ep, sk = sh.f, sh.en, sh.dis, sh.task, sh.n_t, sh.models, sh.ep, sh.sk
    has_u, tok = f["has_u"], f["tok"].astype(np.float64)
    values = {"tokens": (np.where(has_u[en], tok[en].sum(axis=1), np.nan), np.where(has_u[dis], tok[dis].sum(axis=1), np.nan)),
              "latency_s": (f["lat"][en], f["lat"][dis])}
    skills = f["skills"]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for mi in np.unique(models).tolist():
        per: dict[str, dict[str, Any]] = {}
        in_m = models[ep] == mi
        for measure, (on, off) in values.items():
            ok = (on > 0) & (off > 0) & np.isfinite(on) & np.isfinite(off)
            e_ok = in_m & ok[ep]
            p_e, s_e = ep[e_ok], sk[e_ok]
            if p_e.size == 0:
                continue
            # per (skill, task): the task's mean enabled and disabled value over its epochs
            g_key = s_e * sh.span + task[p_e]
            uk, g = np.unique(g_key, return_inverse=True)
            g = g.ravel()
            cnt = np.bincount(g).astype(np.float64)
            m_on, m_off = np.bincount(g, weights=on[p_e]) / cnt, np.bincount(g, weights=off[p_e]) / cnt
            g_skill = uk // sh.span
            lr = np.log(m_on) - np.log(m_off)
            # the yardstick: per benchmark, the median per-task ratio over the model's retrieving tasks
            retrieving = np.unique(task[p_e])
            lib_pairs = np.flatnonzero((models == mi) & ok & np.isin(task, retrieving))
            lib_task, lib_lr = _task_log_ratios(task[lib_pairs], on[lib_pairs], off[lib_pairs])
            lib_bench = lib_task // n_t
            med = {int(b): float(np.median(lib_lr[lib_bench == b])) for b in np.unique(lib_bench).tolist()}
            g_task = uk % sh.span
            centred = lr - np.array([med.get(int(b), 0.0) for b in (g_task // n_t).tolist()])
            order = np.argsort(g_skill, kind="stable")
            bounds = np.flatnonzero(np.r_[True, g_skill[order][1:] != g_skill[order][:-1], True])
            found: list[tuple[str, dict[str, Any]]] = []
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
                rows = order[a:b]
                if rows.size < min_tasks or np.median(lr[rows]) <= np.log(floor):
                    continue
                r = ratio_estimate(m_on[rows], m_off[rows], level)
                rel = hodges_lehmann(centred[rows], level)
                found.append((str(skills[int(g_skill[rows[0]])]), {
                    "ratio": r.estimate, "ratio_ci": list(r.ci) if r.ci else None, "p": r.p,
                    "n_tasks": int(rows.size), "words": SKILL_MEASURES[measure],
                    "relative_ratio": None if rel.estimate is None else float(np.exp(rel.estimate)),
                    "relative_ci": [float(np.exp(rel.ci[0])), float(np.exp(rel.ci[1]))] if rel.ci else None,
                    "relative_p": rel.p}))
            if found:
                q = bh_qvalues(np.array([x["relative_p"] for _, x in found], dtype=float))
                for (sid, x), qv in zip(found, q.tolist(), strict=True):
                    per.setdefault(sid, {})[measure] = {**x, "relative_q": float(qv)}
        if per:
            out[_model_name(f["models"][mi])] = per
    return out


def _task_log_ratios(task: np.ndarray, on: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tasks and, per task, the log of its mean enabled over its mean disabled value (epochs averaged)."""
    if task.size == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    u, g = np.unique(task, return_inverse=True)
    g = g.ravel()
    cnt = np.bincount(g).astype(np.float64)
    return u, np.log(np.bincount(g, weights=on) / cnt) - np.log(np.bincount(g, weights=off) / cnt)


def efficiency_harm(fig: dict[str, Any] | None, floor: float = RATIO_FLOOR, q_max: float = 0.10) -> str | None:
    """The measure (tokens, else wall time) on which a skill is an efficiency harm (`skill_efficiency`):
    its ratio's interval above `floor`, and its cost above the library's on the same benchmarks
    (relative interval above 1, BH q <= `q_max`); None when neither is."""
    for measure in SKILL_MEASURES:
        x = (fig or {}).get(measure)
        if (x and x.get("ratio_ci") and x["ratio_ci"][0] > floor and x.get("relative_ci")
                and x["relative_ci"][0] > 1.0 and x.get("relative_q") is not None and x["relative_q"] <= q_max):
            return measure
    return None


def skill_scores(table: Any, level: float = 0.95, min_tasks: int = 5) -> dict[str, dict[str, dict[str, Any]]]:
    """model -> skill -> the paired graded-score difference (enabled - disabled) over the pairs whose
    enabled run was shown the skill, the task as the unit (epochs averaged): Hodges-Lehmann shift with
    the signed-rank interval and p, as per model (`efficiency`); skills with at least `min_tasks`
    such tasks, and only where both records of pairs carry a `score`. {} without scores."""
    sh = _Shown.of(table)
    if sh is None:
        return {}
    f, task, models = sh.f, sh.task, sh.models
    on, off = f["score"][sh.en], f["score"][sh.dis]
    ok = np.isfinite(on) & np.isfinite(off)
    if not ok.any():
        return {}
    keep = ok[sh.ep]
    ep, sk = sh.ep[keep], sh.sk[keep]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    span = sh.span
    for mi in np.unique(models[ep]).tolist():
        sel = models[ep] == mi
        p_e, s_e = ep[sel], sk[sel]
        uk, g = np.unique(s_e * span + task[p_e], return_inverse=True)
        g = g.ravel()
        cnt = np.bincount(g).astype(np.float64)
        diff = (np.bincount(g, weights=on[p_e]) - np.bincount(g, weights=off[p_e])) / cnt
        g_skill = uk // span
        order = np.argsort(g_skill, kind="stable")
        bounds = np.flatnonzero(np.r_[True, g_skill[order][1:] != g_skill[order][:-1], True])
        per: dict[str, dict[str, Any]] = {}
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            rows = order[a:b]
            if rows.size < min_tasks:
                continue
            s = hodges_lehmann(diff[rows], level)
            per[str(f["skills"][int(g_skill[rows[0]])])] = {
                "difference": s.estimate, "difference_ci": list(s.ci) if s.ci else None, "p": s.p,
                "test": s.test, "n_tasks": int(rows.size)}
        if per:
            out[_model_name(f["models"][mi])] = per
    return out
