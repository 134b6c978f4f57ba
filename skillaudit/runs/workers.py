"""`--jobs`: cutting the run logs into work units and reading them in worker threads (the C scanner
runs without the GIL) or processes (msgspec holds it). The result is the same for any number of
workers: the parts come back in reading order and are paired once (`runs.pairing`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillaudit.errors import RunLogError
from skillaudit.runs import reader
from skillaudit.runs.reader import _feed_file, _part, _State
from skillaudit.runs.records import _CodeLines

_MIN_UNIT = 8 << 20  # below this many bytes per worker, a process costs more than it saves


def _file_sizes(paths: list[str]) -> list[int]:
    """Size of each regular file (0 for standard input and for what cannot be read: the reader reports it)."""
    import stat

    sizes = []
    for p in paths:
        try:
            st = Path(p).stat() if p != "-" else None
        except OSError:
            st = None
        sizes.append(st.st_size if st is not None and stat.S_ISREG(st.st_mode) else 0)
    return sizes


def _work_units(paths: list[str], sizes: list[int], jobs: int) -> list[tuple[str, int, int, int | None]]:
    """(path, file index, start, stop) units of about equal size for `jobs` workers, in file order.

    Plain files larger than a share are cut into byte ranges at line starts (each worker finds
    them); gzip files and standard input are one unit each.
    """
    sizes = [0 if p.endswith(".gz") else size for p, size in zip(paths, sizes, strict=True)]
    share = max(sum(sizes) // max(jobs, 1), _MIN_UNIT)
    units: list[tuple[str, int, int, int | None]] = []
    for ix, (p, size) in enumerate(zip(paths, sizes, strict=True)):
        k = max(1, round(size / share))
        if k == 1:
            units.append((p, ix, 0, None))
            continue
        cuts = [size * i // k for i in range(k + 1)]
        units.extend((p, ix, cuts[i], cuts[i + 1] if i + 1 < k else None) for i in range(k))
    return units


def _parse_one(args: tuple[str, int, int, int | None, _CodeLines, bool, Any]) -> dict[str, Any]:
    """--jobs worker: one unit -> its part; a RunLogError is returned (after the records before it)."""
    path, file_ix, start, stop, code, adherence, extra = args
    st = _State(code, adherence, extra)
    try:
        _feed_file(st, path, file_ix, start, stop)
    except RunLogError as exc:
        return _part(st, str(exc))
    return _part(st)


def _auto_jobs(sizes: list[int]) -> int:
    """Workers for `jobs=0`: one per available core, when the input is large enough to pay for them."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, sum(sizes) // _MIN_UNIT))


def _parse_parallel(units: list[tuple[str, int, int, int | None]], jobs: int, code: _CodeLines,
                    adherence: bool, extra: Any = None) -> list[dict[str, Any]] | None:
    """Parts of the units from worker threads or processes; None when workers cannot run (read in-process).

    The C scanner parses without the GIL, so when it reads the logs, threads do: no process to
    start, nothing to pickle. msgspec holds the GIL, so it gets processes.
    """
    args = [(*u, code, adherence, extra) for u in units]
    if reader._scan is not None:
        from concurrent.futures.thread import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(jobs, len(units))) as threads:
            return list(threads.map(_parse_one, args))
    from concurrent.futures import ProcessPoolExecutor  # imports multiprocessing: only here
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(units))) as pool:
            return list(pool.map(_parse_one, args))
    except (BrokenProcessPool, OSError):  # a worker was killed, or no process could start
        return None
