"""The simulator: deterministic, plants what it says, and writes a loadable log and library."""

from __future__ import annotations

import numpy as np
import pytest

from skillaudit.analysis.metrics import compute_metrics
from skillaudit.errors import InputError, OutputError
from skillaudit.library import load_library
from skillaudit.runs import load_runs
from skillaudit.runs.simulate import simulate


def test_same_seed_same_log_other_seed_differs():
    """The same arguments give byte-identical logs; another seed gives another log."""
    assert simulate(n_tasks=80, seed=3).jsonl() == simulate(n_tasks=80, seed=3).jsonl()
    assert simulate(n_tasks=80, seed=3).jsonl() != simulate(n_tasks=80, seed=4).jsonl()


def test_ground_truth_roles():
    """Planted counts match; every harmful and helpful skill has a no-effect buddy retrieved with it."""
    sim = simulate(n_tasks=1000, n_skills=20, n_harmful=2, n_helpful=3, n_mixed=1, n_alias_pairs=1,
                   n_unused=1, seed=1)
    assert len(sim.ids("harmful")) == 2 and len(sim.ids("helpful")) == 3 and len(sim.ids("mixed")) == 1
    runs = sim.runs()
    x = runs.ranks.toarray() > 0
    col = {s: runs.skills.index(s) for s in runs.skills}
    for sid in sim.ids("harmful") + sim.ids("helpful"):
        buddy = sim.truth[sid].buddy
        assert sim.truth[buddy].kind == "none"
        together = (x[:, col[sid]] & x[:, col[buddy]]).sum()
        assert together > 0.4 * x[:, col[sid]].sum()  # primary retrievals bring the buddy 80% of the time
    (follower,) = [s for s, t in sim.truth.items() if t.alias_of]
    leader = sim.truth[follower].alias_of
    assert np.array_equal(x[:, col[follower]], x[:, col[leader]])  # never retrieved apart
    unused = [s for s in sim.truth if s not in runs.skills]
    assert len(unused) == 1


def test_selection_effect_and_epochs():
    """With selection > 0 the retrieving tasks were already easier (positive selection gap); epochs multiply pairs."""
    sim = simulate(n_tasks=500, selection=2.0, epochs=3, models=("m1", "m2"), benchmarks=("b1", "b2"),
                   seed=2)
    runs = sim.runs()
    assert runs.n_pairs == 500 * 3 * 2
    assert set(runs.epoch.tolist()) == {1, 2, 3} and len(runs.models) == 2 and len(runs.benchmarks) == 2
    pooled = [g for g in compute_metrics(runs, n_boot=0).groups if g.benchmark == "*"]
    assert all(g.selection_gap > 0.1 for g in pooled)


def test_noise_flips_without_effects():
    """With no planted effects flips still happen, in both directions about equally (sampling noise)."""
    sim = simulate(n_tasks=1500, n_harmful=0, n_helpful=0, coupling=0.3, seed=5)
    f = sim.runs().flip
    b, c = int((f > 0).sum()), int((f < 0).sum())
    assert b > 100 and c > 100 and abs(b - c) < 0.25 * (b + c)


def test_write_makes_loadable_log_and_library(tmp_path):
    """write() produces runs.jsonl and a valid SKILL.md library, and refuses a non-empty folder."""
    sim = simulate(n_tasks=50, seed=0)
    runs_path, lib_dir = sim.write(tmp_path / "sim")
    lib = load_library(lib_dir)
    assert lib.warnings == () and set(lib.ids) == set(sim.truth)
    assert load_runs([str(runs_path)]).n_pairs == 50
    assert (tmp_path / "sim" / "truth.json").is_file()
    with pytest.raises(OutputError, match="not an empty folder"):
        sim.write(tmp_path / "sim")


def test_too_few_skills_for_roles():
    """Asking for more planted roles than skills is an input error."""
    with pytest.raises(InputError, match="too few"):
        simulate(n_skills=3, n_harmful=2, n_helpful=2)
