"""Judged tasks in a run (`grader: judge`): each record's `correct` and `score` from the judge, and,
pairwise (the default), the enabled record's `preference` once both conditions of a (task, epoch)
have run.

Pairwise, the first run of a pair to finish is held; the second judges both answers (in its own
worker thread, both orders) and the two records land together, so a log never holds half a judged
pair. A run whose other condition is not in this run's plan (already logged: resume, or a
`--retry-errors` of one side) is judged on its own (pointwise), and so is the other run of a pair
whose agent failed. A judge failure makes error records (`error: "judge: ..."`), never a loss:
`--retry-errors` runs them again.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

from skillaudit.agents.judge import Judge, JudgeError
from skillaudit.tasks.benchmarks import Task


class JudgedRuns:
    """The judge of one run: `land(rec, task)` -> the records to write now."""

    def __init__(self, judge: Judge, planned: set[tuple[str, int, str]], aa_rate: float = 0.25) -> None:
        self.judge = judge
        self.aa_rate = aa_rate  # share of judged pairs that also get the judge's A/A check
        self.planned = planned  # (task_id, epoch, condition) of every episode in this run's plan
        self.pairwise = judge.cfg.mode == "pairwise"
        self._held: dict[tuple[str, int], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.judge.close()

    def _meta(self, mode: str, **more: Any) -> dict[str, Any]:
        return {**self.judge.cfg.public(), "mode": mode, **more}

    def grade(self, rec: dict[str, Any], task: Task, why: str | None = None) -> dict[str, Any]:
        """The record judged on its own answer (an error record is left as it is)."""
        if rec["error"] is not None:
            return rec
        try:
            s, reason, usage = self.judge.grade(task.prompt, task.data["rubric"], rec["answer"])
        except JudgeError as exc:
            rec["error"] = f"judge: {exc}"
            return rec
        self._set(rec, task, s)
        rec["meta"]["judge"] = self._meta("pointwise", reason=reason, usage=usage, **({"why": why} if why else {}))
        return rec

    def _set(self, rec: dict[str, Any], task: Task, s: float) -> None:
        thr = task.data["threshold"]
        rec["score"] = round(s, 4)
        rec["correct"] = s >= thr
        rec["meta"]["score"] = f"judge score {s:g} {'>=' if s >= thr else '<'} {thr:g}"

    def land(self, rec: dict[str, Any], task: Task) -> list[dict[str, Any]]:
        """What to write now of this run's record: [] while its pair's other run is still to come."""
        if not self.pairwise:
            return [self.grade(rec, task)]
        other = "disabled" if rec["condition"] == "enabled" else "enabled"
        if (task.task_id, rec["epoch"], other) not in self.planned:
            return [self.grade(rec, task, why="the other condition's run is not in this run")]
        key = (task.task_id, rec["epoch"])
        with self._lock:
            partner = self._held.pop(key, None)
            if partner is None:
                self._held[key] = rec
                return []
        en, dis = (rec, partner) if rec["condition"] == "enabled" else (partner, rec)
        if en["error"] is not None or dis["error"] is not None:
            why = "the other condition's run is an error"
            return [self.grade(en, task, why), self.grade(dis, task, why)]
        try:
            v = self.judge.pair(task.prompt, task.data["rubric"], en["answer"], dis["answer"])
        except JudgeError as exc:
            en["error"] = dis["error"] = f"judge: {exc}"
            return [en, dis]
        self._set(en, task, v.score_enabled)
        self._set(dis, task, v.score_disabled)
        en["preference"] = v.preference
        en["meta"]["judge"] = self._meta("pairwise", orders=v.orders, reasons=v.reasons, usage=v.usage, calls=2)
        pick = _aa_pick(task.task_id, en["epoch"], self.aa_rate)
        if pick is not None:
            self._aa(en, en if pick == "enabled" else dis, pick, task)
        dis["meta"]["judge"] = self._meta("pairwise", orders=v.orders, calls=0)  # the calls are on the enabled record
        return [en, dis]

    def _aa(self, en: dict[str, Any], src: dict[str, Any], which: str, task: Task) -> None:
        """The judge's A/A check: `src`'s answer against a copy of itself, in both orders, as the pair
        was judged; any verdict but a tie is the judge flipping (`judge_aa` on the enabled record). A
        judge failure here leaves the pair's verdict standing and the check unlogged."""
        j = en["meta"]["judge"]
        try:
            v = self.judge.pair(task.prompt, task.data["rubric"], src["answer"], src["answer"])
        except JudgeError as exc:
            j["aa_error"] = str(exc)[:300]
            return
        en["judge_aa"] = "tie" if v.preference == "tie" else "flip"
        j["aa"] = {"answer": which, "orders": v.orders}
        j["calls"] += 2
        for k, n in v.usage.items():
            j["usage"][k] = j["usage"].get(k, 0) + n


def _aa_pick(task_id: str, epoch: int, rate: float) -> str | None:
    """Whether a pair gets the A/A check (a fixed hash of task and epoch below `rate`: the same pairs
    on every run and resume), and which of its answers is copied: enabled or disabled, alternately."""
    h = zlib.crc32(f"judge-aa:{task_id}:{epoch}".encode())
    if (h & 0xFFFF) / 0x10000 >= rate:
        return None
    return "enabled" if (h >> 16) & 1 else "disabled"
