"""`Trajectory`: what one agent log says of skill use (every reader returns one)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from skillaudit.errors import InputError
from skillaudit.importers.trajectories._rules import Uses

#: the longest line of a JSON Lines agent log that is parsed; a longer one (a tool output pasted
#: whole) is skipped in bounded reads, never held in memory
MAX_LOG_LINE = 4 << 20
BLOCK = 1 << 22  # bytes read at a time


def open_log(path: str) -> IO[bytes]:
    """An agent log opened for reading: a regular file within the document cap
    (SKILLAUDIT_MAX_DOCUMENT_MB; checked before any byte is read), else InputError (one line)."""
    from skillaudit.util.documents import max_document_bytes

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    fh = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file")
        cap = max_document_bytes()
        if st.st_size > cap:
            raise InputError(f"{path}: larger than {cap / 1048576:g} MiB; if it is meant to be read, raise the "
                             "limit with SKILLAUDIT_MAX_DOCUMENT_MB")
    except BaseException:
        fh.close()
        raise
    return fh


def log_lines_with(path: str, pattern: re.Pattern[bytes]) -> Iterator[bytes]:
    """The lines of a JSON Lines agent log that hold a match of `pattern`, each once, in order:
    found by the regex engine over 4 MiB blocks (only matching lines come back to Python, so a log
    of millions of short lines costs a few C scans). The file is checked against the document cap
    (SKILLAUDIT_MAX_DOCUMENT_MB) first and must be a regular file; a line over MAX_LOG_LINE (a tool
    output pasted whole) is skipped, never held in memory; InputError (one line) when it cannot be
    read."""
    with open_log(path) as fh:
        carry, skipping = b"", False  # skipping: inside a line over MAX_LOG_LINE, until its newline
        while True:
            data = fh.read(BLOCK)
            eof = not data
            if skipping:
                nl = data.find(b"\n")
                if nl < 0 and not eof:
                    continue
                skipping, data = False, data[nl + 1:] if nl >= 0 else b""
            buf = carry + data
            cut = len(buf) if eof else buf.rfind(b"\n") + 1
            block, carry = buf[:cut], buf[cut:]
            if len(carry) > MAX_LOG_LINE:
                carry, skipping = b"", True
            done = -1
            for m in pattern.finditer(block):
                if m.start() < done:
                    continue  # a second match in a line already given
                start = block.rfind(b"\n", 0, m.start()) + 1
                end = block.find(b"\n", m.end())
                done = len(block) if end < 0 else end + 1
                if done - start <= MAX_LOG_LINE + 1:
                    yield block[start:done]
            if eof:
                return


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
    seen: tuple[str, ...] = ()  # shown by a listing of a skills folder, not used: present, never "used"
    unloadable: tuple[tuple[str, str], ...] = ()  # (skill, the log's reason) of failed skill loads

    @classmethod
    def of(cls, uses: Uses, source: str, fmt: str, complete: bool = True) -> Trajectory:
        used = tuple(uses.rules)
        offered = dict(uses.offered)
        offered.update(dict.fromkeys(used))  # a used skill is always offered
        return cls(offered=tuple(offered), used=used, source=source, complete=complete,
                   offered_known=uses.offered_known, opened=tuple(uses.opened), rules=tuple(uses.rules.items()),
                   files=tuple((k, tuple(v)) for k, v in uses.files.items()), format=fmt,
                   seen=tuple(s for s in uses.seen if s not in uses.rules),
                   unloadable=tuple(uses.unloadable.items()))

    @property
    def present(self) -> tuple[str, ...]:
        """Skills the log shows were there without using them: seen in a listing, or failed to load."""
        return tuple(dict.fromkeys([*self.seen, *(s for s, _ in self.unloadable)]))

    def meta(self) -> dict[str, object]:
        """What a record's `meta` keeps of it: the format, the rule per used skill, files per skill."""
        out: dict[str, object] = {"log_format": self.format}
        if self.rules:
            out["use_rules"] = dict(self.rules)
        if self.opened:
            out["opened"] = list(self.opened)
        if self.files:
            out["skill_files"] = {k: list(v) for k, v in self.files}
        if self.seen:
            out["seen_skills"] = list(self.seen)
        if self.unloadable:
            out["unloadable_skills"] = dict(self.unloadable)
        return out
