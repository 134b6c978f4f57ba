"""The per-skill counts of `skillaudit rank`, written the way a pandas user would (the reference point).

    python bench/pandas_reference.py RUNS... [--json]

read_json(lines=True) per file, pair enabled with disabled records on (model, benchmark, task_id,
epoch) with a merge, explode each pair's deduplicated retrieved skills, groupby task and skill, then
skill (b and c task-level, as `rank` counts them). Prints the
number of skills (or, with --json, {skill_id: [n_retrieved, b, c]} to check against skillaudit).
Harness error records and unpaired records are left out, as skillaudit does.
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

KEYS = ["model", "benchmark", "task_id", "epoch"]


def retrieved_ids(rets: object, short: object) -> list[str]:
    ids: dict[str, None] = {}
    if isinstance(rets, list):
        for call in rets:
            for s in call.get("skills") or []:
                ids[s if isinstance(s, str) else s["id"]] = None
    if isinstance(short, list):
        for s in short:
            ids[s] = None
    return list(ids)


def load_pairs(paths: list[str]) -> pd.DataFrame:
    """Enabled records merged with their disabled pair, errors left out, each pair's skill list."""
    df = pd.concat([pd.read_json(p, lines=True) for p in paths], ignore_index=True)
    for col, default in (("model", "default"), ("benchmark", "default"), ("epoch", 1)):
        df[col] = df[col].fillna(default) if col in df else default
    for col in ("retrievals", "retrieved", "error"):
        if col not in df:
            df[col] = None
    df["condition"] = df["condition"].map({"enabled": 1, "on": 1, "skills_on": 1,
                                           "disabled": 0, "off": 0, "skills_off": 0})
    df["correct"] = df["correct"].astype(bool)
    df["is_error"] = df["error"].notna()
    on = df[df["condition"] == 1]
    off = df[df["condition"] == 0]
    pairs = on[[*KEYS, "correct", "retrievals", "retrieved", "is_error"]].merge(
        off[[*KEYS, "correct", "is_error"]], on=KEYS, suffixes=("_pos", "_neg"))
    pairs = pairs[~(pairs["is_error_pos"] | pairs["is_error_neg"])]
    pairs["skill"] = [retrieved_ids(r, s) for r, s in zip(pairs["retrievals"], pairs["retrieved"], strict=True)]
    return pairs


def per_skill_counts(paths: list[str]) -> pd.DataFrame:
    """n_retrieved counts pairs; b and c are task-level (the task is the unit: the epochs of a task
    that retrieved the skill sum their flips S, which count max(S, 0) rescues and max(-S, 0) harms;
    which epoch pairs with which cannot change them), per model, summed over the models as the
    bench sums `rank`'s per-model rows."""
    pairs = load_pairs(paths)
    pairs["flip"] = pairs["correct_pos"].astype(int) - pairs["correct_neg"].astype(int)
    ex = pairs[["model", "benchmark", "task_id", "skill", "flip"]].explode("skill").dropna(subset=["skill"])
    tasks = ex.groupby(["model", "benchmark", "task_id", "skill"]).agg(n=("flip", "size"), s=("flip", "sum"))
    tasks["b"] = tasks["s"].clip(lower=0)
    tasks["c"] = (-tasks["s"]).clip(lower=0)
    return tasks.groupby("skill").agg(n_retrieved=("n", "sum"), b=("b", "sum"), c=("c", "sum"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    counts = per_skill_counts(args.runs)
    if args.json:
        print(json.dumps({k: [int(v) for v in row] for k, row in zip(counts.index, counts.to_numpy(), strict=True)}))
    else:
        print(f"{len(counts)} skills; {int(counts['n_retrieved'].sum())} pair-skill rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
