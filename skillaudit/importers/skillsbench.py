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

from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ImportFormatError
from ._common import (
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


def import_skillsbench(
    paths: Sequence[str],
    *,
    threshold: float = 1.0,
    model: str | None = None,
    benchmark: str | None = None,
) -> tuple[list[dict[str, Any]], ImportReport]:
    """Read per-trial results of both conditions; return §3.1 records (paired only) and a report."""
    pairer = Pairer("skillsbench")
    trials = []
    zero_based = False
    for path in paths:
        pairer.source(path)
        for where, trial in _trials(path):
            trials.append((where, trial))
            for k in _TRIAL_KEYS:
                if trial.get(k) == 0 and type(trial.get(k)) is int:
                    zero_based = True
    counters: dict[tuple[str, str, str, str], int] = {}
    no_skills = 0
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
        cond_word = cond_raw.strip().lower()
        condition = ENABLED if cond_word in _WITH else DISABLED if cond_word in _WITHOUT else None
        epoch = _epoch(t, where, zero_based)
        if epoch is None:
            ck = (m, b, tid, cond_word)
            counters[ck] = epoch = counters.get(ck, 0) + 1
        key = (m, b, tid, epoch)
        if condition is None:
            pairer.skip(cond_raw, key, where, f"condition {cond_raw!r} is neither with-skills nor without-skills")
            continue
        err = t.get("error", t.get("exception_info"))
        if err:
            text = err.get("exception_message", err.get("message", err)) if isinstance(err, dict) else err
            pairer.skip(condition, key, where, f"the trial errored: {str(text).strip()[:120]}")
            continue
        try:
            correct = _outcome(t, threshold)
        except ValueError as exc:
            pairer.skip(condition, key, where, str(exc))
            continue
        record: dict[str, Any] = {"correct": correct}
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
    return pairer.finish()


def _trials(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    head = b""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).lstrip()
    except OSError:
        pass  # read_bytes below reports it
    if head.startswith(b"[") or (path.endswith(".json") and head.startswith(b"{")):
        data = load_json(path, EXPECTED)
        items = data
        label = ""
        if isinstance(data, dict):
            for k in ("trials", "results"):
                if isinstance(data.get(k), list):
                    items, label = data[k], k
                    break
            else:
                if any(k in data for k in _TASK_KEYS):
                    items = [data]  # one trial per file (e.g. a Harbor trial's result.json)
        if not isinstance(items, list):
            raise ImportFormatError(f"{path}: no list of trials; expected {EXPECTED}")
        for i, t in enumerate(items):
            where = f"{path}: {label}[{i}]" if label else f"{path}: [{i}]"
            if not isinstance(t, dict):
                raise ImportFormatError(f"{where}: a trial must be an object; expected {EXPECTED}")
            yield where, t
    else:
        for lineno, t in iter_jsonl(path, EXPECTED):
            yield f"{path}:{lineno}", t


def _str(value: Any, name: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: \"{name}\" must be a string")
    return value


def _model_of(t: dict[str, Any], where: str) -> str:
    model = _str(t.get("model", t.get("model_name")), "model", where)
    agent = _str(t.get("agent"), "agent", where)
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
