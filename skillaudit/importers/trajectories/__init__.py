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
from dataclasses import dataclass

from ._rules import Uses


@dataclass(frozen=True)
class Trajectory:
    """What an agent's log says: the skills offered and used, or why nothing could be read."""

    offered: tuple[str, ...] = ()
    used: tuple[str, ...] = ()
    source: str | None = None  # the file read
    problem: str | None = None  # why no skill use could be read
    complete: bool = True  # False: the log ends before the agent's final result (cut): use is a floor
    offered_known: bool = False  # the log itself lists what was offered
    opened: tuple[str, ...] = ()  # activated, or SKILL.md read
    rules: tuple[tuple[str, str], ...] = ()  # (skill, the rule that first saw it used)
    files: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (skill, files of it read or run)
    format: str = ""  # the log format read

    @classmethod
    def of(cls, uses: Uses, source: str, fmt: str, complete: bool = True) -> Trajectory:
        used = tuple(uses.rules)
        offered = dict(uses.offered)
        offered.update(dict.fromkeys(used))  # a used skill is always offered
        return cls(offered=tuple(offered), used=used, source=source, complete=complete,
                   offered_known=uses.offered_known, opened=tuple(uses.opened), rules=tuple(uses.rules.items()),
                   files=tuple((k, tuple(v)) for k, v in uses.files.items()), format=fmt)

    def meta(self) -> dict[str, object]:
        """What a record's `meta` keeps of it: the format, the rule per used skill, files per skill."""
        out: dict[str, object] = {"log_format": self.format}
        if self.rules:
            out["use_rules"] = dict(self.rules)
        if self.opened:
            out["opened"] = list(self.opened)
        if self.files:
            out["skill_files"] = {k: list(v) for k, v in self.files}
        return out


def read_trial(folder: str | None) -> Trajectory:
    """The skill use of one Harbor trial folder, by what it holds (module docstring)."""
    from .atif import read_trajectory_json
    from .claude_code import read_claude_code

    if folder is None:
        return Trajectory(problem="a flattened result file: no trial folder, no trajectory")
    agent_dir = os.path.join(folder, "agent")
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
        from .gemini_session import read_gemini_session

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
