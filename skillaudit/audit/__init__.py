"""The audit as one flow: the inputs read once, each analysis in a named order, the decisions, into
one `AuditResult` value (what `audit.json` holds). Every renderer (`skillaudit.report`) takes that
value; `build.build_audit` is the one function that names the order.

Layer (pyproject.toml `[tool.importlinter]`): May import decide, analysis and everything below;
never report or commands.
"""

from skillaudit.audit.build import AUDIT_SCHEMA, AuditResult, build_audit, load_audit

__all__ = ["AUDIT_SCHEMA", "AuditResult", "build_audit", "load_audit"]
