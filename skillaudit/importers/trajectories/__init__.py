"""Agents' own logs to skill use: one reader per log format, and the choice of reader per trial.

Every reader returns a `Trajectory`: the skills the log says were offered (when it says), the
skills the run used (opened by activation or a SKILL.md read, or a file of theirs read or run)
with the rule that first saw each use (`_rules`), and whether the log is complete. A log that is
missing or unreadable gives a `Trajectory` with `problem` set: use unknown, never "no use".

`read_trial(folder)` picks the reader by what a Harbor trial folder holds: the agent's native log
first (`agent/claude-code.txt`, `codex.txt`, `openhands.trajectory.json`,
`gemini-cli.trajectory.json`), then `agent/trajectory.json`
sniffed for ATIF (`schema_version` `ATIF-v...`) vs SkillsBench's terminus-2 episode list.
"""

from __future__ import annotations

import os

from skillaudit.importers.trajectories.base import Trajectory

__all__ = ["Trajectory", "read_trial"]


def read_trial(folder: str | None) -> Trajectory:
    """The skill use of one Harbor trial folder, by what it holds (module docstring)."""
    from skillaudit.importers.trajectories.atif import read_trajectory_json
    from skillaudit.importers.trajectories.claude_code import read_claude_code

    if folder is None:
        return Trajectory(problem="a flattened result file: no trial folder, no trajectory")
    agent_dir = os.path.join(folder, "agent")
    if os.path.islink(agent_dir):
        return Trajectory(problem="agent/ is a symbolic link: not followed")
    cc = os.path.join(agent_dir, "claude-code.txt")
    if os.path.isfile(cc) and not os.path.islink(cc):
        return read_claude_code(cc)
    for name, module, func in (("codex.txt", "codex", "read_codex"),
                               ("openhands.trajectory.json", "openhands", "read_openhands")):
        native = os.path.join(agent_dir, name)
        if os.path.isfile(native) and not os.path.islink(native):
            import importlib

            return getattr(importlib.import_module(f"{__name__}.{module}"), func)(native)
    gs = os.path.join(agent_dir, "gemini-cli.trajectory.json")
    if os.path.isfile(gs) and not os.path.islink(gs):
        from skillaudit.importers.trajectories.gemini_session import read_gemini_session

        return read_gemini_session(gs)
    tj = os.path.join(agent_dir, "trajectory.json")
    if os.path.isfile(tj) and not os.path.islink(tj):
        return read_trajectory_json(tj)
    if os.path.isdir(agent_dir):
        try:
            others = sorted(e.name for e in os.scandir(agent_dir) if e.is_file(follow_symlinks=False))
        except OSError:
            others = []
        if others:
            return Trajectory(problem=f"agent/{others[0]} is not a trajectory format skillaudit reads "
                                      "(claude-code.txt, codex.txt, openhands.trajectory.json, gemini-cli.trajectory.json, "
                                      "trajectory.json)")
    return Trajectory(problem="no agent/ trajectory")
