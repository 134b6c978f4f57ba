"""Gemini CLI's own saved session (`agent/gemini-cli.trajectory.json` in Harbor):
`{sessionId, messages[]}`; `gemini` messages carry `toolCalls[]` = {name, args, status, description}.

Each tool call goes through the shared rules (`activate_skill` is an activation, `read_file` a
read, `run_shell_command` a shell command); a call whose status is `error` or `cancelled` did
not run and is no use; a listing (`list_directory`, or `ls` through the shell) of a skills folder
shows the skills present (seen, never used). The offered skills are in the `activate_skill` tool's description,
"(Available: 'a', 'b')": visible only when the agent called it at least once.
"""

from __future__ import annotations

import re

from skillaudit.errors import InputError
from skillaudit.importers.trajectories._rules import Uses
from skillaudit.importers.trajectories.base import Trajectory

FORMAT = "Gemini CLI session JSON"
_AVAILABLE = re.compile(r"\(Available:\s*([^)]*)\)")
_QUOTED = re.compile(r"'([^']+)'")


def is_session(doc: object) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("messages"), list) and "sessionId" in doc


def _output(call: dict) -> str | None:
    """A tool call's output text (`result[].functionResponse.response.output`, else `resultDisplay`)."""
    for part in call.get("result") if isinstance(call.get("result"), list) else ():
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        resp = fr.get("response") if isinstance(fr, dict) else None
        if isinstance(resp, dict) and isinstance(resp.get("output"), str):
            return resp["output"]
    disp = call.get("resultDisplay")
    return disp if isinstance(disp, str) else None


def read_gemini_session(path: str) -> Trajectory:
    """Streamed (`stream.json_items`: one message in memory at a time)."""
    from skillaudit.importers.trajectories.stream import ARRAY, json_items

    uses = Uses()
    keys: set[str] = set()
    messages = False
    try:
        for key, value in json_items(path):
            if key is None:
                return Trajectory(source=path, problem=f"{path}: not a Gemini CLI session (no sessionId and "
                                                       "messages)")
            keys.add(key)
            if key != "messages":
                continue
            if value is ARRAY:
                messages = True
            elif messages:
                _message(uses, value)
    except InputError as exc:
        return Trajectory(source=path, problem=str(exc))
    if not messages or "sessionId" not in keys:
        return Trajectory(source=path, problem=f"{path}: not a Gemini CLI session (no sessionId and messages)")
    return Trajectory.of(uses, path, FORMAT)


def _message(uses: Uses, msg: object) -> None:
    calls = msg.get("toolCalls") if isinstance(msg, dict) else None
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, dict):
            continue
        desc = call.get("description")
        if call.get("name") == "activate_skill" and isinstance(desc, str):
            m = _AVAILABLE.search(desc[:100_000])
            if m:
                uses.offer(_QUOTED.findall(m.group(1)))
        if call.get("status") in ("error", "cancelled"):
            continue
        uses.tool_call(call.get("name"), call.get("args"), _output(call))
