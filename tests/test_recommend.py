"""Recommendations per skill, the power calculation and the projected effect of pruning."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from skillaudit.attribution import attribute
from skillaudit.library import Library, Skill
from skillaudit.recommend import SCHEMA, mcnemar_sample_size, project, recommend
from skillaudit.runs import read_text_records
from skillaudit.simulate import simulate


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
    assert set(doc["recommendations"][0]) == {"scope", "skill_id", "action", "models", "reason", "evidence"}


def test_near_duplicates_merge_and_rewrite():
    """A harmful skill with a helpful near-duplicate is rewritten; a weaker duplicate of a good skill is merged."""
    sim = simulate(n_tasks=900, n_skills=12, n_harmful=1, n_helpful=1, epochs=2, seed=4)
    runs = sim.runs()
    res = attribute(runs, library=sim.library(), n_boot=500)
    (harm,), (good,) = sim.ids("harmful"), sim.ids("helpful")
    plain = next(s for s in sim.ids("none") if res.get(s).n_retrieved > 0 and s != sim.truth[good].buddy)
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
