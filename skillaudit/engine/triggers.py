"""Trigger runs (`skillaudit triggers --queries`): each labelled query given to an agent with the whole
library offered (every rival present), once per epoch, and what fired logged.

An episode is the query as the task prompt, the skills offered as in real use: catalog mode lists
every name and description and the agent loads what it chooses (`load_skill`); search mode gives
it `search_skills` (BM25, top-k). A skill *fired* when its text reached the agent: a load, or a
search hit, of a call without an error. Records are run-log records (`benchmark: "triggers"`,
`condition: "enabled"`, the query id as `task_id`), so a re-run resumes, and `meta.fired` lists
what fired, `meta.trigger` the query's labels. No answer is graded (`correct` is false).

Before any model call the plan says how many episodes and about how many tokens (prompt and output) they take
(`estimate`); `budget_tokens` stops starting episodes once the tokens logged this session reach it
(the rest are planned again by the next run: resumable).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillaudit import __version__
from skillaudit.agents.agent import TOOL_INTRO as SEARCH_TOOL_INTRO
from skillaudit.agents.agent import AgentConfig
from skillaudit.agents.protocol import (
    CATALOG_INTRO,
    LOAD_SPEC,
    TEXT_TOOLS,
    Skills,
    call_agent,
    catalog_hash,
    catalog_listing,
    library_hash,
)
from skillaudit.agents.retrieve import SkillIndex
from skillaudit.engine.loop import RunSummary, engine_for
from skillaudit.engine.options import task_seed
from skillaudit.engine.output import Writer, existing_records, prepare_output, record_key
from skillaudit.engine.plan import Episode, Plan
from skillaudit.engine.taskrun import _agent_of, _error_of
from skillaudit.errors import InputError
from skillaudit.library import Library
from skillaudit.runs.records import fired_of

BENCHMARK = "triggers"
CHARS_PER_TOKEN = 4  # the usual English rate of BPE tokenizers; an estimate, said as one


@dataclass
class TriggerOptions:
    """What `skillaudit triggers --queries` runs (plain data; the CLI fills it in)."""

    queries: str
    skills: str
    out: str
    agent: AgentConfig
    agent_spec: str | None = None
    skills_mode: str = "catalog"
    epochs: int = 1
    seed: int = 0
    concurrency: int = 1
    episode_timeout: float | None = None
    retry_errors: bool = False
    model_label: str | None = None
    budget_tokens: int | None = None
    engine: str = "threads"
    changed: Any = None  # `--changed`: an `analysis.triggers.Changed`; only the queries it concerns run
    distractors: tuple[int, ...] = ()  # `--distractors`: catalog sizes of the sweep (distractor skills added)


@dataclass
class TriggerPlan:
    queries: list[Any]
    library: Any
    index: SkillIndex
    plan: Plan
    model_label: str
    est_tokens: int | None  # None: not estimated (Harbor's agents write their own prompts)
    epochs: int
    warnings: list[str] = field(default_factory=list)
    catalogs: dict[int, SkillIndex] = field(default_factory=dict)  # distractors added -> the catalog offered

    def sentence(self) -> str:
        n = len(self.plan.episodes)
        sizes = f" x {len(self.catalogs)} catalog size(s)" if len(self.catalogs) > 1 else ""
        cost = (f"about {self.est_tokens:,} tokens, prompt and output (estimate: {CHARS_PER_TOKEN} characters a token)"
                if self.est_tokens is not None else "tokens not estimated (Harbor's agent decides its own prompts)")
        return (f"{n} episode(s) to run ({len(self.queries)} queries x {self.epochs} epoch(s){sizes}, "
                f"{self.plan.skipped} already logged), {cost}")


def estimate_tokens(index: SkillIndex, queries: list[Any], mode: str, agent: AgentConfig) -> dict[str, int]:
    """Tokens of one episode per query, roughly, for a typical episode of two turns: both prompts
    (the system prompt with the catalog, or the search tool's introduction, and the query), one
    load's mean body (search mode: top-k bodies) and both turns' output cap."""
    if mode == "catalog":
        system = CATALOG_INTRO.format(max_calls=agent.max_calls, listing=catalog_listing(index)) + TEXT_TOOLS.format(
            tools=LOAD_SPEC)
    else:
        system = SEARCH_TOOL_INTRO
    bodies = [len(s.body) for s in index.skills] or [0]
    mean_body = sum(bodies) / len(bodies)
    out = {}
    for q in queries:
        first = len(system) + len(q.query)
        # a typical episode: the first turn, then one load and the answer turn with the body in it
        chars = 2 * first + mean_body * (1 if mode == "catalog" else agent.top_k)
        out[q.id] = int(chars / CHARS_PER_TOKEN) + 2 * agent.max_tokens
    return out


def plan_triggers(opts: TriggerOptions, library: Any = None) -> TriggerPlan:
    """The library (`library`, when the caller has loaded `opts.skills` already), the checked queries
    and the episodes not yet logged; no model call. With
    `distractors`, one catalog per size: the library and that many distractor skills (nested: a
    larger catalog holds the smaller one's), each query's runs logged as `<query id>#d<size>`."""
    from skillaudit.library import load_library
    from skillaudit.tasks.queries import load_queries

    library = library if library is not None else load_library(opts.skills)
    if not len(library):
        raise InputError(f"--skills {opts.skills}: no skills")
    queries = load_queries(opts.queries, library.ids)
    if opts.changed is not None:
        keep = set(opts.changed.queries(queries))
        queries = [q for q in queries if q.id in keep]
    index = SkillIndex(library)
    label = opts.model_label or (opts.agent_spec if opts.agent_spec else opts.agent.model)
    prepare_output(Path(opts.out), opts.retry_errors)  # drops error records with --retry-errors, a cut tail
    # only records made with this library count as done: after an edit every query runs again
    done = {record_key(rec) for rec in current_records(Path(opts.out), label, library_hash(index))}
    catalogs = {0: index}
    if opts.distractors:
        pool = distractor_skills(set(library.ids), opts.seed)
        for k in opts.distractors:
            if k > len(pool):
                raise InputError(f"--distractors {k}: the bundled set has {len(pool)} distractor skills")
            if k:
                # listed as a real catalog lists them: by name, distractors among the library's skills
                catalogs[k] = SkillIndex(Library(skills=tuple(sorted((*library.skills, *pool[:k]), key=lambda s: s.id)),
                                                 source=library.source))
    episodes = [Episode(run_id(q.id, k), "enabled", epoch, source=(q, k))
                for k in sorted(catalogs) for epoch in range(1, opts.epochs + 1) for q in queries]
    plan = Plan.of(Path(opts.out), episodes, done, label, BENCHMARK, len(queries),
                   label=f"triggers {label}", warnings=list(library.warnings))
    est = None
    if opts.engine != "harbor":
        per_query = {k: estimate_tokens(ix, queries, opts.skills_mode, opts.agent) for k, ix in catalogs.items()}
        est = sum(per_query[ep.source[1]][ep.source[0].id] for ep in plan.episodes)
    return TriggerPlan(queries, library, index, plan, label, est, opts.epochs, list(library.warnings), catalogs)


def run_id(query_id: str, distractors: int) -> str:
    """The `task_id` of a query's runs in a catalog with `distractors` distractor skills added."""
    return query_id if not distractors else f"{query_id}#d{distractors}"


DISTRACTOR_BODY = "(A distractor skill of the catalog-size sweep: it has no instructions.)"


def distractor_skills(taken: set[str], seed: int = 0) -> list[Any]:
    """The bundled distractor skills (`skillaudit/demo/distractors.jsonl`: names and descriptions of
    skills from domains unlike the bundled library's), those whose name the library uses left out,
    in a seeded order."""
    import json
    import random
    from importlib import resources

    from skillaudit.library import Skill

    rows = [json.loads(line) for line in resources.files("skillaudit.demo").joinpath("distractors.jsonl")
            .read_text(encoding="utf-8").splitlines() if line.strip()]
    out = [Skill(id=r["name"], name=r["name"], description=r["description"], body=DISTRACTOR_BODY)
           for r in rows if "name" in r and r["name"] not in taken]
    random.Random(seed).shuffle(out)
    return out


def current_records(out: Path, model_label: str, lib_hash: str) -> list[dict[str, Any]]:
    """The trigger records of `out` made by this model with this library (older ones are history)."""
    return [rec for _, rec in existing_records(out)
            if rec.get("benchmark") == BENCHMARK and rec.get("model") == model_label
            and isinstance(rec.get("meta"), dict) and rec["meta"].get("library_hash") == lib_hash]


def run_triggers(opts: TriggerOptions, tp: TriggerPlan | None = None, quiet: bool = False) -> RunSummary:
    """Run the planned episodes through the engine, appending a record each to `opts.out`."""
    tp = tp or plan_triggers(opts)
    plan, index = tp.plan, tp.index
    summary = RunSummary(out=opts.out, n_tasks=plan.n_tasks, planned=len(plan.episodes), skipped=plan.skipped,
                         warnings=plan.warnings)
    if not plan.episodes:
        return summary
    agent_fn, agent_name, client = _agent_of(opts)  # --agent, or the built-in loop of --skills-mode
    base_meta: dict[str, Any] = {"harness": f"skillaudit {__version__}", "library_hash": library_hash(index),
                                 "skills_mode": opts.skills_mode, "agent": agent_name}
    if not opts.agent_spec:
        base_meta.update(opts.agent.public())
    spent = _Budget(opts.budget_tokens)

    catalogs = tp.catalogs or {0: index}
    cat_hashes = {k: catalog_hash(ix) for k, ix in catalogs.items()}

    def one(ep: Episode) -> dict[str, Any] | list[dict[str, Any]]:
        if spent.reached():
            return []  # not logged: the next run plans it again
        q, k = ep.source
        seed = task_seed(opts.seed, q.id, ep.epoch)
        rec: dict[str, Any] = {
            "task_id": ep.task_id, "condition": "enabled", "correct": False, "model": tp.model_label,
            "benchmark": BENCHMARK, "epoch": ep.epoch, "invoked": False, "retrievals": [], "answer": "",
            "meta": {**base_meta, "seed": seed, "trigger": q.to_dict(), "distractors": k,
                     "catalog_hash": cat_hashes[k], "catalog_size": len(catalogs[k].skills)}, "error": None,
        }
        skills = Skills(catalogs[k], opts.agent.top_k)
        task = {"id": ep.task_id, "prompt": q.query, "kind": "answer", "seed": seed, "epoch": ep.epoch,
                "benchmark": BENCHMARK}
        try:
            out = call_agent(agent_fn, task, skills, opts.episode_timeout, agent_name)
        except Exception as exc:  # an endpoint down or a broken agent: an error record, never "did not fire"
            rec["error"] = _error_of(exc, ep.task_id)
            return rec
        spent.add(out.usage)
        rec["invoked"] = out.invoked
        rec["retrievals"] = out.retrievals
        rec["answer"] = out.answer
        rec["meta"].update({"latency_s": round(out.latency_s, 3), "usage": out.usage, "listed": out.listed,
                            "loaded": out.loaded, "fired": fired_of(out.retrievals)})
        for k, v in out.meta.items():
            rec["meta"].setdefault(k, v)
        return rec

    engine_for(opts.engine)(plan, one, Writer(Path(opts.out)), client, summary, opts.concurrency, quiet, None)
    summary.budget_stopped = spent.reached()  # type: ignore[attr-defined]
    return summary


class _Budget:
    """Prompt and completion tokens logged this session, against `--budget-tokens`."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.used, self._lock = limit, 0, threading.Lock()

    def add(self, usage: dict[str, Any]) -> None:
        with self._lock:
            self.used += int(usage.get("prompt_tokens", 0) or 0) + int(usage.get("completion_tokens", 0) or 0)

    def reached(self) -> bool:
        return self.limit is not None and self.used >= self.limit


# ---------------------------------------------------------------- through Harbor's agents (`--engine harbor`)
@dataclass
class HarborTriggerOptions:
    """`triggers --engine harbor`: Harbor's own agent (Claude Code, Codex, terminus-2, ...) with the
    library injected as in real use; the CLI fills it in."""

    agent_name: str
    model: str | None = None
    env: str = "docker"
    n_concurrent: int = 1
    agent_kwargs: tuple[tuple[str, str], ...] = ()
    harbor_args: tuple[str, ...] = ()
    jobs_dir: str | None = None
    image: str = "python:3.12-slim"  # the task container's image (FROM of each generated task)
    no_network: bool = False  # the containers on network_mode none (agents that call their model from the host)


TASK_TOML = '''schema_version = "1.4"

[metadata]
author_name = "skillaudit triggers"
tags = ["skillaudit", "triggers"]

[verifier]
timeout_sec = 60.0
environment_mode = "shared"

[agent]
timeout_sec = {timeout}

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
'''


def harbor_trigger_dataset(queries: list[Any], folder: Path, h: HarborTriggerOptions,
                           timeout_s: float | None = None) -> dict[str, str]:
    """One Harbor task per query under `folder` (named `q-0001`, ... in query order): the query as
    the instruction, a verifier that grades nothing (reward 1: only what fired is read), the
    container from `h.image`. Written atomically per file; returns {task name: query id}."""
    from skillaudit.util.files import atomic_write_text

    names = {}
    for i, q in enumerate(queries, 1):
        name = f"q-{i:04d}"
        names[name] = q.id
        t = folder / name
        (t / "environment").mkdir(parents=True, exist_ok=True)
        (t / "tests").mkdir(exist_ok=True)
        atomic_write_text(t / "task.toml", TASK_TOML.format(timeout=float(timeout_s or 600.0)))
        atomic_write_text(t / "instruction.md", q.query.rstrip() + "\n")
        atomic_write_text(t / "environment" / "Dockerfile", f"FROM {h.image}\nWORKDIR /app\n")
        if h.no_network:
            atomic_write_text(t / "environment" / "docker-compose.yaml", "services:\n  main:\n    network_mode: none\n")
        atomic_write_text(t / "tests" / "test.sh", "#!/bin/bash\n# skillaudit triggers: nothing is graded\n"
                          "mkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n")
    return names


def run_triggers_harbor(opts: TriggerOptions, tp: TriggerPlan, h: HarborTriggerOptions,
                        say: Any = None, quiet: bool = False) -> RunSummary:
    """The queries as Harbor tasks, run by Harbor's agent with the skills folder injected (as the
    agent meets skills in real use: nothing pasted into the prompt), `opts.epochs` attempts each;
    the trials imported (`importers.harbor`: skill use read from the agent's own log) and written
    to `opts.out` as trigger records. A re-run resumes Harbor's job and writes nothing twice."""
    import time

    from skillaudit.engine.harbor import (
        INSTALL_HINT,
        HarborRun,
        HarborSummary,
        commands,
        find_harbor,
        write_configs,
    )
    from skillaudit.engine.harbor import _run_jobs as run_jobs
    from skillaudit.errors import HarnessError
    from skillaudit.importers.harbor import import_harbor

    say = say or (lambda _m: None)
    out = Path(opts.out)
    root = Path(h.jobs_dir) if h.jobs_dir else Path(f"{opts.out}.harbor")
    names = harbor_trigger_dataset(tp.queries, root / "tasks", h, opts.episode_timeout)
    planned = {ep.source[0].id for ep in tp.plan.episodes}
    todo = sorted(name for name, qid in names.items() if qid in planned)
    summary = RunSummary(out=opts.out, n_tasks=len(names), planned=len(tp.plan.episodes), skipped=tp.plan.skipped)
    if not todo:
        return summary
    run = HarborRun(dataset=str(root / "tasks"), agent_name=h.agent_name, skills=opts.skills, out=opts.out,
                    model=h.model, env=h.env, trials=opts.epochs, n_concurrent=h.n_concurrent,
                    agent_kwargs=h.agent_kwargs, harbor_args=h.harbor_args, task_ids=tuple(todo), jobs_dir=str(root),
                    job_name=f"{out.stem}-triggers", model_label=tp.model_label, skills_only=True)
    harbor = find_harbor()
    if harbor is None:
        raise HarnessError(INSTALL_HINT)
    paths = write_configs(run)
    t0 = time.monotonic()
    hs = HarborSummary(out=opts.out)
    run_jobs(run, commands(run, paths, harbor), quiet, say, hs)
    folder = run.jobs_path / run.job_names()[0]
    if not folder.is_dir():
        raise HarnessError(f"harbor wrote no job folder {folder}")
    records, _report = import_harbor([str(folder)], model=tp.model_label, offered=opts.skills, tasks=str(root / "tasks"),
                                     enabled_only=True)
    lib_hash = library_hash(tp.index)
    by_id = {q.id: q for q in tp.queries}
    new: list[dict[str, Any]] = []
    for rec in records:
        qid = names.get(str(rec.get("task_id")))
        if qid is None or rec.get("condition") != "enabled":
            continue
        meta = dict(rec.get("meta") or {})
        retrievals = rec.get("retrievals") or []
        meta.update({"harness": f"skillaudit {__version__}", "library_hash": lib_hash, "skills_mode": "harbor",
                     "agent": f"harbor {h.agent_name}", "trigger": by_id[qid].to_dict(), "distractors": 0,
                     "harbor_task": rec.get("task_id"), "fired": fired_of(retrievals)})
        new.append({"task_id": qid, "condition": "enabled", "correct": False, "model": tp.model_label,
                    "benchmark": BENCHMARK, "epoch": int(rec.get("epoch", 1) or 1), "invoked": bool(meta["fired"]),
                    "retrievals": retrievals, "answer": "", "meta": meta, "error": rec.get("error")})
    done = {record_key(r) for r in current_records(out, tp.model_label, lib_hash)}
    writer = Writer(out)
    try:
        for rec in new:
            if record_key(rec) not in done:
                writer.write(rec)
                summary.written += 1
                summary.errors += rec["error"] is not None
    finally:
        writer.close()
    summary.wall_s = time.monotonic() - t0
    return summary
