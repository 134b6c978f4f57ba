"""Skill graphs on hand-made run logs: co-retrieval weights, communities, interference, export."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from _factories import pair

from skillaudit.analysis.graph import (
    co_retrieval_graph,
    communities,
    interference,
    merge_groups,
    near_duplicate_graph,
    skill_exposure,
    skill_graph,
)
from skillaudit.errors import InputError
from skillaudit.library import Library, Skill
from skillaudit.report.graphml import write_graph
from skillaudit.runs import read_text_records


def load(recs: list[dict]):
    return read_text_records("\n".join(json.dumps(r) for r in recs))


RESCUE, HARM, SAME = (True, False), (False, True), (True, True)


def pairs_of(retrieved: list[str], outcomes: list[tuple[bool, bool]], tag: str) -> list[dict]:
    recs = []
    for i, (yp, yn) in enumerate(outcomes):
        recs += pair(f"{tag}{i}", yp, yn, retrieved=retrieved)
    return recs


def test_edges_carry_co_retrieval_counts_and_net_flips():
    """Edge weight = pairs retrieving both skills; b, c and net are those pairs' rescues and harms."""
    runs = load(pairs_of(["a", "b"], [HARM, RESCUE], "ab") + pairs_of(["a", "b", "c"], [HARM], "abc")
                + pairs_of(["a"], [SAME], "a") + pair("none", True, True))
    g = co_retrieval_graph(runs)
    assert dict(g.edges["a", "b"]) == {"weight": 3, "b": 1, "c": 2, "net": -1}
    assert g.edges["a", "c"]["weight"] == 1 and g.edges["b", "c"]["net"] == -1
    assert g.nodes["a"]["n_retrieved"] == 4 and g.nodes["a"]["net"] == -1
    assert g.nodes["c"]["share"] == pytest.approx(-1 / 3)


def test_unretrieved_library_skills_are_isolated_nodes():
    """Library skills nobody retrieved appear with n_retrieved 0; retrieved unknown ids are flagged."""
    lib = Library(skills=(Skill("a", "a", "d", "b"), Skill("z", "z", "d", "b")))
    runs = load(pairs_of(["a", "ghost"], [SAME], "t"))
    g = co_retrieval_graph(runs, library=lib)
    assert g.nodes["z"]["n_retrieved"] == 0 and g.degree("z") == 0
    assert g.nodes["ghost"]["in_library"] is False and g.nodes["a"]["in_library"] is True


def test_exposure_shares_add_up_to_the_retrieval_triggered_net():
    """Equal shares over all skills sum to cond_b - cond_c."""
    runs = load(pairs_of(["a", "b"], [HARM, HARM, RESCUE], "x") + pairs_of(["c"], [HARM], "y"))
    rows = skill_exposure(runs)
    assert sum(r["share"] for r in rows.values()) == pytest.approx(-2.0)
    assert rows["a"]["net"] == -1 and rows["a"]["share"] == pytest.approx(-0.5)
    assert rows["c"]["c"] == 1


def test_louvain_communities_split_separate_groups_reproducibly():
    """Two groups never retrieved together form two communities, identically for the same seed."""
    recs = (pairs_of(["a", "b"], [SAME] * 4, "p") + pairs_of(["b", "c"], [SAME] * 3, "q")
            + pairs_of(["x", "y"], [SAME] * 5, "r") + pairs_of(["solo"], [SAME], "s"))
    g = co_retrieval_graph(load(recs))
    parts = communities(g, seed=0)
    assert parts == [["a", "b", "c"], ["x", "y"]]
    assert communities(g, seed=0) == parts


def test_interference_finds_skills_that_do_worse_together():
    """Two skills that each help alone but hurt together are reported with their counts."""
    recs = (pairs_of(["a"], [RESCUE] * 4 + [SAME] * 4, "a") + pairs_of(["b"], [RESCUE] * 3 + [SAME] * 5, "b")
            + pairs_of(["a", "b"], [HARM] * 6 + [SAME] * 2, "ab"))
    found = interference(load(recs))
    assert len(found) == 1
    x = found[0]
    assert x.skills == ("a", "b") and (x.n_joint, x.net_joint) == (8, -6)
    assert (x.n_a_only, x.net_a_only, x.n_b_only, x.net_b_only) == (8, 4, 8, 3)
    assert x.excess == pytest.approx(-6 / 8 - 4 / 8) and x.p_value < 0.01


def test_no_interference_when_joint_retrieval_is_no_worse():
    """Skills whose joint pairs do as well as either alone are not reported, even without a p cut."""
    recs = (pairs_of(["a"], [RESCUE] * 2 + [SAME] * 6, "a") + pairs_of(["b"], [SAME] * 8, "b")
            + pairs_of(["a", "b"], [RESCUE] * 2 + [SAME] * 6, "ab"))
    assert interference(load(recs), max_p=None) == []


def test_weak_interference_needs_evidence():
    """A slightly worse joint rate on few pairs is a candidate only when no p cut is asked for."""
    recs = (pairs_of(["a"], [SAME] * 6, "a") + pairs_of(["b"], [SAME] * 6, "b")
            + pairs_of(["a", "b"], [HARM] + [SAME] * 5, "ab"))
    runs = load(recs)
    assert interference(runs) == []
    assert [x.skills for x in interference(runs, max_p=None)] == [("a", "b")]


def test_near_duplicate_components_become_merge_groups():
    """Chains of near-duplicates make one merge group; groups come largest first."""
    pairs = [("a", "b", 0.9), ("b", "c", 0.85), ("x", "y", 0.95)]
    assert merge_groups(pairs) == [["a", "b", "c"], ["x", "y"]]
    g = near_duplicate_graph(pairs, nodes=["lonely"])
    assert g.edges["x", "y"]["similarity"] == 0.95 and "lonely" in g


def _annotated_graph():
    recs = (pairs_of(["a", "b"], [HARM, RESCUE, HARM], "ab") + pairs_of(["c"], [SAME], "c"))
    return skill_graph(load(recs), near_duplicates=[("a", "c", 0.91)], cluster_of={"a": 0, "b": 0, "c": 1},
                       harmful_clusters=[0])


def test_graphml_export_round_trips_through_networkx(tmp_path):
    """The GraphML file reads back with networkx with the same nodes, edges and attributes."""
    g = _annotated_graph()
    out = tmp_path / "skills.graphml"
    assert write_graph(g, out) == "graphml"
    back = nx.read_graphml(out)
    assert set(back.nodes) == {"a", "b", "c"}
    assert back.edges["a", "b"]["weight"] == 3 and back.edges["a", "b"]["net"] == -1
    assert back.edges["a", "c"]["near_duplicate"] is True and back.edges["a", "c"]["similarity"] == 0.91
    assert back.edges["a", "c"]["weight"] == 0
    assert back.nodes["a"]["cluster_harmful"] is True and back.nodes["c"]["cluster_harmful"] is False
    assert back.nodes["b"]["n_retrieved"] == 3


def test_json_export_round_trips_as_node_link_data(tmp_path):
    """The JSON export is networkx node-link data with `nodes` and `edges`."""
    g = _annotated_graph()
    out = tmp_path / "skills.json"
    assert write_graph(g, out) == "json"
    back = nx.node_link_graph(json.loads(out.read_text()), edges="edges")
    assert nx.utils.graphs_equal(back, g)


def test_unknown_export_format_is_an_input_error(tmp_path):
    """Only .graphml and .json are written; anything else is refused before writing."""
    with pytest.raises(InputError, match=r"\.graphml or \.json"):
        write_graph(nx.Graph(), tmp_path / "g.gexf")
    assert not list(tmp_path.iterdir())


def test_backbone_keeps_planted_communities_of_a_dense_graph():
    """A dense co-retrieval graph reduced to its backbone still splits into its planted communities."""
    import networkx as nx

    from skillaudit.analysis.graph import backbone

    g = nx.Graph()
    left, right = [f"l{i}" for i in range(30)], [f"r{i}" for i in range(30)]
    for group in (left, right):
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                g.add_edge(a, b, weight=20)
    for a in left:
        for b in right:
            g.add_edge(a, b, weight=1)
    assert g.number_of_edges() == 2 * 435 + 900
    small = backbone(g, max_edges=300)
    assert small.number_of_edges() < g.number_of_edges()
    assert all(small[a][b]["weight"] == 20 for a, b in small.edges)
    parts = communities(g, seed=0, max_edges=300)
    assert sorted(map(sorted, parts)) == sorted([sorted(left), sorted(right)])
    assert backbone(g, max_edges=10_000) is g


def test_communities_stored_by_skill_graph_match_a_fresh_louvain_run():
    """communities_of(skill_graph(...)) gives the partition communities() computes on the co-retrieval graph."""
    from skillaudit.analysis.graph import communities_of

    recs = []
    for i in range(40):
        group = ["a", "b", "c"] if i % 2 else ["x", "y", "z"]
        recs += pair(f"t{i}", i % 3 == 0, i % 4 == 0, retrieved=group[: 2 + i % 2])
    runs = read_text_records("\n".join(json.dumps(r) for r in recs))
    g = skill_graph(runs, near_duplicates=[("a", "x", 0.9)], seed=0)
    assert communities_of(g) == communities(co_retrieval_graph(runs), seed=0)
    assert sorted(communities_of(g)) == [["a", "b", "c"], ["x", "y"]]  # z is never retrieved


# ---------------------------------------------------------------- at scale: counts instead of loops
def _random_runs(n_tasks: int = 1500, n_skills: int = 24, seed: int = 0):
    """Pairs retrieving 0-5 of `n_skills` skills; s0 + s1 together mostly harm (planted interference)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    popularity = 1 / (np.arange(n_skills) + 3.0)
    recs = []
    for t in range(n_tasks):
        k = int(rng.integers(0, 6))
        got = sorted({f"s{int(x)}" for x in rng.choice(n_skills, size=k, p=popularity / popularity.sum())})
        if {"s0", "s1"} <= set(got) and rng.random() < 0.5:
            yp, yn = False, True
        else:
            yp, yn = bool(rng.random() < 0.6), bool(rng.random() < 0.55)
        recs += pair(f"t{t}", yp, yn, retrieved=got or None)
    return load(recs)


def _reference_interference(runs, min_joint=5, min_alone=5, max_p=None):
    """The definition, one skill pair at a time on the pairs themselves (scipy's Mann-Whitney)."""
    import numpy as np
    import scipy.sparse as sp
    from scipy.stats import mannwhitneyu

    a = runs.ranks.copy().tocsc()
    a.data[:] = 1
    f = np.asarray(runs.flip, dtype=np.int64)
    co = sp.triu(a.T @ a, k=1).tocoo()
    out = []
    for i, j, w in zip(co.row, co.col, co.data, strict=True):
        ai, aj = a[:, i].toarray().ravel() > 0, a[:, j].toarray().ravel() > 0
        joint, i_only, j_only = ai & aj, ai & ~aj, aj & ~ai
        ni, nj = int(i_only.sum()), int(j_only.sum())
        if w < min_joint or ni < min_alone or nj < min_alone:
            continue
        r_joint, ri, rj = f[joint].sum() / w, f[i_only].sum() / ni, f[j_only].sum() / nj
        if r_joint < ri and r_joint < rj:
            alone = f[i_only | j_only]
            both = np.concatenate([f[joint], alone])
            p = 1.0 if np.ptp(both) == 0 else float(mannwhitneyu(f[joint], alone, alternative="less").pvalue)
            if max_p is None or p <= max_p:
                out.append(((runs.skills[i], runs.skills[j]), int(w), int(f[joint].sum()), ni, nj, p))
    return sorted(out, key=lambda x: x[-1])


def test_count_based_mann_whitney_equals_scipy():
    """Mann-Whitney p-values from value counts equal scipy's on the samples, including no-tie and huge cases."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    from skillaudit.analysis.graph import mwu_less_from_counts

    rng = np.random.default_rng(1)
    xs = rng.integers(0, 40, size=(300, 3))
    ys = rng.integers(0, 400, size=(300, 3))
    xs[:20, 0] = 0  # samples missing a value
    ys[20:40, 2] = 0
    xs = np.vstack([xs, [[1, 0, 0], [0, 1, 0], [0, 0, 1]]])  # one flip each, no ties: scipy's exact path
    ys = np.vstack([ys, [[0, 1, 1], [1, 0, 1], [1, 1, 0]]])
    xs = np.vstack([xs, [[70_000, 80_000, 60_000]]])  # beyond the exact-float range
    ys = np.vstack([ys, [[1, 2, 3]]])
    got = mwu_less_from_counts(xs, ys)
    values = np.array([-1, 0, 1])
    want = [mannwhitneyu(np.repeat(values, x), np.repeat(values, y), alternative="less").pvalue
            for x, y in zip(xs, ys, strict=True)]
    assert got.tolist() == [float(p) for p in want]


def test_vectorised_interference_equals_the_pair_by_pair_definition():
    """Every candidate pair, its counts and its p-value match a per-pair scipy computation exactly."""
    runs = _random_runs()
    got = interference(runs, max_p=None)
    want = _reference_interference(runs)
    assert len(got) == len(want) > 20
    assert sorted((x.skills, x.n_joint, x.net_joint, x.n_a_only, x.n_b_only, x.p_value) for x in got) == \
        sorted(want)
    assert ("s0", "s1") in {tuple(sorted(x.skills)) for x in interference(runs)}
    ps = [x.p_value for x in got]
    assert ps == sorted(ps)


def test_count_communities_equal_louvain_on_the_whole_graph():
    """Communities from counts (backbone built from sparse counts) equal communities() on the networkx graph."""
    from skillaudit.analysis.graph import co_retrieval_counts, count_communities

    runs = _random_runs(n_skills=40, seed=3)
    counts = co_retrieval_counts(runs)
    g = co_retrieval_graph(runs)
    assert g.number_of_edges() == counts.n_edges > 100
    for max_edges in (50, 120, 10_000):
        for seed in (0, 7):
            assert count_communities(counts, seed=seed, max_edges=max_edges) == \
                communities(g, seed=seed, max_edges=max_edges)


def test_bounded_skill_graph_keeps_the_backbone_and_flagged_pairs():
    """With max_edges, skill_graph exports the backbone plus every interfering pair, with the same nodes and communities."""
    from skillaudit.analysis.graph import backbone, co_retrieval_counts, top_co_retrieved

    runs = _random_runs(n_skills=40, seed=3)
    counts = co_retrieval_counts(runs)
    inter = interference(runs, max_p=None)
    full = skill_graph(runs, interfering=inter, near_duplicates=[("s3", "s9", 0.9)])
    small = skill_graph(runs, interfering=inter, near_duplicates=[("s3", "s9", 0.9)], max_edges=60, counts=counts)
    assert list(small.nodes(data=True)) == list(full.nodes(data=True))
    assert small.graph["co_retrieval_edges"] == full.number_of_edges() - (0 if full.edges["s3", "s9"]["weight"] else 1)
    bb = backbone(co_retrieval_graph(runs).subgraph([n for n in full if full.degree(n)]), 60)
    expect = {frozenset(e) for e in bb.edges} | {frozenset(x.skills) for x in inter} | {frozenset(("s3", "s9"))}
    assert {frozenset(e) for e in small.edges} == expect
    for u, v, d in small.edges(data=True):
        assert d == full.edges[u, v]
    top = top_co_retrieved(counts, 5)
    edges = sorted((-d["weight"], *sorted((u, v))) for u, v, d in co_retrieval_graph(runs).edges(data=True))
    assert [(-t["weight"], *t["skills"]) for t in top] == edges[:5]


def test_graphml_lines_equal_networkx_output():
    """graphml_lines writes exactly what networkx's generate_graphml writes, odd characters included."""
    from skillaudit.report.graphml import graphml_lines

    g = _annotated_graph()
    assert list(graphml_lines(g)) == list(nx.generate_graphml(g))
    odd = nx.Graph(note="graph <level> & data")
    odd.add_node('é & "q" <x>\t\n', text="ünï\ncode", flag=True, empty="")
    odd.add_node("bare")
    odd.add_edge("bare", 'é & "q" <x>\t\n', weight=2, label="a\x0bb\u2028c", score=0.5)
    odd.add_edge("bare", "other")
    assert list(graphml_lines(odd)) == list(nx.generate_graphml(odd))
    bad = nx.Graph()
    bad.add_node("a", value=None)
    with pytest.raises(nx.NetworkXError):
        list(graphml_lines(bad))
