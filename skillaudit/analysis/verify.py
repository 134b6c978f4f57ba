"""Measured vs projected: what removing the prune set really does (`skillaudit verify`).

`prune` projects RAE without its prune set by assuming that a retrieving pair whose retrieved set
becomes empty falls back to its disabled outcome and every other pair keeps its enabled outcome.
A `pruned` arm re-runs exactly the retrieving pairs whose retrieved set touched the prune set,
replaying their tool call against the library without it (the tool may now return other skills),
so the measured RAE is

    RAE_measured = (sum over untouched S_call pairs of f + sum over touched pairs of (y_pruned - y-)) / n_cond

over the same S_call as the projection (the denominators agree, so the two numbers compare the
same tasks). Per pruned skill, the same two means over the pairs that retrieved it. Intervals:
task-level bootstrap of both from the same resamples; the difference measured - projected gets
its own interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from skillaudit.analysis.counterfactual import ArmRecords
from skillaudit.errors import InputError
from skillaudit.runs import PairedRuns
from skillaudit.stats import bootstrap_totals, percentile_ci, unit_sums

SCHEMA = "skillaudit.verify/v1"


@dataclass(frozen=True)
class VerifyRow:
    """Projected and measured RAE for one model's prune set (skill_id None) or one pruned skill."""

    model: str
    skill_id: str | None
    excluded: tuple[str, ...]
    n_tasks: int  # retrieving tasks counted
    n_pairs: int
    n_rerun: int  # touched pairs with a pruned re-run
    projected: float | None
    projected_ci: list[float] | None
    measured: float | None
    measured_ci: list[float] | None
    difference_ci: list[float] | None
    before: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "skill_id": self.skill_id, "excluded": list(self.excluded),
                "n_tasks": self.n_tasks, "n_pairs": self.n_pairs, "n_rerun": self.n_rerun,
                "rae_before": self.before,
                "projected": self.projected, "projected_ci": self.projected_ci,
                "measured": self.measured, "measured_ci": self.measured_ci,
                "measured_minus_projected_ci": self.difference_ci}


@dataclass(frozen=True)
class VerifyResult:
    rows: tuple[VerifyRow, ...]
    missing: int  # touched pairs without a pruned re-run (left at their projection)
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        overall = [r.to_dict() for r in self.rows if r.skill_id is None]
        return {
            "schema": SCHEMA, "settings": self.settings,
            "projected": [{k: r[k] for k in ("model", "excluded", "projected", "projected_ci")} for r in overall],
            "measured": [{k: r[k] for k in ("model", "excluded", "measured", "measured_ci", "n_rerun")}
                         for r in overall],
            "rows": [r.to_dict() for r in self.rows], "missing_reruns": self.missing,
            "method": {"interval": self.interval_words()},
            "note": ("projected: pairs that lose every skill fall back to their disabled outcome, the "
                     "others keep their enabled outcome; measured: those pairs re-run with the library "
                     "without the prune set (the tool may return other skills). Both over the same "
                     f"retrieving pairs; CIs: {self.interval_words()}."),
        }

    def interval_words(self) -> str:
        """The intervals as computed: task-level bootstrap percentiles from the same resamples."""
        from skillaudit.analysis.methods import bootstrap_words

        return (f"{bootstrap_words(int(self.settings.get('bootstrap') or 0), self.settings.get('seed'))}, "
                "projected and measured from the same resamples")


def _ci(v: np.ndarray) -> list[float] | None:
    lo, hi = v
    return None if not (np.isfinite(lo) and np.isfinite(hi)) else [float(lo), float(hi)]


def verify(runs: PairedRuns, arms: ArmRecords | None, prune_sets: dict[str, tuple[str, ...]] | None = None,
           *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> VerifyResult:
    """Measured vs projected RAE for each model with `pruned` re-runs.

    `prune_sets` maps a model to the skills it prunes; None takes them from the records
    (`meta.excluded`). Models without a pruned re-run are left out.
    """
    if arms is None or "pruned" not in arms.names:
        raise InputError("no `pruned` arm records in these runs: run `skillaudit verify` with --endpoint "
                         "(or `skillaudit run --arms pruned`) first")
    rows_p = arms.of("pruned")
    units = runs.unit_ids()
    f = runs.flip.astype(np.float64)
    y_neg = runs.y_neg.astype(np.float64)
    out: list[VerifyRow] = []
    missing = 0
    for mi in np.unique(runs.model[arms.pair[rows_p]]).tolist():
        model = runs.models[mi]
        mine = rows_p[runs.model[arms.pair[rows_p]] == mi]
        chosen = (prune_sets.get(model) or prune_sets.get("*")) if prune_sets else None
        excluded = tuple(sorted(set(chosen) if chosen
                                else {s for i in mine.tolist() for s in arms.excluded[i]}))
        in_model = runs.model == mi
        call = in_model & runs.retrieved
        cols = [runs.skills.index(s) for s in excluded if s in runs.skills]
        hits = runs.retrieval
        row_of = hits.row_index()
        gone = np.isin(hits.indices, cols)
        touched_n = np.bincount(row_of[gone], minlength=runs.n_pairs)
        touched = call & (touched_n > 0)
        emptied = touched & (touched_n == runs.n_skills_retrieved)
        f_proj = np.where(emptied, 0.0, f)
        rerun = np.full(runs.n_pairs, np.nan)
        rerun[arms.pair[mine]] = arms.correct[mine].astype(np.float64) - y_neg[arms.pair[mine]]
        has = touched & np.isfinite(rerun)
        missing += int((touched & ~has).sum())
        f_meas = np.where(has, rerun, f_proj)
        targets: list[tuple[str | None, np.ndarray]] = [(None, call)]
        for s in excluded:
            if s in runs.skills:
                k = runs.skills.index(s)
                with_k = np.zeros(runs.n_pairs, dtype=bool)
                with_k[row_of[hits.indices == k]] = True
                targets.append((s, call & with_k))
        for sid, sel in targets:
            idx = np.flatnonzero(sel)
            if idx.size == 0:
                continue
            vals = np.column_stack([np.ones(idx.size), f[idx], f_proj[idx], f_meas[idx],
                                    f_meas[idx] - f_proj[idx]])
            tot = vals.sum(axis=0)
            point = tot[1:] / tot[0]
            cis = np.full((4, 2), np.nan)
            if n_boot > 0:
                _, inv = np.unique(units[idx], return_inverse=True)
                totals = bootstrap_totals(unit_sums(inv.ravel(), vals), n_boot, seed)
                cis = percentile_ci(totals[:, 1:] / totals[:, :1], level)
            out.append(VerifyRow(
                model=model, skill_id=sid, excluded=excluded, n_tasks=int(np.unique(units[idx]).size),
                n_pairs=int(idx.size), n_rerun=int(has[idx].sum()), before=float(point[0]),
                projected=float(point[1]), projected_ci=_ci(cis[1]), measured=float(point[2]),
                measured_ci=_ci(cis[2]), difference_ci=_ci(cis[3])))
    return VerifyResult(rows=tuple(out), missing=missing,
                        settings={"bootstrap": n_boot, "seed": seed, "level": level})


def prune_sets_of(doc: dict[str, Any], where: str = "prune document") -> dict[str, tuple[str, ...]]:
    """Per model, the skills a `prune --json` document prunes (its per-model prune entries)."""
    if not isinstance(doc, dict) or doc.get("schema") != "skillaudit.prune/v1":
        raise InputError("not a skillaudit.prune/v1 document (the output of `skillaudit prune --json`)")
    from skillaudit.util.documents import check_schema

    check_schema(doc, {"recommendations": [{"scope": "str", "action": "str", "skill_id": "str|null",
                                            "models": (True, ["str"])}]}, where)
    out: dict[str, set[str]] = {}
    for r in doc.get("recommendations", []):
        if r.get("scope", "skill") == "skill" and r.get("action") == "prune" and r.get("skill_id"):
            for m in r.get("models") or ["*"]:
                out.setdefault(m, set()).add(r["skill_id"])
    return {m: tuple(sorted(v)) for m, v in out.items()}
