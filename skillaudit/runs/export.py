"""Parquet export of paired runs, for per-skill aggregation in SQL engines (DuckDB, Spark, ...).

`export_parquet(runs, out)` writes a folder with two tables:

- `pairs.parquet`: one row per pair (`pair_id`, `model`, `benchmark`, `task_id`, `epoch`, `y_pos`,
  `y_neg`, `flip`, `invoked`, `n_skills` (size of the deduplicated retrieved set; > 0 = in S_call),
  `adhered` (1/0, -1 = unknown));
- `pair_skills.parquet`: one row per (pair, retrieved skill) (`pair_id`, `skill_id`, `rank`,
  `score` (NaN when not logged)).

Strings are dictionary-encoded. The folder is written atomically (temp folder + rename); an
existing folder is only replaced when it holds nothing but an earlier export.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from skillaudit.errors import OutputError, require
from skillaudit.runs import PairedRuns
from skillaudit.util.files import atomic_directory

PAIRS, PAIR_SKILLS = "pairs.parquet", "pair_skills.parquet"
_OURS = {PAIRS, PAIR_SKILLS}


def _dict_column(pa: Any, codes: np.ndarray, vocab: tuple[str, ...]) -> Any:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(list(vocab), pa.string()))


def pairs_table(runs: PairedRuns) -> Any:
    """The pairs table (pyarrow.Table), one row per pair in PairedRuns order."""
    pa = require("pyarrow", "parquet")
    return pa.table({
        "pair_id": pa.array(np.arange(runs.n_pairs, dtype=np.int64)),
        "model": _dict_column(pa, runs.model, runs.models),
        "benchmark": _dict_column(pa, runs.benchmark, runs.benchmarks),
        "task_id": _dict_column(pa, runs.task, runs.tasks),
        "epoch": pa.array(runs.epoch.astype(np.int32)),
        "y_pos": pa.array(runs.y_pos),
        "y_neg": pa.array(runs.y_neg),
        "flip": pa.array(runs.flip),
        "invoked": pa.array(runs.invoked),
        "n_skills": pa.array(runs.n_skills_retrieved.astype(np.int32)),
        "adhered": pa.array(runs.adhered),
    })


def pair_skills_table(runs: PairedRuns) -> Any:
    """The long pair x skill table (pyarrow.Table): one row per retrieved skill of each pair."""
    pa = require("pyarrow", "parquet")
    ranks, scores = runs.ranks.tocsr(), runs.scores.tocsr()
    pair_id = np.repeat(np.arange(runs.n_pairs, dtype=np.int64), np.diff(ranks.indptr))
    return pa.table({
        "pair_id": pa.array(pair_id),
        "skill_id": _dict_column(pa, ranks.indices, runs.skills),
        "rank": pa.array(ranks.data.astype(np.int32)),
        "score": pa.array(scores.data.astype(np.float32)),
    })


def export_parquet(runs: PairedRuns, out: str | Path, inputs: tuple[str, ...] = ()) -> list[Path]:
    """Write `out/pairs.parquet` and `out/pair_skills.parquet`; return their paths."""
    require("pyarrow", "parquet")
    import pyarrow.parquet as pq

    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise OutputError(f"{out}: exists and is not a folder")
        other = sorted(p.name for p in out.iterdir() if p.name not in _OURS)
        if other:
            raise OutputError(f"{out}: folder is not empty (has {other[0]}); give a new or export folder")
    resolved = {str(Path(p).resolve()) for p in inputs if p != "-"}
    if any(str((out / name).resolve()) in resolved for name in _OURS):
        raise OutputError(f"{out}: would overwrite an input file")
    with atomic_directory(out) as tmp:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; an export is an ordinary folder
        pq.write_table(pairs_table(runs), tmp / PAIRS)
        pq.write_table(pair_skills_table(runs), tmp / PAIR_SKILLS)
    return [out / PAIRS, out / PAIR_SKILLS]
