"""The report's figures, drawn with matplotlib on an Agg canvas (no pyplot, no global state).

Every function takes plain data (sections of the audit document) and returns PNG bytes, or None
when there is nothing to draw. `render_all(doc)` returns {file name: PNG bytes}.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Polygon
from matplotlib.ticker import NullFormatter

from skillaudit.util.term import clean

RED, BLUE, GREY, DARK = "#c0392b", "#2e6da4", "#9aa3ab", "#2b2f33"
ACTION_COLOURS = {
    "prune": "#c0392b", "rewrite": "#e67e22", "merge": "#8e44ad", "keep": "#2e6da4",
    "needs-data": "#9aa3ab", "unused": "#d5d8dc",
}
DPI = 110
#: at most this many skills per side in the net bar chart (the full list is in skills.csv)
MAX_BARS_PER_SIDE = 15


def _figure(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def _style(ax: Any) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=8.5)


def _short(text: str, n: int = 34) -> str:
    text = clean(text)  # control characters from logs: visible, and no missing-glyph warning on stderr
    return text if len(text) <= n else text[: n - 1] + "…"


def _pooled_groups(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One group per model: the pooled ('*') row."""
    return [g for g in metrics.get("groups", []) if g.get("benchmark") == "*"]


# ---------------------------------------------------------------- per-skill net bars
def skill_net_bars(skills: dict[str, Any], actions: dict[str, str] | None = None) -> bytes | None:
    """Diverging bars: net rescues (b - c) per retrieved skill, most harmful at the top."""
    rows = [r for r in skills.get("skills", []) if r.get("n_retrieved", 0) > 0]
    if not rows:
        return None
    rows.sort(key=lambda r: (r["net"], r.get("share") or 0.0, r["skill_id"]))
    omitted = 0
    if len(rows) > 2 * MAX_BARS_PER_SIDE:
        omitted = len(rows) - 2 * MAX_BARS_PER_SIDE
        rows = rows[:MAX_BARS_PER_SIDE] + rows[-MAX_BARS_PER_SIDE:]
    actions = actions or {}
    n = len(rows)
    fig = _figure(7.2, max(2.2, 0.27 * n + 1.1))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(n)[::-1]
    nets = np.array([r["net"] for r in rows], dtype=float)
    colours = [RED if v < 0 else (BLUE if v > 0 else GREY) for v in nets]
    ax.barh(y, nets, color=colours, height=0.7)
    # harms and rescues as thin ticks behind the net bar
    ax.barh(y, [-r["c"] for r in rows], color=RED, alpha=0.18, height=0.7)
    ax.barh(y, [r["b"] for r in rows], color=BLUE, alpha=0.18, height=0.7)
    labels = []
    for r in rows:
        act = actions.get(r["skill_id"])
        labels.append(_short(r["skill_id"]) + (f"  [{act}]" if act else ""))
    ax.set_yticks(y, labels)
    for lab, r in zip(ax.get_yticklabels(), rows, strict=True):
        act = actions.get(r["skill_id"])
        if act in ("prune", "rewrite"):
            lab.set_color(ACTION_COLOURS[act])
            lab.set_fontweight("bold")
    ax.axvline(0, color=DARK, lw=0.8)
    lim = max(max(r["c"] for r in rows), max(r["b"] for r in rows), 1) * 1.08
    ax.set_xlim(-lim, lim)  # symmetric: harm and rescue always read at the same scale
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if omitted:
        ax.axhline(MAX_BARS_PER_SIDE - 0.5, color=GREY, lw=0.8, ls=":")
        ax.text(0.99, (MAX_BARS_PER_SIDE - 0.5) / max(n - 1, 1), f"{omitted} skills in between not shown",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5, color=GREY)
    ax.set_xlabel("net rescues per skill: rescues b − harms c over the tasks that retrieved it\n"
                  "(dark bar = net; faint bars = harms left, rescues right)", fontsize=8.5)
    ax.set_title("Which skills help and which hurt (most harmful at the top)", fontsize=10, loc="left")
    _style(ax)
    return _png(fig)


# ---------------------------------------------------------------- OAE -> RAE decomposition
def decomposition(metrics: dict[str, Any]) -> bytes | None:
    """Per model: OAE = (n_cond/n)·RAE + (n_skip/n)·Δskip, with RAE and Δskip and their CIs."""
    groups = [g for g in _pooled_groups(metrics) if g.get("oae") is not None]
    if not groups:
        return None
    k = len(groups)  # every model: none is left out (shorter rows when there are many)
    fig = _figure(7.2, 1.0 + (1.15 if k <= 8 else 0.75) * k)
    ax = fig.add_subplot(1, 1, 1)
    bars = ["OAE (all tasks)", "retrieved share × RAE", "skipped share × Δskip", "RAE (retrieved tasks)",
            "Δskip (skipped tasks)"]
    colours = [DARK, "#7f8c8d", "#bdc3c7", RED, GREY]
    height = 0.8 / len(bars)
    ticks, ticklabels = [], []
    for gi, g in enumerate(groups):
        n = max(g["n_pairs"], 1)
        wr, ws = g["n_cond"] / n, g["n_skip"] / n
        unlogged = g.get("n_use_unlogged", 0) == g["n_pairs"] > 0
        vals = [g.get("oae"), None if g.get("rae") is None else wr * g["rae"],
                None if g.get("delta_skip") is None else ws * g["delta_skip"], g.get("rae"), g.get("delta_skip")]
        if unlogged:  # nothing says which runs used the skills: OAE only, no split
            vals = [g.get("oae"), None, None, None, None]
        cis = [g.get("oae_ci"), None, None, g.get("rae_ci"), g.get("delta_skip_ci")]
        base = (k - 1 - gi)
        for bi, (v, ci, col) in enumerate(zip(vals, cis, colours, strict=True)):
            y = base + 0.4 - (bi + 0.5) * height
            if v is None:
                continue
            c = col
            if bi == 3:
                c = RED if v < 0 else BLUE
            ax.barh(y, v * 100, height=height * 0.9, color=c, label=bars[bi] if gi == 0 else None)
            if ci:
                ax.errorbar(v * 100, y, xerr=[[max(v - ci[0], 0) * 100], [max(ci[1] - v, 0) * 100]],
                            fmt="none", ecolor=DARK, elinewidth=0.8, capsize=2)
        ticks.append(base)
        ticklabels.append(f"{_short(g['model'], 34)}\n" + ("use not logged" if unlogged
                                                            else f"{g['n_cond']}/{g['n_pairs']} retrieved"))
    ax.set_yticks(ticks, ticklabels)
    ax.axvline(0, color=DARK, lw=0.8)
    ax.set_xlabel("effect on accuracy (percentage points; bars = 95% bootstrap CI)", fontsize=8.5)
    ax.set_title("Where the overall effect comes from: OAE = retrieved part + skipped part", fontsize=10, loc="left")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    _style(ax)
    return _png(fig)


# ---------------------------------------------------------------- the funnel
def funnel(metrics: dict[str, Any]) -> bytes | None:
    """Stage funnel per model: pairs -> invoked -> retrieved -> adhered -> effective (rescued)."""
    groups = [g for g in _pooled_groups(metrics) if g.get("funnel")][:6]
    if not groups:
        return None
    stages = ["pairs", "invoked", "retrieved", "adhered", "effective"]
    names = ["all tasks", "called the tool", "got skills back", "followed a skill", "rescued (b)"]
    fig = _figure(7.2, 1.0 + 0.95 * len(groups) + 0.6)
    ax = fig.add_subplot(1, 1, 1)
    k = len(groups)
    height = 0.8 / len(stages)
    shades = ["#d6dde4", "#aebdcc", "#7f9bb5", "#4f7a9e", BLUE]
    for gi, g in enumerate(groups):
        f = g["funnel"]
        total = max(f.get("pairs") or 0, 1)
        base = k - 1 - gi
        for si, st in enumerate(stages):
            v = f.get(st)
            y = base + 0.4 - (si + 0.5) * height
            if v is None:
                ax.text(0.5, y, f"{names[si]}: not logged", va="center", fontsize=7.5, color=GREY)
                continue
            ax.barh(y, v / total * 100, height=height * 0.9, color=shades[si],
                    label=names[si] if gi == 0 else None)
            ax.text(v / total * 100 + 0.8, y, f"{v:,}", va="center", fontsize=7.5, color=DARK)
        ax.text(-1, base, _short(g["model"], 34), ha="right", va="center", fontsize=8.5)
    ax.set_yticks([])
    ax.set_xlim(0, 112)
    ax.set_xlabel("% of paired tasks", fontsize=8.5)
    ax.set_title("Stage funnel: how many tasks reach each stage", fontsize=10, loc="left")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    _style(ax)
    ax.spines["left"].set_visible(False)
    return _png(fig)


# ---------------------------------------------------------------- embedding map
def _outline(ax: Any, pts: np.ndarray, colour: str, label: str) -> None:
    centre = pts.mean(axis=0)
    span = float(np.ptp(pts, axis=0).max()) if len(pts) > 1 else 0.0
    pad = max(span * 0.12, 0.02)
    hull_pts = None
    if len(pts) >= 3:
        try:
            from scipy.spatial import ConvexHull

            hull = ConvexHull(pts)
            hull_pts = pts[hull.vertices]
        except Exception:  # collinear points: fall back to a circle
            hull_pts = None
    if hull_pts is not None:
        d = hull_pts - centre
        norm = np.linalg.norm(d, axis=1, keepdims=True)
        norm[norm == 0] = 1.0
        grown = hull_pts + d / norm * pad
        ax.add_patch(Polygon(grown, closed=True, fill=False, ec=colour, lw=1.6, ls="--", joinstyle="round"))
        top = grown[np.argmax(grown[:, 1])]
    else:
        r = max(float(np.linalg.norm(pts - centre, axis=1).max()) + pad, pad * 2)
        from matplotlib.patches import Circle

        ax.add_patch(Circle(tuple(centre), r, fill=False, ec=colour, lw=1.6, ls="--"))
        top = centre + np.array([0.0, r])
    ax.annotate(label, xy=tuple(top), xytext=(0, 4), textcoords="offset points", ha="center",
                fontsize=7.5, color=colour, fontweight="bold")


def embedding_map(clusters: dict[str, Any] | None, skills: dict[str, Any]) -> bytes | None:
    """Skills in 2-D (PCA of their embeddings), coloured by attributed share; harmful clusters outlined."""
    if not clusters or len(clusters.get("map") or []) < 2:
        return None
    pts = {p["skill_id"]: (p["x"], p["y"]) for p in clusters["map"]}
    share = {r["skill_id"]: (r.get("share") or 0.0) for r in skills.get("skills", [])}
    used = {r["skill_id"]: r.get("n_retrieved", 0) for r in skills.get("skills", [])}
    ids = list(pts)
    xy = np.array([pts[i] for i in ids], dtype=float)
    s = np.array([share.get(i, 0.0) for i in ids], dtype=float)
    lim = max(float(np.abs(s).max()), 1.0)
    fig = _figure(7.2, 5.4)
    ax = fig.add_subplot(1, 1, 1)
    n_used = np.array([used.get(i, 0) for i in ids], dtype=float)
    sizes = 28 + 140 * np.sqrt(n_used / max(n_used.max(), 1.0))
    sc = ax.scatter(xy[:, 0], xy[:, 1], c=s, cmap="RdBu", vmin=-lim, vmax=lim, s=sizes,
                    edgecolors=DARK, linewidths=0.5, zorder=3)
    cb = fig.colorbar(sc, ax=ax, shrink=0.8, pad=0.02)
    cb.set_label("attributed share of the net flips\n(red = harm, blue = rescue)", fontsize=8)
    cb.ax.tick_params(labelsize=7.5)
    # label the most extreme skills (and all, when the library is small)
    order = np.argsort(-np.abs(s), kind="stable")
    to_label = order[: 12 if len(ids) > 40 else len(ids)].tolist()
    # skills at (nearly) the same place share one label instead of overprinting each other
    scale = float(np.ptp(xy, axis=0).max()) or 1.0
    spots: dict[tuple[int, int], list[int]] = {}
    for i in to_label:
        key = (round(float(xy[i, 0]) / scale * 60), round(float(xy[i, 1]) / scale * 60))
        spots.setdefault(key, []).append(i)
    for members in spots.values():
        names = [_short(ids[i], 24) for i in members]
        text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        ax.annotate(text, xy=tuple(xy[members[0]]), xytext=(5, 4), textcoords="offset points",
                    fontsize=6.5, color=DARK, zorder=4)
    index = {k: i for i, k in enumerate(ids)}
    harmful = [c for c in clusters.get("clusters", []) if c.get("harmful")]
    for c in harmful[:8]:
        members = [index[m] for m in c["skills"] if m in index]
        if members:
            _outline(ax, xy[members], RED, f"cluster {c['id']}: {_short(c.get('label') or '', 28)}")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("embedding map (PCA of the skill vectors; near = similar text; size = retrievals)", fontsize=8.5)
    title = "Skill families: harmful clusters outlined" if harmful else "Skill families (no harmful cluster)"
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_aspect("equal", adjustable="datalim")
    ax.margins(0.12)
    return _png(fig)


# ---------------------------------------------------------------- Figure 1
def figure1(groups: Sequence[dict[str, Any]], title: str | None = None) -> bytes | None:
    """The paper's Figure 1: aggregate lift (x) against RAE (y) per model, with 95% CIs; the
    sign-disagreement quadrants (x·y < 0) shaded."""
    pts = [g for g in groups if g.get("agg_lift") is not None and g.get("rae") is not None]
    if not pts:
        return None
    xs = np.array([g["agg_lift"] for g in pts]) * 100
    ys = np.array([g["rae"] for g in pts]) * 100
    lo_x = [((g.get("agg_lift_ci") or [g["agg_lift"]] * 2)[0]) * 100 for g in pts]
    hi_x = [((g.get("agg_lift_ci") or [g["agg_lift"]] * 2)[1]) * 100 for g in pts]
    lo_y = [((g.get("rae_ci") or [g["rae"]] * 2)[0]) * 100 for g in pts]
    hi_y = [((g.get("rae_ci") or [g["rae"]] * 2)[1]) * 100 for g in pts]
    # axis limits from the data (CIs included), always showing 0 and a little of every quadrant
    def limits(lo: list[float], hi: list[float]) -> tuple[float, float]:
        a, b = min([*lo, 0.0]), max([*hi, 0.0])
        pad = max((b - a) * 0.12, 1.5)
        return a - pad, b + pad

    x0, x1 = limits(lo_x, hi_x)
    y0, y1 = limits(lo_y, hi_y)
    fig = _figure(6.6, 5.4)
    ax = fig.add_subplot(1, 1, 1)
    shade = "#f6d5d1"
    ax.fill_between([x0, 0], 0, y1, color=shade, zorder=0)
    ax.fill_between([0, x1], y0, 0, color=shade, zorder=0)
    ax.text(x0 + (x1 - x0) * 0.02, y1 - (y1 - y0) * 0.02, "sign disagreement:\nlift says hurts, RAE says helps",
            fontsize=7.5, va="top", color=RED)
    ax.text(x1 - (x1 - x0) * 0.02, y0 + (y1 - y0) * 0.02, "sign disagreement:\nlift says helps, RAE says hurts",
            fontsize=7.5, va="bottom", ha="right", color=RED)
    ax.axhline(0, color=DARK, lw=0.8)
    ax.axvline(0, color=DARK, lw=0.8)
    offsets = [(6, 6), (6, -12), (-6, 6), (-6, -12)]
    order = np.lexsort((xs, ys))
    for rank, idx in enumerate(order):
        g, x, y = pts[idx], xs[idx], ys[idx]
        lx, hx, ly, hy = lo_x[idx], hi_x[idx], lo_y[idx], hi_y[idx]
        colour = RED if g.get("sign_disagreement") else BLUE
        faded = not g.get("reportable", True)
        ax.errorbar(x, y, xerr=[[max(x - lx, 0)], [max(hx - x, 0)]], yerr=[[max(y - ly, 0)], [max(hy - y, 0)]],
                    fmt="o", color=colour, ecolor=colour, alpha=0.45 if faded else 1.0, elinewidth=1,
                    capsize=2.5, markersize=6, zorder=3)
        name = g["model"] + ("" if g.get("benchmark") in (None, "*") else f" / {g['benchmark']}")
        dx, dy = offsets[rank % len(offsets)]
        ax.annotate(_short(name, 30) + (" (n<min)" if faded else ""), xy=(x, y), xytext=(dx, dy),
                    textcoords="offset points", fontsize=7.5, color=DARK, zorder=4,
                    ha="left" if dx > 0 else "right",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75})
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel("aggregate retrieval lift (pp): accuracy with skills retrieved − not retrieved", fontsize=8.5)
    ax.set_ylabel("RAE (pp): effect of skills on the tasks that retrieved them", fontsize=8.5)
    ax.set_title(title or "Aggregate lift vs RAE per model (95% CIs)", fontsize=10, loc="left")
    _style(ax)
    return _png(fig)


# ---------------------------------------------------------------- efficiency ratios
def efficiency_ratios(efficiency: dict[str, Any] | None) -> bytes | None:
    """Per model and logged cost measure, the ratio with / without skills and its interval (log
    scale; 1 = no change, the dotted line at 1.5 is the efficiency rule's floor)."""
    from skillaudit.analysis.efficiency import RATIO_FLOOR

    rows = [(m["model"], x) for m in (efficiency or {}).get("models", []) for x in m["measures"]
            if x.get("logged") and x.get("ratio") is not None and x["ratio"] > 0][:24]
    if not rows:
        return None
    fig = _figure(7.2, 0.9 + 0.32 * len(rows))
    ax = fig.add_subplot(1, 1, 1)
    for i, (_, x) in enumerate(rows):
        y = len(rows) - 1 - i
        ci = x.get("ratio_ci")
        colour = RED if ci and ci[0] > RATIO_FLOOR else BLUE if ci and ci[1] < 1 else GREY
        if ci and ci[0] > 0:
            ax.plot([ci[0], ci[1]], [y, y], color=colour, lw=2, solid_capstyle="butt")
        ax.plot([x["ratio"]], [y], "o", color=colour, ms=5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_short(f"{m}: {x['words']}", 60) for m, x in reversed(rows)], fontsize=7.5)
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    lo, hi = min(lo, 0.9), max(hi, RATIO_FLOOR * 1.1)
    ax.set_xlim(lo, hi)
    ticks = [t for t in (0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 50, 100) if lo <= t <= hi]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}×" for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color=DARK, lw=0.8)
    ax.axvline(RATIO_FLOOR, color=RED, lw=0.8, ls=":")
    ax.set_xlabel("with skills / without (per-task ratio, Hodges-Lehmann, 95% CI; log scale)", fontsize=8.5)
    ax.set_title("What the skills cost: tokens, money, turns and time with vs without", fontsize=10, loc="left")
    _style(ax)
    return _png(fig)


# ---------------------------------------------------------------- all of them
FIGURES = {
    "efficiency.png": "Cost ratios with vs without skills",
    "skill_net.png": "Net rescues per skill",
    "decomposition.png": "OAE → RAE decomposition",
    "funnel.png": "Stage funnel",
    "embedding_map.png": "Embedding map of the skills",
    "figure1.png": "Aggregate lift vs RAE per model",
}


def render_all(doc: dict[str, Any]) -> dict[str, bytes]:
    """Every figure the audit document supports: {file name: PNG bytes}."""
    actions = {r["skill_id"]: r["action"] for r in (doc.get("recommendations") or {}).get("recommendations", [])}
    out: dict[str, bytes | None] = {
        "skill_net.png": skill_net_bars(doc["skills"], actions),
        "decomposition.png": decomposition(doc["metrics"]),
        "funnel.png": funnel(doc["metrics"]),
        "embedding_map.png": embedding_map(doc.get("clusters"), doc["skills"]),
        "efficiency.png": efficiency_ratios(doc.get("efficiency")),
    }
    pooled = _pooled_groups(doc["metrics"])
    if len(pooled) >= 2:
        out["figure1.png"] = figure1(pooled)
    return {k: v for k, v in out.items() if v is not None}
