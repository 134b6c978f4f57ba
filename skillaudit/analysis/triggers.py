"""Trigger analyses: which skills' descriptions compete for the same queries (`description_overlap`,
no model call).

A catalog agent picks a skill by its name and description, so two skills whose descriptions
answer the same requests are rivals: a query meant for one may fire the other (shadowing). Two
signals, each calibrated on the bundled library (`methods.RIVAL_BM25`, `methods.RIVAL_COSINE`):

- BM25 over the catalog (name + description of every skill): each skill's own entry is the query;
  the other skill's score divided by the skill's score for itself (1.0: as good a match as itself).
  Directional: `bm25_ab` is how strongly a's description calls up b.
- the cosine similarity of the two entries' embeddings (MiniLM, or tfidf).

A pair is listed when either signal reaches its threshold; pairs are associations between texts,
not measured firing (that is `triggers --queries`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillaudit.analysis.methods import RIVAL_BM25, RIVAL_COSINE, rival_words


@dataclass(frozen=True)
class RivalPair:
    """Two skills whose descriptions compete (a < b by name)."""

    a: str
    b: str
    bm25_ab: float  # a's catalog entry as the query: b's score relative to a's own
    bm25_ba: float
    cosine: float
    signals: tuple[str, ...]  # which reached the threshold: "bm25", "embedding"

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "bm25_ab": self.bm25_ab, "bm25_ba": self.bm25_ba,
                "cosine": self.cosine, "signals": list(self.signals)}


@dataclass
class OverlapReport:
    pairs: list[RivalPair]
    n_skills: int
    embedder: str
    model_id: str
    bm25_threshold: float
    cosine_threshold: float
    fallback_reason: str | None = None
    method: str = ""
    rivals_of: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"n_skills": self.n_skills, "embedder": self.embedder, "model_id": self.model_id,
                "bm25_threshold": self.bm25_threshold, "cosine_threshold": self.cosine_threshold,
                "method": self.method, "pairs": [p.to_dict() for p in self.pairs]}


def catalog_entry(skill: Any) -> str:
    """What a catalog agent reads of a skill: its name and its description."""
    return f"{skill.id.replace('-', ' ').replace('_', ' ')}: {' '.join(skill.description.split())}"


def bm25_relative(entries: list[str]) -> np.ndarray:
    """n x n: row i is entry i as the query, each entry's BM25 score over entry i's score for itself."""
    from skillaudit.agents.retrieve import tokenize
    from skillaudit.errors import require

    n = len(entries)
    out = np.zeros((n, n))
    toks = [tokenize(e) for e in entries]
    if n < 2 or not any(toks):
        return out
    bm25s = require("bm25s", "harness")
    index = bm25s.BM25()
    index.index(toks, show_progress=False)
    for i, t in enumerate(toks):
        if not t:
            continue
        docs, scores = index.retrieve([t], k=n, show_progress=False, n_threads=1)
        out[i, np.asarray(docs)[0]] = np.asarray(scores)[0]
    own = np.diag(out).copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(own[:, None] > 0, out / own[:, None], 0.0)
    return np.clip(rel, 0.0, None)


def description_overlap(library: Any, embedder: str = "minilm", *, bm25_threshold: float = RIVAL_BM25,
                        cosine_threshold: float | None = None, cache_dir: str | os.PathLike | None = None,
                        model_path: str | os.PathLike | None = None) -> OverlapReport:
    """The pairs of `library`'s skills whose catalog entries compete (module docstring), most
    similar first. `cosine_threshold` None: the calibrated value of the embedder actually used."""
    from skillaudit.library.embed import embed_texts

    skills = list(library.skills)
    entries = [catalog_entry(s) for s in skills]
    rel = bm25_relative(entries)
    emb = embed_texts(entries, embedder=embedder, model_path=model_path, cache_dir=cache_dir)
    used = emb.embedder
    thr = RIVAL_COSINE.get(used, 0.65) if cosine_threshold is None else cosine_threshold
    cos = emb.vectors.astype(np.float64) @ emb.vectors.astype(np.float64).T if len(skills) else np.zeros((0, 0))
    pairs = []
    n = len(skills)
    for i in range(n):
        for j in range(i + 1, n):
            signals = tuple(name for name, hit in (("bm25", max(rel[i, j], rel[j, i]) >= bm25_threshold),
                                                   ("embedding", cos[i, j] >= thr)) if hit)
            if not signals:
                continue
            a, b = (i, j) if skills[i].id < skills[j].id else (j, i)
            pairs.append(RivalPair(skills[a].id, skills[b].id, round(float(rel[a, b]), 4), round(float(rel[b, a]), 4),
                                   round(min(float(cos[i, j]), 1.0), 4), signals))
    pairs.sort(key=lambda p: (-len(p.signals), -p.cosine, -max(p.bm25_ab, p.bm25_ba), p.a, p.b))
    rivals: dict[str, list[str]] = {}
    for p in pairs:
        rivals.setdefault(p.a, []).append(p.b)
        rivals.setdefault(p.b, []).append(p.a)
    return OverlapReport(pairs, n, used, emb.model_id, bm25_threshold, thr, emb.fallback_reason, rival_words(used, bm25_threshold, thr),
                         rivals)


# ---------------------------------------------------------------- measured firing (`triggers --queries`)
VOTE = 0.5  # a skill fired on a query when it fired in at least this share of the query's runs


@dataclass
class SkillTriggers:
    """One skill's routing over the labelled queries (the query is the unit: its runs vote once)."""

    skill_id: str
    n_should: int  # queries (with a valid run) that should fire it
    n_hit: int  # of those, the ones where it fired
    n_fired: int  # labelled queries where it fired
    n_false: int  # of those, the ones it should not have taken
    n_should_not_fired: int  # queries naming it in `should_not` where it fired anyway
    recall: float | None
    recall_ci: tuple[float, float] | None
    precision: float | None
    precision_ci: tuple[float, float] | None
    rivals: list[tuple[str, int]]  # skills that fired on its queries where it did not, with counts

    def to_dict(self) -> dict[str, Any]:
        return {"skill_id": self.skill_id, "recall": self.recall,
                "recall_ci": list(self.recall_ci) if self.recall_ci else None, "n_should": self.n_should,
                "n_hit": self.n_hit, "precision": self.precision,
                "precision_ci": list(self.precision_ci) if self.precision_ci else None, "n_fired": self.n_fired,
                "n_false": self.n_false, "should_not_fired": self.n_should_not_fired,
                "rivals": [{"skill_id": r, "queries": n} for r, n in self.rivals]}


@dataclass
class TriggerReport:
    skills: list[SkillTriggers]
    queries: list[dict[str, Any]]  # per query: runs, errors, each skill's firing rate, the vote
    n_queries: int
    n_run: int  # queries with at least one valid run
    n_runs: int
    n_errors: int
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"n_queries": self.n_queries, "n_queries_run": self.n_run, "n_runs": self.n_runs,
                "n_errors": self.n_errors, "method": self.method,
                "skills": [s.to_dict() for s in self.skills], "queries": self.queries}


def trigger_method(level: float = 0.95) -> str:
    return (f"each query votes once: a skill fired on it when it fired in >= {VOTE:.0%} of the query's runs "
            f"(errors left out); recall over the queries that should fire it, precision over the labelled queries "
            f"where it fired; {level:.0%} Wilson intervals, the query as the unit")


def trigger_scores(queries: list[Any], records: list[dict[str, Any]], skill_ids: Any,
                   level: float = 0.95) -> TriggerReport:
    """Recall, precision and rivals per skill from trigger-run records (`engine.triggers`), each
    query's runs voting once. A query is labelled for a skill when it names skills that should
    fire (any other skill firing there took it) or names the skill in `should_not`."""
    from skillaudit.stats import wilson_interval

    runs: dict[str, list[list[str]]] = {q.id: [] for q in queries}
    errors = 0
    for rec in records:
        qid = rec.get("task_id")
        if qid not in runs:
            continue
        if rec.get("error") is not None:
            errors += 1
            continue
        meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
        fired = meta.get("fired")
        if not isinstance(fired, list):  # a record without `meta.fired`: what its retrievals showed
            from skillaudit.engine.triggers import fired_of

            fired = fired_of(rec.get("retrievals") or [])
        runs[qid].append([f for f in fired if isinstance(f, str)])
    ids = list(dict.fromkeys([*skill_ids, *(s for q in queries for s in (*q.should, *q.should_not))]))
    votes: dict[str, set[str]] = {}
    per_query = []
    for q in queries:
        rs = runs[q.id]
        rate: dict[str, float] = {}
        for fired in rs:
            for s in set(fired):
                rate[s] = rate.get(s, 0.0) + 1.0 / len(rs)
        if rs:
            votes[q.id] = {s for s, r in rate.items() if r >= VOTE - 1e-12}
        per_query.append({"id": q.id, "runs": len(rs), "should": list(q.should),
                          "fired": dict(sorted(((s, round(r, 4)) for s, r in rate.items()), key=lambda x: (-x[1], x[0]))),
                          "voted": sorted(votes.get(q.id, ()))})
    out = []
    for sid in ids:
        should = [q for q in queries if q.id in votes and sid in q.should]
        hit = [q for q in should if sid in votes[q.id]]
        labelled_fired = [q for q in queries if q.id in votes and sid in votes[q.id] and (q.should or sid in q.should_not)]
        false = [q for q in labelled_fired if sid not in q.should]
        not_fired = sum(1 for q in queries if q.id in votes and sid in q.should_not and sid in votes[q.id])
        rivals: dict[str, int] = {}
        for q in should:
            if sid in votes[q.id]:
                continue
            for r in votes[q.id] - set(q.should):
                rivals[r] = rivals.get(r, 0) + 1
        if not should and not labelled_fired:
            continue
        rec_ci = wilson_interval(len(hit), len(should), level) if should else None
        pre_ci = wilson_interval(len(labelled_fired) - len(false), len(labelled_fired), level) if labelled_fired else None
        out.append(SkillTriggers(
            sid, len(should), len(hit), len(labelled_fired), len(false), not_fired,
            len(hit) / len(should) if should else None, (round(rec_ci[0], 4), round(rec_ci[1], 4)) if rec_ci else None,
            (len(labelled_fired) - len(false)) / len(labelled_fired) if labelled_fired else None,
            (round(pre_ci[0], 4), round(pre_ci[1], 4)) if pre_ci else None,
            sorted(rivals.items(), key=lambda x: (-x[1], x[0]))))
    out.sort(key=lambda s: (s.recall if s.recall is not None else 2.0, s.skill_id))
    return TriggerReport(out, per_query, len(queries), len(votes), sum(len(v) for v in runs.values()), errors,
                         trigger_method(level))


# ---------------------------------------------------------------- `triggers --changed BASELINE`
@dataclass
class Changed:
    """What changed since an earlier `triggers --json` (its `library` hashes and query votes)."""

    changed: list[str]  # skills whose name, description or body differ, or that are new
    removed: list[str]  # skills of the baseline no longer in the library
    fired_before: dict[str, set[str]]  # query id -> skills the baseline's vote fired there

    def queries(self, queries: list[Any]) -> list[str]:
        """The queries that concern a changed skill: it is in their labels, or it fired there before
        (a skill whose description changed may stop or start taking a query)."""
        ch = set(self.changed)
        return [q.id for q in queries
                if ch & {*q.should, *q.should_not} or ch & self.fired_before.get(q.id, set())]


def changed_since(path: str, library: Any) -> Changed:
    """Compare the library with the skill hashes an earlier `triggers --json` recorded."""
    import orjson

    from skillaudit.errors import InputError
    from skillaudit.util.documents import read_document_bytes

    raw = read_document_bytes(path)  # bounded; names the file when it cannot be read
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"--changed {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != "skillaudit.triggers/v1" or not isinstance(doc.get("library"), list):
        raise InputError(f"--changed {path}: not a `skillaudit triggers --json` output (skillaudit.triggers/v1 with "
                         "its `library` hashes)")
    before: dict[str, str] = {}
    for i, s in enumerate(doc["library"]):
        if not (isinstance(s, dict) and isinstance(s.get("skill_id"), str) and isinstance(s.get("hash"), str)):
            raise InputError(f"--changed {path}: library[{i}] needs skill_id and hash")
        before[s["skill_id"]] = s["hash"]
    fired: dict[str, set[str]] = {}
    for q in doc.get("queries") or []:
        if isinstance(q, dict) and isinstance(q.get("id"), str) and isinstance(q.get("voted"), list):
            fired[q["id"]] = {v for v in q["voted"] if isinstance(v, str)}
    ids = set(library.ids)
    changed = [s.id for s in library.skills if before.get(s.id) != s.content_hash]
    return Changed(changed, sorted(set(before) - ids), fired)
