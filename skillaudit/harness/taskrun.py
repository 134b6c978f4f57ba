"""Runs through the agent protocol (`--tasks FILE`, `--agent module:callable`, `--skills-mode
catalog`) and re-audits that re-run only what changed (`--reuse OLD.jsonl`).

Records follow DESIGN §3.1 like `runner.run`'s; resume, `--limit`, `--task-id`, `--epochs`,
`--shard` and error records work the same way. Catalog-mode records add `meta.skills_mode`,
`meta.listed` (what the catalog showed), `meta.catalog_hash` and `meta.loaded`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..errors import HarnessError, InputError
from .protocol import (
    AgentFailure,
    Skills,
    call_agent,
    catalog_agent,
    catalog_hash,
    load_agent,
    search_agent,
)
from .retrieve import SkillIndex
from .runner import (
    CONDITIONS,
    RunOptions,
    RunSummary,
    _execute,
    _existing,
    _key,
    _prepare_output,
    _Writer,
    select_tasks,
    task_seed,
)
from .score import Scorer
from .tasks import Task


def _view(task: Task, seed: int, epoch: int) -> dict[str, Any]:
    from .taskfile import agent_view

    if "kind" in task.data:
        d = agent_view(task)
    else:
        d = {"id": task.task_id, "prompt": task.prompt, "kind": "tests" if task.is_code else "answer"}
        if task.is_code:
            d["entry_point"] = task.data.get("entry_point")
    return {**d, "seed": seed, "epoch": epoch, "benchmark": task.benchmark}


class _NullClient:
    def close(self) -> None:
        pass


def run_tasks(opts: RunOptions, quiet: bool = False, on_record=None) -> RunSummary:
    """Run every selected task in both conditions through the agent protocol."""
    from ..library import load_library
    from .taskfile import TaskFileScorer

    if opts.arms:
        if opts.skills_mode != "catalog" or opts.agent_spec:
            raise InputError("--arms with --tasks: only with the built-in agent in --skills-mode catalog")
        return run_catalog_arms(opts, quiet, on_record)
    tasks = select_tasks(opts)  # bad task files fail here, before any model call
    if opts.agent_spec:
        agent_fn = load_agent(opts.agent_spec)
        agent_name = opts.agent_spec
        client: Any = _NullClient()
    else:
        from .agent import ChatClient

        client = ChatClient(opts.agent)
        agent_fn = (catalog_agent if opts.skills_mode == "catalog" else search_agent)(client, opts.agent)
        agent_name = f"built-in {opts.skills_mode} agent"
    if not opts.skills:
        raise InputError("--skills is required: the enabled condition needs a skill library")
    if any(t.is_code or t.data.get("kind") == "tests" for t in tasks):
        from . import sandbox as _sandbox

        isolated, why = _sandbox.isolation_status()
        if not isolated and not opts.unsafe_scoring:
            raise HarnessError(f"refusing to run model-written code unisolated: {why}; "
                               "run as root on Linux, or pass --unsafe-scoring to accept the risk")
    library = load_library(opts.skills)
    index = SkillIndex(library, set(opts.exclude_skills))
    if not index.skills:
        raise InputError("no skills left in the library after --exclude-skills")
    lib_hash = hashlib.sha256("".join(s.content_hash for s in index.skills).encode()).hexdigest()[:16]
    benchmark = tasks[0].benchmark if opts.tasks else opts.benchmark
    model_label = opts.model_label or (opts.agent_spec if opts.agent_spec else opts.agent.model)
    out = Path(opts.out)
    reuse_line = None
    if opts.reuse:
        plan = plan_reuse(opts.reuse, index, opts.skills_mode, reuse_library=opts.reuse_skills,
                          top_k=opts.agent.top_k)
        seed_output(out, plan)
        reuse_line = plan.sentence()
    done = _prepare_output(out, opts.retry_errors)
    units, skipped = [], 0
    for epoch in range(1, opts.epochs + 1):
        for cond in CONDITIONS:
            for t in tasks:
                if (model_label, benchmark, t.task_id, cond, epoch) in done:
                    skipped += 1
                else:
                    units.append((t, cond, epoch))
    summary = RunSummary(out=str(out), n_tasks=len(tasks), planned=len(units), skipped=skipped,
                         warnings=list(library.warnings), reuse=reuse_line)
    if not units:
        return summary
    scorer: Any = TaskFileScorer(opts.limits, opts.threshold) if opts.tasks else Scorer(opts.limits, opts.cache_dir)
    writer = _Writer(out)
    base_meta: dict[str, Any] = {"harness": f"skillaudit {__version__}", "library_hash": lib_hash,
                                 "skills_mode": opts.skills_mode, "agent": agent_name,
                                 "excluded_skills": list(opts.exclude_skills)}
    if not opts.agent_spec:
        base_meta.update(opts.agent.public())
    cat_hash = catalog_hash(index)

    def one(task: Task, cond: str, epoch: int) -> dict[str, Any]:
        seed = task_seed(opts.seed, task.task_id, epoch)
        rec: dict[str, Any] = {
            "task_id": task.task_id, "condition": cond, "correct": False, "model": model_label,
            "benchmark": benchmark, "epoch": epoch, "invoked": False, "retrievals": [], "answer": "",
            "meta": {**base_meta, "seed": seed}, "error": None,
        }
        skills = Skills(index, opts.agent.top_k) if cond == "enabled" else None
        try:
            ep = call_agent(agent_fn, _view(task, seed, epoch), skills, opts.episode_timeout, agent_name)
            score, answer = scorer.score(task, ep.answer)
        except AgentFailure as exc:
            rec["error"] = f"agent: {exc}"
            return rec
        except HarnessError as exc:
            rec["error"] = f"harness: {exc}"
            return rec
        except Exception as exc:  # a bug must not kill a long run
            rec["error"] = f"unexpected {type(exc).__name__} on task {task.task_id}: {exc}"
            return rec
        rec["correct"] = bool(score.correct)
        rec["invoked"] = ep.invoked
        rec["retrievals"] = ep.retrievals
        rec["answer"] = answer if isinstance(answer, str) else ep.answer
        rec["meta"].update({"latency_s": round(ep.latency_s, 3), "usage": ep.usage, "score": score.reason})
        if "extracted" in score.details:
            rec["meta"]["extracted"] = score.details["extracted"]
        if cond == "enabled":
            if ep.listed:
                rec["meta"]["listed"] = ep.listed
                rec["meta"]["catalog_hash"] = cat_hash
            rec["meta"]["loaded"] = ep.loaded
        for k, v in ep.meta.items():
            rec["meta"].setdefault(k, v)
        return rec

    _execute(units, one, writer, client, summary, f"{benchmark} {model_label}", opts.concurrency, quiet,
             on_record)
    return summary


# ---- re-audit only what changed -----------------------------------------------------------------
@dataclass
class ReusePlan:
    """Which records of an old log can be copied and which episodes must be re-run (and why)."""

    old: str
    copy: list[dict[str, Any]] = field(default_factory=list)
    rerun: list[dict[str, Any]] = field(default_factory=list)  # {task_id, epoch, condition, why, tokens}
    total: int = 0

    @property
    def reasons(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rerun:
            out[r["why"]] = out.get(r["why"], 0) + 1
        return out

    def sentence(self, copied: int | None = None) -> str:
        why = "; ".join(f"{n} {w}" for w, n in sorted(self.reasons.items())) or "nothing changed"
        return f"re-ran {len(self.rerun)} of {self.total} episodes ({why})"

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "skillaudit.plan/v1", "old": self.old, "episodes": self.total,
                "copied": len(self.copy), "rerun": len(self.rerun), "reasons": self.reasons,
                "estimated_tokens": sum(r.get("tokens") or 0 for r in self.rerun),
                "episodes_to_rerun": self.rerun}


def _tokens(rec: dict[str, Any]) -> int:
    u = (rec.get("meta") or {}).get("usage") or {}
    return int(u.get("prompt_tokens") or 0) + int(u.get("completion_tokens") or 0)


def _why_rerun(rec: dict[str, Any], index: SkillIndex, mode: str, old_index: SkillIndex | None,
               cat_hash: str, top_k: int) -> str | None:
    """Why an enabled record's view of the library may have changed (None: it cannot have)."""
    meta = rec.get("meta") or {}
    if meta.get("arm"):
        return "arm record"
    listed = mode == "catalog" or meta.get("skills_mode") == "catalog" or bool(meta.get("listed"))
    if listed and meta.get("catalog_hash") != cat_hash:
        return "catalog names/descriptions changed"
    k = int(meta.get("top_k") or top_k)
    for call in rec.get("retrievals") or []:
        if not isinstance(call, dict):
            return "unreadable retrievals"
        for h in call.get("skills") or []:
            sid = h.get("id") if isinstance(h, dict) else None
            old_hash = h.get("hash") if isinstance(h, dict) else None
            if old_hash is None and old_index is not None:
                old_hash = old_index.hash_of(sid)
            if old_hash is None:
                return "no content hash logged (pass --reuse-skills OLD_LIBRARY)"
            if index.hash_of(sid) != old_hash:
                return "a skill it was shown changed"
        if call.get("tool", "search") == "search" and call.get("error") is None and call.get("query") is not None:
            again = index.search(call.get("query"), call.get("types"), k=k)
            if [h.id for h in again.hits] != [h.get("id") for h in call.get("skills") or []]:
                return "its search returns another list now"
    return None


def plan_reuse(old: str, index: SkillIndex, mode: str = "search", reuse_library: str | None = None,
               top_k: int = 3) -> ReusePlan:
    """Plan a re-audit: disabled records are copied (they never see the library); an enabled record
    is copied when the skills it was shown are unchanged (content hash), its searches, re-ranked
    offline over the new library, return the same list, and (catalog mode) the catalog is unchanged."""
    from ..library import load_library

    path = Path(old)
    if not path.is_file():
        raise InputError(f"--reuse {old}: no such file")
    old_index = SkillIndex(load_library(reuse_library)) if reuse_library else None
    cat_hash = catalog_hash(index)
    plan = ReusePlan(old=old)
    for _, rec in _existing(path):
        if rec.get("arm") is not None:
            continue  # arms are re-run against their base (`run --arms`), not copied
        plan.total += 1
        if rec.get("error") is not None:
            why: str | None = "error record"
        elif rec.get("condition") == "disabled":
            why = None
        else:
            why = _why_rerun(rec, index, mode, old_index, cat_hash, top_k)
        if why is None:
            plan.copy.append(rec)
        else:
            plan.rerun.append({"task_id": rec.get("task_id"), "epoch": rec.get("epoch", 1),
                               "condition": rec.get("condition"), "model": rec.get("model"),
                               "benchmark": rec.get("benchmark"), "why": why, "tokens": _tokens(rec)})
    return plan


def seed_output(out: Path, plan: ReusePlan) -> int:
    """Write the plan's copied records into a new `out` (refuses to touch the old log)."""
    from .._io import atomic_write_bytes

    if out.resolve() == Path(plan.old).resolve():
        raise InputError("--reuse: --out must be a new file, not the old log")
    have = {_key(r) for _, r in _existing(out)} if out.exists() else set()
    add = [r for r in plan.copy if _key(r) not in have]
    if not add:
        return 0
    old = out.read_bytes() if out.exists() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    atomic_write_bytes(out, old + b"".join(orjson.dumps(r) + b"\n" for r in add))
    return len(add)


def reuse_plan_for(opts: RunOptions) -> ReusePlan:
    """The `--reuse OLD --dry-run` plan for these options (no model call, nothing written)."""
    from ..library import load_library

    if not opts.skills:
        raise InputError("--skills is required: the plan re-ranks logged searches over it")
    index = SkillIndex(load_library(opts.skills), set(opts.exclude_skills))
    return plan_reuse(opts.reuse or "", index, opts.skills_mode, reuse_library=opts.reuse_skills,
                      top_k=opts.agent.top_k)


CATALOG_ARMS = ("random", "filler", "empty", "mask")


def run_catalog_arms(opts: RunOptions, quiet: bool = False, on_record=None) -> RunSummary:
    """Arms of catalog-mode pairs: each S_call enabled run of `opts.base` is replayed (its logged
    load turn, verbatim) and only what `load_skill` returned changes: `random` (another skill's
    body), `filler` (same-length text without a procedure), `empty` (nothing), `mask[:M]` (each
    loaded body kept with probability 1/2, M draws)."""
    from ..library import load_library
    from .agent import ChatClient
    from .arm_runner import FILLER_TEXT, arm_seed, parse_arms
    from .protocol import body_arm, mask_keeps
    from .taskfile import TaskFileScorer

    specs = parse_arms(opts.arms or "")
    bad = [sp.name for sp in specs if sp.name not in CATALOG_ARMS]
    if bad:
        raise InputError(f"--arms {', '.join(bad)}: catalog mode runs {', '.join(CATALOG_ARMS)}")
    if not opts.base:
        raise InputError("--arms needs --base: the log whose enabled runs the arms replay")
    if not opts.skills:
        raise InputError("--skills is required: the arms replay against the base run's library")
    tasks = {t.task_id: t for t in select_tasks(RunOptions(**{**opts.__dict__, "limit": None, "task_ids": (),
                                                                "shard": None}))}
    index = SkillIndex(load_library(opts.skills))
    base = []
    for _, rec in _existing(Path(opts.base)):
        meta = rec.get("meta") or {}
        if (rec.get("arm") is None and rec.get("condition") == "enabled" and rec.get("error") is None
                and rec.get("invoked") and meta.get("replay") and meta.get("skills_mode") == "catalog"
                and str(rec.get("task_id")) in tasks):
            base.append(rec)
    if opts.task_ids:
        base = [r for r in base if r["task_id"] in set(opts.task_ids)]
    if not base:
        raise InputError(f"--base {opts.base}: no catalog-mode enabled runs that loaded a skill")
    model_label = opts.model_label or opts.agent.model
    out = Path(opts.out)
    done = _prepare_output(out, opts.retry_errors)
    units, skipped = [], 0
    for rec in base:
        for sp in specs:
            for m in (range(sp.masks) if sp.name == "mask" else (-1,)):
                key = (str(rec.get("model")), str(rec.get("benchmark")), str(rec["task_id"]), "enabled",
                       int(rec.get("epoch", 1)), sp.name, m if sp.name == "mask" else -1)
                if key in done:
                    skipped += 1
                else:
                    units.append((rec, sp.name, m))
    summary = RunSummary(out=str(out), n_tasks=len({r["task_id"] for r in base}), planned=len(units),
                         skipped=skipped)
    if not units:
        return summary
    client = ChatClient(opts.agent)
    scorer = TaskFileScorer(opts.limits, opts.threshold)
    writer = _Writer(out)

    def one(rec: dict[str, Any], arm: str, m: int) -> dict[str, Any]:
        task = tasks[rec["task_id"]]
        seed = int((rec.get("meta") or {}).get("seed", 0))
        epoch = int(rec.get("epoch", 1))
        aseed = arm_seed(seed, arm, max(m, 0))
        agent_fn = catalog_agent(client, opts.agent, {(task.task_id, epoch): rec["meta"]["replay"]})
        skills = Skills(index, opts.agent.top_k, body_arm=body_arm(arm, index, aseed, FILLER_TEXT))
        meta: dict[str, Any] = {**opts.agent.public(), "harness": f"skillaudit {__version__}",
                                "skills_mode": "catalog", "base_seed": seed, "seed": seed,
                                "library_hash": (rec.get("meta") or {}).get("library_hash")}
        out_rec: dict[str, Any] = {"task_id": task.task_id, "condition": "enabled", "arm": arm, "correct": False,
                                   "model": rec.get("model", model_label), "benchmark": rec.get("benchmark"),
                                   "epoch": epoch, "invoked": False, "retrievals": [], "answer": "",
                                   "meta": meta, "error": None}
        if arm == "mask":
            meta["mask_seed"] = m
        try:
            ep = call_agent(agent_fn, _view(task, seed, epoch), skills, opts.episode_timeout, "built-in catalog agent")
            score, answer = scorer.score(task, ep.answer)
        except HarnessError as exc:
            out_rec["error"] = f"agent: {exc}" if isinstance(exc, AgentFailure) else f"harness: {exc}"
            return out_rec
        except Exception as exc:
            out_rec["error"] = f"unexpected {type(exc).__name__} on task {task.task_id}: {exc}"
            return out_rec
        out_rec.update(correct=bool(score.correct), invoked=ep.invoked, retrievals=ep.retrievals, answer=answer)
        meta.update({"latency_s": round(ep.latency_s, 3), "usage": ep.usage, "score": score.reason,
                     "loaded": ep.loaded, "replayed_turns": len(rec["meta"]["replay"])})
        if arm == "mask":
            meta["kept"] = [s for s in ep.loaded if mask_keeps(aseed, s)]
            meta["withheld"] = [s for s in ep.loaded if not mask_keeps(aseed, s)]
        return out_rec

    _execute(units, one, writer, client, summary, f"catalog arms {opts.arms}", opts.concurrency, quiet, on_record)
    return summary
