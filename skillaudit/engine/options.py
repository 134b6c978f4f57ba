"""The options of one run (`RunOptions`, filled in by the CLI) and what follows from them alone:
the per-task seed, the excluded skills, the shard and the tasks a run covers."""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from skillaudit.agents.agent import AgentConfig
from skillaudit.errors import InputError
from skillaudit.sandbox.process import Limits
from skillaudit.tasks.benchmarks import Task, load_tasks, sample_tasks

CONDITIONS = ("enabled", "disabled")


@dataclass
class RunOptions:
    """Everything `skillaudit run` needs (plain data; the CLI fills it in)."""

    benchmark: str
    out: str
    agent: AgentConfig
    skills: str | None = None
    data: str | None = None
    limit: int | None = None
    seed: int = 0
    epochs: int = 1
    concurrency: int = 1
    exclude_skills: tuple[str, ...] = ()
    block: int = 8
    retry_errors: bool = False
    task_ids: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    cache_dir: str | None = None
    model_label: str | None = None
    shard: tuple[int, int] | None = None  # (i, n), 1-based: run every n-th selected task from the i-th
    arms: str | None = None  # `--arms`: run these arms of the pairs in `base` instead of the main pair
    base: str | None = None  # the log whose enabled runs the arms replay
    prune: tuple[str, ...] = ()  # the `pruned` arm's excluded skills
    unsafe_scoring: bool = False  # score code even where the sandbox cannot isolate it
    tasks: str | None = None  # `--tasks FILE`: a task file (tasks/taskfile.py) instead of a benchmark
    agent_spec: str | None = None  # `--agent module:callable` (agents/protocol.py)
    skills_mode: str = "search"  # `--skills-mode`: search (search_skills) or catalog (load_skill)
    episode_timeout: float | None = None  # `--episode-timeout`: seconds per agent call
    threshold: float = 1.0  # `--threshold` for numeric `checker` scores
    reuse: str | None = None  # `--reuse OLD.jsonl`: copy what cannot have changed
    reuse_skills: str | None = None  # `--reuse-skills DIR`: the library OLD was made with (logs without hashes)
    engine: str = "threads"  # `--engine NAME`: what executes the plan (skillaudit.util.plugins, group engines)
    judge: Any = None  # `--judge-endpoint/--judge-model`: the JudgeConfig of `grader: judge` tasks (agents/judge.py)


def shard_tasks(tasks: list[Task], shard: tuple[int, int] | None) -> list[Task]:
    """The tasks of shard (i, n): the i-th of every n selected tasks, so n machines split one run.

    A task keeps both conditions and all its epochs in one shard, so each shard's log pairs on its
    own and the shard logs together pair exactly like one run's log.
    """
    if shard is None:
        return tasks
    i, n = shard
    if not 1 <= i <= n:
        raise InputError(f"--shard {i}/{n}: need 1 <= I <= N")
    return tasks[i - 1 :: n]


def task_seed(seed: int, task_id: str, epoch: int) -> int:
    """The sampling seed of one task and epoch, shared by both conditions."""
    return zlib.crc32(f"{seed}:{task_id}:{epoch}".encode()) & 0x7FFFFFFF


def parse_exclude(value: str | None) -> tuple[str, ...]:
    """`a,b` or a file (`@file` or an existing path) with one id per line or comma-separated."""
    if not value:
        return ()
    text = value
    path = value[1:] if value.startswith("@") else value
    if value.startswith("@") or ((os.path.sep in value or value.endswith((".txt", ".json"))) and Path(path).is_file()):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if path.endswith(".json"):
            try:
                data = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{path}: not valid JSON ({exc})") from None
            if isinstance(data, dict):  # `skillaudit prune --json` output
                data = [r["skill_id"] for r in data.get("recommendations", []) if r.get("action") == "prune"]
            return tuple(str(x) for x in data)
    ids = []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        ids += [p.strip() for p in line.split(",") if p.strip()]
    return tuple(dict.fromkeys(ids))


def select_tasks(opts: RunOptions) -> list[Task]:
    """The tasks a run covers: a task file or a benchmark, then --task-id or --limit, then --shard."""
    from skillaudit.tasks.taskfile import load_task_file

    tasks = load_task_file(opts.tasks) if opts.tasks else load_tasks(opts.benchmark, opts.data)
    if opts.task_ids:
        by_id = {t.task_id: t for t in tasks}
        missing = [t for t in opts.task_ids if t not in by_id]
        if missing:
            raise InputError(f"unknown task id(s): {', '.join(missing)}")
        tasks = [by_id[t] for t in opts.task_ids]
    else:
        tasks = sample_tasks(tasks, opts.limit, opts.seed)
    return shard_tasks(tasks, opts.shard)
