"""What every importer shares: pairing, the import report, outcome parsing, retrieval sidecars, output.

An importer reads the other tool's files, turns each run into a DESIGN §3.1 record and hands it to a
`Pairer` with its pairing key `(model, benchmark, task_id, epoch)` and the place it came from. The
pairer keeps only keys seen in both conditions and says, for every run it could not pair, why.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .._io import atomic_write_bytes
from ..errors import ImportFormatError, InputError, OutputError

ENABLED, DISABLED = "enabled", "disabled"
Key = tuple[str, str, str, int]  # (model, benchmark, task_id, epoch)

# Inspect AI's own letter grades (inspect_ai.scorer: CORRECT, INCORRECT, PARTIAL, NOANSWER).
_GRADES = {
    "c": 1.0, "i": 0.0, "p": 0.5, "n": 0.0,
    "correct": 1.0, "incorrect": 0.0, "partial": 0.5, "noanswer": 0.0,
    "pass": 1.0, "passed": 1.0, "fail": 0.0, "failed": 0.0,
    "true": 1.0, "false": 0.0, "yes": 1.0, "no": 0.0,
}


@dataclass(frozen=True)
class Unpaired:
    """One run left out of the output: where it came from, its key, its condition and why."""

    where: str
    key: str
    condition: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.key} ({self.condition}): {self.reason}"


@dataclass(frozen=True)
class ImportReport:
    """What an import produced: records written, pairs, and every run it could not pair and why."""

    format: str
    records: int
    pairs: int
    enabled_read: int
    disabled_read: int
    unpaired: tuple[Unpaired, ...] = ()
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        """One line: records, pairs and how many runs were left out."""
        text = (
            f"{self.format}: {self.pairs} pair(s), {self.records} record(s) from "
            f"{self.enabled_read} enabled and {self.disabled_read} disabled run(s)"
        )
        if self.unpaired:
            text += f"; {len(self.unpaired)} run(s) left out"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": "skillaudit.import/v1",
            "format": self.format,
            "records": self.records,
            "pairs": self.pairs,
            "enabled_read": self.enabled_read,
            "disabled_read": self.disabled_read,
            "unpaired": [
                {"where": u.where, "key": u.key, "condition": u.condition, "reason": u.reason}
                for u in self.unpaired
            ],
            "notes": list(self.notes),
            "sources": list(self.sources),
        }


def key_label(key: Key) -> str:
    model, bench, tid, epoch = key
    return f"{model}/{bench}/{tid} epoch {epoch}"


@dataclass
class _Entry:
    record: dict[str, Any]
    where: str
    fingerprint: str | None


class Pairer:
    """Collects enabled and disabled records by key and pairs them.

    `add` raises ImportFormatError when one condition has the same key twice (naming both places);
    `skip` records a run that could not be converted (no score, errored sample, ...).
    """

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.sides: dict[str, dict[Key, _Entry]] = {ENABLED: {}, DISABLED: {}}
        self.order: dict[Key, None] = {}
        self.skipped: list[Unpaired] = []
        self.read = {ENABLED: 0, DISABLED: 0}
        self.notes: list[str] = []
        self.sources: list[str] = []

    def source(self, path: str) -> None:
        if path not in self.sources:
            self.sources.append(path)

    def add(self, condition: str, key: Key, record: dict[str, Any], where: str,
            fingerprint: str | None = None) -> None:
        self.read[condition] += 1
        side = self.sides[condition]
        prev = side.get(key)
        if prev is not None:
            raise ImportFormatError(
                f"{where}: second {condition} run of {key_label(key)} (first at {prev.where}); "
                "each condition may hold a task and epoch once"
            )
        model, bench, tid, epoch = key
        rec = {"task_id": tid, "condition": condition, "correct": bool(record.pop("correct")),
               "model": model, "benchmark": bench, "epoch": epoch}
        rec.update(record)
        side[key] = _Entry(rec, where, fingerprint)
        self.order.setdefault(key, None)

    def skip(self, condition: str, key: Key | str, where: str, reason: str) -> None:
        if condition in self.read:  # a run of neither condition is reported but not counted
            self.read[condition] += 1
        label = key if isinstance(key, str) else key_label(key)
        self.skipped.append(Unpaired(where, label, condition, reason))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def finish(self) -> tuple[list[dict[str, Any]], ImportReport]:
        en, dis = self.sides[ENABLED], self.sides[DISABLED]
        records: list[dict[str, Any]] = []
        unpaired: list[Unpaired] = list(self.skipped)
        pairs = 0
        for key in self.order:
            e, d = en.get(key), dis.get(key)
            if e is not None and d is not None:
                if e.fingerprint and d.fingerprint and e.fingerprint != d.fingerprint:
                    reason = "its input differs between the enabled and disabled runs (not the same task)"
                    unpaired.append(Unpaired(e.where, key_label(key), ENABLED, reason))
                    unpaired.append(Unpaired(d.where, key_label(key), DISABLED, reason))
                    continue
                records.append(e.record)
                records.append(d.record)
                pairs += 1
            elif e is not None:
                unpaired.append(Unpaired(e.where, key_label(key), ENABLED, "no disabled run with this key"))
            elif d is not None:
                unpaired.append(Unpaired(d.where, key_label(key), DISABLED, "no enabled run with this key"))
        if pairs == 0 and en and dis:
            groups = {c: sorted({f"{k[0]}/{k[1]}" for k in side}) for c, side in self.sides.items()}
            if not set(groups[ENABLED]) & set(groups[DISABLED]):
                self.note(
                    f"the enabled runs are model/benchmark {', '.join(groups[ENABLED][:3])} and the "
                    f"disabled runs {', '.join(groups[DISABLED][:3])}: nothing can pair; name both "
                    "the same with --model / --benchmark"
                )
        report = ImportReport(
            format=self.fmt, records=len(records), pairs=pairs,
            enabled_read=self.read[ENABLED], disabled_read=self.read[DISABLED],
            unpaired=tuple(unpaired), notes=tuple(self.notes), sources=tuple(self.sources),
        )
        return records, report


# ---------------------------------------------------------------- outcomes
def to_correct(value: Any, threshold: float) -> bool:
    """A score as pass/fail: booleans as they are, numbers (and Inspect's C/I/P/N) >= threshold.

    Raises ValueError for anything else (lists, dicts, unknown words).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("the score is NaN")
        return float(value) >= threshold
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _GRADES:
            return _GRADES[word] >= threshold
        try:
            return to_correct(float(word), threshold)
        except ValueError:
            pass
        raise ValueError(f"cannot read score {value!r} as pass/fail")
    raise ValueError(f"cannot read a {type(value).__name__} score as pass/fail")


# ---------------------------------------------------------------- retrieved skills
_ID_KEYS = ("id", "skill_id", "name", "skill")
_LIST_KEYS = ("skills", "results", "retrieved", "items", "documents")


def skills_from_json(obj: Any) -> list[dict[str, Any]] | None:
    """Skills (`{"id", "score"?}` in rank order) from a parsed tool result, or None if unrecognised.

    Accepts a list of ids, a list of objects with `id`/`skill_id`/`name`/`skill` (and `score`), or an
    object holding such a list under `skills`/`results`/`retrieved`/`items`/`documents`.
    """
    if isinstance(obj, dict):
        for k in _LIST_KEYS:
            if isinstance(obj.get(k), list):
                return skills_from_json(obj[k])
        one = _one_skill(obj)
        return [one] if one is not None else None
    if isinstance(obj, list):
        out = []
        for item in obj:
            if isinstance(item, str) and item:
                out.append({"id": item})
            elif isinstance(item, dict) and (one := _one_skill(item)) is not None:
                out.append(one)
            else:
                return None
        return out
    return None


def _one_skill(obj: dict[str, Any]) -> dict[str, Any] | None:
    for k in _ID_KEYS:
        v = obj.get(k)
        if isinstance(v, str) and v:
            out: dict[str, Any] = {"id": v}
            score = obj.get("score")
            if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
                out["score"] = float(score)
            return out
    return None


class NameMatcher:
    """Finds a library's skill ids in free text, in order of first appearance."""

    def __init__(self, ids: Iterable[str]) -> None:
        ids = sorted(set(ids), key=len, reverse=True)
        self.pattern = (
            re.compile(r"(?<![\w-])(" + "|".join(re.escape(i) for i in ids) + r")(?![\w-])")
            if ids else None
        )

    def find(self, text: str) -> list[dict[str, Any]]:
        if self.pattern is None:
            return []
        seen: dict[str, None] = {}
        for m in self.pattern.finditer(text):
            seen.setdefault(m.group(1), None)
        return [{"id": s} for s in seen]


def parse_skill_list(value: Any, where: str) -> list[dict[str, Any]]:
    """A list of skill ids or `{"id", "score"}` objects, as given in a sidecar or results file."""
    skills = skills_from_json(value) if isinstance(value, list) else None
    if skills is None:
        raise ImportFormatError(
            f"{where}: skills must be a list of skill ids or of objects with an \"id\""
        )
    return skills


def parse_retrievals(value: Any, where: str) -> list[dict[str, Any]]:
    """A §3.1 `retrievals` list (calls with `query`, `skills`, `error`), checked and normalised."""
    if not isinstance(value, list):
        raise ImportFormatError(f"{where}: \"retrievals\" must be a list of calls")
    calls = []
    for call in value:
        if not isinstance(call, dict):
            raise ImportFormatError(f"{where}: each retrieval call must be an object")
        calls.append({
            "query": call.get("query"),
            "skills": parse_skill_list(call.get("skills") or [], where),
            "error": call.get("error"),
        })
    return calls


def load_retrievals(path: str) -> dict[tuple[str, int | None], list[dict[str, Any]]]:
    """Read a retrieval sidecar (JSON Lines) into `(task_id, epoch or None) -> retrieval calls`.

    Each line is `{"task_id": ..., "epoch"?: n, ...}` with either `"retrievals": [calls]` (§3.1) or
    one call given as `"skills"`/`"retrieved": [ids or {"id", "score"}]` and an optional `"query"`.
    A line without `epoch` applies to every epoch of the task; several lines for one task append
    calls in file order.
    """
    out: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
    for lineno, rec in iter_jsonl(path, "a retrieval sidecar (JSON Lines of task_id -> skills)"):
        where = f"{path}:{lineno}"
        tid = rec.get("task_id", rec.get("doc_id"))
        if isinstance(tid, bool) or not isinstance(tid, (str, int)) or tid == "":
            raise ImportFormatError(f"{where}: a retrieval line needs a \"task_id\" (string or integer)")
        epoch = rec.get("epoch")
        if epoch is not None and (type(epoch) is not int or epoch < 1):
            raise ImportFormatError(f"{where}: \"epoch\" must be an integer >= 1")
        if "retrievals" in rec:
            calls = parse_retrievals(rec["retrievals"], where)
        else:
            skills = rec.get("skills", rec.get("retrieved"))
            if skills is None:
                raise ImportFormatError(
                    f"{where}: a retrieval line needs \"retrievals\", \"skills\" or \"retrieved\""
                )
            calls = [{"query": rec.get("query"), "skills": parse_skill_list(skills, where),
                      "error": rec.get("error")}]
        out.setdefault((str(tid), epoch), []).extend(calls)
    return out


def join_retrievals(pairer: Pairer, table: dict[tuple[str, int | None], list[dict[str, Any]]] | None,
                    sidecar: str | None) -> None:
    """Attach sidecar retrievals to the enabled records already added to `pairer`."""
    enabled = pairer.sides[ENABLED]
    if table is None:
        if enabled:
            pairer.note(
                "no --retrievals sidecar: no enabled run has retrieved skills, so no pair is in "
                "S_call (RAE and per-skill figures will be empty)"
            )
        return
    used: set[tuple[str, int | None]] = set()
    missing = 0
    for key, entry in enabled.items():
        tid, epoch = key[2], key[3]
        calls = table.get((tid, epoch))
        k: tuple[str, int | None] = (tid, epoch)
        if calls is None:
            k = (tid, None)
            calls = table.get(k)
        if calls is None:
            missing += 1
            entry.record["retrievals"] = []
            continue
        used.add(k)
        entry.record["retrievals"] = [dict(c) for c in calls]
    if missing:
        pairer.note(f"{missing} enabled run(s) have no line in {sidecar}: taken as not calling the tool")
    unused = [k for k in table if k not in used]
    if unused:
        tid, epoch = unused[0]
        pairer.note(
            f"{len(unused)} task(s) in {sidecar} match no enabled run (first: task_id {tid!r}"
            + (f" epoch {epoch}" if epoch else "") + ")"
        )


# ---------------------------------------------------------------- reading and writing files
def read_bytes(path: str) -> bytes:
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a folder, not a file")
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def load_json(path: str, expected: str) -> Any:
    """Parse a whole JSON file; a parse error names the file, line and what was expected."""
    data = read_bytes(path)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ImportFormatError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); expected {expected}"
        ) from None


def iter_jsonl(path: str, expected: str) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; errors name file:line and what was expected."""
    data = read_bytes(path)
    if b"\0" in data[:4096]:
        raise ImportFormatError(f"{path}: binary data; expected {expected}")
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ImportFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg}); expected {expected}") from None
        if not isinstance(rec, dict):
            raise ImportFormatError(f"{path}:{lineno}: a line must be a JSON object; expected {expected}")
        yield lineno, rec


def dumps_records(records: Iterable[dict[str, Any]]) -> bytes:
    """Records as JSON Lines bytes."""
    opt = orjson.OPT_APPEND_NEWLINE
    return b"".join(orjson.dumps(r, option=opt, default=str) for r in records)


def check_output(output: str, inputs: Sequence[str]) -> None:
    """Refuse to write the output over one of the inputs (inputs are never modified)."""
    if output == "-":
        return
    out = Path(output)
    if out.is_dir():
        raise OutputError(f"{output}: is a folder; give a file name for the run log")
    out_real = os.path.realpath(output)
    for p in inputs:
        if p and os.path.realpath(p) == out_real:
            raise OutputError(f"{output}: is one of the input files; write the run log elsewhere")


def write_records(records: Iterable[dict[str, Any]], path: str) -> None:
    """Write records as JSON Lines to `path` atomically (temp file + rename)."""
    atomic_write_bytes(path, dumps_records(records))
