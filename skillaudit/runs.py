"""Paired run logs: stream JSON Lines records (DESIGN §3.1), pair enabled with disabled runs.

The result is held in arrays, not per-record objects: one row per pair in numpy vectors and a
scipy.sparse pair x skill matrix whose values are the 1-based rank of the skill in the pair's
deduplicated retrieved set.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson
import scipy.sparse as sp

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
        fh = gzip.open(fh)  # type: ignore[assignment]
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
                if prev is None:
                    got[sid] = score
                elif score > prev:
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


def load_runs(
    paths: Iterable[str],
    *,
    strict: bool = False,
    library: Any = None,
) -> PairedRuns:
    """Stream run logs, validate each record, pair them; raise RunLogError naming file:line."""
    models, benches, tasks, skills = _Interner(), _Interner(), _Interner(), _Interner()
    slots: dict[tuple[int, int, int, int], int] = {}
    seen = bytearray()  # bit 1: enabled seen, bit 2: disabled seen, bit 4: error record
    y_pos, y_neg, invoked = bytearray(), bytearray(), bytearray()
    adh = array("b")
    first_src = [array("i"), array("i")]  # per condition: file index of first record
    first_line = [array("q"), array("q")]
    rows, cols, rk, sc = array("i"), array("i"), array("f"), array("f")
    code = _CodeLines(library)
    names: list[str] = []

    for path in paths:
        name, fh = _open(path)
        file_ix = len(names)
        names.append(name)
        try:
            for lineno, line in _iter_lines(name, fh):
                where = f"{name}:{lineno}"
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    if b"\xff" in line or b"\xfe" in line or "UTF-8" in str(exc):
                        raise RunLogError(f"{where}: binary data, not a JSON Lines text file") from None
                    raise RunLogError(f"{where}: invalid JSON (column {exc.pos + 1})") from None
                if not isinstance(rec, dict):
                    raise RunLogError(f"{where}: record must be a JSON object, got {_json_type(rec)}")
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
                    is_error = rec.get("error") is not None
                except ValueError as exc:
                    raise RunLogError(f"{where}: {exc}") from None

                key = (models[model], benches[bench], tasks[tid], epoch)
                slot = slots.get(key)
                if slot is None:
                    slot = slots[key] = len(seen)
                    seen.append(0)
                    y_pos.append(0)
                    y_neg.append(0)
                    invoked.append(0)
                    adh.append(ADHERENCE_UNKNOWN)
                    for c in (0, 1):
                        first_src[c].append(-1)
                        first_line[c].append(0)
                bit = 1 if cond == ENABLED else 2
                if seen[slot] & bit:
                    prev = f"{names[first_src[cond][slot]]}:{first_line[cond][slot]}"
                    raise RunLogError(
                        f"{where}: duplicate {'enabled' if cond else 'disabled'} record for "
                        f"model={model!r} benchmark={bench!r} task_id={tid!r} epoch={epoch} "
                        f"(first at {prev})"
                    )
                seen[slot] |= bit | (4 if is_error else 0)
                first_src[cond][slot] = file_ix
                first_line[cond][slot] = lineno
                if cond == ENABLED:
                    y_pos[slot] = correct
                    invoked[slot] = inv
                    for rank, (sid, score) in enumerate(got, 1):
                        rows.append(slot)
                        cols.append(skills[sid])
                        rk.append(rank)
                        sc.append(score)
                    answer = rec.get("answer")
                    if isinstance(answer, str) and answer:
                        adh[slot] = code.adhered(answer, (s for s, _ in got)) if got else 0
                else:
                    y_neg[slot] = correct
        except OSError as exc:
            raise RunLogError(f"{name}: cannot read: {exc.strerror or exc}") from None
        finally:
            if fh is not sys.stdin.buffer:
                fh.close()

    seen_arr = np.frombuffer(bytes(seen), dtype=np.uint8)
    both = (seen_arr & 3) == 3
    errored = (seen_arr & 4) != 0
    keep = both & ~errored
    unpaired = np.flatnonzero(~both)
    examples = []
    if unpaired.size:
        inv_models, inv_benches, inv_tasks = models.vocab(), benches.vocab(), tasks.vocab()
        inv_keys = {v: k for k, v in slots.items()} if unpaired.size else {}
        for s in unpaired[:5]:
            m, b, t, e = inv_keys[int(s)]
            only = "enabled" if seen_arr[s] & 1 else "disabled"
            c = ENABLED if only == "enabled" else DISABLED
            examples.append(
                f"{names[first_src[c][s]]}:{first_line[c][s]}: {inv_models[m]}/{inv_benches[b]}/"
                f"{inv_tasks[t]} epoch {e} has only its {only} record"
            )
        if strict:
            raise UnpairedError(
                f"{examples[0]} ({unpaired.size} unpaired record(s); drop --strict to leave them out)"
            )

    n_slots = len(seen)
    keys = np.array(list(slots.keys()), dtype=np.int64).reshape(-1, 4)
    order = np.zeros(n_slots, dtype=np.int64)
    order[np.fromiter(slots.values(), dtype=np.int64, count=len(slots))] = np.arange(len(slots))
    keys = keys[order]  # row s = key of slot s
    idx = np.flatnonzero(keep)
    shape = (n_slots, len(skills))
    r = np.frombuffer(rows, dtype=np.int32) if rows else np.zeros(0, np.int32)
    c = np.frombuffer(cols, dtype=np.int32) if cols else np.zeros(0, np.int32)
    ranks = sp.csr_matrix((np.frombuffer(rk, dtype=np.float32) if rk else np.zeros(0, np.float32), (r, c)), shape=shape)
    scores = sp.csr_matrix((np.frombuffer(sc, dtype=np.float32) if sc else np.zeros(0, np.float32), (r, c)), shape=shape)
    ranks.sort_indices()
    scores.sort_indices()
    return PairedRuns(
        models=models.vocab(), benchmarks=benches.vocab(), tasks=tasks.vocab(), skills=skills.vocab(),
        model=keys[idx, 0].astype(np.int32), benchmark=keys[idx, 1].astype(np.int32),
        task=keys[idx, 2].astype(np.int32), epoch=keys[idx, 3].astype(np.int32),
        y_pos=np.frombuffer(bytes(y_pos), dtype=np.uint8)[idx].astype(bool),
        y_neg=np.frombuffer(bytes(y_neg), dtype=np.uint8)[idx].astype(bool),
        invoked=np.frombuffer(bytes(invoked), dtype=np.uint8)[idx].astype(bool),
        adhered=np.frombuffer(adh, dtype=np.int8)[idx].copy() if len(adh) else np.zeros(0, np.int8),
        ranks=ranks[idx], scores=scores[idx],
        n_unpaired=int(unpaired.size), unpaired_examples=tuple(examples),
        n_error_pairs=int((both & errored).sum()), sources=tuple(names),
    )


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
