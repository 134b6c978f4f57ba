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

from skillaudit.stats.signed_rank import EXACT_MAX, FLIP_MAX, hodges_lehmann, ratio_estimate

SCHEMA = "skillaudit.efficiency/v1"
#: measure -> (its words, its unit)
MEASURES = {"score": ("graded score (the record's `score`, e.g. a verifier reward)", "points"),
            "prompt_tokens": ("prompt tokens (cached included)", "tokens"),
            "completion_tokens": ("completion tokens", "tokens"),
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
        "completion_tokens": (np.where(has_u[en], tok[en, 1], np.nan), np.where(has_u[dis], tok[dis, 1], np.nan)),
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
                   for e in effects if e.measure != "score" or e.logged]  # a score only where graded
        name = f["models"][mi]  # as logged; a record without one is the readers' "default"
        out.append(ModelEfficiency("default" if name is None else str(name), tuple(effects)))
    return out


def efficiency_doc(table: Any, level: float = 0.95) -> dict[str, Any] | None:
    """The `efficiency` object of `metrics --json` (None without cost columns)."""
    if table is None:
        return None
    return {"schema": SCHEMA, "method": dict(METHOD), "level": level,
            "models": [m.to_dict() for m in efficiency(table, level)]}
