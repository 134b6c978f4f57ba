"""Issue 27's real-registry check on `skillaudit import skillsbench` output.

    skillaudit import skillsbench ../shared/data/real/skillsbench-results-registry.json -o /tmp/sb.jsonl
    python bench/registry_check.py --as-retrieved /tmp/sb.jsonl /tmp/sb_ret.jsonl
    skillaudit rank /tmp/sb_ret.jsonl --json > /tmp/sb_rank.json
    python bench/registry_check.py /tmp/sb_rank.json

The registry only says which skills were *offered* (one bundle per task); `--as-retrieved` rewrites
each enabled record's offered bundle as a retrieval, the reading under which the outside review
found 972 of 1,566 bundle rows with relative_q < 0.05 and the library estimate outside its own
CI for 14 of 18 agents.

Prints, per agent, whether the library's mean effect per injected skill lies inside its own
interval, and counts the task bundles (skills offered on one task) with relative_q < 0.05 or
reported as reliably worse than the average (relative CI below 0 and q <= 0.1).
"""

from __future__ import annotations

import json
import sys


def as_retrieved(src: str, dst: str) -> None:
    with open(src) as fh, open(dst, "w") as out:
        for line in fh:
            rec = json.loads(line)
            if rec.get("condition") == "enabled" and rec.get("offered"):
                rec["retrievals"] = [{"query": "offered", "error": None,
                                      "skills": [{"id": s} for s in rec["offered"]]}]
                rec.pop("offered")
                rec.pop("use_logged", None)
            out.write(json.dumps(rec) + "\n")


def main() -> None:
    if sys.argv[1] == "--as-retrieved":
        as_retrieved(sys.argv[2], sys.argv[3])
        return
    with open(sys.argv[1]) as fh:
        doc = json.load(fh)
    outside = 0
    libs = doc["library"]
    for e in libs:
        m, ci = e["mean_effect"], e["mean_effect_ci"]
        bad = m is not None and ci is not None and not (ci[0] <= m <= ci[1])
        outside += bad
    print(f"library cells: {len(libs)}; mean per injected skill outside its own CI: {outside}")
    rows = doc["skills"]
    one_task = [r for r in rows if r["n_tasks"] == 1]
    q05 = sum(1 for r in rows if r["relative_q"] is not None and r["relative_q"] < 0.05)
    worse_one = sum(1 for r in one_task if r["relative_q"] is not None and r["relative_q"] <= 0.1
                    and r["relative_ci"] and r["relative_ci"][1] < 0)
    print(f"skill rows: {len(rows)}; relative_q < 0.05: {q05}; rows seen on one task: {len(one_task)}, "
          f"of them reliably worse than average: {worse_one}")


if __name__ == "__main__":
    main()
