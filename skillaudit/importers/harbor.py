"""Harbor job folders, trial folders and trial `result.json` files to run logs.

A Harbor *trial* is a folder holding `result.json` (`task_name`, `trial_name`, `config.agent`,
`agent_info`, `verifier_result.rewards.reward`, `exception_info`) and, for some agents, the
agent's trajectory under `agent/`. A *job* is a folder of trials with its own `result.json`
(`n_total_trials`, `stats.evals.*.reward_stats` / `exception_stats` naming its trials).

- Sides: a trial's own config (`config.agent.skills`: skill folders -> enabled, none -> disabled)
  when its job injected skills into some trial (one job with both arms: two agents that differ only
  in `skills`, as `run --engine harbor` writes it); else `--enabled PATH...` / `--disabled
  PATH...`; else, with bare paths, the words of the path (`with-skills` / `skills` -> enabled;
  `without-skills`, `no-skills`, `noskills` -> disabled), from the input's own name down to the
  trial (a path with words of both sides is an error naming it), then `config.trials_dir` and
  `trial_uri`. The summary says which decided. A trial given by an option whose config says the
  other side takes its config's side and is a conflict (`meta.arm_issue`; `check` fails on it).
- Per trial: task = `task_name` (a string; `task_id` is an object in Harbor and is never used);
  model = `<agent>:<model>` (`config.agent.name` / `agent_info.name`, `config.agent.model_name` /
  `agent_info.model_info.name`); correct = reward >= `--threshold`. A trial with a verifier reward
  is scored by it whatever the agent raised (Harbor runs the verifier after an agent timeout; the
  exception is kept in `meta.exception`); an exception without a reward, no verifier result or a
  non-numeric reward is an error record: left out, counted and named, never a failure.
- Pairing: the valid trials of one (model, task, side) are replicates (`meta.k_of_n`). Error trials
  take no number; when one side has more valid trials than the other, the last started (then the
  last named) are surplus: left out and counted, never paired. The kept trials are numbered passes
  first, then by the skills they used, on both sides, so no figure depends on trial names, on their
  order or on where an error trial sat (which with-skills trial ran beside which without-skills
  trial is not observed: this is the least discordance the per-task counts allow).
- Skill use from each trial's own log (`trajectories.read_trial`: Claude Code stream-json, Gemini
  CLI session JSON, ATIF of any agent, SkillsBench's terminus-2 episode list), by the shared rules
  (`trajectories._rules`: activations, reads and runs of a skill's files). Offered: the agent's log,
  else the trial's `lock.json`, else the job's skill folders, else `--offered DIR`, else unknown. A
  with-skills trial without a readable log says `"use_logged": false` and the summary names it (up
  to 10, then a count); a without-skills trial never needs one.
- A job whose `result.json` lists trials absent on disk: reported as missing, never invented.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skillaudit.errors import ImportFormatError, InputError
from skillaudit.importers._common import (
    DISABLED,
    ENABLED,
    ImportReport,
    Pairer,
    amount_of,
    count_of,
    load_json,
)
from skillaudit.importers.trajectories import Trajectory, read_trial
from skillaudit.importers.trajectories.claude_code import read_claude_code
from skillaudit.util.term import named

__all__ = ["Trajectory", "import_harbor", "read_claude_code", "trajectory_of"]

EXPECTED = "a Harbor trial result.json (task_name, verifier_result, exception_info)"
_OFF = re.compile(r"(?<![a-z0-9])(without[-_ ]?skills?|no[-_ ]?skills?|noskills?)(?![a-z0-9])", re.I)
_ON = re.compile(r"(?<![a-z0-9])(with[-_ ]?skills?|skills)(?![a-z0-9])", re.I)
_MAX_DEPTH = 4  # folders below an input that are searched for result files


@dataclass
class _Trial:
    path: str  # the result.json
    folder: str | None  # the trial folder (None for a flattened result file)
    side: str | None
    how: str  # which word / option decided the side
    data: dict[str, Any] = field(default_factory=dict)
    detail: str = ""  # the path or field the deciding word was found in
    conflict: str | None = None  # an option put it on the side its own config contradicts (`_decide_sides`)


def _side_of_text(text: str) -> tuple[str | None, str | None, bool]:
    """(side, word, ambiguous) from the words of a path or name."""
    off = [m.group(1) for m in _OFF.finditer(text)]
    masked = _OFF.sub(" ", text)
    on = [m.group(1) for m in _ON.finditer(masked)]
    if off and on:
        return None, f"{on[0]!r} and {off[0]!r}", True
    if off:
        return DISABLED, off[0], False
    if on:
        return ENABLED, on[0], False
    return None, None, False


def _is_trial(d: Any) -> bool:
    return isinstance(d, dict) and ("task_name" in d or "verifier_result" in d or "trial_name" in d)


def _is_job(d: Any) -> bool:
    return isinstance(d, dict) and ("n_total_trials" in d or "stats" in d) and not _is_trial(d)


def _job_trials(d: dict[str, Any]) -> set[str]:
    """Trial names a job's result.json lists (reward and exception stats, trial_results)."""
    names: set[str] = set()
    evals = (d.get("stats") or {}).get("evals") if isinstance(d.get("stats"), dict) else None
    if isinstance(evals, dict):
        for ev in evals.values():
            if not isinstance(ev, dict):
                continue
            for key in ("reward_stats", "exception_stats"):
                block = ev.get(key)
                if not isinstance(block, dict):
                    continue
                groups = block.values() if key == "exception_stats" else [
                    v for sub in block.values() if isinstance(sub, dict) for v in sub.values()]
                for g in groups:
                    if isinstance(g, list):
                        names.update(x for x in g if isinstance(x, str))
    results = d.get("trial_results")
    for t in results if isinstance(results, list) else []:
        if isinstance(t, dict) and isinstance(t.get("trial_name"), str):
            names.add(t["trial_name"])
    return names


#: `read_trial`'s problems that mean "no log at all" (a without-skills trial never needs one)
_NO_LOG = ("no agent/ trajectory", "a flattened result file: no trial folder, no trajectory")


def _collect(arg: str, side: str | None, how: str, trials: list[_Trial], jobs: list[tuple[str, dict]],
             skipped: list[str] | None = None, passed_over: list[tuple[str, str, str | None]] | None = None
             ) -> None:
    """Every trial result under `arg` (a job folder, trial folder, folder of result files, or file).
    Symbolic links inside it are not followed (a trial folder linked to `/` would walk the host):
    they are listed in `skipped`. A trial folder without `result.json` (a `config.json` and an
    `agent/` folder: the trial ran, or began to, but left no outcome) goes into `passed_over` as
    (real path, path as given, side; None: from the path, unknown)."""
    if os.path.isfile(arg):
        _classify(arg, None, arg, side, how, trials, jobs, os.path.basename(arg))
        return
    if not os.path.isdir(arg):
        raise InputError(f"{arg}: no such file or folder")
    base = os.path.basename(os.path.normpath(arg))
    stack = [(arg, 0, base)]
    while stack:
        folder, depth, rel = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise InputError(f"{folder}: cannot read: {exc.strerror or exc}") from None
        names = {e.name for e in entries}
        if (passed_over is not None and "config.json" in names and "result.json" not in names
                and "agent" in names):
            passed_over.append((os.path.realpath(folder), rel, side))
        for e in entries:
            if e.is_symlink():
                if skipped is not None:
                    skipped.append(e.path)
                continue
            if e.is_file() and e.name.endswith(".json") and (e.name == "result.json" or e.name.endswith("result.json")):
                trial_folder = folder if e.name == "result.json" else None
                _classify(e.path, trial_folder, arg, side, how, trials, jobs,
                          rel if e.name == "result.json" else f"{rel}/{e.name}")
            elif e.is_dir() and depth < _MAX_DEPTH and e.name not in ("agent", "verifier", "artifacts"):
                stack.append((e.path, depth + 1, f"{rel}/{e.name}"))


def _classify(path: str, folder: str | None, arg: str, side: str | None, how: str,
              trials: list[_Trial], jobs: list[tuple[str, dict]], rel: str) -> None:
    data = load_json(path, EXPECTED)
    if _is_job(data):
        jobs.append((path, data))
        return
    if not _is_trial(data):
        raise ImportFormatError(f"{path}: neither a Harbor trial result (task_name, verifier_result) "
                                "nor a job result (n_total_trials, stats)")
    if side is None:
        s, word, ambiguous = _side_of_text(rel)
        if ambiguous:
            raise ImportFormatError(f"{path}: the path {rel!r} names both sides ({word}); give the sides "
                                    "with --enabled / --disabled")
        src, detail = f"the word {word!r} in the path", rel
        if s is None:
            cfg = data.get("config") if isinstance(data.get("config"), dict) else {}
            for name, text in (("config.trials_dir", cfg.get("trials_dir")), ("trial_uri", data.get("trial_uri"))):
                if isinstance(text, str):
                    s, word, ambiguous = _side_of_text(os.path.basename(os.path.dirname(text.rstrip("/")))
                                                       if name == "trial_uri" else os.path.basename(text.rstrip("/")))
                    if s is not None and not ambiguous:
                        src, detail = f"the word {word!r} in {name}", text
                        break
                    s = None
        if s is None:  # decided later from the trial's own config when its job injected skills
            src, detail = "", rel
        trials.append(_Trial(path, folder, s, src, data, detail))
    else:
        trials.append(_Trial(path, folder, side, how, data, arg))


CONFIG_SIDE = "config.agent.skills"


def _job_of(t: _Trial) -> str | None:
    """Which job a trial belongs to: its config's `job_id`, else its folder's parent (None for a
    flattened result file)."""
    cfg = t.data.get("config") if isinstance(t.data.get("config"), dict) else {}
    if isinstance(cfg.get("job_id"), str) and cfg["job_id"]:
        return "id:" + cfg["job_id"]
    return "dir:" + os.path.dirname(os.path.realpath(t.folder)) if t.folder is not None else None


def _folder_config(folder: str) -> dict[str, Any]:
    """A trial folder's `config.json` (Harbor's TrialConfig), or {} when it is absent, a link or
    unreadable."""
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path) or os.path.islink(path):
        return {}
    try:
        doc = load_json(path, "a Harbor trial config.json")
    except InputError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _passed_over_side(folder: str, rel: str) -> str | None:
    """The side of a trial folder without result.json: enabled when its config.json's agent.skills
    names skill folders; else the words of its path; else disabled when that list is empty."""
    cfg = _folder_config(folder)
    agent = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    if isinstance(agent.get("skills"), list) and agent["skills"]:
        return ENABLED
    side, _, ambiguous = _side_of_text(rel)
    if side is None and isinstance(agent.get("skills"), list):
        return DISABLED  # an explicit empty list, in a folder whose words say nothing
    return None if ambiguous else side


def _decide_sides(trials: list[_Trial]) -> list[str]:
    """Each trial's side from its own config's `agent.skills` when its job injected skills (some
    trial of the job has a non-empty list: one job with both arms, as `run --engine harbor` writes
    it); else --enabled / --disabled; else the path's words (set by `_classify`). A trial put on a
    side by --enabled / --disabled whose config says the other is a conflict: it takes its
    config's side and is returned (named in the note; `check` fails on it)."""
    injected = {_job_of(t) for t in trials if _job_skill_dirs(t.data)} - {None}
    conflicts = []
    for t in trials:
        if _job_of(t) not in injected:
            if t.side is None:
                raise ImportFormatError(f"{t.path}: cannot tell the side from the path {t.detail!r} (no with-skills / "
                                        "without-skills / skills / noskills word, and its job injected no skills "
                                        "(config.agent.skills)); give --enabled / --disabled")
            continue
        dirs = _job_skill_dirs(t.data)
        side = ENABLED if dirs else DISABLED
        if t.how in ("--enabled", "--disabled") and t.side != side:
            conflicts.append(t)
            t.conflict = (f"given as {t.how} ({t.detail}), but its config's agent.skills is {dirs or []}: "
                          f"counted as {side}")
        t.side, t.how, t.detail = side, CONFIG_SIDE, f"{dirs or []}"
    return sorted(os.path.basename(t.folder or t.path) for t in conflicts)


# ---------------------------------------------------------------- trajectories
def trajectory_of(folder: str | None) -> Trajectory:
    """The trial's skill use, read by the reader its folder calls for (`trajectories.read_trial`)."""
    return read_trial(folder)


def _lock_skills(folder: str | None) -> dict[str, str | None] | None:
    """{skill: digest} of what Harbor injected into the trial (its `lock.json` `skills[]`; a digest
    is None where the entry has none), or None without a readable lock.json."""
    if folder is None:
        return None
    path = os.path.join(folder, "lock.json")
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    try:
        doc = load_json(path, "a Harbor trial lock.json")
    except InputError:
        return None
    skills = doc.get("skills") if isinstance(doc, dict) else None
    if not isinstance(skills, list):
        return None
    return {s["name"]: s["digest"] if isinstance(s.get("digest"), str) else None
            for s in skills if isinstance(s, dict) and isinstance(s.get("name"), str) and s["name"]}


def _job_skill_dirs(d: dict[str, Any]) -> list[str] | None:
    """`config.agent.skills` of a trial result (the skill folders the job injected), or None."""
    cfg = d.get("config") if isinstance(d.get("config"), dict) else {}
    agent = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    dirs = agent.get("skills")
    return [x for x in dirs if isinstance(x, str)] if isinstance(dirs, list) else None


def _skills_loaded(d: dict[str, Any]) -> list[str]:
    """`agent_result.metadata.skills_loaded` (SkillsBench's terminus-2 writes it)."""
    ar = d.get("agent_result") if isinstance(d.get("agent_result"), dict) else {}
    md = ar.get("metadata") if isinstance(ar.get("metadata"), dict) else {}
    got = md.get("skills_loaded")
    return [x for x in got if isinstance(x, str) and x] if isinstance(got, list) else []


TASK_SKILLS = "the task's skills folder"


def _trial_config(t: _Trial) -> dict[str, Any]:
    """The trial's config: result.json's `config`, else the trial folder's `config.json`."""
    cfg = t.data.get("config")
    if isinstance(cfg, dict) and cfg:
        return cfg
    return _folder_config(t.folder) if t.folder is not None else {}


def task_folder(t: _Trial, tasks_dir: str) -> str | None:
    """The folder of `tasks_dir` that is this trial's task: named by the last component of its
    config's `task.path` (a path on the machine that ran it), else by its `task_name`; None when
    neither names a folder there."""
    cfg = _trial_config(t)
    task = cfg.get("task") if isinstance(cfg.get("task"), dict) else {}
    names = []
    for path in (task.get("path"), (t.data.get("task_id") or {}).get("path") if isinstance(t.data.get("task_id"), dict)
                 else None):
        if isinstance(path, str) and path.strip().rstrip("/\\"):
            names.append(path.strip().rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1])
    if isinstance(t.data.get("task_name"), str):
        names.append(t.data["task_name"])
    for name in dict.fromkeys(names):
        if name and name not in (".", "..") and "/" not in name:
            folder = os.path.join(tasks_dir, name)
            if os.path.isdir(folder) and not os.path.islink(folder):
                return folder
    return None


def task_skills(task: str) -> list[str] | None:
    """The skills a task ships (`environment/skills/<name>/SKILL.md`, copied into the agents' skills
    folders by its Dockerfile, as SkillsBench's tasks do), or None when it has no such folder."""
    path = os.path.join(task, "environment", "skills")
    if not os.path.isdir(path) or os.path.islink(path):
        return None
    return folder_skills(path)


def _offered(traj: Trajectory | None, t: _Trial, offered_dir: list[str] | None,
             lock: dict[str, str | None] | None, shipped: list[str] | None = None) -> tuple[list[str], str]:
    """(skills offered, where that came from): the agent's log, else the trial's lock.json
    (`_lock_skills`), else the job's skill folders (when they exist here), else the skills its task
    ships (`--tasks`), else --offered; else ([], "unknown")."""
    if traj is not None and traj.offered_known:
        return list(traj.offered), "agent log"
    if lock is not None:
        return list(lock), "lock.json"
    dirs = _job_skill_dirs(t.data)
    if dirs:
        found = [name for d in dirs if os.path.isdir(d) for name in folder_skills(d)]
        if found:
            return found, "the job's skill folders"
    if shipped is not None:
        return list(shipped), TASK_SKILLS
    if offered_dir is not None:
        return list(offered_dir), "--offered"
    return [], "unknown"


def folder_skills(path: str) -> list[str]:
    """The skill names of a skills folder (`<name>/SKILL.md`), for `--offered`."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the skills folder: {exc.strerror or exc}") from None
    return [e.name for e in entries if e.is_dir(follow_symlinks=False)
            and os.path.isfile(os.path.join(e.path, "SKILL.md"))]


# ---------------------------------------------------------------- the import
def _model(d: dict[str, Any], where: str) -> str:
    cfg = d.get("config") if isinstance(d.get("config"), dict) else {}
    agent_cfg = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    info = d.get("agent_info") if isinstance(d.get("agent_info"), dict) else {}
    mi = info.get("model_info") if isinstance(info.get("model_info"), dict) else {}
    agent = agent_cfg.get("name") or info.get("name")
    model = agent_cfg.get("model_name") or mi.get("name")
    for what, v in (("agent name", agent), ("model name", model)):
        if v is not None and not isinstance(v, str):
            raise ImportFormatError(f"{where}: config.agent: the {what} must be a string")
    if agent and model:
        return f"{agent}:{model}"
    return model or agent or "default"


def _exception(d: dict[str, Any]) -> str | None:
    """The trial's exception as one short text (`exception_type`, else its message), or None."""
    exc = d.get("exception_info")
    if not exc:
        return None
    text = (exc.get("exception_type") or exc.get("exception_message")) if isinstance(exc, dict) else exc
    return str(text).strip()[:100] or "an exception"


def _raw_reward(d: dict[str, Any]) -> Any:
    """`verifier_result.rewards.reward` as logged (None where any level is missing)."""
    vr = d.get("verifier_result")
    rewards = vr.get("rewards") if isinstance(vr, dict) else None
    return rewards.get("reward") if isinstance(rewards, dict) else None


def _reward(d: dict[str, Any]) -> float | None:
    """The verifier's reward as a finite number (the record's graded `score`), else None."""
    reward = _raw_reward(d)
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        return None
    return float(reward)


def _seconds(start: Any, end: Any) -> float | None:
    """end - start of two ISO 8601 timestamps in seconds (None unless both parse and end >= start)."""
    import datetime as dt

    try:
        a = dt.datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        b = dt.datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except ValueError:
        return None
    if (a.tzinfo is None) != (b.tzinfo is None):
        return None
    secs = (b - a).total_seconds()
    return round(secs, 3) if secs >= 0 else None


#: what is read of a Claude Code log for its final `result` event (the last lines of a long log)
_CLAUDE_TAIL = 1 << 20


def claude_code_usage(folder: str | None) -> dict[str, Any]:
    """What Claude Code's own final `result` event (agent/claude-code.txt, stream-json) says the run
    cost, as record `meta`: `usage` (prompt tokens = input + cache creation + cache read, of which
    `cached_tokens` = cache read; completion = output tokens), `cost_usd` (total_cost_usd), `turns`
    (num_turns) and `latency_s` (duration_ms); {} without such an event. Only the last MiB is read."""
    if folder is None:
        return {}
    path = os.path.join(folder, "agent", "claude-code.txt")
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _CLAUDE_TAIL))
            tail = fh.read()
    except OSError:
        return {}
    import orjson

    for line in reversed(tail.splitlines()):
        if b'"result"' not in line:
            continue
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(ev, dict) or ev.get("type") != "result":
            continue
        out: dict[str, Any] = {}
        u = ev.get("usage") if isinstance(ev.get("usage"), dict) else {}
        parts = [count_of(u.get(k)) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
        if parts[0] is not None:
            usage = {"prompt_tokens": sum(p or 0 for p in parts)}
            if (out_tok := count_of(u.get("output_tokens"))) is not None:
                usage["completion_tokens"] = out_tok
            if parts[2] is not None:
                usage["cached_tokens"] = parts[2]
            out["usage"] = usage
        if (cost := amount_of(ev.get("total_cost_usd"))) is not None:
            out["cost_usd"] = cost
        if (ms := amount_of(ev.get("duration_ms"))) is not None:
            out["latency_s"] = round(ms * 1e-3, 3)
        if (turns := amount_of(ev.get("num_turns"))) is not None:
            out["turns"] = int(turns)
        return out
    return {}


def _efficiency_meta(d: dict[str, Any], folder: str | None = None) -> dict[str, Any]:
    """What a trial's result.json says it cost, as record `meta`: `usage` (prompt tokens =
    `n_input_tokens`, of which `cached_tokens` = `n_cache_tokens`; completion tokens =
    `n_output_tokens`), `cost_usd`, and `latency_s`, the agent's own wall time (agent_execution
    started to finished). Fields the trial leaves null are left out (not logged, never 0); where
    Harbor left tokens or cost null, Claude Code's own final `result` event fills them
    (`claude_code_usage`), and gives the agent's turns."""
    out = _result_json_meta(d)
    agent = claude_code_usage(folder)
    for key in ("usage", "cost_usd", "latency_s", "turns"):
        if key not in out and key in agent:
            out[key] = agent[key]
    return out


def _result_json_meta(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ar = d.get("agent_result") if isinstance(d.get("agent_result"), dict) else {}
    usage = {name: v for name, key in (("prompt_tokens", "n_input_tokens"), ("completion_tokens", "n_output_tokens"),
                                       ("cached_tokens", "n_cache_tokens")) if (v := count_of(ar.get(key))) is not None}
    if "prompt_tokens" in usage:
        out["usage"] = usage
    if (cost := amount_of(ar.get("cost_usd"))) is not None:
        out["cost_usd"] = cost
    ex = d.get("agent_execution")
    if isinstance(ex, dict):
        secs = _seconds(ex.get("started_at"), ex.get("finished_at"))
        if secs is not None:
            out["latency_s"] = secs
    label = _timeout_label(d)
    if label is not None:
        out["timeout"] = label
    return out


def _timeout_label(d: dict[str, Any]) -> str | None:
    """What limited the agent's time, from the trial's config (`timeout_multiplier`, the agent's
    `override_timeout_sec` / `max_timeout_sec`), as one label: time effects of conditions run
    under different labels are said to be so (`analysis.efficiency`). None when none is set."""
    cfg = d.get("config") if isinstance(d.get("config"), dict) else {}
    agent = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    parts = []
    mult = cfg.get("timeout_multiplier")
    if not isinstance(mult, bool) and isinstance(mult, (int, float)):
        parts.append(f"timeout x{float(mult):g}")
    for key, words in (("override_timeout_sec", "agent timeout"), ("max_timeout_sec", "agent max timeout")):
        v = agent.get(key)
        if not isinstance(v, bool) and isinstance(v, (int, float)):
            parts.append(f"{words} {float(v):g} s")
    return ", ".join(parts) or None


def _outcome(d: dict[str, Any], threshold: float) -> tuple[bool | None, str | None]:
    """(correct, None) or (None, why it is an error record). A verifier reward scores the trial
    whatever the agent raised (Harbor runs the verifier after an agent timeout); an exception
    without a reward is an error record, never a failure."""
    exc = _exception(d)
    reward = _raw_reward(d)
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or reward != reward:
        if exc is not None:
            return None, f"the trial raised {exc} (exception_info) and has no verifier reward"
        if not isinstance(d.get("verifier_result"), dict):
            return None, "no verifier result"
        return None, f"the reward is not a number ({str(reward)[:40]})"
    return float(reward) >= threshold, None


def _use_key(rec: dict[str, Any]) -> tuple[Any, ...]:
    """What a record says it used, as a sort key (records equal in it are interchangeable)."""
    used = tuple(sorted(s for r in rec.get("retrievals") or () for s in r["skills"]))
    return (rec.get("use_logged", True) is False, -len(used), used)


def _started(d: dict[str, Any]) -> str:
    v = d.get("started_at")
    return v if isinstance(v, str) else ""


def import_harbor(
    paths: Sequence[str] = (),
    *,
    enabled: Sequence[str] = (),
    disabled: Sequence[str] = (),
    threshold: float = 1.0,
    model: str | None = None,
    benchmark: str | None = None,
    offered: str | None = None,
    tasks: str | None = None,
    enabled_only: bool = False,
) -> tuple[list[dict[str, Any]], ImportReport]:
    """Read Harbor trials (sides given or read from their paths); return §3.1 records and a report.
    `offered`: a skills folder whose skills every with-skills trial was offered, where neither the
    agent's log nor the trial's `lock.json` nor the job's skill folders say. `tasks`: the dataset's
    task folders; a with-skills trial whose task (`task_folder`) ships skills in
    `environment/skills/` was offered those (`task_skills`). `enabled_only`: the with-skills trials'
    records are returned without a pair (a job that ran no disabled arm: `triggers --engine harbor`)."""
    if tasks is not None and not os.path.isdir(tasks):
        raise InputError(f"{tasks}: --tasks: no such folder (the dataset's task folders)")
    trials: list[_Trial] = []
    jobs: list[tuple[str, dict]] = []
    pairer = Pairer("harbor")
    pairer.keep_unpaired_enabled = enabled_only
    links: list[str] = []
    passed_over: list[tuple[str, str, str | None]] = []
    for arg in enabled:
        pairer.source(arg)
        _collect(arg, ENABLED, "--enabled", trials, jobs, links, passed_over)
    for arg in disabled:
        pairer.source(arg)
        _collect(arg, DISABLED, "--disabled", trials, jobs, links, passed_over)
    for arg in paths:
        pairer.source(arg)
        _collect(arg, None, "", trials, jobs, links, passed_over)
    conflicts = _decide_sides(trials)
    if conflicts:
        pairer.note(f"arm integrity: {len(conflicts)} trial(s) whose sources disagree on the side (an option says "
                    "one, the trial's config.agent.skills the other; the config decides, `check` fails on them): "
                    + named(conflicts))
    if links:
        pairer.note(f"{len(links)} symbolic link(s) inside the inputs were not followed: {named(links)}")
    if passed_over:  # never silent: a trial that left no outcome is named (once), and what it costs
        passed_over = list({real: (real, rel, sd) for real, rel, sd in reversed(passed_over)}.values())[::-1]
        off = [rel for real, rel, sd in passed_over if (sd or _passed_over_side(real, rel)) == DISABLED]
        pairer.note(f"{len(passed_over)} trial folder(s) have a config.json and an agent log but no result.json "
                    f"(no outcome): passed over: {named([rel for _, rel, _ in passed_over])}"
                    + (f"; the leak check was not possible for {len(off)} without-skills trial(s)" if off else ""))
    bench = benchmark or "harbor"
    rows = []
    for t in trials:
        d = t.data
        where = f"trial {t.folder or t.path}"
        task = d.get("task_name")
        if not isinstance(task, str) or not task:
            raise ImportFormatError(f"{t.path}: task_name: expected the task's name (a non-empty string), "
                                    f"got {type(task).__name__}")
        tname = d.get("trial_name") if isinstance(d.get("trial_name"), str) else os.path.basename(t.folder or t.path)
        m = model or _model(d, t.path)
        rows.append((m, task, t.side, tname, t, where))
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
    decided: dict[str, int] = {}
    no_traj: list[str] = []
    unread_off: list[str] = []  # without-skills trials whose agent log no reader could read
    used_any = 0
    rewarded_exc = 0
    cut: list[str] = []
    offered_unknown: list[str] = []
    leaks: list[str] = []
    broken: list[str] = []
    by_format: dict[str, int] = {}
    seen_on: list[str] = []  # with-skills trials whose log shows skills present but unused
    unloadable: list[str] = []  # skills a with-skills trial's agent failed to load, with the reason
    present: list[str] = []  # without-skills trials whose log shows skills present
    offered_dir = folder_skills(offered) if offered is not None else None
    shipped: dict[str, list[str] | None] = {}  # task folder -> the skills it ships
    no_task: list[str] = []  # with-skills trials whose task is not in --tasks

    def shipped_by(t: _Trial) -> list[str] | None:
        if tasks is None:
            return None
        folder = task_folder(t, tasks)
        if folder is None:
            no_task.append(os.path.basename(t.folder or t.path))
            return None
        if folder not in shipped:
            shipped[folder] = task_skills(folder)
        return shipped[folder]

    # valid trials of one (model, task, side), before numbering: error trials take no number
    valid: dict[tuple[str, str, str], list[tuple[dict[str, Any], str, str, str]]] = {}
    for m, task, side, tname, t, where in rows:
        decided[t.how] = decided.get(t.how, 0) + 1
        correct, err = _outcome(t.data, threshold)
        if err is not None:
            pairer.skip(side, f"{m}/{bench}/{task} trial {tname}", where, f"error record (not a failure): {err}")
            continue
        traj = trajectory_of(t.folder)
        rec: dict[str, Any] = {"correct": correct}
        score = _reward(t.data)
        if score is not None:  # the graded outcome (partial credit, a judge's score): `correct` is score >= threshold
            rec["score"] = score
        meta: dict[str, Any] = {"source": t.path, "trial": tname, "side_from": f"{t.how} ({t.detail})",
                                **_efficiency_meta(t.data, t.folder)}
        exc = _exception(t.data)
        if exc is not None:
            meta["exception"] = exc
            rewarded_exc += 1
        if t.conflict is not None:
            meta["arm_issue"] = {"kind": "conflict", "detail": t.conflict}
        if traj.problem is None:
            meta["trajectory"] = traj.source
            meta.update(traj.meta())
            if not traj.complete:
                meta["trajectory_cut"] = True
                if side == ENABLED:
                    cut.append(tname)
            if side == ENABLED:
                loaded = _skills_loaded(t.data)
                used = list(dict.fromkeys([*traj.used, *loaded]))
                for sk in loaded:
                    meta.setdefault("use_rules", {}).setdefault(sk, "skills_loaded")
                lock = _lock_skills(t.folder)
                offered, source = _offered(traj, t, offered_dir, lock, shipped_by(t))
                meta["offered_from"] = source
                digests = {k: v for k, v in (lock or {}).items() if v is not None}
                if digests:  # the injected skills' content digests (provenance of what the run saw)
                    meta["skill_digests"] = digests
                if source != "unknown" or used:  # known: [] means nothing was injected (a broken arm)
                    rec["offered"] = list(dict.fromkeys([*offered, *used]))
                if source in ("lock.json", "the job's skill folders", "agent log", TASK_SKILLS) and not offered \
                        and not used \
                        and not _job_skill_dirs(t.data):
                    broken.append(tname)
                rec["retrievals"] = [{"query": None, "skills": used, "error": None}] if used else []
                used_any += bool(used)
                by_format[traj.format] = by_format.get(traj.format, 0) + 1
                if source == "unknown":
                    offered_unknown.append(tname)
                if traj.seen:
                    seen_on.append(f"{tname}: {', '.join(traj.seen)}")
                for sk, why in traj.unloadable:
                    unloadable.append(f"{sk} in {tname} ({why})")
            else:  # what the log shows, like an enabled run: any use is a leak (arm integrity)
                if traj.used:
                    rec["retrievals"] = [{"query": None, "skills": list(traj.used), "error": None}]
                    leaks.append(f"{tname} used {', '.join(traj.used)}")
                elif traj.offered_known and traj.offered:
                    pairer.note(f"{where}: a without-skills trial was offered skills {', '.join(traj.offered)}")
                if not traj.used and (traj.present or (traj.offered_known and traj.offered)):
                    shown = _presence(traj)
                    meta["arm_issue"] = {"kind": "present", "detail": shown}
                    present.append(f"{tname} ({shown})")
        else:
            meta["trajectory"] = None
            if side == ENABLED:  # a without-skills trial never needs one
                meta["no_trajectory"] = traj.problem
                no_traj.append(f"{tname} ({traj.problem})")
                rec["use_logged"] = False
                offered, source = _offered(None, t, offered_dir, _lock_skills(t.folder), shipped_by(t))
                if offered:
                    rec["offered"], meta["offered_from"] = offered, source
            else:  # no leak check for it: named; `check` fails on it when its partner's log was read
                meta["leak_check"] = traj.problem
                if traj.problem not in _NO_LOG:  # it has a log no reader could read
                    unread_off.append(f"{tname} ({traj.problem})")
        rec["meta"] = meta
        valid.setdefault((m, task, side), []).append((rec, where, tname, _started(t.data)))
    surplus: list[str] = []
    for (m, task, side), group in valid.items():
        other = valid.get((m, task, DISABLED if side == ENABLED else ENABLED), [])
        keep = group
        if other and len(group) > len(other):
            # surplus trials are the last started (then the last named): which trials are left out
            # never depends on their outcomes
            by_time = sorted(group, key=lambda g: (g[3], g[2]))
            keep, extra = by_time[:len(other)], by_time[len(other):]
            for _rec, where, tname, _ in extra:
                surplus.append(tname)
                pairer.skip(side, f"{m}/{bench}/{task} trial {tname}", where,
                            f"surplus trial: {len(other)} valid trial(s) on the other side, {len(group)} on this one")
        # replicates numbered passes first, then by what the trial used: no figure depends on
        # trial names, on their order or on where an error trial sat
        keep = sorted(keep, key=lambda g: (not g[0]["correct"], _use_key(g[0]), g[2]))
        k_of_n = {"passes": sum(bool(g[0]["correct"]) for g in keep), "trials": len(keep)}
        for epoch, (rec, where, _tname, _) in enumerate(keep, 1):
            rec["meta"]["k_of_n"] = dict(k_of_n)
            pairer.add(side, (m, bench, task, epoch), rec, where)
    read_names = {r[3] for r in rows}
    for path, d in jobs:
        listed = _job_trials(d)
        missing = sorted(listed - read_names)
        if missing:
            pairer.note(f"{path}: the job lists {len(listed)} trial(s); {len(missing)} are not on disk and are "
                        f"left out, not invented (first: {', '.join(missing[:3])})")
    if unread_off:
        pairer.note(f"the leak check was not possible for {len(unread_off)} without-skills trial(s) whose agent "
                    "log skillaudit cannot read: " + named(unread_off, sep="; "))
    if no_traj:
        pairer.note(f"{len(no_traj)} with-skills trial(s) without a readable trajectory (skill use not logged): "
                    + named(no_traj, sep="; "))
    if surplus:
        pairer.note(f"{len(surplus)} surplus trial(s) left out (a task had more valid trials on one side; "
                    "the last started are left out): " + named(surplus))
    pairer.note(f"{used_any} with-skills trial(s) used a skill per their trajectory")
    if by_format:
        pairer.note("skill use read from " + ", ".join(f"{fmt} ({n})" for fmt, n in sorted(by_format.items())))
    if leaks:
        pairer.note(f"arm integrity: {len(leaks)} without-skills trial(s) used skills (a leak: that arm is not "
                    "'without skills'): " + named(leaks, sep="; "))
    if broken:
        pairer.note(f"arm integrity: {len(broken)} with-skills trial(s) were given no skills (nothing in "
                    "lock.json or the job's agent.skills: a broken arm): " + named(broken))
    if offered_unknown:
        pairer.note(f"{len(offered_unknown)} with-skills trial(s) with the offered list unknown (neither the "
                    "agent's log, lock.json, the job's skill folders, --tasks nor --offered says): " + named(offered_unknown))
    if no_task:
        pairer.note(f"{len(no_task)} with-skills trial(s) whose task is not a folder of --tasks {tasks} (by the "
                    "last part of config.task.path, then task_name): " + named(no_task))
    if tasks is not None:
        n_ship = sum(1 for v in shipped.values() if v)
        pairer.note(f"--tasks {tasks}: {len(shipped)} task(s) found, {n_ship} ship skills in environment/skills/ "
                    "(what their with-skills trials were offered, where the log, lock.json or the job do not say)")
    if seen_on:
        pairer.note(f"{len(seen_on)} with-skills trial(s) show skills present but unused (a listing of a skills "
                    "folder; named as seen, never counted as used or as the offered list): " + named(seen_on, sep="; "))
    if unloadable:
        pairer.note(f"{len(unloadable)} skill(s) shipped but not loadable (the agent's log says it failed to load "
                    "them): " + named(unloadable, sep="; "))
    if present:
        pairer.note(f"arm integrity: {len(present)} without-skills trial(s) had skills present (a broken arm, "
                    "gated like a leak): " + named(present, sep="; "))
    if cut:
        pairer.note(f"{len(cut)} with-skills trajectory(ies) end before the agent's final result line (cut): "
                    "skill use after the cut is unseen, so their use is a floor (meta.trajectory_cut)")
    pairer.note("scoring: a trial with a verifier reward is scored by it, whatever the agent raised "
                f"({rewarded_exc} such trial(s); the exception is kept in meta.exception); a trial "
                "with an exception and no reward is an error record, left out")
    pairer.paired_on = ("(agent:model, task_name, replicate): a task's valid trials per side are "
                        "replicates, numbered passes first")
    pairer.naming = "sides from " + "; ".join(f"{how} ({n} trial(s))" for how, n in decided.items())
    if benchmark:
        pairer.naming += f"; benchmark {benchmark!r} (--benchmark)"
    else:
        pairer.naming += "; benchmark 'harbor' (default)"
    records, report = pairer.finish()
    unchecked = _mark_unchecked(records)
    if unchecked:
        import dataclasses

        report = dataclasses.replace(report, notes=(*report.notes, (
            f"arm integrity: the leak check was not possible for {len(unchecked)} without-skills trial(s) whose "
            "with-skills partner's log was read (`check` fails on them unless --allow-leaks): " + named(unchecked))))
    return records, report


def _presence(traj: Trajectory) -> str:
    """What a without-skills log shows of skills being there (a listing, a failed load, a list)."""
    parts = []
    if traj.seen:
        parts.append(f"a listing of a skills folder shows {', '.join(traj.seen)}")
    if traj.unloadable:
        parts.append("the agent failed to load " + ", ".join(f"{s} ({why})" for s, why in traj.unloadable))
    if not parts and traj.offered:
        parts.append(f"its log lists {', '.join(traj.offered)} as offered")
    return "; ".join(parts)


def _mark_unchecked(records: list[dict[str, Any]]) -> list[str]:
    """Without-skills records with no leak check (no log, or one no reader can read) whose
    with-skills partner's log was read: `meta.arm_issue` kind "unchecked" (`check` fails closed on
    them). Returns their trial names."""
    enabled = {(r["model"], r["benchmark"], r["task_id"], r["epoch"]): r for r in records
               if r.get("condition") == ENABLED and "arm" not in r}
    out = []
    for r in records:
        meta = r.get("meta") or {}
        if r.get("condition") != DISABLED or "arm" in r or "leak_check" not in meta:
            continue
        partner = enabled.get((r["model"], r["benchmark"], r["task_id"], r["epoch"]))
        if partner is None or not (partner.get("meta") or {}).get("trajectory"):
            continue
        meta["arm_issue"] = {"kind": "unchecked", "detail": f"{meta['leak_check']}; its "
                             "with-skills partner's log was read"}
        out.append(str(meta.get("trial", r["task_id"])))
    return out
