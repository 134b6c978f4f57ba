"""lm-evaluation-harness importer, on `samples_<task>_<date>.jsonl` files (real ones and documented layout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillaudit.errors import ImportFormatError, InputError
from skillaudit.importers import write_records
from skillaudit.importers.lm_eval import import_lm_eval, task_and_date
from skillaudit.runs import load_runs

REAL = Path(__file__).parent / "data" / "importers" / "lm_eval"
DATE = "2026-01-02T03-04-05.678901"


def _line(doc_id: int, filt: str, **metrics: float) -> dict:
    """One line as lm_eval --log_samples writes it (evaluator.py `example`, sanitised by the tracker)."""
    doc = {"question": f"q{doc_id}", "answer": str(doc_id)}
    return {
        "doc_id": doc_id, "doc": doc, "target": str(doc_id),
        "arguments": {"gen_args_0": {"arg_0": f"q{doc_id}", "arg_1": {"until": ["\n"]}}},
        "resps": [[f"answer {doc_id}"]], "filtered_resps": [f"{doc_id}"], "filter": filt,
        "metrics": list(metrics), "doc_hash": f"h{doc_id}", "prompt_hash": "p", "target_hash": "t",
        **metrics,
    }


def _write(folder: Path, lines: list[dict], task: str = "gsm8k", model: str | None = "hf-model") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{task}_{DATE}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    if model:
        (folder / f"results_{DATE}.json").write_text(json.dumps({"results": {}, "model_name": model}))
    return str(path)


def test_samples_written_by_lm_eval_itself() -> None:
    """Sample logs produced by lm_eval (dummy model, local task) pair on doc_id with the acc outcome."""
    en = next((REAL / "enabled").glob("samples_*.jsonl"))
    dis = next((REAL / "disabled").glob("samples_*.jsonl"))
    records, report = import_lm_eval([str(en)], [str(dis)], metric="acc")
    assert report.pairs == 3 and not report.unpaired
    values = {json.loads(x)["doc_id"]: json.loads(x)["acc"] for x in en.read_text().splitlines()}
    for r in records:
        assert r["benchmark"] == "tiny_mc" and r["epoch"] == 1
        assert r["model"] == "3ykv54sv"  # model_name from the results_<date>.json beside it
        if r["condition"] == "enabled":
            assert r["correct"] is (values[int(r["task_id"])] >= 1.0)


def test_filter_metric_and_threshold(tmp_path: Path) -> None:
    """One filter is read; the metric counts as correct at or above the threshold."""
    en = _write(tmp_path / "on", [_line(0, "strict-match", exact_match=1.0), _line(0, "flexible-extract", exact_match=0.0),
                                  _line(1, "strict-match", exact_match=0.0), _line(1, "flexible-extract", exact_match=1.0)])
    dis = _write(tmp_path / "off", [_line(0, "strict-match", exact_match=0.0), _line(0, "flexible-extract", exact_match=0.0),
                                    _line(1, "strict-match", exact_match=1.0), _line(1, "flexible-extract", exact_match=1.0)])
    with pytest.raises(InputError, match="has results under filters 'strict-match', 'flexible-extract'; choose one with --filter"):
        import_lm_eval([en], [dis])
    records, _ = import_lm_eval([en], [dis], filter_name="flexible-extract")
    got = {(r["task_id"], r["condition"]): r["correct"] for r in records}
    assert got == {("0", "enabled"): False, ("0", "disabled"): False, ("1", "enabled"): True, ("1", "disabled"): True}
    assert records[0]["model"] == "hf-model" and records[0]["benchmark"] == "gsm8k"
    assert records[0]["answer"] == "0"
    records, _ = import_lm_eval([en], [dis], filter_name="strict-match", threshold=0.5)
    assert {(r["task_id"], r["condition"]): r["correct"] for r in records}[("0", "enabled")] is True


def test_metric_must_be_chosen_and_exist(tmp_path: Path) -> None:
    """With several metrics --metric is required, and an unknown metric names the line."""
    en = _write(tmp_path / "on", [_line(0, "none", acc=1.0, acc_norm=0.0)], task="hellaswag")
    dis = _write(tmp_path / "off", [_line(0, "none", acc=0.0, acc_norm=1.0)], task="hellaswag")
    with pytest.raises(InputError, match="metrics 'acc', 'acc_norm'; choose one with --metric"):
        import_lm_eval([en], [dis])
    with pytest.raises(InputError, match=rf"^{en}:1: no metric 'f1' in this sample"):
        import_lm_eval([en], [dis], metric="f1")
    records, _ = import_lm_eval([en], [dis], metric="acc_norm")
    assert [r["correct"] for r in records] == [False, True]


def test_different_documents_do_not_pair(tmp_path: Path) -> None:
    """Lines with the same doc_id but a different doc_hash are left out as different documents."""
    a = _line(0, "none", acc=1.0)
    b = dict(_line(0, "none", acc=0.0), doc_hash="other")
    records, report = import_lm_eval([_write(tmp_path / "on", [a])], [_write(tmp_path / "off", [b])])
    assert records == [] and len(report.unpaired) == 2
    assert "input differs between the enabled and disabled runs" in report.unpaired[0].reason


def test_retrievals_sidecar_keyed_by_doc_id(tmp_path: Path) -> None:
    """A sidecar keyed by doc_id gives enabled runs their skills, and the result loads as run logs."""
    en = _write(tmp_path / "on", [_line(0, "none", acc=1.0), _line(1, "none", acc=0.0)])
    dis = _write(tmp_path / "off", [_line(0, "none", acc=0.0), _line(1, "none", acc=1.0)])
    side = tmp_path / "r.jsonl"
    side.write_text('{"task_id": 0, "skills": ["gcd-lcm-and-primes"]}\n{"doc_id": 1, "skills": []}\n')
    records, report = import_lm_eval([en], [dis], retrievals=str(side))
    out = tmp_path / "runs.jsonl"
    write_records(records, str(out))
    runs = load_runs([str(out)])
    assert runs.n_pairs == 2 and runs.skills == ("gcd-lcm-and-primes",)
    assert int(runs.retrieved.sum()) == 1 and not report.notes


def test_wrong_format_names_file_and_line(tmp_path: Path) -> None:
    """A JSONL file whose lines are not lm-eval samples fails naming file:line and the expected file."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"task_id": "a", "condition": "enabled", "correct": true}\n')
    with pytest.raises(ImportFormatError) as err:
        import_lm_eval([str(runs)], [str(runs)])
    assert str(err.value) == (
        f"{runs}:1: not an lm-eval sample (no \"doc_id\"); expected an lm-eval "
        "samples_<task>_<date>.jsonl file (lm_eval --log_samples)"
    )


def test_task_name_from_file_name() -> None:
    """The task name is read from samples_<task>_<date>.jsonl, including names with underscores."""
    assert task_and_date(f"x/samples_mmlu_high_school_math_{DATE}.jsonl") == ("mmlu_high_school_math", DATE)
    assert task_and_date("x/mine.jsonl") == ("mine", None)


def test_differently_named_tasks_pair_under_their_common_stem(tmp_path: Path) -> None:
    """Tasks gsm8k_skills / gsm8k_base (explicit sides) pair on doc id under benchmark 'gsm8k'."""
    lines = [_line(i, "none", exact_match=float(i % 2)) for i in range(4)]
    en = _write(tmp_path / "on", lines, task="gsm8k_skills")
    dis = _write(tmp_path / "off", lines, task="gsm8k_base")
    records, report = import_lm_eval([en], [dis])
    assert report.pairs == 4 and {r["benchmark"] for r in records} == {"gsm8k"}
    assert report.summary().endswith(
        "; paired on (model, doc id); benchmark 'gsm8k' (the common stem of the task names "
        "'gsm8k_skills' and 'gsm8k_base')"
    )


def test_tasks_over_one_hub_dataset_are_named_after_it(tmp_path: Path) -> None:
    """With the dataset in results_<date>.json's configs, the benchmark is the dataset (path/name)."""
    lines = [_line(i, "none", exact_match=1.0) for i in range(3)]
    paths = []
    for side, task in (("on", "math_tool"), ("off", "plain_math")):
        paths.append(_write(tmp_path / side, lines, task=task))
        (tmp_path / side / f"results_{DATE}.json").write_text(json.dumps({
            "model_name": "m", "configs": {task: {"dataset_path": "openai/gsm8k", "dataset_name": "main"}}}))
    records, report = import_lm_eval([paths[0]], [paths[1]])
    assert report.pairs == 3 and {r["benchmark"] for r in records} == {"openai/gsm8k/main"}
    assert report.naming == "benchmark 'openai/gsm8k/main' (the dataset name)"
