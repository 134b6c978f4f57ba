"""Generate docs/cli.md from the `--help` of every command of a click app.

The app is passed in (`skillaudit.cli.clidoc` passes its own): the report layer never imports the
command line. `make docs` regenerates the file; `skillaudit.cli.clidoc(["--check", "docs/cli.md"])`
exits 1 when it is stale (tests/test_docs.py does the same).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click

WIDTH = 100


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group, info_name="skillaudit")
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or getattr(cmd, "hidden", False):
            continue
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def _root_context(root: click.Group) -> click.Context:
    # the group's context_settings (e.g. -h as a help option) apply as they do on the command line
    settings = {**root.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return click.Context(root, info_name="skillaudit", **settings)


def _help(cmd: click.Command, path: tuple[str, ...], root: click.Group) -> str:
    ctx = _root_context(root)
    for i, name in enumerate(path):
        sub = root if i == 0 else ctx.command
        assert isinstance(sub, click.Group)
        c = sub.get_command(ctx, name)
        assert c is not None
        ctx = click.Context(c, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH)
    return cmd.get_help(ctx)


def generate(cli: click.Group) -> str:
    """The whole cli.md text of the app `cli`."""
    root_ctx = _root_context(cli)
    parts = [
        "# Command-line reference",
        "",
        "Generated from `--help` by `make docs`; "
        "`tests/test_docs.py` fails when this file is stale. Fractions in `--json` output are "
        "fractions (0.05, not 5); human tables show percentage points.",
        "",
        "## skillaudit",
        "",
        "```text",
        cli.get_help(root_ctx).rstrip(),
        "```",
        "",
    ]
    for path, cmd in _commands(cli):
        parts += [
            f"## skillaudit {' '.join(path)}",
            "",
            "```text",
            _help(cmd, path, cli).rstrip(),
            "```",
            "",
        ]
    return "\n".join(parts)


def main(cli: click.Group, argv: list[str] | None = None) -> int:
    """Print cli.md of `cli`; with `--check FILE`, exit status 1 when FILE differs from it."""
    argv = sys.argv[1:] if argv is None else argv
    text = generate(cli)
    if argv[:1] == ["--check"] and len(argv) == 2:
        from pathlib import Path

        current = Path(argv[1]).read_text(encoding="utf-8") if Path(argv[1]).exists() else ""
        if current != text:
            print(f"{argv[1]} is stale; regenerate it with: make docs",
                  file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0

