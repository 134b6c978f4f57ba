"""What every command shares: library errors as one-line messages (`reports_errors`), the shared
options (decorators), human and JSON output (`echo`, `emit_json`, `warn`), and reading the inputs
with the warnings a user should see (`load_inputs_for_cli`, `prepare_for_cli`, ...).

Library code raises `skillaudit.errors` exceptions and never prints; this is the only place that
turns them into messages (exit 2 for bad input).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from skillaudit.analysis.methods import MC_STOP_HELP
from skillaudit.errors import SkillauditError
from skillaudit.util.files import dumps_json


class CommandError(click.ClickException):
    """A library error shown as one line, with the error's own exit status."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        from skillaudit.util.term import clean

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


mc_stop_option = click.option(
    "--mc-stop", "mc_stop", type=click.Choice(["on", "off"]), default="on", show_default=True, help=MC_STOP_HELP)


def min_cond_option(what: str = "A cell") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--min-cond", default=10, show_default=True, type=click.IntRange(min=1),
        help=f"{what} is reportable only with at least this many retrieval-triggered pairs.",
    )


DEFAULT_BOOT = 20_000


def bootstrap_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--bootstrap", "n_boot", default=DEFAULT_BOOT, show_default=True,
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


# ---------------------------------------------------------------- output
def echo(message: Any = "", err: bool = False, nl: bool = True) -> None:
    """click.echo of a human-readable line, terminal controls in it escaped (`skillaudit.util.term`)."""
    from skillaudit.util.term import clean

    click.echo(clean(message), err=err, nl=nl)


def emit_json(doc: dict[str, Any]) -> None:
    """Print one JSON document (NaN becomes null) on stdout."""
    click.echo(dumps_json(doc).decode())  # orjson: ten times json.dumps on a 2,000-skill ranking


def warn(message: str) -> None:
    echo(f"warning: {message}", err=True)


# ---------------------------------------------------------------- reading the inputs, with warnings
def load_inputs_for_cli(runs: tuple[str, ...], strict: bool, library: Any = None, jobs: int = 0,
                        adherence: bool = True, **options: bool) -> Any:
    """Read the run logs once (`skillaudit.runs.inputs.load_inputs`, `options` passed on); warn (stderr)
    about unpaired records and harness-error pairs."""
    from skillaudit.runs.inputs import load_inputs

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


def prepare_for_cli(inputs: Any, settings: Any, filtered: bool = False) -> Any:
    """`skillaudit.audit.prepare` (the pairs selected, their arms, the library judged), with the
    warnings a user should see: arm records left out, skills edited since the runs.

    `filtered`: a --model/--benchmark selection, so arms of other pairs are expected."""
    from skillaudit.audit import prepare

    audit = prepare(inputs, settings)
    arms = audit.arms
    if arms is not None and arms.n_unjoined and not filtered:
        warn(f"{arms.n_unjoined} arm record(s) without their main pair were left out")
    if arms is not None and arms.n_error:
        warn(f"{arms.n_error} arm record(s) with a harness error were left out")
    if audit.edited:
        from skillaudit.runs.provenance import edited_warning

        for sid in sorted(k for k, e in audit.edited.items() if e):
            warn(edited_warning(sid))
    return audit


def load_library_for_cli(path: str | None) -> Any:
    """Load a skill library leniently, printing its warnings on stderr; None when no path."""
    if path is None:
        return None
    from skillaudit.library import load_library

    lib = load_library(path)
    for w in lib.warnings:
        warn(w)
    return lib
