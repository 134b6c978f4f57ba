"""report.md: the report's content for a pull request; figures linked as `figures/*.png`.

Untrusted text (skill names, reasons, labels) goes through the `md` filter (one line, Markdown and
HTML special characters escaped) or, inside code spans, the `tick` filter.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from skillaudit.report.view import FILTERS, build_view, md
from skillaudit.util.term import clean

_ENV: Environment | None = None


def tick(text: Any) -> str:
    """Text for a Markdown code span inside a table: no backticks, no newlines, pipes escaped."""
    s = clean(" ".join(str(text).split())).replace("`", "'")
    return s.replace("|", "\\|")


def environment() -> Environment:
    global _ENV
    if _ENV is None:
        env = Environment(
            loader=PackageLoader("skillaudit.report", "templates"),
            autoescape=False,
            undefined=StrictUndefined,
            keep_trailing_newline=True,
        )
        env.filters.update(FILTERS)
        env.filters["md"] = md
        env.filters["tick"] = tick
        _ENV = env
    return _ENV


def render_markdown(doc: dict[str, Any], figure_names: list[str] | tuple[str, ...]) -> str:
    """report.md for an audit document; `figure_names` are the PNGs written under figures/."""
    view = build_view(doc, {name: f"figures/{name}" for name in figure_names})
    text = environment().get_template("report.md.j2").render(**view)
    # collapse the blank lines left by template blocks
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() == "" and lines and lines[-1] == "":
            continue
        lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"
