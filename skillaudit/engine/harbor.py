"""Harbor as the run engine (`skillaudit run --engine harbor`): a maintainer's own agent (Claude
Code, Codex, Gemini CLI, OpenHands, terminus-2 and the rest Harbor runs), with and without skills,
in Harbor's environments (docker locally; daytona, modal, e2b... at scale).

A batch engine: the episode plan of a run (every task of the dataset, both conditions, `--trials`
attempts) is handed to Harbor as two job configs that differ **only** in the injected skills
(`agents[0].skills`: the skills folder, or none), run with Harbor's own CLI (`harbor run -c
CONFIG`), found on PATH or via `SKILLAUDIT_HARBOR` and never vendored. Each finished trial is
reported as it lands; the two job folders are then imported and paired by `import harbor` (skill
use from each trial's own log, infrastructure failures as error records, never harms) and the
records appended to `--out`. `--dry-run` writes the configs and prints the commands, and runs
nothing (Harbor need not be installed).

Re-running the same command resumes: a job folder that already exists is resumed with `harbor jobs
resume -p FOLDER` (its finished trials are not re-run) instead of started again, and records
already in `--out` are not written twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HarnessError, InputError
from ..provenance import skill_digest  # Harbor's digest of a skill folder (its lock.json's)

INSTALL_HINT = ("harbor is not installed: install it with `uv tool install harbor` (or `pipx install harbor`; "
                "it needs Python >= 3.12), or point SKILLAUDIT_HARBOR at its executable")
SIDES = (("enabled", "skills"), ("disabled", "noskills"))


@dataclass(frozen=True)
class HarborRun:
    """What `run --engine harbor` was asked for (the CLI fills it in)."""

    dataset: str  # a local dataset folder (tasks with task.toml) or a registry name (name@version)
    agent_name: str  # Harbor's agent (claude-code, codex, gemini-cli, openhands, terminus-2, ...)
    skills: str  # the skills folder injected into the with-skills job
    out: str  # the run log the paired records are appended to
    model: str | None = None  # the agent's model (Harbor's -m)
    env: str = "docker"
    trials: int = 1  # Harbor's attempts per task (records' epochs)
    n_concurrent: int = 1
    agent_kwargs: tuple[tuple[str, str], ...] = ()  # Harbor's --ak KEY=VALUE
    harbor_args: tuple[str, ...] = ()  # passed verbatim to `harbor run`
    task_ids: tuple[str, ...] = ()
    jobs_dir: str | None = None  # default: <out>.harbor/
    job_name: str | None = None  # default: the out file's stem
    model_label: str | None = None
    reuse: str | None = None  # an old log of this engine: re-run only the tasks whose skills changed
    rerun_tasks: tuple[str, ...] | None = None  # set by the reuse plan: the with-skills job runs only these

    @property
    def jobs_path(self) -> Path:
        return Path(self.jobs_dir) if self.jobs_dir else Path(f"{self.out}.harbor")

    @property
    def name(self) -> str:
        return self.job_name or Path(self.out).stem

    def job_name_of(self, side: str) -> str:
        return f"{self.name}-{dict(SIDES)[side]}" + ("-reuse" if self.rerun_tasks is not None else "")


def _dataset(spec: str, task_ids: Sequence[str]) -> dict[str, Any]:
    local = Path(spec)
    d: dict[str, Any] = {"path": str(local.resolve())} if local.exists() else {}
    if not d:
        name, _, version = spec.partition("@")
        d = {"name": name, **({"version": version} if version else {})}
    if task_ids:
        d["task_names"] = list(task_ids)
    return d


def _kwarg(value: str) -> Any:
    """An agent kwarg's value as Harbor's CLI would parse it: JSON when it is JSON, else the text."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def job_configs(run: HarborRun) -> dict[str, dict[str, Any]]:
    """{"enabled": config, "disabled": config}: two Harbor job configs (JobConfig, JSON) equal but
    for `agents[0].skills` (and the job's name)."""
    if run.trials < 1 or run.n_concurrent < 1:
        raise InputError("--trials and --n-concurrent must be at least 1")
    skills = Path(run.skills)
    if not skills.is_dir():
        raise InputError(f"--skills {run.skills}: not a folder of skills (<name>/SKILL.md)")
    agent: dict[str, Any] = {"name": run.agent_name, "kwargs": {k: _kwarg(v) for k, v in run.agent_kwargs}}
    if run.model:
        agent["model_name"] = run.model
    out = {}
    for side, _ in SIDES:
        out[side] = {
            "job_name": run.job_name_of(side),
            "jobs_dir": str(run.jobs_path.resolve()),
            "n_attempts": run.trials,
            "n_concurrent_trials": run.n_concurrent,
            "environment": {"type": run.env},
            "agents": [{**agent, "skills": [str(skills.resolve())] if side == "enabled" else []}],
            "datasets": [_dataset(run.dataset, run.rerun_tasks if run.rerun_tasks is not None else run.task_ids)],
        }
    return out


def find_harbor() -> str | None:
    """Harbor's executable: SKILLAUDIT_HARBOR, else `harbor` on PATH; None when neither."""
    env = os.environ.get("SKILLAUDIT_HARBOR")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    return shutil.which("harbor")


def commands(run: HarborRun, config_paths: dict[str, Path], harbor: str = "harbor") -> dict[str, list[str]]:
    """The command that runs (or, when its job folder exists, resumes) each side's job."""
    out = {}
    for side, _ in SIDES:
        folder = run.jobs_path / run.job_name_of(side)
        if (folder / "config.json").is_file():
            out[side] = [harbor, "jobs", "resume", "-p", str(folder)]
        else:
            out[side] = [harbor, "run", "-c", str(config_paths[side]), "-y", *run.harbor_args]
    return out


def write_configs(run: HarborRun) -> dict[str, Path]:
    """The two job configs written (atomically) into the jobs folder; their paths."""
    from .._io import atomic_write_text

    run.jobs_path.mkdir(parents=True, exist_ok=True)
    paths = {}
    for side, cfg in job_configs(run).items():
        paths[side] = run.jobs_path / f"{cfg['job_name']}.config.json"
        atomic_write_text(paths[side], json.dumps(cfg, indent=2) + "\n")
    return paths


def library_state(skills: str) -> tuple[dict[str, str], str]:
    """({skill: Harbor digest}, catalog hash) of a skills folder: the catalog is what an agent that
    lists skills sees of each (name and description)."""
    import hashlib

    from ..library import load_library

    root = Path(skills)
    digests = {d.name: skill_digest(d) for d in sorted(root.iterdir()) if (d / "SKILL.md").is_file()}
    lib = load_library(skills)
    catalog = hashlib.sha256("\0".join(f"{s.id}\0{s.description}" for s in lib).encode()).hexdigest()[:16]
    return digests, catalog


@dataclass
class ReusePlan:
    """Which tasks of an old log must run again with skills, and why; the records copied."""

    copy: list[dict[str, Any]]
    rerun: dict[str, str]  # task -> why
    disabled_jobs: list[str]  # the old no-skills job folders the re-run trials pair with
    total: int

    def sentence(self) -> str:
        whys: dict[str, int] = {}
        for w in self.rerun.values():
            whys[w] = whys.get(w, 0) + 1
        why = "; ".join(f"{n} {w}" for w, n in sorted(whys.items())) or "nothing changed"
        return f"re-ran {len(self.rerun)} of {self.total} tasks with skills ({why})"


def plan_reuse(run: HarborRun) -> ReusePlan:
    """Copy what cannot have changed: every without-skills record, and the with-skills records of a
    task whose used skills (Harbor's digests) and catalog (names and descriptions) are unchanged."""
    from .output import existing_records

    old = Path(run.reuse or "")
    if not old.is_file():
        raise InputError(f"--reuse {old}: no such file")
    digests, catalog = library_state(run.skills)
    recs = [r for _, r in existing_records(old) if r.get("arm") is None]
    rerun: dict[str, str] = {}
    tasks: set[str] = set()
    for r in recs:
        task = str(r.get("task_id"))
        tasks.add(task)
        if r.get("condition") != "enabled":
            continue
        meta = r.get("meta") if isinstance(r.get("meta"), dict) else {}
        logged = meta.get("skill_digests") if isinstance(meta.get("skill_digests"), dict) else None
        used = [s for call in r.get("retrievals") or [] if isinstance(call, dict) for s in call.get("skills") or []
                if isinstance(s, str)]
        if r.get("error") is not None:
            why = "error record"
        elif logged is None:
            why = "no skill digests logged"
        elif meta.get("catalog_hash") != catalog:
            why = "the catalog (names, descriptions) changed"
        elif any(logged.get(s) != digests.get(s) for s in used):
            why = "a skill it used changed"
        else:
            continue
        rerun.setdefault(task, why)
    copy = [r for r in recs if r.get("condition") != "enabled" or str(r.get("task_id")) not in rerun]
    jobs = sorted({str(Path(str((r.get("meta") or {}).get("source"))).parent.parent) for r in recs
                   if r.get("condition") == "disabled" and str(r.get("task_id")) in rerun
                   and isinstance((r.get("meta") or {}).get("source"), str)})
    return ReusePlan(copy=copy, rerun=rerun, disabled_jobs=jobs, total=len(tasks))


@dataclass
class HarborSummary:
    out: str
    jobs: dict[str, str] = field(default_factory=dict)
    trials_done: int = 0
    written: int = 0
    skipped: int = 0
    errors: int = 0
    pairs: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    reuse: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "skillaudit.harbor-run/v1", **self.__dict__}


def _watch(folder: Path, say: Callable[[str], None], stop: threading.Event, side: str, seen: set[str]) -> None:
    """Report each trial of `folder` whose result.json appears (polled; Harbor writes it last)."""
    while not stop.wait(2.0):
        _report_new(folder, say, side, seen)


def _report_new(folder: Path, say: Callable[[str], None], side: str, seen: set[str]) -> None:
    try:
        trials = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return
    for t in trials:
        res = t / "result.json"
        if t.name in seen or not res.is_file():
            continue
        try:
            doc = json.loads(res.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being written
        seen.add(t.name)
        vr = doc.get("verifier_result") if isinstance(doc, dict) else None
        reward = (vr or {}).get("rewards", {}).get("reward") if isinstance(vr, dict) else None
        exc = (doc.get("exception_info") or {}).get("exception_type") if isinstance(doc.get("exception_info"), dict) else None
        say(f"{side}: trial {t.name} finished: reward {reward}" + (f" ({exc})" if exc else ""))


def run_harbor(run: HarborRun, *, dry_run: bool = False, quiet: bool = False,
               say: Callable[[str], None] | None = None) -> HarborSummary:
    """Run (or with `dry_run` only write and print) the two jobs, then import and pair their trials
    into `run.out`; an infrastructure failure of Harbor itself is an error, never a wrong answer."""
    say = say or (lambda _m: None)
    if run.reuse:
        return _run_reuse(run, dry_run=dry_run, quiet=quiet, say=say)
    paths = write_configs(run)
    harbor = find_harbor()
    cmds = commands(run, paths, harbor or "harbor")
    summary = HarborSummary(out=run.out, jobs={s: str(run.jobs_path / run.job_name_of(s)) for s, _ in SIDES})
    if dry_run:
        for side, _ in SIDES:
            say(f"{side} job config: {paths[side]}")
        for side, _ in SIDES:
            say(" ".join(_quote(c) for c in cmds[side]))
        return summary
    if harbor is None:
        raise HarnessError(INSTALL_HINT)
    t0 = time.monotonic()
    _run_jobs(run, cmds, [s for s, _ in SIDES], harbor, quiet, say, summary)
    _import_jobs(run, summary)
    summary.wall_s = time.monotonic() - t0
    return summary


def _run_jobs(run: HarborRun, cmds: dict[str, list[str]], sides: list[str], harbor: str, quiet: bool,
              say: Callable[[str], None], summary: HarborSummary) -> None:
    """Run each side's job with Harbor's CLI, reporting every trial as it finishes."""
    for side in sides:
        folder = run.jobs_path / run.job_name_of(side)
        seen: set[str] = set()
        stop = threading.Event()
        watcher = threading.Thread(target=_watch, args=(folder, say if not quiet else (lambda _m: None), stop, side,
                                                        seen), daemon=True)
        watcher.start()
        try:
            proc = subprocess.run(cmds[side], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  errors="replace", check=False)
        finally:
            stop.set()
            watcher.join()
        if not quiet:
            _report_new(folder, say, side, seen)
        if proc.returncode != 0:
            tail = " | ".join(ln.strip() for ln in (proc.stdout or "").strip().splitlines()[-3:])[:400]
            raise HarnessError(f"harbor ({side} job) exited {proc.returncode}: {tail or 'no output'}; job folder "
                               f"{folder}")
        summary.trials_done += len(seen)


def _run_reuse(run: HarborRun, *, dry_run: bool, quiet: bool, say: Callable[[str], None]) -> HarborSummary:
    """`--reuse OLD`: copy what cannot have changed into `run.out` (a new file), run the with-skills
    job over the changed tasks only, pair its trials with the old no-skills trials."""
    from .._io import atomic_write_bytes
    from .output import existing_records, record_key

    out = Path(run.out)
    if out.exists() and out.resolve() == Path(run.reuse or "").resolve():
        raise InputError("--reuse: --out must be a new file, not the old log")
    plan = plan_reuse(run)
    rerun_run = HarborRun(**{**run.__dict__, "rerun_tasks": tuple(sorted(plan.rerun))})
    summary = HarborSummary(out=run.out, reuse=plan.sentence(),
                            jobs={"enabled": str(rerun_run.jobs_path / rerun_run.job_name_of("enabled"))})
    if dry_run:
        say(plan.sentence())
        if plan.rerun:
            paths = write_configs(rerun_run)
            say(" ".join(_quote(c) for c in commands(rerun_run, paths, find_harbor() or "harbor")["enabled"]))
        return summary
    have = {record_key(r) for _, r in existing_records(out)}
    add = [r for r in plan.copy if record_key(r) not in have]
    if add:
        import orjson

        old_bytes = out.read_bytes() if out.exists() else b""
        atomic_write_bytes(out, old_bytes + b"".join(orjson.dumps(r) + b"\n" for r in add))
    summary.skipped = len(plan.copy) - len(add)
    if not plan.rerun:
        summary.written = len(add)
        return summary
    harbor = find_harbor()
    if harbor is None:
        raise HarnessError(INSTALL_HINT)
    if not plan.disabled_jobs or not all(Path(j).is_dir() for j in plan.disabled_jobs):
        raise InputError(f"--reuse {run.reuse}: the old no-skills job folders the re-run tasks pair with are gone "
                         f"({', '.join(plan.disabled_jobs) or 'none logged'})")
    t0 = time.monotonic()
    paths = write_configs(rerun_run)
    _run_jobs(rerun_run, commands(rerun_run, paths, harbor), ["enabled"], harbor, quiet, say, summary)
    from ..importers.harbor import import_harbor

    records, report = import_harbor(enabled=[str(rerun_run.jobs_path / rerun_run.job_name_of("enabled"))],
                                    disabled=plan.disabled_jobs, model=run.model_label, offered=run.skills)
    _stamp(records, run.skills)
    rerun = [r for r in records if r["condition"] == "enabled" and r["task_id"] in plan.rerun]
    summary.written = len(add) + _append_new(out, rerun)
    summary.pairs = report.pairs
    summary.notes = list(report.notes)
    summary.wall_s = time.monotonic() - t0
    return summary


def _stamp(records: list[dict[str, Any]], skills: str) -> None:
    """What `--reuse` compares, on each with-skills record: the catalog hash, and the injected skills'
    digests where the trial's lock.json gave none (Harbor's digest of the skills folder given)."""
    digests, catalog = library_state(skills)
    for r in records:
        if r["condition"] == "enabled":
            meta = r.setdefault("meta", {})
            meta["catalog_hash"] = catalog
            meta.setdefault("skill_digests", dict(digests))


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


def _import_jobs(run: HarborRun, summary: HarborSummary) -> None:
    """Import and pair the two job folders; append the records not yet in `run.out`."""
    from ..importers.harbor import import_harbor

    enabled = run.jobs_path / run.job_name_of("enabled")
    disabled = run.jobs_path / run.job_name_of("disabled")
    for folder in (enabled, disabled):
        if not folder.is_dir():
            raise HarnessError(f"harbor wrote no job folder {folder}")
    records, report = import_harbor(enabled=[str(enabled)], disabled=[str(disabled)], model=run.model_label,
                                    offered=run.skills)
    _stamp(records, run.skills)
    summary.pairs = report.pairs
    summary.notes = list(report.notes)
    summary.errors = sum(1 for u in report.unpaired if "error record" in u.reason)
    summary.written = _append_new(Path(run.out), records)
    summary.skipped = len(records) - summary.written


def _append_new(out: Path, records: list[dict[str, Any]]) -> int:
    """Append the records whose key `out` does not hold yet (fsynced, one line each); how many."""
    from .output import Writer, existing_records, record_key

    have = {record_key(r) for _, r in existing_records(out)}
    new = [r for r in records if record_key(r) not in have]
    if new:
        writer = Writer(out)
        try:
            for r in new:
                writer.write(r)
        finally:
            writer.close()
    return len(new)
