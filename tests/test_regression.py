"""The regression estimator: point estimates against scikit-learn, intervals, aliases and the rank check."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_attribution import _pair, _runs

from skillaudit.analysis.attribution import attribute
from skillaudit.analysis.regression import SkillEffectRegression
from skillaudit.stats._csr import Csr


def _co_retrieved(seed: int = 0, n: int = 700):
    """H (harmful) is retrieved with I (innocent) 80% of the time; I is also retrieved alone; N is noise."""
    rng = np.random.default_rng(seed)
    pairs = []
    for t in range(n):
        u = rng.random()
        if u < 0.35:
            skills = ["H", "I"] if rng.random() < 0.8 else ["H"]
        elif u < 0.7:
            skills = ["I"]
        else:
            skills = ["N"]
        harmful = "H" in skills and rng.random() < 0.35
        y_neg = bool(rng.random() < 0.6)
        y_pos = False if harmful else (y_neg if rng.random() < 0.8 else bool(rng.random() < 0.6))
        if harmful:
            y_neg = True
        pairs.append(_pair(f"t{t}", y_pos, y_neg, skills))
    return _runs(pairs)


def test_regression_separates_harmful_from_innocent_neighbour():
    """Exposure counts blame both H and its usual neighbour I; the regression blames H only."""
    res = attribute(_co_retrieved(), n_boot=1000)
    h, i = res.get("H"), res.get("I")
    assert h.net < 0 and i.net < 0 and i.q_value < 0.1  # exposure counts blame the innocent too
    assert h.identifiable and i.identifiable
    assert h.coef_ci[1] < 0  # harmful: whole interval below zero
    assert i.coef_ci[0] < 0 < i.coef_ci[1] and abs(i.coef) < 0.05  # innocent: cleared
    assert h.coef < i.coef - 0.2


def test_aliases_for_skills_never_retrieved_apart():
    """Two skills always retrieved together get no individual coefficient, only a joint one."""
    rng = np.random.default_rng(1)
    pairs = [_pair(f"t{t}", bool(rng.random() < 0.5), bool(rng.random() < 0.5),
                   ["P", "Q"] if t % 3 == 0 else ["R"]) for t in range(90)]
    res = attribute(_runs(pairs), n_boot=300)
    p, q, r = res.get("P"), res.get("Q"), res.get("R")
    assert p.identifiable is False and q.identifiable is False and r.identifiable is True
    assert p.aliases == ("Q",) and q.aliases == ("P",)
    assert p.coef is None and p.coef_ci is None and p.alias_coef is not None
    assert p.alias_coef == q.alias_coef and p.alias_coef_ci is not None
    assert r.aliases == ()


def test_linear_dependence_beyond_identical_columns_is_not_identifiable():
    """A skill whose column is the sum of two others (never separable) is reported as aliased."""
    import scipy.sparse as sp

    X = np.array([[1, 0, 1], [0, 1, 1]] * 20 + [[1, 0, 0]] * 5, dtype=float)  # col2 = col0 + col1 on rows 0-39
    X[40:, 2] = 1  # now col2 = col0 + col1 everywhere
    y = np.zeros(X.shape[0])
    m = SkillEffectRegression(n_boot=50).fit(sp.csr_matrix(X), y)
    assert not m.identifiable_.any()
    assert set(m.aliases_[2]) == {0, 1}


def test_regression_point_estimate_is_sklearn_ridge_and_deterministic():
    """The coefficients equal sklearn Ridge without intercept, and the same random_state gives the same CIs."""
    from sklearn.linear_model import Ridge

    runs = _co_retrieved(2)
    X = runs.ranks.copy()
    X.data[:] = 1
    rows = runs.retrieved
    a = SkillEffectRegression(alpha=2.0, n_boot=300, random_state=7).fit(X[rows], runs.flip[rows])
    b = SkillEffectRegression(alpha=2.0, n_boot=300, random_state=7).fit(X[rows], runs.flip[rows])
    ref = Ridge(alpha=2.0, fit_intercept=False).fit(X[rows].toarray(), runs.flip[rows]).coef_
    assert np.allclose(a.coef_, ref)
    assert np.array_equal(a.coef_ci_, b.coef_ci_)


def test_sandwich_interval_agrees_with_bootstrap(monkeypatch):
    """For wide libraries the task-clustered sandwich interval replaces the bootstrap and agrees with it."""
    import skillaudit.analysis.regression as regression_module
    from skillaudit.analysis.regression import SkillEffectRegression

    rng = np.random.default_rng(11)
    n, p = 3000, 12
    X = sp.csr_matrix((rng.random((n, p)) < 0.2).astype(float))
    beta = np.zeros(p)
    beta[0], beta[1] = -0.3, 0.2
    y = np.clip(np.rint(X @ beta + rng.normal(0, 0.5, n)), -1, 1)
    groups = np.arange(n) // 2
    boot = SkillEffectRegression(n_boot=2000, random_state=0).fit(X, y, groups)
    monkeypatch.setattr(regression_module, "_MAX_BOOT_SKILLS", 5)
    sand = SkillEffectRegression(n_boot=2000, random_state=0).fit(X, y, groups)
    assert (boot.interval_method_, sand.interval_method_) == ("bootstrap", "sandwich")
    np.testing.assert_allclose(sand.coef_, boot.coef_)
    width_b = boot.coef_ci_[:, 1] - boot.coef_ci_[:, 0]
    width_s = sand.coef_ci_[:, 1] - sand.coef_ci_[:, 0]
    np.testing.assert_allclose(width_s, width_b, rtol=0.15)
    assert sand.coef_ci_[0, 1] < 0 < sand.coef_ci_[1, 0]


def test_wide_library_point_estimate_by_conjugate_gradients_equals_the_dense_solve():
    """Above 300 skills without a bootstrap the sparse CG solution equals (Z'Z + alpha I)^-1 Z'y."""
    rng = np.random.default_rng(5)
    n, p = 4000, 420
    X = sp.random(n, p, density=0.006, random_state=rng, format="csr")
    X.data[:] = 1.0
    X = sp.vstack([X, sp.identity(p, format="csr")]).tocsr()  # every skill also retrieved alone once
    y = rng.integers(-1, 2, size=X.shape[0]).astype(float)
    fit = SkillEffectRegression(alpha=1.5, n_boot=0).fit(X, y)
    dense = X.toarray()
    ref = np.linalg.solve(dense.T @ dense + 1.5 * np.eye(p), dense.T @ y)
    assert fit.identifiable_.all()
    np.testing.assert_allclose(fit.coef_, ref, rtol=1e-8, atol=1e-10)


def test_rank_check_looks_only_at_skills_never_retrieved_alone():
    """In a wide design the one column that is the sum of two others is found, with exactly those aliases."""
    rng = np.random.default_rng(8)
    p = 350
    rows = [[j] for j in range(3, p)]  # skills 3.. each retrieved alone once: identifiable
    rows += [[0, 2], [1, 2]] * 10  # col2 = col0 + col1: no alone row for any of the three
    rows += [[int(a), int(b)] for a, b in rng.integers(3, p, size=(500, 2)) if a != b]
    X = sp.csr_matrix((np.ones(sum(map(len, rows))),
                       (np.repeat(np.arange(len(rows)), [len(r) for r in rows]), np.concatenate(rows))),
                      shape=(len(rows), p))
    y = rng.integers(-1, 2, size=len(rows)).astype(float)
    fit = SkillEffectRegression(n_boot=0).fit(X, y)
    assert not fit.identifiable_[:3].any() and fit.identifiable_[3:].all()
    assert set(fit.aliases_[2]) == {0, 1} and set(fit.aliases_[0]) == {1, 2}


def test_rank_check_finds_dependencies_in_separate_blocks():
    """Two unrelated sum-of-two dependencies, each in its own block of never-alone skills, are both found."""
    p = 40
    rows = [[j] for j in range(8, p)]
    rows += [[0, 2], [1, 2]] * 4 + [[3, 5], [4, 5]] * 4  # col2 = col0 + col1, col5 = col3 + col4
    rows += [[6, 8], [6, 9], [7, 6], [7, 10]]  # 6 and 7 are never alone but independent
    X = sp.csr_matrix((np.ones(sum(map(len, rows))),
                       (np.repeat(np.arange(len(rows)), [len(r) for r in rows]), np.concatenate(rows))),
                      shape=(len(rows), p))
    fit = SkillEffectRegression(n_boot=0).fit(X, np.zeros(len(rows)))
    assert fit.identifiable_.tolist() == [False] * 6 + [True] * (p - 6)
    assert set(fit.aliases_[5]) == {3, 4} and set(fit.aliases_[0]) == {1, 2}


def test_gram_shortcuts_equal_the_merged_design():
    """Identical columns, Z'Z, rows retrieving a group alone and Z'y read off X'X equal the per-column path and Z itself."""
    from skillaudit.analysis import regression as am

    rng = np.random.default_rng(3)
    for _ in range(30):
        X = (rng.random((int(rng.integers(1, 80)), 12)) < 0.25).astype(float)
        X[:, 1] = X[:, 0]
        X[:, 4] = X[:, 0]
        X[:, 7] = 0
        X[:, 9] = X[:, 8]
        X = sp.csr_matrix(X)
        y = rng.normal(size=X.shape[0])
        gram = Csr.of(X).gram()
        members, col_group = am._identical_columns(X, np.asarray(X.sum(axis=0)).ravel())
        got_members, got_group = am._identical_columns_of(gram)
        assert got_members == members and got_group.tolist() == col_group.tolist()
        g = len(members)
        Z = am._merge_columns(X, col_group, g)
        ref, got = (Z.T @ Z).tocsr(), am._merged_gram(gram, members)
        ref.sort_indices()
        for a in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(ref, a), getattr(got, a))
        single = np.diff(Z.indptr) == 1
        own = np.bincount(Z.indices[np.repeat(single, np.diff(Z.indptr))], minlength=g) > 0
        assert am._has_own_row(X, col_group, g).tolist() == own.tolist()
        first = [cols[0] for cols in members]
        assert np.asarray(Z.T @ y).ravel().tobytes() == np.asarray(X.T @ y).ravel()[first].tobytes()


def test_repeated_entries_take_the_merged_design():
    """A CSR matrix listing a cell twice fits like before (through Z), and gram_ is X'X of what was given."""
    X = sp.csr_matrix((np.ones(4), np.array([0, 0, 1, 1]), np.array([0, 2, 3, 4])), shape=(3, 2))
    assert not X.has_canonical_format
    fit = SkillEffectRegression(n_boot=0).fit(X, np.array([1.0, -1.0, 0.0]))
    assert fit.gram_.toarray().tolist() == [[4.0, 0.0], [0.0, 2.0]]
    assert fit.identifiable_.all() and np.isfinite(fit.coef_).all()


def test_written_out_cg_and_components_equal_scipys():
    """The conjugate-gradient ridge agrees with scipy's cg to its tolerance; the components equal csgraph's exactly."""
    import scipy.sparse as sp
    from scipy.sparse import linalg as sla
    from scipy.sparse.csgraph import connected_components

    from skillaudit.analysis.regression import _components, _ridge_cg

    rng = np.random.default_rng(11)
    for case in range(60):
        g, n = int(rng.integers(5, 300)), int(rng.integers(10, 2000))
        X = sp.random(n, g, density=float(rng.uniform(0.003, 0.05)), random_state=case, format="csr")
        X.data[:] = 1
        gram = (X.T @ X).tocsr()
        rhs, alpha = rng.normal(size=g), float(rng.choice([1e-3, 1.0, 10.0]))
        a = gram + alpha * sp.identity(g, format="csr")
        diag = a.diagonal()
        pre = sla.LinearOperator(a.shape, matvec=lambda v, d=diag: v / d, dtype=np.float64)
        want, info = sla.cg(a, rhs, rtol=1e-12, atol=0.0, M=pre, maxiter=10 * g)
        got = _ridge_cg(Csr.of(gram), rhs, alpha)
        assert info == 0 and np.allclose(got, want, rtol=1e-9, atol=1e-12)
        n_comp, label = _components(Csr.of(gram))
        ref_n, ref_label = connected_components(gram, directed=False)
        assert n_comp == ref_n and np.array_equal(label, ref_label)
    chain = sp.diags([np.ones(499), np.ones(499)], [-1, 1], format="csr")  # one long component
    assert _components(Csr.of(chain))[0] == 1


def test_small_blocks_skip_the_pivoted_cholesky_with_the_same_null_space(monkeypatch):
    """Blocks up to 500 columns go straight to the eigendecomposition; null spaces equal the Cholesky-first path's."""
    import skillaudit.analysis.regression as attr

    rng = np.random.default_rng(3)
    grams = []
    for case in range(40):
        n, g = int(rng.integers(20, 200)), int(rng.integers(2, 60))
        Z = (rng.random((n, g)) < 0.1).astype(float)
        if case % 2:  # an exact alias: one column the sum of two others' disjoint rows
            Z[:, 0] = 0
            Z[: n // 2, 1], Z[n // 2:, 2] = 0, 0
            Z[:, 0] = Z[:, 1] + Z[:, 2]
        grams.append(Z.T @ Z)
    direct = [attr._null_space(gm) for gm in grams]
    monkeypatch.setattr(attr, "_EIGH_ONLY", 0)
    via_cholesky = [attr._null_space(gm) for gm in grams]
    for a, b in zip(direct, via_cholesky, strict=True):
        assert a.shape == b.shape and np.allclose(a, b)
    assert sum(a.shape[1] > 0 for a in direct) >= 15  # the aliased designs were found rank-deficient


def test_peeling_keeps_every_column_a_null_vector_uses():
    """Columns peeled off (alone among the candidates in some row) are zero in every null vector of the design."""
    from skillaudit.analysis.regression import _entangled

    rng = np.random.default_rng(21)
    peeled_some = 0
    for _ in range(60):
        n, g = int(rng.integers(3, 40)), int(rng.integers(2, 25))
        Z = (rng.random((n, g)) < rng.uniform(0.05, 0.4)).astype(float)
        for _ in range(int(rng.integers(0, 3))):  # plant sums of other columns
            a, b, c = rng.choice(g, 3, replace=False)
            Z[:, a] = np.minimum(Z[:, b] + Z[:, c], 1) * (Z[:, b] * Z[:, c] == 0)
        _, sv, vt = np.linalg.svd(Z)
        rank = int((sv > 1e-9).sum())
        used = np.linalg.norm(vt[rank:], axis=0) > 1e-8  # columns some null vector uses
        rows, cols = np.nonzero(Z)
        own = np.bincount(cols[np.bincount(rows, minlength=n)[rows] == 1], minlength=g) > 0
        cand = _entangled(rows, cols, ~own, n)
        assert not (used & ~cand).any()
        peeled_some += int((~own & ~cand).sum())
    assert peeled_some > 0  # the peeling itself ran, beyond the rows of one column


def test_separate_dependencies_in_one_block_get_their_own_aliases():
    """Two unrelated linear dependencies joined through a skill that is provably not entangled are reported apart."""
    names = ["A", "B", "C", "D", "E", "F", "K", "O"]
    rows = [["A", "B"], ["A", "C"], ["D", "E"], ["D", "F"], ["K", "O"], ["O"], ["K", "A", "B"], ["K", "D", "E"]]
    rows = rows * 3
    ix = {s: i for i, s in enumerate(names)}
    X = sp.csr_matrix((np.ones(sum(map(len, rows))),
                       (np.repeat(np.arange(len(rows)), [len(r) for r in rows]),
                        [ix[s] for r in rows for s in r])), shape=(len(rows), len(names)))
    fit = SkillEffectRegression(n_boot=0).fit(X, np.resize([1.0, -1.0, 0.0, 0.0], len(rows)))
    assert fit.identifiable_.tolist() == [False] * 6 + [True, True]
    aliases = {names[j]: {names[k] for k in fit.aliases_[j]} for j in range(6)}
    assert aliases == {"A": {"B", "C"}, "B": {"A", "C"}, "C": {"A", "B"},
                       "D": {"E", "F"}, "E": {"D", "F"}, "F": {"D", "E"}}



def _wide_design(seed: int = 5, n: int = 2400, p: int = 40):
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix((rng.random((n, p)) < 0.12).astype(float))
    X = X[np.asarray(X.sum(axis=1)).ravel() > 0]
    beta = rng.normal(0, 0.1, p)
    y = np.clip(np.rint(X @ beta + rng.normal(0, 0.6, X.shape[0])), -1, 1)
    groups = np.arange(X.shape[0]) // 3
    return X, y, groups


def test_sandwich_fast_paths_equal_statsmodels_cluster_robust_ols(monkeypatch):
    """With a vanishing ridge the sandwich SEs (diagonal from potri + sparse scores) and the lean CG
    operator equal statsmodels' task-clustered OLS covariance times G/(G-1)."""
    sm = pytest.importorskip("statsmodels.api")
    import skillaudit.analysis.regression as regression_module
    from skillaudit.analysis.regression import SkillEffectRegression

    X, y, groups = _wide_design()
    monkeypatch.setattr(regression_module, "_MAX_BOOT_SKILLS", 5)
    alpha = 1e-9
    full = SkillEffectRegression(alpha=alpha, n_boot=2000).fit(X, y, groups)
    lean = SkillEffectRegression(alpha=alpha, n_boot=2000, skill_intervals=False).fit(X, y, groups)
    assert full.interval_method_ == lean.interval_method_ == "sandwich"
    assert full.identifiable_.all() and np.isnan(lean.coef_ci_).all()
    ols = sm.OLS(y, X.toarray()).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    n_units = np.unique(groups).size
    cov = np.asarray(ols.cov_params()) * n_units / (n_units - 1)
    np.testing.assert_allclose(full.coef_, ols.params, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(lean.coef_, ols.params, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(full.group_cov_.diag(), np.diag(cov), rtol=1e-6)
    z = 1.959963984540054
    np.testing.assert_allclose(full.coef_ci_[:, 1] - full.coef_, z * np.sqrt(np.diag(cov)), rtol=1e-6)
    w = np.linspace(-1, 1, X.shape[1])
    np.testing.assert_allclose(full.group_cov_.times(w), cov @ w, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(lean.group_cov_.times(w), cov @ w, rtol=1e-6, atol=1e-12)
    with pytest.raises(ValueError, match="without its diagonal"):
        lean.group_cov_.diag()


def test_sandwich_diagonal_equals_the_dense_formula_with_a_ridge(monkeypatch):
    """With alpha = 1 the per-skill variances equal diag(A^-1 M A^-1) formed densely, A = X'X + I."""
    import skillaudit.analysis.regression as regression_module
    from skillaudit.analysis.regression import SkillEffectRegression

    X, y, groups = _wide_design(seed=9)
    monkeypatch.setattr(regression_module, "_MAX_BOOT_SKILLS", 5)
    reg = SkillEffectRegression(alpha=1.0, n_boot=2000).fit(X, y, groups)
    D = X.toarray()
    A = D.T @ D + np.eye(D.shape[1])
    coef = np.linalg.solve(A, D.T @ y)
    resid = y - D @ coef
    S = np.zeros((np.unique(groups).size, D.shape[1]))
    np.add.at(S, groups, D * resid[:, None])
    a_inv = np.linalg.inv(A)
    g = S.shape[0]
    want = np.diag(a_inv @ (S.T @ S) @ a_inv) * g / (g - 1)
    np.testing.assert_allclose(reg.coef_, coef, rtol=1e-10)
    np.testing.assert_allclose(reg.group_cov_.diag(), want, rtol=1e-10)


def test_dense_factorisations_use_one_blas_thread():
    """Inside the factorisation context BLAS has one thread (results independent of -j and cores); outside, its setting is unchanged."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    from skillaudit.analysis.regression import one_blas_thread

    before = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    with one_blas_thread():
        inside = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert inside and set(inside) == {1}
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"] == before


def test_sandwich_diagonal_in_column_blocks_and_row_chunks_equals_the_dense_product():
    """_diag_of_sandwich (64-column blocks of A^-1, row chunks of S) equals diag(A^-1 S'S A^-1) formed densely, also when S spans several row chunks and g is not a multiple of 64."""
    import scipy.sparse as sp

    from skillaudit.analysis.regression import _diag_of_sandwich

    rng = np.random.default_rng(0)
    for n_units, g in ((50, 7), (40_000, 131)):
        S = sp.random(n_units, g, density=min(1.0, 4 / g), random_state=1, format="csr")
        B = rng.standard_normal((g, g))
        a_inv = np.linalg.inv(B @ B.T / g + np.eye(g))
        a_inv = (a_inv + a_inv.T) / 2
        dense = a_inv @ (S.T @ S).toarray() @ a_inv
        np.testing.assert_allclose(_diag_of_sandwich(S, a_inv), np.diag(dense), rtol=1e-10, atol=1e-12)


def test_merged_design_without_merges_is_x_without_its_empty_columns():
    """With no identical columns, _merge_columns (its direct path) equals X's non-empty columns in order; with identical ones it equals the one-hot product path."""
    import scipy.sparse as sp

    from skillaudit.analysis.regression import _identical_columns, _merge_columns

    rng = np.random.default_rng(4)
    for merged in (False, True):
        dense = (rng.random((300, 40)) < 0.08).astype(float)
        dense[:, 7] = 0  # an empty column
        if merged:
            dense[:, 12] = dense[:, 3]
        X = sp.csr_matrix(dense)
        members, col_group = _identical_columns(X, np.asarray(X.sum(axis=0)).ravel().astype(int))
        Z = _merge_columns(X, col_group, len(members))
        want = np.column_stack([dense[:, cols[0]] for cols in members])
        np.testing.assert_array_equal(Z.toarray(), want)
        assert merged or Z.has_sorted_indices  # the direct path keeps rows sorted


def test_batched_contrast_variances_equal_the_conjugate_gradient_ones():
    """`SandwichCov.difference_vars`: one dense inverse for many merge contrasts gives what two
    conjugate-gradient solves per contrast give (`times`), within the solver's tolerance."""
    from skillaudit.analysis.regression import SandwichCov, _CgSolve

    rng = np.random.default_rng(7)
    n, g, units = 3000, 120, 900
    Z = sp.random(n, g, density=0.02, random_state=11, data_rvs=lambda k: np.ones(k), format="csr")
    gram = Csr.of((Z.T @ Z).tocsr())
    unit = rng.integers(0, units, n)
    resid = rng.normal(size=n)
    agg = sp.csr_matrix((np.ones(n), (unit, np.arange(n))), shape=(units, n))
    scores = (agg @ Z.multiply(resid[:, None]).tocsr()).tocsr()
    cov = SandwichCov(_CgSolve(gram, 1.0), scores, units / (units - 1), None)
    pairs = np.array([(a, b) for a, b in rng.integers(0, g, (40, 2)).tolist() if a != b])
    batched = cov.difference_vars(pairs)
    one_by_one = []
    for a, b in pairs.tolist():
        w = np.zeros(g)
        w[a], w[b] = 1.0, -1.0
        one_by_one.append(float(w @ cov.times(w)))
    assert pairs.shape[0] >= SandwichCov.BATCH_MIN and np.allclose(batched, one_by_one, rtol=1e-8, atol=1e-14)
