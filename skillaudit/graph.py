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

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp

from ._io import atomic_write_bytes, atomic_write_text
from .errors import InputError


def _membership(runs: Any) -> sp.csr_matrix:
    """Pairs x skills 0/1 matrix (int64) of retrieved skills."""
    m = runs.ranks.copy().tocsr()
    m.data = np.ones_like(m.data, dtype=np.int64)
    return m.astype(np.int64)


def skill_exposure(runs: Any) -> dict[str, dict[str, Any]]:
    """Per retrieved skill: n_retrieved, b, c, net and the equal-weight attributed share.

    A stand-in for attribution rows when only runs are at hand (same definitions as DESIGN §2).
    """
    a = _membership(runs)
    f = np.asarray(runs.flip, dtype=np.int64)
    k = np.asarray(a.sum(axis=1)).ravel()
    n = np.asarray(a.sum(axis=0)).ravel()
    b = np.asarray(a.T @ (f > 0).astype(np.int64)).ravel()
    c = np.asarray(a.T @ (f < 0).astype(np.int64)).ravel()
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(k > 0, f / np.maximum(k, 1), 0.0)
    share = np.asarray(a.T @ w).ravel()
    return {
        s: {"skill_id": s, "n_retrieved": int(n[i]), "b": int(b[i]), "c": int(c[i]),
            "net": int(b[i] - c[i]), "share": float(share[i])}
        for i, s in enumerate(runs.skills)
    }


def _get(row: Any, name: str, default: Any = None) -> Any:
    if row is None:
        return default
    if isinstance(row, Mapping):
        return row.get(name, default)
    return getattr(row, name, default)


def co_retrieval_graph(runs: Any, stats: Mapping[str, Any] | None = None,
                       library: Any = None) -> nx.Graph:
    """Skills as nodes (n_retrieved, b, c, net, share, in_library), edges between skills retrieved
    in the same pair: weight = pairs retrieving both, b / c / net = rescues, harms and net flips
    of those pairs. Library skills never retrieved are isolated nodes with n_retrieved = 0.
    """
    exposure = skill_exposure(runs)
    lib_ids = set(library.ids) if library is not None else set()
    g = nx.Graph()
    for sid in sorted(set(exposure) | lib_ids):
        e = exposure.get(sid, {"n_retrieved": 0, "b": 0, "c": 0, "net": 0, "share": 0.0})
        row = stats.get(sid) if stats else None
        share = _get(row, "share", e["share"])
        g.add_node(sid, n_retrieved=e["n_retrieved"], b=e["b"], c=e["c"], net=e["net"],
                   share=float(share if share is not None else 0.0),
                   in_library=(sid in lib_ids) if library is not None else True)
    a = _membership(runs)
    f = np.asarray(runs.flip, dtype=np.int64)
    co = sp.triu(a.T @ a, k=1).tocoo()
    bb = (a.multiply((f > 0).astype(np.int64)[:, None]).T @ a).tocsr()
    cc = (a.multiply((f < 0).astype(np.int64)[:, None]).T @ a).tocsr()
    for i, j, w in zip(co.row, co.col, co.data, strict=True):
        if w <= 0:
            continue
        b, c = int(bb[i, j]), int(cc[i, j])
        g.add_edge(runs.skills[i], runs.skills[j], weight=int(w), b=b, c=c, net=b - c)
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


def communities(g: nx.Graph, seed: int = 0, resolution: float = 1.0,
                min_size: int = 2, max_edges: int = 20_000) -> list[list[str]]:
    """Louvain communities (edge weight = co-retrieval count, seeded) of the skills that were
    co-retrieved with something, largest first; communities smaller than `min_size` are left out.
    Graphs with more than `max_edges` edges are reduced to their `backbone` first.
    """
    sub = backbone(g.subgraph([n for n in g.nodes if g.degree(n) > 0]), max_edges)
    if sub.number_of_edges() == 0:
        return []
    parts = nx.community.louvain_communities(sub, weight="weight", resolution=resolution,
                                             seed=seed)
    out = [sorted(p) for p in parts if len(p) >= min_size]
    out.sort(key=lambda p: (-len(p), p))
    return out


def communities_of(g: nx.Graph, min_size: int = 2) -> list[list[str]]:
    """The communities `skill_graph` stored on its nodes (`community` >= 0), in its order."""
    parts: dict[int, list[str]] = {}
    for n, k in g.nodes(data="community", default=-1):
        if k >= 0:
            parts.setdefault(k, []).append(n)
    return [sorted(parts[k]) for k in sorted(parts) if len(parts[k]) >= min_size]


def community_summary(g: nx.Graph, parts: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """One dict per community: id, skills, internal co-retrieval weight, summed net and share."""
    out = []
    for k, members in enumerate(parts):
        sub = g.subgraph(members)
        out.append({
            "id": k, "skills": list(members),
            "weight": int(sum(d.get("weight", 0) for _, _, d in sub.edges(data=True))),
            "net": int(sum(g.nodes[m].get("net", 0) for m in members)),
            "share": round(float(sum(g.nodes[m].get("share", 0.0) for m in members)), 6),
        })
    return out


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


def interference(runs: Any, min_joint: int = 5, min_alone: int = 5,
                 max_p: float | None = 0.05) -> list[Interference]:
    """Co-retrieved skill pairs whose joint net rate (b - c) / n is below the rate of each skill
    retrieved without the other, with at least `min_joint` joint pairs and `min_alone` pairs on
    each side. Evidence: a one-sided Mann-Whitney test that the joint pairs' flips are lower than
    those of the pairs retrieving either skill without the other; only p <= `max_p` is kept
    (None keeps every candidate). Sorted by p, then `excess` (most negative first).
    """
    from scipy.stats import mannwhitneyu

    a = _membership(runs).tocsc()
    f = np.asarray(runs.flip, dtype=np.int64)
    co = sp.triu(a.T @ a, k=1).tocoo()
    out = []
    cols: dict[int, np.ndarray] = {}

    def col(j: int) -> np.ndarray:
        if j not in cols:
            cols[j] = a[:, j].toarray().ravel().astype(bool)
        return cols[j]

    for i, j, w in zip(co.row, co.col, co.data, strict=True):
        if w < min_joint:
            continue
        ai, aj = col(int(i)), col(int(j))
        joint, i_only, j_only = ai & aj, ai & ~aj, aj & ~ai
        ni, nj = int(i_only.sum()), int(j_only.sum())
        if ni < min_alone or nj < min_alone:
            continue
        nt = int(f[joint].sum())
        r_joint = nt / int(w)
        neti, netj = int(f[i_only].sum()), int(f[j_only].sum())
        ri, rj = neti / ni, netj / nj
        if r_joint < ri and r_joint < rj:
            alone = f[i_only | j_only]
            if np.ptp(np.concatenate([f[joint], alone])) == 0:
                p = 1.0
            else:
                p = float(mannwhitneyu(f[joint], alone, alternative="less").pvalue)
            if max_p is not None and p > max_p:
                continue
            out.append(Interference(
                skills=(runs.skills[i], runs.skills[j]), n_joint=int(w), net_joint=nt,
                rate_joint=round(r_joint, 6), n_a_only=ni, net_a_only=neti,
                rate_a_only=round(ri, 6), n_b_only=nj, net_b_only=netj, rate_b_only=round(rj, 6),
                excess=round(r_joint - max(ri, rj), 6), p_value=p))
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
    g = near_duplicate_graph(pairs)
    groups = [sorted(c) for c in nx.connected_components(g) if len(c) >= 2]
    groups.sort(key=lambda c: (-len(c), c))
    return groups


def skill_graph(runs: Any, stats: Mapping[str, Any] | None = None, library: Any = None,
                near_duplicates: Iterable[tuple[str, str, float]] = (),
                cluster_of: Mapping[str, int] | None = None,
                harmful_clusters: Iterable[int] = (), seed: int = 0,
                interfering: Iterable[Interference] = ()) -> nx.Graph:
    """The co-retrieval graph annotated for export: node `community`, `cluster`,
    `cluster_harmful`; near-duplicate edges (`near_duplicate`, `similarity`; weight 0 when never
    co-retrieved) and `interference` flags on edges."""
    g = co_retrieval_graph(runs, stats, library)
    for e in g.edges:
        g.edges[e]["near_duplicate"] = False
        g.edges[e]["interference"] = False
    for k, members in enumerate(communities(g, seed=seed, min_size=1)):
        for m in members:
            g.nodes[m]["community"] = k
    harmful = set(harmful_clusters)
    for n in g.nodes:
        g.nodes[n].setdefault("community", -1)
        cl = cluster_of.get(n, -1) if cluster_of else -1
        g.nodes[n]["cluster"] = cl
        g.nodes[n]["cluster_harmful"] = cl in harmful
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


def graph_to_json(g: nx.Graph) -> dict[str, Any]:
    """Node-link JSON (`nodes`, `edges`) of a graph."""
    return nx.node_link_data(g, edges="edges")


def write_graph(g: nx.Graph, path: str | os.PathLike) -> str:
    """Write `g` atomically as GraphML (`.graphml`) or node-link JSON (`.json`); returns the format."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".graphml":
        atomic_write_text(p, "\n".join(nx.generate_graphml(g)) + "\n")
        return "graphml"
    if suffix == ".json":
        import orjson

        atomic_write_bytes(p, orjson.dumps(graph_to_json(g), option=orjson.OPT_INDENT_2
                                           | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return "json"
    raise InputError(f"{path}: unknown graph format {suffix or '(none)'!r}; use .graphml or .json")
