"""Time and peak memory of reply parsing on hostile replies (issue 48): each case in its own
process, so peak RSS is the case's own.

    python bench/hostile_replies.py [--sizes 2000,4000,8000] [--timeout 60]

Figures, not assertions: prints seconds and peak MB per case and size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CASES = {
    "math answer 'The answer:' + N newlines": (
        "from skillaudit.sandbox.score import extract_math_answer as f; f('The answer:' + '\\n' * N)"),
    "tool calls 'functions.search_skills:{' x N": (
        "from skillaudit.agents.agent import parse_text_tool_calls as f; f('functions.search_skills:{' * N)"),
    "code reply of N lines (30 bytes each)": (
        "from skillaudit.sandbox.score import extract_code as f; "
        "f('```python\\n' + 'x_value = some_call(1, 2, 3)\\n' * N + '```')"),
    "exact-match final answer: 'The answer is' + N newlines": (
        "from skillaudit.tasks.taskfile import final_answer as f; f('The answer is' + '\\n' * N)"),
    "JSON N deep inside <tool_call>": (
        "from skillaudit.agents.agent import parse_text_tool_calls as f; "
        "f('<tool_call>' + '{\\x22a\\x22:' * N + '1' + '}' * N + '</tool_call>')"),
}

RUN = """
import resource, sys, time
N = int(sys.argv[1])
t = time.perf_counter()
try:
    {code}
    err = None
except BaseException as exc:
    err = type(exc).__name__
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, err)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2000,8000,32000,300000")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    rows = []
    for name, code in CASES.items():
        for n in map(int, args.sizes.split(",")):
            try:
                p = subprocess.run([sys.executable, "-c", RUN.format(code=code), str(n)], capture_output=True,
                                   text=True, timeout=args.timeout, env={**os.environ})
                secs, mb, err = p.stdout.split() if p.returncode == 0 else ("nan", "nan", f"rc {p.returncode}")
            except subprocess.TimeoutExpired:
                secs, mb, err = f">{args.timeout:g}", "-", "timeout"
            rows.append({"case": name, "n": n, "seconds": secs, "peak_mb": mb, "error": err})
            print(f"{name:45} N={n:>8}  {secs:>10} s  {mb:>8} MB  {err}", flush=True)
    with open(os.path.join(os.path.dirname(__file__), "out", "hostile_replies.jsonl"), "a") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    os.makedirs(os.path.join(os.path.dirname(__file__), "out"), exist_ok=True)
    main()
