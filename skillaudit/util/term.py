"""Untrusted text on the terminal: model names, skill ids, paths and messages from logs and skills.

`clean` escapes what a terminal would act on instead of showing: C0 control characters but the
newline and the tab, DEL, C1 controls (U+0080-U+009F) and the bidirectional overrides, written
as visible `\\x1b` / `\\u202e` text. An OSC 0 (window title) or OSC 52 (clipboard write) sequence
in a model name then prints as `\\x1b]0;...\\x07`, harmless. Every human-readable line skillaudit
prints goes through it (click lines, warnings, errors, progress, rich tables); `--json` output
is JSON, which escapes control characters itself.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(text: Any) -> str:
    """`text` (str() of it) with terminal controls escaped as visible text; newlines and tabs kept."""
    s = text if isinstance(text, str) else str(text)
    return s if _CONTROL.search(s) is None else _CONTROL.sub(_escape, s)


def wrap(text: str, width: int, indent: str = "  ", max_lines: int | None = None) -> list[str]:
    """`text` as lines of at most `width` characters, the first indented by `indent`, the others by two
    more; cut to `max_lines` lines, the last ending in " …" (never wider than `width`)."""
    lines = textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                          break_on_hyphens=False)
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: width - 2].rstrip() + " …"
    return lines


def named(items: list[str], limit: int = 10, sep: str = ", ") -> str:
    """The first `limit` items joined by `sep`, then how many more: "a, b and 3 more" ("a; b; and 3
    more" when `sep` is "; ", whose items may hold commas)."""
    head = sep.join(items[:limit])
    if len(items) <= limit:
        return head
    return f"{head}{';' if sep.startswith(';') else ''} and {len(items) - limit} more"
