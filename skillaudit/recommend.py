"""One recommendation per skill (`prune | rewrite | merge | keep | needs-data | unused`) and the
projected effect of removing the prune set (DESIGN §2, §3.3 `skillaudit.prune/v1`).

Rules, in order (thresholds in `Rules`; docs/attribution.md explains them):

1. `unused`: never retrieved.
2. *harmful* = the exposure counts say so (net < 0, BH q <= q_max) **and** the regression agrees
   (coefficient interval entirely below 0). When the regression clears the skill (interval reaches
   0 or above) it is never pruned on exposure counts alone; when it cannot tell the skill apart
   from an alias, the verdict is `needs-data` (retrieve them apart). With `regression=False` the
   exposure counts decide alone, and the reason says so.
   - harmful and a near-duplicate partner that is reliably helpful -> `rewrite` (after the partner);
   - harmful but rescuing in real numbers (b >= mixed_min and b/(b+c) > rescue_max) -> `rewrite`;
   - otherwise -> `prune`.
3. *mixed* (not net-harmful): b and c both >= mixed_min, the smaller side >= mixed_ratio of the
   discordant pairs, and more discordant pairs than the other retrieving pairs have (one-sided
   binomial test, BH q <= q_max) -> `rewrite`.
4. *helpful* (net > 0 with q <= q_max and the regression not against it) -> `keep`.
5. near-duplicate of a better skill (higher coefficient or rae_k) -> `merge`.
6. fewer retrievals than a McNemar power calculation needs to detect `delta_min` (or the observed
   effect when larger) -> `needs-data`, saying about how many more retrieving tasks would decide.
7. otherwise -> `keep` (no reliable effect).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# norm.ppf / norm.sf are special.ndtri / ndtr; importing scipy.stats would cost ~1 s
from scipy import special as _sp

from ._io import atomic_directory, is_within
from .attribution import AttributionResult, SkillAttribution, indicator
from .errors import OutputError
from .runs import PairedRuns
from .stats import bh_qvalues

SCHEMA = "skillaudit.prune/v1"
ACTIONS = ("prune", "rewrite", "merge", "keep", "needs-data", "unused")


@dataclass(frozen=True)
class Rules:
    """Thresholds of the recommendation rules."""

    q_max: float = 0.10  # BH q-value for "reliably" harmful / helpful / mixed
    rescue_max: float = 0.25  # prune only when rescues are at most this share of discordant pairs
    mixed_min: int = 3  # "real numbers": at least this many rescues and harms
    mixed_ratio: float = 0.30  # smaller side / discordant pairs for "mixed"
    delta_min: float = 0.10  # smallest effect on the flip rate worth detecting (10 pp)
    power: float = 0.80  # power calculation: probability of deciding when the effect is real
    coef_q_required: bool = True  # prune also needs the regression's BH q <= q_max
    min_discordant: int = 5  # a bootstrap verdict needs at least this many flips (b + c)


@dataclass(frozen=True)
class Recommendation:
    """One skill's action, a one-line reason, and the evidence it rests on."""

    skill_id: str
    action: str
    reason: str
    evidence: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"skill_id": self.skill_id, "action": self.action, "reason": self.reason,
                "evidence": self.evidence}


@dataclass(frozen=True)
class Projection:
    """RAE/OAE before and after removing `removed` (a projection, not a measurement)."""

    removed: tuple[str, ...]
    rae_before: float | None
    rae_after: float | None
    oae_before: float | None
    oae_after: float | None
    n_cond_before: int
    n_cond_after: int
    n_fallback: int  # retrieving pairs whose retrieved set becomes empty

    def to_dict(self) -> dict[str, Any]:
        return {
            "rae_before": self.rae_before, "rae_after": self.rae_after,
            "oae_before": self.oae_before, "oae_after": self.oae_after,
            "is_projection": True,
            "removed": list(self.removed),
            "n_cond_before": self.n_cond_before, "n_cond_after": self.n_cond_after,
            "n_fallback": self.n_fallback,
            "assumption": (
                "pairs whose retrieved set becomes empty fall back to their disabled outcome; "
                "all other pairs keep their enabled outcome; no new retrievals replace the removed skills"
            ),
        }


@dataclass(frozen=True)
class PruneResult:
    """Recommendations (prune first, then rewrite, merge, needs-data, keep, unused) and projection."""

    recommendations: tuple[Recommendation, ...]
    projected: Projection
    settings: dict[str, Any] = field(default_factory=dict)

    def by_action(self, action: str) -> list[str]:
        return [r.skill_id for r in self.recommendations if r.action == action]

    def get(self, skill_id: str) -> Recommendation | None:
        for r in self.recommendations:
            if r.skill_id == skill_id:
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "recommendations": [r.to_dict() for r in self.recommendations],
            "projected": self.projected.to_dict(),
        }


# ---------------------------------------------------------------- power calculation
def mcnemar_sample_size(delta: float, psi: float, alpha: float = 0.05, power: float = 0.80) -> int:
    """Pairs needed for a two-sided McNemar test to detect a flip-rate effect `delta` (Connor 1987).

    `psi` is the discordant-pair rate (b + c) / n; it is raised to |delta| when smaller.
    """
    delta = abs(delta)
    if delta <= 0:
        raise ValueError("delta must be non-zero")
    psi = min(1.0, max(psi, delta))
    za = float(_sp.ndtri(1 - alpha / 2))
    zb = float(_sp.ndtri(power))
    n = (za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / (delta * delta)
    return math.ceil(n)


# ---------------------------------------------------------------- projection
def project(runs: PairedRuns, removed: Sequence[str]) -> Projection:
    """RAE/OAE if the skills `removed` were gone (see `Projection.to_dict()['assumption']`)."""
    f = runs.flip.astype(np.float64)
    n = runs.n_pairs
    k = runs.n_skills_retrieved
    cond = k > 0
    removed = tuple(sorted(set(removed)))
    cols = [runs.skills.index(s) for s in removed if s in runs.skills]
    gone = np.zeros(len(runs.skills))
    gone[cols] = 1.0
    lost = np.asarray(indicator(runs) @ gone).ravel() if runs.skills else np.zeros(n)
    still = cond & (k - np.rint(lost).astype(np.int64) > 0)
    fallback = cond & ~still
    n_cond, n_after = int(cond.sum()), int(still.sum())

    def rate(num: float, den: int) -> float | None:
        return float(num / den) if den else None

    return Projection(
        removed=removed,
        rae_before=rate(f[cond].sum(), n_cond),
        rae_after=rate(f[still].sum(), n_after),
        oae_before=rate(f.sum(), n),
        oae_after=rate(f.sum() - f[fallback].sum(), n),
        n_cond_before=n_cond,
        n_cond_after=n_after,
        n_fallback=int(fallback.sum()),
    )


# ---------------------------------------------------------------- rules
def _effect(a: SkillAttribution) -> float:
    """Best available per-skill effect estimate: the coefficient, else the joint alias one, else rae_k."""
    for v in (a.coef, a.alias_coef, a.rae_k):
        if v is not None:
            return float(v)
    return 0.0


def _fmt_pp(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f} pp"


def _fmt_q(q: float | None) -> str:
    return "–" if q is None else ("<0.001" if q < 0.001 else f"{q:.3f}")


def _fmt_ci(ci: Sequence[float] | None) -> str:
    return "" if not ci else f" [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]"


def recommend(
    runs: PairedRuns,
    attribution: AttributionResult,
    near_duplicates: Sequence[tuple[str, str, float]] | None = None,
    harmful_clusters: Sequence[Sequence[str]] | None = None,
    rules: Rules | None = None,
) -> PruneResult:
    """One action per skill of `attribution` plus the projected RAE/OAE without the prune set.

    `runs` must be the pairs `attribution` was computed from. `near_duplicates` are (a, b,
    similarity) from `skillaudit.clusters.find_near_duplicates`; `harmful_clusters` are groups of
    skill ids that concentrate harm (mentioned in the evidence and the reason).
    """
    rules = rules or Rules()
    rows = {a.skill_id: a for a in attribution.skills}
    regression = bool(attribution.settings.get("regression"))
    tot = attribution.totals
    psi_all = (tot["cond_b"] + tot["cond_c"]) / max(tot["n_cond"], 1)

    partner: dict[str, tuple[str, float]] = {}
    for a_id, b_id, sim in near_duplicates or ():
        for x, y in ((a_id, b_id), (b_id, a_id)):
            if x in rows and (x not in partner or sim > partner[x][1]):
                partner[x] = (y, float(sim))
    cluster_of: dict[str, list[str]] = {}
    for cl in harmful_clusters or ():
        for s in cl:
            cluster_of.setdefault(s, list(cl))

    def is_harmful(a: SkillAttribution) -> bool:
        exp = a.net < 0 and a.q_value is not None and a.q_value <= rules.q_max
        if not regression:
            return exp
        return (exp and a.identifiable is True and a.coef_ci is not None and a.coef_ci[1] < 0
                and a.b + a.c >= rules.min_discordant
                and (not rules.coef_q_required or (a.coef_q is not None and a.coef_q <= rules.q_max)))

    def is_helpful(a: SkillAttribution) -> bool:
        exp = a.net > 0 and a.q_value is not None and a.q_value <= rules.q_max
        if regression and a.identifiable and a.coef_ci is not None and a.coef_ci[1] < 0:
            return False
        return exp or bool(regression and a.identifiable and a.coef_ci is not None
                           and a.coef_ci[0] > 0 and (a.coef_q or 1.0) <= rules.q_max and a.net > 0
                           and a.b + a.c >= rules.min_discordant)

    def rank_key(sid: str) -> tuple[float, int, str]:
        a = rows.get(sid)
        if a is None:
            return (-math.inf, 0, sid)
        return (_effect(a), a.n_retrieved, sid)

    # excess discordance (mixed skills), counted on "clean" pairs where no skill already judged
    # harmful or helpful was retrieved alongside (else an innocent neighbour inherits its flips),
    # against the other clean retrieving pairs; one-sided binomial test, BH across skills
    flagged = np.array([1.0 if (s in rows and (is_harmful(rows[s]) or is_helpful(rows[s]))) else 0.0
                        for s in attribution.skill_ids])
    X = indicator(runs)
    if X.shape[1] < len(flagged):  # library-only skills were appended as empty columns
        flagged = flagged[: X.shape[1]]
    clean = runs.retrieved & (np.asarray(X @ flagged).ravel() == 0)
    f = runs.flip
    cols = np.column_stack([clean, clean & (f > 0), clean & (f < 0)]).astype(np.float64)
    mc = np.rint(np.asarray(X.T @ cols)).astype(np.int64)  # skills(in runs) x [n, b, c]
    clean_n, clean_d = int(clean.sum()), int(((f != 0) & clean).sum())
    # tasks (all epochs) are the independent units: estimate the over-dispersion of discordant
    # counts per task relative to a binomial, and widen the test by it (quasi-binomial z-test)
    units = runs.unit_ids()
    n_u = np.bincount(units, weights=clean.astype(float))
    d_u = np.bincount(units, weights=((f != 0) & clean).astype(float))
    base_all = clean_d / clean_n if clean_n else 0.0
    var_bin = float((n_u * base_all * (1 - base_all)).sum())
    phi = max(1.0, float(((d_u - n_u * base_all) ** 2).sum()) / var_bin) if var_bin > 0 else 1.0
    mixed_counts: dict[str, tuple[int, int, int]] = {}
    p_mixed = []
    for j, sid in enumerate(runs.skills[: mc.shape[0]]):
        n_j, b_j, c_j = (int(v) for v in mc[j])
        if sid not in rows or n_j == 0:
            continue
        base = (clean_d - b_j - c_j + 1) / (clean_n - n_j + 2)
        mixed_counts[sid] = (n_j, b_j, c_j)
        z = (b_j + c_j - n_j * base) / math.sqrt(phi * n_j * base * (1 - base))
        p_mixed.append((sid, float(_sp.ndtr(-z))))
    q_mixed = dict(zip([s for s, _ in p_mixed],
                       bh_qvalues(np.array([p for _, p in p_mixed], dtype=float)), strict=True))
    def is_mixed(sid: str) -> bool:
        _, b_j, c_j = mixed_counts.get(sid, (0, 0, 0))
        return (b_j >= rules.mixed_min and c_j >= rules.mixed_min
                and min(b_j, c_j) / (b_j + c_j) >= rules.mixed_ratio
                and q_mixed.get(sid, 1.0) <= rules.q_max)

    m_tested = max(1, sum(1 for a in rows.values() if a.n_retrieved > 0))
    alpha_power = rules.q_max / m_tested  # Bonferroni-like: conservative "would decide it"

    recs: list[Recommendation] = []
    for sid, a in rows.items():
        ev: dict[str, Any] = {
            "n_retrieved": a.n_retrieved, "b": a.b, "c": a.c, "net": a.net,
            "rae_k": a.rae_k, "q_value": a.q_value, "share": a.share,
            "exclusive_n": a.exclusive_n, "coef": a.coef,
            "coef_ci": list(a.coef_ci) if a.coef_ci else None,
            "identifiable": a.identifiable,
        }
        if a.aliases:
            ev["aliases"] = list(a.aliases)
            ev["alias_coef"] = a.alias_coef
        if a.in_library is False:
            ev["in_library"] = False
        dup = partner.get(sid)
        if dup:
            ev["near_duplicate"] = {"skill_id": dup[0], "similarity": dup[1]}
        if sid in cluster_of:
            ev["harmful_cluster"] = cluster_of[sid]
        counts = f"net {a.net:+d} (b {a.b}, c {a.c}) over {a.n_retrieved} retrievals, q {_fmt_q(a.q_value)}"
        coef_txt = f", coefficient {_fmt_pp(a.coef)}{_fmt_ci(a.coef_ci)}" if a.coef is not None else ""

        if a.n_retrieved == 0:
            action, reason = "unused", "never retrieved by any task in these runs"
            if dup:
                reason += f"; near-duplicate of {dup[0]}"
        elif is_harmful(a):
            rescue = a.b / max(a.b + a.c, 1)
            dup_good = dup is not None and dup[0] in rows and is_helpful(rows[dup[0]])
            basis = "" if regression else " (exposure counts only; regression off)"
            if dup_good:
                action = "rewrite"
                reason = (f"harmful ({counts}{coef_txt}) while its near-duplicate {dup[0]} helps: "
                          f"rewrite it after {dup[0]} or fold it in")
            elif a.b >= rules.mixed_min and rescue > rules.rescue_max:
                action = "rewrite"
                reason = f"net-harmful but also rescues {a.b} tasks ({counts}{coef_txt}): rewrite the harmful part"
            else:
                action = "prune"
                reason = f"reliably harmful and rarely rescues: {counts}{coef_txt}{basis}"
        elif is_mixed(sid):
            action = "rewrite"
            _, b_j, c_j = mixed_counts[sid]
            ev["discordance_q"] = float(q_mixed[sid])
            reason = (f"mixed: rescues {b_j} and harms {c_j} tasks, far more flips than other "
                      f"retrieving tasks (q {_fmt_q(q_mixed[sid])}): rewrite so it stops misleading")
        elif is_helpful(a):
            action, reason = "keep", f"reliably helpful: {counts}{coef_txt}"
        elif dup is not None and dup[0] in rows and rank_key(dup[0]) > rank_key(sid) \
                and not is_harmful(rows[dup[0]]):
            action = "merge"
            reason = (f"near-duplicate (similarity {dup[1]:.2f}) of {dup[0]}, which does better "
                      f"({_fmt_pp(_effect(rows[dup[0]]))} vs {_fmt_pp(_effect(a))}): merge into it")
        else:
            observed = a.rae_k or 0.0
            delta = max(abs(observed), rules.delta_min)
            psi = (a.b + a.c) / a.n_retrieved if a.b + a.c else psi_all
            need = mcnemar_sample_size(delta, max(psi, psi_all / 2), alpha_power, rules.power)
            more = max(0, need - a.n_retrieved)
            ev["tasks_needed"] = need
            ev["more_tasks_needed"] = more
            exp_harm = a.net < 0 and a.q_value is not None and a.q_value <= rules.q_max
            blame = ""
            if exp_harm and regression:
                if a.identifiable is False and a.aliases:
                    blame = (f"harmful together with {', '.join(a.aliases)} "
                             f"(joint {_fmt_pp(a.alias_coef)}), but never retrieved apart")
                    more = max(more, 10)
                    ev["more_tasks_needed"] = more
                else:
                    culprits = [p for p, _ in attribution.partners(sid)
                                if p in rows and is_harmful(rows[p])]
                    blame = (f"exposure counts look harmful ({counts}) but the regression does not "
                             f"confirm it once co-retrieved skills are accounted for{coef_txt}")
                    if culprits:
                        blame += f"; the harm goes to co-retrieved {culprits[0]}"
            if blame and a.identifiable is False:
                action = "needs-data"
                reason = f"{blame}: about {more} tasks retrieving them separately would decide it"
            elif more > 0:
                action = "needs-data"
                what = "its observed effect" if abs(observed) > rules.delta_min else \
                    f"a {rules.delta_min * 100:.0f} pp effect"
                if blame:
                    reason = f"{blame}; about {more} more retrieving tasks would decide it"
                else:
                    reason = (f"too few retrievals to tell ({counts}): about {more} more "
                              f"retrieving tasks would decide {what}")
            else:
                action = "keep"
                reason = blame or f"no reliable effect: {counts}{coef_txt}"
        if sid in cluster_of and action in ("prune", "rewrite", "needs-data"):
            others = [s for s in cluster_of[sid] if s != sid]
            if others:
                reason += f"; in a harmful cluster with {', '.join(others[:3])}"
        recs.append(Recommendation(skill_id=sid, action=action, reason=reason, evidence=ev))

    order = {a: i for i, a in enumerate(("prune", "rewrite", "merge", "needs-data", "keep", "unused"))}
    recs.sort(key=lambda r: (order[r.action], rows[r.skill_id].net, r.skill_id))
    removable = [r.skill_id for r in recs if r.action == "prune"
                 and rows[r.skill_id].in_library is not False]
    settings = {"rules": vars(rules).copy(), "attribution": attribution.settings.get("attribution"),
                "regression": regression,
                "near_duplicates": None if near_duplicates is None else len(near_duplicates)}
    return PruneResult(recommendations=tuple(recs), projected=project(runs, removable),
                       settings=settings)


# ---------------------------------------------------------------- --apply: a pruned copy
def pruned_markdown(result: PruneResult, library_path: str) -> str:
    """PRUNED.md: what the pruned copy leaves out and why, and what else the audit suggests."""
    lines = [
        "# Pruned skill library",
        "",
        f"Copy of `{library_path}` without the skills that `skillaudit prune` recommends removing.",
        "The original library was not modified.",
        "",
        "## Left out",
        "",
    ]
    pruned = [r for r in result.recommendations if r.action == "prune" and r.evidence.get("in_library", True)]
    lines += [f"- `{r.skill_id}`: {r.reason}" for r in pruned] or ["- nothing: no skill is reliably harmful"]
    other = [r for r in result.recommendations if r.action in ("rewrite", "merge", "needs-data")]
    if other:
        lines += ["", "## Kept, but worth a look", ""]
        lines += [f"- `{r.skill_id}` ({r.action}): {r.reason}" for r in other]
    p = result.projected
    lines += [
        "",
        "## Projected effect (a projection, not a measurement)",
        "",
        f"- RAE: {_fmt_pp(p.rae_before)} -> {_fmt_pp(p.rae_after)}",
        f"- OAE: {_fmt_pp(p.oae_before)} -> {_fmt_pp(p.oae_after)}",
        f"- {p.n_fallback} retrieving pair(s) lose every skill and are assumed to fall back to "
        "their disabled outcome; all other pairs keep their enabled outcome.",
        "",
    ]
    return "\n".join(lines)


def apply_prune(library: Any, result: PruneResult, out_dir: str | Path) -> list[str]:
    """Write a pruned copy of `library` (folder or .jsonl) plus PRUNED.md into `out_dir`.

    Refuses (OutputError) to write into the library itself or inside it, or into a non-empty
    folder; the original is only read. Returns the ids left out.
    """
    src = Path(library.source).resolve()
    out = Path(out_dir).resolve()
    if out == src or (src.is_dir() and is_within(out, src)):
        raise OutputError(f"--apply {out_dir}: is the skill library itself or inside it; "
                          "choose a folder outside the library")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--apply {out_dir}: exists and is not a folder")
    if out.exists() and any(out.iterdir()):
        raise OutputError(f"--apply {out_dir}: folder is not empty; choose a new or empty folder")
    drop = {r.skill_id for r in result.recommendations if r.action == "prune"}
    by_id = {s.id: s for s in library.skills}
    left_out = sorted(d for d in drop if d in by_id)
    with atomic_directory(out) as tmp:
        if src.is_dir():
            dropped_dirs = {Path(by_id[d].path).resolve().parent for d in left_out if by_id[d].path}
            for entry in sorted(src.iterdir()):
                if entry.resolve() in dropped_dirs:
                    continue
                if entry.is_dir():
                    shutil.copytree(entry, tmp / entry.name, symlinks=True)
                else:
                    shutil.copy2(entry, tmp / entry.name, follow_symlinks=False)
        else:
            keep_lines = []
            drop_lines = {by_id[d].path for d in left_out}
            with src.open("rb") as fh:
                for lineno, line in enumerate(fh, 1):
                    if f"{Path(library.source)}:{lineno}" not in drop_lines:
                        keep_lines.append(line)
            (tmp / src.name).write_bytes(b"".join(keep_lines))
        (tmp / "PRUNED.md").write_text(pruned_markdown(result, library.source), encoding="utf-8")
    return left_out
