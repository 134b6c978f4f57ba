"""The `skillaudit` command line: a thin click layer over the library functions.

This module holds the group, the list of commands and `main`; the commands live in
`skillaudit.commands`, one module per concept:

- `commands.analyse`: metrics, rank, cost, prune, clusters, graph (analysing paired runs);
- `commands.audit`: audit, compare, check, diff (judging a whole library);
- `commands.run`: run, verify, simulate (producing runs);
- `commands.logs`: validate, import, export (checking, converting and exporting run logs);
- `commands.triggers`: triggers (does a skill fire when it should);
- `commands.ci`: ci init (a CI workflow for a skill repository);
- `commands._shared`: what they share: errors as one-line messages (`reports_errors`), the shared
  options, output helpers and reading the inputs with their warnings.

Library code raises `skillaudit.errors` exceptions and never prints; each command turns them into
one-line messages (exit 2 for bad input) via `reports_errors`.
"""

from __future__ import annotations

import sys

import click

from skillaudit import __version__
from skillaudit.commands._shared import CommandError, reports_errors
from skillaudit.commands.analyse import clusters, cost_cmd, graph, metrics, prune, rank
from skillaudit.commands.audit import audit, check, compare, diff_cmd
from skillaudit.commands.ci import ci_group
from skillaudit.commands.logs import export, import_group, validate
from skillaudit.commands.plugins import plugins_cmd
from skillaudit.commands.run import run_cmd, simulate, verify
from skillaudit.commands.triggers import triggers

__all__ = [
    "CommandError", "audit", "check", "ci_group", "cli", "clusters", "compare", "cost_cmd", "diff_cmd", "export", "graph",
    "import_group", "main", "metrics", "prune", "rank", "reports_errors", "run_cmd", "simulate", "triggers",
    "validate", "verify",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="skillaudit")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """Audit an LLM agent's skill library: which retrieved skills help, which quietly hurt.

    Runs each task twice (skills enabled / disabled), then measures the effect only where the
    agent actually got skills back (RAE), per model, per benchmark and per skill.
    """


for _command in (metrics, validate, import_group, clusters, graph, rank, cost_cmd, prune, simulate, audit,
                 compare, run_cmd, check, diff_cmd, verify, triggers, ci_group, export, plugins_cmd):
    cli.add_command(_command)


def main() -> None:
    try:
        cli(prog_name="skillaudit")
    finally:
        # The interpreter's last garbage collection would walk every object numpy and scipy
        # created (~60 ms of every command) only to free memory the OS takes back anyway;
        # frozen objects are skipped by it. Outputs are written and closed by now.
        import gc

        gc.freeze()


def clidoc(argv: list[str] | None = None) -> int:
    """docs/cli.md from this app's `--help` texts (`make docs`); `["--check", FILE]` exits 1 when FILE is stale."""
    from skillaudit.report.clidoc import main as _clidoc

    return _clidoc(cli, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
