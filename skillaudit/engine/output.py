"""The write step: the records already in a log (resume), their keys, and the appending writer."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from skillaudit.errors import OutputError


def existing_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(f"{path}: cannot read for resume ({exc.strerror or exc})") from None
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                if not line.endswith(b"\n"):
                    continue  # a record cut off by a kill: it is re-run
                raise OutputError(f"{path}:{lineno}: not valid JSON; refusing to append to it") from None
            if isinstance(rec, dict):
                yield lineno, rec


def record_key(rec: dict[str, Any]) -> tuple:
    """The resume key: a main record's (model, benchmark, task, condition, epoch); arms add the arm
    and the mask seed."""
    key = (str(rec.get("model", "default")), str(rec.get("benchmark", "default")),
           str(rec.get("task_id")), str(rec.get("condition")), int(rec.get("epoch", 1) or 1))
    arm = rec.get("arm")
    if arm is None:
        return key
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    return (*key, str(arm), int(meta.get("mask_seed", -1)) if arm == "mask" else -1)


def prepare_output(path: Path, retry_errors: bool) -> set[tuple]:
    """Keys already logged; with `retry_errors`, error records are first removed (atomic rewrite)."""
    done: set[tuple] = set()
    keep: list[bytes] = []
    dropped = 0
    truncated_tail = False
    for _, rec in existing_records(path):
        if retry_errors and rec.get("error") is not None:
            dropped += 1
            continue
        done.add(record_key(rec))
        keep.append(orjson.dumps(rec))
    if path.exists():
        raw = path.read_bytes()
        truncated_tail = bool(raw) and not raw.endswith(b"\n")
    if dropped or truncated_tail:
        from skillaudit.util.files import atomic_write_bytes

        atomic_write_bytes(path, b"".join(k + b"\n" for k in keep))
    return done


class Writer:
    """Appends records to the output, one line each, flushed and fsynced, under a lock."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.fh = path.open("ab")
        except OSError as exc:
            raise OutputError(f"{path}: cannot open for appending ({exc.strerror or exc})") from None
        self.lock = threading.Lock()

    def write(self, rec: dict[str, Any]) -> None:
        line = orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        with self.lock:
            self.fh.write(line)
            self.fh.flush()
            with contextlib.suppress(OSError):
                os.fsync(self.fh.fileno())

    def close(self) -> None:
        self.fh.close()
