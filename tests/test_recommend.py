"""Recommendations (library level and per skill, per model), the power calculation, the projected
effect of pruning, and the verdict's simulated scenarios."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from skillaudit.analysis.attribution import attribute, attribute_models
from skillaudit.analysis.metrics import compute_metrics
from skillaudit.decide.recommend import SCHEMA, mcnemar_sample_size, project, recommend
from skillaudit.library import Library, Skill
from skillaudit.runs import read_text_records
from skillaudit.runs.simulate import scenario, simulate


def _pair(tid, y_pos, y_neg, skills=None):
    en = {"task_id": tid, "condition": "enabled", "correct": y_pos}
    if skills is not None:
        en["retrieved"] = skills
    return [en, {"task_id": tid, "condition": "disabled", "correct": y_neg}]


def _runs(pairs):
    return read_text_records("".join(orjson.dumps(r).decode() + "\n" for p in pairs for r in p))


HAND = [
    _pair("t1", True, False, ["A", "B"]),  # +1
    _pair("t2", False, True, ["A"]),       # -1, only A
    _pair("t3", False, True, ["B", "C"]),  # -1
    _pair("t4", True, False, ["C"]),       # +1
    _pair("t5", True, False),              # +1, skipped
    _pair("t6", True, True, ["A"]),        # 0, only A
    _pair("t7", False, False, ["X"]),      # 0
]


def test_projection_hand_computed():
    """Removing A: pairs left with no skill fall back to their disabled outcome, the rest keep theirs."""
    p = project(_runs(HAND), ["A"])
    # before: RAE = (1 - 1 - 1 + 1 + 0 + 0) / 6 = 0; OAE = (0 + 1) / 7
    assert p.rae_before == pytest.approx(0.0)
    assert p.oae_before == pytest.approx(1 / 7)
    # after: t2 and t6 lose every skill (flip -> 0); t1, t3, t4, t7 still retrieve: (1 - 1 + 1 + 0) / 4
    assert p.rae_after == pytest.approx(0.25)
    assert p.oae_after == pytest.approx(2 / 7)
    assert (p.n_cond_before, p.n_cond_after, p.n_fallback) == (6, 4, 2)
    assert p.to_dict()["is_projection"] is True


def test_projection_with_nothing_removed_is_unchanged():
    """An empty prune set projects exactly the observed RAE and OAE."""
    p = project(_runs(HAND), [])
    assert (p.rae_after, p.oae_after) == (p.rae_before, p.oae_before)


def test_mcnemar_sample_size_formula():
    """The power calculation matches Connor's formula worked by hand (delta 0.10, psi 0.20 -> 155 pairs)."""
    za, zb = 1.959964, 0.841621
    by_hand = math.ceil((za * math.sqrt(0.2) + zb * math.sqrt(0.2 - 0.01)) ** 2 / 0.01)
    assert mcnemar_sample_size(0.10, 0.20) == by_hand == 155
    assert mcnemar_sample_size(-0.3, 0.4) < mcnemar_sample_size(0.1, 0.4)


def _co_retrieved(seed=0, n=700):
    """H harms and is usually retrieved with innocent I; I is also retrieved alone; N is noise."""
    rng = np.random.default_rng(seed)
    pairs = []
    for t in range(n):
        u = rng.random()
        skills = (["H", "I"] if rng.random() < 0.8 else ["H"]) if u < 0.35 else (["I"] if u < 0.7 else ["N"])
        harmful = "H" in skills and rng.random() < 0.35
        y_neg = bool(rng.random() < 0.6) or harmful
        y_pos = False if harmful else (y_neg if rng.random() < 0.8 else bool(rng.random() < 0.6))
        pairs.append(_pair(f"t{t}", y_pos, y_neg, skills))
    return _runs(pairs)


def test_innocent_neighbour_is_not_pruned_on_exposure_counts():
    """The regression clears I, so I is not pruned although its exposure counts look harmful; H is pruned."""
    runs = _co_retrieved()
    res = attribute(runs, n_boot=1000)
    out = recommend(runs, res)
    assert res.get("I").q_value < 0.1 and res.get("I").net < 0
    assert out.get("H").action == "prune"
    assert out.get("I").action in ("keep", "needs-data")
    assert "regression does not confirm" in out.get("I").reason
    assert "H" in out.get("I").reason  # names the co-retrieved culprit


def test_without_regression_nothing_is_pruned_and_the_reason_says_why():
    """With the regression off there is no skill-level evidence, so exposure counts alone prune nothing."""
    runs = _co_retrieved()
    out = recommend(runs, attribute(runs, regression=False))
    assert out.by_action("prune") == []
    assert "need the regression's resamples" in out.get("H").reason


def test_unused_needs_data_and_evidence():
    """Never-retrieved skills are unused; thinly retrieved ones are needs-data with a task count."""
    rng = np.random.default_rng(3)
    pairs = [_pair(f"t{t}", bool(rng.random() < .5), bool(rng.random() < .5), ["S"]) for t in range(12)]
    runs = _runs(pairs)
    lib = Library(skills=(Skill(id="S", name="S", description="d", body="b"),
                          Skill(id="U", name="U", description="d", body="b")))
    out = recommend(runs, attribute(runs, library=lib, n_boot=200))
    assert out.get("U").action == "unused"
    s = out.get("S")
    assert s.action == "needs-data"
    assert s.evidence["more_tasks_needed"] > 0
    assert f"about {s.evidence['more_tasks_needed']} more retrieving tasks" in s.reason
    doc = out.to_dict()
    assert doc["schema"] == SCHEMA == "skillaudit.prune/v1"
    assert {"rae_before", "rae_after", "oae_before", "oae_after"} <= set(doc["projected"])
    assert set(doc["recommendations"][0]) == {"scope", "skill_id", "action", "rule", "models", "reason", "evidence"}


def test_near_duplicates_merge_and_rewrite():
    """A harmful skill with a helpful near-duplicate is rewritten; a weaker duplicate of a good skill is merged."""
    sim = simulate(n_tasks=900, n_skills=12, n_harmful=1, n_helpful=1, epochs=2, seed=4)
    runs = sim.runs()
    res = attribute(runs, library=sim.library(), n_boot=500)
    (harm,), (good,) = sim.ids("harmful"), sim.ids("helpful")
    # not a planted skill's co-retrieved buddy (the harmful one's is worse than the others: S105)
    buddies = {sim.truth[harm].buddy, sim.truth[good].buddy}
    plain = next(s for s in sim.ids("none") if res.get(s).n_retrieved > 0 and s not in buddies)
    base = recommend(runs, res)
    assert base.get(harm).action == "prune" and base.get(good).action == "keep"
    out = recommend(runs, res, near_duplicates=[(harm, good, 0.93), (plain, good, 0.9)])
    assert out.get(harm).action == "rewrite" and good in out.get(harm).reason
    assert out.get(plain).action == "merge" and out.get(plain).evidence["near_duplicate"]["skill_id"] == good
    assert out.get(good).action == "keep"
    out = recommend(runs, res, harmful_clusters=[[harm, plain]])
    assert plain in out.get(harm).reason and out.get(harm).evidence["harmful_cluster"] == [harm, plain]


def _score(seeds, **kw):
    found = harm = help_flag = helpful = none_flag = none = 0
    for seed in seeds:
        sim = simulate(seed=seed, **kw)
        runs = sim.runs()
        out = recommend(runs, attribute(runs, library=sim.library(), n_boot=1000, seed=seed))
        for r in out.recommendations:
            kind = sim.truth[r.skill_id].kind
            flagged = r.action in ("prune", "rewrite")
            harm += kind == "harmful"
            found += kind == "harmful" and flagged
            helpful += kind == "helpful"
            help_flag += kind == "helpful" and flagged
            none += kind == "none"
            none_flag += kind == "none" and flagged
    return found / harm, help_flag / helpful, none_flag / none


def test_recommendation_quality_on_the_simulator():
    """Over 8 seeds planted harmful skills are mostly flagged, helpful ones never, no-effect ones rarely."""
    recall, help_rate, false_rate = _score(range(8), n_tasks=800, n_skills=16, epochs=2)
    assert recall >= 0.75
    assert help_rate == 0.0
    assert false_rate <= 0.05


# ---------------------------------------------------------------- the verdict's scenarios (issue 14)
def _scenario_prune(name, seed, n_boot=1000):
    sim = scenario(name, seed=seed)
    runs = sim.runs()
    ma = attribute_models(runs, library=sim.library(), n_boot=n_boot, seed=seed)
    return sim, ma, recommend(runs, ma)


def test_dilution_prunes_no_entry_and_says_the_harm_is_library_wide():
    """Every skill equally harmful: 0 per-skill prunes and a library-wide verdict with a library recommendation in at least 19 of 20 seeds."""
    good = 0
    for seed in range(20):
        _, ma, out = _scenario_prune("dilution", seed)
        lib = ma.results[0].library
        good += (not out.by_action("prune") and lib.verdict == "library-wide"
                 and [r.action for r in out.library_actions()] in (["gate-retrieval"], ["reduce-depth"]))
    assert good >= 19


def test_two_harmful_skills_are_found_with_few_false_flags():
    """2 of 20 skills harmful: both flagged in at least 15 of 20 seeds, at most 1 false flag per seed on average."""
    both = false = 0
    for seed in range(20):
        sim, _, out = _scenario_prune("two-harmful", seed)
        flagged = {r.skill_id for r in out.skill_recommendations() if r.action in ("prune", "rewrite")}
        both += set(sim.ids("harmful")) <= flagged
        false += len(flagged - set(sim.ids("harmful")))
    assert both >= 15
    assert false / 20 <= 1.0


def test_a_skill_that_helps_one_model_and_hurts_another_is_never_pruned_for_both():
    """The model-split skill is never pruned for both models, and is usually flagged as differing in sign."""
    sign = 0
    for seed in range(20):
        sim, _, out = _scenario_prune("model-split", seed)
        (harm,) = sim.ids("harmful")
        assert harm not in out.removable(sim.settings["models"])
        recs = [r for r in out.skill_recommendations() if r.skill_id == harm]
        assert not any(r.action == "prune" and set(r.models) == set(sim.settings["models"]) for r in recs)
        sign += any(r.evidence.get("sign_differs") and r.action == "rewrite" for r in recs)
    assert sign >= 10


def test_no_effect_library_with_five_epochs_keeps_p_cond_at_its_level():
    """200 no-effect data sets with 5 epochs per task: p_cond <= 0.05 in at most 7%, where pooled McNemar exceeds it."""
    task_level = pooled = 0
    for seed in range(200):
        g = next(g for g in compute_metrics(scenario("null-epochs", seed=seed).runs(), n_boot=0).groups
                 if g.benchmark == "*")
        task_level += g.p_cond <= 0.05
        pooled += g.mcnemar_p_cond <= 0.05
    assert task_level / 200 <= 0.07
    assert pooled / 200 > 0.07


def test_library_recommendation_entries_and_per_model_scope():
    """Library-level entries carry scope 'library', model and benchmark; skill entries carry scope 'skill' and their models."""
    _, _, out = _scenario_prune("dilution", 0, n_boot=500)
    doc = out.to_dict()
    lib = [r for r in doc["recommendations"] if r["scope"] == "library"]
    assert len(lib) == 1 and lib[0]["skill_id"] is None and lib[0]["model"] == "sim-model"
    assert lib[0]["action"] in ("gate-retrieval", "reduce-depth")
    assert doc["library"][0]["verdict"] == "library-wide"
    assert {"model", "benchmark", "verdict", "mean_effect", "mean_effect_ci", "heterogeneity_p"} <= set(doc["library"][0])
    assert all(r["models"] == ["sim-model"] for r in doc["recommendations"] if r["scope"] == "skill")


def test_merge_direction_only_with_evidence():
    """Near-duplicates get 'merge into X, which does better' only when the difference's interval excludes 0."""
    sim = simulate(n_tasks=900, n_skills=12, n_harmful=1, n_helpful=1, epochs=2, seed=4)
    runs = sim.runs()
    res = attribute(runs, library=sim.library(), n_boot=1000)
    (harm,), (good,) = sim.ids("harmful"), sim.ids("helpful")
    buddies = {sim.truth[harm].buddy, sim.truth[good].buddy}
    plain = [s for s in sim.ids("none") if res.get(s).n_retrieved >= 30 and s not in buddies]
    a, b = plain[0], plain[1]
    diff = res.difference(a, b)
    assert diff is not None and diff[1][0] < 0 < diff[1][1]  # two no-effect skills: no evidence
    out = recommend(runs, res, near_duplicates=[(a, b, 0.9)])
    for sid in (a, b):
        r = out.get(sid)
        assert r.action == "merge" and "no evidence which is better" in r.reason
        assert r.evidence["merge_difference"]["ci"][0] < 0 < r.evidence["merge_difference"]["ci"][1]
    d = res.difference(good, a)
    assert d is not None and d[1][0] > 0  # the helpful skill does reliably better
    out = recommend(runs, res, near_duplicates=[(a, good, 0.9)])
    assert out.get(a).action == "merge" and f"{good}, which does better" in out.get(a).reason
    assert out.get(good).action == "keep"


def test_needs_data_counts_tasks_with_the_design_effect():
    """With epochs the power calculation is in tasks: pairs needed x design effect / pairs per task."""
    sim = simulate(n_tasks=120, n_skills=20, n_harmful=0, n_helpful=0, epochs=3, task_noise=2.0, seed=3)
    runs = sim.runs()
    out = recommend(runs, attribute(runs, library=sim.library(), n_boot=300))
    r = next(r for r in out.skill_recommendations() if r.action == "needs-data")
    ev = r.evidence
    assert ev["pairs_per_task"] == pytest.approx(3.0)
    assert ev["design_effect"] > 1.2
    assert f"about {ev['more_tasks_needed']} more retrieving task" in r.reason
    assert "tasks (" in r.reason and "pairs)" in r.reason  # "N tasks (M pairs)"


def test_one_action_on_two_models_keeps_each_models_own_reason():
    """A merge recommended on two models for different evidence names each model's reason, and the report row of each model shows its own."""
    from skillaudit.decide.recommend import Recommendation, _combine
    from skillaudit.report.view import skill_rows

    per_model = {
        "big": {"s": Recommendation(skill_id="s", action="merge", reason="from 36 re-runs: merge", evidence={"model": "big"})},
        "small": {"s": Recommendation(skill_id="s", action="merge", reason="no re-runs: merge", evidence={"model": "small"})},
    }
    (rec,) = _combine(per_model, {"big": {}, "small": {}})
    assert rec.models == ("big", "small")
    assert rec.reason == "on big: from 36 re-runs: merge; on small: no re-runs: merge"
    doc = {"recommendations": {"recommendations": [rec.to_dict()]},
           "skills": {"skills": [{"skill_id": "s", "model": "big"}, {"skill_id": "s", "model": "small"}]}}
    assert [r["reason"] for r in skill_rows(doc)] == ["from 36 re-runs: merge", "no re-runs: merge"]
    same = {m: {"s": Recommendation(skill_id="s", action="merge", reason="same", evidence={})} for m in ("a", "b")}
    assert _combine(same, {"a": {}, "b": {}})[0].reason == "same"


def test_skills_on_easy_tasks_are_not_pruned_for_where_they_are_retrieved():
    """Skills on easy vs hard tasks that all perturb alike, one truly harmful (issue 27): over 3
    seeds the harmful one is pruned or rewritten every time and no innocent one is."""
    import orjson

    from skillaudit.analysis.attribution import attribute_models
    from skillaudit.runs import read_text_records
    from skillaudit.runs.simulate import easy_hard

    for seed in range(3):
        recs, truth = easy_hard(seed, n_tasks=600)
        runs = read_text_records("".join(orjson.dumps(r).decode() + "\n" for r in recs), name="<s>")
        out = recommend(runs, attribute_models(runs, n_boot=300, seed=seed))
        flagged = {r.skill_id for r in out.skill_recommendations() if r.action in ("prune", "rewrite")}
        harm = {s for s, k in truth.items() if k == "harmful"}
        assert flagged == harm


def test_mixed_rule_uses_an_exact_binomial_tail():
    """11 flips of 20 at base 1/6 is p ~ 1e-4 exactly (scipy's binom.sf), not the z-test's 2e-6."""
    from scipy.stats import binom

    from skillaudit.decide.recommend import binom_upper_tail

    assert abs(binom_upper_tail(11, 20, 1 / 6) - binom.sf(10, 20, 1 / 6)) < 1e-12
    assert 5e-5 < binom_upper_tail(11, 20, 1 / 6) < 2e-4
    assert binom_upper_tail(0, 5, 0.3) == 1.0
