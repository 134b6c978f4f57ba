"""Gate a skill library in CI (`skillaudit check`) and compare two audits (`skillaudit diff`).

Both work on the audit document's sections (`metrics`, `library`, `recommendations`), so a
stored `audit.json` is a baseline and `check` builds the same sections from the runs it is given.

`check` fails (exit 1) on:

- `harmful`: a skill recommended `prune`, or `rewrite` because it is harmful (not merely mixed),
  or harmful on one model while helping another;
- `library`: a model or benchmark whose harm is library-wide;
- `regression` (with a baseline): a skill harmful now that was not, a verdict that got worse
  (headline or library level), or an RAE that fell with the interval of the change below 0
  (change = new - old, standard errors read off the two 95% intervals, combined as independent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillaudit.errors import InputError
from skillaudit.stats import ci_text as _ci
from skillaudit.stats import pp_text as _pp

CHECK_SCHEMA = "skillaudit.check/v1"
DIFF_SCHEMA = "skillaudit.diff/v1"
FAIL_ON = ("harmful", "library", "regression")
_Z = 1.959963984540054
#: how bad a verdict is, for "got worse"
_HEADLINE_RANK = {"helps": 0, "unclear": 1, "too-few": 1, "both-ways": 2, "mixed": 2, "hurts": 3}
_LIBRARY_RANK = {"none": 0, "skill-specific": 1, "library-wide": 2}


@dataclass(frozen=True)
class Failure:
    """One reason the gate fails: its kind, where, and the evidence that tripped it."""

    kind: str
    message: str
    model: str | None = None
    benchmark: str | None = None
    skill_id: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "benchmark": self.benchmark,
                "skill_id": self.skill_id, "message": self.message, "evidence": self.evidence}


_CI = (True, ["num|null"])
_AUDIT_SPEC = {
    "!schema": "str",
    "!metrics": {"groups": [{"!model": "str", "benchmark": "str|null", "rae": "num|null", "rae_ci": _CI,
                             "reportable": "bool|null", "p_cond": "num|null", "mcnemar_p_cond": "num|null"}]},
    "!recommendations": {
        "recommendations": [{"scope": "str", "!action": "str", "skill_id": "str|null",
                             "models": (True, ["str"]), "evidence": (True, "object")}],
        "library": [{"!model": "str", "!benchmark": "str", "verdict": "str|null", "direction": "str|null",
                     "mean_effect": "num|null", "mean_effect_ci": _CI, "heterogeneity_p": "num|null"}],
    },
    "library": (True, [{"!model": "str", "!benchmark": "str", "verdict": "str|null", "direction": "str|null",
                        "mean_effect": "num|null", "mean_effect_ci": _CI, "heterogeneity_p": "num|null"}]),
}


def load_audit_doc(path: str | Path) -> dict[str, Any]:
    """An audit.json (or a `check --json` document, which carries the same sections), read by the
    bounded document reader and checked field by field (one line naming the JSON path)."""
    from skillaudit.util.documents import check_schema, read_document

    doc = read_document(path)
    if not isinstance(doc, dict) or doc.get("schema") not in ("skillaudit.audit/v1", CHECK_SCHEMA):
        raise InputError(f"{path}: not an audit.json (skillaudit.audit/v1) or a check --json document")
    for key in ("metrics", "recommendations"):
        if not isinstance(doc.get(key), dict):
            raise InputError(f"{path}: lacks the '{key}' section")
    check_schema(doc, _AUDIT_SPEC, path)
    return doc


def _harmful(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, skill) -> the recommendation, for skills recommended prune, or rewrite for harm."""
    out = {}
    for r in doc["recommendations"].get("recommendations", []):
        if r.get("scope", "skill") != "skill":
            continue
        ev = r.get("evidence") or {}
        harmful = r["action"] == "prune" or (r["action"] == "rewrite" and bool(
            ev.get("harmful") or ev.get("sign_differs")))
        if harmful:
            for m in r.get("models") or ["*"]:
                out[(m, r["skill_id"])] = r
    return out


def _pooled_groups(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["model"]: g for g in doc["metrics"].get("groups", []) if g.get("benchmark") == "*"}


def _library(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    rows = doc.get("library")
    if rows is None:
        rows = doc["recommendations"].get("library", [])
    return {(e["model"], e["benchmark"]): e for e in rows}


def _se(ci: Any) -> float | None:
    if not ci or ci[0] is None or ci[1] is None:
        return None
    return (ci[1] - ci[0]) / (2 * _Z)


def rae_change(old: dict[str, Any], new: dict[str, Any]) -> tuple[float, list[float] | None] | None:
    """new RAE - old RAE and a 95% interval (independent runs: standard errors from the two CIs)."""
    if old.get("rae") is None or new.get("rae") is None:
        return None
    d = new["rae"] - old["rae"]
    s1, s2 = _se(old.get("rae_ci")), _se(new.get("rae_ci"))
    if s1 is None or s2 is None:
        return d, None
    se = math.sqrt(s1 * s1 + s2 * s2)
    return d, [d - _Z * se, d + _Z * se]


def headline_verdict(g: dict[str, Any], alpha: float = 0.05) -> str:
    """hurts | helps | both-ways | unclear | too-few for a pooled metrics group (the audit's headline rule)."""
    p = g.get("p_cond", g.get("mcnemar_p_cond"))
    if not g.get("reportable") or g.get("rae") is None:
        return "too-few"
    if p is not None and p <= alpha:
        return "hurts" if g["rae"] < 0 else "helps"
    from skillaudit.analysis.metrics import works_both_ways

    return "both-ways" if works_both_ways(g, alpha) else "unclear"


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What changed from one audit to the next (`skillaudit.diff/v1`)."""
    og, ng = _pooled_groups(old), _pooled_groups(new)
    models = []
    for m in sorted(set(og) | set(ng)):
        o, n = og.get(m), ng.get(m)
        row: dict[str, Any] = {"model": m, "old_verdict": headline_verdict(o) if o else None,
                               "new_verdict": headline_verdict(n) if n else None,
                               "old_rae": o.get("rae") if o else None, "new_rae": n.get("rae") if n else None}
        ch = rae_change(o, n) if o and n else None
        row["rae_change"], row["rae_change_ci"] = (ch if ch else (None, None))
        models.append(row)
    ol, nl = _library(old), _library(new)
    library = [{"model": k[0], "benchmark": k[1], "old": ol[k]["verdict"] if k in ol else None,
                "new": nl[k]["verdict"] if k in nl else None}
               for k in sorted(set(ol) | set(nl)) if (ol.get(k) or {}).get("verdict") != (nl.get(k) or {}).get("verdict")]

    def actions(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
        out = {}
        for r in doc["recommendations"].get("recommendations", []):
            if r.get("scope", "skill") == "skill":
                for m in r.get("models") or ["*"]:
                    out[(m, r["skill_id"])] = r["action"]
        return out

    oa, na = actions(old), actions(new)
    skills = [{"model": k[0], "skill_id": k[1], "old": oa.get(k), "new": na.get(k)}
              for k in sorted(set(oa) | set(na)) if oa.get(k) != na.get(k)]
    oh, nh = _harmful(old), _harmful(new)
    return {"schema": DIFF_SCHEMA, "models": models, "library": library, "skills": skills,
            "newly_harmful": [{"model": m, "skill_id": s} for m, s in sorted(set(nh) - set(oh))],
            "no_longer_harmful": [{"model": m, "skill_id": s} for m, s in sorted(set(oh) - set(nh))]}


def check(doc: dict[str, Any], fail_on: tuple[str, ...], baseline: dict[str, Any] | None = None
          ) -> list[Failure]:
    """The failures of `doc` (audit sections of the current runs) under the `fail_on` rules."""
    bad = [f for f in fail_on if f not in FAIL_ON]
    if bad:
        raise InputError(f"--fail-on {bad[0]}: expected one of {', '.join(FAIL_ON)}")
    if "regression" in fail_on and baseline is None:
        raise InputError("--fail-on regression needs --baseline AUDIT.json (the last known good audit)")
    out: list[Failure] = []
    if "library" in fail_on:
        for (m, b), e in sorted(_library(doc).items()):
            if e["verdict"] == "library-wide" and e.get("direction") == "harm":
                out.append(Failure("library", f"{m}{'' if b == '*' else ' on ' + b}: {e['text']}",
                                   model=m, benchmark=b, evidence={
                                       "mean_effect": e.get("mean_effect"),
                                       "mean_effect_ci": e.get("mean_effect_ci"),
                                       "heterogeneity_p": e.get("heterogeneity_p")}))
    if "harmful" in fail_on:
        for (m, s), r in sorted(_harmful(doc).items()):
            out.append(Failure("harmful", f"{s} ({m}): {r['action']}: {r['reason']}", model=m,
                               skill_id=s, evidence=r.get("evidence") or {}))
    if "regression" in fail_on and baseline is not None:
        d = diff(baseline, doc)
        for x in d["newly_harmful"]:
            r = _harmful(doc)[(x["model"], x["skill_id"])]
            out.append(Failure("regression", f"{x['skill_id']} ({x['model']}): newly harmful: {r['reason']}",
                               model=x["model"], skill_id=x["skill_id"]))
        for row in d["models"]:
            o, n = row["old_verdict"], row["new_verdict"]
            if o and n and _HEADLINE_RANK[n] > _HEADLINE_RANK[o]:
                out.append(Failure("regression", f"{row['model']}: verdict {o} -> {n}", model=row["model"]))
            ci = row["rae_change_ci"]
            if ci and ci[1] < 0:
                out.append(Failure("regression", f"{row['model']}: RAE {_pp(row['old_rae'])} -> "
                                   f"{_pp(row['new_rae'])} (change {_pp(row['rae_change'])}{_ci(ci)})",
                                   model=row["model"], evidence={"rae_change": row["rae_change"],
                                                                 "rae_change_ci": ci}))
        for x in d["library"]:
            if x["old"] and x["new"] and _LIBRARY_RANK[x["new"]] > _LIBRARY_RANK[x["old"]] and \
                    _library(doc)[(x["model"], x["benchmark"])].get("direction") == "harm":
                out.append(Failure("regression", f"{x['model']}{'' if x['benchmark'] == '*' else ' on ' + x['benchmark']}: "
                                   f"library verdict {x['old']} -> {x['new']}", model=x["model"],
                                   benchmark=x["benchmark"]))
    return out


def check_document(metrics: Any, attribution: Any, recommendations: Any) -> dict[str, Any]:
    """The audit sections `check` judges: the metrics, the library-level effects and the
    recommendations (results of the audit flow, `skillaudit.audit.run_audit`)."""
    return {"metrics": metrics.to_dict(), "library": [e.to_dict() for e in attribution.library],
            "recommendations": recommendations.to_dict()}
