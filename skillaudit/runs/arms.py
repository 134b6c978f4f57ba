"""Arm records (DESIGN §3.1b), read: the lines the run-log reader kept (`inputs.load_inputs`)
checked (`parse_arm_lines`) and joined to the main pairs (`join_arms`), or read again from the files
(`load_arms`). What the arms show is `skillaudit.analysis.counterfactual`; how they are run is
`skillaudit.engine.arm_runner`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from skillaudit.errors import InputError, RunLogError
from skillaudit.runs import PairedRuns
from skillaudit.runs.records import _open
from skillaudit.stats._csr import Csr

#: arms that vary the enabled run's tool result, and the one that repeats the disabled run
ENABLED_ARMS = ("random", "filler", "empty", "corrupted", "mask", "pruned")
DISABLED_ARMS = ("replicate",)
ARMS = ENABLED_ARMS + DISABLED_ARMS
#: arms whose content is "not these skills": their content effect answers "is it the entries?"
CONTROL_ARMS = ("random", "filler", "empty")


@dataclass(frozen=True)
class ArmRecords:
    """Arm records joined to the main pairs of `runs` (one row per record, error records left out).

    `pair` is the index of the main pair of the same (model, benchmark, task_id, epoch) in the
    runs they were joined to, -1 when that pair is missing; `kept`/`withheld` hold, for `mask`
    rows, the retrieved skills kept and withheld (columns: `skills`); `excluded` the `pruned`
    rows' excluded sets.
    """

    arm: np.ndarray  # index into `names`
    names: tuple[str, ...]
    pair: np.ndarray
    correct: np.ndarray
    mask_seed: np.ndarray  # -1 when not a mask
    kept: Csr
    withheld: Csr
    skills: tuple[str, ...]
    excluded: tuple[tuple[str, ...], ...]
    n_error: int = 0
    n_unjoined: int = 0

    @property
    def n(self) -> int:
        return int(self.arm.size)

    def of(self, name: str) -> np.ndarray:
        """Row indices of one arm."""
        if name not in self.names:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.arm == self.names.index(name))

    def restricted(self, pairs: np.ndarray) -> ArmRecords:
        """The rows joined to `pairs` (indices into the runs), renumbered to their position in it."""
        where = np.full(max(int(self.pair.max(initial=-1)) + 1, 1), -1, dtype=np.int64)
        where[pairs[pairs < where.size]] = np.flatnonzero(pairs < where.size)
        ok = self.pair >= 0
        new = np.where(ok, where[np.maximum(self.pair, 0)], -1)
        rows = np.flatnonzero(new >= 0)
        return ArmRecords(
            arm=self.arm[rows], names=self.names, pair=new[rows], correct=self.correct[rows],
            mask_seed=self.mask_seed[rows], kept=self.kept.take_rows(rows),
            withheld=self.withheld.take_rows(rows), skills=self.skills,
            excluded=tuple(self.excluded[i] for i in rows.tolist()),
        )


def _str(rec: dict[str, Any], key: str, default: str) -> str:
    v = rec.get(key, default)
    if not isinstance(v, str):
        raise ValueError(f"'{key}' must be a string")
    return v


def _ids(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"'{what}' must be a list of skill ids")
    return tuple(value)


def _shown(rec: dict[str, Any]) -> tuple[str, ...]:
    """The skill ids the arm's tool returned, in order (from `retrievals` / `retrieved`)."""
    out: list[str] = []
    calls = rec.get("retrievals") or []
    if not isinstance(calls, list):
        raise ValueError("'retrievals' must be a list of calls")
    for call in calls:
        if not isinstance(call, dict):
            raise ValueError("each entry of 'retrievals' must be an object")
        skills = call.get("skills") or []
        if not isinstance(skills, list):
            raise ValueError("'retrievals[].skills' must be a list")
        for s in skills:
            sid = s if isinstance(s, str) else (s.get("id") if isinstance(s, dict) else None)
            if not isinstance(sid, str):
                raise ValueError("each retrieved skill must be an id string or an object with a string 'id'")
            out.append(sid)
    out += list(_ids(rec.get("retrieved"), "retrieved"))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class ArmLines:
    """Arm records read and checked, not yet joined to main pairs (`join_arms`)."""

    names: tuple[str, ...]  # arms in first-seen order
    key: tuple[tuple[str, str, str, int], ...]  # (model, benchmark, task_id, epoch) per record
    arm: tuple[int, ...]  # index into `names`
    correct: tuple[bool, ...]
    mask_seed: tuple[int, ...]
    kept: tuple[tuple[str, ...], ...]
    withheld: tuple[tuple[str, ...], ...]
    excluded: tuple[tuple[str, ...], ...]
    n_error: int = 0


#: the bytes every line holding an arm record holds
ARM_NEEDLE = b'"arm"'


def parse_arm_lines(lines: Iterable[tuple[str, bytes]]) -> ArmLines:
    """Check the arm records among `lines` ((file:line, bytes) of lines holding ARM_NEEDLE).

    Errors name the file and line (RunLogError, exit 2). A key (model, benchmark, task_id, epoch,
    arm, mask_seed) seen twice is an error naming both lines.
    """
    key_of: dict[tuple, str] = {}
    arms: list[str] = []
    keys: list[tuple[str, str, str, int]] = []
    arm_ix: list[int] = []
    correct: list[bool] = []
    seeds: list[int] = []
    kept: list[tuple[str, ...]] = []
    withheld: list[tuple[str, ...]] = []
    excluded: list[tuple[str, ...]] = []
    n_error = 0
    for where, line in lines:
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RunLogError(f"{where}: invalid JSON (column {exc.pos + 1})") from None
        if not isinstance(rec, dict) or rec.get("arm") is None:
            continue
        try:
            arm = rec["arm"]
            if not isinstance(arm, str) or not arm:
                raise ValueError("'arm' must be a non-empty string")
            if rec.get("error") is not None:
                n_error += 1
                continue
            model, bench = _str(rec, "model", "default"), _str(rec, "benchmark", "default")
            tid = rec.get("task_id")
            epoch = rec.get("epoch", 1)
            if not isinstance(tid, str) or not tid:
                raise ValueError("'task_id' must be a non-empty string")
            if type(epoch) is not int or epoch < 1:
                raise ValueError("'epoch' must be an integer >= 1")
            ok = rec.get("correct")
            if ok not in (True, False, 0, 1) or isinstance(ok, float):
                raise ValueError("'correct' must be true/false or 0/1")
            meta = rec.get("meta") or {}
            if not isinstance(meta, dict):
                raise ValueError("'meta' must be an object")
            seed = meta.get("mask_seed", -1) if arm == "mask" else -1
            if type(seed) is not int:
                raise ValueError("'meta.mask_seed' must be an integer")
            shown = _shown(rec)
            k = _ids(meta.get("kept"), "meta.kept") if arm == "mask" else shown
            w = _ids(meta.get("withheld"), "meta.withheld") if arm == "mask" else ()
            ex = _ids(meta.get("excluded"), "meta.excluded") if arm == "pruned" else ()
        except (ValueError, KeyError) as exc:
            raise RunLogError(f"{where}: {exc}") from None
        key = (model, bench, tid, epoch, arm, seed)
        if key in key_of:
            raise RunLogError(f"{where}: duplicate arm record {model}/{bench}/{tid} epoch {epoch} "
                              f"arm {arm}{f' mask_seed {seed}' if seed >= 0 else ''} "
                              f"(first at {key_of[key]})")
        key_of[key] = where
        if arm not in arms:
            arms.append(arm)
        keys.append((model, bench, tid, epoch))
        arm_ix.append(arms.index(arm))
        correct.append(bool(ok))
        seeds.append(seed)
        kept.append(k)
        withheld.append(w)
        excluded.append(ex)
    return ArmLines(names=tuple(arms), key=tuple(keys), arm=tuple(arm_ix), correct=tuple(correct),
                    mask_seed=tuple(seeds), kept=tuple(kept), withheld=tuple(withheld),
                    excluded=tuple(excluded), n_error=n_error)


def join_arms(lines: ArmLines, runs: PairedRuns) -> ArmRecords:
    """The checked arm records joined to the main pairs of `runs` (`pair` -1 where none)."""
    main = {(runs.models[m], runs.benchmarks[b], runs.tasks[t], int(e)): i for i, (m, b, t, e) in
            enumerate(zip(runs.model.tolist(), runs.benchmark.tolist(), runs.task.tolist(),
                          runs.epoch.tolist(), strict=True))}
    pair = [main.get(k, -1) for k in lines.key]
    skills = list(runs.skills)
    col = {s: i for i, s in enumerate(skills)}
    for sets in (lines.kept, lines.withheld):
        for ids in sets:
            for s in ids:
                if s not in col:
                    col[s] = len(skills)
                    skills.append(s)

    def matrix(sets: Sequence[tuple[str, ...]]) -> Csr:
        rows = np.repeat(np.arange(len(sets)), [len(x) for x in sets])
        cols = np.array([col[s] for x in sets for s in x], dtype=np.int64)
        return Csr.from_coo(rows, cols, np.ones(cols.size), (len(sets), len(skills)))

    pair_arr = np.array(pair, dtype=np.int64)
    return ArmRecords(
        arm=np.array(lines.arm, dtype=np.int64), names=lines.names, pair=pair_arr,
        correct=np.array(lines.correct, dtype=bool), mask_seed=np.array(lines.mask_seed, dtype=np.int64),
        kept=matrix(lines.kept), withheld=matrix(lines.withheld), skills=tuple(skills),
        excluded=lines.excluded, n_error=lines.n_error, n_unjoined=int((pair_arr < 0).sum()),
    )


def load_arms(paths: Iterable[str], runs: PairedRuns) -> ArmRecords | None:
    """Read the arm records of `paths` and join them to `runs`; None when the runs hold none.

    A pass of its own over the logs (so not from standard input or a stream);
    `skillaudit.runs.inputs.load_inputs` keeps the arm lines while it reads the runs
    (`Inputs.arms`). Errors name the file and line (RunLogError, exit 2); see `parse_arm_lines`.
    """
    if runs.n_arm_records == 0:
        return None
    paths = [str(p) for p in paths]
    if "-" in paths:
        raise InputError("arm records cannot be read from standard input: give the log as a file")
    for p in paths:  # they are read in a second pass: a FIFO or <(...) is empty (or blocks) by then
        try:
            regular = stat.S_ISREG(os.stat(p).st_mode)
        except OSError:
            regular = True  # _open says what is wrong
        if not regular:
            raise InputError(f"{p}: arm records cannot be read from a stream (a FIFO or <(...)): "
                             "give the log as a file")

    def lines() -> Iterable[tuple[str, bytes]]:
        for path in paths:
            name, fh = _open(path)
            try:
                for lineno, line in enumerate(fh, 1):
                    if ARM_NEEDLE in line:
                        yield f"{name}:{lineno}", line
            except OSError as exc:
                raise RunLogError(f"{name}: cannot read: {exc.strerror or exc}") from None
            finally:
                fh.close()

    return join_arms(parse_arm_lines(lines()), runs)
