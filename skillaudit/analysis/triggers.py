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


def reach(report: TriggerReport, library_ids: Any, level: float = 0.95) -> dict[str, Any]:
    """Query-level reach of a catalog (the query as the unit): of the queries that should fire a
    skill, the share where one of theirs fired (`reach`, Wilson interval), where only others did
    (`misroute`), and the share of all run queries where a skill outside the library (a distractor) fired."""
    from skillaudit.stats import wilson_interval

    lib = set(library_ids)
    pos = [q for q in report.queries if q["should"] and q["runs"]]
    hit = sum(1 for q in pos if set(q["voted"]) & set(q["should"]))
    mis = sum(1 for q in pos if q["voted"] and not set(q["voted"]) & set(q["should"]))
    ran = [q for q in report.queries if q["runs"]]
    dis = sum(1 for q in ran if set(q["voted"]) - lib)
    ci = wilson_interval(hit, len(pos), level) if pos else None
    return {"n_queries": len(pos), "reach": hit / len(pos) if pos else None,
            "reach_ci": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
            "misroute": mis / len(pos) if pos else None,
            "distractor_fired": dis / len(ran) if ran else None}


@dataclass
class TriggerReport:
    skills: list[SkillTriggers]
    queries: list[dict[str, Any]]  # per query: runs, errors, each skill's firing rate, the vote
    n_queries: int
    n_run: int  # queries with at least one valid run
    n_runs: int
    n_errors: int
    method: str
    sweep: list[dict[str, Any]] | None = None  # `--distractors`: reach per catalog size

    def to_dict(self) -> dict[str, Any]:
        doc = {"n_queries": self.n_queries, "n_queries_run": self.n_run, "n_runs": self.n_runs,
               "n_errors": self.n_errors, "method": self.method,
               "skills": [s.to_dict() for s in self.skills], "queries": self.queries}
        if self.sweep is not None:
            doc["sweep"] = self.sweep
        return doc


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
        meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
        trig = meta.get("trigger") if isinstance(meta.get("trigger"), dict) else {}
        qid = trig.get("id", rec.get("task_id"))  # a sweep's runs are logged as <id>#d<size>
        if qid not in runs:
            continue
        if rec.get("error") is not None:
            errors += 1
            continue
        fired = meta.get("fired")
        if not isinstance(fired, list):  # a record without `meta.fired`: what its retrievals showed
            from skillaudit.runs.records import fired_of

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


# ---------------------------------------------------------------- the trigger view of paired runs (`audit`)
def _score_doc(units: np.ndarray, flips: np.ndarray, level: float) -> dict[str, Any]:
    """n, b, c, net and the paired score estimate (mean flip) with its interval and test, the task as the unit."""
    from skillaudit.stats import paired_score, task_level_counts

    if not flips.size:
        return {"n_pairs": 0, "n_tasks": 0, "b": 0, "c": 0, "net": 0, "rae": None, "ci": None, "p": None}
    b, c = (int(v) for v in task_level_counts(units, flips))
    ps = paired_score(units, flips, level)
    return {"n_pairs": int(flips.size), "n_tasks": int(np.unique(units).size), "b": b, "c": c, "net": b - c,
            "rae": ps.estimate, "ci": list(ps.ci) if ps.ci else None, "p": ps.p}


TRIGGER_VIEW_WORDS = (
    "pairs whose skills were retrieved, split by whether a skill the task file expected (`expected_skills`) was "
    "among them (right skill chosen) or not (wrong skill chosen: shadowing); each class's mean flip with the "
    "score interval of the metrics, the task as the unit; associations, not causes")


def trigger_view(runs: Any, expected: dict[tuple[str, str, str, int], tuple[str, ...]], level: float = 0.95
                 ) -> list[dict[str, Any]]:
    """Per model: where each skill fired and whether it helped there, and, for pairs whose task file
    named the skills that should fire, the shadowing split of the library's loss (wrong skill chosen
    vs right skill chosen but harmful) and each skill's confusion counts (expected and fired,
    expected and not fired, fired where not expected)."""
    out = []
    for m_ix in (np.unique(runs.model).tolist() if runs.n_pairs else []):
        sub = runs.select(model=runs.models[m_ix])
        out.append(_model_view(sub, runs.models[m_ix], expected, level))
    return [v for v in out if v is not None]


def _model_view(runs: Any, model: str, expected: dict, level: float) -> dict[str, Any] | None:
    n = runs.n_pairs
    f = runs.flip.astype(np.int64)
    units = runs.unit_ids()
    ret = runs.retrieval
    in_call = runs.retrieved
    if not in_call.any():
        return None
    exp_of: list[tuple[str, ...] | None] = [None] * n
    if expected:
        for i in range(n):
            exp_of[i] = expected.get((model, runs.benchmarks[runs.benchmark[i]], runs.tasks[runs.task[i]],
                                      int(runs.epoch[i])))
    skills = runs.skills
    cls = np.zeros(n, dtype=np.int8)  # 0 unlabelled, 1 right skill among the retrieved, 2 wrong skills only
    confusion: dict[str, list[int]] = {}  # skill -> [expected and fired, expected not fired, fired not expected]
    none_fired = 0
    for i in range(n):
        e = exp_of[i]
        if not e:
            continue
        got = {skills[j] for j in ret.indices[ret.indptr[i]:ret.indptr[i + 1]].tolist()}
        if in_call[i]:
            cls[i] = 1 if got & set(e) else 2
        else:
            none_fired += 1
        for s in e:
            confusion.setdefault(s, [0, 0, 0])[0 if s in got else 1] += 1
        for s in got - set(e):
            confusion.setdefault(s, [0, 0, 0])[2] += 1
    rows = np.flatnonzero(in_call)
    total = _score_doc(units[rows], f[rows], level)
    doc: dict[str, Any] = {"model": model, "retrieving": total, "method": TRIGGER_VIEW_WORDS}
    labelled = cls > 0
    if labelled.any():
        right, wrong = np.flatnonzero(cls == 1), np.flatnonzero(cls == 2)
        split = {"right_skill": _score_doc(units[right], f[right], level),
                 "wrong_skill": _score_doc(units[wrong], f[wrong], level), "no_skill_fired": none_fired}
        loss = split["right_skill"]["net"] + split["wrong_skill"]["net"]
        split["net"] = loss
        split["shadowing_share"] = (round(min(split["wrong_skill"]["net"], 0) / loss, 4) if loss < 0 else None)
        doc["split"] = split
    per_skill = []
    row_of = ret.row_index()
    keep = in_call[row_of]
    e_row, e_col = row_of[keep], ret.indices[keep].astype(np.int64)
    loads = np.bincount(e_col, minlength=len(skills))
    # the share of the tasks that loaded a skill where it did not help (their summed flips <= 0)
    _, u_ix = np.unique(units, return_inverse=True)
    n_u = int(u_ix.max()) + 1 if u_ix.size else 1
    key, inv = np.unique(e_col * n_u + u_ix.ravel()[e_row], return_inverse=True)
    sums = np.bincount(inv.ravel(), weights=f[e_row], minlength=key.size)
    k_skill = key // n_u
    load_tasks = np.bincount(k_skill, minlength=len(skills))
    no_help = np.bincount(k_skill, weights=(sums <= 0).astype(np.float64), minlength=len(skills))
    order = np.argsort(e_col, kind="stable")
    starts = np.concatenate([[0], np.cumsum(loads)])
    for j, sid in enumerate(skills):
        if not loads[j] and sid not in confusion:
            continue
        s_doc: dict[str, Any] = {"skill_id": sid, "loads": int(loads[j]), "load_tasks": int(load_tasks[j]),
                                 "did_not_help_share": (round(float(no_help[j]) / int(load_tasks[j]), 4)
                                                        if load_tasks[j] else None)}
        if sid in confusion:
            tp, fn, fp = confusion[sid]
            s_doc["confusion"] = {"expected_fired": tp, "expected_not_fired": fn, "fired_not_expected": fp}
        at = e_row[order[starts[j]:starts[j + 1]]]
        lab = at[cls[at] > 0] if labelled.any() else at[:0]
        if lab.size:
            exp_rows = np.array([i for i in lab.tolist() if sid in (exp_of[i] or ())], dtype=np.int64)
            other = np.setdiff1d(lab, exp_rows)
            on, off = _score_doc(units[exp_rows], f[exp_rows], level), _score_doc(units[other], f[other], level)
            s_doc["where_expected"], s_doc["where_not_expected"] = on, off
            s_doc["target"] = _target(on["net"], off["net"])
        per_skill.append(s_doc)
    doc["skills"] = per_skill
    return doc


def _target(net_expected: int, net_not_expected: int) -> str | None:
    """Where a skill's harm lies: on tasks it should not have fired on (its description takes them),
    or on tasks it should have (its body hurts); None when it did no net harm on labelled pairs."""
    if min(net_expected, net_not_expected) >= 0:
        return None
    return "description" if net_not_expected < net_expected else "body"


def target_sentence(s_doc: dict[str, Any]) -> str | None:
    """The evidence for a rewrite's target, in words."""
    t = s_doc.get("target")
    if t is None:
        return None
    on, off = s_doc["where_expected"], s_doc["where_not_expected"]
    return (f"rewrite its {t}: net {off['net']:+d} over {off['n_tasks']} task(s) where another skill was expected, "
            f"{on['net']:+d} over {on['n_tasks']} where it was expected")


def with_trigger_targets(prune: Any, view: list[dict[str, Any]]) -> Any:
    """`prune` (a `decide.recommend.PruneResult`) with each rewrite of a skill whose harm the
    trigger view places (description or body) saying so: `evidence.trigger` and the reason's end."""
    import dataclasses

    by = {(v["model"], s["skill_id"]): s for v in view for s in v.get("skills", []) if s.get("target")}
    if not by:
        return prune
    recs = []
    for r in prune.recommendations:
        got = [by[(m, r.skill_id)] for m in r.models if (m, r.skill_id) in by] if r.scope == "skill" else []
        if r.action == "rewrite" and got:
            s = got[0]
            ev = {**r.evidence, "trigger": {"target": s["target"], "where_expected": s["where_expected"],
                                            "where_not_expected": s["where_not_expected"]}}
            r = dataclasses.replace(r, reason=f"{r.reason}; trigger view: {target_sentence(s)}", evidence=ev)
        recs.append(r)
    return dataclasses.replace(prune, recommendations=tuple(recs))
