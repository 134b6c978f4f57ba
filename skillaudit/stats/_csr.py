"""A compressed-sparse-row matrix in plain numpy, with the few operations `rank` needs.

scipy.sparse costs a quarter of a second to import (it clones the numpy namespace, which loads
numpy.f2py, numpy.testing, numpy.ma and numpy.random), as long as `rank` itself takes on a
200,000-pair log. The pair x skill retrieval matrix and the skill x skill co-retrieval matrix
therefore live in this class; anything beyond it converts with `to_scipy()`.

`rmatvec` sums in the order scipy's CSR kernel does (entries in stored order), so it returns
scipy's result bit for bit; `matvec` sums each row with numpy's reduction (faster; equal to
scipy's within rounding).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# X'X sorts and counts its (column, column) keys in batches of about this many
_GRAM_CHUNK = 1 << 23


class Csr:
    """`shape` matrix with the entries of row i at `data[indptr[i]:indptr[i + 1]]` (columns in `indices`)."""

    __slots__ = ("data", "indices", "indptr", "shape")

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> None:
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.shape = (int(shape[0]), int(shape[1]))

    def __repr__(self) -> str:
        return f"<Csr {self.shape[0]}x{self.shape[1]}, {self.nnz} stored entries>"

    # ------------------------------------------------------------ construction
    @classmethod
    def from_coo(cls, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> Csr:
        """Canonical CSR (columns sorted within rows, duplicates summed) from coordinate triples."""
        key, data = _sum_by_key(np.asarray(rows, dtype=np.int64) * shape[1] + np.asarray(cols, dtype=np.int64),
                                np.asarray(vals))
        r = key // max(shape[1], 1)
        return cls(data, (key - r * shape[1]).astype(np.int32), indptr_of(r, shape[0]), shape)

    @classmethod
    def of(cls, x: Any, dtype: Any = np.float64) -> Csr:
        """A Csr of `x`: a Csr, a scipy sparse matrix or array, or anything numpy reads as 2-D."""
        if isinstance(x, Csr):
            return x if x.data.dtype == dtype else cls(x.data.astype(dtype), x.indices, x.indptr, x.shape)
        if hasattr(x, "tocsr"):  # scipy.sparse: already imported by whoever made it
            m = x.tocsr()
            return cls(m.data.astype(dtype, copy=False), m.indices, m.indptr, m.shape)
        a = np.asarray(x, dtype=dtype)
        if a.ndim != 2:
            raise ValueError(f"expected a 2-D matrix, got {a.ndim} dimension(s)")
        rows, cols = np.nonzero(a)
        return cls(a[rows, cols], cols.astype(np.int32), indptr_of(rows, a.shape[0]), a.shape)

    def to_scipy(self) -> Any:
        """The same matrix as a scipy.sparse.csr_matrix (sharing the arrays)."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def with_data(self, data: np.ndarray) -> Csr:
        """Same pattern, new values."""
        return Csr(data, self.indices, self.indptr, self.shape)

    # ------------------------------------------------------------ structure
    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def row_index(self) -> np.ndarray:
        """The row of every stored entry."""
        return np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))

    def is_canonical(self) -> bool:
        """Columns strictly increasing within every row (sorted, no cell stored twice)."""
        if self.nnz < 2:
            return True
        step = np.diff(self.indices.astype(np.int64))
        row_start = np.zeros(self.nnz, dtype=bool)
        row_start[self.indptr[:-1][np.diff(self.indptr) > 0]] = True
        return bool(np.all((step > 0) | row_start[1:]))

    def row_entries(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the rows `idx` (in that order): their indptr, and the positions of their entries here."""
        idx = np.asarray(idx, dtype=np.int64)
        lengths = np.diff(self.indptr)[idx]
        indptr = np.zeros(idx.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return indptr, np.repeat(self.indptr[:-1][idx] - indptr[:-1], lengths) + np.arange(indptr[-1])

    def take_rows(self, idx: np.ndarray) -> Csr:
        """The rows `idx` (in that order)."""
        indptr, pos = self.row_entries(idx)
        return Csr(self.data[pos], self.indices[pos], indptr, (indptr.size - 1, self.shape[1]))

    def take(self, keep: np.ndarray) -> Csr:
        """The square submatrix of rows and columns `keep` (increasing), renumbered 0..len(keep)-1."""
        keep = np.asarray(keep, dtype=np.int64)
        if keep.size > 1 and np.any(np.diff(keep) <= 0):
            raise ValueError("take() needs strictly increasing indices")
        new = np.full(self.shape[1], -1, dtype=np.int64)
        new[keep] = np.arange(keep.size)
        sub = self.take_rows(keep)
        cols = new[sub.indices]
        ok = cols >= 0
        return Csr(sub.data[ok], cols[ok].astype(np.int32), indptr_of(sub.row_index()[ok], keep.size),
                   (keep.size, keep.size))

    def row(self, i: int) -> np.ndarray:
        """Row i as a dense vector."""
        out = np.zeros(self.shape[1], dtype=self.data.dtype)
        s, e = self.indptr[i], self.indptr[i + 1]
        np.add.at(out, self.indices[s:e], self.data[s:e])
        return out

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=self.data.dtype)
        np.add.at(out, (self.row_index(), self.indices), self.data)
        return out

    def diagonal(self) -> np.ndarray:
        out = np.zeros(min(self.shape), dtype=self.data.dtype)
        r = self.row_index()
        on = r == self.indices
        np.add.at(out, r[on], self.data[on])
        return out

    # ------------------------------------------------------------ arithmetic
    def matvec(self, v: np.ndarray) -> np.ndarray:
        """X @ v for a vector v."""
        prod = self.data * v[self.indices]
        starts = self.indptr[:-1]
        if starts.size and np.all(starts < self.indptr[1:]):  # no empty row: one segment each
            return np.add.reduceat(prod, starts).astype(np.float64, copy=False)
        return np.bincount(self.row_index(), weights=prod, minlength=self.shape[0])

    def rmatvec(self, v: np.ndarray) -> np.ndarray:
        """X' @ v for a vector v."""
        return np.bincount(self.indices, weights=self.data * v[self.row_index()], minlength=self.shape[1])

    def plus_diagonal(self, alpha: float) -> Csr:
        """X + alpha I for a square X."""
        n = self.shape[0]
        r = self.row_index()
        on = np.flatnonzero(r == self.indices)
        if on.size == n and np.array_equal(r[on], np.arange(n)):  # every diagonal cell stored once
            data = self.data.astype(np.float64, copy=True)
            data[on] += alpha
            return Csr(data, self.indices, self.indptr, self.shape)
        return Csr.from_coo(np.r_[r, np.arange(n)], np.r_[self.indices, np.arange(n)],
                            np.r_[self.data.astype(np.float64), np.full(n, float(alpha))], self.shape)

    def gram(self) -> Csr:
        """X'X in canonical form, explicit zeros dropped: scipy's (X.T @ X) with its entries sorted.

        Rows of the same length L are taken together as an (rows x L) block of columns, which
        broadcasts into their L x L (column, column) keys; the keys are sorted and counted in
        batches of about _GRAM_CHUNK, so memory follows the pairs, not p^2.
        """
        p = self.shape[1]
        ones = bool(np.all(self.data == 1))
        key_type = np.int32 if p * p < 2**31 else np.int64
        lengths = np.diff(self.indptr)
        done_k: list[np.ndarray] = []
        done_v: list[np.ndarray] = []
        held_k: list[np.ndarray] = []
        held_v: list[np.ndarray] = []

        def reduce() -> None:
            if held_k:
                k, v = _count_keys(np.concatenate(held_k), None if ones else np.concatenate(held_v))
                done_k.append(k)
                done_v.append(v)
                held_k.clear()
                held_v.clear()

        held = 0
        for length in np.unique(lengths[lengths > 0]).tolist():
            rows = np.flatnonzero(lengths == length)
            step = max(_GRAM_CHUNK // (length * length), 1)
            for s in range(0, rows.size, step):
                at = self.indptr[rows[s : s + step], None] + np.arange(length)
                cols = self.indices[at].astype(key_type)
                held_k.append((cols[:, :, None] * key_type(p) + cols[:, None, :]).ravel())
                if not ones:
                    w = self.data[at].astype(np.float64)
                    held_v.append((w[:, :, None] * w[:, None, :]).ravel())
                held += held_k[-1].size
                if held >= _GRAM_CHUNK:
                    reduce()
                    held = 0
        reduce()
        if len(done_k) == 1:
            key, val = done_k[0], done_v[0]
        elif done_k:
            key, val = _count_keys(np.concatenate(done_k), np.concatenate(done_v))
        else:
            key, val = np.zeros(0, key_type), np.zeros(0)
        keep = val != 0
        key, val = key[keep], val[keep]
        rows_of = key // p
        return Csr(val, (key - rows_of * p).astype(np.int32), indptr_of(rows_of, p), (p, p))


def indptr_of(rows: np.ndarray, n_rows: int) -> np.ndarray:
    """The indptr of a CSR matrix whose entries, in row order, lie in `rows`."""
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    return indptr


def _run_starts(sorted_key: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins in a sorted array."""
    head = np.ones(sorted_key.size, dtype=bool)
    head[1:] = sorted_key[1:] != sorted_key[:-1]
    return np.flatnonzero(head)


def _count_keys(key: np.ndarray, val: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and, per key, how often it occurs (val None) or the sum of its values."""
    if val is None:
        key = np.sort(key)
        at = _run_starts(key)
        return key[at], np.diff(np.r_[at, key.size]).astype(np.float64)
    return _sum_by_key(key, val)


def _sum_by_key(key: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and the sums of their values."""
    order = np.argsort(key, kind="stable")
    key = key[order]
    at = _run_starts(key)
    return key[at], (np.add.reduceat(val[order], at) if at.size else val[:0])
