"""The recommendation policy as a rule table (skillaudit.decide.policy.RULES): one constructed case per
rule, for which that rule (and no earlier one of its scope) decides; the table's own invariants;
and the rule ids that `prune --json` carries."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner

from skillaudit.analysis.attribution import SkillAttribution
from skillaudit.analysis.library_effect import LibraryEffect
from skillaudit.cli import cli
from skillaudit.decide.policy import (
    ACTIONS,
    LIBRARY_ACTIONS,
    RULES,
    RULES_BY_ID,
    BenchmarksContext,
    ModelsContext,
    Population,
    SkillContext,
    decide_skill,
    first_rule,
    rules_for,
)
from skillaudit.decide.recommend import Recommendation, _combine, _library_recommendations


# ---------------------------------------------------------------- minimal inputs
class _Attribution:
    """The two questions a population asks its AttributionResult: merge difference, co-retrieved partners."""

    def __init__(self, differences=None):
        self.differences = differences or {}

    def difference(self, a, b):
        return self.differences.get((a, b))

    def partners(self, skill_id):
        return []


def _row(sid="s", **kw) -> SkillAttribution:
    """A skill retrieved on 1,000 tasks with 10 rescues and 10 harms: no effect, plenty of data."""
    base = dict(skill_id=sid, n_retrieved=1000, n_tasks=1000, b=10, c=10, net=0, share=0.0, rae_k=0.0,
                p_value=1.0, q_value=1.0, exclusive_n=0, exclusive_b=0, exclusive_c=0, in_library=True,
                coef=0.0, coef_ci=(-0.02, 0.02), coef_q=1.0, identifiable=True, relative_effect=0.0,
                relative_ci=(-0.02, 0.02), relative_p=1.0, relative_q=1.0, relative_testable=True, model="m")
    return SkillAttribution(**{**base, **kw})


#: worse than the other entries and below zero: S104's test (with a population whose skills differ)
_HARMFUL = dict(n_retrieved=40, n_tasks=40, b=0, c=8, net=-8, q_value=0.01, coef=-0.2, coef_ci=(-0.3, -0.1),
                relative_effect=-0.2, relative_ci=(-0.3, -0.1), relative_q=0.01, relative_p=0.001)
#: the judged pairs that retrieved it: 3 wins, 4 ties, 13 losses over 20 tasks (S106's test)
_JUDGED_WORSE = {"wins": 3, "ties": 4, "losses": 13, "n_pairs": 20, "n_tasks": 20, "effect": -0.5,
                 "ci": [-0.72, -0.19], "p": 0.004, "p_exact": 0.021, "test": "score", "test_exact": "sign"}
#: tokens with / without skills where it was retrieved: 4x, 1.6x the library's (S107's test)
_COSTLY = {"ratio": 4.0, "ratio_ci": [3.1, 5.2], "p": 1e-6, "n_tasks": 30, "words": "tokens (prompt + completion)",
           "relative_ratio": 1.6, "relative_ci": [1.3, 2.0], "relative_p": 1e-4, "relative_q": 0.001}
_HELPFUL = dict(b=30, c=5, net=25, q_value=0.001, coef=0.1, coef_ci=(0.05, 0.15), coef_q=0.01)


#: the selection sentence of a model whose retrieval follows failure (metrics.GroupMetrics.follows_failure)
_SELECTION = ("retrieval follows failure on m: the runs that searched lost with skills (RAE -12.8 pp) while "
              "those that skipped gained (Δskip +17.0 pp; difference 95% CI +18.0 to +41.0)")

#: a model whose retrieving pairs flip both ways more than the pairs that retrieved nothing
_BOTH = {"cond_b": 93, "cond_c": 117, "both_ways": {
    "rescue_rate": 0.36, "harm_rate": 0.35, "ref_rescue_rate": 0.16, "ref_harm_rate": 0.22, "p_rescue": 1e-4,
    "p_harm": 0.007, "p": 0.007, "n_fail": 257, "n_pass": 334, "ref_n_fail": 100, "ref_n_pass": 109,
    "comparator": "pairs that retrieved no skill", "test": "one-sided Fisher"}}


def _library(verdict="skill-specific", direction=None, depth_slope_ci=None, model="m", benchmark="*"):
    return LibraryEffect(
        model=model, benchmark=benchmark, verdict=verdict, direction=direction, mean_effect=-0.05,
        mean_effect_ci=(-0.08, -0.02), heterogeneity_p=0.6 if verdict == "library-wide" else 0.01,
        heterogeneity_stat=1.0, flip_p=0.001, n_permutations=1000, n_skills_tested=10, n_tasks=200,
        n_pairs=200, skills_per_pair=2.0, depth_slope=-0.02, depth_slope_ci=depth_slope_ci,
        recommendation=None, reportable=True, text="Harm is library-wide (...)")


def _skill(row, *others, differences=None, **facts):
    """The context of `row` in a population holding it and `others` (facts: Population fields)."""
    rows = {a.skill_id: a for a in (row, *others)}
    pop = Population(rows=rows, attribution=_Attribution(differences), **facts)
    return SkillContext(row, pop)


def _bench_split(q_split=0.001):
    rows = {"code": _row(n_retrieved=117, n_tasks=117, b=25, c=4, net=21, rae_k=0.179, p_value=1e-4),
            "math": _row(n_retrieved=109, n_tasks=109, b=4, c=27, net=-23, rae_k=-0.211, p_value=1e-5)}
    from skillaudit.decide.policy import Rules

    return BenchmarksContext("s", "m", rows, Rules(), q_split=q_split)


def _sign_split():
    rows = {"a": {"s": _row(coef=-0.1, coef_ci=(-0.2, -0.05))}, "b": {"s": _row(coef=0.1, coef_ci=(0.05, 0.2))}}
    return ModelsContext("s", ("a",), ("b",), rows)


MEASURED = dict(causal_effect=-0.2, causal_ci=(-0.3, -0.1), causal_q=0.01, causal_relative=-0.15,
                causal_relative_ci=(-0.25, -0.05), causal_n_withheld=12)

#: rule id -> a minimal input for which that rule decides
CASES = {
    "L000": lambda: replace(_library("library-wide", "harm", depth_slope_ci=(-0.04, 0.01)), selection=_SELECTION),
    "L001": lambda: _library("library-wide", "harm", depth_slope_ci=(-0.04, -0.01)),
    "L002": lambda: _library("library-wide", "harm", depth_slope_ci=(-0.04, 0.01)),
    "L003": lambda: replace(_library("none"), both_ways=_BOTH),
    "S000": lambda: _skill(_row(n_retrieved=0, n_tasks=0, b=0, c=0, q_value=None), use_unknown=frozenset({"s"})),
    "S001": lambda: _skill(_row(n_retrieved=0, n_tasks=0, b=0, c=0, q_value=None)),
    "S100": lambda: _skill(_row(**_HARMFUL), differ=True, selection=_SELECTION),
    "S101": lambda: _skill(_row(**_HARMFUL), _row("g", **_HELPFUL), differ=True, partner={"s": ("g", 0.9)}),
    "S102": lambda: _skill(_row(**{**_HARMFUL, "b": 4, "c": 10, "net": -6}), differ=True),
    # the skills need not differ: re-runs measure it
    "S103": lambda: _skill(_row(b=1, c=10, net=-9, **MEASURED)),
    "S104": lambda: _skill(_row(**_HARMFUL), differ=True),
    "S201": lambda: _skill(_row(), mixed_counts={"s": (60, 9, 8)}, q_mixed={"s": 0.01}),
    # the model's skills work both ways; this one flipped runs both ways too
    "S202": lambda: _skill(_row(b=6, c=8, net=-2), both=_BOTH["both_ways"]),
    "S301": lambda: _skill(_row(**_HELPFUL)),
    "S401": lambda: _skill(_row(), _row("o"), partner={"s": ("o", 0.9)},
                           differences={("o", "s"): (0.08, (0.02, 0.14))}),
    "S501": lambda: _skill(_row(n_retrieved=40, n_tasks=40, b=0, c=8, net=-8, q_value=0.01, coef=None,
                                coef_ci=None, identifiable=False, aliases=("x",), alias_coef=-0.2)),
    # worse than the others on the relative test, but the skills do not differ: mask arms decide
    "S105": lambda: _skill(_row(**_HARMFUL), lib=_library("library-wide", "harm")),
    "S106": lambda: _skill(_row(preference=_JUDGED_WORSE), q_judged={"s": 0.01}),
    "S107": lambda: _skill(_row(), efficiency={"s": {"tokens": _COSTLY}}),
    # skills do not differ and this one is not reliably worse than the others
    "S502": lambda: _skill(_row(**{**_HARMFUL, "relative_ci": (-0.3, 0.02), "relative_q": 0.3}),
                           lib=_library("library-wide", "harm")),
    "S503": lambda: _skill(_row(n_retrieved=12, n_tasks=12, b=1, c=2, net=-1, q_value=1.0)),
    "S504": lambda: _skill(_row()),
    "B001": lambda: _bench_split(),
    "M001": _sign_split,
}


# ---------------------------------------------------------------- one case per rule
@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_each_rule_decides_its_own_case(rule):
    """Every rule of the table has a case here; on it the rule is the first of its scope that holds
    (so no earlier rule decides), and a skill rule's reason opens with its summary and its evidence
    holds the fields the rule cites."""
    assert rule.id in CASES, f"rule {rule.id} ({rule.name}) has no test case"
    ctx = CASES[rule.id]()
    assert first_rule(rule.scope, ctx) is rule
    earlier = rules_for(rule.scope)[: rules_for(rule.scope).index(rule)]
    assert not any(r.applies(ctx) for r in earlier)
    if rule.scope == "skill":
        decided, reason, ev = decide_skill(ctx)
        assert decided is rule and reason.startswith(rule.summary + ": ")
        assert set(rule.evidence) <= set(ev), set(rule.evidence) - set(ev)
    else:
        assert rule.reason(ctx).startswith(rule.summary + ": ")


def test_unused_never_retrieved():
    """S001: never retrieved -> unused, whatever else is true of it."""
    rule, reason, _ = decide_skill(CASES["S001"]())
    assert (rule.id, rule.action) == ("S001", "unused") and "no task" in reason


def test_harmful_with_a_helpful_near_duplicate_is_rewritten_after_it():
    """S101: harmful, its near-duplicate reliably helpful -> rewrite, naming the duplicate; without the duplicate it is pruned (S104)."""
    rule, reason, ev = decide_skill(CASES["S101"]())
    assert (rule.id, rule.action) == ("S101", "rewrite") and "rewrite it after g" in reason
    assert ev["harmful"] is True
    assert decide_skill(CASES["S104"]())[0].id == "S104"


def test_harmful_but_rescuing_is_rewritten():
    """S102: harmful with 4 rescues of 16 flips (> 25%) -> rewrite, not prune."""
    rule, reason, _ = decide_skill(CASES["S102"]())
    assert (rule.id, rule.action) == ("S102", "rewrite") and "4 rescues" in reason


def test_harmful_by_withholding_is_pruned_and_says_causes():
    """S103: re-runs with the skill withheld show it harmful -> prune; the reason says "causes"; a
    measured skill whose re-runs do not show it harmful is not judged on co-retrieval (not S104)."""
    rule, reason, ev = decide_skill(CASES["S103"]())
    assert (rule.id, rule.action) == ("S103", "prune")
    assert "causes more harm than the average entry: from 12 re-runs" in reason
    assert ev["basis"].endswith("measured")
    cleared = _skill(_row(**{**_HARMFUL, **MEASURED, "causal_ci": (-0.3, 0.05)}), differ=True)
    assert decide_skill(cleared)[0].id not in ("S103", "S104")


def test_harmful_vs_library_needs_skills_that_differ():
    """S104: worse than the other entries and below zero -> prune; if the skills do not differ on
    the model the same row is not pruned."""
    rule, reason, _ = decide_skill(CASES["S104"]())
    assert (rule.id, rule.action) == ("S104", "prune") and reason.startswith("harmful vs the other entries: associated")
    assert decide_skill(_skill(_row(**_HARMFUL), differ=False))[0].action != "prune"


def test_mixed_is_rewritten():
    """S201: 9 rescues and 8 harms, far more flips than the other retrieving pairs -> rewrite."""
    rule, reason, ev = decide_skill(CASES["S201"]())
    assert (rule.id, rule.action) == ("S201", "rewrite") and ev["discordance_q"] == 0.01
    assert "9 rescues and 8 harms" in reason
    not_significant = _skill(_row(), mixed_counts={"s": (60, 9, 8)}, q_mixed={"s": 0.5})
    assert decide_skill(not_significant)[0].id != "S201"


def test_mixed_is_silent_where_harm_grows_with_depth():
    """Issue 52 F8: under a library-wide harm that grows with depth (L001) the flips of deep
    retrievals are the depth verdict's, so S201 does not rewrite the skills that happen to sit in
    them; under a skill-specific verdict the same counts are S201."""
    deep = _library("library-wide", "harm", depth_slope_ci=(-0.04, -0.01))
    ctx = _skill(_row(), mixed_counts={"s": (60, 9, 8)}, q_mixed={"s": 0.01}, lib=deep)
    assert decide_skill(ctx)[0].id != "S201"
    assert decide_skill(CASES["S201"]())[0].id == "S201"


def test_reliably_helpful_is_kept():
    """S301: net +25 with q 0.001 -> keep."""
    rule, reason, _ = decide_skill(CASES["S301"]())
    assert (rule.id, rule.action) == ("S301", "keep") and "net +25" in reason


def test_near_duplicate_is_merged_into_the_better_one():
    """S401: a near-duplicate of a retrieved, not harmful entry -> merge; "which does better" only
    because the difference's interval excludes 0."""
    rule, reason, ev = decide_skill(CASES["S401"]())
    assert (rule.id, rule.action) == ("S401", "merge")
    assert reason.startswith("near-duplicate of another entry: o, which does better")
    assert ev["merge_difference"] == {"skill_id": "o", "difference": 0.08, "ci": [0.02, 0.14]}
    unsure = _skill(_row(), _row("o"), partner={"s": ("o", 0.9)}, differences={("o", "s"): (0.01, (-0.05, 0.07))})
    assert "no evidence which is better" in decide_skill(unsure)[1]


def test_harm_not_separable_from_aliases_needs_data():
    """S501: harmful-looking counts of a skill never retrieved apart from x -> needs-data, at least 10 more tasks."""
    rule, reason, ev = decide_skill(CASES["S501"]())
    assert (rule.id, rule.action) == ("S501", "needs-data")
    assert "together with x" in reason and ev["more_tasks_needed"] >= 10


def test_aliases_and_entangled_harm_point_to_mask_arms():
    """S501 names `run --arms mask` and how many re-runs, for a skill never retrieved apart (aliases)
    and for one with 114 retrieving tasks, c 33 and q < 0.001 whose regression effect is not below 0
    while its co-retrieved partner is not judged harmful (issue 51 F5: it was 'too few retrieving
    tasks'); when the partner is the harmful one, the skill is not sent to mask arms."""
    _, reason, ev = decide_skill(CASES["S501"]())
    assert "run --arms mask:" in reason and f"about {ev['mask_reruns']} re-runs" in reason

    class _Partnered(_Attribution):
        def partners(self, skill_id):
            return [("p", 100)] if skill_id == "s" else [("s", 100)]

    row = _row(n_retrieved=114, n_tasks=114, b=4, c=33, net=-29, q_value=0.0005, coef=-0.05,
               coef_ci=(-0.2, 0.1), relative_q=0.5, relative_ci=(-0.1, 0.02), relative_effect=-0.04)
    pop = Population(rows={"s": row, "p": _row("p")}, attribution=_Partnered(), differ=True)
    rule, reason, ev = decide_skill(SkillContext(row, pop))
    assert rule.id == "S501" and "run --arms mask:" in reason and "over its 114 retrieving tasks" in reason
    culprit = Population(rows={"s": row, "p": _row("p", **_HARMFUL)}, attribution=_Partnered(), differ=True)
    rule, reason, _ = decide_skill(SkillContext(row, culprit))
    assert rule.id not in ("S501", "S503") and "the harm goes to co-retrieved p" in reason


def test_library_wide_harm_keeps_the_entry():
    """S502: under a library-wide verdict an entry with harmful counts is kept (the library-level action covers it)."""
    rule, reason, _ = decide_skill(CASES["S502"]())
    assert (rule.id, rule.action) == ("S502", "keep") and "harm is library-wide on *" in reason


def test_worse_than_the_others_is_never_kept_under_a_library_verdict():
    """S105: reliably worse than the other entries (relative interval below 0, q 0.01) while the
    skills-differ test does not reject -> needs-data naming mask arms and how many re-runs; the same
    row whose own regression effect is not below 0 says so instead; S502 keeps only an entry that
    is not reliably worse, and its reason then cites an interval that includes 0."""
    rule, reason, ev = decide_skill(CASES["S105"]())
    assert (rule.id, rule.action) == ("S105", "needs-data")
    assert "the test that the skills differ at all does not reject on * (p 0.600, needs <= 0.05)" in reason
    assert f"about {ev['mask_reruns']} re-runs with it withheld" in reason
    assert f"run --arms mask:{ev['mask_draws']} --base RUNS over its 40 retrieving tasks" in reason
    assert ev["mask_reruns"] >= 2 and ev["mask_draws"] == -(-ev["mask_reruns"] // 40)
    flat = _skill(_row(**{**_HARMFUL, "coef": -0.05, "coef_ci": (-0.2, 0.1)}), differ=True)
    rule, reason, _ = decide_skill(flat)
    assert rule.id == "S105" and "its own effect is not below zero once co-retrieved skills are accounted for" in reason
    rule, reason, _ = decide_skill(CASES["S502"]())
    assert rule.id == "S502" and "[-30.0, +2.0] vs the other entries" in reason


def test_skills_that_work_both_ways_are_said_so_at_both_levels():
    """L003: no library-wide harm but rescues and harms both above the comparator's -> a library-level
    gate-retrieval naming the rates; S202: a skill of that model with rescues and harms is kept under
    it with the same rates (not "too few retrieving tasks"); with fewer than 5 harms no verdict."""
    e = CASES["L003"]()
    rule = first_rule("library", e)
    assert (rule.id, rule.action) == ("L003", "gate-retrieval")
    assert rule.reason(e) == ("skills work both ways: on m skills rescue 36% of the runs that fail without "
                              "skills and harm 35% of those that pass, against 16% and 22% on pairs that "
                              "retrieved no skill (one-sided Fisher: p <0.001 and 0.007; an association); "
                              "retrieve them only where they help: split the tasks by what they need "
                              "(benchmark, task features) or rewrite the skills' triggers")
    few = replace(e, both_ways={**_BOTH, "cond_c": 4})
    assert first_rule("library", few) is None
    rule, reason, _ = decide_skill(_skill(_row(n_retrieved=12, n_tasks=12, b=3, c=4, net=-1), both=_BOTH["both_ways"]))
    assert rule.id == "S202" and reason.startswith("works both ways, like the library: 3 rescues and 4 harms")


def test_where_retrieval_follows_failure_prunes_and_gates_become_verify():
    """Issue 52 F10: a skill S104 would prune and a library S104/L002 would gate, on a model whose
    retrieval follows failure with no control arms: needs-data (S100) and verify (L000), both naming
    run --arms random,empty; without the selection sentence the same inputs prune and gate."""
    rule, reason, ev = decide_skill(CASES["S100"]())
    assert (rule.id, rule.action) == ("S100", "needs-data") and "run --arms random,empty" in reason
    assert ev["selection"] == _SELECTION and reason.startswith("retrieval follows failure, verify first: " + _SELECTION)
    assert decide_skill(CASES["S104"]())[0].id == "S104"
    e = CASES["L000"]()
    assert (first_rule("library", e).id, first_rule("library", e).action) == ("L000", "verify")
    assert "run --arms random,empty" in first_rule("library", e).reason(e)
    assert first_rule("library", replace(e, selection=None)).id == "L002"
    assert first_rule("library", replace(_library("none"), selection=_SELECTION)) is None


def test_a_skill_that_helps_one_benchmark_and_harms_another_is_named_per_benchmark():
    """B001: harmful on math's pairs alone and helpful on code's (each p <= 0.05), the difference
    with q <= 0.10 -> one rewrite naming both benchmarks with their figures and the gate; with the
    difference's q above 0.10, or one side not significant on its own, no B001."""
    from skillaudit.decide.policy import BenchmarksContext  # noqa: F401

    ctx = _bench_split()
    rule = first_rule("benchmarks", ctx)
    assert (rule.id, rule.action) == ("B001", "rewrite")
    assert rule.reason(ctx) == (
        "helps one benchmark, hurts another: on m it harms math (-21.1 pp where retrieved: net -23 (b 4, c 27) "
        "over 109 tasks (109 pairs), p <0.001); helps code (+17.9 pp where retrieved: net +21 (b 25, c 4) over "
        "117 tasks (117 pairs), p <0.001) (difference q 0.001; associations): gate it per benchmark (retrieve "
        "it for code only) or rewrite it for math")
    assert first_rule("benchmarks", _bench_split(q_split=0.3)) is None
    assert _bench_split().p_split() < 1e-6
    weak = replace(ctx, rows={**ctx.rows, "code": replace(ctx.rows["code"], p_value=0.2)})
    assert weak.p_split() is None


def test_too_few_tasks_needs_data_and_says_how_many():
    """S503: 12 retrieving tasks -> needs-data with the number of tasks the power calculation asks for."""
    rule, reason, ev = decide_skill(CASES["S503"]())
    assert (rule.id, rule.action) == ("S503", "needs-data")
    assert ev["more_tasks_needed"] == ev["tasks_needed"] - 12 > 0
    assert f"about {ev['more_tasks_needed']} more retrieving tasks" in reason


def test_no_reliable_effect_is_kept():
    """S504: 1,000 tasks with 10 rescues and 10 harms -> keep, no reliable effect, no more tasks needed."""
    rule, reason, ev = decide_skill(CASES["S504"]())
    assert (rule.id, rule.action) == ("S504", "keep") and ev["more_tasks_needed"] == 0
    assert reason.startswith("no reliable effect: net +0")


def test_library_wide_harm_gates_retrieval_or_reduces_depth():
    """L001/L002: library-wide harm -> reduce-depth when the depth slope is below 0, else gate-retrieval;
    a skill-specific verdict gives no library action; the recommendation records the rule."""
    (depth,) = _library_recommendations([CASES["L001"]()])
    (gate,) = _library_recommendations([CASES["L002"]()])
    assert (depth.action, depth.rule, gate.action, gate.rule) == ("reduce-depth", "L001", "gate-retrieval", "L002")
    assert depth.to_dict()["rule"] == "L001" and depth.reason.startswith("library-wide harm, worse with depth: ")
    assert _library_recommendations([_library("skill-specific")]) == []
    # a model-wide action covers that model's benchmarks
    cells = [_library("library-wide", "harm"), _library("library-wide", "harm", benchmark="b1")]
    assert [r.benchmark for r in _library_recommendations(cells)] == ["*"]


def test_sign_differs_across_models_is_one_rewrite():
    """M001: prune on one model, keep on another, coefficients of opposite sign -> one rewrite for
    both, rule M001, each model's own rule kept in the per-model evidence."""
    ctx = _sign_split()
    per_model = {"a": {"s": Recommendation("s", "prune", "p", {"model": "a"}, models=("a",), rule="S104")},
                 "b": {"s": Recommendation("s", "keep", "k", {"model": "b"}, models=("b",), rule="S301")}}
    (rec,) = _combine(per_model, ctx.rows)
    assert (rec.action, rec.rule, rec.models) == ("rewrite", "M001", ("a", "b"))
    assert {m: v["rule"] for m, v in rec.evidence["per_model"].items()} == {"a": "S104", "b": "S301"}
    assert rec.reason.startswith("helps one model, hurts another: associated with harm on a")


def test_combined_rows_take_the_first_models_rule():
    """Two models with the same action by different rules: one row, the first model's rule on top,
    each model's rule in the per-model evidence."""
    per_model = {"a": {"s": Recommendation("s", "needs-data", "x", {}, models=("a",), rule="S501")},
                 "b": {"s": Recommendation("s", "needs-data", "y", {}, models=("b",), rule="S503")}}
    (rec,) = _combine(per_model, {"a": {}, "b": {}})
    assert rec.rule == "S501" and rec.evidence["per_model"]["b"]["rule"] == "S503"
    assert rec.summary == RULES_BY_ID["S501"].summary


# ---------------------------------------------------------------- the table
def test_the_rule_table_is_well_formed():
    """Unique ids in evaluation order per scope, kebab names, actions of their scope, one-line
    summaries of at most 40 characters, and a last skill rule that always holds."""
    assert len({r.id for r in RULES}) == len(RULES) and len({r.name for r in RULES}) == len(RULES)
    prefix = {"library": "L", "skill": "S", "benchmarks": "B", "models": "M"}
    for r in RULES:
        assert re.fullmatch(r"[LSBM]\d{3}", r.id) and r.id[0] == prefix[r.scope], r.id
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name), r.name
        assert r.action in (LIBRARY_ACTIONS if r.scope == "library" else ACTIONS), r
        assert 0 < len(r.summary) <= 40 and ":" not in r.summary and r.condition.endswith("."), r
    for scope in prefix:
        ids = [r.id for r in rules_for(scope)]
        assert ids == sorted(ids), scope
    assert rules_for("skill")[-1].applies(CASES["S504"]())


# ---------------------------------------------------------------- prune --json
def test_prune_json_names_the_rule_of_every_recommendation(tmp_path):
    """On a two-model simulation (one skill hurts one model and helps the other) every
    recommendation in prune --json names a rule of its action, per-model evidence names each
    model's rule, the top-level rule is the first model's, and each reason opens with its rule's summary."""
    from skillaudit.runs.simulate import scenario

    runs, lib = scenario("model-split", seed=0).write(tmp_path / "sim")
    res = CliRunner().invoke(cli, ["prune", str(runs), "--skills", str(lib), "--embedder", "tfidf",
                                   "--bootstrap", "300", "--json"])
    assert res.exit_code == 0, res.output
    recs = json.loads(res.stdout)["recommendations"]
    assert recs and all(r["rule"] in RULES_BY_ID and RULES_BY_ID[r["rule"]].action == r["action"] for r in recs)
    combined = [r for r in recs if len(r["models"]) > 1]
    assert combined
    for r in recs:
        per = r["evidence"].get("per_model") or {}
        for own in per.values():
            assert RULES_BY_ID[own["rule"]].action == own["action"]
            assert own["reason"].startswith(RULES_BY_ID[own["rule"]].summary + ": ")
        if r["rule"] != "M001" and per:
            assert r["rule"] == per[r["models"][0]]["rule"]
        if not r["reason"].startswith("on "):  # else one clause per model, checked above
            assert r["reason"].startswith(RULES_BY_ID[r["rule"]].summary + ": "), r


def test_update_rules_block_regenerates_the_docs_table(tmp_path, capsys):
    """`python -m skillaudit.decide.policy --update FILE` replaces a stale block with the table; a file
    without the markers is one line on stderr naming it, exit 2, and is left as it was."""
    from skillaudit.decide.policy import main, rules_markdown

    doc = tmp_path / "a.md"
    doc.write_text("intro\n<!-- rules:start -->\nold table\n<!-- rules:end -->\nafter\n", encoding="utf-8")
    assert main(["--update", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == f"intro\n<!-- rules:start -->\n{rules_markdown()}<!-- rules:end -->\nafter\n"
    capsys.readouterr()
    bare = tmp_path / "b.md"
    bare.write_text("no markers\n", encoding="utf-8")
    assert main(["--update", str(bare)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{bare}: no <!-- rules:start -->") and err.count("\n") == 1
    assert bare.read_text(encoding="utf-8") == "no markers\n"


def test_judged_worse_is_rewritten_and_needs_the_test_the_interval_and_enough_pairs():
    """S106: the judged pairs that retrieved it lose more than they win -> rewrite, the reason giving
    the counts, the q and the judge's own A/A flip rate; each missing piece leaves it to S504."""
    rule, reason, ev = decide_skill(CASES["S106"]())
    assert (rule.id, rule.action) == ("S106", "rewrite")
    assert "3 wins, 4 ties, 13 losses over 20 judged tasks, effect -0.50 [-0.72, -0.19]" in reason
    assert "the judge's own flip rate was not checked" in reason and ev["judged_q"] == 0.01
    aa = {"checks": 10, "flips": 1, "rate": 0.1, "ci": [0.02, 0.4]}
    assert "A/A flip rate: 1 of 10 checks" in decide_skill(_skill(_row(preference=_JUDGED_WORSE),
                                                                  q_judged={"s": 0.01}, judge_aa=aa))[1]
    for change, facts in (({}, {"q_judged": {"s": 0.2}}), ({"ci": [-0.6, 0.05]}, {"q_judged": {"s": 0.01}}),
                          ({"n_tasks": 4}, {"q_judged": {"s": 0.01}}),
                          ({"wins": 1, "losses": 3, "ties": 16}, {"q_judged": {"s": 0.01}})):
        ctx = _skill(_row(preference={**_JUDGED_WORSE, **change}), **facts)
        assert decide_skill(ctx)[0].id == "S504", change
    # harmful on pass/fail already: S104 decides (prune), not S106
    assert decide_skill(_skill(_row(**_HARMFUL, preference=_JUDGED_WORSE), differ=True,
                               q_judged={"s": 0.01}))[0].id == "S104"


def test_efficiency_harm_needs_both_intervals_and_no_accuracy_effect():
    """S107: 4x the tokens with skills where it was retrieved, 1.6x the library's on the same
    benchmarks, no accuracy effect -> rewrite; a ratio interval reaching 1.5, a relative interval
    reaching 1, a q above q_max, or a clear accuracy effect leave it to the other rules."""
    rule, reason, ev = decide_skill(CASES["S107"]())
    assert (rule.id, rule.action) == ("S107", "rewrite") and ev["efficiency"]["measure"] == "tokens"
    assert "runs with skills used 4.0× the tokens (prompt + completion) of runs without [3.1, 5.2] over 30 tasks" in reason
    assert "1.60× the library's on the same benchmarks [1.30, 2.00]" in reason
    for change in ({"ratio_ci": [1.4, 5.2]}, {"relative_ci": [0.9, 2.0]}, {"relative_q": 0.2}):
        assert decide_skill(_skill(_row(), efficiency={"s": {"tokens": {**_COSTLY, **change}}}))[0].id == "S504"
    assert decide_skill(_skill(_row(**_HELPFUL), efficiency={"s": {"tokens": _COSTLY}}))[0].id == "S301"
    # wall time counts too, when tokens do not
    assert decide_skill(_skill(_row(), efficiency={"s": {"latency_s": {**_COSTLY, "words": "wall time"}}}))[0].id == "S107"
