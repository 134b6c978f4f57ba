"""Paired run logs: stream JSON Lines records (DESIGN §3.1), pair enabled with disabled runs.

The result is held in arrays, not per-record objects: one row per pair in numpy vectors and a
sparse (CSR) pair x skill matrix whose values are the 1-based rank of the skill in the pair's
deduplicated retrieved set (`retrieval`; `ranks` is the same matrix as scipy.sparse). While
reading, records are kept as per-record numpy columns (ids into small vocabularies), and pairing
is done once, with numpy, when every file has been read.

`load_runs` is the entry point. The concepts live in their own modules:

- `runs.paired`: `PairedRuns`, the paired runs as arrays, and its selections;
- `runs.records`: one record: the conditions, opening a log, the exact check of a line;
- `runs.reader`: blocks of lines through the C scanner, msgspec or the exact path, into columns;
- `runs.workers`: `--jobs`: work units read in worker threads or processes;
- `runs.pairing`: the columns read become `PairedRuns`.

Layer (pyproject.toml `[tool.importlinter]`): May import library, stats, util, errors.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillaudit.errors import RunLogError
from skillaudit.runs.paired import PairedRuns
from skillaudit.runs.pairing import _pair, _paired
from skillaudit.runs.reader import _feed_file, _part, _State
from skillaudit.runs.records import (
    ADHERENCE_UNKNOWN,
    CONDITION_ALIASES,
    DISABLED,
    ENABLED,
    _CodeLines,
)
from skillaudit.runs.workers import _auto_jobs, _file_sizes, _parse_parallel, _work_units

__all__ = [
    "ADHERENCE_UNKNOWN", "CONDITION_ALIASES", "DISABLED", "ENABLED", "PairedRuns", "load_runs",
    "read_text_records",
]


def load_runs(
    paths: Iterable[str],
    *,
    strict: bool = False,
    library: Any = None,
    jobs: int = 1,
    adherence: bool = True,
) -> PairedRuns:
    """Stream run logs, validate each record, pair them; raise RunLogError naming file:line.

    `jobs` > 1 parses in that many worker processes (0: one per core when the input is over
    8 MB); large plain files are cut into byte ranges at line starts, gzip files are read whole
    and standard input is always read here. The result, and the first error reported, are the same
    as with jobs=1: records pair across files and a duplicate key names both lines.
    `adherence=False` skips reading answers (`adhered` is -1, unknown): for callers that do not
    report the adherence stage, it saves decoding the longest field of every record.
    """
    paths = [str(p) for p in paths]
    code = _CodeLines(library)
    # Millions of small containers and no cycles: the cyclic collector would only rescan them.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(paths, strict, code, jobs, adherence)[0]
    finally:
        if was_enabled:
            gc.enable()


def _load(paths: list[str], strict: bool, code: _CodeLines, jobs: int, adherence: bool,
          extra: Any = None) -> tuple[PairedRuns, list[Any]]:
    """The paired runs, and what `extra` (see _State) kept of each unit read, in reading order."""
    sizes = _file_sizes(paths)
    if jobs <= 0:
        jobs = _auto_jobs(sizes)
    units = _work_units(paths, sizes, jobs) if jobs > 1 and "-" not in paths else []
    parts = _parse_parallel(units, jobs, code, adherence, extra) if len(units) > 1 else None
    if parts is None:
        st = _State(code, adherence, extra)
        error = None
        try:
            for ix, path in enumerate(paths):
                _feed_file(st, path, ix)
        except RunLogError as exc:  # _pair reports a duplicate before it first, as reading one by one would
            error = str(exc)
        parts = [_part(st, error)]
    extras = [p["extra"] for p in parts if p["extra"] is not None]
    return _paired(_pair(parts), strict), extras


def read_text_records(text: str, name: str = "<string>") -> PairedRuns:
    """Load runs from a string of JSON Lines (for tests and notebooks)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as fh:
        fh.write(text)
    try:
        return load_runs([fh.name])
    finally:
        Path(fh.name).unlink()
