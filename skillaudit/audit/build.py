"""The audit flow: run the whole pipeline into one plain, JSON-ready document (`skillaudit.audit/v1`).

Pipeline: library -> paired runs -> metrics (bootstrap CIs, McNemar) -> per-skill attribution
(exposure counts, shares, regression) -> embedding clusters and near-duplicates (when a library is
given) -> recommendations and the projected effect of the prune set -> co-retrieval graph. Every
section is the `to_dict()` of the module that computed it, so `audit.json` carries the same
contracts as `metrics`, `rank`, `clusters` and `prune --json`.

Library code: raises `skillaudit.errors` exceptions, never prints; progress goes through the
optional `progress(message)` callback.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skillaudit import __version__
from skillaudit.analysis.library_effect import TOO_FEW_FLIPS
from skillaudit.errors import InputError
from skillaudit.stats import p_text
from skillaudit.stats import pp_text as _pp
from skillaudit.util.files import jsonable

AUDIT_SCHEMA = "skillaudit.audit/v1"
SECTIONS = ("metrics", "skills", "clusters", "recommendations", "graph", "inputs")
#: significance level of the headline verdict (exact McNemar on the retrieval-triggered pairs)
VERDICT_ALPHA = 0.05
#: default bootstrap resamples of the regression attribution (its CIs); the metrics use --bootstrap.
#: Each resample solves a skills x skills system, so libraries of thousands of skills want fewer.
MAX_REGRESSION_BOOT = 2000

Progress = Callable[[str], None]


def _noop(_: str) -> None:
    return None


# ---------------------------------------------------------------- the result
@dataclass(frozen=True)
class AuditResult:
    """The whole audit as plain data; `to_dict()` is what `audit.json` holds.

    Sections: `headline` (the verdict), `metrics` (skillaudit.metrics/v1), `skills`
    (skillaudit.rank/v1), `clusters` (skillaudit.clusters/v1 plus a 2-D `map`, or None without a
    library), `recommendations` (skillaudit.prune/v1), `graph` (co-retrieval graph summary),
    `inputs` (file hashes, version, settings), `figures` (file names inside the report).
    """

    headline: dict[str, Any]
    metrics: dict[str, Any]
    skills: dict[str, Any]
    clusters: dict[str, Any] | None
    recommendations: dict[str, Any]
    graph: dict[str, Any]
    inputs: dict[str, Any]
    figures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # library-level verdicts per model and benchmark (skillaudit.analysis.library_effect)
    library: list[dict[str, Any]] = field(default_factory=list)
    # measured vs projected, where `pruned` re-runs exist (skillaudit.verify/v1)
    verify: dict[str, Any] | None = None
    # live objects for the writers (not serialised): the networkx export graph
    extras: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": AUDIT_SCHEMA,
            "headline": self.headline,
            "library": list(self.library),
            "verify": self.verify,
            "metrics": self.metrics,
            "skills": self.skills,
            "clusters": self.clusters,
            "recommendations": self.recommendations,
            "graph": self.graph,
            "inputs": self.inputs,
            "figures": dict(self.figures),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> AuditResult:
        if not isinstance(doc, dict) or doc.get("schema") != AUDIT_SCHEMA:
            raise InputError(f"not a {AUDIT_SCHEMA} document")
        missing = [s for s in (*SECTIONS, "headline") if s not in doc]
        if missing:
            raise InputError(f"{AUDIT_SCHEMA} document lacks section(s): {', '.join(missing)}")
        return cls(
            headline=doc["headline"], metrics=doc["metrics"], skills=doc["skills"],
            clusters=doc["clusters"], recommendations=doc["recommendations"], graph=doc["graph"],
            inputs=doc["inputs"], figures=dict(doc.get("figures") or {}),
            notes=list(doc.get("notes") or []), library=list(doc.get("library") or []),
            verify=doc.get("verify"),
        )


def load_audit(path: str | Path) -> AuditResult:
    """Read an `audit.json` back (InputError when it is not one)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read an audit document: {exc}") from None
    try:
        return AuditResult.from_dict(doc)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None


# ---------------------------------------------------------------- inputs: hashes
def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _library_digest(path: Path, unreadable: list[str] | None = None) -> tuple[str, int]:
    """sha256 over a library's files (relative path + content, sorted); (digest, file count).

    A file that cannot be read counts by its path and the word `unreadable` (appended to
    `unreadable`); special files (FIFOs, sockets, devices) are not files here."""
    if path.is_file():
        return _sha256_file(path), 1
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and not any(
        part.startswith(".") for part in p.relative_to(path).parts))
    for p in files:
        h.update(p.relative_to(path).as_posix().encode("utf-8") + b"\0")
        try:
            h.update(_sha256_file(p).encode("ascii") + b"\n")
        except OSError as exc:
            h.update(b"unreadable\n")
            if unreadable is not None:
                unreadable.append(f"{p}: cannot read ({exc.strerror or exc}); hashed as unreadable")
    return h.hexdigest(), len(files)


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def describe_inputs(run_paths: Sequence[str], skills_path: str | None, library: Any,
                    settings: dict[str, Any], demo: bool = False,
                    digests: dict[str, str] | None = None) -> dict[str, Any]:
    """Paths, sizes and sha256 of the inputs, versions and settings. `digests`: {path: sha256} of
    the run logs already hashed as they were read (`Inputs.digests`); others are hashed here."""
    runs = []
    for r in run_paths:
        p = Path(r)
        if r == "-" or not _is_regular(p):  # a stream (stdin, a FIFO, <(...)) was read once, already
            runs.append({"path": str(r), "sha256": None, "bytes": None})
            continue
        digest = (digests or {}).get(str(r))
        try:
            digest = digest or _sha256_file(p)
        except OSError:
            digest = None
        runs.append({"path": str(r), "name": p.name, "sha256": digest, "bytes": p.stat().st_size})
    lib = None
    if skills_path is not None:
        unreadable: list[str] = []
        digest, n_files = _library_digest(Path(skills_path), unreadable)
        lib = {
            "path": str(skills_path), "sha256": digest, "files": n_files,
            "n_skills": len(library) if library is not None else 0,
            "warnings": [*getattr(library, "warnings", ()), *unreadable],
        }
    return {
        "skillaudit_version": __version__,
        "python": platform.python_version(),
        "generated_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "demo": demo,
        "runs": runs,
        "library": lib,
        "settings": settings,
    }


# ---------------------------------------------------------------- headline verdict
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


CANNOT_SAY = (
    "Without skill-use logs these runs cannot say: the effect where skills are actually used (RAE) "
    "or on runs that ignored them (Δskip), the retrieval funnel (Figure 1's invoked / retrieved / "
    "adhered stages), which skill of a bundle helped or hurt, or whether an effect is library-wide "
    "or in specific skills. A run offered skills may never open them, so 'offered' is not "
    "'used': the access effect mixes runs that read the skills with runs that did not. Log the "
    "agent's trajectory (Harbor "
    "`agent/claude-code.txt`, `skillaudit import harbor`) to get them.")


def _audit_inputs(run_paths: Sequence[str], skills_path: str | None, library: Any, runs: Any, inputs: Any,
                  strict: bool, say: Progress) -> tuple[Any, Any, Any]:
    """(library, paired runs, inputs): what was passed in, else read (each log once). Every later
    step reads `inputs`: no step reads a log again."""
    if inputs is not None:
        library = inputs.library if library is None else library
    if library is None and skills_path is not None:
        from skillaudit.library import load_library

        say(f"reading the skill library {skills_path}")
        library = load_library(skills_path)
    if inputs is None:
        from skillaudit.runs.inputs import load_inputs

        say(f"reading {len(run_paths)} run log(s)")
        inputs = load_inputs(run_paths, library=library, strict=strict, cost=library is not None, digests=True,
                             integrity=True)
    runs = inputs.runs if runs is None else runs
    if runs.n_pairs == 0:
        raise InputError(f"{', '.join(map(str, run_paths))}: no paired records (need enabled and disabled runs)")
    return library, runs, inputs


def _verify_section(runs: Any, arms: Any, n_boot: int, seed: int, say: Progress) -> dict[str, Any] | None:
    """Measured vs projected effect of the pruned re-runs, when the logs hold a pruned arm."""
    if arms is None or "pruned" not in arms.names:
        return None
    from skillaudit.analysis.verify import verify

    say("measured vs projected effect of the pruned re-runs")
    return verify(runs, arms, n_boot=min(n_boot, 2000), seed=seed).to_dict()


def _mark_edited(attr: Any, edited: dict[str, bool] | None, notes: list[str]) -> Any:
    """The attribution with each skill's edited-since-the-runs flag; a note names the edited ones."""
    if not edited:
        return attr
    from skillaudit.runs.provenance import mark_edited

    attr = mark_edited(attr, edited)
    changed = sorted(s for s, e in edited.items() if e)
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
        notes.append(f"{len(changed)} skill(s) edited since these runs ({shown}): the library's text differs "
                     "from the one the runs retrieved, so their verdicts describe the old text.")
    return attr


def _clusters_step(library: Any, rows: dict[str, Any], runs: Any, notes: list[str], *, embedder: str,
                   embed_model: str | None, cache_dir: str | None, threshold: float | None) -> tuple[Any, dict[str, Any]]:
    """Embed and cluster the library: (the cluster report, the clusters section without communities)."""
    from skillaudit.analysis.clusters import cluster_library

    cluster_rep = cluster_library(library, rows, runs, embedder=embedder, model_path=embed_model,
                                  cache_dir=cache_dir, threshold=threshold)
    if cluster_rep.fallback_reason:
        notes.append(f"The MiniLM embedder could not be loaded ({cluster_rep.fallback_reason}).")
    near_dups = list(cluster_rep.near_duplicates)
    clusters_doc = {"schema": "skillaudit.clusters/v1", **cluster_rep.to_dict(),
                    "map": _map_coordinates(cluster_rep.embeddings)}
    clusters_doc["near_duplicates_total"] = len(near_dups)
    if len(near_dups) > MAX_NEAR_DUPLICATES:
        clusters_doc["near_duplicates"] = clusters_doc["near_duplicates"][:MAX_NEAR_DUPLICATES]
        notes.append(f"{len(near_dups):,} near-duplicate pairs: audit.json and skill_graph.graphml keep "
                     f"the {MAX_NEAR_DUPLICATES:,} most similar (`skillaudit clusters --json` lists "
                     "them all).")
    return cluster_rep, clusters_doc


def _offered_only_pairs(runs: Any) -> np.ndarray:
    """Bool per pair: its model logged no skill use on any pair (offered only, as the SkillsBench
    registry). A model that logged use on some runs is judged on those (`partial_use_text`)."""
    unlogged = runs.use_unlogged
    if not unlogged.any():
        return unlogged
    logged_models = np.unique(runs.model[~unlogged])
    return unlogged & ~np.isin(runs.model, logged_models)


def partial_use_text(g: dict[str, Any]) -> str | None:
    """One sentence when some, not all, of a group's with-skills runs did not log their skill use:
    the figures beside it are computed on the logged ones."""
    k, n = g.get("n_use_unlogged", 0), g.get("n_pairs", 0)
    if not k or k >= n:
        return None
    return (f"skill use not logged on {k:,} of {n:,} with-skills runs: RAE, Δskip and the per-skill "
            f"figures use the {n - k:,} logged ones, OAE all {n:,}")


def _pairs_doc(runs: Any, notes: list[str]) -> dict[str, Any]:
    """What was paired (the inputs section), with notes on what was left out."""
    if runs.n_unpaired:
        notes.append(f"{runs.n_unpaired} record(s) without their other condition were left out.")
    if runs.n_error_pairs:
        notes.append(f"{runs.n_error_pairs} pair(s) with a harness error record were left out.")
    n_tasks = int(np.unique(runs.unit_ids()).size) if runs.n_pairs else 0
    return {"n_pairs": runs.n_pairs, "n_tasks": n_tasks,
            "size_text": f"{runs.n_pairs:,} paired tasks" if n_tasks == runs.n_pairs
            else f"{n_tasks:,} tasks ({runs.n_pairs:,} pairs)",
            "models": list(runs.models), "benchmarks": list(runs.benchmarks),
            "unpaired_records": runs.n_unpaired, "error_pairs": runs.n_error_pairs,
            "skills_retrieved": len(runs.skills)}


def _skills_doc(attr: Any, library: Any, run_paths: Sequence[str], inputs: Any) -> dict[str, Any]:
    """The skills section: the attribution, the library's descriptions and tokens per skill per model."""
    from skillaudit.analysis.cost import cost_by_model

    skills_doc = attr.to_dict()
    skills_doc["descriptions"] = {s.id: s.description for s in library} if library is not None else {}
    cost_doc = cost_by_model(run_paths, library, table=inputs.cost_table) if inputs.cost_table is not None else None
    if cost_doc is not None:
        skills_doc["cost"] = cost_doc
    return skills_doc


def bundles_section(runs: Any, top: int = 8) -> dict[str, Any]:
    """The per task-bundle view (skillaudit.analysis.bundles) for the report: the most harmful bundles with
    the agents they hurt, and what cannot be said without skill-use logs."""
    from skillaudit.analysis.bundles import bundle_effects

    res = bundle_effects(runs)
    worst = res.harmful(top)
    n_sig = sum(1 for b in res.bundles if b.q <= VERDICT_ALPHA)
    intro = (f"Each task ships its own skills, so the per-skill view is per task's bundle across "
             f"{res.n_agents} agents: an agent is a rescue of a bundle when it passed more trials with "
             "the skills than without on that task, a harm when fewer. Each bundle's sign test counts "
             f"agents, and q adjusts over all {len(res.bundles)} bundles (Benjamini-Hochberg): "
             f"{n_sig} bundle(s) at q ≤ {VERDICT_ALPHA}. One agent's cell is at most "
             "3 trials against 3 and decides nothing alone; these are associations across agents.")
    rows = []
    for b in worst:
        hurt = ", ".join(f"{c.model} {c.pass_on}/{c.trials} vs {c.pass_off}/{c.trials}" for c in b.hurt[:6])
        more = f" and {len(b.hurt) - 6} more" if len(b.hurt) > 6 else ""
        rows.append({"task": b.task, "benchmark": b.benchmark, "text": b.sentence(),
                     "hurt_text": f"hurt {hurt}{more} (passes with vs without)",
                     "rescues": b.rescues, "harms": b.harms, "effect": b.effect, "p": b.p, "q": b.q})
    return {"schema": "skillaudit.bundles/v1", "intro": intro, "worst": rows,
            "n_bundles": len(res.bundles), "n_agents": res.n_agents, "n_significant": n_sig,
            "cannot_say": CANNOT_SAY,
            "all": [{"task": b.task, "benchmark": b.benchmark, "rescues": b.rescues, "harms": b.harms,
                     "agents": b.agents, "effect": b.effect, "p": b.p, "q": b.q} for b in res.bundles]}


# ---------------------------------------------------------------- pieces
#: lists longer than this inside audit.json are cut (the full lists are a command away)
MAX_EVIDENCE_LIST = 25
MAX_NEAR_DUPLICATES = 5000
MAX_INTERFERENCE = 200
#: skill_graph.graphml keeps only the backbone of a co-retrieval graph with more edges than this
#: (the graph the communities are found on): a large library co-retrieved at random has
#: hundreds of thousands of edges, which no graph viewer shows usefully
MAX_GRAPH_EDGES = 20_000


def _compact_recommendations(doc: dict[str, Any]) -> dict[str, Any]:
    """Cut long lists in the evidence (e.g. a harmful cluster of hundreds of skills, repeated for
    every member) to MAX_EVIDENCE_LIST items plus a `<key>_total` count."""
    for rec in doc.get("recommendations", []):
        ev = rec.get("evidence") or {}
        for key, value in list(ev.items()):
            if isinstance(value, (list, tuple)) and len(value) > MAX_EVIDENCE_LIST:
                ev[key] = list(value[:MAX_EVIDENCE_LIST])
                ev[f"{key}_total"] = len(value)
    return doc


def _map_coordinates(emb: Any) -> list[dict[str, Any]]:
    """2-D PCA coordinates of the skill vectors (deterministic sign)."""
    if emb is None or len(emb.keys) == 0:
        return []
    v = np.asarray(emb.vectors, dtype=np.float64)
    n = v.shape[0]
    if n == 1:
        xy = np.zeros((1, 2))
    else:
        centred = v - v.mean(axis=0)
        u, s, _ = np.linalg.svd(centred, full_matrices=False)
        xy = u[:, :2] * s[:2]
        if xy.shape[1] < 2:
            xy = np.hstack([xy, np.zeros((n, 2 - xy.shape[1]))])
        for j in range(2):  # fix the sign so the same library always draws the same way
            k = int(np.argmax(np.abs(xy[:, j])))
            if xy[k, j] < 0:
                xy[:, j] = -xy[:, j]
    return [{"skill_id": k, "x": round(float(x), 6), "y": round(float(y), 6)}
            for k, (x, y) in zip(emb.keys, xy, strict=True)]


def _graph_section(runs: Any, rows: dict[str, Any], library: Any, near_dups: list, cluster_rep: Any,
                   seed: int) -> tuple[dict[str, Any], Any, list[str]]:
    """The `graph` section, the (bounded) graph to export and notes on what was cut.

    Everything is computed from sparse co-retrieval counts: the whole graph (hundreds of thousands
    of edges for a large library) is never built. The export keeps the backbone the communities
    were found on, the interfering pairs and the near-duplicate pairs audit.json keeps.
    """
    from skillaudit.analysis.graph import (
        co_retrieval_counts,
        communities_of,
        community_summary,
        interference,
        merge_groups,
        skill_graph,
        top_co_retrieved,
    )

    counts = co_retrieval_counts(runs)
    inter = interference(runs, counts=counts)
    cluster_of = cluster_rep.cluster_of() if cluster_rep is not None else None
    harmful_ids = [c.id for c in cluster_rep.clusters if c.harmful] if cluster_rep is not None else []
    g = skill_graph(runs, rows, library, near_duplicates=near_dups[:MAX_NEAR_DUPLICATES],
                    cluster_of=cluster_of, harmful_clusters=harmful_ids, seed=seed, interfering=inter,
                    max_edges=MAX_GRAPH_EDGES, counts=counts)
    # skill_graph already ran Louvain on the co-retrieval graph; reuse its partition
    comms = community_summary(g, communities_of(g), counts)
    exported = sum(1 for *_, w in g.edges(data="weight", default=0) if w > 0)
    section = {
        "nodes": len(set(g) | {n for a, b, _ in near_dups for n in (a, b)}),
        "co_retrieval_edges": counts.n_edges,
        "near_duplicate_edges": len({frozenset((a, b)) for a, b, _ in near_dups}),
        "top_co_retrieved": top_co_retrieved(counts, 20),
        "communities": comms,
        "interference": [x.to_dict() for x in inter[:MAX_INTERFERENCE]],
        "interference_total": len(inter),
        "merge_groups": merge_groups(near_dups),
        "export": "skill_graph.graphml",
        "export_co_retrieval_edges": exported,
    }
    notes = []
    if exported < counts.n_edges:
        notes.append(f"The co-retrieval graph has {counts.n_edges:,} edges: skill_graph.graphml keeps its "
                     f"backbone ({exported:,} edges: each skill's {g.graph['backbone_per_skill']} "
                     "strongest co-retrievals, the graph the communities were found on, plus the "
                     "interfering pairs); `skillaudit graph` exports every edge.")
    if len(inter) > MAX_INTERFERENCE:
        notes.append(f"{len(inter):,} skill pairs do worse together: audit.json keeps the "
                     f"{MAX_INTERFERENCE:,} with the strongest evidence (`skillaudit clusters --json` "
                     "lists them all).")
    return section, g, notes


# ---------------------------------------------------------------- the pipeline
def build_audit(
    run_paths: Sequence[str],
    skills_path: str | None = None,
    *,
    embedder: str = "minilm",
    embed_model: str | None = None,
    cache_dir: str | None = None,
    near_duplicate_threshold: float | None = None,
    n_boot: int = 20_000,
    regression_boot: int = MAX_REGRESSION_BOOT,
    seed: int = 0,
    min_cond: int = 10,
    attribution: str = "equal",
    strict: bool = False,
    progress: Progress | None = None,
    demo: bool = False,
    library: Any = None,
    runs: Any = None,
    arms: Any = None,
    edited: dict[str, bool] | None = None,
    jobs: int = 1,
    inputs: Any = None,
) -> AuditResult:
    """Run every step and return the audit document (InputError on unusable input).

    `library` / `runs` may be passed already loaded (the CLI loads them to print warnings), or
    `inputs` (`skillaudit.runs.inputs.load_inputs`, with cost and digests: the logs read once);
    otherwise they are loaded from `skills_path` / `run_paths`, each log read once. `edited`
    ({skill id: edited since the runs?}, `provenance.edited_skills`) is read from the logs' skill
    hashes when not given.
    """
    from skillaudit.analysis.attribution import attribute_models
    from skillaudit.analysis.metrics import compute_metrics
    from skillaudit.decide.recommend import recommend
    say = progress or _noop
    library, runs, inputs = _audit_inputs(run_paths, skills_path, library, runs, inputs, strict, say)
    notes: list[str] = []

    from skillaudit.analysis.methods import interval_summary

    say(f"paired metrics for {runs.n_pairs:,} pairs ({len(runs.models)} model(s), "
        f"{len(runs.benchmarks)} benchmark(s)): {interval_summary(n_boot)}")
    if arms is None and runs.n_arm_records:
        arms = inputs.arms(runs)
    metrics = compute_metrics(runs, min_cond=min_cond, n_boot=n_boot, seed=seed, arms=arms)

    reg_boot = min(n_boot, regression_boot)
    if reg_boot > 0:
        say(f"per-skill attribution ({attribution}) and regression ({reg_boot:,} resamples)")
    else:  # no CIs: the regression cannot confirm anything, so exposure counts decide alone
        say(f"per-skill attribution ({attribution}), no regression (no bootstrap resamples)")
        notes.append("The per-skill regression was off (no bootstrap resamples): there is no library-level "
                     "verdict and no skill is judged harmful; exposure counts alone are associations.")
    offered = inputs.offered
    judged = library
    if library is None and not runs.use_unlogged.all():  # offered-only runs judge no skill (the bundles do)
        from skillaudit.library import offered_library

        judged = offered_library(offered, inputs.offered_unknown)
        if judged is not None:
            notes.append(f"No skill library was given (--skills): {judged.source} ({len(judged)}) stand for it "
                         "in the per-skill verdicts (their texts are not in the runs: no clusters or "
                         "near-duplicates).")
    attr = attribute_models(runs, library=judged, scheme=attribution, regression=reg_boot > 0,
                            n_boot=reg_boot, seed=seed, min_cond=min_cond, arms=arms, jobs=jobs)
    if edited is None and library is not None:
        from skillaudit.runs.provenance import edited_skills

        edited = inputs.edited if inputs.library is library else edited_skills(inputs.seen_hashes, library)
    attr = _mark_edited(attr, edited, notes)
    rows = {r.skill_id: r for r in attr.pooled_rows()}  # clusters and graphs look at all pairs

    cluster_rep = None
    clusters_doc: dict[str, Any] | None = None
    near_dups: list = []
    harmful_groups: list[list[str]] | None = None
    if library is not None and len(library):
        say(f"embedding {len(library)} skills ({embedder}) and clustering")
        cluster_rep, clusters_doc = _clusters_step(library, rows, runs, notes, embedder=embedder,
                                                   embed_model=embed_model, cache_dir=cache_dir,
                                                   threshold=near_duplicate_threshold)
        near_dups = list(cluster_rep.near_duplicates)
        harmful_groups = cluster_rep.harmful_members()
    elif library is None and judged is None:
        notes.append("No skill library was given (--skills): no clusters, near-duplicates or skill texts.")

    say("recommendations and the projected effect of pruning")
    prune = recommend(runs, attr, near_duplicates=near_dups if library is not None else None,
                      harmful_clusters=harmful_groups, offered=offered,
                      arms=arms)

    say("co-retrieval graph")
    graph_doc, graph_obj, graph_notes = _graph_section(runs, rows, library, near_dups, cluster_rep, seed)
    notes.extend(graph_notes)
    if clusters_doc is not None:
        clusters_doc["communities"] = graph_doc["communities"]
        clusters_doc["interference"] = graph_doc["interference"]
        clusters_doc["interference_total"] = graph_doc["interference_total"]

    settings = {
        "embedder": embedder,
        "embedder_used": cluster_rep.embedder if cluster_rep is not None else None,
        "near_duplicate_threshold": near_duplicate_threshold,
        "bootstrap": n_boot, "regression_bootstrap": reg_boot, "seed": seed,
        "min_cond": min_cond, "attribution": attribution, "strict": strict,
        "verdict_alpha": VERDICT_ALPHA,
    }
    described = describe_inputs(run_paths, skills_path, library, settings, demo=demo,
                                digests=inputs.digests)
    described["pairs"] = _pairs_doc(runs, notes)
    skills_doc = _skills_doc(attr, library, run_paths, inputs)

    metrics_doc = metrics.to_dict()
    prune_doc = _compact_recommendations(prune.to_dict())
    library_doc = [e.to_dict() for e in attr.library]
    bundles_doc = None
    offered_only = _offered_only_pairs(runs)
    if offered_only.any():
        say("per task-bundle effects across agents (skill use not logged)")
        bundles_doc = bundles_section(runs.subset(offered_only))
        if runs.use_unlogged.all():
            library_doc = []  # nothing retrieved to judge entries by: the bundle section says why
    verify_doc = _verify_section(runs, arms, n_boot, seed, say)
    from skillaudit.analysis.reach import skill_reach

    reach_doc = [r.to_dict() for r in skill_reach(runs, inputs.offered, inputs.offered_unknown)]
    from skillaudit.analysis.integrity import arm_integrity

    integrity_doc = arm_integrity(inputs).to_dict()
    result = AuditResult(
        verify=verify_doc,
        headline={**headline(metrics_doc, prune_doc, library_doc, verify_doc, reach=reach_doc,
                             integrity=integrity_doc),
                  **({"bundles": bundles_doc} if bundles_doc else {})},
        library=library_doc,
        metrics=metrics_doc,
        skills=skills_doc,
        clusters=clusters_doc,
        recommendations=prune_doc,
        graph=graph_doc,
        inputs=described,
        notes=notes,
    )
    # one normalisation pass: what is in memory is exactly what audit.json will hold
    plain = json.loads(json.dumps(jsonable(result.to_dict()), allow_nan=False))
    out = AuditResult.from_dict(plain)
    out.extras["graph"] = graph_obj
    return out
