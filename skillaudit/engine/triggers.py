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

import hashlib
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
    catalog_agent,
    catalog_hash,
    catalog_listing,
    load_agent,
    search_agent,
)
from skillaudit.agents.retrieve import SkillIndex
from skillaudit.engine.loop import RunSummary, engine_for
from skillaudit.engine.options import task_seed
from skillaudit.engine.output import Writer, existing_records, prepare_output, record_key
from skillaudit.engine.plan import Episode, Plan
from skillaudit.errors import InputError

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
    only_queries: tuple[str, ...] | None = None  # `--changed`: the queries that concern a changed skill


@dataclass
class TriggerPlan:
    queries: list[Any]
    library: Any
    index: SkillIndex
    plan: Plan
    model_label: str
    est_tokens: int
    epochs: int
    warnings: list[str] = field(default_factory=list)

    def sentence(self) -> str:
        n = len(self.plan.episodes)
        return (f"{n} episode(s) to run ({len(self.queries)} queries x {self.epochs} epoch(s), "
                f"{self.plan.skipped} already logged), about {self.est_tokens:,} tokens, prompt and output "
                f"(estimate: {CHARS_PER_TOKEN} characters a token)")


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


def plan_triggers(opts: TriggerOptions) -> TriggerPlan:
    """The library, the checked queries and the episodes not yet logged; no model call."""
    from skillaudit.library import load_library
    from skillaudit.tasks.queries import load_queries

    library = load_library(opts.skills)
    if not len(library):
        raise InputError(f"--skills {opts.skills}: no skills")
    queries = load_queries(opts.queries, library.ids)
    if opts.only_queries is not None:
        keep = set(opts.only_queries)
        queries = [q for q in queries if q.id in keep]
    index = SkillIndex(library)
    label = opts.model_label or (opts.agent_spec if opts.agent_spec else opts.agent.model)
    prepare_output(Path(opts.out), opts.retry_errors)  # drops error records with --retry-errors, a cut tail
    # only records made with this library count as done: after an edit every query runs again
    done = {record_key(rec) for rec in current_records(Path(opts.out), label, library_hash(index))}
    episodes = [Episode(q.id, "enabled", epoch, source=q) for epoch in range(1, opts.epochs + 1) for q in queries]
    plan = Plan.of(Path(opts.out), episodes, done, label, BENCHMARK, len(queries),
                   label=f"triggers {label}", warnings=list(library.warnings))
    per_query = estimate_tokens(index, queries, opts.skills_mode, opts.agent)
    est = sum(per_query[ep.task_id] for ep in plan.episodes)
    return TriggerPlan(queries, library, index, plan, label, est, opts.epochs, list(library.warnings))


def library_hash(index: SkillIndex) -> str:
    """The hash of every offered skill's content, in order (`meta.library_hash` of each record)."""
    return hashlib.sha256("".join(s.content_hash for s in index.skills).encode()).hexdigest()[:16]


def current_records(out: Path, model_label: str, lib_hash: str) -> list[dict[str, Any]]:
    """The trigger records of `out` made by this model with this library (older ones are history)."""
    return [rec for _, rec in existing_records(out)
            if rec.get("benchmark") == BENCHMARK and rec.get("model") == model_label
            and isinstance(rec.get("meta"), dict) and rec["meta"].get("library_hash") == lib_hash]


def fired_of(retrievals: list[dict[str, Any]]) -> list[str]:
    """The skills whose text reached the agent: hits of the calls without an error, first-seen order."""
    out: list[str] = []
    for call in retrievals:
        if not isinstance(call, dict) or call.get("error"):
            continue
        for h in call.get("skills") or []:
            sid = h.get("id") if isinstance(h, dict) else h
            if isinstance(sid, str) and sid not in out:
                out.append(sid)
    return out


def run_triggers(opts: TriggerOptions, tp: TriggerPlan | None = None, quiet: bool = False) -> RunSummary:
    """Run the planned episodes through the engine, appending a record each to `opts.out`."""
    tp = tp or plan_triggers(opts)
    plan, index = tp.plan, tp.index
    summary = RunSummary(out=opts.out, n_tasks=plan.n_tasks, planned=len(plan.episodes), skipped=plan.skipped,
                         warnings=plan.warnings)
    if not plan.episodes:
        return summary
    if opts.agent_spec:
        agent_fn, agent_name, client = load_agent(opts.agent_spec), opts.agent_spec, _Null()
    else:
        from skillaudit.agents.agent import ChatClient

        client = ChatClient(opts.agent)
        agent_fn = (catalog_agent if opts.skills_mode == "catalog" else search_agent)(client, opts.agent)
        agent_name = f"built-in {opts.skills_mode} agent"
    lib_hash = library_hash(index)
    base_meta: dict[str, Any] = {"harness": f"skillaudit {__version__}", "library_hash": lib_hash,
                                 "catalog_hash": catalog_hash(index), "skills_mode": opts.skills_mode,
                                 "agent": agent_name}
    if not opts.agent_spec:
        base_meta.update(opts.agent.public())
    spent = _Budget(opts.budget_tokens)

    def one(ep: Episode) -> dict[str, Any] | list[dict[str, Any]]:
        if spent.reached():
            return []  # not logged: the next run plans it again
        q = ep.source
        seed = task_seed(opts.seed, q.id, ep.epoch)
        rec: dict[str, Any] = {
            "task_id": q.id, "condition": "enabled", "correct": False, "model": tp.model_label,
            "benchmark": BENCHMARK, "epoch": ep.epoch, "invoked": False, "retrievals": [], "answer": "",
            "meta": {**base_meta, "seed": seed, "trigger": q.to_dict()}, "error": None,
        }
        skills = Skills(index, opts.agent.top_k)
        task = {"id": q.id, "prompt": q.query, "kind": "answer", "seed": seed, "epoch": ep.epoch,
                "benchmark": BENCHMARK}
        try:
            out = call_agent(agent_fn, task, skills, opts.episode_timeout, agent_name)
        except Exception as exc:  # an endpoint down or a broken agent: an error record, never "did not fire"
            from skillaudit.engine.taskrun import _error_of

            rec["error"] = _error_of(exc, q.id)
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


class _Null:
    def close(self) -> None:
        pass


class _Budget:
    """Prompt and completion tokens logged this session, against `--budget-tokens`."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.used, self._lock = limit, 0, threading.Lock()

    def add(self, usage: dict[str, Any]) -> None:
        with self._lock:
            self.used += int(usage.get("prompt_tokens", 0) or 0) + int(usage.get("completion_tokens", 0) or 0)

    def reached(self) -> bool:
        return self.limit is not None and self.used >= self.limit
