"""The `skillaudit` command line: a thin click layer over the library functions.

Library code raises `skillaudit.errors` exceptions and never prints; each command here turns them
into one-line messages (exit 2 for bad input) via `reports_errors`.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from . import __version__
from .errors import SkillauditError


class CommandError(click.ClickException):
    """A library error shown as one line, with the error's own exit status."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
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


def emit_json(doc: dict[str, Any]) -> None:
    """Print one JSON document (NaN becomes null) on stdout."""
    click.echo(json.dumps(_jsonable(doc), indent=2, allow_nan=False))


def _jsonable(obj: Any) -> Any:
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    return obj


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


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
def load_runs_for_cli(runs: tuple[str, ...], strict: bool, library: Any = None) -> Any:
    """Load run logs and warn (stderr) about unpaired records and harness-error pairs."""
    from .runs import load_runs

    paired = load_runs(runs, strict=strict, library=library)
    if paired.n_unpaired:
        warn(
            f"{paired.n_unpaired} record(s) without their other condition were left out, e.g. "
            f"{paired.unpaired_examples[0]}"
        )
    if paired.n_error_pairs:
        warn(f"{paired.n_error_pairs} pair(s) with a harness error record were left out")
    if paired.n_pairs == 0:
        raise CommandError(f"{', '.join(runs)}: no paired records (need enabled and disabled runs)")
    return paired


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
@click.option("--min-cond", default=10, show_default=True, type=click.IntRange(min=1),
              help="A cell is reportable only with at least this many retrieval-triggered pairs.")
@click.option("--bootstrap", "n_boot", default=20_000, show_default=True, type=click.IntRange(min=0),
              help="Paired bootstrap resamples (task level, epochs kept together); 0 = no CIs.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap.")
@strict_option
@json_option
@reports_errors
def metrics(runs: tuple[str, ...], skills_path: str | None, min_cond: int, n_boot: int, seed: int,
            strict: bool, as_json: bool) -> None:
    """Paired effects per model and benchmark: aggregate lift, OAE, RAE, delta_skip.

    RAE is (rescues - harms) / pairs on the tasks whose enabled run got skills back; OAE the same
    over all tasks; aggregate lift is what most papers report (retrieved vs not retrieved inside
    the enabled run). CIs: task-level paired bootstrap. p: exact McNemar. With --skills, the
    funnel's "adhered" stage also counts answers that repeat a code line of a retrieved skill.
    """
    from .metrics import compute_metrics
    from .render import metrics_table

    lib = load_library_for_cli(skills_path)
    paired = load_runs_for_cli(runs, strict, lib)
    result = compute_metrics(paired, min_cond=min_cond, n_boot=n_boot, seed=seed)
    if as_json:
        doc = result.to_dict()
        doc["inputs"] = list(runs)
        emit_json(doc)
    else:
        metrics_table(result)


# ---------------------------------------------------------------- validate
@cli.command()
@runs_argument(required=False)
@skills_option()
@strict_option
@reports_errors
def validate(runs: tuple[str, ...], skills_path: str | None, strict: bool) -> None:
    """Check run logs (DESIGN §3.1) and/or a skill library (Agent Skills rules).

    Run logs stop at the first malformed record (exit 2, naming file:line). The library check
    lists every problem and exits 1 if there is any.
    """
    from .library import validate_library

    if not runs and skills_path is None:
        raise click.UsageError("give run logs, --skills DIR, or both")
    if runs:
        from .runs import load_runs

        paired = load_runs(runs, strict=strict)
        click.echo(
            f"runs: {paired.n_pairs} pairs, {len(paired.models)} model(s), "
            f"{len(paired.benchmarks)} benchmark(s), {len(paired.skills)} skill id(s) retrieved; "
            f"{paired.n_unpaired} unpaired record(s), {paired.n_error_pairs} error pair(s)"
        )
    if skills_path is not None:
        problems = validate_library(skills_path)
        for p in problems:
            click.echo(str(p))
        if problems:
            raise CommandError(f"{skills_path}: {len(problems)} problem(s)", exit_code=1)
        from .library import load_library

        click.echo(f"skills: {len(load_library(skills_path))} valid skill(s) in {skills_path}")


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
        click.echo(report.summary(), err=True)
        for u in report.unpaired[:20]:
            click.echo(f"  left out: {u}", err=True)
        if len(report.unpaired) > 20:
            click.echo(f"  ... and {len(report.unpaired) - 20} more left out", err=True)
        for note in report.notes:
            click.echo(f"note: {note}", err=True)
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
            click.echo(f"wrote {len(records)} records ({report.pairs} pairs) to {output}", err=True)
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
@skills_option()
@import_options
@reports_errors
def import_inspect_cmd(enabled: tuple[str, ...], disabled: tuple[str, ...], tool: str, scorer: str | None,
                       threshold: float, skills_path: str | None, output: str, model: str | None,
                       benchmark: str | None, as_json: bool, quiet: bool) -> None:
    """Inspect AI logs: pair samples on (id, epoch); retrievals from the tool's calls."""
    from .importers.inspect_ai_log import import_inspect

    _check_import_output(output, as_json, [*enabled, *disabled])
    ids = None
    if skills_path is not None:
        from .library import load_library

        ids = load_library(skills_path).ids
    result = import_inspect(enabled, disabled, tool=tool, scorer=scorer, threshold=threshold,
                            skill_ids=ids, model=model, benchmark=benchmark)
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
@import_options
@reports_errors
def import_skillsbench_cmd(results: tuple[str, ...], threshold: float, output: str, model: str | None,
                           benchmark: str | None, as_json: bool, quiet: bool) -> None:
    """SkillsBench-style per-trial results with with-skills / without-skills conditions."""
    from .importers.skillsbench import import_skillsbench

    _check_import_output(output, as_json, list(results))
    result = import_skillsbench(results, threshold=threshold, model=model, benchmark=benchmark)
    _finish_import(result, output, as_json, quiet)


def main() -> None:
    cli(prog_name="skillaudit")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
