"""Issue 55: sequential Monte Carlo stopping (`--mc-stop`, on by default) changes no verdict and no
rule: over the bundled sample and simulated libraries of other shapes, `rank` and `prune` with
stopping equal `--mc-stop off` in every decision, and each permutation p is within its stated Monte
Carlo error of the full count's."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.runs.simulate import simulate


def _json(args):
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _inputs(name, tmp_path):
    from skillaudit.demo import demo_paths

    if name == "sample":
        d = demo_paths()
        return [*map(str, d.runs)], str(d.skills)
    shapes = {
        "sim45": dict(n_tasks=600, n_skills=45, n_harmful=3, n_helpful=3, n_mixed=2, n_alias_pairs=2, n_unused=2,
                      models=("model-a", "model-b", "model-c"), seed=1),
        # every skill hurts a little (library-wide harm), epochs, two benchmarks, tasks that differ
        "dilution": dict(n_tasks=300, n_skills=20, n_harmful=0, n_helpful=0, dilution=0.5, epochs=3,
                         benchmarks=("b1", "b2"), task_noise=1.0, seed=4),
    }
    out = tmp_path / name
    simulate(**shapes[name]).write(out)
    return [str(out / "runs.jsonl")], str(out / "skills")


def _rows(doc):
    """The document without its settings and its library effects (the Monte Carlo figures)."""
    if isinstance(doc, dict):
        return {k: _rows(v) for k, v in doc.items() if k not in ("settings", "library")}
    if isinstance(doc, list):
        return [_rows(v) for v in doc]
    return doc


@pytest.mark.parametrize("name", ["sample", "sim45", "dilution"])
def test_stopping_changes_no_verdict_and_stays_within_its_monte_carlo_error(name, tmp_path):
    runs, skills = _inputs(name, tmp_path)
    base = [*runs, "--skills", skills, "--bootstrap", "300"]
    on, off = (_json(["rank", *base, "--mc-stop", v]) for v in ("on", "off"))
    assert on["settings"]["mc_stop"] == "on" and off["settings"]["mc_stop"] == "off"
    lib_on = {(e["model"], e["benchmark"]): e for e in on["library"]}
    lib_off = {(e["model"], e["benchmark"]): e for e in off["library"]}
    assert lib_on.keys() == lib_off.keys()
    tested = stopped = 0
    for key, a in lib_on.items():
        b = lib_off[key]
        assert (a["verdict"], a["direction"], a["recommendation"]) == (b["verdict"], b["direction"],
                                                                        b["recommendation"]), key
        if a["heterogeneity_p"] is None:
            assert b["heterogeneity_p"] is None
            continue
        tested += 1
        assert a["n_permutations"] <= b["n_permutations"]
        stopped += a["n_permutations"] < b["n_permutations"]
        # the stated Monte Carlo error is the one of the draws made
        p, n = a["heterogeneity_p"], a["n_permutations"]
        assert a["heterogeneity_mc_error"] == pytest.approx(math.sqrt(p * (1 - p) / n), abs=1e-6)
        # the two estimates (different numbers of draws, the same stream) agree within their errors
        se = math.hypot(a["heterogeneity_mc_error"] or 0.0, b["heterogeneity_mc_error"] or 0.0)
        assert abs(p - b["heterogeneity_p"]) <= 4 * se + 2 / n, (key, p, b["heterogeneity_p"])
    # every per-skill row equal (none of them is a Monte Carlo figure)
    assert _rows(on) == _rows(off)
    # and every decision of prune
    p_on, p_off = (_json(["prune", *base, "--embedder", "tfidf", "--mc-stop", v])["recommendations"]
                   for v in ("on", "off"))
    decisions = [[(r["skill_id"], r["scope"], r["action"], r["rule"], r.get("models")) for r in recs]
                 for recs in (p_on, p_off)]
    assert decisions[0] == decisions[1]
    if name != "sample":
        assert tested, "the shape ran no permutation test"
    if name == "sim45":  # the stopping did stop something there
        assert stopped
