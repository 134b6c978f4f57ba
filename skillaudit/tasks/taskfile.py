"""Task files (`skillaudit run --tasks FILE`): a maintainer's own tasks and checkers.

A task file is JSON Lines (one object a line) or YAML (a list of objects). Each task has `id`,
`prompt` and exactly one checker:

- `tests` (a list of assertion strings, or one string of lines) + optional `entry_point`: the calls
  of `entry_point` in the assertions (literal arguments only) are run on the answer's code in the
  sandbox of `sandbox.py` by `programs.RUNNER`, which records their outputs; the assertions are then
  evaluated here, outside the sandbox, with each call replaced by its recorded output. The answer's process never holds the
  expected values, only the code and the call arguments.
- `answer` + `match`: `exact`, `normalized` (case, spaces and punctuation ignored), `regex` (the
  `answer` is a pattern searched in the reply), `number` (`tolerance`, absolute, default 1e-6),
  `math` (math-verify).
- `checker: "module:function"`: trusted Python, called as `f(task, answer)`, returning a bool or a
  number (correct when >= `--threshold`).
- `grader: NAME`: an installed grader plugin (`skillaudit.util.plugins`, group `skillaudit.graders`),
  called like a checker.
- `grader: judge` + `rubric` (+ `threshold`, 0-1, default 0.7): graded by a judge model on the
  rubric (`skillaudit.agents.judge`, run by the engine: `run --judge-endpoint --judge-model`).

Optional `expected_skills` (a list of skill names): the skills that should fire on the task; `run`
copies it into each record's `meta.expected_skills` (never shown to the agent), and the audit's
trigger view splits the library's loss by whether the right skill was chosen.

Bad input raises `InputError` naming the file and line, before any model call.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillaudit.errors import HarnessError, InputError
from skillaudit.sandbox import process as _sandbox
from skillaudit.sandbox import programs as _programs
from skillaudit.sandbox import score as _score
from skillaudit.sandbox.process import Limits
from skillaudit.sandbox.score import Score
from skillaudit.tasks.benchmarks import Task

MATCHES = ("exact", "normalized", "regex", "number", "math")
CHECKER_KINDS = ("tests", "answer", "checker", "grader")
_ID_RE = re.compile(r"^[A-Za-z0-9_.:/@+-]{1,200}$")


@dataclass(frozen=True)
class TestCall:
    """One call of the entry point found in an assertion: its literal positional arguments."""

    args: tuple[Any, ...]


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def _read_rows(path: Path) -> list[tuple[int, Any]]:
    """(line, row) of every task in a JSON Lines or YAML file."""
    from skillaudit.util.documents import max_nesting, read_document_bytes

    raw = read_document_bytes(path)  # bounded: SKILLAUDIT_MAX_DOCUMENT_MB, regular file or stream
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            if _has_alias(node):
                raise InputError(f"{path}: YAML aliases are not allowed in a task file (write each value out)")
            data = yaml.safe_load(text)
        except RecursionError:
            raise InputError(f"{path}: nested too deeply to be a task file") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            raise InputError(f"{path}:{line}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        if isinstance(data, dict) and isinstance(data.get("tasks"), list):
            node = next(v for k, v in node.value if k.value == "tasks")
            data = data["tasks"]
        if not isinstance(data, list):
            raise InputError(f"{path}:1: expected a list of tasks (or a mapping with `tasks:`)")
        return [(n.start_mark.line + 1, row) for n, row in zip(node.value, data, strict=True)]
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if max_nesting(line.encode()) > MAX_TASK_DEPTH:
            raise InputError(f"{path}:{lineno}: nested deeper than {MAX_TASK_DEPTH} levels")
        try:
            rows.append((lineno, json.loads(line)))
        except ValueError as exc:
            raise InputError(f"{path}:{lineno}: not valid JSON ({exc})") from None
    return rows


MAX_TASK_DEPTH = 100  # a task is a flat object; deeper JSON is refused before it is parsed


def _has_alias(node: Any) -> bool:
    """Whether a composed YAML node graph shares a node (an alias: `*name`), walked iteratively
    (the graph of a billion-laughs document is small; its expansion is not)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        if id(n) in seen:
            return True
        seen.add(id(n))
        value = getattr(n, "value", None)
        if isinstance(value, list):
            for item in value:
                stack.extend(item if isinstance(item, tuple) else (item,))
    return False


def parse_tests(tests: Any, entry: str | None, where: str) -> tuple[list[str], list[TestCall], str]:
    """Assertions, the entry-point calls they make (in order) and the entry point's name."""
    if isinstance(tests, str):
        tests = [ln for ln in tests.splitlines() if ln.strip()]
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise InputError(f"{where}: `tests` must be a non-empty list of assertion strings")
    calls: list[TestCall] = []
    names: set[str] = set()
    parsed = []
    for t in tests:
        try:
            tree = ast.parse(t.strip())
        except SyntaxError as exc:
            raise InputError(f"{where}: `tests`: not Python: {t[:80]!r} ({exc.msg})") from None
        except (RecursionError, MemoryError, ValueError):
            raise InputError(f"{where}: `tests`: an assertion nested too deeply to parse: {t[:80]!r}") from None
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
            raise InputError(f"{where}: `tests`: each entry must be one `assert` statement: {t[:80]!r}")
        parsed.append(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                names.add(node.func.id)
    if entry is None:
        cands = sorted(n for n in names if n not in _SAFE_BUILTINS)
        if len(cands) != 1:
            raise InputError(f"{where}: `tests`: cannot tell the function under test "
                             f"(calls {', '.join(cands) or 'none'}); add `entry_point`")
        entry = cands[0]
    if not isinstance(entry, str) or not entry.isidentifier():
        raise InputError(f"{where}: `entry_point` must be a Python identifier")
    for tree in parsed:
        for node in _entry_calls(tree, entry):
            if node.keywords:
                raise InputError(f"{where}: `tests`: call {entry}() with positional arguments only")
            try:
                args = tuple(ast.literal_eval(a) for a in node.args)
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                raise InputError(f"{where}: `tests`: the arguments of {entry}() must be literals: "
                                 f"{ast.unparse(node)[:80]!r}") from None
            calls.append(TestCall(args))
    if not calls:
        raise InputError(f"{where}: `tests`: no assertion calls {entry}()")
    return [t.strip() for t in tests], calls, entry


_SAFE_BUILTINS = {"abs", "all", "any", "bool", "dict", "float", "int", "isinstance", "len", "list",
                  "max", "min", "round", "set", "sorted", "str", "sum", "tuple", "type", "frozenset",
                  "repr", "range", "zip", "map", "enumerate", "reversed"}


def _entry_calls(tree: ast.AST, entry: str) -> list[ast.Call]:
    """Entry-point calls in evaluation order (outer calls after their arguments are not allowed)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry:
            out.append(node)
    out.sort(key=lambda n: (n.lineno, n.col_offset))
    return out


def check_callable(spec: str, where: str, arity: int, what: str,
                    search: tuple[str, ...] = ()) -> Callable[..., Any]:
    """Import `module:function` (also from the `search` folders, e.g. the task file's) and check it
    takes `arity` positional arguments."""
    import sys

    mod, _, name = spec.partition(":")
    if not mod or not name:
        raise InputError(f"{where}: {what} {spec!r} must be 'module:function'")
    for folder in (*search, "."):
        if folder not in sys.path:
            sys.path.append(folder)
    try:
        module = importlib.import_module(mod)
        fn = module
        for part in name.split("."):
            fn = getattr(fn, part)
    except Exception as exc:  # the user's module may raise anything on import
        raise InputError(f"{where}: {what} {spec!r} cannot be imported ({type(exc).__name__}: {exc})") from None
    return check_signature(fn, where, arity, what, spec)


def check_signature(fn: Any, where: str, arity: int, what: str, spec: str) -> Callable[..., Any]:
    """`fn` if it is callable with `arity` positional arguments, else one clear line."""
    if not callable(fn):
        raise InputError(f"{where}: {what} {spec!r} is not callable")
    try:
        inspect.signature(fn).bind(*([None] * arity))
    except TypeError:
        raise InputError(f"{where}: {what} {spec!r} must take {arity} positional argument(s)") from None
    except ValueError:
        pass  # builtins without a signature
    return fn


def load_task_file(path: str | Path, label: str | None = None) -> list[Task]:
    """Every task of a task file, validated; raises InputError naming file and line."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    bench = label or p.stem
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for line, row in _read_rows(p):
        where = _where(p, line)
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected an object with id, prompt and a checker")
        tid, prompt = row.get("id"), row.get("prompt")
        if not isinstance(tid, (str, int)) or isinstance(tid, bool) or not _ID_RE.match(str(tid)):
            raise InputError(f"{where}: `id` must be a short string (letters, digits, _.:/@+-)")
        tid = str(tid)
        if tid in seen:
            raise InputError(f"{where}: task id {tid!r} already used on line {seen[tid]}")
        seen[tid] = line
        if not isinstance(prompt, str) or not prompt.strip():
            raise InputError(f"{where}: `prompt` must be a non-empty string")
        kinds = [k for k in CHECKER_KINDS if k in row]
        if not kinds:
            raise InputError(f"{where}: task {tid!r} has no checker (give `tests`, `answer` + `match`, `checker` or "
                             "`grader`)")
        if len(kinds) > 1:
            raise InputError(f"{where}: task {tid!r} has several checkers ({', '.join(kinds)}); give one")
        kind = kinds[0]
        data: dict[str, Any] = {"kind": kind, "line": line, "file": str(p)}
        if kind == "tests":
            tests, calls, entry = parse_tests(row["tests"], row.get("entry_point"), where)
            data.update(tests=tests, calls=[list(c.args) for c in calls], entry_point=entry)
        elif kind == "answer":
            match = row.get("match", "normalized")
            if match not in MATCHES:
                raise InputError(f"{where}: unknown match {match!r} (choose from {', '.join(MATCHES)})")
            ans = row["answer"]
            if isinstance(ans, bool) or not isinstance(ans, (str, int, float)):
                raise InputError(f"{where}: `answer` must be a string or a number")
            data.update(answer=str(ans), match=match)
            if match == "regex":
                try:
                    _regex().compile(str(ans))
                except (re.error, _regex().error) as exc:
                    raise InputError(f"{where}: `answer` is not a valid regex ({exc})") from None
            if match == "number":
                if _number(str(ans)) is None:
                    raise InputError(f"{where}: match number needs a numeric `answer`")
                tol = row.get("tolerance", 1e-6)
                if isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0:
                    raise InputError(f"{where}: `tolerance` must be a non-negative number")
                data["tolerance"] = float(tol)
        elif kind == "checker":
            spec = row["checker"]
            if not isinstance(spec, str):
                raise InputError(f"{where}: `checker` must be 'module:function'")
            check_callable(spec, where, 2, "checker", (str(p.resolve().parent),))
            data["checker"] = spec
        else:
            name = row["grader"]
            if not isinstance(name, str) or not name:
                raise InputError(f"{where}: `grader` must be the name of an installed grader plugin")
            if name == "judge":
                data.update(_judge_fields(row, where))
            else:
                grader_for(name, where)
            data["grader"] = name
        if "expected_skills" in row:  # the skills that should fire on it (copied to meta.expected_skills)
            exp = row["expected_skills"]
            if not isinstance(exp, list) or not all(isinstance(x, str) and x.strip() for x in exp):
                raise InputError(f"{where}: `expected_skills` must be a list of skill names")
            data["expected_skills"] = list(dict.fromkeys(x.strip() for x in exp))
        data["extra"] = {k: v for k, v in row.items() if k not in ("id", "prompt")}
        tasks.append(Task(task_id=tid, benchmark=bench, prompt=prompt.strip(), data=data))
    if not tasks:
        raise InputError(f"{p}: no tasks")
    return tasks


# ---- scoring ------------------------------------------------------------------------------------
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Lower case, punctuation removed, runs of white space as one space."""
    return " ".join(text.lower().translate(_PUNCT).split())


_FINAL_RE = re.compile(r"(?i)\b(?:final\s++)?answer\s*+(?:is\s*+:?+|:)\s*+([^\n]+)")  # possessive: linear


#: seconds a task file's own regex may take on one reply (the `regex` package's timeout)
REGEX_TIMEOUT_S = 1.0


def _regex() -> Any:
    """The `regex` package (the harness extra): `re`'s syntax, with a timeout on each match."""
    from skillaudit.errors import require

    return require("regex", "harness")


def final_answer(text: str) -> str:
    """The reply's final answer: `\\boxed{}`, else an `answer: X` line, else the last non-empty line."""
    boxed = _score.last_boxed(text)
    if boxed:
        return boxed
    m = _FINAL_RE.findall(text)
    if m:
        return m[-1].strip()
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _number(s: str) -> float | None:
    t = s.strip().replace(",", "").removeprefix("$").rstrip(".").strip()
    try:
        return float(t)
    except ValueError:
        return None


def score_answer(task: Task, reply: str) -> tuple[Score, str]:
    """An `answer` + `match` task; returns (verdict, the extracted answer)."""
    d = task.data
    gold, match = d["answer"], d["match"]
    if match == "regex":
        try:  # the user's pattern, on a reply an attacker writes: with a time limit
            ok = _regex().search(gold, reply, timeout=REGEX_TIMEOUT_S) is not None
        except TimeoutError:
            return Score(False, f"the regex /{gold[:80]}/ took over {REGEX_TIMEOUT_S:g} s on the reply: no match"), \
                reply.strip()[:1000]
        return Score(ok, "passed" if ok else f"no match for /{gold}/"), reply.strip()
    pred = final_answer(reply)
    if match == "exact":
        ok = pred == gold
    elif match == "normalized":
        ok = normalize(pred) == normalize(gold)
    elif match == "number":
        pred = _score.extract_math_answer(reply) or pred
        a, b = _number(gold), _number(pred)
        ok = a is not None and b is not None and abs(a - b) <= d["tolerance"]
    else:
        pred = _score.extract_math_answer(reply) or pred
        ok = _score.math_equal(gold, pred, numeric_fallback=True)
    return Score(ok, "passed" if ok else f"expected {gold!r}, got {pred!r}", {"extracted": pred}), pred


def score_tests(task: Task, reply: str, limits: Limits) -> tuple[Score, str]:
    """Run the entry-point calls on the answer's code in the sandbox, then the assertions here."""
    d = task.data
    code, too_large = _score.code_or_failure(reply)
    if too_large is not None:
        return too_large, code
    if not code.strip():
        return Score(False, "no code in the answer"), code
    inputs = {"t": [list(a) for a in d["calls"]]}
    payload = {"mode": "outputs", "code": code, "entry_point": d["entry_point"], "inputs": inputs,
               "not_none": False}
    import pickle

    mark = "@@" + secrets.token_hex(8) + "@@"
    name = f"outputs-{secrets.token_hex(8)}.json"
    res, files = _sandbox.run_python(_programs.RUNNER, {"payload.pkl": pickle.dumps(payload)}, limits,
                                     args=(mark, name), collect=(name,))
    if res.timed_out:
        return Score(False, f"timeout after {res.duration_s:.1f}s"), code
    verdict = _programs._marked(res, mark)
    if verdict is not None and not verdict.get("ok"):
        return Score(False, f"failed {verdict.get('stage')}: {verdict.get('error')}"), code
    if verdict is None or name not in files:
        return Score(False, _score._failure_reason(res, "solution")), code
    try:
        outputs = _score._decode_lines(files[name], inputs)["t"]
    except (ValueError, TypeError, KeyError, IndexError, RecursionError):
        return Score(False, "unreadable outputs"), code
    return check_assertions(d["tests"], d["entry_point"], outputs), code


class _Substitute(ast.NodeTransformer):
    """Replaces the entry-point calls (by node id) with names bound to their recorded outputs."""

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names

    def visit_Call(self, node: ast.Call) -> Any:
        if id(node) in self.names:
            return ast.copy_location(ast.Name(id=self.names[id(node)], ctx=ast.Load()), node)
        return self.generic_visit(node)


def check_assertions(tests: list[str], entry: str, outputs: list[Any]) -> Score:
    """Evaluate the trusted assertions with each entry-point call replaced by its recorded output."""
    i = 0
    for n, t in enumerate(tests):
        tree = ast.parse(t)
        names: dict[int, str] = {}
        env: dict[str, Any] = {}
        for node in _entry_calls(tree, entry):
            status, out = outputs[i] if i < len(outputs) else ("error", "no output")
            if status != "ok":
                return Score(False, f"failed test {n}: {str(out)[:200]}")
            names[id(node)] = f"__sa_out_{i}"
            env[names[id(node)]] = out
            i += 1

        new = ast.fix_missing_locations(_Substitute(names).visit(tree))
        try:
            # the user's own trusted assertions, with recorded outputs in place of the calls
            exec(compile(new, "<tests>", "exec"), {"__builtins__": __builtins__}, env)
        except AssertionError:
            return Score(False, f"failed test {n}: {t[:150]}")
        except Exception as exc:
            return Score(False, f"failed test {n}: {type(exc).__name__}: {str(exc)[:150]}")
    return Score(True, "passed", {"passed": len(tests)})


#: a judged answer is correct at a score (0-1) of at least this, unless the task sets `threshold`
JUDGE_THRESHOLD = 0.7


def _judge_fields(row: dict[str, Any], where: str) -> dict[str, Any]:
    """`grader: judge`: the task's `rubric` (what the judge grades against) and `threshold`."""
    rubric = row.get("rubric")
    if not isinstance(rubric, str) or not rubric.strip():
        raise InputError(f"{where}: `grader: judge` needs a `rubric` (a non-empty string the judge grades against)")
    thr = row.get("threshold", JUDGE_THRESHOLD)
    if isinstance(thr, bool) or not isinstance(thr, (int, float)) or not 0 <= thr <= 1:
        raise InputError(f"{where}: `threshold` must be a number from 0 to 1 (the judge's score, as a fraction)")
    return {"rubric": rubric.strip(), "threshold": float(thr)}


def is_judged(task: Task) -> bool:
    """A task graded by the judge model (`grader: judge`)."""
    return task.data.get("kind") == "grader" and task.data.get("grader") == "judge"


def grader_for(name: str, where: str) -> Callable[..., Any]:
    """The pointwise grader plugin `name` (`skillaudit.util.plugins`, group `skillaudit.graders`):
    `grade(task, answer)` -> bool or number. A pairwise one (`pairwise = True`) compares both
    conditions' answers after both ran: only the built-in `grader: judge` so far (refused here)."""
    from skillaudit.util.plugins import BUILTINS, load

    if name in BUILTINS["graders"]:
        raise InputError(f"{where}: `grader: {name}` is a built-in checker; use its own field (tests, answer, "
                         "checker) or a benchmark")
    fn = load("graders", name, f"{where}: grader")
    if getattr(fn, "pairwise", False):
        raise InputError(f"{where}: grader {name!r} is pairwise (compares both conditions' answers); "
                         "of the pairwise graders skillaudit runs only its own `grader: judge` so far")
    return check_signature(fn, where, 2, "grader", name)


def score_grader(task: Task, reply: str, threshold: float) -> tuple[Score, str]:
    """A grader plugin's verdict on the reply, as a `checker`'s: a bool, or a number vs `threshold`."""
    name = task.data["grader"]
    fn = grader_for(name, f"grader {name}")
    try:
        got = fn(task_dict(task), reply)
    except Exception as exc:
        raise HarnessError(f"grader {name} raised {type(exc).__name__}: {exc}") from None
    return _verdict(got, threshold, f"grader {name}", "grader"), reply


def score_checker(task: Task, reply: str, threshold: float) -> tuple[Score, str]:
    """A trusted `module:function` checker; a bool, or a number compared with `threshold`."""
    fn = check_callable(task.data["checker"], task.data["checker"], 2, "checker")
    tdict = task_dict(task)
    try:
        got = fn(tdict, reply)
    except Exception as exc:
        raise HarnessError(f"checker {task.data['checker']} raised {type(exc).__name__}: {exc}") from None
    return _verdict(got, threshold, f"checker {task.data['checker']}", "checker"), reply


def _verdict(got: Any, threshold: float, who: str, label: str) -> Score:
    """A checker's or grader's return value as a score: a bool, or a number vs `threshold`."""
    if isinstance(got, bool):
        return Score(got, "passed" if got else f"{label} returned False")
    if isinstance(got, (int, float)):
        ok = float(got) >= threshold
        return Score(ok, f"{label} score {got:g} {'>=' if ok else '<'} {threshold:g}", {f"{label}_score": float(got)})
    raise HarnessError(f"{who} returned {type(got).__name__}, not bool or number")


@dataclass
class TaskFileScorer:
    """Scores replies to task-file tasks (same `.score(task, text)` shape as `score.Scorer`)."""

    limits: Limits = field(default_factory=Limits)
    threshold: float = 1.0

    def score(self, task: Task, reply: str) -> tuple[Score, str]:
        kind = task.data["kind"]
        if kind == "tests":
            return score_tests(task, reply, self.limits)
        if kind == "answer":
            return score_answer(task, reply)
        if kind == "grader":
            if is_judged(task):  # the engine grades these with the judge model
                raise HarnessError("`grader: judge` needs a judge model: run --judge-endpoint URL --judge-model NAME")
            return score_grader(task, reply, self.threshold)
        return score_checker(task, reply, self.threshold)


def task_dict(task: Task) -> dict[str, Any]:
    """What an agent or checker sees of a task: id, prompt and the file's other fields, minus the
    expected values of `tests` (the agent writes code; the tests stay with the scorer)."""
    extra = dict(task.data.get("extra") or {})
    return {"id": task.task_id, "prompt": task.prompt, "kind": task.data["kind"], **extra}


def agent_view(task: Task) -> dict[str, Any]:
    """The task as an agent gets it: no answer, no tests, no checker."""
    d = {"id": task.task_id, "prompt": task.prompt, "kind": task.data["kind"]}
    if task.data["kind"] == "tests":
        d["entry_point"] = task.data["entry_point"]
    return d
