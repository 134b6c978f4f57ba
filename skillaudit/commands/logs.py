"""Commands that check, convert and export run logs: `validate`, `import` (other eval frameworks'
logs into paired run logs) and `export` (Parquet tables)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from skillaudit.commands._shared import (
    CommandError,
    echo,
    emit_json,
    jobs_option,
    json_option,
    load_inputs_for_cli,
    load_library_for_cli,
    quiet_option,
    reports_errors,
    runs_argument,
    skills_option,
    strict_option,
)
from skillaudit.errors import SkillauditError


# ---------------------------------------------------------------- validate
@click.command()
@runs_argument(required=False)
@skills_option()
@strict_option
@reports_errors
def validate(runs: tuple[str, ...], skills_path: str | None, strict: bool) -> None:
    """Check run logs (DESIGN §3.1) and/or a skill library (Agent Skills rules).

    Run logs stop at the first malformed record, arm records included (exit 2, naming
    file:line). The library check lists every problem and exits 1 if there is any.
    """
    from skillaudit.library import validate_library

    if not runs and skills_path is None:
        raise click.UsageError("give run logs, --skills DIR, or both")
    if runs:
        from skillaudit.runs.inputs import load_inputs

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
        from skillaudit.library import load_library

        echo(f"skills: {len(load_library(skills_path))} valid skill(s) in {skills_path}")


# ---------------------------------------------------------------- import (importers)
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
    from skillaudit.importers import write_records

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
        from skillaudit.importers import dumps_records

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
    from skillaudit.importers import check_output

    if as_json and output == "-":
        raise click.UsageError("--json prints the report on stdout; write the run log with -o FILE")
    check_output(output, inputs)


class _ImportGroup(click.Group):
    """`skillaudit import`: the built-in importers, then the installed importer plugins (group
    `skillaudit.importers`: each a click command), loaded only when named or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from skillaudit.util.plugins import installed

        extra = [p.name for p in installed("importers") if p.origin != "built-in" and p.name not in self.commands]
        return [*super().list_commands(ctx), *sorted(dict.fromkeys(extra))]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        from skillaudit.util.plugins import find, load

        if find("importers", name) is None:
            return None
        try:
            obj = load("importers", name, f"import {name}")
        except SkillauditError as exc:
            raise CommandError(str(exc)) from None
        if not isinstance(obj, click.Command):
            raise CommandError(f"import {name}: the plugin's object is not a click command")
        return obj


@click.group("import", cls=_ImportGroup)
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
    from skillaudit.importers._common import check_arm
    from skillaudit.importers.inspect_ai_log import import_inspect

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
        from skillaudit.library import load_library

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
    from skillaudit.importers.evalplus import import_evalplus

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
    from skillaudit.importers.lm_eval import import_lm_eval

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
    from skillaudit.importers.skillsbench import import_skillsbench

    _check_import_output(output, as_json, list(results))
    result = import_skillsbench(results, threshold=threshold, model=model, benchmark=benchmark,
                                enabled_values=enabled_values, disabled_values=disabled_values, count=count)
    _finish_import(result, output, as_json, quiet)


@import_group.command("harbor")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@_many("--enabled", "Harbor job / trial folders or result.json files run with skills.", required=False)
@_many("--disabled", "Harbor job / trial folders or result.json files run without skills.", required=False)
@click.option("--threshold", default=1.0, show_default=True, type=float, help="A reward is correct when >= this.")
@click.option("--offered", "offered", type=click.Path(file_okay=False), default=None,
              help="A skills folder (<name>/SKILL.md) the with-skills trials were offered, where neither the "
                   "agent's log, the trial's lock.json nor the job's skill folders say.")
@click.option("--tasks", "tasks", type=click.Path(file_okay=False), default=None,
              help="The dataset's task folders: a with-skills trial was offered the skills its task ships in "
                   "environment/skills/ (SkillsBench); the task is the folder named by the last part of the "
                   "trial's config.task.path, else its task_name.")
@import_options
@reports_errors
def import_harbor_cmd(paths: tuple[str, ...], enabled: tuple[str, ...], disabled: tuple[str, ...], threshold: float,
                      offered: str | None, tasks: str | None, output: str, model: str | None, benchmark: str | None,
                      as_json: bool, quiet: bool) -> None:
    """Harbor jobs and trials: sides from --enabled / --disabled or from words in the paths (with-skills,
    noskills, ...); skill use from each trial's own log (Claude Code stream-json, ATIF, terminus-2
    episode lists)."""
    from skillaudit.importers.harbor import import_harbor

    if not (paths or enabled or disabled):
        raise click.UsageError("give PATH... (sides read from the paths) or --enabled / --disabled")
    _check_import_output(output, as_json, [*paths, *enabled, *disabled])
    result = import_harbor(paths, enabled=enabled, disabled=disabled, threshold=threshold, model=model,
                           benchmark=benchmark, offered=offered, tasks=tasks)
    _finish_import(result, output, as_json, quiet)


# ---------------------------------------------------------------- export (scale)
@click.command()
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
    from skillaudit.errors import require
    from skillaudit.runs.export import export_parquet

    require("pyarrow", "parquet")
    lib = load_library_for_cli(skills_path)
    paired = load_inputs_for_cli(runs, strict, lib, jobs, arms=False, provenance=False).runs
    paths = export_parquet(paired, out_dir, inputs=runs)
    if not quiet:
        echo(f"wrote {paired.n_pairs} pairs and {paired.ranks.nnz} pair-skill rows to "
                   f"{paths[0]} and {paths[1]}", err=True)
