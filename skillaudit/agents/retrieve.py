"""`search_skills(query, types?)`: BM25 (bm25s) over each skill's description and body.

Mirrors the paper's tool: the top 3 skills come back in full, at most 3 calls per task, and invalid
arguments return nothing (the call is still logged, with an `error`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from skillaudit.errors import HarnessError, require
from skillaudit.library import Library, Skill, render_skill

TOP_K = 3
MAX_CALLS = 3
MAX_QUERY_CHARS = 500

_TOKEN_RE = re.compile(r"[a-z0-9]+")
# small English stop list: BM25 works on what is left
_STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "how", "i", "if", "in", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "use", "using", "was", "what", "when", "where", "which", "with", "you", "your", "do", "does", "can", "should", "into"]
)


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric tokens without stop words; `snake_case` also yields its parts."""
    out: list[str] = []
    for tok in _TOKEN_RE.findall(text.lower().replace("_", " ")):
        if tok not in _STOP:
            out.append(tok)
    return out


def skill_types(skill: Skill) -> set[str]:
    """Types a skill belongs to, from `metadata.domain`/`metadata.type`/`metadata.types`."""
    meta = skill.metadata or {}
    found: set[str] = set()
    for key in ("domain", "type", "types", "tags"):
        value = meta.get(key)
        if isinstance(value, str):
            found.update(v.strip().lower() for v in value.split(",") if v.strip())
        elif isinstance(value, (list, tuple)):
            found.update(str(v).strip().lower() for v in value)
    return found


@dataclass
class Hit:
    """One retrieved skill: its id, BM25 score and 1-based rank."""

    id: str
    score: float
    rank: int
    hash: str | None = None  # the first 16 hex digits of the skill's content hash (provenance)


@dataclass
class Retrieval:
    """One `search_skills` call as logged in `retrievals` (DESIGN §3.1)."""

    query: Any
    hits: list[Hit] = field(default_factory=list)
    error: str | None = None
    types: Any = None

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "query": self.query,
            "skills": [{"id": h.id, "score": round(h.score, 4), "rank": h.rank,
                        **({"hash": h.hash} if h.hash else {})} for h in self.hits],
            "error": self.error,
        }
        if self.types is not None:
            rec["types"] = self.types
        return rec


class SkillIndex:
    """A BM25 index over a library's skills (description + body), queried by `search`."""

    def __init__(self, library: Library, exclude: set[str] | frozenset[str] = frozenset()) -> None:
        unknown = sorted(set(exclude) - set(library.ids))
        self.unknown_excluded = tuple(unknown)
        self.skills: tuple[Skill, ...] = tuple(s for s in library.skills if s.id not in exclude)
        self._bm25 = None
        if self.skills:
            bm25s = require("bm25s", "harness")
            corpus = [tokenize(f"{s.description}\n{s.body}") for s in self.skills]
            self._bm25 = bm25s.BM25()
            self._bm25.index(corpus, show_progress=False)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.skills)

    @property
    def types(self) -> tuple[str, ...]:
        """Every skill type (domain) in the index, sorted."""
        return tuple(sorted({t for s in self.skills for t in skill_types(s)}))

    def get(self, skill_id: str) -> Skill | None:
        if not hasattr(self, "_by_id"):
            self._by_id = {s.id: s for s in self.skills}
        return self._by_id.get(skill_id)

    def hash_of(self, skill_id: str) -> str | None:
        skill = self.get(skill_id)
        return skill.content_hash[:16] if skill is not None else None

    def search(self, query: Any, types: Any = None, k: int = TOP_K) -> Retrieval:
        """Run one call. Invalid arguments (non-string or empty query, bad `types`) return nothing."""
        ret = Retrieval(query=query, types=types)
        if not isinstance(query, str) or not query.strip():
            ret.error = "invalid arguments: `query` must be a non-empty string"
            return ret
        if len(query) > MAX_QUERY_CHARS:
            ret.error = f"invalid arguments: `query` longer than {MAX_QUERY_CHARS} characters"
            return ret
        wanted: set[str] | None = None
        if types is not None:
            if isinstance(types, str):
                types = [types]
            if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
                ret.error = "invalid arguments: `types` must be a list of strings"
                return ret
            wanted = {t.strip().lower() for t in types if t.strip()} or None
        tokens = tokenize(query)
        if not tokens or self._bm25 is None:
            return ret
        import numpy as np

        n = len(self.skills)
        docs, scores = self._bm25.retrieve([tokens], k=n, show_progress=False, n_threads=1)
        rank = 0
        for idx, score in zip(np.asarray(docs)[0], np.asarray(scores)[0], strict=True):
            if score <= 0:
                break
            skill = self.skills[int(idx)]
            if wanted is not None and not (skill_types(skill) & wanted):
                continue
            rank += 1
            ret.hits.append(Hit(id=skill.id, score=float(score), rank=rank, hash=skill.content_hash[:16]))
            if rank >= k:
                break
        return ret


def render_result(index: SkillIndex, ret: Retrieval, shown: set[str]) -> str:
    """The tool's answer text; a skill already shown in full earlier in the task is referenced."""
    if ret.error:
        return "No skills returned (invalid arguments)."
    if not ret.hits:
        return "No matching skills."
    parts = []
    for hit in ret.hits:
        skill = index.get(hit.id)
        if skill is None:  # pragma: no cover - index and hits come from the same library
            raise HarnessError(f"retrieved unknown skill {hit.id}")
        if hit.id in shown:
            parts.append(f"## Skill: {hit.id}\n(already returned above)\n")
        else:
            parts.append(render_skill(skill))
            shown.add(hit.id)
    return "\n".join(parts)
