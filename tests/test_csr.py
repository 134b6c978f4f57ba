"""The numpy CSR matrix behind `rank` against scipy.sparse."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import skillaudit.stats._csr as csr_mod
from skillaudit.stats._csr import Csr


def _random(rng: np.random.Generator, n: int, p: int, density: float, ones: bool = True) -> sp.csr_matrix:
    m = sp.random(n, p, density=density, format="csr", random_state=int(rng.integers(1 << 30)))
    if ones:
        m.data[:] = 1.0
    else:
        m.data = rng.normal(size=m.nnz)
    m.sort_indices()
    return m


def _same(a: Csr, b: sp.csr_matrix) -> bool:
    b = b.tocsr()
    b.sort_indices()
    return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
            and np.array_equal(a.data, b.data))


@pytest.mark.parametrize("ones", [True, False])
def test_gram_equals_scipys_product_entry_for_entry(ones):
    """X'X has scipy's pattern and values, sorted, for 0/1 and real-valued X, with or without chunking."""
    rng = np.random.default_rng(0)
    for _ in range(40):
        m = _random(rng, int(rng.integers(0, 300)), int(rng.integers(1, 60)), float(rng.uniform(0, 0.2)), ones)
        ref = (m.T @ m).tocsr()
        ref.eliminate_zeros()
        got = Csr.of(m).gram()
        if ones:
            assert _same(got, ref)
        else:  # sums of products in another order: equal to rounding
            ref.sort_indices()
            assert np.array_equal(got.indices, ref.indices) and np.array_equal(got.indptr, ref.indptr)
            assert np.allclose(got.data, ref.data, rtol=1e-12, atol=1e-12)


def test_gram_in_small_chunks_is_the_same(monkeypatch):
    """Pairing rows a few at a time and merging the chunks gives the one-pass X'X."""
    rng = np.random.default_rng(1)
    m = _random(rng, 500, 40, 0.1)
    whole = Csr.of(m).gram()
    monkeypatch.setattr(csr_mod, "_GRAM_CHUNK", 7)
    parts = Csr.of(m).gram()
    assert _same(parts, whole.to_scipy()) and _same(whole, (m.T @ m).tocsr())


def test_gram_counts_a_repeated_cell_as_scipy_does():
    """A row listing a column twice contributes (1 + 1)^2 to the diagonal, like scipy's product."""
    m = sp.csr_matrix((np.ones(4), np.array([0, 0, 1, 1]), np.array([0, 2, 3, 4])), shape=(3, 2))
    x = Csr.of(m)
    assert not x.is_canonical()
    assert x.gram().toarray().tolist() == (m.T @ m).toarray().tolist() == [[4.0, 0.0], [0.0, 2.0]]


def test_products_rows_and_submatrices_match_scipy():
    """matvec, rmatvec (bit for bit), take_rows, take, diagonal, row and toarray equal scipy's."""
    rng = np.random.default_rng(2)
    for _ in range(30):
        n, p = int(rng.integers(1, 200)), int(rng.integers(1, 50))
        m = _random(rng, n, p, float(rng.uniform(0.01, 0.3)), ones=False)
        x = Csr.of(m)
        v, u = rng.normal(size=p), rng.normal(size=n)
        assert np.allclose(x.matvec(v), m @ v, rtol=1e-13, atol=1e-13)
        assert np.array_equal(x.rmatvec(u), m.T @ u)
        idx = rng.integers(0, n, size=int(rng.integers(0, 2 * n)))
        assert _same(x.take_rows(idx), m[idx])
        assert np.array_equal(x.toarray(), m.toarray())
        i = int(rng.integers(0, n))
        assert np.array_equal(x.row(i), m[[i]].toarray().ravel())
        g = Csr.of(m.T @ m)
        keep = np.flatnonzero(rng.random(p) < 0.6)
        assert np.array_equal(g.take(keep).toarray(), (m.T @ m)[keep][:, keep].toarray())
        assert np.array_equal(g.diagonal(), (m.T @ m).diagonal())
        assert x.row_index().tolist() == np.repeat(np.arange(n), np.diff(m.indptr)).tolist()


def test_plus_diagonal_with_and_without_stored_diagonal_cells():
    """X + alpha I equals scipy's sum whether or not every diagonal cell is stored."""
    full = sp.csr_matrix(np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 1.0]]))
    gappy = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 0.0]]))
    for m in (full, gappy):
        want = (m + 0.5 * sp.identity(3, format="csr")).toarray()
        assert np.array_equal(Csr.of(m).plus_diagonal(0.5).toarray(), want)


def test_constructors_read_dense_scipy_and_coordinates():
    """of() reads dense arrays and scipy matrices; from_coo sorts columns and sums repeated cells."""
    dense = np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]])
    assert np.array_equal(Csr.of(dense).toarray(), dense)
    assert _same(Csr.of(dense), sp.csr_matrix(dense))
    assert _same(Csr.of(sp.csc_matrix(dense)), sp.csr_matrix(dense))
    c = Csr.from_coo(np.array([1, 0, 1, 1]), np.array([2, 1, 0, 2]), np.array([1.0, 2.0, 1.0, 2.0]), (2, 3))
    assert c.is_canonical() and c.toarray().tolist() == dense.tolist()
    with pytest.raises(ValueError, match="2-D"):
        Csr.of(np.ones(3))
    with pytest.raises(ValueError, match="increasing"):
        Csr.of(dense[:, :2].T @ dense[:, :2]).take(np.array([1, 0]))


def test_empty_matrices():
    """Matrices without rows, columns or entries have empty products rather than errors."""
    for shape in ((0, 0), (0, 4), (5, 3)):
        x = Csr.of(np.zeros(shape))
        assert x.nnz == 0 and x.gram().shape == (shape[1], shape[1]) and x.gram().nnz == 0
        assert x.matvec(np.ones(shape[1])).tolist() == [0.0] * shape[0]
        assert x.rmatvec(np.ones(shape[0])).tolist() == [0.0] * shape[1]
