"""Each estimator's name and parameters in words, from one place: the metrics' results carry them
(`MetricsResult.method`), and the report, the help texts and the progress lines print them. Plain
strings only (no numpy): the CLI's help imports this module.

`group_metrics` computes OAE, RAE and Δskip with Tango's score interval and the score McNemar test it
inverts (Durkalski's cluster-adjusted test, counts over the Rao-Scott design effect, when tasks ran
several epochs), the aggregate lift, selection gap and Δskip - RAE with a task-level paired
bootstrap, and accuracies with a Wilson interval over the task as the unit.
"""

from __future__ import annotations

from typing import Any

#: near-duplicate cosine similarity, per embedding backend (`analysis.clusters` uses it)
NEAR_DUPLICATE_THRESHOLD = {"minilm": 0.80, "tfidf": 0.45}


#: likely rivals (`triggers`, `analysis.triggers.description_overlap`): a pair of skills whose
#: descriptions would compete for the same queries. BM25: one skill's name and description as the
#: query, the other's score relative to its own; embedding: cosine of the two descriptions. On the
#: bundled 30-skill library the three planted overlaps score 0.36-0.52 (BM25) and 0.71-0.80
#: (MiniLM), every other pair at most 0.21 and 0.60 (99th percentiles 0.21 and 0.59).
RIVAL_BM25 = 0.30
RIVAL_COSINE = {"minilm": 0.65, "tfidf": 0.30}


def rival_words(embedder: str, bm25: float, cosine: float) -> str:
    """How `description_overlap` flagged pairs, as it ran."""
    return (f"likely rivals: BM25 of one skill's name and description against the other's, relative to its own "
            f"score, >= {bm25:.2f} either way, or {embedder} cosine of the two >= {cosine:.2f}")


def threshold_help() -> str:
    """The --threshold help of every command that finds near-duplicates, from the calibrated values."""
    return ("Near-duplicate cosine similarity (default: "
            + ", ".join(f"{v:.2f} {k}" for k, v in NEAR_DUPLICATE_THRESHOLD.items()) + ").")

#: what `group_metrics` computes each interval with (the score tests' names come from the groups)
SCORE_FIGURES = ("oae", "rae", "delta_skip")
BOOTSTRAP_FIGURES = ("agg_lift", "selection_gap", "skip_minus_rae")
ACCURACY_INTERVAL = "Wilson interval, the task as the unit (counts over the design effect of its epochs)"


def bootstrap_words(n_boot: int, seed: int | None = None) -> str:
    """The bootstrap as it ran: resamples (and seed), or none."""
    if not n_boot:
        return "no interval (--bootstrap 0)"
    return f"a task-level paired bootstrap ({n_boot:,} resamples" + (f", seed {seed})" if seed is not None else ")")


#: the --bootstrap help of commands whose resamples go to the metrics (audit, check, compare, metrics)
METRICS_BOOT_HELP = ("Task-level paired bootstrap resamples for the aggregate lift and selection gap; 0 = none "
                     "(OAE, RAE and Δskip keep their score intervals, which need no resampling).")


def interval_summary(n_boot: int) -> str:
    """One line on which figure gets which interval (help texts and progress lines)."""
    return (f"OAE, RAE and Δskip: Tango score intervals inverting the score McNemar test (Rao-Scott "
            f"over tasks with epochs); aggregate lift and selection gap: {bootstrap_words(n_boot)}")


def metrics_method(settings: dict[str, Any], score_tests: list[dict[str, str]], p_cond_tests: list[str],
                   oae_tests: list[str]) -> dict[str, Any]:
    """`MetricsResult.method` from its parts (also for a stored audit.json's groups)."""
    n_boot, seed = int(settings.get("bootstrap") or 0), settings.get("seed")
    level = float(settings.get("level", 0.95))
    tests = sorted({t for st in score_tests for t in st.values()}) or ["score McNemar (Tango)"]
    tango = "Tango score interval inverting the " + " / ".join(f"{x} test" for x in tests)
    boot = bootstrap_words(n_boot, seed)
    p_cond = sorted(set(p_cond_tests))
    oae = sorted(set(oae_tests))
    sentence = (f"Percentage points; {round(level * 100)}% CIs: OAE, RAE and Δskip from the {tango} (each "
                f"interval excludes 0 exactly when its test rejects); aggregate lift and selection gap: "
                f"{boot}. p: the RAE test on the rescues b and harms c of the tasks that retrieved skills, the task "
                f"as the unit ({'; '.join(p_cond) or 'none'}).")
    return {"level": level,
            "intervals": {**{f: tango for f in SCORE_FIGURES}, **{f: boot for f in BOOTSTRAP_FIGURES},
                          "accuracy": ACCURACY_INTERVAL},
            "tests": {"p_cond": p_cond, "oae": oae},
            "sentence": sentence}


#: `stats.paired_test`, the task-level test of pooled flips (clusters, per-skill p in `rank`)
TASK_TEST_WORDS = ("exact McNemar with one pair per task, else the exact sign-flip test of each task's summed "
                   "flips")

#: p cond, as `group_metrics` computes it (without and with --mid-p)
P_COND_WORDS = ("the score McNemar test the RAE interval inverts (Durkalski's cluster-adjusted test when tasks "
                "ran several epochs)")
P_COND_MID_P_WORDS = "the mid-p McNemar test (a sign-flip test of each task's summed flips with epochs)"


#: `library_effect`: the mean per injected skill and its interval, as computed (`LibraryEffect.method`)
LIBRARY_MEAN_SCORE = ("the retrieving pairs' summed flips over the skills injected (unpenalised); interval: the "
                      "Tango score interval of the mean flip per retrieving pair (task-level, Rao-Scott over "
                      "tasks with epochs) scaled by pairs / injections, with the score test it inverts")
LIBRARY_MEAN_RIDGE = "exposure-weighted mean of the ridge regression's per-skill effects; interval: {interval}"
#: `library_effect.both_heterogeneity_tests`: the "skills differ?" test
HETEROGENEITY_WORDS = ("permutation score tests, like with like (tasks permuted within model, benchmark, "
                       "retrieved-set sizes and disabled outcomes) and on the plain flips (within model, benchmark "
                       "and set sizes); the skills differ when both reject, p the larger")
REGRESSION_INTERVAL = {"bootstrap": "task-level bootstrap percentiles",
                       "sandwich": "task-level cluster-robust (sandwich) normal interval"}


def library_mean_words(how: str) -> str:
    """The library mean's estimator in words: `how` is "score" or "ridge <interval method>"."""
    if how == "score":
        return LIBRARY_MEAN_SCORE
    method = how.removeprefix("ridge").strip()
    return LIBRARY_MEAN_RIDGE.format(interval=REGRESSION_INTERVAL.get(method, "none"))


def regression_words(settings: dict[str, Any]) -> str:
    """The per-skill ridge regression's intervals as they ran (`attribution` settings:
    `regression_interval`, `bootstrap`)."""
    if not settings.get("regression", True):
        return "off: no intervals"
    how = settings.get("regression_interval")
    words = REGRESSION_INTERVAL.get(str(how), "no interval")
    if how == "bootstrap":
        words += f", {int(settings.get('bootstrap') or 0):,} resamples"
    if how in REGRESSION_INTERVAL:
        from skillaudit.analysis.regression import MIN_INTERVAL_TASKS

        words += f" (none below {MIN_INTERVAL_TASKS} retrieving tasks)"
    return words


#: sequential stopping of the permutation tests (`library_effect.heterogeneity_tests(decide_at=...)`):
#: where a test may stop, and the risk (two-sided, Clopper-Pearson) that it stops on the wrong side
CHECKPOINTS = (200, 500, 1000)
DECISION_RISK = 1e-3
#: `--mc-stop`'s help, from the constants above
MC_STOP_HELP = ("Sequential Monte Carlo: a permutation test (the skills-differ test) stops once the "
                f"Clopper-Pearson interval of its p (risk {DECISION_RISK:g}) is clear of the level its verdict "
                f"reads, checked at {', '.join(f'{c:,}' for c in CHECKPOINTS)} permutations; off runs every "
                "permutation. --json gives each p's permutations and Monte Carlo error.")
