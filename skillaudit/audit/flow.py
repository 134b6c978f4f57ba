"""The audit as one downward flow: the inputs read once, each analysis a function of them and of
the results it needs, one `Audit` value collecting the results.

`STEPS` names the order. `prepare(inputs, settings)` selects the pairs and the library judged;
`run_audit(prepared, until=STEP)` runs the flow up to STEP (the steps in `settings.skip` left out)
and returns the `Audit`; `audit` runs it to the end (the
`skillaudit.audit/v1` document), `metrics`, `rank`, `prune`, `check` and `verify` stop earlier and
render the results they need. No step reads a log: everything comes from `Inputs`
(`skillaudit.runs.inputs.load_inputs`), read by the caller.

Library code: raises `skillaudit.errors` exceptions, never prints; progress goes through the
optional `progress(message)` callback.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillaudit.audit.document import (
    MAX_GRAPH_EDGES,
    MAX_INTERFERENCE,
    MAX_NEAR_DUPLICATES,
    AuditResult,
    _compact_recommendations,
    _map_coordinates,
    describe_inputs,
)
from skillaudit.decide.headline import VERDICT_ALPHA, headline
from skillaudit.errors import InputError
from skillaudit.util.files import jsonable

#: default bootstrap resamples of the regression attribution (its CIs); the metrics use --bootstrap.
#: Each resample solves a skills x skills system, so libraries of thousands of skills want fewer.
MAX_REGRESSION_BOOT = 2000

#: the order of the flow; each step may read the results of the steps before it
STEPS = ("metrics", "efficiency", "attribution", "cost", "clusters", "recommendations", "graph", "bundles",
         "verify", "document")

Progress = Callable[[str], None]


def _noop(_: str) -> None:
    return None


@dataclass(frozen=True)
class Settings:
    """Every parameter of the flow (the estimators' own: resamples, seed, scheme, thresholds).

    `regression_boot` is used as given (`audit` caps it at `n_boot`); `regression=False` fits no
    per-skill regression. `model` / `benchmark` select pairs. `judge_offered`: without a library,
    the skills the runs say were offered stand for it in the per-skill verdicts. `embedder` "none"
    computes no clusters. `skip`: steps left out (e.g. `rank` computes no paired metrics). `prune_sets` ({model: skills},
default the records' own) and `verify_boot` (default min(n_boot, 2000)) are the verify step's.
    """

    min_cond: int = 10
    n_boot: int = 20_000
    regression_boot: int = MAX_REGRESSION_BOOT
    regression: bool = True
    seed: int = 0
    mid_p: bool = False
    attribution: str = "equal"
    pool_models: bool = False
    model: str | None = None
    benchmark: str | None = None
    judge_offered: bool = True
    embedder: str = "minilm"
    embed_model: str | None = None
    cache_dir: str | None = None
    near_duplicate_threshold: float | None = None
    distance: float | None = None
    prune_sets: Mapping[str, tuple[str, ...]] | None = None
    verify_boot: int | None = None
    jobs: int = 1
    strict: bool = False
    demo: bool = False
    skip: tuple[str, ...] = ()
    #: sequential Monte Carlo: permutation tests stop once clear of the level the verdict reads
    mc_stop: bool = True

    @classmethod
    def for_audit(cls, *, n_boot: int = 20_000, regression_boot: int = MAX_REGRESSION_BOOT, **rest: Any) -> Settings:
        """The whole audit's settings: the regression's resamples capped at `n_boot` (none: no
        regression), and no per-command cost table (the document has its own)."""
        reg_boot = min(n_boot, regression_boot)
        return cls(n_boot=n_boot, regression_boot=reg_boot, regression=reg_boot > 0, skip=("cost",), **rest)


@dataclass(frozen=True)
class Graph:
    """The co-retrieval graph step: its `audit.json` section, the bounded graph to export, notes."""

    section: dict[str, Any]
    export: Any
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class Audit:
    """The audit as one value: the inputs, the settings, the pairs and library judged, and the
    result of every step that ran (None where it did not).

    `runs`: the selected pairs; `library`: the library judged (given, or the offered skills standing
    for it: `library_source`); `arms`: the arm records joined to `runs`; `edited`: {skill: edited
    since the runs?}; `notes`: what a reader of the report must know, in the order the steps said it.
    """

    inputs: Any
    settings: Settings
    runs: Any
    library: Any = None
    library_source: str | None = None
    arms: Any = None
    edited: Mapping[str, bool] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    metrics: Any = None
    efficiency: dict[str, Any] | None = None
    attribution: Any = None
    cost: Any = None
    clusters: Any = None
    recommendations: Any = None
    triggers: list[dict[str, Any]] | None = None  # the trigger view (`analysis.triggers.trigger_view`)
    graph: Graph | None = None
    bundles: dict[str, Any] | None = None
    verify: Any = None
    document: AuditResult | None = None
    done: tuple[str, ...] = ()

    def with_(self, step: str, value: Any = None, notes: Sequence[str] = ()) -> Audit:
        """This audit with `step`'s result (the field of the step's name) set and `notes` added."""
        return dataclasses.replace(self, **{step: value}, notes=(*self.notes, *notes), done=(*self.done, step))


# ---------------------------------------------------------------- preparing: what the steps judge
def prepare(inputs: Any, settings: Settings) -> Audit:
    """The `Audit` before any step: the pairs selected, their arm records, the library judged and
    which of its skills were edited since the runs."""
    runs = inputs.runs
    if settings.model is not None or settings.benchmark is not None:
        runs = runs.select(settings.model, settings.benchmark)
    if runs.n_pairs == 0:
        raise InputError("no pairs left after --model/--benchmark" if runs is not inputs.runs else
                         f"{', '.join(map(str, inputs.paths))}: no paired records (need enabled and disabled runs)")
    arms = inputs.arms(runs) if runs.n_arm_records and inputs.arm_lines is not None else None
    library, source, notes = inputs.library, ("given" if inputs.library is not None else None), []
    if library is None and settings.judge_offered and not runs.use_unlogged.all():
        from skillaudit.library import offered_library

        library = offered_library(inputs.offered, inputs.offered_unknown)
        if library is not None:  # offered-only runs judge no skill (the bundles do)
            source = "offered"
            notes.append(f"No skill library was given (--skills): {library.source} ({len(library)}) stand for "
                         "it in the per-skill verdicts (their texts are not in the runs: no clusters or "
                         "near-duplicates).")
    edited = inputs.edited if inputs.library is not None else {}
    return Audit(inputs=inputs, settings=settings, runs=runs, library=library, library_source=source,
                 arms=arms, edited=edited, notes=tuple(notes))


# ---------------------------------------------------------------- the steps
def metrics_step(a: Audit, say: Progress) -> Audit:
    """Paired metrics per model and benchmark (`analysis.metrics.compute_metrics`)."""
    from skillaudit.analysis.methods import interval_summary
    from skillaudit.analysis.metrics import compute_metrics

    s, runs = a.settings, a.runs
    say(f"paired metrics for {runs.n_pairs:,} pairs ({len(runs.models)} model(s), "
        f"{len(runs.benchmarks)} benchmark(s)): {interval_summary(s.n_boot)}")
    return a.with_("metrics", compute_metrics(runs, min_cond=s.min_cond, n_boot=s.n_boot, seed=s.seed,
                                              mid_p=s.mid_p, arms=a.arms))


def efficiency_step(a: Audit, say: Progress) -> Audit:
    """Paired token and time differences per model (`analysis.efficiency`), where the inputs kept
    the cost fields (`load_inputs(cost=True)`); None otherwise."""
    from skillaudit.analysis.efficiency import efficiency_doc

    return a.with_("efficiency", efficiency_doc(a.inputs.cost_table))


def attribution_step(a: Audit, say: Progress) -> Audit:
    """Per-skill attribution and regression per model (`analysis.attribution.attribute_models`),
    each skill marked edited or not."""
    from skillaudit.analysis.attribution import attribute_models

    s, notes = a.settings, []
    if s.regression:
        say(f"per-skill attribution ({s.attribution}) and regression ({s.regression_boot:,} resamples)")
    else:  # no CIs: the regression cannot confirm anything, so exposure counts decide alone
        say(f"per-skill attribution ({s.attribution}), no regression (no bootstrap resamples)")
        notes.append("The per-skill regression was off (no bootstrap resamples): there is no library-level "
                     "verdict and no skill is judged harmful; exposure counts alone are associations.")
    attr = attribute_models(a.runs, library=a.library, pooled=s.pool_models, scheme=s.attribution,
                            regression=s.regression, n_boot=s.regression_boot, seed=s.seed, mid_p=s.mid_p,
                            min_cond=s.min_cond, arms=a.arms, jobs=s.jobs, mc_stop=s.mc_stop)
    if a.edited:
        from skillaudit.runs.provenance import mark_edited

        attr = mark_edited(attr, dict(a.edited))
        changed = sorted(k for k, e in a.edited.items() if e)
        if changed:
            shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
            notes.append(f"{len(changed)} skill(s) edited since these runs ({shown}): the library's text "
                         "differs from the one the runs retrieved, so their verdicts describe the old text.")
    return a.with_("attribution", attr, notes)


def cost_step(a: Audit, say: Progress) -> Audit:
    """Tokens per skill from usage deltas (`analysis.cost`), where the inputs kept the cost fields."""
    from skillaudit.analysis.cost import inputs_cost

    return a.with_("cost", inputs_cost(a.inputs, a.settings.model, a.settings.benchmark))


def clusters_step(a: Audit, say: Progress) -> Audit:
    """Embed and cluster the library's skill texts (`analysis.clusters.cluster_library`); none
    without skill texts or with embedder "none"."""
    s = a.settings
    if a.library_source != "given" or not len(a.library) or s.embedder == "none":
        notes = (["No skill library was given (--skills): no clusters, near-duplicates or skill texts."]
                 if a.library is None else [])
        return a.with_("clusters", None, notes)
    from skillaudit.analysis.clusters import cluster_library

    say(f"embedding {len(a.library)} skills ({s.embedder}) and clustering")
    rows = {r.skill_id: r for r in _attribution(a).pooled_rows()}  # clusters look at all pairs
    rep = cluster_library(a.library, rows, a.runs, embedder=s.embedder, model_path=s.embed_model,
                          cache_dir=s.cache_dir, threshold=s.near_duplicate_threshold,
                          distance_threshold=s.distance)
    notes = [f"The MiniLM embedder could not be loaded ({rep.fallback_reason})."] if rep.fallback_reason else []
    return a.with_("clusters", rep, notes)


def recommendations_step(a: Audit, say: Progress) -> Audit:
    """What to do per skill and for the library, per model (`decide.recommend.recommend`)."""
    from skillaudit.decide.recommend import recommend

    say("recommendations and the projected effect of pruning")
    rep = a.clusters
    from skillaudit.analysis.efficiency import skill_efficiency

    out = recommend(a.runs, _attribution(a), near_duplicates=list(rep.near_duplicates) if rep is not None else None,
                    harmful_clusters=rep.harmful_members() if rep is not None else None,
                    offered=a.inputs.offered, arms=a.arms,
                    efficiency=skill_efficiency(a.inputs.cost_table))
    from skillaudit.analysis.triggers import trigger_view, with_trigger_targets

    # where each skill fired and, with the task files' expected_skills, whether the right one was chosen
    view = trigger_view(a.runs, getattr(a.inputs, "expected", {}) or {})
    return dataclasses.replace(a, triggers=view).with_("recommendations", with_trigger_targets(out, view))


def graph_step(a: Audit, say: Progress) -> Audit:
    """The co-retrieval graph (`analysis.graph`), from sparse co-retrieval counts: the whole graph
    (hundreds of thousands of edges for a large library) is never built. The export keeps the
    backbone the communities were found on, the interfering pairs and the near-duplicate pairs
    audit.json keeps."""
    from skillaudit.analysis.graph import (
        co_retrieval_counts,
        communities_of,
        community_summary,
        interference,
        merge_groups,
        skill_graph,
        top_co_retrieved,
    )

    say("co-retrieval graph")
    runs, rep = a.runs, a.clusters
    rows = {r.skill_id: r for r in _attribution(a).pooled_rows()}
    near_dups = list(rep.near_duplicates) if rep is not None else []
    counts = co_retrieval_counts(runs)
    inter = interference(runs, counts=counts)
    g = skill_graph(runs, rows, a.library if a.library_source == "given" else None,
                    near_duplicates=near_dups[:MAX_NEAR_DUPLICATES],
                    cluster_of=rep.cluster_of() if rep is not None else None,
                    harmful_clusters=[c.id for c in rep.clusters if c.harmful] if rep is not None else [],
                    seed=a.settings.seed, interfering=inter, max_edges=MAX_GRAPH_EDGES, counts=counts)
    comms = community_summary(g, communities_of(g), counts)  # skill_graph already ran Louvain
    exported = sum(1 for *_, w in g.edges(data="weight", default=0) if w > 0)
    section = {
        "nodes": len(set(g) | {n for x, y, _ in near_dups for n in (x, y)}),
        "co_retrieval_edges": counts.n_edges,
        "near_duplicate_edges": len({frozenset((x, y)) for x, y, _ in near_dups}),
        "top_co_retrieved": top_co_retrieved(counts, 20),
        "communities": comms,
        "interference": [x.to_dict() for x in inter[:MAX_INTERFERENCE]],
        "interference_total": len(inter),
        "merge_groups": merge_groups(near_dups),
        "export": "skill_graph.graphml",
        "export_co_retrieval_edges": exported,
    }
    notes = []
    if exported < counts.n_edges:
        notes.append(f"The co-retrieval graph has {counts.n_edges:,} edges: skill_graph.graphml keeps its "
                     f"backbone ({exported:,} edges: each skill's {g.graph['backbone_per_skill']} "
                     "strongest co-retrievals, the graph the communities were found on, plus the "
                     "interfering pairs); `skillaudit graph` exports every edge.")
    if len(inter) > MAX_INTERFERENCE:
        notes.append(f"{len(inter):,} skill pairs do worse together: audit.json keeps the "
                     f"{MAX_INTERFERENCE:,} with the strongest evidence (`skillaudit clusters --json` "
                     "lists them all).")
    return a.with_("graph", Graph(section, g, tuple(notes)))


CANNOT_SAY = (
    "Without skill-use logs these runs cannot say: the effect where skills are actually used (RAE) "
    "or on runs that ignored them (Δskip), the retrieval funnel (Figure 1's invoked / retrieved / "
    "adhered stages), which skill of a bundle helped or hurt, or whether an effect is library-wide "
    "or in specific skills. A run offered skills may never open them, so 'offered' is not "
    "'used': the access effect mixes runs that read the skills with runs that did not. Log the "
    "agent's trajectory (Harbor "
    "`agent/claude-code.txt`, `skillaudit import harbor`) to get them.")


def _offered_only_pairs(runs: Any) -> np.ndarray:
    """Bool per pair: its model logged no skill use on any pair (offered only, as the SkillsBench
    registry). A model that logged use on some runs is judged on those (`partial_use_text`)."""
    unlogged = runs.use_unlogged
    if not unlogged.any():
        return unlogged
    logged_models = np.unique(runs.model[~unlogged])
    return unlogged & ~np.isin(runs.model, logged_models)


def bundles_section(runs: Any, top: int = 8) -> dict[str, Any]:
    """The per task-bundle view (skillaudit.analysis.bundles) for the report: the most harmful bundles with
    the agents they hurt, and what cannot be said without skill-use logs."""
    from skillaudit.analysis.bundles import BUNDLE_METHOD, bundle_effects

    res = bundle_effects(runs)
    worst = res.harmful(top)
    n_sig = sum(1 for b in res.bundles if b.q <= VERDICT_ALPHA)
    intro = (f"Each task ships its own skills, so the per-skill view is per task's bundle across "
             f"{res.n_agents} agents: an agent is a rescue of a bundle when it passed more trials with "
             f"the skills than without on that task, a harm when fewer. Each bundle's test is {BUNDLE_METHOD['test']}, "
             f"and q adjusts over all {len(res.bundles)} bundles ({BUNDLE_METHOD['q'].split(' over')[0]}): "
             f"{n_sig} bundle(s) at q ≤ {VERDICT_ALPHA}. One agent's cell is at most "
             "3 trials against 3 and decides nothing alone; these are associations across agents.")
    rows = []
    for b in worst:
        hurt = ", ".join(f"{c.model} {c.pass_on}/{c.trials} vs {c.pass_off}/{c.trials}" for c in b.hurt[:6])
        more = f" and {len(b.hurt) - 6} more" if len(b.hurt) > 6 else ""
        rows.append({"task": b.task, "benchmark": b.benchmark, "text": b.sentence(),
                     "hurt_text": f"hurt {hurt}{more} (passes with vs without)",
                     "rescues": b.rescues, "harms": b.harms, "effect": b.effect, "p": b.p, "q": b.q})
    return {"schema": "skillaudit.bundles/v1", "intro": intro, "worst": rows, "method": dict(BUNDLE_METHOD),
            "n_bundles": len(res.bundles), "n_agents": res.n_agents, "n_significant": n_sig,
            "cannot_say": CANNOT_SAY,
            "all": [{"task": b.task, "benchmark": b.benchmark, "rescues": b.rescues, "harms": b.harms,
                     "agents": b.agents, "effect": b.effect, "p": b.p, "q": b.q} for b in res.bundles]}


def bundles_step(a: Audit, say: Progress) -> Audit:
    """Per task-bundle effects across agents, for the models that logged no skill use."""
    offered_only = _offered_only_pairs(a.runs)
    if not offered_only.any():
        return a.with_("bundles", None)
    say("per task-bundle effects across agents (skill use not logged)")
    return a.with_("bundles", bundles_section(a.runs.subset(offered_only)))


def verify_step(a: Audit, say: Progress) -> Audit:
    """Measured vs projected effect of removing the prune set (`analysis.verify`), where the logs
    hold a `pruned` arm (`verify` itself requires one)."""
    if (a.arms is None or "pruned" not in a.arms.names) and a.settings.prune_sets is None:
        return a.with_("verify", None)
    from skillaudit.analysis.verify import verify

    say("measured vs projected effect of the pruned re-runs")
    s = a.settings
    return a.with_("verify", verify(a.runs, a.arms, dict(s.prune_sets) if s.prune_sets is not None else None,
                                    n_boot=min(s.n_boot, 2000) if s.verify_boot is None else s.verify_boot,
                                    seed=s.seed))


def document_step(a: Audit, say: Progress) -> Audit:
    """The `skillaudit.audit/v1` document from the results (`audit.json`)."""
    from skillaudit.analysis.cost import inputs_cost_by_model
    from skillaudit.analysis.integrity import arm_integrity
    from skillaudit.analysis.reach import skill_reach

    s, runs, inputs, notes = a.settings, a.runs, a.inputs, list(a.notes)
    clusters_doc = None
    if a.clusters is not None:
        rep = a.clusters
        near = list(rep.near_duplicates)
        clusters_doc = {"schema": "skillaudit.clusters/v1", **rep.to_dict(), "map": _map_coordinates(rep.embeddings)}
        clusters_doc["near_duplicates_total"] = len(near)
        if len(near) > MAX_NEAR_DUPLICATES:
            clusters_doc["near_duplicates"] = clusters_doc["near_duplicates"][:MAX_NEAR_DUPLICATES]
            notes.append(f"{len(near):,} near-duplicate pairs: audit.json and skill_graph.graphml keep "
                         f"the {MAX_NEAR_DUPLICATES:,} most similar (`skillaudit clusters --json` lists "
                         "them all).")
    graph_doc = a.graph.section if a.graph is not None else None
    if a.graph is not None:
        notes.extend(a.graph.notes)
        if clusters_doc is not None:
            for k in ("communities", "interference", "interference_total"):
                clusters_doc[k] = graph_doc[k]
    settings = {
        "embedder": s.embedder,
        "embedder_used": a.clusters.embedder if a.clusters is not None else None,
        "near_duplicate_threshold": s.near_duplicate_threshold,
        "bootstrap": s.n_boot, "regression_bootstrap": s.regression_boot, "seed": s.seed,
        "min_cond": s.min_cond, "attribution": s.attribution, "strict": s.strict,
        "mc_stop": "on" if s.mc_stop else "off",
        "verdict_alpha": VERDICT_ALPHA,
    }
    given = a.library if a.library_source == "given" else None
    described = describe_inputs(inputs.paths, given.source if given is not None else None, given, settings,
                                demo=s.demo, digests=inputs.digests)
    if runs.n_unpaired:
        notes.append(f"{runs.n_unpaired} record(s) without their other condition were left out.")
    if runs.n_error_pairs:
        notes.append(f"{runs.n_error_pairs} pair(s) with a harness error record were left out.")
    n_tasks = int(np.unique(runs.unit_ids()).size) if runs.n_pairs else 0
    described["pairs"] = {
        "n_pairs": runs.n_pairs, "n_tasks": n_tasks,
        "size_text": f"{runs.n_pairs:,} paired tasks" if n_tasks == runs.n_pairs
        else f"{n_tasks:,} tasks ({runs.n_pairs:,} pairs)",
        "models": list(runs.models), "benchmarks": list(runs.benchmarks),
        "unpaired_records": runs.n_unpaired, "error_pairs": runs.n_error_pairs,
        "skills_retrieved": len(runs.skills)}
    attr = _attribution(a)
    skills_doc = attr.to_dict()
    skills_doc["descriptions"] = {k.id: k.description for k in given} if given is not None else {}
    cost_doc = inputs_cost_by_model(inputs) if given is not None else None
    if cost_doc is not None:
        skills_doc["cost"] = cost_doc
    metrics_doc = _need(a, "metrics").to_dict()
    prune_doc = _compact_recommendations(_need(a, "recommendations").to_dict())
    library_doc = [] if runs.use_unlogged.all() else [e.to_dict() for e in attr.library]
    verify_doc = a.verify.to_dict() if a.verify is not None else None
    reach_doc = [r.to_dict() for r in skill_reach(runs, inputs.offered, inputs.offered_unknown)]
    integrity_doc = arm_integrity(inputs).to_dict()
    result = AuditResult(
        verify=verify_doc,
        headline={**headline(metrics_doc, prune_doc, library_doc, verify_doc, reach=reach_doc,
                             integrity=integrity_doc),
                  **({"bundles": a.bundles} if a.bundles else {})},
        library=library_doc, metrics=metrics_doc, efficiency=a.efficiency, skills=skills_doc, clusters=clusters_doc,
        recommendations=prune_doc, graph=graph_doc, inputs=described, notes=notes, triggers=a.triggers,
    )
    # one normalisation pass: what is in memory is exactly what audit.json will hold
    plain = json.loads(json.dumps(jsonable(result.to_dict()), allow_nan=False))
    return a.with_("document", AuditResult.from_dict(plain))


def _need(a: Audit, step: str) -> Any:
    value = getattr(a, step)
    if value is None:
        raise ValueError(f"the audit flow did not run its {step!r} step")
    return value


def _attribution(a: Audit) -> Any:
    return _need(a, "attribution")


_STEP: dict[str, Callable[[Audit, Progress], Audit]] = {
    "metrics": metrics_step, "efficiency": efficiency_step, "attribution": attribution_step, "cost": cost_step,
    "clusters": clusters_step, "recommendations": recommendations_step, "graph": graph_step, "bundles": bundles_step,
    "verify": verify_step, "document": document_step,
}
assert tuple(_STEP) == STEPS


def run_audit(start: Audit, *, until: str = "document", progress: Progress | None = None) -> Audit:
    """The flow from `start` (`prepare(inputs, settings)`) up to and including the step `until`
    (`STEPS`), the steps in `settings.skip` and those already done left out."""
    if until not in STEPS:
        raise ValueError(f"until={until!r}: expected one of {', '.join(STEPS)}")
    say = progress or _noop
    a = start
    for name in STEPS:
        if name not in a.settings.skip and name not in a.done:
            a = _STEP[name](a, say)
        if name == until:
            break
    return a


def build_audit(
    run_paths: Sequence[str],
    skills_path: str | None = None,
    *,
    embedder: str = "minilm",
    embed_model: str | None = None,
    cache_dir: str | None = None,
    near_duplicate_threshold: float | None = None,
    n_boot: int = 20_000,
    regression_boot: int = MAX_REGRESSION_BOOT,
    seed: int = 0,
    min_cond: int = 10,
    attribution: str = "equal",
    strict: bool = False,
    progress: Progress | None = None,
    demo: bool = False,
    jobs: int = 1,
    inputs: Any = None,
) -> Audit:
    """The whole audit of `run_paths` against the library at `skills_path` (InputError on unusable
    input): the logs read once (unless `inputs`, `skillaudit.runs.inputs.load_inputs` with
    cost, digests and integrity, is given), then `run_audit` to the end."""
    say = progress or _noop
    if inputs is None:
        from skillaudit.runs.inputs import load_inputs

        library = None
        if skills_path is not None:
            from skillaudit.library import load_library

            say(f"reading the skill library {skills_path}")
            library = load_library(skills_path)
        say(f"reading {len(run_paths)} run log(s)")
        inputs = load_inputs(run_paths, library=library, strict=strict, cost=True, digests=True, integrity=True)
    settings = Settings.for_audit(embedder=embedder, embed_model=embed_model, cache_dir=cache_dir,
                                  near_duplicate_threshold=near_duplicate_threshold, n_boot=n_boot,
                                  regression_boot=regression_boot, seed=seed, min_cond=min_cond,
                                  attribution=attribution, strict=strict, demo=demo, jobs=jobs)
    return run_audit(prepare(inputs, settings), progress=progress)
