"""Time `import harbor` and `import skillsbench` on synthetic inputs in a temp dir (nothing is written to the repo).

    PYTHONPATH=. python bench/bench_import_harbor.py [--trials 10000]

Makes two Harbor job folders (with-skills / without-skills) of N/2 trial folders each, every trial a
result.json plus a short Claude Code stream-json trajectory, then times the import (sides from the
path words); and a SkillsBench registry of the same number of k-of-n rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time

from skillaudit.importers.harbor import import_harbor
from skillaudit.importers.skillsbench import import_skillsbench


def make_jobs(root: str, n: int, rng: random.Random) -> list[str]:
    jobs = []
    for side in ("with-skills", "without-skills"):
        job = os.path.join(root, f"job-{side}")
        os.makedirs(job)
        with open(os.path.join(job, "result.json"), "w") as fh:
            json.dump({"n_total_trials": n // 2, "stats": {"evals": {}}}, fh)
        for i in range(n // 2):
            task = f"task-{i // 3}"
            tdir = os.path.join(job, f"{task}__{i:06d}")
            os.makedirs(os.path.join(tdir, "agent"))
            with open(os.path.join(tdir, "result.json"), "w") as fh:
                json.dump({"task_name": task, "trial_name": f"{task}__{i:06d}", "task_id": {"path": f"/t/{task}"},
                           "config": {"agent": {"name": "claude-code", "model_name": "m"}},
                           "verifier_result": {"rewards": {"reward": float(rng.random() < 0.5)}},
                           "exception_info": None}, fh)
            skills = [f"skill-{i % 7}"] if side == "with-skills" else []
            lines = [{"type": "system", "subtype": "init", "skills": skills}]
            if skills and rng.random() < 0.5:
                lines.append({"type": "assistant", "message": {"content": [
                    {"type": "tool_use", "name": "Skill", "input": {"skill": skills[0]}}]}})
            lines += [{"type": "assistant", "message": {"content": [{"type": "text", "text": "x" * 200}]}}] * 10
            with open(os.path.join(tdir, "agent", "claude-code.txt"), "w") as fh:
                fh.write("\n".join(json.dumps(x) for x in lines))
        jobs.append(job)
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10_000)
    args = ap.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as root:
        jobs = make_jobs(root, args.trials, rng)
        t0 = time.perf_counter()
        _, rep = import_harbor(jobs)
        dt = time.perf_counter() - t0
        print(f"import harbor: {args.trials:,} trial folders in {dt:.2f} s ({rep.pairs:,} pairs)")
        rows = [{"task": f"t{i // 36}", "model": f"agent {i // 2 % 18}", "condition": ("With Skills", "No Skills")[i % 2],
                 "trials": 3, "passCount": rng.randrange(4)} for i in range(args.trials)]
        reg = os.path.join(root, "registry.json")
        with open(reg, "w") as fh:
            json.dump(rows, fh)
        t0 = time.perf_counter()
        _, rep = import_skillsbench([reg])
        dt = time.perf_counter() - t0
        print(f"import skillsbench: {args.trials:,} registry rows in {dt:.2f} s ({rep.pairs:,} pairs)")


if __name__ == "__main__":
    main()
