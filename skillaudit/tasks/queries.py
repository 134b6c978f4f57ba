"""Trigger query files (`skillaudit triggers --queries FILE`): labelled queries that say which skills
should fire and which must not.

JSON Lines (one object a line) or YAML (a list of objects), each:

    {"query": "count how often each word occurs", "should": ["counter-frequency-counting"],
     "should_not": ["sort-with-key-function"], "id": "q-count-words"}

- `query`: the user's request, a non-empty string (at most 20,000 characters);
- `should`: the skills that should fire on it (their names, i.e. folder names; may be empty: a
  query no skill should take);
- `should_not`: skills that must not fire on it (optional);
- `id`: optional, default `q<line>`; unique in the file.

A skill in both lists, an unknown key, or (given the library) an unknown skill name is an error
naming the file and line, raised before any model call.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillaudit.errors import InputError

MAX_QUERY_CHARS = 20_000
_KEYS = {"query", "should", "should_not", "id", "meta"}
_ID_RE = re.compile(r"^[A-Za-z0-9_.:/@+-]{1,200}$")


@dataclass(frozen=True)
class TriggerQuery:
    """One labelled query: the skills that should fire on it and those that must not."""

    id: str
    query: str
    should: tuple[str, ...]
    should_not: tuple[str, ...]
    line: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "query": self.query, "should": list(self.should), "should_not": list(self.should_not)}


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(f"{where}: `{key}` must be a list of skill names")
    out = tuple(dict.fromkeys(v.strip() for v in value))
    return out


def load_queries(path: str | Path, skill_ids: Any = None) -> list[TriggerQuery]:
    """The queries of a trigger query file, checked; `skill_ids` (the library's names) makes an
    unknown name an error (with the closest names as a hint)."""
    from skillaudit.tasks.taskfile import _read_rows

    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    known = set(skill_ids) if skill_ids is not None else None
    out: list[TriggerQuery] = []
    seen: dict[str, int] = {}
    for line, row in _read_rows(p):
        where = f"{p}:{line}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected an object with `query` and `should`")
        extra = sorted(set(row) - _KEYS)
        if extra:
            raise InputError(f"{where}: unknown key {extra[0]!r} (a query has query, should, should_not, id)")
        q = row.get("query")
        if not isinstance(q, str) or not q.strip():
            raise InputError(f"{where}: `query` must be a non-empty string")
        if len(q) > MAX_QUERY_CHARS:
            raise InputError(f"{where}: `query` longer than {MAX_QUERY_CHARS:,} characters")
        should, should_not = _names(row.get("should"), "should", where), _names(row.get("should_not"), "should_not", where)
        both = sorted(set(should) & set(should_not))
        if both:
            raise InputError(f"{where}: {both[0]!r} is in both `should` and `should_not`")
        if known is not None:
            for name in (*should, *should_not):
                if name not in known:
                    close = difflib.get_close_matches(name, sorted(known), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise InputError(f"{where}: no skill named {name!r} in the library{hint}")
        qid = row.get("id", f"q{line}")
        if not isinstance(qid, str) or not _ID_RE.match(qid):
            raise InputError(f"{where}: `id` must be a short string (letters, digits, _.:/@+-)")
        if qid in seen:
            raise InputError(f"{where}: query id {qid!r} already used on line {seen[qid]}")
        seen[qid] = line
        out.append(TriggerQuery(qid, q, should, should_not, line))
    if not out:
        raise InputError(f"{p}: no queries")
    return out
