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

from ...errors import InputError
from .._common import load_json
from ._rules import Uses
from .base import Trajectory

_AVAILABLE = re.compile(r"<available_skills>(.*?)</available_skills>", re.S)
_NAME = re.compile(r"<name>\s*([^<\s][^<]*?)\s*</name>")
MAX_MESSAGE = 1 << 20  # characters of one message searched for the offered list


def read_trajectory_json(path: str) -> Trajectory:
    """ATIF or the episode list, by the document's shape; unreadable: use unknown."""
    try:
        doc = load_json(path, "an agent trajectory (ATIF or an episode list)")
    except InputError as exc:
        return Trajectory(source=path, problem=str(exc))
    if isinstance(doc, list):
        from .episodes import read_episodes

        return read_episodes(doc, path)
    if isinstance(doc, dict) and str(doc.get("schema_version", "")).startswith("ATIF"):
        return read_atif(doc, path)
    return Trajectory(source=path, problem=f"{path}: neither ATIF (no schema_version 'ATIF-v...') nor an "
                                           "episode list")


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message[:MAX_MESSAGE]
    if isinstance(message, list):  # content parts
        return "\n".join(p.get("text", "") for p in message if isinstance(p, dict) and isinstance(p.get("text"), str))[:MAX_MESSAGE]
    return ""


def read_atif(doc: dict[str, Any], path: str) -> Trajectory:
    uses = Uses()
    stack: list[Any] = [doc]
    while stack:  # every dict in the document, iteratively (depth is bounded by the reader)
        node = stack.pop()
        if isinstance(node, dict):
            if "function_name" in node and "arguments" in node:
                uses.tool_call(node.get("function_name"), node.get("arguments"))
            if node.get("source") in ("user", "system") and "message" in node:
                text = _text(node.get("message"))
                for block in _AVAILABLE.findall(text) if "<available_skills>" in text else ():
                    uses.offer(m.strip() for m in _NAME.findall(block))
            stack.extend(reversed([v for v in node.values() if isinstance(v, (dict, list))]))
        elif isinstance(node, list):  # pushed in reverse: visited in document order
            stack.extend(reversed([v for v in node if isinstance(v, (dict, list))]))
    return Trajectory.of(uses, path, f"ATIF {str(doc.get('schema_version'))[5:] or 'v?'}")
