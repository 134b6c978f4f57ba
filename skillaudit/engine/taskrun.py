"""Runs through the agent protocol (`--tasks FILE`, `--agent module:callable`, `--skills-mode
catalog`) and re-audits that re-run only what changed (`--reuse OLD.jsonl`).

Records follow DESIGN §3.1 like `runner.run_benchmark`'s; resume, `--limit`, `--task-id`, `--epochs`,
`--shard` and error records work the same way. Catalog-mode records add `meta.skills_mode`,
`meta.listed` (what the catalog showed), `meta.catalog_hash` and `meta.loaded`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from skillaudit import __version__
from skillaudit.agents.protocol import (
    AgentFailure,
    Skills,
    call_agent,
    catalog_agent,
    catalog_hash,
    library_hash,
    load_agent,
    search_agent,
)
from skillaudit.agents.retrieve import SkillIndex
from skillaudit.engine.episode import task_view
from skillaudit.engine.loop import RunSummary, engine_for
from skillaudit.engine.options import RunOptions, select_tasks, task_seed
from skillaudit.engine.output import Writer, existing_records, prepare_output
from skillaudit.engine.plan import Episode, Plan, main_episodes
from skillaudit.engine.reuse import plan_reuse, seed_output
from skillaudit.errors import HarnessError, InputError
from skillaudit.sandbox.score import Score, Scorer


class _NullClient:
    def close(self) -> None:
        pass


def run_tasks(opts: RunOptions, quiet: bool = False, on_record=None) -> RunSummary:
    """Run every selected task in both conditions through the agent protocol."""
    from skillaudit.library import load_library
    from skillaudit.tasks.taskfile import TaskFileScorer, is_judged

    if opts.arms:
        if opts.arms.replace(" ", "") == "replicate":  # any agent: a second run without skills
            return run_task_replicates(opts, quiet, on_record)
        if opts.skills_mode != "catalog" or opts.agent_spec:
            raise InputError("--arms with --tasks: replicate with any agent; the others only with the built-in "
                             "agent in --skills-mode catalog")
        return run_catalog_arms(opts, quiet, on_record)
    tasks = select_tasks(opts)  # bad task files fail here, before any model call
    agent_fn, agent_name, client = _agent_of(opts)
    if not opts.skills:
        raise InputError("--skills is required: the enabled condition needs a skill library")
    _refuse_unisolated(opts, tasks)
    library = load_library(opts.skills)
    _check_expected(tasks, set(library.ids))
    index = SkillIndex(library, set(opts.exclude_skills))
    if not index.skills:
        raise InputError("no skills left in the library after --exclude-skills")
    benchmark = tasks[0].benchmark if opts.tasks else opts.benchmark
    model_label = _model_label(opts)
    out = Path(opts.out)
    reuse_line = None
    if opts.reuse:
        plan_r = plan_reuse(opts.reuse, index, opts.skills_mode, reuse_library=opts.reuse_skills,
                            top_k=opts.agent.top_k)
        seed_output(out, plan_r)
        reuse_line = plan_r.sentence()
    done = prepare_output(out, opts.retry_errors)
    plan = Plan.of(out, main_episodes(tasks, opts.epochs), done, model_label, benchmark, len(tasks),
                   label=f"{benchmark} {model_label}", warnings=list(library.warnings), reuse=reuse_line)
    summary = RunSummary(out=str(out), n_tasks=plan.n_tasks, planned=len(plan.episodes), skipped=plan.skipped,
                         warnings=plan.warnings, reuse=plan.reuse)
    if not plan.episodes:
        return summary
    scorer: Any = TaskFileScorer(opts.limits, opts.threshold) if opts.tasks else Scorer(opts.limits, opts.cache_dir)
    judged = _judged_runs(opts, tasks, plan, model_label, summary)
    if judged is not None:
        client = _Both(client, judged)
    base_meta: dict[str, Any] = {"harness": f"skillaudit {__version__}", "library_hash": library_hash(index),
                                 "skills_mode": opts.skills_mode, "agent": agent_name,
                                 "excluded_skills": list(opts.exclude_skills)}
    if not opts.agent_spec:
        base_meta.update(opts.agent.public())
    cat_hash = catalog_hash(index)

    def one(ep_: Episode) -> dict[str, Any] | list[dict[str, Any]]:
        task, cond, epoch = ep_.source, ep_.condition, ep_.epoch
        seed = task_seed(opts.seed, task.task_id, epoch)
        rec: dict[str, Any] = {
            "task_id": task.task_id, "condition": cond, "correct": False, "model": model_label,
            "benchmark": benchmark, "epoch": epoch, "invoked": False, "retrievals": [], "answer": "",
            "meta": {**base_meta, "seed": seed}, "error": None,
        }
        if "expected_skills" in task.data:  # the task file's labels, for the trigger view (never the agent's)
            rec["meta"]["expected_skills"] = list(task.data["expected_skills"])
        if judged is not None and is_judged(task):  # the judge grades it (both runs together, pairwise)
            return judged.land(_episode(ep_, rec, None), task)
        return _episode(ep_, rec, scorer)

    def _episode(ep_: Episode, rec: dict[str, Any], scorer: Any) -> dict[str, Any]:
        """The agent's run of the episode into `rec`, scored by `scorer` (None: left to the judge)."""
        task, cond = ep_.source, ep_.condition
        skills = Skills(index, opts.agent.top_k) if cond == "enabled" else None
        try:
            ep = call_agent(agent_fn, task_view(task, rec["meta"]["seed"], ep_.epoch), skills,
                            opts.episode_timeout, agent_name)
            if scorer is None:
                score, answer = Score(False, "to be judged"), ep.answer
            else:
                score, answer = scorer.score(task, ep.answer)
        except Exception as exc:  # a bug must not kill a long run either
            rec["error"] = _error_of(exc, task.task_id)
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

    engine_for(opts.engine)(plan, one, Writer(out), client, summary, opts.concurrency, quiet, on_record)
    return summary


def _check_expected(tasks: Any, ids: set[str]) -> None:
    """A task file's `expected_skills` must name skills of the library (checked before any model call)."""
    import difflib

    for t in tasks:
        for name in t.data.get("expected_skills", ()):
            if name not in ids:
                close = difflib.get_close_matches(name, sorted(ids), n=1)
                raise InputError(f"{t.data['file']}:{t.data['line']}: `expected_skills`: no skill named {name!r} in "
                                 "the library" + (f" (did you mean {close[0]!r}?)" if close else ""))


def _agent_of(opts: RunOptions) -> tuple[Any, str, Any]:
    """(agent callable, its name as logged, the client to close) of a task-file run: `--agent`, or
    the built-in chat loop of `--skills-mode` on the endpoint."""
    if opts.agent_spec:
        return load_agent(opts.agent_spec), opts.agent_spec, _NullClient()
    from skillaudit.agents.agent import ChatClient

    client = ChatClient(opts.agent)
    agent_fn = (catalog_agent if opts.skills_mode == "catalog" else search_agent)(client, opts.agent)
    return agent_fn, f"built-in {opts.skills_mode} agent", client


def _model_label(opts: RunOptions) -> str:
    """The model written to the records: `--model-label`, else the `--agent` spec or the endpoint's model."""
    return opts.model_label or (opts.agent_spec if opts.agent_spec else opts.agent.model)


def _refuse_unisolated(opts: RunOptions, tasks: Any) -> None:
    """No model-written code is scored where the sandbox cannot isolate it, unless `--unsafe-scoring`."""
    if any(t.is_code or t.data.get("kind") == "tests" for t in tasks):
        from skillaudit.sandbox import process as _sandbox

        isolated, why = _sandbox.isolation_status()
        if not isolated and not opts.unsafe_scoring:
            raise HarnessError(f"refusing to run model-written code unisolated: {why}; "
                               "run as root on Linux, or pass --unsafe-scoring to accept the risk")


def _pointwise_judge(opts: RunOptions, tasks: Any, plan: Plan, model_label: str, summary: RunSummary) -> Any:
    """The judge of an arm's `grader: judge` tasks: each answer judged on its own (pointwise: its
    score and correct, as the base run's were, never against another answer); None without any."""
    judge = None if opts.judge is None else replace(opts.judge, mode="pointwise")
    return _judged_runs(replace(opts, judge=judge), list(tasks), plan, model_label, summary)


def _error_of(exc: Exception, task_id: str) -> str:
    """An episode's failure as its record's `error`: the agent's, the harness's, or a bug's."""
    if isinstance(exc, AgentFailure):
        return f"agent: {exc}"
    if isinstance(exc, HarnessError):
        return f"harness: {exc}"
    return f"unexpected {type(exc).__name__} on task {task_id}: {exc}"


class _Both:
    """Closes the agent's client and the judge's."""

    def __init__(self, *clients: Any) -> None:
        self.clients = clients

    def close(self) -> None:
        for c in self.clients:
            c.close()


def _judged_runs(opts: RunOptions, tasks: list[Any], plan: Plan, model_label: str, summary: RunSummary) -> Any:
    """The judge of this run's `grader: judge` tasks (None when there are none), checked before any
    model call; the model-family warning goes into the summary."""
    from skillaudit.tasks.taskfile import is_judged

    judged = [t for t in tasks if is_judged(t)]
    if not judged:
        if opts.judge is not None:
            summary.warnings.append("--judge-model: no task of this run is graded by the judge (`grader: judge`)")
        return None
    if opts.judge is None:
        t = judged[0]
        raise InputError(f"{t.data['file']}:{t.data['line']}: `grader: judge` needs a judge model: run "
                         "--judge-endpoint URL --judge-model NAME (key in SKILLAUDIT_JUDGE_API_KEY)")
    if opts.judge.mode == "pairwise" and opts.engine != "threads":
        raise InputError(f"--judge-mode pairwise runs with --engine threads (the pair is judged when its second "
                         f"run lands), not --engine {opts.engine}; or --judge-mode pointwise")
    from skillaudit.agents.judge import Judge, family_warning
    from skillaudit.engine.judging import JudgedRuns

    warning = family_warning(opts.judge.model, model_label)
    if warning:
        summary.warnings.append(warning)
    planned = {(e.task_id, e.epoch, e.condition) for e in plan.episodes if e.arm is None}
    return JudgedRuns(Judge(opts.judge), planned, opts.judge.aa_rate)


CATALOG_ARMS = ("random", "filler", "empty", "mask")


def run_task_replicates(opts: RunOptions, quiet: bool = False, on_record=None) -> RunSummary:
    """The `replicate` arm of a task file's pairs, with any agent: each disabled run of `opts.base`
    (no error) runs again without skills under another seed (`arm_seed(seed, "replicate")`), scored
    as the base run was (its checker, or the judge on its own): the A/A noise floor that `metrics`
    reads beside the pair's effect (for judged tasks: the judge's and the sampling's flips together)."""
    from skillaudit.engine.arm_runner import arm_seed
    from skillaudit.tasks.taskfile import TaskFileScorer, is_judged

    if not opts.base:
        raise InputError("--arms needs --base: the log whose disabled runs the replicate arm repeats")
    tasks = {t.task_id: t for t in select_tasks(RunOptions(**{**opts.__dict__, "limit": None, "task_ids": (),
                                                                "shard": None}))}
    base = [rec for _, rec in existing_records(Path(opts.base))
            if rec.get("arm") is None and rec.get("condition") == "disabled" and rec.get("error") is None
            and str(rec.get("task_id")) in tasks and (not opts.task_ids or rec["task_id"] in set(opts.task_ids))]
    if not base:
        raise InputError(f"--base {opts.base}: no disabled runs of these tasks to replicate")
    _refuse_unisolated(opts, [tasks[str(r["task_id"])] for r in base])
    agent_fn, agent_name, client = _agent_of(opts)
    model_label = _model_label(opts)
    out = Path(opts.out)
    done = prepare_output(out, opts.retry_errors)
    candidates = [Episode(str(r["task_id"]), "disabled", int(r.get("epoch", 1)), "replicate", -1, source=r)
                  for r in base]
    plan = Plan.of(out, candidates, done, model_label, None, len({r["task_id"] for r in base}),
                   label="replicate arm")
    summary = RunSummary(out=str(out), n_tasks=plan.n_tasks, planned=len(plan.episodes), skipped=plan.skipped)
    if not plan.episodes:
        return summary
    scorer = TaskFileScorer(opts.limits, opts.threshold)
    judge = _pointwise_judge(opts, tasks.values(), plan, model_label, summary)
    closing: Any = client if judge is None else _Both(client, judge)

    def one(ep_: Episode) -> dict[str, Any]:
        rec, task = ep_.source, tasks[ep_.source["task_id"]]
        epoch = int(rec.get("epoch", 1))
        seed = (rec.get("meta") or {}).get("seed")
        seed = seed if isinstance(seed, int) else task_seed(opts.seed, task.task_id, epoch)
        meta: dict[str, Any] = {"harness": f"skillaudit {__version__}", "agent": agent_name, "base_seed": seed,
                                "seed": arm_seed(seed, "replicate")}
        out_rec: dict[str, Any] = {"task_id": task.task_id, "condition": "disabled", "arm": "replicate",
                                   "correct": False, "model": rec.get("model", model_label),
                                   "benchmark": rec.get("benchmark"), "epoch": epoch, "invoked": False,
                                   "retrievals": [], "answer": "", "meta": meta, "error": None}
        judged = judge is not None and is_judged(task)
        try:
            ep = call_agent(agent_fn, task_view(task, meta["seed"], epoch), None, opts.episode_timeout, agent_name)
            score, answer = (Score(False, "to be judged"), ep.answer) if judged else scorer.score(task, ep.answer)
        except Exception as exc:  # a bug must not kill a long run either
            out_rec["error"] = _error_of(exc, task.task_id)
            return out_rec
        out_rec.update(correct=bool(score.correct), answer=answer if isinstance(answer, str) else ep.answer)
        meta.update({"latency_s": round(ep.latency_s, 3), "usage": ep.usage, "score": score.reason})
        return judge.grade(out_rec, task) if judged else out_rec

    engine_for(opts.engine)(plan, one, Writer(out), closing, summary, opts.concurrency, quiet, on_record)
    return summary


def run_catalog_arms(opts: RunOptions, quiet: bool = False, on_record=None) -> RunSummary:
    """Arms of catalog-mode pairs: each S_call enabled run of `opts.base` is replayed (its logged
    load turn, verbatim) and only what `load_skill` returned changes: `random` (another skill's
    body), `filler` (same-length text without a procedure), `empty` (nothing), `mask[:M]` (each
    loaded body kept with probability 1/2, M draws)."""
    from skillaudit.agents.agent import ChatClient
    from skillaudit.agents.protocol import body_arm, mask_keeps
    from skillaudit.engine.arm_runner import FILLER_TEXT, arm_seed, parse_arms
    from skillaudit.library import load_library
    from skillaudit.tasks.taskfile import TaskFileScorer, is_judged

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
    for _, rec in existing_records(Path(opts.base)):
        meta = rec.get("meta") or {}
        if (rec.get("arm") is None and rec.get("condition") == "enabled" and rec.get("error") is None
                and rec.get("invoked") and meta.get("replay") and meta.get("skills_mode") == "catalog"
                and str(rec.get("task_id")) in tasks):
            base.append(rec)
    if opts.task_ids:
        base = [r for r in base if r["task_id"] in set(opts.task_ids)]
    if not base:
        raise InputError(f"--base {opts.base}: no catalog-mode enabled runs that loaded a skill")
    _refuse_unisolated(opts, [tasks[str(r["task_id"])] for r in base])
    model_label = opts.model_label or opts.agent.model
    out = Path(opts.out)
    done = prepare_output(out, opts.retry_errors)
    candidates = [Episode(str(rec["task_id"]), "enabled", int(rec.get("epoch", 1)), sp.name, m, source=rec)
                  for rec in base for sp in specs for m in (range(sp.masks) if sp.name == "mask" else (-1,))]
    plan = Plan.of(out, candidates, done, model_label, None, len({r["task_id"] for r in base}),
                   label=f"catalog arms {opts.arms}")
    summary = RunSummary(out=str(out), n_tasks=plan.n_tasks, planned=len(plan.episodes), skipped=plan.skipped)
    if not plan.episodes:
        return summary
    client = ChatClient(opts.agent)
    scorer = TaskFileScorer(opts.limits, opts.threshold)
    arm_judge = _pointwise_judge(opts, tasks.values(), plan, model_label, summary)
    closing: Any = client if arm_judge is None else _Both(client, arm_judge)

    def one(ep_: Episode) -> dict[str, Any]:
        rec, arm, m = ep_.source, ep_.arm, ep_.mask
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
        judged = arm_judge is not None and is_judged(task)
        try:
            ep = call_agent(agent_fn, task_view(task, seed, epoch), skills, opts.episode_timeout, "built-in catalog agent")
            score, answer = (Score(False, "to be judged"), ep.answer) if judged else scorer.score(task, ep.answer)
        except Exception as exc:  # a bug must not kill a long run either
            out_rec["error"] = _error_of(exc, task.task_id)
            return out_rec
        out_rec.update(correct=bool(score.correct), invoked=ep.invoked, retrievals=ep.retrievals, answer=answer)
        meta.update({"latency_s": round(ep.latency_s, 3), "usage": ep.usage, "score": score.reason,
                     "loaded": ep.loaded, "replayed_turns": len(rec["meta"]["replay"])})
        if arm == "mask":
            meta["kept"] = [s for s in ep.loaded if mask_keeps(aseed, s)]
            meta["withheld"] = [s for s in ep.loaded if not mask_keeps(aseed, s)]
        return arm_judge.grade(out_rec, task) if judged else out_rec

    engine_for(opts.engine)(plan, one, Writer(out), closing, summary, opts.concurrency, quiet, on_record)
    return summary
