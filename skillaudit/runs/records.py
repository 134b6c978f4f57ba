"""One run-log record (DESIGN §3.1): the conditions, opening a log, and the exact check of a line.

`_check_line` is the exact path: orjson plus hand-written checks that produce every error message
(naming file:line). The faster paths in `runs.reader` accept a subset of what it accepts and
interpret it the same way; a block they cannot read comes here line by line. Also here: the code
lines of a skill, to tell whether an answer followed a retrieved skill (adherence).
"""

from __future__ import annotations

import gzip
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import orjson

from skillaudit.errors import RunLogError

ENABLED, DISABLED = 1, 0
CONDITION_ALIASES = {
    "enabled": ENABLED, "on": ENABLED, "skills_on": ENABLED,
    "disabled": DISABLED, "off": DISABLED, "skills_off": DISABLED,
}
ADHERENCE_UNKNOWN = -1
#: a pair-level judged outcome on the enabled record: its answer against the disabled one's
#: (`preference`), as the reader's int8 codes; PREFERENCE_NONE: not judged
PREFERENCES = {"win": 1, "tie": 0, "loss": -1}
PREFERENCE_NONE = -2
#: the judge's A/A check on the enabled record (`judge_aa`): the same answer judged against itself in
#: both orders gave a tie (0) or a verdict (1: the judge flipped); JUDGE_AA_NONE: not checked
JUDGE_AA = {"tie": 0, "flip": 1}
JUDGE_AA_NONE = -1
_MIN_CODE_LINE = 16  # shorter lines ("return x", "else:") are too common to prove adherence


def _open(path: str | Path, raw: Callable[[IO[bytes]], IO[bytes]] | None = None) -> tuple[str, IO[bytes]]:
    """(name, binary stream) of a run log; gzip is decompressed. `raw` wraps the file before any
    decompression (load_inputs hashes the bytes it reads on their one way through)."""
    path = str(path)
    if path == "-":
        return "<stdin>", sys.stdin.buffer
    p = Path(path)
    if p.is_dir():
        raise RunLogError(f"{path}: is a folder, not a JSON Lines file")
    try:
        fh: IO[bytes] = p.open("rb")
    except FileNotFoundError:
        raise RunLogError(f"{path}: no such file") from None
    except OSError as exc:
        raise RunLogError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if raw is not None:
        fh = raw(fh)
    if path.endswith(".gz"):
        fh = gzip.open(fh)  # type: ignore[assignment]  # noqa: SIM115 - the caller closes it
    return path, fh


def _describe(value: Any) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return {list: "array", str: "string", int: "number", float: "number"}.get(type(value), "value")


def _as_bool(value: Any, name: str) -> bool:
    if value is True or value is False:
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise ValueError(f"'{name}' must be true/false or 0/1, got {_describe(value)}")


class _CodeLines:
    """Per-skill id and code lines, to detect whether an answer followed a retrieved skill."""

    def __init__(self, library: Any) -> None:
        self.lines: dict[str, list[str]] = {}
        if library is None:
            return
        for skill in library:
            self.lines[skill.id] = _code_lines(skill.body)

    def adhered(self, answer: str, skill_ids: Iterable[str]) -> bool:
        for sid in skill_ids:
            if sid in answer:
                return True
            for line in self.lines.get(sid, ()):
                if line in answer:
                    return True
        return False


_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def _code_lines(body: str) -> list[str]:
    out = []
    for block in _FENCE.findall(body):
        for line in block.splitlines():
            line = line.strip()
            if len(line) >= _MIN_CODE_LINE and not line.startswith("#"):
                out.append(line)
    return out


def _retrieved_ids(rec: dict, where: str) -> tuple[bool, list[tuple[str, float]]]:
    """(invoked, [(skill_id, score)] deduplicated in rank order) of an enabled record."""
    got: dict[str, float] = {}
    calls = 0
    rets = rec.get("retrievals")
    if rets is not None:
        if not isinstance(rets, list):
            raise ValueError("'retrievals' must be a list of calls")
        for call in rets:
            if not isinstance(call, dict):
                raise ValueError("each entry of 'retrievals' must be an object")
            calls += 1
            skills = call.get("skills") or []
            if not isinstance(skills, list):
                raise ValueError("'retrievals[].skills' must be a list")
            for s in skills:
                if isinstance(s, str):
                    sid, score = s, float("nan")
                elif isinstance(s, dict) and isinstance(s.get("id"), str):
                    sid = s["id"]
                    raw = s.get("score")
                    score = float(raw) if isinstance(raw, (int, float)) and raw is not True and raw is not False else float("nan")
                else:
                    raise ValueError("each retrieved skill must be an id string or an object with a string 'id'")
                prev = got.get(sid)
                if prev is None or score > prev:
                    got[sid] = score
    short = rec.get("retrieved")
    if short is not None:
        if not isinstance(short, list) or not all(isinstance(s, str) for s in short):
            raise ValueError("'retrieved' must be a list of skill id strings")
        calls += 1
        for sid in short:
            got.setdefault(sid, float("nan"))
    inv = rec.get("invoked")
    invoked = _as_bool(inv, "invoked") if inv is not None else calls > 0
    return invoked, list(got.items())


_MAX_EPOCH = 2**63 - 1
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark: allowed only at the very start of a file


def _non_finite(line: bytes, exc: orjson.JSONDecodeError) -> bool:
    """orjson stopped at a number too large for a double, or at NaN / Infinity."""
    if "infinity" in str(exc):
        return True
    rest = line.decode("utf-8", "replace")[exc.pos:exc.pos + 9].lstrip("-")
    return rest.startswith(("NaN", "Infinity", "nan", "inf"))


class _Checked:
    """A record validated by the exact path, shaped like the fast path's struct."""

    __slots__ = (
        "answer",
        "arm",
        "benchmark",
        "condition",
        "correct",
        "epoch",
        "error",
        "got",
        "inv",
        "judge_aa",
        "model",
        "preference",
        "task_id",
        "use_logged",
    )


def _judged(rec: dict[str, Any], key: str, codes: dict[str, int], cond: int, why: str) -> str | None:
    """A judge's field of the enabled record (`preference`, `judge_aa`): one of `codes`, or None."""
    v = rec.get(key)
    if v is not None:
        if v not in codes:
            *head, last = codes
            raise ValueError(f"'{key}' must be {', '.join(head)} or {last}, got {_describe(v)}")
        if cond != ENABLED:
            raise ValueError(f"'{key}' belongs on the enabled record ({why})")
    return v


def _check_line(line: bytes, where: str) -> _Checked:
    """Parse and validate one line exactly as DESIGN §3.1 says; RunLogError names file:line."""
    if line.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise RunLogError(f"{where}: UTF-16 text (byte order mark); save the log as UTF-8")
    if b"\0" in line:
        raise RunLogError(f"{where}: binary data, not a JSON Lines text file")
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if line.startswith(_BOM):
            raise RunLogError(f"{where}: a UTF-8 byte order mark (BOM) inside the file; "
                              "only a file's first line may start with one") from None
        if b"\xff" in line or b"\xfe" in line or "UTF-8" in str(exc):
            raise RunLogError(f"{where}: binary data, not a JSON Lines text file") from None
        if _non_finite(line, exc):
            raise RunLogError(f"{where}: non-finite number (column {exc.pos + 1}); "
                              "JSON numbers must be finite (no NaN, Infinity or 1e400)") from None
        raise RunLogError(f"{where}: invalid JSON (column {exc.pos + 1})") from None
    if not isinstance(rec, dict):
        raise RunLogError(f"{where}: record must be a JSON object, got {_json_type(rec)}")
    out = _Checked()
    try:
        for req in ("task_id", "condition", "correct"):
            if req not in rec:
                raise ValueError(f"missing required field '{req}'")
        tid = rec["task_id"]
        if not isinstance(tid, str) or not tid:
            raise ValueError(f"'task_id' must be a non-empty string, got {_describe(tid)}")
        cond_raw = rec["condition"]
        cond = CONDITION_ALIASES.get(cond_raw) if isinstance(cond_raw, str) else None
        if cond is None:
            raise ValueError(
                f"unknown condition {_describe(cond_raw)} (expected enabled or disabled; "
                "aliases on/off, skills_on/skills_off)"
            )
        correct = _as_bool(rec["correct"], "correct")
        epoch = rec.get("epoch", 1)
        if type(epoch) is not int or epoch < 1:
            raise ValueError(f"'epoch' must be an integer >= 1, got {_describe(epoch)}")
        if epoch > _MAX_EPOCH:
            raise ValueError(f"'epoch' must be at most 2**63 - 1, got {_describe(epoch)}")
        model = rec.get("model", "default")
        bench = rec.get("benchmark", "default")
        if not isinstance(model, str) or not isinstance(bench, str):
            raise ValueError("'model' and 'benchmark' must be strings")
        arm = rec.get("arm")
        if arm is not None and (not isinstance(arm, str) or not arm):
            raise ValueError(f"'arm' must be a non-empty string, got {_describe(arm)}")
        out.arm = arm
        if cond == ENABLED and arm is None:
            inv, got = _retrieved_ids(rec, where)
            out.inv, out.got = inv, dict(got)
        out.error = rec.get("error")
        ul = rec.get("use_logged")
        if ul is not None and not isinstance(ul, bool):
            raise ValueError(f"'use_logged' must be true or false, got {_describe(ul)}")
        out.use_logged = ul  # `offered` is informational (the report's task bundles read the task)
        out.preference = _judged(rec, "preference", PREFERENCES, cond, "its answer against the disabled one")
        out.judge_aa = _judged(rec, "judge_aa", JUDGE_AA, cond, "beside its preference")
    except ValueError as exc:
        raise RunLogError(f"{where}: {exc}") from None
    out.task_id, out.condition, out.correct, out.epoch = tid, cond_raw, correct, epoch
    out.model, out.benchmark, out.answer = model, bench, rec.get("answer")
    return out


def fired_of(retrievals: list[dict[str, Any]]) -> list[str]:
    """The skills whose text reached the agent: hits of the calls without an error, first-seen order."""
    out: list[str] = []
    for call in retrievals:
        if not isinstance(call, dict) or call.get("error"):
            continue
        for h in call.get("skills") or []:
            sid = h.get("id") if isinstance(h, dict) else h
            if isinstance(sid, str) and sid not in out:
                out.append(sid)
    return out
