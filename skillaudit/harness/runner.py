"""`skillaudit run`: both conditions per task, epochs, bounded concurrency, resume, JSON Lines.

The built-in agent runs through the agent protocol (harness/protocol.py): every episode, main pair
or arm, is `call_agent(search_agent(...), task, skills)`, the entry `--tasks` and `--agent` use.

Records follow DESIGN §3.1 and are appended one by one (flushed and fsynced), so a killed run loses
at most the records in flight; re-running the same command skips every (model, benchmark, task,
condition, epoch) already in the output file. Failures after retries become error records
(`"error": "<message>"`, `correct: false`), which `load_runs` leaves out and counts.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..errors import HarnessError, InputError, OutputError
from . import sandbox as _sandbox
from .agent import AgentConfig, AgentError, ChatClient
from .protocol import AgentFailure, ProtocolEpisode, Skills, call_agent, search_agent
from .retrieve import SkillIndex
from .sandbox import Limits
from .score import Scorer
from .tasks import CODE_BENCHMARKS, Task, load_tasks, sample_tasks

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
    tasks: str | None = None  # `--tasks FILE`: a task file (harness/taskfile.py) instead of a benchmark
    agent_spec: str | None = None  # `--agent module:callable` (harness/protocol.py)
    skills_mode: str = "search"  # `--skills-mode`: search (search_skills) or catalog (load_skill)
    episode_timeout: float | None = None  # `--episode-timeout`: seconds per agent call
    threshold: float = 1.0  # `--threshold` for numeric `checker` scores
    reuse: str | None = None  # `--reuse OLD.jsonl`: copy what cannot have changed
    reuse_skills: str | None = None  # `--reuse-skills DIR`: the library OLD was made with (logs without hashes)


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


@dataclass
class RunSummary:
    """What a run did: records written, skipped (resume), errors, wall time."""

    out: str
    n_tasks: int
    planned: int
    written: int = 0
    skipped: int = 0
    errors: int = 0
    correct: dict[str, int] = field(default_factory=lambda: {"enabled": 0, "disabled": 0})
    invoked: int = 0
    retrieved: int = 0
    wall_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    arms: dict[str, int] = field(default_factory=dict)  # arm -> records written
    arm_correct: dict[str, int] = field(default_factory=dict)
    reuse: str | None = None  # `--reuse`: "re-ran N of M episodes (why)"


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


def _existing(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(f"{path}: cannot read for resume ({exc.strerror or exc})") from None
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                if not line.endswith(b"\n"):
                    continue  # a record cut off by a kill: it is re-run
                raise OutputError(f"{path}:{lineno}: not valid JSON; refusing to append to it") from None
            if isinstance(rec, dict):
                yield lineno, rec


def _key(rec: dict[str, Any]) -> tuple:
    """The resume key: a main record's (model, benchmark, task, condition, epoch); arms add the arm
    and the mask seed."""
    key = (str(rec.get("model", "default")), str(rec.get("benchmark", "default")),
           str(rec.get("task_id")), str(rec.get("condition")), int(rec.get("epoch", 1) or 1))
    arm = rec.get("arm")
    if arm is None:
        return key
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    return (*key, str(arm), int(meta.get("mask_seed", -1)) if arm == "mask" else -1)


def _prepare_output(path: Path, retry_errors: bool) -> set[tuple]:
    """Keys already logged; with `retry_errors`, error records are first removed (atomic rewrite)."""
    done: set[tuple] = set()
    keep: list[bytes] = []
    dropped = 0
    truncated_tail = False
    for _, rec in _existing(path):
        if retry_errors and rec.get("error") is not None:
            dropped += 1
            continue
        done.add(_key(rec))
        keep.append(orjson.dumps(rec))
    if path.exists():
        raw = path.read_bytes()
        truncated_tail = bool(raw) and not raw.endswith(b"\n")
    if dropped or truncated_tail:
        from .._io import atomic_write_bytes

        atomic_write_bytes(path, b"".join(k + b"\n" for k in keep))
    return done


class _Writer:
    """Appends records to the output, one line each, flushed and fsynced, under a lock."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.fh = path.open("ab")
        except OSError as exc:
            raise OutputError(f"{path}: cannot open for appending ({exc.strerror or exc})") from None
        self.lock = threading.Lock()

    def write(self, rec: dict[str, Any]) -> None:
        line = orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        with self.lock:
            self.fh.write(line)
            self.fh.flush()
            with contextlib.suppress(OSError):
                os.fsync(self.fh.fileno())

    def close(self) -> None:
        self.fh.close()


def _progress(total: int, quiet: bool):
    """A rich progress bar on stderr (rate and ETA), or a no-op."""
    if quiet or total == 0:
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    class _Rate(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task):  # type: ignore[override]
            from rich.text import Text

            elapsed = task.elapsed or 0.0  # the mean over the run: records differ a lot in cost
            speed = task.completed / elapsed if elapsed > 0 and task.completed else None
            return Text(f"{speed * 60:.1f} rec/min" if speed else "-- rec/min", style="progress.data.speed")

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TaskProgressColumn(), _Rate(), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=False)


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


BUILTIN_AGENT = "built-in search agent"


def _finish(rec: dict[str, Any], task: Task, ep: ProtocolEpisode, score, answer: str) -> None:
    """Fill a record from a protocol episode of the built-in search agent and its score."""
    rec["correct"] = bool(score.correct)
    rec["invoked"] = ep.invoked
    rec["retrievals"] = ep.retrievals
    rec["answer"] = answer
    m = ep.meta
    rec["meta"].update({
        "latency_s": round(ep.latency_s, 3), "usage": ep.usage, "turns": m.get("turns"),
        "finish_reason": m.get("finish_reason"), "score": score.reason,
        "tool_calls": m.get("tool_calls", 0),
        "malformed_calls": m.get("malformed_calls", 0), "refused_calls": m.get("refused_calls", 0),
    })
    if m.get("replayed_turns"):
        rec["meta"]["replayed_turns"] = m["replayed_turns"]
    if task.is_code:
        rec["meta"]["response"] = ep.answer
    elif "extracted" in score.details:
        rec["meta"]["extracted"] = score.details["extracted"]


def _attempt(rec: dict[str, Any], task: Task, scorer: Scorer,
             episode: Callable[[], ProtocolEpisode]) -> dict[str, Any]:
    """Run `episode()`, score its answer and fill `rec`; a failure becomes the record's `error`."""
    try:
        _warm_oracle(scorer, task)
        ep = episode()
        score, answer = scorer.score(task, ep.answer)
    except (AgentError, AgentFailure) as exc:
        rec["error"] = f"agent: {exc}"
        return rec
    except HarnessError as exc:
        rec["error"] = f"harness: {exc}"
        return rec
    except Exception as exc:  # a bug or an odd reply must not kill a long run
        rec["error"] = f"unexpected {type(exc).__name__}: {exc}"
        return rec
    _finish(rec, task, ep, score, answer)
    return rec


def _warm_oracle(scorer: Scorer, task: Task) -> None:
    if task.benchmark == "mbpp_plus":
        from .tasks import mbpp_deserialize_inputs

        scorer.oracles.get(task, {
            "base": mbpp_deserialize_inputs(task.task_id, task.data["base_input"]),
            "plus": mbpp_deserialize_inputs(task.task_id, task.data["plus_input"])})


def select_tasks(opts: RunOptions) -> list[Task]:
    """The tasks a run covers: a task file or a benchmark, then --task-id or --limit, then --shard."""
    from .taskfile import load_task_file

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


def run(opts: RunOptions, quiet: bool = False,
        on_record: Callable[[dict[str, Any]], None] | None = None) -> RunSummary:
    """Run every sampled task in both conditions (and epochs) and append records to `opts.out`."""
    from ..library import load_library

    if opts.epochs < 1:
        raise InputError("--epochs must be at least 1")
    if opts.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if opts.agent.tool_mode not in ("text", "native", "chatml"):
        raise InputError("--tool-mode must be text, native or chatml")
    if opts.tasks or opts.agent_spec or opts.skills_mode != "search":
        from .taskrun import run_tasks

        return run_tasks(opts, quiet, on_record)
    if opts.arms:
        if opts.reuse:
            raise InputError("--reuse re-runs main pairs; run the arms of the new log with --arms --base NEW")
        return run_arms(opts, quiet, on_record)
    from .taskrun import _view, plan_reuse, seed_output
    unsafe_reason = _unsafe_reason(opts)
    tasks = select_tasks(opts)
    warnings: list[str] = _sandbox_warnings(opts, unsafe_reason)
    index = None
    lib_hash = None
    if opts.skills:
        library = load_library(opts.skills)
        warnings += list(library.warnings)
        index = SkillIndex(library, set(opts.exclude_skills))
        if index.unknown_excluded:
            warnings.append(f"--exclude-skills: not in the library: {', '.join(index.unknown_excluded)}")
        if not index.skills:
            raise InputError("no skills left in the library after --exclude-skills")
        import hashlib

        lib_hash = hashlib.sha256("".join(s.content_hash for s in index.skills).encode()).hexdigest()
    else:
        raise InputError("--skills is required: the enabled condition needs a skill library")

    out = Path(opts.out)
    model_label = opts.model_label or opts.agent.model
    reuse_line = None
    if opts.reuse:
        # copy every record whose view of the library cannot have changed; the rest are re-run below
        plan = plan_reuse(opts.reuse, index, "search", reuse_library=opts.reuse_skills, top_k=opts.agent.top_k)
        seed_output(out, plan)
        reuse_line = plan.sentence()
    done = _prepare_output(out, opts.retry_errors)
    units: list[tuple[Task, str, int]] = []
    skipped = 0
    block = max(1, opts.block)
    for epoch in range(1, opts.epochs + 1):
        for start in range(0, len(tasks), block):
            chunk = tasks[start:start + block]
            # enabled runs of a block first, then disabled: consecutive requests share the longer
            # system prompt, which servers with prefix caching reuse
            for cond in CONDITIONS:
                for t in chunk:
                    if (model_label, opts.benchmark, t.task_id, cond, epoch) in done:
                        skipped += 1
                    else:
                        units.append((t, cond, epoch))
    summary = RunSummary(out=str(out), n_tasks=len(tasks), planned=len(units), skipped=skipped,
                         warnings=warnings, reuse=reuse_line)
    if not units:
        return summary

    scorer = Scorer(opts.limits, opts.cache_dir)
    client = ChatClient(opts.agent)
    agent_fn = search_agent(client, opts.agent)
    writer = _Writer(out)
    base_meta = {**opts.agent.public(), "harness": f"skillaudit {__version__}",
                 "excluded_skills": list(opts.exclude_skills)}
    if lib_hash:
        base_meta["library_hash"] = lib_hash[:16]
    if unsafe_reason:
        base_meta["unsafe_scoring"] = True

    def one(task: Task, cond: str, epoch: int) -> dict[str, Any]:
        seed = task_seed(opts.seed, task.task_id, epoch)
        rec: dict[str, Any] = {
            "task_id": task.task_id, "condition": cond, "correct": False, "model": model_label,
            "benchmark": opts.benchmark, "epoch": epoch, "invoked": False, "retrievals": [],
            "answer": "", "meta": {**base_meta, "seed": seed}, "error": None,
        }

        def episode() -> ProtocolEpisode:
            skills = Skills(index, opts.agent.top_k) if cond == "enabled" else None
            ep = call_agent(agent_fn, _view(task, seed, epoch), skills, opts.episode_timeout, BUILTIN_AGENT,
                            trusted=True)
            if cond == "enabled" and ep.meta.get("replay"):
                rec["meta"]["replay"] = ep.meta["replay"]
            return ep

        return _attempt(rec, task, scorer, episode)

    label = f"{opts.benchmark} {model_label}" + (" [UNSAFE scoring: not isolated]" if unsafe_reason else "")
    _execute(units, one, writer, client, summary, label, opts.concurrency, quiet, on_record)
    return summary


def _execute(units: list, one: Callable[..., dict[str, Any]], writer: _Writer, client: ChatClient,
             summary: RunSummary, label: str, concurrency: int, quiet: bool,
             on_record: Callable[[dict[str, Any]], None] | None) -> None:
    """Run `one(*unit)` for every unit with bounded concurrency, appending each record as it lands."""
    progress = _progress(len(units), quiet)
    bar = progress.add_task(label, total=len(units)) if progress else None
    t0 = time.monotonic()
    try:
        if progress:
            progress.start()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            pending: set[Future] = set()
            queue = iter(units)

            def fill() -> None:
                for unit in queue:
                    pending.add(pool.submit(one, *unit))
                    if len(pending) >= concurrency:
                        break

            fill()
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    pending.discard(fut)
                    rec = fut.result()
                    writer.write(rec)
                    summary.written += 1
                    arm = rec.get("arm")
                    if arm:
                        summary.arms[arm] = summary.arms.get(arm, 0) + 1
                    if rec["error"] is not None:
                        summary.errors += 1
                    elif rec["correct"] and not arm:
                        summary.correct[rec["condition"]] += 1
                    elif rec["correct"]:
                        summary.arm_correct[arm] = summary.arm_correct.get(arm, 0) + 1
                    if rec["condition"] == "enabled" and rec.get("invoked") and not arm:
                        summary.invoked += 1
                        if any(r["skills"] for r in rec["retrievals"]):
                            summary.retrieved += 1
                    if on_record:
                        on_record(rec)
                    if progress:
                        progress.advance(bar)
                fill()
    finally:
        if progress:
            progress.stop()
        writer.close()
        client.close()
        summary.wall_s = time.monotonic() - t0


#: settings an arm must share with the base run it replays (meta key, AgentConfig attribute)
_SAME = (("tool_call_mode", "tool_mode"), ("tool_choice", "tool_choice"), ("max_calls", "max_calls"),
         ("temperature", "temperature"), ("max_tokens", "max_tokens"), ("top_k", "top_k"))


def _arm_library(opts: RunOptions, specs: list, unsafe_reason: str | None,
                 ) -> tuple[SkillIndex, SkillIndex | None, list[str]]:
    """The arms' options checked and their library: (index, index without --prune's skills, warnings)."""
    from ..library import load_library

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
    from .arm_runner import base_models, read_base

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
    from .arm_runner import ArmTool, arm_seed, arm_units, mask_draw, parse_arms, replay_turns
    from .taskrun import _view

    specs = parse_arms(opts.arms or "")
    unsafe_reason = _unsafe_reason(opts)
    index, pruned_index, warnings = _arm_library(opts, specs, unsafe_reason)
    model_label = opts.model_label or opts.agent.model
    pairs, tasks = _arm_pairs(opts, index, model_label, warnings)

    out = Path(opts.out)
    done = _prepare_output(out, opts.retry_errors)
    units = []
    skipped = 0
    for pair, arm, m in arm_units(pairs, specs, frozenset(opts.prune)):
        cond = "disabled" if arm == "replicate" else "enabled"
        key = (model_label, opts.benchmark, pair.task_id, cond, pair.epoch, arm, m)
        if key in done:
            skipped += 1
        else:
            units.append((pair, arm, m))
    summary = RunSummary(out=str(out), n_tasks=len({k[0] for k in pairs}), planned=len(units), skipped=skipped,
                         warnings=warnings)
    if not units:
        return summary
    scorer = Scorer(opts.limits, opts.cache_dir)
    client = ChatClient(opts.agent)
    writer = _Writer(out)
    chatml_forced = opts.agent.tool_mode == "chatml" and opts.agent.tool_choice == "required"

    def one(pair, arm: str, m: int) -> dict[str, Any]:
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
                return call_agent(search_agent(client, opts.agent), _view(task, meta["seed"], pair.epoch), None,
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
                return call_agent(agent_fn, _view(task, seed, pair.epoch),
                                  Skills(index, opts.agent.top_k, search_arm=tool),
                                  opts.episode_timeout, BUILTIN_AGENT, trusted=True)

        return _attempt(rec, task, scorer, episode)

    names = ",".join(sp.name if sp.name != "mask" else f"mask:{sp.masks}" for sp in specs)
    label = f"{opts.benchmark} {model_label} arms {names}" + (" [UNSAFE scoring: not isolated]" if unsafe_reason else "")
    _execute(units, one, writer, client, summary, label, opts.concurrency, quiet, on_record)
    return summary
