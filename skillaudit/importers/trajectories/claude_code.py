"""Claude Code's stream-json (`agent/claude-code.txt` in Harbor): one JSON object per line.

The init line (`"type":"system","subtype":"init"`) lists the `skills` offered; every assistant
`tool_use` (sub-agents' included: they are lines of the same stream) goes through the shared rules
(`Skill` is an activation, `Read` a read, `Bash` a shell command). The last line of a finished
session is `{"type":"result",...}`: without it the log was cut and its use is a floor.
"""

from __future__ import annotations

import re

import orjson

from skillaudit.errors import InputError
from skillaudit.importers.trajectories._rules import Uses
from skillaudit.importers.trajectories.base import Trajectory, log_lines_with

FORMAT = "Claude Code stream-json"


def read_claude_code(path: str) -> Trajectory:
    uses = Uses()
    init = final = False
    try:
        lines = list(_lines(path))
    except InputError as exc:
        return Trajectory(source=path, problem=str(exc))
    for line in lines:
        if line.startswith((b'{"type":"result"', b'{"type": "result"')):
            final = True
            continue
        if not line.startswith(b"{") or (b'"init"' not in line and b'"tool_use"' not in line):
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
        if obj.get("type") != "assistant":
            continue
        msg = obj.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        for c in content if isinstance(content, list) else []:
            if isinstance(c, dict) and c.get("type") == "tool_use":
                uses.tool_call(c.get("name"), c.get("input"))
    if not init:
        return Trajectory(source=path, problem=f"{path}: no Claude Code init line (stream-json) found")
    return Trajectory.of(uses, path, FORMAT, complete=final)


_WANTED = re.compile(rb'"init"|"tool_use"|\{"type": ?"result"')


def _lines(path: str):
    """The lines that can say something of skill use (init, tool_use, result), streamed: the rest
    of a long log (tool outputs) is never parsed or kept."""
    for raw in log_lines_with(path, _WANTED):
        line = raw.strip()
        if line.startswith((b'{"type":"result"', b'{"type": "result"')) or b'"init"' in line or b'"tool_use"' in line:
            yield line
