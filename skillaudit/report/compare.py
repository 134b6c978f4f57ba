"""`skillaudit compare`: the paper's Figure 1 across models and the table behind it.

One point per model (its pooled benchmarks, or one benchmark with `benchmark=`): aggregate
retrieval lift (task-level bootstrap CI) against RAE (the score interval that `p_cond` inverts, the
task as the unit); sign disagreement marked. `p_cond` is the test `metrics` prints beside RAE;
`mcnemar_p_cond` is the exact McNemar on the pooled pairs (every epoch counted as a task), kept for
reference only.
"""

from __future__ import annotations

from typing import Any

COMPARE_SCHEMA = "skillaudit.compare/v1"
FIELDS = ("model", "benchmark", "n_pairs", "n_cond", "trigger_rate", "agg_lift", "agg_lift_ci", "rae",
          "rae_ci", "oae", "oae_ci", "cond_b", "cond_c", "n_cond_tasks", "p_cond", "p_cond_test",
          "mcnemar_p_cond", "sign_disagreement", "reportable", "selection_gap", "score_test")


def compare_groups(metrics: dict[str, Any], benchmark: str | None = None) -> list[dict[str, Any]]:
    """One row per model: its pooled group ('*'), or its group on `benchmark`."""
    want = "*" if benchmark is None else benchmark
    return [{k: g.get(k) for k in FIELDS} for g in metrics["groups"] if g["benchmark"] == want]


def compare_doc(metrics: dict[str, Any], benchmark: str | None = None,
                figure: str | None = None) -> dict[str, Any]:
    rows = compare_groups(metrics, benchmark)
    return {
        "schema": COMPARE_SCHEMA,
        "benchmark": benchmark or "*",
        "settings": metrics.get("settings", {}),
        "models": rows,
        "n_sign_disagreement": sum(1 for r in rows if r["sign_disagreement"]),
        "figure": figure,
    }
