"""One bounded reader for every JSON document the CLI reads (audit.json, baselines, prune files,
importer inputs): a document that is too big, too deep, not a regular file or stream, silent, not
JSON, holds a non-finite number or has a field of the wrong type ends in one line naming the file
and the place in it (an `InputError`, exit status 2), in bounded time and memory.

- size: at most `max_bytes` (default `DEFAULT_MAX_MB` MiB, raised with the environment variable
  `SKILLAUDIT_MAX_DOCUMENT_MB` or the `max_bytes` argument); a regular file's size is checked
  before reading, a stream (FIFO, character device such as /dev/zero) is read up to the cap;
- time: a stream that sends nothing for `timeout_s` seconds is given up (a FIFO without a writer
  ends at once: it is empty);
- depth: orjson refuses nesting beyond 1024 without recursion; the walk here then refuses depth
  beyond `max_depth` (default 100) and numbers that are not finite (`1e400` parses as inf);
- types: `check_schema(doc, spec, path)` names the JSON path of the first wrong field.
"""

from __future__ import annotations

import os
import select
import stat
import time
from typing import Any

import orjson

from skillaudit.errors import InputError

DEFAULT_MAX_MB = 128
DEFAULT_MAX_DEPTH = 100
DEFAULT_TIMEOUT_S = 3.0


def max_document_bytes() -> int:
    """The size cap: `SKILLAUDIT_MAX_DOCUMENT_MB` (MiB) if set to a positive number, else the default."""
    raw = os.environ.get("SKILLAUDIT_MAX_DOCUMENT_MB", "")
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return int((mb if mb > 0 else DEFAULT_MAX_MB) * 1024 * 1024)


def _too_big(path: Any, cap: int) -> InputError:
    return InputError(f"{path}: larger than {cap / 1048576:g} MiB; if it is meant to be read, raise "
                      "the limit with SKILLAUDIT_MAX_DOCUMENT_MB")


def read_document_bytes(path: str | os.PathLike[str], max_bytes: int | None = None,
                        timeout_s: float = DEFAULT_TIMEOUT_S, err: type[InputError] = InputError) -> bytes:
    """The bytes of a regular file or a stream, at most `max_bytes`, a stream within `timeout_s`."""
    cap = max_document_bytes() if max_bytes is None else max_bytes
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise err(f"{path}: no such file") from None
    except IsADirectoryError:
        raise err(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise err(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise err(f"{path}: is a folder, not a file")
        if stat.S_ISREG(st.st_mode):
            if st.st_size > cap:
                raise _too_big(path, cap)
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb", buffering=0) as fh:  # one allocation of the file's size
                data = fh.read(st.st_size + 1)
                while data is not None and len(data) <= cap:
                    more = fh.read(cap + 1 - len(data))  # a short read, or a file that grew
                    if not more:
                        break
                    data += more
            if data is None or len(data) > cap:
                raise _too_big(path, cap)
            return data
        if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
            raise err(f"{path}: not a regular file or a stream")
        deadline = time.monotonic() + timeout_s
        buf = bytearray()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise err(f"{path}: no end of data within {timeout_s:g} s (a stream that does not close?)")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, min(1 << 20, cap + 1 - len(buf)))
            except BlockingIOError:
                continue
            if not chunk:
                return bytes(buf)
            buf += chunk
            if len(buf) > cap:
                del buf
                raise _too_big(path, cap)
    except OSError as exc:
        raise err(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _json_path(parts: list[Any]) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if str(p).isidentifier() else f"[{p!r}]")
    return out


def check_tree(doc: Any, path: Any, max_depth: int = DEFAULT_MAX_DEPTH,
               err: type[InputError] = InputError) -> Any:
    """`doc` itself, after checking (without recursion) that it nests at most `max_depth` deep and
    holds only finite numbers; otherwise one line naming the JSON path."""
    stack: list[tuple[Any, list[Any]]] = [(doc, [])]
    while stack:
        node, where = stack.pop()
        if len(where) > max_depth:
            raise err(f"{path}: {_json_path(where[:8])}...: nested deeper than {max_depth} levels")
        if isinstance(node, float):
            if node != node or node in (float("inf"), float("-inf")):
                raise err(f"{path}: {_json_path(where)}: a number that is not finite")
        elif isinstance(node, dict):
            stack.extend(reversed([(v, [*where, k]) for k, v in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(v, [*where, i]) for i, v in enumerate(node)]))
    return doc


def parse_document(data: bytes, path: Any, max_depth: int = DEFAULT_MAX_DEPTH, expected: str = "",
                   err: type[InputError] = InputError) -> Any:
    """Parse JSON bytes (orjson: no recursion, depth <= 1024) and `check_tree` the result."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        what = "nested too deeply" if "depth" in str(exc).lower() or "recursion" in str(exc).lower() else exc.msg
        tail = f"; expected {expected}" if expected else ""
        raise err(f"{path}:{exc.lineno}: not valid JSON ({what}){tail}") from None
    return check_tree(doc, path, max_depth, err)


def read_document(path: str | os.PathLike[str], max_bytes: int | None = None,
                  max_depth: int = DEFAULT_MAX_DEPTH, timeout_s: float = DEFAULT_TIMEOUT_S,
                  spec: Any = None, expected: str = "", err: type[InputError] = InputError) -> Any:
    """read_document_bytes + parse_document (+ check_schema when `spec` is given)."""
    doc = parse_document(read_document_bytes(path, max_bytes, timeout_s, err), path, max_depth, expected, err)
    if spec is not None:
        check_schema(doc, spec, path, err)
    return doc


# ---- schema ---------------------------------------------------------------------------------------
# A spec is a type name ("str", "num", "bool", "int", "any", "null"), "a|b" for either, a list
# [spec] for a list of such, or a dict {key: spec} for an object (a key with a leading "!" is
# required; other keys are optional, and keys not named are not checked).
def _is(kind: str, v: Any) -> bool:
    if kind == "any":
        return True
    if kind == "null":
        return v is None
    if kind == "str":
        return isinstance(v, str)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "num":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if kind == "list":
        return isinstance(v, list)
    if kind == "object":
        return isinstance(v, dict)
    raise ValueError(f"unknown kind {kind}")


_NAMES = {"str": "a string", "num": "a number", "bool": "true or false", "int": "a whole number",
          "null": "null", "list": "a list", "object": "an object"}


def _kind_name(v: Any) -> str:
    for k in ("null", "bool", "int", "num", "str", "list", "object"):
        if _is(k, v):
            return _NAMES[k]
    return type(v).__name__


def check_schema(doc: Any, spec: Any, path: Any, err: type[InputError] = InputError) -> None:
    """Raise `err` with one line naming the JSON path of the first value that does not fit `spec`."""
    stack: list[tuple[Any, Any, list[Any]]] = [(doc, spec, [])]
    while stack:
        node, sp, where = stack.pop()
        if isinstance(sp, str):
            kinds = sp.split("|")
            if not any(_is(k, node) for k in kinds):
                want = " or ".join(_NAMES.get(k, k) for k in kinds)
                raise err(f"{path}: {_json_path(where)}: expected {want}, got {_kind_name(node)}")
        elif isinstance(sp, tuple):  # (nullable?, spec)
            if node is not None:
                stack.append((node, sp[1], where))
        elif isinstance(sp, list):
            if not isinstance(node, list):
                raise err(f"{path}: {_json_path(where)}: expected a list, got {_kind_name(node)}")
            stack.extend(reversed([(v, sp[0], [*where, i]) for i, v in enumerate(node)]))
        elif isinstance(sp, dict):
            if not isinstance(node, dict):
                raise err(f"{path}: {_json_path(where)}: expected an object, got {_kind_name(node)}")
            todo = []
            for key, sub in sp.items():
                name = key.lstrip("!")
                if name not in node:
                    if key.startswith("!"):
                        raise err(f"{path}: {_json_path([*where, name])}: missing")
                    continue
                todo.append((node[name], sub, [*where, name]))
            stack.extend(reversed(todo))


def nullable(spec: Any) -> tuple[bool, Any]:
    """`spec` or null."""
    return (True, spec)


_KEEP_DELETE = bytes(c for c in range(256) if c not in b'"[]{}')


def max_nesting(data: bytes) -> int:
    """How deep JSON text nests (strings skipped), without parsing it, at C and numpy speed."""
    import numpy as np

    text = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _KEEP_DELETE)
    if not text:
        return 0
    best, depth, parity = 0, 0, 0
    for start in range(0, len(text), 1 << 22):  # chunks keep the arrays small
        arr = np.frombuffer(text, dtype=np.uint8, count=min(1 << 22, len(text) - start), offset=start)
        quote = arr == 0x22
        before = np.cumsum(quote, dtype=np.int32) - quote + parity
        outside = before % 2 == 0  # an even number of quotes before it
        steps = np.zeros(len(arr), dtype=np.int32)
        steps[outside & ((arr == 0x5B) | (arr == 0x7B))] = 1
        steps[outside & ((arr == 0x5D) | (arr == 0x7D))] = -1
        run = np.cumsum(steps, dtype=np.int64) + depth
        best = max(best, int(run.max()))
        depth, parity = int(run[-1]), int(before[-1] + quote[-1]) % 2
    return best


def check_file_depth(path: str | os.PathLike[str], max_depth: int = DEFAULT_MAX_DEPTH,
                     max_bytes: int | None = None, err: type[InputError] = InputError) -> None:
    """Before a third-party reader parses `path` (JSON, or a zip of JSON members such as an Inspect
    `.eval` log): every JSON text in it nests at most `max_depth` deep and is at most `max_bytes`
    (a zip member by its uncompressed size), else one line naming the file (and member)."""
    import zipfile

    cap = max_document_bytes() if max_bytes is None else max_bytes
    data = read_document_bytes(path, cap, err=err)
    if data[:4] == b"PK\x03\x04":
        import io

        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for info in zf.infolist():
                    if info.file_size > cap:
                        raise _too_big(f"{path}: {info.filename}", cap)
                    member = _zip_member(zf, data, info, cap)
                    if len(member) > cap:
                        raise _too_big(f"{path}: {info.filename}", cap)
                    if info.filename.endswith(".json") and max_nesting(member) > max_depth:
                        raise err(f"{path}: {info.filename}: nested deeper than {max_depth} levels")
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError) as exc:
            raise err(f"{path}: not a readable zip archive ({exc})") from None
        except _ZstdError as exc:
            raise err(f"{path}: {exc}") from None
        return
    if max_nesting(data) > max_depth:
        raise err(f"{path}: nested deeper than {max_depth} levels")


ZIP_ZSTD = 93  # the zip method number of Zstandard (APPNOTE 4.4.5); inspect_ai writes .eval entries so


class _ZstdError(Exception):
    """A zstd zip member that cannot be decompressed (message: member and reason)."""


def _zip_member(zf: Any, data: bytes, info: Any, cap: int) -> bytes:
    """A zip member's bytes, at most `cap + 1` of them: the standard methods through `zipfile`,
    Zstandard (method 93, which Python's `zipfile` reads only from 3.14) through `zstandard`,
    streamed so that a member declaring a small size but inflating past the cap stops at the cap."""
    if info.compress_type != ZIP_ZSTD:
        with zf.open(info) as fh:
            return fh.read(cap + 1)
    import struct
    import zlib

    try:
        import zstandard
    except ImportError:  # pragma: no cover - a core dependency
        raise _ZstdError(f"{info.filename}: zstd-compressed; install the zstandard package") from None
    off = info.header_offset
    head = data[off:off + 30]
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise _ZstdError(f"{info.filename}: not a readable zip archive (bad local file header)")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    start = off + 30 + name_len + extra_len
    raw = memoryview(data)[start:start + info.compress_size]
    if len(raw) != info.compress_size:
        raise _ZstdError(f"{info.filename}: not a readable zip archive (member data cut short)")
    out = bytearray()
    try:
        with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
            while len(out) <= cap:
                chunk = reader.read(min(1 << 20, cap + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
    except zstandard.ZstdError as exc:
        raise _ZstdError(f"{info.filename}: not readable zstd data ({exc})") from None
    if len(out) <= cap and zlib.crc32(out) != info.CRC:
        raise _ZstdError(f"{info.filename}: not a readable zip archive (CRC check failed)")
    return bytes(out)
