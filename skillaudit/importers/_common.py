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

from skillaudit.errors import ImportFormatError, InputError, OutputError
from skillaudit.util.files import atomic_write_bytes

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
    paired_on: str = ""  # e.g. "(model, sample id, epoch)"
    naming: str = ""  # how the benchmark was named, e.g. "benchmark 'arith' (the dataset name)"
    arms: tuple[tuple[str, int], ...] = ()  # (arm, records written)

    def summary(self) -> str:
        """One line: records, pairs, what was paired on, and how many runs were left out."""
        text = (
            f"{self.format}: {self.pairs} pair(s), {self.records} record(s) from "
            f"{self.enabled_read} enabled and {self.disabled_read} disabled run(s)"
        )
        if self.arms:
            text += "; arm records " + ", ".join(f"{a} {n}" for a, n in self.arms)
        if self.paired_on:
            text += f"; paired on {self.paired_on}"
        if self.naming:
            text += f"; {self.naming}"
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
            "paired_on": self.paired_on or None,
            "benchmark_naming": self.naming or None,
            "arms": {a: n for a, n in self.arms},
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
        self.paired_on = ""
        self.naming = ""
        # arm records (DESIGN §3.1b): (key, arm, mask seed) -> entry, joined to main pairs at the end
        self.arm_entries: dict[tuple[Key, str, int], _Entry] = {}
        #: also return enabled records without a disabled one (`triggers --engine harbor` runs no disabled arm)
        self.keep_unpaired_enabled = False

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

    def add_arm(self, arm: str, condition: str, key: Key, record: dict[str, Any], where: str) -> None:
        """An arm record of `key` (same key as the main sides); written after its pair, if it pairs."""
        meta = record.get("meta") or {}
        seed = meta.get("mask_seed", -1) if arm == "mask" else -1
        seed = seed if type(seed) is int else -1
        prev = self.arm_entries.get((key, arm, seed))
        if prev is not None:
            raise ImportFormatError(
                f"{where}: second {arm} arm run of {key_label(key)} (first at {prev.where}); "
                "each arm may hold a task and epoch once"
            )
        model, bench, tid, epoch = key
        rec = {"task_id": tid, "condition": condition, "arm": arm, "correct": bool(record.pop("correct")),
               "model": model, "benchmark": bench, "epoch": epoch}
        rec.update(record)
        self.arm_entries[(key, arm, seed)] = _Entry(rec, where, None)

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
        arms_of: dict[Key, list[_Entry]] = {}
        for (key, _arm, _seed), entry in self.arm_entries.items():
            arms_of.setdefault(key, []).append(entry)
        arm_counts: dict[str, int] = {}
        paired: set[Key] = set()
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
                paired.add(key)
                for a in arms_of.get(key, ()):
                    records.append(a.record)
                    arm_counts[a.record["arm"]] = arm_counts.get(a.record["arm"], 0) + 1
                pairs += 1
            elif e is not None:
                unpaired.append(Unpaired(e.where, key_label(key), ENABLED, "no disabled run with this key"))
                if self.keep_unpaired_enabled:
                    records.append(e.record)
            elif d is not None:
                unpaired.append(Unpaired(d.where, key_label(key), DISABLED, "no enabled run with this key"))
        for key, entries in arms_of.items():
            if key not in paired:
                for a in entries:
                    unpaired.append(Unpaired(a.where, key_label(key), f"arm {a.record['arm']}",
                                             "no main pair with this key"))
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
            paired_on=self.paired_on, naming=self.naming, arms=tuple(arm_counts.items()),
        )
        return records, report


# ---------------------------------------------------------------- arms (DESIGN §3.1b)
ENABLED_ARMS = ("random", "filler", "empty", "corrupted", "mask", "pruned")
DISABLED_ARMS = ("replicate",)


def check_arm(name: str) -> str:
    """An arm name as given to `--arm NAME=LOG`; InputError for an unknown one."""
    if name not in ENABLED_ARMS + DISABLED_ARMS:
        raise InputError(
            f"unknown arm {name!r} (expected one of {', '.join(ENABLED_ARMS + DISABLED_ARMS)})"
        )
    return name


def arm_condition(name: str) -> str:
    """The side an arm varies: `replicate` repeats the disabled run, the others the enabled one."""
    return DISABLED if name in DISABLED_ARMS else ENABLED


# ---------------------------------------------------------------- naming the benchmark of explicit sides
@dataclass(frozen=True)
class SideSource:
    """One input log of an explicitly given side: its path, side and the framework's names for it.

    `side` is ENABLED, DISABLED or "arm:NAME"; `task` the task name; `dataset` the dataset name
    (None when the framework does not record one).
    """

    path: str
    side: str
    task: str
    dataset: str | None = None


_TOKEN = re.compile(r"[^_\-./: ]+")


def _stem(a: str, b: str) -> str:
    """The common leading (else trailing) words of two task names: skills_on / skills_off -> skills."""
    if a == b:
        return a
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    n = 0
    while n < min(len(ta), len(tb)) and ta[n] == tb[n]:
        n += 1
    if n:
        end = [m.end() for m in _TOKEN.finditer(a)][n - 1]
        return a[:end]
    n = 0
    while n < min(len(ta), len(tb)) and ta[-1 - n] == tb[-1 - n]:
        n += 1
    if n:
        start = [m.start() for m in _TOKEN.finditer(a)][len(ta) - n]
        return a[start:]
    return ""


def _quoted(names: Sequence[str]) -> str:
    names = list(dict.fromkeys(names))
    shown = ", ".join(repr(n) for n in names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return shown


def name_benchmarks(sources: Sequence[SideSource], override: str | None = None
                    ) -> tuple[dict[str, str], str]:
    """The benchmark of every source (path -> name) and a phrase saying how it was named.

    The sides are given explicitly, so the framework's task name (which usually differs between
    the runs with and without skills: `skills_on` / `skills_off`) is not part of the pairing key.
    In order: `--benchmark`; the dataset name, when every log records one and the two sides share
    one; the task name when both sides ran the same task; the common stem of the two sides' task
    names (`skills_on` / `skills_off` -> `skills`); with one task per side and no stem, the enabled
    task's name. With several tasks per side, each is matched to the other side's task with the
    longest common stem; a task no other matches keeps its own name (and will not pair).
    """
    if override is not None:
        return {s.path: override for s in sources}, f"benchmark {override!r} (--benchmark)"
    mains = [s for s in sources if s.side in (ENABLED, DISABLED)]
    en = [s for s in mains if s.side == ENABLED]
    dis = [s for s in mains if s.side == DISABLED]
    if sources and all(s.dataset for s in sources):
        shared = {s.dataset for s in en} & {s.dataset for s in dis}
        if shared or not (en and dis):
            out = {s.path: str(s.dataset) for s in sources}
            names = [out[s.path] for s in sources]
            word = "benchmark" if len(set(names)) == 1 else "benchmarks"
            return out, f"{word} {_quoted(names)} (the dataset name{'s' if word[-1] == 's' else ''})"
    en_tasks = list(dict.fromkeys(s.task for s in en))
    other_tasks = list(dict.fromkeys(s.task for s in sources if s.side != ENABLED))
    bench_of: dict[str, str] = {}  # task name -> benchmark
    how: list[str] = []
    if len(en_tasks) <= 1 and len(set(s.task for s in dis)) <= 1:
        t_en = en_tasks[0] if en_tasks else (dis[0].task if dis else "default")
        t_dis = dis[0].task if dis else t_en
        stem = _stem(t_en, t_dis)
        base = stem or t_en
        for t in [t_en, *other_tasks]:
            bench_of[t] = base  # one benchmark: arm logs join it whatever their task is called
        if t_dis == t_en:
            how.append(f"benchmark {t_en!r} (the task name)")
        elif stem:
            how.append(f"benchmark {base!r} (the common stem of the task names {t_en!r} and {t_dis!r})")
        else:
            how.append(f"benchmark {t_en!r} (the enabled task's name; the task names {t_en!r} and "
                       f"{t_dis!r} share no stem)")
    else:
        dis_tasks = list(dict.fromkeys(s.task for s in dis))
        arm_tasks = [t for t in other_tasks if t not in dis_tasks]

        def words(x: str, y: str) -> int:
            return len(_TOKEN.findall(_stem(x, y)))

        cands = sorted(((-words(x, y), i, j) for i, x in enumerate(en_tasks)
                        for j, y in enumerate(dis_tasks) if _stem(x, y)))
        partner: dict[str, str] = {}
        for _, i, j in cands:
            x, y = en_tasks[i], dis_tasks[j]
            if x not in partner and y not in partner.values():
                partner[x] = y
                bench_of[x] = bench_of[y] = _stem(x, y)
        for t in arm_tasks:
            best = max(en_tasks, key=lambda x: words(x, t))
            if words(best, t):
                bench_of[t] = bench_of.get(best, best)
        for t in [*en_tasks, *other_tasks]:
            bench_of.setdefault(t, t)
        names = [bench_of[t] for t in en_tasks]
        how.append(f"benchmarks {_quoted(names)} (the common stems of the two sides' task names)")
    return {s.path: bench_of[s.task] for s in sources}, how[0]


# ---------------------------------------------------------------- logged quantities
def count_of(v: Any) -> int | None:
    """A logged count (tokens, turns): a non-negative integer (not a boolean), else None (not logged)."""
    return v if type(v) is int and v >= 0 else None


def amount_of(v: Any) -> float | None:
    """A logged amount (cost, seconds): a finite non-negative number (not a boolean), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


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

    Accepts a list of ids, a list of objects with `id`/`skill_id`/`name`/`skill` (and `score`, and
    `hash`: kept for provenance), or an object holding such a list under
    `skills`/`results`/`retrieved`/`items`/`documents`.
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
            h = obj.get("hash")  # the content hash of the text the run saw (provenance)
            if isinstance(h, str) and h:
                out["hash"] = h
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
    """The bytes of an input file or stream, bounded (see skillaudit.util.documents: size cap,
    regular file or stream, a read timeout for a FIFO); a problem is one InputError line."""
    from skillaudit.util.documents import read_document_bytes

    return read_document_bytes(path)


def load_json(path: str, expected: str) -> Any:
    """Parse a whole JSON file; a parse error names the file, line and what was expected; a
    document nested too deeply or holding a non-finite number names the JSON path."""
    from skillaudit.util.documents import parse_document

    return parse_document(read_bytes(path), path, expected=expected, err=ImportFormatError)


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
