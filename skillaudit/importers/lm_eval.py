"""lm-evaluation-harness per-sample logs (`samples_<task>_<date>.jsonl`, from `--log_samples`) to run logs.

Each line `lm_eval` writes holds one document under one filter::

    {"doc_id": 0, "doc": {...}, "target": "4", "arguments": {...}, "resps": [[...]],
     "filtered_resps": [...], "filter": "strict-match", "metrics": ["exact_match"],
     "doc_hash": "...", "prompt_hash": "...", "target_hash": "...", "exact_match": 1.0}

The task id is `doc_id`; the outcome is the `--metric` field (default: the line's only metric),
correct when >= `--threshold` (default 1). A task with several filters writes one line per filter:
`--filter` picks one (needed when there are several). The benchmark is the task name from the file
name (`--benchmark` overrides); the model is `model_name` from the `results_<date>.json` beside it
(`--model` overrides, else "default"). Pairs whose `doc_hash` differ are different documents and are
left out. Retrievals come from a sidecar (`--retrievals`) keyed by `task_id` = doc id.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from skillaudit.errors import ImportFormatError, InputError
from skillaudit.importers._common import (
    DISABLED,
    ENABLED,
    ImportReport,
    Pairer,
    SideSource,
    iter_jsonl,
    join_retrievals,
    load_json,
    load_retrievals,
    name_benchmarks,
    to_correct,
)

EXPECTED = "an lm-eval samples_<task>_<date>.jsonl file (lm_eval --log_samples)"
_NAME = re.compile(r"^samples_(?P<task>.+?)_(?P<date>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl?$")


def task_and_date(path: str) -> tuple[str, str | None]:
    """(task name, date id) from an lm-eval samples file name; the stem when it does not match."""
    name = Path(path).name
    m = _NAME.match(name)
    if m:
        return m.group("task"), m.group("date")
    stem = Path(path).stem
    return (stem[len("samples_"):] if stem.startswith("samples_") else stem), None


def _results_of(path: str) -> dict[str, Any] | None:
    """The results_<date>.json written beside a samples file (or the folder's only one), parsed."""
    folder = Path(path).parent
    _, date = task_and_date(path)
    candidates = [folder / f"results_{date}.json"] if date else []
    if not candidates or not candidates[0].is_file():
        found = sorted(folder.glob("results_*.json"))
        candidates = found if len(found) == 1 else []
    for c in candidates:
        if c.is_file():
            try:
                data = orjson.loads(c.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                return None
            return data if isinstance(data, dict) else None
    return None


#: Hugging Face `datasets` loaders a task names for local files (`dataset_path: json` + data_files)
_LOADERS = frozenset({"json", "csv", "parquet", "text", "arrow", "pandas", "generator", "imagefolder"})


def dataset_of(path: str) -> str | None:
    """The task's dataset (`dataset_path`, with `/dataset_name`) from the results file's `configs`."""
    data = _results_of(path)
    task, _ = task_and_date(path)
    configs = data.get("configs") if data else None
    cfg = configs.get(task) if isinstance(configs, dict) else None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("dataset_path"), str) or not cfg["dataset_path"]:
        return None
    if cfg["dataset_path"] in _LOADERS:  # a local file read by a generic loader names no dataset
        return None
    name = cfg.get("dataset_name")
    return cfg["dataset_path"] + (f"/{name}" if isinstance(name, str) and name else "")


def model_of(path: str) -> str | None:
    """`model_name` of the results_<date>.json written beside a samples file, if there is one."""
    data = _results_of(path)
    name = data.get("model_name") if data else None
    return name if isinstance(name, str) and name else None


def import_lm_eval(
    enabled: Sequence[str],
    disabled: Sequence[str],
    *,
    metric: str | None = None,
    threshold: float = 1.0,
    filter_name: str | None = None,
    retrievals: str | None = None,
    model: str | None = None,
    benchmark: str | None = None,
) -> tuple[list[dict[str, Any]], ImportReport]:
    """Read enabled and disabled lm-eval sample logs; return §3.1 records (paired only) and a report."""
    pairer = Pairer("lm-eval")
    pairer.paired_on = "(model, doc id)"
    sources = [SideSource(path, condition, task_and_date(path)[0], dataset_of(path))
               for condition, paths in ((ENABLED, enabled), (DISABLED, disabled)) for path in paths]
    bench_of, pairer.naming = name_benchmarks(sources, benchmark)
    for src in sources:
        pairer.source(src.path)
        _read_file(src.path, src.side, pairer, metric=metric, threshold=threshold,
                   filter_name=filter_name, model=model, benchmark=bench_of[src.path])
    table = load_retrievals(retrievals) if retrievals else None
    if retrievals:
        pairer.source(retrievals)
    join_retrievals(pairer, table, retrievals)
    return pairer.finish()


def _lines(path: str) -> list[tuple[int, dict[str, Any]]]:
    if path.endswith(".json"):  # a JSON array of samples (older lm-eval versions)
        data = load_json(path, EXPECTED)
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise ImportFormatError(f"{path}: not a list of lm-eval samples; expected {EXPECTED}")
        return [(i + 1, d) for i, d in enumerate(data)]
    return list(iter_jsonl(path, EXPECTED))


def _read_file(path: str, condition: str, pairer: Pairer, *, metric: str | None, threshold: float,
               filter_name: str | None, model: str | None, benchmark: str) -> None:
    lines = _lines(path)
    for lineno, rec in lines:
        if "doc_id" not in rec:
            raise ImportFormatError(
                f"{path}:{lineno}: not an lm-eval sample (no \"doc_id\"); expected {EXPECTED}"
            )
    if not lines:
        pairer.note(f"{path}: no samples")
        return
    filters = list(dict.fromkeys(str(rec.get("filter", "none")) for _, rec in lines))
    if filter_name is None:
        if len(filters) > 1:
            raise InputError(
                f"{path}: has results under filters {', '.join(repr(f) for f in filters)}; "
                "choose one with --filter"
            )
        chosen = filters[0]
    elif filter_name not in filters and len(filters) == 1:
        chosen = filters[0]  # --filter names another task's filter; this file has only one
    else:
        if filter_name not in filters:
            raise InputError(
                f"{path}: has no filter {filter_name!r} (it has {', '.join(repr(f) for f in filters)})"
            )
        chosen = filter_name
    first = lines[0][1]
    names = first.get("metrics") if isinstance(first.get("metrics"), list) else []
    if metric is None:
        if len(names) != 1:
            listed = ", ".join(repr(n) for n in names) or "none listed"
            raise InputError(f"{path}: metrics {listed}; choose one with --metric")
        use = str(names[0])
    else:
        use = metric
    m = model or model_of(path) or "default"
    b = benchmark
    for lineno, rec in lines:
        if str(rec.get("filter", "none")) != chosen:
            continue
        where = f"{path}:{lineno}"
        doc_id = rec["doc_id"]
        if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)):
            raise ImportFormatError(f"{where}: \"doc_id\" must be an integer or string; expected {EXPECTED}")
        key = (m, b, str(doc_id), 1)
        if use not in rec:
            have = ", ".join(repr(n) for n in (rec.get("metrics") or [])) or "none"
            raise InputError(f"{where}: no metric {use!r} in this sample (its metrics: {have})")
        try:
            correct = to_correct(rec[use], threshold)
        except ValueError as exc:
            pairer.skip(condition, key, where, f"metric {use!r}: {exc}")
            continue
        record: dict[str, Any] = {"correct": correct}
        resps = rec.get("filtered_resps")
        if isinstance(resps, list) and resps and isinstance(resps[0], str) and resps[0]:
            record["answer"] = resps[0]
        record["meta"] = {"source": path, "metric": use, "value": rec[use], "filter": chosen}
        doc_hash = rec.get("doc_hash")
        pairer.add(condition, key, record, where,
                   fingerprint=doc_hash if isinstance(doc_hash, str) else None)
