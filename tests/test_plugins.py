"""Plugins from an installed package: a tiny distribution (a dist-info folder with entry points and
its module, made in the test: no network, no build) whose agent, grader, importer and engine are
listed by `skillaudit plugins` and used by `run --agent NAME`, a task file's `grader: NAME`,
`import NAME` and `run --engine NAME`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli

REPO = Path(__file__).resolve().parents[1]

MODULE = '''
import json

import click

ENGINE_CALLS = []


def agent(task, skills):
    """Loads the first catalog skill with skills; answers 42 with them, 41 without."""
    if skills is None:
        return "41"
    skills.load(skills.catalog()[0]["name"])
    return {"answer": "the answer is 42", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}


def grade(task, answer):
    """Correct when the reply holds the task's `expected` value."""
    return str(task["expected"]) in answer


class PairwiseJudge:
    pairwise = True

    def __call__(self, task, answer):
        return True


judge = PairwiseJudge()


@click.command("demo")
@click.option("-o", "--output", required=True)
def import_cmd(output):
    """Writes one pair."""
    with open(output, "w") as fh:
        for cond, ok in (("enabled", True), ("disabled", False)):
            fh.write(json.dumps({"task_id": "x", "condition": cond, "correct": ok}) + "\\n")
    click.echo(f"demo: wrote 2 records to {output}", err=True)


def execute(plan, one, writer, client, summary, concurrency, quiet, on_record):
    """A serial engine: one episode at a time, in plan order."""
    from skillaudit.engine.loop import execute as threads

    ENGINE_CALLS.append(len(plan.episodes))
    threads(plan, one, writer, client, summary, 1, True, on_record)
'''

ENTRY_POINTS = """[skillaudit.agents]
demo = demo_plugin:agent

[skillaudit.graders]
demo-grader = demo_plugin:grade
pairjudge = demo_plugin:judge

[skillaudit.importers]
demo = demo_plugin:import_cmd

[skillaudit.engines]
serial = demo_plugin:execute
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist = site / "skillaudit_demo_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: skillaudit-demo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "demo_plugin.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(site))
    import sys

    sys.modules.pop("demo_plugin", None)
    yield site
    sys.modules.pop("demo_plugin", None)


def _tasks(tmp_path: Path, key: str = "grader", value: str = "demo-grader") -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"question {i}", key: value, "expected": 42}) + "\n"
                            for i in range(3)))
    return path


def test_plugins_lists_builtins_and_the_installed_package(plugin):
    res = CliRunner().invoke(cli, ["plugins"])
    assert res.exit_code == 0, res.output
    assert "  demo         skillaudit-demo-plugin 0.1  demo_plugin:agent" in res.output
    assert "  search       built-in  skillaudit.agents.protocol:search_agent" in res.output
    doc = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    got = {(p["kind"], p["name"]): p["origin"] for p in doc["plugins"]}
    assert got[("graders", "demo-grader")] == got[("importers", "demo")] == "skillaudit-demo-plugin 0.1"
    assert got[("engines", "threads")] == "built-in" and got[("engines", "serial")] == "skillaudit-demo-plugin 0.1"


def test_run_with_a_plugin_agent_grader_and_engine(plugin, tmp_path):
    """`run --agent demo --engine serial` on a task file graded by `grader: demo-grader`: the
    plugin agent answers, the plugin grader scores (with skills 42: correct; without: 41), the
    plugin engine executed the plan."""
    import demo_plugin

    skills = tmp_path / "skills"
    shutil.copytree(REPO / "skills", skills)
    out = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["run", "--tasks", str(_tasks(tmp_path)), "--agent", "demo", "--engine", "serial",
                                   "--skills", str(skills), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 6 and all(r["error"] is None for r in recs)
    assert {r["condition"]: r["correct"] for r in recs} == {"enabled": True, "disabled": False}
    assert all(r["meta"]["agent"] == "demo" for r in recs)
    assert demo_plugin.ENGINE_CALLS == [6]


def test_import_with_a_plugin_importer(plugin, tmp_path):
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(cli, ["import", "demo", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == 2
    assert "demo" in CliRunner().invoke(cli, ["import", "--help"]).output


def test_unknown_or_unsupported_plugins_are_one_line(plugin, tmp_path):
    skills = tmp_path / "skills"
    shutil.copytree(REPO / "skills", skills)
    base = ["run", "--tasks", str(_tasks(tmp_path)), "--skills", str(skills), "--out", str(tmp_path / "o.jsonl")]
    res = CliRunner().invoke(cli, [*base, "--agent", "nope"])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "--agent nope: no agent named 'nope' (installed: search, catalog, demo;" in res.output
    res = CliRunner().invoke(cli, [*base, "--agent", "demo", "--engine", "warp"])
    assert res.exit_code == 2 and "--engine warp: no engine named 'warp'" in res.output
    res = CliRunner().invoke(cli, ["run", "--tasks", str(_tasks(tmp_path, value="pairjudge")), "--agent", "demo",
                                   "--skills", str(skills), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "grader 'pairjudge' is pairwise" in res.output
    res = CliRunner().invoke(cli, ["import", "nope", "-o", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 2
