"""`skillaudit rank` and `skillaudit simulate` through click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.runs.simulate import simulate


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("rank") / "sim"
    sim = simulate(n_tasks=500, n_skills=14, epochs=2, models=("m1", "m2"), seed=11)
    sim.write(out)
    return out, sim


def test_rank_json_contract(sim_dir):
    """--json prints skillaudit.rank/v1 with every skill, sorted most harmful first, shares summing to b - c."""
    out, sim = sim_dir
    res = CliRunner().invoke(cli, ["rank", str(out / "runs.jsonl"), "--skills", str(out / "skills"),
                                   "--json", "--bootstrap", "300"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "skillaudit.rank/v1"
    assert len(doc["models"]) == len(sim.settings["models"]) > 1  # one verdict per model
    for m in doc["models"]:
        rows = [s for s in doc["skills"] if s["model"] == m["model"]]
        assert {s["skill_id"] for s in rows} == set(sim.truth)
        nets = [(s["net"], s["share"]) for s in rows]
        assert nets == sorted(nets)
        t = m["totals"]
        assert sum(s["share"] for s in rows) == pytest.approx(t["cond_b"] - t["cond_c"])
    t = doc["totals"]
    assert sum(s["share"] for s in doc["skills"]) == pytest.approx(t["cond_b"] - t["cond_c"])
    assert {e["model"] for e in doc["library"]} == {m["model"] for m in doc["models"]}
    assert all(s["in_library"] is True for s in doc["skills"])
    assert all(isinstance(s["coef_ci"], list) or s["coef_ci"] is None for s in doc["skills"])


def test_rank_model_filter_and_score_scheme(sim_dir):
    """--model narrows the pairs (fewer retrievals than pooled) and --attribution score is accepted."""
    out, _ = sim_dir
    args = ["rank", str(out / "runs.jsonl"), "--json", "--bootstrap", "0"]
    pooled = json.loads(CliRunner().invoke(cli, args).stdout)
    one = json.loads(CliRunner().invoke(cli, [*args, "--model", "m1", "--attribution", "score"]).stdout)
    assert one["totals"]["n_cond"] < pooled["totals"]["n_cond"]
    assert one["settings"]["attribution"] == "score"


def test_rank_table_top(sim_dir):
    """The table lists the top N skills, in percentage points, and says how many were left out."""
    out, _ = sim_dir
    res = CliRunner().invoke(cli, ["rank", str(out / "runs.jsonl"), "--skills", str(out / "skills"),
                                   "--top", "3", "--bootstrap", "200"])
    assert res.exit_code == 0, res.output
    assert "Skills ranked by net rescues" in res.stdout
    assert "(top 3 of 14 skills; --top 0 shows all)" in res.stdout
    assert "shares add up to b - c" in res.stdout


def test_rank_unknown_model_is_an_error(sim_dir):
    """A --model that matches no pair exits 2 with a one-line message."""
    out, _ = sim_dir
    res = CliRunner().invoke(cli, ["rank", str(out / "runs.jsonl"), "--model", "nope"])
    assert res.exit_code == 2
    assert "Error: no pairs left after --model/--benchmark" in res.stderr


def test_rank_missing_file_is_an_error(tmp_path):
    """A missing run log exits 2 naming the file, without a traceback."""
    res = CliRunner().invoke(cli, ["rank", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 2
    assert f"{tmp_path / 'missing.jsonl'}: no such file" in res.stderr
    assert "Traceback" not in res.output


def test_simulate_command_writes_and_refuses_non_empty(tmp_path):
    """`skillaudit simulate --out DIR` writes runs and library, and refuses a non-empty folder with exit 2."""
    runner = CliRunner()
    res = runner.invoke(cli, ["simulate", "--out", str(tmp_path / "s"), "--tasks", "60", "--seed", "2"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "s" / "runs.jsonl").is_file() and (tmp_path / "s" / "skills").is_dir()
    again = runner.invoke(cli, ["simulate", "--out", str(tmp_path / "s")])
    assert again.exit_code == 2
    assert f"Error: {tmp_path / 's'}: already exists and is not an empty folder" in again.stderr


@pytest.mark.parametrize("command", [["rank", "--json", "--bootstrap", "0"], ["rank", "--bootstrap", "0"],
                                     ["metrics", "--json"]])
def test_rank_and_metrics_run_without_importing_scipy(sim_dir, command):
    """rank without a bootstrap and metrics never import scipy (its import is a quarter of rank's time)."""
    import subprocess
    import sys

    out, _ = sim_dir
    args = [command[0], str(out / "runs.jsonl"), "--skills", str(out / "skills"), *command[1:]]
    probe = ("import sys\nfrom click.testing import CliRunner\nfrom skillaudit.cli import cli\n"
             f"res = CliRunner().invoke(cli, {args!r})\n"
             "assert res.exit_code == 0, res.output\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'sklearn', 'pandas'}))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_rank_rows_carry_relative_effects_and_the_table_shows_vs_library(sim_dir):
    """rank --json rows carry model, relative_effect/ci/q; the table has a 'vs library' column and the library line."""
    out, _ = sim_dir
    args = ["rank", str(out / "runs.jsonl"), "--skills", str(out / "skills"), "--bootstrap", "300"]
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    used = [s for s in doc["skills"] if s["n_retrieved"] and s["identifiable"]]
    assert used and all(s["model"] and s["relative_effect"] is not None and len(s["relative_ci"]) == 2
                        and 0 <= s["relative_q"] <= 1 for s in used)
    table = CliRunner().invoke(cli, [*args, "--top", "3"]).stdout
    assert "vs library pp" in table and "library: " in table


def test_pool_models_gives_one_population_with_model_as_a_stratum(sim_dir):
    """--pool-models judges all models' pairs together: one set of rows with model '*'."""
    out, sim = sim_dir
    args = ["rank", str(out / "runs.jsonl"), "--json", "--bootstrap", "200"]
    per = json.loads(CliRunner().invoke(cli, args).stdout)
    pooled = json.loads(CliRunner().invoke(cli, [*args, "--pool-models"]).stdout)
    assert {s["model"] for s in per["skills"]} == set(sim.settings["models"])
    assert {s["model"] for s in pooled["skills"]} == {"*"}
    assert pooled["totals"] == per["totals"]


def test_rank_says_when_its_list_is_the_library_verdicts(tmp_path):
    """Issue 52 F8: under library-wide harm (every injected skill derails alike) rank's most-harmful
    list is what that verdict predicts, and rank says so under the table; with a harm specific to
    one skill it does not."""
    from skillaudit.runs.simulate import scenario

    runs, _ = scenario("dilution", seed=0).write(tmp_path / "wide")
    res = CliRunner().invoke(cli, ["rank", str(runs), "--bootstrap", "300"])
    assert res.exit_code == 0, res.output
    assert "library-wide" in res.stdout.lower()
    assert "The most-harmful order above is what the library-wide verdict predicts" in res.stdout
    runs, _ = scenario("two-harmful", seed=0).write(tmp_path / "specific")
    res = CliRunner().invoke(cli, ["rank", str(runs), "--bootstrap", "300"])
    assert res.exit_code == 0 and "what the library-wide verdict predicts" not in res.stdout
