"""The built-in search agent's run modes: benchmark pairs (`run_benchmark`) and their
counterfactual arms (`run_arms`), each a plan (`engine.plan`) executed by the one loop
(`engine.loop.execute`); `engine.dispatch.run` picks the mode.

The built-in agent runs through the agent protocol (agents/protocol.py): every episode, main pair
or arm, is `call_agent(search_agent(...), task, skills)`, the entry `--tasks` and `--agent` use.

Records follow DESIGN §3.1 and are appended one by one (flushed and fsynced), so a killed run loses
at most the records in flight; re-running the same command skips every (model, benchmark, task,
condition, epoch) already in the output file. Failures after retries become error records
(`"error": "<message>"`, `correct: false`), which `load_runs` leaves out and counts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillaudit import __version__
from skillaudit.agents.agent import ChatClient
from skillaudit.agents.protocol import (
    ProtocolEpisode,
    Skills,
    call_agent,
    library_hash,
    search_agent,
)
from skillaudit.agents.retrieve import SkillIndex
from skillaudit.engine.episode import BUILTIN_AGENT, attempt, task_view
from skillaudit.engine.loop import RunSummary, engine_for
from skillaudit.engine.options import RunOptions, select_tasks, shard_tasks, task_seed
from skillaudit.engine.output import Writer, prepare_output
from skillaudit.engine.plan import Episode, Plan, main_episodes
from skillaudit.errors import HarnessError, InputError
from skillaudit.sandbox import process as _sandbox
from skillaudit.sandbox.score import Scorer
from skillaudit.tasks.benchmarks import CODE_BENCHMARKS, Task, load_tasks


def _unsafe_reason(opts: RunOptions) -> str | None:
    """Why scoring this benchmark's code would be unisolated (None when it is isolated or not code);
    refuses unless --unsafe-scoring accepts the risk."""
    if opts.benchmark not in CODE_BENCHMARKS:
        return None
    isolated, why = _sandbox.isolation_status()
    if isolated:
        return None
    if not opts.unsafe_scoring:
        raise HarnessError(f"refusing to run model-written code unisolated: {why}; "
                           "run as root on Linux, or pass --unsafe-scoring to accept the risk")
    return why or "no isolation"


def _sandbox_warnings(opts: RunOptions, unsafe_reason: str | None) -> list[str]:
    """What the run's warnings say of the scoring sandbox: unisolated, or isolated without cgroups."""
    if unsafe_reason:
        return [f"--unsafe-scoring: model-written code runs unisolated ({unsafe_reason})"]
    if opts.benchmark in CODE_BENCHMARKS:
        usable, why = _sandbox.cgroup_status()
        if not usable:
            return [f"sandbox: no per-sandbox cgroup limits ({why.split('; falling back')[0]}); "
                    "per-process limits apply (docs/sandbox.md)"]
    return []


def run_benchmark(opts: RunOptions, quiet: bool = False,
                  on_record: Callable[[dict[str, Any]], None] | None = None) -> RunSummary:
    """Run every sampled task in both conditions (and epochs) and append records to `opts.out`."""
    from skillaudit.engine.reuse import plan_reuse, seed_output
    from skillaudit.library import load_library

    unsafe_reason = _unsafe_reason(opts)
    tasks = select_tasks(opts)
    warnings: list[str] = _sandbox_warnings(opts, unsafe_reason)
    if not opts.skills:
        raise InputError("--skills is required: the enabled condition needs a skill library")
    library = load_library(opts.skills)
    warnings += list(library.warnings)
    index = SkillIndex(library, set(opts.exclude_skills))
    if index.unknown_excluded:
        warnings.append(f"--exclude-skills: not in the library: {', '.join(index.unknown_excluded)}")
    if not index.skills:
        raise InputError("no skills left in the library after --exclude-skills")

    out = Path(opts.out)
    model_label = opts.model_label or opts.agent.model
    reuse_line = None
    if opts.reuse:
        # copy every record whose view of the library cannot have changed; the rest are re-run below
        plan_r = plan_reuse(opts.reuse, index, "search", reuse_library=opts.reuse_skills, top_k=opts.agent.top_k)
        seed_output(out, plan_r)
        reuse_line = plan_r.sentence()
    done = prepare_output(out, opts.retry_errors)
    label = f"{opts.benchmark} {model_label}" + (" [UNSAFE scoring: not isolated]" if unsafe_reason else "")
    plan = Plan.of(out, main_episodes(tasks, opts.epochs, block=opts.block), done, model_label, opts.benchmark,
                   len(tasks), label=label, warnings=warnings, reuse=reuse_line)
    summary = RunSummary(out=str(out), n_tasks=plan.n_tasks, planned=len(plan.episodes), skipped=plan.skipped,
                         warnings=plan.warnings, reuse=plan.reuse)
    if not plan.episodes:
        return summary

    scorer = Scorer(opts.limits, opts.cache_dir)
    client = ChatClient(opts.agent)
    agent_fn = search_agent(client, opts.agent)
    base_meta = {**opts.agent.public(), "harness": f"skillaudit {__version__}",
                 "excluded_skills": list(opts.exclude_skills)}
    base_meta["library_hash"] = library_hash(index)
    if unsafe_reason:
        base_meta["unsafe_scoring"] = True

    def one(ep: Episode) -> dict[str, Any]:
        task, cond, epoch = ep.source, ep.condition, ep.epoch
        seed = task_seed(opts.seed, task.task_id, epoch)
        rec: dict[str, Any] = {
            "task_id": task.task_id, "condition": cond, "correct": False, "model": model_label,
            "benchmark": opts.benchmark, "epoch": epoch, "invoked": False, "retrievals": [],
            "answer": "", "meta": {**base_meta, "seed": seed}, "error": None,
        }

        def episode() -> ProtocolEpisode:
            skills = Skills(index, opts.agent.top_k) if cond == "enabled" else None
            pe = call_agent(agent_fn, task_view(task, seed, epoch), skills, opts.episode_timeout, BUILTIN_AGENT,
                            trusted=True)
            if cond == "enabled" and pe.meta.get("replay"):
                rec["meta"]["replay"] = pe.meta["replay"]
            return pe

        return attempt(rec, task, scorer, episode)

    engine_for(opts.engine)(plan, one, Writer(out), client, summary, opts.concurrency, quiet, on_record)
    return summary


#: settings an arm must share with the base run it replays (meta key, AgentConfig attribute)
_SAME = (("tool_call_mode", "tool_mode"), ("tool_choice", "tool_choice"), ("max_calls", "max_calls"),
         ("temperature", "temperature"), ("max_tokens", "max_tokens"), ("top_k", "top_k"))


def _arm_library(opts: RunOptions, specs: list, unsafe_reason: str | None,
                 ) -> tuple[SkillIndex, SkillIndex | None, list[str]]:
    """The arms' options checked and their library: (index, index without --prune's skills, warnings)."""
    from skillaudit.library import load_library

    if not opts.base:
        raise InputError("--arms needs --base: the log whose enabled runs the arms replay")
    if opts.epochs != 1:
        raise InputError("--arms takes the epochs of --base; leave --epochs at 1")
    if any(sp.name == "pruned" for sp in specs) and not opts.prune:
        raise InputError("the pruned arm needs --prune: the skills to leave out")
    if not opts.skills:
        raise InputError("--skills is required: the arms replay against the base run's library")
    library = load_library(opts.skills)
    warnings = list(library.warnings) + _sandbox_warnings(opts, unsafe_reason)
    index = SkillIndex(library)
    pruned_index = None
    if opts.prune:
        pruned_index = SkillIndex(library, set(opts.prune))
        if pruned_index.unknown_excluded:
            raise InputError(f"--prune: not in the library: {', '.join(pruned_index.unknown_excluded)}")
    return index, pruned_index, warnings


def _arm_pairs(opts: RunOptions, index: SkillIndex, model_label: str,
               warnings: list[str]) -> tuple[dict[Any, Any], dict[str, Task]]:
    """The base log's complete pairs the arms replay, checked against this run's settings and kept
    to --task-id and --shard, and their tasks; skills edited since the base run go to `warnings`."""
    from skillaudit.engine.arm_runner import base_models, read_base

    pairs = read_base(opts.base, model_label, opts.benchmark)
    if not pairs:
        seen = ", ".join(f"{m}/{b}" for m, b in sorted(base_models(opts.base))) or "none"
        raise InputError(f"--base {opts.base}: no complete pairs for model {model_label!r} and benchmark "
                         f"{opts.benchmark!r} (it holds: {seen}; set --model-label to the logged model)")
    first = next(iter(pairs.values())).enabled.get("meta") or {}
    for key, attr in _SAME:
        logged = first.get(key, 3 if key == "top_k" else None)
        if logged is not None and logged != getattr(opts.agent, attr):
            raise InputError(f"--base {opts.base}: the base run used {key} = {logged!r}, this run "
                             f"{getattr(opts.agent, attr)!r}: an arm must replay the base run's settings")
    stale = sorted({h["id"] for p in pairs.values() for call in p.enabled.get("retrievals") or []
                    for h in call.get("skills") or [] if isinstance(h, dict) and h.get("hash")
                    and index.hash_of(h["id"]) not in (None, h["hash"])})
    if stale:
        warnings.append(f"skills edited since the base run: {', '.join(stale)}; arms show them as they are now")
    if opts.task_ids:
        pairs = {k: v for k, v in pairs.items() if k[0] in set(opts.task_ids)}
    tasks = {t.task_id: t for t in load_tasks(opts.benchmark, opts.data)}
    missing = sorted({k[0] for k in pairs} - set(tasks))
    if missing:
        raise InputError(f"--base {opts.base}: task ids not in the benchmark data: {', '.join(missing[:5])}")
    if opts.shard is not None:
        keep = set(shard_tasks(sorted({k[0] for k in pairs}), opts.shard))  # type: ignore[arg-type]
        pairs = {k: v for k, v in pairs.items() if k[0] in keep}
    return pairs, tasks


def run_arms(opts: RunOptions, quiet: bool = False,
             on_record: Callable[[dict[str, Any]], None] | None = None) -> RunSummary:
    """Run the counterfactual arms (`opts.arms`) of the pairs logged in `opts.base` (DESIGN §3.1b).

    Enabled arms replay each S_call pair's enabled tool call(s) and change only the tool's result;
    `replicate` re-runs every pair's disabled run with another seed. Records (with `"arm"`) are
    appended to `opts.out`; re-running resumes.
    """
    from skillaudit.engine.arm_runner import (
        ArmTool,
        arm_seed,
        arm_units,
        mask_draw,
        parse_arms,
        replay_turns,
    )

    specs = parse_arms(opts.arms or "")
    unsafe_reason = _unsafe_reason(opts)
    index, pruned_index, warnings = _arm_library(opts, specs, unsafe_reason)
    model_label = opts.model_label or opts.agent.model
    pairs, tasks = _arm_pairs(opts, index, model_label, warnings)

    out = Path(opts.out)
    done = prepare_output(out, opts.retry_errors)
    names = ",".join(sp.name if sp.name != "mask" else f"mask:{sp.masks}" for sp in specs)
    label = f"{opts.benchmark} {model_label} arms {names}" + (" [UNSAFE scoring: not isolated]" if unsafe_reason else "")
    candidates = [Episode(pair.task_id, "disabled" if arm == "replicate" else "enabled", pair.epoch, arm, m, source=pair)
                  for pair, arm, m in arm_units(pairs, specs, frozenset(opts.prune))]
    plan = Plan.of(out, candidates, done, model_label, opts.benchmark, len({k[0] for k in pairs}), label=label,
                   warnings=warnings)
    summary = RunSummary(out=str(out), n_tasks=plan.n_tasks, planned=len(plan.episodes), skipped=plan.skipped,
                         warnings=plan.warnings)
    if not plan.episodes:
        return summary
    scorer = Scorer(opts.limits, opts.cache_dir)
    client = ChatClient(opts.agent)
    chatml_forced = opts.agent.tool_mode == "chatml" and opts.agent.tool_choice == "required"

    def one(ep: Episode) -> dict[str, Any]:
        pair, arm, m = ep.source, ep.arm, ep.mask
        task = tasks[pair.task_id]
        base_meta = pair.enabled.get("meta") or {}
        seed = base_meta.get("seed")
        if not isinstance(seed, int):
            seed = task_seed(opts.seed, task.task_id, pair.epoch)
        cond = "disabled" if arm == "replicate" else "enabled"
        meta: dict[str, Any] = {**opts.agent.public(), "harness": f"skillaudit {__version__}",
                                "library_hash": base_meta.get("library_hash"), "base_seed": seed,
                                **({"unsafe_scoring": True} if unsafe_reason else {})}
        rec: dict[str, Any] = {
            "task_id": task.task_id, "condition": cond, "arm": arm, "correct": False, "model": model_label,
            "benchmark": opts.benchmark, "epoch": pair.epoch, "invoked": False, "retrievals": [],
            "answer": "", "meta": meta, "error": None,
        }

        def episode() -> ProtocolEpisode:
            if arm == "replicate":
                meta["seed"] = arm_seed(seed, "replicate")
                return call_agent(search_agent(client, opts.agent), task_view(task, meta["seed"], pair.epoch), None,
                                  opts.episode_timeout, BUILTIN_AGENT, trusted=True)
            else:
                meta["seed"] = seed
                kept = None
                if arm == "mask":
                    meta["mask_seed"] = m
                    kept_ids, withheld = mask_draw(pair.retrieved, arm_seed(seed, "mask", m))
                    meta["kept"], meta["withheld"] = list(kept_ids), list(withheld)
                    kept = set(kept_ids)
                if arm == "pruned":
                    meta["excluded"] = sorted(opts.prune)
                tool = ArmTool(arm, index, list(pair.enabled.get("retrievals") or []),
                               arm_seed(seed, arm, max(m, 0)), kept=kept, pruned_index=pruned_index,
                               top_k=opts.agent.top_k)
                # the logged call turns are replayed; only the tool's answer (the arm) changes
                agent_fn = search_agent(client, opts.agent,
                                        {(task.task_id, pair.epoch): replay_turns(pair.enabled, chatml_forced)})
                return call_agent(agent_fn, task_view(task, seed, pair.epoch),
                                  Skills(index, opts.agent.top_k, search_arm=tool),
                                  opts.episode_timeout, BUILTIN_AGENT, trusted=True)

        return attempt(rec, task, scorer, episode)

    engine_for(opts.engine)(plan, one, Writer(out), client, summary, opts.concurrency, quiet, on_record)
    return summary
