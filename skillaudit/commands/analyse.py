"""Commands that analyse paired runs: `metrics` (effects per model and benchmark), `rank` (per-skill
associations), `cost`, `prune` (what to do, and why), `clusters` and `graph` (families of skills)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from skillaudit.analysis.methods import METRICS_BOOT_HELP, threshold_help
from skillaudit.commands._shared import (
    CommandError,
    attribution_option,
    bootstrap_option,
    echo,
    emit_json,
    filter_options,
    jobs_option,
    json_option,
    load_inputs_for_cli,
    load_library_for_cli,
    mc_stop_option,
    mid_p_option,
    min_cond_option,
    pool_models_option,
    prepare_for_cli,
    reports_errors,
    runs_argument,
    seed_option,
    skills_option,
    strict_option,
    warn,
)
from skillaudit.errors import InputError


# ---------------------------------------------------------------- metrics
@click.command()
@runs_argument()
@skills_option()
@min_cond_option()
@bootstrap_option(METRICS_BOOT_HELP)
@seed_option()
@mid_p_option
@click.option("--by-top-k", is_flag=True,
              help="Split by retrieval depth (meta.top_k, one depth per file): one result per depth.")
@jobs_option
@strict_option
@json_option
@reports_errors
def metrics(runs: tuple[str, ...], skills_path: str | None, min_cond: int, n_boot: int, seed: int,
            mid_p: bool, by_top_k: bool, jobs: int, strict: bool, as_json: bool) -> None:
    """Paired effects per model and benchmark (the help text is `_METRICS_HELP`, from the estimators)."""
    from skillaudit.audit import Settings, run_audit

    lib = load_library_for_cli(skills_path)
    settings = Settings(min_cond=min_cond, n_boot=n_boot, seed=seed, mid_p=mid_p, judge_offered=False)

    def flow(files: tuple[str, ...]) -> Any:  # the audit flow stopped after its metrics and efficiency
        inputs = load_inputs_for_cli(files, strict, lib, jobs, cost=True)
        return run_audit(prepare_for_cli(inputs, settings), until="efficiency")

    from skillaudit.report.render import (  # rich: only for the table
        arms_table,
        efficiency_lines,
        judged_lines,
        metrics_table,
    )

    if by_top_k:
        from skillaudit.analysis.metrics import top_k_of_files

        docs = []
        for k, files in sorted(top_k_of_files(runs).items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            audit = flow(tuple(files))
            if as_json:
                docs.append({"top_k": k, "inputs": files, **audit.metrics.to_dict(),
                             **({"efficiency": audit.efficiency} if audit.efficiency else {})})
                continue
            click.echo(f"top_k = {k if k is not None else 'not logged'} ({', '.join(files)})")
            metrics_table(audit)
        if as_json:
            emit_json({"schema": "skillaudit.metrics-by-top-k/v1", "by_top_k": docs})
        return
    audit = flow(runs)
    if as_json:
        doc = audit.metrics.to_dict()
        if audit.efficiency:
            doc["efficiency"] = audit.efficiency
        doc["inputs"] = list(runs)
        emit_json(doc)
    else:
        metrics_table(audit)
        if audit.arms is not None:
            arms_table(audit)
        for line in [*judged_lines(audit), *efficiency_lines(audit)]:
            echo(line)


# ---------------------------------------------------------------- clusters / graph
def _embedding_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
                        help="Embedding cache folder (default: $SKILLAUDIT_CACHE_DIR or the user cache dir).")(func)
    func = click.option("--embed-model", type=click.Path(), default=None,
                        help="A sentence-transformers model folder to use instead of the bundled all-MiniLM-L6-v2.")(func)
    func = click.option("--embedder", type=click.Choice(["minilm", "tfidf"]), default="minilm", show_default=True,
                        help="minilm (sentence-transformers, offline) or tfidf (TF-IDF + SVD, no model).")(func)
    func = click.option("--threshold", type=click.FloatRange(-1.0, 1.0), default=None,
                        help=threshold_help())(func)
    return func


def _clusters_inputs(runs: tuple[str, ...], skills_path: str, strict: bool, model: str | None,
                     benchmark: str | None, attribution: str, embedder: str, embed_model: str | None,
                     cache_dir: str | None, threshold: float | None, distance: float | None = None,
                     jobs: int = 0) -> Any:
    """Load runs and library, attribute, cluster; warn about a fallback to tfidf."""
    from skillaudit.analysis.attribution import attribute
    from skillaudit.analysis.clusters import cluster_library

    lib = load_library_for_cli(skills_path)
    paired = load_inputs_for_cli(runs, strict, lib, jobs, adherence=False, arms=False,
                                 provenance=False).runs.select(model, benchmark)
    if paired.n_pairs == 0:
        raise CommandError("no pairs left after --model/--benchmark")
    rows = {r.skill_id: r for r in attribute(paired, library=lib, scheme=attribution, regression=False).skills}
    report = cluster_library(lib, rows, paired, embedder=embedder, model_path=embed_model,
                             cache_dir=cache_dir, threshold=threshold, distance_threshold=distance)
    if report.fallback_reason:
        warn(f"the MiniLM model could not be loaded: {report.fallback_reason}")
    return lib, paired, rows, report


@click.command()
@runs_argument()
@skills_option(required=True)
@_embedding_options
@click.option("--distance", type=click.FloatRange(0.0, 2.0), default=None,
              help="Clustering cosine distance cut (default: 0.45 minilm, 0.75 tfidf).")
@attribution_option
@seed_option("Seed of the Louvain communities.")
@filter_options
@jobs_option
@strict_option
@json_option
@reports_errors
def clusters(runs: tuple[str, ...], skills_path: str, threshold: float | None, embedder: str,
             embed_model: str | None, cache_dir: str | None, distance: float | None, attribution: str,
             seed: int, model: str | None, benchmark: str | None, jobs: int, strict: bool, as_json: bool) -> None:
    """Families of skills by embedding, ranked by the harm they concentrate (help: `_clusters_help`)."""
    from skillaudit.analysis.graph import (
        co_retrieval_counts,
        co_retrieval_graph,
        community_summary,
        count_communities,
        interference,
    )

    _, paired, rows, report = _clusters_inputs(runs, skills_path, strict, model, benchmark, attribution,
                                               embedder, embed_model, cache_dir, threshold, distance, jobs)
    counts = co_retrieval_counts(paired)  # one set of sparse products for the graph, communities, interference
    g = co_retrieval_graph(paired, rows, counts=counts)
    comms = community_summary(g, count_communities(counts, seed=seed))
    inter = [x.to_dict() for x in interference(paired, counts=counts)]
    if as_json:
        doc = {"schema": "skillaudit.clusters/v1", **report.to_dict(), "communities": comms,
               "interference": inter, "inputs": list(runs)}
        emit_json(doc)
        return
    echo(f"embedder: {report.embedder} ({report.model_id}); "
               f"{report.n_encoded} skill(s) encoded, {report.n_cached} from cache")
    multi = [c for c in report.clusters if len(c.skills) > 1 or c.harmful]
    echo(f"\nclusters, most harmful first ({len(report.clusters)} in all; "
               f"{len(report.clusters) - len(multi)} single-skill clusters not shown):")
    for c in multi:
        flag = "HARMFUL" if c.harmful else "       "
        echo(f"  {flag} #{c.id:<3} net {c.net:+4d} over {c.n_pairs:4d} pairs  share {c.share:+7.2f}  "
                   f"[{c.label}]")
        echo(f"           {', '.join(c.skills)}")
        echo(f"           {c.reason}")
    echo(f"\nnear-duplicates (similarity >= {report.near_duplicate_threshold:.2f}):")
    for a, b, s in report.near_duplicates or [("(none)", "", float("nan"))]:
        echo(f"  {s:.3f}  {a} ~ {b}" if b else f"  {a}")
    echo("\nco-retrieval communities (Louvain):")
    for cm in comms or [{"id": "-", "skills": ["(none)"], "net": 0, "weight": 0}]:
        echo(f"  {cm['id']}: net {cm['net']:+d}, {cm['weight']} co-retrievals: {', '.join(cm['skills'])}")
    echo("\ninterference (worse together than either without the other):")
    if not inter:
        echo("  (none)")
    for x in inter:
        a, b = x["skills"]
        echo(f"  {a} + {b}: net {x['net_joint']:+d}/{x['n_joint']} together, "
                   f"{x['net_a_only']:+d}/{x['n_a_only']} {a} alone, {x['net_b_only']:+d}/{x['n_b_only']} {b} alone "
                   f"(p={x['p_value']:.3g})")


@click.command()
@runs_argument()
@skills_option(required=True)
@click.option("--out", "out", type=click.Path(dir_okay=False), required=True,
              help="Output file: FILE.graphml (GraphML) or FILE.json (node-link JSON).")
@_embedding_options
@attribution_option
@seed_option("Seed of the Louvain communities.")
@filter_options
@jobs_option
@strict_option
@json_option
@reports_errors
def graph(runs: tuple[str, ...], skills_path: str, out: str, threshold: float | None, embedder: str,
          embed_model: str | None, cache_dir: str | None, attribution: str, seed: int,
          model: str | None, benchmark: str | None, jobs: int, strict: bool, as_json: bool) -> None:
    """Export the skill graph: co-retrieval edges (weight, net flips), near-duplicate edges
    (similarity), interference flags, and per-skill counts, cluster and community."""
    from pathlib import Path

    from skillaudit.analysis.graph import (
        co_retrieval_counts,
        interference,
        skill_graph,
    )
    from skillaudit.report.graphml import write_graph

    if Path(out).suffix.lower() not in (".graphml", ".json"):
        raise CommandError(f"{out}: --out must end in .graphml or .json")
    if Path(out).resolve() == Path(skills_path).resolve() or any(Path(out).resolve() == Path(r).resolve() for r in runs if r != "-"):
        raise CommandError(f"{out}: refusing to overwrite an input file")
    lib, paired, rows, report = _clusters_inputs(runs, skills_path, strict, model, benchmark, attribution,
                                                 embedder, embed_model, cache_dir, threshold, jobs=jobs)
    counts = co_retrieval_counts(paired)
    g = skill_graph(paired, rows, lib, report.near_duplicates, report.cluster_of(),
                    [c.id for c in report.clusters if c.harmful], seed=seed,
                    interfering=interference(paired, counts=counts), counts=counts)
    try:
        fmt = write_graph(g, out)
    except OSError as exc:
        raise InputError(f"{out}: cannot write: {exc.strerror or exc}") from None
    if as_json:
        emit_json({"schema": "skillaudit.graph/v1", "out": out, "format": fmt,
                   "nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "embedder": report.embedder})
    else:
        echo(f"wrote {out} ({fmt}): {g.number_of_nodes()} skills, {g.number_of_edges()} edges")


# ---------------------------------------------------------------- rank / cost / prune
_bootstrap_option = click.option(
    "--bootstrap", "n_boot", default=2000, show_default=True, type=click.IntRange(min=0),
    help="Task-level bootstrap resamples for the regression coefficients' CIs.")


def _attribution_flow(runs: tuple[str, ...], skills_path: str | None, strict: bool, until: str,
                      settings: Any, jobs: int = 0, cost: bool = False, offered_fallback: bool = False) -> Any:
    """The audit flow stopped at `until` for rank and prune (no paired metrics). With
    `offered_fallback` and no --skills, the skills the runs say were offered stand for the library
    (said in one line)."""
    from skillaudit.audit import run_audit

    lib = load_library_for_cli(skills_path)
    # rank and prune do not report adherence: the answers are not even decoded
    inputs = load_inputs_for_cli(runs, strict, lib, jobs, adherence=False, cost=cost and lib is not None,
                                 offered=offered_fallback)
    if lib is None and offered_fallback and inputs.runs.use_unlogged.all():
        raise CommandError("--skills is required: these runs say which skills were offered, not which were "
                           "used, so no skill can be judged (skillaudit audit reports the effect of offering)")
    start = prepare_for_cli(inputs, settings, filtered=settings.model is not None or settings.benchmark is not None)
    if lib is None and offered_fallback:
        if start.library is None:
            raise CommandError("--skills is required: these runs do not list the skills they were offered")
        warn(f"no --skills: judging {start.library.source} ({len(start.library)}; their texts are not in the "
             "runs: no near-duplicate merges)")
    return run_audit(start, until=until)


@click.command()
@runs_argument()
@skills_option()
@attribution_option
@filter_options
@pool_models_option
@mid_p_option
@click.option("--top", default=0, show_default=True, type=click.IntRange(min=0),
              help="Show only the N most harmful skills in the table (0 = all; JSON has all).")
@_bootstrap_option
@seed_option()
@mc_stop_option
@jobs_option
@strict_option
@json_option
@reports_errors
def rank(runs: tuple[str, ...], skills_path: str | None, attribution: str, model: str | None,
         benchmark: str | None, pool_models: bool, mid_p: bool, top: int, n_boot: int, seed: int,
         mc_stop: str, jobs: int, strict: bool, as_json: bool) -> None:
    """Skills ranked by net rescues (b - c where they were retrieved), most harmful first, per model.

    Each model is judged on its own pairs (--pool-models pools them, model as a stratum). Shares
    split each pair's flip among its retrieved skills and add up to the retrieval-triggered b - c;
    q is Benjamini-Hochberg over task-level tests (exact McNemar with one epoch per task, else a
    sign-flip test of each task's summed flips); coef is a ridge regression of flips on the
    retrieved skills that separates skills retrieved together; "vs library" is that effect minus
    the library's mean per injected skill of the others. Per-skill numbers are associations.
    """
    from skillaudit.audit import Settings

    settings = Settings(attribution=attribution, model=model, benchmark=benchmark, pool_models=pool_models,
                        mid_p=mid_p, regression_boot=n_boot, seed=seed, jobs=jobs, judge_offered=False,
                        skip=("metrics", "efficiency"), mc_stop=mc_stop == "on")
    audit = _attribution_flow(runs, skills_path, strict, "cost", settings, jobs, cost=True)
    unlogged = bool(audit.runs.n_pairs) and bool(audit.runs.use_unlogged.all())
    if as_json:
        doc = audit.attribution.to_dict()
        doc["inputs"] = list(runs)
        doc["use_logged"] = not unlogged
        if audit.cost is not None:
            doc["cost"] = audit.cost.to_dict()
        from skillaudit.analysis.efficiency import skill_scores

        scores = skill_scores(audit.inputs.cost_table, min_tasks=1)
        if scores:  # graded outcomes: each skill's paired score difference over its retrieving tasks
            doc["skill_scores"] = scores
        emit_json(doc)
    elif unlogged:  # nothing to rank: say why instead of "0 tasks retrieved"
        echo("skill use not logged: these runs say which skills were offered, not which were used, so no "
             "skill can be ranked; `skillaudit audit` reports the effect of offering the skills per model "
             "and per task bundle")
    else:
        from skillaudit.report.render import cost_lines, rank_tables  # rich: only for the table

        rank_tables(audit, top=top or None)
        for line in cost_lines(audit, top=top or None):
            echo(line)


@click.command("cost")
@runs_argument()
@skills_option(required=True)
@filter_options
@json_option
@reports_errors
def cost_cmd(runs: tuple[str, ...], skills_path: str, model: str | None, benchmark: str | None,
             as_json: bool) -> None:
    """What each skill costs: tokens it adds per injection (from usage deltas), tokens per net rescue,
    and tokens and latency per condition."""
    from skillaudit.audit import Settings, prepare, run_audit
    from skillaudit.report.render import cost_lines

    lib = load_library_for_cli(skills_path)
    inputs = load_inputs_for_cli(runs, False, lib, adherence=False, arms=False, provenance=False, cost=True)
    settings = Settings(model=model, benchmark=benchmark, judge_offered=False,
                        skip=("metrics", "efficiency", "attribution"))
    audit = run_audit(prepare(inputs, settings), until="cost")
    if as_json:
        emit_json({**audit.cost.to_dict(), "inputs": list(runs)})
    else:
        for line in cost_lines(audit):
            echo(line)


@click.command()
@runs_argument()
@click.option("--skills", "skills_path", type=click.Path(), default=None,
              help="Skill library: a folder of <name>/SKILL.md or a JSON Lines file (default: the skills "
                   "the runs say were offered, when they list them).")
@attribution_option
@filter_options
@pool_models_option
@mid_p_option
@click.option("--embedder", type=click.Choice(["minilm", "tfidf", "none"]), default="minilm",
              show_default=True,
              help="Near-duplicate detection for merge suggestions (the audit's default; none = skip).")
@click.option("--threshold", type=click.FloatRange(-1.0, 1.0), default=None,
              help=threshold_help())
@click.option("--apply", "apply_dir", type=click.Path(file_okay=False), default=None,
              help="Write a pruned COPY of the library (plus PRUNED.md) into this new or empty folder.")
@click.option("--explain", metavar="SKILL", default=None,
              help="Print one skill's recommendation with its evidence per model instead of the summary.")
@_bootstrap_option
@seed_option()
@mc_stop_option
@jobs_option
@strict_option
@json_option
@reports_errors
def prune(runs: tuple[str, ...], skills_path: str | None, attribution: str, model: str | None,
          benchmark: str | None, pool_models: bool, mid_p: bool, embedder: str, threshold: float | None,
          apply_dir: str | None, explain: str | None, n_boot: int, seed: int, mc_stop: str, jobs: int,
          strict: bool, as_json: bool) -> None:
    """What to do, for the library and for each skill, per model, and why: one line per decision
    (the rule that decided it and one figure); --explain SKILL gives one skill's evidence per model.

    First the library level: when the skills do not differ but the library hurts, the harm is
    library-wide and the recommendation is to gate (or shorten) retrieval for that model, not to
    prune entries. Prune needs the skill's effect to be reliably below the library average AND
    below zero, so an innocent skill merely retrieved next to a harmful one, or one that hurts
    like every other, is not pruned. The projected RAE/OAE without the prune set is a
    projection. --apply writes a pruned copy (skills pruned for every model); the library itself
    is never modified.
    """
    from skillaudit.audit import Settings
    from skillaudit.decide.recommend import apply_prune
    from skillaudit.report.prune_view import explain_lines, prune_lines

    if apply_dir is not None and skills_path is None:
        raise CommandError("--apply needs --skills: the library to copy")
    settings = Settings(attribution=attribution, model=model, benchmark=benchmark, pool_models=pool_models,
                        mid_p=mid_p, regression_boot=n_boot, seed=seed, jobs=jobs, embedder=embedder,
                        near_duplicate_threshold=threshold, skip=("metrics", "efficiency", "cost"),
                        mc_stop=mc_stop == "on")
    audit = _attribution_flow(runs, skills_path, strict, "recommendations", settings, jobs, cost=True,
                              offered_fallback=True)
    if audit.clusters is not None and audit.clusters.fallback_reason:
        warn(f"the MiniLM model could not be loaded: {audit.clusters.fallback_reason}")
    out = audit.recommendations
    left_out = apply_prune(audit.library, out, apply_dir) if apply_dir is not None else None
    if as_json:
        doc = out.to_dict()
        doc["inputs"] = list(runs)
        if apply_dir is not None:
            doc["applied"] = {"out_dir": apply_dir, "left_out": left_out}
        emit_json(doc)
    elif explain is not None:
        lines = explain_lines(audit, explain)
        if not lines:
            raise InputError(f"--explain {explain}: no recommendation for that skill in these runs")
        for line in lines:
            echo(line)
    else:
        for line in prune_lines(audit):
            echo(line)
        n_cut = sum(cut for _, cut in audit.inputs.offered.values())
        if n_cut:
            echo(f"{n_cut} with-skills log(s) end before the agent finished (cut): \"unused\" means not seen "
                 "used in what was logged")
        if apply_dir is not None:
            echo(f"wrote a pruned copy of {skills_path} to {apply_dir} "
                       f"({len(left_out or [])} skill(s) left out; see PRUNED.md)")


def _metrics_help() -> str:
    """`metrics --help`, with each method named by `analysis.methods` (what `group_metrics` runs)."""
    from skillaudit.analysis.methods import P_COND_MID_P_WORDS, P_COND_WORDS, interval_summary
    from skillaudit.commands._shared import DEFAULT_BOOT

    return ("Paired effects per model and benchmark: aggregate lift, OAE, RAE, delta_skip.\n\n"
            "RAE is (rescues - harms) / pairs on the tasks whose enabled run got skills back; OAE the same "
            "over all tasks; aggregate lift is what most papers report (retrieved vs not retrieved inside the "
            f"enabled run). CIs: {interval_summary(DEFAULT_BOOT)} by default. p cond: {P_COND_WORDS}; with --mid-p, "
            f"{P_COND_MID_P_WORDS}. The task is the unit. With --skills, the funnel's \"adhered\" stage also "
            "counts answers that repeat a code line of a retrieved skill.")


metrics.help = _metrics_help()


def _clusters_help() -> str:
    """`clusters --help`, naming the pooled test as `analysis.clusters` runs it (`stats.paired_test`)."""
    from skillaudit.analysis.methods import TASK_TEST_WORDS

    return ("Families of skills by embedding, ranked by the harm they concentrate.\n\n"
            "A cluster is harmful when its members are net-harmful as a group (the pairs retrieving any member "
            f"pooled, tested with the task as the unit: {TASK_TEST_WORDS}; p <= 0.05) and not because of one "
            "member alone. Also lists near-duplicate pairs, co-retrieval communities and pairs that do worse "
            "together.")


clusters.help = _clusters_help()
