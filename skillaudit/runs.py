"""Paired run logs: stream JSON Lines records (DESIGN §3.1), pair enabled with disabled runs.

The result is held in arrays, not per-record objects: one row per pair in numpy vectors and a
scipy.sparse pair x skill matrix whose values are the 1-based rank of the skill in the pair's
deduplicated retrieved set.
"""

from __future__ import annotations

import gc
import gzip
import io
import re
import sys
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, is_not
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import numpy as np
import orjson
import scipy.sparse as sp

try:  # typed decoding of only the fields read; without it every line takes the exact path
    import msgspec
except ImportError:  # pragma: no cover
    msgspec = None  # type: ignore[assignment]

from .errors import RunLogError, UnpairedError

ENABLED, DISABLED = 1, 0
CONDITION_ALIASES = {
    "enabled": ENABLED, "on": ENABLED, "skills_on": ENABLED,
    "disabled": DISABLED, "off": DISABLED, "skills_off": DISABLED,
}
ADHERENCE_UNKNOWN = -1
_MIN_CODE_LINE = 16  # shorter lines ("return x", "else:") are too common to prove adherence


@dataclass(frozen=True)
class PairedRuns:
    """Paired outcomes, one row per (model, benchmark, task_id, epoch) seen in both conditions."""

    models: tuple[str, ...]
    benchmarks: tuple[str, ...]
    tasks: tuple[str, ...]
    skills: tuple[str, ...]
    model: np.ndarray  # int32 index into models
    benchmark: np.ndarray  # int32 index into benchmarks
    task: np.ndarray  # int32 index into tasks
    epoch: np.ndarray  # int32, >= 1
    y_pos: np.ndarray  # bool: enabled run correct
    y_neg: np.ndarray  # bool: disabled run correct
    invoked: np.ndarray  # bool: enabled run called the retrieval tool
    adhered: np.ndarray  # int8: 1/0, or -1 when no answer was logged
    ranks: sp.csr_matrix  # pairs x skills, 1-based rank of each retrieved skill (0 = not retrieved)
    scores: sp.csr_matrix  # same sparsity pattern as ranks; retrieval score (nan when not logged)
    n_unpaired: int = 0
    unpaired_examples: tuple[str, ...] = ()
    n_error_pairs: int = 0
    sources: tuple[str, ...] = field(default=())

    @property
    def n_pairs(self) -> int:
        return int(self.y_pos.shape[0])

    @property
    def n_skills_retrieved(self) -> np.ndarray:
        """Size of each pair's deduplicated retrieved set."""
        return np.diff(self.ranks.indptr)

    @property
    def retrieved(self) -> np.ndarray:
        """Bool per pair: in S_call (the enabled run got at least one skill back)."""
        return self.n_skills_retrieved > 0

    @property
    def flip(self) -> np.ndarray:
        """y+ - y- per pair in {-1, 0, +1} (int8)."""
        return self.y_pos.astype(np.int8) - self.y_neg.astype(np.int8)

    def unit_ids(self) -> np.ndarray:
        """Bootstrap unit per pair (0..n_units-1): a task, with all its epochs, in its model and benchmark."""
        key = (self.model.astype(np.int64) * len(self.benchmarks) + self.benchmark) * len(self.tasks) + self.task
        return np.unique(key, return_inverse=True)[1].ravel()

    def subset(self, mask: np.ndarray) -> PairedRuns:
        """Only the pairs where `mask` is true (vocabularies are kept)."""
        idx = np.flatnonzero(mask)
        return PairedRuns(
            models=self.models, benchmarks=self.benchmarks, tasks=self.tasks, skills=self.skills,
            model=self.model[idx], benchmark=self.benchmark[idx], task=self.task[idx],
            epoch=self.epoch[idx], y_pos=self.y_pos[idx], y_neg=self.y_neg[idx],
            invoked=self.invoked[idx], adhered=self.adhered[idx],
            ranks=self.ranks[idx], scores=self.scores[idx],
            n_unpaired=self.n_unpaired, unpaired_examples=self.unpaired_examples,
            n_error_pairs=self.n_error_pairs, sources=self.sources,
        )

    def select(self, model: str | None = None, benchmark: str | None = None) -> PairedRuns:
        """Pairs of one model and/or benchmark (None = all)."""
        mask = np.ones(self.n_pairs, dtype=bool)
        if model is not None:
            mask &= self.model == (self.models.index(model) if model in self.models else -1)
        if benchmark is not None:
            mask &= self.benchmark == (
                self.benchmarks.index(benchmark) if benchmark in self.benchmarks else -1
            )
        return self.subset(mask)


class _Interner(dict):
    def __missing__(self, key: str) -> int:
        value = self[key] = len(self)
        return value

    def vocab(self) -> tuple[str, ...]:
        return tuple(sorted(self, key=self.__getitem__))


def _open(path: str | Path) -> tuple[str, IO[bytes]]:
    path = str(path)
    if path == "-":
        return "<stdin>", sys.stdin.buffer
    p = Path(path)
    if p.is_dir():
        raise RunLogError(f"{path}: is a folder, not a JSON Lines file")
    try:
        fh: IO[bytes] = p.open("rb")
    except FileNotFoundError:
        raise RunLogError(f"{path}: no such file") from None
    except OSError as exc:
        raise RunLogError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.endswith(".gz"):
        fh = gzip.open(fh)  # type: ignore[assignment]  # noqa: SIM115 - the caller closes it
    return path, fh


def _describe(value: Any) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return {list: "array", str: "string", int: "number", float: "number"}.get(type(value), "value")


def _as_bool(value: Any, name: str) -> bool:
    if value is True or value is False:
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise ValueError(f"'{name}' must be true/false or 0/1, got {_describe(value)}")


class _CodeLines:
    """Per-skill id and code lines, to detect whether an answer followed a retrieved skill."""

    def __init__(self, library: Any) -> None:
        self.lines: dict[str, list[str]] = {}
        if library is None:
            return
        for skill in library:
            self.lines[skill.id] = _code_lines(skill.body)

    def adhered(self, answer: str, skill_ids: Iterable[str]) -> bool:
        for sid in skill_ids:
            if sid in answer:
                return True
            for line in self.lines.get(sid, ()):
                if line in answer:
                    return True
        return False


_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def _code_lines(body: str) -> list[str]:
    out = []
    for block in _FENCE.findall(body):
        for line in block.splitlines():
            line = line.strip()
            if len(line) >= _MIN_CODE_LINE and not line.startswith("#"):
                out.append(line)
    return out


def _retrieved_ids(rec: dict, where: str) -> tuple[bool, list[tuple[str, float]]]:
    """(invoked, [(skill_id, score)] deduplicated in rank order) of an enabled record."""
    got: dict[str, float] = {}
    calls = 0
    rets = rec.get("retrievals")
    if rets is not None:
        if not isinstance(rets, list):
            raise ValueError("'retrievals' must be a list of calls")
        for call in rets:
            if not isinstance(call, dict):
                raise ValueError("each entry of 'retrievals' must be an object")
            calls += 1
            skills = call.get("skills") or []
            if not isinstance(skills, list):
                raise ValueError("'retrievals[].skills' must be a list")
            for s in skills:
                if isinstance(s, str):
                    sid, score = s, float("nan")
                elif isinstance(s, dict) and isinstance(s.get("id"), str):
                    sid = s["id"]
                    raw = s.get("score")
                    score = float(raw) if isinstance(raw, (int, float)) and raw is not True and raw is not False else float("nan")
                else:
                    raise ValueError("each retrieved skill must be an id string or an object with a string 'id'")
                prev = got.get(sid)
                if prev is None or score > prev:
                    got[sid] = score
    short = rec.get("retrieved")
    if short is not None:
        if not isinstance(short, list) or not all(isinstance(s, str) for s in short):
            raise ValueError("'retrieved' must be a list of skill id strings")
        calls += 1
        for sid in short:
            got.setdefault(sid, float("nan"))
    inv = rec.get("invoked")
    invoked = _as_bool(inv, "invoked") if inv is not None else calls > 0
    return invoked, list(got.items())


def _iter_lines(name: str, fh: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    for lineno, line in enumerate(fh, 1):
        if b"\0" in line:
            raise RunLogError(f"{name}:{lineno}: binary data, not a JSON Lines text file")
        if line.strip():
            yield lineno, line


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

    class _Rec(_RecCore, gc=False):
        answer: Any = None

    _decode = msgspec.json.Decoder(_Rec).decode
    _decode_core = msgspec.json.Decoder(_RecCore).decode  # answers skipped, not built
    _DecodeError: type[Exception] = msgspec.DecodeError
else:  # pragma: no cover - msgspec is optional; every block takes the exact path
    _decode = _decode_core = None
    _DecodeError = ValueError


class _Checked:
    """A record validated by the exact path, shaped like the fast path's struct."""

    __slots__ = (
        "answer",
        "benchmark",
        "condition",
        "correct",
        "epoch",
        "error",
        "got",
        "inv",
        "model",
        "task_id",
    )


def _check_line(line: bytes, where: str) -> _Checked:
    """Parse and validate one line exactly as DESIGN §3.1 says; RunLogError names file:line."""
    if b"\0" in line:
        raise RunLogError(f"{where}: binary data, not a JSON Lines text file")
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if b"\xff" in line or b"\xfe" in line or "UTF-8" in str(exc):
            raise RunLogError(f"{where}: binary data, not a JSON Lines text file") from None
        raise RunLogError(f"{where}: invalid JSON (column {exc.pos + 1})") from None
    if not isinstance(rec, dict):
        raise RunLogError(f"{where}: record must be a JSON object, got {_json_type(rec)}")
    out = _Checked()
    try:
        for req in ("task_id", "condition", "correct"):
            if req not in rec:
                raise ValueError(f"missing required field '{req}'")
        tid = rec["task_id"]
        if not isinstance(tid, str) or not tid:
            raise ValueError(f"'task_id' must be a non-empty string, got {_describe(tid)}")
        cond_raw = rec["condition"]
        cond = CONDITION_ALIASES.get(cond_raw) if isinstance(cond_raw, str) else None
        if cond is None:
            raise ValueError(
                f"unknown condition {_describe(cond_raw)} (expected enabled or disabled; "
                "aliases on/off, skills_on/skills_off)"
            )
        correct = _as_bool(rec["correct"], "correct")
        epoch = rec.get("epoch", 1)
        if type(epoch) is not int or epoch < 1:
            raise ValueError(f"'epoch' must be an integer >= 1, got {_describe(epoch)}")
        model = rec.get("model", "default")
        bench = rec.get("benchmark", "default")
        if not isinstance(model, str) or not isinstance(bench, str):
            raise ValueError("'model' and 'benchmark' must be strings")
        if cond == ENABLED:
            inv, got = _retrieved_ids(rec, where)
            out.inv, out.got = inv, dict(got)
        out.error = rec.get("error")
    except ValueError as exc:
        raise RunLogError(f"{where}: {exc}") from None
    out.task_id, out.condition, out.correct, out.epoch = tid, cond_raw, correct, epoch
    out.model, out.benchmark, out.answer = model, bench, rec.get("answer")
    return out


def _fast_retrieved(rec: Any) -> tuple[bool, dict[str, float]]:
    """(invoked, {skill_id: best score} in rank order) of a fast-path enabled record."""
    got: dict[str, float] = {}
    calls = 0
    rets = rec.retrievals
    if rets is not None:
        for call in rets:
            calls += 1
            skills = call.skills
            if skills:
                for s in skills:
                    if s.__class__ is str:
                        sid, score = s, _NAN
                    else:
                        sid, score = s.id, s.score
                        if score is None:
                            score = _NAN
                    prev = got.get(sid)
                    if prev is None or score > prev:
                        got[sid] = score
    short = rec.retrieved
    if short is not None:
        calls += 1
        for sid in short:
            got.setdefault(sid, _NAN)
    inv = rec.invoked
    return (calls > 0 if inv is None else bool(inv)), got


class _State:
    """Pairing state while streaming: one slot per key in first-seen order, arrays not objects."""

    def __init__(self, code: _CodeLines, adherence: bool = True) -> None:
        self.code = code
        self.adherence = adherence  # False: answers are not read (adhered stays unknown, -1)
        # key -> slot number; numbers increase in first-seen order but may skip (the block reader
        # hands out one per record), so the arrays are compacted to the used slots in _part
        self.slots: dict[tuple[str, str, str, int], int] = {}
        self.next_slot = 0
        self.seen = bytearray()  # bit 1: enabled seen, bit 2: disabled seen, bit 4: error record
        self.y_pos, self.y_neg, self.invoked = bytearray(), bytearray(), bytearray()
        self.adh = array("b")
        self.src = (array("i"), array("i"))  # per condition (0 disabled, 1 enabled): file of first record
        self.line = (array("q"), array("q"))
        self.rows, self.cols, self.rk, self.sc = array("i"), array("i"), array("f"), array("f")
        self.skills = _Interner()
        self.names: dict[int, str] = {}

    def reserve(self, k: int) -> None:
        need = self.next_slot + k - len(self.seen)
        if need > 0:
            zeros = bytes(need)
            self.seen += zeros
            self.y_pos += zeros
            self.y_neg += zeros
            self.invoked += zeros
            self.adh.frombytes(b"\xff" * need)  # ADHERENCE_UNKNOWN
            for c in (0, 1):
                self.src[c].frombytes(b"\xff" * (4 * need))  # -1
                self.line[c].frombytes(bytes(8 * need))

    def duplicate(self, rec: Any, cond: int, slot: int, file_ix: int, lineno: int) -> RunLogError:
        prev = f"{self.names[self.src[cond][slot]]}:{self.line[cond][slot]}"
        return RunLogError(
            f"{self.names[file_ix]}:{lineno}: duplicate {'enabled' if cond else 'disabled'} record for "
            f"model={rec.model!r} benchmark={rec.benchmark!r} task_id={rec.task_id!r} epoch={rec.epoch} "
            f"(first at {prev})"
        )


def _ingest(st: _State, recs: list[Any], linenos: Iterable[int], file_ix: int) -> None:
    """Pair validated records (fast structs or _Checked) into the state, in file order."""
    st.reserve(len(recs))
    slots = st.slots
    sget = slots.get
    n = st.next_slot
    seen, y_pos, y_neg, invoked, adh = st.seen, st.y_pos, st.y_neg, st.invoked, st.adh
    src0, src1 = st.src
    line0, line1 = st.line
    rows, cols, rk, sc = st.rows, st.cols, st.rk, st.sc
    skills, code, cond_of, adherence = st.skills, st.code, CONDITION_ALIASES, st.adherence
    try:
        for r, ln in zip(recs, linenos, strict=True):
            key = (r.model, r.benchmark, r.task_id, r.epoch)
            slot = sget(key)
            if slot is None:
                slot = slots[key] = n
                n += 1
            s = seen[slot]
            if cond_of[r.condition]:
                if s & 1:
                    raise st.duplicate(r, ENABLED, slot, file_ix, ln)
                seen[slot] = s | 1 if r.error is None else s | 5
                src1[slot] = file_ix
                line1[slot] = ln
                y_pos[slot] = r.correct
                if r.__class__ is _Checked:
                    inv, got = r.inv, r.got
                elif r.retrievals is None and r.retrieved is None:
                    inv, got = r.invoked or 0, None
                else:
                    inv, got = _fast_retrieved(r)
                invoked[slot] = inv
                if got:
                    for rank, (sid, score) in enumerate(got.items(), 1):
                        rows.append(slot)
                        cols.append(skills[sid])
                        rk.append(rank)
                        sc.append(score)
                if adherence:
                    answer = r.answer
                    if answer.__class__ is str and answer:
                        adh[slot] = code.adhered(answer, got) if got else 0
            else:
                if s & 2:
                    raise st.duplicate(r, DISABLED, slot, file_ix, ln)
                seen[slot] = s | 2 if r.error is None else s | 6
                src0[slot] = file_ix
                line0[slot] = ln
                y_neg[slot] = r.correct
    finally:
        st.next_slot = n  # slots stay consistent with the arrays when a record raises


_KEY = attrgetter("model", "benchmark", "task_id", "epoch")
_COND, _CORRECT, _ERROR = attrgetter("condition"), attrgetter("correct"), attrgetter("error")


def _ingest_block(st: _State, recs: list[Any], lineno: int, file_ix: int) -> None:
    """`_ingest` for a block of fast-path structs, one line each from `lineno`, as array operations.

    Per record only the key lookup and a few attribute reads run in Python (list comprehensions);
    pairing, duplicate checks and the retrieved-skill sets are numpy. The result is identical to
    `_ingest`, which this hands the block to when it holds a duplicate key (for its message).
    """
    n = len(recs)
    if not n:
        return
    # one slot number per record (new keys keep theirs, old keys return theirs): the whole key
    # lookup runs in C, at the price of unused slot numbers that _part compacts away
    base = st.next_slot
    slot = np.fromiter(map(st.slots.setdefault, map(_KEY, recs), range(base, base + n)), np.int64, n)
    st.next_slot = base + n
    st.reserve(0)
    en = np.fromiter(map(CONDITION_ALIASES.__getitem__, map(_COND, recs)), bool, n)
    es, ds = slot[en], slot[~en]
    seen = np.frombuffer(st.seen, dtype=np.uint8)
    if ((seen[es] & 1).any() or (seen[ds] & 2).any()
            or np.unique(es).size < es.size or np.unique(ds).size < ds.size):
        del seen
        _ingest(st, recs, range(lineno, lineno + n), file_ix)  # raises, naming both lines
        return
    correct = np.fromiter(map(_CORRECT, recs), bool, n)
    err = np.fromiter(map(is_not, map(_ERROR, recs), repeat(None)), bool, n)
    line = np.arange(lineno, lineno + n, dtype=np.int64)
    seen[es] |= np.where(err[en], 5, 1).astype(np.uint8)
    seen[ds] |= np.where(err[~en], 6, 2).astype(np.uint8)
    del seen
    np.frombuffer(st.y_pos, dtype=np.uint8)[es] = correct[en]
    np.frombuffer(st.y_neg, dtype=np.uint8)[ds] = correct[~en]
    np.frombuffer(st.src[1], dtype=np.int32)[es] = file_ix
    np.frombuffer(st.src[0], dtype=np.int32)[ds] = file_ix
    np.frombuffer(st.line[1], dtype=np.int64)[es] = line[en]
    np.frombuffer(st.line[0], dtype=np.int64)[ds] = line[~en]

    en_recs = [recs[i] for i in np.flatnonzero(en).tolist()]
    # no `invoked`: a call was made when 'retrievals' lists one or 'retrieved' is present
    np.frombuffer(st.invoked, dtype=np.uint8)[es] = np.array(
        [bool(r.invoked) if r.invoked is not None else (bool(r.retrievals) or r.retrieved is not None)
         for r in en_recs], dtype=bool)
    adh = np.frombuffer(st.adh, dtype=np.int8)
    if st.adherence:
        answered = np.array([a.__class__ is str and a != "" for a in (r.answer for r in en_recs)], dtype=bool)
        adh[es[answered]] = 0  # 1 below where a retrieved skill was followed

    # retrieved skills: (record, id, score) in the order they appear, then deduplicated per record
    has = [k for k, r in enumerate(en_recs) if r.retrievals or r.retrieved]
    if not has:
        return
    ret = [en_recs[k] for k in has]
    items = [(k, s) for k, r in enumerate(ret) if r.retrievals for c in r.retrievals if c.skills
             for s in c.skills]
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
    skills = st.skills
    col = np.array([skills[sid] for sid in sids], dtype=np.int64)  # interned in first-seen order
    rec = np.array(rec_ix, dtype=np.int64)
    score = np.array(scores, dtype=np.float64)
    key = rec * len(skills) + col
    o = np.argsort(key, kind="stable")  # groups of one (record, skill), each in order of appearance
    ks = key[o]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    first = o[starts]  # flat position of each group's first appearance
    # a skill seen twice keeps its first score unless a later one is higher; a missing first
    # score stays missing (the comparison with nan is false), as in _fast_retrieved
    best = np.maximum.reduceat(np.where(np.isnan(score[o]), -np.inf, score[o]), starts)
    gscore = np.where(np.isnan(score[first]), np.nan, best)
    go = np.argsort(first, kind="stable")
    gpos = first[go]
    grec = rec[gpos]
    bounds = np.flatnonzero(np.r_[True, grec[1:] != grec[:-1]])
    size = np.diff(np.r_[bounds, grec.size])
    rank = np.arange(grec.size) - np.repeat(bounds, size) + 1
    ret_slot = es[np.array(has, dtype=np.int64)]
    st.rows.frombytes(ret_slot[grec].astype(np.int32).tobytes())
    st.cols.frombytes(col[gpos].astype(np.int32).tobytes())
    st.rk.frombytes(rank.astype(np.float32).tobytes())
    st.sc.frombytes(gscore[go].astype(np.float32).tobytes())
    if st.adherence:
        code = st.code
        # each record's deduplicated ids in rank order: a contiguous run of (grec, gpos)
        gids = [sids[i] for i in gpos.tolist()]
        lo = np.r_[bounds, grec.size].tolist()
        for j, k in enumerate(grec[bounds].tolist()):
            a = ret[k].answer
            if a.__class__ is str and a:
                adh[ret_slot[k]] = code.adhered(a, gids[lo[j]:lo[j + 1]])


def _valid_utf8(chunk: bytes) -> bool:
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _feed_block(st: _State, chunk: bytes, lineno: int, file_ix: int) -> None:
    """Records of a block of whole lines starting at line `lineno`: fast path, else exact path."""
    if _decode is not None and b"\0" not in chunk and (chunk.isascii() or _valid_utf8(chunk)):
        lines = chunk.split(b"\n")
        if not lines[-1]:
            lines.pop()
        try:  # one value per line, or DecodeError
            recs = list(map(_decode if st.adherence else _decode_core, lines))
        except _DecodeError:
            pass
        else:
            _ingest_block(st, recs, lineno, file_ix)
            return
    name = st.names[file_ix]
    batch: list[_Checked] = []
    linenos: list[int] = []
    error = None
    for ln, line in enumerate(io.BytesIO(chunk), lineno):
        if b"\0" not in line and not line.strip():
            continue
        try:
            batch.append(_check_line(line, f"{name}:{ln}"))
        except RunLogError as exc:
            error = exc
            break
        linenos.append(ln)
    _ingest(st, batch, linenos, file_ix)  # earlier duplicates are reported before a later bad line
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


def _feed_file(st: _State, path: str, file_ix: int, start: int = 0, stop: int | None = None) -> None:
    """Feed a file's records; with `start`/`stop`, only the lines whose first byte is in [start, stop)."""
    name, fh = _open(path)
    st.names[file_ix] = name
    try:
        lineno, left = 1, -1
        if start or stop is not None:  # a byte range of a plain file (a --jobs work unit)
            begin = _line_start_at(fh, start)
            end = _line_start_at(fh, stop) if stop is not None else -1
            lineno = _count_lines(fh, begin) + 1
            fh.seek(begin)
            left = end - begin if end >= 0 else -1
        rest = b""
        while True:
            block = fh.read(_BLOCK if left < 0 else min(_BLOCK, left))
            if left > 0:
                left -= len(block)
            if block:
                buf = rest + block if rest else block
                cut = buf.rfind(b"\n") + 1
                if not cut:
                    rest = buf
                    continue
                chunk, rest = buf[:cut], buf[cut:]
            elif rest:
                chunk, rest = rest, b""
            else:
                break
            _feed_block(st, chunk, lineno, file_ix)
            lineno += chunk.count(b"\n")
            if left == 0 and not rest:
                break
    except OSError as exc:
        raise RunLogError(f"{name}: cannot read: {exc.strerror or exc}") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


_MIN_UNIT = 8 << 20  # below this many bytes per worker, a process costs more than it saves


def _work_units(paths: list[str], jobs: int) -> list[tuple[str, int, int, int | None]]:
    """(path, file index, start, stop) units of about equal size for `jobs` workers, in file order.

    Plain files larger than a share are cut into byte ranges at line starts (each worker finds
    them); gzip files and standard input are one unit each.
    """
    sizes = []
    for p in paths:
        try:
            sizes.append(0 if p == "-" or p.endswith(".gz") else Path(p).stat().st_size)
        except OSError:
            sizes.append(0)  # reported by the worker that opens it
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


# ---------------------------------------------------------------- parts: one state as arrays
def _part(st: _State, error: str | None = None) -> dict[str, Any]:
    """The state as numpy arrays and vocabularies (picklable; what a --jobs worker returns)."""
    n = len(st.slots)
    used = np.fromiter(st.slots.values(), np.int64, n)  # increasing: first-seen order
    models, benches, tasks = _Interner(), _Interner(), _Interner()
    if n:
        km, kb, kt, ke = zip(*st.slots, strict=True)  # the key columns, in slot order
    else:
        km = kb = kt = ke = ()
    m = np.fromiter(map(models.__getitem__, km), np.int32, n)
    b = np.fromiter(map(benches.__getitem__, kb), np.int32, n)
    t = np.fromiter(map(tasks.__getitem__, kt), np.int32, n)
    e = np.fromiter(ke, np.int64, n)
    del km, kb, kt, ke

    def at(buf: Any, dtype: Any) -> np.ndarray:
        return np.frombuffer(buf, dtype=dtype)[used] if n else np.zeros(0, dtype)

    def coo(a: array, dtype: Any) -> np.ndarray:
        return np.frombuffer(a, dtype=dtype).copy() if len(a) else np.zeros(0, dtype)

    rows = coo(st.rows, np.int32)
    return {
        "models": models.vocab(), "benchmarks": benches.vocab(), "tasks": tasks.vocab(),
        "skills": st.skills.vocab(), "m": m, "b": b, "t": t, "e": e,
        "seen": at(st.seen, np.uint8), "y_pos": at(st.y_pos, np.uint8), "y_neg": at(st.y_neg, np.uint8),
        "invoked": at(st.invoked, np.uint8), "adh": at(st.adh, np.int8),
        "src": (at(st.src[0], np.int32), at(st.src[1], np.int32)),
        "line": (at(st.line[0], np.int64), at(st.line[1], np.int64)),
        "rows": np.searchsorted(used, rows).astype(np.int32), "cols": coo(st.cols, np.int32),
        "rk": coo(st.rk, np.float32), "sc": coo(st.sc, np.float32),
        "names": dict(st.names), "error": error,
    }


def _parse_one(args: tuple[str, int, int, int | None, _CodeLines, bool]) -> dict[str, Any]:
    """--jobs worker: one unit -> its part; a RunLogError is returned (after the records before it)."""
    path, file_ix, start, stop, code, adherence = args
    st = _State(code, adherence)
    try:
        _feed_file(st, path, file_ix, start, stop)
    except RunLogError as exc:
        return _part(st, str(exc))
    return _part(st)


def _remap(vocab: _Interner, names: tuple[str, ...]) -> np.ndarray:
    return np.fromiter(map(vocab.__getitem__, names), np.int64, len(names))


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One part from per-file parts, exactly as if the files had been read one after another."""
    models, benches, tasks, skills = _Interner(), _Interner(), _Interner(), _Interner()
    cols_m, cols_b, cols_t, cols_s = [], [], [], []
    for p in parts:  # vocabularies in first-seen order: file order, then order within the file
        cols_m.append(_remap(models, p["models"])[p["m"]])
        cols_b.append(_remap(benches, p["benchmarks"])[p["b"]])
        cols_t.append(_remap(tasks, p["tasks"])[p["t"]])
        cols_s.append(_remap(skills, p["skills"]))
    M, B, T = np.concatenate(cols_m), np.concatenate(cols_b), np.concatenate(cols_t)
    E = np.concatenate([p["e"] for p in parts])
    ue, e_ix = np.unique(E, return_inverse=True)
    sizes = [max(len(models), 1), max(len(benches), 1), max(len(tasks), 1), max(len(ue), 1)]
    if float(np.prod(np.array(sizes, dtype=np.float64))) < 2**62:
        combined = ((M * sizes[1] + B) * sizes[2] + T) * sizes[3] + e_ix.ravel()
        _, first, inv = np.unique(combined, return_index=True, return_inverse=True)
    else:  # pragma: no cover - astronomically many distinct keys
        _, first, inv = np.unique(np.stack([M, B, T, E], 1), axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    slot_of = np.empty_like(order)
    slot_of[order] = np.arange(order.size)
    gslot = slot_of[inv.ravel()]
    n = order.size
    key_rows = first[order]
    out: dict[str, Any] = {
        "models": models.vocab(), "benchmarks": benches.vocab(), "tasks": tasks.vocab(),
        "skills": skills.vocab(),
        "m": M[key_rows].astype(np.int32), "b": B[key_rows].astype(np.int32),
        "t": T[key_rows].astype(np.int32), "e": E[key_rows],
        "seen": np.zeros(n, np.uint8), "y_pos": np.zeros(n, np.uint8), "y_neg": np.zeros(n, np.uint8),
        "invoked": np.zeros(n, np.uint8), "adh": np.full(n, ADHERENCE_UNKNOWN, np.int8),
        "src": (np.full(n, -1, np.int32), np.full(n, -1, np.int32)),
        "line": (np.zeros(n, np.int64), np.zeros(n, np.int64)),
        "names": {}, "error": None,
    }
    seen = out["seen"]
    rows, cols, rk, sc = [], [], [], []
    start = 0
    for p, smap in zip(parts, cols_s, strict=True):
        k = p["seen"].size
        g = gslot[start:start + k]
        start += k
        out["names"].update(p["names"])
        ps = p["seen"]
        # a key already seen for one condition in an earlier file: the first such line of this file
        best = None
        for cond, bit in ((ENABLED, 1), (DISABLED, 2)):
            dup = np.flatnonzero((ps & bit) & (seen[g] & bit))
            if dup.size:
                j = int(dup[np.argmin(p["line"][cond][dup])])
                if best is None or p["line"][cond][j] < p["line"][best[0]][best[1]]:
                    best = (cond, j)
        if best is not None:
            cond, j = best
            gs = int(g[j])
            prev = f"{out['names'][int(out['src'][cond][gs])]}:{int(out['line'][cond][gs])}"
            where = f"{out['names'][int(p['src'][cond][j])]}:{int(p['line'][cond][j])}"
            raise RunLogError(
                f"{where}: duplicate {'enabled' if cond else 'disabled'} record for "
                f"model={p['models'][p['m'][j]]!r} benchmark={p['benchmarks'][p['b'][j]]!r} "
                f"task_id={p['tasks'][p['t'][j]]!r} epoch={int(p['e'][j])} (first at {prev})"
            )
        if p["error"] is not None:
            raise RunLogError(p["error"])
        seen[g] |= ps
        en = (ps & 1) != 0
        ge = g[en]
        out["y_pos"][ge] = p["y_pos"][en]
        out["invoked"][ge] = p["invoked"][en]
        out["adh"][ge] = p["adh"][en]
        out["src"][1][ge] = p["src"][1][en]
        out["line"][1][ge] = p["line"][1][en]
        dis = (ps & 2) != 0
        gd = g[dis]
        out["y_neg"][gd] = p["y_neg"][dis]
        out["src"][0][gd] = p["src"][0][dis]
        out["line"][0][gd] = p["line"][0][dis]
        rows.append(g[p["rows"]].astype(np.int32))
        cols.append(smap[p["cols"]].astype(np.int32))
        rk.append(p["rk"])
        sc.append(p["sc"])
    out["rows"], out["cols"] = np.concatenate(rows), np.concatenate(cols)
    out["rk"], out["sc"] = np.concatenate(rk), np.concatenate(sc)
    return out


def _paired(p: dict[str, Any], strict: bool) -> PairedRuns:
    seen_arr = p["seen"]
    names = p["names"]
    both = (seen_arr & 3) == 3
    errored = (seen_arr & 4) != 0
    keep = both & ~errored
    unpaired = np.flatnonzero(~both)
    examples = []
    if unpaired.size:
        for s in unpaired[:5]:
            only = "enabled" if seen_arr[s] & 1 else "disabled"
            c = ENABLED if only == "enabled" else DISABLED
            examples.append(
                f"{names[int(p['src'][c][s])]}:{int(p['line'][c][s])}: {p['models'][p['m'][s]]}/"
                f"{p['benchmarks'][p['b'][s]]}/{p['tasks'][p['t'][s]]} epoch {int(p['e'][s])} "
                f"has only its {only} record"
            )
        if strict:
            raise UnpairedError(
                f"{examples[0]} ({unpaired.size} unpaired record(s); drop --strict to leave them out)"
            )
    n_slots = seen_arr.size
    idx = np.flatnonzero(keep)
    shape = (n_slots, len(p["skills"]))
    r, c = p["rows"], p["cols"]
    ranks = sp.csr_matrix((p["rk"], (r, c)), shape=shape)
    scores = sp.csr_matrix((p["sc"], (r, c)), shape=shape)
    ranks.sort_indices()
    scores.sort_indices()
    return PairedRuns(
        models=tuple(p["models"]), benchmarks=tuple(p["benchmarks"]), tasks=tuple(p["tasks"]),
        skills=tuple(p["skills"]),
        model=p["m"][idx].astype(np.int32), benchmark=p["b"][idx].astype(np.int32),
        task=p["t"][idx].astype(np.int32), epoch=p["e"][idx].astype(np.int32),
        y_pos=p["y_pos"][idx].astype(bool), y_neg=p["y_neg"][idx].astype(bool),
        invoked=p["invoked"][idx].astype(bool), adhered=p["adh"][idx].copy(),
        ranks=ranks[idx], scores=scores[idx],
        n_unpaired=int(unpaired.size), unpaired_examples=tuple(examples),
        n_error_pairs=int((both & errored).sum()), sources=tuple(names[i] for i in sorted(names)),
    )


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
        return _load(paths, strict, code, jobs, adherence)
    finally:
        if was_enabled:
            gc.enable()


def _auto_jobs(paths: list[str]) -> int:
    """Workers for `jobs=0`: one per available core, when the input is large enough to pay for them."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    total = 0
    for p in paths:
        if p != "-" and Path(p).is_file():
            total += Path(p).stat().st_size
    return max(1, min(cores, total // _MIN_UNIT))


def _load(paths: list[str], strict: bool, code: _CodeLines, jobs: int, adherence: bool) -> PairedRuns:
    if jobs <= 0:
        jobs = _auto_jobs(paths)
    units = _work_units(paths, jobs) if jobs > 1 and "-" not in paths else []
    if len(units) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, len(units))) as pool:
            parts = list(pool.map(_parse_one, [(*u, code, adherence) for u in units]))
        return _paired(_merge(parts), strict)
    st = _State(code, adherence)
    for ix, path in enumerate(paths):
        _feed_file(st, path, ix)
    return _paired(_part(st), strict)


def read_text_records(text: str, name: str = "<string>") -> PairedRuns:
    """Load runs from a string of JSON Lines (for tests and notebooks)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as fh:
        fh.write(text)
    try:
        return load_runs([fh.name])
    finally:
        Path(fh.name).unlink()


_ = io  # re-exported for type checkers of callers that pass BytesIO
