"""OpenHands' saved trajectory (`agent/openhands.trajectory.json` in Harbor, `SAVE_TRAJECTORY_PATH`):
a JSON list of events (or `{"history": [...]}`).

An action event (`"action"`, `"args"`) is a use by the shared rules: `run` (`args.command`) a
shell command, `read` (`args.path`) a read, `edit` with `args.command == "view"` a read, and
`run_ipython` (`args.code`) a command whose skill paths count; `write` and other `edit`s are
writes, never a use. Where an event also carries `tool_call_metadata.function_name` with its
arguments, the tool rules read that call. A `finish` action closes the run. OpenHands does not log
the skills offered.

Tested on a scripted trace written to the documented schema (no public real log with skill use
exists; docs/importers.md).
"""

from __future__ import annotations

from skillaudit.errors import InputError
from skillaudit.importers.trajectories._rules import Uses
from skillaudit.importers.trajectories.base import Trajectory

FORMAT = "OpenHands trajectory"


def read_openhands(path: str) -> Trajectory:
    """Streamed (`stream.json_items`: one event in memory at a time)."""
    from skillaudit.importers.trajectories.stream import ARRAY, json_items

    uses = Uses()
    done = False
    shape = None
    try:
        for key, ev in json_items(path):
            if key is None:
                shape = "list"
            elif key == "history":
                shape = shape or ("object" if ev is ARRAY else None)
                if ev is ARRAY:
                    continue
            else:
                continue
            if not isinstance(ev, dict) or not isinstance(ev.get("action"), str):
                continue
            action, args = ev["action"], ev.get("args") if isinstance(ev.get("args"), dict) else {}
            if action == "finish":
                done = True
            elif action == "run" and isinstance(args.get("command"), str):
                uses.command(args["command"])
            elif action == "run_ipython" and isinstance(args.get("code"), str):
                uses.command(args["code"])
            elif action == "read" or (action == "edit" and args.get("command") == "view"):
                uses.tool_call("read", {"path": args.get("path")})
    except InputError as exc:
        return Trajectory(source=path, problem=str(exc))
    if shape is None:
        return Trajectory(source=path, problem=f"{path}: not an OpenHands trajectory (a list of events)")
    return Trajectory.of(uses, path, FORMAT, complete=done)
