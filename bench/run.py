"""Benchmark suite: wall time and peak memory of skillaudit commands vs a pandas reference.

    python bench/run.py [--sizes 10000,100000,1000000] [--pandas-at 200000] [--timeout 900]
                        [--rank-bootstrap N] [--audit-bootstrap 0] [--skip audit] [--jobs 1] [--repeat 3]
                        [--patterns zipf,uniform]

For each size it generates (once, cached in bench/out/data/<pairs>/) a paired log in 4 files and a
2,000-skill SKILL.md library (bench/generate.py), then runs each command in its own subprocess
and records wall time, CPU time and peak memory (the larger of wait4's peak RSS and the sampled
PSS of the whole process tree, workers included). At --pandas-at pairs it also runs
bench/pandas_reference.py (the same per-skill counts as `rank`, written with read_json / merge /
explode / groupby), checks the counts are equal, and prints the time and memory ratios, for
each retrieval pattern of --patterns (zipf: Zipf-like skill popularity, 1-2 calls of 1-3 skills;
uniform: every skill retrieved about equally often, 1-3 per retrieving pair; bench/generate.py).
`rank` is timed as a user runs it: its default options (regression intervals on) unless
--rank-bootstrap is given; at --pandas-at it is also timed with `--mc-stop off` (every permutation)
and `--bootstrap 0` (the counts path).
Figures, not assertions; results are also appended to bench/out/results.jsonl.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
PY = sys.executable
CLI = [PY, "-m", "skillaudit.cli"] if not (Path(PY).parent / "skillaudit").exists() else [str(Path(PY).parent / "skillaudit")]


def dataset(n: int, skills: int, pattern: str = "zipf") -> tuple[list[str], str]:
    d = OUT / "data" / (f"{n}" if pattern == "zipf" else f"{n}-{pattern}")
    files = sorted(str(p) for p in d.glob("runs-*.jsonl"))
    if not files or not (d / "skills").is_dir():
        print(f"generating {n:,} pairs ({pattern}) ...", file=sys.stderr, flush=True)
        subprocess.run([PY, str(HERE / "generate.py"), str(d), "--pairs", str(n), "--skills", str(skills),
                        "--pattern", pattern], check=True, stdout=sys.stderr)
        files = sorted(str(p) for p in d.glob("runs-*.jsonl"))
    return files, str(d / "skills")


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return out


def tree_pss_mb(pid: int) -> float:
    """Proportional set size of a process and all its descendants (shared pages counted once)."""
    total = 0
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total / 1024


def measure(cmd: list[str], timeout: float, stdout: str | None = None) -> dict:
    """Run `cmd`; wall seconds, CPU seconds, peak memory (MB) and exit status.

    Peak memory is the larger of the child's peak RSS (wait4) and the peak, sampled every 100 ms,
    of the summed PSS of the child and its worker processes: wait4 reports the largest single
    process of a tree, which would hide the workers of a parallel parse.
    """
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
    # the tree's PSS is sampled in a thread; the blocking wait4 here sees the exit at once (a
    # polling loop would add up to its sleep to every wall time)
    done = threading.Event()
    tree_peak = [0.0]

    def sample() -> None:
        while not done.wait(0.1):
            tree_peak[0] = max(tree_peak[0], tree_pss_mb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    _, status, rusage = os.wait4(proc.pid, 0)
    timer.cancel()
    done.set()
    sampler.join()
    if time.perf_counter() - t0 >= timeout:
        status = -9
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")[-400:] if proc.stderr else ""
    proc.returncode = 0  # reaped by wait4
    if stdout:
        out.close()
    code = status if status == -9 else os.waitstatus_to_exitcode(status)
    cpu = rusage.ru_utime + rusage.ru_stime  # includes the child's reaped workers (--jobs)
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": max(rusage.ru_maxrss / 1024, tree_peak[0]), "exit": code,
            "stderr": err if code else ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--skills", type=int, default=2000)
    ap.add_argument("--pandas-at", type=int, default=200_000, help="size of the pandas comparison (0 = none)")
    ap.add_argument("--reference", choices=("pandas", "verdict"), default="pandas",
                    help="pandas: per-skill counts (bench/pandas_reference.py); verdict: counts, exact McNemar, "
                         "BH and a sparse ridge with pandas/scipy/statsmodels/scikit-learn (bench/verdict_reference.py)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each step N times and report the run with the median wall time "
                         "(and the largest peak memory); use 3+ on a machine that is not quiet")
    ap.add_argument("--rank-bootstrap", type=int, default=None,
                    help="rank --bootstrap (default: the command's own default, regression intervals on; "
                         "0 = off, see docs/scaling.md)")
    ap.add_argument("--patterns", default="zipf,uniform",
                    help="retrieval patterns of the pandas comparison (the other steps use the first)")
    ap.add_argument("--audit-bootstrap", type=int, default=None, help="audit --bootstrap (default: the command's)")
    ap.add_argument("--skip", default="", help="comma list of steps to skip: metrics,rank,audit,jobs")
    ap.add_argument("--jobs", type=int, default=1,
                    help="also time `metrics --jobs N` next to the default (one worker per core); 0 = no")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    patterns = [x for x in args.patterns.split(",") if x]
    ref_script = "pandas_reference.py" if args.reference == "pandas" else "verdict_reference.py"
    # what the ratio is against: the pandas counts script, or the verdict script (pandas + scipy +
    # statsmodels + scikit-learn: counts, exact McNemar, BH, sparse ridge), which issue 30 targets
    ref_name = "pandas reference" if args.reference == "pandas" else "verdict script"
    rank_label = "rank" if args.rank_bootstrap is None else f"rank --bootstrap {args.rank_bootstrap}"
    boot_args = [] if args.rank_bootstrap is None else ["--bootstrap", str(args.rank_bootstrap)]
    comparisons: list[tuple[str, dict, dict, list[float], bool]] = []
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.pandas_at and args.pandas_at not in sizes:
        sizes = sorted([*sizes, args.pandas_at])
    OUT.mkdir(exist_ok=True)
    rows: list[dict] = []

    def record(n: int, step: str, res: dict) -> dict:
        res = {"pairs": n, "step": step, **res}
        rows.append(res)
        flag = "" if res["exit"] == 0 else f"  (exit {res['exit']}{', timed out' if res['exit'] == -9 else ''})"
        print(f"{n:>9,}  {step:<26}{res['wall_s']:>9.2f} s{res['cpu_s']:>9.2f} s{res['peak_mb']:>9.0f} MB"
              f"{1e6 * res['wall_s'] / n:>9.1f} us/pair{flag}", flush=True)
        if res["exit"] not in (0, -9) and res["stderr"]:
            print("    " + res["stderr"].strip().replace("\n", "\n    "), flush=True)
        with (OUT / "results.jsonl").open("a") as fh:
            fh.write(json.dumps({**res, "cores": os.cpu_count(), "time": time.time()}) + "\n")
        return res

    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}"
          + (f"; each step run {args.repeat} times, the median-wall run shown" if args.repeat > 1 else ""))
    print(f"{'pairs':>9}  {'step':<26}{'wall':>11}{'cpu':>11}{'peak':>12}{'wall/pair':>17}")
    for n in sizes:
        files, lib = dataset(n, args.skills, patterns[0])
        tmp = OUT / "tmp"
        tmp.mkdir(exist_ok=True)
        if "metrics" not in skip:
            record(n, "metrics", repeated(args.repeat, [*CLI, "metrics", *files, "--json"], args.timeout))
            if args.jobs > 0 and "jobs" not in skip:
                record(n, f"metrics --jobs {args.jobs}",
                       repeated(args.repeat, [*CLI, "metrics", *files, "--json", "--jobs", str(args.jobs)], args.timeout))
        rank_cmd = [*CLI, "rank", *files, "--skills", lib, "--json", *boot_args]
        pandas_cmd = [PY, str(HERE / ref_script), *files, "--json"]
        if n == args.pandas_at and "rank" not in skip:
            for pattern in patterns:
                p_files, p_lib = (files, lib) if pattern == patterns[0] else dataset(n, args.skills, pattern)
                p_rank = [*CLI, "rank", *p_files, "--skills", p_lib, "--json", *boot_args]
                p_pandas = [PY, str(HERE / ref_script), *p_files, "--json"]
                # rank and pandas alternate, so a machine that slows down for a while slows both
                res, pd_res, ratios = interleaved(args.repeat, p_rank, p_pandas, args.timeout,
                                                  str(tmp / "rank.json"), str(tmp / "pandas.json"))
                tag = f" [{pattern}]" if len(patterns) > 1 else ""
                record(n, f"{rank_label}{tag}", res)
                record(n, f"{ref_name}{tag}", pd_res)
                if res["exit"] == 0 and pd_res["exit"] == 0:
                    # rank judges each model on its own pairs: its rows are (model, skill); pandas pools
                    ours: dict[str, list[int]] = {}
                    for s in json.loads((tmp / "rank.json").read_text())["skills"]:
                        if s["n_retrieved"]:
                            acc = ours.setdefault(s["skill_id"], [0, 0, 0])
                            for i, k in enumerate(("n_retrieved", "b", "c")):
                                acc[i] += s[k]
                    theirs = json.loads((tmp / "pandas.json").read_text())
                    spread = f"; per round {min(ratios):.1f}-{max(ratios):.1f}x" if len(ratios) > 1 else ""
                    print(f"    {pattern}: per-skill counts equal to the {ref_name}'s: {ours == theirs} ({len(ours)} "
                          f"skills); `{rank_label}` is {pd_res['wall_s'] / res['wall_s']:.1f}x faster than the "
                          f"{ref_name} (median walls{spread}), peak memory {res['peak_mb'] / pd_res['peak_mb']:.2f} "
                          f"of the {ref_name}'s", flush=True)
                    comparisons.append((pattern, res, pd_res, ratios, ours == theirs))
            # what sequential stopping saves, and the counts path alone (issue 55), on the first pattern
            for extra in (["--mc-stop", "off"], ["--bootstrap", "0"]):
                if extra[0].lstrip("-") == "bootstrap" and args.rank_bootstrap is not None:
                    continue
                record(n, f"rank {' '.join(extra)}", repeated(args.repeat, [*rank_cmd, *extra], args.timeout))
        elif "rank" not in skip:
            record(n, rank_label, repeated(args.repeat,
                rank_cmd, args.timeout, stdout=str(tmp / "rank.json")))
        elif n == args.pandas_at:  # rank skipped: pandas' figures alone
            record(n, ref_name, repeated(args.repeat, pandas_cmd, args.timeout,
                                                   stdout=str(tmp / "pandas.json")))
        if "audit" not in skip:
            cmd = [*CLI, "audit", *files, "--skills", lib, "--out", str(tmp / f"audit-{n}"),
                   "--embedder", "tfidf", "--quiet"]
            if args.audit_bootstrap is not None:
                cmd += ["--bootstrap", str(args.audit_bootstrap)]
            record(n, "audit --embedder tfidf", repeated(args.repeat, cmd, args.timeout))
    marginal(rows)
    if comparisons:
        print(f"`{rank_label}` vs the {ref_name} ({ref_script}) at {args.pandas_at:,} pairs "
              f"(median walls; load average now {os.getloadavg()[0]:.1f}):")
        print(f"  {'pattern':<10}{'rank':>10}{args.reference:>10}{'ratio':>8}  per round      memory  counts equal")
        for pattern, res, pd_res, ratios, equal in comparisons:
            spread = f"{min(ratios):.1f}-{max(ratios):.1f}x" if ratios else "-"
            print(f"  {pattern:<10}{res['wall_s']:>8.2f} s{pd_res['wall_s']:>8.2f} s"
                  f"{pd_res['wall_s'] / res['wall_s']:>7.1f}x  {spread:<14} {res['peak_mb'] / pd_res['peak_mb']:>5.2f}x  "
                  f"{equal}")
    return 0


def repeated(n: int, cmd: list[str], timeout: float, stdout: str | None = None) -> dict:
    """`measure` n times: the median-wall run, with the largest peak memory of all runs."""
    return median_run([measure(cmd, timeout, stdout) for _ in range(max(n, 1))])


def median_run(runs: list[dict]) -> dict:
    """The run with the median wall time (of those that succeeded), with the largest peak memory of all."""
    ok = sorted((r for r in runs if r["exit"] == 0), key=lambda r: r["wall_s"]) or runs
    return {**ok[len(ok) // 2], "peak_mb": max(r["peak_mb"] for r in runs), "repeats": len(runs)}


def interleaved(n: int, cmd_a: list[str], cmd_b: list[str], timeout: float, out_a: str,
                out_b: str) -> tuple[dict, dict, list[float]]:
    """`measure` a then b, n rounds: each one's median-wall run, and b/a wall ratio of each round."""
    pairs = [(measure(cmd_a, timeout, out_a), measure(cmd_b, timeout, out_b)) for _ in range(max(n, 1))]
    ratios = [b["wall_s"] / a["wall_s"] for a, b in pairs if a["exit"] == 0 and b["exit"] == 0]
    return median_run([a for a, _ in pairs]), median_run([b for _, b in pairs]), ratios


def marginal(rows: list[dict]) -> None:
    """Cost of each extra pair between consecutive sizes: flat means the command grows linearly.

    Wall time per pair falls with size because start-up (interpreter, imports, the 2,000-skill
    library) is paid once; the marginal figure removes it.
    """
    steps: dict[str, list[dict]] = {}
    for r in rows:
        if r["exit"] == 0 and not r["step"].startswith(("pandas reference", "verdict script")):
            steps.setdefault(r["step"], []).append(r)
    lines = []
    for step, rs in steps.items():
        rs = sorted(rs, key=lambda r: r["pairs"])
        parts = [f"{a['pairs'] // 1000}k->{b['pairs'] // 1000}k "
                 f"{1e6 * (b['wall_s'] - a['wall_s']) / (b['pairs'] - a['pairs']):.1f}"
                 for a, b in itertools.pairwise(rs)]
        if parts:
            lines.append(f"  {step:<26}" + ", ".join(parts) + " us/pair")
    if lines:
        print("marginal wall time per extra pair:")
        print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
