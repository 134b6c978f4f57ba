"""Write a whole report folder atomically: report.html, report.md, audit.json, skills.csv, figures/.

Everything is produced inside a temporary folder beside `out_dir` (`_io.atomic_directory`); only
when every file is written does it replace `out_dir`, so a failed audit leaves the previous
report untouched. An existing `out_dir` is replaced only when it is a previous skillaudit report
(it holds an `audit.json` of this schema) or empty: never an arbitrary folder, and never one
that contains the audit's own inputs.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from skillaudit.audit import AUDIT_SCHEMA, Audit
from skillaudit.errors import OutputError
from skillaudit.report import figures as figures_mod
from skillaudit.report.html import render_html
from skillaudit.report.markdown import render_markdown
from skillaudit.report.view import skill_rows
from skillaudit.util.files import atomic_directory, is_within

REPORT_FILES = ("report.html", "report.md", "audit.json", "skills.csv", "skill_graph.graphml")
CSV_COLUMNS = (
    "rank", "model", "skill_id", "action", "rule", "reason", "n_tasks", "n_retrieved", "b", "c", "net",
    "share", "rae_k", "p_value", "q_value", "exclusive_n", "exclusive_b", "exclusive_c", "coef",
    "coef_ci_low", "coef_ci_high", "relative_effect", "relative_ci_low", "relative_ci_high",
    "relative_q", "identifiable", "aliases", "in_library", "edited", "cluster", "in_harmful_cluster",
    "description",
)


def _is_previous_report(path: Path) -> bool:
    try:
        doc = json.loads((path / "audit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == AUDIT_SCHEMA


def check_out_dir(out_dir: str | Path, inputs: Sequence[str | Path] = ()) -> Path:
    """Refuse an --out that is a file, a non-report folder, or holds / is inside an input."""
    out = Path(out_dir).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out_dir}: exists and is not a folder")
    for inp in inputs:
        if str(inp) == "-":
            continue
        p = Path(inp).expanduser().resolve()
        if p == out or is_within(p, out) or is_within(out, p):
            raise OutputError(f"--out {out_dir}: would overwrite the input {inp}; choose another folder")
    if out.exists() and any(out.iterdir()) and not _is_previous_report(out):
        raise OutputError(
            f"--out {out_dir}: folder exists and is not a skillaudit report (no audit.json); "
            "choose a new folder or remove it"
        )
    return out


def _csv_cell(value: Any) -> Any:
    """Untrusted text cannot become a spreadsheet formula."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def skills_csv(doc: dict[str, Any]) -> str:
    """skills.csv: one row per skill, most harmful first (fractions, not percentage points)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for i, r in enumerate(skill_rows(doc), 1):
        ci = r.get("coef_ci") or [None, None]
        rel = r.get("relative_ci") or [None, None]
        row = {
            **r, "rank": i, "coef_ci_low": ci[0], "coef_ci_high": ci[1],
            "relative_ci_low": rel[0], "relative_ci_high": rel[1],
            "aliases": " ".join(r.get("aliases") or []),
        }
        w.writerow([_csv_cell("" if row.get(c) is None else row.get(c)) for c in CSV_COLUMNS])
    return buf.getvalue()


def write_report(audit: Audit, out_dir: str | Path, *, inputs: Sequence[str | Path] = (),
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Render the audit (run to its document step) and write the report into `out_dir`
    (atomically); returns {"out", "files", "report"}.

    `inputs` are the run logs and library: `out_dir` may not contain them.
    """
    say = progress or (lambda _m: None)
    if audit.document is None:
        raise ValueError("write_report needs the audit run to its document step")
    result = audit.document
    out = check_out_dir(out_dir, inputs)
    with atomic_directory(out) as tmp:
        say("drawing figures")
        pngs = figures_mod.render_all(result.to_dict())
        doc = {**result.to_dict(), "figures": {name: f"figures/{name}" for name in pngs}}
        fig_dir = tmp / "figures"
        fig_dir.mkdir()
        for name, data in pngs.items():
            (fig_dir / name).write_bytes(data)
        say("writing report.html, report.md, audit.json, skills.csv")
        (tmp / "audit.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
                                        encoding="utf-8")
        (tmp / "skills.csv").write_text(skills_csv(doc), encoding="utf-8")
        (tmp / "report.md").write_text(render_markdown(doc, list(pngs)), encoding="utf-8")
        (tmp / "report.html").write_text(render_html(doc, pngs), encoding="utf-8")
        if audit.graph is not None:
            from skillaudit.report.graphml import graphml_lines

            (tmp / "skill_graph.graphml").write_text("\n".join(graphml_lines(audit.graph.export)) + "\n",
                                                     encoding="utf-8")
    files = [f for f in REPORT_FILES if (out / f).exists()] + [f"figures/{n}" for n in pngs]
    return {"out": str(out), "files": files, "report": str(out / "report.html")}


def rerender(out_dir: str | Path) -> dict[str, str]:
    """report.md and report.html rendered again from a report folder's audit.json and figures."""
    from skillaudit.audit import load_audit

    out = Path(out_dir)
    result = load_audit(out / "audit.json")
    pngs = {name: (out / rel).read_bytes() for name, rel in result.figures.items()}
    doc = result.to_dict()
    return {"report.md": render_markdown(doc, list(pngs)), "report.html": render_html(doc, pngs)}
