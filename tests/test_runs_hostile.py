"""Hostile run logs (issue 16, items 5-6): every failure is one line and exit 2, within seconds;
streams read like files; one verdict on non-finite numbers on every reader path and command."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from _factories import pair
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.errors import RunLogError
from skillaudit.runs import load_runs
from skillaudit.runs import reader as runs_reader

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _log(n: int = 12) -> bytes:
    recs = [r for i in range(n) for r in pair(f"t{i}", i % 3 == 0, i % 2 == 0, retrieved=["s"] if i % 2 else None)]
    return "".join(json.dumps(r) + "\n" for r in recs).encode()


def _cli(*args: str, timeout: float = 60, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skillaudit.cli", *args], capture_output=True, env=ENV,
                          timeout=timeout, input=stdin)


def _one_line_error(proc: subprocess.CompletedProcess, text: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err == f"Error: {text}\n"
    assert "Traceback" not in err


PATHS = ["c", "msgspec", "exact"]


@pytest.fixture(params=PATHS)
def reader(request, monkeypatch):
    """Force one of the three reader paths: the C scanner, msgspec, or the exact (orjson) path."""
    if request.param != "c":
        monkeypatch.setattr(runs_reader, "_scan", None)
    if request.param == "exact":
        monkeypatch.setattr(runs_reader, "_decode", None)
        monkeypatch.setattr(runs_reader, "_decode_core", None)
    return request.param


# ---------------------------------------------------------------- item 5: gzip, overflow, streams
def test_truncated_gzip_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    g = gzip.compress(_log(200))
    Path("t.jsonl.gz").write_bytes(g[: len(g) // 2])
    with pytest.raises(RunLogError, match=r"^t\.jsonl\.gz:\d+: truncated gzip file \(it ends before its "
                                          r"end-of-stream marker\)$"):
        load_runs(["t.jsonl.gz"])
    res = CliRunner().invoke(cli, ["validate", "t.jsonl.gz"])
    assert res.exit_code == 2 and "truncated gzip file" in res.output and "Aborted" not in res.output


def test_corrupt_deflate_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    g = bytearray(gzip.compress(_log(200)))
    g[30] ^= 0xFF
    g[31] ^= 0x55
    Path("c.jsonl.gz").write_bytes(bytes(g))
    with pytest.raises(RunLogError, match=r"^c\.jsonl\.gz:1: corrupt gzip data \(Error -3 while decompressing"):
        load_runs(["c.jsonl.gz"])
    Path("n.jsonl.gz").write_bytes(b"this is not gzip\n")
    with pytest.raises(RunLogError, match=r"^n\.jsonl\.gz:1: corrupt gzip data \(Not a gzipped file"):
        load_runs(["n.jsonl.gz"])


@pytest.mark.parametrize("epoch", ["9223372036854775808", "18446744073709551615"])
def test_epoch_beyond_int64_is_an_input_error(write_jsonl, tmp_path, monkeypatch, reader, epoch):
    monkeypatch.chdir(tmp_path)
    write_jsonl([f'{{"task_id": "t", "condition": "on", "correct": true, "epoch": {epoch}}}'])
    with pytest.raises(RunLogError) as err:
        load_runs(["runs.jsonl"])
    assert str(err.value) == f"runs.jsonl:1: 'epoch' must be at most 2**63 - 1, got {epoch}"


def test_epoch_at_int64_max_is_read(write_jsonl, reader):
    recs = pair("t", True, False, epoch=2**63 - 1)
    assert load_runs([write_jsonl(recs)]).epoch.size == 1


def test_dev_zero_is_binary_data_at_once():
    proc = _cli("validate", "/dev/zero", timeout=30)
    _one_line_error(proc, "/dev/zero:1: binary data, not a JSON Lines text file")


def test_a_one_gib_line_in_a_small_gzip_is_refused_in_seconds(tmp_path):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [c.compress(b'{"task_id": "t", "condition": "on", "correct": true, "answer": "')]
    block = b"a" * (1 << 20)
    parts += [c.compress(block) for _ in range(1024)]
    parts += [c.compress(b'"}\n'), c.flush()]
    path = tmp_path / "long.jsonl.gz"
    path.write_bytes(b"".join(parts))
    assert path.stat().st_size < 2 << 20
    proc = _cli("validate", str(path), timeout=30)
    _one_line_error(proc, f"{path}:1: line longer than 128 MiB: not a run-log record")


def test_long_lines_are_read_in_linear_time(tmp_path, monkeypatch):
    """A line many blocks long (built from chunks, not re-read per block) is read whole."""
    monkeypatch.setattr(runs_reader, "_BLOCK", 1 << 10)
    recs = pair("t", True, False, retrieved=["s"], answer="x" * (3 << 20))
    data = "".join(json.dumps(r) + "\n" for r in recs).encode()
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(gzip.compress(data))
    got = load_runs([str(path)])
    assert got.n_pairs == 1 and got.adhered.tolist() == [0]


def test_line_limit_names_the_line(tmp_path, monkeypatch):
    monkeypatch.setattr(runs_reader, "_BLOCK", 64)
    monkeypatch.setattr(runs_reader, "_MAX_LINE", 1000)
    path = tmp_path / "r.jsonl"
    path.write_bytes(_log(2) + b'{"task_id": "' + b"x" * 5000 + b'"}\n')
    with pytest.raises(RunLogError, match=r"r\.jsonl:5: line longer than 0 MiB"):
        load_runs([str(path)])


def test_fifo_reads_as_a_stream(tmp_path):
    """A FIFO (and so `<(...)`) is read forward like standard input, also above one block (4 MB)."""
    data = _log(30000)
    assert len(data) > 4 << 20
    fifo = tmp_path / "runs.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat {tmp_path / 'src'} > {fifo}"])
    (tmp_path / "src").write_bytes(data)
    try:
        proc = _cli("validate", str(fifo), timeout=60)
    finally:
        writer.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("runs: 30000 pairs")


def test_process_substitution_reads_as_a_stream(tmp_path):
    (tmp_path / "src.jsonl").write_bytes(_log(30000))
    cmd = f'"{sys.executable}" -m skillaudit.cli validate <(cat "{tmp_path / "src.jsonl"}")'
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, env=ENV, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("runs: 30000 pairs")


def test_stdin_above_a_block(reader):
    res = CliRunner().invoke(cli, ["validate", "-"], input=_log(30000))
    assert res.exit_code == 0 and res.output.startswith("runs: 30000 pairs")


def test_utf8_bom_is_accepted_at_the_start(tmp_path, reader):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + _log(5))
    assert load_runs([str(path)]).n_pairs == 5
    gz = tmp_path / "bom.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + _log(5)))
    assert load_runs([str(gz)]).n_pairs == 5
    res = CliRunner().invoke(cli, ["validate", "-"], input=b"\xef\xbb\xbf" + _log(5))
    assert res.exit_code == 0, res.output


def test_bom_inside_a_file_is_named(tmp_path, reader):
    path = tmp_path / "cat.jsonl"
    path.write_bytes(_log(1) + b"\xef\xbb\xbf" + _log(1)[:60].split(b"\n")[0] + b"\n")
    with pytest.raises(RunLogError) as err:
        load_runs([str(path)])
    assert str(err.value) == (f"{path}:3: a UTF-8 byte order mark (BOM) inside the file; "
                              "only a file's first line may start with one")
    path.write_bytes(b"\xff\xfe" + "{}".encode("utf-16-le") + b"\n")
    with pytest.raises(RunLogError, match=r":1: UTF-16 text \(byte order mark\); save the log as UTF-8$"):
        load_runs([str(path)])


# ---------------------------------------------------------------- item 6: one verdict on every path
NON_FINITE = [
    ('"answer": 1e400', "1e400"), ('"meta": {"x": 1e400}', "1e400"), ('"meta": {"x": [-1e400]}', "-1e400"),
    ('"error": null, "extra": 1' + "0" * 400, "1000"), ('"answer": NaN', "NaN"), ('"meta": -Infinity', "Infinity"),
    ('"retrievals": [{"skills": [{"id": "a", "score": 1e999}]}]', "1e999"), ('"answer": 9.9e308', "9.9e308"),
]


@pytest.mark.parametrize(("extra", "token"), NON_FINITE)
def test_non_finite_numbers_are_rejected_anywhere_on_every_path(write_jsonl, tmp_path, monkeypatch, reader,
                                                                extra, token):
    monkeypatch.chdir(tmp_path)
    recs = [json.dumps(r) for r in pair("a", True, False)]
    line = f'{{"task_id": "t", "condition": "on", "correct": true, {extra}}}'
    write_jsonl([*recs, line])
    want = (f"runs.jsonl:3: non-finite number (column {line.index(token) + 1}); JSON numbers must be finite "
            "(no NaN, Infinity or 1e400)")
    for adherence in (True, False):
        with pytest.raises(RunLogError) as err:
            load_runs(["runs.jsonl"], adherence=adherence)
        assert str(err.value) == want


@pytest.mark.parametrize("value", ["1e-400", "1e308", "-1.7976931348623157e308", "1" + "0" * 300, "1.5e+99"])
def test_large_finite_numbers_are_read_on_every_path(write_jsonl, reader, value):
    recs = [json.dumps(r) for r in pair("a", True, False)]
    recs[0] = recs[0][:-1] + f', "meta": {{"x": {value}}}, "answer": {value}}}'
    assert load_runs([write_jsonl(recs)]).n_pairs == 1


@pytest.mark.parametrize("command", [["validate"], ["metrics", "--bootstrap", "0"], ["rank", "--bootstrap", "0"],
                                     ["prune", "--skills", "SKILLS", "--embedder", "none", "--bootstrap", "0"]])
def test_every_command_rejects_a_non_finite_answer(write_jsonl, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "skills" / "s").mkdir(parents=True)
    (tmp_path / "skills" / "s" / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    recs = [json.dumps(r) for r in pair("a", True, False, retrieved=["s"])]
    write_jsonl([*recs, '{"task_id": "t", "condition": "on", "correct": true, "answer": 1e400}'])
    args = [a if a != "SKILLS" else "skills" for a in command]
    res = CliRunner().invoke(cli, [*args, "runs.jsonl"])
    assert res.exit_code == 2, res.output
    assert res.output.endswith("Error: runs.jsonl:3: non-finite number (column 64); JSON numbers must be finite "
                               "(no NaN, Infinity or 1e400)\n")


def test_scores_beyond_float32_are_clipped_not_infinite(write_jsonl, reader):
    import warnings

    recs = pair("t", True, False, retrieved=["a"])
    recs[0]["retrievals"][0]["skills"][0]["score"] = 1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = load_runs([write_jsonl(recs)])
    assert got.retrieval_scores.tolist() == [pytest.approx(3.4028234663852886e38)]


def test_empty_arm_is_an_error_on_every_path(write_jsonl, tmp_path, monkeypatch, reader):
    monkeypatch.chdir(tmp_path)
    write_jsonl([*pair("a", True, False), '{"task_id": "t", "condition": "on", "correct": true, "arm": ""}'])
    with pytest.raises(RunLogError) as err:
        load_runs(["runs.jsonl"])
    assert str(err.value) == "runs.jsonl:3: 'arm' must be a non-empty string, got \"\""


@pytest.mark.parametrize("value", ["1.5", '"x"', '[{"skills": 7}]', '{"a": 1}'])
def test_arm_records_with_bad_retrievals_are_one_line(write_jsonl, tmp_path, monkeypatch, value):
    """Found by bench/fuzz_runs.py: an arm record's retrievals of the wrong type was a TypeError."""
    monkeypatch.chdir(tmp_path)
    recs = [json.dumps(r) for i in range(3) for r in pair(f"t{i}", True, False)]
    write_jsonl([*recs, f'{{"task_id": "t0", "condition": "on", "correct": true, "arm": "random", '
                        f'"retrievals": {value}}}'])
    for cmd in (["metrics", "--bootstrap", "0"], ["rank", "--bootstrap", "0"]):
        res = CliRunner().invoke(cli, [*cmd, "runs.jsonl"])
        assert res.exit_code == 2, res.output
        assert res.output.splitlines()[-1].startswith("Error: runs.jsonl:7: ")


def test_a_stream_with_arm_records_is_read_in_its_one_pass(tmp_path):
    """Arm records are kept while the runs are read, so a FIFO (read once) gives them too."""
    data = _log(12) + b'{"task_id": "t1", "condition": "on", "correct": true, "arm": "random", "retrieved": ["r"]}\n'
    cmd = f'"{sys.executable}" -m skillaudit.cli metrics --json --bootstrap 0 <(cat "{tmp_path / "src"}")'
    (tmp_path / "src").write_bytes(data)
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, env=ENV, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["groups"][0]["arms"]["random"]["n"] == 1


def test_audit_reads_a_fifo_once(tmp_path):
    """audit hashes its inputs: a stream is not opened a second time (that hung on a FIFO)."""
    (tmp_path / "src").write_bytes(_log(40))
    out = tmp_path / "rep"
    cmd = (f'"{sys.executable}" -m skillaudit.cli audit --quiet --embedder tfidf --bootstrap 20 '
           f'--regression-bootstrap 0 --out "{out}" <(cat "{tmp_path / "src"}")')
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads((out / "audit.json").read_text())
    assert doc["inputs"]["runs"][0]["sha256"] is None
