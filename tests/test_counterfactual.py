"""Counterfactual arms: reading and joining arm records, content/context effects, the A/A flip
rate, and per-skill causal effects from mask re-runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from skillaudit.analysis.attribution import attribute
from skillaudit.analysis.counterfactual import causal_effects, load_arms
from skillaudit.analysis.metrics import compute_metrics
from skillaudit.cli import cli
from skillaudit.errors import InputError, RunLogError
from skillaudit.runs import load_runs


def _main(task, y_pos, y_neg, skills, epoch=1, model="m"):
    common = {"task_id": task, "epoch": epoch, "model": model, "benchmark": "b"}
    en = {**common, "condition": "enabled", "correct": bool(y_pos)}
    if skills is not None:
        en["retrievals"] = [{"query": "q", "skills": [{"id": s} for s in skills], "error": None}]
    return [en, {**common, "condition": "disabled", "correct": bool(y_neg)}]


def _arm(task, arm, correct, *, shown=(), kept=None, withheld=None, seed=None, epoch=1, model="m", **extra):
    rec = {"task_id": task, "epoch": epoch, "model": model, "benchmark": "b", "arm": arm,
           "condition": "disabled" if arm == "replicate" else "enabled", "correct": bool(correct),
           "retrievals": [{"query": "q", "skills": [{"id": s} for s in shown], "error": None}],
           "meta": {}, **extra}
    if arm == "mask":
        rec["meta"] = {"kept": list(kept), "withheld": list(withheld), "mask_seed": seed}
        rec["retrievals"][0]["skills"] = [{"id": s} for s in kept]
    return rec


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _injection_world(seed=0, n=120):
    """Skills hurt only by being injected: the random arm does as badly as the real skills."""
    rng = np.random.default_rng(seed)
    main, arms = [], []
    for t in range(n):
        y_neg = rng.random() < 0.6
        y_pos = y_neg and rng.random() > 0.5
        main += _main(f"t{t}", y_pos, y_neg, ["a", "b"])
        y_rand = y_neg and rng.random() > 0.5
        arms.append(_arm(f"t{t}", "random", y_rand, shown=["x", "y"]))
        arms.append(_arm(f"t{t}", "replicate", y_neg if rng.random() < 0.9 else not y_neg))
    return main, arms


def test_arm_records_are_set_aside_and_joined_to_their_pairs(tmp_path):
    """Main pairs and metrics are the same with or without arm records; arms join their pair by key."""
    main, arms = _injection_world()
    plain = load_runs([_write(tmp_path / "main.jsonl", main)])
    both = load_runs([_write(tmp_path / "all.jsonl", main + arms)])
    assert both.n_pairs == plain.n_pairs and both.n_arm_records == len(arms) and both.n_unpaired == 0
    assert both.skills == plain.skills  # arm records' skills are not the main retrievals
    a = compute_metrics(plain, n_boot=200).groups[0].to_dict()
    b = compute_metrics(both, n_boot=200).groups[0].to_dict()
    assert {k: v for k, v in b.items() if k in a} == a
    recs = load_arms([str(tmp_path / "all.jsonl")], both)
    assert recs.names == ("random", "replicate") and recs.n == len(arms) and (recs.pair >= 0).all()
    assert recs.pair[0] == 0 and recs.correct[0] == arms[0]["correct"]


def test_arm_file_errors_name_the_line(tmp_path):
    """A bad arm record or a repeated arm key is one error naming file:line."""
    main = _main("t1", True, False, ["a"])
    bad = _write(tmp_path / "bad.jsonl", [*main, _arm("t1", "mask", True, kept=["a"], withheld=[], seed="x")])
    with pytest.raises(RunLogError, match=r"bad\.jsonl:3: 'meta\.mask_seed' must be an integer"):
        load_arms([bad], load_runs([bad]))
    dup = _write(tmp_path / "dup.jsonl", [*main, _arm("t1", "random", True), _arm("t1", "random", False)])
    with pytest.raises(RunLogError, match=r"dup\.jsonl:4: duplicate arm record m/b/t1 epoch 1 arm random \(first at .*dup\.jsonl:3\)"):
        load_arms([dup], load_runs([dup]))
    res = CliRunner().invoke(cli, ["metrics", dup])
    assert res.exit_code == 2 and "dup.jsonl:4: duplicate arm record" in res.output
    empty_arm = _write(tmp_path / "e.jsonl", [*main, {**_arm("t1", "random", True), "arm": 3}])
    res = CliRunner().invoke(cli, ["metrics", empty_arm])
    assert res.exit_code == 2 and "e.jsonl:3: 'arm' must be a non-empty string" in res.output
    with pytest.raises(InputError, match="standard input"):
        load_arms(["-"], load_runs([_write(tmp_path / "ok.jsonl", [*main, _arm("t1", "random", True)])]))


def test_content_context_and_aa_flip_rate_by_hand(tmp_path):
    """Content = mean(y+ - y_arm) on S_call, context = mean(y_arm - y-), A/A = share of replicate flips."""
    recs = [*_main("t1", True, False, ["a"]), *_main("t2", False, True, ["a"]), *_main("t3", True, True, None),
            _arm("t1", "random", False), _arm("t2", "random", False), _arm("t3", "random", True),
            _arm("t1", "replicate", True), _arm("t2", "replicate", True), _arm("t3", "replicate", True)]
    path = _write(tmp_path / "r.jsonl", recs)
    runs = load_runs([path])
    g = compute_metrics(runs, n_boot=0, arms=load_arms([path], runs)).groups[0]
    r = g.arms["random"]
    assert r["n"] == 2  # t3 skipped retrieval: not in S_call
    assert r["content_effect"] == pytest.approx(((1 - 0) + (0 - 0)) / 2)
    assert r["context_effect"] == pytest.approx(((0 - 0) + (0 - 1)) / 2)
    assert g.aa_flip_rate == pytest.approx(1 / 3) and g.aa_pairs == 3  # only t1's replicate differs
    assert g.arms["replicate"]["context_effect"] == pytest.approx((1 + 0 + 0) / 3)


def test_injection_hurts_not_these_skills(tmp_path):
    """When random skills do as badly as the retrieved ones, the verdict is 'injection hurts, not these skills'."""
    main, arms = _injection_world(n=200)
    path = _write(tmp_path / "r.jsonl", main + arms)
    res = CliRunner().invoke(cli, ["metrics", path, "--json", "--bootstrap", "2000"])
    assert res.exit_code == 0, res.output
    g = json.loads(res.stdout)["groups"][-1]
    rnd = g["arms"]["random"]
    assert rnd["content_ci"][0] <= 0 <= rnd["content_ci"][1] and rnd["context_ci"][1] < 0
    assert g["injection_text"].startswith("injection hurts, not these skills (random arm: content effect")
    assert 0 < g["aa_flip_rate"] < 0.2
    table = CliRunner().invoke(cli, ["metrics", path, "--bootstrap", "500"]).stdout
    assert "Counterfactual arms" in table and "A/A flip rate" in table


def test_a_handful_of_flips_is_no_injection_verdict(tmp_path):
    """4 harms and 0 rescues on 143 tasks: the context interval and its score test agree (p = 0.046), but 4 flips are too few for a claim, so 'no clear difference'; no interval is zero-width."""
    main, arms = [], []
    for t in range(143):
        y_neg = t < 4  # only these pass without skills, and fail with any tool result
        main += _main(f"t{t}", False, y_neg, ["a"])
        arms.append(_arm(f"t{t}", "random", False, shown=["x"]))
    path = _write(tmp_path / "r.jsonl", main + arms)
    res = CliRunner().invoke(cli, ["metrics", path, "--json", "--bootstrap", "2000"])
    assert res.exit_code == 0, res.output
    g = json.loads(res.stdout)["groups"][-1]
    rnd = g["arms"]["random"]
    assert rnd["context_ci"][1] < 0 and rnd["context_p"] == pytest.approx(0.0455, abs=1e-4)
    lo, hi = rnd["content_ci"]
    assert lo < 0 < hi  # 0 vs 0 flips on 143 tasks: an interval, not [0, 0]
    assert g["injection_text"].startswith("no clear difference from random content (random arm: content "
                                          "effect +0.0 pp [-2.6, +2.6] p = 1.000, context effect -2.8 pp")
    assert "p = 0.046, 143 tasks)" in g["injection_text"]


def _mask_world(seed=0, n=150, masks=4):
    """H and N are always retrieved together (aliases for the regression); withholding H helps."""
    rng = np.random.default_rng(seed)
    main, arms = [], []
    for t in range(n):
        p_pass = rng.uniform(0.3, 0.95)

        def outcome(h_kept: bool, p_pass: float = p_pass) -> bool:
            return rng.random() < (p_pass * (0.35 if h_kept else 1.0))

        y_neg = rng.random() < p_pass
        main += _main(f"t{t}", outcome(True), y_neg, ["H", "N"])
        for m in range(masks):
            keep = [s for s in ("H", "N") if rng.random() < 0.5]
            arms.append(_arm(f"t{t}", "mask", outcome("H" in keep), kept=keep,
                             withheld=[s for s in ("H", "N") if s not in keep], seed=m))
    return main, arms


def test_masks_separate_skills_the_regression_cannot(tmp_path):
    """H and N are never retrieved apart: the regression reports aliases, the mask surrogate blames H and clears N."""
    main, arms = _mask_world()
    path = _write(tmp_path / "m.jsonl", main + arms)
    runs = load_runs([path])
    res = attribute(runs, n_boot=300)
    assert res.get("H").identifiable is False and res.get("N").identifiable is False
    ce = causal_effects(runs, load_arms([path], runs), n_boot=500)
    h, n = ce.get("H"), ce.get("N")
    assert h["causal_ci"][1] < 0 and h["causal_q"] <= 0.05
    assert n["causal_ci"][0] <= 0 <= n["causal_ci"][1]
    assert ce.n_runs == 600 and ce.n_tasks == 150
    assert ce.validation is not None and ce.validation > 0.2


def test_causal_validation_is_spearman(tmp_path):
    """The validation figure is Spearman's rank correlation (scipy) of held-out predictions and outcomes."""
    from scipy.stats import spearmanr

    from skillaudit.analysis.counterfactual import _spearman

    rng = np.random.default_rng(3)
    a, b = rng.random(50), (rng.random(50) < 0.5).astype(float)
    assert _spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)
    assert _spearman(np.ones(5), b[:5]) is None


def test_prune_uses_the_masks_first_and_says_so(tmp_path):
    """With mask re-runs, H (never retrieved apart from N) is pruned on measured evidence, N is not, and the library verdict is skill-specific."""
    main, arms = _mask_world(n=150)
    path = _write(tmp_path / "m.jsonl", main + arms)
    doc = json.loads(CliRunner().invoke(cli, ["prune", path, "--skills", str(tmp_path), "--embedder", "none",
                                              "--bootstrap", "500", "--json"]).stdout)
    recs = {r["skill_id"]: r for r in doc["recommendations"] if r["scope"] == "skill"}
    assert recs["H"]["action"] == "prune"
    assert "causes more harm than the average entry: from " in recs["H"]["reason"]
    assert "re-runs with the skill withheld" in recs["H"]["reason"]
    assert recs["H"]["evidence"]["basis"].endswith("(mask arms): measured")
    assert recs["N"]["action"] != "prune" and "re-runs do not show it worse" in recs["N"]["reason"]
    (lib,) = doc["library"]
    assert lib["verdict"] == "skill-specific" and "measured by 600 re-runs" in lib["text"]
    assert not [r for r in doc["recommendations"] if r["scope"] == "library"]


def test_verify_measures_what_prune_projects(tmp_path):
    """Projected RAE assumes emptied pairs fall back to their disabled outcome; measured uses the pruned re-runs."""
    from skillaudit.analysis.verify import verify

    # t1: retrieves [H] (emptied by pruning H), harmed; its re-run without H passes -> flip 0
    # t2: retrieves [H, N], harmed; re-run (N only) passes -> flip 0 (the projection kept -1)
    # t3: retrieves [N], rescued, untouched -> flip +1
    recs = [*_main("t1", False, True, ["H"]), *_main("t2", False, True, ["H", "N"]),
            *_main("t3", True, False, ["N"]),
            _arm("t1", "pruned", True, meta={"excluded": ["H"]}),
            _arm("t2", "pruned", True, shown=["N"], meta={"excluded": ["H"]})]
    path = _write(tmp_path / "v.jsonl", recs)
    runs = load_runs([path])
    res = verify(runs, load_arms([path], runs), n_boot=0)
    overall = next(r for r in res.rows if r.skill_id is None)
    assert overall.excluded == ("H",) and overall.n_rerun == 2 and overall.n_pairs == 3
    assert overall.before == pytest.approx((-1 - 1 + 1) / 3)
    assert overall.projected == pytest.approx((0 - 1 + 1) / 3)  # t1 falls back, t2 keeps its harm
    assert overall.measured == pytest.approx((0 + 0 + 1) / 3)
    h = next(r for r in res.rows if r.skill_id == "H")
    assert (h.n_pairs, h.projected, h.measured) == (2, pytest.approx(-0.5), pytest.approx(0.0))
    doc = res.to_dict()
    assert doc["schema"] == "skillaudit.verify/v1" and doc["missing_reruns"] == 0
    assert doc["projected"][0]["projected"] == overall.projected and doc["measured"][0]["n_rerun"] == 2


def test_aa_rate_is_compared_with_the_flip_rate_of_the_same_pairs(tmp_path):
    """The between-conditions flip rate beside the A/A rate counts only the pairs that have a replicate."""
    recs = [*_main("t1", True, False, ["a"]), *_main("t2", False, True, ["a"]), *_main("t3", True, True, None),
            *_main("t4", True, True, ["a"]), _arm("t3", "replicate", False), _arm("t4", "replicate", True)]
    path = _write(tmp_path / "r.jsonl", recs)
    runs = load_runs([path])
    g = compute_metrics(runs, n_boot=0, arms=load_arms([path], runs)).groups[0]
    assert (g.b + g.c) / g.n_pairs == pytest.approx(2 / 4)  # over every pair
    assert g.aa_pairs == 2 and g.aa_flip_rate == pytest.approx(1 / 2)
    assert g.aa_between_flip_rate == pytest.approx(0.0)  # t3 and t4 do not flip between the conditions


_PLANTED = {"h1": -0.2, "h2": -0.1, "n1": 0.0, "n2": 0.0, "g1": 0.1, "n3": 0.0}


def _linear_mask_world(seed, n=150, masks=4):
    """Each task retrieves 3 of 6 skills; its pass probability is a task baseline plus the planted
    effect of every skill it was shown (a linear probability model, the surrogate's own form)."""
    rng = np.random.default_rng(seed)
    ids, recs = list(_PLANTED), []
    for t in range(n):
        shown = [str(s) for s in rng.choice(ids, 3, replace=False)]
        base = rng.uniform(0.35, 0.65)
        recs += _main(f"t{t}", rng.random() < base + sum(_PLANTED[s] for s in shown), rng.random() < base, shown)
        for m in range(masks):
            keep = rng.random(3) < 0.5
            kept = [s for s, k in zip(shown, keep, strict=True) if k]
            withheld = [s for s, k in zip(shown, keep, strict=True) if not k]
            recs.append(_arm(f"t{t}", "mask", rng.random() < base + sum(_PLANTED[s] for s in kept),
                             kept=kept, withheld=withheld, seed=m))
    return recs


def test_mask_intervals_cover_the_planted_effects_over_many_seeds(tmp_path):
    """200 simulated libraries (150 tasks x 4 masks): each planted effect's 95% interval covers it in at least 89% of them, a null skill's excludes 0 in at most 9% on average, and the -20 pp skill is found in at least 85%."""
    cover = dict.fromkeys(_PLANTED, 0)
    excludes = dict.fromkeys(_PLANTED, 0)
    n = 200
    for seed in range(n):
        path = _write(tmp_path / "w.jsonl", _linear_mask_world(seed))
        runs = load_runs([path])
        ce = causal_effects(runs, load_arms([path], runs), n_boot=300, seed=seed)
        for sid, true in _PLANTED.items():
            lo, hi = ce.get(sid)["causal_ci"]
            cover[sid] += lo <= true <= hi
            excludes[sid] += not lo <= 0 <= hi
    assert min(cover.values()) / n >= 0.89
    assert np.mean([excludes[s] for s in ("n1", "n2", "n3")]) / n <= 0.09
    assert excludes["h1"] / n >= 0.85


def test_arm_captions_name_the_interval_the_arm_effects_used(tmp_path):
    """The arms' captions (metrics' terminal table, report.md and report.html) are the arm effects' own
    `method`: the Tango score interval inverting the score test `_scored` ran (no bootstrap), and
    p its test; with epochs, the cluster-adjusted test."""
    main, arms = _injection_world()
    log = _write(tmp_path / "runs.jsonl", main + arms)
    doc = json.loads(CliRunner().invoke(cli, ["metrics", log, "--bootstrap", "100", "--json"]).output)
    method = doc["groups"][0]["arms"]["random"]["method"]
    assert method == {"interval": "Tango score interval inverting the score McNemar (Tango) test",
                      "p": "the score McNemar (Tango) test the interval inverts"}
    text = " ".join(CliRunner().invoke(cli, ["metrics", log, "--bootstrap", "100"], terminal_width=400).output.split())
    assert f"95% CI: {method['interval']}, task-level; p: {method['p']}" in text
    out = tmp_path / "report"
    res = CliRunner().invoke(cli, ["audit", log, "--out", str(out), "--bootstrap", "100", "-q"])
    assert res.exit_code == 0, res.output
    for name in ("report.md", "report.html"):
        page = (out / name).read_text(encoding="utf-8")
        assert f"CIs: {method['interval']}, task-level; p: {method['p']}." in page, name
        assert "Task-level bootstrap CIs" not in page
    # several epochs per task: the interval inverts the cluster-adjusted test
    main2 = [{**r, "epoch": e} for r in main for e in (1, 2)]
    arms2 = [{**r, "epoch": e} for r in arms for e in (1, 2)]
    log2 = _write(tmp_path / "epochs.jsonl", main2 + arms2)
    doc2 = json.loads(CliRunner().invoke(cli, ["metrics", log2, "--bootstrap", "100", "--json"]).output)
    assert "cluster-adjusted score McNemar" in doc2["groups"][0]["arms"]["random"]["method"]["interval"]
