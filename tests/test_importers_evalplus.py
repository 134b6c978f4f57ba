"""EvalPlus importer, on results files in the layout `evalplus.evaluate` writes (`*_eval_results.json`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillaudit.errors import ImportFormatError
from skillaudit.importers import write_records
from skillaudit.importers.evalplus import import_evalplus
from skillaudit.runs import load_runs


def _sample(task_id: str, base: str, plus: str | None, solution: str = "def f(): ...") -> dict:
    """One entry of results["eval"][task_id], as evalplus 0.3 writes it."""
    return {"task_id": task_id, "solution": solution, "base_status": base, "plus_status": plus,
            "base_fail_tests": [] if base == "pass" else [[1]],
            "plus_fail_tests": [] if plus in ("pass", None) else [[2]]}


def _results(path: Path, tasks: dict[str, list[tuple[str, str | None]]]) -> str:
    doc = {"date": "2026-01-01 12:00", "hash": "0" * 32,
           "eval": {tid: [_sample(tid, b, p) for b, p in runs] for tid, runs in tasks.items()}}
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture
def results(tmp_path: Path) -> tuple[str, str]:
    enabled = _results(tmp_path / "on_eval_results.json", {
        "Mbpp/2": [("pass", "pass"), ("pass", "fail")],   # 2 epochs
        "Mbpp/3": [("pass", "pass")],
        "Mbpp/4": [("fail", "fail")],
    })
    disabled = _results(tmp_path / "off_eval_results.json", {
        "Mbpp/2": [("pass", "fail"), ("pass", "pass")],
        "Mbpp/3": [("timeout", "pass")],
        "Mbpp/9": [("pass", "pass")],
    })
    return enabled, disabled


def test_correct_means_base_and_plus_pass(results: tuple[str, str]) -> None:
    """A sample is correct only when both its base and plus tests pass; list index i is epoch i+1."""
    records, report = import_evalplus([results[0]], [results[1]], model="qwen")
    got = {(r["task_id"], r["epoch"], r["condition"]): r["correct"] for r in records}
    assert got == {
        ("Mbpp/2", 1, "enabled"): True, ("Mbpp/2", 1, "disabled"): False,
        ("Mbpp/2", 2, "enabled"): False, ("Mbpp/2", 2, "disabled"): True,
        ("Mbpp/3", 1, "enabled"): True, ("Mbpp/3", 1, "disabled"): False,
    }
    assert {r["benchmark"] for r in records} == {"mbpp_plus"} and {r["model"] for r in records} == {"qwen"}
    assert report.pairs == 3
    reasons = {(u.key, u.reason) for u in report.unpaired}
    assert reasons == {("qwen/mbpp_plus/Mbpp/4 epoch 1", "no disabled run with this key"),
                       ("qwen/mbpp_plus/Mbpp/9 epoch 1", "no enabled run with this key")}


def test_retrieval_sidecar_is_joined_to_enabled_runs(results: tuple[str, str], tmp_path: Path) -> None:
    """Sidecar lines give enabled runs their skills: per task, or per task and epoch."""
    side = tmp_path / "retrievals.jsonl"
    side.write_text("\n".join(json.dumps(x) for x in [
        {"task_id": "Mbpp/2", "epoch": 1, "query": "sets", "skills": [{"id": "list-set-operations", "score": 3.5}]},
        {"task_id": "Mbpp/2", "epoch": 2, "retrieved": []},
        {"task_id": "Mbpp/3", "retrievals": [{"query": "q", "skills": ["heapq-k-largest"], "error": None}]},
        {"task_id": "Mbpp/77", "skills": ["x"]},
    ]) + "\n")
    records, report = import_evalplus([results[0]], [results[1]], retrievals=str(side))
    en = {(r["task_id"], r["epoch"]): r for r in records if r["condition"] == "enabled"}
    assert en[("Mbpp/2", 1)]["retrievals"] == [
        {"query": "sets", "skills": [{"id": "list-set-operations", "score": 3.5}], "error": None}]
    assert en[("Mbpp/2", 2)]["retrievals"][0]["skills"] == []
    assert en[("Mbpp/3", 1)]["retrievals"][0]["skills"] == [{"id": "heapq-k-largest"}]
    assert any("match no enabled run (first: task_id 'Mbpp/77')" in n for n in report.notes)
    out = tmp_path / "runs.jsonl"
    write_records(records, str(out))
    runs = load_runs([str(out)])
    assert runs.n_pairs == 3 and set(runs.skills) == {"list-set-operations", "heapq-k-largest"}


def test_without_sidecar_the_report_warns_nothing_is_retrieved(results: tuple[str, str]) -> None:
    """Without --retrievals the import works but the report says no pair can be in S_call."""
    _, report = import_evalplus([results[0]], [results[1]])
    assert any(n.startswith("no --retrievals sidecar") for n in report.notes)


def test_base_only_and_old_layout(tmp_path: Path) -> None:
    """--base-only results (plus_status null) are judged on base tests; the older base/plus layout reads too."""
    new = _results(tmp_path / "a.json", {"HumanEval/0": [("pass", None)], "HumanEval/1": [("fail", None)]})
    old = tmp_path / "b.json"
    old.write_text(json.dumps({"eval": {
        "HumanEval/0": {"nfiles": 1, "base": [["fail", []]], "plus": [["fail", []]]},
        "HumanEval/1": {"nfiles": 1, "base": [["pass", []]], "plus": [["pass", []]]},
    }}))
    records, report = import_evalplus([new], [str(old)])
    got = {(r["task_id"], r["condition"]): r["correct"] for r in records}
    assert got == {("HumanEval/0", "enabled"): True, ("HumanEval/0", "disabled"): False,
                   ("HumanEval/1", "enabled"): False, ("HumanEval/1", "disabled"): True}
    assert {r["benchmark"] for r in records} == {"humaneval_plus"}
    assert any("--base-only" in n for n in report.notes)


def test_samples_file_instead_of_results_is_a_format_error(tmp_path: Path, results: tuple[str, str]) -> None:
    """Passing the samples.jsonl (not the results) fails naming the file, the line and what was expected."""
    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"task_id": "Mbpp/2", "solution": "x"}\n{"task_id": "Mbpp/3", "solution": "y"}\n')
    with pytest.raises(ImportFormatError) as err:
        import_evalplus([str(samples)], [results[1]])
    assert str(err.value).startswith(f"{samples}:2: not valid JSON (")
    assert str(err.value).endswith("expected the *_eval_results.json that evalplus.evaluate writes")
    other = tmp_path / "other.json"
    other.write_text('{"results": {}}')
    with pytest.raises(ImportFormatError, match=r"not an EvalPlus results file \(no \"eval\" object"):
        import_evalplus([str(other)], [results[1]])


def test_duplicate_task_across_files_is_an_error(results: tuple[str, str]) -> None:
    """The same results given twice for one condition is an error naming both places."""
    with pytest.raises(ImportFormatError, match=r"second enabled run of default/mbpp_plus/Mbpp/2 epoch 1 \(first at "):
        import_evalplus([results[0], results[0]], [results[1]])


REAL = Path(__file__).parent / "data" / "importers" / "evalplus"


def test_results_written_by_evalplus_itself() -> None:
    """Results files produced by `evalplus.evaluate` import with base+plus outcomes per epoch."""
    records, report = import_evalplus(
        [str(REAL / "enabled_eval_results.json")], [str(REAL / "disabled_eval_results.json")]
    )
    got = {(r["task_id"], r["epoch"], r["condition"]): r["correct"] for r in records}
    assert got == {
        ("HumanEval/0", 1, "enabled"): True, ("HumanEval/0", 1, "disabled"): False,
        ("HumanEval/0", 2, "enabled"): False, ("HumanEval/0", 2, "disabled"): True,
        ("HumanEval/1", 1, "enabled"): True, ("HumanEval/1", 1, "disabled"): False,
        ("HumanEval/1", 2, "enabled"): True, ("HumanEval/1", 2, "disabled"): True,
    }
    assert report.pairs == 4 and not report.unpaired
    assert records[0]["answer"].startswith("def add(a, b):")
