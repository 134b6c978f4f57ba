"""Agent logs of many short lines: time and peak memory of reading one trial's log (issue 53).

    PYTHONPATH=. python bench/bench_agent_logs.py [--lines 11000000]

Writes, in a temporary folder, one trial per format whose log has about `--lines` short lines and
120 MB: a pretty-printed ATIF `trajectory.json` (one JSON document: the formats that are parsed as
a document, streamed one step at a time), a Claude Code stream-json `claude-code.txt` and a Codex
`codex.txt` (JSON Lines, streamed line by line); each with one skill use near the end. Each is read
by `trajectories.read_trial` in a fresh process; the bound is 10 s and 100 MB each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

READ = ("import sys; from skillaudit.importers.trajectories import read_trial; t = read_trial(sys.argv[1]); "
        "print(t.used, t.problem)")


def write_atif(folder: str, lines: int) -> None:
    """Steps pretty-printed with indent=1: each step is ~12 short lines."""
    os.makedirs(os.path.join(folder, "agent"))
    step = json.dumps({"step_id": 0, "source": "agent", "tool_calls": [
        {"function_name": "bash_command", "arguments": {"keystrokes": "ls\n"}}], "obs": [1, 2, 3]}, indent=1)
    per = step.count("\n") + 1
    with open(os.path.join(folder, "agent", "trajectory.json"), "w") as fh:
        fh.write('{\n "schema_version": "ATIF-v1.8",\n "steps": [\n')
        body = ",\n".join([step] * 1000)
        for _ in range(max(1, lines // per // 1000)):
            fh.write(body + ",\n")
        fh.write(json.dumps({"step_id": 1, "source": "agent", "tool_calls": [
            {"function_name": "bash_command", "arguments": {"keystrokes": "cat /root/.claude/skills/pdf/SKILL.md\n"}}]},
            indent=1))
        fh.write("\n ]\n}\n")


def write_jsonl(folder: str, lines: int, name: str, head: list[dict], use: dict, tail: dict) -> None:
    os.makedirs(os.path.join(folder, "agent"))
    with open(os.path.join(folder, "agent", name), "w") as fh:
        for h in head:
            fh.write(json.dumps(h) + "\n")
        block = '{"x":12345}\n' * 100_000
        for _ in range(max(1, lines // 100_000)):
            fh.write(block)
        fh.write(json.dumps(use) + "\n" + json.dumps(tail) + "\n")


def measure(folder: str) -> tuple[float, float, str]:
    """(seconds, peak RSS MB of the child, its output) of reading the trial in a fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", READ, folder], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    out = proc.stdout.read().strip() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"reading {folder} failed ({proc.returncode})")
    return wall, usage.ru_maxrss / 1024, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=11_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = {}
        cases["ATIF trajectory.json (pretty-printed)"] = os.path.join(tmp, "atif")
        write_atif(cases["ATIF trajectory.json (pretty-printed)"], args.lines)
        cases["Claude Code stream-json"] = os.path.join(tmp, "cc")
        write_jsonl(cases["Claude Code stream-json"], args.lines, "claude-code.txt",
                    [{"type": "system", "subtype": "init", "skills": ["pdf", "docx"]}],
                    {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Skill",
                                                                   "input": {"skill": "pdf"}}]}},
                    {"type": "result", "subtype": "success"})
        cases["Codex exec --json"] = os.path.join(tmp, "codex")
        write_jsonl(cases["Codex exec --json"], args.lines, "codex.txt", [{"type": "thread.started"}],
                    {"type": "item.completed", "item": {"type": "command_execution",
                                                        "command": "bash -lc 'cat /root/.codex/skills/pdf/SKILL.md'"}},
                    {"type": "turn.completed"})
        for label, folder in cases.items():
            log = next(os.scandir(os.path.join(folder, "agent"))).path
            size = os.path.getsize(log)
            with open(log, "rb") as fh:
                n = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
            wall, peak, out = measure(folder)
            print(f"{label}: {size / 1e6:.0f} MB, {n / 1e6:.1f}M lines: {wall:.2f} s, peak {peak:.0f} MB "
                  f"(the child process; bound 10 s, 100 MB) -> {out}")


if __name__ == "__main__":
    main()
