"""SkillsBench's skills-aware terminus-2 log: `agent/trajectory.json` holding a JSON list of
`{"episode", "prompt", "response"}` (not ATIF).

The first prompt's `available_skills:` JSON list names the skills offered; a response that is
`{"load_skill": NAME}` activates one (the next prompt starts `Loaded skill: NAME`); a response's
`commands[].keystrokes` are shell commands (the shared rules: reads and runs of skill files).
Harbor's `result.json` of such a trial also lists `agent_result.metadata.skills_loaded`
(`import harbor` adds those as activations).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from skillaudit.importers.trajectories._rules import Uses
from skillaudit.importers.trajectories.base import Trajectory

FORMAT = "SkillsBench terminus-2 episode list"
_AVAILABLE = re.compile(r"available_skills:\s*(\[)")
MAX_PROMPT = 1 << 20


def _offered(prompt: str) -> list[str] | None:
    m = _AVAILABLE.search(prompt[:MAX_PROMPT])
    if m is None:
        return None
    start = m.start(1)
    depth, i, in_str, esc = 0, start, False, False
    text = prompt[:MAX_PROMPT]
    while i < len(text):  # the bracketed JSON list, strings skipped
        ch = text[i]
        if in_str:
            esc, in_str = (False, in_str) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                try:
                    items = orjson.loads(text[start:i + 1])
                except orjson.JSONDecodeError:
                    return None
                return [x["name"] for x in items if isinstance(x, dict) and isinstance(x.get("name"), str)] \
                    if isinstance(items, list) else None
        i += 1
    return None


class Episodes:
    """The episode list read one entry at a time (`add`), then `trajectory()`."""

    def __init__(self, path: str) -> None:
        self.path, self.uses = path, Uses()
        self.n = 0
        self.bad = False  # an entry that is a dict with neither prompt nor response

    def add(self, e: Any) -> None:
        if not isinstance(e, dict):
            return
        if "response" not in e and "prompt" not in e:
            self.bad = True
            return
        self.n += 1
        if self.n == 1:
            first = e.get("prompt")
            names = _offered(first) if isinstance(first, str) else None
            if names is not None:
                self.uses.offer(names)
        resp = e.get("response")
        if not isinstance(resp, str):
            return
        try:
            obj = orjson.loads(resp.strip()[:MAX_PROMPT])
        except orjson.JSONDecodeError:
            return
        if not isinstance(obj, dict):
            return
        skill = obj.get("load_skill")
        if isinstance(skill, str) and skill.strip():
            self.uses.use(skill.strip(), "activation")
        for cmd in obj.get("commands") if isinstance(obj.get("commands"), list) else ():
            if isinstance(cmd, dict) and isinstance(cmd.get("keystrokes"), str):
                self.uses.command(cmd["keystrokes"])

    def trajectory(self) -> Trajectory:
        if not self.n or self.bad:
            return Trajectory(source=self.path, problem=f"{self.path}: a JSON list, but not of terminus-2 episodes "
                                                        "(prompt, response)")
        return Trajectory.of(self.uses, self.path, FORMAT)


def read_episodes(doc: list[Any], path: str) -> Trajectory:
    """An episode list already in memory."""
    eps = Episodes(path)
    for e in doc:
        eps.add(e)
    return eps.trajectory()
