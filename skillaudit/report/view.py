"""What the HTML and Markdown templates show, prepared once from the audit document.

Numbers stay numbers here; the templates format them with the filters below (fractions are shown
as percentage points). Skill and task text is passed through untouched: the HTML environment
escapes it (autoescape), the Markdown one with the `md` filter.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from skillaudit.report.figures import FIGURES
from skillaudit.report.render import (
    NOT_RECORDED,
    arm_method,
    efficiency_view,
    judged_view,
    pp,
    pp_ci,
    pval,
)
from skillaudit.util.term import clean

#: at most this many skills in the report's ranked table (all of them are in skills.csv)
MAX_SKILL_ROWS = 300
MAX_NEAR_DUPLICATES = 100
ACTION_ORDER = ("prune", "rewrite", "merge", "needs-data", "keep", "unused")
LIBRARY_ACTIONS = ("gate-retrieval", "reduce-depth", "verify")


# ---------------------------------------------------------------- filters
def num(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.2f}"
    return f"{x:,}"


def signed(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:+.2f}"
    return f"{x:+d}"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def md(text: Any) -> str:
    """Untrusted text made inert in Markdown: one line, every special character escaped."""
    if text is None:
        return ""
    s = clean(" ".join(str(text).split()))  # controls as visible escapes: `cat report.md` acts on none
    s = s.replace("&", "&amp;")
    return _MD_SPECIAL.sub(r"\\\1", s)


FILTERS = {"pp": pp, "pp_ci": pp_ci, "pval": pval, "num": num, "signed": signed}


# ---------------------------------------------------------------- the view model
def skill_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per skill (rank order: most harmful first) joined with its recommendation,
    description and cluster."""
    recs: dict[tuple[str | None, str], dict[str, Any]] = {}
    for r in (doc.get("recommendations") or {}).get("recommendations", []):
        if r.get("scope", "skill") != "skill":
            continue
        for m in r.get("models") or [None]:
            recs.setdefault((m, r["skill_id"]), r)
        recs.setdefault((None, r["skill_id"]), r)
    desc = (doc.get("skills") or {}).get("descriptions") or {}
    cluster_of: dict[str, int] = {}
    harmful_cluster: set[str] = set()
    for c in (doc.get("clusters") or {}).get("clusters", []):
        for m in c["skills"]:
            cluster_of[m] = c["id"]
            if c.get("harmful"):
                harmful_cluster.add(m)
    out = []
    for r in doc["skills"]["skills"]:
        rec = recs.get((r.get("model"), r["skill_id"])) or recs.get((None, r["skill_id"]), {})
        # a recommendation shared by several models carries each model's own evidence: the row of
        # model m shows m's reason, never another model's (its re-runs, its intervals)
        own = ((rec.get("evidence") or {}).get("per_model") or {}).get(r.get("model")) or {}
        out.append({
            **r,
            "action": own.get("action", rec.get("action", "")),
            "rule": own.get("rule", rec.get("rule")) or "",
            "reason": own.get("reason", rec.get("reason", "")),
            "description": desc.get(r["skill_id"], ""),
            "cluster": cluster_of.get(r["skill_id"]),
            "in_harmful_cluster": r["skill_id"] in harmful_cluster,
        })
    return out


def _metric_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for g in metrics.get("groups", []):
        flags = []
        if g.get("sign_disagreement"):
            flags.append("sign")
        unlogged = bool(g.get("n_pairs")) and g.get("n_use_unlogged", 0) == g["n_pairs"]
        if unlogged:  # offered, use not recorded: no retrieval count to be "too small"
            flags.append("use not logged")
        elif not g.get("reportable"):
            flags.append("n<min")
        rows.append({**g, "flags": flags, "pooled": g.get("benchmark") == "*", "use_not_logged": unlogged})
    # one benchmark per model: the pooled row repeats it, so show it once
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    out = []
    for model_rows in by_model.values():
        if len(model_rows) == 2 and model_rows[1]["pooled"]:
            out.append(model_rows[0])
        else:
            out.extend(model_rows)
    return out


def _score_text(d: dict[str, Any] | None) -> str:
    if not d or not d.get("n_pairs"):
        return "-"
    ci = d.get("ci")
    rae = d.get("rae")
    body = f"net {d['net']:+d} over {d['n_tasks']} task(s)"
    if rae is not None and ci:
        body += f", {100 * rae:+.1f} pp [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"
    return body


def triggers_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The trigger view's rows: per model the shadowing split, per skill should-fire against fired."""
    views = doc.get("triggers") or []
    split_rows, confusion_rows = [], []
    for v in views:
        sp = v.get("split")
        if sp:
            share = sp.get("shadowing_share")
            split_rows.append({"model": v["model"], "wrong": _score_text(sp.get("wrong_skill")),
                               "right": _score_text(sp.get("right_skill")), "none": sp.get("no_skill_fired", 0),
                               "share": f"{100 * share:.0f}%" if share is not None else "-"})
        for s in v.get("skills", []):
            c = s.get("confusion")
            if c is None:
                continue
            confusion_rows.append({"model": v["model"], "skill": s["skill_id"], **c,
                                   "target": s.get("target") or "-",
                                   "not_expected": _score_text(s.get("where_not_expected")),
                                   "expected": _score_text(s.get("where_expected"))})
    confusion_rows.sort(key=lambda r: (r["target"] == "-", -r["fired_not_expected"], r["model"], r["skill"]))
    method = views[0].get("method", "") if views else ""
    return {"split_rows": split_rows, "confusion_rows": confusion_rows[:MAX_SKILL_ROWS],
            "n_confusion": len(confusion_rows), "method": method}


def build_view(doc: dict[str, Any], figure_src: dict[str, str]) -> dict[str, Any]:
    """Everything a template needs; `figure_src` maps figure file name -> image source."""
    rows = skill_rows(doc)
    retrieved = [r for r in rows if r.get("n_retrieved", 0) > 0]
    counts = {a: sum(1 for r in rows if r["action"] == a) for a in ACTION_ORDER}
    counts = {**dict.fromkeys(LIBRARY_ACTIONS, 0), **counts}
    for r in (doc.get("recommendations") or {}).get("recommendations", []):
        if r.get("scope") == "library":
            counts[r["action"]] += 1
    metrics = doc["metrics"]
    mrows = _metric_rows(metrics)
    clusters = doc.get("clusters")
    harmful_clusters = [c for c in (clusters or {}).get("clusters", []) if c.get("harmful")]
    multi = [c for c in (clusters or {}).get("clusters", []) if len(c["skills"]) > 1]
    near = (clusters or {}).get("near_duplicates") or []
    rec_doc = doc.get("recommendations") or {}
    proj = rec_doc.get("projected")
    library = doc.get("library") or []
    models = list(dict.fromkeys(r.get("model") for r in rows if r.get("model")))
    figures = [{"name": k, "title": FIGURES.get(k, k), "src": v} for k, v in figure_src.items()]
    graph = doc.get("graph") or {}
    return {
        "doc": doc,
        "headline": doc["headline"],
        "metric_rows": mrows,
        "any_sign": any("sign" in r["flags"] for r in mrows),
        "any_small": any("n<min" in r["flags"] for r in mrows),
        "min_cond": metrics.get("settings", {}).get("min_cond"),
        "level": metrics.get("settings", {}).get("level", 0.95),
        "metrics_method": metrics.get("method") or _method_of(metrics),
        "pooled_groups": [g for g in metrics.get("groups", []) if g.get("benchmark") == "*"],
        "skill_rows": rows[:MAX_SKILL_ROWS],
        "n_skill_rows": len(rows),
        "n_retrieved_skills": len(retrieved),
        "action_counts": counts,
        "action_rows": {a: [r for r in rows if r["action"] == a] for a in ACTION_ORDER},
        "clusters": clusters,
        "harmful_clusters": harmful_clusters,
        "n_multi_clusters": len(multi),
        "near_duplicates": near[:MAX_NEAR_DUPLICATES],
        "n_near_duplicates": (clusters or {}).get("near_duplicates_total", len(near)),
        "n_near_duplicates_kept": len(near),
        "projected": proj,
        "projected_per_model": rec_doc.get("projected_per_model") or [],
        "library": library,
        "library_method": _library_method(library),
        "regression_method": ((doc["skills"].get("settings") or {}).get("method") or {}).get(
            "coef_interval", NOT_RECORDED),
        "library_actions": [r for r in rec_doc.get("recommendations", []) if r.get("scope") == "library"],
        "multi_model": len(models) > 1,
        "selection_warnings": [v for v in doc["headline"].get("per_model", []) if v.get("selection_text")],
        "arm_rows": [{"model": g["model"], "benchmark": g["benchmark"], "arm": name, **a}
                     for g in metrics.get("groups", []) for name, a in (g.get("arms") or {}).items()],
        "aa_rows": [g for g in metrics.get("groups", []) if g.get("aa_flip_rate") is not None],
        "cluster_test": _cluster_test(clusters),
        "efficiency": efficiency_view(doc),
        "triggers": triggers_view(doc),
        "judged": judged_view(metrics.get("groups", [])),
        "arm_method": arm_method([a for g in metrics.get("groups", []) for a in (g.get("arms") or {}).values()]),
        "injection": [v for v in doc["headline"].get("per_model", []) if v.get("injection_text")],
        "causal_models": [m for m in (doc.get("skills") or {}).get("models", []) if m.get("causal")],
        "causal_rows": [r for r in rows if r.get("causal_effect") is not None],
        "verify": doc.get("verify"),
        "graph": graph,
        # reports written before the export was bounded lack these keys
        "graph_backbone": graph.get("export_co_retrieval_edges", graph.get("co_retrieval_edges", 0))
        < graph.get("co_retrieval_edges", 0),
        "n_interference": graph.get("interference_total", len(graph.get("interference") or [])),
        "figures": {f["name"]: f for f in figures},
        "figure_list": figures,
        "inputs": doc["inputs"],
        "settings": doc["inputs"].get("settings", {}),
        "notes": doc.get("notes") or [],
        "skills_settings": doc["skills"].get("settings", {}),
        "totals": doc["skills"].get("totals", {}),
    }


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _method_of(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics' method for a stored document written before it carried one: not recorded (the
    report renders what the audit says, never what an estimator would have said)."""
    return {"level": metrics.get("settings", {}).get("level", 0.95),
            "intervals": {"rae": f"interval {NOT_RECORDED}", "agg_lift": f"interval {NOT_RECORDED}"},
            "tests": {}, "sentence": f"Percentage points; the intervals and tests are {NOT_RECORDED}."}


def _cluster_test(clusters: dict[str, Any] | None) -> str:
    """How a cluster was found harmful, from the clusters section's own `harm_test`."""
    t = (clusters or {}).get("harm_test")
    if not t:
        return f"the pooled test {NOT_RECORDED}"
    return f"{t['pooled']}, tested with the task as the unit ({t['test']}): p ≤ {t['alpha']:g}"


def _library_method(library: list[dict[str, Any]]) -> dict[str, str]:
    """The library table's estimators in words, from its entries' own `method` (the distinct ones)."""
    means = sorted({(e.get("method") or {}).get("mean") or "" for e in library} - {""})
    tests = sorted({(e.get("method") or {}).get("heterogeneity") or e.get("heterogeneity_test") or ""
                    for e in library} - {""})
    return {"mean": "; or ".join(means) or NOT_RECORDED, "heterogeneity": "; or ".join(tests) or NOT_RECORDED}
