"""Every JSON document the CLI reads goes through one bounded reader: hostile documents (deep, wrong
types, /dev/zero, a sparse 2 GB file, a FIFO without a writer, 1e400, a depth bomb for inspect_ai)
end in one line and exit 2, using under 5 s of CPU and 500 MB of memory (skillaudit.util.documents)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillaudit.errors import InputError
from skillaudit.util.documents import (
    check_file_depth,
    check_schema,
    check_tree,
    max_nesting,
    parse_document,
    read_document,
    read_document_bytes,
)

ROOT = Path(__file__).resolve().parents[1]


# The CLI is forked from a small launcher, not from pytest: Linux carries a forked process's
# parent's RSS high-water mark through exec into ru_maxrss, so a child forked from a large pytest
# would report pytest's peak instead of its own.
LAUNCHER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-m", "skillaudit.cli", *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    json.dump([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss], fh)
"""


def cli(args: list[str], tmp_path: Path) -> tuple[int, str, float, float]:
    """(exit status, stderr, CPU seconds, peak RSS in MB) of `python -m skillaudit.cli ARGS`."""
    out, err, usage = tmp_path / "cli.out", tmp_path / "cli.err", tmp_path / "usage.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(usage), *args], stdout=o, stderr=e,
                             env=env, cwd=tmp_path, start_new_session=True)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:  # a hang fails the test instead of the suite
            os.killpg(p.pid, 9)
            p.wait()
            raise AssertionError(f"{args}: no answer within 60 s") from None
    code, cpu, rss_kb = json.loads(usage.read_text())
    return code, err.read_text(), cpu, rss_kb / 1024


def audit(**groups_extra) -> dict:
    return {"schema": "skillaudit.audit/v1",
            "metrics": {"groups": [{"model": "m", "benchmark": "*", "rae": 0.1, "rae_ci": [0.0, 0.2],
                                    "reportable": True, "p_cond": 0.5, **groups_extra}]},
            "recommendations": {"recommendations": [], "library": []}}


def assert_one_line_exit_2(res: tuple[int, str, float, float], *needles: str) -> None:
    code, err, cpu, rss = res
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    assert cpu < 5 and rss < 500, (cpu, rss)


def test_diff_on_hostile_documents_is_one_line_exit_2(tmp_path):
    """diff and check --baseline on deep nesting, wrong types, 1e400, /dev/zero, a sparse 2 GB file and a
    FIFO without a writer: one line naming the file (and JSON path), exit 2, bounded CPU and memory."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(audit()))
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "skillaudit.audit/v1", "metrics": ' + "[" * 100_000 + "]" * 100_000 + "}")
    mid = tmp_path / "mid.json"
    mid.write_text('{"schema": "skillaudit.audit/v1", "metrics": {"x": ' + "[" * 500 + "]" * 500 + "}}")
    typed = tmp_path / "typed.json"
    doc = audit()
    doc["metrics"]["groups"][0]["rae_ci"] = "wide"
    typed.write_text(json.dumps(doc))
    inf = tmp_path / "inf.json"
    inf.write_text(json.dumps(audit()).replace('"rae": 0.1', '"rae": 1e400'))
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as fh:
        fh.truncate(2 * 1024 ** 3)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert_one_line_exit_2(cli(["diff", str(deep), str(good)], tmp_path), "deep.json:1: not valid JSON (nested too deeply)")
    assert_one_line_exit_2(cli(["diff", str(good), str(mid)], tmp_path), "mid.json: $.metrics.x[0][0]", "deeper than 100")
    assert_one_line_exit_2(cli(["diff", str(good), str(typed)], tmp_path),
                           "typed.json: $.metrics.groups[0].rae_ci: expected a list, got a string")
    assert_one_line_exit_2(cli(["diff", str(good), str(inf)], tmp_path),
                           "inf.json:1: not valid JSON (number is infinity")
    assert_one_line_exit_2(cli(["diff", str(good), "/dev/zero"], tmp_path), "/dev/zero: larger than 128 MiB")
    assert_one_line_exit_2(cli(["diff", str(good), str(sparse)], tmp_path), "sparse.json: larger than 128 MiB")
    assert_one_line_exit_2(cli(["diff", str(good), str(fifo)], tmp_path), "fifo.json: no end of data within 3 s")
    runs = tmp_path / "runs.jsonl"
    runs.write_text("")
    assert_one_line_exit_2(cli(["check", str(runs), "--baseline", str(typed)], tmp_path), "typed.json: $.metrics")


def test_verify_prune_document_is_schema_checked(tmp_path):
    """verify --prune with a wrong-typed or deep prune document: one line naming the JSON path, exit 2."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text("")
    bad = tmp_path / "prune.json"
    bad.write_text(json.dumps({"schema": "skillaudit.prune/v1", "recommendations": [{"action": 3}]}))
    assert_one_line_exit_2(cli(["verify", str(runs), "--prune", str(bad)], tmp_path),
                           "prune.json: $.recommendations[0].action: expected a string, got a whole number")
    bad.write_text("[" * 2000 + "]" * 2000)
    assert_one_line_exit_2(cli(["verify", str(runs), "--prune", str(bad)], tmp_path), "prune.json:1: not valid JSON")


def test_inspect_depth_bomb_is_refused_before_inspect_reads_it(tmp_path):
    """`import inspect` on a 200 KB depth bomb (JSON or inside an .eval zip) is refused before
    inspect_ai's reader sees it: one line, exit 2, bounded memory."""
    pytest.importorskip("inspect_ai")
    import zipfile

    bomb = tmp_path / "bomb.json"
    bomb.write_text('{"version": 2, "eval": ' + "[" * 100_000 + "]" * 100_000 + "}")
    ev = tmp_path / "bomb.eval"
    with zipfile.ZipFile(ev, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", '{"eval": ' + '{"a":' * 1000 + "1" + "}" * 1000 + "}")
    for path in (bomb, ev):
        res = cli(["import", "inspect", "--enabled", str(path), "--disabled", str(path), "-o",
                   str(tmp_path / "o.jsonl")], tmp_path)
        assert_one_line_exit_2(res, f"{path.name}", "nested deeper than 200 levels")


INSPECT_DATA = ROOT / "tests" / "data" / "importers" / "inspect"


def zstd_zip(members: dict[str, bytes], *, declared_size: int | None = None) -> bytes:
    """A zip whose members are zstd-compressed (method 93), built by hand: Python's `zipfile` writes
    method 93 only from 3.14, and importing inspect_ai (which patches `zipfile`) is what the
    subprocess tests must not depend on. `declared_size` lies about every member's size."""
    import struct
    import zlib

    import zstandard

    local, central = bytearray(), bytearray()
    for name, payload in members.items():
        comp = zstandard.ZstdCompressor().compress(payload)
        size = len(payload) if declared_size is None else declared_size
        fields = (63, 0, 93, 0, 0x21, zlib.crc32(payload), len(comp), size, len(name), 0)
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields) + name.encode() + comp
        central += struct.pack("<IH", 0x02014B50, 63) + struct.pack("<HHHHHIIIHH", *fields)
        central += struct.pack("<HHHII", 0, 0, 0, 0, offset) + name.encode()
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(local), 0)
    return bytes(local + central + end)


def test_hand_built_zstd_zip_is_what_inspect_ai_reads():
    """The builder above writes a zip inspect_ai's patched `zipfile` reads back (its own check of
    the format), so the bomb below is a well-formed zstd archive, not a broken one."""
    pytest.importorskip("inspect_ai.log")
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(zstd_zip({"header.json": b'{"a": 1}'}))) as zf:
        assert zf.infolist()[0].compress_type == 93
        assert zf.read("header.json") == b'{"a": 1}'


def test_real_zstd_eval_imports_in_a_process_that_never_imported_inspect_ai(tmp_path):
    """`import inspect` reads `.eval` logs written by inspect_ai 0.3.285 (every entry zstd, method
    93; tests/data/importers/inspect/make_eval.py made them) in a fresh process: 4 pairs, with the
    planted rescue of `add`, harm of `mul` and the tool results as retrievals."""
    pytest.importorskip("inspect_ai")
    import zipfile

    on, off = INSPECT_DATA / "skills_on.eval", INSPECT_DATA / "skills_off.eval"
    assert {i.compress_type for i in zipfile.ZipFile(on).infolist()} == {93}
    out = tmp_path / "runs.jsonl"
    code, err, _, _ = cli(["import", "inspect", "--enabled", str(on), "--disabled", str(off), "-o", str(out)],
                          tmp_path)
    assert code == 0, err
    assert "4 pair(s), 8 record(s)" in err
    recs = {(r["task_id"], r["condition"]): r for r in map(json.loads, out.read_text().splitlines())}
    assert len(recs) == 8
    assert (recs["add", "enabled"]["correct"], recs["add", "disabled"]["correct"]) == (True, False)
    assert (recs["mul", "enabled"]["correct"], recs["mul", "disabled"]["correct"]) == (False, True)
    assert [s["id"] for s in recs["add", "enabled"]["retrievals"][0]["skills"]] == [
        "arith-basics", "float-tolerance-comparison"]
    assert recs["sub", "enabled"]["retrievals"] == []
    assert recs["div", "enabled"]["retrievals"][0]["skills"] == []


def test_zstd_bomb_in_an_eval_is_one_line(tmp_path):
    """A zstd member that declares 100 bytes but inflates to 64 MiB (past a 1 MiB cap) stops at the
    cap: one line naming the file and the member, exit 2, bounded memory; a corrupt zstd member and
    a member too deep are one line too."""
    bomb = tmp_path / "bomb.eval"
    bomb.write_bytes(zstd_zip({"header.json": b"[" + b" " * (64 << 20) + b"]"}, declared_size=100))
    assert bomb.stat().st_size < 10_000
    env_cap = os.environ.get("SKILLAUDIT_MAX_DOCUMENT_MB")
    os.environ["SKILLAUDIT_MAX_DOCUMENT_MB"] = "1"
    try:
        res = cli(["import", "inspect", "--enabled", str(bomb), "--disabled", str(bomb), "-o",
                   str(tmp_path / "o.jsonl")], tmp_path)
    finally:
        if env_cap is None:
            del os.environ["SKILLAUDIT_MAX_DOCUMENT_MB"]
        else:
            os.environ["SKILLAUDIT_MAX_DOCUMENT_MB"] = env_cap
    assert_one_line_exit_2(res, "bomb.eval: header.json: larger than 1 MiB")
    deep = tmp_path / "deep.eval"
    deep.write_bytes(zstd_zip({"header.json": b"[" * 300 + b"]" * 300}))
    assert_one_line_exit_2(cli(["import", "inspect", "--enabled", str(deep), "--disabled", str(deep), "-o",
                                str(tmp_path / "o.jsonl")], tmp_path),
                           "deep.eval: header.json: nested deeper than 200 levels")
    broken = bytearray(zstd_zip({"header.json": b'{"a": 1}' * 50}))
    broken[40:48] = b"\xff" * 8  # inside the compressed frame
    corrupt = tmp_path / "corrupt.eval"
    corrupt.write_bytes(bytes(broken))
    assert_one_line_exit_2(cli(["import", "inspect", "--enabled", str(corrupt), "--disabled", str(corrupt), "-o",
                                str(tmp_path / "o.jsonl")], tmp_path), "corrupt.eval: header.json: not readable")


def test_reader_units(tmp_path):
    """The reader's pieces: size cap with the environment override, nesting scan that skips strings,
    schema paths, non-finite numbers, a silent stream given up after the timeout."""
    p = tmp_path / "a.json"
    p.write_text('{"a": [1, "[[[\\"[", {"b": 2}]}')
    assert max_nesting(p.read_bytes()) == 3
    assert read_document(p) == {"a": [1, '[[["[', {"b": 2}]}
    with pytest.raises(InputError, match="larger than"):
        read_document_bytes(p, max_bytes=10)
    check_file_depth(p, 3)
    with pytest.raises(InputError, match="nested deeper than 2"):
        check_file_depth(p, 2)
    with pytest.raises(InputError, match=r"\$\.a\[0\]\.b: expected a string, got a whole number"):
        check_schema({"a": [{"b": 1}, {"b": 2}]}, {"a": [{"b": "str"}]}, p)
    with pytest.raises(InputError, match=r"\$\.x: missing"):
        check_schema({}, {"!x": "str"}, p)
    with pytest.raises(InputError, match="infinity"):
        parse_document(b'{"a": -1e999}', p)
    with pytest.raises(InputError, match=r"\$\.a\[1\]: a number that is not finite"):
        check_tree({"a": [1.0, float("nan")]}, p)
    r, w = os.pipe()  # a writer that never writes nor closes
    try:
        with pytest.raises(InputError, match=r"no end of data within 0\.2 s"):
            read_document_bytes(f"/proc/self/fd/{r}", timeout_s=0.2)
    finally:
        os.close(r)
        os.close(w)
