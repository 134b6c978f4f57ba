"""How often the verdicts are right on simulated runs with a known truth (issue 14's scenarios).

    python bench/verdicts.py [--seeds 20] [--null 200] [--bootstrap 2000]

For each scenario of `skillaudit.runs.simulate.SCENARIOS`, over seeds 0..N-1, through the same code
as `skillaudit prune` (attribute_models -> recommend, default rules):

- dilution (every skill equally harmful): seeds with 0 per-skill prunes, seeds whose library
  verdict is `library-wide` with a gate-retrieval/reduce-depth recommendation;
- two-harmful (2 of 20 harmful): seeds where both planted skills are flagged (prune/rewrite),
  false flags per seed (no-effect skills flagged);
- model-split (a skill hurts model-a, helps model-b): seeds where it is pruned for both models
  (must be 0), seeds where it is flagged as differing in sign;
- null-epochs (no effect, 5 epochs per task): share of data sets with metrics' p_cond <= 0.05,
  next to the exact McNemar on the pooled pairs (which ignores that epochs repeat a task);
- compare-null (issue 51 F1): compare's p under no effect with 5 epochs (ICC 0.8), >= 2,000 sets;
- collinear (issue 51 F2): a harmful skill mostly co-retrieved with an innocent one;
- het-size: null size of the "skills differ" test on shapes where no skill differs.

Prints one table; every figure is a count over seeds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import orjson

from skillaudit.analysis.attribution import attribute_models
from skillaudit.analysis.metrics import compute_metrics
from skillaudit.decide.recommend import recommend
from skillaudit.runs import read_text_records
from skillaudit.runs.simulate import (
    benchmark_split,
    collinear_pair,
    correlated_epochs,
    depth_harm,
    difficulty_split,
    drift_epochs,
    easy_hard,
    failure_driven,
    scenario,
    simulate,
    sparse_flips,
    topic_difficulty,
    two_sided,
    zipf_library,
)


def _runs(records):
    return read_text_records("".join(orjson.dumps(r).decode() + "\n" for r in records), name="<sim>")


def _flags(records, n_boot: int, seed: int):
    """(prune/rewrite set, skills with relative_q <= 0.1 and their sign, attribution) of one data set."""
    runs = _runs(records)
    ma = attribute_models(runs, n_boot=n_boot, seed=seed)
    out = recommend(runs, ma)
    flagged = {r.skill_id for r in out.skill_recommendations() if r.action in ("prune", "rewrite")}
    rel = {r.skill_id: (r.relative_effect or 0.0) for r in ma.skills
           if r.relative_q is not None and r.relative_q <= 0.1}
    return flagged, rel


def easy_hard_skills(seeds: range, n_boot: int) -> dict[str, float]:
    """One harmful easy-task skill among easy/hard-task skills that all perturb alike."""
    found = innocent = seeds_innocent = 0
    for seed in seeds:
        recs, truth = easy_hard(seed)
        flagged, _ = _flags(recs, n_boot, seed)
        harm = {s for s, k in truth.items() if k == "harmful"}
        found += harm <= flagged
        innocent += len(flagged - harm)
        seeds_innocent += bool(flagged - harm)
    return {"seeds": len(seeds), "harmful found": found, "innocent pruned/rewritten": innocent,
            "seeds with an innocent flagged": seeds_innocent}


def null_library(seeds: range, n_boot: int) -> dict[str, float]:
    """No harmful skill (easy/hard retrieval, all perturb alike): seeds with any prune/rewrite."""
    any_flag = 0
    for seed in seeds:
        recs, _ = easy_hard(seed, n_harmful=0)
        flagged, _ = _flags(recs, n_boot, seed)
        any_flag += bool(flagged)
    z_any = 0
    for seed in seeds:
        recs, _ = zipf_library(seed, n_harmful=0)
        flagged, _ = _flags(recs, n_boot, seed)
        z_any += bool(flagged)
    return {"seeds": len(seeds), "easy/hard null: seeds with prune/rewrite": any_flag,
            "zipf null: seeds with prune/rewrite": z_any}


def zipf(seeds: range, n_boot: int) -> dict[str, float]:
    """200 Zipf-retrieved skills, 10 harmful: FDP of the "vs library" discoveries (q <= 0.1)."""
    disc = false = better = flag_n = flag_false = found = 0
    fdps = []
    for seed in seeds:
        recs, truth = zipf_library(seed)
        flagged, rel = _flags(recs, n_boot, seed)
        harm = {s for s, k in truth.items() if k == "harmful"}
        worse = set(rel)
        disc += len(worse)
        false += len(worse - harm)
        fdps.append(len(worse - harm) / max(len(worse), 1))
        better += any(rel[s] > 0 for s in harm & worse)
        flag_n += len(flagged)
        flag_false += len(flagged - harm)
        found += len(flagged & harm)
    return {"seeds": len(seeds), "vs-library discoveries / seed": disc / len(seeds),
            "FDP (pooled)": false / max(disc, 1), "mean FDP": float(np.mean(fdps)),
            "seeds a harmful called better": better, "prune/rewrite / seed": flag_n / len(seeds),
            "prune/rewrite FDP": flag_false / max(flag_n, 1), "harmful flagged / seed": found / len(seeds)}


def sparse(n_sets: int, n_boot: int, epochs: int) -> dict[str, float]:
    """Sparse one-sided RAE (0.028 harm, 0 rescue, 143 tasks): coverage of the RAE interval,
    agreement of "interval excludes 0" with "displayed p <= 0.05"; null size (0.014 / 0.014 and
    0.1 / 0.1) of the displayed test."""
    cover = disagree = zero_width = 0
    for seed in range(n_sets):
        recs, truth = sparse_flips(seed, epochs=epochs)
        g = next(g for g in compute_metrics(_runs(recs), n_boot=n_boot, seed=seed).groups if g.benchmark == "*")
        lo, hi = g.rae_ci
        cover += lo <= truth <= hi
        zero_width += hi - lo <= 0
        disagree += (lo > 0 or hi < 0) != (g.p_cond <= 0.05)
    sizes = []
    for rate in (0.014, 0.1):
        rej = 0
        for seed in range(n_sets):
            recs, _ = sparse_flips(10_000 + seed, harm=rate, rescue=rate, epochs=epochs)
            g = next(g for g in compute_metrics(_runs(recs), n_boot=0).groups if g.benchmark == "*")
            rej += g.p_cond <= 0.05
        sizes.append(rej / n_sets)
    return {"data sets": n_sets, "coverage": cover / n_sets, "CI/p disagree": disagree / n_sets,
            "zero-width": zero_width / n_sets, "null size (0.014/0.014)": sizes[0],
            "null size (0.1/0.1)": sizes[1]}


def _prune(name: str, seed: int, n_boot: int):
    sim = scenario(name, seed=seed)
    runs = sim.runs()
    ma = attribute_models(runs, library=sim.library(), n_boot=n_boot, seed=seed)
    return sim, ma, recommend(runs, ma)


def dilution(seeds: range, n_boot: int) -> dict[str, float]:
    no_prune = wide = 0
    for seed in seeds:
        _, ma, out = _prune("dilution", seed, n_boot)
        no_prune += not out.by_action("prune")
        wide += all(r.library is not None and r.library.verdict == "library-wide" for r in ma.results) \
            and bool(out.library_actions())
    return {"seeds": len(seeds), "0 prunes": no_prune, "library-wide + gate": wide}


def two_harmful(seeds: range, n_boot: int) -> dict[str, float]:
    both = false = 0
    for seed in seeds:
        sim, _, out = _prune("two-harmful", seed, n_boot)
        flagged = {r.skill_id for r in out.skill_recommendations() if r.action in ("prune", "rewrite")}
        harm = set(sim.ids("harmful"))
        both += harm <= flagged
        false += len(flagged - harm)
    return {"seeds": len(seeds), "both flagged": both, "false flags / seed": false / len(seeds)}


def model_split(seeds: range, n_boot: int) -> dict[str, float]:
    pruned_all = sign = 0
    for seed in seeds:
        sim, _, out = _prune("model-split", seed, n_boot)
        (harm,) = sim.ids("harmful")
        models = set(sim.settings["models"])
        pruned_all += harm in out.removable(sorted(models))
        sign += any(r.skill_id == harm and r.evidence.get("sign_differs") for r in out.skill_recommendations())
    return {"seeds": len(seeds), "pruned for both": pruned_all, "flagged sign differs": sign}


def null_epochs(n_sets: int) -> dict[str, float]:
    task_level = pooled = 0
    for seed in range(n_sets):
        runs = scenario("null-epochs", seed=seed).runs()
        g = next(g for g in compute_metrics(runs, n_boot=0).groups if g.benchmark == "*")
        task_level += g.p_cond <= 0.05
        pooled += g.mcnemar_p_cond <= 0.05
    return {"data sets": n_sets, "p_cond <= 0.05": task_level / n_sets,
            "pooled McNemar <= 0.05": pooled / n_sets}


def compare_null(n_sets: int) -> dict[str, object]:
    """Issue 51 F1: no effect, 5 epochs per task with intraclass correlation 0.8 (200 tasks): how
    often `compare`'s p (metrics' task-level p_cond) is <= 0.05, next to the exact McNemar on the
    pooled pairs it printed before (every epoch counted as a task)."""
    from skillaudit.report.compare import compare_doc

    task_level = pooled = 0
    for seed in range(n_sets):
        recs, _ = correlated_epochs(seed)
        doc = compare_doc(compute_metrics(_runs(recs), n_boot=0).to_dict())
        (row,) = doc["models"]
        task_level += row["p_cond"] <= 0.05
        pooled += row["mcnemar_p_cond"] <= 0.05
    return {"data sets": n_sets, "compare p <= 0.05": _se(task_level, n_sets),
            "pooled-pair McNemar <= 0.05": _se(pooled, n_sets)}


def _se(k: float, n: int) -> str:
    """'k/n (rate ± Monte Carlo SE)'."""
    rate = k / max(n, 1)
    return f"{k:g}/{n} ({rate:.3f} ± {np.sqrt(rate * (1 - rate) / max(n, 1)):.3f})"


def _mask_sent(r) -> bool:
    return r.action == "needs-data" and "--arms mask" in r.reason


def collinear(seeds: range, n_boot: int) -> dict[str, object]:
    """Issue 51 F2: one harmful skill co-retrieved with an innocent one by 25% of the tasks, the
    innocent alone in 4%, 30% of the pair's passes turned into failures (800 tasks, 20 skills):
    seeds where the harmful one is pruned, rewritten or sent to mask arms; kept under a library
    verdict; innocent skills pruned or rewritten per seed."""
    acted = kept_wide = innocent = 0
    for seed in seeds:
        recs, truth = collinear_pair(seed)
        runs = _runs(recs)
        ma = attribute_models(runs, n_boot=n_boot, seed=seed)
        out = recommend(runs, ma)
        bad = next(s for s, k in truth.items() if k == "harmful")
        r = out.get(bad)
        acted += r is not None and (r.action in ("prune", "rewrite") or _mask_sent(r))
        kept_wide += r is not None and r.action == "keep" and r.rule == "S502"
        innocent += sum(1 for x in out.skill_recommendations()
                        if x.skill_id != bad and x.action in ("prune", "rewrite"))
    n = len(seeds)
    return {"seeds": n, "harmful pruned/rewritten/mask arms": _se(acted, n),
            "kept under a library verdict": _se(kept_wide, n), "innocent pruned/rewritten / seed": innocent / n}


def het_size(n_sets: int) -> dict[str, object]:
    """Null size of the "skills differ" test (heterogeneity p <= 0.05) on shapes where no skill
    differs from another: depth-only harm (dilution), retrieval tied to easy or hard tasks, and the
    collinear pair without harm (a quarter of the tasks retrieve the same two skills)."""
    from skillaudit.analysis.library_effect import HETEROGENEITY_ALPHA

    def rate(make) -> str:
        rej = 0
        for seed in range(n_sets):
            ma = attribute_models(make(seed), n_boot=50, seed=seed)
            lib = ma.results[0].library
            rej += lib is not None and lib.heterogeneity_p is not None and lib.heterogeneity_p <= HETEROGENEITY_ALPHA
        return _se(rej, n_sets)

    return {"dilution": rate(lambda s: scenario("dilution", seed=50_000 + s).runs()),
            "easy/hard null": rate(lambda s: _runs(easy_hard(50_000 + s, n_harmful=0)[0])),
            "collinear null": rate(lambda s: _runs(collinear_pair(50_000 + s, harm=0.0)[0]))}


# ---------------------------------------------------------------- issue 51: the table
def _rate(k: float, n: int) -> tuple[float, float]:
    """(rate, Monte Carlo SE) of k events in n trials."""
    r = k / max(n, 1)
    return r, float(np.sqrt(r * (1 - r) / max(n, 1)))


def _mean(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return (float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size))) if a.size > 1 else (float(a.mean()), 0.0)


def _verdicts(recs, truth, n_boot: int, seed: int) -> dict[str, object]:
    """Per (model, skill) decisions of one data set against its truth ("harmful" planted skills;
    a dict model -> set for model-specific truth)."""
    runs = _runs(recs)
    out = recommend(runs, attribute_models(runs, n_boot=n_boot, seed=seed))
    flagged, kept_wide, acted, mixed = set(), set(), set(), set()
    for r in out.skill_recommendations():
        per = r.evidence.get("per_model") or {m: {"rule": r.rule, "action": r.action} for m in r.models}
        for m, v in per.items():
            action = v.get("action", r.action)
            if action in ("prune", "rewrite"):
                flagged.add((m, r.skill_id))
            if action in ("prune", "rewrite") or (action == "needs-data" and "--arms mask" in (v.get("reason") or r.reason)):
                acted.add((m, r.skill_id))
            if v.get("rule") == "S502":
                kept_wide.add((m, r.skill_id))
            if v.get("rule") == "S201":
                mixed.add((m, r.skill_id))
    models = list(runs.models)
    harm = truth if isinstance(truth, dict) and truth and isinstance(next(iter(truth.values())), set) else \
        {m: {s for s, k in truth.items() if k == "harmful"} for m in models}
    truly = {(m, s) for m in models for s in harm.get(m, set())}
    return {"models": len(models), "flagged": flagged, "acted": acted, "kept_wide": kept_wide, "truly": truly,
            "mixed": mixed, "metrics": out}


def _decision_row(name: str, make, seeds: range, n_boot: int) -> dict[str, object]:
    """Power (planted harms pruned, rewritten or sent to mask arms), innocent prune/rewrite flags
    per model-seed, FDP of prune/rewrite (mean over seeds with a flag), harms kept under a library
    verdict."""
    hit = planted = innocent = model_seeds = kept = mixed = 0
    fdps = []
    for seed in seeds:
        recs, truth = make(seed)
        v = _verdicts(recs, truth, n_boot, seed)
        hit += len(v["acted"] & v["truly"])
        planted += len(v["truly"])
        false = v["flagged"] - v["truly"]
        innocent += len(false)
        model_seeds += v["models"]
        kept += len(v["kept_wide"] & v["truly"])
        mixed += len(v["mixed"] - v["truly"])
        if v["flagged"]:
            fdps.append(len(false) / len(v["flagged"]))
    return {"shape": name, "seeds": len(seeds), "power": _rate(hit, planted) if planted else None,
            "innocent flags / model-seed": (innocent / max(model_seeds, 1), float(np.sqrt(innocent) / max(model_seeds, 1))),
            "innocent S201 (mixed) / model-seed": (mixed / max(model_seeds, 1), float(np.sqrt(mixed) / max(model_seeds, 1))),
            "FDP": _mean(fdps) if fdps else (0.0, 0.0), "harm kept under a library verdict": kept}


def _five_models(seed: int):
    models = ("m1", "m2", "m3", "m4", "m5")
    sim = simulate(n_tasks=600, n_skills=20, n_harmful=1, n_helpful=0, models=models,
                   model_signs=(1.0, 0.0, 0.0, 0.0, 0.0), seed=seed)
    (h,) = sim.ids("harmful")
    return list(sim.records), {"m1": {h}}


def _both_ways_row(seeds: range, n_sets: int) -> dict[str, object]:
    """Two-sided effects (rescue 35% of failures, harm 35% of passes; 18% noise flips): how often
    the audit's model verdict says "both ways" (power), and how often it does when retrieving pairs
    flip like the others (size: rescue = harm = noise = 18%), against the no-skill pairs and against
    a replicate arm."""
    from skillaudit.analysis.metrics import works_both_ways

    def says(recs) -> bool:
        runs = _runs(recs)
        arms = None
        if any(r.get("arm") for r in recs):
            import os
            import tempfile

            from skillaudit.runs.inputs import load_inputs
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "runs.jsonl")
                with open(path, "wb") as fh:
                    fh.write(b"".join(orjson.dumps(r) + b"\n" for r in recs))
                got = load_inputs([path])
                runs, arms = got.runs, got.arms()
        g = next(g for g in compute_metrics(runs, n_boot=0, arms=arms).groups if g.benchmark == "*")
        return works_both_ways(g.to_dict())

    power = sum(says(two_sided(seed)[0]) for seed in seeds)
    size = sum(says(two_sided(70_000 + s, rescue=0.18, harm=0.18)[0]) for s in range(n_sets))
    size_rep = sum(says(two_sided(80_000 + s, rescue=0.18, harm=0.18, replicate=True)[0]) for s in range(n_sets // 4))
    return {"shape": "two-sided (audit: both ways)", "seeds": len(seeds), "power": _rate(power, len(seeds)),
            "size": _rate(size, n_sets), "size (replicate comparator)": _rate(size_rep, n_sets // 4)}


def _mixed_row(seeds: range, n_boot: int, n_tasks: int = 800) -> dict[str, object]:
    """Two planted mixed skills (a per-task random sign on their effect) among 20: power of S201
    (rewrite) on them, innocent S201 flags per seed."""
    hit = planted = innocent = 0
    for seed in seeds:
        sim = simulate(n_tasks=n_tasks, n_skills=20, n_harmful=0, n_helpful=0, n_mixed=2, seed=seed)
        recs = list(sim.records)
        v = _verdicts(recs, {"sim-model": set(sim.ids("mixed"))}, n_boot, seed)
        hit += len(v["mixed"] & v["truly"])
        planted += len(v["truly"])
        innocent += len(v["mixed"] - v["truly"])
    return {"shape": f"2 mixed skills of 20, {n_tasks} tasks (S201)", "seeds": len(seeds), "power": _rate(hit, planted),
            "innocent S201 / model-seed": (innocent / len(seeds), float(np.sqrt(innocent) / len(seeds)))}


def issue51(seeds: range, n_boot: int, n_null: int) -> list[dict[str, object]]:
    """The issue-51 table: one row per shape, every figure with its Monte Carlo SE."""
    rows = []
    t0 = time.perf_counter()

    def timed(row: dict[str, object]) -> None:
        nonlocal t0
        row["time s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        rows.append(row)
        print(_fmt_row(row), flush=True)

    cn = compare_null(n_null)
    timed({"shape": "null, 5 epochs ICC 0.8 (compare p)", "seeds": n_null,
           "size": _rate(float(cn["compare p <= 0.05"].split("/")[0]), n_null),
           "size (pooled-pair McNemar, before)": _rate(float(cn["pooled-pair McNemar <= 0.05"].split("/")[0]), n_null)})
    timed(_decision_row("collinear pair, rare apart", lambda s: collinear_pair(s), seeds, n_boot))
    timed(_both_ways_row(seeds, n_null // 4))
    timed(_decision_row("drift across 3 epochs", lambda s: drift_epochs(s), seeds, n_boot))
    timed(_decision_row("drift, null", lambda s: drift_epochs(s, n_harmful=0), seeds, n_boot))
    timed(_decision_row("5 models, harm on one", _five_models, seeds, n_boot))
    timed(_decision_row("Zipf 200 skills, 10 harmful", lambda s: zipf_library(s), seeds, n_boot))
    timed(_decision_row("difficulty split, 5 models (mixed rule)",
                        lambda s: difficulty_split(s, n_harmful=1, models=("m1", "m2", "m3", "m4", "m5")), seeds, n_boot))
    timed(_mixed_row(seeds, n_boot))
    timed(_mixed_row(seeds, n_boot, n_tasks=3000))
    hs = het_size(n_null // 4)
    timed({"shape": "skills-differ test, nulls", "seeds": n_null // 4,
           **{f"size ({k})": _rate(float(v.split("/")[0]), n_null // 4) for k, v in hs.items()}})
    return rows


def _issue52_row(name: str, make, seeds: range, n_boot: int) -> dict[str, object]:
    """Innocent prunes/rewrites per seed (skills whose truth is "none"), seeds whose library verdict
    says the skills differ (heterogeneity p <= 0.05), library-level actions per seed, the skill
    fetched by failing runs pruned or rewritten, the split skill named per benchmark (its reason
    names both benchmarks), FDP of prune/rewrite."""
    from skillaudit.analysis.library_effect import HETEROGENEITY_ALPHA

    innocent = differ = gates = verify = culprit_hits = culprits = named = splits = 0
    fdps = []
    for seed in seeds:
        recs, truth = make(seed)
        runs = _runs(recs)
        ma = attribute_models(runs, n_boot=n_boot, seed=seed)
        out = recommend(runs, ma)
        flagged = [r for r in out.skill_recommendations() if r.action in ("prune", "rewrite")]
        false = [r for r in flagged if truth.get(r.skill_id) == "none"]
        innocent += len(false)
        if flagged:
            fdps.append(len(false) / len(flagged))
        differ += any(e.heterogeneity_p is not None and e.heterogeneity_p <= HETEROGENEITY_ALPHA
                      for e in ma.library if e.benchmark == "*" or len(runs.benchmarks) == 1)
        gates += sum(1 for r in out.library_actions() if r.action != "verify")
        verify += sum(1 for r in out.library_actions() if r.action == "verify")
        for sid, kind in truth.items():
            r = out.get(sid)
            if kind == "fetched-by-failure":
                culprits += 1
                culprit_hits += r is not None and r.action in ("prune", "rewrite")
            if kind == "split":
                splits += 1
                named += r is not None and all(b in r.reason for b in ("code", "math"))
    n = len(seeds)
    row: dict[str, object] = {"shape": name, "seeds": n,
                              "innocent prune/rewrite / seed": (innocent / n, float(np.sqrt(innocent) / n)),
                              "skills differ": _rate(differ, n), "gate/reduce-depth / seed": gates / n,
                              "verify (selection) / seed": verify / n,
                              "FDP": _mean(fdps) if fdps else (0.0, 0.0)}
    if culprits:
        row["fetched-by-failure pruned/rewritten"] = _rate(culprit_hits, culprits)
    if splits:
        row["split named per benchmark"] = _rate(named, splits)
    return row


def issue52(seeds: range, n_boot: int) -> list[dict[str, object]]:
    """The issue-52 table: topics of different difficulty (900 and 3,000 tasks, and a mild
    spread), harm from depth only, a skill helping one benchmark and harming another, retrieval
    driven by failure with and without a skill fetched by failing runs."""
    rows = []
    for name, make in (("topics of different difficulty, 900 tasks", lambda s: topic_difficulty(s)),
                       ("topics, 3,000 tasks", lambda s: topic_difficulty(s, n_tasks=3000)),
                       ("topics, mild spread", lambda s: topic_difficulty(s, spread=0.5)),
                       ("harm from depth >= 4 only", lambda s: depth_harm(s)),
                       ("helps code, harms math", lambda s: benchmark_split(s)),
                       ("retrieval driven by failure", lambda s: failure_driven(s)),
                       ("... and a skill fetched by failing runs", lambda s: failure_driven(s, culprit=True))):
        t0 = time.perf_counter()
        row = _issue52_row(name, make, seeds, n_boot)
        row["time s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(_fmt_row(row), flush=True)
    return rows


def _fmt_row(row: dict[str, object]) -> str:
    cells = []
    for k, v in row.items():
        if isinstance(v, tuple):
            cells.append(f"{k} {v[0]:.3f} ± {v[1]:.3f}")
        elif v is None:
            cells.append(f"{k} –")
        else:
            cells.append(f"{k} {v}")
    return " | ".join(cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--null", type=int, default=200)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--only", default="", help="comma-separated scenario labels to run")
    ap.add_argument("--sparse-sets", type=int, default=1000)
    ap.add_argument("--issue51", action="store_true",
                    help="only the issue-51 table (size, power, innocent flags, FDP with Monte Carlo SEs)")
    ap.add_argument("--issue52", action="store_true",
                    help="only the issue-52 table (difficulty, depth, benchmark and selection shapes)")
    args = ap.parse_args()
    if args.issue51:
        issue51(range(args.seeds), args.bootstrap, max(args.null, 2000))
        return
    if args.issue52:
        issue52(range(args.seeds), args.bootstrap)
        return
    seeds = range(args.seeds)
    only = set(filter(None, args.only.split(",")))
    for label, fn in (("easy-hard", lambda: easy_hard_skills(seeds, args.bootstrap)),
                      ("null-lib", lambda: null_library(seeds, args.bootstrap)),
                      ("zipf", lambda: zipf(seeds, args.bootstrap)),
                      ("sparse", lambda: sparse(args.sparse_sets, args.bootstrap, 1)),
                      ("sparse-ep3", lambda: sparse(args.sparse_sets, args.bootstrap, 3)),
                      ("dilution", lambda: dilution(seeds, args.bootstrap)),
                      ("two-harmful", lambda: two_harmful(seeds, args.bootstrap)),
                      ("model-split", lambda: model_split(seeds, args.bootstrap)),
                      ("null-epochs", lambda: null_epochs(args.null)),
                      ("compare-null", lambda: compare_null(max(args.null, 2000))),
                      ("collinear", lambda: collinear(seeds, args.bootstrap)),
                      ("het-size", lambda: het_size(args.null))):
        if only and label not in only:
            continue
        t0 = time.perf_counter()
        row = fn()
        cells = ", ".join(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}" for k, v in row.items())
        print(f"{label:12s} {cells}  ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
