"""The audit's headline as the terminal prints it: at most 8 lines of at most 100 characters.

The verdict per model, the library-level verdict, the skills to act on by name, what re-runs
measured, and one line of warnings; the full sentences (tests, intervals, control arms, selection)
stay in report.html / report.md and audit.json's `headline`.
"""

from __future__ import annotations

from typing import Any

from skillaudit.stats import ci_text as _ci
from skillaudit.stats import p_text
from skillaudit.stats import pp_text as _pp
from skillaudit.util.term import wrap

WIDTH = 100
MAX_LINES = 8
#: models listed one per line; more are summarised in one line
MAX_MODEL_LINES = 4

_WORDS = {"hurts": "skills hurt", "helps": "skills help", "unclear": "no clear effect", "both-ways": "both ways",
          "too-few": "too few tasks retrieved skills"}
_OFFERED = {"hurts": "offering hurts", "helps": "offering helps", "unclear": "no clear effect of offering"}


def _p_cell(p: float) -> str:
    """p_text without its "p = " / "p ": "< 0.001", "0.046"."""
    return p_text(p).removeprefix("p = ").removeprefix("p ")


def model_row(v: dict[str, Any]) -> tuple[str, str, str, str, str, str]:
    """(model, verdict, effect [CI] in pp, rescues / harms, tasks, p) for the headline's table."""
    b, c, n = v.get("b", 0), v.get("c", 0), v.get("n_tasks", 0)
    offered = v.get("use_logged") is False
    est, ci, p = ((v.get("oae"), v.get("oae_ci"), v.get("oae_p")) if offered
                  else (v.get("rae"), v.get("rae_ci"), v.get("p_cond")))
    verdict = {"hurts": "hurts", "helps": "helps", "unclear": "unclear", "both-ways": "both ways",
               "too-few": "too few tasks"}[v["verdict"]]
    if v["verdict"] == "unclear" and p is not None and p <= 0.05 and b + c < 5:
        verdict = f"unclear: {b + c} flips"
    effect = "" if est is None else f"{est * 100:+.1f}{_ci(ci)}"
    p_cell = "" if p is None else _p_cell(p)
    return v["model"], verdict, effect, f"{b:,}/{c:,}", f"{n:,}", p_cell


def model_table(per_model: list[dict[str, Any]], width: int = WIDTH) -> list[str]:
    """A header and one row per model, columns aligned; model names shortened (with "…") where the
    table would be wider than `width`."""
    kinds = {"OAE" if v.get("use_logged") is False else "RAE" for v in per_model}
    effect = f"{kinds.pop()} pp [95% CI]" if len(kinds) == 1 else "RAE or OAE pp [95% CI]"
    rows = [("model", "verdict", effect, "rescued/harmed", "tasks", "p"), *(model_row(v) for v in per_model)]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    room = width - 2 - 2 * 5 - sum(widths[1:])
    if widths[0] > room >= 8:
        rows = [(r[0] if len(r[0]) <= room else r[0][:room - 1] + "…", *r[1:]) for r in rows]
        widths[0] = room
    return ["  " + "  ".join(cell.rjust(w) if i in (3, 4) else cell.ljust(w)
                             for i, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip() for r in rows]


def _warnings(v: dict[str, Any]) -> list[str]:
    out = []
    if v.get("sign_disagreement"):
        out.append("the aggregate lift points the other way")
    if v.get("selection_text"):
        out.append("tasks that searched differ from those that did not (selection)")
    if "injection hurts, not these skills" in (v.get("injection_text") or ""):
        out.append("control arms: injection itself hurts")
    if v.get("partial_use"):
        k, n = v["partial_use"]
        out.append(f"use not logged on {k:,} of {n:,} runs")
    return out


def _names(names: list[str]) -> str:
    return ", ".join(names)


def terminal_lines(h: dict[str, Any], width: int = WIDTH, max_lines: int = MAX_LINES) -> list[str]:
    """The headline in at most `max_lines` lines of at most `width` characters (long names wrap or
    are shortened with a count of the rest; the report holds every name and figure)."""
    per_model = h.get("per_model", [])

    def fit(text: str, lines: int = 1) -> list[str]:
        return wrap(text, width, max_lines=lines)

    head = [h["title"][:width]]
    integrity = (h.get("integrity") or {}).get("summary")
    if integrity:  # the arms are not what they claim: said before any figure
        head += fit(f"⚠ {integrity}", 2)
    if len(per_model) <= MAX_MODEL_LINES:
        models = [ln[:width] for ln in model_table(per_model, width)] if per_model else []
    else:  # one line of counts; `model_table` of them all follows the headline
        counts = {k: sum(v["verdict"] == k for v in per_model)
                  for k in ("helps", "hurts", "both-ways", "unclear", "too-few")}
        words = {"helps": "helped", "hurts": "hurt", "both-ways": "both ways", "unclear": "unclear",
                 "too-few": "too few tasks"}
        models = fit(f"{len(per_model)} models: " + ", ".join(f"{c} {words[k]}" for k, c in counts.items() if c)
                     + " (one row per model below)")
    # skill reach comes before any per-skill advice: an unopened skill can neither help nor hurt
    reach = [ln for v in per_model[:MAX_MODEL_LINES] if v.get("reach")
             for ln in fit(f"Reach: {v['model']} {v['reach']['text']}", 2)]
    models = models + reach
    lib = [f"{v['model']} {v['library_short']}" for v in per_model if v.get("library_short")]
    library_text = "Library level: " + "; ".join(lib)
    library = fit(library_text, 2) if lib else []
    act = h.get("act_on") or {}
    parts = list(act.get("library", []))
    parts += [f"{verb} {len(act[verb])}: {_names(act[verb])}" for verb in ("prune", "rewrite", "merge")
              if act.get(verb)]
    if parts:
        action_text = "Act on: " + "; ".join(parts)
    elif h.get("action"):
        action_text = h["action"]
    else:
        action_text = ""
    measured = []
    for m in h.get("measured", [])[:1]:
        measured = fit(f"Measured by re-runs without {_names(m['excluded'])} ({m['model']}): RAE "
                       f"{_pp(m['rae_before'])} → {_pp(m['measured'])}{_ci(m['measured_ci'])}, "
                       f"projected {_pp(m['projected'])}")
    warn = [f"{v['model']}: {'; '.join(w)}" for v in per_model if (w := _warnings(v))]
    warnings = fit("⚠ " + "; ".join(warn) + " (see the report)") if warn else []
    action = fit(action_text, 3) if action_text else []
    # over the budget, in order: no warnings line (each model's row keeps its verdict), no measured
    # line, the library level in 1 line, the action in 2 lines, then 1
    layouts = [(library, action, measured, warnings), (library, action, measured, []), (library, action, [], []),
               (fit(library_text, 1) if lib else [], action, [], [])]
    layouts += [(layouts[-1][0], fit(action_text, k) if action_text else [], [], []) for k in (2, 1)]
    # still over: the integrity warning in 1 line when it has one kind of issue (only its names are
    # cut), each reach line in 1 line, then any integrity warning in 1 line (the report has them whole)
    heads = [(head, models)]
    short_head = head[:1] + fit(f"⚠ {integrity}", 1) if integrity else head
    if integrity and "; " not in integrity:
        heads.append((short_head, models))
    if reach:
        short_reach = [ln for v in per_model[:MAX_MODEL_LINES] if v.get("reach")
                       for ln in fit(f"Reach: {v['model']} {v['reach']['text']}", 1)]
        heads.append((heads[-1][0], models[:len(models) - len(reach)] + short_reach))
    if integrity:
        heads.append((short_head, heads[-1][1]))
    for top, mid in heads:
        for lib_lines, act_lines, meas_lines, warn_lines in layouts:
            lines = top + mid + lib_lines + act_lines + meas_lines + warn_lines
            if len(lines) <= max_lines:
                return lines
    return lines[:max_lines]


#: task bundles listed on the terminal (the report lists them all)
MAX_BUNDLE_LINES = 5


def bundle_lines(bundles: dict[str, Any], width: int = WIDTH) -> list[str]:
    """Runs that record which skills were offered, not used: the most harmful task bundles, one line
    each (rescued/harmed across agents, effect, p and q), and one line on what such runs cannot say."""
    worst = bundles.get("worst") or []
    n_agents = bundles.get("n_agents") or 0
    if not worst:
        out = [f"  Task bundles: none of {bundles.get('n_bundles', 0):,} harmed more runs than it rescued "
               f"across {n_agents} agents"]
    else:
        out = [f"  Task bundles that hurt most ({len(worst[:MAX_BUNDLE_LINES])} of {bundles.get('n_bundles', 0):,}, "
               f"rescued/harmed across {n_agents} agents):"]
    for b in worst[:MAX_BUNDLE_LINES]:
        line = (f"    {b['task']}: {b['rescues']}/{b['harms']}, {_pp(b.get('effect'))}, "
                f"p {_p_cell(b['p'])}, q {b['q']:.2g}")
        out.append(line if len(line) <= width else line[: width - 1] + "…")
    out.append("  Skill use not logged: no RAE, Δskip, funnel or per-skill verdicts (see the report)"[:width])
    return out
