"""Simulated paired run logs with planted skill effects, for tests and for trying the method.

`simulate(...)` returns records in the run-log format (DESIGN §3.1), a skill library and the ground
truth. The generative model, per (model, task):

- difficulty: a task logit `a` (shared by models, shifted per model); P(correct, disabled) =
  sigmoid(a);
- selection: the agent calls the tool with P = sigmoid(logit(trigger_rate) + selection * z(a)), so
  with `selection > 0` easier tasks retrieve more often (harder with `selection < 0`);
- retrieval: a primary skill drawn by popularity; its *buddy* (an innocent no-effect skill planted
  next to every harmful and helpful skill) joins it with probability `co_retrieval`; *alias* pairs
  always come together; with probability `extra_rate` one more skill joins (at most 3, rank order =
  draw order, BM25-like decreasing scores). The retrieved set is the same in every epoch;
- outcome: P(correct, enabled) = sigmoid(a + sum of the retrieved skills' logit effects)
  (`effect` for helpful, `-effect` for harmful, a per-task random sign for mixed, 0 otherwise);
- sampling noise: the two runs of a pair share their uniform draw with probability `coupling`,
  otherwise draw independently, so flips also happen where no skill does anything;
- dilution (optional): every injected skill, whichever it is, derails the enabled run with
  probability `dilution` (harm from injecting skills at all, not from an entry);
- per-model signs (optional): `model_signs[m]` multiplies every planted effect for model m, so a
  skill can help one model and hurt another;
- task noise (optional): each task gets a logit shift |N(0, task_noise)| in one of its two
  conditions, chosen by a fair coin, the same in every epoch: tasks respond persistently to the
  prompt, as often for the better as for the worse, so the library has no effect while the epochs
  of one task repeat each other (what makes pooled per-pair tests over-reject).

`SCENARIOS` names the settings the verdict is tested on (`skillaudit simulate --scenario NAME`):
`dilution` (every skill equally harmful), `two-harmful` (2 of 20 skills harmful), `model-split`
(a harmful skill that helps a second model) and `null-epochs` (no effect, 5 epochs per task,
persistent per-task noise).

Everything is drawn from one `numpy.random.default_rng(seed)`: the same arguments give the same
records. `skillaudit simulate --out DIR` writes `DIR/runs.jsonl` and `DIR/skills/<id>/SKILL.md`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from skillaudit.errors import InputError, OutputError
from skillaudit.library import Library, Skill
from skillaudit.util.files import atomic_write_bytes, atomic_write_text

KINDS = ("harmful", "helpful", "mixed", "none")
_WORDS = (
    'sets', 'strings', 'regex', 'sorting', 'counting', 'recursion', 'edge-cases', 'primes',
    'bits', 'tuples', 'matrices', 'search', 'floats', 'heaps', 'series', 'rates',
    'percent', 'ratio', 'bookkeeping', 'averages', 'fractions', 'equations', 'money', 'units',
    'time', 'geometry', 'dates', 'parsing', 'graphs', 'dynamic-programming', 'greedy', 'intervals',
)


class SimulationError(InputError):
    """Simulation parameters that cannot produce a log (too few skills for the planted roles, ...)."""


@dataclass(frozen=True)
class SkillTruth:
    """What was planted for one skill: kind, logit effect and the innocent buddy retrieved with it."""

    skill_id: str
    kind: str
    effect: float
    buddy: str | None = None
    alias_of: str | None = None
    popularity: float = 1.0


@dataclass(frozen=True)
class Simulation:
    """Run-log records, the library and the ground truth of one simulation."""

    records: tuple[dict[str, Any], ...]
    skills: tuple[dict[str, str], ...]
    truth: dict[str, SkillTruth]
    settings: dict[str, Any] = field(default_factory=dict)

    def ids(self, kind: str) -> list[str]:
        """Skill ids of one planted kind, sorted."""
        return sorted(s for s, t in self.truth.items() if t.kind == kind)

    def jsonl(self) -> str:
        return "".join(orjson.dumps(r).decode() + "\n" for r in self.records)

    def library(self) -> Library:
        return Library(
            skills=tuple(
                Skill(id=s["id"], name=s["id"], description=s["description"], body=s["body"])
                for s in sorted(self.skills, key=lambda s: s["id"])
            ),
            source="<simulation>",
        )

    def runs(self) -> Any:
        """The records paired into a `PairedRuns` (through the real loader)."""
        from skillaudit.runs import read_text_records

        return read_text_records(self.jsonl(), name="<simulation>")

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write `runs.jsonl`, `skills/<id>/SKILL.md` and `truth.json` into a new or empty folder."""
        out = Path(out_dir)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise OutputError(f"{out}: already exists and is not an empty folder")
        runs_path = out / "runs.jsonl"
        atomic_write_text(runs_path, self.jsonl())
        lib_dir = out / "skills"
        for s in self.skills:
            text = (
                f"---\nname: {s['id']}\ndescription: {orjson.dumps(s['description']).decode()}\n"
                "license: Apache-2.0\n"
                f"metadata:\n  domain: simulated\n---\n{s['body']}\n"
            )
            atomic_write_text(lib_dir / s["id"] / "SKILL.md", text)
        truth = {
            "settings": self.settings,
            "skills": {k: vars(v) for k, v in sorted(self.truth.items())},
        }
        atomic_write_bytes(out / "truth.json", orjson.dumps(truth, option=orjson.OPT_INDENT_2))
        return runs_path, lib_dir


#: named settings of `simulate` (the verdict's test scenarios; docs/attribution.md)
SCENARIOS: dict[str, dict[str, Any]] = {
    "dilution": {"n_tasks": 800, "n_skills": 20, "n_harmful": 0, "n_helpful": 0, "epochs": 2,
                 "dilution": 0.2},
    "two-harmful": {"n_tasks": 800, "n_skills": 20, "n_harmful": 2, "n_helpful": 0, "epochs": 2,
                    "effect": 2.0, "co_retrieval": 0.5},
    "model-split": {"n_tasks": 800, "n_skills": 20, "n_harmful": 1, "n_helpful": 0, "epochs": 2,
                    "models": ("model-a", "model-b"), "model_signs": (1.0, -1.0)},
    "null-epochs": {"n_tasks": 300, "n_skills": 20, "n_harmful": 0, "n_helpful": 0, "epochs": 5,
                    "task_noise": 2.0},
}


def scenario(name: str, seed: int = 0, **overrides: Any) -> Simulation:
    """`simulate` with the settings of a named scenario (`SCENARIOS`), overridable."""
    if name not in SCENARIOS:
        raise SimulationError(f"unknown scenario {name!r} (expected one of {', '.join(SCENARIOS)})")
    return simulate(**{**SCENARIOS[name], **overrides, "seed": seed})


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _skill_text(rng: np.random.Generator, sid: str, i: int) -> dict[str, str]:
    a = _WORDS[i % len(_WORDS)]
    b = _WORDS[(i * 7 + 3) % len(_WORDS)]
    tag = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=6))
    return {
        "id": sid,
        "description": f"{a.capitalize()} with {b}: procedure {tag}. Use when a task mentions {a}.",
        "body": f"## When to apply\n- {a} {b} {tag}\n\n## Steps\n1. {tag} {a}.\n2. {b} {tag}.",
    }


def simulate(
    n_tasks: int = 600,
    n_skills: int = 20,
    *,
    n_harmful: int = 2,
    n_helpful: int = 2,
    n_mixed: int = 0,
    n_alias_pairs: int = 0,
    n_unused: int = 0,
    effect: float = 1.5,
    epochs: int = 1,
    models: Sequence[str] = ("sim-model",),
    benchmarks: Sequence[str] = ("sim-bench",),
    trigger_rate: float = 0.6,
    selection: float = 1.0,
    co_retrieval: float = 0.8,
    extra_rate: float = 0.3,
    coupling: float = 0.5,
    dilution: float = 0.0,
    model_signs: Sequence[float] | None = None,
    task_noise: float = 0.0,
    seed: int = 0,
) -> Simulation:
    """Simulate paired runs with planted helpful, harmful, mixed and no-effect skills (see module doc)."""
    n_roles = n_harmful + n_helpful + n_mixed
    n_none_needed = n_harmful + n_helpful + 2 * n_alias_pairs + n_unused
    if n_tasks < 1 or epochs < 1 or not models or not benchmarks:
        raise SimulationError("need at least one task, epoch, model and benchmark")
    if not 0.0 <= dilution < 1.0:
        raise SimulationError(f"dilution {dilution}: must be a probability in [0, 1)")
    if model_signs is not None and len(model_signs) != len(models):
        raise SimulationError(f"model_signs: need one sign per model ({len(models)}), got {len(model_signs)}")
    if n_roles + n_none_needed > n_skills:
        raise SimulationError(
            f"{n_skills} skills are too few: the planted roles need {n_roles + n_none_needed} "
            "(every harmful and helpful skill gets a no-effect buddy)"
        )
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    roles = _plant_roles(rng, ids, n_harmful=n_harmful, n_helpful=n_helpful, n_mixed=n_mixed,
                         n_alias_pairs=n_alias_pairs, n_unused=n_unused, effect=effect)
    kinds, effects, buddies = roles["kinds"], roles["effects"], roles["buddies"]
    alias_of, pop = roles["alias_of"], roles["pop"]
    idx = {s: i for i, s in enumerate(ids)}
    base = rng.normal(0.3, 1.5, size=n_tasks)
    records: list[dict[str, Any]] = []
    for mi, model in enumerate(models):
        sign = 1.0 if model_signs is None else float(model_signs[mi])
        records += _model_records(rng, ids, roles, base, model, sign, benchmarks=benchmarks, epochs=epochs,
                                  trigger_rate=trigger_rate, selection=selection, co_retrieval=co_retrieval,
                                  extra_rate=extra_rate, coupling=coupling, dilution=dilution,
                                  task_noise=task_noise)

    skills = tuple(_skill_text(rng, s, i) for i, s in enumerate(ids))
    truth = {
        s: SkillTruth(
            skill_id=s, kind=kinds[s], effect=effects[s], buddy=buddies.get(s),
            alias_of=alias_of.get(s), popularity=float(pop[idx[s]]),
        )
        for s in ids
    }
    settings = {
        "n_tasks": n_tasks, "n_skills": n_skills, "n_harmful": n_harmful, "n_helpful": n_helpful,
        "n_mixed": n_mixed, "n_alias_pairs": n_alias_pairs, "n_unused": n_unused, "effect": effect,
        "epochs": epochs, "models": list(models), "benchmarks": list(benchmarks),
        "trigger_rate": trigger_rate, "selection": selection, "co_retrieval": co_retrieval,
        "extra_rate": extra_rate, "coupling": coupling, "dilution": dilution,
        "model_signs": None if model_signs is None else list(model_signs), "task_noise": task_noise,
        "seed": seed,
    }
    return Simulation(records=tuple(records), skills=skills, truth=truth, settings=settings)


def _plant_roles(rng: np.random.Generator, ids: list[str], *, n_harmful: int, n_helpful: int, n_mixed: int,
                 n_alias_pairs: int, n_unused: int, effect: float) -> dict[str, Any]:
    """Which skills are harmful, helpful, mixed, aliases or unused, their buddies and popularity."""
    n_skills = len(ids)
    order = [ids[i] for i in rng.permutation(n_skills)]
    kinds: dict[str, str] = {}
    effects: dict[str, float] = {}
    it = iter(order)
    for kind, count, eff in (("harmful", n_harmful, -effect), ("helpful", n_helpful, effect),
                             ("mixed", n_mixed, effect)):
        for _ in range(count):
            s = next(it)
            kinds[s], effects[s] = kind, eff
    rest = list(it)
    for s in rest:
        kinds[s], effects[s] = "none", 0.0
    buddies = {s: rest.pop(0) for s in sorted(kinds) if kinds[s] in ("harmful", "helpful")}
    alias_of: dict[str, str] = {}
    for _ in range(n_alias_pairs):
        a, b = rest.pop(0), rest.pop(0)
        alias_of[b] = a
    unused = {rest.pop(0) for _ in range(n_unused)}
    pop = rng.uniform(0.6, 1.4, size=n_skills)
    idx = {s: i for i, s in enumerate(ids)}
    for s in list(alias_of) + sorted(unused):
        pop[idx[s]] = 0.0  # alias followers and unused skills are never primary
    partner = np.full(n_skills, -1)
    for h, bud in buddies.items():
        partner[idx[h]] = idx[bud]
    follower = np.full(n_skills, -1)
    for b, a in alias_of.items():
        follower[idx[a]] = idx[b]
    return {"kinds": kinds, "effects": effects, "buddies": buddies, "alias_of": alias_of, "pop": pop,
            "pop_p": pop / pop.sum(), "partner": partner, "follower": follower,
            "eff_vec": np.array([effects[s] for s in ids]), "mixed_vec": np.array([kinds[s] == "mixed" for s in ids]),
            "unused_idx": np.array(sorted(idx[s] for s in unused), dtype=np.int64)}


def _retrieved_sets(rng: np.random.Generator, roles: dict[str, Any], invoked: np.ndarray, n_tasks: int,
                    co_retrieval: float, extra_rate: float, sign: float) -> tuple[list[list[int]], np.ndarray]:
    """Each task's retrieved skills (a primary, its alias, its buddy, maybe one extra) and the shift
    they give the enabled run's logit."""
    pop_p, partner, follower = roles["pop_p"], roles["partner"], roles["follower"]
    n_skills = pop_p.size
    empty = rng.random(n_tasks) < 0.05
    primary = rng.choice(n_skills, size=n_tasks, p=pop_p)
    with_buddy = rng.random(n_tasks) < co_retrieval
    with_extra = rng.random(n_tasks) < extra_rate
    extra_pick = rng.choice(n_skills, size=n_tasks, p=pop_p)
    signs = rng.choice([-1.0, 1.0], size=(n_tasks, n_skills))
    sets: list[list[int]] = []
    shift = np.zeros(n_tasks)
    for t in range(n_tasks):  # a few hundred tasks: building the sets is cheap
        if not invoked[t] or empty[t]:
            sets.append([])
            continue
        k = [int(primary[t])]
        if follower[k[0]] >= 0:
            k.append(int(follower[k[0]]))
        if partner[k[0]] >= 0 and with_buddy[t]:
            k.append(int(partner[k[0]]))
        e = int(extra_pick[t])
        if with_extra[t] and len(k) < 3 and e not in k and follower[e] < 0 and e not in roles["unused_idx"]:
            k.append(e)
        sets.append(k)
        ks = np.array(k)
        shift[t] = sign * float(np.sum(np.where(roles["mixed_vec"][ks], signs[t, ks], 1.0) * roles["eff_vec"][ks]))
    return sets, shift


def _model_records(rng: np.random.Generator, ids: list[str], roles: dict[str, Any], base: np.ndarray, model: str,
                   sign: float, *, benchmarks: Sequence[str], epochs: int, trigger_rate: float, selection: float,
                   co_retrieval: float, extra_rate: float, coupling: float, dilution: float,
                   task_noise: float) -> list[dict[str, Any]]:
    """One model's enabled and disabled records over every task and epoch."""
    n_tasks = base.size
    bench_of = np.arange(n_tasks) % len(benchmarks)
    a = base + rng.normal(0.0, 0.5)
    z = (a - a.mean()) / (a.std() or 1.0)
    p_call = _sigmoid(np.log(trigger_rate / (1 - trigger_rate)) + selection * z)
    invoked = rng.random(n_tasks) < p_call
    sets, shift = _retrieved_sets(rng, roles, invoked, n_tasks, co_retrieval, extra_rate, sign)
    p_neg = _sigmoid(a)
    p_pos = _sigmoid(a + shift)
    if task_noise > 0:  # a persistent per-task response to the prompt, as often for the worse
        jolt = np.abs(rng.normal(0.0, task_noise, n_tasks))
        to_enabled = rng.random(n_tasks) < 0.5
        p_pos = np.where(to_enabled, _sigmoid(a + shift + jolt), p_pos)
        p_neg = np.where(to_enabled, p_neg, _sigmoid(a + jolt))
    scores = [np.cumsum(-rng.uniform(0.5, 3.0, size=len(k))) + 9.0 + rng.normal() for k in sets]
    records: list[dict[str, Any]] = []
    for epoch in range(1, epochs + 1):
        u_neg = rng.random(n_tasks)
        u_pos = np.where(rng.random(n_tasks) < coupling, u_neg, rng.random(n_tasks))
        y_neg = u_neg < p_neg
        y_pos = u_pos < p_pos
        if dilution > 0:  # each injected skill derails the enabled run with the same probability
            n_inj = np.array([len(k) for k in sets])
            y_pos &= rng.random(n_tasks) >= 1.0 - (1.0 - dilution) ** n_inj
        for t in range(n_tasks):
            bench = benchmarks[bench_of[t]]
            common = {"task_id": f"{bench}/{t}", "model": model, "benchmark": bench, "epoch": epoch}
            rec = {**common, "condition": "enabled", "correct": bool(y_pos[t])}
            rec["retrievals"] = [{
                "query": f"task {t}",
                "skills": [{"id": ids[j], "score": round(max(float(s), 0.1), 3)}
                           for j, s in zip(sets[t], scores[t], strict=True)],
                "error": None,
            }] if invoked[t] else []
            records.append(rec)
            records.append({**common, "condition": "disabled", "correct": bool(y_neg[t])})
    return records


# ---------------------------------------------------------------- shapes of issue 27
# Shapes unlike `simulate`'s planted logit effects, to check the per-skill verdicts and the
# headline interval where they used to fail: retrieval tied to task difficulty, Zipf-like
# retrieval, and sparse one-sided flips. Each returns (records, truth) with truth a dict
# skill_id -> kind ("harmful" or "none").

def _records(task_sets: Sequence[Sequence[str]], y_neg: np.ndarray, y_pos: np.ndarray,
             model: str = "sim-model", bench: str = "sim-bench") -> list[dict[str, Any]]:
    """Run-log records of (tasks x epochs) outcomes; `task_sets[t]` is task t's retrieved set."""
    out: list[dict[str, Any]] = []
    n_tasks, epochs = y_neg.shape
    for e in range(epochs):
        for t in range(n_tasks):
            common = {"task_id": f"{bench}/{t}", "model": model, "benchmark": bench, "epoch": e + 1}
            k = task_sets[t]
            ret = [{"query": f"task {t}", "skills": [{"id": s, "score": 9.0 - i} for i, s in enumerate(k)],
                    "error": None}] if k else []
            out.append({**common, "condition": "enabled", "correct": bool(y_pos[t, e]), "retrievals": ret})
            out.append({**common, "condition": "disabled", "correct": bool(y_neg[t, e])})
    return out


def easy_hard(seed: int = 0, n_tasks: int = 800, n_skills: int = 20, n_harmful: int = 1,
              epochs: int = 2, perturb: float = 0.15, harm: float = 0.5
              ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Half the skills are retrieved on easy tasks (P(pass without skills) ~ 0.85), half on hard
    ones (~ 0.15); every injected skill perturbs the answer alike (the enabled outcome is the disabled
    one flipped with probability `perturb`, whichever skill: a harm where the task passed without
    skills, a rescue where it failed); `n_harmful` easy-task
    skills also derail the enabled run with probability `harm`."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    easy_ids, hard_ids = ids[: n_skills // 2], ids[n_skills // 2:]
    harmful = set(rng.choice(easy_ids, size=n_harmful, replace=False).tolist()) if n_harmful else set()
    easy = rng.random(n_tasks) < 0.5
    p = np.where(easy, rng.beta(8.5, 1.5, n_tasks), rng.beta(1.5, 8.5, n_tasks))
    sets = []
    for t in range(n_tasks):
        pool = easy_ids if easy[t] else hard_ids
        k = 1 + int(rng.random() < 0.4)
        sets.append(sorted(rng.choice(pool, size=k, replace=False).tolist()) if rng.random() < 0.8 else [])
    y_neg = rng.random((n_tasks, epochs)) < p[:, None]
    has = np.array([bool(k) for k in sets])[:, None]
    y_pos = y_neg ^ ((rng.random((n_tasks, epochs)) < perturb) & has)
    bad = np.array([any(s in harmful for s in k) for k in sets])
    derail = (rng.random((n_tasks, epochs)) < harm) & bad[:, None]
    y_pos = y_pos & ~derail
    return _records(sets, y_neg, y_pos), {s: ("harmful" if s in harmful else "none") for s in ids}


def zipf_library(seed: int = 0, n_tasks: int = 1500, n_skills: int = 200, n_harmful: int = 10,
                 harm: float = 0.4, perturb: float = 0.15, exponent: float = 1.0
                 ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Skills retrieved with Zipf-like popularity (1 to 3 per task); `n_harmful` of them, drawn at
    random among the `4 * n_harmful` most popular (so that they can be found), derail the enabled
    run with probability `harm`; every injected set perturbs alike. Most skills are retrieved a
    handful of times."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:03d}" for i in range(n_skills)]
    pop = 1.0 / np.arange(1, n_skills + 1) ** exponent
    pop = pop[rng.permutation(n_skills)]
    pop /= pop.sum()
    top = [ids[i] for i in np.argsort(-pop, kind="stable")[: 4 * n_harmful]]
    harmful = set(rng.choice(top, size=n_harmful, replace=False).tolist()) if n_harmful else set()
    p = 1.0 / (1.0 + np.exp(-rng.normal(0.3, 1.5, n_tasks)))
    sets = []
    for _ in range(n_tasks):
        if rng.random() < 0.2:
            sets.append([])
            continue
        k = 1 + rng.binomial(2, 0.3)
        sets.append(sorted(set(rng.choice(ids, size=k, p=pop).tolist())))
    y_neg = rng.random((n_tasks, 1)) < p[:, None]
    has = np.array([bool(k) for k in sets])[:, None]
    y_pos = y_neg ^ ((rng.random((n_tasks, 1)) < perturb) & has)
    bad = np.array([any(s in harmful for s in k) for k in sets])
    y_pos = y_pos & ~((rng.random((n_tasks, 1)) < harm) & bad[:, None])
    return _records(sets, y_neg, y_pos), {s: ("harmful" if s in harmful else "none") for s in ids}


def sparse_flips(seed: int = 0, n_tasks: int = 143, harm: float = 0.028, rescue: float = 0.0,
                 epochs: int = 1, express: float = 0.8) -> tuple[list[dict[str, Any]], float]:
    """Every task retrieves one skill; a task is harmed (passes without skills, fails with) with
    probability `harm` and rescued with probability `rescue`. With several epochs a harmed or
    rescued task shows it in each epoch with probability `express` (correlated epochs). Returns
    the records and the true RAE (expected flips per retrieving pair)."""
    rng = np.random.default_rng(seed)
    u = rng.random(n_tasks)
    kind = np.where(u < harm, -1, np.where(u < harm + rescue, 1, 0))
    shows = rng.random((n_tasks, epochs)) < (express if epochs > 1 else 1.0)
    base = rng.random((n_tasks, epochs)) < 0.5
    y_neg = np.where(kind[:, None] == -1, shows | base, np.where(kind[:, None] == 1, base & ~shows, base))
    y_pos = np.where(kind[:, None] == -1, base & ~shows, np.where(kind[:, None] == 1, shows | base, base))
    sets = [["skill-00"] for _ in range(n_tasks)]
    eff = express if epochs > 1 else 1.0
    return _records(sets, y_neg, y_pos), (rescue - harm) * eff


# ---------------------------------------------------------------- shapes of issue 51
def collinear_pair(seed: int = 0, n_tasks: int = 800, n_skills: int = 20, together: float = 0.25,
                   innocent_alone: float = 0.04, harm: float = 0.30, perturb: float = 0.15,
                   epochs: int = 1) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One harmful skill mostly co-retrieved with an innocent one: a `together` share of the tasks
    retrieves the pair (sometimes with one more skill), an `innocent_alone` share the innocent one
    without it, the harmful one is never retrieved apart; the other tasks retrieve 1-2 of the other
    skills (20% none). Every injected set perturbs alike (the enabled outcome is the disabled one
    flipped with probability `perturb`); the harmful skill also turns a `harm` share of the passes
    where it was retrieved into failures. truth: "harmful", "partner" (innocent) or "none"."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    bad, partner = (ids[int(i)] for i in rng.choice(n_skills, size=2, replace=False))
    others = [s for s in ids if s not in (bad, partner)]
    u = rng.random(n_tasks)
    sets: list[list[str]] = []
    for t in range(n_tasks):
        extra = [str(rng.choice(others))] if rng.random() < 0.3 else []
        if u[t] < together:
            sets.append(sorted([bad, partner, *extra]))
        elif u[t] < together + innocent_alone:
            sets.append(sorted([partner, *extra]))
        elif rng.random() < 0.8:
            sets.append(sorted(rng.choice(others, size=1 + int(rng.random() < 0.4), replace=False).tolist()))
        else:
            sets.append([])
    p = 1.0 / (1.0 + np.exp(-rng.normal(0.3, 1.5, n_tasks)))
    y_neg = rng.random((n_tasks, epochs)) < p[:, None]
    has = np.array([bool(k) for k in sets])[:, None]
    y_pos = y_neg ^ ((rng.random((n_tasks, epochs)) < perturb) & has)
    hit = np.array([bad in k for k in sets])[:, None]
    y_pos = y_pos & ~((rng.random((n_tasks, epochs)) < harm) & hit)
    truth = {s: ("harmful" if s == bad else "partner" if s == partner else "none") for s in ids}
    return _records(sets, y_neg, y_pos), truth


def correlated_epochs(seed: int = 0, n_tasks: int = 200, epochs: int = 5, icc: float = 0.8,
                      retrieve: float = 0.7) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """No effect on average, epochs strongly correlated within a task: each task's pass
    probability with and without skills is drawn on its own from Beta(a, a), intraclass correlation
    `icc` (a = (1 - icc) / (2 icc)), the same for every epoch: a task that skills happen to help (or
    hurt) does so in most epochs, while the mean effect over tasks is 0. A `retrieve` share of the
    tasks retrieves one of 10 skills. Epochs repeat a task: a test that counts them as tasks
    rejects far more often than its level."""
    rng = np.random.default_rng(seed)
    a = (1.0 - icc) / (2.0 * icc)
    p_neg, p_pos = rng.beta(a, a, n_tasks), rng.beta(a, a, n_tasks)
    ids = [f"skill-{i:02d}" for i in range(10)]
    sets = [[str(rng.choice(ids))] if rng.random() < retrieve else [] for _ in range(n_tasks)]
    y_neg = rng.random((n_tasks, epochs)) < p_neg[:, None]
    y_pos = rng.random((n_tasks, epochs)) < p_pos[:, None]
    return _records(sets, y_neg, y_pos), {s: "none" for s in ids}


def two_sided(seed: int = 0, n_tasks: int = 800, n_skills: int = 20, rescue: float = 0.35,
              harm: float = 0.35, noise: float = 0.18, retrieve: float = 0.75, epochs: int = 1,
              replicate: bool = False) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Skills that help some tasks and hurt others: where a task retrieves skills (1-2 of
    `n_skills`, a `retrieve` share of the tasks), a run that fails without skills is rescued with
    probability `rescue` and one that passes is harmed with probability `harm`; every other pair
    flips with probability `noise` (sampling noise), so retrieving pairs flip far more often while
    RAE nets the two to about 0. `replicate`: also a replicate arm record (a second run without
    skills, `noise` flips) per pair. truth: every skill "both"."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    sets = [sorted(rng.choice(ids, size=1 + int(rng.random() < 0.4), replace=False).tolist())
            if rng.random() < retrieve else [] for _ in range(n_tasks)]
    has = np.array([bool(k) for k in sets])[:, None]
    p = 1.0 / (1.0 + np.exp(-rng.normal(0.3, 1.5, n_tasks)))
    y_neg = rng.random((n_tasks, epochs)) < p[:, None]
    u = rng.random((n_tasks, epochs))
    flip = np.where(has, np.where(y_neg, u < harm, u < rescue), u < noise)
    y_pos = y_neg ^ flip
    recs = _records(sets, y_neg, y_pos)
    if replicate:
        y_rep = y_neg ^ (rng.random((n_tasks, epochs)) < noise)
        for e in range(epochs):
            for t in range(n_tasks):
                recs.append({"task_id": f"sim-bench/{t}", "model": "sim-model", "benchmark": "sim-bench",
                             "epoch": e + 1, "condition": "disabled", "arm": "replicate",
                             "correct": bool(y_rep[t, e])})
    return recs, {s: "both" for s in ids}


def difficulty_split(seed: int = 0, n_tasks: int = 800, n_skills: int = 20, gap: float = 0.15,
                     harm: float = 0.3, n_harmful: int = 1, models: Sequence[str] = ("sim-model",),
                     epochs: int = 1) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Half the skills are retrieved by easier tasks, half by harder ones (pass rates `gap` apart,
    around 0.5), 1-2 skills per task (80% of tasks retrieve). Runs are sampled: with and without
    skills a task passes with its own probability, drawn independently, so mid-difficulty tasks
    flip more in both directions whatever was retrieved. `n_harmful` skills (of the easier half)
    also turn a `harm` share of the passes where they were retrieved into failures. Each model
    draws its own runs over the same tasks and retrievals. truth: "harmful" or "none"."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    easy_ids, hard_ids = ids[: n_skills // 2], ids[n_skills // 2:]
    harmful = set(rng.choice(easy_ids, size=n_harmful, replace=False).tolist()) if n_harmful else set()
    easy = rng.random(n_tasks) < 0.5
    logit = rng.normal(0.0, 1.2, n_tasks) + np.where(easy, 1.0, -1.0) * 2.0 * gap
    p = 1.0 / (1.0 + np.exp(-logit))
    sets = []
    for t in range(n_tasks):
        pool = easy_ids if easy[t] else hard_ids
        k = 1 + int(rng.random() < 0.4)
        sets.append(sorted(rng.choice(pool, size=k, replace=False).tolist()) if rng.random() < 0.8 else [])
    bad = np.array([any(s in harmful for s in k) for k in sets])[:, None]
    out: list[dict[str, Any]] = []
    for model in models:
        y_neg, y_pos = _sampled(rng, p, epochs)
        y_pos = y_pos & ~((rng.random((n_tasks, epochs)) < harm) & bad)
        out += _records(sets, y_neg, y_pos, model=model)
    return out, {s: ("harmful" if s in harmful else "none") for s in ids}


def drift_epochs(seed: int = 0, n_tasks: int = 400, n_skills: int = 12, epochs: int = 3, drift: float = 0.6,
                 harm: float = 0.4, n_harmful: int = 1) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Pass rates drift over epochs (the logit of every task moves by `drift` per epoch, in both
    conditions alike: a server or a grader that changed between epochs); each task retrieves 1-2
    skills (80% of tasks) in every epoch, runs are sampled per epoch; `n_harmful` skills turn a
    `harm` share of the passes where they were retrieved into failures. truth: "harmful" or "none"."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    harmful = set(rng.choice(ids, size=n_harmful, replace=False).tolist()) if n_harmful else set()
    sets = [sorted(rng.choice(ids, size=1 + int(rng.random() < 0.4), replace=False).tolist())
            if rng.random() < 0.8 else [] for _ in range(n_tasks)]
    logit = rng.normal(0.0, 1.5, n_tasks)[:, None] + drift * (np.arange(epochs)[None, :] - (epochs - 1) / 2)
    p = 1.0 / (1.0 + np.exp(-logit))
    y_neg = rng.random((n_tasks, epochs)) < p
    y_pos = rng.random((n_tasks, epochs)) < p
    bad = np.array([any(s in harmful for s in k) for k in sets])[:, None]
    y_pos = y_pos & ~((rng.random((n_tasks, epochs)) < harm) & bad)
    return _records(sets, y_neg, y_pos), {s: ("harmful" if s in harmful else "none") for s in ids}


# ---------------------------------------------------------------- shapes of issue 52
def _sampled(rng: np.random.Generator, p: np.ndarray, epochs: int) -> tuple[np.ndarray, np.ndarray]:
    """(y_neg, y_pos): both conditions of every epoch drawn on their own with the task's pass
    probability (no effect of skills at all; runs are samples)."""
    return (rng.random((p.size, epochs)) < p[:, None]), (rng.random((p.size, epochs)) < p[:, None])


def topic_difficulty(seed: int = 0, n_tasks: int = 900, n_topics: int = 8, skills_per_topic: int = 20,
                     spread: float = 1.5, epochs: int = 1) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A null library over topics of different difficulty: topic t's tasks pass with logit
    N(m_t, 1), m_t spread evenly over [-spread, +spread] (half the topics hard); each task retrieves
    1-3 skills of its own topic (85% of tasks); runs are sampled, so no skill does anything. Skills
    of hard topics are retrieved by tasks that, failing without skills, are rarely rescued, and
    passing, are often harmed: the same disabled outcome is not the same difficulty."""
    rng = np.random.default_rng(seed)
    ids = [f"t{t}-skill-{i:02d}" for t in range(n_topics) for i in range(skills_per_topic)]
    means = np.linspace(-spread, spread, n_topics)
    topic = rng.integers(0, n_topics, n_tasks)
    p = 1.0 / (1.0 + np.exp(-(means[topic] + rng.normal(0.0, 1.0, n_tasks))))
    sets = []
    for t in range(n_tasks):
        pool = ids[topic[t] * skills_per_topic:(topic[t] + 1) * skills_per_topic]
        sets.append(sorted(rng.choice(pool, size=int(rng.integers(1, 4)), replace=False).tolist())
                    if rng.random() < 0.85 else [])
    y_neg, y_pos = _sampled(rng, p, epochs)
    return _records(sets, y_neg, y_pos), dict.fromkeys(ids, "none")


def depth_harm(seed: int = 0, n_tasks: int = 900, n_skills: int = 30, deep: int = 4, harm: float = 0.4,
               ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Harm from retrieval depth only: tasks retrieve 1-6 skills (85% of tasks), any skill alike;
    a run given `deep` or more skills turns a `harm` share of its passes into failures. No skill
    is worse than another. Runs are sampled."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    p = 1.0 / (1.0 + np.exp(-rng.normal(0.3, 1.5, n_tasks)))
    sizes = rng.choice([1, 2, 3, 4, 5, 6], size=n_tasks, p=[0.25, 0.25, 0.2, 0.15, 0.1, 0.05])
    sets = [sorted(rng.choice(ids, size=int(k), replace=False).tolist()) if rng.random() < 0.85 else []
            for k in sizes]
    y_neg, y_pos = _sampled(rng, p, 1)
    is_deep = np.array([len(k) >= deep for k in sets])[:, None]
    y_pos = y_pos & ~((rng.random(y_pos.shape) < harm) & is_deep)
    return _records(sets, y_neg, y_pos), dict.fromkeys(ids, "none")


def benchmark_split(seed: int = 0, n_tasks: int = 900, n_skills: int = 20, effect: float = 0.4,
                    coupling: float = 0.7) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One model, two benchmarks (code, math), the same library: one skill rescues an `effect`
    share of the code runs that fail without it and harms the same share of the math runs that
    pass; the others do nothing. Each task retrieves 1-2 skills (85%); the run with skills repeats
    the run without them with probability `coupling`, else is drawn again from the task's pass
    rate. truth: the skill is "split", the others "none"."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    split = ids[int(rng.integers(0, n_skills))]
    others = [s for s in ids if s != split]
    out: list[dict[str, Any]] = []
    for bench in ("code", "math"):
        n = n_tasks // 2
        p = 1.0 / (1.0 + np.exp(-rng.normal(0.3, 1.5, n)))
        sets = []
        for _ in range(n):
            if rng.random() >= 0.85:
                sets.append([])
                continue
            if rng.random() < 0.3:  # the split skill, sometimes with another
                k = [split] + (rng.choice(others, size=1).tolist() if rng.random() < 0.3 else [])
            else:
                k = rng.choice(others, size=1 + int(rng.random() < 0.3), replace=False).tolist()
            sets.append(sorted(k))
        y_neg, y_pos = _sampled(rng, p, 1)
        y_pos = np.where(rng.random(y_pos.shape) < coupling, y_neg, y_pos)
        has = np.array([split in k for k in sets])[:, None]
        u = rng.random(y_pos.shape) < effect
        if bench == "code":
            y_pos = np.where(has & ~y_neg & u, True, y_pos)
        else:
            y_pos = np.where(has & y_neg & u, False, y_pos)
        out += _records(sets, y_neg, y_pos, bench=bench)
    return out, {s: ("split" if s == split else "none") for s in ids}


def failure_driven(seed: int = 0, n_tasks: int = 900, n_skills: int = 20, culprit: bool = False,
                   ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The agent searches because it is failing: no skill does anything, but a run that fails
    searches (and gets 1-2 skills) with probability 0.8, one that passes with 0.3, so retrieving
    pairs fail more with skills than without. With `culprit`, one skill is fetched mostly by
    failing runs (a failing run takes it with probability 0.5, a passing one with 0.05)."""
    rng = np.random.default_rng(seed)
    ids = [f"skill-{i:02d}" for i in range(n_skills)]
    bad = ids[int(rng.integers(0, n_skills))] if culprit else None
    others = [s for s in ids if s != bad]
    p = 1.0 / (1.0 + np.exp(-rng.normal(0.3, 1.5, n_tasks)))
    y_neg, y_pos = _sampled(rng, p, 1)
    sets = []
    for t in range(n_tasks):
        fails = not y_pos[t, 0]
        if rng.random() >= (0.8 if fails else 0.3):
            sets.append([])
            continue
        k = rng.choice(others, size=1 + int(rng.random() < 0.4), replace=False).tolist()
        if bad is not None and rng.random() < (0.5 if fails else 0.05):
            k = [bad, *k[:1]]
        sets.append(sorted(k))
    return _records(sets, y_neg, y_pos), {s: ("fetched-by-failure" if s == bad else "none") for s in ids}
