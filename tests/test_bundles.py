"""Per task-bundle effects: agents' task-level sums, an exact sign test across agents and BH q over bundles."""

from __future__ import annotations

import json
import random

import numpy as np
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from skillaudit.analysis.bundles import bundle_effects
from skillaudit.runs import read_text_records


def _log(rng: random.Random, n_tasks: int = 12, n_agents: int = 9, trials: int = 3) -> list[dict]:
    recs = []
    for t in range(n_tasks):
        bias = rng.choice([-0.4, 0.0, 0.3])
        for a in range(n_agents):
            base = rng.random()
            for e in range(1, trials + 1):
                off = rng.random() < base
                on = rng.random() < min(1.0, max(0.0, base + bias))
                common = {"task_id": f"task-{t}", "model": f"agent-{a}", "benchmark": "sb", "epoch": e}
                recs.append({**common, "condition": "enabled", "correct": on, "use_logged": False,
                             "offered": [f"task-{t}/skills"]})
                recs.append({**common, "condition": "disabled", "correct": off})
    return recs


def _text(recs: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in recs)


def test_bundles_match_an_independent_sign_test_and_bh():
    """Rescue/harm counts are per agent's summed flips; p equals scipy's binomial test and q statsmodels' BH."""
    rng = random.Random(7)
    recs = _log(rng)
    runs = read_text_records(_text(recs))
    res = bundle_effects(runs)
    assert len(res.bundles) == 12 and res.n_agents == 9
    net: dict[tuple[str, str], int] = {}
    for r in recs:
        k = (r["task_id"], r["model"])
        net[k] = net.get(k, 0) + (1 if r["correct"] else 0) * (1 if r["condition"] == "enabled" else -1)
    ps = []
    for b in res.bundles:
        cells = [v for (t, _), v in net.items() if t == b.task]
        assert (b.rescues, b.harms) == (sum(v > 0 for v in cells), sum(v < 0 for v in cells))
        assert b.net_trials == sum(cells) and b.trials == 27
        want = binomtest(b.rescues, b.rescues + b.harms, 0.5).pvalue if b.rescues + b.harms else 1.0
        assert abs(b.p - want) < 1e-12
        assert all(c.net < 0 for c in b.hurt) and len(b.hurt) == b.harms
        ps.append(b.p)
    q = multipletests(ps, method="fdr_bh")[1]
    assert np.allclose([b.q for b in res.bundles], q)
    assert [b.effect for b in res.bundles] == sorted(b.effect for b in res.bundles)


def test_bundles_do_not_depend_on_record_or_trial_order():
    """Shuffling the records and renumbering each side's trials changes no bundle figure."""
    rng = random.Random(3)
    recs = _log(rng, n_tasks=6, n_agents=5)
    a = bundle_effects(read_text_records(_text(recs))).to_dict()
    shuffled = [dict(r) for r in recs]
    rng.shuffle(shuffled)
    for r in shuffled:
        if r["condition"] == "disabled":
            r["epoch"] = 4 - r["epoch"]
    b = bundle_effects(read_text_records(_text(shuffled))).to_dict()
    assert a == b
