"""`audit --out DIR` and every atomic folder (issue 16, item 10): DIR is always the old or the new
complete folder whatever moment the writer is killed at; leftovers of dead writers are cleaned up
(an old folder orphaned between two renames is put back); writers of one DIR exclude each other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.errors import OutputError
from skillaudit.runs.simulate import simulate
from skillaudit.util import files as _io

ROOT = Path(__file__).resolve().parents[1]
WRITER = """
import sys
from skillaudit.util.files import atomic_directory
out, tag = sys.argv[1], sys.argv[2]
with atomic_directory(out) as tmp:
    for i in range(5):
        (tmp / f"part{i}.txt").write_text(tag)
    (tmp / "audit.json").write_text(tag)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SKILLAUDIT_PAUSE_AT", None)
    env.pop("SKILLAUDIT_NO_EXCHANGE", None)
    env.update(extra)
    return env


def _kill_at(cmd: list[str], step: str, **env: str) -> None:
    """Run cmd until it pauses at `step` (test hook in skillaudit.util.files), then SIGKILL it."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            env=_env(SKILLAUDIT_PAUSE_AT=step, **env))
    try:
        for line in proc.stderr:  # progress lines may come first
            if line.startswith(b"paused at "):
                assert line.strip() == f"paused at {step}".encode()
                break
        else:
            pytest.fail(f"never paused at {step} (exit {proc.wait()})")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stderr.close()


def _write(out: Path, tag: str, **env: str) -> None:
    subprocess.run([sys.executable, "-c", WRITER, str(out), tag], check=True, env=_env(**env), timeout=60)


def _tags(out: Path) -> set[str]:
    files = sorted(p.name for p in out.iterdir())
    assert files == ["audit.json", *(f"part{i}.txt" for i in range(5))], files
    return {p.read_text() for p in out.iterdir()}


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")
                  and not p.name.endswith(".lock"))


@pytest.mark.parametrize(("exchange", "step"), [
    *(("renameat2", s) for s in ("tmp", "written", "swapped")),  # one atomic exchange: no step between renames
    *(("two-renames", s) for s in ("tmp", "written", "between", "swapped")),
])
def test_a_kill_at_any_step_leaves_the_old_or_the_new_folder(tmp_path, exchange, step):
    env = {"SKILLAUDIT_NO_EXCHANGE": "1"} if exchange == "two-renames" else {}
    out = tmp_path / "report"
    _write(out, "old", **env)
    _kill_at([sys.executable, "-c", WRITER, str(out), "new"], step, **env)
    if step == "between":  # the window of the fallback: the next writer (or reader) repairs it
        assert not out.exists() and _leftovers(out)
        with _io.folder_lock(out):
            pass
        assert _tags(out) == {"old"}
    else:
        assert _tags(out) == ({"new"} if step == "swapped" else {"old"})
    _write(out, "next", **env)
    assert _tags(out) == {"next"}
    assert _leftovers(out) == []  # the dead writer's temp / old folders are gone


def test_leftovers_of_live_writers_are_kept(tmp_path):
    out = tmp_path / "report"
    mine = tmp_path / f".report.{os.getppid()}.abcdefgh.tmp"  # the parent process: alive
    mine.mkdir()
    dead = tmp_path / ".report.999999999.abcdefgh.tmp"
    dead.mkdir()
    other = tmp_path / ".reports.999999999.abcdefgh.tmp"  # another folder's
    other.mkdir()
    with _io.atomic_directory(out) as tmp:
        (tmp / "x").write_text("1")
    assert mine.exists() and other.exists() and not dead.exists()


def test_a_second_writer_gets_one_line_with_the_pid(tmp_path):
    out = tmp_path / "report"
    with _io.folder_lock(out):
        with _io.atomic_directory(out) as tmp:  # re-entrant in the holder
            (tmp / "x").write_text("1")
        proc = subprocess.run([sys.executable, "-c", WRITER, str(out), "new"], capture_output=True, text=True,
                              env=_env(), timeout=60)
        assert proc.returncode == 1 and "OutputError" in proc.stderr
        assert f"{out}: is being written by another skillaudit (pid {os.getpid()}); wait for it" in proc.stderr
    assert (out / "x").read_text() == "1"
    with _io.folder_lock(out), pytest.raises(OutputError, match="being written by another skillaudit"):
        _io._held.clear()  # as if another process: the flock itself refuses
        try:
            with _io.folder_lock(out):
                pass
        finally:
            _io._held[str(out.parent / ".report.lock")] = 1


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    root = tmp_path_factory.mktemp("sim")
    s = simulate(n_tasks=200, n_skills=6, n_harmful=1, n_helpful=1, seed=5)
    runs, lib = s.write(root / "sim")
    return runs, lib


AUDIT = ["--embedder", "tfidf", "--bootstrap", "50", "--regression-bootstrap", "0", "--quiet"]


def test_two_audits_into_one_folder(sim, tmp_path):
    runs, lib = sim
    out = tmp_path / "rep"
    with _io.folder_lock(out):
        proc = subprocess.run([sys.executable, "-m", "skillaudit.cli", "audit", str(runs), "--skills", str(lib),
                               "--out", str(out), *AUDIT], capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == (f"Error: {out}: is being written by another skillaudit (pid {os.getpid()}); "
                           "wait for it to finish\n")
    res = CliRunner().invoke(cli, ["audit", str(runs), "--skills", str(lib), "--out", str(out), *AUDIT])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("step", ["written", "swapped"])
def test_killed_audit_leaves_a_complete_report(sim, tmp_path, step):
    runs, lib = sim
    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "skillaudit.cli", "audit", str(runs), "--skills", str(lib), "--out", str(out),
           *AUDIT]
    subprocess.run([*cmd, "--seed", "1"], check=True, env=_env(), timeout=120, capture_output=True)
    _kill_at([*cmd, "--seed", "2"], step)
    doc = json.loads((out / "audit.json").read_text())
    assert doc["inputs"]["settings"]["seed"] == (2 if step == "swapped" else 1)
    assert (out / "report.html").is_file() and (out / "skills.csv").is_file()
    subprocess.run([*cmd, "--seed", "3"], check=True, env=_env(), timeout=120, capture_output=True)
    assert json.loads((out / "audit.json").read_text())["inputs"]["settings"]["seed"] == 3
    assert _leftovers(out) == []


def test_an_unwritable_place_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with (pytest.raises(OutputError, match=r"/file/rep: cannot write there: (Not a directory|File exists)$"),
          _io.atomic_directory(blocker / "rep")):
        pass


def test_the_lock_file_goes_when_done(tmp_path):
    out = tmp_path / "rep"
    with _io.atomic_directory(out) as tmp:
        (tmp / "x").write_text("1")
        assert (tmp_path / ".rep.lock").read_text() == f"{os.getpid()}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
