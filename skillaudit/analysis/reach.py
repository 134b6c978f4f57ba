"""Skill reach: of the skills an agent was offered, how many it opened, per model.

Agents that load skills on demand (Claude Code, Gemini CLI, Codex...) are offered a catalog and
open few of it; an offered skill that is never opened can neither help nor hurt. Where the run
logs say what each with-skills run was offered (`"offered"`, written by the importers of agent
logs), the reach of a model over its paired runs is

- `n_offered`: distinct skills offered on its with-skills runs; `opened`: those of them some run
  whose use was logged opened (a `Skill` call, a read of its SKILL.md, a retrieval);
- `n_tasks_offered`: tasks with a run that was offered skills; `n_tasks_used`: tasks with a run
  that opened any;
- `n_unlogged`: with-skills runs offered skills whose use was not logged (left out of "opened");
  `n_cut`: runs whose log ends before the agent finished (use after the cut is unseen).

With unlogged or cut runs, "opened" is a floor, and the sentence says so. Runs whose importer saw
no offered list (`meta.offered_from: "unknown"`: their "offered" is only what they used) make no
"of n": they are counted apart (`n_unlisted`, `used_unlisted`), and a model with only such runs gets
"used k skills; the offered list was not logged".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Reach:
    model: str
    n_offered: int
    opened: tuple[str, ...]
    n_tasks_offered: int
    n_tasks_used: int
    n_runs: int  # with-skills runs that were offered skills
    n_unlogged: int
    n_cut: int
    n_unlisted: int = 0  # with-skills runs whose offered list was not logged (only their use is known)
    used_unlisted: tuple[str, ...] = ()  # skills those runs used
    n_tasks_unlisted: int = 0

    @property
    def n_opened(self) -> int:
        return len(self.opened)

    @property
    def floor(self) -> bool:
        return bool(self.n_unlogged or self.n_cut)

    def sentence(self) -> str:
        """'opened 1 of 24 offered skills (11 tasks offered skills, 1 used any); ...'"""
        if not self.n_runs:  # no run listed what it was offered: say only what was used
            k = len(self.used_unlisted)
            return (f"used {k:,} skill{'s' * (k != 1)} on {self.n_tasks_unlisted:,} task"
                    f"{'s' * (self.n_tasks_unlisted != 1)}; the offered list was not logged (no agent log, "
                    "lock.json, config or --offered lists it), so there is no 'of n'")
        s = "" if self.n_offered == 1 else "s"
        t = "" if self.n_tasks_offered == 1 else "s"
        out = (f"opened {self.n_opened:,} of {self.n_offered:,} offered skill{s} ({self.n_tasks_offered:,} "
               f"task{t} offered skills, {self.n_tasks_used:,} used any)")
        caveats = []
        if self.n_cut:
            caveats.append(f"{self.n_cut:,} of {self.n_runs:,} logs end before the agent finished")
        if self.n_unlogged:
            caveats.append(f"use not logged on {self.n_unlogged:,} run{'s' * (self.n_unlogged != 1)}")
        if caveats:
            out += "; " + ", ".join(caveats) + ": a floor"
        if self.n_unlisted:
            out += (f"; {self.n_unlisted:,} more run{'s' * (self.n_unlisted != 1)} did not log what they were "
                    "offered (left out)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "opened": list(self.opened), "used_unlisted": list(self.used_unlisted),
                "n_opened": self.n_opened,
                "floor": self.floor, "text": self.sentence()}


def skill_reach(runs: Any, offered: dict[tuple[str, str, str, int], tuple[tuple[str, ...], bool]],
                unlisted: frozenset[tuple[str, str, str, int]] = frozenset()) -> list[Reach]:
    """One `Reach` per model of `runs` whose paired with-skills runs say what they were offered
    (models whose every run left its use unlogged get none: nothing was seen opened); `unlisted`
    are the keys of `offered` that list only what the run used (`Inputs.offered_unknown`)."""
    if not offered or not runs.n_pairs:
        return []
    unlogged = runs.use_unlogged
    rows = runs.retrieval
    out = []
    for mi, model in enumerate(runs.models):
        idx = np.flatnonzero(runs.model == mi)
        if idx.size == 0 or unlogged[idx].all():
            continue
        offered_all: dict[str, None] = {}
        opened: dict[str, None] = {}
        tasks_offered: set[tuple[int, int]] = set()
        tasks_used: set[tuple[int, int]] = set()
        n_runs = n_unlogged = n_cut = n_unlisted = 0
        used_unlisted: dict[str, None] = {}
        tasks_unlisted: set[tuple[int, int]] = set()
        for i in idx:
            key = (model, runs.benchmarks[runs.benchmark[i]], runs.tasks[runs.task[i]], int(runs.epoch[i]))
            got = offered.get(key)
            if not got or not got[0]:
                continue
            skills, cut = got
            if key in unlisted:  # its list is its use: no "of n" from it
                n_unlisted += 1
                used_unlisted.update(dict.fromkeys(skills))
                tasks_unlisted.add((int(runs.benchmark[i]), int(runs.task[i])))
                continue
            n_runs += 1
            n_cut += cut
            task = (int(runs.benchmark[i]), int(runs.task[i]))
            tasks_offered.add(task)
            offered_all.update(dict.fromkeys(skills))
            if unlogged[i]:
                n_unlogged += 1
                continue
            used = [runs.skills[j] for j in rows.indices[rows.indptr[i]:rows.indptr[i + 1]]]
            hit = [u for u in used if u in skills]
            if hit:
                tasks_used.add(task)
                opened.update(dict.fromkeys(hit))
        if n_runs or n_unlisted:
            out.append(Reach(model, len(offered_all), tuple(sorted(opened)), len(tasks_offered),
                             len(tasks_used), n_runs, n_unlogged, n_cut, n_unlisted,
                             tuple(sorted(used_unlisted)), len(tasks_unlisted)))
    return out
