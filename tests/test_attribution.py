"""Per-skill attribution: exposure counts, shares, exclusive counts, q-values, regression, aliases."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from scipy.stats import binomtest

from skillaudit.analysis.attribution import SCHEMA, attribute, share_weights
from skillaudit.errors import InputError
from skillaudit.library import Library, Skill
from skillaudit.runs import read_text_records


def _pair(tid: str, y_pos: bool, y_neg: bool, skills=None, scores=None, model="m", epoch=1):
    en = {"task_id": tid, "condition": "enabled", "correct": y_pos, "model": model, "epoch": epoch}
    if skills is not None:
        sc = scores or [None] * len(skills)
        en["retrievals"] = [{"query": "q", "skills": [
            {"id": s, **({"score": v} if v is not None else {})} for s, v in zip(skills, sc, strict=True)]}]
    dis = {"task_id": tid, "condition": "disabled", "correct": y_neg, "model": model, "epoch": epoch}
    return [en, dis]


def _runs(pairs):
    return read_text_records("".join(orjson.dumps(r).decode() + "\n" for p in pairs for r in p))


def _library(*ids):
    return Library(skills=tuple(Skill(id=i, name=i, description="d", body="b") for i in sorted(ids)))


HAND = [
    _pair("t1", True, False, ["A", "B"], [3.0, 1.0]),   # rescue, A and B
    _pair("t2", False, True, ["A"], [2.0]),             # harm, A alone
    _pair("t3", False, True, ["B", "C"], [1.0, 1.0]),   # harm, B and C
    _pair("t4", True, False, ["C"], [5.0]),             # rescue, C alone
    _pair("t5", True, False),                           # rescue, nothing retrieved (skip)
    _pair("t6", True, True, ["A"], [1.0]),              # no flip, A alone
    _pair("t7", False, False, ["X"], [1.0]),            # no flip, X (not in the library)
]


def _random_runs(seed: int, n: int = 300, p: int = 15):
    rng = np.random.default_rng(seed)
    pairs = []
    for t in range(n):
        k = rng.integers(0, 4)
        skills = [f"s{j}" for j in rng.choice(p, size=k, replace=False)]
        scores = [float(v) for v in rng.uniform(0.1, 9, size=k)] if rng.random() > 0.2 else None  # some rows lack scores
        pairs.append(_pair(f"t{t}", bool(rng.random() < 0.5), bool(rng.random() < 0.5),
                           skills if k else None, scores))
    return _runs(pairs)


def test_hand_counts_and_exclusive_counts():
    """Per-skill n, b, c, net and exclusive counts match a hand count of a seven-pair log."""
    res = attribute(_runs(HAND), library=_library("A", "B", "C", "D"), regression=False)
    got = {s.skill_id: (s.n_retrieved, s.b, s.c, s.net, s.exclusive_n, s.exclusive_b, s.exclusive_c)
           for s in res.skills}
    assert got == {
        "A": (3, 1, 1, 0, 2, 0, 1),
        "B": (2, 1, 1, 0, 0, 0, 0),
        "C": (2, 1, 1, 0, 1, 1, 0),
        "X": (1, 0, 0, 0, 1, 0, 0),
        "D": (0, 0, 0, 0, 0, 0, 0),
    }
    assert res.totals == {"cond_b": 2, "cond_c": 2, "n_cond": 6, "n_cond_tasks": 6}


def test_hand_equal_shares_and_library_flags():
    """Equal shares split each flip over the retrieved set; unused library skills and foreign ids are flagged."""
    res = attribute(_runs(HAND), library=_library("A", "B", "C", "D"), regression=False)
    share = {s.skill_id: s.share for s in res.skills}
    assert share == pytest.approx({"A": -0.5, "B": 0.0, "C": 0.5, "X": 0.0, "D": 0.0})
    d, x = res.get("D"), res.get("X")
    assert d.in_library is True and d.p_value is None and d.q_value is None and d.rae_k is None
    assert x.in_library is False
    assert attribute(_runs(HAND), regression=False).get("A").in_library is None


def test_rank_and_score_shares_by_hand():
    """Rank shares weight 1/rank and score shares weight the retrieval score within each pair."""
    runs = _runs(HAND)
    rank = {s.skill_id: s.share for s in attribute(runs, scheme="rank", regression=False).skills}
    # t1: A rank 1, B rank 2 -> A 2/3, B 1/3 of +1; t3: B 2/3, C 1/3 of -1
    assert rank["A"] == pytest.approx(2 / 3 - 1)
    assert rank["B"] == pytest.approx(1 / 3 - 2 / 3)
    assert rank["C"] == pytest.approx(-1 / 3 + 1)
    score = {s.skill_id: s.share for s in attribute(runs, scheme="score", regression=False).skills}
    # t1: scores 3 and 1 -> A 3/4, B 1/4; t3: 1 and 1 -> halves
    assert score["A"] == pytest.approx(0.75 - 1)
    assert score["B"] == pytest.approx(0.25 - 0.5)
    assert score["C"] == pytest.approx(-0.5 + 1)


@pytest.mark.parametrize("scheme", ["equal", "rank", "score"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_share_identity(scheme, seed):
    """Shares over all skills add up exactly to cond_b - cond_c on random logs, for every scheme."""
    runs = _random_runs(seed)
    res = attribute(runs, scheme=scheme, regression=False)
    assert sum(s.share for s in res.skills) == pytest.approx(
        res.totals["cond_b"] - res.totals["cond_c"], abs=1e-9)
    w, fallback = share_weights(runs, scheme)
    rows = np.asarray(w.sum(axis=1)).ravel()
    assert np.allclose(rows[runs.retrieved], 1.0) and np.all(rows[~runs.retrieved] == 0)
    if scheme == "score":
        assert fallback > 0  # rows without scores fall back to equal weights


def test_counts_match_per_pair_loop():
    """Sparse per-skill counts equal a plain per-pair loop on a random log."""
    runs = _random_runs(5)
    res = attribute(runs, regression=False)
    ranks = runs.ranks.toarray()
    f = runs.flip
    for s in res.skills:
        j = runs.skills.index(s.skill_id)
        hit = ranks[:, j] > 0
        alone = hit & ((ranks > 0).sum(axis=1) == 1)
        assert (s.n_retrieved, s.b, s.c) == (hit.sum(), (f[hit] > 0).sum(), (f[hit] < 0).sum())
        assert (s.exclusive_n, s.exclusive_b, s.exclusive_c) == (
            alone.sum(), (f[alone] > 0).sum(), (f[alone] < 0).sum())


def test_q_values_by_hand():
    """p-values are exact binomial McNemar tests and q-values a hand-rolled Benjamini-Hochberg."""
    res = attribute(_random_runs(3), regression=False)
    tested = [s for s in res.skills if s.n_retrieved > 0]
    p = {s.skill_id: (binomtest(s.b, s.b + s.c, 0.5).pvalue if s.b + s.c else 1.0) for s in tested}
    for s in tested:
        assert s.p_value == pytest.approx(p[s.skill_id])
    m = len(p)
    order = sorted(p, key=p.get)
    q, running = {}, 1.0
    for i in range(m - 1, -1, -1):
        running = min(running, p[order[i]] * m / (i + 1))
        q[order[i]] = min(running, 1.0)
    for s in tested:
        assert s.q_value == pytest.approx(q[s.skill_id])


def test_sorted_most_harmful_first_and_schema():
    """Rows are sorted by net ascending, ties by share, and to_dict has the rank/v1 fields."""
    res = attribute(_random_runs(4), n_boot=200)
    keys = [(s.net, s.share) for s in res.skills]
    assert keys == sorted(keys)
    doc = res.to_dict()
    assert doc["schema"] == SCHEMA == "skillaudit.rank/v1"
    assert set(doc["totals"]) == {"cond_b", "cond_c", "n_cond", "n_cond_tasks"}
    required = {"skill_id", "n_retrieved", "b", "c", "net", "share", "rae_k", "p_value", "q_value",
                "exclusive_n", "exclusive_b", "exclusive_c", "in_library", "coef", "coef_ci",
                "identifiable", "aliases", "relative_effect", "relative_ci", "relative_q", "model",
                "n_tasks"}
    assert required <= set(doc["skills"][0])
    orjson.dumps(doc)  # plain JSON types only


def test_unknown_scheme_is_an_input_error():
    """An unknown attribution scheme raises an InputError naming the choices."""
    with pytest.raises(InputError, match="expected one of equal, rank, score"):
        attribute(_runs(HAND), scheme="bogus")


def test_rows_are_the_dataclass_objects_and_co_retrieval_is_x_prime_x():
    """Rows equal SkillAttribution(**fields) with the same field order; co_retrieval is X'X with or without regression."""
    from skillaudit.analysis.attribution import SkillAttribution, indicator

    runs = _random_runs(4)
    lib = _library(*runs.skills, "zz-unused")
    X = indicator(runs)
    for kw in ({"n_boot": 0}, {"regression": False}, {"n_boot": 20, "library": lib}):
        res = attribute(runs, **kw)
        for row in res.skills:
            again = SkillAttribution(**vars(row))
            assert again == row and list(vars(again).items()) == list(vars(row).items())
        ref = (X.T @ X).toarray()
        co = res.co_retrieval.toarray()
        assert np.array_equal(co[: ref.shape[0], : ref.shape[1]], ref) and co.sum() == ref.sum()



def test_models_judged_in_worker_processes_give_the_same_result():
    """attribute_models with jobs=2 (forked workers, one model each) returns what one process returns, number for number."""
    from skillaudit.analysis.attribution import attribute_models

    rng = np.random.default_rng(5)
    pairs = []
    for model in ("m1", "m2", "m3"):
        for t in range(150):
            skills = [f"s{j}" for j in rng.choice(12, size=int(rng.integers(1, 4)), replace=False)]
            y_neg = bool(rng.random() < 0.5)
            y_pos = bool(rng.random() < 0.5) and not (model == "m2" and "s3" in skills)
            for e in (1, 2):
                pairs.append(_pair(f"t{t}", y_pos, y_neg, skills if rng.random() < 0.6 else None,
                                   model=model, epoch=e))
    runs = _runs(pairs)
    one = attribute_models(runs, n_boot=300, n_perm=199, jobs=1).to_dict()
    two = attribute_models(runs, n_boot=300, n_perm=199, jobs=2).to_dict()
    assert [r["model"] for r in two["models"]] == ["m1", "m2", "m3"]
    assert orjson.dumps(one, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(two, option=orjson.OPT_SERIALIZE_NUMPY)


def test_a_wide_library_judged_in_worker_processes_gives_the_same_numbers():
    """400 skills (the sandwich-interval path, dense factorisations): jobs=2 returns exactly what one process returns."""
    from skillaudit.analysis.attribution import attribute_models

    rng = np.random.default_rng(9)
    pairs = []
    for model in ("m1", "m2"):
        for t in range(500):
            skills = [f"s{j:03d}" for j in rng.choice(400, size=int(rng.integers(1, 4)), replace=False)]
            y_neg = bool(rng.random() < 0.5)
            pairs.append(_pair(f"t{t}", bool(rng.random() < 0.5), y_neg, skills, model=model))
    runs = _runs(pairs)
    one = attribute_models(runs, n_boot=200, n_perm=199, jobs=1)
    assert one.results[0].settings["regression_interval"] == "sandwich"
    two = attribute_models(runs, n_boot=200, n_perm=199, jobs=2)
    assert orjson.dumps(one.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY) == \
        orjson.dumps(two.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY)
