"""`skillaudit plugins`: the agents, graders, importers and engines installed, and where each came from."""

from __future__ import annotations

import click

from skillaudit.commands._shared import echo, emit_json, json_option, reports_errors


@click.command("plugins")
@json_option
@reports_errors
def plugins_cmd(as_json: bool) -> None:
    """List the agents (run --agent NAME), graders (a task file's grader: NAME), importers
    (import NAME) and engines (run --engine NAME): the built-ins and those installed packages
    declare as entry points (docs/plugins.md)."""
    from skillaudit.util.plugins import GROUPS, installed

    found = installed()
    if as_json:
        emit_json({"schema": "skillaudit.plugins/v1", "groups": GROUPS, "plugins": [p.to_dict() for p in found]})
        return
    width = max(len(p.name) for p in found)
    for kind in GROUPS:
        echo(f"{kind} ({GROUPS[kind]}):")
        for p in (p for p in found if p.kind == kind):
            echo(f"  {p.name.ljust(width)}  {p.origin}  {p.value}")
