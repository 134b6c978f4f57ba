"""`check`'s results in CI formats: SARIF 2.1.0 (code scanning), JUnit XML (test reports), GitHub
workflow commands (annotations) and a short Markdown summary (`$GITHUB_STEP_SUMMARY`, PR comments).

Both are built from what `check` decided: its document (the metrics, the library verdicts and the
recommendations of `decide.gate.check_document`) and its failures (`decide.gate.Failure`). Every
(model, skill) decision other than keep is one SARIF result and one JUnit test case; a decision
that fails the gate is a SARIF `error` and a JUnit failure. SARIF's `tool.driver.rules` come from
the policy's rule table (`decide.policy.RULES`) plus the gate's own checks (`GATE_RULES`), so a
consumer can show each rule's description and help.

Locations: a skill's result points at its `SKILL.md` (the `description:` line for a rule about
triggering, else line 1); a library-level result at the skills folder.
"""

from __future__ import annotations

import datetime as _dt
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from skillaudit import __version__

INFORMATION_URI = "https://github.com/skillaudit/skillaudit"
SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True)
class GateRule:
    id: str
    name: str
    summary: str
    condition: str


#: what `check` fails on besides the policy's decisions (`decide.gate.check`, arm integrity)
GATE_RULES = (
    GateRule("G001", "arm-integrity", "Arm integrity",
             "A run without skills used or had skills present, could not be checked, or a run with skills was "
             "given none: the pairs do not compare what they claim (pass --allow-leaks to accept)."),
    GateRule("G002", "library-harm", "Library-wide harm",
             "The library's harm is library-wide for a model (every injected skill costs about the same): "
             "gate retrieval or reduce depth rather than pruning skills."),
    GateRule("G003", "regression", "Regression against the baseline",
             "Against --baseline: a newly harmful skill, a verdict that got worse, or an RAE that fell with "
             "the change's 95% interval below 0."),
)
_KIND_RULE = {"integrity": "G001", "library": "G002", "regression": "G003"}
#: rules about when a skill fires rather than what it says: located at the description line
TRIGGER_RULES = {"S201", "B001", "M001"}


def _rules() -> list[dict[str, Any]]:
    from skillaudit.decide.policy import RULES

    out = []
    for r in RULES:
        out.append({"id": r.id, "name": r.name, "shortDescription": {"text": r.summary},
                    "fullDescription": {"text": r.condition},
                    "help": {"text": f"{r.condition} Action: {r.action}."},
                    "properties": {"action": r.action, "scope": r.scope}})
    for g in GATE_RULES:
        out.append({"id": g.id, "name": g.name, "shortDescription": {"text": g.summary},
                    "fullDescription": {"text": g.condition}, "help": {"text": g.condition},
                    "properties": {"action": "fail", "scope": "gate"}})
    return out


def _skill_file(skills_root: str | None, library: Any, skill_id: str) -> tuple[str, int | None]:
    """(path of the skill's SKILL.md relative to the working folder when inside it, its description line)."""
    path = None
    if library is not None:
        s = library.get(skill_id)
        if s is not None and getattr(s, "path", ""):
            path = Path(s.path)
            if path.is_dir():
                path = path / "SKILL.md"
    if path is None:
        path = Path(skills_root or "skills") / skill_id / "SKILL.md"
    line = None
    try:
        for i, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()[:200], 1):
            if text.lstrip().startswith("description:"):
                line = i
                break
    except OSError:
        pass
    return _relative(path), line


def _location(row: dict[str, Any], skills_root: str | None, library: Any,
              seen: dict[str, tuple[str, int | None]]) -> tuple[str, int]:
    """(SKILL.md path, line) of a skill's decision: the description line for a rule about when the
    skill fires, else line 1; each skill's file read once (`seen`) however many models it has."""
    sid = row["skill_id"]
    if sid not in seen:
        seen[sid] = _skill_file(skills_root, library, sid)
    uri, line = seen[sid]
    return uri, line if (line and row["rule"] in TRIGGER_RULES) else 1


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def decisions(doc: dict[str, Any], failures: list[Any]) -> list[dict[str, Any]]:
    """Every (model, skill) decision other than keep, every library-level action and every gate
    failure not tied to one of them, with whether it fails the gate: the rows SARIF and JUnit write."""
    failing = {(f.model, f.skill_id) for f in failures if f.skill_id}
    rows = []
    for r in doc["recommendations"].get("recommendations", []):
        scope = r.get("scope", "skill")
        if scope == "skill" and r["action"] in ("keep", "unused"):
            continue
        for m in r.get("models") or ["*"]:
            rows.append({"scope": scope, "model": m, "skill_id": r.get("skill_id"), "action": r["action"],
                         "rule": r.get("rule") or "", "reason": r.get("reason", ""),
                         "benchmark": r.get("benchmark"),
                         "fails": scope == "skill" and (m, r.get("skill_id")) in failing})
    have = {(x["model"], x["skill_id"]) for x in rows}
    for f in failures:
        if f.skill_id and (f.model, f.skill_id) in have:
            continue
        have.add((f.model, f.skill_id))
        rows.append({"scope": "gate", "model": f.model, "skill_id": f.skill_id, "action": "fail",
                     "rule": _KIND_RULE.get(f.kind, "G003"), "reason": f.message, "benchmark": f.benchmark,
                     "fails": True})
    return rows


def _level(row: dict[str, Any]) -> str:
    if row["fails"]:
        return "error"
    return "note" if row["action"] == "needs-data" else "warning"


def to_sarif(doc: dict[str, Any], failures: list[Any], skills_root: str | None = None,
             library: Any = None) -> dict[str, Any]:
    """The SARIF 2.1.0 log of a `check`: rules from the policy's table, a result per decision."""
    results = []
    seen: dict[str, tuple[str, int | None]] = {}
    for row in decisions(doc, failures):
        if row["skill_id"]:
            uri, line = _location(row, skills_root, library, seen)
            loc = {"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": line}}}
        else:
            loc = {"physicalLocation": {"artifactLocation": {"uri": _relative(Path(skills_root or "skills")) + "/"}}}
        who = row["skill_id"] or "library"
        where = f" on {row['benchmark']}" if row.get("benchmark") not in (None, "*") else ""
        results.append({
            "ruleId": row["rule"] or "G003", "level": _level(row),
            "message": {"text": f"{who} ({row['model']}{where}): {row['action']}: {row['reason']}"},
            "locations": [loc],
            "partialFingerprints": {"skillaudit/v1": f"{row['rule']}:{row['model']}:{who}"},
            "properties": {"model": row["model"], "action": row["action"], "fails_check": row["fails"]},
        })
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "skillaudit", "version": __version__,
                                          "informationUri": INFORMATION_URI, "rules": _rules()}},
                      "results": results}]}


_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: Any) -> str:
    """Untrusted text as XML character data: characters XML 1.0 cannot hold replaced, then escaped."""
    return escape(_NOT_XML.sub("\ufffd", str(text)))


def _xa(text: Any) -> str:
    """Untrusted text as a quoted XML attribute value."""
    return quoteattr(_NOT_XML.sub("\ufffd", str(text)))


def to_junit(doc: dict[str, Any], failures: list[Any], fail_on: tuple[str, ...], seconds: float = 0.0,
             now: _dt.datetime | None = None) -> str:
    """JUnit XML of a `check`: one test case per (model, skill) decision and per library verdict,
    and one for the gate as a whole; a failure where the decision fails `check`."""
    rows = decisions(doc, failures)
    stamp = (now or _dt.datetime.now()).replace(microsecond=0, tzinfo=None).isoformat()
    cases = []
    for row in rows:
        name = f"{row['skill_id'] or 'library'} ({row['model']})"
        body = ""
        if row["fails"]:
            body = (f"<failure message={_xa(row['reason'][:500])} type={_xa(row['rule'] or 'gate')}>"
                    f"{_x(row['reason'])}</failure>")
        cases.append(f'    <testcase name={_xa(name)} classname={_xa("skillaudit." + row["action"])} '
                     f'time="0">{body}</testcase>')
    gate_fail = (f"<failure message={_xa(f'{len(failures)} failure(s)')} type=\"gate\">"
                 + _x("\n".join(f.message for f in failures)) + "</failure>") if failures else ""
    cases.append(f'    <testcase name={_xa("gate: " + ", ".join(fail_on))} classname="skillaudit.check" '
                 f'time="0">{gate_fail}</testcase>')
    n_fail = sum(1 for r in rows if r["fails"]) + (1 if failures else 0)
    host = socket.gethostname() or "localhost"
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
            f'  <testsuite name="skillaudit check" package="skillaudit" id="0" timestamp="{stamp}" '
            f'hostname={_xa(host)} tests="{len(cases)}" failures="{n_fail}" errors="0" time="{seconds:.3f}">\n'
            '    <properties>\n'
            f'      <property name="skillaudit.version" value={_xa(__version__)}/>\n'
            f'      <property name="fail_on" value={_xa(",".join(fail_on))}/>\n'
            '    </properties>\n'
            + "\n".join(cases) + "\n"
            '    <system-out/>\n    <system-err/>\n  </testsuite>\n</testsuites>\n')


# ---------------------------------------------------------------- GitHub workflow commands and the step summary
def _gh_data(text: str) -> str:
    """A workflow command's message (GitHub's escaping: %, CR, LF)."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    """A workflow command's property value (also : and ,)."""
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(doc: dict[str, Any], failures: list[Any], skills_root: str | None = None,
              library: Any = None) -> str:
    """GitHub Actions workflow commands, one per decision (the SARIF results): `::error` where it
    fails `check`, `::warning` for prune/rewrite/merge advice, `::notice` for needs-data; each
    located at the skill's SKILL.md (annotations on the pull request's files)."""
    from skillaudit.util.term import clean

    lines = []
    seen: dict[str, tuple[str, int | None]] = {}
    for row in decisions(doc, failures):
        cmd = {"error": "error", "warning": "warning", "note": "notice"}[_level(row)]
        who = row["skill_id"] or "library"
        title = f"{row['rule'] or 'gate'} {row['action']}: {who} ({row['model']})"
        props = [f"title={_gh_prop(clean(title))}"]
        if row["skill_id"]:
            uri, line = _location(row, skills_root, library, seen)
            props.insert(0, f"file={_gh_prop(uri)}")
            props.insert(1, f"line={line}")
        lines.append(f"::{cmd} {','.join(props)}::{_gh_data(clean(row['reason']))}")
    return "\n".join(lines) + ("\n" if lines else "")


MAX_SUMMARY_LINES = 20


def _md(text: Any) -> str:
    """Untrusted text for one Markdown table cell or line: no newlines, markup characters escaped."""
    from skillaudit.report.view import md

    return md(text)


def to_markdown(doc: dict[str, Any], failures: list[Any], fail_on: tuple[str, ...],
                baseline: dict[str, Any] | None = None, n_pairs: int | None = None) -> str:
    """A short Markdown summary for `$GITHUB_STEP_SUMMARY` or a pull-request comment: the headline,
    then (with a baseline) what changed against it, else the decisions that fail or advise, at most
    `MAX_SUMMARY_LINES` lines."""
    status = "❌ **fails**" if failures else "✅ **passes**"
    kinds: dict[str, int] = {}
    for f in failures:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    why = f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})" if kinds else ""
    pairs = f" on {n_pairs:,} pairs" if n_pairs is not None else ""
    lines = [f"### skillaudit check: {status}{why}", "",
             f"Gate: {', '.join(fail_on)}{pairs}."]
    groups = [g for g in (doc.get("metrics") or {}).get("groups", []) if g.get("benchmark") == "*"]
    for g in groups:
        ci = g.get("rae_ci") or [None, None]
        rae = g.get("rae")
        if rae is not None and ci[0] is not None:
            lines.append(f"- {_md(g['model'])}: RAE {100 * rae:+.1f} pp [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}] "
                         "where skills were retrieved")
    rows: list[str] = []
    if baseline is not None:
        from skillaudit.decide.gate import diff

        d = diff(baseline, doc)
        for m in d["models"]:
            if m["old_verdict"] != m["new_verdict"]:
                rows.append(f"| {_md(m['model'])} | verdict | {_md(m['old_verdict'])} | {_md(m['new_verdict'])} |")
        for x in d["library"]:
            rows.append(f"| {_md(x['model'])} | library{'' if x['benchmark'] == '*' else ' on ' + _md(x['benchmark'])} | "
                        f"{_md(x['old'] or '-')} | {_md(x['new'] or '-')} |")
        for x in d["skills"]:
            rows.append(f"| {_md(x['model'])} | `{_md(x['skill_id'])}` | {_md(x['old'] or 'absent')} | "
                        f"{_md(x['new'] or 'absent')} |")
        head = ["", "What changed against the baseline:", "", "| model | what | was | now |", "|---|---|---|---|"]
        empty = "Nothing changed against the baseline."
    else:
        for row in decisions(doc, failures):
            if row["action"] == "needs-data":
                continue
            mark = "❌" if row["fails"] else "⚠️"
            rows.append(f"| {mark} | {_md(row['model'])} | `{_md(row['skill_id'] or 'library')}` | "
                        f"{_md(row['action'])} | {_md(row['reason'][:160])} |")
        head = ["", "| | model | skill | action | why |", "|---|---|---|---|---|"]
        empty = "No decision fails or advises a change."
    if rows:
        lines += head + rows[:MAX_SUMMARY_LINES]
        if len(rows) > MAX_SUMMARY_LINES:
            lines.append(f"\n… and {len(rows) - MAX_SUMMARY_LINES} more (`check --json` lists them all).")
    else:
        lines += ["", empty]
    return "\n".join(lines) + "\n"
