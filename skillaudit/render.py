"""Human-readable terminal tables (rich). Figures in percentage points; JSON stays in fractions."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .metrics import MetricsResult


def console() -> Console:
    # soft_wrap off and a fixed width when piped keep tables stable in logs and tests
    return Console(highlight=False, width=None if Console().is_terminal else 160)


def pp(x: float | None, signed: bool = True, digits: int = 1) -> str:
    """A fraction as percentage points: 0.052 -> '+5.2'."""
    if x is None:
        return "–"
    return f"{x * 100:+.{digits}f}" if signed else f"{x * 100:.{digits}f}"


def pp_ci(ci: list[float] | None) -> str:
    if not ci:
        return ""
    return f"[{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]"


def pval(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def metrics_table(result: MetricsResult, out: Console | None = None) -> None:
    """Print the metrics table: one row per (model, benchmark), pooled rows last per model."""
    out = out or console()
    t = Table(title="Paired skill effects (percentage points; 95% CI from a task-level bootstrap)")
    for col, just in [
        ("model", "left"), ("benchmark", "left"), ("pairs", "right"), ("retrieved", "right"),
        ("acc on", "right"), ("acc off", "right"), ("agg lift", "right"), ("OAE", "right"),
        ("RAE", "right"), ("RAE 95% CI", "right"), ("b/c cond", "right"), ("p cond", "right"),
        ("Δskip", "right"), ("", "left"),
    ]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    any_sign = any_small = False
    for g in result.groups:
        flag = ""
        if g.sign_disagreement:
            flag = "⚠ sign"
            any_sign = True
        if not g.reportable:
            flag = (flag + " n<min").strip()
            any_small = True
        style = "dim" if not g.reportable else ("bold" if g.benchmark == "*" else "")
        t.add_row(
            g.model, g.benchmark, str(g.n_pairs), f"{g.n_cond} ({pp(g.trigger_rate, False)}%)",
            pp(g.acc_enabled, False), pp(g.acc_disabled, False), pp(g.agg_lift), pp(g.oae),
            pp(g.rae), pp_ci(g.rae_ci), f"{g.cond_b}/{g.cond_c}", pval(g.mcnemar_p_cond),
            pp(g.delta_skip), Text(flag, style="bold red" if "sign" in flag else ""),
            style=style,
        )
    out.print(t)
    notes = []
    if any_sign:
        notes.append(
            "⚠ sign: the aggregate lift and RAE point in opposite directions — comparing tasks that "
            "retrieved with tasks that did not says one thing, the same tasks run with and without "
            "skills say the other."
        )
    if any_small:
        notes.append(f"n<min: fewer than {result.settings['min_cond']} retrieval-triggered pairs; not reportable.")
    if result.n_unpaired:
        notes.append(f"{result.n_unpaired} unpaired record(s) left out.")
    for n in notes:
        out.print(n)


def kv(out: Console, rows: list[tuple[str, Any]]) -> None:
    for k, v in rows:
        out.print(f"{k}: {v}")


# ================================================================ rank / prune (attribution.py, recommend.py)
def rank_table(result: Any, top: int | None = None, out: Console | None = None) -> None:
    """Per-skill table, most harmful first: exposure counts, share, rae_k and regression coefficient."""
    out = out or console()
    tot = result.totals
    scheme = result.settings.get("attribution")
    rows = list(result.skills)[: top if top else None]
    t = Table(title=f"Skills ranked by net rescues (most harmful first; {scheme} shares; pp = percentage points)")
    for col, just in [
        ("skill", "left"), ("retrieved", "right"), ("b/c", "right"), ("net", "right"),
        ("share", "right"), ("RAE_k pp", "right"), ("q", "right"), ("coef pp", "right"),
        ("coef 95% CI", "right"), ("excl b/c/n", "right"), ("", "left"),
    ]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    notes: set[str] = set()
    for s in rows:
        flag = []
        if s.in_library is False:
            flag.append("not in library")
            notes.add("not in library: retrieved by the agent but missing from --skills.")
        if s.identifiable is False and s.aliases:
            flag.append("≡ " + ", ".join(s.aliases[:2]) + ("…" if len(s.aliases) > 2 else ""))
            notes.add("≡ X: never retrieved apart from X; the regression reports their joint effect only.")
        if s.n_retrieved == 0:
            flag.append("unused")
        coef = pp(s.coef) if s.coef is not None else (f"≡{pp(s.alias_coef)}" if s.alias_coef is not None else "–")
        style = "red" if (s.q_value is not None and s.q_value <= 0.1 and s.net < 0) else (
            "dim" if s.n_retrieved == 0 else "")
        t.add_row(
            s.skill_id, str(s.n_retrieved), f"{s.b}/{s.c}", f"{s.net:+d}", f"{s.share:+.2f}",
            pp(s.rae_k), pval(s.q_value), coef, pp_ci(list(s.coef_ci) if s.coef_ci else None),
            f"{s.exclusive_b}/{s.exclusive_c}/{s.exclusive_n}", " ".join(flag), style=style,
        )
    out.print(t)
    n = tot["n_cond"]
    rae = (tot["cond_b"] - tot["cond_c"]) / n if n else None
    out.print(
        f"retrieving pairs: {n}, rescues b={tot['cond_b']}, harms c={tot['cond_c']}, RAE {pp(rae)} pp; "
        f"shares add up to b - c = {tot['cond_b'] - tot['cond_c']:+d}."
    )
    if top and len(result.skills) > top:
        out.print(f"(top {top} of {len(result.skills)} skills; --top 0 shows all)")
    out.print("q: Benjamini-Hochberg over exact McNemar tests; coef: ridge regression of flips on the "
              "retrieved skills (separates co-retrieved skills), task-level bootstrap CI.")
    for note in sorted(notes):
        out.print(note)


def prune_table(result: Any, out: Console | None = None) -> None:
    """Recommendations (one line per skill) and the projected RAE/OAE without the prune set."""
    out = out or console()
    colour = {"prune": "bold red", "rewrite": "yellow", "merge": "cyan", "keep": "green",
              "needs-data": "", "unused": "dim"}
    t = Table(title="Recommendations per skill")
    t.add_column("skill")
    t.add_column("action")
    t.add_column("reason", overflow="fold")
    for r in result.recommendations:
        t.add_row(r.skill_id, Text(r.action, style=colour.get(r.action, "")), r.reason)
    out.print(t)
    p = result.projected
    counts = {a: len(result.by_action(a)) for a in ("prune", "rewrite", "merge", "needs-data", "keep", "unused")}
    out.print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    out.print(
        f"Projection (not a measurement) without the {len(p.removed)} pruned skill(s): "
        f"RAE {pp(p.rae_before)} -> {pp(p.rae_after)} pp, OAE {pp(p.oae_before)} -> {pp(p.oae_after)} pp; "
        f"{p.n_fallback} retrieving pair(s) assumed to fall back to their disabled outcome."
    )
