"""Clusters of skills by embedding, ranked by the harm they concentrate; near-duplicate pairs.

Harm in a library rarely sits in one entry: the same bad advice is often written several times in
different words. `cluster_library` embeds every skill (name, description, body), clusters the
vectors without a fixed k (agglomerative, cosine distance threshold; or HDBSCAN), labels each
cluster with its most distinctive terms (class-based TF-IDF) and scores it from run data.

A cluster is `harmful` only when its members are net-harmful *as a group*, with evidence:
1. it has at least two members;
2. over the distinct pairs that retrieved any member, harms outnumber rescues (pooled net < 0)
   and the pooled test gives p <= alpha (default 0.05): exact McNemar with one pair per task,
   the exact sign-flip test of each task's summed flips when tasks ran several epochs;
3. the harm is not carried by one member: without the member of most negative net, the pairs
   retrieving the remaining members are still net-harmful (pooled net < 0).

Thresholds were calibrated on the sample library (`skills/`): with MiniLM its two deliberate
near-duplicate pairs score 0.83 while the closest other pair scores 0.69 (tfidf: 0.55 and
0.48 against 0.32).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin

from skillaudit.analysis.methods import NEAR_DUPLICATE_THRESHOLD, TASK_TEST_WORDS
from skillaudit.library.embed import Embeddings, embed_library
from skillaudit.stats import mcnemar_exact, paired_test

#: agglomerative (average linkage) cosine distance threshold, per backend
CLUSTER_DISTANCE = {"minilm": 0.45, "tfidf": 0.75}
DEFAULT_ALPHA = 0.05
# words of the SKILL.md template that say nothing about a cluster's topic
_TEMPLATE_WORDS = frozenset({
    "apply", "steps", "snippet", "invariants", "self", "test", "use", "using", "used", "python",
    "problem", "problems", "answer", "return", "value", "values", "example", "skill", "task", "tasks",
})


# ---------------------------------------------------------------- the estimator
class SkillClusterer(ClusterMixin, BaseEstimator):
    """Cluster L2-normalised skill vectors without a fixed number of clusters.

    method="agglomerative": average-linkage clustering on cosine distance, cut at
    `distance_threshold`. method="hdbscan": scikit-learn HDBSCAN (on normalised vectors euclidean
    distance is monotone in cosine distance); its noise points become singleton clusters.
    After `fit`, `labels_` numbers clusters 0..k-1 in order of their first member.
    """

    def __init__(self, method: str = "agglomerative", distance_threshold: float = 0.45,
                 linkage: str = "average", min_cluster_size: int = 2) -> None:
        self.method = method
        self.distance_threshold = distance_threshold
        self.linkage = linkage
        self.min_cluster_size = min_cluster_size

    def fit(self, X: Any, y: Any = None) -> SkillClusterer:
        x = np.asarray(X, dtype=np.float64)
        n = x.shape[0]
        if n < 2:
            raw = np.zeros(n, dtype=np.int64)
        elif self.method == "agglomerative":
            from sklearn.cluster import AgglomerativeClustering

            raw = AgglomerativeClustering(
                n_clusters=None, distance_threshold=self.distance_threshold,
                metric="cosine", linkage=self.linkage,
            ).fit(x).labels_
        elif self.method == "hdbscan":
            from sklearn.cluster import HDBSCAN

            norms = np.linalg.norm(x, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            raw = HDBSCAN(min_cluster_size=max(2, self.min_cluster_size),
                          copy=True).fit(x / norms).labels_.copy()
            noise = np.flatnonzero(raw < 0)
            raw[noise] = raw.max() + 1 + np.arange(noise.size)
        else:
            raise ValueError(f"unknown method {self.method!r} (agglomerative or hdbscan)")
        _, first = np.unique(raw, return_index=True)
        remap = {int(raw[i]): k for k, i in enumerate(sorted(first))}
        self.labels_ = np.array([remap[int(r)] for r in raw], dtype=np.int64)
        self.n_clusters_ = len(remap)
        return self


# ---------------------------------------------------------------- labels (class-based TF-IDF)
def ctfidf_labels(texts: Sequence[str], labels: Sequence[int], n_terms: int = 3) -> dict[int, str]:
    """Each cluster's `n_terms` most distinctive words by class-based TF-IDF (as in BERTopic).

    All texts of a cluster form one document; a term's weight is its frequency in that document
    times log(1 + A / f), A = average words per cluster, f = the term's frequency over all
    clusters.
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

    labels = np.asarray(labels)
    ids = sorted(set(labels.tolist()))
    if not ids:
        return {}
    docs = [" ".join(t for t, lab in zip(texts, labels, strict=True) if lab == k) for k in ids]
    stop = list(ENGLISH_STOP_WORDS | _TEMPLATE_WORDS)
    try:
        counts = CountVectorizer(stop_words=stop, token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]{2,}\b",
                                 lowercase=True)
        m = counts.fit_transform(docs)
    except ValueError:  # no usable words at all
        return {k: "" for k in ids}
    vocab = counts.get_feature_names_out()
    # sparse throughout: clusters x vocabulary is mostly zeros (hundreds of clusters of a large
    # library would make dense copies of hundreds of MB); element values are those of the dense form
    m = sp.csr_matrix(m, dtype=np.float64)
    row_words = np.maximum(np.asarray(m.sum(axis=1)).ravel(), 1.0)
    avg_words = m.sum() / len(ids)
    idf = np.log1p(avg_words / np.maximum(np.asarray(m.sum(axis=0)).ravel(), 1.0))
    w = m.copy()  # tf * idf, element by element as the dense arrays compute it
    w.data = w.data / np.repeat(row_words, np.diff(w.indptr)) * idf[w.indices]
    out = {}
    for row, k in enumerate(ids):
        cols = w.indices[w.indptr[row]:w.indptr[row + 1]]
        vals = w.data[w.indptr[row]:w.indptr[row + 1]]
        cols, vals = cols[vals > 0], vals[vals > 0]
        order = np.lexsort((vocab[cols], -vals))  # weight desc, then alphabetical for ties
        out[k] = ", ".join(vocab[cols[j]] for j in order[:n_terms])
    return out


# ---------------------------------------------------------------- near-duplicates
def near_duplicate_pairs(keys: Sequence[str], vectors: np.ndarray,
                         threshold: float) -> list[tuple[str, str, float]]:
    """Pairs (a, b, cosine similarity) with similarity >= threshold, a < b, sorted desc."""
    if len(keys) < 2:
        return []
    v = np.asarray(vectors, dtype=np.float64)
    sim = v @ v.T
    # the upper triangle's hits only: no index arrays over all n^2 / 2 pairs
    i, j = np.nonzero(np.triu(sim >= threshold, k=1))
    pairs = []
    for a, b, s in zip(i.tolist(), j.tolist(), sim[i, j].tolist(), strict=True):
        x, y = sorted((keys[a], keys[b]))
        pairs.append((x, y, round(min(s, 1.0), 4)))
    pairs.sort(key=lambda p: (-p[2], p[0], p[1]))
    return pairs


def find_near_duplicates(library: Any, embedder: str = "minilm", threshold: float | None = None,
                         cache_dir: str | os.PathLike | None = None, *,
                         model_path: str | os.PathLike | None = None,
                         embeddings: Embeddings | None = None) -> list[tuple[str, str, float]]:
    """Near-duplicate skill pairs (a, b, similarity), most similar first.

    `threshold` None = the calibrated value of the backend actually used (0.80 for MiniLM, 0.45 for
    tfidf, which also applies when MiniLM falls back to tfidf).
    """
    emb = embeddings if embeddings is not None else embed_library(
        library, embedder, model_path=model_path, cache_dir=cache_dir)
    thr = NEAR_DUPLICATE_THRESHOLD.get(emb.embedder, 0.8) if threshold is None else threshold
    return near_duplicate_pairs(emb.keys, emb.vectors, thr)


# ---------------------------------------------------------------- scoring
def _get(row: Any, name: str, default: Any = 0) -> Any:
    if row is None:
        return default
    if isinstance(row, Mapping):
        return row.get(name, default)
    return getattr(row, name, default)


@dataclass
class Cluster:
    """One cluster and the harm it concentrates (counts over the distinct pairs of its members)."""

    id: int
    skills: list[str]
    label: str
    net: int  # rescues - harms over the distinct pairs that retrieved any member
    share: float  # sum of the members' attributed shares
    harmful: bool
    n_pairs: int = 0
    b: int = 0
    c: int = 0
    p_value: float = 1.0  # task-level test of the pooled pairs (exact McNemar with one epoch)
    n_harmful_members: int = 0  # members with net < 0
    harmful_members: list[str] = field(default_factory=list)
    net_without_worst: int | None = None  # pooled net of the other members' pairs
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PairIndex:
    """The pairs retrieving each skill, column-compressed once: the pooled counts of many clusters
    then cost what their members were retrieved, not a pass over every pair per cluster."""

    def __init__(self, runs: Any) -> None:
        self.col = {s: i for i, s in enumerate(runs.skills)}
        self.csc = sp.csc_matrix(runs.ranks)
        self.flip = np.asarray(runs.flip)
        self.units = runs.unit_ids() if hasattr(runs, "unit_ids") else np.arange(self.flip.size)
        self.last_p: float | None = None

    def pooled(self, members: Sequence[str]) -> tuple[int, int, int]:
        """(n, b, c) over the distinct pairs retrieving any of `members` (unknown ids are ignored).

        `last_p` is then the task-level p-value of those pairs (`stats.paired_test`: exact McNemar
        with one pair per task, else the sign-flip test of each task's summed flips)."""
        cols = [self.col[m] for m in members if m in self.col]
        self.last_p = None
        if not cols:
            return 0, 0, 0
        ptr, idx = self.csc.indptr, self.csc.indices
        rows = np.concatenate([idx[ptr[c]:ptr[c + 1]] for c in cols])
        if rows.size * 16 < self.flip.size:  # few pairs: sorting them beats a pass over all pairs
            rows = np.unique(rows)
        else:
            hit = np.zeros(self.flip.size, dtype=bool)
            hit[rows] = True
            rows = np.flatnonzero(hit)
        f = self.flip[rows]
        self.last_p = paired_test(self.units[rows], f)
        return int(rows.size), int((f > 0).sum()), int((f < 0).sum())


def _pooled(runs: Any, members: Sequence[str]) -> tuple[int, int, int]:
    """(n, b, c) over the distinct pairs retrieving any of `members` (unknown ids are ignored)."""
    return (runs if isinstance(runs, PairIndex) else PairIndex(runs)).pooled(members)


def score_cluster(cluster_id: int, members: Sequence[str], label: str,
                  stats: Mapping[str, Any], runs: Any = None,
                  alpha: float = DEFAULT_ALPHA) -> Cluster:
    """Score one cluster from per-skill rows (`stats[skill_id]` with n_retrieved, b, c, net,
    share; dicts or objects) and, when given, the pairs themselves (`runs`: .flip, .ranks, .skills,
    or a `PairIndex` of them, which scoring many clusters should build once).

    Without `runs` the pooled counts are sums of the members' counts, which count a pair once per
    member that it retrieved (an approximation that overstates the evidence of co-retrieved
    members); with `runs` every pair counts once.
    """
    members = list(members)
    rows = {m: stats.get(m) for m in members}
    if runs is not None and not isinstance(runs, PairIndex):
        runs = PairIndex(runs)

    def pooled(ms: Sequence[str]) -> tuple[int, int, int]:
        if runs is not None:
            return _pooled(runs, ms)
        return (sum(int(_get(rows[m], "n_retrieved")) for m in ms),
                sum(int(_get(rows[m], "b")) for m in ms),
                sum(int(_get(rows[m], "c")) for m in ms))

    n, b, c = pooled(members)
    # task-level with the pairs themselves (epochs of a task are one unit); pair counts otherwise
    p = float(runs.last_p) if runs is not None and runs.last_p is not None else float(mcnemar_exact(b, c))
    nets = {m: int(_get(rows[m], "net", int(_get(rows[m], "b")) - int(_get(rows[m], "c"))))
            for m in members}
    bad = sorted((m for m in members if nets[m] < 0), key=lambda m: (nets[m], m))
    share = float(sum(float(_get(rows[m], "share", 0.0) or 0.0) for m in members))
    net_wo = None
    if len(members) >= 2:
        worst = min(members, key=lambda m: (nets[m], m))
        _, b2, c2 = pooled([m for m in members if m != worst])
        net_wo = b2 - c2
    if len(members) < 2:
        harmful, why = False, "a single skill (judged on its own by rank/prune)"
    elif b - c >= 0:
        harmful, why = False, f"not net-harmful as a group (net {b - c:+d} over {n} pairs)"
    elif p > alpha:
        harmful, why = False, f"net {b - c:+d} over {n} pairs, not significant (p={p:.3g})"
    elif net_wo is not None and net_wo >= 0:
        harmful, why = False, (f"net {b - c:+d} (p={p:.3g}) comes from one member, "
                               f"{bad[0] if bad else '?'}; the others have net {net_wo:+d}")
    else:
        harmful, why = True, (f"{len(bad)} of {len(members)} members net-harmful; group net "
                              f"{b - c:+d} over {n} pairs (p={p:.3g}); without the worst "
                              f"member still {net_wo:+d}")
    return Cluster(id=cluster_id, skills=members, label=label, net=b - c, share=round(share, 6),
                   harmful=harmful, n_pairs=n, b=b, c=c, p_value=p, n_harmful_members=len(bad),
                   harmful_members=bad, net_without_worst=net_wo, reason=why)


# ---------------------------------------------------------------- the whole library
@dataclass
class ClusterReport:
    """Clusters (most harm-concentrating first), near-duplicates and how the vectors were made."""

    embedder: str
    model_id: str
    clusters: list[Cluster]
    near_duplicates: list[tuple[str, str, float]]
    near_duplicate_threshold: float
    distance_threshold: float
    method: str
    fallback_reason: str | None = None
    n_encoded: int = 0
    n_cached: int = 0
    embeddings: Embeddings | None = field(default=None, repr=False)
    alpha: float = DEFAULT_ALPHA  # a cluster is harmful at pooled p <= alpha

    def harmful_members(self) -> list[list[str]]:
        """Member ids of each harmful cluster (for `rewrite` recommendations)."""
        return [list(c.skills) for c in self.clusters if c.harmful]

    def cluster_of(self) -> dict[str, int]:
        return {s: c.id for c in self.clusters for s in c.skills}

    def to_dict(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder,
            "model_id": self.model_id,
            "method": self.method,
            "distance_threshold": self.distance_threshold,
            "near_duplicate_threshold": self.near_duplicate_threshold,
            "fallback_reason": self.fallback_reason,
            "cache": {"encoded": self.n_encoded, "cached": self.n_cached},
            "clusters": [c.to_dict() for c in self.clusters],
            "near_duplicates": [list(p) for p in self.near_duplicates],
            # how "harmful" was decided, as computed (`ClusterIndex`: `stats.paired_test`)
            "harm_test": {"test": TASK_TEST_WORDS, "alpha": self.alpha,
                          "pooled": "the distinct pairs retrieving any member, pooled"},
        }


def cluster_library(
    library: Any,
    stats: Mapping[str, Any] | None = None,
    runs: Any = None,
    *,
    embedder: str = "minilm",
    model_path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    threshold: float | None = None,
    distance_threshold: float | None = None,
    method: str = "agglomerative",
    alpha: float = DEFAULT_ALPHA,
    embeddings: Embeddings | None = None,
) -> ClusterReport:
    """Embed, cluster, label and score every skill of `library`.

    `stats` maps skill id -> row (n_retrieved, b, c, net, share; e.g. attribution rows); `runs`
    (PairedRuns) makes the pooled counts exact. Thresholds default to the backend's calibrated
    values. Clusters are sorted by summed share, then pooled net (most harmful first).
    """
    skills = list(library.skills if hasattr(library, "skills") else library)
    emb = embeddings if embeddings is not None else embed_library(
        skills, embedder, model_path=model_path, cache_dir=cache_dir)
    dist = CLUSTER_DISTANCE.get(emb.embedder, 0.45) if distance_threshold is None else distance_threshold
    thr = NEAR_DUPLICATE_THRESHOLD.get(emb.embedder, 0.8) if threshold is None else threshold
    est = SkillClusterer(method=method, distance_threshold=dist).fit(emb.vectors) if skills else None
    labels = est.labels_ if est is not None else np.zeros(0, np.int64)
    names = ctfidf_labels([s.text for s in skills], labels)
    stats = stats or {}
    index = PairIndex(runs) if runs is not None else None
    by_label: dict[int, list[str]] = {}
    for key, lab in zip(emb.keys, labels.tolist(), strict=True):
        by_label.setdefault(lab, []).append(key)
    clusters = [score_cluster(k, sorted(by_label[k]), names.get(k, ""), stats, index, alpha)
                for k in sorted(by_label)]
    clusters.sort(key=lambda c: (not c.harmful, c.share, c.net, c.id))
    return ClusterReport(
        embedder=emb.embedder, model_id=emb.model_id, clusters=clusters,
        near_duplicates=near_duplicate_pairs(emb.keys, emb.vectors, thr),
        near_duplicate_threshold=thr, distance_threshold=dist, method=method,
        fallback_reason=emb.fallback_reason, n_encoded=emb.n_encoded, n_cached=emb.n_cached, alpha=alpha,
        embeddings=emb,
    )


def harmful_cluster_members(library: Any, stats: Mapping[str, Any], runs: Any = None, *,
                            embedder: str = "minilm", cache_dir: str | os.PathLike | None = None,
                            report: ClusterReport | None = None, **kwargs: Any) -> list[list[str]]:
    """Member ids of every harmful cluster (most harmful first), for `rewrite` recommendations.

    Pass `report` to reuse an existing `cluster_library` result instead of clustering again.
    """
    if report is None:
        report = cluster_library(library, stats, runs, embedder=embedder, cache_dir=cache_dir,
                                 **kwargs)
    return report.harmful_members()
