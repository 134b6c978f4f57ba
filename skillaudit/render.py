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


def pp(x: float | None, signed: bool = True) -> str:
    """A fraction as percentage points: 0.052 -> '+5.2'."""
    if x is None:
        return "–"
    return f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}"


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
