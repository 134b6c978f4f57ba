"""`skillaudit triggers`: does a skill fire when it should.

Without `--queries`: the pairs of skills whose descriptions would compete for the same queries
(`analysis.triggers.description_overlap`), costing no model call. With `--queries Q.jsonl`: each
labelled query run by an agent with the whole library offered (`engine.triggers`), then recall,
precision and rivals per skill (`analysis.triggers.trigger_scores`).
"""

from __future__ import annotations

import textwrap
from typing import Any

import click

from skillaudit.commands._shared import (
    CommandError,
    echo,
    emit_json,
    json_option,
    load_library_for_cli,
    reports_errors,
    skills_option,
    warn,
)

TRIGGERS_SCHEMA = "skillaudit.triggers/v1"


def _overlap_lines(report: Any) -> list[str]:
    lines = [f"likely rivals among {report.n_skills} skills: {len(report.pairs)} pair(s) whose descriptions compete "
             "(no model call)"]
    width = max((len(p.a) + len(p.b) for p in report.pairs), default=0) + 3
    for p in report.pairs:
        lines.append(f"  {(p.a + ' ~ ' + p.b):<{width}}  BM25 {p.bm25_ab:.2f} / {p.bm25_ba:.2f}   "
                     f"{report.embedder} cosine {p.cosine:.2f}")
    lines += textwrap.wrap(f"({report.method}; associations between texts: `--queries` measures what fires)",
                           width=100, initial_indent="  ", subsequent_indent="  ")
    return lines


def _library_doc(lib: Any) -> list[dict[str, Any]]:
    """Each skill's content hash (what a later `triggers --changed` compares)."""
    return [{"skill_id": s.id, "hash": s.content_hash} for s in lib.skills]


def _score_lines(report: Any, overlap: Any) -> list[str]:
    lines = [f"{report.n_queries} queries, {report.n_runs} run(s), {report.n_errors} error(s); "
             f"{report.n_run} queries with a valid run"]
    if not report.skills:
        return [*lines, "  no labelled query has a valid run yet"]
    width = max(len(s.skill_id) for s in report.skills) + 2
    lines.append(f"  {'skill':<{width}}{'recall':<24}{'precision':<24}rivals that took its queries")
    for s in report.skills:
        rec = f"{s.n_hit}/{s.n_should} {s.recall:.2f} [{s.recall_ci[0]:.2f}, {s.recall_ci[1]:.2f}]" if s.recall_ci else "-"
        pre = (f"{s.n_fired - s.n_false}/{s.n_fired} {s.precision:.2f} [{s.precision_ci[0]:.2f}, "
               f"{s.precision_ci[1]:.2f}]") if s.precision_ci else "-"
        riv = ", ".join(f"{r} ({n})" + (" *" if r in overlap.rivals_of.get(s.skill_id, ()) else "")
                        for r, n in s.rivals) or "-"
        lines.append(f"  {s.skill_id:<{width}}{rec:<24}{pre:<24}{riv}")
    lines += textwrap.wrap(f"({report.method}; * a rival whose description overlaps)", width=100,
                           initial_indent="  ", subsequent_indent="  ")
    if report.sweep:
        n = report.sweep[0]["n_queries"]
        lines += ["", f"reach as the catalog grows ({n} queries that should fire a skill, each voting once):",
                  f"  {'catalog':>8}  {'distractors':>11}  {'reach':<20}{'misroute':>9}  {'distractor fired':>16}"]
        for r in report.sweep:
            ci = r["reach_ci"]
            rc = f"{r['reach']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "-"
            mis = f"{r['misroute']:.2f}" if r["misroute"] is not None else "-"
            dis = f"{r['distractor_fired']:.2f}" if r["distractor_fired"] is not None else "-"
            lines.append(f"  {r['catalog_size']:>8}  {r['distractors']:>11}  {rc:<20}{mis:>9}  {dis:>16}")
    return lines


@click.command("triggers")
@skills_option(required=True)
@click.option("--queries", "queries_path", type=click.Path(dir_okay=False), default=None,
              help="Labelled queries (JSON Lines or YAML: query, should, should_not; docs/formats.md): run each "
                   "with the whole library offered and score what fires.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="With --queries: the JSON Lines log of the trigger runs (appended to; a re-run resumes).")
@click.option("--agent", "agent_spec", default=None, metavar="NAME|MODULE:CALLABLE",
              help="Your agent (agent(task, skills), docs/agents.md) instead of the built-in chat loop.")
@click.option("--engine", type=click.Choice(["threads", "harbor"]), default="threads", show_default=True,
              help="threads: --agent or the built-in loop here; harbor: Harbor's own agent (--agent-name), each "
                   "query a Harbor task with the skills folder injected as in real use.")
@click.option("--agent-name", default=None, help="With --engine harbor: Harbor's agent (claude-code, codex, terminus-2, ...).")
@click.option("--agent-kwarg", "agent_kwargs", multiple=True, metavar="KEY=VALUE",
              help="With --engine harbor: Harbor's --ak (repeatable).")
@click.option("--harbor-arg", "harbor_args", multiple=True, metavar="ARG", help="With --engine harbor: passed to "
              "`harbor run` verbatim (repeatable).")
@click.option("--env", "harbor_env", default="docker", show_default=True, help="With --engine harbor: Harbor's environment.")
@click.option("--n-concurrent", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --engine harbor: trials in flight.")
@click.option("--jobs-dir", default=None, help="With --engine harbor: where the tasks and job go (default: OUT.harbor/).")
@click.option("--task-image", default="python:3.12-slim", show_default=True,
              help="With --engine harbor: the image each query's task container starts from.")
@click.option("--no-network", is_flag=True, help="With --engine harbor: task containers on network_mode none (agents "
              "whose model calls leave from the host, like terminus-2).")
@click.option("--skills-mode", type=click.Choice(["catalog", "search"]), default="catalog", show_default=True,
              help="How the built-in agent is offered the skills: catalog (names and descriptions, load_skill) or "
                   "search (search_skills, BM25).")
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs per query; they vote once (a skill fired when it fired in at least half).")
@click.option("--distractors", default=None, metavar="N,N,...",
              help="Catalog-size sweep: run the queries again with N distractor skills added to the catalog (the "
                   "bundled set of 219 names and descriptions), for each N, and report reach per size.")
@click.option("--budget-tokens", type=click.IntRange(min=1), default=None,
              help="Stop starting episodes once this session's logged tokens reach it (a re-run resumes).")
@click.option("--changed", "baseline", type=click.Path(dir_okay=False), default=None,
              help="An earlier `triggers --json` output: run and report only the skills whose name, description or "
                   "body changed since (new ones included), on the queries that name them or that they took before.")
@click.option("--dry-run", is_flag=True, help="With --queries: print the episodes and token estimate, run nothing.")
@click.option("--endpoint", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8765/v1.")
@click.option("--model", "model_name", default=None, help="Model name sent to the endpoint (and logged).")
@click.option("--model-label", default=None, help="Model name written to the log (default: --model or --agent).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable holding the endpoint's API key.")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--max-tokens", type=int, default=256, show_default=True, help="Per model turn.")
@click.option("--tool-mode", type=click.Choice(["text", "native", "chatml"]), default="text", show_default=True,
              help="How the built-in agent calls tools (as `run`).")
@click.option("--tool-choice", type=click.Choice(["auto", "required"]), default="auto", show_default=True,
              help="required: the built-in agent's first turn must load (or search): firing then measures which "
                   "skill is chosen, not whether one is.")
@click.option("--max-calls", type=int, default=3, show_default=True, help="Loads or searches per episode.")
@click.option("--top-k", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Search mode: skills a search returns.")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed; per-query seeds derive from it.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Episodes in flight.")
@click.option("--episode-timeout", type=float, default=None, help="Seconds one agent episode may take.")
@click.option("--request-timeout", type=float, default=600.0, show_default=True, help="Seconds per chat request.")
@click.option("--retries", type=int, default=4, show_default=True, help="Retries on 429/5xx/connection errors.")
@click.option("--retry-errors", is_flag=True, help="Re-run queries whose records are errors.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output on stderr.")
@click.option("--embedder", type=click.Choice(["minilm", "tfidf"]), default="minilm", show_default=True,
              help="Embedding of the descriptions: minilm (sentence-transformers, offline) or tfidf (no model).")
@click.option("--embed-model", type=click.Path(), default=None,
              help="A sentence-transformers model folder to use instead of the bundled all-MiniLM-L6-v2.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Embedding cache folder (default: $SKILLAUDIT_CACHE_DIR or the user cache dir).")
@json_option
@reports_errors
def triggers(skills_path: str, queries_path: str | None, out_path: str | None, agent_spec: str | None,
             engine: str, agent_name: str | None, agent_kwargs: tuple[str, ...], harbor_args: tuple[str, ...],
             harbor_env: str, n_concurrent: int, jobs_dir: str | None, task_image: str, no_network: bool,
             skills_mode: str, epochs: int, distractors: str | None, budget_tokens: int | None,
             baseline: str | None, dry_run: bool,
             endpoint: str | None,
             model_name: str | None, model_label: str | None, api_key_env: str, temperature: float,
             max_tokens: int, tool_mode: str, tool_choice: str, max_calls: int, top_k: int, seed: int,
             concurrency: int, episode_timeout: float | None, request_timeout: float, retries: int,
             retry_errors: bool, quiet: bool, embedder: str, embed_model: str | None, cache_dir: str | None, as_json: bool) -> None:
    """Does each skill fire when it should: recall, precision and the rivals that take its queries.

    Without --queries: the pairs of skills a catalog agent could confuse (BM25 of one skill's name and
    description against the other's, and the cosine of their embeddings, each against a threshold
    calibrated on the bundled library), costing no model call. With --queries: every query is run
    --epochs times by the agent with the whole library offered (rivals present, nothing injected up
    front), logged to --out, and scored per skill, each query voting once.
    """
    from skillaudit.analysis.triggers import description_overlap

    lib = load_library_for_cli(skills_path)
    if not len(lib):
        raise CommandError(f"--skills {skills_path}: no skills")
    doc: dict[str, Any] = {"schema": TRIGGERS_SCHEMA, "skills_path": skills_path, "library": _library_doc(lib)}
    scores = changed = None
    if baseline is not None:
        from skillaudit.analysis.triggers import changed_since

        if queries_path is None:
            raise CommandError("--changed goes with --queries")
        changed = changed_since(baseline, lib)
        doc["changed"] = {"baseline": baseline, "skills": changed.changed, "removed": changed.removed}
        click.echo(f"changed since {baseline}: {len(changed.changed)} of {len(lib)} skill(s)"
                   + (f" ({', '.join(changed.changed[:8])}{', ...' if len(changed.changed) > 8 else ''})"
                      if changed.changed else "")
                   + (f"; removed: {', '.join(changed.removed)}" if changed.removed else ""), err=True)
    if queries_path is not None:
        scores = _run_queries(skills_path, queries_path, out_path, agent_spec, skills_mode, epochs,
                              _sizes(distractors), budget_tokens,
                              dry_run, endpoint, model_name, model_label, api_key_env, temperature, max_tokens,
                              tool_mode, tool_choice, max_calls, top_k, seed, concurrency, episode_timeout,
                              request_timeout, retries, retry_errors, quiet or as_json, changed,
                              _harbor(engine, agent_name, model_name, agent_kwargs, harbor_args, harbor_env,
                                      n_concurrent, jobs_dir, task_image, no_network), lib)
        if scores is None:  # --dry-run
            return
    elif out_path or agent_spec or dry_run or budget_tokens or distractors:
        raise CommandError("--out, --agent, --dry-run, --distractors and --budget-tokens go with --queries")
    report = description_overlap(lib, embedder, cache_dir=cache_dir, model_path=embed_model)
    if report.fallback_reason:
        warn(f"the MiniLM model could not be loaded: {report.fallback_reason}")
    if as_json:
        if scores is not None:
            doc.update({"queries_file": queries_path, "runs_file": out_path, **scores.to_dict()})
        emit_json({**doc, "overlap": report.to_dict()})
        return
    if scores is not None:
        for line in _score_lines(scores, report):
            echo(line)
        echo()
    for line in _overlap_lines(report):
        echo(line)


def _harbor(engine: str, agent_name: str | None, model: str | None, agent_kwargs: tuple[str, ...],
            harbor_args: tuple[str, ...], env: str, n_concurrent: int, jobs_dir: str | None, image: str,
            no_network: bool) -> Any:
    """The Harbor options of `--engine harbor` (None for the other engine; its options refused there)."""
    if engine != "harbor":
        if agent_name or agent_kwargs or harbor_args or jobs_dir or no_network:
            raise CommandError("--agent-name, --agent-kwarg, --harbor-arg, --jobs-dir and --no-network go with "
                               "--engine harbor")
        return None
    from skillaudit.commands.run import parse_agent_kwargs
    from skillaudit.engine.triggers import HarborTriggerOptions

    if not agent_name:
        raise CommandError("--engine harbor needs --agent-name (Harbor's agent; --model is its model)")
    return HarborTriggerOptions(agent_name=agent_name, model=model, env=env, n_concurrent=n_concurrent,
                                agent_kwargs=tuple(parse_agent_kwargs(agent_kwargs)), harbor_args=harbor_args,
                                jobs_dir=jobs_dir, image=image, no_network=no_network)


def _sizes(value: str | None) -> tuple[int, ...]:
    """`--distractors 10,50,200` as sizes (0, the library alone, is always run)."""
    if not value:
        return ()
    try:
        sizes = sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        raise CommandError(f"--distractors {value}: expected numbers, e.g. 10,50,200") from None
    if not sizes or sizes[0] < 0:
        raise CommandError(f"--distractors {value}: expected numbers >= 0, e.g. 10,50,200")
    return tuple(sizes)


def _run_queries(skills_path: str, queries_path: str, out_path: str | None, agent_spec: str | None, skills_mode: str,
                 epochs: int, distractors: tuple[int, ...], budget_tokens: int | None, dry_run: bool, endpoint: str | None, model_name: str | None,
                 model_label: str | None, api_key_env: str, temperature: float, max_tokens: int, tool_mode: str,
                 tool_choice: str, max_calls: int, top_k: int, seed: int, concurrency: int, episode_timeout: float | None,
                 request_timeout: float, retries: int, retry_errors: bool, quiet: bool, changed: Any = None,
                 harbor: Any = None, library: Any = None) -> Any:
    """Plan (printed before any model call), run and score the trigger queries; None with --dry-run.
    With `changed` (`--changed`), only the queries and skills it concerns."""
    import os
    from pathlib import Path

    from skillaudit.agents.agent import AgentConfig
    from skillaudit.agents.protocol import library_hash
    from skillaudit.analysis.triggers import reach, trigger_scores
    from skillaudit.engine.triggers import (
        TriggerOptions,
        current_records,
        plan_triggers,
        run_triggers,
    )

    if not out_path:
        raise CommandError("--queries needs --out LOG (the trigger runs are logged there; a re-run resumes)")
    if agent_spec in ("search", "catalog"):  # the built-in chat loops, by their plugin names
        skills_mode, agent_spec = agent_spec, None
    if harbor is not None:
        if agent_spec or distractors or budget_tokens:
            raise CommandError("--engine harbor runs Harbor's agent (--agent-name) as one job: not with --agent, "
                               "--distractors or --budget-tokens")
        model_label = model_label or (f"{harbor.agent_name}:{model_name}" if model_name else harbor.agent_name)
    elif not agent_spec and not dry_run and (not endpoint or not model_name):
        raise CommandError("--endpoint and --model are needed (or --agent NAME|module:callable)")
    for flag, path in (("--queries", queries_path), ("--skills", skills_path)):
        if Path(path).resolve() == Path(out_path).resolve():
            raise CommandError(f"--out {out_path} is the {flag} input; refusing to append to it")
    agent = AgentConfig(endpoint=endpoint or "", model=model_name or "", api_key=os.environ.get(api_key_env) or None,
                        temperature=temperature, max_tokens=max_tokens, tool_mode=tool_mode,
                        tool_choice=tool_choice, max_calls=max_calls,
                        request_timeout_s=request_timeout, retries=retries, top_k=top_k)
    opts = TriggerOptions(queries=queries_path, skills=skills_path, out=out_path, agent=agent, agent_spec=agent_spec,
                          skills_mode=skills_mode, epochs=epochs, seed=seed, concurrency=concurrency,
                          episode_timeout=episode_timeout, retry_errors=retry_errors and not dry_run,
                          model_label=model_label, budget_tokens=budget_tokens, distractors=distractors,
                          engine="harbor" if harbor is not None else "threads", changed=changed)
    tp = plan_triggers(opts, library)  # bad queries fail here, before any model call
    click.echo(f"triggers: {tp.sentence()}", err=True)
    if dry_run:
        return None
    if harbor is not None:
        from skillaudit.engine.triggers import run_triggers_harbor

        summary = run_triggers_harbor(opts, tp, harbor, say=lambda m: click.echo(m, err=True), quiet=quiet)
    else:
        summary = run_triggers(opts, tp, quiet=quiet)
    if summary.written:
        click.echo(f"{out_path}: wrote {summary.written} record(s), {summary.errors} error(s), "
                   f"{summary.wall_s:.0f}s", err=True)
    if getattr(summary, "budget_stopped", False):
        warn(f"--budget-tokens {budget_tokens:,} reached: the remaining episodes were not run (run again to resume)")
    records = current_records(Path(out_path), tp.model_label, library_hash(tp.index))
    if summary.written and summary.errors >= summary.written:
        raise CommandError(f"{out_path}: every one of the {summary.written} trigger run(s) of this session is an "
                           "error (see their 'error' field)")
    def size_of(rec: dict[str, Any]) -> int:
        k = (rec.get("meta") or {}).get("distractors", 0)
        return k if isinstance(k, int) else -1

    report = trigger_scores(tp.queries, [r for r in records if size_of(r) == 0], tp.library.ids)
    if distractors:  # reach per catalog size, the query as the unit
        report.sweep = []
        for k, ix in sorted(tp.catalogs.items()):
            at_k = trigger_scores(tp.queries, [r for r in records if size_of(r) == k], tp.library.ids)
            report.sweep.append({"distractors": k, "catalog_size": len(ix.skills), "n_runs": at_k.n_runs,
                                 **reach(at_k, tp.library.ids),
                                 "skills": [{"skill_id": s.skill_id, "recall": s.recall} for s in at_k.skills]})
    if changed is not None:  # the skills that changed, judged on the queries that concern them
        keep = set(changed.changed)
        report.skills = [s for s in report.skills if s.skill_id in keep]
    return report
