"""Inspect AI importer, on logs written by real Inspect AI evaluations (mockllm with scripted outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool

from skillaudit.errors import ImportFormatError, InputError
from skillaudit.importers.inspect_ai_log import import_inspect
from skillaudit.runs import load_runs

# inspect_ai's own retry set-up warns about a tenacity parameter; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")

MODEL = "mockllm/model"

# sample id -> (question, target, answer with skills, answer without, skills the tool returns)
CASES = {
    "add": ("2+2?", "4", "4", "5", ["arith-basics", "float-tolerance-comparison"]),  # rescue
    "mul": ("3*3?", "9", "8", "9", ["arith-basics"]),  # harm
    "sub": ("7-2?", "5", "5", "5", None),  # the agent does not call the tool
    "div": ("8/2?", "4", "4", "4", []),  # calls it, gets nothing back
}
# "names" returns prose naming a skill instead of JSON (matched against a library)
PROSE = {"pow": ("2**3?", "8", "8", "7")}


@tool
def search_skills():
    async def execute(query: str):
        """Search the skill library.

        Args:
            query: What the skill should help with.
        """
        if query in CASES:
            skills = CASES[query][4] or []
            return json.dumps([{"id": s, "score": 9.0 - i} for i, s in enumerate(skills)])
        if query in PROSE:
            return "Found one skill: heapq-k-largest (use a heap). Nothing else matched."
        return "[]"

    return execute


def _usage(out: ModelOutput) -> ModelOutput:
    # mockllm otherwise counts tokens with tiktoken, which downloads its encoding
    out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
    return out


def _scripted(enabled: bool):
    """A mockllm output function: call the tool once (enabled runs), then answer."""
    answers = {sid: (c[2] if enabled else c[3]) for sid, c in {**CASES, **PROSE}.items()}
    by_question = {c[0]: sid for sid, c in {**CASES, **PROSE}.items()}

    def outputs(input, tools, tool_choice, config):
        question = next(m.text for m in input if m.role == "user")
        sid = by_question[question]
        called = any(m.role == "tool" for m in input)
        wants_tool = enabled and (sid in PROSE or CASES[sid][4] is not None)
        if tools and wants_tool and not called:
            return _usage(ModelOutput.for_tool_call(MODEL, "search_skills", {"query": sid}))
        return _usage(ModelOutput.from_content(MODEL, answers[sid]))

    return outputs


def _task(enabled: bool) -> Task:
    samples = [Sample(id=sid, input=c[0], target=c[1]) for sid, c in {**CASES, **PROSE}.items()]
    solver = [use_tools(search_skills()), generate()] if enabled else [generate()]
    return Task(dataset=samples, solver=solver, scorer=match(), name="arith")


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """One real Inspect AI log with the skill tool (.eval) and one without (.json)."""
    root = tmp_path_factory.mktemp("inspect_logs")
    paths = []
    for enabled, fmt in ((True, "eval"), (False, "json")):
        model = get_model(MODEL, custom_outputs=_scripted(enabled))
        [log] = inspect_eval(
            _task(enabled), model=model, log_dir=str(root / ("on" if enabled else "off")),
            display="none", log_format=fmt, max_samples=1,
        )
        assert log.status == "success", log.error
        paths.append(log.location)
    return paths[0], paths[1]


def _by_key(records: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["task_id"], r["condition"]): r for r in records}


def test_real_logs_import_with_outcomes_and_pairs(inspect_logs: tuple[str, str]) -> None:
    """Both logs import into one enabled and one disabled record per sample, with match() outcomes."""
    records, report = import_inspect([inspect_logs[0]], [inspect_logs[1]])
    assert report.pairs == 5 and report.records == 10 and not report.unpaired
    recs = _by_key(records)
    assert recs[("add", "enabled")]["correct"] is True
    assert recs[("add", "disabled")]["correct"] is False
    assert recs[("mul", "enabled")]["correct"] is False
    assert recs[("mul", "disabled")]["correct"] is True
    for r in records:
        assert r["model"] == MODEL and r["benchmark"] == "arith" and r["epoch"] == 1
        assert "retrievals" not in r if r["condition"] == "disabled" else "retrievals" in r


def test_real_logs_retrievals_come_from_tool_events(inspect_logs: tuple[str, str]) -> None:
    """Skill ids and scores are parsed from the JSON tool result, in rank order, one entry per call."""
    records, report = import_inspect([inspect_logs[0]], [inspect_logs[1]])
    recs = _by_key(records)
    add = recs[("add", "enabled")]["retrievals"]
    assert add == [{"query": "add", "error": None, "skills": [
        {"id": "arith-basics", "score": 9.0}, {"id": "float-tolerance-comparison", "score": 8.0}]}]
    assert recs[("sub", "enabled")]["retrievals"] == []  # never called the tool
    assert recs[("div", "enabled")]["retrievals"][0]["skills"] == []  # called it, got nothing
    # prose results with no library to match against count as nothing, and the report says so
    assert recs[("pow", "enabled")]["retrievals"][0]["skills"] == []
    assert any("not JSON skill lists" in n for n in report.notes)


def test_prose_results_match_skill_names_from_the_library(inspect_logs: tuple[str, str]) -> None:
    """A non-JSON tool result yields the library skills whose names appear in it."""
    records, report = import_inspect(
        [inspect_logs[0]], [inspect_logs[1]], skill_ids=["heapq-k-largest", "heapq", "arith-basics"]
    )
    pow_rec = _by_key(records)[("pow", "enabled")]
    assert pow_rec["retrievals"][0]["skills"] == [{"id": "heapq-k-largest"}]
    assert not any("not JSON" in n for n in report.notes)


def test_imported_records_load_and_pair_in_skillaudit(inspect_logs: tuple[str, str], tmp_path: Path) -> None:
    """The written run log is valid for load_runs: 5 pairs, the right flips and retrieved skills."""
    from skillaudit.importers import write_records

    records, _ = import_inspect([inspect_logs[0]], [inspect_logs[1]])
    out = tmp_path / "runs.jsonl"
    write_records(records, str(out))
    runs = load_runs([str(out)])
    assert runs.n_pairs == 5 and runs.n_unpaired == 0
    task_of = {runs.tasks[t]: i for i, t in enumerate(runs.task)}
    assert runs.flip[task_of["add"]] == 1 and runs.flip[task_of["mul"]] == -1
    assert set(runs.skills) == {"arith-basics", "float-tolerance-comparison"}
    assert int(runs.retrieved.sum()) == 2  # add and mul got skills back; div got none
    assert bool(runs.invoked[task_of["div"]]) and not bool(runs.invoked[task_of["sub"]])


def test_missing_counterpart_and_other_tool_name_are_reported(inspect_logs: tuple[str, str]) -> None:
    """With only one side every sample is reported unpaired, and a wrong --tool is pointed out."""
    records, report = import_inspect([inspect_logs[0]], [], tool="lookup")
    assert records == [] and report.pairs == 0 and len(report.unpaired) == 5
    assert all(u.reason == "no disabled run with this key" for u in report.unpaired)
    assert any("no enabled sample called the tool 'lookup'" in n and "search_skills" in n
               for n in report.notes)


def test_threshold_and_named_scorer(inspect_logs: tuple[str, str]) -> None:
    """--scorer picks the score by name; an unknown scorer leaves every sample out with the reason."""
    _, report = import_inspect([inspect_logs[0]], [inspect_logs[1]], scorer="match")
    assert report.pairs == 5
    _, report = import_inspect([inspect_logs[0]], [inspect_logs[1]], scorer="nope")
    assert report.pairs == 0
    assert report.unpaired[0].reason == "no score from 'nope' (scores: 'match')"


def test_wrong_format_names_the_file(tmp_path: Path) -> None:
    """A file that is not an Inspect log raises ImportFormatError naming it; a missing one an InputError."""
    bad = tmp_path / "results.json"
    bad.write_text('{"eval": {}}')
    with pytest.raises(ImportFormatError, match=rf"^{bad}: not an Inspect AI log"):
        import_inspect([str(bad)], [str(bad)])
    with pytest.raises(InputError, match="no such file"):
        import_inspect([str(tmp_path / "none.eval")], [str(bad)])


def test_a_folder_stands_for_its_logs(inspect_logs: tuple[str, str]) -> None:
    """Passing the log folders instead of the files gives the same records."""
    on, off = (str(Path(p).parent) for p in inspect_logs)
    records, report = import_inspect([on], [off])
    assert report.pairs == 5 and len(records) == 10


# ---------------------------------------------------------------- two tasks over one dataset
@tool(name="search_skills")
def search_nothing():
    async def execute(query: str):
        """Search the skill library (an 'empty' arm: returns nothing).

        Args:
            query: What the skill should help with.
        """
        return "[]"

    return execute


def _scripted_by_tools():
    """One mockllm output function for every task: answers as the enabled run when offered a tool."""
    by_question = {c[0]: sid for sid, c in {**CASES, **PROSE}.items()}

    def outputs(input, tools, tool_choice, config):
        question = next(m.text for m in input if m.role == "user")
        sid = by_question[question]
        case = {**CASES, **PROSE}[sid]
        called = any(m.role == "tool" for m in input)
        wants_tool = bool(tools) and (sid in PROSE or CASES[sid][4] is not None)
        if wants_tool and not called:
            return _usage(ModelOutput.for_tool_call(MODEL, "search_skills", {"query": sid}))
        return _usage(ModelOutput.from_content(MODEL, case[2] if tools else case[3]))

    return outputs


def _two_task_logs(root: Path, dataset_name: str | None) -> dict[str, str]:
    from inspect_ai.dataset import MemoryDataset

    samples = [Sample(id=sid, input=c[0], target=c[1]) for sid, c in {**CASES, **PROSE}.items()]
    data = MemoryDataset(samples, name=dataset_name)
    tasks = [
        Task(dataset=data, solver=[use_tools(search_skills()), generate()], scorer=match(), name="skills_on"),
        Task(dataset=data, solver=[generate()], scorer=match(), name="skills_off"),
        Task(dataset=data, solver=[use_tools(search_nothing()), generate()], scorer=match(), name="skills_empty"),
    ]
    model = get_model(MODEL, custom_outputs=_scripted_by_tools())
    logs = inspect_eval(tasks, model=model, log_dir=str(root), display="none", max_samples=1, epochs=2)
    assert [log.status for log in logs] == ["success"] * 3
    return {log.eval.task: log.location for log in logs}


@pytest.fixture(scope="module")
def two_task_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """skills_on / skills_off / skills_empty over one named MemoryDataset, 2 epochs, in one inspect eval."""
    return _two_task_logs(tmp_path_factory.mktemp("two_tasks"), "arith_ds")


def test_two_tasks_over_one_dataset_pair_fully(two_task_logs: dict[str, str]) -> None:
    """Two Inspect tasks (skills_on, skills_off) over one dataset pair every sample and epoch, benchmark = dataset."""
    records, report = import_inspect([two_task_logs["skills_on"]], [two_task_logs["skills_off"]])
    assert report.pairs == 10 and report.records == 20 and not report.unpaired
    assert {r["benchmark"] for r in records} == {"arith_ds"}
    assert {(r["task_id"], r["epoch"]) for r in records} == {(s, e) for s in [*CASES, *PROSE] for e in (1, 2)}
    recs = {(r["task_id"], r["epoch"], r["condition"]): r for r in records}
    assert recs[("add", 2, "enabled")]["correct"] and not recs[("add", 2, "disabled")]["correct"]
    assert report.summary() == (
        "inspect: 10 pair(s), 20 record(s) from 10 enabled and 10 disabled run(s); paired on "
        "(model, sample id, epoch); benchmark 'arith_ds' (the dataset name)"
    )


def test_two_unnamed_dataset_tasks_pair_under_the_task_names_stem(tmp_path: Path) -> None:
    """Without a dataset name the benchmark is the common stem of the task names (skills_on/off -> skills)."""
    logs = _two_task_logs(tmp_path, None)
    records, report = import_inspect([logs["skills_on"]], [logs["skills_off"]])
    assert report.pairs == 10 and {r["benchmark"] for r in records} == {"skills"}
    assert report.naming == "benchmark 'skills' (the common stem of the task names 'skills_on' and 'skills_off')"


def test_cli_two_task_import_summary_says_what_was_paired_on(two_task_logs: dict[str, str], tmp_path: Path) -> None:
    """`import inspect` on skills_on/skills_off logs writes 20 records and prints the pairing rule on stderr."""
    from click.testing import CliRunner

    from skillaudit.cli import cli

    out = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["import", "inspect", "--enabled", two_task_logs["skills_on"],
                                   "--disabled", two_task_logs["skills_off"], "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines()[0] == (
        "inspect: 10 pair(s), 20 record(s) from 10 enabled and 10 disabled run(s); paired on "
        "(model, sample id, epoch); benchmark 'arith_ds' (the dataset name)"
    )
    assert load_runs([str(out)]).n_pairs == 10


def test_arm_log_becomes_arm_records_of_the_same_key(two_task_logs: dict[str, str], tmp_path: Path) -> None:
    """--arm empty=LOG adds one 'empty' arm record per pair (enabled side), joined by skillaudit's arm reader."""
    from click.testing import CliRunner

    from skillaudit.analysis.counterfactual import load_arms
    from skillaudit.cli import cli

    out = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["import", "inspect", "--enabled", two_task_logs["skills_on"],
                                   "--disabled", two_task_logs["skills_off"],
                                   "--arm", f"empty={two_task_logs['skills_empty']}", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines()[0] == (
        "inspect: 10 pair(s), 30 record(s) from 10 enabled and 10 disabled run(s); arm records empty 10; "
        "paired on (model, sample id, epoch); benchmark 'arith_ds' (the dataset name)"
    )
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    arm = [r for r in recs if "arm" in r]
    assert len(arm) == 10 and {(r["arm"], r["condition"], r["benchmark"]) for r in arm} == {
        ("empty", "enabled", "arith_ds")}
    add = next(r for r in arm if r["task_id"] == "add" and r["epoch"] == 1)
    assert add["retrievals"] == [{"query": "add", "skills": [], "error": None}] and add["correct"] is True
    runs = load_runs([str(out)])
    assert runs.n_pairs == 10 and runs.n_arm_records == 10
    joined = load_arms([str(out)], runs)
    assert joined.names == ("empty",) and joined.n == 10 and joined.n_unjoined == 0


def test_arm_option_names_an_unknown_arm(two_task_logs: dict[str, str], tmp_path: Path) -> None:
    """--arm with an unknown name or without '=' is a usage error (exit 2) listing the arms."""
    from click.testing import CliRunner

    from skillaudit.cli import cli

    base = ["import", "inspect", "--enabled", two_task_logs["skills_on"], "--disabled",
            two_task_logs["skills_off"], "-o", str(tmp_path / "r.jsonl")]
    res = CliRunner().invoke(cli, [*base, "--arm", f"shuffle={two_task_logs['skills_empty']}"])
    assert res.exit_code == 2
    assert ("Invalid value for '--arm': unknown arm 'shuffle' (expected one of random, filler, empty, "
            "corrupted, mask, pruned, replicate)") in res.stderr
    res = CliRunner().invoke(cli, [*base, "--arm", two_task_logs["skills_empty"]])
    assert res.exit_code == 2 and "expected NAME=LOG" in res.stderr


def test_importer_arm_names_are_skillaudits() -> None:
    """The importers accept exactly the arms skillaudit.analysis.counterfactual reads, on the same sides."""
    from skillaudit.analysis import counterfactual
    from skillaudit.importers import _common

    assert _common.ENABLED_ARMS == counterfactual.ENABLED_ARMS and _common.DISABLED_ARMS == counterfactual.DISABLED_ARMS


def test_usage_and_time_are_kept_for_the_efficiency_table(inspect_logs: tuple[str, str]) -> None:
    """Inspect's per-sample `model_usage` (summed over the model calls) and `total_time` become
    meta.usage and meta.latency_s: an enabled sample that called the tool made two model calls."""
    records, _ = import_inspect([inspect_logs[0]], [inspect_logs[1]])
    recs = _by_key(records)
    assert recs[("add", "enabled")]["meta"]["usage"] == {"prompt_tokens": 20, "completion_tokens": 4}
    assert recs[("add", "disabled")]["meta"]["usage"] == {"prompt_tokens": 10, "completion_tokens": 2}
    assert recs[("sub", "enabled")]["meta"]["usage"] == {"prompt_tokens": 10, "completion_tokens": 2}
    assert all(r["meta"]["latency_s"] >= 0 for r in records)
