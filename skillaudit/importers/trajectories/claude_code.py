"""Claude Code's stream-json (`agent/claude-code.txt` in Harbor): one JSON object per line.

The init line (`"type":"system","subtype":"init"`) lists the `skills` offered; every assistant
`tool_use` (sub-agents' included: they are lines of the same stream) goes through the shared rules
(`Skill` is an activation, `Read` a read, `Bash` a shell command). The last line of a finished
session is `{"type":"result",...}`: without it the log was cut and its use is a floor. A `Bash`, `LS`
or `Glob` call naming a skills path is noted; its `tool_result` (a user line) shows the skills a
listing printed: seen, never used.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from skillaudit.errors import InputError
from skillaudit.importers.trajectories._rules import Uses
from skillaudit.importers.trajectories.base import Trajectory, log_lines_with

FORMAT = "Claude Code stream-json"


def read_claude_code(path: str) -> Trajectory:
    uses = Uses()
    init = final = False
    listings: dict[str, tuple[str, dict]] = {}  # tool_use id -> (tool, input) of a listing of a skills path
    try:
        for line in _lines(path):  # streamed: one line in memory at a time
            if line.startswith((b'{"type":"result"', b'{"type": "result"')):
                final = True
                continue
            if not line.startswith(b"{"):
                continue
            if b'"tool_result"' in line and b'"init"' not in line and b'"tool_use"' not in line:
                if listings and any(k.encode() in line for k in listings):
                    _listing_results(line, listings, uses)
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(obj, dict):
                continue
            if obj.get("type") == "system" and obj.get("subtype") == "init":
                init = True
                skills = obj.get("skills")
                uses.offer(skills if isinstance(skills, list) else [])
            if obj.get("type") == "user":
                _listing_results(line, listings, uses, obj)
                continue
            if obj.get("type") != "assistant":
                continue
            msg = obj.get("message")
            content = msg.get("content") if isinstance(msg, dict) else None
            for c in content if isinstance(content, list) else []:
                if isinstance(c, dict) and c.get("type") == "tool_use":
                    uses.tool_call(c.get("name"), c.get("input"))
                    _note_listing(c, listings)
    except InputError as exc:
        return Trajectory(source=path, problem=str(exc))
    if not init:
        return Trajectory(source=path, problem=f"{path}: no Claude Code init line (stream-json) found")
    return Trajectory.of(uses, path, FORMAT, complete=final)


def _note_listing(call: dict, listings: dict[str, tuple[str, dict]]) -> None:
    """A tool_use that may list a skills folder (Bash naming a skills path, LS, Glob): its result,
    when it comes, shows the skills present (seen, never used)."""
    name, args, cid = call.get("name"), call.get("input"), call.get("id")
    if not isinstance(name, str) or not isinstance(args, dict) or not isinstance(cid, str):
        return
    text = " ".join(v for v in args.values() if isinstance(v, str))
    if name.lower() in ("bash", "ls", "glob") and ("skills" in text or "skill/" in text) and len(listings) < 10_000:
        listings[cid] = (name.lower(), args)


def _listing_results(line: bytes, listings: dict[str, tuple[str, dict]], uses: Uses, obj: Any = None) -> None:
    """The tool_result of a noted listing: its text through the shared rules (`Uses.shell_output`,
    `Uses.listing`); an error result shows nothing."""
    if obj is None:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
    msg = obj.get("message") if isinstance(obj, dict) else None
    content = msg.get("content") if isinstance(msg, dict) else None
    for c in content if isinstance(content, list) else []:
        if not isinstance(c, dict) or c.get("type") != "tool_result" or c.get("is_error"):
            continue
        got = listings.pop(c.get("tool_use_id"), None) if isinstance(c.get("tool_use_id"), str) else None
        if got is None:
            continue
        out = c.get("content")
        if isinstance(out, list):
            out = "\n".join(p.get("text", "") for p in out if isinstance(p, dict) and isinstance(p.get("text"), str))
        if not isinstance(out, str):
            continue
        name, args = got
        if name == "bash" and isinstance(args.get("command"), str):
            uses.shell_output(args["command"], out)
        elif isinstance(args.get("path"), str):
            uses.listing(args["path"], out)


_WANTED = re.compile(rb'"init"|"tool_use"|"tool_result"|\{"type": ?"result"')


def _lines(path: str):
    """The lines that can say something of skill use (init, tool_use, result), streamed: the rest
    of a long log (tool outputs) is never parsed or kept."""
    for raw in log_lines_with(path, _WANTED):
        line = raw.strip()
        if line.startswith((b'{"type":"result"', b'{"type": "result"')) or b'"init"' in line or b'"tool_use"' in line \
                or b'"tool_result"' in line:
            yield line
