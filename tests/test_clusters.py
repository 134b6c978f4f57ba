"""Embedding clusters: reworded copies group together, harm is judged per group, near-duplicates."""

from __future__ import annotations

import numpy as np
import pytest
from _cluster_data import COUNTING, ROUNDING, UNRELATED, full_library, library
from _factories import pair

from skillaudit.analysis.clusters import (
    SkillClusterer,
    cluster_library,
    ctfidf_labels,
    find_near_duplicates,
    harmful_cluster_members,
    score_cluster,
)
from skillaudit.analysis.graph import skill_exposure
from skillaudit.library import load_library
from skillaudit.library.embed import MiniLMEmbedder, embed_library
from skillaudit.runs import read_text_records

ROUND_IDS = sorted(ROUNDING)


def runs_of(spec: dict[str, tuple[int, int, int]]):
    """Pairs retrieving one skill each: spec[skill] = (rescues, harms, unchanged)."""
    import json

    recs = []
    for sid, (b, c, same) in spec.items():
        outcomes = [(True, False)] * b + [(False, True)] * c + [(True, True)] * same
        for i, (yp, yn) in enumerate(outcomes):
            recs += pair(f"{sid}-{i}", yp, yn, retrieved=[sid])
    return read_text_records("\n".join(json.dumps(r) for r in recs))


@pytest.fixture(scope="module")
def minilm_vectors():
    """MiniLM embeddings of the test library (model loaded once for the module)."""
    return embed_library(full_library(), MiniLMEmbedder(), use_cache=False)


def _cluster_sets(report):
    return {frozenset(c.skills) for c in report.clusters}


def test_reworded_copies_share_a_cluster_and_unrelated_skills_do_not(minilm_vectors):
    """With MiniLM each family of reworded advice is one cluster and every unrelated skill is alone."""
    report = cluster_library(full_library(), embeddings=minilm_vectors)
    sets = _cluster_sets(report)
    assert frozenset(ROUNDING) in sets and frozenset(COUNTING) in sets
    for sid in UNRELATED:
        assert frozenset({sid}) in sets


def test_reworded_copies_are_near_duplicates_and_unrelated_skills_are_not(minilm_vectors):
    """Every pair inside a family is listed as a near-duplicate (sorted by similarity); no other pair is."""
    pairs = find_near_duplicates(full_library(), embeddings=minilm_vectors)
    found = {(a, b) for a, b, _ in pairs}
    expected = {tuple(sorted((a, b))) for fam in (ROUNDING, COUNTING)
                for a in fam for b in fam if a < b}
    assert found == expected
    sims = [s for _, _, s in pairs]
    assert sims == sorted(sims, reverse=True) and all(0.8 <= s <= 1 for s in sims)


def test_tfidf_groups_copies_that_share_their_words():
    """tfidf, on the easy case (copies reusing the same words), clusters and pairs them too."""
    lib = library(ROUNDING, UNRELATED)
    report = cluster_library(lib, embedder="tfidf")
    assert report.embedder == "tfidf"
    sets = _cluster_sets(report)
    assert frozenset(ROUNDING) in sets
    assert all(frozenset({sid}) in sets for sid in UNRELATED)
    found = {(a, b) for a, b, _ in report.near_duplicates}
    assert found == {(a, b) for a in ROUND_IDS for b in ROUND_IDS if a < b}


def test_a_family_of_net_harmful_skills_is_harmful(minilm_vectors):
    """A cluster whose members each lose more often than they rescue is marked harmful, with its counts."""
    runs = runs_of({**{s: (1, 5, 4) for s in ROUNDING}, "regex-email": (2, 2, 6)})
    report = cluster_library(full_library(), skill_exposure(runs), runs, embeddings=minilm_vectors)
    top = report.clusters[0]
    assert top.harmful and set(top.skills) == set(ROUNDING)
    assert (top.b, top.c, top.net, top.n_pairs) == (3, 15, -12, 30)
    assert top.p_value < 0.05 and top.n_harmful_members == 3
    assert top.share == pytest.approx(-12.0)
    assert [c for c in report.clusters if c.harmful] == [top]
    assert report.harmful_members() == [sorted(ROUNDING)]


def test_one_harmful_member_among_neutral_ones_does_not_make_the_cluster_harmful(minilm_vectors):
    """Strong harm by one member alone leaves its cluster unflagged: the rest of the family is neutral."""
    runs = runs_of({"round-each-step": (0, 14, 0), "whole-number-working": (4, 4, 2),
                    "integer-intermediates": (4, 4, 2)})
    report = cluster_library(full_library(), skill_exposure(runs), runs, embeddings=minilm_vectors)
    fam = next(c for c in report.clusters if set(c.skills) == set(ROUNDING))
    assert fam.net == -14 and fam.p_value < 0.05
    assert not fam.harmful and fam.net_without_worst == 0
    assert "one member" in fam.reason and "round-each-step" in fam.reason


def test_a_harmful_single_skill_is_not_a_harmful_cluster(minilm_vectors):
    """A one-skill cluster is never harmful, however bad the skill (that is prune's job)."""
    runs = runs_of({"http-retries": (0, 20, 0)})
    report = cluster_library(full_library(), skill_exposure(runs), runs, embeddings=minilm_vectors)
    assert not any(c.harmful for c in report.clusters)


def test_insignificant_group_harm_is_not_harmful():
    """A family slightly net-negative without statistical evidence stays unflagged."""
    runs = runs_of({s: (1, 2, 5) for s in ROUNDING})
    c = score_cluster(0, ROUND_IDS, "x", skill_exposure(runs), runs)
    assert c.net == -3 and not c.harmful and "not significant" in c.reason


def test_pooled_counts_count_each_pair_once():
    """A pair retrieving two members counts once in the cluster's pooled b and c."""
    import json

    recs = []
    for i in range(6):
        recs += pair(f"t{i}", False, True, retrieved=["round-each-step", "whole-number-working"])
    runs = read_text_records("\n".join(json.dumps(r) for r in recs))
    c = score_cluster(0, ["round-each-step", "whole-number-working"], "", skill_exposure(runs), runs)
    assert (c.n_pairs, c.b, c.c) == (6, 0, 6)
    assert c.share == pytest.approx(-6.0)


def test_scoring_works_from_plain_rows_without_runs():
    """Given only per-skill rows (dicts), pooled counts are the members' sums."""
    rows = {"a": {"n_retrieved": 10, "b": 0, "c": 8, "net": -8, "share": -6.0},
            "b": {"n_retrieved": 10, "b": 1, "c": 7, "net": -6, "share": -5.0}}
    c = score_cluster(3, ["a", "b"], "lbl", rows)
    assert c.harmful and (c.b, c.c, c.n_pairs) == (1, 15, 20) and c.share == -11.0


def test_ctfidf_labels_name_what_a_cluster_is_about():
    """Class-based TF-IDF labels pick the words that set a cluster apart from the others."""
    lib = full_library()
    texts = [s.text for s in lib.skills]
    labels = [0 if s.id in ROUNDING else 1 if s.id in COUNTING else 2 for s in lib.skills]
    names = ctfidf_labels(texts, labels)
    assert "round" in names[0] or "whole" in names[0]
    assert "counter" in names[1]
    assert len(names[0].split(", ")) == 3


def test_clusterer_is_an_estimator_with_stable_labels():
    """SkillClusterer keeps params for get_params and numbers clusters by first member."""
    x = np.array([[1, 0], [0, 1], [1, 0.01], [0.01, 1]], dtype=float)
    est = SkillClusterer(distance_threshold=0.1).fit(x)
    assert est.get_params()["distance_threshold"] == 0.1
    assert est.labels_.tolist() == [0, 1, 0, 1] and est.n_clusters_ == 2
    assert SkillClusterer().fit(np.ones((1, 3))).labels_.tolist() == [0]
    assert SkillClusterer().fit_predict(np.zeros((0, 3))).tolist() == []


def test_hdbscan_method_gives_every_skill_a_cluster():
    """With HDBSCAN, noise points become their own clusters (no -1 labels)."""
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal([5, 0, 0], 0.05, (6, 3)), rng.normal([0, 5, 0], 0.05, (6, 3)),
                   [[0, 0, 5]]])
    labels = SkillClusterer(method="hdbscan", min_cluster_size=3).fit(x).labels_
    assert labels.min() >= 0
    assert len(set(labels[:6])) == 1 and len(set(labels[6:12])) == 1 and labels[0] != labels[6]


def test_harmful_cluster_members_feeds_rewrite(minilm_vectors):
    """harmful_cluster_members returns the member ids of each harmful cluster."""
    runs = runs_of({s: (0, 6, 0) for s in ROUNDING})
    report = cluster_library(full_library(), skill_exposure(runs), runs, embeddings=minilm_vectors)
    assert harmful_cluster_members(None, {}, report=report) == [ROUND_IDS]


def test_sample_library_near_duplicates(tmp_path):
    """The bundled skills/ library has exactly two near-duplicate pairs, found by both backends."""
    lib = load_library("skills")
    expected = {("counter-frequency-counting", "tally-element-occurrences"),
                ("per-item-rate-scaling", "unit-rate-problems")}
    for backend in ("minilm", "tfidf"):
        pairs = find_near_duplicates(lib, embedder=backend, cache_dir=tmp_path)
        assert {(a, b) for a, b, _ in pairs} == expected, backend


def test_cluster_test_counts_tasks_not_epochs():
    """With 3 epochs per task the cluster's p is the task-level sign-flip test, not McNemar on pooled pairs."""
    import json

    from skillaudit.stats import mcnemar_exact, paired_test

    recs = []
    for i in range(5):  # 5 tasks harmed in all 3 epochs, 1 rescued in all 3
        for e in (1, 2, 3):
            recs += pair(f"t{i}", False, True, retrieved=["round-each-step"], epoch=e)
    for e in (1, 2, 3):
        recs += pair("t9", True, False, retrieved=["whole-number-working"], epoch=e)
    runs = read_text_records("\n".join(json.dumps(r) for r in recs))
    c = score_cluster(0, ["round-each-step", "whole-number-working"], "", skill_exposure(runs), runs)
    assert (c.n_pairs, c.b, c.c) == (18, 3, 15)
    assert c.p_value == pytest.approx(paired_test(runs.unit_ids(), runs.flip))
    assert c.p_value > 0.2 > mcnemar_exact(3, 15)  # 6 tasks are weak evidence; 18 pairs looked strong
