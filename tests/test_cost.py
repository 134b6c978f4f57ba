"""Tokens per skill from usage deltas: the rate agrees with statsmodels OLS, recovers a planted rate, and feeds tokens per net rescue."""

from __future__ import annotations

import random

import numpy as np
import pytest

from skillaudit.analysis.cost import cost_sentence, skill_costs


def _records(seed: int, rate: float, n: int = 60):
    rng = random.Random(seed)
    chars = {f"s{i}": rng.randint(400, 2000) for i in range(8)}
    recs = []
    for t in range(n):
        shown = rng.sample(sorted(chars), rng.randint(0, 3))
        base = rng.randint(60, 300)
        en_prompt = round(150 + rate * sum(chars[s] for s in shown) + 2 * base + rng.gauss(0, 3))
        en_ok, dis_ok = rng.random() < 0.5, rng.random() < 0.5
        common = {"task_id": f"t{t}", "model": "m", "benchmark": "b", "epoch": 1, "error": None}
        recs.append({**common, "condition": "enabled", "correct": en_ok,
                     "retrievals": [{"query": "q", "skills": [{"id": s} for s in shown], "error": None}],
                     "meta": {"usage": {"prompt_tokens": en_prompt, "completion_tokens": 50}, "latency_s": 2.0}})
        recs.append({**common, "condition": "disabled", "correct": dis_ok,
                     "meta": {"usage": {"prompt_tokens": base, "completion_tokens": 40}, "latency_s": 1.0}})
    return recs, chars


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rate_matches_statsmodels_and_the_planted_rate(seed):
    sm = pytest.importorskip("statsmodels.api")
    recs, chars = _records(seed, rate=0.27)
    rep = skill_costs(recs, chars)
    en = {r["task_id"]: r for r in recs if r["condition"] == "enabled"}
    dis = {r["task_id"]: r for r in recs if r["condition"] == "disabled"}
    X, y = [], []
    for t in en:
        shown = [h["id"] for h in en[t]["retrievals"][0]["skills"]]
        X.append([sum(chars[s] for s in shown), dis[t]["meta"]["usage"]["prompt_tokens"]])
        y.append(en[t]["meta"]["usage"]["prompt_tokens"] - dis[t]["meta"]["usage"]["prompt_tokens"])
    fit = sm.OLS(np.array(y, float), sm.add_constant(np.array(X, float))).fit()
    assert rep.tokens_per_char == pytest.approx(fit.params[1], rel=1e-9)
    assert rep.tokens_per_char == pytest.approx(0.27, abs=0.005)
    s0 = next(s for s in rep.skills if s.skill_id == "s0")
    assert s0.tokens_per_injection == pytest.approx(rep.tokens_per_char * chars["s0"])
    assert rep.per_condition["enabled"]["latency_s"] == 2.0


def test_tokens_per_net_rescue_and_the_no_gain_sentence():
    recs, chars = _records(3, rate=0.3)
    rep = skill_costs(recs, chars)
    for s in rep.skills:
        if s.b - s.c > 0:
            assert s.tokens_per_net_rescue == pytest.approx(s.injections * s.tokens_per_injection / (s.b - s.c))
            assert cost_sentence(s) is None
        elif s.injections:
            assert s.tokens_per_net_rescue is None
            assert "for no measurable gain" in cost_sentence(s)


def test_no_usage_means_no_estimate():
    recs, chars = _records(4, rate=0.3)
    for r in recs:
        r["meta"].pop("usage")
    rep = skill_costs(recs, chars)
    assert rep.tokens_per_char is None and "not estimable" in rep.method
    assert all(s.tokens_per_injection is None for s in rep.skills)
