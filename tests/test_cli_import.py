"""`skillaudit import ...`: exit codes, exact error lines, atomic output, stdout output and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.runs import load_runs

# inspect_ai's own retry set-up warns about a tenacity parameter; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")

DATA = Path(__file__).parent / "data" / "importers"
EP_ON = str(DATA / "evalplus" / "enabled_eval_results.json")
EP_OFF = str(DATA / "evalplus" / "disabled_eval_results.json")


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_evalplus_writes_run_log_and_summary(tmp_path: Path) -> None:
    """A good import exits 0, writes a loadable run log and prints the summary on stderr."""
    out = tmp_path / "runs.jsonl"
    res = _run("import", "evalplus", "--enabled", EP_ON, "--disabled", EP_OFF, "--model", "m", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert res.stdout == ""
    assert res.stderr.splitlines()[0] == (
        "evalplus: 4 pair(s), 8 record(s) from 4 enabled and 4 disabled run(s); paired on (model, task id, "
        "epoch); benchmark from the task ids (HumanEval/ -> humaneval_plus, Mbpp/ -> mbpp_plus)"
    )
    assert res.stderr.splitlines()[-1] == f"wrote 8 records (4 pairs) to {out}"
    runs = load_runs([str(out)])
    assert runs.n_pairs == 4 and runs.models == ("m",) and runs.benchmarks == ("humaneval_plus",)


def test_wrong_format_is_one_line_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    """A run log passed as lm-eval samples fails with exit 2, the exact file:line message, no traceback."""
    bad = tmp_path / "runs.jsonl"
    bad.write_text('{"task_id": "a", "condition": "enabled", "correct": true}\n')
    out = tmp_path / "out.jsonl"
    res = _run("import", "lm-eval", "--enabled", str(bad), "--disabled", str(bad), "-o", str(out))
    assert res.exit_code == 2
    assert res.output == (
        f"Error: {bad}:1: not an lm-eval sample (no \"doc_id\"); expected an lm-eval "
        "samples_<task>_<date>.jsonl file (lm_eval --log_samples)\n"
    )
    assert "Traceback" not in res.output and not out.exists()


def test_wrong_format_for_evalplus_and_skillsbench(tmp_path: Path) -> None:
    """Other importers also exit 2 naming the file that has the wrong format."""
    other = tmp_path / "x.json"
    other.write_text('{"results": {}}')
    res = _run("import", "evalplus", "--enabled", str(other), "--disabled", EP_OFF, "-o", str(tmp_path / "o"))
    assert res.exit_code == 2
    assert res.output == (
        f"Error: {other}: not an EvalPlus results file (no \"eval\" object of task_id -> results); "
        "expected the *_eval_results.json that evalplus.evaluate writes\n"
    )
    res = _run("import", "skillsbench", EP_ON, "-o", str(tmp_path / "o"))
    assert res.exit_code == 2
    assert res.output == (
        f"Error: {EP_ON}: no list of trials; expected SkillsBench-style trials "
        "(JSON Lines, or JSON list / {\"trials\": [...]})\n"
    )


def test_inspect_rejects_a_file_that_is_not_a_log(tmp_path: Path) -> None:
    """`import inspect` on a non-log exits 2 with a message naming the file."""
    pytest.importorskip("inspect_ai")
    res = _run("import", "inspect", "--enabled", EP_ON, "--disabled", EP_OFF, "-o", str(tmp_path / "o"))
    assert res.exit_code == 2
    assert res.output.startswith(f"Error: {EP_ON}: not an Inspect AI log (.eval or .json, as written by inspect eval) (")
    assert len(res.output.splitlines()) == 1


def test_many_files_after_one_option_and_stdout_output(tmp_path: Path) -> None:
    """`--enabled A B --disabled C D` takes every file, and `-o -` prints the run log on stdout."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"task_id": "t1", "condition": "with-skills", "reward": 1, "skills_used": ["s"]}\n')
    b.write_text('{"task_id": "t1", "condition": "without-skills", "reward": 0}\n'
                 '{"task_id": "t2", "condition": "without-skills", "reward": 0}\n')
    res = _run("import", "skillsbench", str(a), str(b), "-o", "-")
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert [(x["task_id"], x["condition"], x["correct"]) for x in lines] == [
        ("t1", "enabled", True), ("t1", "disabled", False)]
    assert f"  left out: {b}:2: default/skillsbench/t2 epoch 1 (disabled): no enabled run with this key" in res.stderr
    # the greedy option: two files after one --enabled
    on2 = tmp_path / "on2_eval_results.json"
    on2.write_text(json.dumps({"eval": {"Mbpp/1": [{"task_id": "Mbpp/1", "base_status": "pass", "plus_status": "pass"}]}}))
    off2 = tmp_path / "off2_eval_results.json"
    off2.write_text(json.dumps({"eval": {"Mbpp/1": [{"task_id": "Mbpp/1", "base_status": "fail", "plus_status": "fail"}]}}))
    out = tmp_path / "runs.jsonl"
    res = _run("import", "evalplus", "--enabled", EP_ON, str(on2), "--disabled", EP_OFF, str(off2), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert load_runs([str(out)]).n_pairs == 5


def test_json_report_and_refusals(tmp_path: Path) -> None:
    """--json prints the skillaudit.import/v1 report; writing over an input or pairing nothing is exit 2."""
    out = tmp_path / "runs.jsonl"
    res = _run("import", "evalplus", "--enabled", EP_ON, "--disabled", EP_OFF, "-o", str(out), "--json", "-q")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "skillaudit.import/v1" and doc["pairs"] == 4 and doc["output"] == str(out)
    assert res.stderr == ""
    res = _run("import", "evalplus", "--enabled", EP_ON, "--disabled", EP_OFF, "-o", EP_ON)
    assert res.exit_code == 2
    assert res.output == f"Error: {EP_ON}: is one of the input files; write the run log elsewhere\n"
    lonely = tmp_path / "lonely.json"
    lonely.write_text(json.dumps({"eval": {"Mbpp/7": [{"task_id": "Mbpp/7", "base_status": "pass", "plus_status": "pass"}]}}))
    out2 = tmp_path / "none.jsonl"
    res = _run("import", "evalplus", "--enabled", str(lonely), "--disabled", EP_OFF, "-o", str(out2))
    assert res.exit_code == 2 and not out2.exists()
    assert res.stderr.splitlines()[-1] == (
        f"Error: nothing to write: no enabled run pairs with a disabled run; first: {lonely}: "
        "eval['Mbpp/7'][0]: default/mbpp_plus/Mbpp/7 epoch 1 (enabled): no disabled run with this key"
    )


def test_inspect_command_on_real_logs(tmp_path: Path) -> None:
    """`import inspect` on logs of a real (mockllm) Inspect eval writes paired records with retrievals."""
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def search_skills():
        async def execute(query: str):
            """Search skills.

            Args:
                query: What to look for.
            """
            return "Top skill: gcd-lcm-and-primes\n(use math.gcd)"

        return execute

    def outputs(input, tools, tool_choice, config):
        called = any(m.role == "tool" for m in input)
        out = (ModelOutput.for_tool_call("mockllm/model", "search_skills", {"query": "gcd"})
               if tools and not called else ModelOutput.from_content("mockllm/model", "The answer is 6."))
        out.usage = ModelUsage(input_tokens=5, output_tokens=5, total_tokens=10)
        return out

    logs = {}
    for cond, solver in (("on", [use_tools(search_skills()), generate()]), ("off", [generate()])):
        task = Task(dataset=[Sample(id=1, input="gcd(12, 18)?", target="6")], solver=solver,
                    scorer=includes(), name="gcd")
        [log] = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=outputs),
                             log_dir=str(tmp_path / cond), display="none")
        logs[cond] = log.location
    skills = tmp_path / "skills"
    for name in ("gcd-lcm-and-primes", "heapq-k-largest"):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill.\n---\nBody.\n")
    out = tmp_path / "runs.jsonl"
    res = _run("import", "inspect", "--enabled", logs["on"], "--disabled", logs["off"],
               "--skills", str(skills), "-o", str(out))
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["task_id"], r["condition"], r["correct"]) for r in recs] == [("1", "enabled", True), ("1", "disabled", True)]
    assert recs[0]["retrievals"] == [{"query": "gcd", "skills": [{"id": "gcd-lcm-and-primes"}], "error": None}]
    assert recs[0]["benchmark"] == "gcd" and recs[0]["model"] == "mockllm/model"
