"""Recommendations: library-level (`gate-retrieval | reduce-depth`) and per skill
(`prune | rewrite | merge | keep | needs-data | unused`), per model, with the projected effect of
removing the prune set (DESIGN §2, §3.3 `skillaudit.prune/v1`).

Two questions, never mixed. **Library level** (`skillaudit.library_effect`): when the skills do
not differ (heterogeneity test) but the library's mean effect per injected skill is harmful, the
harm is library-wide: one `gate-retrieval` (or `reduce-depth`) recommendation for that model and
benchmark, and no entry is pruned for it. **Skill level**, per model, rules in order (thresholds in
`Rules`; docs/attribution.md gives every formula):

1. `unused`: never retrieved.
2. *harmful* = the skills differ on this model (heterogeneity p <= heterogeneity_alpha) **and** the
   skill's effect relative to the library average of the others is reliably below it (relative CI
   below 0, BH q <= q_max) **and** its own effect is below zero (coefficient CI below 0), with at
   least `min_discordant` flips. Without the regression's resamples nothing is judged harmful.
   - harmful and a near-duplicate partner that is reliably helpful -> `rewrite` (after the partner);
   - harmful but rescuing in real numbers (b >= mixed_min and b/(b+c) > rescue_max) -> `rewrite`;
   - otherwise -> `prune`.
3. *mixed* (not harmful): b and c both >= mixed_min, the smaller side >= mixed_ratio of the
   discordant pairs, and more discordant pairs than the other retrieving pairs have (one-sided
   quasi-binomial test over tasks, BH q <= q_max) -> `rewrite`.
4. *helpful* (net > 0 with q <= q_max, or a coefficient reliably above 0) -> `keep`.
5. near-duplicate (a direct pair above the calibrated similarity) -> `merge`; "merge into X, which
   does better" only when the paired interval of the difference of their effects excludes 0,
   otherwise "no evidence which is better".
6. fewer retrieving tasks than a power calculation needs (in tasks, with the epochs' design
   effect) -> `needs-data`, saying about how many more retrieving tasks would decide it.
7. otherwise -> `keep` (no reliable effect).

With several models each rule runs per model; a skill's recommendation names the models it holds
for, and a skill reliably harmful on one model and reliably helpful on another is flagged
`rewrite` (gate it per model) instead of being pruned for all. Per-skill numbers come from which
skills were retrieved together: they are associations, and the reasons say so.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# norm.ppf / norm.sf are special.ndtri / ndtr; importing scipy.stats would cost ~1 s
from scipy import special as _sp

from ._io import atomic_directory, is_within
from .attribution import AttributionResult, ModelAttributions, SkillAttribution, indicator
from .errors import OutputError
from .library_effect import HETEROGENEITY_ALPHA, LibraryEffect
from .runs import PairedRuns
from .stats import bh_qvalues, design_effect

SCHEMA = "skillaudit.prune/v1"
ACTIONS = ("prune", "rewrite", "merge", "keep", "needs-data", "unused")
LIBRARY_ACTIONS = ("gate-retrieval", "reduce-depth")
_ORDER = {a: i for i, a in enumerate(("gate-retrieval", "reduce-depth", *ACTIONS))}


@dataclass(frozen=True)
class Rules:
    """Thresholds of the recommendation rules."""

    q_max: float = 0.10  # BH q-value for "reliably" harmful / helpful / mixed
    rescue_max: float = 0.25  # prune only when rescues are at most this share of discordant pairs
    mixed_min: int = 3  # "real numbers": at least this many rescues and harms
    mixed_ratio: float = 0.30  # smaller side / discordant pairs for "mixed"
    delta_min: float = 0.10  # smallest effect on the flip rate worth detecting (10 pp)
    power: float = 0.80  # power calculation: probability of deciding when the effect is real
    coef_q_required: bool = True  # "reliably helpful" on the regression also needs its BH q <= q_max
    min_discordant: int = 5  # a bootstrap verdict needs at least this many flips (b + c)
    min_tasks: int = 5  # a per-skill "vs library" verdict needs at least this many retrieving tasks
    heterogeneity_alpha: float = HETEROGENEITY_ALPHA  # skills "differ" below this p


@dataclass(frozen=True)
class Recommendation:
    """One action, a one-line reason and the evidence it rests on.

    `scope` is "skill" (one entry of the library, for the models in `models`) or "library"
    (`gate-retrieval` / `reduce-depth` for one model and benchmark; `skill_id` is None).
    """

    skill_id: str | None
    action: str
    reason: str
    evidence: dict[str, Any]
    scope: str = "skill"
    models: tuple[str, ...] = ()
    benchmark: str | None = None

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"scope": self.scope, "skill_id": self.skill_id, "action": self.action,
                               "models": list(self.models), "reason": self.reason,
                               "evidence": self.evidence}
        if self.scope == "library":
            doc["model"] = self.models[0] if self.models else None
            doc["benchmark"] = self.benchmark
        return doc


@dataclass(frozen=True)
class Projection:
    """RAE/OAE before and after removing `removed` (a projection, not a measurement)."""

    removed: tuple[str, ...]
    rae_before: float | None
    rae_after: float | None
    oae_before: float | None
    oae_after: float | None
    n_cond_before: int
    n_cond_after: int
    n_fallback: int  # retrieving pairs whose retrieved set becomes empty
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "rae_before": self.rae_before, "rae_after": self.rae_after,
            "oae_before": self.oae_before, "oae_after": self.oae_after,
            "is_projection": True,
            "removed": list(self.removed),
            "n_cond_before": self.n_cond_before, "n_cond_after": self.n_cond_after,
            "n_fallback": self.n_fallback,
            "assumption": (
                "pairs whose retrieved set becomes empty fall back to their disabled outcome; "
                "all other pairs keep their enabled outcome; no new retrievals replace the removed skills"
            ),
        }


@dataclass(frozen=True)
class PruneResult:
    """Recommendations (library-level first, then prune, rewrite, merge, needs-data, keep, unused),
    the library-level verdicts they rest on, and the projection (overall and per model)."""

    recommendations: tuple[Recommendation, ...]
    projected: Projection
    settings: dict[str, Any] = field(default_factory=dict)
    library: tuple[LibraryEffect, ...] = ()
    projected_per_model: tuple[Projection, ...] = ()

    def skill_recommendations(self) -> list[Recommendation]:
        return [r for r in self.recommendations if r.scope == "skill"]

    def by_action(self, action: str) -> list[str]:
        return list(dict.fromkeys(r.skill_id for r in self.skill_recommendations() if r.action == action))

    def get(self, skill_id: str, model: str | None = None) -> Recommendation | None:
        for r in self.skill_recommendations():
            if r.skill_id == skill_id and (model is None or model in r.models):
                return r
        return None

    def library_actions(self) -> list[Recommendation]:
        return [r for r in self.recommendations if r.scope == "library"]

    def removable(self, all_models: Sequence[str]) -> list[str]:
        """Skills whose prune holds for every model of the runs (what `--apply` leaves out)."""
        need = set(all_models)
        out = []
        for r in self.skill_recommendations():
            if r.action == "prune" and need <= set(r.models) and r.evidence.get("in_library", True):
                out.append(r.skill_id)
        return sorted(set(out))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "library": [e.to_dict() for e in self.library],
            "recommendations": [r.to_dict() for r in self.recommendations],
            "projected": self.projected.to_dict(),
            "projected_per_model": [p.to_dict() for p in self.projected_per_model],
        }


# ---------------------------------------------------------------- power calculation
def mcnemar_sample_size(delta: float, psi: float, alpha: float = 0.05, power: float = 0.80) -> int:
    """Pairs needed for a two-sided McNemar test to detect a flip-rate effect `delta` (Connor 1987).

    `psi` is the discordant-pair rate (b + c) / n; it is raised to |delta| when smaller.
    """
    delta = abs(delta)
    if delta <= 0:
        raise ValueError("delta must be non-zero")
    psi = min(1.0, max(psi, delta))
    za = float(_sp.ndtri(1 - alpha / 2))
    zb = float(_sp.ndtri(power))
    n = (za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / (delta * delta)
    return math.ceil(n)


def tasks_needed(pairs: int, deff: float, pairs_per_task: float) -> int:
    """Tasks that carry the information of `pairs` independent pairs: pairs * deff / pairs per task.

    Epochs of one task repeat each other (design effect deff >= 1), so a task with m epochs is
    worth m / deff independent pairs.
    """
    return math.ceil(pairs * max(deff, 1.0) / max(pairs_per_task, 1.0))


# ---------------------------------------------------------------- projection
def project(runs: PairedRuns, removed: Sequence[str], model: str | None = None) -> Projection:
    """RAE/OAE if the skills `removed` were gone (see `Projection.to_dict()['assumption']`)."""
    return project_per_model(runs, {None: removed}, model=model)[0]


def project_per_model(runs: PairedRuns, removed: dict[str | None, Sequence[str]],
                      model: str | None = None) -> tuple[Projection, list[Projection]]:
    """The projection overall and per model, each model losing its own prune set (key None: all models)."""
    f = runs.flip.astype(np.float64)
    n = runs.n_pairs
    k = runs.n_skills_retrieved
    cond = k > 0
    X = indicator(runs) if runs.skills else None
    lost = np.zeros(n)
    all_removed: set[str] = set()
    per_model: list[Projection] = []
    for m, ids in removed.items():
        ids = tuple(sorted(set(ids)))
        all_removed |= set(ids)
        rows = np.ones(n, dtype=bool) if m is None else runs.model == (
            runs.models.index(m) if m in runs.models else -1)
        gone = np.zeros(len(runs.skills))
        gone[[runs.skills.index(s) for s in ids if s in runs.skills]] = 1.0
        lost_m = np.asarray(X @ gone).ravel() * rows if X is not None else np.zeros(n)
        lost += lost_m
        if m is not None:
            per_model.append(_projection(f[rows], cond[rows], k[rows], lost_m[rows], ids, m))
    total = _projection(f, cond, k, lost, tuple(sorted(all_removed)), model)
    return total, per_model


def _projection(f: np.ndarray, cond: np.ndarray, k: np.ndarray, lost: np.ndarray,
                removed: tuple[str, ...], model: str | None) -> Projection:
    still = cond & (k - np.rint(lost).astype(np.int64) > 0)
    fallback = cond & ~still
    n_cond, n_after = int(cond.sum()), int(still.sum())

    def rate(num: float, den: int) -> float | None:
        return float(num / den) if den else None

    return Projection(
        removed=removed, rae_before=rate(f[cond].sum(), n_cond), rae_after=rate(f[still].sum(), n_after),
        oae_before=rate(f.sum(), f.size), oae_after=rate(f.sum() - f[fallback].sum(), f.size),
        n_cond_before=n_cond, n_cond_after=n_after, n_fallback=int(fallback.sum()), model=model,
    )


# ---------------------------------------------------------------- rules
def _effect(a: SkillAttribution) -> float:
    """Best available per-skill effect estimate: the coefficient, else the joint alias one, else rae_k."""
    for v in (a.coef, a.alias_coef, a.rae_k):
        if v is not None:
            return float(v)
    return 0.0


def _fmt_pp(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f} pp"


def _fmt_q(q: float | None) -> str:
    return "–" if q is None else ("<0.001" if q < 0.001 else f"{q:.3f}")


def _fmt_ci(ci: Sequence[float] | None) -> str:
    return "" if not ci else f" [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]"


def _tasks(a: SkillAttribution) -> str:
    """"N tasks (M pairs)": the task is the unit, pairs count its epochs."""
    n_t = a.n_tasks or a.n_retrieved
    return f"{n_t} task{'s' if n_t != 1 else ''} ({a.n_retrieved} pair{'s' if a.n_retrieved != 1 else ''})"


def _n_tasks(n: int, what: str = "") -> str:
    return f"{n} {what}task{'s' if n != 1 else ''}"


def _as_models(attribution: AttributionResult | ModelAttributions) -> ModelAttributions:
    if isinstance(attribution, ModelAttributions):
        return attribution
    lib = (attribution.library,) if attribution.library is not None else ()
    return ModelAttributions(results=(attribution,), library=lib, pooled=False,
                             settings=dict(attribution.settings))


def binom_upper_tail(k: float, n: float, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exact (regularised incomplete beta I_p(k, n - k + 1));
    counts may be fractional (divided by a design effect). scipy.stats.binom.sf(k - 1, n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return float(_sp.betainc(k, n - k + 1.0, p))


def _explained_by_where(a: SkillAttribution, rules: Rules) -> str:
    """A sentence when a skill's raw net count is what the library's harm and rescue rates on the
    same kind of task predict (stratified on the disabled outcome), else ''."""
    if a.expected_net is None or a.relative_p is None or a.net == 0 or a.n_retrieved == 0:
        return ""
    if a.relative_p <= 0.05 or a.expected_net * a.net <= 0 or abs(a.expected_net) < abs(a.net) / 3:
        return ""
    kind = ("tasks the model already solves without skills" if a.net < 0
            else "tasks the model fails without skills")
    what = "harm" if a.net < 0 else "help"
    return (f"retrieved on {kind}: its net {what} (net {a.net:+d}) matches the library's harm and "
            f"rescue rates there (expected net {a.expected_net:+.1f}; vs library "
            f"{_fmt_pp(a.relative_effect)}{_fmt_ci(a.relative_ci)}, p {a.relative_p:.3f}), so it "
            "is not judged worse than the other entries")


def _library_recommendations(effects: Sequence[LibraryEffect]) -> list[Recommendation]:
    """One `gate-retrieval` / `reduce-depth` per model (and per benchmark where only it shows it)."""
    out = []
    pooled_wide = {e.model for e in effects if e.benchmark == "*" and e.recommendation}
    for e in effects:
        if not e.recommendation:
            continue
        if e.benchmark != "*" and e.model in pooled_wide:
            continue  # the model-wide recommendation covers its benchmarks
        ev = e.to_dict()
        out.append(Recommendation(skill_id=None, action=e.recommendation, reason=e.text, evidence=ev,
                                  scope="library", models=(e.model,), benchmark=e.benchmark))
    return out


def _recommend_one(
    runs: PairedRuns,
    attribution: AttributionResult,
    rules: Rules,
    partner: dict[str, tuple[str, float]],
    cluster_of: dict[str, list[str]],
) -> dict[str, Recommendation]:
    """Per-skill recommendations for one population (one model, or all pooled)."""
    rows = {a.skill_id: a for a in attribution.skills}
    model = attribution.model or "*"
    regression = bool(attribution.settings.get("regression"))
    lib = attribution.library
    has_intervals = bool(regression and lib is not None and attribution.settings.get("regression_interval"))
    differ = bool(lib is not None and lib.heterogeneity_p is not None
                  and lib.heterogeneity_p <= rules.heterogeneity_alpha and lib.reportable)
    wide = lib is not None and lib.verdict == "library-wide"
    tot = attribution.totals
    psi_all = (tot["cond_b"] + tot["cond_c"]) / max(tot["n_cond"], 1)

    def measured(a: SkillAttribution) -> bool:
        """Re-runs with the skill withheld (mask arms) exist: they decide, not co-retrieval."""
        return a.causal_effect is not None and a.causal_ci is not None and \
            a.causal_n_withheld >= rules.min_discordant

    def is_harmful(a: SkillAttribution) -> bool:
        if measured(a):  # withholding it helps, and more than withholding a typical entry
            return bool(a.causal_ci[1] < 0 and a.causal_q is not None and a.causal_q <= rules.q_max
                        and a.causal_relative_ci is not None and a.causal_relative_ci[1] < 0)
        # worse than the other entries on the same kind of task (stratified on the disabled
        # outcome and the retrieved-set size: exact test, BY q over the testable skills), with
        # enough retrieving tasks and flips to judge, and its own effect (the regression, which
        # accounts for co-retrieved skills) below zero
        return bool(
            has_intervals and differ and a.identifiable is True and a.relative_testable is True
            and a.n_tasks >= rules.min_tasks and a.relative_q is not None
            and a.relative_q <= rules.q_max and a.relative_ci is not None and a.relative_ci[1] < 0
            and a.coef_ci is not None and a.coef_ci[1] < 0 and a.b + a.c >= rules.min_discordant)

    def is_helpful(a: SkillAttribution) -> bool:
        exp = a.net > 0 and a.q_value is not None and a.q_value <= rules.q_max
        if regression and a.identifiable and a.coef_ci is not None and a.coef_ci[1] < 0:
            return False
        return exp or bool(regression and a.identifiable and a.coef_ci is not None
                           and a.coef_ci[0] > 0 and (not rules.coef_q_required or (a.coef_q or 1.0) <= rules.q_max)
                           and a.net > 0 and a.b + a.c >= rules.min_discordant)

    # excess discordance (mixed skills), counted on "clean" pairs where no skill already judged
    # harmful or helpful was retrieved alongside (else an innocent neighbour inherits its flips),
    # against the other clean retrieving pairs; one-sided binomial test, BH across skills
    flagged = np.array([1.0 if (s in rows and (is_harmful(rows[s]) or is_helpful(rows[s]))) else 0.0
                        for s in attribution.skill_ids])
    X = indicator(runs)
    if X.shape[1] < len(flagged):  # library-only skills were appended as empty columns
        flagged = flagged[: X.shape[1]]
    clean = runs.retrieved & (np.asarray(X @ flagged).ravel() == 0)
    f = runs.flip
    cols = np.column_stack([clean, clean & (f > 0), clean & (f < 0)]).astype(np.float64)
    mc = np.rint(np.asarray(X.T @ cols)).astype(np.int64)  # skills(in runs) x [n, b, c]
    clean_n, clean_d = int(clean.sum()), int(((f != 0) & clean).sum())
    # tasks (all epochs) are the independent units: estimate the over-dispersion of discordant
    # counts per task relative to a binomial and divide the counts by it (Rao-Scott), then an
    # exact one-sided binomial tail (the normal z-test it replaces fired under a pure null in 18%
    # of seeds: 11 flips of 20 at base 1/6 is p 1e-4 exactly, 2e-6 by z)
    units = runs.unit_ids()
    n_u = np.bincount(units, weights=clean.astype(float))
    d_u = np.bincount(units, weights=((f != 0) & clean).astype(float))
    base_all = clean_d / clean_n if clean_n else 0.0
    var_bin = float((n_u * base_all * (1 - base_all)).sum())
    phi = max(1.0, float(((d_u - n_u * base_all) ** 2).sum()) / var_bin) if var_bin > 0 else 1.0
    mixed_counts: dict[str, tuple[int, int, int]] = {}
    p_mixed = []
    for j, sid in enumerate(runs.skills[: mc.shape[0]]):
        n_j, b_j, c_j = (int(v) for v in mc[j])
        if sid not in rows or n_j == 0:
            continue
        base = (clean_d - b_j - c_j + 1) / (clean_n - n_j + 2)
        mixed_counts[sid] = (n_j, b_j, c_j)
        p_mixed.append((sid, binom_upper_tail((b_j + c_j) / phi, n_j / phi, base)))
    q_mixed = dict(zip([s for s, _ in p_mixed],
                       bh_qvalues(np.array([p for _, p in p_mixed], dtype=float)), strict=True))

    def is_mixed(sid: str) -> bool:
        _, b_j, c_j = mixed_counts.get(sid, (0, 0, 0))
        return (b_j >= rules.mixed_min and c_j >= rules.mixed_min
                and min(b_j, c_j) / (b_j + c_j) >= rules.mixed_ratio
                and q_mixed.get(sid, 1.0) <= rules.q_max)

    m_tested = max(1, sum(1 for a in rows.values() if a.n_retrieved > 0))
    alpha_power = rules.q_max / m_tested  # Bonferroni-like: conservative "would decide it"
    in_call = runs.retrieved
    deff = design_effect(units[in_call], f[in_call].astype(np.float64)) if in_call.any() else 1.0
    pairs_per_task = (int(in_call.sum()) / max(int(np.unique(units[in_call]).size), 1)) if in_call.any() else 1.0

    recs: dict[str, Recommendation] = {}
    for sid, a in rows.items():
        ev: dict[str, Any] = {
            "model": model,
            "n_retrieved": a.n_retrieved, "n_tasks": a.n_tasks, "b": a.b, "c": a.c, "net": a.net,
            "rae_k": a.rae_k, "q_value": a.q_value, "share": a.share,
            "exclusive_n": a.exclusive_n, "coef": a.coef,
            "coef_ci": list(a.coef_ci) if a.coef_ci else None,
            "relative_effect": a.relative_effect,
            "relative_ci": list(a.relative_ci) if a.relative_ci else None,
            "relative_q": a.relative_q,
            "identifiable": a.identifiable,
            "basis": "co-retrieval (observational): an association, not a measured cause",
        }
        if a.aliases:
            ev["aliases"] = list(a.aliases)
            ev["alias_coef"] = a.alias_coef
        if a.in_library is False:
            ev["in_library"] = False
        dup = partner.get(sid)
        if dup:
            ev["near_duplicate"] = {"skill_id": dup[0], "similarity": dup[1]}
        if sid in cluster_of:
            ev["harmful_cluster"] = cluster_of[sid]
        counts = f"net {a.net:+d} (b {a.b}, c {a.c}) over {_tasks(a)}, q {_fmt_q(a.q_value)}"
        coef_txt = f"its effect {_fmt_pp(a.coef)}{_fmt_ci(a.coef_ci)}" if a.coef is not None else ""
        rel_txt = (f"{_fmt_pp(a.relative_effect)}{_fmt_ci(a.relative_ci)} vs the other entries "
                   f"(q {_fmt_q(a.relative_q)})") if a.relative_effect is not None else ""
        if measured(a):
            ev["causal_effect"] = a.causal_effect
            ev["causal_ci"] = list(a.causal_ci)
            ev["causal_q"] = a.causal_q
            ev["causal_relative_ci"] = list(a.causal_relative_ci) if a.causal_relative_ci else None
            ev["basis"] = f"from {a.causal_n_withheld} re-runs with the skill withheld (mask arms): measured"
            causal_txt = (f"from {a.causal_n_withheld} re-runs with the skill withheld, keeping it changes "
                          f"the pass rate by {_fmt_pp(a.causal_effect)}{_fmt_ci(a.causal_ci)} (q "
                          f"{_fmt_q(a.causal_q)}; {_fmt_pp(a.causal_relative)}{_fmt_ci(a.causal_relative_ci)} "
                          f"vs the other entries)")

        if a.n_retrieved == 0:
            action, reason = "unused", "never retrieved by any task in these runs"
            if dup:
                reason += f"; near-duplicate of {dup[0]}"
        elif is_harmful(a):
            ev["harmful"] = True
            rescue = a.b / max(a.b + a.c, 1)
            dup_good = dup is not None and dup[0] in rows and is_helpful(rows[dup[0]])
            if dup_good:
                action = "rewrite"
                reason = (f"associated with more harm than the average entry ({rel_txt}; {coef_txt}; "
                          f"{counts}) while its near-duplicate {dup[0]} helps: rewrite it after "
                          f"{dup[0]} or fold it in")
            elif a.b >= rules.mixed_min and rescue > rules.rescue_max:
                action = "rewrite"
                reason = (f"associated with more harm than the average entry but also with {a.b} "
                          f"rescues ({rel_txt}; {coef_txt}; {counts}): rewrite the harmful part")
            else:
                action = "prune"
                reason = (f"associated with more harm than the average entry and rarely with a rescue: "
                          f"{rel_txt}; {coef_txt}; {counts}")
            if measured(a):  # the counterfactual runs back it: say "causes"
                reason = (f"causes more harm than the average entry: {causal_txt}"
                          + ("; rewrite it" if action == "rewrite" else "") + f"; {counts}")
        elif is_mixed(sid):
            action = "rewrite"
            _, b_j, c_j = mixed_counts[sid]
            ev["discordance_q"] = float(q_mixed[sid])
            reason = (f"mixed: {b_j} rescues and {c_j} harms where it was retrieved, far more flips "
                      f"than other retrieving pairs (q {_fmt_q(q_mixed[sid])}): rewrite so it stops misleading")
        elif is_helpful(a):
            action, reason = "keep", f"associated with reliable help: {counts}" + (f"; {coef_txt}" if coef_txt else "")
        elif dup is not None and dup[0] in rows and rows[dup[0]].n_retrieved > 0 \
                and not is_harmful(rows[dup[0]]):
            action = "merge"
            other = rows[dup[0]]
            diff = attribution.difference(dup[0], sid)
            if diff is not None:
                ev["merge_difference"] = {"skill_id": dup[0], "difference": diff[0], "ci": list(diff[1])}
            if diff is not None and diff[1][0] > 0:
                reason = (f"near-duplicate (similarity {dup[1]:.2f}) of {dup[0]}, which does better "
                          f"({_fmt_pp(diff[0])}{_fmt_ci(diff[1])} difference, {_fmt_pp(_effect(other))} vs "
                          f"{_fmt_pp(_effect(a))}): merge into it")
            elif diff is not None and diff[1][1] < 0:
                reason = (f"near-duplicate (similarity {dup[1]:.2f}) of {dup[0]}, which does worse "
                          f"({_fmt_pp(diff[0])}{_fmt_ci(diff[1])} difference): merge {dup[0]} into this one")
            else:
                why = (f"difference {_fmt_pp(diff[0])}{_fmt_ci(diff[1])}" if diff is not None
                       else "their effects cannot be compared")
                reason = (f"near-duplicates (similarity {dup[1]:.2f}) with {dup[0]}; no evidence which "
                          f"is better ({why}): merge them into one")
        else:
            # power from the stated smallest effect worth detecting, never from the observed one
            # (post-hoc power only restates the p-value)
            delta = rules.delta_min
            psi = (a.b + a.c) / a.n_retrieved if a.b + a.c else psi_all
            need_pairs = mcnemar_sample_size(delta, max(psi, psi_all / 2), alpha_power, rules.power)
            need = tasks_needed(need_pairs, deff, pairs_per_task)
            more = max(0, need - (a.n_tasks or a.n_retrieved))
            ev["tasks_needed"] = need
            ev["more_tasks_needed"] = more
            ev["design_effect"] = round(deff, 3)
            ev["pairs_per_task"] = round(pairs_per_task, 3)
            if pairs_per_task > 1:  # what "tasks" means when each task is run several times
                ev["tasks_needed_note"] = (f"tasks with {pairs_per_task:.1f} retrieving epochs each; "
                                           f"design effect {deff:.2f}")
            exp_harm = a.net < 0 and a.q_value is not None and a.q_value <= rules.q_max
            exp_help = a.net > 0 and a.q_value is not None and a.q_value <= rules.q_max
            where = _explained_by_where(a, rules)
            if where:
                ev["explained_by_where_retrieved"] = True
            blame = ""
            if wide and (exp_harm or (a.coef_ci is not None and a.coef_ci[1] < 0)):
                blame = (f"harm is library-wide on {model} (see its {lib.recommendation or 'library'} "
                         f"recommendation): this entry is not reliably worse than the others "
                         f"({rel_txt or 'no relative estimate'}; {coef_txt or counts})")
            elif exp_harm and regression:
                if a.identifiable is False and a.aliases:
                    blame = (f"associated with harm together with {', '.join(a.aliases)} "
                             f"(joint {_fmt_pp(a.alias_coef)}), but never retrieved apart")
                    more = max(more, 10)
                    ev["more_tasks_needed"] = more
                else:
                    culprits = [p for p, _ in attribution.partners(sid)
                                if p in rows and is_harmful(rows[p])]
                    if a.coef_ci is not None and a.coef_ci[1] < 0:  # the vs-library test decided
                        blame = (f"exposure counts look harmful ({counts}) and its regression effect is "
                                 f"below zero ({coef_txt}), but it is not reliably worse than the other "
                                 f"entries on the same kind of task ({rel_txt or 'no relative estimate'})")
                    else:
                        blame = (f"exposure counts look harmful ({counts}) but the regression does not "
                                 f"confirm it once co-retrieved skills are accounted for"
                                 + (f" ({coef_txt})" if coef_txt else ""))
                    if culprits:
                        blame += f"; the harm goes to co-retrieved {culprits[0]}"
            elif exp_harm and where:
                blame = where
            elif exp_harm and not has_intervals:
                blame = (f"exposure counts look harmful ({counts}), but skill-level verdicts need the "
                         "regression's resamples (--bootstrap > 0)")
            if blame and a.identifiable is False:
                action = "needs-data"
                reason = f"{blame}: about {_n_tasks(more)} retrieving them separately would decide it"
            elif blame and wide:
                action, reason = "keep", blame
            elif more > 0:
                action = "needs-data"
                what = f"a {rules.delta_min * 100:.0f} pp effect (the smallest worth detecting)"
                if a.n_tasks < rules.min_tasks:
                    blame = blame or (f"retrieved on {_n_tasks(a.n_tasks)}, fewer than the "
                                      f"{rules.min_tasks} a per-skill verdict needs ({counts})")
                if blame:
                    reason = f"{blame}; about {_n_tasks(more, 'more retrieving ')} would decide it"
                else:
                    reason = (f"too few retrieving tasks to tell ({counts}): about "
                              f"{_n_tasks(more, 'more retrieving ')} would decide {what}")
            else:
                action = "keep"
                reason = blame or f"no reliable effect: {counts}" + (f"; {coef_txt}" if coef_txt else "")
            if exp_help and where and where not in reason:
                reason += "; " + where
        if measured(a) and action == "merge":  # the near-duplicate rule decided: it comes first
            reason += f"; re-runs do not show it worse than the other entries ({causal_txt})"
        elif measured(a) and action not in ("prune", "rewrite", "unused"):  # the re-runs decided
            reason = f"re-runs do not show it worse than the other entries ({causal_txt}); " + reason
        if sid in cluster_of and action in ("prune", "rewrite", "needs-data"):
            others = [s for s in cluster_of[sid] if s != sid]
            if others:
                reason += f"; in a harmful cluster with {', '.join(others[:3])}"
        recs[sid] = Recommendation(skill_id=sid, action=action, reason=reason, evidence=ev,
                                   models=(model,))
    return recs


def _combine(per_model: dict[str, dict[str, Recommendation]],
             rows: dict[str, dict[str, SkillAttribution]]) -> list[Recommendation]:
    """One entry per skill and action across models; a skill reliably harmful on one model and
    reliably helpful on another becomes one `rewrite` (gate it per model) for both."""
    models = list(per_model)
    if len(models) == 1:
        return list(per_model[models[0]].values())
    out: list[Recommendation] = []
    skills = list(dict.fromkeys(s for recs in per_model.values() for s in recs))
    for sid in skills:
        have = {m: per_model[m][sid] for m in models if sid in per_model[m]}
        used = {m: r for m, r in have.items() if r.action != "unused"}
        hurt = [m for m in used if (a := rows[m].get(sid)) is not None and a.coef_ci is not None
                and a.coef_ci[1] < 0 and a.identifiable]
        helped = [m for m in used if (a := rows[m].get(sid)) is not None and a.coef_ci is not None
                  and a.coef_ci[0] > 0 and a.identifiable]
        per = {m: {"action": r.action, "reason": r.reason} for m, r in have.items()}
        if hurt and helped:
            first = used[hurt[0]]
            h, g = rows[hurt[0]][sid], rows[helped[0]][sid]
            reason = (f"its effect differs in sign across models: associated with harm on "
                      f"{', '.join(hurt)} ({_fmt_pp(h.coef)}{_fmt_ci(h.coef_ci)}) and with help on "
                      f"{', '.join(helped)} ({_fmt_pp(g.coef)}{_fmt_ci(g.coef_ci)}): gate it per model "
                      f"(retrieve it for {', '.join(helped)} only) or rewrite it for {', '.join(hurt)}")
            ev = {**first.evidence, "sign_differs": True, "per_model": per}
            out.append(Recommendation(skill_id=sid, action="rewrite", reason=reason, evidence=ev,
                                      models=tuple(sorted(hurt + helped, key=models.index))))
            rest = [m for m in have if m not in hurt and m not in helped]
        else:
            rest = list(have)
        by_action: dict[str, list[str]] = {}
        for m in rest:
            by_action.setdefault(have[m].action, []).append(m)
        for action, ms in by_action.items():
            first = have[ms[0]]
            reason = first.reason
            if len({have[m].reason for m in ms}) > 1:  # each model's own evidence, never one for all
                reason = "; ".join(f"on {m}: {have[m].reason}" for m in ms)
            elif len(ms) < len(models) and action not in ("unused",):
                reason = f"on {', '.join(ms)}: {reason}"
            if len(ms) < len(models) and action == "prune":
                reason += (f"; not for {', '.join(m for m in models if m not in ms)} "
                           "(a per-model gate, not a library-wide prune)")
            ev = {**first.evidence, "per_model": per}
            out.append(Recommendation(skill_id=sid, action=action, reason=reason, evidence=ev,
                                      models=tuple(ms)))
    return out


def recommend(
    runs: PairedRuns,
    attribution: AttributionResult | ModelAttributions,
    near_duplicates: Sequence[tuple[str, str, float]] | None = None,
    harmful_clusters: Sequence[Sequence[str]] | None = None,
    rules: Rules | None = None,
) -> PruneResult:
    """Library-level and per-skill recommendations plus the projected RAE/OAE without the prune set.

    `runs` must be the pairs `attribution` was computed from (`attribute` for one population, or
    `attribute_models` for per-model verdicts). `near_duplicates` are (a, b, similarity) from
    `skillaudit.clusters.find_near_duplicates`; `harmful_clusters` are groups of skill ids that
    concentrate harm (mentioned in the evidence and the reason).
    """
    rules = rules or Rules()
    ma = _as_models(attribution)
    partner: dict[str, tuple[str, float]] = {}
    for a_id, b_id, sim in near_duplicates or ():
        for x, y in ((a_id, b_id), (b_id, a_id)):
            if x not in partner or sim > partner[x][1]:
                partner[x] = (y, float(sim))
    cluster_of: dict[str, list[str]] = {}
    for cl in harmful_clusters or ():
        for s in cl:
            cluster_of.setdefault(s, list(cl))

    per_model: dict[str, dict[str, Recommendation]] = {}
    rows: dict[str, dict[str, SkillAttribution]] = {}
    for res in ma.results:
        m = res.model or "*"
        sub = runs if m == "*" or m not in runs.models else runs.select(model=m)
        per_model[m] = _recommend_one(sub, res, rules, partner, cluster_of)
        rows[m] = {a.skill_id: a for a in res.skills}
    skill_recs = _combine(per_model, rows)
    net_of = {sid: min(a.net for r in rows.values() if (a := r.get(sid)) is not None)
              for sid in {r.skill_id for r in skill_recs}}
    skill_recs.sort(key=lambda r: (_ORDER[r.action], net_of.get(r.skill_id, 0), r.skill_id or "",
                                   r.models))
    recs = _library_recommendations(ma.library) + skill_recs

    removed: dict[str | None, list[str]] = {}
    for r in skill_recs:
        if r.action == "prune" and r.evidence.get("in_library", True):
            for m in r.models:
                removed.setdefault(None if m == "*" else m, []).append(r.skill_id)
    if not removed:
        removed = {None: []} if len(per_model) == 1 else {m: [] for m in per_model}
    total, by_model = project_per_model(runs, removed)
    settings = {"rules": vars(rules).copy(), "attribution": ma.settings.get("attribution"),
                "regression": bool(ma.settings.get("regression")),
                "models": list(per_model), "pooled_models": ma.pooled,
                "near_duplicates": None if near_duplicates is None else len(near_duplicates)}
    return PruneResult(recommendations=tuple(recs), projected=total, settings=settings,
                       library=ma.library, projected_per_model=tuple(by_model))


# ---------------------------------------------------------------- --apply: a pruned copy
def pruned_markdown(result: PruneResult, library_path: str) -> str:
    """PRUNED.md: what the pruned copy leaves out and why, and what else the audit suggests."""
    lines = [
        "# Pruned skill library",
        "",
        f"Copy of `{library_path}` without the skills that `skillaudit prune` recommends removing.",
        "The original library was not modified.",
        "",
        "## Left out",
        "",
    ]
    removable = set(result.removable(result.settings.get("models") or ["*"]))
    pruned = [r for r in result.skill_recommendations() if r.action == "prune" and r.skill_id in removable]
    lines += [f"- `{r.skill_id}`: {r.reason}" for r in pruned] or ["- nothing: no skill is reliably harmful"]
    library_level = result.library_actions()
    if library_level:
        lines += ["", "## For the library as a whole", ""]
        lines += [f"- {r.action} ({r.models[0]}, {'all benchmarks' if r.benchmark == '*' else r.benchmark}): "
                  f"{r.reason}" for r in library_level]
    gated = [r for r in result.skill_recommendations() if r.action == "prune" and r.skill_id not in removable]
    other = gated + [r for r in result.skill_recommendations() if r.action in ("rewrite", "merge", "needs-data")]
    if other:
        lines += ["", "## Kept, but worth a look", ""]
        lines += [f"- `{r.skill_id}` ({r.action}" + (" for " + ", ".join(r.models) if r in gated else "")
                  + f"): {r.reason}" for r in other]
    p = result.projected
    lines += [
        "",
        "## Projected effect (a projection, not a measurement)",
        "",
        f"- RAE: {_fmt_pp(p.rae_before)} -> {_fmt_pp(p.rae_after)}",
        f"- OAE: {_fmt_pp(p.oae_before)} -> {_fmt_pp(p.oae_after)}",
        f"- {p.n_fallback} retrieving pair(s) lose every skill and are assumed to fall back to "
        "their disabled outcome; all other pairs keep their enabled outcome.",
        "",
    ]
    return "\n".join(lines)


def _copy_tree(src: Path, dst: Path, root: Path, skipped: list[str], drop: frozenset[str] = frozenset()) -> None:
    """Copy folder `src` into the existing folder `dst` without following any link.

    Symbolic links are copied as links (a relative one that leaves the library `root` is made
    absolute, so it still points where it did; what it points to is never copied); special files
    (FIFOs, sockets, devices) are skipped and listed in `skipped`; `drop`: top-level names to
    leave out. An unreadable file or folder is an OutputError (one line).
    """
    try:
        entries = sorted(os.scandir(src), key=lambda e: e.name)
    except OSError as exc:
        raise OutputError(f"--apply: cannot read {src}: {exc.strerror or exc}") from None
    for entry in entries:
        if entry.name in drop:
            continue
        s, d = Path(entry.path), dst / entry.name
        try:
            if entry.is_symlink():
                target = os.readlink(s)
                if not os.path.isabs(target) and not is_within(Path(os.path.normpath(s.parent / target)), root):
                    target = os.path.normpath(s.parent / target)
                os.symlink(target, d)
            elif entry.is_dir(follow_symlinks=False):
                d.mkdir()
                _copy_tree(s, d, root, skipped)
            elif entry.is_file(follow_symlinks=False):
                shutil.copy2(s, d, follow_symlinks=False)
            else:
                skipped.append(str(s.relative_to(root)))
        except OutputError:
            raise
        except OSError as exc:
            raise OutputError(f"--apply: cannot copy {s}: {exc.strerror or exc}") from None


def apply_prune(library: Any, result: PruneResult, out_dir: str | Path) -> list[str]:
    """Write a pruned copy of `library` (folder or .jsonl) plus PRUNED.md into `out_dir`.

    Refuses (OutputError) to write into the library itself or inside it, or into a non-empty
    folder; the original is only read. Pruned skills are left out by folder (whatever their
    SKILL.md is, a link included); links are copied as links, never followed, so nothing outside
    the library is copied; special files are skipped (PRUNED.md lists them). Returns the ids left out.
    """
    src = Path(library.source).resolve()
    out = Path(out_dir).resolve()
    if out == src or (src.is_dir() and is_within(out, src)):
        raise OutputError(f"--apply {out_dir}: is the skill library itself or inside it; "
                          "choose a folder outside the library")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--apply {out_dir}: exists and is not a folder")
    if out.exists() and any(out.iterdir()):
        raise OutputError(f"--apply {out_dir}: folder is not empty; choose a new or empty folder")
    drop = set(result.removable(result.settings.get("models") or ["*"]))
    by_id = {s.id: s for s in library.skills}
    left_out = sorted(d for d in drop if d in by_id)
    skipped: list[str] = []
    with atomic_directory(out) as tmp:
        if src.is_dir():
            root = Path(library.source)
            names = set()
            for d in left_out:  # a folder skill's path is <library>/<folder>/SKILL.md, as it was read
                p = Path(by_id[d].path)
                if p.parent == root:
                    names.add(p.name)  # the library's own SKILL.md
                elif p.parent.parent == root:
                    names.add(p.parent.name)
            _copy_tree(root.absolute(), tmp, root.absolute(), skipped, frozenset(names))
        else:
            keep_lines = []
            drop_lines = {by_id[d].path for d in left_out}
            try:
                with src.open("rb") as fh:
                    for lineno, line in enumerate(fh, 1):
                        if f"{Path(library.source)}:{lineno}" not in drop_lines:
                            keep_lines.append(line)
            except OSError as exc:
                raise OutputError(f"--apply: cannot read {library.source}: {exc.strerror or exc}") from None
            (tmp / src.name).write_bytes(b"".join(keep_lines))
        text = pruned_markdown(result, library.source)
        if skipped:
            text += ("\n## Not copied\n\nSpecial files (FIFOs, sockets, devices) are not copied:\n\n"
                     + "".join(f"- `{s}`\n" for s in skipped))
        (tmp / "PRUNED.md").write_text(text, encoding="utf-8")
    return left_out
