"""How many times `rank`, `prune` and `audit` open each run log (strace), on the sample runs.

    python bench/opens.py [--commands rank,prune,audit] [RUNS...]

Each command runs under `strace -f -e trace=openat,open` (threads and worker processes
included); the script prints, per command, the successful opens of each input file. One pass
over the inputs reads each log once: every count is 1. Needs strace (Linux); figures, not
assertions (tests/test_inputs.py asserts the same on the library's own open point).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_OPEN = re.compile(r'open(?:at)?\((?:[A-Z_]+, )?"([^"]+)", ([^)]*)\) = (-?\d+)')


def opens(cmd: list[str], inputs: list[str]) -> dict[str, int]:
    """Successful opens of each of `inputs` while `cmd` runs (strace -f)."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace"
        proc = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", str(trace), *cmd],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:4])} ... failed: {proc.stderr.decode(errors='replace')[-400:]}")
        wanted = {os.path.realpath(p): p for p in inputs}
        counts = dict.fromkeys(inputs, 0)
        for line in trace.read_text(errors="replace").splitlines():
            m = _OPEN.search(line)
            if m and int(m.group(3)) >= 0 and "O_DIRECTORY" not in m.group(2):
                real = os.path.realpath(os.path.join(tmp, m.group(1)))
                if real in wanted:
                    counts[wanted[real]] += 1
        return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", help="run logs (default: sample_runs/*.jsonl)")
    ap.add_argument("--skills", default=str(ROOT / "skills"))
    ap.add_argument("--commands", default="rank,prune,audit")
    args = ap.parse_args()
    if shutil.which("strace") is None:
        print("strace is not installed (apt install strace)", file=sys.stderr)
        return 2
    runs = args.runs or sorted(str(p) for p in (ROOT / "sample_runs").glob("*.jsonl"))
    cli = [sys.executable, "-m", "skillaudit.cli"]
    worst = 0
    with tempfile.TemporaryDirectory() as out:
        cmds = {
            "rank": [*cli, "rank", *runs, "--skills", args.skills, "--json"],
            "prune": [*cli, "prune", *runs, "--skills", args.skills, "--json", "--embedder", "tfidf"],
            "audit": [*cli, "audit", *runs, "--skills", args.skills, "--out", str(Path(out) / "report"),
                      "--embedder", "tfidf", "--quiet", "--bootstrap", "200"],
        }
        for name in filter(None, args.commands.split(",")):
            counts = opens(cmds[name], runs)
            worst = max(worst, *counts.values())
            per = sorted(set(counts.values()))
            print(f"{name:<6} opens per input file: {'/'.join(map(str, per))} "
                  f"({len(runs)} files: " + ", ".join(f"{Path(p).name} {n}" for p, n in counts.items()) + ")")
    print(f"most opens of one input file by one command: {worst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
