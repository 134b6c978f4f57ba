"""Skill graphs with networkx: co-retrieval, its communities, interference, near-duplicates.

- co-retrieval graph: one node per skill (n_retrieved, b, c, net, share), one edge per pair of
  skills retrieved together, weighted by the number of pairs retrieving both, with the rescues,
  harms and net flips of those pairs;
- communities: `louvain_communities` on that graph (seeded, so reproducible);
- interference: skill pairs whose joint retrieval does worse (lower net rate) than either skill
  retrieved without the other, with the counts behind it (descriptive, not a test);
- near-duplicate graph: similarity edges; its connected components are `merge` candidates.

Everything is exported as GraphML or node-link JSON (atomic writes), for Gephi, Cytoscape, etc.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp


def _membership(runs: Any) -> sp.csr_matrix:
    """Pairs x skills 0/1 matrix (int64) of retrieved skills."""
    m = runs.ranks.copy().tocsr()
    m.data = np.ones_like(m.data, dtype=np.int64)
    return m.astype(np.int64)


def _exposure_arrays(a: sp.csr_matrix, f: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per skill column of `a`: n_retrieved, b, c and the equal-weight share."""
    k = np.asarray(a.sum(axis=1)).ravel()
    n = np.asarray(a.sum(axis=0)).ravel()
    b = np.asarray(a.T @ (f > 0).astype(np.int64)).ravel()
    c = np.asarray(a.T @ (f < 0).astype(np.int64)).ravel()
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(k > 0, f / np.maximum(k, 1), 0.0)
    share = np.asarray(a.T @ w).ravel()
    return n, b, c, share


def _exposure_rows(skills: Sequence[str], n: np.ndarray, b: np.ndarray, c: np.ndarray,
                   share: np.ndarray) -> dict[str, dict[str, Any]]:
    return {
        s: {"skill_id": s, "n_retrieved": int(n[i]), "b": int(b[i]), "c": int(c[i]),
            "net": int(b[i] - c[i]), "share": float(share[i])}
        for i, s in enumerate(skills)
    }


def skill_exposure(runs: Any) -> dict[str, dict[str, Any]]:
    """Per retrieved skill: n_retrieved, b, c, net and the equal-weight attributed share.

    A stand-in for attribution rows when only runs are at hand (same definitions as DESIGN §2).
    """
    return _exposure_rows(runs.skills, *_exposure_arrays(_membership(runs),
                                                         np.asarray(runs.flip, dtype=np.int64)))


@dataclass(frozen=True)
class CoRetrieval:
    """The co-retrieval graph as arrays, from sparse products (no graph object, no per-pair loop).

    Per skill (index into `skills`): `n` retrievals, `b` rescues, `c` harms, equal-weight `share`.
    Per co-retrieved skill pair `i[e] < j[e]`, in the order `co_retrieval_graph` adds its edges:
    `w` pairs retrieving both, and those pairs' rescues `jb` and harms `jc`.
    """

    skills: tuple[str, ...]
    n: np.ndarray
    b: np.ndarray
    c: np.ndarray
    share: np.ndarray
    i: np.ndarray
    j: np.ndarray
    w: np.ndarray
    jb: np.ndarray
    jc: np.ndarray
    # backbones already selected, by max_edges (communities and the export ask for the same one)
    _backbones: dict[int, np.ndarray | None] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_edges(self) -> int:
        return int(self.w.size)

    def exposure(self) -> dict[str, dict[str, Any]]:
        """`skill_exposure(runs)` of the runs these counts came from."""
        return _exposure_rows(self.skills, self.n, self.b, self.c, self.share)

    def name_rank(self) -> np.ndarray:
        """Each skill's position in name order (the order of the graph's nodes)."""
        order = sorted(range(len(self.skills)), key=self.skills.__getitem__)
        rank = np.empty(len(self.skills), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank

    def degree(self) -> np.ndarray:
        """Co-retrieval partners per skill."""
        s = len(self.skills)
        return np.bincount(self.i, minlength=s) + np.bincount(self.j, minlength=s)


def co_retrieval_counts(runs: Any) -> CoRetrieval:
    """Every count of the co-retrieval graph (see `CoRetrieval`) in a few sparse products."""
    a = _membership(runs)
    f = np.asarray(runs.flip, dtype=np.int64)
    n, b, c, share = _exposure_arrays(a, f)
    co = sp.triu(a.T @ a, k=1).tocoo()
    keep = co.data > 0
    i, j, w = co.row[keep].astype(np.int64), co.col[keep].astype(np.int64), co.data[keep].astype(np.int64)
    # joint rescues / harms: the same product over the rescued / harmed pairs only (few rows)
    pos, neg = a[f > 0], a[f < 0]
    jb = np.zeros_like(w)
    jc = np.zeros_like(w)
    if w.size:
        jb = np.asarray((pos.T @ pos).tocsr()[i, j], dtype=np.int64).ravel()
        jc = np.asarray((neg.T @ neg).tocsr()[i, j], dtype=np.int64).ravel()
    return CoRetrieval(skills=tuple(runs.skills), n=n, b=b, c=c, share=share, i=i, j=j, w=w,
                       jb=jb, jc=jc)


def _get(row: Any, name: str, default: Any = None) -> Any:
    if row is None:
        return default
    if isinstance(row, Mapping):
        return row.get(name, default)
    return getattr(row, name, default)


def _node_rows(counts: CoRetrieval, stats: Mapping[str, Any] | None,
               library: Any) -> list[tuple[str, dict[str, Any]]]:
    """(skill, attributes) of every node, in node order (sorted ids)."""
    exposure = counts.exposure()
    lib_ids = set(library.ids) if library is not None else set()
    out = []
    for sid in sorted(set(exposure) | lib_ids):
        e = exposure.get(sid, {"n_retrieved": 0, "b": 0, "c": 0, "net": 0, "share": 0.0})
        row = stats.get(sid) if stats else None
        share = _get(row, "share", e["share"])
        out.append((sid, {"n_retrieved": e["n_retrieved"], "b": e["b"], "c": e["c"], "net": e["net"],
                          "share": float(share if share is not None else 0.0),
                          "in_library": (sid in lib_ids) if library is not None else True}))
    return out


def _edge_rows(counts: CoRetrieval, idx: np.ndarray | None = None,
               **extra: Any) -> Iterable[tuple[str, str, dict[str, Any]]]:
    """(u, v, data) of the co-retrieval edges `idx` (default: all, in graph order)."""
    sk = counts.skills
    sel = slice(None) if idx is None else idx
    for i, j, w, b, c in zip(counts.i[sel].tolist(), counts.j[sel].tolist(), counts.w[sel].tolist(),
                             counts.jb[sel].tolist(), counts.jc[sel].tolist(), strict=True):
        yield sk[i], sk[j], {"weight": w, "b": b, "c": c, "net": b - c, **extra}


def co_retrieval_graph(runs: Any, stats: Mapping[str, Any] | None = None,
                       library: Any = None, counts: CoRetrieval | None = None) -> nx.Graph:
    """Skills as nodes (n_retrieved, b, c, net, share, in_library), edges between skills retrieved
    in the same pair: weight = pairs retrieving both, b / c / net = rescues, harms and net flips
    of those pairs. Library skills never retrieved are isolated nodes with n_retrieved = 0.
    `counts` = `co_retrieval_counts(runs)` when already computed.
    """
    counts = counts if counts is not None else co_retrieval_counts(runs)
    g = nx.Graph()
    g.add_nodes_from(_node_rows(counts, stats, library))
    g.add_edges_from(_edge_rows(counts))
    return g


def backbone(g: nx.Graph, max_edges: int) -> nx.Graph:
    """`g` itself when it has at most `max_edges` edges, else the union of every node's strongest
    edges (k per node, k = max(5, max_edges // nodes)): the structure Louvain needs, at a size that
    pure-Python community detection can handle (a large library co-retrieved at random is nearly
    a complete graph)."""
    if g.number_of_edges() <= max_edges:
        return g
    k = max(5, max_edges // max(g.number_of_nodes(), 1))
    keep = nx.Graph()
    keep.add_nodes_from(g.nodes(data=True))
    for node in g.nodes:
        strongest = sorted(g[node].items(), key=lambda kv: (-kv[1].get("weight", 1), str(kv[0])))[:k]
        for other, data in strongest:
            keep.add_edge(node, other, **data)
    return keep


def backbone_edges(counts: CoRetrieval, max_edges: int) -> np.ndarray | None:
    """`backbone` on the co-retrieval graph of `counts`, as edge indices in the order `backbone`
    adds them (None when the graph has at most `max_edges` edges and is used whole).

    Same selection: for every co-retrieved skill in name order, its k strongest edges by
    (-weight, partner name), k = max(5, max_edges // co-retrieved skills).
    """
    if counts.n_edges <= max_edges:
        return None
    if max_edges not in counts._backbones:
        counts._backbones[max_edges] = _backbone_edges(counts, max_edges)
    return counts._backbones[max_edges]


def _backbone_edges(counts: CoRetrieval, max_edges: int) -> np.ndarray:
    n_nodes = int((counts.degree() > 0).sum())
    k = max(5, max_edges // max(n_nodes, 1))
    rank = counts.name_rank()
    e = np.arange(counts.n_edges)
    src = np.concatenate([counts.i, counts.j])
    dst = np.concatenate([counts.j, counts.i])
    eid = np.concatenate([e, e])
    order = np.lexsort((rank[dst], -counts.w[eid], rank[src]))  # by node, then strongest first
    s_sorted = rank[src][order]
    starts = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]])
    within = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    return eid[order[within < k]]


def _louvain_graph(counts: CoRetrieval, max_edges: int) -> nx.Graph:
    """Exactly the graph `communities(co_retrieval_graph(runs), max_edges=...)` runs Louvain on:
    the same nodes and edges, added in the same order (Louvain's result depends on both; the
    orientation of an edge does not, as `add_edge` links both ends at once)."""
    rank = counts.name_rank()
    active = np.flatnonzero(counts.degree() > 0)
    g = nx.Graph()
    g.add_nodes_from(counts.skills[s] for s in active[np.argsort(rank[active])])
    g.add_edges_from(_edge_rows(counts, backbone_edges(counts, max_edges)))
    return g


def _louvain(g: nx.Graph, seed: int, resolution: float, min_size: int) -> list[list[str]]:
    if g.number_of_edges() == 0:
        return []
    parts = nx.community.louvain_communities(g, weight="weight", resolution=resolution, seed=seed)
    out = [sorted(p) for p in parts if len(p) >= min_size]
    out.sort(key=lambda p: (-len(p), p))
    return out


def communities(g: nx.Graph, seed: int = 0, resolution: float = 1.0,
                min_size: int = 2, max_edges: int = 20_000) -> list[list[str]]:
    """Louvain communities (edge weight = co-retrieval count, seeded) of the skills that were
    co-retrieved with something, largest first; communities smaller than `min_size` are left out.
    Graphs with more than `max_edges` edges are reduced to their `backbone` first.
    """
    sub = backbone(g.subgraph([n for n in g.nodes if g.degree(n) > 0]), max_edges)
    return _louvain(sub, seed, resolution, min_size)


def count_communities(counts: CoRetrieval, seed: int = 0, resolution: float = 1.0,
                      min_size: int = 2, max_edges: int = 20_000) -> list[list[str]]:
    """`communities(co_retrieval_graph(runs), ...)` from the counts alone: identical partition,
    without building the whole co-retrieval graph (only its backbone)."""
    return _louvain(_louvain_graph(counts, max_edges), seed, resolution, min_size)


def communities_of(g: nx.Graph, min_size: int = 2) -> list[list[str]]:
    """The communities `skill_graph` stored on its nodes (`community` >= 0), in its order."""
    parts: dict[int, list[str]] = {}
    for n, k in g.nodes(data="community", default=-1):
        if k >= 0:
            parts.setdefault(k, []).append(n)
    return [sorted(parts[k]) for k in sorted(parts) if len(parts[k]) >= min_size]


def community_summary(g: nx.Graph, parts: Sequence[Sequence[str]],
                      counts: CoRetrieval | None = None) -> list[dict[str, Any]]:
    """One dict per community: id, skills, internal co-retrieval weight, summed net and share.

    With `counts` the internal weight is summed over every co-retrieval edge (so `g` may hold
    only a backbone); node `net` and `share` always come from `g`.
    """
    internal: list[int] | None = None
    if counts is not None:
        index = {s: x for x, s in enumerate(counts.skills)}
        label = np.full(len(counts.skills), -1, dtype=np.int64)
        for k, members in enumerate(parts):
            label[[index[m] for m in members if m in index]] = k
        li, lj = label[counts.i], label[counts.j]
        inside = (li == lj) & (li >= 0)
        internal = np.bincount(li[inside], weights=counts.w[inside].astype(np.float64),
                               minlength=len(parts)).astype(np.int64).tolist()
    out = []
    for k, members in enumerate(parts):
        if internal is None:
            sub = g.subgraph(members)
            weight = int(sum(d.get("weight", 0) for _, _, d in sub.edges(data=True)))
        else:
            weight = int(internal[k])
        out.append({
            "id": k, "skills": list(members),
            "weight": weight,
            "net": int(sum(g.nodes[m].get("net", 0) for m in members)),
            "share": round(float(sum(g.nodes[m].get("share", 0.0) for m in members)), 6),
        })
    return out


def top_co_retrieved(counts: CoRetrieval, k: int = 20) -> list[dict[str, Any]]:
    """The `k` most co-retrieved skill pairs (weight desc, then names), with their flips."""
    if counts.n_edges == 0 or k <= 0:
        return []
    cut = np.partition(counts.w, max(counts.n_edges - k, 0))[max(counts.n_edges - k, 0)]
    rows = []
    for e in np.flatnonzero(counts.w >= cut).tolist():  # every edge that can make the top k
        a, b = sorted((counts.skills[counts.i[e]], counts.skills[counts.j[e]]))
        rows.append((-int(counts.w[e]), a, b, e))
    rows.sort()
    return [{"skills": [a, b], "weight": -negw, "b": int(counts.jb[e]), "c": int(counts.jc[e]),
             "net": int(counts.jb[e] - counts.jc[e])} for negw, a, b, e in rows[:k]]


@dataclass
class Interference:
    """Two skills doing worse together than either does without the other (net rate per pair)."""

    skills: tuple[str, str]
    n_joint: int
    net_joint: int
    rate_joint: float
    n_a_only: int  # pairs retrieving a but not b
    net_a_only: int
    rate_a_only: float
    n_b_only: int
    net_b_only: int
    rate_b_only: float
    excess: float  # rate_joint - max(rate_a_only, rate_b_only) (< 0)
    p_value: float  # one-sided Mann-Whitney: joint flips lower than the flips of either alone

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["skills"] = list(self.skills)
        return d


#: below this many flips in a test, every tie term t**3 - t of the count-based Mann-Whitney and
#: their sum are exact floats (n**3 < 2**53), so it equals scipy's bit for bit; larger tests, or
#: tests without ties (scipy's exact method), go to scipy itself
_COUNT_MWU_MAX_N = 208_063


def mwu_less_from_counts(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One-sided ("less") Mann-Whitney p-values of many tests whose samples take three values.

    `x` and `y` are (m, 3) counts of the values -1, 0, +1 in the first and second sample of each
    test. The result is what `scipy.stats.mannwhitneyu(x_values, y_values, alternative="less")`
    returns (normal approximation with tie correction and continuity correction): ranks of tied
    values are averages, so R1 is a weighted sum of three mid-ranks. Tests where scipy would use
    its exact method (no ties) or where the tie terms are not exact floats are computed by scipy.
    """
    from scipy import special

    x = np.asarray(x, dtype=np.int64).reshape(-1, 3)
    y = np.asarray(y, dtype=np.int64).reshape(-1, 3)
    n1, n2 = x.sum(axis=1), y.sum(axis=1)
    n = n1 + n2
    t = x + y
    # mid-rank of each value: all smaller values come first, then the average of its own run
    before = np.cumsum(t, axis=1) - t
    mid = before + (t + 1) / 2
    r1 = (x * mid).sum(axis=1)
    u1 = r1 - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1
    tf = t.astype(np.float64)
    tie = tf**3 - tf
    tie_term = tie[:, 0] + tie[:, 1] + tie[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        z = ((u2 - n1 * n2 / 2) - 0.5) / s
    p = np.clip(special.ndtr(-z), 0.0, 1.0)
    exact = np.flatnonzero((t.max(axis=1) <= 1) | (n >= _COUNT_MWU_MAX_N))
    if exact.size:  # scipy.stats costs ~1 s to import: only when some test needs it
        from scipy.stats import mannwhitneyu
    values = np.array([-1.0, 0.0, 1.0])
    for r in exact.tolist():
        p[r] = mannwhitneyu(np.repeat(values, x[r]), np.repeat(values, y[r]), alternative="less").pvalue
    return p


def interference(runs: Any, min_joint: int = 5, min_alone: int = 5,
                 max_p: float | None = 0.05, counts: CoRetrieval | None = None) -> list[Interference]:
    """Co-retrieved skill pairs whose joint net rate (b - c) / n is below the rate of each skill
    retrieved without the other, with at least `min_joint` joint pairs and `min_alone` pairs on
    each side. Evidence: a one-sided Mann-Whitney test that the joint pairs' flips are lower than
    those of the pairs retrieving either skill without the other; only p <= `max_p` is kept
    (None keeps every candidate). Sorted by p, then `excess` (most negative first).

    Every candidate pair is handled at once from co-retrieval counts: flips take only the values
    -1, 0, +1, so both samples of a test are three counts and `mwu_less_from_counts` gives the
    same p-value as scipy on the pairs themselves. `counts` = `co_retrieval_counts(runs)` when
    already computed.
    """
    k = counts if counts is not None else co_retrieval_counts(runs)
    i, j, w, jb, jc = k.i, k.j, k.w, k.jb, k.jc
    ni, nj = k.n[i] - w, k.n[j] - w  # pairs retrieving one skill of the two but not the other
    cand = np.flatnonzero((w >= min_joint) & (ni >= min_alone) & (nj >= min_alone))
    i, j, w, jb, jc, ni, nj = (v[cand] for v in (i, j, w, jb, jc, ni, nj))
    bi, ci = k.b[i] - jb, k.c[i] - jc  # rescues / harms of the i-only pairs
    bj, cj = k.b[j] - jb, k.c[j] - jc
    nt, neti, netj = jb - jc, bi - ci, bj - cj
    r_joint, ri, rj = nt / w, neti / ni, netj / nj
    worse = np.flatnonzero((r_joint < ri) & (r_joint < rj))
    if worse.size == 0:
        return []
    sel = worse
    x = np.column_stack([jc[sel], w[sel] - jb[sel] - jc[sel], jb[sel]])
    alone_n = ni[sel] + nj[sel]
    y_neg, y_pos = ci[sel] + cj[sel], bi[sel] + bj[sel]
    y = np.column_stack([y_neg, alone_n - y_neg - y_pos, y_pos])
    constant = ((x + y) > 0).sum(axis=1) == 1  # every flip the same: nothing to test
    p = np.ones(sel.size)
    if (~constant).any():
        p[~constant] = mwu_less_from_counts(x[~constant], y[~constant])
    out = []
    for r, e in enumerate(sel.tolist()):
        pv = float(p[r])
        if max_p is not None and pv > max_p:
            continue
        rj_, ri_, rjj = float(r_joint[e]), float(ri[e]), float(rj[e])
        out.append(Interference(
            skills=(k.skills[i[e]], k.skills[j[e]]), n_joint=int(w[e]), net_joint=int(nt[e]),
            rate_joint=round(rj_, 6), n_a_only=int(ni[e]), net_a_only=int(neti[e]),
            rate_a_only=round(ri_, 6), n_b_only=int(nj[e]), net_b_only=int(netj[e]),
            rate_b_only=round(rjj, 6), excess=round(rj_ - max(ri_, rjj), 6), p_value=pv))
    out.sort(key=lambda x: (x.p_value, x.excess, x.skills))
    return out


def near_duplicate_graph(pairs: Iterable[tuple[str, str, float]],
                         nodes: Iterable[str] = ()) -> nx.Graph:
    """Skills joined by near-duplicate pairs (edge attribute `similarity`)."""
    g = nx.Graph()
    g.add_nodes_from(nodes)
    for a, b, s in pairs:
        g.add_edge(a, b, similarity=float(s))
    return g


def merge_groups(pairs: Iterable[tuple[str, str, float]]) -> list[list[str]]:
    """Connected components of the near-duplicate graph (size >= 2), largest first: each is one
    `merge` candidate (chains a~b~c make one group)."""
    from scipy.sparse.csgraph import connected_components

    index: dict[str, int] = {}
    ends = [(index.setdefault(a, len(index)), index.setdefault(b, len(index))) for a, b, _ in pairs]
    if not ends:
        return []
    u, v = np.array(ends, dtype=np.int64).T
    adj = sp.coo_matrix((np.ones(u.size), (u, v)), shape=(len(index), len(index)))
    _, label = connected_components(adj, directed=False)
    names = list(index)
    members: dict[int, list[str]] = {}
    for x, lab in enumerate(label.tolist()):
        members.setdefault(lab, []).append(names[x])
    groups = [sorted(c) for c in members.values() if len(c) >= 2]
    groups.sort(key=lambda c: (-len(c), c))
    return groups


def skill_graph(runs: Any, stats: Mapping[str, Any] | None = None, library: Any = None,
                near_duplicates: Iterable[tuple[str, str, float]] = (),
                cluster_of: Mapping[str, int] | None = None,
                harmful_clusters: Iterable[int] = (), seed: int = 0,
                interfering: Iterable[Interference] = (), *, max_edges: int | None = None,
                counts: CoRetrieval | None = None) -> nx.Graph:
    """The co-retrieval graph annotated for export: node `community`, `cluster`,
    `cluster_harmful`; near-duplicate edges (`near_duplicate`, `similarity`; weight 0 when never
    co-retrieved) and `interference` flags on edges.

    With `max_edges`, a co-retrieval graph of more edges keeps only its `backbone` (the graph the
    communities are found on) plus the `interfering` pairs; the graph attributes
    `co_retrieval_edges` (all of them) and `backbone_per_skill` (k) say so. Communities are
    always those of the whole graph. `counts` = `co_retrieval_counts(runs)` when already computed.
    """
    counts = counts if counts is not None else co_retrieval_counts(runs)
    community = {m: k for k, members in enumerate(count_communities(counts, seed=seed, min_size=1))
                 for m in members}
    harmful = set(harmful_clusters)
    g = nx.Graph()
    for sid, attrs in _node_rows(counts, stats, library):
        cl = cluster_of.get(sid, -1) if cluster_of else -1
        g.add_node(sid, **attrs, community=community.get(sid, -1), cluster=cl,
                   cluster_harmful=cl in harmful)
    interfering = list(interfering)
    idx = None if max_edges is None else backbone_edges(counts, max_edges)
    if idx is not None:
        # the interfering pairs are co-retrieved edges too: keep them for their flags
        index, size = {s: x for x, s in enumerate(counts.skills)}, len(counts.skills)
        want = [min(index[a], index[b]) * size + max(index[a], index[b])
                for a, b in (x.skills for x in interfering) if a in index and b in index]
        if want:
            hit = np.flatnonzero(np.isin(counts.i * size + counts.j, np.array(want, dtype=np.int64)))
            idx = np.concatenate([idx, hit])
        g.graph["co_retrieval_edges"] = counts.n_edges
        g.graph["backbone_per_skill"] = max(5, max_edges // max(int((counts.degree() > 0).sum()), 1))
    g.add_edges_from(_edge_rows(counts, idx, near_duplicate=False, interference=False))
    for a, b, s in near_duplicates:
        if not g.has_edge(a, b):
            for n in (a, b):
                if n not in g:
                    g.add_node(n, n_retrieved=0, b=0, c=0, net=0, share=0.0, in_library=True,
                               community=-1, cluster=cluster_of.get(n, -1) if cluster_of else -1,
                               cluster_harmful=False)
            g.add_edge(a, b, weight=0, b=0, c=0, net=0, interference=False)
        g.edges[a, b]["near_duplicate"] = True
        g.edges[a, b]["similarity"] = float(s)
    for x in interfering:
        if g.has_edge(*x.skills):
            g.edges[x.skills]["interference"] = True
            g.edges[x.skills]["excess"] = float(x.excess)
    return g
