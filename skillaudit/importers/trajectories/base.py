"""`Trajectory`: what one agent log says of skill use (every reader returns one)."""

from __future__ import annotations

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
