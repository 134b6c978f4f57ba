"""Benchmark: read + pair + metrics on a generated paired log; prints pairs/second and peak memory.

    python bench/bench_metrics.py [--pairs 200000] [--skills 2000] [--bootstrap 20000]

Figures, not assertions: run it on the machine you care about and compare.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson


def generate(path: Path, n_pairs: int, n_skills: int, seed: int = 0) -> None:
    """Write a paired log: 2 models x 2 benchmarks, 40% of enabled runs retrieve 1-3 skills."""
    rng = np.random.default_rng(seed)
    models, benches = ["model-a", "model-b"], ["mbpp_plus", "gsm8k"]
    with path.open("wb") as fh:
        for i in range(n_pairs):
            m, b = models[i % 2], benches[(i // 2) % 2]
            tid = f"task/{i // 4}"
            y_neg = bool(rng.random() < 0.5)
            y_pos = y_neg if rng.random() < 0.8 else not y_neg
            on = {"task_id": tid, "condition": "enabled", "correct": y_pos, "model": m, "benchmark": b}
            if rng.random() < 0.4:
                k = int(rng.integers(1, 4))
                ids = rng.choice(n_skills, size=k, replace=False)
                on["retrievals"] = [{"query": "q", "skills": [{"id": f"skill-{j}", "score": float(10 - r)}
                                                           for r, j in enumerate(ids)], "error": None}]
            off = {"task_id": tid, "condition": "disabled", "correct": y_neg, "model": m, "benchmark": b}
            fh.write(orjson.dumps(on) + b"\n" + orjson.dumps(off) + b"\n")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--skills", type=int, default=2000)
    ap.add_argument("--bootstrap", type=int, default=20_000)
    args = ap.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from skillaudit.analysis.metrics import compute_metrics
    from skillaudit.runs import load_runs

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.jsonl"
        t0 = time.perf_counter()
        generate(path, args.pairs, args.skills)
        gen_s = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6
        rss0 = peak_rss_mb()
        t0 = time.perf_counter()
        runs = load_runs([str(path)])
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = compute_metrics(runs, n_boot=args.bootstrap)
        metrics_s = time.perf_counter() - t0
        total = load_s + metrics_s
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; numpy {np.__version__}")
    print(f"log: {args.pairs:,} pairs ({2 * args.pairs:,} records, {size_mb:.0f} MB), "
          f"{args.skills:,} skills; generated in {gen_s:.1f} s")
    print(f"{'step':<22}{'seconds':>10}{'pairs/s':>14}")
    print(f"{'read + pair':<22}{load_s:>10.2f}{args.pairs / load_s:>14,.0f}")
    print(f"{'metrics (' + str(len(res.groups)) + ' groups)':<22}{metrics_s:>10.2f}{args.pairs / metrics_s:>14,.0f}")
    print(f"{'total':<22}{total:>10.2f}{args.pairs / total:>14,.0f}")
    from skillaudit.stats import paired_bootstrap_ci

    rng = np.random.default_rng(0)
    vals = np.column_stack([np.ones(1000), rng.integers(-1, 2, 1000)]).astype(float)
    t0 = time.perf_counter()
    paired_bootstrap_ci(np.arange(1000), vals, lambda t: (t[:, 1] / t[:, 0])[:, None], n_boot=20_000)
    print(f"paired bootstrap, 20,000 resamples x 1,000 tasks: {time.perf_counter() - t0:.3f} s")
    print(f"bootstrap: {args.bootstrap:,} resamples per group; peak RSS {peak_rss_mb():.0f} MB "
          f"(before reading: {rss0:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
