"""report.html: one self-contained page (inline CSS, figures as data URIs, no script, no network).

The Jinja2 environment autoescapes everything, so skill names, descriptions, reasons and task ids
are shown as text, never interpreted as markup; a Content-Security-Policy meta tag forbids scripts
and any network fetch as a second line of defence.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from skillaudit.report.view import FILTERS, build_view, data_uri

_ENV: Environment | None = None


def environment() -> Environment:
    global _ENV
    if _ENV is None:
        env = Environment(
            loader=PackageLoader("skillaudit.report", "templates"),
            autoescape=select_autoescape(enabled_extensions=("html", "j2"), default=True),
            undefined=StrictUndefined,
            trim_blocks=False,
            lstrip_blocks=False,
        )
        env.filters.update(FILTERS)
        _ENV = env
    return _ENV


def render_html(doc: dict[str, Any], figures: dict[str, bytes]) -> str:
    """The report page for an audit document and its figures ({file name: PNG bytes})."""
    view = build_view(doc, {name: data_uri(png) for name, png in figures.items()})
    return environment().get_template("report.html.j2").render(**view)
