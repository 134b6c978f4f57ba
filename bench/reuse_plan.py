"""How many episodes `run --reuse` re-runs after editing one skill, for every skill of `skills/`, over the
sample runs' main logs (no model call: the plan re-ranks the logged searches offline).

    PYTHONPATH=. python bench/reuse_plan.py
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillaudit.agents.retrieve import SkillIndex  # noqa: E402
from skillaudit.engine.reuse import plan_reuse  # noqa: E402
from skillaudit.library import load_library  # noqa: E402

LOGS = sorted(str(p) for p in (REPO / "sample_runs").glob("*.jsonl")
              if not any(k in p.name for k in (".arms.", ".masks.", ".verify.")))


def main() -> None:
    old = str(REPO / "skills")
    ids = load_library(old).ids
    rows = []
    t0 = time.perf_counter()
    for sid in ids:
        with tempfile.TemporaryDirectory() as tmp:
            lib = Path(tmp) / "skills"
            shutil.copytree(old, lib)
            p = lib / sid / "SKILL.md"
            p.write_text(p.read_text() + "\nOne more check: re-read the task before answering.\n")
            index = SkillIndex(load_library(lib))
            total = rerun = tokens = 0
            for log in LOGS:
                plan = plan_reuse(log, index, reuse_library=old)
                total += plan.total
                rerun += len(plan.rerun)
                tokens += plan.to_dict()["estimated_tokens"]
            rows.append((sid, total, rerun, tokens))
    dt = time.perf_counter() - t0
    for sid, total, rerun, tokens in rows:
        print(f"{sid:32} re-run {rerun:3} of {total} episodes  (~{tokens:,} tokens)")
    reruns = [r[2] for r in rows]
    total = rows[0][1]
    print(f"\n{len(rows)} single-skill edits over {len(LOGS)} logs ({total} episodes): re-run median "
          f"{statistics.median(reruns)}, mean {statistics.mean(reruns):.1f}, max {max(reruns)}; "
          f"fewer than a full run by x{total / max(statistics.mean(reruns), 1e-9):.0f} on average, "
          f"x{total / max(max(reruns), 1):.0f} at worst; {dt:.1f} s for all plans")


if __name__ == "__main__":
    main()
