"""`--jobs`: parsing files in worker processes gives exactly what reading them one by one gives."""

from __future__ import annotations

import numpy as np
import pytest
from _factories import pair
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.errors import RunLogError
from skillaudit.runs import PairedRuns, load_runs


def assert_same(a: PairedRuns, b: PairedRuns) -> None:
    for f in ("models", "benchmarks", "tasks", "skills", "n_unpaired", "unpaired_examples",
              "n_error_pairs", "sources"):
        assert getattr(a, f) == getattr(b, f), f
    for f in ("model", "benchmark", "task", "epoch", "y_pos", "y_neg", "invoked", "adhered"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    for f in ("ranks", "scores"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.shape == y.shape
        assert np.array_equal(x.indptr, y.indptr) and np.array_equal(x.indices, y.indices)
        assert np.array_equal(x.data, y.data, equal_nan=True)


@pytest.fixture
def three_files(write_jsonl):
    """Pairs split across files (enabled in one, disabled in another), unpaired and error records."""
    a, b, c = [], [], []
    for i in range(30):
        on, off = pair(f"t{i}", i % 3 == 0, i % 2 == 0, retrieved=[f"s{i % 7}", f"s{(i * 5) % 11}"] if i % 4 else None,
                       model=f"m{i % 2}", benchmark="mbpp", epoch=1 + i % 3, answer="uses s3 here")
        (a if i % 2 else b).append(on)
        (b if i % 3 else c).append(off)
    c.append({"task_id": "lonely", "condition": "enabled", "correct": True, "retrieved": ["zz"]})
    b.append({"task_id": "err", "condition": "on", "correct": True, "error": "timeout"})
    c.append({"task_id": "err", "condition": "off", "correct": True})
    b.append("")  # a blank line forces the exact path for that block
    return [str(write_jsonl(a, "a.jsonl")), str(write_jsonl(b, "b.jsonl")), str(write_jsonl(c, "c.jsonl"))]


def test_jobs_two_equals_jobs_one(three_files):
    """Two workers give identical arrays, vocabularies, sparse matrices and unpaired examples."""
    one = load_runs(three_files, jobs=1)
    assert one.n_pairs == 30 and one.n_unpaired == 1 and one.n_error_pairs == 1
    assert_same(one, load_runs(three_files, jobs=2))
    assert_same(load_runs(list(reversed(three_files))), load_runs(list(reversed(three_files)), jobs=3))


def test_duplicate_across_files_names_both_lines(write_jsonl, tmp_path, monkeypatch):
    """A key repeated in a later file is reported at its line with the first file's line, as with jobs=1."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(pair("t", True, False) + pair("u", True, True), "x.jsonl")
    write_jsonl([*pair("v", True, True), {"task_id": "u", "condition": "off", "correct": False}], "y.jsonl")
    msgs = []
    for jobs in (1, 2):
        with pytest.raises(RunLogError) as err:
            load_runs(["x.jsonl", "y.jsonl"], jobs=jobs)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1] == (
        "y.jsonl:3: duplicate disabled record for model='default' benchmark='default' "
        "task_id='u' epoch=1 (first at x.jsonl:4)"
    )


def test_first_error_in_file_order_wins(write_jsonl, tmp_path, monkeypatch):
    """An earlier file's bad line is reported before a later file's, and before a later missing file."""
    monkeypatch.chdir(tmp_path)
    write_jsonl([*pair("t", True, False), '{"task_id": "t2", "condition": "maybe", "correct": true}'], "x.jsonl")
    write_jsonl(["{bad"], "y.jsonl")
    for jobs in (1, 2):
        with pytest.raises(RunLogError, match=r"^x.jsonl:3: unknown condition \"maybe\""):
            load_runs(["x.jsonl", "y.jsonl", "missing.jsonl"], jobs=jobs)
        with pytest.raises(RunLogError, match=r"^y.jsonl:1: invalid JSON \(column 2\)$"):
            load_runs(["y.jsonl", "missing.jsonl"], jobs=jobs)


def test_metrics_jobs_option_gives_same_json(three_files):
    """`skillaudit metrics --jobs 2` prints the same document as without it."""
    runner = CliRunner()
    base = runner.invoke(cli, ["metrics", *three_files, "--json", "--bootstrap", "200"])
    par = runner.invoke(cli, ["metrics", *three_files, "--json", "--bootstrap", "200", "--jobs", "2"])
    assert base.exit_code == 0, base.output
    assert par.exit_code == 0 and par.stdout == base.stdout


@pytest.fixture
def one_big_file(write_jsonl):
    """One file of 400 pairs whose records of a pair are far apart (they land in different ranges)."""
    rng = np.random.default_rng(3)
    on, off = [], []
    for i in range(400):
        k = int(rng.integers(0, 4))
        ids = [f"s{int(j)}" for j in rng.integers(0, 25, size=k)] if k else None
        a, b = pair(f"t{i}", bool(rng.random() < 0.5), bool(rng.random() < 0.5), retrieved=ids,
                    model=f"m{i % 3}", epoch=1 + i % 2, answer=f"print({i})")
        on.append(a)
        off.append(b)
    return str(write_jsonl(on[:200] + off[::-1] + on[200:], "big.jsonl"))


def test_byte_ranges_of_one_file_equal_one_reader(one_big_file, monkeypatch):
    """A file cut into byte ranges at line starts (one per worker) gives exactly the sequential result."""
    from skillaudit.runs import workers

    monkeypatch.setattr(workers, "_MIN_UNIT", 1)
    units = workers._work_units([one_big_file], workers._file_sizes([one_big_file]), 3)
    assert len(units) == 3 and units[0][2] == 0 and units[-1][3] is None
    assert [u[3] for u in units[:-1]] == [u[2] for u in units[1:]]  # contiguous, no gap or overlap
    one = load_runs([one_big_file], jobs=1)
    assert one.n_pairs == 400
    for jobs in (2, 3, 5):
        assert_same(one, load_runs([one_big_file], jobs=jobs))


def test_errors_in_a_later_byte_range_keep_their_line_numbers(write_jsonl, tmp_path, monkeypatch):
    """A bad line and a duplicate key deep in a split file are reported exactly as one reader reports them."""
    from skillaudit.runs import workers

    monkeypatch.setattr(workers, "_MIN_UNIT", 1)
    monkeypatch.chdir(tmp_path)
    recs = [r for i in range(60) for r in pair(f"t{i}", True, i % 2 == 0)]
    write_jsonl([*recs[:100], recs[3], *recs[100:]], "dup.jsonl")  # line 101 repeats line 4
    write_jsonl([*recs[:110], '{"task_id": "x", "condition": "on"}', *recs[110:]], "bad.jsonl")
    for name, expected in (
        ("dup.jsonl", "dup.jsonl:101: duplicate disabled record for model='default' benchmark='default' "
                      "task_id='t1' epoch=1 (first at dup.jsonl:4)"),
        ("bad.jsonl", "bad.jsonl:111: missing required field 'correct'"),
    ):
        for jobs in (1, 3):
            with pytest.raises(RunLogError) as err:
                load_runs([name], jobs=jobs)
            assert str(err.value) == expected, (name, jobs)


def test_the_scanner_parses_in_threads(three_files, monkeypatch):
    """With the C scanner (which frees the GIL) --jobs starts threads, not processes, with the same result."""
    from skillaudit.runs import workers

    def no_processes(*a, **k):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", no_processes)
    monkeypatch.setattr(workers, "_MIN_UNIT", 1)
    assert_same(load_runs(three_files, jobs=1), load_runs(three_files, jobs=3))


def test_auto_jobs_stays_in_process_for_small_logs(three_files):
    """jobs=0 uses one process below 8 MB of logs, so small audits pay no start-up cost."""
    from skillaudit.runs.workers import _auto_jobs, _file_sizes

    assert _auto_jobs(_file_sizes(three_files)) == 1
    assert_same(load_runs(three_files, jobs=0), load_runs(three_files, jobs=1))


def test_workers_that_cannot_run_fall_back_to_reading_in_process(three_files, monkeypatch):
    """Without the C scanner workers are processes; when their pool breaks, the logs are read in-process, same result."""
    from concurrent.futures.process import BrokenProcessPool

    from skillaudit.runs import reader, workers

    tried = []

    class Broken:
        def __init__(self, *a, **k):
            tried.append(1)
            raise BrokenProcessPool("a worker died")

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", Broken)
    monkeypatch.setattr(workers, "_MIN_UNIT", 1)
    monkeypatch.setattr(reader, "_scan", None)  # the scanner parses in threads, msgspec in processes
    assert_same(load_runs(three_files, jobs=1), load_runs(three_files, jobs=2))
    assert tried == [1]
