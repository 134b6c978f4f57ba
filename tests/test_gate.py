"""The CI gate (`skillaudit check`) and audit comparison (`skillaudit diff`) on planted data."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.decide.gate import rae_change
from skillaudit.runs.simulate import scenario, simulate


def _check(*args):
    return CliRunner().invoke(cli, ["check", *args, "--bootstrap", "1000"])


def test_a_harmful_skill_fails_the_gate_naming_it(tmp_path):
    """Planted harmful skills: exit 1 and one 'FAIL harmful: <skill> (<model>): prune: ...' line each."""
    sim = scenario("two-harmful", seed=0)
    runs, lib = sim.write(tmp_path / "s")
    res = _check(str(runs), "--skills", str(lib))
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    for harm in sim.ids("harmful"):
        assert any(line.startswith(f"FAIL harmful: {harm} (sim-model): ") for line in lines)
    assert all(line.startswith("FAIL ") for line in lines)
    doc = json.loads(_check(str(runs), "--skills", str(lib), "--json").stdout)
    assert doc["schema"] == "skillaudit.check/v1" and doc["passed"] is False
    assert {f["skill_id"] for f in doc["failures"]} >= set(sim.ids("harmful"))


def test_a_no_effect_library_passes(tmp_path):
    """No planted effect: exit 0 with one 'ok' line."""
    runs, lib = simulate(n_tasks=400, n_harmful=0, n_helpful=0, epochs=2, seed=5).write(tmp_path / "s")
    res = _check(str(runs), "--skills", str(lib), "--fail-on", "harmful", "--fail-on", "library")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("ok: nothing fails (harmful, library) on 800 pairs")


def test_library_wide_harm_fails_on_library_only(tmp_path):
    """Dilution passes --fail-on harmful (nothing to prune) and fails --fail-on library."""
    runs, lib = scenario("dilution", seed=2).write(tmp_path / "s")
    assert _check(str(runs), "--skills", str(lib), "--fail-on", "harmful").exit_code == 0
    res = _check(str(runs), "--skills", str(lib), "--fail-on", "library")
    assert res.exit_code == 1
    assert res.stdout.startswith("FAIL library: sim-model on sim-bench: Harm is library-wide (")


def test_baseline_regressions(tmp_path):
    """Against a clean baseline audit, a library that turned harmful fails with newly-harmful and RAE lines."""
    good, lib = simulate(n_tasks=800, n_harmful=0, n_helpful=0, epochs=2, seed=7).write(tmp_path / "good")
    out = tmp_path / "report"
    r = CliRunner().invoke(cli, ["audit", str(good), "--skills", str(lib), "--out", str(out), "--quiet",
                                 "--embedder", "tfidf", "--bootstrap", "1000"])
    assert r.exit_code == 0, r.output
    bad_sim = scenario("two-harmful", seed=0)
    bad, bad_lib = bad_sim.write(tmp_path / "bad")
    res = _check(str(bad), "--skills", str(bad_lib), "--baseline", str(out / "audit.json"),
                 "--fail-on", "regression")
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    for harm in bad_sim.ids("harmful"):
        assert any(line.startswith(f"FAIL regression: {harm} (sim-model): newly harmful: ") for line in lines)
    same = _check(str(good), "--skills", str(lib), "--baseline", str(out / "audit.json"))
    assert same.exit_code == 0, same.output
    missing = _check(str(good), "--fail-on", "regression")
    assert missing.exit_code == 2
    assert "Error: --fail-on regression needs --baseline AUDIT.json (the last known good audit)" in missing.output


def test_diff_lists_what_changed(tmp_path):
    """diff of a check --json against itself changes nothing; against another run it names the new prunes."""
    a, lib = simulate(n_tasks=800, n_harmful=0, n_helpful=0, epochs=2, seed=7).write(tmp_path / "a")
    b_sim = scenario("two-harmful", seed=0)
    b, b_lib = b_sim.write(tmp_path / "b")
    for path, runs, skills in ((tmp_path / "a.json", a, lib), (tmp_path / "b.json", b, b_lib)):
        path.write_text(_check(str(runs), "--skills", str(skills), "--json").stdout)
    same = CliRunner().invoke(cli, ["diff", str(tmp_path / "a.json"), str(tmp_path / "a.json")])
    assert same.exit_code == 0 and "no skill action or library verdict changed" in same.stdout
    d = json.loads(CliRunner().invoke(cli, ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                                            "--json"]).stdout)
    assert d["schema"] == "skillaudit.diff/v1"
    assert {x["skill_id"] for x in d["newly_harmful"]} == set(b_sim.ids("harmful"))
    bad = CliRunner().invoke(cli, ["diff", str(tmp_path / "a.json"), str(a)])
    assert bad.exit_code == 2 and "runs.jsonl:2: not valid JSON" in bad.output


def test_rae_change_interval_by_hand():
    """The change's interval combines the two runs' standard errors read off their 95% intervals."""
    d, ci = rae_change({"rae": -0.10, "rae_ci": [-0.2, 0.0]}, {"rae": -0.30, "rae_ci": [-0.4, -0.2]})
    se = ((0.2 / 3.919927969) ** 2 * 2) ** 0.5
    assert d == pytest.approx(-0.2)
    assert ci == pytest.approx([-0.2 - 1.959963984540054 * se, -0.2 + 1.959963984540054 * se])
