"""`check` in CI formats: SARIF 2.1.0 and JUnit XML, each validated against the real schema
(../shared/data/schemas: oasis-tcs/sarif-spec and windyroad/JUnit-Schema, read from there, never
copied: the SARIF schema's licence is OASIS's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.runs.simulate import scenario

SCHEMAS = Path(__file__).resolve().parents[2] / "shared" / "data" / "schemas"


def _schema(name: str) -> Path:
    path = SCHEMAS / name
    if not path.is_file():
        pytest.skip(f"{path}: the public schema is absent (../shared is not mounted)")
    return path


@pytest.fixture(scope="module")
def harmful(tmp_path_factory):
    """A planted library with two harmful skills (check fails on them), in the working folder's
    terms: the skills folder is reported relative to it."""
    root = tmp_path_factory.mktemp("ci")
    sim = scenario("two-harmful", seed=0)
    runs, lib = sim.write(root / "s")
    return sim, runs, lib


def _check(monkeypatch, runs, lib, *args):
    monkeypatch.chdir(Path(lib).parent)
    return CliRunner().invoke(cli, ["check", str(runs), "--skills", str(lib), "--bootstrap", "500", *args])


def test_sarif_validates_against_the_sarif_2_1_0_schema(harmful, monkeypatch):
    import jsonschema

    sim, runs, lib = harmful
    res = _check(monkeypatch, runs, lib, "--format", "sarif")
    assert res.exit_code == 1, res.output  # the gate's exit status is unchanged
    log = json.loads(res.stdout)
    schema = json.loads(_schema("sarif-schema-2.1.0.json").read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    (run,) = log["runs"]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert {"S101", "S102", "L001", "G001", "G003"} <= set(rules) and all(r["shortDescription"]["text"] for r in rules.values())
    errors = [r for r in run["results"] if r["level"] == "error"]
    assert {r["message"]["text"].split(" ")[0] for r in errors} >= set(sim.ids("harmful"))
    for r in errors:
        skill = r["message"]["text"].split(" ")[0]
        assert r["ruleId"] in rules
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == f"{Path(lib).name}/{skill}/SKILL.md"
    assert all(r["level"] in ("warning", "note") for r in run["results"] if r not in errors)


def test_junit_validates_against_the_junit_xsd(harmful, monkeypatch, tmp_path):
    xmlschema = pytest.importorskip("xmlschema")
    sim, runs, lib = harmful
    out = tmp_path / "check.xml"
    res = _check(monkeypatch, runs, lib, "--report", f"junit:{out}", "--report", f"sarif:{tmp_path / 'c.sarif'}")
    assert res.exit_code == 1, res.output
    assert res.stdout.splitlines()[0].startswith("FAIL ")  # the text view stays on stdout
    schema = xmlschema.XMLSchema(str(_schema("JUnit.xsd")))
    schema.validate(str(out))
    doc = schema.to_dict(str(out))
    (suite,) = doc["testsuite"]
    cases = {c["@name"]: c for c in suite["testcase"]}
    for harm in sim.ids("harmful"):
        assert "failure" in cases[f"{harm} (sim-model)"]
    assert "failure" in cases["gate: harmful"] and int(suite["@failures"]) >= 3
    assert json.loads((tmp_path / "c.sarif").read_text())["version"] == "2.1.0"


def test_report_format_errors_are_one_line(harmful, monkeypatch, tmp_path):
    _, runs, lib = harmful
    res = _check(monkeypatch, runs, lib, "--report", "xml:out.xml")
    assert res.exit_code == 2 and res.output.startswith("Error: --report xml:out.xml: expected FORMAT:PATH")


def test_hostile_names_stay_valid_xml_and_sarif():
    """A skill name or reason with markup, quotes and control characters: the JUnit XML still
    validates (characters XML cannot hold replaced) and the SARIF still parses as JSON."""
    import jsonschema

    xmlschema = pytest.importorskip("xmlschema")
    from skillaudit.decide.gate import Failure
    from skillaudit.report.ci import to_junit, to_sarif

    bad = 'ev"il<&>\x01\x1b[31m'
    doc = {"recommendations": {"recommendations": [
        {"scope": "skill", "skill_id": bad, "action": "prune", "rule": "S101", "models": ["m\x00"],
         "reason": f"harmful: {bad}", "evidence": {}}]}}
    failures = [Failure("harmful", f"{bad} (m): prune", model="m\x00", skill_id=bad)]
    xml = to_junit(doc, failures, ("harmful",))
    schema = xmlschema.XMLSchema(str(_schema("JUnit.xsd")))
    schema.validate(xml)
    assert "\x01" not in xml and "&lt;&amp;&gt;" in xml
    log = to_sarif(doc, failures)
    sarif_schema = json.loads(_schema("sarif-schema-2.1.0.json").read_text())
    jsonschema.validators.validator_for(sarif_schema)(sarif_schema).validate(json.loads(json.dumps(log)))
    assert log["runs"][0]["results"][0]["level"] == "error"


def test_github_commands_annotate_the_skill_files(harmful, monkeypatch):
    """--format github: one workflow command per decision, ::error on the failing ones, located at
    the skill's SKILL.md; messages escaped as GitHub reads them."""
    sim, runs, lib = harmful
    res = _check(monkeypatch, runs, lib, "--format", "github")
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    for harm in sim.ids("harmful"):
        assert any(line.startswith(f"::error file={Path(lib).name}/{harm}/SKILL.md,line=1,title=") for line in lines)
    assert all("\n" not in line and "::" in line[2:] for line in lines)


def test_markdown_summary_goes_to_the_step_summary(harmful, monkeypatch, tmp_path):
    """With $GITHUB_STEP_SUMMARY set, check appends its short Markdown summary there (and --format
    markdown prints it): the headline, then the decisions that fail or advise, at most 20 rows."""
    sim, runs, lib = harmful
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    res = _check(monkeypatch, runs, lib, "--format", "markdown")
    assert res.exit_code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n### skillaudit check: ❌ **fails** (") and res.stdout in text
    rows = [line for line in text.splitlines() if line.startswith("| ❌ |")]
    assert {r.split("|")[3].strip().strip("`").replace("\\-", "-") for r in rows} >= set(sim.ids("harmful"))
    assert sum(line.startswith("| ") for line in text.splitlines()) <= 21


def test_markdown_against_a_baseline_says_what_changed(harmful, monkeypatch, tmp_path):
    _, runs, lib = harmful
    base = tmp_path / "base.json"
    res = _check(monkeypatch, runs, lib, "--report", f"json:{base}")
    res = _check(monkeypatch, runs, lib, "--baseline", str(base), "--format", "markdown")
    assert "Nothing changed against the baseline." in res.stdout


def test_the_pre_commit_hooks_run_skillaudit_validate(monkeypatch):
    """.pre-commit-hooks.yaml: each hook's entry and default arguments are a working `skillaudit`
    command (run here on the bundled library and a bundled run log, as pre-commit would)."""
    import shlex

    import yaml

    repo = Path(__file__).resolve().parents[1]
    hooks = {h["id"]: h for h in yaml.safe_load((repo / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"skillaudit-validate-skills", "skillaudit-validate-runs"}
    demo = repo / "skillaudit" / "demo"
    monkeypatch.chdir(demo)
    for hook, files in ((hooks["skillaudit-validate-skills"], []),
                        (hooks["skillaudit-validate-runs"], ["sample_runs/qwen2.5-coder-0.5b_gsm8k.jsonl"])):
        argv = shlex.split(hook["entry"]) + list(hook.get("args", [])) + (files if hook.get("pass_filenames", True) else [])
        assert argv[0] == "skillaudit" and hook["language"] == "python"
        res = CliRunner().invoke(cli, argv[1:])
        assert res.exit_code == 0, res.output
    import re

    assert re.search(hooks["skillaudit-validate-skills"]["files"], "skills/percent-change/SKILL.md")
    assert re.search(hooks["skillaudit-validate-runs"]["files"], "runs/qwen.jsonl.gz")


def _parses(argv: list[str]) -> None:
    """`skillaudit ARGV` parses (every option known, values of the right type) without running."""
    import click

    # the root's context_settings as on the command line (click caches each command's help option
    # from the first context it sees: a bare one here would change what `--help` prints later)
    cmd, rest, parent = cli, list(argv), click.Context(cli, info_name="skillaudit", **cli.context_settings)
    name = "skillaudit"
    while isinstance(cmd, click.Group):  # `ci init`, `import harbor`: down to the command
        name, *rest = rest
        cmd, parent = cmd.get_command(parent, name), click.Context(cmd.get_command(parent, name), info_name=name,
                                                                  parent=parent)
    cmd.make_context(name, rest, parent=parent.parent)


def test_ci_init_writes_a_workflow_whose_commands_parse(tmp_path, monkeypatch):
    """`ci init`: a workflow that re-runs with --reuse and checks against the committed baseline with
    SARIF and annotations on pull requests, refreshes on the branch; each skillaudit command in it
    parses with today's options; an existing file is kept unless --force."""
    import shlex

    import yaml

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["ci", "init", "--tasks", "my tasks.jsonl", "--skills", ".claude/skills"])
    assert res.exit_code == 0, res.output
    wf = yaml.safe_load((tmp_path / ".github" / "workflows" / "skillaudit.yml").read_text())
    assert wf[True]["pull_request"]["paths"] == [".claude/skills/**"]  # YAML 1.1 reads the key `on` as True
    steps = wf["jobs"]["skills"]["steps"]
    runs = [s["run"] for s in steps if "skillaudit " in s.get("run", "")]
    lines = [ln.strip() for r in runs for ln in r.splitlines() if ln.strip().startswith("skillaudit ")]
    assert [ln.split()[1] for ln in lines] == ["run", "check", "audit"]
    for ln in lines:
        argv = shlex.split(ln.replace("${{ vars.SKILLAUDIT_ENDPOINT }}", "http://x/v1")
                           .replace("${{ vars.SKILLAUDIT_MODEL }}", "m"))
        _parses(argv[1:])
    assert "--reuse skillaudit/runs.jsonl" in lines[0] and "--tasks 'my tasks.jsonl'" in lines[0]
    assert "--report sarif:skillaudit.sarif" in lines[1] and any(s.get("uses", "").startswith(
        "github/codeql-action/upload-sarif") for s in steps)
    res = CliRunner().invoke(cli, ["ci", "init", "--tasks", "t.jsonl"])
    assert res.exit_code == 2 and "exists; pass --force to replace it" in res.output
    res = CliRunner().invoke(cli, ["ci", "init"])
    assert res.exit_code == 2 and "give one of --tasks FILE or --benchmark NAME" in res.output
