"""SkillsBench-style per-trial results (each task run with and without skills) to run logs.

Accepted layout: a JSON Lines file with one trial per line, or a JSON file holding a list of trials
or an object with such a list under `"trials"` or `"results"`. A trial is an object with

- task id: `task_id`, `task` or `task_name` (string);
- condition: `condition`, `skill_mode` or `mode`: `with-skills` (also `with-skill`, `with_skills`,
  `curated`, `skills`, `enabled`, `on`) or `without-skills` (also `without-skill`, `no-skill`,
  `no-skills`, `none`, `disabled`, `off`). Other conditions (SkillsBench's `self-generated`) are
  left out and reported;
- outcome: `reward` (number, correct when >= `--threshold`, default 1), or `passed`, `correct`,
  `success` or `resolved` (booleans); Harbor's nested `verifier_result.rewards.reward` is read too;
- trial index (optional): `epoch` (1-based), or `trial`/`trial_index`/`attempt` (1-based, or 0-based
  when any trial of the input is numbered 0). Without one, trials of a task and condition are
  numbered in file order;
- optional: `model` (with `agent`, the model is `agent:model`: the harness matters), `benchmark`
  (default `skillsbench`), skills used as `skills_used`/`skills_loaded`/`retrieved` (list of ids) or
  `retrievals` (§3.1 calls), `answer`, and `error`/`exception_info` (a trial that errored is left out).

Example line: `{"task_id": "3d-scan-calc", "condition": "with-skills", "trial": 0, "reward": 1.0,
"model": "claude-opus-4-5", "agent": "claude-code", "skills_used": ["stl-parsing"]}`
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

from skillaudit.errors import ImportFormatError
from skillaudit.importers._common import (
    DISABLED,
    ENABLED,
    ImportReport,
    Pairer,
    iter_jsonl,
    load_json,
    parse_retrievals,
    parse_skill_list,
    to_correct,
)

EXPECTED = "SkillsBench-style trials (JSON Lines, or JSON list / {\"trials\": [...]})"
_WITH = {"with-skills", "with-skill", "with_skills", "with_skill", "curated", "curated-skills",
         "skills", "enabled", "on", "skills_on"}
_WITHOUT = {"without-skills", "without-skill", "without_skills", "without_skill", "no-skill",
            "no-skills", "no_skills", "none", "disabled", "off", "skills_off"}
_TASK_KEYS = ("task_id", "task", "task_name")
_COND_KEYS = ("condition", "skill_mode", "mode")
_BOOL_KEYS = ("passed", "correct", "success", "resolved")
_TRIAL_KEYS = ("trial", "trial_index", "attempt")
_SKILL_KEYS = ("skills_used", "skills_loaded", "retrieved")


def norm_condition(word: str) -> str:
    """A condition name compared case-, space-, dash- and underscore-insensitively: 'With Skills' -> 'with-skills'."""
    return "-".join(w for w in re.split(r"[\s_\-]+", word.strip().lower()) if w)


_WITH_N = {norm_condition(w) for w in _WITH}
_WITHOUT_N = {norm_condition(w) for w in _WITHOUT}


def _condition_of(raw: str, enabled_values: Sequence[str], disabled_values: Sequence[str]) -> str | None:
    word = norm_condition(raw)
    if word in {norm_condition(v) for v in enabled_values}:
        return ENABLED
    if word in {norm_condition(v) for v in disabled_values}:
        return DISABLED
    if word in _WITH_N:
        return ENABLED
    if word in _WITHOUT_N:
        return DISABLED
    return None


def import_skillsbench(
    paths: Sequence[str],
    *,
    threshold: float = 1.0,
    model: str | None = None,
    benchmark: str | None = None,
    enabled_values: Sequence[str] = (),
    disabled_values: Sequence[str] = (),
    count: str = "passCount",
) -> tuple[list[dict[str, Any]], ImportReport]:
    """Read per-trial results, leaderboard results or the results registry of both conditions;
    return §3.1 records (paired only) and a report.

    Registry rows (`passCount` of `trials` per task, model and condition) become one record per
    trial, numbered 1..n with the passes first on both sides and marked `meta.aggregated`: their
    pairing across conditions is not observed, so every statistic over them is task-level (see
    docs/formats.md, "Aggregated records"). `count` picks `passCount` or `perfectCount`.
    """
    if count not in ("passCount", "perfectCount"):
        raise ImportFormatError(f"unknown count {count!r} (expected passCount or perfectCount)")
    pairer = Pairer("skillsbench")
    trials = []
    zero_based = False
    aggregated = 0
    for path in paths:
        pairer.source(path)
        for where, trial in _trials(path):
            trials.append((where, trial))
            for k in _TRIAL_KEYS:
                if trial.get(k) == 0 and type(trial.get(k)) is int:
                    zero_based = True
    counters: dict[tuple[str, str, str, str], int] = {}
    no_skills = 0
    errors = 0
    for where, t in trials:
        tid = next((t[k] for k in _TASK_KEYS if k in t), None)
        if isinstance(tid, int) and not isinstance(tid, bool):
            tid = str(tid)
        if not isinstance(tid, str) or not tid:
            raise ImportFormatError(f"{where}: a trial needs a task id (\"task_id\", \"task\" or \"task_name\")")
        cond_raw = next((t[k] for k in _COND_KEYS if k in t), None)
        if not isinstance(cond_raw, str):
            raise ImportFormatError(
                f"{where}: a trial needs a \"condition\" (with-skills or without-skills)"
            )
        m = model or _model_of(t, where)
        b = benchmark or _str(t.get("benchmark", t.get("dataset")), "benchmark", where) or "skillsbench"
        condition = _condition_of(cond_raw, enabled_values, disabled_values)
        if "passCount" in t or "perfectCount" in t:
            aggregated += 1
            _add_aggregated(pairer, t, where, m, b, tid, condition, cond_raw, count)
            continue
        cond_word = norm_condition(cond_raw)
        epoch = _epoch(t, where, zero_based)
        if epoch is None:
            ck = (m, b, tid, cond_word)
            counters[ck] = epoch = counters.get(ck, 0) + 1
        key = (m, b, tid, epoch)
        if condition is None:
            pairer.skip(cond_raw, key, where, _neither(cond_raw))
            continue
        infra = _infra_failure(t)
        if infra:
            errors += 1
            pairer.skip(condition, key, where, f"error record (infrastructure, not a failure): {infra}")
            continue
        err = t.get("error", t.get("exception_info"))
        if err:
            errors += 1
            text = err.get("exception_message", err.get("message", err)) if isinstance(err, dict) else err
            pairer.skip(condition, key, where, f"the trial errored: {str(text).strip()[:120]}")
            continue
        try:
            correct = _outcome(t, threshold)
        except ValueError as exc:
            errors += 1
            pairer.skip(condition, key, where, str(exc))
            continue
        record: dict[str, Any] = {"correct": correct}
        score = _reward(t)
        if score is not None:  # graded outcome, e.g. partial credit 0.45 (correct: score >= threshold)
            record["score"] = score
        if condition == ENABLED:
            if "retrievals" in t:
                record["retrievals"] = parse_retrievals(t["retrievals"], where)
            else:
                sk = next((t[k] for k in _SKILL_KEYS if k in t), None)
                if sk is None:
                    no_skills += 1
                else:
                    record["retrievals"] = [{"query": None, "skills": parse_skill_list(sk, where), "error": None}]
        if isinstance(t.get("answer"), str):
            record["answer"] = t["answer"]
        record["meta"] = {"source": where, "condition": cond_raw}
        pairer.add(condition, key, record, where)
    if no_skills:
        pairer.note(
            f"{no_skills} with-skills trial(s) list no skills used (skills_used / retrieved): they "
            "count as retrieving nothing, outside S_call"
        )
    if errors:
        pairer.note(f"{errors} error record(s) (infrastructure failures, errored or unscored trials): "
                    "left out of every rate, never counted as failures")
    if aggregated:
        pairer.note(
            f"{aggregated} aggregated row(s) ({count} of trials): each became trials 1..n with the "
            "passes first; which trial pairs with which is not observed, so only task-level figures "
            "(sums per task) mean anything: OAE, its CI and the task-level test"
        )
        pairer.note(
            "which skills were used is not recorded: records say which skills were offered "
            "(\"offered\", \"use_logged\": false); the audit reports the effect of offering them"
        )
        pairer.paired_on = ("(model, benchmark, task_id) with k-of-n counts expanded to trials "
                            "1..n, passes first")
        # one output whatever the order of the input rows
        pairer.order = dict.fromkeys(sorted(pairer.order))
        pairer.skipped.sort(key=lambda u: (u.key, u.condition, u.reason))
    else:
        pairer.paired_on = "(model, benchmark, task_id, trial)"
    pairer.naming = (f"benchmark {benchmark!r} (--benchmark)" if benchmark
                     else "benchmark from each trial's \"benchmark\" (default 'skillsbench')")
    return pairer.finish()


def _neither(cond_raw: str) -> str:
    return (f"condition {cond_raw!r} is neither with-skills nor without-skills "
            "(map it with --enabled-value / --disabled-value)")


def _infra_failure(t: dict[str, Any]) -> str | None:
    """Why a leaderboard trial is not a scored attempt (score_eligible false, error_type, ...), else None."""
    parts = []
    for k in ("infra_failure_type", "error_type"):
        v = t.get(k)
        if v not in (None, "", False):
            parts.append(f"{k} {str(v)[:60]!r}")
    if t.get("score_eligible") is False:
        parts.append("score_eligible false")
    return ", ".join(parts) or None


def _count(t: dict[str, Any], name: str, where: str) -> int:
    v = t.get(name)
    if type(v) is not int or v < 0:
        raise ImportFormatError(f"{where}: \"{name}\" must be an integer >= 0 (a k-of-n registry row)")
    return v


def _add_aggregated(pairer: Pairer, t: dict[str, Any], where: str, m: str, b: str, tid: str,
                    condition: str | None, cond_raw: str, count: str) -> None:
    """One registry row (k passes of n trials) -> n records, trials 1..n, passes first."""
    n = _count(t, "trials", where)
    k = _count(t, count, where)
    if k > n:
        raise ImportFormatError(f"{where}: \"{count}\" {k} exceeds \"trials\" {n}")
    if condition is None:
        pairer.skip(cond_raw, f"{m}/{b}/{tid} ({n} trials)", where, _neither(cond_raw))
        return
    for i in range(1, n + 1):
        rec: dict[str, Any] = {"correct": i <= k, "offered": [f"{tid}/skills"], "use_logged": False}
        if condition == DISABLED:
            rec = {"correct": i <= k}
        rec["meta"] = {"source": where, "condition": cond_raw,
                       "aggregated": {"count": count, "passes": k, "trials": n}}
        pairer.add(condition, (m, b, tid, i), rec, where)


def _trials(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    head = b""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).lstrip()
    except OSError:
        pass  # read_bytes below reports it
    if head.startswith(b"[") or (path.endswith(".json") and head.startswith(b"{")):
        data = load_json(path, EXPECTED)
        if isinstance(data, dict) and not any(k in data for k in _TASK_KEYS):
            if not any(isinstance(data.get(k), list) for k in ("trials", "results")):
                raise ImportFormatError(f"{path}: no list of trials; expected {EXPECTED}")
            yield from _walk(path, data, "", None)
        elif isinstance(data, dict):
            yield f"{path}: [0]", data  # one trial per file (e.g. a Harbor trial's result.json)
        elif isinstance(data, list):
            for i, t in enumerate(data):
                where = f"{path}: [{i}]"
                if not isinstance(t, dict):
                    raise ImportFormatError(f"{where}: a trial must be an object; expected {EXPECTED}")
                yield where, t
        else:
            raise ImportFormatError(f"{path}: no list of trials; expected {EXPECTED}")
    else:
        for lineno, t in iter_jsonl(path, EXPECTED):
            yield f"{path}:{lineno}", t


def _participant(obj: dict[str, Any], inherited: str | None) -> str | None:
    parts = obj.get("participants")
    agent = parts.get("agent") if isinstance(parts, dict) else None
    # the outermost participant id names the agent (inner levels hold transport URLs)
    return inherited or (agent if isinstance(agent, str) and agent else None)


def _walk(path: str, obj: dict[str, Any], jpath: str, agent: str | None
          ) -> Iterator[tuple[str, dict[str, Any]]]:
    """Trials nested at any depth under `trials` / `results` (AgentBeats leaderboard files)."""
    agent = _participant(obj, agent)
    for k in ("trials", "results"):
        items = obj.get(k)
        if not isinstance(items, list):
            continue
        for i, t in enumerate(items):
            where_path = f"{jpath}.{k}[{i}]" if jpath else f"{k}[{i}]"
            if not isinstance(t, dict):
                raise ImportFormatError(f"{path}: {where_path}: a trial must be an object; expected {EXPECTED}")
            if any(key in t for key in _TASK_KEYS):
                if agent and not any(key in t for key in ("model", "model_name", "agent")):
                    t = {**t, "agent": f"participant {agent}"}
                yield f"{path}: {where_path}", t
            else:
                yield from _walk(path, t, where_path, agent)
        return


def _str(value: Any, name: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: \"{name}\" must be a string")
    return value


def _model_of(t: dict[str, Any], where: str) -> str:
    model = _str(t.get("model", t.get("model_name")), "model", where)
    agent = _str(t.get("agent", t.get("harness")), "agent", where)
    if model and agent and agent.lower() in model.lower():
        return model  # the registry's "Claude Code (Opus 4.7)" already names its harness
    if model and agent:
        return f"{agent}:{model}"
    return model or agent or "default"


def _epoch(t: dict[str, Any], where: str, zero_based: bool) -> int | None:
    if "epoch" in t:
        e = t["epoch"]
        if type(e) is not int or e < 1:
            raise ImportFormatError(f"{where}: \"epoch\" must be an integer >= 1")
        return e
    for k in _TRIAL_KEYS:
        if k in t:
            v = t[k]
            if type(v) is not int or v < 0:
                raise ImportFormatError(f"{where}: \"{k}\" must be an integer >= 0")
            return v + 1 if zero_based else v
    return None


def _reward(t: dict[str, Any]) -> float | None:
    """The trial's numeric reward (`reward`, or the verifier's) as a finite number, else None: the
    record's graded `score` (pass/fail keys give none)."""
    vr = t.get("verifier_result")
    raw = t["reward"] if "reward" in t else (
        vr["rewards"].get("reward") if isinstance(vr, dict) and isinstance(vr.get("rewards"), dict) else None)
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        return None
    return float(raw)


def _outcome(t: dict[str, Any], threshold: float) -> bool:
    if "reward" in t:
        return to_correct(t["reward"], threshold)
    for k in _BOOL_KEYS:
        if k in t:
            return to_correct(t[k], 0.5)
    vr = t.get("verifier_result")
    if isinstance(vr, dict) and isinstance(vr.get("rewards"), dict) and "reward" in vr["rewards"]:
        return to_correct(vr["rewards"]["reward"], threshold)
    raise ValueError("no outcome (reward, passed, correct, success or resolved)")
