"""The episode plan: every (task, condition, epoch, arm, mask draw) a run will execute, made once
from the options before any model call. Episodes already in the output (resume) are counted as
skipped, not planned; `--reuse` has copied what cannot have changed before the plan is made."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillaudit.engine.options import CONDITIONS


@dataclass(frozen=True)
class Episode:
    """One episode to run: a task in a condition and epoch, for an arm (None: the main pair) and
    mask draw (-1: none); `source` is what the episode runs from (a benchmark or task-file `Task`,
    or the logged pair or record an arm replays)."""

    task_id: str
    condition: str
    epoch: int
    arm: str | None = None
    mask: int = -1
    source: Any = field(default=None, compare=False, repr=False)

    def key(self, model: str, benchmark: str) -> tuple:
        """The resume key of the record this episode writes (`output.record_key`)."""
        key = (model, benchmark, self.task_id, self.condition, self.epoch)
        return key if self.arm is None else (*key, self.arm, self.mask if self.arm == "mask" else -1)


@dataclass
class Plan:
    """What a run will do: the episodes in execution order, how many were already logged, and the
    run's facts the summary reports."""

    out: Path
    episodes: list[Episode]
    skipped: int
    n_tasks: int
    label: str = ""
    warnings: list[str] = field(default_factory=list)
    reuse: str | None = None

    @classmethod
    def of(cls, out: Path, candidates: Iterable[Episode], done: set[tuple], model: str, benchmark: str | None,
           n_tasks: int, **facts: Any) -> Plan:
        """The plan of `candidates` less those already in `done` (keys of the logged records).
        `benchmark` None: each episode's source carries its own (the logged record an arm replays)."""
        episodes, skipped = [], 0
        for ep in candidates:
            if benchmark is None:
                src = ep.source
                key = ep.key(str(src.get("model")), str(src.get("benchmark")))
            else:
                key = ep.key(model, benchmark)
            if key in done:
                skipped += 1
            else:
                episodes.append(ep)
        return cls(out=out, episodes=episodes, skipped=skipped, n_tasks=n_tasks, **facts)


def main_episodes(tasks: Sequence[Any], epochs: int, block: int | None = None) -> list[Episode]:
    """Both conditions of every task and epoch, epoch-major. With `block`, tasks go in blocks of
    that many, the enabled runs of a block before its disabled ones (consecutive requests share the
    longer system prompt, which servers with prefix caching reuse); without, condition-major."""
    out = []
    for epoch in range(1, epochs + 1):
        if block is None:
            out += [Episode(t.task_id, cond, epoch, source=t) for cond in CONDITIONS for t in tasks]
            continue
        for start in range(0, len(tasks), max(1, block)):
            chunk = tasks[start:start + max(1, block)]
            out += [Episode(t.task_id, cond, epoch, source=t) for cond in CONDITIONS for t in chunk]
    return out
