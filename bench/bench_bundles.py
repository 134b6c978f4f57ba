"""Size and false discovery proportion of the per task-bundle sign test (skillaudit.analysis.bundles) by simulation.

    PYTHONPATH=. python bench/bench_bundles.py [--seeds 50]

SkillsBench-shaped data: 87 tasks x 18 agents x 3 trials per side. Under the null, offering a task's
skills changes nothing (each agent-task cell has its own pass probability, easy and hard tasks
alike); in the planted runs 10 bundles hurt (-0.3 in pass probability) and the rest do nothing.
Reports the share of null bundles with p <= 0.05 (size), the false discovery proportion of BH at
q <= 0.05 and the power on the planted harmful bundles.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from skillaudit.analysis.bundles import bundle_effects
from skillaudit.runs import read_text_records


def simulate(rng: np.random.Generator, harmful: int) -> tuple[str, set[str]]:
    lines = []
    bad = {f"t{i}" for i in range(harmful)}
    for t in range(87):
        ease = rng.beta(0.5, 0.5)  # easy and hard tasks
        for a in range(18):
            p0 = float(np.clip(ease + rng.normal(0, 0.15), 0, 1))
            p1 = max(0.0, p0 - 0.3) if f"t{t}" in bad else p0
            for e in (1, 2, 3):
                common = {"task_id": f"t{t}", "model": f"a{a}", "epoch": e}
                lines.append(json.dumps({**common, "condition": "enabled", "correct": bool(rng.random() < p1),
                                         "use_logged": False}))
                lines.append(json.dumps({**common, "condition": "disabled", "correct": bool(rng.random() < p0)}))
    return "\n".join(lines) + "\n", bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=50)
    args = ap.parse_args()
    size, fdp, power = [], [], []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        text, _ = simulate(rng, 0)
        res = bundle_effects(read_text_records(text))
        size.append(np.mean([b.p <= 0.05 for b in res.bundles]))
        text, bad = simulate(rng, 10)
        res = bundle_effects(read_text_records(text))
        found = {b.task for b in res.bundles if b.q <= 0.05 and b.harms > b.rescues}
        disc = {b.task for b in res.bundles if b.q <= 0.05}
        fdp.append(len(disc - bad) / max(len(disc), 1))
        power.append(len(found & bad) / len(bad))
    print(f"{args.seeds} seeds: null size at 0.05 = {np.mean(size):.4f}; BH FDP = {np.mean(fdp):.4f}; "
          f"power on 10 harmful bundles (-30 pp) = {np.mean(power):.3f}")


if __name__ == "__main__":
    main()
