"""Small I/O helpers shared by every writer: atomic files and directories."""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

_PLAIN = frozenset({str, int, bool, type(None)})


def jsonable(obj: Any) -> Any:
    """Plain JSON types: tuples -> lists, numpy -> Python, NaN/inf -> None."""
    kind = type(obj)  # exact types first: a 2,000-skill ranking is ~50,000 values
    if kind in _PLAIN:
        return obj
    if kind is float:
        return obj if math.isfinite(obj) else None
    if kind is dict:
        return {k if type(k) is str else str(k): jsonable(v) for k, v in obj.items()}
    if kind is list or kind is tuple:
        return [jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def dumps_json(doc: Any, indent: bool = True) -> bytes:
    """`doc` as JSON bytes, what `orjson.dumps(jsonable(doc))` gives, without first copying every
    value: orjson walks the plain types itself (NaN and inf become null) and hands the rest to
    `jsonable`. 4x faster on a 2,000-skill ranking (0.05 s -> 0.013 s per 4 models)."""
    import orjson

    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(doc, default=_json_default, option=option)
    except TypeError:  # a key orjson cannot write (a tuple, say): the whole copy, as before
        return orjson.dumps(jsonable(doc), option=orjson.OPT_INDENT_2 if indent else 0)


def _json_default(obj: Any) -> Any:
    out = jsonable(obj)
    if out is obj:
        raise TypeError(f"not JSON serializable: {type(obj).__name__}")
    return out


def is_within(child: Path, parent: Path) -> bool:
    """True when `child` is `parent` or lies below it (both already resolved)."""
    try:
        child.relative_to(parent)
        return True
    except ValueError:
        return False


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` through a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ---------------------------------------------------------------- atomic folders
# A folder is written as `.NAME.PID.XXXXXXXX.tmp` beside it and swapped in whole: with
# renameat2(RENAME_EXCHANGE) where the kernel and file system have it (one atomic step: NAME is
# always the old or the new folder; the old one is then under the temporary name and removed),
# else by two renames (NAME -> `.NAME.old-PID`, temp -> NAME). Writers of one NAME take an
# exclusive flock on `.NAME.lock` first (removed when done); a second writer fails at once
# with the holder's pid. Under the
# lock, what dead writers left (temp folders, an `.old-PID` folder) is cleaned up, and an
# `.old-PID` folder of a writer killed between its two renames is renamed back to NAME.
AT_FDCWD = -100
RENAME_EXCHANGE = 2
_renameat2: Any = None
try:  # glibc >= 2.28
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)
    _renameat2 = getattr(_libc, "renameat2", None)
    if _renameat2 is not None:
        _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        _renameat2.restype = ctypes.c_int
except (ImportError, OSError, AttributeError):  # pragma: no cover - not glibc
    _renameat2 = None


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two existing paths in one atomic step; False when the system cannot (nothing changed)."""
    if _renameat2 is None or os.environ.get("SKILLAUDIT_NO_EXCHANGE"):
        return False
    if _renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):  # the file system cannot
        return False
    raise OSError(err, os.strerror(err), str(b))


def _pause(step: str) -> None:
    """Test hook: with SKILLAUDIT_PAUSE_AT=step, say so on stderr and wait (to be killed there)."""
    if os.environ.get("SKILLAUDIT_PAUSE_AT") == step:
        import sys
        import time

        sys.stderr.write(f"paused at {step}\n")
        sys.stderr.flush()
        time.sleep(120)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


_held: dict[str, int] = {}  # lock files this process holds -> depth (nested writers of one folder)


@contextlib.contextmanager
def folder_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold the exclusive lock of folder `path` (`.NAME.lock` beside it); OutputError when another
    process holds it. Re-entrant within a process."""
    import fcntl

    from skillaudit.errors import OutputError

    path = Path(path).resolve()
    lock = str(path.parent / f".{path.name}.lock")
    if lock in _held:
        _held[lock] += 1
        try:
            yield
        finally:
            _held[lock] -= 1
        return
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"{path}: cannot write there: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputError(f"{path}: is being written by another skillaudit (pid {other}); "
                              "wait for it to finish") from None
        try:  # the lock file is removed by its holder when done: is ours still the one at `lock`?
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # a holder removed it between our open and our flock: take the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[lock] = 1
        try:
            _clean_leftovers(path)
            yield
        finally:
            del _held[lock]
            with contextlib.suppress(OSError):
                os.unlink(lock)  # still holding it: a writer waiting on this file retries on the next one
    finally:
        os.close(fd)  # releases the flock


_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?:(?P<pid>\d+)\.[^.]+\.tmp|old-(?P<old>\d+))")


def _clean_leftovers(path: Path) -> None:
    """Remove what dead writers of `path` left beside it; restore an old folder a writer killed
    between its two renames left instead of `path`. Called with the folder's lock held."""
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return
    for entry in sorted(entries, key=lambda e: e.name):
        m = _LEFTOVER.fullmatch(entry.name)
        if m is None or m.group("name") != path.name:
            continue
        pid = int(m.group("pid") or m.group("old"))
        if _pid_alive(pid):
            continue
        if m.group("old") is not None and not os.path.lexists(path):
            os.replace(entry.path, path)  # the previous report, back where it was
        else:
            shutil.rmtree(entry.path, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp folder beside `path`; on success it replaces `path`, on failure it is removed.

    `path` is at every moment either its old content or the complete new one (see above; the
    fallback without renameat2 has a window between two renames, repaired by the next writer).
    Writers of one `path` exclude each other (`folder_lock`).
    """
    path = Path(path).resolve()
    with folder_lock(path):
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent))
        try:
            _pause("tmp")
            yield tmp
            _pause("written")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if os.path.lexists(path) and exchange(tmp, path):
            _pause("swapped")
            shutil.rmtree(tmp, ignore_errors=True)  # the old content, now under the temp name
            return
        old = None
        if os.path.lexists(path):
            old = path.parent / f".{path.name}.old-{os.getpid()}"
            os.replace(path, old)
            _pause("between")
        os.replace(tmp, path)
        _pause("swapped")
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
