"""Issue 56 step 3b: per-skill efficiency (`analysis.efficiency.skill_efficiency`) and rule S107
end to end: a skill whose retrieving runs cost much more with skills than without, and more than
the library's on the same benchmark, with no accuracy effect, is advised a rewrite; a library whose
every skill costs alike singles none out."""

from __future__ import annotations

import json
import random

import numpy as np
from click.testing import CliRunner

from skillaudit.analysis.efficiency import efficiency_harm, skill_efficiency
from skillaudit.cli import cli
from skillaudit.runs.inputs import load_inputs


def _log(tmp_path, heavy_factor: float, n: int = 120, seed: int = 0):
    rng = random.Random(seed)
    recs = []
    names = ["a", "b", "c", "heavy"]
    for i in range(n):
        sk = names[i % 4]
        ok = rng.random() < 0.5
        base = rng.randint(80, 120)
        factor = (heavy_factor if sk == "heavy" else 1.25) * rng.uniform(0.85, 1.15)
        for cond, prompt in (("enabled", int(base * factor)), ("disabled", base)):
            rec = {"task_id": f"t{i}", "condition": cond, "correct": ok,
                   "meta": {"usage": {"prompt_tokens": prompt, "completion_tokens": 20}, "latency_s": 1.0}}
            if cond == "enabled":
                rec["retrievals"] = [{"query": "q", "skills": [{"id": sk, "score": 1.0}]}]
            recs.append(rec)
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    lib = tmp_path / "skills"
    for s in names:
        (lib / s).mkdir(parents=True, exist_ok=True)
        (lib / s / "SKILL.md").write_text(f"---\nname: {s}\ndescription: Use for case {s}.\n---\nDo {s}.\n")
    return path, lib


def test_a_costly_skill_is_named_and_its_ratio_is_the_hodges_lehmann_of_the_log_ratios(tmp_path):
    path, _ = _log(tmp_path, 4.0)
    figs = skill_efficiency(load_inputs([str(path)], cost=True).cost_table)["default"]
    assert set(figs) == {"heavy"}  # the others' median ratio (~1.2) is below the screen's 1.5
    tok = figs["heavy"]["tokens"]
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    on = {r["task_id"]: sum(r["meta"]["usage"].values()) for r in recs if r["condition"] == "enabled"}
    off = {r["task_id"]: sum(r["meta"]["usage"].values()) for r in recs if r["condition"] == "disabled"}
    d = np.array([np.log(on[f"t{i}"] / off[f"t{i}"]) for i in range(120) if i % 4 == 3])
    walsh = (d[:, None] + d[None, :])[np.triu_indices(d.size)] / 2
    assert tok["n_tasks"] == 30 and np.isclose(tok["ratio"], np.exp(np.median(walsh)))
    assert tok["ratio_ci"][0] > 2.5 and tok["relative_ci"][0] > 1 and efficiency_harm(figs["heavy"]) == "tokens"


def test_prune_advises_rewriting_the_costly_skill_only(tmp_path):
    path, lib = _log(tmp_path, 4.0)
    res = CliRunner().invoke(cli, ["prune", str(path), "--skills", str(lib), "--json"])
    assert res.exit_code == 0, res.output
    by = {r["skill_id"]: r for r in json.loads(res.output)["recommendations"] if r.get("skill_id")}
    assert (by["heavy"]["rule"], by["heavy"]["action"]) == ("S107", "rewrite")
    assert by["heavy"]["reason"].startswith("costs more for no accuracy gain: where it was retrieved")
    assert all(by[s]["rule"] != "S107" for s in "abc")


def test_a_library_whose_skills_all_cost_alike_singles_none_out(tmp_path):
    """Every skill ~3.75x: a cost of retrieving at all (the efficiency table says so per model), not of one skill."""
    path, lib = _log(tmp_path, 1.25)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    for r in recs:
        if r["condition"] == "enabled":
            r["meta"]["usage"]["prompt_tokens"] *= 3
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    figs = skill_efficiency(load_inputs([str(path)], cost=True).cost_table)["default"]
    assert set(figs) == {"a", "b", "c", "heavy"} and not any(efficiency_harm(f) for f in figs.values())
    res = CliRunner().invoke(cli, ["prune", str(path), "--skills", str(lib), "--json"])
    assert all(r.get("rule") != "S107" for r in json.loads(res.output)["recommendations"])
