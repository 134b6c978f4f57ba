"""Reading run logs into per-record columns: blocks of whole lines through the C scanner, msgspec,
or the exact path (`runs.records`), streamed into a `_State`.

Nothing is paired here: `_part` hands the columns to `runs.pairing` (or back from a --jobs worker,
`runs.workers`). What `skillaudit.runs.inputs.load_inputs` keeps of each block beside the records (arm
and hash lines, cost fields, digests) rides along as `_State.extra`.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from itertools import repeat
from operator import attrgetter, is_not
from typing import IO, Annotated, Any, Literal

import numpy as np
import orjson

try:  # the C column scanner (setup.py builds it when a compiler is there); else msgspec reads all
    from skillaudit.runs import _scan
except ImportError:  # pragma: no cover
    _scan = None  # type: ignore[assignment]

try:  # typed decoding of only the fields read; without it every line takes the exact path
    import msgspec
except ImportError:  # pragma: no cover
    msgspec = None  # type: ignore[assignment]

from skillaudit.errors import RunLogError
from skillaudit.runs.records import (
    _BOM,
    ADHERENCE_UNKNOWN,
    CONDITION_ALIASES,
    JUDGE_AA,
    JUDGE_AA_NONE,
    PREFERENCE_NONE,
    PREFERENCES,
    _check_line,
    _Checked,
    _CodeLines,
    _open,
)


class _Interner(dict):
    def __missing__(self, key: str) -> int:
        value = self[key] = len(self)
        return value

    def vocab(self) -> tuple[str, ...]:
        return tuple(sorted(self, key=self.__getitem__))


# ---------------------------------------------------------------- reading: fast and exact paths
# Files are read in blocks of whole lines. A block is first decoded with msgspec into typed structs
# holding only the fields skillaudit reads (the schema below accepts a subset of what the exact
# path accepts, interpreted the same way); if anything in the block does not fit - a type error, a
# blank line, invalid JSON or UTF-8, a NUL byte - the whole block goes through the exact path:
# orjson per line plus the hand-written checks, which produce every error message.
_BLOCK = 1 << 22
_NAN = float("nan")
_MAX_F = 1.7976931348623157e308  # reject non-finite scores (orjson refuses them as invalid JSON)

if msgspec is not None:

    class _SkillRef(msgspec.Struct, gc=False):  # no cycles: JSON values only
        id: str
        score: Annotated[float, msgspec.Meta(ge=-_MAX_F, le=_MAX_F)] | None = None

    class _Call(msgspec.Struct, gc=False):
        skills: list[str | _SkillRef] | None = None

    class _RecCore(msgspec.Struct, gc=False):
        task_id: Annotated[str, msgspec.Meta(min_length=1)]
        condition: Literal["enabled", "on", "skills_on", "disabled", "off", "skills_off"]
        correct: bool | Literal[0, 1]
        epoch: Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)] = 1
        model: str = "default"
        benchmark: str = "default"
        retrievals: list[_Call] | None = None
        retrieved: list[str] | None = None
        invoked: bool | Literal[0, 1] | None = None
        error: Any = None
        arm: Annotated[str, msgspec.Meta(min_length=1)] | None = None  # counterfactual runs (DESIGN §3.1b): set aside, read by skillaudit.analysis.counterfactual
        use_logged: bool | None = None  # false: skills offered (`offered`, not read here), their use not recorded
        preference: Literal["win", "tie", "loss"] | None = None  # enabled records: judged against the disabled answer
        judge_aa: Literal["tie", "flip"] | None = None  # enabled records: the judge's A/A check

    class _Rec(_RecCore, gc=False):
        answer: Any = None

    _decode = msgspec.json.Decoder(_Rec).decode
    _decode_core = msgspec.json.Decoder(_RecCore).decode  # answers skipped, not built
    _DecodeError: type[Exception] = msgspec.DecodeError
else:  # pragma: no cover - msgspec is optional; every block takes the exact path
    _decode = _decode_core = None
    _DecodeError = ValueError


_F32_MAX = float(np.finfo(np.float32).max)  # scores are kept as float32: larger ones are clipped
# Numbers one reader could take for infinity: an exponent of 3 digits, or 200 digits in a row
# (below both, |x| < 10**299). A block holding one skips msgspec, which does not look at the
# value of a number in a field it skips; the exact path then rejects a non-finite number anywhere.
_MAYBE_HUGE = re.compile(rb"[0-9.][eE][+-]?[0-9]{3}|[0-9]{200}")


class _State:
    """Records while streaming, as per-record numpy chunks (pairing happens once, at the end)."""

    def __init__(self, code: _CodeLines, adherence: bool = True, extra: Any = None) -> None:
        self.code = code
        # what else load_inputs keeps of each block (arm and hash lines, cost fields, digests):
        # an object with feed(), wrap() and finish() (skillaudit.runs.inputs), fresh for each state
        self.extra = extra.fresh() if extra is not None else None
        self.adherence = adherence  # False: answers are not read (adhered stays unknown, -1)
        self.models, self.benches, self.tasks, self.skills = _Interner(), _Interner(), _Interner(), _Interner()
        self.chunks: dict[str, list[np.ndarray]] = {k: [] for k in _REC_DTYPES}
        self.ret: dict[str, list[np.ndarray]] = {k: [] for k in _RET_DTYPES}
        self.n = 0  # records so far
        self.n_arm = 0  # arm records set aside (DESIGN §3.1b)
        self.saw_hash = False  # some block held provenance's needle (the bytes '"hash"')
        self.names: dict[int, str] = {}
        self.tables = _scan.tables() if _scan is not None else None  # the C scanner's id caches


# per-record columns: model, benchmark, task (vocabulary ids), epoch, condition (1 enabled),
# correct, error record, invoked, adhered (-1 unknown), file index and line number; and the
# retrieved skills, one row each: record, skill (vocabulary id), rank, score
_REC_DTYPES = {"m": np.int32, "b": np.int32, "t": np.int32, "e": np.int64, "en": bool, "ok": bool,
               "err": bool, "inv": bool, "adh": np.int8, "file": np.int32, "line": np.int64,
               "ul": bool,  # ul: skill use logged (False: "use_logged": false, offered only)
               "pref": np.int8,  # pref: the enabled record's `preference` (PREFERENCES codes; PREFERENCE_NONE)
               "aa": np.int8}  # aa: the enabled record's `judge_aa` (JUDGE_AA codes; JUDGE_AA_NONE)
_RET_DTYPES = {"rec": np.int64, "col": np.int32, "rk": np.float32, "sc": np.float32}
_VOCAB_OF = {"m": "models", "b": "benchmarks", "t": "tasks"}  # id columns and their vocabularies
_MODEL, _BENCH, _TASK, _EPOCH = (attrgetter(a) for a in ("model", "benchmark", "task_id", "epoch"))
_COND, _CORRECT, _ERROR = attrgetter("condition"), attrgetter("correct"), attrgetter("error")


def _ingest_block(st: _State, recs: list[Any], lineno: int | list[int], file_ix: int) -> None:
    """Append a block of validated records (fast structs, or _Checked from the exact path).

    Per record only attribute reads and vocabulary lookups run in Python, as C-level maps; the
    retrieved-skill sets are flattened and deduplicated with numpy. `lineno` is the first line
    of a block with one record per line, or the line of each record.
    """
    if any(r.arm is not None for r in recs):  # arm records are not part of the main pairs
        lines = list(range(lineno, lineno + len(recs))) if isinstance(lineno, int) else lineno
        kept = [k for k, r in enumerate(recs) if r.arm is None]
        st.n_arm += len(recs) - len(kept)
        recs, lineno = [recs[k] for k in kept], [lines[k] for k in kept]
    n = len(recs)
    if not n:
        return
    c = st.chunks
    c["m"].append(np.fromiter(map(st.models.__getitem__, map(_MODEL, recs)), np.int32, n))
    c["b"].append(np.fromiter(map(st.benches.__getitem__, map(_BENCH, recs)), np.int32, n))
    c["t"].append(np.fromiter(map(st.tasks.__getitem__, map(_TASK, recs)), np.int32, n))
    c["e"].append(np.fromiter(map(_EPOCH, recs), np.int64, n))
    en = np.fromiter(map(CONDITION_ALIASES.__getitem__, map(_COND, recs)), bool, n)
    c["en"].append(en)
    c["ok"].append(np.fromiter(map(_CORRECT, recs), bool, n))
    c["err"].append(np.fromiter(map(is_not, map(_ERROR, recs), repeat(None)), bool, n))
    c["ul"].append(np.fromiter((r.use_logged is not False for r in recs), bool, n))
    c["pref"].append(np.fromiter((PREFERENCE_NONE if r.preference is None else PREFERENCES[r.preference]
                                  for r in recs), np.int8, n))
    c["aa"].append(np.fromiter((JUDGE_AA_NONE if r.judge_aa is None else JUDGE_AA[r.judge_aa] for r in recs),
                               np.int8, n))
    c["file"].append(np.full(n, file_ix, np.int32))
    c["line"].append(np.arange(lineno, lineno + n, dtype=np.int64) if isinstance(lineno, int)
                     else np.array(lineno, dtype=np.int64))
    inv = np.zeros(n, bool)
    adh = np.full(n, ADHERENCE_UNKNOWN, np.int8)
    base = st.n
    st.n += n
    c["inv"].append(inv)
    c["adh"].append(adh)

    en_ix = np.flatnonzero(en)
    en_recs = [recs[i] for i in en_ix.tolist()]
    checked = recs[0].__class__ is _Checked
    if checked:
        inv[en_ix] = [bool(r.inv) for r in en_recs]
    else:  # no `invoked`: a call was made when 'retrievals' lists one or 'retrieved' is present
        inv[en_ix] = [bool(r.invoked) if r.invoked is not None
                      else (bool(r.retrievals) or r.retrieved is not None) for r in en_recs]
    if st.adherence:
        answered = np.array([a.__class__ is str and a != "" for a in (r.answer for r in en_recs)], dtype=bool)
        adh[en_ix[answered]] = 0  # 1 below where a retrieved skill was followed

    # retrieved skills: (record, id, score) in the order they appear, then deduplicated per record
    if checked:  # already deduplicated, in rank order, with the best score
        has = [k for k, r in enumerate(en_recs) if r.got]
        ret = [en_recs[k] for k in has]
        rec_ix = [k for k, r in enumerate(ret) for _ in r.got]
        sids = [sid for r in ret for sid in r.got]
        scores = [v for r in ret for v in r.got.values()]
    else:
        has = [k for k, r in enumerate(en_recs) if r.retrievals or r.retrieved]
        ret = [en_recs[k] for k in has]
        items = [(k, s) for k, r in enumerate(ret) if r.retrievals for call in r.retrievals if call.skills
                 for s in call.skills]
        rec_ix = [k for k, _ in items]
        sids = [s if s.__class__ is str else s.id for _, s in items]
        scores = [_NAN if s.__class__ is str or s.score is None else s.score for _, s in items]
        short = [(k, sid) for k, r in enumerate(ret) if r.retrieved for sid in r.retrieved]
        if short:  # the 'retrieved' shorthand comes after a record's 'retrievals' (stable sort)
            rec_ix += [k for k, _ in short]
            sids += [sid for _, sid in short]
            scores += [_NAN] * len(short)
            order = np.argsort(np.array(rec_ix, dtype=np.int64), kind="stable").tolist()
            rec_ix = [rec_ix[i] for i in order]
            sids = [sids[i] for i in order]
            scores = [scores[i] for i in order]
    if not sids:
        return
    col = np.fromiter(map(st.skills.__getitem__, sids), np.int64, len(sids))  # first-seen order
    pos = en_ix[np.array(has, dtype=np.int64)][np.array(rec_ix, dtype=np.int64)]
    gpos, grec, bounds = _add_retrieved(st, base, pos, col, np.array(scores, dtype=np.float64))
    if st.adherence:
        def answer(k: int) -> str | None:
            a = recs[k].answer
            return a if a.__class__ is str and a else None

        _mark_adherence(st, adh, grec, bounds, [sids[i] for i in gpos.tolist()], answer)


def _mark_adherence(st: _State, adh: np.ndarray, grec: np.ndarray, bounds: np.ndarray, gids: list[str],
                    answer: Callable[[int], str | None]) -> None:
    """adh[k] for each record k with retrieved skills (the runs of `grec` starting at `bounds`; `gids`
    their ids in rank order) and a non-empty answer (`answer(k)`, None when it has none)."""
    lo = np.r_[bounds, grec.size].tolist()
    for j, k in enumerate(grec[bounds].tolist()):
        text = answer(k)
        if text is not None:
            adh[k] = st.code.adhered(text, gids[lo[j]:lo[j + 1]])


def _add_retrieved(st: _State, base: int, pos: np.ndarray, col: np.ndarray,
                   score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Append a block's retrieved skills, deduplicated per record and ranked in order of appearance.

    `pos` is the block position of each item's record (non-decreasing), `col` its skill id and
    `score` its score (nan when not logged). Returns each kept item's flat position, its record's
    block position, and where each record's run of items starts.
    """
    key = pos * len(st.skills) + col
    o = np.argsort(key, kind="stable")  # groups of one (record, skill), each in order of appearance
    ks = key[o]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    first = o[starts]  # flat position of each group's first appearance
    # a skill seen twice keeps its first score unless a later one is higher; a missing first
    # score stays missing (a comparison with nan is false)
    best = np.maximum.reduceat(np.where(np.isnan(score[o]), -np.inf, score[o]), starts)
    gscore = np.where(np.isnan(score[first]), np.nan, best)
    go = np.argsort(first, kind="stable")
    gpos = first[go]
    grec = pos[gpos]
    bounds = np.flatnonzero(np.r_[True, grec[1:] != grec[:-1]])
    rank = np.arange(grec.size) - np.repeat(bounds, np.diff(np.r_[bounds, grec.size])) + 1
    st.ret["rec"].append(base + grec)
    st.ret["col"].append(col[gpos].astype(np.int32))
    st.ret["rk"].append(rank.astype(np.float32))
    st.ret["sc"].append(np.clip(gscore[go], -_F32_MAX, _F32_MAX).astype(np.float32))  # nan stays nan
    return gpos, grec, bounds


def _ingest_scanned(st: _State, cols: tuple, blob: bytes | memoryview, lineno: int, file_ix: int) -> None:
    """Append a block the C scanner read: its columns, one record per line from line `lineno`."""
    n, m, b, t, e, en, ok, err, inv, r_rec, r_col, r_sc, a_off, a_len, a_esc = cols
    c = st.chunks
    for k, raw in (("m", m), ("b", b), ("t", t)):
        c[k].append(np.frombuffer(raw, np.int32))
    c["e"].append(np.frombuffer(e, np.int64))
    for k, raw in (("en", en), ("ok", ok), ("err", err), ("inv", inv)):
        c[k].append(np.frombuffer(raw, np.uint8).view(bool))
    enabled = c["en"][-1]
    c["ul"].append(np.ones(n, bool))  # the scanner is handed no block holding "use_logged"
    c["pref"].append(np.full(n, PREFERENCE_NONE, np.int8))  # ... nor "preference"
    c["aa"].append(np.full(n, JUDGE_AA_NONE, np.int8))  # ... nor "judge_aa"
    c["file"].append(np.full(n, file_ix, np.int32))
    c["line"].append(np.arange(lineno, lineno + n, dtype=np.int64))
    adh = np.full(n, ADHERENCE_UNKNOWN, np.int8)
    c["adh"].append(adh)
    base = st.n
    st.n += n
    answered = None
    if st.adherence:  # an enabled run with a non-empty string answer: 0, or 1 below
        off, length = np.frombuffer(a_off, np.int64), np.frombuffer(a_len, np.int64)
        answered = enabled & (off >= 0) & (length > 0)
        adh[answered] = 0
    if not r_rec:
        return
    col = np.frombuffer(r_col, np.int64)
    gpos, grec, bounds = _add_retrieved(st, base, np.frombuffer(r_rec, np.int64), col, np.frombuffer(r_sc, np.float64))
    if answered is None:
        return
    names = list(st.skills)  # an id's name: the vocabulary is numbered in insertion order
    esc = np.frombuffer(a_esc, np.uint8)

    def answer(k: int) -> str | None:  # the raw string's text: escapes need a JSON decode
        if not answered[k]:
            return None
        o, ln = int(off[k]), int(length[k])
        return orjson.loads(blob[o - 1:o + ln + 1]) if esc[k] else bytes(blob[o:o + ln]).decode()

    _mark_adherence(st, adh, grec, bounds, [names[j] for j in col[gpos].tolist()], answer)


def _valid_utf8(chunk: bytes) -> bool:
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _fits_fast_path(blob: bytes) -> bool:
    """No NUL byte, valid UTF-8 everywhere and no number that could be non-finite (msgspec skips
    fields it does not build unchecked)."""
    return (b"\0" not in blob and (blob.isascii() or _valid_utf8(blob))  # one C scan of the block
            and not _maybe_huge(blob))


def _maybe_huge(blob: bytes) -> bool:
    """_MAYBE_HUGE matches somewhere in `blob` (in C when the scanner is built: 1 GB/s, not 0.1)."""
    if _scan is not None:
        return _scan.maybe_huge(blob)
    return _MAYBE_HUGE.search(blob) is not None


def _feed_block(st: _State, blob: bytes, lines: list[bytes], lineno: int, file_ix: int) -> None:
    """Records of a block (`blob`, split into `lines`) starting at line `lineno`: msgspec, else the exact path."""
    if _decode is not None and _fits_fast_path(blob):
        try:  # one value per line, or DecodeError (a blank line too)
            recs = list(map(_decode if st.adherence else _decode_core, lines))
        except (_DecodeError, RecursionError):  # msgspec refuses deep nesting with RecursionError
            pass
        else:
            # a `preference` or `judge_aa` on a disabled record is an error the exact path reports
            # (the schema cannot)
            if not _judged(blob) or not any(
                    (r.preference is not None or r.judge_aa is not None) and not CONDITION_ALIASES[r.condition]
                    for r in recs):
                _ingest_block(st, recs, lineno, file_ix)
                return
    name = st.names[file_ix]
    batch: list[_Checked] = []
    linenos: list[int] = []
    error = None
    for ln, line in enumerate(lines, lineno):
        if b"\0" not in line and not line.strip():
            continue
        try:
            batch.append(_check_line(line, f"{name}:{ln}"))
        except RunLogError as exc:
            error = exc
            break
        linenos.append(ln)
    _ingest_block(st, batch, linenos, file_ix)  # earlier duplicates are reported before a later bad line
    if error is not None:
        raise error


def _line_start_at(fh: IO[bytes], offset: int) -> int:
    """Offset of the first line that starts at or after `offset` (the file's size if none does)."""
    if offset <= 0:
        return 0
    fh.seek(offset - 1)
    pos = offset - 1
    while True:
        block = fh.read(1 << 16)
        if not block:
            return pos
        i = block.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(block)


def _count_lines(fh: IO[bytes], stop: int) -> int:
    """Newlines in the first `stop` bytes."""
    fh.seek(0)
    n, left = 0, stop
    while left > 0:
        block = fh.read(min(_BLOCK, left))
        if not block:
            break
        n += block.count(b"\n")
        left -= len(block)
    return n


class _LineError(Exception):
    """A line that cannot be a record, found before it is whole (its line number is the caller's)."""


_MAX_LINE = 128 << 20  # a longer line is refused before it is read whole (no record is that long)


def _blocks(fh: IO[bytes], seekable: bool, left: int, bom: bool = False) -> Iterator[bytes | memoryview]:
    """Blocks of about _BLOCK bytes of whole lines (the file's last line may lack its newline).

    `left` >= 0 reads only that many bytes (a range that ends at a line start). Every stream is
    read forward only (`seekable` is not used: pipes, FIFOs and gzip read like files): the start of
    a cut line is carried over as a list of chunks, joined once when its end arrives, so a long
    line costs linear time. A line with a NUL byte or longer than _MAX_LINE raises _LineError
    as soon as that is known; `bom`: a UTF-8 byte order mark at the very start is dropped.
    """
    bounded, pending, n_pending = left >= 0, [], 0
    first = bom
    while left != 0:
        want = min(_BLOCK, left) if bounded else _BLOCK
        chunk = fh.read(want)
        if not chunk:
            break
        if bounded:
            left -= len(chunk)
        if first:  # reads are short only at the end, so a BOM is whole in the first chunk
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
                if not chunk:
                    continue
        end = chunk.rfind(b"\n") + 1
        if end == 0:  # no line ends here: part of a long line
            if b"\0" in chunk:
                raise _LineError("binary data, not a JSON Lines text file")
            pending.append(chunk)
            n_pending += len(chunk)
            if n_pending > _MAX_LINE:
                raise _LineError(f"line longer than {_MAX_LINE >> 20} MiB: not a run-log record")
            continue
        if pending:
            pending.append(memoryview(chunk)[:end])
            block: bytes | memoryview = b"".join(pending)
            pending, n_pending = [], 0
        else:
            block = memoryview(chunk)[:end] if end < len(chunk) else chunk
        if end < len(chunk):
            pending, n_pending = [chunk[end:]], len(chunk) - end
        yield block
    if pending:
        yield b"".join(pending)


#: the bytes every line logging a skill's content hash holds (skillaudit.runs.provenance reads those lines)
_HASH_NEEDLE = b'"hash"'
#: a block holding these bytes skips the C scanner (which reads only the plain shape): msgspec or
#: the exact path read `use_logged` (a superset of the block when it is a view: never a miss)
_USE_NEEDLE = b'"use_logged"'
_JUDGE_NEEDLES = (b'"preference"', b'"judge_aa"')  # the judge's fields of an enabled record


def _judged(blob: bytes) -> bool:
    """Some line of `blob` may hold a judge's field (`preference`, `judge_aa`): the C scanner does
    not read them, and only the exact path tells which record they are on."""
    return any(n in blob for n in _JUDGE_NEEDLES)


def _feed_blob(st: _State, blob: bytes | memoryview, lineno: int, file_ix: int) -> int:
    """Records of a block of whole lines that starts at line `lineno`; returns its number of lines.

    The C scanner reads the plain shape of record; a block with anything else goes through
    msgspec, then the exact path (which reports errors).
    """
    if not st.saw_hash:  # a memoryview's whole buffer: a superset of the block, never a miss
        st.saw_hash = _HASH_NEEDLE in (blob.obj if isinstance(blob, memoryview) else blob)
    whole = blob.obj if isinstance(blob, memoryview) else blob
    if st.tables is not None and _USE_NEEDLE not in whole and not _judged(whole):
        cols = _scan.scan(blob, st.models, st.benches, st.tasks, st.skills, st.tables)
        if cols is not None:
            _ingest_scanned(st, cols, blob, lineno, file_ix)
            if st.extra is not None:  # a memoryview of a block starts at its buffer's start
                st.extra.feed(blob.obj if isinstance(blob, memoryview) else blob, len(blob), lineno, file_ix)
            return cols[0]
    data = bytes(blob)
    lines = io.BytesIO(data).readlines()
    _feed_block(st, data, lines, lineno, file_ix)
    if st.extra is not None:
        st.extra.feed(data, len(data), lineno, file_ix)
    return len(lines)


def _feed_file(st: _State, path: str, file_ix: int, start: int = 0, stop: int | None = None) -> None:
    """Feed a file's records; with `start`/`stop`, only the lines whose first byte is in [start, stop).

    Every way a file can fail to read is a RunLogError naming the file (and the line reached):
    a truncated or corrupt gzip stream, an unreadable file, a line too long to be a record.
    """
    whole = not start and stop is None
    name, fh = _open(path, st.extra.wrap if st.extra is not None and whole else None)
    st.names[file_ix] = name
    lineno = 1
    try:
        left = -1
        if start or stop is not None:  # a byte range of a plain file (a --jobs work unit)
            begin = _line_start_at(fh, start)
            end = _line_start_at(fh, stop) if stop is not None else -1
            lineno = _count_lines(fh, begin) + 1
            fh.seek(begin)
            left = end - begin if end >= 0 else -1
        for blob in _blocks(fh, False, left, bom=not start):
            lineno += _feed_blob(st, blob, lineno, file_ix)
        if st.extra is not None and whole:
            st.extra.finish(file_ix)
    except _LineError as exc:
        raise RunLogError(f"{name}:{lineno}: {exc}") from None
    except EOFError:  # gzip: the stream ends before its end-of-stream marker
        raise RunLogError(f"{name}:{lineno}: truncated gzip file (it ends before its end-of-stream marker)") from None
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise RunLogError(f"{name}:{lineno}: corrupt gzip data ({exc})") from None
    except MemoryError:
        raise RunLogError(f"{name}:{lineno}: out of memory reading this line") from None
    except OSError as exc:
        raise RunLogError(f"{name}: cannot read: {exc.strerror or exc}") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def _part(st: _State, error: str | None = None) -> dict[str, Any]:
    """The state as lists of per-record array chunks and vocabularies (picklable; what a --jobs
    worker returns). Chunks are concatenated once, by _concat, over all parts."""
    out: dict[str, Any] = {k: list(v) for k, v in st.chunks.items()}
    out.update({f"r_{k}": list(v) for k, v in st.ret.items()})
    out.update(models=st.models.vocab(), benchmarks=st.benches.vocab(), tasks=st.tasks.vocab(),
               skills=st.skills.vocab(), names=dict(st.names), error=error, n=st.n, n_arm=st.n_arm,
               hash=st.saw_hash, extra=st.extra)
    return out
