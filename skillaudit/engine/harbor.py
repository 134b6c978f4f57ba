"""Harbor as the run engine (`skillaudit run --engine harbor`): a maintainer's own agent (Claude
Code, Codex, Gemini CLI, OpenHands, terminus-2 and the rest Harbor runs), with and without skills,
in Harbor's environments (docker locally; daytona, modal, e2b... at scale).

A batch engine: the episode plan of a run (every task of the dataset, both conditions, `--trials`
attempts) is handed to Harbor as **one** job config with two agents identical but for `skills`
(the skills folder, or none). Harbor builds a job's trials task by task with the agents innermost,
so each task's two arms run side by side in time: rate limits, provider-side model updates,
caching and machine load that drift over hours fall on both arms, and the job is one job to
resume. It is run with Harbor's own CLI (`harbor run -c CONFIG`), found on PATH or via
`SKILLAUDIT_HARBOR` and never vendored. Each finished trial is reported as it lands; the job folder
is then imported and paired by `import harbor` (each trial's side from its own `agent.skills`,
skill use from its own log, infrastructure failures as error records, never harms) and the records
appended to `--out`. `--dry-run` writes the config and prints the command, and runs nothing
(Harbor need not be installed).

A dataset whose tasks ship their own skills (`environment/skills/`, copied in by the task's
Dockerfile, as SkillsBench's are) cannot have a no-skills arm by injection: the engine refuses it
(a local dataset is checked; a registry dataset is not, and the run says so) unless
`--no-skills-dataset DIR` names a skills-free copy of the tasks; then the arms are two jobs started
together, each with half of `--n-concurrent`, so drift still falls on both.

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

from skillaudit.errors import HarnessError, InputError
from skillaudit.runs.provenance import (
    skill_digest,  # Harbor's digest of a skill folder (its lock.json's)
)

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
    no_skills_dataset: str | None = None  # a skills-free copy of the tasks (their own skills removed)
    skills_only: bool = False  # one job with the with-skills agent only (`triggers --engine harbor`)

    @property
    def jobs_path(self) -> Path:
        return Path(self.jobs_dir) if self.jobs_dir else Path(f"{self.out}.harbor")

    @property
    def name(self) -> str:
        return self.job_name or Path(self.out).stem

    def job_names(self) -> list[str]:
        """The job(s) this run writes: one interleaved job; with --no-skills-dataset one per arm;
        with --reuse one with-skills job."""
        if self.rerun_tasks is not None:
            return [f"{self.name}-reuse"]
        if self.skills_only:
            return [self.name]
        if self.no_skills_dataset:
            return [f"{self.name}-{word}" for _, word in SIDES]
        return [self.name]


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


def shipped_skills(dataset: str) -> dict[str, list[str]] | None:
    """{task: the skills it ships in environment/skills/} of a local dataset folder (tasks shipping
    none left out), or None for a registry dataset (not checked)."""
    from skillaudit.importers.harbor import task_skills

    root = Path(dataset)
    if not root.is_dir():
        return None
    out = {}
    for task in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        got = task_skills(str(task))
        if got:
            out[task.name] = got
    return out


def job_configs(run: HarborRun) -> dict[str, dict[str, Any]]:
    """{job name: Harbor job config (JobConfig, JSON)}. One job whose two agents are identical but
    for `skills` (the folder, or none): Harbor interleaves the arms per task. With
    --no-skills-dataset, two jobs equal but for the agent's skills and the dataset; with --reuse,
    one job with the with-skills agent only."""
    if run.trials < 1 or run.n_concurrent < 1:
        raise InputError("--trials and --n-concurrent must be at least 1")
    skills = Path(run.skills)
    if not skills.is_dir():
        raise InputError(f"--skills {run.skills}: not a folder of skills (<name>/SKILL.md)")
    agent: dict[str, Any] = {"name": run.agent_name, "kwargs": {k: _kwarg(v) for k, v in run.agent_kwargs}}
    if run.model:
        agent["model_name"] = run.model
    on = {**agent, "skills": [str(skills.resolve())]}
    off = {**agent, "skills": []}
    tasks = run.rerun_tasks if run.rerun_tasks is not None else run.task_ids

    def job(name: str, agents: list[dict[str, Any]], dataset: str, n_concurrent: int) -> dict[str, Any]:
        return {"job_name": name, "jobs_dir": str(run.jobs_path.resolve()), "n_attempts": run.trials,
                "n_concurrent_trials": n_concurrent, "environment": {"type": run.env}, "agents": agents,
                "datasets": [_dataset(dataset, tasks)]}

    names = run.job_names()
    if run.rerun_tasks is not None or run.skills_only:
        return {names[0]: job(names[0], [on], run.dataset, run.n_concurrent)}
    if run.no_skills_dataset:
        half = max(1, run.n_concurrent // 2)
        return {names[0]: job(names[0], [on], run.dataset, half),
                names[1]: job(names[1], [off], run.no_skills_dataset, max(1, run.n_concurrent - half))}
    return {names[0]: job(names[0], [on, off], run.dataset, run.n_concurrent)}


def check_dataset(run: HarborRun) -> str | None:
    """Refuse a dataset whose tasks ship their own skills (no no-skills arm by injection) unless
    --no-skills-dataset names a skills-free copy (which must ship none); a note for a registry
    dataset, which is not checked."""
    if run.rerun_tasks is not None:
        return None
    shipped = shipped_skills(run.dataset)
    if shipped is None:
        note = (f"--dataset {run.dataset} is not a local folder: whether its tasks ship their own skills "
                "(environment/skills/) was not checked")
        return note
    if shipped and not run.no_skills_dataset:
        first = ", ".join(f"{t} ({', '.join(s[:3])})" for t, s in list(shipped.items())[:3])
        more = f" and {len(shipped) - 3} more" if len(shipped) > 3 else ""
        raise InputError(f"--dataset {run.dataset}: {len(shipped)} task(s) ship their own skills in "
                         f"environment/skills/ ({first}{more}): a no-skills arm cannot be made by injection; give "
                         "--no-skills-dataset DIR, a copy of the tasks without their skills")
    if run.no_skills_dataset:
        if not Path(run.no_skills_dataset).is_dir():
            raise InputError(f"--no-skills-dataset {run.no_skills_dataset}: no such folder")
        still = shipped_skills(run.no_skills_dataset) or {}
        if still:
            raise InputError(f"--no-skills-dataset {run.no_skills_dataset}: {len(still)} task(s) still ship skills "
                             f"in environment/skills/ (first: {next(iter(still))}): not a skills-free copy")
    return None


def find_harbor() -> str | None:
    """Harbor's executable: SKILLAUDIT_HARBOR, else `harbor` on PATH; None when neither."""
    env = os.environ.get("SKILLAUDIT_HARBOR")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    return shutil.which("harbor")


def commands(run: HarborRun, config_paths: dict[str, Path], harbor: str = "harbor") -> dict[str, list[str]]:
    """{job name: the command that runs (or, when its job folder exists, resumes) it}."""
    out = {}
    for name, path in config_paths.items():
        folder = run.jobs_path / name
        if (folder / "config.json").is_file():
            out[name] = [harbor, "jobs", "resume", "-p", str(folder)]
        else:
            out[name] = [harbor, "run", "-c", str(path), "-y", *run.harbor_args]
    return out


def write_configs(run: HarborRun) -> dict[str, Path]:
    """The job config(s) written (atomically) into the jobs folder: {job name: path}."""
    from skillaudit.util.files import atomic_write_text

    run.jobs_path.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, cfg in job_configs(run).items():
        paths[name] = run.jobs_path / f"{name}.config.json"
        atomic_write_text(paths[name], json.dumps(cfg, indent=2) + "\n")
    return paths


def library_state(skills: str) -> tuple[dict[str, str], str]:
    """({skill: Harbor digest}, catalog hash) of a skills folder: the catalog is what an agent that
    lists skills sees of each (name and description)."""
    import hashlib

    from skillaudit.library import load_library

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
    disabled_jobs: list[str]  # the old no-skills trial folders the re-run trials pair with
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
    from skillaudit.engine.output import existing_records

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
    # the old no-skills trial folders themselves (their job may hold both arms: only these are read)
    trials = sorted({str(Path(str((r.get("meta") or {}).get("source"))).parent) for r in recs
                     if r.get("condition") == "disabled" and str(r.get("task_id")) in rerun
                     and isinstance((r.get("meta") or {}).get("source"), str)})
    return ReusePlan(copy=copy, rerun=rerun, disabled_jobs=trials, total=len(tasks))


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


def _watch(folder: Path, say: Callable[[str], None], stop: threading.Event, seen: set[str]) -> None:
    """Report each trial of `folder` whose result.json appears (polled; Harbor writes it last)."""
    while not stop.wait(2.0):
        _report_new(folder, say, seen)


def _side_of(doc: dict[str, Any]) -> str:
    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    agent = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    return "enabled" if agent.get("skills") else "disabled"


def _report_new(folder: Path, say: Callable[[str], None], seen: set[str]) -> None:
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
        if not isinstance(doc, dict):
            continue
        seen.add(t.name)
        vr = doc.get("verifier_result")
        reward = (vr or {}).get("rewards", {}).get("reward") if isinstance(vr, dict) else None
        exc = (doc.get("exception_info") or {}).get("exception_type") if isinstance(doc.get("exception_info"), dict) else None
        say(f"{_side_of(doc)}: trial {t.name} finished: reward {reward}" + (f" ({exc})" if exc else ""))


def run_harbor(run: HarborRun, *, dry_run: bool = False, quiet: bool = False,
               say: Callable[[str], None] | None = None) -> HarborSummary:
    """Run (or with `dry_run` only write and print) the job(s), then import and pair their trials
    into `run.out`; an infrastructure failure of Harbor itself is an error, never a wrong answer."""
    say = say or (lambda _m: None)
    if run.reuse:
        return _run_reuse(run, dry_run=dry_run, quiet=quiet, say=say)
    note = check_dataset(run)
    paths = write_configs(run)
    harbor = find_harbor()
    cmds = commands(run, paths, harbor or "harbor")
    summary = HarborSummary(out=run.out, jobs={name: str(run.jobs_path / name) for name in paths})
    if note:
        summary.notes.append(note)
        say(f"note: {note}")
    if dry_run:
        for path in paths.values():
            say(f"job config: {path}")
        for name in paths:
            say(" ".join(_quote(c) for c in cmds[name]))
        return summary
    if harbor is None:
        raise HarnessError(INSTALL_HINT)
    t0 = time.monotonic()
    _run_jobs(run, cmds, quiet, say, summary)
    _import_jobs(run, summary)
    if note:
        summary.notes.append(note)
    summary.wall_s = time.monotonic() - t0
    return summary


def _run_jobs(run: HarborRun, cmds: dict[str, list[str]], quiet: bool, say: Callable[[str], None],
              summary: HarborSummary) -> None:
    """Run the jobs with Harbor's CLI, started together, reporting every trial as it finishes; a job
    that fails is an error naming it (after every job has ended)."""
    folders = {name: run.jobs_path / name for name in cmds}
    seen: dict[str, set[str]] = {name: set() for name in cmds}
    stop = threading.Event()
    quiet_say: Callable[[str], None] = lambda _m: None  # noqa: E731
    watchers = [threading.Thread(target=_watch, args=(folders[n], quiet_say if quiet else say, stop, seen[n]),
                                 daemon=True) for n in cmds]
    for w in watchers:
        w.start()
    procs = {}
    try:
        for name, cmd in cmds.items():
            procs[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                           errors="replace")
        outputs = {name: p.communicate()[0] for name, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        stop.set()
        for w in watchers:
            w.join()
    for name in cmds:
        if not quiet:
            _report_new(folders[name], say, seen[name])
        summary.trials_done += len(seen[name])
    for name, p in procs.items():
        if p.returncode != 0:
            tail = " | ".join(ln.strip() for ln in (outputs[name] or "").strip().splitlines()[-3:])[:400]
            raise HarnessError(f"harbor (job {name}) exited {p.returncode}: {tail or 'no output'}; job folder "
                               f"{folders[name]}")


def _run_reuse(run: HarborRun, *, dry_run: bool, quiet: bool, say: Callable[[str], None]) -> HarborSummary:
    """`--reuse OLD`: copy what cannot have changed into `run.out` (a new file), run the with-skills
    job over the changed tasks only, pair its trials with the old no-skills trials."""
    from skillaudit.engine.output import existing_records, record_key
    from skillaudit.util.files import atomic_write_bytes

    out = Path(run.out)
    if out.exists() and out.resolve() == Path(run.reuse or "").resolve():
        raise InputError("--reuse: --out must be a new file, not the old log")
    plan = plan_reuse(run)
    rerun_run = HarborRun(**{**run.__dict__, "rerun_tasks": tuple(sorted(plan.rerun))})
    [job_name] = rerun_run.job_names()
    summary = HarborSummary(out=run.out, reuse=plan.sentence(), jobs={"enabled": str(rerun_run.jobs_path / job_name)})
    if dry_run:
        say(plan.sentence())
        if plan.rerun:
            paths = write_configs(rerun_run)
            say(" ".join(_quote(c) for c in commands(rerun_run, paths, find_harbor() or "harbor")[job_name]))
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
        raise InputError(f"--reuse {run.reuse}: the old no-skills trial folders the re-run tasks pair with are gone "
                         f"({', '.join(plan.disabled_jobs[:3]) or 'none logged'})")
    t0 = time.monotonic()
    paths = write_configs(rerun_run)
    _run_jobs(rerun_run, commands(rerun_run, paths, harbor), quiet, say, summary)
    from skillaudit.importers.harbor import import_harbor

    records, report = import_harbor(enabled=[str(rerun_run.jobs_path / job_name)], disabled=plan.disabled_jobs,
                                    model=run.model_label, offered=run.skills)
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
    """Import and pair the job folder(s) (each trial's side from its own agent.skills); append the
    records not yet in `run.out`."""
    from skillaudit.importers.harbor import import_harbor

    folders = [run.jobs_path / name for name in run.job_names()]
    for folder in folders:
        if not folder.is_dir():
            raise HarnessError(f"harbor wrote no job folder {folder}")
    local = Path(run.dataset).is_dir()
    records, report = import_harbor([str(f) for f in folders], model=run.model_label, offered=run.skills,
                                    tasks=run.dataset if local else None)
    _stamp(records, run.skills)
    summary.pairs = report.pairs
    summary.notes = list(report.notes)
    summary.errors = sum(1 for u in report.unpaired if "error record" in u.reason)
    summary.written = _append_new(Path(run.out), records)
    summary.skipped = len(records) - summary.written


def _append_new(out: Path, records: list[dict[str, Any]]) -> int:
    """Append the records whose key `out` does not hold yet (fsynced, one line each); how many."""
    from skillaudit.engine.output import Writer, existing_records, record_key

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
