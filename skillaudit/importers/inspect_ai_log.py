"""Inspect AI logs (`.eval` or `.json`) to run logs, read with inspect_ai's own reader.

One log (or several) holds the runs with the skill tool, another the runs without it; usually two
tasks (`skills_on` / `skills_off`) over one dataset. Samples pair on (model, sample id, epoch)
within the dataset: the benchmark is the dataset name, else the task names' common stem
(`_common.name_benchmarks`; `--model`/`--benchmark` override). `--arm NAME=LOG` logs become arm
records (DESIGN §3.1b) of the same key. The outcome is the chosen scorer's value: `C`/`I` (and `P` = 0.5, `N` = 0), booleans,
or numbers, correct when >= `threshold`. Retrievals are the tool events of the named tool (falling
back to the conversation's tool messages when a sample has no events): skill ids come from a JSON
tool result (a list of ids, a list of objects with `id`/`name` and `score`, or an object holding such
a list under `skills`/`results`), else from skill names of `--skills` found in the result text.

Needs the `inspect` extra (`pip install 'skillaudit[inspect]'`); it is imported only when used.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from skillaudit.errors import ImportFormatError, InputError, require
from skillaudit.importers._common import (
    DISABLED,
    ENABLED,
    ImportReport,
    NameMatcher,
    Pairer,
    SideSource,
    amount_of,
    arm_condition,
    check_arm,
    count_of,
    name_benchmarks,
    skills_from_json,
    to_correct,
)

#: sample metadata copied into an arm record's `meta` (DESIGN §3.1b: mask and pruned arms)
ARM_META_KEYS = ("kept", "withheld", "mask_seed", "excluded")

EXPECTED = "an Inspect AI log (.eval or .json, as written by inspect eval)"


def expand_logs(paths: Sequence[str]) -> list[str]:
    """Log files as given; a folder stands for the `.eval`/`.json` logs directly inside it."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(
                str(f) for f in path.iterdir()
                if f.is_file() and f.suffix in (".eval", ".json") and f.name != "logs.json"
                and not f.name.startswith(".")
            )
            if not found:
                raise InputError(f"{p}: folder holds no Inspect AI logs (*.eval, *.json)")
            out.extend(found)
        elif not path.exists():
            raise InputError(f"{p}: no such file")
        else:
            out.append(p)
    return out


def import_inspect(
    enabled: Sequence[str],
    disabled: Sequence[str],
    *,
    tool: str = "search_skills",
    scorer: str | None = None,
    threshold: float = 1.0,
    skill_ids: Sequence[str] | None = None,
    model: str | None = None,
    benchmark: str | None = None,
    arms: Sequence[tuple[str, str]] = (),
) -> tuple[list[dict[str, Any]], ImportReport]:
    """Read enabled and disabled Inspect AI logs; return §3.1 records (paired only) and a report.

    The sides are given explicitly, so samples pair on (model, sample id, epoch) within the
    dataset: the task names of the two sides (`skills_on` / `skills_off`) are not part of the key.
    The benchmark is named after the dataset, else the task names' common stem
    (`_common.name_benchmarks`). `arms` are (arm name, log) pairs (DESIGN §3.1b): their samples
    become arm records of the same key (`replicate` a disabled-side run, the rest enabled-side).
    """
    from skillaudit.util.documents import check_file_depth

    # every log is depth-checked before inspect_ai is even imported (its import alone takes seconds)
    for paths in (enabled, disabled, [p for _, p in arms]):
        for path in expand_logs(paths):
            check_file_depth(path, INSPECT_MAX_DEPTH, err=ImportFormatError)
    log_api = require("inspect_ai.log", "inspect")
    pairer = Pairer("inspect")
    pairer.paired_on = "(model, sample id, epoch)"
    matcher = NameMatcher(skill_ids) if skill_ids else None
    stats = {"calls": 0, "unparsed": 0, "tools_seen": set(), "disabled_calls": 0}
    logs: list[tuple[str, str, Any]] = []  # (side, path, header)
    for side, paths in ((ENABLED, enabled), (DISABLED, disabled),
                        *((f"arm:{check_arm(name)}", [p]) for name, p in arms)):
        for path in expand_logs(paths):
            pairer.source(path)
            logs.append((side, path, _read_header(log_api, path)))
    sources = [SideSource(path, side, str(h.eval.task), _dataset_name(h)) for side, path, h in logs]
    bench_of, pairer.naming = name_benchmarks(sources, benchmark)
    for side, path, header in logs:
        _read_log(log_api, path, header, side, pairer, tool=tool, scorer=scorer,
                  threshold=threshold, matcher=matcher, model=model, benchmark=bench_of[path],
                  stats=stats)
    if pairer.sides[ENABLED] and stats["calls"] == 0:
        seen = ", ".join(sorted(stats["tools_seen"])) or "none"
        pairer.note(f"no enabled sample called the tool {tool!r} (tools called: {seen}); check --tool")
    if stats["unparsed"]:
        pairer.note(
            f"{stats['unparsed']} {tool} result(s) were not JSON skill lists and no --skills library "
            "was given to match names: they count as returning no skills"
        )
    if stats["disabled_calls"]:
        pairer.note(
            f"{stats['disabled_calls']} disabled sample(s) called {tool!r}: are the --disabled logs "
            "really the runs without skills?"
        )
    return pairer.finish()


def _dataset_name(header: Any) -> str | None:
    ds = getattr(header.eval, "dataset", None)
    name = getattr(ds, "name", None)
    return str(name) if name else None


INSPECT_MAX_DEPTH = 200  # deeper JSON is refused before inspect_ai's reader sees it (memory bombs)


def _read_header(log_api: Any, path: str) -> Any:
    """The log's header (its depth already checked by `import_inspect`)."""
    try:
        return log_api.read_eval_log(path, header_only=True)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except Exception as exc:  # inspect raises ValueError, zipfile errors, pydantic errors...
        raise ImportFormatError(f"{path}: not {EXPECTED} ({_short(exc)})") from None


def _read_log(log_api: Any, path: str, header: Any, side: str, pairer: Pairer, *, tool: str,
              scorer: str | None, threshold: float, matcher: NameMatcher | None,
              model: str | None, benchmark: str, stats: dict[str, Any]) -> None:
    eval_spec = header.eval
    m = model or str(eval_spec.model)
    b = benchmark
    if header.status != "success":
        pairer.note(f"{path}: log status is {header.status!r}; only its finished samples are used")
    scorer_names = [s.name for s in (eval_spec.scorers or [])]
    if scorer is None and len(scorer_names) > 1:
        raise InputError(
            f"{path}: has scores from {', '.join(repr(s) for s in scorer_names)}; choose one with --scorer"
        )
    try:
        samples = log_api.read_eval_log_samples(
            path, all_samples_required=False, resolve_attachments=True
        )
        for sample in samples:
            _add_sample(sample, path, side, pairer, m, b, tool=tool, scorer=scorer,
                        threshold=threshold, matcher=matcher, stats=stats)
    except (ImportFormatError, InputError):
        raise
    except Exception as exc:
        raise ImportFormatError(f"{path}: cannot read its samples ({_short(exc)})") from None


def _add_sample(sample: Any, path: str, side: str, pairer: Pairer, model: str, bench: str,
                *, tool: str, scorer: str | None, threshold: float, matcher: NameMatcher | None,
                stats: dict[str, Any]) -> None:
    key = (model, bench, str(sample.id), int(sample.epoch))
    where = f"{path}#{sample.id}/{sample.epoch}"
    arm = side[4:] if side.startswith("arm:") else None
    condition = side if arm is None else arm_condition(arm)
    condition_label = f"arm {arm}" if arm is not None else condition
    if sample.error is not None:
        msg = str(getattr(sample.error, "message", sample.error)).strip().splitlines()
        pairer.skip(condition_label, key, where, f"the sample failed: {msg[0][:120] if msg else 'error'}")
        return
    scores = sample.scores or {}
    name, sub = _pick_scorer(scores, scorer)
    if name is None:
        have = ", ".join(repr(s) for s in scores) or "none"
        if scorer is None and len(scores) > 1:
            reason = f"several scores ({have}); choose one with --scorer"
        else:
            reason = f"no score from {scorer!r} (scores: {have})" if scorer else "the sample has no score"
        pairer.skip(condition_label, key, where, reason)
        return
    value = scores[name].value
    if sub is not None:
        value = value.get(sub) if isinstance(value, dict) else None
    elif isinstance(value, dict):
        raise InputError(
            f"{where}: score {name!r} has several values ({', '.join(map(str, value))}); "
            f"choose one with --scorer {name}:KEY"
        )
    try:
        correct = to_correct(value, threshold)
    except ValueError as exc:
        pairer.skip(condition_label, key, where, f"score {name!r}: {exc}")
        return
    record: dict[str, Any] = {"correct": correct}
    calls, others = _tool_calls(sample, tool)
    stats["tools_seen"].update(others)
    if condition == ENABLED:
        retrievals = []
        for args, result, error in calls:
            stats["calls"] += 1
            skills: list[dict[str, Any]] = []
            if error is None:
                skills = _skills_from_result(result, matcher, stats)
            query = args.get("query") if isinstance(args, dict) else None
            if query is None and args:
                query = orjson.dumps(args, default=str).decode()
            retrievals.append({"query": query, "skills": skills, "error": error})
        record["retrievals"] = retrievals
    elif calls:
        stats["disabled_calls"] += 1
    completion = sample.output.completion if sample.output is not None else ""
    if completion:
        record["answer"] = completion
    raw = value if isinstance(value, (str, int, float, bool)) else str(value)
    record["meta"] = {"source": path, "scorer": name if sub is None else f"{name}:{sub}", "score": raw,
                      **usage_meta(sample)}
    if arm is not None:
        sample_meta = sample.metadata if isinstance(getattr(sample, "metadata", None), dict) else {}
        for k in ARM_META_KEYS:
            if k in sample_meta:
                record["meta"][k] = sample_meta[k]
        pairer.add_arm(arm, condition, key, record, where)
        return
    pairer.add(condition, key, record, where)


def usage_meta(sample: Any) -> dict[str, Any]:
    """What the sample cost, as record `meta`, summed over the models it called (`model_usage`):
    `usage` (prompt tokens = total - output, cached included whatever the provider's convention;
    `cached_tokens` = cache reads; completion = output tokens), `cost_usd` (`total_cost`, where
    Inspect priced it) and `latency_s` (`total_time`). A field no model logged is left out."""
    out: dict[str, Any] = {}
    prompt = completion = cached = 0
    have_tokens = have_cached = False
    cost, have_cost = 0.0, False
    for u in (getattr(sample, "model_usage", None) or {}).values():
        if u is None:
            continue
        total, output = count_of(getattr(u, "total_tokens", None)), count_of(getattr(u, "output_tokens", None))
        inp = count_of(getattr(u, "input_tokens", None))
        if output is not None and (total or inp is not None):
            have_tokens = True
            prompt += total - output if total and total >= output else (inp or 0)
            completion += output
        c = count_of(getattr(u, "input_tokens_cache_read", None))
        if c is not None:
            have_cached, cached = True, cached + c
        tc = amount_of(getattr(u, "total_cost", None))
        if tc is not None:
            have_cost, cost = True, cost + tc
    if have_tokens:
        out["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                        **({"cached_tokens": cached} if have_cached else {})}
    if have_cost:
        out["cost_usd"] = round(cost, 8)
    t = amount_of(getattr(sample, "total_time", None))
    if t is not None:
        out["latency_s"] = round(t, 3)
    return out


def _pick_scorer(scores: dict[str, Any], scorer: str | None) -> tuple[str | None, str | None]:
    if scorer is None:
        return (next(iter(scores)), None) if len(scores) == 1 else (None, None)
    if scorer in scores:
        return scorer, None
    if ":" in scorer:
        name, sub = scorer.rsplit(":", 1)
        if name in scores:
            return name, sub
    return None, None


def _tool_calls(sample: Any, tool: str) -> tuple[list[tuple[Any, Any, str | None]], set[str]]:
    """[(arguments, result, error message)] of `tool` in call order, and other tool names seen."""
    calls: list[tuple[Any, Any, str | None]] = []
    others: set[str] = set()
    seen_ids: set[str] = set()
    have_events = False

    def walk(events: Any) -> Iterator[Any]:
        for ev in events or ():
            yield ev
            if getattr(ev, "event", None) == "tool" and getattr(ev, "events", None):
                yield from walk(ev.events)

    for ev in walk(sample.events):
        have_events = True
        if getattr(ev, "event", None) != "tool":
            continue
        ident = getattr(ev, "id", None) or getattr(ev, "uuid", None)
        if ident is not None:
            if ident in seen_ids:
                continue
            seen_ids.add(ident)
        if ev.function != tool:
            others.add(ev.function)
            continue
        err = None if ev.error is None else (getattr(ev.error, "message", None) or str(ev.error))
        calls.append((ev.arguments, ev.result, err))
    if have_events:
        return calls, others
    # no events (excluded or an old log): read the conversation instead
    args_by_id: dict[str, Any] = {}
    for msg in sample.messages or ():
        if msg.role == "assistant":
            for tc in msg.tool_calls or ():
                if tc.function == tool:
                    args_by_id[tc.id] = tc.arguments
                else:
                    others.add(tc.function)
        elif msg.role == "tool" and msg.function == tool:
            err = msg.error.message if msg.error is not None else None
            calls.append((args_by_id.get(msg.tool_call_id or "", {}), msg.content, err))
    return calls, others


def _result_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        return "\n".join(_result_text(part) for part in result)
    text = getattr(result, "text", None)
    if isinstance(text, str):
        return text
    return "" if result is None else str(result)


def _skills_from_result(result: Any, matcher: NameMatcher | None, stats: dict[str, Any]) -> list[dict[str, Any]]:
    text = _result_text(result)
    parsed = None
    try:
        parsed = skills_from_json(orjson.loads(text))
    except orjson.JSONDecodeError:
        parsed = None
    if parsed is not None:
        return parsed
    if matcher is not None:
        return matcher.find(text)
    if text.strip():
        stats["unparsed"] += 1
    return []


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 160 else first[:157] + "..."
