"""The audit report: run the whole pipeline into one plain document, then render and write it.

- `build.build_audit(...)` -> `AuditResult` (sections `metrics`, `skills`, `clusters`,
  `recommendations`, `graph`, `inputs`, plus the `headline`), JSON-ready plain data;
- `figures` draws the PNGs (matplotlib, Agg canvas, no global pyplot state);
- `html` / `markdown` render the document with Jinja2 templates (HTML autoescaped, self-contained);
- `write.write_report(result, out_dir)` writes everything into `out_dir` atomically.

Layer (pyproject.toml `[tool.importlinter]`): May import decide, analysis and everything below; never commands or cli (clidoc excepted: it documents the click app).
"""

from __future__ import annotations

from skillaudit.report.build import AUDIT_SCHEMA, AuditResult, build_audit, load_audit
from skillaudit.report.write import write_report

__all__ = ["AUDIT_SCHEMA", "AuditResult", "build_audit", "load_audit", "write_report"]
