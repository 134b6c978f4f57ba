"""The headline verdicts: does the library help where it is used, per model; is the harm
library-wide or in specific entries; what to act on. Plain functions of the audit's sections (the
`to_dict()` of metrics, recommendations, library effects, verify, reach and arm integrity).

Layer (pyproject.toml `[tool.importlinter]`): decide/ may import analysis/ and below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skillaudit.analysis.library_effect import TOO_FEW_FLIPS
from skillaudit.stats import p_text
from skillaudit.stats import pp_text as _pp

#: significance level of the headline verdict (exact McNemar on the retrieval-triggered pairs)
VERDICT_ALPHA = 0.05


def _p(p: float | None) -> str:
    return "–" if p is None else p_text(p)


USE_NOT_LOGGED = "skill use not logged: this is the effect of offering the skills"


#: a helps/hurts verdict needs at least this many flips (rescues + harms), the floor every verdict
#: of skillaudit has (per skill, library, control arms): 0 rescues vs 4 harms gives a score p of
#: 0.046 and an interval short of 0, which is said, not acted on
MIN_VERDICT_FLIPS = 5


def _too_few(flips: int) -> str:
    return (f"only {flips} flip{'s' * (flips != 1)}, fewer than the {MIN_VERDICT_FLIPS} a verdict needs")


def offered_verdict(g: dict[str, Any], alpha: float = VERDICT_ALPHA) -> dict[str, Any]:
    """helps | hurts | unclear for a group whose runs say which skills were offered, not which were
    used: the access effect (OAE) with its task-level CI and test; never a retrieval count."""
    oae, ci = g.get("oae"), g.get("oae_ci")
    # the test the printed interval inverts (score test; the exact one stays in mcnemar_p)
    p = (g.get("score_p") or {}).get("oae", g.get("mcnemar_p"))
    test = (g.get("score_test") or {}).get("oae") or g.get("oae_p_test") or "exact McNemar"
    ci_txt = f", 95% CI {ci[0] * 100:+.1f} to {ci[1] * 100:+.1f}" if ci else ""
    acc = ""
    if g.get("acc_enabled") is not None and g.get("acc_disabled") is not None:
        acc = f"pass rate {g['acc_enabled'] * 100:.1f}% with vs {g['acc_disabled'] * 100:.1f}% without, "
    n_t, n = g.get("n_tasks", 0), g.get("n_pairs", 0)
    where = f"{n_t:,} tasks" if n_t == n else f"{n_t:,} tasks ({n:,} paired trials)"
    body = f"OAE {_pp(oae)}{ci_txt} ({acc}{where}; {test} {_p(p)})"
    flips = g.get("b", 0) + g.get("c", 0)
    if oae is not None and p is not None and p <= alpha and flips < MIN_VERDICT_FLIPS:
        verdict, text = "unclear", f"no clear effect of offering the skills: {body}; {_too_few(flips)}"
    elif oae is not None and p is not None and p <= alpha and oae > 0:
        verdict, text = "helps", f"offering the skills helps: {body}"
    elif oae is not None and p is not None and p <= alpha and oae < 0:
        verdict, text = "hurts", f"offering the skills hurts: {body}"
    else:
        verdict, text = "unclear", f"no clear effect of offering the skills: {body}, not below {alpha}"
    return {
        "model": g["model"], "benchmark": g["benchmark"], "verdict": verdict,
        "text": f"{USE_NOT_LOGGED}; {text}", "use_logged": False,
        "b": g.get("b", 0), "c": g.get("c", 0), "n_tasks": n_t,
        "oae": oae, "oae_ci": ci, "oae_p": p, "oae_p_test": test,
        "rae": None, "rae_ci": None, "agg_lift": None, "mcnemar_p_cond": None, "p_cond": None,
        "n_cond": 0, "n_cond_tasks": 0, "sign_disagreement": False, "sign_text": None,
        "selection_text": None, "injection_text": g.get("injection_text"),
        "aa_flip_rate": g.get("aa_flip_rate"),
        "flip_rate": (g.get("b", 0) + g.get("c", 0)) / n if n else None,
    }


def both_ways_sentence(g: dict[str, Any], alpha: float = VERDICT_ALPHA) -> str | None:
    """The rescue and harm rates of the retrieving pairs against their comparator's, when both are
    higher (`metrics.works_both_ways`); else None."""
    from skillaudit.analysis.metrics import both_ways_words, works_both_ways

    return f"they {both_ways_words(g['both_ways'])}" if works_both_ways(g, alpha) else None


def model_verdict(g: dict[str, Any], alpha: float = VERDICT_ALPHA) -> dict[str, Any]:
    """helps | hurts | unclear | too-few for one metrics group, with a one-sentence explanation.

    A group whose every pair says its skill use was not logged gets `offered_verdict` instead."""
    if g.get("n_pairs") and g.get("n_use_unlogged", 0) == g["n_pairs"]:
        return offered_verdict(g, alpha)
    rae, n = g.get("rae"), g.get("n_cond", 0)
    p = g.get("p_cond", g.get("mcnemar_p_cond"))
    name = g.get("p_cond_test") or "McNemar"
    test = ("score McNemar" if name.startswith(("score", "cluster-adjusted score")) else
            "McNemar" if "McNemar" in name else "sign-flip test over tasks")
    ci = g.get("rae_ci")
    ci_txt = f", 95% CI {ci[0] * 100:+.1f} to {ci[1] * 100:+.1f}" if ci else ""
    n_t = g.get("n_cond_tasks") or n
    where = f"{n_t:,} tasks" if n_t == n else f"{n_t:,} tasks ({n:,} pairs)"
    counts = f"{g.get('cond_b', 0):,} rescues vs {g.get('cond_c', 0):,} harms on {where} that retrieved skills"
    if not g.get("reportable") or rae is None:
        verdict = "too-few"
        text = f"too few tasks retrieved skills to tell ({where} retrieval-triggered)"
    elif p is not None and p <= alpha and g.get("cond_b", 0) + g.get("cond_c", 0) < MIN_VERDICT_FLIPS:
        verdict = "unclear"
        text = (f"no clear effect where skills are used: RAE {_pp(rae)}{ci_txt} ({counts}; {test} "
                f"{_p(p)}, {_too_few(g.get('cond_b', 0) + g.get('cond_c', 0))})")
    elif p is not None and p <= alpha and rae < 0:
        verdict = "hurts"
        text = f"skills hurt where they are used: RAE {_pp(rae)}{ci_txt} ({counts}; {test} {_p(p)})"
    elif p is not None and p <= alpha and rae > 0:
        verdict = "helps"
        text = f"skills help where they are used: RAE {_pp(rae)}{ci_txt} ({counts}; {test} {_p(p)})"
    else:
        verdict = "unclear"
        text = (f"no clear effect where skills are used: RAE {_pp(rae)}{ci_txt} ({counts}; "
                f"{test} {_p(p)}, not below {alpha})")
    both = both_ways_sentence(g, alpha)
    if both and verdict == "unclear":
        verdict = "both-ways"
        text = (f"skills work both ways where they are used: {both}; RAE {_pp(rae)}{ci_txt} nets them "
                f"out ({counts}). They help some tasks and hurt others: split the tasks by what they "
                "need (benchmark, task features) or rewrite the skills' triggers")
    elif both:
        text += f"; they also work both ways: {both}"
    partial = partial_use_text(g)
    if partial:
        text += f"; {partial}"
    sign = None
    if g.get("sign_disagreement"):
        sign = (f"the aggregate lift ({_pp(g.get('agg_lift'))}) points the other way from RAE "
                f"({_pp(rae)}): comparing tasks that retrieved skills with tasks that did not "
                "gives the opposite answer to running the same tasks with and without skills")
    return {
        "model": g["model"], "benchmark": g["benchmark"], "verdict": verdict, "text": text,
        "b": g.get("cond_b", 0), "c": g.get("cond_c", 0), "n_tasks": n_t,
        "rae": rae, "rae_ci": ci, "agg_lift": g.get("agg_lift"), "mcnemar_p_cond": g.get("mcnemar_p_cond"),
        "p_cond": p, "n_cond": n, "n_cond_tasks": n_t,
        "sign_disagreement": bool(g.get("sign_disagreement")), "sign_text": sign,
        "selection_text": g.get("selection_warning"),
        "injection_text": g.get("injection_text"),
        "partial_use_text": partial,
        "partial_use": [g.get("n_use_unlogged", 0), g.get("n_pairs", 0)] if partial else None,
        "aa_flip_rate": g.get("aa_flip_rate"),
        "flip_rate": (g["aa_between_flip_rate"] if g.get("aa_between_flip_rate") is not None
                      else (g.get("b", 0) + g.get("c", 0)) / g["n_pairs"] if g.get("n_pairs") else None),
    }


def _model_library(effects: Sequence[dict[str, Any]], model: str) -> tuple[dict[str, Any] | None, list[str]]:
    """One model's library-level effect (benchmark '*' when it ran several benchmarks, else its one
    cell; None if it has none) and the benchmarks where, on their own, the harm is library-wide."""
    mine = [e for e in effects if e["model"] in (model, "*")]
    pooled = next((e for e in mine if e["benchmark"] == "*"), mine[0] if len(mine) == 1 else None)
    wide = [e["benchmark"] for e in effects if e["model"] == model and e["benchmark"] != "*"
            and e["verdict"] == "library-wide"]
    return pooled, wide


def _library_sentence(effects: Sequence[dict[str, Any]], model: str,
                      recommendations: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(verdict, sentence): is the harm library-wide or in specific entries, for one model."""
    pooled, wide = _model_library(effects, model)
    if pooled is None:
        return None, None
    text = pooled["text"]
    verdict = pooled["verdict"]
    recs = (recommendations or {}).get("recommendations", [])
    if verdict == "skill-specific":
        flagged = [r["skill_id"] for r in recs if r.get("scope") == "skill" and r["action"] in ("prune", "rewrite")
                   and (model in r.get("models", []) or "*" in r.get("models", []))]
        if not flagged:
            text += "; no single entry is reliably worse than the others, so nothing is pruned for it"
    if verdict != "library-wide" and wide:
        text += f"; on {', '.join(wide)} alone the harm is library-wide"
    return verdict, text


def _library_short(effects: Sequence[dict[str, Any]], model: str) -> str | None:
    """A few words for the library-level verdict of one model (the headline's terminal form)."""
    pooled, wide = _model_library(effects, model)
    if pooled is None:
        return None
    het = pooled.get("heterogeneity_p")
    het_txt = f" (heterogeneity {p_text(het)})" if het is not None else ""
    if not pooled.get("reportable", True):
        words = "too few retrieving tasks for a library verdict"
    elif pooled.get("text", "").startswith(TOO_FEW_FLIPS):
        words = "too few flips for a library verdict"
    elif pooled["verdict"] == "library-wide":
        words = f"{'harm' if pooled.get('direction') == 'harm' else 'effect'} is library-wide{het_txt}"
    elif pooled["verdict"] == "skill-specific":
        words = f"entries differ{het_txt}"
    else:
        words = "no library-level verdict"
    if pooled["verdict"] != "library-wide" and wide:
        words += f"; library-wide on {', '.join(wide)}"
    return words


_INJECTION = "injection hurts, not these skills"


def _injection_sentence(groups: Sequence[dict[str, Any]], model: str, pooled: str | None) -> str | None:
    """The control arms' sentence for a model, plus the benchmarks whose own arms say "injection
    hurts, not these skills" where the pooled arms do not (pooling can hide it: one benchmark's
    content effect ~0 averaged with another's below 0)."""
    if not pooled:
        return pooled
    own = [g["benchmark"] for g in groups if g["model"] == model and g["benchmark"] != "*"
           and _INJECTION in (g.get("injection_text") or "")]
    if own and _INJECTION not in pooled:
        pooled += f"; on {', '.join(own)} alone, {_INJECTION} (a control arm did as badly as the retrieved skills)"
    return pooled


def headline(metrics: dict[str, Any], recommendations: dict[str, Any] | None,
             library: Sequence[dict[str, Any]] = (), verify: dict[str, Any] | None = None,
             reach: Sequence[dict[str, Any]] = (), integrity: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answer to "does the library help where it is used?", one verdict per model, whether
    the harm (or help) is library-wide or in specific entries, and (`reach`, `skillaudit.analysis.reach`)
    how many of the skills each model was offered it opened."""
    pooled = [g for g in metrics["groups"] if g["benchmark"] == "*"]
    per_model = [model_verdict(g) for g in pooled]
    reach_of = {r["model"]: r for r in reach}
    for v in per_model:
        v["reach"] = reach_of.get(v["model"])
        if v.get("use_logged") is False:  # no retrieval to judge the library by: the bundle section says why
            v["library_verdict"], v["library_text"] = "use-not-logged", None
        else:
            v["library_verdict"], v["library_text"] = _library_sentence(library, v["model"], recommendations)
        v["injection_text"] = _injection_sentence(metrics["groups"], v["model"], v.get("injection_text"))
    verdicts = [v["verdict"] for v in per_model]
    offered_only = bool(per_model) and all(v.get("use_logged") is False for v in per_model)
    if offered_only:
        n = len(per_model)
        counts = {k: verdicts.count(k) for k in ("helps", "hurts", "unclear")}
        overall = ("mixed" if counts["helps"] and counts["hurts"] else "helps" if counts["helps"]
                   else "hurts" if counts["hurts"] else "unclear")
        title = {
            "helps": "Offering the skills helps (skill use not logged)",
            "hurts": "Offering the skills hurts (skill use not logged)",
            "mixed": "Offering the skills helps some agents and hurts others (skill use not logged)",
            "unclear": "No clear effect of offering the skills (skill use not logged)",
        }[overall]
        words = {"helps": "offering helps", "hurts": "offering hurts", "unclear": "no clear effect"}
        parts = [f"{words[k]} for {c} of them" for k, c in counts.items() if c]
        text = ((f"On {per_model[0]['model']}: " if n == 1 else f"Across {n} models: ")
                + "; ".join(parts) + f". {USE_NOT_LOGGED[0].upper()}{USE_NOT_LOGGED[1:]} (OAE), "
                "not of using them: the runs record which skills were offered, not which were read, "
                "so the effect where skills are used (RAE) and per-skill verdicts cannot be computed.")
    elif len(per_model) == 1:
        v = per_model[0]
        overall = v["verdict"]
        title = {
            "helps": "The skill library helps where it is used",
            "hurts": "The skill library hurts where it is used",
            "unclear": "No clear effect of the skill library where it is used",
            "both-ways": "The skill library helps some tasks and hurts others where it is used",
            "too-few": "Too few tasks retrieved skills to judge the library",
        }[overall]
        text = f"On {v['model']}, {v['text']}."
        if v.get("reach"):
            text += f" The agent {v['reach']['text']}."
    else:
        counts = {k: verdicts.count(k) for k in ("hurts", "helps", "both-ways", "unclear", "too-few")}
        if counts["hurts"] and not counts["helps"]:
            overall = "hurts"
        elif counts["helps"] and not counts["hurts"]:
            overall = "helps"
        elif counts["helps"] and counts["hurts"]:
            overall = "mixed"
        elif counts["both-ways"]:
            overall = "both-ways"
        elif counts["unclear"]:
            overall = "unclear"
        else:
            overall = "too-few"
        title = {
            "helps": "The skill library helps where it is used",
            "hurts": "The skill library hurts where it is used",
            "mixed": "The skill library helps some models and hurts others",
            "unclear": "No clear effect of the skill library where it is used",
            "both-ways": "The skill library helps some tasks and hurts others where it is used",
            "too-few": "Too few tasks retrieved skills to judge the library",
        }[overall]
        n = len(per_model)
        words = {"hurts": "skills hurt", "helps": "skills help", "both-ways": "skills work both ways",
                 "unclear": "no clear effect", "too-few": "too few retrievals to tell"}
        parts = [f"{words[k]} for {v} of them" for k, v in counts.items() if v]
        text = f"Across {n} models: " + "; ".join(parts) + "."
        reached = [f"{v['model']} {v['reach']['text']}" for v in per_model if v.get("reach")]
        if reached:
            text += " Skill reach: " + "; ".join(reached) + "."
    for v in per_model:
        v["library_short"] = _library_short(library, v["model"]) if v["library_text"] else None
    action = None
    act_on: dict[str, list[str]] = {"library": [], "prune": [], "rewrite": [], "merge": []}
    measured = []
    if recommendations:
        recs = recommendations.get("recommendations", [])
        skill_recs = [r for r in recs if r.get("scope", "skill") == "skill"]
        by = {a: list(dict.fromkeys(r["skill_id"] for r in skill_recs if r["action"] == a))
              for a in ("prune", "rewrite", "merge")}
        proj = recommendations.get("projected") or {}
        parts = []
        for r in recs:
            if r.get("scope") == "library":
                where = "" if r.get("benchmark") in (None, "*") else f" on {r['benchmark']}"
                verb = {"gate-retrieval": "gate retrieval", "verify": "verify with control arms (run --arms random,empty)"
                        }.get(r["action"], "retrieve fewer skills per call")
                parts.append(f"{verb} for {r.get('model')}{where} ({r['action']})")
                act_on["library"].append(f"{verb} for {r.get('model')}{where}")
        for verb in ("prune", "rewrite", "merge"):
            act_on[verb] = by[verb]
        for verb in ("prune", "rewrite", "merge"):  # the skills to act on, by name
            if by[verb]:
                parts.append(f"{verb} {len(by[verb])} ({', '.join(by[verb][:4])}"
                             f"{', …' if len(by[verb]) > 4 else ''})")
        if parts:
            action = "Recommended: " + "; ".join(parts) + "."
            if by["prune"] and proj.get("rae_after") is not None:
                action += (f" Projected RAE without the prune set: {_pp(proj.get('rae_before'))} → "
                           f"{_pp(proj.get('rae_after'))} (a projection, not a measurement).")
        elif offered_only:
            action = ("No skill is judged on its own: which skills each run used is not recorded "
                      "(see the task bundles).")
        else:
            action = "No skill is reliably harmful enough to prune, rewrite or merge."
    if verify:
        for r in verify.get("rows", []):
            if r["skill_id"] is None and r["measured"] is not None:
                ci = r.get("measured_ci")
                ci_txt = f" [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]" if ci else ""
                measured.append({"model": r["model"], "excluded": list(r["excluded"]), "n_rerun": r["n_rerun"],
                                 "rae_before": r["rae_before"], "measured": r["measured"], "measured_ci": ci,
                                 "projected": r["projected"]})
                action = (action + " " if action else "") + (
                    f"Measured by re-running {r['n_rerun']} pairs without {', '.join(r['excluded'])} on "
                    f"{r['model']}: RAE {_pp(r['rae_before'])} → {_pp(r['measured'])}{ci_txt} "
                    f"(projected {_pp(r['projected'])}).")
    if integrity and integrity.get("summary"):  # before any statistic: the arms are not what they claim
        text = f"⚠ {integrity['summary'][0].upper()}{integrity['summary'][1:]}. {text}"
    return {
        "integrity": integrity,
        "verdict": overall, "title": title, "text": text, "action": action,
        "act_on": act_on, "measured": measured,
        "per_model": per_model,
        "library": [{"model": v["model"], "verdict": v["library_verdict"], "text": v["library_text"]}
                    for v in per_model if v["library_text"]],
        "sign_disagreement": any(v["sign_disagreement"] for v in per_model)
        or any(g.get("sign_disagreement") for g in metrics["groups"]),
    }


def partial_use_text(g: dict[str, Any]) -> str | None:
    """One sentence when some, not all, of a group's with-skills runs did not log their skill use:
    the figures beside it are computed on the logged ones."""
    k, n = g.get("n_use_unlogged", 0), g.get("n_pairs", 0)
    if not k or k >= n:
        return None
    return (f"skill use not logged on {k:,} of {n:,} with-skills runs: RAE, Δskip and the per-skill "
            f"figures use the {n - k:,} logged ones, OAE all {n:,}")
