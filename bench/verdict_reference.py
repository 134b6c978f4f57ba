"""Per-skill verdict statistics the way a pandas + scipy + statsmodels + scikit-learn user would compute them.

    python bench/verdict_reference.py RUNS... [--json]

The reference point for default `skillaudit rank` (issue 30): per model, read_json(lines=True), pair
enabled with disabled records on (model, benchmark, task_id, epoch) with a merge, explode each pair's
deduplicated retrieved skills and group by skill for the counts (n, b, c); the exact McNemar test per
skill (scipy.stats.binom), Benjamini-Hochberg q-values (statsmodels.stats.multitest.multipletests),
and a sparse ridge regression of the flips on the pair x skill matrix (scikit-learn Ridge over a
scipy.sparse CSR matrix). It computes less than `rank` (no task-clustered intervals, no library
verdict, no stratification on the disabled outcome), so the ratio is a floor for the work rank does.
Prints a summary, or with --json the pooled {skill_id: [n_retrieved, b, c]} that bench/run.py checks
against rank's counts, as for bench/pandas_reference.py.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pandas_reference
from scipy import sparse, stats
from sklearn.linear_model import Ridge
from statsmodels.stats.multitest import multipletests


def load_pairs(paths: list[str]) -> pd.DataFrame:
    pairs = pandas_reference.load_pairs(paths).reset_index(drop=True)
    pairs["flip"] = pairs["correct_pos"].astype(int) - pairs["correct_neg"].astype(int)
    return pairs


def model_verdicts(pairs: pd.DataFrame, alpha: float = 1.0) -> pd.DataFrame:
    """One model's per-skill counts, exact McNemar p, BH q and ridge coefficient."""
    cond = pairs[pairs["skill"].map(len) > 0].reset_index(drop=True)
    ex = cond[["benchmark", "task_id", "skill", "flip"]].explode("skill")
    # the task is the unit: a task's epochs that retrieved the skill sum their flips S, which count
    # max(S, 0) rescues and max(-S, 0) harms (as `rank` counts them)
    tasks = ex.groupby(["benchmark", "task_id", "skill"]).agg(n=("flip", "size"), s=("flip", "sum"))
    tasks["b"], tasks["c"] = tasks["s"].clip(lower=0), (-tasks["s"]).clip(lower=0)
    counts = tasks.groupby("skill").agg(n_retrieved=("n", "sum"), b=("b", "sum"), c=("c", "sum"))
    n = (counts["b"] + counts["c"]).to_numpy()
    k = np.minimum(counts["b"], counts["c"]).to_numpy()
    p = np.where(n > 0, np.minimum(1.0, 2 * stats.binom.cdf(k, n, 0.5)), 1.0)
    counts["p_value"] = p
    counts["q_value"] = multipletests(p, method="fdr_bh")[1]
    col = pd.Categorical(ex["skill"], categories=counts.index)
    x = sparse.csr_matrix((np.ones(len(ex)), (ex.index.to_numpy(), col.codes)),
                          shape=(len(cond), len(counts)))
    counts["coef"] = Ridge(alpha=alpha, fit_intercept=False).fit(x, cond["flip"].to_numpy(float)).coef_
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pairs = load_pairs(args.runs)
    per_model = {m: model_verdicts(g) for m, g in pairs.groupby("model")}
    pooled: dict[str, list[int]] = {}
    for counts in per_model.values():
        for skill, row in zip(counts.index, counts[["n_retrieved", "b", "c"]].to_numpy(), strict=True):
            acc = pooled.setdefault(skill, [0, 0, 0])
            for i, v in enumerate(row):
                acc[i] += int(v)
    if args.json:
        print(json.dumps(pooled))
    else:
        for m, counts in per_model.items():
            print(f"{m}: {len(counts)} skills, {(counts['q_value'] <= 0.05).sum()} with q <= 0.05")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
