"""The command line: help everywhere, exact one-line errors with exit 2, metrics and validate."""

from __future__ import annotations

import json

import click
import pytest
from _factories import make_skill, pair
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.errors import RunLogError


def _all_commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, (*prefix, name))


def test_every_command_has_help():
    """Every command and subcommand prints --help with a description, exit 0."""
    runner = CliRunner()
    names = list(_all_commands(cli))
    assert ("metrics",) in [n for n, _ in names] and ("validate",) in [n for n, _ in names]
    for name, cmd in names:
        result = runner.invoke(cli, [*name, "--help"])
        assert result.exit_code == 0, name
        assert cmd.help and len(cmd.help.strip()) > 20, f"{name} has no real help"


def test_metrics_json_document(write_jsonl):
    """--json prints one skillaudit.metrics/v1 document with all contract fields."""
    recs = []
    for i in range(12):
        recs += pair(f"t{i}", i % 3 == 0, i % 2 == 0, retrieved=["a"] if i < 10 else None, model="m", benchmark="x")
    result = CliRunner().invoke(cli, ["metrics", str(write_jsonl(recs)), "--json", "--bootstrap", "500"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "skillaudit.metrics/v1"
    fields = {"model", "benchmark", "n_pairs", "n_cond", "n_skip", "acc_enabled", "acc_disabled", "b", "c",
              "cond_b", "cond_c", "skip_b", "skip_c", "oae", "rae", "delta_skip", "agg_lift", "selection_gap",
              "sign_disagreement", "reportable", "oae_ci", "rae_ci", "agg_lift_ci", "mcnemar_p",
              "mcnemar_p_cond", "funnel"}
    assert [(g["model"], g["benchmark"]) for g in doc["groups"]] == [("m", "x"), ("m", "*")]
    assert fields <= set(doc["groups"][0])
    assert doc["groups"][0]["n_cond"] == 10


def test_metrics_table_marks_sign_disagreement(write_jsonl):
    """The human table shows percentage points and flags sign disagreement in words."""
    recs = []
    for i in range(10):
        recs += pair(f"r{i}", i >= 2, True, retrieved=["s"])
    for i in range(10):
        recs += pair(f"s{i}", False, False)
    result = CliRunner().invoke(cli, ["metrics", str(write_jsonl(recs)), "--bootstrap", "200"])
    assert result.exit_code == 0
    assert "⚠ sign" in result.stdout and "-20.0" in result.stdout and "+80.0" in result.stdout


def test_metrics_reads_stdin(write_jsonl):
    """'-' reads the run log from standard input."""
    text = "\n".join(json.dumps(r) for r in pair("t", True, False, retrieved=["a"]))
    result = CliRunner().invoke(cli, ["metrics", "-", "--json", "--bootstrap", "0"], input=text)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["groups"][0]["cond_b"] == 1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "Error: runs.jsonl:1: invalid JSON (column 2)\n"),
        ('"text"', "Error: runs.jsonl:1: record must be a JSON object, got string\n"),
        ('{"task_id": "t", "condition": "sideways", "correct": true}',
         'Error: runs.jsonl:1: unknown condition "sideways" (expected enabled or disabled; aliases on/off, skills_on/skills_off)\n'),
        ('{"task_id": "t", "condition": "on", "correct": null}',
         "Error: runs.jsonl:1: 'correct' must be true/false or 0/1, got null\n"),
        ('{"task_id": "t", "condition": "on", "correct": true, "epoch": -1}',
         "Error: runs.jsonl:1: 'epoch' must be an integer >= 1, got -1\n"),
    ],
)
def test_bad_input_is_one_line_exit_2(write_jsonl, tmp_path, monkeypatch, line, message):
    """Malformed input exits 2 with exactly one line naming file and line, no traceback."""
    monkeypatch.chdir(tmp_path)
    write_jsonl([line])
    for command in (["metrics", "runs.jsonl"], ["validate", "runs.jsonl"]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 2
        assert result.stderr == message
        assert "Traceback" not in result.output


def test_missing_file_and_duplicate(write_jsonl, tmp_path, monkeypatch):
    """A missing file and a duplicate key are exit-2 one-liners too."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["metrics", "absent.jsonl"])
    assert (result.exit_code, result.stderr) == (2, "Error: absent.jsonl: no such file\n")
    write_jsonl([*pair("t", True, True), {"task_id": "t", "condition": "disabled", "correct": True}])
    result = CliRunner().invoke(cli, ["metrics", "runs.jsonl"])
    assert result.exit_code == 2
    assert result.stderr == ("Error: runs.jsonl:3: duplicate disabled record for model='default' "
                             "benchmark='default' task_id='t' epoch=1 (first at runs.jsonl:2)\n")


def test_debug_shows_the_exception(write_jsonl, tmp_path, monkeypatch):
    """--debug lets the original exception through for a traceback."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(["[]"])
    result = CliRunner().invoke(cli, ["--debug", "metrics", "runs.jsonl"])
    assert isinstance(result.exception, RunLogError)


def test_unpaired_warning_and_strict(write_jsonl, tmp_path, monkeypatch):
    """Unpaired records are a warning by default and an exit-2 error with --strict."""
    monkeypatch.chdir(tmp_path)
    write_jsonl([*pair("t", True, False, retrieved=["a"]), {"task_id": "u", "condition": "on", "correct": True}])
    result = CliRunner().invoke(cli, ["metrics", "runs.jsonl", "--bootstrap", "0", "--json"])
    assert result.exit_code == 0
    assert "warning: 1 record(s) without their other condition were left out" in result.stderr
    json.loads(result.stdout)  # warnings never mix into the JSON on stdout
    result = CliRunner().invoke(cli, ["metrics", "runs.jsonl", "--strict"])
    assert result.exit_code == 2
    assert result.stderr == ("Error: runs.jsonl:3: default/default/u epoch 1 has only its enabled record "
                             "(1 unpaired record(s); drop --strict to leave them out)\n")


def test_validate_skills_lists_problems_and_exits_1(tmp_path):
    """validate --skills prints every problem and exits 1; a clean library exits 0."""
    make_skill(tmp_path / "lib", "good")
    make_skill(tmp_path / "lib", "Bad")
    result = CliRunner().invoke(cli, ["validate", "--skills", str(tmp_path / "lib")])
    assert result.exit_code == 1
    assert "name 'Bad' must be lowercase" in result.stdout
    assert result.stderr == f"Error: {tmp_path / 'lib'}: 1 problem(s)\n"
    ok = tmp_path / "ok"
    make_skill(ok, "fine")
    result = CliRunner().invoke(cli, ["validate", "--skills", str(ok)])
    assert result.exit_code == 0 and "1 valid skill(s)" in result.stdout


def test_metrics_p_cond_is_task_level_and_mid_p_is_an_option(tmp_path):
    """metrics --json groups carry p_cond, the cluster-adjusted score test the RAE interval inverts when tasks have several epochs; --mid-p swaps in the mid-p sign-flip test."""
    from skillaudit.runs.simulate import simulate

    runs, _ = simulate(n_tasks=200, n_harmful=2, epochs=3, seed=1).write(tmp_path / "sim")
    doc = json.loads(CliRunner().invoke(cli, ["metrics", str(runs), "--json", "--bootstrap", "0"]).stdout)
    g = doc["groups"][0]
    assert g["p_cond_test"] == "cluster-adjusted score McNemar (Durkalski; task as the unit)"
    assert g["n_cond_tasks"] * 3 == g["n_cond"]
    lo, hi = g["rae_ci"]
    assert (lo > 0 or hi < 0) == (g["p_cond"] <= 0.05)
    mid = json.loads(CliRunner().invoke(cli, ["metrics", str(runs), "--json", "--bootstrap", "0",
                                              "--mid-p"]).stdout)["groups"][0]
    assert mid["p_cond_test"] == "mid-p sign-flip test of each task's summed flips"
    assert mid["p_cond"] != g["p_cond"]
    assert mid["mcnemar_p_cond"] == g["mcnemar_p_cond"]  # kept as it is


def test_simulate_writes_a_named_scenario(tmp_path):
    """simulate --scenario writes the scenario's runs, library and truth."""
    res = CliRunner().invoke(cli, ["simulate", "--out", str(tmp_path / "s"), "--scenario", "model-split"])
    assert res.exit_code == 0, res.output
    truth = json.loads((tmp_path / "s" / "truth.json").read_text())
    assert truth["settings"]["models"] == ["model-a", "model-b"] and truth["settings"]["model_signs"] == [1.0, -1.0]


def _depth_log(path, k, flips):
    """A log of one task per flip ('b' rescue, 'c' harm, '=' tie) whose enabled records log meta.top_k = k."""
    lines = []
    for i, f in enumerate(flips):
        on, off = {"b": (1, 0), "c": (0, 1), "=": (1, 1)}[f]
        lines.append({"task_id": f"t{i}", "condition": "enabled", "correct": on, "retrieved": ["s1"],
                      "meta": {"harness": "skillaudit", "top_k": k}})
        lines.append({"task_id": f"t{i}", "condition": "disabled", "correct": off})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return str(path)


def test_metrics_by_top_k_gives_one_result_per_retrieval_depth(tmp_path):
    """metrics --by-top-k splits the logs by their logged depth and computes each depth's RAE on its own."""
    a = _depth_log(tmp_path / "k1.jsonl", 1, "bbc=")
    b = _depth_log(tmp_path / "k5.jsonl", 5, "cc=")
    r = CliRunner().invoke(cli, ["metrics", a, b, "--by-top-k", "--bootstrap", "0", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    got = {d["top_k"]: next(g for g in d["groups"] if g["benchmark"] == "default")["rae"] for d in doc["by_top_k"]}
    assert got == {1: pytest.approx((2 - 1) / 4), 5: pytest.approx(-2 / 3)}
    mixed = tmp_path / "mixed.jsonl"
    text = (tmp_path / "k1.jsonl").read_text(encoding="utf-8")
    text += (tmp_path / "k5.jsonl").read_text(encoding="utf-8").replace('"task_id": "t', '"task_id": "u')
    mixed.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(cli, ["metrics", str(mixed), "--by-top-k"])
    assert r.exit_code == 2
    assert r.output == (f"Error: {mixed}: holds runs of several retrieval depths (1, 5); "
                        "--by-top-k needs one depth per file\n")
