"""Every renderer of the audit: each takes the `AuditResult` value `skillaudit.audit.build_audit`
builds (the flow that runs the analyses) and renders it.

- `figures` draws the PNGs (matplotlib, Agg canvas, no global pyplot state);
- `html` / `markdown` render the document with Jinja2 templates (HTML autoescaped, self-contained);
- `write.write_report(result, out_dir)` writes everything into `out_dir` atomically;
- `headline`, `render`, `prune_view` are the terminal views.

`build_audit` and `load_audit` are re-exported from `skillaudit.audit` for callers of this package.

Layer (pyproject.toml `[tool.importlinter]`): May import audit (the value it renders) and everything
below; never commands or cli (`clidoc` documents the click app `skillaudit.cli` passes it).
"""

from __future__ import annotations

from typing import Any

from skillaudit.audit import AUDIT_SCHEMA, AuditResult, build_audit, load_audit

__all__ = ["AUDIT_SCHEMA", "AuditResult", "build_audit", "load_audit", "write_report"]


def __getattr__(name: str) -> Any:
    # write_report pulls in matplotlib and Jinja2 (~0.5 s): loaded when a report is written, not when
    # a terminal view (rank, prune) imports skillaudit.report.render
    if name == "write_report":
        from skillaudit.report.write import write_report

        return write_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
