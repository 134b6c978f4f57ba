"""Per task-bundle effects across agents: where each task ships its own skills (SkillsBench).

When every task comes with its own skill bundle and the runs do not log which skills were used,
"per skill" can only mean "per task's bundle": did offering task X's skills raise or lower the
pass rate of each agent on task X? An agent's evidence on a task is its summed flips there
(`passes with - passes without`, over its trials: task-level, so no trial order matters); an
agent is a *rescue* of the bundle when the sum is positive and a *harm* when it is negative.

Across agents, the bundle's test is the exact two-sided sign test of rescues vs harms (agents with
a zero sum carry no sign); with one bundle per task, the p-values are adjusted over all bundles
(Benjamini-Hochberg q). A single agent's cell is 3 trials against 3 at most: a cell alone decides
nothing (0/3 vs 3/3 has Fisher p = 0.1), which is why only the count across agents is tested.
The agents share the task and the bundle, so this says which bundles are associated with harm
across agents, not why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from skillaudit.runs import PairedRuns
from skillaudit.stats import bh_qvalues, mcnemar_exact

SCHEMA = "skillaudit.bundles/v1"

#: what `bundle_effects` computes, in words (the report's bundle section and its `method`)
BUNDLE_METHOD = {"test": "the exact two-sided sign test of rescues vs harms, agents as the units (an agent's "
                         "summed flips on the task give its sign)",
                 "q": "Benjamini-Hochberg over all bundles"}


@dataclass(frozen=True)
class AgentCell:
    """One agent on one task: passes with and without the task's skills, out of its trials."""

    model: str
    pass_on: int
    pass_off: int
    trials: int

    @property
    def net(self) -> int:
        return self.pass_on - self.pass_off


@dataclass(frozen=True)
class BundleEffect:
    """One task's skill bundle across agents."""

    task: str
    benchmark: str
    agents: int
    rescues: int  # agents whose summed flips on the task are > 0
    harms: int  # ... < 0
    net_trials: int  # sum over agents of passes with - passes without
    trials: int  # paired trials over all agents
    effect: float  # net_trials / trials: the mean change in pass rate on this task
    p: float  # exact sign test, rescues vs harms, agents as units
    q: float  # Benjamini-Hochberg over every bundle of the result
    hurt: tuple[AgentCell, ...]  # the agents it hurt, worst first
    helped: tuple[AgentCell, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hurt"] = [asdict(c) for c in self.hurt]
        d["helped"] = [asdict(c) for c in self.helped]
        return d

    def sentence(self) -> str:
        """"task X's skills: 2 rescues / 8 harms across 18 agents (...)"."""
        return (f"{self.task}'s skills: {self.rescues} rescue(s) / {self.harms} harm(s) across "
                f"{self.agents} agents (pass rate {self.effect * 100:+.1f} pp over {self.trials} paired "
                f"trials; sign test p = {self.p:.3g}, q = {self.q:.3g} over all bundles)")


@dataclass(frozen=True)
class BundleResult:
    bundles: tuple[BundleEffect, ...]  # sorted: most harmful first (by effect, then harms)
    n_agents: int

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "n_agents": self.n_agents,
                "bundles": [b.to_dict() for b in self.bundles]}

    def harmful(self, n: int = 5) -> list[BundleEffect]:
        """The bundles with more harms than rescues and a negative net, worst first (at most n)."""
        return [b for b in self.bundles if b.harms > b.rescues and b.net_trials < 0][:n]


def bundle_effects(runs: PairedRuns) -> BundleResult:
    """Per (benchmark, task) bundle: agents rescued / harmed (task-level sums), sign test, BH q."""
    if runs.n_pairs == 0:
        return BundleResult((), 0)
    # cell = (benchmark, task, model); sums over the cell's pairs (its trials)
    nt, nm = len(runs.tasks), len(runs.models)
    cell = (runs.benchmark.astype(np.int64) * nt + runs.task) * nm + runs.model
    uc, inv = np.unique(cell, return_inverse=True)
    inv = inv.ravel()
    on = np.bincount(inv, weights=runs.y_pos, minlength=uc.size).astype(np.int64)
    off = np.bincount(inv, weights=runs.y_neg, minlength=uc.size).astype(np.int64)
    n = np.bincount(inv, minlength=uc.size).astype(np.int64)
    net = on - off
    bt = uc // nm  # (benchmark, task) of each cell
    models = uc % nm
    ub, binv = np.unique(bt, return_inverse=True)
    binv = binv.ravel()
    k = ub.size
    rescues = np.bincount(binv, weights=net > 0, minlength=k).astype(np.int64)
    harms = np.bincount(binv, weights=net < 0, minlength=k).astype(np.int64)
    agents = np.bincount(binv, minlength=k)
    net_t = np.bincount(binv, weights=net, minlength=k).astype(np.int64)
    trials = np.bincount(binv, weights=n, minlength=k).astype(np.int64)
    p = np.asarray(mcnemar_exact(rescues, harms), dtype=float)
    q = bh_qvalues(p)
    out = []
    for j in range(k):
        idx = np.flatnonzero(binv == j)
        cells = [AgentCell(runs.models[int(models[i])], int(on[i]), int(off[i]), int(n[i])) for i in idx]
        hurt = tuple(sorted((c for c in cells if c.net < 0), key=lambda c: (c.net, c.model)))
        helped = tuple(sorted((c for c in cells if c.net > 0), key=lambda c: (-c.net, c.model)))
        b_ix, t_ix = divmod(int(ub[j]), nt)
        out.append(BundleEffect(
            task=runs.tasks[t_ix], benchmark=runs.benchmarks[b_ix], agents=int(agents[j]),
            rescues=int(rescues[j]), harms=int(harms[j]), net_trials=int(net_t[j]),
            trials=int(trials[j]), effect=float(net_t[j] / trials[j]), p=float(p[j]), q=float(q[j]),
            hurt=hurt, helped=helped,
        ))
    out.sort(key=lambda b: (b.effect, b.rescues - b.harms, b.task, b.benchmark))
    return BundleResult(tuple(out), len(set(runs.model.tolist())))
