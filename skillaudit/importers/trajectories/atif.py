"""Harbor's ATIF (`agent/trajectory.json`, `schema_version` "ATIF-v1.x"), for any agent.

Every tool call (`function_name`, `arguments`) anywhere in the document goes through the shared
rules (`_rules`): sub-agents' steps included, so a skill read by a sub-agent counts for the run.
Terminus-2 records each parsed command as a `bash_command` call with `keystrokes`. What was offered
is read from a user or system message's `<available_skills>` block (`<name>` entries) when there is
one (terminus-2); other agents' ATIF (Gemini CLI) has no system step and no list: the offered
skills then come from the job (`import harbor`).

A `trajectory.json` that is a JSON list of `{"episode", "prompt", "response"}` is SkillsBench's
skills-aware terminus-2 episode list, not ATIF: `episodes.read_episodes` reads it.
"""

from __future__ import annotations

import re
from typing import Any

from skillaudit.errors import InputError
from skillaudit.importers.trajectories._rules import Uses
from skillaudit.importers.trajectories.base import Trajectory

_AVAILABLE = re.compile(r"<available_skills>(.*?)</available_skills>", re.S)
_NAME = re.compile(r"<name>\s*([^<\s][^<]*?)\s*</name>")
MAX_MESSAGE = 1 << 20  # characters of one message searched for the offered list


def read_trajectory_json(path: str) -> Trajectory:
    """ATIF or the episode list, by the document's shape, streamed (`stream.json_items`: one step
    or episode in memory at a time); unreadable: use unknown."""
    from skillaudit.importers.trajectories.stream import ARRAY, json_items

    uses = Uses()
    version: Any = None
    kind = None  # "list" (an episode list) or "object" (ATIF, when its schema_version says so)
    episodes = None
    try:
        for key, value in json_items(path):
            if key is None:
                if kind is None:
                    from skillaudit.importers.trajectories.episodes import Episodes

                    kind, episodes = "list", Episodes(path)
                if episodes is not None:
                    episodes.add(value)
                continue
            kind = "object"
            if key == "schema_version":
                version = value
            if value is not ARRAY:
                _visit(uses, value)
    except InputError as exc:
        return Trajectory(source=path, problem=str(exc))
    if episodes is not None:
        return episodes.trajectory()
    if kind == "object" and str(version or "").startswith("ATIF"):
        return Trajectory.of(uses, path, f"ATIF {str(version)[5:] or 'v?'}")
    return Trajectory(source=path, problem=f"{path}: neither ATIF (no schema_version 'ATIF-v...') nor an "
                                           "episode list")


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message[:MAX_MESSAGE]
    if isinstance(message, list):  # content parts
        return "\n".join(p.get("text", "") for p in message if isinstance(p, dict) and isinstance(p.get("text"), str))[:MAX_MESSAGE]
    return ""


def _visit(uses: Uses, value: Any) -> None:
    """Every tool call and offered list inside one value of the document (a step, sub-agents' steps
    included)."""
    from skillaudit.importers.trajectories.stream import walk

    for node in walk(value):
        if "function_name" in node and "arguments" in node:
            uses.tool_call(node.get("function_name"), node.get("arguments"))
        if node.get("source") in ("user", "system") and "message" in node:
            text = _text(node.get("message"))
            for block in _AVAILABLE.findall(text) if "<available_skills>" in text else ():
                uses.offer(m.strip() for m in _NAME.findall(block))


def read_atif(doc: dict[str, Any], path: str) -> Trajectory:
    """An ATIF document already in memory."""
    uses = Uses()
    _visit(uses, doc)
    return Trajectory.of(uses, path, f"ATIF {str(doc.get('schema_version'))[5:] or 'v?'}")
