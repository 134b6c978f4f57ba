"""EvalPlus results (`*_eval_results.json` from `evalplus.evaluate`) to run logs.

The layout `evalplus.evaluate` writes (evalplus 0.3)::

    {"date": "...", "hash": "...",
     "eval": {"HumanEval/0": [{"task_id": "HumanEval/0", "solution": "...",
                               "base_status": "pass", "plus_status": "fail",
                               "base_fail_tests": [...], "plus_fail_tests": [...]}, ...], ...}}

Each task holds its samples in completion order; sample `i` becomes epoch `i + 1`. A sample is correct
when its base and plus tests both pass (`plus_status` is null when evalplus ran `--base-only`: then
the base tests decide, and the report says so). The older layout, a task mapping to
`{"base": [[status, details], ...], "plus": [...]}`, is read too.

EvalPlus does not log tool calls: retrievals come from a sidecar JSON Lines file (`--retrievals`) of
`{"task_id", "epoch"?, "skills" | "retrieved" | "retrievals"}` lines. The benchmark is `humaneval_plus`
or `mbpp_plus` from the task ids (`--benchmark` overrides); the model is `--model` (default "default").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skillaudit.errors import ImportFormatError
from skillaudit.importers._common import (
    DISABLED,
    ENABLED,
    ImportReport,
    Pairer,
    join_retrievals,
    load_json,
    load_retrievals,
)

PASS = "pass"
EXPECTED = "the *_eval_results.json that evalplus.evaluate writes"
_BENCHMARKS = {"humaneval": "humaneval_plus", "mbpp": "mbpp_plus"}


def benchmark_of(task_id: str) -> str:
    prefix = task_id.split("/", 1)[0].lower() if "/" in task_id else ""
    return _BENCHMARKS.get(prefix, prefix or "default")


def import_evalplus(
    enabled: Sequence[str],
    disabled: Sequence[str],
    *,
    retrievals: str | None = None,
    model: str | None = None,
    benchmark: str | None = None,
) -> tuple[list[dict[str, Any]], ImportReport]:
    """Read enabled and disabled EvalPlus results; return §3.1 records (paired only) and a report."""
    pairer = Pairer("evalplus")
    pairer.paired_on = "(model, task id, epoch)"
    pairer.naming = (f"benchmark {benchmark!r} (--benchmark)" if benchmark is not None
                     else "benchmark from the task ids (HumanEval/ -> humaneval_plus, Mbpp/ -> mbpp_plus)")
    base_only = 0
    m = model or "default"
    for condition, paths in ((ENABLED, enabled), (DISABLED, disabled)):
        for path in paths:
            pairer.source(path)
            for task_id, epoch, sample, where in _samples(path):
                key = (m, benchmark or benchmark_of(task_id), task_id, epoch)
                base, plus = sample["base_status"], sample["plus_status"]
                if plus is None:
                    base_only += 1
                correct = base == PASS and (plus is None or plus == PASS)
                record: dict[str, Any] = {"correct": correct}
                if isinstance(sample.get("solution"), str) and sample["solution"]:
                    record["answer"] = sample["solution"]
                record["meta"] = {"source": path, "base_status": base, "plus_status": plus}
                pairer.add(condition, key, record, where)
    if base_only:
        pairer.note(
            f"{base_only} sample(s) have no plus-test status (evaluated with --base-only): "
            "judged on the base tests alone"
        )
    table = load_retrievals(retrievals) if retrievals else None
    if retrievals:
        pairer.source(retrievals)
    join_retrievals(pairer, table, retrievals)
    return pairer.finish()


def _samples(path: str):
    """(task_id, epoch, {"base_status", "plus_status", "solution"?}, where) for each sample."""
    data = load_json(path, EXPECTED)
    tasks = data.get("eval") if isinstance(data, dict) else None
    if not isinstance(tasks, dict):
        raise ImportFormatError(
            f"{path}: not an EvalPlus results file (no \"eval\" object of task_id -> results); "
            f"expected {EXPECTED}"
        )
    for task_id, results in tasks.items():
        where = f"{path}: eval[{task_id!r}]"
        if isinstance(results, list):
            for i, res in enumerate(results):
                if not isinstance(res, dict) or "base_status" not in res:
                    raise ImportFormatError(
                        f"{where}[{i}]: a sample needs \"base_status\" (and \"plus_status\"); "
                        f"expected {EXPECTED}"
                    )
                _check_status(res["base_status"], f"{where}[{i}]", nullable=False)
                _check_status(res.get("plus_status"), f"{where}[{i}]", nullable=True)
                yield str(res.get("task_id", task_id)), i + 1, {
                    "base_status": res["base_status"], "plus_status": res.get("plus_status"),
                    "solution": res.get("solution"),
                }, f"{where}[{i}]"
        elif isinstance(results, dict) and isinstance(results.get("base"), list):
            plus = results.get("plus")
            for i, b in enumerate(results["base"]):
                base_status = b[0] if isinstance(b, list) and b else b
                plus_status = None
                if isinstance(plus, list) and i < len(plus):
                    p = plus[i]
                    plus_status = p[0] if isinstance(p, list) and p else p
                _check_status(base_status, f"{where}.base[{i}]", nullable=False)
                _check_status(plus_status, f"{where}.plus[{i}]", nullable=True)
                yield task_id, i + 1, {"base_status": base_status, "plus_status": plus_status}, f"{where}[{i}]"
        else:
            raise ImportFormatError(
                f"{where}: must be a list of samples with \"base_status\"/\"plus_status\"; expected {EXPECTED}"
            )


def _check_status(value: Any, where: str, *, nullable: bool) -> None:
    if value is None and nullable:
        return
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: test status must be \"pass\", \"fail\" or \"timeout\", got {value!r}")
