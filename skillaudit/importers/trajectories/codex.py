"""Codex CLI's `codex exec --json` events (`agent/codex.txt` in Harbor): one JSON object per line.

`item.completed` events carry an `item` whose `type` (older releases: `item_type`) says what it
is: a `command_execution` (`command`, often `bash -lc '...'`) goes through the shared shell rules
(reads and runs of a skill's files); an `mcp_tool_call` (`tool`, `arguments`) through the tool
rules, and a completed one whose arguments name a skill's file (`read_mcp_resource` of
`file:/root/.codex/skills/pdf/SKILL.md`) is a read ("mcp read"; a failed one read nothing); a
`file_change` (a write) is never a use. A listing command's `aggregated_output` shows skills
present (seen, not used); a line "failed to load skill .../SKILL.md: reason" (Codex's stderr, kept
in the log by Harbor) names a skill shipped but not loadable. A `turn.completed` or `turn.failed` line closes
the run: without one the log was cut. Codex's events do not list the skills offered.

Tested on a scripted trace written to the documented schema (no public real log with skill use
exists; docs/importers.md).
"""

from __future__ import annotations

import re

import orjson

from skillaudit.errors import InputError
from skillaudit.importers.trajectories._rules import Uses, skill_files
from skillaudit.importers.trajectories.base import Trajectory, log_lines_with

FORMAT = "Codex exec --json"
#: the lines that can say something (events are counted as seen); the rest are never parsed
_WANTED = re.compile(rb'"item\.completed"|"turn\.|"thread\.|to load skill')


def _mcp_read(uses: Uses, item: dict) -> None:
    """A completed MCP call (`read_mcp_resource` and the like) whose arguments name a file under a
    skill's folder (`uri: file:/root/.codex/skills/pdf/SKILL.md`) read that file: use (rule
    "mcp read"). A failed call (`status: failed` or an `error`) read nothing."""
    if item.get("status") == "failed" or item.get("error"):
        return
    args = item.get("arguments")
    if not isinstance(args, dict):
        return
    for v in args.values():
        if isinstance(v, str) and ("skills/" in v or "skill/" in v):
            for skill, path in skill_files(v.removeprefix("file://").removeprefix("file:")):
                uses.use(skill, "mcp read", path)


def read_codex(path: str) -> Trajectory:
    uses = Uses()
    events = 0
    done = False
    try:
        # streamed: only the lines that can say something are kept (events are counted as seen)
        lines = [ln.strip() for ln in log_lines_with(path, _WANTED)]
    except InputError as exc:
        return Trajectory(source=path, problem=str(exc))
    for line in lines:
        if b"to load skill" in line:  # Codex's stderr (or an error event): a skill shipped, not loadable
            uses.log_line(line.decode("utf-8", "replace"))
        if not line.startswith(b"{"):
            continue
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
            continue
        events += 1
        kind = ev["type"]
        if kind in ("turn.completed", "turn.failed"):
            done = True
        if kind != "item.completed" or not isinstance(ev.get("item"), dict):
            continue
        item = ev["item"]
        itype = item.get("type", item.get("item_type"))
        if itype == "command_execution" and isinstance(item.get("command"), str):
            uses.command(item["command"])
            uses.shell_output(item["command"], item.get("aggregated_output"))
        elif itype == "mcp_tool_call":
            uses.tool_call(item.get("tool"), item.get("arguments"))
            _mcp_read(uses, item)
    if events == 0:
        return Trajectory(source=path, problem=f"{path}: no Codex exec --json events found")
    return Trajectory.of(uses, path, FORMAT, complete=done)
