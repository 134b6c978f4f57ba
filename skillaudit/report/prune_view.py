"""`skillaudit prune` on the terminal: one line per decision, grouped by action, at most 100 wide.

`prune_lines` gives the short view: the library-level actions, then one line per skill that is to be
pruned, rewritten, merged or needs data (its models, the rule that decided it in a few words and one
key figure), then the entries kept or never retrieved as wrapped lists of names, and the projection.
`explain_lines` gives one skill's full evidence per model (`prune --explain SKILL`); `prune --json`
and the report hold everything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skillaudit.stats import ci_text as _ci
from skillaudit.stats import pp_text as _pp
from skillaudit.util.term import clean, wrap

WIDTH = 100
#: actions listed one line per skill, in this order; the others are listed by name
LINE_ACTIONS = ("prune", "rewrite", "merge", "needs-data")
NAME_ACTIONS = ("keep", "unused")


def _q(q: float | None) -> str:
    return "" if q is None else f", q {q:.3f}" if q >= 0.001 else ", q < 0.001"


def _flips(ev: dict[str, Any]) -> str:
    return f"{ev.get('b', 0)} rescues vs {ev.get('c', 0)} harms on {ev.get('n_tasks', 0)} tasks"


def _near(ev: dict[str, Any]) -> str:
    nd = ev.get("near_duplicate") or {}
    return f"like {nd.get('skill_id')} (similarity {nd.get('similarity', 0):.2f})" if nd else ""


def _both(bw: dict[str, Any]) -> str:
    w = bw["both_ways"]
    return (f"rescue {w['rescue_rate'] * 100:.0f}% / harm {w['harm_rate'] * 100:.0f}% vs "
            f"{w['ref_rescue_rate'] * 100:.0f}% / {w['ref_harm_rate'] * 100:.0f}% without a skill")


def _sign(ev: dict[str, Any]) -> str:
    return f"{_pp(ev.get('coef'))} on {ev.get('model')}"


#: the key figure each rule cites, from its recommendation's evidence (the first model's, for a row
#: over several models; `--explain` shows every model's)
KEY_FIGURE: dict[str, Callable[[dict[str, Any]], str]] = {
    "L001": lambda ev: f"{_pp(ev.get('mean_effect'))} per injected skill{_ci(ev.get('mean_effect_ci'))}",
    "L002": lambda ev: f"{_pp(ev.get('mean_effect'))} per injected skill{_ci(ev.get('mean_effect_ci'))}",
    "L000": lambda ev: "retrieval follows failure; no control arms",
    "L003": lambda ev: _both(ev.get("both_ways") or {}),
    "S000": lambda ev: "use unknown",
    "S001": lambda ev: "retrieved on no task",
    "S100": lambda ev: f"{_flips(ev)}; verify with control arms",
    "S101": lambda ev: f"{_flips(ev)}; {_near(ev)}",
    "S102": _flips,
    "S103": lambda ev: f"withheld: {_pp(ev.get('causal_effect'))}{_ci(ev.get('causal_ci'))}{_q(ev.get('causal_q'))}",
    "S104": lambda ev: f"vs others {_pp(ev.get('relative_effect'))}{_ci(ev.get('relative_ci'))}{_q(ev.get('relative_q'))}",
    "S105": lambda ev: (f"vs others {_pp(ev.get('relative_effect'))}{_ci(ev.get('relative_ci'))}"
                        f"{_q(ev.get('relative_q'))}; ~{ev.get('mask_reruns', 0):,} mask re-runs"),
    "S106": lambda ev: (f"judged {(ev.get('judged') or {}).get('wins', 0)}-{(ev.get('judged') or {}).get('ties', 0)}-"
                        f"{(ev.get('judged') or {}).get('losses', 0)} (win-tie-loss){_q(ev.get('judged_q'))}"),
    "S107": lambda ev: (f"{(ev.get('efficiency') or {}).get('ratio', 0):.1f}× "
                        f"{(ev.get('efficiency') or {}).get('measure', '')} with vs without"),
    "S201": _flips,
    "S202": _flips,
    "S301": lambda ev: f"{_pp(ev.get('coef'))}{_ci(ev.get('coef_ci'))}; {_flips(ev)}",
    "S401": _near,
    "S501": lambda ev: f"aliases: {', '.join(map(str, ev.get('aliases') or [])) or '–'}",
    "S502": lambda ev: f"vs others {_pp(ev.get('relative_effect'))}{_ci(ev.get('relative_ci'))}",
    "S503": lambda ev: (f"{ev.get('n_tasks', 0)} tasks; ~{ev['more_tasks_needed']:,} more needed"
                        if ev.get("more_tasks_needed") else f"{ev.get('n_tasks', 0)} retrieving tasks"),
    "S504": _flips,
    "B001": lambda ev: ", ".join(f"{b} {_pp((v or {}).get('rae_k'))}" for b, v in (ev.get("per_benchmark") or {}).items()),
    "M001": _sign,
}


def key_figure(rec: Any) -> str:
    """One figure for a recommendation's line (empty when its rule cites none)."""
    fmt = KEY_FIGURE.get(rec.rule or "")
    try:
        return fmt(rec.evidence) if fmt else ""
    except (KeyError, TypeError, ValueError):
        return ""


def _models(rec: Any, n_models: int) -> str:
    if n_models <= 1:
        return ""
    return f"all {n_models} models" if len(rec.models) == n_models else ", ".join(rec.models)


def _fit(cells: list[str], widths: list[int], width: int, short_rule: str | None = None) -> list[str]:
    """One decision's line, at most `width` wide, its key figure (the last cell) never cut: the rule's
    words give way to its code alone (`short_rule`) first, then the figure moves, wrapped whole, to
    the lines below."""
    def join(cs: list[str], ws: list[int] = widths) -> str:
        return ("  " + "  ".join(c.ljust(w) for c, w in zip(cs[:-1], ws, strict=False)) + "  " + cs[-1]).rstrip()

    line = join(cells)
    if len(line) <= width:
        return [line]
    if short_rule is not None:
        line = join([*cells[:-2], short_rule, cells[-1]], [*widths[:-1], len(short_rule)])
        if len(line) <= width:
            return [line]
    head = join([*cells[:-1], ""])
    if len(head) > width:
        head = head[:width - 1] + "…"
    return [head, *wrap(cells[-1], width, indent="      ")]


def prune_lines(audit: Any, width: int = WIDTH) -> list[str]:
    """The short view of an `Audit`'s recommendations (see the module doc): every line at most `width` wide."""
    result = audit.recommendations
    models = list(result.settings.get("models") or [])
    n_models = len(models)
    out: list[str] = []
    lib = result.library_actions()
    if lib:
        out.append("library level")
        for r in lib:
            where = "all benchmarks" if r.benchmark in (None, "*") else r.benchmark
            who = clean(r.models[0]) if r.models else "all models"
            out += wrap(f"{r.action} for {who} ({where}): {r.rule} {r.summary}", width)
            out += wrap(key_figure(r), width, indent="    ")
    recs = result.skill_recommendations()
    rows = {a: [r for r in recs if r.action == a] for a in (*LINE_ACTIONS, *NAME_ACTIONS)}
    id_w = min(28, max((len(clean(r.skill_id)) for a in LINE_ACTIONS for r in rows[a]), default=8))
    model_w = min(24, max((len(_models(r, n_models)) for a in LINE_ACTIONS for r in rows[a]), default=0))
    for action in LINE_ACTIONS:
        if not rows[action]:
            continue
        out.append(f"{action} ({len(rows[action])})")
        for r in rows[action]:
            sid = clean(r.skill_id)
            sid = sid if len(sid) <= id_w else sid[:id_w - 1] + "…"
            cells = [sid] + ([_models(r, n_models)] if n_models > 1 else [])
            widths = [id_w] + ([model_w] if n_models > 1 else [])
            out += _fit([*cells, f"{r.rule} {r.summary}", clean(key_figure(r))], [*widths, 36], width,
                        short_rule=r.rule or "")
    for action in NAME_ACTIONS:
        if rows[action]:
            names = ", ".join(clean(r.skill_id) for r in rows[action])
            out += wrap(f"{action} ({len(rows[action])}): {names}", width, indent="")
    p = result.projected
    out += wrap(f"Projection (not a measurement) without the {len(p.removed)} pruned skill(s): RAE "
                 f"{_pp(p.rae_before)} -> {_pp(p.rae_after)}, OAE {_pp(p.oae_before)} -> {_pp(p.oae_after)}",
                 width, indent="")
    if recs:
        out.append("The evidence per model: skillaudit prune ... --explain SKILL (or --json).")
    return out


def explain_lines(audit: Any, skill_id: str, width: int = WIDTH) -> list[str]:
    """Everything the recommendations of `skill_id` (in an `Audit`) rest on: each decision (action,
    rule, models), each model's own rule and reason, and the figures of each decision's evidence;
    [] if none."""
    result = audit.recommendations
    recs = [r for r in result.recommendations if r.skill_id == skill_id]
    if not recs:
        return []
    out = [clean(skill_id)]
    per: dict[str, Any] = {}
    for r in recs:
        out += wrap(f"{r.action} by {r.rule} ({r.summary}) for {', '.join(r.models) or 'all models'}", width)
        mine = r.evidence.get("per_model") or {}
        per.update(mine)
        if mine and r.rule not in {d.get("rule") for d in mine.values()}:  # decided across models (M001)
            out += wrap(f"reason: {clean(r.reason)}", width, indent="    ")
    if per:
        out.append("  per model:")
        for model, d in per.items():
            out += wrap(f"{model}: {d.get('action')} by {d.get('rule')}: {clean(d.get('reason', ''))}", width,
                         indent="    ")
    else:
        for r in recs:
            out += wrap(f"reason: {clean(r.reason)}", width)
    for r in recs:
        ev = {k: v for k, v in r.evidence.items() if k != "per_model"}
        figures = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in ev.items()
                            if isinstance(v, (int, float)) and not isinstance(v, bool))
        if figures:
            out += wrap(f"figures ({clean(ev.get('model') or ', '.join(r.models))}): {figures}", width)
    return out
