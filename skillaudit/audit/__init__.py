"""The audit as one flow: the inputs read once, each analysis a step in a named order
(`flow.STEPS`), every result collected in one `Audit` value; its last step is the
`skillaudit.audit/v1` document (`document.AuditResult`, what `audit.json` holds). Every renderer
(`skillaudit.report`) takes an `Audit`; every analysing command is `flow.run_audit` stopped at the
step it needs.

Layer (pyproject.toml `[tool.importlinter]`): May import decide, analysis and everything below;
never report or commands.
"""

from skillaudit.audit.document import AUDIT_SCHEMA, AuditResult, load_audit
from skillaudit.audit.flow import STEPS, Audit, Settings, build_audit, prepare, run_audit

__all__ = ["AUDIT_SCHEMA", "STEPS", "Audit", "AuditResult", "Settings", "build_audit", "load_audit", "prepare",
           "run_audit"]
