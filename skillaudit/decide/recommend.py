"""Recommendations: library-level (`gate-retrieval | reduce-depth`) and per skill
(`prune | rewrite | merge | keep | needs-data | unused`), per model, with the projected effect of
removing the prune set (DESIGN §2, §3.3 `skillaudit.prune/v1`).

Two questions, never mixed. **Library level** (`skillaudit.analysis.library_effect`): when the skills do
not differ (heterogeneity test) but the library's mean effect per injected skill is harmful, the
harm is library-wide: one `gate-retrieval` (or `reduce-depth`) recommendation for that model and
benchmark, and no entry is pruned for it. **Skill level**, per model: the rules of
`skillaudit.decide.policy.RULES` in order, the first that holds decides (unused; harmful -> rewrite or
prune; mixed -> rewrite; helpful -> keep; near-duplicate -> merge; inconclusive -> needs-data or
keep). Each `Recommendation` names the rule that decided it (`rule`), its reason opens with that
rule's summary, then the evidence; docs/attribution.md holds the table and every formula.

With several models each rule runs per model; a skill's recommendation names the models it holds
for, and a skill reliably harmful on one model and reliably helpful on another is flagged
`rewrite` (M001: gate it per model) instead of being pruned for all. Per-skill numbers come from
which skills were retrieved together: they are associations, and the reasons say so.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from skillaudit.analysis.attribution import (
    AttributionResult,
    ModelAttributions,
    SkillAttribution,
    indicator,
)
from skillaudit.analysis.library_effect import LibraryEffect
from skillaudit.analysis.metrics import works_both_ways
from skillaudit.decide.policy import (  # noqa: F401  (re-exported: the thresholds, the rule table, the power calculation)
    ACTIONS,
    LIBRARY_ACTIONS,
    RULES,
    RULES_BY_ID,
    BenchmarksContext,
    ModelsContext,
    Population,
    Rule,
    Rules,
    SkillContext,
    _fmt_pp,
    binom_upper_tail,
    decide_skill,
    first_rule,
    mcnemar_sample_size,
    rules_markdown,
    tasks_needed,
)
from skillaudit.errors import OutputError
from skillaudit.runs import PairedRuns
from skillaudit.util.files import atomic_directory, is_within

SCHEMA = "skillaudit.prune/v1"
_ORDER = {a: i for i, a in enumerate((*LIBRARY_ACTIONS, *ACTIONS))}


@dataclass(frozen=True)
class Recommendation:
    """One action, a one-line reason and the evidence it rests on.

    `scope` is "skill" (one entry of the library, for the models in `models`) or "library"
    (`gate-retrieval` / `reduce-depth` for one model and benchmark; `skill_id` is None). `rule` is
    the id of the rule (`policy.RULES`) that decided the action; for an entry over several models,
    the rule of the first of them (`evidence.per_model[m].rule` gives each model's own).
    """

    skill_id: str | None
    action: str
    reason: str
    evidence: dict[str, Any]
    scope: str = "skill"
    models: tuple[str, ...] = ()
    benchmark: str | None = None
    rule: str | None = None

    @property
    def summary(self) -> str:
        """The deciding rule in a few words ('' when no rule is recorded)."""
        r = RULES_BY_ID.get(self.rule or "")
        return r.summary if r is not None else ""

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"scope": self.scope, "skill_id": self.skill_id, "action": self.action,
                               "rule": self.rule, "models": list(self.models), "reason": self.reason,
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


# ---------------------------------------------------------------- recommendations
def _as_models(attribution: AttributionResult | ModelAttributions) -> ModelAttributions:
    if isinstance(attribution, ModelAttributions):
        return attribution
    lib = (attribution.library,) if attribution.library is not None else ()
    return ModelAttributions(results=(attribution,), library=lib, pooled=False,
                             settings=dict(attribution.settings))


def _with_both_ways(e: LibraryEffect, runs: PairedRuns, facts: dict[str, _ModelFacts]) -> LibraryEffect:
    """`e` with its cell's both-ways figures and its model's selection sentence for the library
    rules: the model's own (`_model_facts`) for its pooled cell, a cell's metrics otherwise."""
    from dataclasses import replace

    from skillaudit.analysis.metrics import group_metrics

    mine = facts.get(e.model)
    sub = runs if e.model == "*" or e.model not in runs.models else runs.select(model=e.model)
    if mine is not None and (e.benchmark == "*" or len(sub.benchmarks) == 1):
        both = mine.both
    elif e.benchmark in sub.benchmarks:
        cell = sub.select(benchmark=e.benchmark)
        both = _both_fields(group_metrics(cell, e.model, e.benchmark, n_boot=0).to_dict())
    else:
        both = None
    return replace(e, both_ways=both, selection=mine.selection if mine is not None else None)


def _both_fields(g: dict[str, Any]) -> dict[str, Any] | None:
    """What the both-ways rules read of a metrics group (`works_both_ways`, `both_ways_words`)."""
    if not g.get("both_ways"):
        return None
    return {"both_ways": g["both_ways"], "cond_b": g["cond_b"], "cond_c": g["cond_c"]}


@dataclass(frozen=True)
class _ModelFacts:
    """One population's metrics facts the rules read: the both-ways figures (`_both_fields`) and
    the selection sentence (`metrics.GroupMetrics.follows_failure`, unless control arms measured it)."""

    both: dict[str, Any] | None
    selection: str | None


def _model_facts(runs: PairedRuns, model: str, controlled: Collection[str] = ()) -> _ModelFacts:
    """`_ModelFacts` of one population from one `metrics.group_metrics` of its pairs (resampled only
    where the selection sentence needs its intervals)."""
    from skillaudit.analysis.metrics import group_metrics

    if not runs.n_pairs:
        return _ModelFacts(None, None)
    checked = model not in controlled
    g = group_metrics(runs, model, "*", n_boot=2000 if checked else 0, seed=0)
    return _ModelFacts(_both_fields(g.to_dict()), g.follows_failure if checked else None)


#: enabled control arms that measure what searching and injecting text do on the same tasks
CONTROL_ARMS = ("random", "empty", "filler")


def controlled_models(runs: PairedRuns, arms: Any) -> set[str]:
    """Models of `runs` with enabled control-arm records (`CONTROL_ARMS`) in `arms` (`ArmRecords`)."""
    if arms is None or not getattr(arms, "n", 0):
        return set()
    out: set[str] = set()
    for name in CONTROL_ARMS:
        if name in arms.names:
            pairs = arms.pair[arms.of(name)]
            out.update(runs.models[int(m)] for m in np.unique(runs.model[pairs]).tolist())
    return out


def _library_recommendations(effects: Sequence[LibraryEffect]) -> list[Recommendation]:
    """One `gate-retrieval` / `reduce-depth` per model (and per benchmark where only it shows it),
    decided by the library rules (L0xx)."""
    decided = [(e, first_rule("library", e)) for e in effects]
    pooled_wide = {e.model for e, rule in decided if e.benchmark == "*" and rule is not None}
    out = []
    for e, rule in decided:
        if rule is None:
            continue
        if e.benchmark != "*" and e.model in pooled_wide:
            continue  # the model-wide recommendation covers its benchmarks
        out.append(Recommendation(skill_id=None, action=rule.action, reason=rule.reason(e), evidence=e.to_dict(),
                                  scope="library", models=(e.model,), benchmark=e.benchmark, rule=rule.id))
    return out


def _recommend_one(
    runs: PairedRuns,
    attribution: AttributionResult,
    rules: Rules,
    partner: dict[str, tuple[str, float]],
    cluster_of: dict[str, list[str]],
    offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]] | None = None,
    facts: _ModelFacts | None = None,
    efficiency: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Recommendation]:
    """Per-skill recommendations for one population (one model, or all pooled): the first skill
    rule (`policy.RULES`) that holds decides each."""
    pop = Population.from_runs(runs, attribution, rules, partner, cluster_of, offered)
    pop.efficiency = efficiency or {}
    # the merge rule asks each near-duplicate pair for its difference: form them all at once
    attribution.prefetch_differences([(partner[s][0], s) for s in pop.rows if s in partner])
    if facts is not None:
        pop.selection = facts.selection
        pop.both = facts.both["both_ways"] if facts.both is not None and works_both_ways(facts.both) else None
    by_bench = _benchmark_rows(runs) if len(runs.benchmarks) > 1 else {}
    split = {}
    for sid in pop.rows:
        rows = {b: r[sid] for b, r in by_bench.items() if sid in r and r[sid].n_retrieved}
        if len(rows) > 1:
            split[sid] = BenchmarksContext(sid, pop.model, rows, rules)
    p_split = {sid: p for sid, c in split.items() if (p := c.p_split()) is not None}
    from skillaudit.stats import bh_qvalues

    q_split = dict(zip(p_split, bh_qvalues(np.array(list(p_split.values()), dtype=float)).tolist(), strict=True))
    recs: dict[str, Recommendation] = {}
    for sid, a in pop.rows.items():
        rule, reason, ev = decide_skill(SkillContext(a, pop))
        if sid in q_split and rule.action != "unused":
            bctx = replace(split[sid], q_split=q_split[sid])
            brule = first_rule("benchmarks", bctx)
            if brule is not None:  # B001 replaces the pooled decision of this model
                ev = {**ev, **(brule.extra(bctx) if brule.extra else {})}
                rule, reason = brule, brule.reason(bctx)
        recs[sid] = Recommendation(skill_id=sid, action=rule.action, reason=reason, evidence=ev,
                                   models=(pop.model,), rule=rule.id)
    return recs


def _benchmark_rows(runs: PairedRuns) -> dict[str, dict[str, SkillAttribution]]:
    """Each benchmark's exposure counts per skill (`attribute` on its pairs alone, no regression)."""
    from skillaudit.analysis.attribution import attribute

    out: dict[str, dict[str, SkillAttribution]] = {}
    for b in runs.benchmarks:
        sub = runs.select(benchmark=b)
        if sub.n_pairs:
            out[b] = {a.skill_id: a for a in attribute(sub, regression=False, n_boot=0).skills}
    return out


def _combine(per_model: dict[str, dict[str, Recommendation]],
             rows: dict[str, dict[str, SkillAttribution]]) -> list[Recommendation]:
    """One entry per skill and action across models; a skill reliably harmful on one model and
    reliably helpful on another becomes one `rewrite` (rule M001: gate it per model) for both.

    An entry's `rule` is that of the first of its models (in the runs' order) and its evidence
    `per_model[m]` holds each model's own action, rule and reason; M001 entries carry "M001"."""
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
        per = {m: {"action": r.action, "rule": r.rule, "reason": r.reason} for m, r in have.items()}
        ctx = ModelsContext(sid, tuple(hurt), tuple(helped), rows)
        rule = first_rule("models", ctx)
        if rule is not None:  # M001 replaces the per-model actions of the models it names
            first = used[hurt[0]]
            ev = {**first.evidence, "sign_differs": True, "per_model": per}
            out.append(Recommendation(skill_id=sid, action=rule.action, reason=rule.reason(ctx), evidence=ev,
                                      models=tuple(sorted(hurt + helped, key=models.index)), rule=rule.id))
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
                                      models=tuple(ms), rule=first.rule))
    return out


def recommend(
    runs: PairedRuns,
    attribution: AttributionResult | ModelAttributions,
    near_duplicates: Sequence[tuple[str, str, float]] | None = None,
    harmful_clusters: Sequence[Sequence[str]] | None = None,
    rules: Rules | None = None,
    offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]] | None = None,
    arms: Any = None,
    efficiency: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> PruneResult:
    """Library-level and per-skill recommendations plus the projected RAE/OAE without the prune set.

    `runs` must be the pairs `attribution` was computed from (`attribute` for one population, or
    `attribute_models` for per-model verdicts). `near_duplicates` are (a, b, similarity) from
    `skillaudit.analysis.clusters.find_near_duplicates`; `harmful_clusters` are groups of skill ids that
    concentrate harm (mentioned in the evidence and the reason). `offered` (`Inputs.offered`)
    tells which skills runs that did not log their use were offered: only those, never-used
    elsewhere, are "use not logged" instead of "unused". `arms` (`ArmRecords` of these runs):
    where retrieval follows failure on a model without control arms (`CONTROL_ARMS`) among them,
    its prunes, rewrites and library actions become "verify with control arms" (S100, L000).
    `efficiency` (`analysis.efficiency.skill_efficiency`: model -> skill -> cost ratios) lets S107
    name a skill that costs much more with and without it, for no accuracy effect.
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
    facts: dict[str, _ModelFacts] = {}
    controlled = controlled_models(runs, arms)
    for res in ma.results:
        m = res.model or "*"
        sub = runs if m == "*" or m not in runs.models else runs.select(model=m)
        facts[m] = _model_facts(sub, m, controlled)
        per_model[m] = _recommend_one(sub, res, rules, partner, cluster_of, offered, facts[m],
                                      (efficiency or {}).get(m))
        rows[m] = {a.skill_id: a for a in res.skills}
    skill_recs = _combine(per_model, rows)
    net_of = {sid: min(a.net for r in rows.values() if (a := r.get(sid)) is not None)
              for sid in {r.skill_id for r in skill_recs}}
    skill_recs.sort(key=lambda r: (_ORDER[r.action], net_of.get(r.skill_id, 0), r.skill_id or "",
                                   r.models))
    effects = tuple(_with_both_ways(e, runs, facts) for e in ma.library)
    recs = _library_recommendations(effects) + skill_recs

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
                       library=effects, projected_per_model=tuple(by_model))


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
