"""Paired run logs: stream JSON Lines records (DESIGN §3.1), pair enabled with disabled runs.

The result is held in arrays, not per-record objects: one row per pair in numpy vectors and a
sparse (CSR) pair x skill matrix whose values are the 1-based rank of the skill in the pair's
deduplicated retrieved set (`retrieval`; `ranks` is the same matrix as scipy.sparse). While
reading, records are kept as per-record numpy columns (ids into small vocabularies), and pairing
is done once, with numpy, when every file has been read.
"""

from __future__ import annotations

import gc
import gzip
import io
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from operator import attrgetter, is_not
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import numpy as np
import orjson

try:  # the C column scanner (setup.py builds it when a compiler is there); else msgspec reads all
    from . import _scan
except ImportError:  # pragma: no cover
    _scan = None  # type: ignore[assignment]

try:  # typed decoding of only the fields read; without it every line takes the exact path
    import msgspec
except ImportError:  # pragma: no cover
    msgspec = None  # type: ignore[assignment]

from ._csr import Csr, indptr_of
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
    # pairs x skills: the 1-based rank of each retrieved skill, columns sorted within each row
    retrieval: Csr
    retrieval_scores: np.ndarray  # float32 per entry of `retrieval`: its score (nan when not logged)
    n_unpaired: int = 0
    unpaired_examples: tuple[str, ...] = ()
    n_error_pairs: int = 0
    sources: tuple[str, ...] = field(default=())
    n_arm_records: int = 0  # counterfactual arm records set aside (read them with skillaudit.counterfactual)
    # False: no line the loader read holds the bytes "hash", so no record logs a skill's content
    # hash and the provenance pass (skillaudit.provenance.seen_hashes) has nothing to find
    skill_hashes: bool = True
    # bool per pair: False where the enabled record says which skills were offered but not which
    # were used (`"use_logged": false`); None when every pair logged its use (the usual case)
    use_logged: np.ndarray | None = None

    @property
    def use_unlogged(self) -> np.ndarray:
        """Bool per pair: its enabled run's skill use was not recorded (offered only)."""
        if self.use_logged is None:
            return np.zeros(self.n_pairs, dtype=bool)
        return ~self.use_logged

    @property
    def n_pairs(self) -> int:
        return int(self.y_pos.shape[0])

    @cached_property
    def ranks(self) -> Any:
        """scipy.sparse.csr_matrix, pairs x skills: 1-based rank of each retrieved skill (0 = not retrieved)."""
        return self.retrieval.to_scipy()

    @cached_property
    def scores(self) -> Any:
        """scipy.sparse.csr_matrix with the pattern of `ranks`: the retrieval scores (nan when not logged)."""
        r = self.retrieval
        return Csr(self.retrieval_scores, r.indices.copy(), r.indptr.copy(), r.shape).to_scipy()

    @property
    def n_skills_retrieved(self) -> np.ndarray:
        """Size of each pair's deduplicated retrieved set."""
        return np.diff(self.retrieval.indptr)

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
        r = self.retrieval
        indptr, pos = r.row_entries(idx)
        hits = Csr(r.data[pos], r.indices[pos], indptr, (idx.size, r.shape[1]))
        return PairedRuns(
            models=self.models, benchmarks=self.benchmarks, tasks=self.tasks, skills=self.skills,
            model=self.model[idx], benchmark=self.benchmark[idx], task=self.task[idx],
            epoch=self.epoch[idx], y_pos=self.y_pos[idx], y_neg=self.y_neg[idx],
            invoked=self.invoked[idx], adhered=self.adhered[idx],
            retrieval=hits, retrieval_scores=self.retrieval_scores[pos],
            n_unpaired=self.n_unpaired, unpaired_examples=self.unpaired_examples,
            n_error_pairs=self.n_error_pairs, sources=self.sources, n_arm_records=self.n_arm_records,
            skill_hashes=self.skill_hashes,
            use_logged=None if self.use_logged is None else self.use_logged[idx],
        )

    def select(self, model: str | None = None, benchmark: str | None = None) -> PairedRuns:
        """Pairs of one model and/or benchmark (None = all)."""
        if model is None and benchmark is None:
            return self  # frozen: nothing to copy
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


def _open(path: str | Path, raw: Callable[[IO[bytes]], IO[bytes]] | None = None) -> tuple[str, IO[bytes]]:
    """(name, binary stream) of a run log; gzip is decompressed. `raw` wraps the file before any
    decompression (load_inputs hashes the bytes it reads on their one way through)."""
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
    if raw is not None:
        fh = raw(fh)
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
        arm: Annotated[str, msgspec.Meta(min_length=1)] | None = None  # counterfactual runs (DESIGN §3.1b): set aside, read by skillaudit.counterfactual
        use_logged: bool | None = None  # false: skills offered (`offered`, not read here), their use not recorded

    class _Rec(_RecCore, gc=False):
        answer: Any = None

    _decode = msgspec.json.Decoder(_Rec).decode
    _decode_core = msgspec.json.Decoder(_RecCore).decode  # answers skipped, not built
    _DecodeError: type[Exception] = msgspec.DecodeError
else:  # pragma: no cover - msgspec is optional; every block takes the exact path
    _decode = _decode_core = None
    _DecodeError = ValueError


_MAX_EPOCH = 2**63 - 1
_F32_MAX = float(np.finfo(np.float32).max)  # scores are kept as float32: larger ones are clipped
# Numbers one reader could take for infinity: an exponent of 3 digits, or 200 digits in a row
# (below both, |x| < 10**299). A block holding one skips msgspec, which does not look at the
# value of a number in a field it skips; the exact path then rejects a non-finite number anywhere.
_MAYBE_HUGE = re.compile(rb"[0-9.][eE][+-]?[0-9]{3}|[0-9]{200}")


def _non_finite(line: bytes, exc: orjson.JSONDecodeError) -> bool:
    """orjson stopped at a number too large for a double, or at NaN / Infinity."""
    if "infinity" in str(exc):
        return True
    rest = line.decode("utf-8", "replace")[exc.pos:exc.pos + 9].lstrip("-")
    return rest.startswith(("NaN", "Infinity", "nan", "inf"))


class _Checked:
    """A record validated by the exact path, shaped like the fast path's struct."""

    __slots__ = (
        "answer",
        "arm",
        "benchmark",
        "condition",
        "correct",
        "epoch",
        "error",
        "got",
        "inv",
        "model",
        "task_id",
        "use_logged",
    )


def _check_line(line: bytes, where: str) -> _Checked:
    """Parse and validate one line exactly as DESIGN §3.1 says; RunLogError names file:line."""
    if line.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise RunLogError(f"{where}: UTF-16 text (byte order mark); save the log as UTF-8")
    if b"\0" in line:
        raise RunLogError(f"{where}: binary data, not a JSON Lines text file")
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if line.startswith(_BOM):
            raise RunLogError(f"{where}: a UTF-8 byte order mark (BOM) inside the file; "
                              "only a file's first line may start with one") from None
        if b"\xff" in line or b"\xfe" in line or "UTF-8" in str(exc):
            raise RunLogError(f"{where}: binary data, not a JSON Lines text file") from None
        if _non_finite(line, exc):
            raise RunLogError(f"{where}: non-finite number (column {exc.pos + 1}); "
                              "JSON numbers must be finite (no NaN, Infinity or 1e400)") from None
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
        if epoch > _MAX_EPOCH:
            raise ValueError(f"'epoch' must be at most 2**63 - 1, got {_describe(epoch)}")
        model = rec.get("model", "default")
        bench = rec.get("benchmark", "default")
        if not isinstance(model, str) or not isinstance(bench, str):
            raise ValueError("'model' and 'benchmark' must be strings")
        arm = rec.get("arm")
        if arm is not None and (not isinstance(arm, str) or not arm):
            raise ValueError(f"'arm' must be a non-empty string, got {_describe(arm)}")
        out.arm = arm
        if cond == ENABLED and arm is None:
            inv, got = _retrieved_ids(rec, where)
            out.inv, out.got = inv, dict(got)
        out.error = rec.get("error")
        ul = rec.get("use_logged")
        if ul is not None and not isinstance(ul, bool):
            raise ValueError(f"'use_logged' must be true or false, got {_describe(ul)}")
        out.use_logged = ul  # `offered` is informational (the report's task bundles read the task)
    except ValueError as exc:
        raise RunLogError(f"{where}: {exc}") from None
    out.task_id, out.condition, out.correct, out.epoch = tid, cond_raw, correct, epoch
    out.model, out.benchmark, out.answer = model, bench, rec.get("answer")
    return out


class _State:
    """Records while streaming, as per-record numpy chunks (pairing happens once, at the end)."""

    def __init__(self, code: _CodeLines, adherence: bool = True, extra: Any = None) -> None:
        self.code = code
        # what else load_inputs keeps of each block (arm and hash lines, cost fields, digests):
        # an object with feed(), wrap() and finish() (skillaudit.inputs), fresh for each state
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
               "ul": bool}  # ul: skill use logged (False: "use_logged": false, offered only)
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
_BOM = b"\xef\xbb\xbf"


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


#: the bytes every line logging a skill's content hash holds (skillaudit.provenance reads those lines)
_HASH_NEEDLE = b'"hash"'
#: a block holding these bytes skips the C scanner (which reads only the plain shape): msgspec or
#: the exact path read `use_logged` (a superset of the block when it is a view: never a miss)
_USE_NEEDLE = b'"use_logged"'


def _feed_blob(st: _State, blob: bytes | memoryview, lineno: int, file_ix: int) -> int:
    """Records of a block of whole lines that starts at line `lineno`; returns its number of lines.

    The C scanner reads the plain shape of record; a block with anything else goes through
    msgspec, then the exact path (which reports errors).
    """
    if not st.saw_hash:  # a memoryview's whole buffer: a superset of the block, never a miss
        st.saw_hash = _HASH_NEEDLE in (blob.obj if isinstance(blob, memoryview) else blob)
    if st.tables is not None and _USE_NEEDLE not in (blob.obj if isinstance(blob, memoryview) else blob):
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


# ---------------------------------------------------------------- parts: records as arrays
def _part(st: _State, error: str | None = None) -> dict[str, Any]:
    """The state as lists of per-record array chunks and vocabularies (picklable; what a --jobs
    worker returns). Chunks are concatenated once, by _concat, over all parts."""
    out: dict[str, Any] = {k: list(v) for k, v in st.chunks.items()}
    out.update({f"r_{k}": list(v) for k, v in st.ret.items()})
    out.update(models=st.models.vocab(), benchmarks=st.benches.vocab(), tasks=st.tasks.vocab(),
               skills=st.skills.vocab(), names=dict(st.names), error=error, n=st.n, n_arm=st.n_arm,
               hash=st.saw_hash, extra=st.extra)
    return out


def _parse_one(args: tuple[str, int, int, int | None, _CodeLines, bool, Any]) -> dict[str, Any]:
    """--jobs worker: one unit -> its part; a RunLogError is returned (after the records before it)."""
    path, file_ix, start, stop, code, adherence, extra = args
    st = _State(code, adherence, extra)
    try:
        _feed_file(st, path, file_ix, start, stop)
    except RunLogError as exc:
        return _part(st, str(exc))
    return _part(st)


def _remap(vocab: _Interner, names: tuple[str, ...]) -> np.ndarray:
    return np.fromiter(map(vocab.__getitem__, names), np.int32, len(names))


def _concat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One part from parts read in order: vocabularies merged in first-seen order, ids remapped,
    every column concatenated once."""
    def joined(chunks: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype)

    if len(parts) == 1:  # its vocabularies are already in first-seen order
        p = parts[0]
        merged = {k: joined(p[k], dt) for k, dt in _REC_DTYPES.items()}
        merged.update({f"r_{k}": joined(p[f"r_{k}"], dt) for k, dt in _RET_DTYPES.items()})
        merged.update({k: p[k] for k in ("models", "benchmarks", "tasks", "skills", "names", "error")})
        merged["n_arm"] = p.get("n_arm", 0)
        merged["hash"] = p.get("hash", True)
        return merged
    vocabs = {k: _Interner() for k in ("models", "benchmarks", "tasks", "skills")}
    out: dict[str, list[np.ndarray]] = {k: [] for k in (*_REC_DTYPES, *(f"r_{k}" for k in _RET_DTYPES))}
    names: dict[int, str] = {}
    base = 0
    for p in parts:
        for field_ in _REC_DTYPES:
            vocab = _VOCAB_OF.get(field_)
            if vocab is None:
                out[field_] += p[field_]
            else:
                ids = _remap(vocabs[vocab], p[vocab])
                out[field_] += [ids[chunk] for chunk in p[field_]]
        ids = _remap(vocabs["skills"], p["skills"])
        out["r_col"] += [ids[chunk] for chunk in p["r_col"]]
        out["r_rec"] += [chunk + base for chunk in p["r_rec"]]
        out["r_rk"] += p["r_rk"]
        out["r_sc"] += p["r_sc"]
        names.update(p["names"])
        base += p["n"]
    merged: dict[str, Any] = {k: joined(out[k], _REC_DTYPES[k]) for k in _REC_DTYPES}
    merged.update({f"r_{k}": joined(out[f"r_{k}"], dt) for k, dt in _RET_DTYPES.items()})
    merged.update({k: v.vocab() for k, v in vocabs.items()})
    merged.update(names=names, error=None, n_arm=sum(p.get("n_arm", 0) for p in parts),
                  hash=any(p.get("hash", True) for p in parts))
    return merged


def _first_error(parts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """The parts a one-by-one reader would have read before its first error, and that error."""
    for i, p in enumerate(parts):
        if p["error"] is not None:
            return parts[: i + 1], p["error"]
    return parts, None


def _slots(r: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Slot of each record (keys numbered in first-seen order) and each slot's first record."""
    n = r["m"].size
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    e = r["e"]
    if int(e.max()) <= n:  # small epochs (the usual 1..k) index directly
        e_ix, n_e = e - 1, int(e.max())
    else:
        ue, e_ix = np.unique(e, return_inverse=True)
        e_ix, n_e = e_ix.ravel(), ue.size
    sizes = [max(len(r["models"]), 1), max(len(r["benchmarks"]), 1), max(len(r["tasks"]), 1), max(n_e, 1)]
    space = float(np.prod(np.array(sizes, dtype=np.float64)))
    if space < 2**62:
        key = ((r["m"].astype(np.int64) * sizes[1] + r["b"]) * sizes[2] + r["t"]) * sizes[3] + e_ix
        if space <= 4 * n:  # a table over the key space: no sort
            first_at = np.full(int(space), n, np.int64)
            np.minimum.at(first_at, key, np.arange(n))
            first = np.flatnonzero(first_at[key] == np.arange(n))  # first records, in reading order
            slot_of_key = np.empty(int(space), np.int64)
            slot_of_key[key[first]] = np.arange(first.size)
            return slot_of_key[key], first
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    else:  # pragma: no cover - astronomically many distinct keys
        _, first, inv = np.unique(np.stack([r["m"], r["b"], r["t"], e_ix], 1), axis=0,
                                  return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    slot_of = np.empty_like(order)
    slot_of[order] = np.arange(order.size)
    return slot_of[inv.ravel()], first[order]


def _duplicate(r: dict[str, Any], slot: np.ndarray) -> RunLogError | None:
    """The error a one-by-one reader raises first: the earliest record whose key and condition repeat."""
    cond_slot = slot * 2 + r["en"]
    if cond_slot.size == 0 or np.bincount(cond_slot).max() < 2:  # the usual case, without a sort
        return None
    order = np.argsort(cond_slot, kind="stable")  # each (slot, condition) group in reading order
    cs = cond_slot[order]
    again = np.flatnonzero(cs[1:] == cs[:-1]) + 1
    if again.size == 0:
        return None
    second = order[again]
    j = int(again[np.argmin(second)])  # sorted position of the earliest repeat
    k = int(order[j])
    start = j
    while start > 0 and cs[start - 1] == cs[j]:
        start -= 1
    f = int(order[start])
    names = r["names"]
    return RunLogError(
        f"{names[int(r['file'][k])]}:{int(r['line'][k])}: duplicate "
        f"{'enabled' if r['en'][k] else 'disabled'} record for model={r['models'][r['m'][k]]!r} "
        f"benchmark={r['benchmarks'][r['b'][k]]!r} task_id={r['tasks'][r['t'][k]]!r} "
        f"epoch={int(r['e'][k])} (first at {names[int(r['file'][f])]}:{int(r['line'][f])})"
    )


def _pair(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-slot arrays (what _paired reads) from the parts' records; raises the first error."""
    parts, error = _first_error(parts)
    r = _concat(parts)
    slot, first = _slots(r)
    n = first.size
    dup = _duplicate(r, slot)
    if dup is not None:  # a repeat before the bad line is what reading one by one meets first
        raise dup
    if error is not None:
        raise RunLogError(error)
    en_ix, dis_ix = np.flatnonzero(r["en"]), np.flatnonzero(~r["en"])  # positions, taken once
    es, ds = slot[en_ix], slot[dis_ix]
    seen = np.zeros(n, np.uint8)
    seen[es] |= np.where(r["err"][en_ix], 5, 1).astype(np.uint8)
    seen[ds] |= np.where(r["err"][dis_ix], 6, 2).astype(np.uint8)
    y_pos, y_neg, invoked = np.zeros(n, np.uint8), np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    y_pos[es], y_neg[ds], invoked[es] = r["ok"][en_ix], r["ok"][dis_ix], r["inv"][en_ix]
    use_logged = np.ones(n, bool)
    use_logged[es] = r["ul"][en_ix]
    adh = np.full(n, ADHERENCE_UNKNOWN, np.int8)
    adh[es] = r["adh"][en_ix]
    src = (np.full(n, -1, np.int32), np.full(n, -1, np.int32))
    line = (np.zeros(n, np.int64), np.zeros(n, np.int64))
    src[1][es], line[1][es] = r["file"][en_ix], r["line"][en_ix]
    src[0][ds], line[0][ds] = r["file"][dis_ix], r["line"][dis_ix]
    return {
        "models": r["models"], "benchmarks": r["benchmarks"], "tasks": r["tasks"], "skills": r["skills"],
        "m": r["m"][first], "b": r["b"][first], "t": r["t"][first], "e": r["e"][first],
        "seen": seen, "y_pos": y_pos, "y_neg": y_neg, "invoked": invoked, "adh": adh,
        "src": src, "line": line, "rows": slot[r["r_rec"]].astype(np.int32), "cols": r["r_col"],
        "rk": r["r_rk"], "sc": r["r_sc"], "names": r["names"], "n_arm": r.get("n_arm", 0),
        "hash": r.get("hash", True), "ul": use_logged,
    }


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
    # the kept slots' retrieved skills, straight into CSR (rows in pair order, columns sorted);
    # a slot's skills come from its one enabled record, already deduplicated
    row_of = np.full(n_slots, -1, np.int64)
    row_of[idx] = np.arange(idx.size)
    rows = row_of[p["rows"]]
    sel = np.flatnonzero(rows >= 0)
    shape = (idx.size, len(p["skills"]))
    # the items in (row, column) order: one stable sort of a combined key (the items arrive
    # nearly in row order, which the sort exploits)
    r_sel = rows[sel]
    order = sel[np.argsort(r_sel * shape[1] + p["cols"][sel], kind="stable")]
    hits = Csr(p["rk"][order], p["cols"][order].astype(np.int32), indptr_of(r_sel, shape[0]), shape)
    return PairedRuns(
        models=tuple(p["models"]), benchmarks=tuple(p["benchmarks"]), tasks=tuple(p["tasks"]),
        skills=tuple(p["skills"]),
        model=p["m"][idx].astype(np.int32), benchmark=p["b"][idx].astype(np.int32),
        task=p["t"][idx].astype(np.int32), epoch=p["e"][idx].astype(np.int32),
        y_pos=p["y_pos"][idx].astype(bool), y_neg=p["y_neg"][idx].astype(bool),
        invoked=p["invoked"][idx].astype(bool), adhered=p["adh"][idx].copy(),
        retrieval=hits, retrieval_scores=p["sc"][order],
        n_unpaired=int(unpaired.size), unpaired_examples=tuple(examples),
        n_error_pairs=int((both & errored).sum()), sources=tuple(names[i] for i in sorted(names)),
        n_arm_records=int(p.get("n_arm", 0)), skill_hashes=bool(p.get("hash", True)),
        use_logged=None if p["ul"][idx].all() else p["ul"][idx].copy(),
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
        return _load(paths, strict, code, jobs, adherence)[0]
    finally:
        if was_enabled:
            gc.enable()


def _auto_jobs(sizes: list[int]) -> int:
    """Workers for `jobs=0`: one per available core, when the input is large enough to pay for them."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, sum(sizes) // _MIN_UNIT))


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


def _parse_parallel(units: list[tuple[str, int, int, int | None]], jobs: int, code: _CodeLines,
                    adherence: bool, extra: Any = None) -> list[dict[str, Any]] | None:
    """Parts of the units from worker threads or processes; None when workers cannot run (read in-process).

    The C scanner parses without the GIL, so when it reads the logs, threads do: no process to
    start, nothing to pickle. msgspec holds the GIL, so it gets processes.
    """
    args = [(*u, code, adherence, extra) for u in units]
    if _scan is not None:
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


def read_text_records(text: str, name: str = "<string>") -> PairedRuns:
    """Load runs from a string of JSON Lines (for tests and notebooks)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as fh:
        fh.write(text)
    try:
        return load_runs([fh.name])
    finally:
        Path(fh.name).unlink()

