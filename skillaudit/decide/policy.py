"""The recommendation policy as a table of named rules (`RULES`), like a linter's rule table.

Each `Rule` has an id, a name, the action it recommends, its condition in words, a short summary,
a predicate, the reason it writes and the evidence fields it cites. Rules are evaluated in order
within their scope and the first that holds decides:

- scope "library" (L0xx): one per model and benchmark, on its `LibraryEffect`;
- scope "skill" (S0xx unused, S1xx harmful, S2xx mixed, S3xx helpful, S4xx near-duplicate, S5xx
  inconclusive): per skill and model, on a `SkillContext` (the skill's attribution row plus its
  `Population`: the model's library verdict, the mixed test, the power calculation, near-duplicates);
- scope "models" (M0xx): across models, on a `ModelsContext`, after the per-model rules; it
  replaces their decisions for the models it names.

Every reason opens with the summary of the rule that decided it, then the evidence. The thresholds
are `Rules` (unchanged); docs/attribution.md holds the table `rules_markdown()` renders
(`python -m skillaudit.decide.policy --update docs/attribution.md` regenerates it).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

# norm.ppf is special.ndtri; importing scipy.stats would cost ~1 s
from scipy import special as _sp

from skillaudit.analysis.attribution import AttributionResult, SkillAttribution, indicator
from skillaudit.analysis.library_effect import HETEROGENEITY_ALPHA, LibraryEffect
from skillaudit.analysis.metrics import both_ways_words, works_both_ways
from skillaudit.runs import PairedRuns
from skillaudit.stats import bh_qvalues, design_effect, q_text
from skillaudit.stats import ci_text as _fmt_ci
from skillaudit.stats import pp_text as _fmt_pp

ACTIONS = ("prune", "rewrite", "merge", "keep", "needs-data", "unused")
LIBRARY_ACTIONS = ("gate-retrieval", "reduce-depth", "verify")


#: retrieval depths the mixed rule tells apart (1, 2, 3, and 4 or more skills)
_DEPTHS = 4


@dataclass(frozen=True)
class Rules:
    """Thresholds of the recommendation rules."""

    q_max: float = 0.10  # BH q-value for "reliably" harmful / helpful / mixed
    rescue_max: float = 0.25  # prune only when rescues are at most this share of discordant pairs
    mixed_min: int = 3  # "real numbers": at least this many rescues and harms
    mixed_ratio: float = 0.30  # smaller side / discordant pairs for "mixed"
    delta_min: float = 0.10  # smallest effect on the flip rate worth detecting (10 pp)
    power: float = 0.80  # power calculation: probability of deciding when the effect is real
    coef_q_required: bool = True  # "reliably helpful" on the regression also needs its BH q <= q_max
    min_discordant: int = 5  # a bootstrap verdict needs at least this many flips (b + c)
    min_tasks: int = 5  # a per-skill "vs library" verdict needs at least this many retrieving tasks
    heterogeneity_alpha: float = HETEROGENEITY_ALPHA  # skills "differ" below this p


@dataclass(frozen=True)
class Rule:
    """One rule of the policy: when `applies(ctx)` holds (and no earlier rule of its scope did),
    the recommendation is `action`, its reason `reason(ctx)`, and `extra(ctx)` the evidence
    fields it adds to the recommendation's evidence."""

    id: str  # L001 library, S101 skill, M001 across models
    name: str  # kebab words
    action: str
    condition: str  # one sentence, for the docs
    summary: str  # a few words (<= 40 characters), for one-line output; every reason opens with it
    applies: Callable[[Any], bool] = field(repr=False, compare=False)
    explain: Callable[[Any], str] = field(repr=False, compare=False)  # the evidence, in words
    evidence: tuple[str, ...] = ()  # evidence fields it cites (keys of Recommendation.evidence)
    extra: Callable[[Any], dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    scope: str = "skill"  # "library" | "skill" | "models"

    def reason(self, ctx: Any) -> str:
        """The rule's summary first, then the evidence."""
        return f"{self.summary}: {self.explain(ctx)}"


# ---------------------------------------------------------------- statistics the rules use
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


def tasks_needed(pairs: int, deff: float, pairs_per_task: float) -> int:
    """Tasks that carry the information of `pairs` independent pairs: pairs * deff / pairs per task.

    Epochs of one task repeat each other (design effect deff >= 1), so a task with m epochs is
    worth m / deff independent pairs.
    """
    return math.ceil(pairs * max(deff, 1.0) / max(pairs_per_task, 1.0))


def binom_upper_tail(k: float, n: float, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exact (regularised incomplete beta I_p(k, n - k + 1));
    counts may be fractional (divided by a design effect). scipy.stats.binom.sf(k - 1, n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return float(_sp.betainc(k, n - k + 1.0, p))


# ---------------------------------------------------------------- words
def _effect(a: SkillAttribution) -> float:
    """Best available per-skill effect estimate: the coefficient, else the joint alias one, else rae_k."""
    for v in (a.coef, a.alias_coef, a.rae_k):
        if v is not None:
            return float(v)
    return 0.0


_fmt_q = q_text


def _tasks(a: SkillAttribution) -> str:
    """"N tasks (M pairs)": the task is the unit, pairs count its epochs."""
    n_t = a.n_tasks or a.n_retrieved
    return f"{n_t} task{'s' if n_t != 1 else ''} ({a.n_retrieved} pair{'s' if a.n_retrieved != 1 else ''})"


def _n_tasks(n: int, what: str = "") -> str:
    return f"{n} {what}task{'s' if n != 1 else ''}"


def _explained_by_where(a: SkillAttribution, rules: Rules) -> str:
    """A sentence when a skill's raw net count is what the library's harm and rescue rates on the
    same kind of task predict (stratified on the disabled outcome), else ''."""
    if a.expected_net is None or a.relative_p is None or a.net == 0 or a.n_retrieved == 0:
        return ""
    if a.relative_p <= 0.05 or a.expected_net * a.net <= 0 or abs(a.expected_net) < abs(a.net) / 3:
        return ""
    kind = ("tasks the model already solves without skills" if a.net < 0
            else "tasks the model fails without skills")
    what = "harm" if a.net < 0 else "help"
    return (f"retrieved on {kind}: its net {what} (net {a.net:+d}) matches the library's harm and "
            f"rescue rates there (expected net {a.expected_net:+.1f}; vs library "
            f"{_fmt_pp(a.relative_effect)}{_fmt_ci(a.relative_ci)}, p {a.relative_p:.3f}), so it "
            "is not judged worse than the other entries")


# ---------------------------------------------------------------- contexts
@dataclass(eq=False)
class Population:
    """What the skill rules of one population (one model, or all models pooled) look at besides a
    skill's own row: the library verdict, the excess-discordance (mixed) test, the power
    calculation's inputs, near-duplicate partners and harmful clusters. `from_runs` computes it;
    a test may state the facts directly."""

    rows: dict[str, SkillAttribution]
    attribution: Any = None  # AttributionResult: difference() for merges, partners() for culprits
    rules: Rules = field(default_factory=Rules)
    model: str = "*"
    regression: bool = True  # the regression (coefficients) was fitted
    has_intervals: bool = True  # ... with its task-bootstrap intervals
    differ: bool = False  # the skills differ on this model (heterogeneity p <= alpha, reportable)
    lib: LibraryEffect | None = None
    partner: dict[str, tuple[str, float]] = field(default_factory=dict)  # near-duplicate, similarity
    cluster_of: dict[str, list[str]] = field(default_factory=dict)  # harmful clusters
    mixed_counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # clean (n, b, c)
    q_mixed: dict[str, float] = field(default_factory=dict)  # BH q of the both-ways test
    #: per skill (rescue rate among its clean failing pairs, harm rate among its passing, the others' two)
    mixed_rates: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    psi_all: float = 0.0  # discordant rate of all retrieving pairs
    alpha_power: float = 0.10  # the power calculation's alpha
    deff: float = 1.0  # design effect of the epochs
    pairs_per_task: float = 1.0
    # skills whose use is unknown: never seen used on a run that logged its use, and offered on (or,
    # where runs do not list what they offered, possibly given to) a run that did not log it
    use_unknown: frozenset[str] = frozenset()
    #: retrieval follows failure on this model and no control arm measured it (set by `recommend`)
    selection: str | None = None
    #: the model's both-ways test (`stats.ExcessFlips.to_dict`) where it holds (`metrics.works_both_ways`;
    #: set by `recommend`)
    both: dict[str, Any] | None = None
    #: BH q of each skill's judged-outcome exact test (its `preference.p_exact`), over the skills
    #: with judged pairs; and the judge's own A/A flip figures on this population (or None)
    q_judged: dict[str, float] = field(default_factory=dict)
    judge_aa: dict[str, Any] | None = None
    #: per skill, its cost ratios with / without skills where it was retrieved (`analysis.efficiency.
    #: skill_efficiency`, screened: only skills that may be an efficiency harm)
    efficiency: dict[str, dict[str, Any]] = field(default_factory=dict)
    _harmful: dict[str, bool] = field(default_factory=dict, repr=False)

    @property
    def wide(self) -> bool:
        """The model's library verdict is library-wide."""
        return self.lib is not None and self.lib.verdict == "library-wide"

    @classmethod
    def from_runs(cls, runs: PairedRuns, attribution: AttributionResult, rules: Rules,
                  partner: dict[str, tuple[str, float]], cluster_of: dict[str, list[str]],
                  offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]] | None = None,
                  ) -> Population:
        """The population of `attribution` (computed from `runs`); `offered` is what each enabled
        run says it was offered (`skillaudit.runs.inputs.Inputs.offered`), for `use_unknown`."""
        rows = {a.skill_id: a for a in attribution.skills}
        regression = bool(attribution.settings.get("regression"))
        lib = attribution.library
        tot = attribution.totals
        units, in_call, f = runs.unit_ids(), runs.retrieved, runs.flip
        pop = cls(
            rows=rows, attribution=attribution, rules=rules, model=attribution.model or "*",
            regression=regression, lib=lib, partner=partner, cluster_of=cluster_of,
            has_intervals=bool(regression and lib is not None and attribution.settings.get("regression_interval")),
            differ=bool(lib is not None and lib.heterogeneity_p is not None
                        and lib.heterogeneity_p <= rules.heterogeneity_alpha and lib.reportable),
            psi_all=(tot["cond_b"] + tot["cond_c"]) / max(tot["n_cond"], 1),
            # Bonferroni-like: a conservative "would decide it"
            alpha_power=rules.q_max / max(1, sum(1 for a in rows.values() if a.n_retrieved > 0)),
            deff=design_effect(units[in_call], f[in_call].astype(np.float64)) if in_call.any() else 1.0,
            pairs_per_task=((int(in_call.sum()) / max(int(np.unique(units[in_call]).size), 1))
                            if in_call.any() else 1.0),
        )
        pop.mixed_counts, pop.q_mixed = pop._excess_discordance(runs, units)
        pop.use_unknown = _use_unknown(runs, rows, offered or {})
        judged = [(s, a.preference["p_exact"]) for s, a in rows.items()
                  if a.preference and a.preference.get("p_exact") is not None]
        if judged:
            from skillaudit.analysis.metrics import judge_aa_figures

            q = bh_qvalues(np.array([p for _, p in judged], dtype=float))
            pop.q_judged = {s: float(v) for (s, _), v in zip(judged, q, strict=True)}
            pop.judge_aa = judge_aa_figures(runs.judge_aa, units)
        return pop

    def judged_worse(self, a: SkillAttribution) -> bool:
        """The judged pairs that retrieved the skill lose more than they win: its exact task-level
        test (sign test of wins against losses) at BH q <= q_max over the skills with judged pairs,
        the score interval of (wins - losses) / judged pairs below 0, at least min_tasks judged
        tasks and min_discordant wins and losses (S106)."""
        p, r = a.preference, self.rules
        return bool(p and p.get("ci") is not None and p["ci"][1] < 0 and p["losses"] > p["wins"]
                    and p["n_tasks"] >= r.min_tasks and p["wins"] + p["losses"] >= r.min_discordant
                    and self.q_judged.get(a.skill_id, 1.0) <= r.q_max)

    def measured(self, a: SkillAttribution) -> bool:
        """Re-runs with the skill withheld (mask arms) exist: they decide, not co-retrieval."""
        return a.causal_effect is not None and a.causal_ci is not None and \
            a.causal_n_withheld >= self.rules.min_discordant

    def harmful(self, a: SkillAttribution) -> bool:
        if a.skill_id not in self._harmful:
            self._harmful[a.skill_id] = self._is_harmful(a)
        return self._harmful[a.skill_id]

    def _is_harmful(self, a: SkillAttribution) -> bool:
        r = self.rules
        if self.measured(a):  # withholding it helps, and more than withholding a typical entry
            return bool(a.causal_ci[1] < 0 and a.causal_q is not None and a.causal_q <= r.q_max  # type: ignore[index]
                        and a.causal_relative_ci is not None and a.causal_relative_ci[1] < 0)
        # worse than the other entries on the same kind of task, in a population whose skills
        # differ, with enough flips to judge, and its own effect (the regression, which accounts
        # for co-retrieved skills) below zero
        return bool(
            self.differ and self.worse(a)
            and a.coef_ci is not None and a.coef_ci[1] < 0 and a.b + a.c >= r.min_discordant
            # and its own task-level test: worse than the others on tasks that flip anyway (hard
            # topics) is no harm where its own rescues and harms balance (issue 52 F7)
            and a.net < 0 and a.q_value is not None and a.q_value <= r.q_max)

    def worse(self, a: SkillAttribution) -> bool:
        """Reliably worse than the other entries on the same kind of task (stratified on the
        disabled outcome and the retrieved-set size: exact test, BY q over the testable skills;
        relative interval below 0, q <= q_max, at least min_tasks retrieving tasks): S104's relative
        test, which S105 reads on its own."""
        r = self.rules
        return bool(self.has_intervals and a.identifiable is True and a.relative_testable is True
                    and a.n_tasks >= r.min_tasks and a.relative_q is not None and a.relative_q <= r.q_max
                    and a.relative_ci is not None and a.relative_ci[1] < 0)

    def helpful(self, a: SkillAttribution) -> bool:
        r, regression = self.rules, self.regression
        exp = a.net > 0 and a.q_value is not None and a.q_value <= r.q_max
        if regression and a.identifiable and a.coef_ci is not None and a.coef_ci[1] < 0:
            return False
        return exp or bool(regression and a.identifiable and a.coef_ci is not None
                           and a.coef_ci[0] > 0 and (not r.coef_q_required or (a.coef_q or 1.0) <= r.q_max)
                           and a.net > 0 and a.b + a.c >= r.min_discordant)

    def mixed(self, sid: str) -> bool:
        r = self.rules
        lib = self.lib
        if (lib is not None and lib.verdict == "library-wide" and lib.depth_slope_ci is not None
                and lib.depth_slope_ci[1] < 0):
            return False  # the depth verdict (L001) already explains the flips of deep retrievals
        _, b_j, c_j = self.mixed_counts.get(sid, (0, 0, 0))
        return (b_j >= r.mixed_min and c_j >= r.mixed_min
                and min(b_j, c_j) / (b_j + c_j) >= r.mixed_ratio
                and self.q_mixed.get(sid, 1.0) <= r.q_max)

    def _excess_discordance(self, runs: PairedRuns, units: np.ndarray
                            ) -> tuple[dict[str, tuple[int, int, int]], dict[str, float]]:
        """Per skill (n, b, c) on "clean" pairs and the BH q of its both-ways test.

        Counted where no skill already judged harmful or helpful was retrieved alongside (else an
        innocent neighbour inherits its flips), against the other clean retrieving pairs, like with
        like: its rescues among its pairs that fail without skills against theirs, its harms among its
        pairs that pass against theirs (a skill retrieved by easy tasks has more passes to harm and
        fewer failures to rescue; the total flip count it replaced flagged skills of tasks that flip
        more either way), and at the skill's own retrieval depths (deep retrievals flip more): each
        direction gets an exact one-sided binomial test of its count against the others' rate at
        its depths, counts divided by the over-dispersion of events per task (Rao-Scott: tasks, with
        all epochs, are the units); the skill's p is the larger of the two (both must reject: an
        intersection-union test), BH across skills. `mixed_rates` keeps (its rescue rate, its harm
        rate, the others' two at its depths) for the reason.
        """
        rows = self.rows
        flagged = np.array([1.0 if (s in rows and (self.harmful(rows[s]) or self.helpful(rows[s]))) else 0.0
                            for s in self.attribution.skill_ids])
        X = indicator(runs)
        if X.shape[1] < len(flagged):  # library-only skills were appended as empty columns
            flagged = flagged[: X.shape[1]]
        clean = runs.retrieved & (np.asarray(X @ flagged).ravel() == 0)
        f = runs.flip
        fail = clean & ~runs.y_neg
        pas = clean & runs.y_neg
        ev = [fail, fail & (f > 0), pas, pas & (f < 0)]
        cols = np.column_stack([clean, clean & (f > 0), clean & (f < 0), *ev]).astype(np.float64)
        mc = np.rint(np.asarray(X.T @ cols)).astype(np.int64)  # skills(in runs) x [n, b, c, nf, r, np, h]
        tot = cols.sum(axis=0)
        # the same four counts per retrieval depth (1, 2, 3, 4+ skills): the others' rates are taken
        # at the skill's own depths, since deep retrievals flip more (issue 52 F8)
        depth = np.minimum(np.diff(X.indptr), _DEPTHS)
        by_depth = np.column_stack([e & (depth == d) for d in range(1, _DEPTHS + 1) for e in ev]).astype(np.float64)
        md = np.rint(np.asarray(X.T @ by_depth)).astype(np.int64).reshape(-1, _DEPTHS, 4)
        td = by_depth.sum(axis=0).reshape(_DEPTHS, 4)

        def dispersion(trials: np.ndarray, events: np.ndarray) -> float:
            n_u = np.bincount(units, weights=trials.astype(float))
            d_u = np.bincount(units, weights=events.astype(float))
            base = float(d_u.sum() / n_u.sum()) if n_u.sum() else 0.0
            var_bin = float((n_u * base * (1 - base)).sum())
            return max(1.0, float(((d_u - n_u * base) ** 2).sum()) / var_bin) if var_bin > 0 else 1.0

        phi_r, phi_h = dispersion(ev[0], ev[1]), dispersion(ev[2], ev[3])
        counts: dict[str, tuple[int, int, int]] = {}
        p_mixed = []
        for j, sid in enumerate(runs.skills[: mc.shape[0]]):
            n_j, b_j, c_j, nf, r, npass, h = (int(v) for v in mc[j])
            if sid not in rows or n_j == 0:
                continue
            counts[sid] = (n_j, b_j, c_j)
            of, orr, op, oh = tot[3] - nf, tot[4] - r, tot[5] - npass, tot[6] - h
            if not (nf and npass and of and op):
                p_mixed.append((sid, 1.0))
                continue
            # the others' rescue (harm) rate at each of the skill's depths, weighted by its pairs there
            rest = td - md[j]
            with np.errstate(divide="ignore", invalid="ignore"):
                r_rate = np.where(rest[:, 0] > 0, (rest[:, 1] + 0.5) / (rest[:, 0] + 1.0), orr / of)
                h_rate = np.where(rest[:, 2] > 0, (rest[:, 3] + 0.5) / (rest[:, 2] + 1.0), oh / op)
            base_r = float(md[j, :, 0] @ r_rate) / nf
            base_h = float(md[j, :, 2] @ h_rate) / npass
            self.mixed_rates[sid] = (r / nf, h / npass, base_r, base_h)
            p_r = binom_upper_tail(r / phi_r, nf / phi_r, base_r)
            p_h = binom_upper_tail(h / phi_h, npass / phi_h, base_h)
            p_mixed.append((sid, max(p_r, p_h)))
        q = dict(zip([s for s, _ in p_mixed],
                     (float(v) for v in bh_qvalues(np.array([p for _, p in p_mixed], dtype=float))), strict=True))
        return counts, q


class SkillContext:
    """One skill on one population: what the skill rules' predicates and reasons read."""

    def __init__(self, a: SkillAttribution, pop: Population) -> None:
        self.a, self.pop, self.rules, self.sid = a, pop, pop.rules, a.skill_id

    # ---- facts
    @cached_property
    def measured(self) -> bool:
        return self.pop.measured(self.a)

    @cached_property
    def harmful(self) -> bool:
        return self.pop.harmful(self.a)

    @cached_property
    def helpful(self) -> bool:
        return self.pop.helpful(self.a)

    @cached_property
    def mixed(self) -> bool:
        return self.pop.mixed(self.sid)

    @cached_property
    def judged_worse(self) -> bool:
        return not self.harmful and self.pop.judged_worse(self.a)

    @cached_property
    def efficiency_harm(self) -> str | None:
        """The measure on which the skill costs much more (`analysis.efficiency.efficiency_harm`) while
        its accuracy effect is not clear either way (not harmful, helpful or mixed; its task-level
        test does not reject and its regression interval, where fitted, includes 0); else None."""
        from skillaudit.analysis.efficiency import efficiency_harm

        a, r = self.a, self.rules
        if self.harmful or self.helpful or self.mixed or (a.q_value is not None and a.q_value <= r.q_max):
            return None
        if a.coef_ci is not None and (a.coef_ci[0] > 0 or a.coef_ci[1] < 0):
            return None
        return efficiency_harm(self.pop.efficiency.get(self.sid), q_max=r.q_max)

    @cached_property
    def worse(self) -> bool:
        """S104's relative test holds (`Population.worse`) and no re-runs decide, whether or not
        S104 holds."""
        return not self.measured and self.pop.worse(self.a)

    @cached_property
    def unconfirmed(self) -> str:
        """Why a skill that is `worse` is not judged harmful (S104): '' when it is."""
        a, r, pop = self.a, self.rules, self.pop
        if not self.worse or self.harmful:
            return ""
        if not pop.differ:
            lib = pop.lib
            p = lib.heterogeneity_p if lib is not None else None
            return ("the test that the skills differ at all does not reject on "
                    f"{pop.model} (p {_fmt_q(p)}, needs <= {r.heterogeneity_alpha:.2f})")
        if not (a.coef_ci is not None and a.coef_ci[1] < 0):
            partner = next((p for p, _ in pop.attribution.partners(self.sid)), None)
            return ("its own effect is not below zero once co-retrieved skills are accounted for ("
                    + (self.coef_txt or "no regression estimate")
                    + (f"; most often retrieved with {partner}" if partner else "") + ")")
        if a.b + a.c < r.min_discordant:
            return f"it has fewer than {r.min_discordant} flips ({self.counts})"
        return (f"its own rescues and harms do not differ where it was retrieved ({self.counts}): "
                "it is worse only against the others, which the tasks it is retrieved for can explain")

    @cached_property
    def mask_plan(self) -> tuple[int, int]:
        """(mask re-runs that would decide it, draws per retrieving task): a withheld re-run is
        paired with the task's enabled run (McNemar, delta_min at the power the policy uses); each
        mask withholds the skill with probability 1/2, so twice the pairs."""
        a = self.a
        reruns = 2 * tasks_needed(self.pairs_needed, self.pop.deff, 1.0)
        tasks = max(a.n_tasks or a.n_retrieved, 1)
        return reruns, max(1, math.ceil(reruns / tasks))

    @cached_property
    def mask_txt(self) -> str:
        reruns, m = self.mask_plan
        n = self.a.n_tasks or self.a.n_retrieved
        return (f"about {reruns} re-runs with it withheld at random would decide it "
                f"(skillaudit run --arms mask:{m} --base RUNS over its {_n_tasks(n, 'retrieving ')})")

    @cached_property
    def dup(self) -> tuple[str, float] | None:
        """(near-duplicate partner, similarity), the most similar one."""
        return self.pop.partner.get(self.sid)

    @cached_property
    def dup_row(self) -> SkillAttribution | None:
        return self.pop.rows.get(self.dup[0]) if self.dup is not None else None

    @cached_property
    def exp_harm(self) -> bool:
        """Exposure counts reliably harmful (net < 0 with q <= q_max)."""
        a = self.a
        return a.net < 0 and a.q_value is not None and a.q_value <= self.rules.q_max

    @cached_property
    def exp_help(self) -> bool:
        a = self.a
        return a.net > 0 and a.q_value is not None and a.q_value <= self.rules.q_max

    @cached_property
    def coef_below(self) -> bool:
        return self.a.coef_ci is not None and self.a.coef_ci[1] < 0

    @cached_property
    def where(self) -> str:
        return _explained_by_where(self.a, self.rules)

    @cached_property
    def aliased_harm(self) -> bool:
        """Exposure counts look harmful but it was never retrieved apart from its aliases."""
        a = self.a
        return (not (self.pop.wide and (self.exp_harm or self.coef_below)) and self.exp_harm
                and self.pop.regression and a.identifiable is False and bool(a.aliases))

    @cached_property
    def entangled(self) -> bool:
        """Exposure counts look harmful, its regression effect is not below zero, no co-retrieved
        skill is judged harmful instead, and it shares tasks with others: co-retrieval cannot tell
        whose harm it is (nor can more tasks retrieved the same way); withholding it can."""
        a, pop = self.a, self.pop
        if not (self.exp_harm and pop.regression and a.identifiable is True and not self.coef_below
                and not pop.wide and pop.has_intervals):
            return False
        partners = [p for p, _ in pop.attribution.partners(self.sid)]
        return bool(partners) and not any(p in pop.rows and pop.harmful(pop.rows[p]) for p in partners)

    @cached_property
    def pairs_needed(self) -> int:
        """Pairs a McNemar test needs to detect delta_min at the policy's power, at the skill's own
        discordant rate (at least half the population's; the population's without flips)."""
        a, r, pop = self.a, self.rules, self.pop
        psi = (a.b + a.c) / a.n_retrieved if a.n_retrieved and a.b + a.c else pop.psi_all
        return mcnemar_sample_size(r.delta_min, max(psi, pop.psi_all / 2), pop.alpha_power, r.power)

    @cached_property
    def power(self) -> tuple[int, int]:
        """(retrieving tasks a McNemar power calculation needs, how many more than it has).

        From the stated smallest effect worth detecting, never from the observed one (post-hoc
        power only restates the p-value)."""
        a, pop = self.a, self.pop
        need = tasks_needed(self.pairs_needed, pop.deff, pop.pairs_per_task)
        more = max(0, need - (a.n_tasks or a.n_retrieved))
        return need, (max(more, 10) if self.aliased_harm else more)

    @property
    def more(self) -> int:
        return self.power[1]

    # ---- words
    @cached_property
    def counts(self) -> str:
        a = self.a
        return f"net {a.net:+d} (b {a.b}, c {a.c}) over {_tasks(a)}, q {_fmt_q(a.q_value)}"

    @cached_property
    def coef_txt(self) -> str:
        a = self.a
        return f"its effect {_fmt_pp(a.coef)}{_fmt_ci(a.coef_ci)}" if a.coef is not None else ""

    @cached_property
    def rel_txt(self) -> str:
        a = self.a
        return (f"{_fmt_pp(a.relative_effect)}{_fmt_ci(a.relative_ci)} vs the other entries "
                f"(q {_fmt_q(a.relative_q)})") if a.relative_effect is not None else ""

    @cached_property
    def causal_txt(self) -> str:
        a = self.a
        return (f"from {a.causal_n_withheld} re-runs with the skill withheld, keeping it changes "
                f"the pass rate by {_fmt_pp(a.causal_effect)}{_fmt_ci(a.causal_ci)} (q "
                f"{_fmt_q(a.causal_q)}; {_fmt_pp(a.causal_relative)}{_fmt_ci(a.causal_relative_ci)} "
                f"vs the other entries)")

    @cached_property
    def blame(self) -> str:
        """Why harmful-looking exposure counts (or a library-wide harm) do not make it harmful; ''
        when nothing looks harmful."""
        a, pop = self.a, self.pop
        if pop.wide and (self.exp_harm or self.coef_below):
            lib = pop.lib
            r = self.rules
            looks = (a.relative_q is not None and a.relative_q <= r.q_max and a.relative_ci is not None
                     and a.relative_ci[1] < 0)
            if looks:  # not `worse` (S105) only for want of tasks or a testable comparison: say so
                why = (f"on {_tasks(a)}, fewer than the {r.min_tasks} a per-skill verdict needs"
                       if (a.n_tasks or a.n_retrieved) < r.min_tasks else "with no like-for-like comparison")
                verdict = f"this entry looks worse than the others, {why}"
            else:
                verdict = "this entry is not reliably worse than the others"
            return (f"harm is library-wide on {pop.model} (see its {lib.recommendation or 'library'} "  # type: ignore[union-attr]
                    f"recommendation): {verdict} "
                    f"({self.rel_txt or 'no relative estimate'}; {self.coef_txt or self.counts})")
        if self.exp_harm and pop.regression:
            if self.aliased_harm:
                return (f"associated with harm together with {', '.join(a.aliases)} "
                        f"(joint {_fmt_pp(a.alias_coef)}), but never retrieved apart")
            if self.coef_below:  # the vs-library test decided
                text = (f"exposure counts look harmful ({self.counts}) and its regression effect is "
                        f"below zero ({self.coef_txt}), but it is not reliably worse than the other "
                        f"entries on the same kind of task ({self.rel_txt or 'no relative estimate'})")
            else:
                text = (f"exposure counts look harmful ({self.counts}) but the regression does not "
                        f"confirm it once co-retrieved skills are accounted for"
                        + (f" ({self.coef_txt})" if self.coef_txt else ""))
            culprits = [p for p, _ in pop.attribution.partners(self.sid)
                        if p in pop.rows and pop.harmful(pop.rows[p])]
            return text + (f"; the harm goes to co-retrieved {culprits[0]}" if culprits else "")
        if self.exp_harm and self.where:
            return self.where
        if self.exp_harm and not pop.has_intervals:
            return (f"exposure counts look harmful ({self.counts}), but skill-level verdicts need the "
                    "regression's resamples (--bootstrap > 0)")
        return ""

    def harm_txt(self) -> str:
        """'causes more harm ...' from re-runs, else 'associated with more harm ...'."""
        if self.measured:
            return f"causes more harm than the average entry: {self.causal_txt}"
        return f"associated with more harm than the average entry ({self.rel_txt}; {self.coef_txt}; {self.counts})"

    def with_where(self, text: str) -> str:
        """An inconclusive reason, plus why its net help is what the library predicts there."""
        if self.exp_help and self.where and self.where not in text:
            text += "; " + self.where
        return text

    def base_evidence(self) -> dict[str, Any]:
        """The evidence every skill recommendation carries (the rule adds its own fields)."""
        a, pop = self.a, self.pop
        ev: dict[str, Any] = {
            "model": pop.model,
            "n_retrieved": a.n_retrieved, "n_tasks": a.n_tasks, "b": a.b, "c": a.c, "net": a.net,
            "rae_k": a.rae_k, "q_value": a.q_value, "share": a.share,
            "exclusive_n": a.exclusive_n, "coef": a.coef,
            "coef_ci": list(a.coef_ci) if a.coef_ci else None,
            "relative_effect": a.relative_effect,
            "relative_ci": list(a.relative_ci) if a.relative_ci else None,
            "relative_q": a.relative_q,
            "identifiable": a.identifiable,
            "basis": "co-retrieval (observational): an association, not a measured cause",
        }
        if a.aliases:
            ev["aliases"] = list(a.aliases)
            ev["alias_coef"] = a.alias_coef
        if a.in_library is False:
            ev["in_library"] = False
        if self.dup:
            ev["near_duplicate"] = {"skill_id": self.dup[0], "similarity": self.dup[1]}
        if self.sid in pop.cluster_of:
            ev["harmful_cluster"] = pop.cluster_of[self.sid]
        if self.measured:
            ev["causal_effect"] = a.causal_effect
            ev["causal_ci"] = list(a.causal_ci)  # type: ignore[arg-type]
            ev["causal_q"] = a.causal_q
            ev["causal_relative_ci"] = list(a.causal_relative_ci) if a.causal_relative_ci else None
            ev["basis"] = f"from {a.causal_n_withheld} re-runs with the skill withheld (mask arms): measured"
        return ev


@dataclass(frozen=True)
class BenchmarksContext:
    """One skill on one model across its benchmarks: each benchmark's exposure counts of the skill
    (an `AttributionResult` row of that benchmark's pairs alone) and the rules' thresholds."""

    skill_id: str
    model: str
    rows: dict[str, SkillAttribution]
    rules: Rules
    #: BH q (across the model's skills) of `p_split`; None when no such pair exists
    q_split: float | None = None

    def _side(self, sign: int) -> list[str]:
        r = self.rules
        cand = [(a.p_value, b) for b, a in self.rows.items()
                if a.p_value is not None and a.net * sign > 0 and (a.n_tasks or a.n_retrieved) >= r.min_tasks]
        return [min(cand)[1]] if cand else []

    @property
    def hurt(self) -> list[str]:
        return self._side(-1) if self.q_split is not None and self.q_split <= self.rules.q_max else []

    @property
    def helped(self) -> list[str]:
        return self._side(1) if self.q_split is not None and self.q_split <= self.rules.q_max else []

    def p_split(self) -> float | None:
        """The two-sided p of "the skill's mean flip is the same on its most harmed and its most
        helped benchmark" (a two-sample z-test on the tasks of each, which are different tasks);
        None unless one leans to harm and the other to help, each with p <= 0.05 on its own task-level
        test (so the sentence naming both directions holds)."""
        hurt, helped = self._side(-1), self._side(1)
        if not hurt or not helped:
            return None
        a, b = self.rows[hurt[0]], self.rows[helped[0]]
        if max(float(a.p_value), float(b.p_value)) > 0.05:  # type: ignore[arg-type]
            return None

        def mean_var(r: SkillAttribution) -> tuple[float, float]:
            n = max(r.n_retrieved, 1)
            m = r.net / n
            return m, max((r.b + r.c) / n - m * m, 1e-12) / max(r.n_tasks or n, 1)

        (m1, v1), (m2, v2) = mean_var(a), mean_var(b)
        z = (m2 - m1) / math.sqrt(v1 + v2)
        return float(min(1.0, 2.0 * _sp.ndtr(-abs(z))))


@dataclass(frozen=True)
class ModelsContext:
    """One skill across models: the models where its regression effect is reliably below 0
    (`hurt`) and above 0 (`helped`), and each model's attribution rows."""

    skill_id: str
    hurt: tuple[str, ...]
    helped: tuple[str, ...]
    rows: dict[str, dict[str, SkillAttribution]]


def _use_unknown(runs: PairedRuns, rows: dict[str, SkillAttribution],
                 offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]]) -> frozenset[str]:
    """The never-retrieved skills of `rows` whose use is unknown: offered on a pair whose enabled
    run did not log its use. Such a run that does not list what it offered (its log is missing) had
    what the other runs of its model and task were offered; with none listed, it may have had any."""
    unlogged = np.flatnonzero(runs.use_unlogged)
    if unlogged.size == 0:
        return frozenset()
    never = {sid for sid, a in rows.items() if a.n_retrieved == 0}
    by_task: dict[tuple[str, str, str], set[str]] = {}
    for (m, b, t, _), (skills, _cut) in offered.items():
        by_task.setdefault((m, b, t), set()).update(skills)
    maybe: set[str] = set()
    for i in unlogged:
        task = (runs.models[runs.model[i]], runs.benchmarks[runs.benchmark[i]], runs.tasks[runs.task[i]])
        got = offered.get((*task, int(runs.epoch[i])))
        if got is not None:
            maybe.update(got[0])
        elif task in by_task:
            maybe.update(by_task[task])
        else:
            return frozenset(never)
    return frozenset(never & maybe)


# ---------------------------------------------------------------- the rules' reasons
def _use_not_logged(c: SkillContext) -> str:
    return ("no run that logged its skill use used it, and it was offered on runs that did not log "
            "theirs: whether it is used is unknown")


def _unused(c: SkillContext) -> str:
    return "no task in these runs retrieved it" + (f"; near-duplicate of {c.dup[0]}" if c.dup else "")


def _rewrite_after_duplicate(c: SkillContext) -> str:
    d = c.dup[0]  # type: ignore[index]
    if c.measured:
        return f"{c.harm_txt()}; {c.counts}; its near-duplicate {d} helps: rewrite it after {d} or fold it in"
    return (f"associated with more harm than the average entry ({c.rel_txt}; {c.coef_txt}; "
            f"{c.counts}) while its near-duplicate {d} helps: rewrite it after {d} or fold it in")


def _rewrite_rescuing(c: SkillContext) -> str:
    if c.measured:
        return f"{c.harm_txt()}; but also {c.a.b} rescues ({c.counts}): rewrite the harmful part"
    return (f"associated with more harm than the average entry but also with {c.a.b} "
            f"rescues ({c.rel_txt}; {c.coef_txt}; {c.counts}): rewrite the harmful part")


def _prune_measured(c: SkillContext) -> str:
    return f"{c.harm_txt()}; {c.counts}"


def _prune_associated(c: SkillContext) -> str:
    return (f"associated with more harm than the average entry and rarely with a rescue: "
            f"{c.rel_txt}; {c.coef_txt}; {c.counts}")


def _both_ways_skill(c: SkillContext) -> str:
    return (f"{c.a.b} rescues and {c.a.c} harms over {_tasks(c.a)} where skills on {c.pop.model} "
            f"{both_ways_words(c.pop.both)}: see the library-level recommendation")


def _judged_worse(c: SkillContext) -> str:
    p, aa = c.a.preference or {}, c.pop.judge_aa
    ci = p.get("ci") or (float("nan"), float("nan"))
    judge = (f"; the judge's own A/A flip rate: {aa['flips']} of {aa['checks']} checks" if aa
             else "; the judge's own flip rate was not checked (run --judge-aa)")
    return (f"the answers that used it lose to the answers without skills: {p.get('wins')} wins, "
            f"{p.get('ties')} ties, {p.get('losses')} losses over {p.get('n_tasks')} judged tasks, effect "
            f"{p.get('effect', 0):+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}], exact p {_fmt_q(p.get('p_exact'))}, q "
            f"{_fmt_q(c.pop.q_judged.get(c.sid))}{judge} (an association: re-runs with it withheld, "
            "run --arms mask, confirm it); rewrite what it tells the agent to do")


def _efficiency_harm(c: SkillContext) -> str:
    m = c.efficiency_harm or ""
    x = c.pop.efficiency.get(c.sid, {}).get(m, {})
    ci, rci = x.get("ratio_ci") or (float("nan"),) * 2, x.get("relative_ci") or (float("nan"),) * 2
    return (f"where it was retrieved, runs with skills used {x.get('ratio', float('nan')):.1f}× the {x.get('words', m)} "
            f"of runs without [{ci[0]:.1f}, {ci[1]:.1f}] over {x.get('n_tasks')} tasks, "
            f"{x.get('relative_ratio', float('nan')):.2f}× the library's on the same benchmarks "
            f"[{rci[0]:.2f}, {rci[1]:.2f}], q {_fmt_q(x.get('relative_q'))}, with no clear accuracy effect "
            f"({c.counts}): shorten it or narrow when it is retrieved")


def _worse_unconfirmed(c: SkillContext) -> str:
    return (f"associated with more harm than the other entries ({c.rel_txt}; {c.counts}), but "
            f"{c.unconfirmed}: {c.mask_txt}")


def _mixed(c: SkillContext) -> str:
    _, b_j, c_j = c.pop.mixed_counts[c.sid]
    rates = c.pop.mixed_rates.get(c.sid)
    both = (f": it rescues {rates[0] * 100:.0f}% of its runs that fail without skills and harms "
            f"{rates[1] * 100:.0f}% of those that pass, against {rates[2] * 100:.0f}% and {rates[3] * 100:.0f}% "
            "where other skills were retrieved at the same depths" if rates else ", more both ways than other retrieving pairs")
    return (f"{b_j} rescues and {c_j} harms where it was retrieved{both} (q {_fmt_q(c.pop.q_mixed[c.sid])}; an "
            "association): see which tasks it helped and which it hurt, then narrow its trigger or rewrite it")


def _helpful(c: SkillContext) -> str:
    return f"associated with reliable help: {c.counts}" + (f"; {c.coef_txt}" if c.coef_txt else "")


def _merge_difference(c: SkillContext) -> tuple[float, tuple[float, float]] | None:
    return c.pop.attribution.difference(c.dup[0], c.sid)  # type: ignore[index]


def _merge(c: SkillContext) -> str:
    d, sim = c.dup  # type: ignore[misc]
    diff = _merge_difference(c)
    if diff is not None and diff[1][0] > 0:
        return (f"{d}, which does better (similarity {sim:.2f}; {_fmt_pp(diff[0])}{_fmt_ci(diff[1])} "
                f"difference, {_fmt_pp(_effect(c.dup_row))} vs {_fmt_pp(_effect(c.a))}): merge into it")  # type: ignore[arg-type]
    if diff is not None and diff[1][1] < 0:
        return (f"{d}, which does worse (similarity {sim:.2f}; {_fmt_pp(diff[0])}{_fmt_ci(diff[1])} "
                f"difference): merge {d} into this one")
    why = (f"difference {_fmt_pp(diff[0])}{_fmt_ci(diff[1])}" if diff is not None
           else "their effects cannot be compared")
    return f"{d} (similarity {sim:.2f}); no evidence which is better ({why}): merge them into one"


def _merge_evidence(c: SkillContext) -> dict[str, Any]:
    diff = _merge_difference(c)
    if diff is None:
        return {}
    return {"merge_difference": {"skill_id": c.dup[0], "difference": diff[0], "ci": list(diff[1])}}  # type: ignore[index]


def _power_evidence(c: SkillContext) -> dict[str, Any]:
    """The power calculation's figures (every inconclusive rule cites them)."""
    pop = c.pop
    ev: dict[str, Any] = {"tasks_needed": c.power[0], "more_tasks_needed": c.more,
                          "design_effect": round(pop.deff, 3), "pairs_per_task": round(pop.pairs_per_task, 3)}
    if pop.pairs_per_task > 1:  # what "tasks" means when each task is run several times
        ev["tasks_needed_note"] = (f"tasks with {pop.pairs_per_task:.1f} retrieving epochs each; "
                                   f"design effect {pop.deff:.2f}")
    if c.where:
        ev["explained_by_where_retrieved"] = True
    return ev


def _not_separable(c: SkillContext) -> str:
    return c.with_where(f"{c.blame}: {c.mask_txt}")


def _library_wide(c: SkillContext) -> str:
    return c.with_where(c.blame)


def _too_few_tasks(c: SkillContext) -> str:
    blame, r = c.blame, c.rules
    if c.a.n_tasks < r.min_tasks:
        blame = blame or (f"retrieved on {_n_tasks(c.a.n_tasks)}, fewer than the "
                          f"{r.min_tasks} a per-skill verdict needs ({c.counts})")
    more = _n_tasks(c.more, "more retrieving ")
    if blame:
        return c.with_where(f"{blame}; about {more} would decide it")
    what = f"a {r.delta_min * 100:.0f} pp effect (the smallest worth detecting)"
    return c.with_where(f"{c.counts}: about {more} would decide {what}")


def _no_effect(c: SkillContext) -> str:
    return c.with_where(c.blame or c.counts + (f"; {c.coef_txt}" if c.coef_txt else ""))


def _bench_effect(a: SkillAttribution) -> str:
    return f"{_fmt_pp(a.rae_k)} where retrieved: net {a.net:+d} (b {a.b}, c {a.c}) over {_tasks(a)}, p {_fmt_q(a.p_value)}"


def _sign_differs_benchmarks(c: BenchmarksContext) -> str:
    hurt, helped = ", ".join(c.hurt), ", ".join(c.helped)
    parts = [f"harms {b} ({_bench_effect(c.rows[b])})" for b in c.hurt]
    parts += [f"helps {b} ({_bench_effect(c.rows[b])})" for b in c.helped]
    return (f"on {c.model} it {'; '.join(parts)} (difference q {_fmt_q(c.q_split)}; associations): gate it per "
            f"benchmark (retrieve it for {helped} only) or rewrite it for {hurt}")


def _per_benchmark_evidence(c: BenchmarksContext) -> dict[str, Any]:
    return {"per_benchmark": {b: {"n_tasks": a.n_tasks, "b": a.b, "c": a.c, "net": a.net, "rae_k": a.rae_k,
                                  "p_value": a.p_value} for b, a in c.rows.items()},
            "hurt": list(c.hurt), "helped": list(c.helped), "q_split": c.q_split}


def _sign_differs(c: ModelsContext) -> str:
    h, g = c.rows[c.hurt[0]][c.skill_id], c.rows[c.helped[0]][c.skill_id]
    hurt, helped = ", ".join(c.hurt), ", ".join(c.helped)
    return (f"associated with harm on {hurt} ({_fmt_pp(h.coef)}{_fmt_ci(h.coef_ci)}) and with help on "
            f"{helped} ({_fmt_pp(g.coef)}{_fmt_ci(g.coef_ci)}): gate it per model "
            f"(retrieve it for {helped} only) or rewrite it for {hurt}")


def _both_ways_library(e: LibraryEffect) -> str:
    w = e.both_ways["both_ways"]  # type: ignore[index]
    return (f"on {e.model} skills {both_ways_words(w)}; retrieve them only where they help: split the "
            "tasks by what they need (benchmark, task features) or rewrite the skills' triggers")


_VERIFY = ("skillaudit run --arms random,empty --base RUNS (the same searches replayed with other skills "
           "or none) measures on the same tasks what the skills add")


def _selection_library(e: LibraryEffect) -> str:
    return (f"{e.selection}; a harm measured where the agent searched may be the runs that searched because "
            f"they were failing, so no library action is advised yet: {_VERIFY}")


def _selection_skill(c: SkillContext) -> str:
    return (f"{c.pop.selection}; this skill's harm ({c.counts}) may be runs that fetched it because they were "
            f"failing: {_VERIFY}")


def _library_wide_harm(e: LibraryEffect) -> bool:
    return e.verdict == "library-wide" and e.direction == "harm"


# ---------------------------------------------------------------- the table
_R = Rules()
_HARMFUL = "S103's or S104's test"
_COUNTS = ("b", "c", "net", "n_tasks", "q_value")

RULES: tuple[Rule, ...] = (
    Rule("L000", "selection-verify-library", "verify",
         "A library-level action would hold (L001-L003) but retrieval follows failure on the model (RAE < 0, "
         "Δskip's interval above 0 and that of Δskip - RAE too) and no control arm (random, empty, filler) "
         "measured it: "
         "verify with control arms before gating or shortening retrieval.",
         "retrieval follows failure, verify first",
         lambda e: bool(e.selection) and any(r.applies(e) for r in RULES if r.scope == "library" and r.id != "L000"),
         _selection_library, ("selection",), scope="library"),
    Rule("L001", "library-wide-harm-grows-with-depth", "reduce-depth",
         "The skills do not differ (heterogeneity p > 0.05) but the library's mean effect per injected "
         "skill is reliably below 0 with at least 5 flips, and pairs that retrieved more skills fared "
         "worse (the depth slope's interval is below 0).",
         "library-wide harm, worse with depth",
         lambda e: _library_wide_harm(e) and e.depth_slope_ci is not None and e.depth_slope_ci[1] < 0,
         lambda e: e.text, ("verdict", "mean_effect_ci", "heterogeneity_p", "depth_slope_ci"), scope="library"),
    Rule("L002", "library-wide-harm", "gate-retrieval",
         "The skills do not differ (heterogeneity p > 0.05) but the library's mean effect per injected "
         "skill is reliably below 0 with at least 5 flips.",
         "library-wide harm",
         _library_wide_harm, lambda e: e.text, ("verdict", "mean_effect_ci", "heterogeneity_p"), scope="library"),
    Rule("L003", "both-ways", "gate-retrieval",
         "No library-wide harm (L001, L002), but where skills are retrieved they rescue more of the runs "
         "that fail without skills and harm more of those that pass than pairs that retrieved nothing "
         "do (each one-sided, p ≤ 0.05, at least 5 rescues and 5 harms): they help some tasks and hurt "
         "others.",
         "skills work both ways",
         lambda e: bool(e.both_ways) and works_both_ways(e.both_ways), _both_ways_library,
         ("both_ways",), scope="library"),
    Rule("S000", "use-not-logged", "needs-data",
         "No run that logged its skill use retrieved or opened the skill, and it was offered on runs "
         "that did not log theirs (or runs that did not log their use do not list what they offered).",
         "use not logged",
         lambda c: c.sid in c.pop.use_unknown, _use_not_logged, ("n_retrieved",)),
    Rule("S001", "never-retrieved", "unused",
         "No task in the runs retrieved the skill, and every run it may have been given logged its use.",
         "never retrieved",
         lambda c: c.a.n_retrieved == 0, _unused, ("n_retrieved",)),
    Rule("S100", "selection-verify", "needs-data",
         "It would be pruned or rewritten (S101-S104, S201) but retrieval follows failure on the model "
         "(L000's test) and no control arm measured it: verify with control arms first.",
         "retrieval follows failure, verify first",
         lambda c: bool(c.pop.selection) and not c.measured and (c.harmful or c.mixed), _selection_skill,
         ("selection", *_COUNTS), extra=lambda c: {"selection": c.pop.selection}),
    Rule("S101", "harmful-near-helpful-duplicate", "rewrite",
         f"Harmful ({_HARMFUL}) and its near-duplicate is reliably helpful (S301's test): rewrite it "
         "after that skill or fold it in.",
         "harmful; its near-duplicate helps",
         lambda c: c.harmful and c.dup_row is not None and c.pop.helpful(c.dup_row),
         _rewrite_after_duplicate, ("harmful", "near_duplicate", *_COUNTS),
         extra=lambda c: {"harmful": True}),
    Rule("S102", "harmful-but-rescuing", "rewrite",
         f"Harmful ({_HARMFUL}) but rescuing in real numbers: b ≥ mixed_min ({_R.mixed_min}) and "
         f"b/(b + c) > rescue_max ({_R.rescue_max:.2f}).",
         "harmful but also rescues",
         lambda c: c.harmful and c.a.b >= c.rules.mixed_min
         and c.a.b / max(c.a.b + c.a.c, 1) > c.rules.rescue_max,
         _rewrite_rescuing, ("harmful", *_COUNTS), extra=lambda c: {"harmful": True}),
    Rule("S103", "harmful-by-withholding", "prune",
         f"At least min_discordant ({_R.min_discordant}) re-runs with the skill withheld (mask arms) "
         f"show that keeping it lowers the pass rate (interval below 0, BH q ≤ q_max ({_R.q_max:.2f})) "
         "and more than keeping another entry does (relative interval below 0).",
         "harmful, measured by re-runs",
         lambda c: c.measured and c.harmful, _prune_measured,
         ("harmful", "causal_effect", "causal_ci", "causal_q", "causal_relative_ci", *_COUNTS),
         extra=lambda c: {"harmful": True}),
    Rule("S104", "harmful-vs-library", "prune",
         f"No re-runs decide it, the skills differ on this model (heterogeneity p ≤ "
         f"{_R.heterogeneity_alpha:.2f}), the skill is reliably worse than the other entries on the same "
         f"kind of task (relative interval below 0, q ≤ q_max, at least min_tasks ({_R.min_tasks}) "
         f"retrieving tasks) and its regression effect is below 0, with at least min_discordant flips, and "
         f"its own task-level test rejects (net < 0, q ≤ q_max).",
         "harmful vs the other entries",
         lambda c: not c.measured and c.harmful, _prune_associated,
         ("harmful", "relative_effect", "relative_ci", "relative_q", "coef", "coef_ci", *_COUNTS),
         extra=lambda c: {"harmful": True}),
    Rule("S105", "worse-unconfirmed", "needs-data",
         f"Reliably worse than the other entries on the same kind of task (S104's relative test: interval "
         f"below 0, q ≤ q_max, at least min_tasks ({_R.min_tasks}) retrieving tasks) but not judged harmful "
         "(the skills-differ test does not reject, its regression effect is not below 0, too few flips, or its "
         "own task-level test does not reject): "
         "re-runs with it withheld (mask arms) decide it; never kept under a library verdict.",
         "worse than the others, unconfirmed",
         lambda c: bool(c.unconfirmed), _worse_unconfirmed,
         ("relative_effect", "relative_ci", "relative_q", "coef", "coef_ci", "mask_reruns", *_COUNTS),
         extra=lambda c: {"mask_reruns": c.mask_plan[0], "mask_draws": c.mask_plan[1]}),
    Rule("S106", "judged-worse", "rewrite",
         f"Not harmful on pass/fail (S103, S104) nor worse there unconfirmed (S105), but where a judge compared the answers (`preference`), the "
         f"pairs that retrieved it lose more than they win: exact sign test of wins against losses over tasks, "
         f"BH q ≤ q_max over the skills with judged pairs, the interval of (wins − losses) / judged pairs below "
         f"0, at least min_tasks ({_R.min_tasks}) judged tasks and min_discordant ({_R.min_discordant}) wins "
         "and losses; ties are not flips. The reason gives the judge's own A/A flip rate.",
         "judged worse than without skills",
         lambda c: c.judged_worse, _judged_worse, ("judged", "judged_q", *_COUNTS),
         extra=lambda c: {"judged": c.a.preference, "judged_q": c.pop.q_judged.get(c.sid)}),
    Rule("S107", "efficiency-harm", "rewrite",
         f"No clear accuracy effect (not harmful, helpful or mixed; its task-level test does not reject and its "
         f"regression interval includes 0), but where it was retrieved runs cost much more with skills than "
         f"without: the interval of its token (else wall-time) ratio enabled / disabled (Hodges-Lehmann of the "
         f"per-task log ratios) lies above 1.5, and above the library's on the same benchmarks (relative "
         f"interval above 1, BH q ≤ q_max over the screened skills), with at least min_tasks ({_R.min_tasks}) "
         "tasks.",
         "costs more for no accuracy gain",
         lambda c: c.efficiency_harm is not None, _efficiency_harm, ("efficiency", *_COUNTS),
         extra=lambda c: {"efficiency": {"measure": c.efficiency_harm,
                                         **c.pop.efficiency.get(c.sid, {}).get(c.efficiency_harm or "", {})}}),
    Rule("S201", "mixed", "rewrite",
         f"b and c both ≥ mixed_min ({_R.mixed_min}), the smaller ≥ mixed_ratio ({_R.mixed_ratio:.2f}) of "
         "the flips, and both more rescues among its runs that fail without skills and more harms among "
         "those that pass than the other retrieving pairs where no harmful or helpful skill was retrieved, "
         "at the same retrieval depths (exact one-sided binomial per direction against the others' rate "
         "at its depths, counts over tasks (Rao-Scott), the larger p, BH q ≤ q_max); silent "
         "where the model's harm is library-wide and grows with depth (L001 explains the flips).",
         "works both ways, more than the others",
         lambda c: c.mixed, _mixed, ("discordance_q", *_COUNTS),
         extra=lambda c: {"discordance_q": float(c.pop.q_mixed[c.sid])}),
    Rule("S202", "both-ways-like-the-library", "keep",
         "The model's skills work both ways (L003) and this one flipped runs both ways too (at least one "
         "rescue and one harm) without being judged on its own (S201), and is neither reliably helpful nor a near-duplicate: the "
         "library-level action covers it.",
         "works both ways, like the library",
         lambda c: bool(c.pop.both) and not c.pop.wide and c.a.b > 0 and c.a.c > 0 and not c.helpful
         and c.dup is None, _both_ways_skill, _COUNTS, extra=_power_evidence),
    Rule("S301", "reliably-helpful", "keep",
         "net > 0 with q ≤ q_max, or a regression interval above 0 (coef q ≤ q_max) with net > 0 and "
         "at least min_discordant flips, and no regression interval below 0.",
         "reliably helpful",
         lambda c: c.helpful, _helpful, ("coef", "coef_ci", *_COUNTS)),
    Rule("S401", "near-duplicate", "merge",
         "A near-duplicate (a direct pair above the calibrated similarity) that was retrieved and is not "
         "harmful; 'merge into X' only when the interval of the difference of their effects excludes 0.",
         "near-duplicate of another entry",
         lambda c: c.dup_row is not None and c.dup_row.n_retrieved > 0 and not c.pop.harmful(c.dup_row),
         _merge, ("near_duplicate",), extra=_merge_evidence),
    Rule("S501", "not-separable", "needs-data",
         "Exposure counts look harmful (net < 0, q ≤ q_max), or the harm is library-wide and its effect "
         "is below 0, but it was never retrieved apart from other skills (not identifiable), or its "
         "regression effect is not below 0 while no co-retrieved skill is judged harmful instead: "
         "re-runs with it withheld (mask arms) separate it.",
         "harm not separable from co-retrieved",
         lambda c: bool(c.blame) and (c.a.identifiable is False or c.entangled), _not_separable,
         ("identifiable", "aliases", "mask_reruns", "more_tasks_needed"),
         extra=lambda c: {**_power_evidence(c), "mask_reruns": c.mask_plan[0], "mask_draws": c.mask_plan[1]}),
    Rule("S502", "harm-is-library-wide", "keep",
         "The model's library verdict is library-wide (the skills do not differ; see L001/L002) and the "
         "skill's exposure counts look harmful or its effect is below 0, but it is not judged harmful.",
         "harm is library-wide, not this entry",
         lambda c: bool(c.blame) and c.pop.wide, _library_wide,
         ("relative_effect", "relative_ci", "coef_ci"), extra=_power_evidence),
    Rule("S503", "too-few-tasks", "needs-data",
         f"Exposure counts inconclusive (no q ≤ q_max either way) or fewer than min_tasks retrieving tasks, "
         f"and fewer retrieving tasks than a McNemar power calculation needs to detect delta_min "
         f"({_R.delta_min * 100:.0f} pp) with power {_R.power:.2f}, in tasks with the epochs' design effect.",
         "too few retrieving tasks",
         lambda c: c.more > 0 and ((c.a.n_tasks or c.a.n_retrieved) < c.rules.min_tasks
                                   or not (c.exp_harm or c.exp_help)), _too_few_tasks,
         ("tasks_needed", "more_tasks_needed", "design_effect", "pairs_per_task"), extra=_power_evidence),
    Rule("S504", "no-reliable-effect", "keep",
         "None of the above: no reliable effect either way.",
         "no reliable effect",
         lambda c: True, _no_effect, _COUNTS, extra=_power_evidence),
    Rule("B001", "sign-differs-across-benchmarks", "rewrite",
         f"One model, several benchmarks: on one benchmark's pairs alone the skill's exposure counts are "
         f"harmful and on another's helpful (each task-level p ≤ 0.05, at least min_tasks ({_R.min_tasks}) "
         "retrieving tasks), and its mean flip differs between the two (two-sample z-test over tasks, BH "
         "q ≤ q_max across the model's skills); replaces the skill's pooled decision on that model (pooled, "
         "the two net out).",
         "helps one benchmark, hurts another",
         lambda c: bool(c.hurt and c.helped), _sign_differs_benchmarks, ("per_benchmark",),
         extra=_per_benchmark_evidence, scope="benchmarks"),
    Rule("M001", "sign-differs-across-models", "rewrite",
         "With several models: the regression interval is below 0 on one model and above 0 on another "
         "(both identifiable); one rewrite for those models replaces their per-model actions.",
         "helps one model, hurts another",
         lambda c: bool(c.hurt and c.helped), _sign_differs, ("sign_differs", "per_model"), scope="models"),
)
RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
_BY_SCOPE: dict[str, tuple[Rule, ...]] = {s: tuple(r for r in RULES if r.scope == s)
                                          for s in ("library", "skill", "benchmarks", "models")}


def rules_for(scope: str) -> tuple[Rule, ...]:
    """The rules of one scope ("library", "skill", "models"), in evaluation order."""
    return _BY_SCOPE[scope]


def first_rule(scope: str, ctx: Any) -> Rule | None:
    """The first rule of `scope` whose predicate holds for `ctx` (None when none does)."""
    return next((r for r in rules_for(scope) if r.applies(ctx)), None)


def decide_skill(ctx: SkillContext) -> tuple[Rule, str, dict[str, Any]]:
    """(the deciding rule, the reason, the evidence) for one skill on one population."""
    rule = first_rule("skill", ctx)
    assert rule is not None  # S504 always holds
    ev = ctx.base_evidence()
    if rule.extra is not None:
        ev.update(rule.extra(ctx))
    reason = rule.reason(ctx)
    if ctx.measured and rule.action not in ("prune", "rewrite", "unused"):  # the re-runs' evidence after
        reason += f"; re-runs do not show it worse than the other entries ({ctx.causal_txt})"
    others = [s for s in ctx.pop.cluster_of.get(ctx.sid, ()) if s != ctx.sid]
    if others and rule.action in ("prune", "rewrite", "needs-data"):
        reason += f"; in a harmful cluster with {', '.join(others[:3])}"
    return rule, reason, ev


# ---------------------------------------------------------------- the table in the docs
MARK_START, MARK_END = "<!-- rules:start -->", "<!-- rules:end -->"


def rules_markdown() -> str:
    """The rules table (id, name, action, summary, condition) as Markdown, in evaluation order."""
    lines = ["| id | name | action | in short | condition |", "|---|---|---|---|---|"]
    for r in RULES:
        lines.append(f"| {r.id} | `{r.name}` | `{r.action}` | {r.summary} | {r.condition.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def update_rules_block(text: str) -> str:
    """`text` with the block between MARK_START and MARK_END replaced by `rules_markdown()`."""
    head, start, rest = text.partition(MARK_START)
    _, end, tail = rest.partition(MARK_END)
    if not start or not end:
        raise ValueError(f"no {MARK_START} ... {MARK_END} block")
    return f"{head}{MARK_START}\n{rules_markdown()}{MARK_END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m skillaudit.decide.policy --rules-markdown` prints the table; `--update FILE` rewrites its block."""
    ap = argparse.ArgumentParser(prog="python -m skillaudit.decide.policy", description=main.__doc__)
    ap.add_argument("--rules-markdown", action="store_true", help="print the rules table")
    ap.add_argument("--update", metavar="FILE", help="rewrite the rules block of FILE (docs/attribution.md)")
    args = ap.parse_args(argv)
    if args.update:
        from skillaudit.util.files import atomic_write_text

        path = Path(args.update)
        try:
            atomic_write_text(path, update_rules_block(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"{path}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
            return 2
    if args.rules_markdown or not args.update:
        sys.stdout.write(rules_markdown())
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
