"""Read the inputs once: every command's paired runs, arm records, skill hashes and cost fields.

`load_inputs` reads each run log exactly once (one open, one forward read: standard input and
FIFOs work too). While the run-log reader (`skillaudit.runs`) turns each block of whole lines into
paired-run columns, the same block in memory also gives

- the lines holding an arm record (`"arm"`), checked and joined to pairs on demand (`Inputs.arms`);
- the skills' content hashes logged by enabled records (`"hash"`), for provenance;
- with `cost=True`, the fields the cost figures read of every main record (`skillaudit.analysis.cost`);
- with `digests=True`, the sha256 of each regular file's bytes (the audit's input fingerprint);
- the skills each enabled record says were offered (`"offered"`, importers of agent logs) and
  whether its trajectory was cut (`meta.trajectory_cut`), for the headline's skill reach.

The result is one `Inputs` object that commands hand down: the CLI calls `load_inputs` and prints
its warnings, nothing else reads a run log.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO, Any

import orjson

from skillaudit.runs import PairedRuns, _load
from skillaudit.runs.arms import (
    ARM_NEEDLE,
    ArmLines,
    ArmRecords,
    join_arms,
    parse_arm_lines,
)
from skillaudit.runs.costs import CostTable
from skillaudit.runs.provenance import (
    DIGESTS_NEEDLE,
    add_digests,
    add_hashes,
    edited_by_digest,
    edited_skills,
)
from skillaudit.runs.reader import _HASH_NEEDLE, _scan
from skillaudit.runs.records import CONDITION_ALIASES, DISABLED, ENABLED, _CodeLines

try:
    import msgspec
except ImportError:  # pragma: no cover
    msgspec = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class Inputs:
    """The run logs read once: paired runs plus what else the commands need of the same lines.

    `runs`: the paired runs (`skillaudit.runs.PairedRuns`); `library`: the skill library given
    (or None); `seen_hashes`: {skill id: content hashes the enabled runs logged}; `digests`:
    {path: sha256 of its bytes} for the regular files read whole (with digests=True);
    `cost_table`: the cost fields of every main record, in reading order (with cost=True).
    """

    paths: tuple[str, ...]
    runs: PairedRuns
    library: Any = None
    seen_hashes: dict[str, set[str]] = field(default_factory=dict)
    seen_digests: dict[str, set[str]] = field(default_factory=dict)  # Harbor's, from meta.skill_digests
    digests: dict[str, str] = field(default_factory=dict)
    cost_table: CostTable | None = None
    arm_lines: tuple[tuple[str, bytes], ...] | None = ()  # (file:line, line); None: not collected
    # (model, benchmark, task_id, epoch) of an enabled main record -> (skills offered, log cut?)
    offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]] = field(default_factory=dict)
    # (model, benchmark, task_id, epoch) of an enabled main record -> the skills its task file expected
    # to fire (`meta.expected_skills`, kept with `offered`)
    expected: dict[tuple[str, str, str, int], tuple[str, ...]] = field(default_factory=dict)
    # keys of `offered` whose list is only what the run used (the importer saw no offered list)
    offered_unknown: frozenset[tuple[str, str, str, int]] = frozenset()
    # arm integrity (skillaudit.analysis.integrity): disabled main records that used skills (leaks) and enabled
    # ones offered nothing (broken arms), as (kind, key, skills, trial name or file:line)
    arm_issues: tuple[tuple[str, tuple[str, str, str, int], tuple[str, ...], str], ...] = ()

    @cached_property
    def checked_arms(self) -> ArmLines:
        """The arm records, checked (RunLogError naming file:line on the first bad one)."""
        if self.arm_lines is None:
            raise ValueError("the arm records were not kept: load_inputs(..., arms=True)")
        return parse_arm_lines(self.arm_lines)

    def arms(self, runs: PairedRuns | None = None) -> ArmRecords | None:
        """The arm records joined to `runs` (default: all the pairs); None when the logs hold none."""
        runs = self.runs if runs is None else runs
        if runs.n_arm_records == 0:
            return None
        return join_arms(self.checked_arms, runs)

    @cached_property
    def edited(self) -> dict[str, bool]:
        """{skill id: edited since the runs?} for the library skills the runs logged a hash for."""
        return {**edited_by_digest(self.seen_digests, self.library), **edited_skills(self.seen_hashes, self.library)}


def load_inputs(
    paths: Iterable[str],
    *,
    library: Any = None,
    strict: bool = False,
    jobs: int = 1,
    adherence: bool = True,
    arms: bool = True,
    provenance: bool = True,
    cost: bool = False,
    digests: bool = False,
    integrity: bool = False,
    offered: bool = False,
) -> Inputs:
    """Read the run logs once; RunLogError (naming file:line) on the first bad record.

    `library`, `strict`, `jobs` and `adherence` are as in `skillaudit.runs.load_runs`. `arms`
    keeps the arm records' lines, `provenance` the skill hashes (both cheap: only lines holding
    `"arm"` / `"hash"` are looked at), `cost` the cost fields of every record (a typed decode of
    each line), `digests` hashes each regular file's bytes as they are read. With --jobs, a plain
    file cut into byte ranges gets no digest (each range is read by its own worker). `integrity`
    looks for leaks (runs without skills whose `retrievals` name one: `skillaudit.analysis.integrity`), two
    regex scans of each block: only the audit and `check` ask for it; `offered` (implied by
    `integrity`) keeps what each enabled run was offered (`Inputs.offered`: reach, prune's
    offered skills, "use not logged").
    """
    paths = [str(p) for p in paths]
    extra = _Extra(arms=arms, hashes=provenance, cost=cost, digests=digests, integrity=integrity, offered=offered)
    was_enabled = gc.isenabled()
    gc.disable()  # as load_runs: millions of small containers and no cycles
    try:
        runs, parts = _load(paths, strict, _CodeLines(library), jobs, adherence, extra)
    finally:
        if was_enabled:
            gc.enable()
    seen: dict[str, set[str]] = {}
    table = parts[0].cost if cost and parts else (CostTable() if cost else None)
    for p in parts[1:] if table is not None else ():
        table.extend(p.cost)
    if table is not None:
        table.freeze()
    offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]] = {}
    issues: list[tuple[str, tuple[str, str, str, int], tuple[str, ...], str]] = []
    seen_digests: dict[str, set[str]] = {}
    unknown: set[tuple[str, str, str, int]] = set()
    expected: dict[tuple[str, str, str, int], tuple[str, ...]] = {}
    for p in parts:
        for sid, hashes in p.seen.items():
            seen.setdefault(sid, set()).update(hashes)
        for sid, ds in p.digests_seen.items():
            seen_digests.setdefault(sid, set()).update(ds)
        offered.update(p.offered)
        expected.update(p.expected)
        unknown.update(p.offered_unknown)
        issues.extend(p.issues)

    def name(ix: int) -> str:
        return "<stdin>" if paths[ix] == "-" else paths[ix]

    return Inputs(
        paths=tuple(paths), runs=runs, library=library, seen_hashes=seen, seen_digests=seen_digests,
        digests={paths[ix]: d for p in parts for ix, d in p.digests.items()},
        cost_table=table, offered=offered, offered_unknown=frozenset(unknown), expected=expected,
        arm_issues=tuple(sorted({(k, key, sk, _where(label, name)) for k, key, sk, label in issues})),
        arm_lines=tuple((f"{name(ix)}:{ln}", line) for p in parts for ix, ln, line in p.arm_lines)
        if arms else None,
    )


# ---------------------------------------------------------------- what is kept of each block
def _lines_with(buf: bytes, n: int, needle: bytes, lineno: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each line of buf[:n] holding `needle`; buf[:n] starts line `lineno`."""
    at = buf.find(needle, 0, n)
    pos = 0
    while at >= 0:
        start = buf.rfind(b"\n", 0, at) + 1
        end = buf.find(b"\n", at, n)
        end = n if end < 0 else end + 1
        lineno += buf.count(b"\n", pos, start)
        pos = start
        yield lineno, buf[start:end]
        at = buf.find(needle, end, n) if end < n else -1


class _Hashing:
    """A binary file read through sha256 (before any gzip decompression)."""

    mode = "rb"

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.name = getattr(fh, "name", "")
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.sha.update(data)
        return data

    def close(self) -> None:
        self.fh.close()

    @property
    def closed(self) -> bool:
        return self.fh.closed


if msgspec is not None:

    class _Ref(msgspec.Struct, gc=False):
        id: Any = None

    class _Call(msgspec.Struct, gc=False):
        skills: list[str | _Ref] | None = None
        error: Any = None

    class _Meta(msgspec.Struct, gc=False):
        usage: Any = None
        latency_s: Any = None
        timeout: Any = None
        cost_usd: Any = None
        turns: Any = None

    class _CostRec(msgspec.Struct, gc=False):  # the fields the cost figures read, as they are logged
        model: Any = None
        benchmark: Any = None
        task_id: Any = None
        epoch: Any = 1
        condition: Any = None
        correct: Any = None
        score: Any = None  # the graded outcome (a verifier reward), where there is one
        arm: Any = None
        error: Any = None
        retrievals: list[_Call] | None = None
        meta: _Meta | None = None
        shown: Any = msgspec.field(default=None, name=" shown (not a log field)")  # filled in below; no log has this key

    _decode_costs = msgspec.json.Decoder(list[_CostRec]).decode
    _CostError: type[Exception] = msgspec.DecodeError
else:  # pragma: no cover
    _decode_costs = None
    _CostError = ValueError


def _add_costs(data: bytes, table: CostTable) -> None:
    """The cost fields of the lines of `data` (whole lines the run-log reader accepted).

    The block is decoded at once into typed records holding only those fields; a block where one
    does not fit that shape (a `meta` that is not an object, a retrieved skill that is a number,
    a blank line) is read line by line as dicts, as `skill_costs` reads them. Before both, the C
    scanner reads the plain shape into columns (no object per record), where it is built."""
    if _scan is not None:
        cols = _scan.costs(data)
        if cols is not None:
            table.add_columns(cols)
            return
    if _decode_costs is not None:
        try:
            recs = _decode_costs(b"[" + data.rstrip(b"\r\n").replace(b"\n", b",") + b"]")
        except (_CostError, RecursionError):
            pass
        else:
            for r in recs:
                if r.retrievals and r.arm is None and r.condition == "enabled":
                    shown: list[str] = []
                    for call in r.retrievals:
                        if call.error:
                            continue
                        for h in call.skills or ():
                            sid = h if h.__class__ is str else h.id
                            if isinstance(sid, str) and sid not in shown:
                                shown.append(sid)
                    r.shown = shown
                else:
                    r.shown = None
            table.add_block(recs)
            return
    for line in data.split(b"\n"):
        if line.strip():
            rec = orjson.loads(line)
            if isinstance(rec, dict):
                table.add_record(rec)


_OFFERED_NEEDLE = b'"offered"'
# A disabled record that names a skill in its retrievals (a leak), found by one C-speed scan of the
# block (either key order): every line holds "retrievals" in harness logs, so a per-line needle
# search cost as much as reading the log
_LEAK_PATTERNS = (  # condition before skills, and skills before condition; each starts with a literal
    re.compile(rb'"condition":\s*"(?:disabled|off|skills_off)"[^\n]*"skills":\s*\[\s*[^\]\s]'),
    re.compile(rb'"skills":\s*\[\s*[^\]\s][^\n]*"condition":\s*"(?:disabled|off|skills_off)"'),
)
Issue = tuple[str, tuple[str, str, str, int], tuple[str, ...], str]


def _leak_lines(buf: bytes, n: int, lineno: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each candidate leak in buf[:n] (buf[:n] starts line `lineno`): only
    matches come back to Python, so a log without leaks costs two C scans of the block."""
    starts = sorted({buf.rfind(b"\n", 0, m.start()) + 1 for pat in _LEAK_PATTERNS for m in pat.finditer(buf, 0, n)})
    pos = 0
    for start in starts:
        lineno += buf.count(b"\n", pos, start)
        pos = start
        end = buf.find(b"\n", start, n)
        yield lineno, buf[start:n if end < 0 else end]


def _main_record(line: bytes, condition: str | None) -> tuple[dict[str, Any], tuple[str, str, str, int],
                                                              dict[str, Any]] | None:
    """(record, key, meta) of a main (not arm) record of `condition` (its aliases included; None:
    either), else None. The run-log reader has already checked the line (a bad one stopped the read), so a shape
    it does not vouch for (`offered`, `meta` are informational there) is passed over, not an error."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(rec, dict) or rec.get("arm") is not None or \
            (condition is not None and CONDITION_ALIASES.get(rec.get("condition")) != condition):  # type: ignore[arg-type]
        return None
    epoch = rec.get("epoch", 1)
    key = (rec.get("model", "default"), rec.get("benchmark", "default"), rec.get("task_id"),
           epoch if type(epoch) is int else 1)
    if not all(isinstance(k, str) for k in key[:3]):
        return None
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    return rec, key, meta


def _where(label: str, name: Any) -> str:
    """A record's label: its trial name, or "\0<file index>:<line>" made "<file>:<line>"."""
    if not label.startswith("\0"):
        return label
    ix, _, ln = label[1:].partition(":")
    return f"{name(int(ix))}:{ln}"


def _label(meta: dict[str, Any], where: str) -> str:
    trial = meta.get("trial")
    return trial if isinstance(trial, str) and trial else where


def _add_offered(line: bytes, into: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]],
                 issues: list[Issue], where: str, unknown: set[tuple[str, str, str, int]] | None = None) -> None:
    """An enabled main record's `offered` skills and whether its log was cut; an explicitly empty
    list (the importer knew nothing was injected) is a broken arm. A record whose importer could not
    tell what was offered (`meta.offered_from: "unknown"`: its list is only what it used) goes into
    `unknown`: reach makes no "of n" of it."""
    got = _main_record(line, ENABLED)
    if got is None or not isinstance(got[0].get("offered"), list):
        return
    rec, key, meta = got
    offered = tuple(dict.fromkeys(x for x in rec["offered"] if isinstance(x, str) and x))
    into[key] = (offered, meta.get("trajectory_cut") is True)
    if unknown is not None and meta.get("offered_from") == "unknown":
        unknown.add(key)
    if not offered and rec.get("use_logged") is not False:
        issues.append(("broken", key, (), _label(meta, where)))


_EXPECTED_NEEDLE = b'"expected_skills"'


def _add_expected(line: bytes, into: dict[tuple[str, str, str, int], tuple[str, ...]]) -> None:
    """An enabled main record's `meta.expected_skills` (the skills its task should fire)."""
    got = _main_record(line, ENABLED)
    if got is None or not isinstance(got[2].get("expected_skills"), list):
        return
    into[got[1]] = tuple(dict.fromkeys(x for x in got[2]["expected_skills"] if isinstance(x, str) and x))


def _add_leak(line: bytes, issues: list[Issue], where: str) -> None:
    """A disabled main record whose log shows skill use (its `retrievals` name skills): a leak."""
    got = _main_record(line, DISABLED)
    if got is None or not isinstance(got[0].get("retrievals"), list):
        return
    rec, key, meta = got
    skills = tuple(dict.fromkeys(
        sid for call in rec["retrievals"] if isinstance(call, dict) and isinstance(call.get("skills"), list)
        for s in call["skills"] if isinstance(sid := (s.get("id") if isinstance(s, dict) else s), str) and sid))
    if skills:
        issues.append(("leak", key, skills, _label(meta, where)))


_ARM_ISSUE_NEEDLE = b'"arm_issue"'
#: `meta.arm_issue.kind` an importer writes -> the kind `skillaudit.analysis.integrity` gates
ARM_ISSUE_KINDS = ("present", "unchecked", "conflict")


def _add_arm_issue(line: bytes, issues: list[Issue], where: str) -> None:
    """A main record whose importer found its arm not what it claims beyond a leak (`meta.arm_issue`:
    skills present in a run without skills, no leak check possible, sources that disagree on its side)."""
    got = _main_record(line, None)
    if got is None:
        return
    _, key, meta = got
    issue = meta.get("arm_issue")
    if isinstance(issue, dict) and issue.get("kind") in ARM_ISSUE_KINDS:
        detail = issue.get("detail") if isinstance(issue.get("detail"), str) else ""
        issues.append((issue["kind"], key, (detail[:300],), _label(meta, where)))


class _Extra:
    """What load_inputs keeps of the blocks one reader reads (see skillaudit.runs.reader._State.extra)."""

    def __init__(self, arms: bool, hashes: bool, cost: bool, digests: bool, integrity: bool = False,
                 offered: bool = False) -> None:
        self.want = (arms, hashes, cost, digests, integrity, offered)
        self.arm_lines: list[tuple[int, int, bytes]] = []  # (file index, line number, line)
        self.seen: dict[str, set[str]] = {}
        self.cost = CostTable()
        self.digests: dict[int, str] = {}  # file index -> sha256 hex
        self.expected: dict[tuple[str, str, str, int], tuple[str, ...]] = {}
        self._hashing: _Hashing | None = None
        self.offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]] = {}
        self.offered_unknown: set[tuple[str, str, str, int]] = set()  # offered list = what was used
        self.issues: list[tuple[str, tuple[str, str, str, int], tuple[str, ...], str]] = []
        self.digests_seen: dict[str, set[str]] = {}

    def fresh(self) -> _Extra:
        return _Extra(*self.want)

    def __getstate__(self) -> dict[str, Any]:  # a --jobs worker process returns it
        return {**self.__dict__, "_hashing": None}

    def wrap(self, fh: IO[bytes]) -> IO[bytes]:
        """A whole file about to be read: read it through sha256 when digests are wanted."""
        if not self.want[3]:
            return fh
        try:
            regular = stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
        except (OSError, AttributeError, ValueError):
            regular = False
        if not regular:  # a stream has no fingerprint (the audit reports it as such)
            return fh
        self._hashing = _Hashing(fh)
        return self._hashing  # type: ignore[return-value]

    def finish(self, file_ix: int) -> None:
        """A whole file was read: its digest (over every byte, also any left after a gzip stream)."""
        if self._hashing is not None:
            while self._hashing.read(1 << 20):
                pass
            self.digests[file_ix] = self._hashing.sha.hexdigest()
            self._hashing = None

    def feed(self, buf: bytes, n: int, lineno: int, file_ix: int) -> None:
        """The block buf[:n] of whole lines (read without error), its first line numbered `lineno`."""
        arms, hashes, cost, _, integrity, offered = self.want
        if arms:
            self.arm_lines.extend((file_ix, ln, line) for ln, line in _lines_with(buf, n, ARM_NEEDLE, lineno))
        if hashes:
            for _, line in _lines_with(buf, n, _HASH_NEEDLE, lineno):
                add_hashes(line, self.seen)
            for _, line in _lines_with(buf, n, DIGESTS_NEEDLE, lineno):
                add_digests(line, self.digests_seen)
        if cost:
            _add_costs(buf if n == len(buf) else buf[:n], self.cost)
        if offered or integrity:  # the skills each run was offered: reach, prune, broken arms
            for ln, line in _lines_with(buf, n, _OFFERED_NEEDLE, lineno):
                _add_offered(line, self.offered, self.issues, f"\0{file_ix}:{ln}", self.offered_unknown)
            for _, line in _lines_with(buf, n, _EXPECTED_NEEDLE, lineno):  # the trigger view's labels
                _add_expected(line, self.expected)
        if integrity:  # two regex scans of the block: only the audit and `check` ask for them
            for ln, line in _leak_lines(buf, n, lineno):
                _add_leak(line, self.issues, f"\0{file_ix}:{ln}")
            for ln, line in _lines_with(buf, n, _ARM_ISSUE_NEEDLE, lineno):
                _add_arm_issue(line, self.issues, f"\0{file_ix}:{ln}")
