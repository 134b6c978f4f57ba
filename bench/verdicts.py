"""How often the verdicts are right on simulated runs with a known truth (issue 14's scenarios).

    python bench/verdicts.py [--seeds 20] [--null 200] [--bootstrap 2000]

For each scenario of `skillaudit.simulate.SCENARIOS`, over seeds 0..N-1, through the same code
as `skillaudit prune` (attribute_models -> recommend, default rules):

- dilution (every skill equally harmful): seeds with 0 per-skill prunes, seeds whose library
  verdict is `library-wide` with a gate-retrieval/reduce-depth recommendation;
- two-harmful (2 of 20 harmful): seeds where both planted skills are flagged (prune/rewrite),
  false flags per seed (no-effect skills flagged);
- model-split (a skill hurts model-a, helps model-b): seeds where it is pruned for both models
  (must be 0), seeds where it is flagged as differing in sign;
- null-epochs (no effect, 5 epochs per task): share of data sets with metrics' p_cond <= 0.05,
  next to the exact McNemar on the pooled pairs (which ignores that epochs repeat a task).

Prints one table; every figure is a count over seeds.
"""

from __future__ import annotations

import argparse
import time

from skillaudit.attribution import attribute_models
from skillaudit.metrics import compute_metrics
from skillaudit.recommend import recommend
from skillaudit.simulate import scenario


def _prune(name: str, seed: int, n_boot: int):
    sim = scenario(name, seed=seed)
    runs = sim.runs()
    ma = attribute_models(runs, library=sim.library(), n_boot=n_boot, seed=seed)
    return sim, ma, recommend(runs, ma)


def dilution(seeds: range, n_boot: int) -> dict[str, float]:
    no_prune = wide = 0
    for seed in seeds:
        _, ma, out = _prune("dilution", seed, n_boot)
        no_prune += not out.by_action("prune")
        wide += all(r.library is not None and r.library.verdict == "library-wide" for r in ma.results) \
            and bool(out.library_actions())
    return {"seeds": len(seeds), "0 prunes": no_prune, "library-wide + gate": wide}


def two_harmful(seeds: range, n_boot: int) -> dict[str, float]:
    both = false = 0
    for seed in seeds:
        sim, _, out = _prune("two-harmful", seed, n_boot)
        flagged = {r.skill_id for r in out.skill_recommendations() if r.action in ("prune", "rewrite")}
        harm = set(sim.ids("harmful"))
        both += harm <= flagged
        false += len(flagged - harm)
    return {"seeds": len(seeds), "both flagged": both, "false flags / seed": false / len(seeds)}


def model_split(seeds: range, n_boot: int) -> dict[str, float]:
    pruned_all = sign = 0
    for seed in seeds:
        sim, _, out = _prune("model-split", seed, n_boot)
        (harm,) = sim.ids("harmful")
        models = set(sim.settings["models"])
        pruned_all += harm in out.removable(sorted(models))
        sign += any(r.skill_id == harm and r.evidence.get("sign_differs") for r in out.skill_recommendations())
    return {"seeds": len(seeds), "pruned for both": pruned_all, "flagged sign differs": sign}


def null_epochs(n_sets: int) -> dict[str, float]:
    task_level = pooled = 0
    for seed in range(n_sets):
        runs = scenario("null-epochs", seed=seed).runs()
        g = next(g for g in compute_metrics(runs, n_boot=0).groups if g.benchmark == "*")
        task_level += g.p_cond <= 0.05
        pooled += g.mcnemar_p_cond <= 0.05
    return {"data sets": n_sets, "p_cond <= 0.05": task_level / n_sets,
            "pooled McNemar <= 0.05": pooled / n_sets}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--null", type=int, default=200)
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args()
    seeds = range(args.seeds)
    for label, fn in (("dilution", lambda: dilution(seeds, args.bootstrap)),
                      ("two-harmful", lambda: two_harmful(seeds, args.bootstrap)),
                      ("model-split", lambda: model_split(seeds, args.bootstrap)),
                      ("null-epochs", lambda: null_epochs(args.null))):
        t0 = time.perf_counter()
        row = fn()
        cells = ", ".join(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}" for k, v in row.items())
        print(f"{label:12s} {cells}  ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
