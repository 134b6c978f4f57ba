"""Human-readable terminal tables (rich). Figures in percentage points; JSON stays in fractions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table as _RichTable
from rich.text import Text

from skillaudit.util.term import clean

if TYPE_CHECKING:
    from skillaudit.analysis.metrics import MetricsResult


def _plain(obj: Any) -> Any:
    """A string as literal Text with terminal controls escaped (no rich markup or emoji codes are
    read from data: a skill id like `[link=...]` stays text); one-style Text likewise."""
    if isinstance(obj, str):
        return Text(clean(obj))
    if isinstance(obj, Text) and not obj.spans:
        return Text(clean(obj.plain), style=obj.style, justify=obj.justify, overflow=obj.overflow)
    return obj


class Table(_RichTable):
    """rich's Table whose title and cells are `_plain`: model names and skill ids come from logs."""

    def __init__(self, *headers: Any, title: Any = None, **kw: Any) -> None:
        super().__init__(*headers, title=_plain(title) if title is not None else None, **kw)

    def add_row(self, *renderables: Any, **kw: Any) -> None:
        super().add_row(*(_plain(r) for r in renderables), **kw)


#: a piped table with more rows than this is drawn by `_fast_table` (rich took 7.5 s for 8,000 rows)
_FAST_ROWS = 200


def _fast_table(table: Table, width: int) -> str | None:
    """The text rich draws for `table` on a console that is not a terminal, written directly.

    Only for what rich would draw without wrapping: HEAVY_HEAD box, padding (0, 1), one-line
    plain cells, natural width within `width`, a title that fits; anything else returns None
    and rich draws it. tests/test_render.py checks it is rich's output character for character.
    """
    from rich import box as _box

    if (table.box is not _box.HEAVY_HEAD or table.padding != (0, 1, 0, 1) or not table.show_header
            or not table.show_edge or table.show_lines or table.expand or table.caption is not None
            or table.leading or table.collapse_padding or not table.pad_edge or table.width is not None
            or table.show_footer or table.title_justify != "center" or table.min_width is not None):
        return None
    columns = []
    for col in table.columns:
        if (col.min_width or col.max_width or col.ratio or col.width or col.no_wrap
                or col.justify not in ("left", "right") or not isinstance(col.header, str)):
            return None
        texts = [col.header]
        for cell in col._cells:
            if isinstance(cell, Text):
                texts.append(cell.plain)
            elif isinstance(cell, str):
                texts.append(cell)
            else:
                return None
        columns.append(texts)
    title = table.title.plain if isinstance(table.title, Text) else table.title
    if title is not None and not isinstance(title, str):
        return None
    return _layout(title, [col.justify for col in table.columns], columns, width)


def _layout(title: str | None, justify: list[str], columns: list[list[str]], width: int) -> str | None:
    """rich's HEAVY_HEAD table as text: `columns` are each column's header then cells (plain,
    one line each). None where rich would have to wrap (too wide, a multi-line cell or title)."""
    from rich import box as _box
    from rich.cells import cell_len

    if not columns:
        return None
    joined = "".join("".join(texts) for texts in columns)
    if "\n" in joined or "\t" in joined or "\r" in joined:
        return None
    lens = [[cell_len(t) for t in texts] for texts in columns]
    widths = [max(ls) for ls in lens]
    total = sum(widths) + 3 * len(widths) + 1
    if total > width:
        return None
    if title is not None and ("\n" in title or cell_len(title) > total):
        return None
    b = _box.HEAVY_HEAD
    out = []
    if title is not None:
        excess = total - cell_len(title)
        out.append(" " * (excess // 2) + title + " " * (excess - excess // 2))
    out.append(b.top_left + b.top_divider.join(b.top * (w + 2) for w in widths) + b.top_right)

    def line(i: int, left: str, mid: str, right: str) -> str:
        parts = []
        for texts, ls, w, j in zip(columns, lens, widths, justify, strict=True):
            pad = " " * (w - ls[i])
            parts.append(" " + (texts[i] + pad if j == "left" else pad + texts[i]) + " ")
        return left + mid.join(parts) + right

    out.append(line(0, b.head_left, b.head_vertical, b.head_right))
    out.append(b.head_row_left + b.head_row_cross.join(b.head_row_horizontal * (w + 2) for w in widths)
               + b.head_row_right)
    for i in range(1, len(columns[0])):
        out.append(line(i, b.mid_left, b.mid_vertical, b.mid_right))
    out.append(b.bottom_left + b.bottom_divider.join(b.bottom * (w + 2) for w in widths) + b.bottom_right)
    return "\n".join(out) + "\n"


class LongTable:
    """A table of many rows for a console that is not a terminal: columns and rows kept as plain
    (cleaned) strings, not rich renderables (building 8,000 rich rows took 0.4 s). `CleanConsole`
    writes it with `_layout`, or as the rich `Table` it stands for (`to_rich`) where rich would
    have to wrap it: the output is rich's either way."""

    def __init__(self, title: str | None = None) -> None:
        self.title = clean(title) if title is not None else None
        self.headers: list[str] = []
        self.justify: list[str] = []
        self.rows: list[list[str]] = []
        self.styles: list[str] = []

    def add_column(self, header: str, justify: str = "left") -> None:
        self.headers.append(header)
        self.justify.append(justify)

    def add_row(self, *cells: Any, style: str = "") -> None:
        self.rows.append([clean(c.plain if isinstance(c, Text) else c) for c in cells])
        self.styles.append(style)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def layout(self, width: int) -> str | None:
        columns = [[h, *(row[j] for row in self.rows)] for j, h in enumerate(self.headers)]
        return _layout(self.title, self.justify, columns, width)

    def to_rich(self) -> Table:
        t = Table(title=self.title)
        for h, j in zip(self.headers, self.justify, strict=True):
            t.add_column(h, justify=j)  # type: ignore[arg-type]
        for row, style in zip(self.rows, self.styles, strict=True):
            t.add_row(*row, style=style)
        return t


def table_for(out: Console, n_rows: int, title: str) -> Any:
    """A `LongTable` for many rows on a console that is not a terminal, else a rich `Table`."""
    if n_rows > _FAST_ROWS and not out.is_terminal and isinstance(out, CleanConsole) and not out.record:
        return LongTable(title=title)
    return Table(title=title)


class CleanConsole(Console):
    """A Console that prints strings and one-style Text as `_plain` (see `skillaudit.util.term`)."""

    def print(self, *objects: Any, **kw: Any) -> None:
        if len(objects) == 1 and isinstance(objects[0], LongTable):
            text = None if (kw or self.is_terminal or self.record) else objects[0].layout(self.width)
            if text is not None:
                self.file.write(text)
                return
            objects = (objects[0].to_rich(),)
        if (len(objects) == 1 and not kw and isinstance(objects[0], Table) and not self.is_terminal
                and objects[0].row_count > _FAST_ROWS and not self.record):
            text = _fast_table(objects[0], self.width)
            if text is not None:
                self.file.write(text)
                return
        super().print(*(_plain(o) for o in objects), **kw)


def console() -> Console:
    # soft_wrap off and a fixed width when piped keep tables stable in logs and tests
    return CleanConsole(highlight=False, width=None if Console().is_terminal else 160)


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


def _tp(tasks: int, pairs: int) -> str:
    """'N' when every task has one pair, else 'N (M)': tasks, then pairs (tasks x epochs)."""
    return f"{tasks}" if tasks == pairs else f"{tasks} ({pairs})"


def metrics_table(audit: Any, out: Console | None = None) -> None:
    """Print the metrics table of an `Audit` (run to its metrics step): one row per (model,
    benchmark), pooled rows last per model."""
    result: MetricsResult = audit.metrics
    out = out or console()
    method = result.method()
    t = Table(title=f"Paired skill effects (percentage points; {round(method['level'] * 100)}% CI of RAE: "
                    f"{method['intervals']['rae']}, task-level)")
    for col, just in [
        ("model", "left"), ("benchmark", "left"), ("tasks (pairs)", "right"), ("retrieved", "right"),
        ("acc on", "right"), ("acc off", "right"), ("agg lift", "right"), ("OAE", "right"),
        ("RAE", "right"), ("RAE 95% CI", "right"), ("b/c cond", "right"), ("p cond", "right"),
        ("Δskip", "right"), ("", "left"),
    ]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    any_sign = any_small = any_unlogged = False
    repeats = _pooled_repeats([(g.model, g.benchmark) for g in result.groups])
    for g, again in zip(result.groups, repeats, strict=True):
        if again:
            continue  # one benchmark: the pooled row would repeat it
        unlogged = bool(g.n_pairs) and g.n_use_unlogged == g.n_pairs
        flag = ""
        if g.sign_disagreement:
            flag = "⚠ sign"
            any_sign = True
        if unlogged:
            flag = (flag + " use not logged").strip()
            any_unlogged = True
        elif not g.reportable:
            flag = (flag + " n<min").strip()
            any_small = True
        style = "dim" if not g.reportable and not unlogged else ("bold" if g.benchmark == "*" else "")
        t.add_row(
            g.model, g.benchmark, _tp(g.n_tasks, g.n_pairs),
            "not logged" if unlogged else _tp(g.n_cond_tasks, g.n_cond) + f" ({pp(g.trigger_rate, False)}%)",
            pp(g.acc_enabled, False), pp(g.acc_disabled, False), pp(g.agg_lift), pp(g.oae),
            pp(g.rae), pp_ci(g.rae_ci), "–" if unlogged else f"{g.cond_b}/{g.cond_c}",
            "–" if unlogged else pval(g.p_cond),
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
    if any_unlogged:
        notes.append("use not logged: the runs say which skills were offered, not which were used; OAE is the "
                     "effect of offering the skills (its test: "
                     + "; ".join(sorted({g.oae_p_test for g in result.groups if g.n_use_unlogged}))
                     + "); RAE and Δskip cannot be computed.")
    if result.n_unpaired:
        notes.append(f"{result.n_unpaired} unpaired record(s) left out.")
    tests = sorted({g.p_cond_test for g in result.groups})
    notes.append("p cond: " + "; ".join(tests) + " on the retrieval-triggered pairs, the task as the unit; "
                 "the RAE CI inverts it (excludes 0 exactly when p cond <= 0.05, unless --mid-p).")
    if any(g.n_tasks != g.n_pairs for g in result.groups):
        notes.append("tasks (pairs): every pair is one epoch of a task; tests and CIs count tasks.")
    for n in notes:
        out.print(n)


def arms_table(audit: Any, out: Console | None = None) -> None:
    """Counterfactual arms per group of an `Audit`'s metrics: content and context effects, the A/A flip rate."""
    result: MetricsResult = audit.metrics
    out = out or console()
    words = arm_method([a for g in result.groups for a in (g.arms or {}).values()])
    t = Table(title=f"Counterfactual arms (percentage points; 95% CI: {words['interval']}, task-level; p: "
                    f"{words['p']})")
    for col, just in [("model", "left"), ("benchmark", "left"), ("arm", "left"), ("tasks (runs)", "right"),
                      ("acc", "right"), ("content", "right"), ("content CI", "right"), ("p", "right"),
                      ("context", "right"), ("context CI", "right")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    notes = []
    for g in result.groups:
        for name, a in g.arms.items():
            t.add_row(g.model, g.benchmark, name, _tp(a["n_tasks"], a["n"]), pp(a["accuracy"], False),
                      pp(a["content_effect"]), pp_ci(a["content_ci"]), pval(a["p"]),
                      pp(a["context_effect"]), pp_ci(a["context_ci"]))
        if g.aa_flip_rate is not None and g.n_pairs:
            notes.append(f"{g.model} / {g.benchmark}: A/A flip rate {pp(g.aa_flip_rate, False)}% of "
                         f"{g.aa_pairs} pairs with no change at all, vs (b + c) / n = "
                         f"{pp(g.aa_between_flip_rate if g.aa_between_flip_rate is not None else (g.b + g.c) / g.n_pairs, False)}"
                         "% between the conditions on the same pairs.")
        if g.injection_text and g.benchmark == "*":
            notes.append(f"{g.model}: {g.injection_text}.")
    out.print(t)
    out.print("content = enabled - arm on the tasks that retrieved skills (same decision to search, other "
              "content); context = arm - disabled; replicate: context = the A/A difference.")
    for n in notes:
        out.print(n)


def kv(out: Console, rows: list[tuple[str, Any]]) -> None:
    for k, v in rows:
        out.print(f"{k}: {v}")


# ================================================================ rank / prune (attribution.py, recommend.py)
def rank_table(result: Any, top: int | None = None, out: Console | None = None) -> None:
    """Per-skill table of one population, most harmful first: exposure counts, share, rae_k, the
    regression coefficient and its effect relative to the library average; then the library line."""
    out = out or console()
    tot = result.totals
    scheme = result.settings.get("attribution")
    rows = list(result.skills)[: top if top else None]
    model = result.settings.get("model")
    who = f" — {model}" if model and model != "*" else (" — all models pooled" if model == "*" else "")
    t = table_for(out, len(rows), f"Skills ranked by net rescues{who} (most harmful first; {scheme} shares; "
                                  "pp = percentage points)")
    for col, just in [
        ("skill", "left"), ("tasks (pairs)", "right"), ("b/c", "right"), ("net", "right"),
        ("share", "right"), ("RAE_k pp", "right"), ("q", "right"), ("coef pp", "right"),
        ("coef 95% CI", "right"), ("vs library pp", "right"), ("q vs lib", "right"),
        ("excl b/c/n", "right"), ("", "left"),
    ]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    notes: set[str] = set()
    for s in rows:
        flag = []
        if s.in_library is False:
            flag.append("not in library")
            notes.add("not in library: retrieved by the agent but missing from --skills.")
        if s.edited:
            flag.append("edited")
            notes.add("edited: the library's text differs from the one these runs retrieved.")
        if s.identifiable is False and s.aliases:
            flag.append("≡ " + ", ".join(s.aliases[:2]) + ("…" if len(s.aliases) > 2 else ""))
            notes.add("≡ X: never retrieved apart from X; the regression reports their joint effect only.")
        if s.n_retrieved == 0:
            flag.append("unused")
        coef = pp(s.coef) if s.coef is not None else (f"≡{pp(s.alias_coef)}" if s.alias_coef is not None else "–")
        style = "red" if (s.q_value is not None and s.q_value <= 0.1 and s.net < 0) else (
            "dim" if s.n_retrieved == 0 else "")
        t.add_row(
            s.skill_id, f"{s.n_tasks} ({s.n_retrieved})", f"{s.b}/{s.c}", f"{s.net:+d}", f"{s.share:+.2f}",
            pp(s.rae_k), pval(s.q_value), coef, pp_ci(list(s.coef_ci)) if s.coef_ci else ("–" if s.coef is not None else ""),
            pp(s.relative_effect), pval(s.relative_q),
            f"{s.exclusive_b}/{s.exclusive_c}/{s.exclusive_n}", " ".join(flag), style=style,
        )
    out.print(t)
    n = tot["n_cond"]
    rae = (tot["cond_b"] - tot["cond_c"]) / n if n else None
    out.print(
        f"retrieving: {tot.get('n_cond_tasks', n)} tasks ({n} pairs), rescues b={tot['cond_b']}, "
        f"harms c={tot['cond_c']}, RAE {pp(rae)} pp; shares add up to b - c = {tot['cond_b'] - tot['cond_c']:+d}."
    )
    if result.library is not None:
        out.print(f"library: {result.library.text}")
        if result.library.verdict == "library-wide":
            out.print("The most-harmful order above is what the library-wide verdict predicts: the skills "
                      "retrieved most (and most often with others) collect the most harms; it does not single "
                      "out entries (prune judges each against the others).")
    if top and len(result.skills) > top:
        out.print(f"(top {top} of {len(result.skills)} skills; --top 0 shows all)")
    method = result.settings.get("method") or {}
    out.print(f"p: {method.get('p')}; coef: {method.get('coef')}; vs library: {method.get('vs_library')}. "
              "All from co-retrieval: associations, not measured causes.")
    for note in sorted(notes):
        out.print(note)


def rank_tables(audit: Any, top: int | None = None, out: Console | None = None) -> None:
    """`rank_table` for each model of an `Audit`'s attribution, then per-benchmark library lines."""
    result = audit.attribution
    out = out or console()
    for res in result.results:
        rank_table(res, top=top, out=out)
    cells = [e for e in result.library if e.benchmark != "*"]
    for e in cells:
        out.print(f"library, {e.model} on {e.benchmark}: {e.text}")



def cost_lines(audit: Any, top: int | None = None) -> list[str]:
    """What each skill costs, from an `Audit`'s cost step (`analysis.cost.CostReport`): tokens per
    condition, then tokens per injection and per net rescue for each injected skill; [] without it."""
    cost = audit.cost
    if cost is None:
        return []
    pc = cost.per_condition
    rate = (f"usage deltas, {cost.tokens_per_char:.3f} tokens per character of skill text"
            if cost.tokens_per_char is not None else "usage deltas: not estimable")
    out = ["", f"cost (tokens from {rate})"]

    def val(x: Any) -> str:
        return "-" if x is None else str(x)

    for cond in ("enabled", "disabled"):
        c = pc[cond]
        out.append(f"  {cond:<9} mean prompt tokens {val(c['prompt_tokens'])}, completion "
                   f"{val(c['completion_tokens'])}, latency {val(c['latency_s'])} s")
    out.append(f"  {'skill':<34} {'tokens/inj':>10} {'inj':>5} {'b':>3} {'c':>3} {'tokens/net rescue':>18}")
    rows = [s for s in cost.skills if s.injections]
    for s in rows[:top] if top else rows:
        tpi = f"{s.tokens_per_injection:,.0f}" if s.tokens_per_injection is not None else "-"
        tpr = f"{s.tokens_per_net_rescue:,.0f}" if s.tokens_per_net_rescue is not None else "no net rescue"
        out.append(f"  {clean(s.skill_id)[:34]:<34} {tpi:>10} {s.injections:>5} {s.b:>3} {s.c:>3} {tpr:>18}")
    return out


def verify_table(audit: Any, out: Console | None = None) -> None:
    """Projected vs measured RAE of removing the prune set, from an `Audit`'s verify step."""
    result = audit.verify
    out = out or console()
    t = Table(title="Removing the prune set: projected vs measured RAE (percentage points; 95% CI)")
    for col, just in [("model", "left"), ("what", "left"), ("tasks (pairs)", "right"), ("re-run", "right"),
                      ("RAE now", "right"), ("projected", "right"), ("CI", "right"), ("measured", "right"),
                      ("CI", "right"), ("measured - projected CI", "right")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in result.rows:
        t.add_row(r.model, r.skill_id or "all pruned", f"{r.n_tasks} ({r.n_pairs})", str(r.n_rerun),
                  pp(r.before), pp(r.projected), pp_ci(r.projected_ci), pp(r.measured), pp_ci(r.measured_ci),
                  pp_ci(r.difference_ci), style="" if r.skill_id else "bold")
    out.print(t)
    out.print(result.to_dict()["note"])


#: what a stored audit.json written before its figures carried their `method` shows instead
NOT_RECORDED = "not recorded in this audit.json"


def arm_method(arms: list[dict[str, Any]]) -> dict[str, str]:
    """The arm effects' interval and p in words, from each arm's own `method` (the distinct ones)."""
    intervals = sorted({(a.get("method") or {}).get("interval") or "" for a in arms} - {""})
    ps = sorted({(a.get("method") or {}).get("p") or "" for a in arms} - {""})
    return {"interval": "; or ".join(intervals) or f"interval {NOT_RECORDED}", "p": "; or ".join(ps) or NOT_RECORDED}


def qty(x: float | None, unit: str = "", signed_: bool = False) -> str:
    """A measure's value in its unit: tokens as whole numbers, seconds to 0.1, '–' for none."""
    if x is None:
        return "–"
    if unit in ("tokens", "turns"):
        return f"{x:+,.0f}" if signed_ else f"{x:,.0f}"
    if unit == "points":
        return f"{x:+.3f}" if signed_ else f"{x:.3f}"
    if unit == "USD":
        return f"{'-' if x < 0 else '+' if signed_ else ''}${abs(x):,.4f}"
    return f"{x:+,.1f} {unit}".strip() if signed_ else f"{x:,.1f} {unit}".strip()


def efficiency_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The efficiency section's rows (logged measures), what was not logged, and its method words."""
    eff = doc.get("efficiency") or {}
    rows, unlogged = [], []
    for m in eff.get("models") or []:
        missing = [x["words"] for x in m["measures"] if not x["logged"]]
        if missing:
            unlogged.append(f"{m['model']}: {', '.join(missing)}")
        for x in m["measures"]:
            if x["logged"]:
                ci, rci = x.get("difference_ci"), x.get("ratio_ci")
                rows.append({
                    "model": m["model"], "words": x["words"],
                    "tasks": f"{x['n_tasks']:,}" + (f" ({x['n_pairs']:,})" if x["n_pairs"] != x["n_tasks"] else ""),
                    "with": qty(x["mean_enabled"], x["unit"]), "without": qty(x["mean_disabled"], x["unit"]),
                    "difference": qty(x["difference"], x["unit"], True),
                    "difference_ci": f"[{qty(ci[0], x['unit'], True)}, {qty(ci[1], x['unit'], True)}]" if ci else "",
                    "ratio": f"{x['ratio']:.2f}×" if x.get("ratio") is not None else "–",
                    "ratio_ci": f"[{rci[0]:.2f}, {rci[1]:.2f}]" if rci else "", "p": x["p"],
                    "timeouts": x.get("timeouts")})
    method = eff.get("method") or {}
    sentence = (f"Per model; unit: {method.get('unit')}; difference: {method.get('difference')}; "
                f"ratio: {method.get('ratio')}; p: {method.get('test')}.") if method else ""
    return {"rows": rows, "unlogged": unlogged, "method": sentence, "present": bool(eff.get("models"))}


def _pooled_repeats(groups: list[tuple[str, str]]) -> list[bool]:
    """Per (model, benchmark) group: whether it is the pooled row ('*') of a model with one
    benchmark, which would only repeat that benchmark's row."""
    n_bench: dict[str, int] = {}
    for model, bench in groups:
        if bench != "*":
            n_bench[model] = n_bench.get(model, 0) + 1
    return [bench == "*" and n_bench.get(model, 0) == 1 for model, bench in groups]


def judged_view(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The judged-outcome section: per metrics group with judged pairs, wins, ties and losses of the
    enabled answer against the disabled one, the effect (wins - losses) / judged pairs with its
    interval and tests, and the judge's own A/A flip rate beside it; the method words come from
    the figures (`analysis.metrics.preference_figures`, `judge_aa_figures`)."""
    rows, tests = [], []
    repeats = _pooled_repeats([(g["model"], g["benchmark"]) for g in groups])
    for g, again in zip(groups, repeats, strict=True):
        p = g.get("preference")
        if not p or again:
            continue
        aa = p.get("judge_aa")
        ci = p.get("ci")
        rows.append({
            "model": g["model"], "benchmark": g["benchmark"], "wins": p["wins"], "ties": p["ties"],
            "losses": p["losses"], "tasks": f"{p['n_tasks']:,}" + (f" ({p['n_pairs']:,})" if p["n_pairs"] != p["n_tasks"] else ""),
            "effect": f"{p['effect']:+.2f}" if p.get("effect") is not None else "–",
            "ci": f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "", "p": p.get("p"), "p_exact": p.get("p_exact"),
            "aa": (f"{aa['flips']} of {aa['checks']} ({aa['rate'] * 100:.0f}% [{aa['ci'][0] * 100:.0f}, "
                   f"{aa['ci'][1] * 100:.0f}])") if aa else "not checked",
            # the replicate arm (a second run without skills): judge and sampling flips together
            "replicate": (f"{g['aa_flip_rate'] * 100:.0f}% of {g['aa_pairs']}" if g.get("aa_flip_rate") is not None
                          else "no replicate arm")})
        for t in (p.get("test"), p.get("test_exact")):
            if t and t not in tests:
                tests.append(t)
    method = ("Effect: (wins - losses) / judged pairs of the enabled answer against the disabled one (ties are "
              f"not flips); p: {'; exact p: '.join(tests[:2])}. Judge A/A: the share of checks where the judge "
              "named a winner between two copies of one answer (its own flip rate; Wilson interval over tasks); "
              "replicate A/A: the share of pairs whose second run without skills (the replicate arm) came out "
              "otherwise than the first (the judge's and the sampling's flips together): a verdict is worth "
              "reading only well above both.") if rows else ""
    return {"rows": rows, "method": method}


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith('s') else 's'}"


def judged_lines(audit: Any) -> list[str]:
    """`metrics`' judged-outcome lines (per group with judged pairs); [] without any."""
    view = judged_view([g.to_dict() for g in audit.metrics.groups])
    if not view["rows"]:
        return []
    from skillaudit.util.term import wrap

    out = ["", "Judged outcome, the answer with skills against the one without:"]
    for r in view["rows"]:
        out += wrap(f"{r['model']} {r['benchmark']}: {_count(r['wins'], 'win')}, {_count(r['ties'], 'tie')}, "
                    f"{_count(r['losses'], 'loss')} "
                    f"over {r['tasks']} tasks; effect {r['effect']} {r['ci']}, p {pval(r['p'])}, exact p "
                    f"{pval(r['p_exact'])}; judge A/A flips: {r['aa']}; replicate A/A flips: {r['replicate']}",
                    100, indent="  ")
    return [*out, *wrap(view["method"], 100, indent="")]


def efficiency_lines(audit: Any) -> list[str]:
    """`metrics`' efficiency lines: each logged measure's paired difference and ratio per model,
    from the audit's efficiency step (its own method words); [] without it."""
    view = efficiency_view({"efficiency": audit.efficiency} if audit.efficiency else {})
    if not view["rows"] and not view["unlogged"]:
        return []
    from skillaudit.util.term import wrap

    out = ["", "Efficiency, with minus without skills:"]
    for r in view["rows"]:
        out.append(f"  {r['model']}: {r['words']} {r['difference']} {r['difference_ci']}, ratio {r['ratio']} "
                   f"{r['ratio_ci']}, p {pval(r['p'])}; {r['tasks']} tasks (pairs), {r['with']} with vs "
                   f"{r['without']} without")
        if r["timeouts"]:
            out += wrap(f"⚠ {r['timeouts']}", 100, indent="    ")
    if view["unlogged"]:
        out += wrap("not logged (absent, or 0 in every trial): " + "; ".join(view["unlogged"]), 100)
    return [*out, *wrap(view["method"], 100, indent="")]
