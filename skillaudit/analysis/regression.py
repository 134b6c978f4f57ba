"""The per-skill effect estimator: ridge regression of flips on the pair x skill retrieval matrix.

A coefficient is a skill's additive effect on the flip rate of the pairs that retrieved it (the
same units as rae_k; no intercept, so "no effect" is 0). Everything about identifiability lives
here: identical columns (skills never retrieved apart) are merged and reported as aliases with a
joint coefficient; a column that is a combination of others (the null space of Z'Z, computed per
connected block after peeling columns that stand alone in some row) gets no coefficient. Intervals
come from a task-level bootstrap (each task with all its epochs is one unit), or for libraries too
wide to resample from a task-clustered sandwich covariance.

Without a bootstrap nothing here imports scipy: the matrices are `_csr.Csr`, and scipy is imported
only by the interval computations and for large blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from skillaudit.stats import bootstrap_totals, unit_sums
from skillaudit.stats._csr import Csr, indptr_of

if TYPE_CHECKING:
    import scipy.sparse as sp
# Above this many cells (units x groups^2) the bootstrap loops over resamples instead of
# resampling per-unit Gram matrices in one product.
_MAX_GRAM_CELLS = 30_000_000
# Above this many (merged) skill columns the regression interval is a sandwich, not a bootstrap:
# each resample would need its own dense solve.
_MAX_BOOT_SKILLS = 300
#: a coefficient's interval needs this many distinct tasks retrieving the skill (below it the
#: resamples cannot vary: one task gives a zero-width interval)
MIN_INTERVAL_TASKS = 5


def _distinct_groups_per_column(row_groups: np.ndarray, cols: np.ndarray, g: int) -> np.ndarray:
    """How many distinct groups (tasks) hold each of g columns, from the (group, column) of every entry."""
    if not cols.size:
        return np.zeros(g, dtype=np.int64)
    _, inv = np.unique(row_groups, return_inverse=True)
    key = np.unique(cols.astype(np.int64) * (int(inv.max()) + 1) + inv.ravel())
    return np.bincount(key // (int(inv.max()) + 1), minlength=g).astype(np.int64)


class SkillEffectRegression:
    """Ridge regression of flips on a binary pair x skill retrieval matrix, with aliases and CIs.

    `fit(X, y, groups)`: X (n x p, sparse or dense 0/1), y the flips, groups the bootstrap unit of
    each row (a task with all its epochs). Columns that are identical (skills never retrieved
    apart) are merged before fitting; their members get no individual coefficient (`coef_` NaN,
    `identifiable_` False) and share `alias_coef_`, the estimate of their joint effect. Columns
    that are a linear combination of other merged columns are likewise not identifiable.

    Attributes after fit: `coef_` (p,), `coef_ci_` (p x 2), `coef_p_` (p,) two-sided bootstrap
    p-values, `identifiable_` (p,) bool, `aliases_` list of index arrays per column (other columns
    it cannot be told apart from), `alias_coef_` (p,), `alias_coef_ci_` (p x 2),
    `boot_coef_` (n_boot x p) resampled coefficients, `gram_` X'X (p x p `Csr`, the co-occurrence
    counts of the columns over the rows fitted; `.to_scipy()` gives a scipy matrix).
    The point estimate is the ridge solution (Z'Z + alpha I)^-1 Z'y on the merged columns, the
    same as `sklearn.linear_model.Ridge(alpha, fit_intercept=False)`, from one dense solve
    (conjugate gradients on the sparse Gram matrix for wide designs without resampling; a
    Cholesky factorisation when the sandwich interval reuses it); each bootstrap resample solves
    the same normal equations with task multiplicities as sample weights, all resamples in one
    batched solve. The class follows the scikit-learn estimator conventions without importing
    scikit-learn (a second of start-up).
    """

    _param_names = ("alpha", "n_boot", "level", "random_state", "skill_intervals")

    def __init__(self, alpha: float = 1.0, n_boot: int = 2000, level: float = 0.95,
                 random_state: int | None = 0, skill_intervals: bool = True) -> None:
        self.alpha = alpha
        self.n_boot = n_boot
        self.level = level
        self.random_state = random_state
        # False: a wide design gets only what library-level figures need (the sandwich operator
        # `group_cov_.times`, by conjugate gradients), not the per-skill intervals (its diagonal)
        self.skill_intervals = skill_intervals

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._param_names}

    def set_params(self, **params: Any) -> SkillEffectRegression:
        for k, v in params.items():
            if k not in self._param_names:
                raise ValueError(f"invalid parameter {k!r} for SkillEffectRegression")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return (f"SkillEffectRegression(alpha={self.alpha!r}, n_boot={self.n_boot!r}, level={self.level!r}, "
                f"random_state={self.random_state!r}, skill_intervals={self.skill_intervals!r})")

    def fit(self, X: Any, y: Any, groups: Any = None) -> SkillEffectRegression:
        X = Csr.of(X)
        X = X.with_data(np.ones(X.nnz))
        y = np.asarray(y, dtype=np.float64).ravel()
        n, p = X.shape
        if y.shape[0] != n:
            raise ValueError("X and y have different numbers of rows")
        groups = np.arange(n) if groups is None else np.asarray(groups).ravel()
        self.n_features_in_ = p
        self.interval_method_: str | None = None
        self.group_cov_: SandwichCov | None = None

        # X'X is the one n-row product: it shows which columns are identical, restricted to one
        # column per group it is the merged design's Gram matrix Z'Z, and `attribute` reuses it as
        # the co-retrieval counts. A row listing a column twice (non-canonical X) spoils the first
        # two, so such an X goes through the merged design Z as before.
        gram = X.gram()
        self.gram_ = gram
        exact = X.is_canonical()
        if exact:
            members, col_group = _identical_columns_of(gram)
        else:
            members, col_group = _identical_columns(X.to_scipy(), np.bincount(X.indices, minlength=p))
        g = len(members)
        Z = None if exact else _merge_columns(X.to_scipy(), col_group, g)

        coef_g, ci_g, p_g, est_g, group_n, boot_g, null, Z = self._fit_merged(X, y, groups, gram, members,
                                                                               col_group, Z)
        self.n_groups_ = g
        # the merged design, for what is computed over all of it (library means, relative effects)
        self.col_group_ = col_group
        self.group_coef_ = coef_g
        self.group_boot_ = boot_g
        self.group_estimable_ = est_g
        self.group_size_ = np.bincount(col_group[col_group >= 0], minlength=g) if g else np.zeros(0, np.int64)
        self.group_n_ = group_n

        coef, ci, pv, ident, aliases, alias_coef, alias_ci, boot = self._per_column(
            p, members, col_group, null, coef_g, ci_g, p_g, est_g, boot_g, bool(g and n))
        self.coef_ = coef
        self.coef_ci_ = ci
        self.coef_p_ = pv
        self.identifiable_ = ident
        self.aliases_ = aliases
        self.alias_coef_ = alias_coef
        self.alias_coef_ci_ = alias_ci
        self.boot_coef_ = boot
        return self

    def _fit_merged(self, X: Csr, y: np.ndarray, groups: np.ndarray, gram: Csr, members: list, col_group: np.ndarray,
                    Z: Any) -> tuple[Any, ...]:
        """Fit the merged design (one column per group of identical columns): its coefficients,
        intervals, p-values, which groups are estimable, their pair counts, the resamples, the
        null space and Z (made here when the intervals need it)."""
        n, p = X.shape
        g = len(members)
        null = None
        coef_g = np.full(g, np.nan)
        ci_g = np.full((g, 2), np.nan)
        p_g = np.full(g, np.nan)
        est_g = np.zeros(g, dtype=bool)
        group_n = np.zeros(g, dtype=np.int64)
        # each interval branch below sets its own resamples; a (n_boot x g) NaN block was 32 MB per fit
        boot_g = np.full((0 if (g and n) else max(self.n_boot, 0), g), np.nan)
        if g and n:
            if Z is None:
                zgram = _merged_gram(gram, members)
                has_own_row = _has_own_row(X, col_group, g)
                # Z'y: a merged column is each of its members' columns (same rows, same sum order)
                rhs = X.rmatvec(y)[[cols[0] for cols in members]]
                # Z's entries: X's entries in each group's first column
                head = np.zeros(p, dtype=bool)
                head[[cols[0] for cols in members]] = True
                on = head[X.indices]
                z_rows, z_cols = X.row_index()[on], col_group[X.indices[on]]
            else:
                zgram = Csr.of((Z.T @ Z).tocsr())
                single = np.diff(Z.indptr) == 1
                has_own_row = np.bincount(Z.indices[np.repeat(single, np.diff(Z.indptr))], minlength=g) > 0
                rhs = np.asarray(Z.T @ y).ravel()
                z_rows, z_cols = Csr.of(Z).row_index(), Z.indices
            group_n = np.rint(zgram.diagonal()).astype(np.int64)  # pairs retrieving each merged column
            # a column retrieved alone in some row is zero in every null vector of Z, and so is one
            # that is alone among the remaining candidates in some row: the rank check looks at the
            # columns left after peeling those off
            null = _null_space_of(zgram, np.flatnonzero(_entangled(z_rows, z_cols, ~has_own_row, n)))
            est_g = _estimable(null, g)
            factor = None
            wide = g > _MAX_BOOT_SKILLS
            lean = wide and self.n_boot > 0 and not self.skill_intervals and self.alpha > 0
            coef_cg = (_ridge_cg(zgram, rhs, self.alpha)
                       if wide and (self.n_boot <= 0 or lean) and self.alpha > 0 else None)
            if coef_cg is not None:
                coef_g = coef_cg
            elif self.alpha > 0:
                # Z'Z + alpha I in place: a 2,000-skill library holds one g x g matrix, not four
                dense = zgram.toarray()
                dense.flat[:: g + 1] += self.alpha
                if wide and self.n_boot > 0:  # the sandwich interval reuses the factor
                    from scipy import linalg

                    with one_blas_thread():
                        # dense is symmetric: its transpose is the same matrix in LAPACK's (Fortran)
                        # order, so the factorisation works in place instead of in a fresh 32 MB
                        # copy (first-touch page faults: ~0.1 s per model at 2,000 skills)
                        factor = linalg.cho_factor(dense.T, lower=True, overwrite_a=True, check_finite=False)
                    coef_g = linalg.cho_solve(factor, rhs, check_finite=False)
                else:
                    coef_g = np.linalg.solve(dense, rhs)
            else:  # least squares; a rank-deficient design gets the minimum-norm solution
                coef_g = np.linalg.lstsq(zgram.toarray(), rhs, rcond=None)[0]
            if self.n_boot > 0 and Z is None:
                Z = _merge_columns(X.to_scipy(), col_group, g)
            if self.n_boot > 0 and wide and factor is not None:
                # too wide for resampling: cluster-robust (task-level) sandwich interval instead
                with one_blas_thread():
                    ci_g, p_g, self.group_cov_ = _sandwich(Z, y, groups, coef_g, self.level, factor=factor,
                                                           gram=zgram, alpha=self.alpha)
                boot_g = np.full((0, g), np.nan)
                self.interval_method_ = "sandwich"
            elif self.n_boot > 0 and wide and coef_cg is not None:
                # lean: the sandwich as an operator (CG solves on the sparse Gram matrix), no diagonal
                ci_g, p_g, self.group_cov_ = _sandwich(Z, y, groups, coef_g, self.level,
                                                       gram=zgram, alpha=self.alpha)
                boot_g = np.full((0, g), np.nan)
                self.interval_method_ = "sandwich"
            elif self.n_boot > 0:
                boot_g = self._bootstrap(Z, y, groups)
                ci_g = _percentile(boot_g, self.level)
                p_g = _boot_p(boot_g)
                self.interval_method_ = "bootstrap"
            if self.interval_method_ is not None:
                # tasks (resampling units) retrieving each merged column: an interval resampled or
                # sandwiched over fewer than MIN_INTERVAL_TASKS of them has (nearly) nothing to vary
                # over (one task: every resample is that task, a zero-width interval), so none is given
                few = (_distinct_groups_per_column(groups[z_rows], z_cols, g) < MIN_INTERVAL_TASKS) | \
                    ~(ci_g[:, 1] > ci_g[:, 0])
                ci_g[few] = np.nan
                p_g[few] = np.nan  # the test beside it goes with it
        return coef_g, ci_g, p_g, est_g, group_n, boot_g, null, Z

    @staticmethod
    def _per_column(p: int, members: list, col_group: np.ndarray, null: Any, coef_g: np.ndarray, ci_g: np.ndarray,
                    p_g: np.ndarray, est_g: np.ndarray, boot_g: np.ndarray, fitted: bool) -> tuple[Any, ...]:
        """The merged fit spread back over the original columns: a column alone in its group and
        estimable gets its group's estimate; the others are aliases with a joint effect."""
        g = len(members)
        coef = np.full(p, np.nan)
        ci = np.full((p, 2), np.nan)
        pv = np.full(p, np.nan)
        ident = np.zeros(p, dtype=bool)
        alias_coef = np.full(p, np.nan)
        alias_ci = np.full((p, 2), np.nan)
        aliases: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(p)]
        boot = np.full((boot_g.shape[0], p), np.nan)
        if fitted:
            # whole-array copies from the merged columns; Python only for merged or entangled ones
            dependent = _dependent_sets(null, est_g)
            grp = np.maximum(col_group, 0)
            used = col_group >= 0
            size = np.bincount(col_group[used], minlength=g)
            alone = used & ((size == 1) & est_g)[grp]
            joint = used & ~alone & est_g[grp]
            coef[alone], ci[alone], pv[alone] = coef_g[grp[alone]], ci_g[grp[alone]], p_g[grp[alone]]
            ident[alone] = True
            boot[:, alone] = boot_g[:, grp[alone]]
            alias_coef[joint], alias_ci[joint] = coef_g[grp[joint]], ci_g[grp[joint]]
            for gi in set(np.flatnonzero(size > 1).tolist()) | set(dependent):
                cols = members[gi]
                for j in cols:
                    others = [k for k in cols if k != j]
                    for gj in dependent.get(gi, ()):
                        others.extend(members[gj])
                    aliases[j] = np.array(sorted(set(others)), dtype=np.int64)
        return coef, ci, pv, ident, aliases, alias_coef, alias_ci, boot

    def predict(self, X: Any) -> np.ndarray:
        """Additive flip prediction sum_k coef_k over retrieved skills (aliases: joint effect)."""
        X = Csr.of(X)
        w = np.where(self.identifiable_, self.coef_, 0.0)
        return X.with_data(np.ones(X.nnz)).matvec(np.nan_to_num(w))

    def score(self, X: Any, y: Any) -> float:
        """Coefficient of determination R^2 of `predict(X)` against `y` (scikit-learn's regressor score)."""
        y = np.asarray(y, dtype=np.float64).ravel()
        ss_tot = float(((y - y.mean()) ** 2).sum())
        ss_res = float(((y - self.predict(X)) ** 2).sum())
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0

    def _bootstrap(self, Z: sp.csr_matrix, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Coefficients of `n_boot` task-level resamples (n_boot x groups)."""
        import scipy.sparse as sp

        n, g = Z.shape
        _, unit = np.unique(groups, return_inverse=True)
        unit = unit.ravel()
        n_units = int(unit.max()) + 1
        rng = np.random.default_rng(self.random_state)
        eye = self.alpha * np.eye(g)
        if n_units * g * g <= _MAX_GRAM_CELLS:
            kr = _row_kron(Z)  # n x g^2: vec(z_i z_i')
            agg = sp.csr_matrix((np.ones(n), (unit, np.arange(n))), shape=(n_units, n))
            per_unit = np.hstack([(agg @ kr).toarray(), unit_sums(unit, (Z.multiply(y[:, None])).toarray(), n_units)])
            totals = bootstrap_totals(per_unit, self.n_boot, rng)
            grams = totals[:, : g * g].reshape(-1, g, g) + eye
            rhs = totals[:, g * g :]
            return _solve(grams, rhs)
        out = np.empty((self.n_boot, g))
        for bi in range(self.n_boot):
            m = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units)).astype(np.float64)
            w = m[unit]
            Zw = Z.multiply(w[:, None]).tocsr()
            out[bi] = _solve((Z.T @ Zw).toarray()[None] + eye, (Zw.T @ y)[None])[0]
        return out


def _solve(grams: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(grams, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:  # alpha = 0 and a resample lost a column: least squares
        return np.stack([np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(grams, rhs, strict=True)])


def _row_kron(Z: sp.csr_matrix) -> sp.csr_matrix:
    """Row-wise Kronecker product: row i is vec(z_i z_i') for the rows z_i of a 0/1 CSR matrix."""
    import scipy.sparse as sp

    n, g = Z.shape
    counts = np.diff(Z.indptr)
    rows = np.repeat(np.arange(n), counts * counts)
    # for each nonzero j of row i, pair it with every nonzero of the same row
    first = np.repeat(np.arange(Z.nnz), np.repeat(counts, counts))
    start = np.repeat(Z.indptr[:-1], counts * counts)
    pos_in_row = np.arange(rows.size) - np.repeat(np.cumsum(counts * counts) - counts * counts, counts * counts)
    second = start + pos_in_row % np.repeat(np.maximum(counts, 1), counts * counts)
    cols = Z.indices[first] * g + Z.indices[second]
    return sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, g * g))


def _merge_columns(X: sp.csr_matrix, col_group: np.ndarray, g: int) -> sp.csr_matrix:
    """The merged design Z: one 0/1 column per group of identical (non-empty) columns of X."""
    import scipy.sparse as sp

    p = X.shape[1]
    used = col_group >= 0
    if g and np.array_equal(np.bincount(col_group[used], minlength=g), np.ones(g, dtype=np.int64)) \
            and X.has_canonical_format and bool(used[X.indices].all()):
        # no merges: Z is X with its empty columns dropped; groups are numbered in column order, so
        # renumbering keeps each row's indices sorted (16 fits of a 2,000-skill rank: 0.25 s saved)
        return sp.csr_matrix((np.ones(X.nnz), col_group[X.indices], X.indptr), shape=(X.shape[0], g))
    onehot = sp.csr_matrix(
        (np.ones(len(col_group)), (np.arange(p), np.maximum(col_group, 0))), shape=(p, max(g, 1))
    )
    onehot = onehot.multiply((col_group >= 0)[:, None]).tocsr()
    Z = (X @ onehot).tocsr()
    Z.data[:] = 1.0
    return Z


def _identical_columns_of(gram: Csr) -> tuple[list[list[int]], np.ndarray]:
    """`_identical_columns` from X'X of a canonical 0/1 X, without a pass per column.

    Columns a and b hold the same rows exactly when a'b = a'a = b'b.
    """
    p = gram.shape[0]
    n_col = gram.diagonal()
    row = np.repeat(np.arange(p), np.diff(gram.indptr))
    same = (gram.data == n_col[row]) & (gram.data == n_col[gram.indices]) & (row != gram.indices)
    first = np.arange(p)  # each column's first identical column (itself when it has none)
    np.minimum.at(first, row[same], gram.indices[same])
    col_group = np.full(p, -1, dtype=np.int64)
    used = np.flatnonzero(n_col > 0)
    heads, col_group[used] = np.unique(first[used], return_inverse=True)
    members: list[list[int]] = [[] for _ in range(heads.size)]
    for j, gi in zip(used.tolist(), col_group[used].tolist(), strict=True):
        members[gi].append(j)
    return members, col_group


def _has_own_row(X: Csr, col_group: np.ndarray, g: int) -> np.ndarray:
    """Bool per merged column: some row of canonical X retrieves it alone (a row of Z with one entry).

    A row holding one member of a group holds all of them (identical columns), so it holds that
    group alone exactly when its length is the group's size: one look per row, not per entry.
    """
    length = np.diff(X.indptr)
    nonempty = length > 0
    grp = col_group[X.indices[X.indptr[:-1][nonempty]]]  # the group of each row's first entry
    size = np.bincount(col_group[col_group >= 0], minlength=g)
    return np.bincount(grp[length[nonempty] == size[grp]], minlength=g) > 0


def _entangled(rows: np.ndarray, cols: np.ndarray, cand: np.ndarray, n_rows: int,
               max_rounds: int = 200) -> np.ndarray:
    """Columns of a 0/1 design (entries `rows`, `cols`) that can be nonzero in one of its null vectors.

    `cand`: the columns not yet known to be zero in every null vector. If a row holds exactly one
    candidate column j, every other column of that row is zero in every null vector, so
    z_row . v = v_j = 0 and j is not a candidate either; that can leave another row with one
    candidate, and so on. Each round peels every such column; what is left after the last round
    (or `max_rounds`) is a superset of the columns any null vector uses.
    """
    cand = cand.copy()
    live = cand[cols]
    r, c = rows[live], cols[live]
    for _ in range(max_rounds):
        lone = np.bincount(r, minlength=n_rows)[r] == 1
        if not lone.any():
            break
        cand[c[lone]] = False
        keep = cand[c]
        r, c = r[keep], c[keep]
    return cand


def _identical_columns(X: sp.csr_matrix, col_n: np.ndarray) -> tuple[list[list[int]], np.ndarray]:
    """Groups of identical non-empty columns (by their row sets) and each column's group (-1 = empty)."""
    p = X.shape[1]
    csc = X.tocsc()
    csc.sort_indices()
    col_group = np.full(p, -1, dtype=np.int64)
    members: list[list[int]] = []
    seen: dict[bytes, int] = {}
    for j in range(p):  # one hash per skill column, not per pair
        if col_n[j] == 0:
            continue
        key = csc.indices[csc.indptr[j] : csc.indptr[j + 1]].tobytes()
        gi = seen.get(key)
        if gi is None:
            gi = seen[key] = len(members)
            members.append([])
        members[gi].append(j)
        col_group[j] = gi
    return members, col_group


def _merged_gram(gram: Csr, members: list[list[int]]) -> Csr:
    """Z'Z of the merged design from X'X (0/1 X without repeated entries), in canonical CSR form.

    A merged column equals each of its members' columns, so Z'Z is X'X restricted to one member
    per group (the first, so in increasing order): the matrix (Z.T @ Z) is, entry for entry.
    """
    first = np.array([cols[0] for cols in members], dtype=np.int64)
    if first.size == gram.shape[0]:  # every column non-empty and distinct: Z is X
        return gram
    return gram.take(first)


def _ridge_cg(gram: Csr, rhs: np.ndarray, alpha: float) -> np.ndarray | None:
    """(Z'Z + alpha I)^-1 rhs by Jacobi-preconditioned conjugate gradients on the sparse Gram matrix.

    For wide libraries a dense Cholesky costs O(g^3) (about a second at 2,000 skills on two cores);
    the Gram matrix of co-retrievals is sparse and well conditioned (alpha on the diagonal), so
    CG reaches 1e-12 relative residual in a few dozen products. None when it does not converge.
    The iteration is scipy.sparse.linalg.cg's, step for step, written out so that `rank` does
    not import scipy (its products sum rows in numpy's order: equal to cg's within its tolerance).
    """
    a = gram.plus_diagonal(alpha)
    diag = a.diagonal()
    b = np.asarray(rhs, dtype=np.float64).ravel()
    x = np.zeros_like(b)
    b_norm = np.linalg.norm(b)
    if b_norm == 0:
        return x
    tol = 1e-12 * b_norm
    r, p, rho_prev = b.copy(), None, 0.0
    for _ in range(10 * b.size):
        if np.linalg.norm(r) < tol:
            return x
        z = r / diag
        rho = np.dot(r, z)
        if p is None:
            p = z.copy()
        else:
            p *= rho / rho_prev
            p += z
        q = a.matvec(p)
        step = rho / np.dot(p, q)
        x += step * p
        r -= step * q
        rho_prev = rho
    return None


def _null_space_of(zgram: Csr, cols: np.ndarray) -> np.ndarray:
    """Null-space basis of Z (g x k) from Z'Z, given that only `cols` can be nonzero in a null vector.

    Columns that never share a row are independent blocks of Z[:, cols], so the null space is the
    direct sum of the blocks' null spaces: many small factorisations instead of one large one.
    """
    g = zgram.shape[1]
    if cols.size == 0:
        return np.zeros((g, 0))
    gram = zgram.take(cols)
    n_comp, label = _components(gram)
    blocks = []
    order = np.argsort(label, kind="stable")
    bounds = indptr_of(label, n_comp)  # each component's run in `order`
    for comp in range(n_comp):
        members = order[bounds[comp]:bounds[comp + 1]]
        if members.size < 2:  # one non-empty column alone is never a combination of nothing
            continue
        part = _null_space(gram.take(members).toarray())
        if part.shape[1]:
            full = np.zeros((g, part.shape[1]))
            full[cols[members]] = part
            blocks.append(full)
    return np.hstack(blocks) if blocks else np.zeros((g, 0))


def _components(adj: Csr) -> tuple[int, np.ndarray]:
    """Connected components of a symmetric sparse adjacency, numbered by their smallest node.

    What scipy.sparse.csgraph.connected_components returns; that module imports scipy.linalg
    (~60 ms of every `rank`), so small graphs get min-label propagation with pointer jumping.
    """
    if adj.nnz > 200_000:
        from scipy.sparse.csgraph import connected_components

        return connected_components(adj.to_scipy(), directed=False)
    row, col = adj.row_index(), adj.indices
    label = np.arange(adj.shape[0])
    while True:  # each node takes the smallest label among its neighbours' and its label's label
        new = label.copy()
        np.minimum.at(new, row, label[col])
        new = new[new]
        if np.array_equal(new, label):
            break
        label = new
    roots, label = np.unique(label, return_inverse=True)  # labels are smallest nodes: in node order
    return int(roots.size), label.ravel().astype(np.int32)


_EIGH_ONLY = 500  # up to this size the eigendecomposition alone is cheap (15 ms at 400)


def _null_space(gram: np.ndarray) -> np.ndarray:
    """Basis of the null space of the (PSD) Gram matrix; empty when it has full rank.

    Small blocks (the usual case) go straight to the eigendecomposition. For larger ones a
    pivoted Cholesky (LAPACK ?pstrf) first settles the common full-rank case at a fraction of the
    eigendecomposition's cost, which is then only computed for rank-deficient designs.
    """
    g = gram.shape[0]
    if g > _EIGH_ONLY:
        from scipy import linalg  # ~50 ms to import: only for large blocks

        tol = g * np.finfo(float).eps * max(float(np.abs(gram).max(initial=0.0)), 1.0) * 1e3
        _, _, rank, info = linalg.lapack.dpstrf(gram, tol=tol, lower=1)
        if info == 0 and rank == g:
            return np.zeros((g, 0))
    vals, vecs = np.linalg.eigh(gram)
    tol = max(gram.shape) * np.finfo(float).eps * max(float(vals.max(initial=0.0)), 1.0) * 1e3
    return vecs[:, vals <= tol]


def _estimable(null: np.ndarray, g: int) -> np.ndarray:
    """Bool per column: its coefficient is estimable (orthogonal to the design's null space)."""
    if null.shape[1] == 0:
        return np.ones(g, dtype=bool)
    return np.linalg.norm(null, axis=1) < 1e-6


def _dependent_sets(null: np.ndarray, est: np.ndarray) -> dict[int, list[int]]:
    """For each non-estimable merged column, the other columns entangled with it in the null space."""
    if est.all():
        return {}
    load = np.abs(null) > 1e-6
    out: dict[int, list[int]] = {}
    for gi in np.flatnonzero(~est):
        vecs = load[gi]
        out[int(gi)] = [int(k) for k in np.flatnonzero(load[:, vecs].any(axis=1)) if k != gi]
    return out


class SandwichCov:
    """The task-clustered sandwich covariance V = A^-1 (sum_u s_u s_u') A^-1 of a ridge fit, as an
    operator: `diag()` and `times(w)` (V w) without forming the g x g matrix.

    `solve(v)` is A^-1 v (conjugate gradients on the sparse Gram matrix: the operator holds no
    dense g x g array); `var` the diagonal, None when it was not computed (lean fits: `diag()`
    raises).
    """

    def __init__(self, solve: Any, scores: sp.csr_matrix, scale: float, var: np.ndarray | None) -> None:
        self._solve, self._scores, self._scale, self._var = solve, scores, scale, var

    def diag(self) -> np.ndarray:
        if self._var is None:
            raise ValueError("this sandwich covariance was computed without its diagonal (skill_intervals=False)")
        return self._var

    def times(self, w: np.ndarray) -> np.ndarray:
        a_w = self._solve(np.asarray(w, dtype=np.float64).ravel())
        meat_w = self._scores.T @ (self._scores @ a_w)
        return self._scale * self._solve(np.asarray(meat_w, dtype=np.float64).ravel())

    #: below this many contrasts `difference_vars` solves each by conjugate gradients (`times`)
    BATCH_MIN = 16

    def difference_vars(self, pairs: np.ndarray) -> np.ndarray:
        """Var(c_a - c_b) = w' V w with w = e_a - e_b, for each row (a, b) of `pairs` (group indices).

        One dense inverse of A = Z'Z + alpha I (Cholesky + potri, one BLAS thread) serves every
        contrast: w' V w = scale * ||S A^-1 w||^2 with S the sparse task scores, formed 256 contrasts
        at a time. For a few contrasts, conjugate gradients per contrast (`times`) instead. Equal to
        `times` within the solver's tolerance (tests/test_regression.py)."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        g = self._scores.shape[1]
        if pairs.shape[0] < self.BATCH_MIN or not isinstance(self._solve, _CgSolve):
            out = np.empty(pairs.shape[0])
            for k, (a, b) in enumerate(pairs.tolist()):
                w = np.zeros(g)
                w[a], w[b] = 1.0, -1.0
                out[k] = float(w @ self.times(w))
            return out
        from scipy import linalg

        dense = self._solve.gram.toarray()
        dense.flat[:: g + 1] += self._solve.alpha
        with one_blas_thread():
            a_inv = _cho_inverse(linalg.cho_factor(dense, lower=False, overwrite_a=True, check_finite=False))
        out = np.empty(pairs.shape[0])
        for start in range(0, pairs.shape[0], 256):
            chunk = pairs[start:start + 256]
            d = a_inv[:, chunk[:, 0]] - a_inv[:, chunk[:, 1]]
            sd = np.asarray(self._scores @ d)
            out[start:start + 256] = self._scale * np.einsum("ij,ij->j", sd, sd)
        return out


class _CgSolve:
    """v -> (Z'Z + alpha I)^-1 v by conjugate gradients on the sparse Gram matrix."""

    def __init__(self, gram: Csr, alpha: float) -> None:
        self.gram, self.alpha = gram, alpha

    def __call__(self, v: np.ndarray) -> np.ndarray:
        x = _ridge_cg(self.gram, v, self.alpha)
        if x is None:  # no convergence (not seen in practice): the dense solve
            dense = self.gram.toarray()
            dense.flat[:: dense.shape[0] + 1] += self.alpha
            x = np.linalg.solve(dense, v)
        return x


def one_blas_thread() -> Any:
    """A context for the dense factorisations: one BLAS thread, always.

    OpenBLAS blocks its Cholesky and potri by its thread count, so their last bits depend on it:
    with one thread the intervals are the same numbers whatever `-j` and the machine's cores (the
    model workers of `attribution` run one thread each). It costs little: at 2,000 skills on a
    quiet 2-core machine one thread took 0.21 s for the Cholesky + potri against 0.12 s with two,
    and on an oversubscribed machine two busy-waiting threads took 5 s (measured). Needs
    threadpoolctl (installed with scikit-learn); without it, a no-op.
    """
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _cho_inverse(factor: tuple[np.ndarray, bool]) -> np.ndarray:
    """A^-1 from the Cholesky factor of A (LAPACK potri: 2/3 g^3, a third of solving A X = I).

    Consumes the factor: potri overwrites it (a Fortran-ordered factor is inverted in place,
    which spares a fresh g x g array and its page faults, ~0.1 s at 2,000 skills)."""
    from scipy import linalg

    c, lower = factor
    if not np.all(np.diagonal(c)):  # potri fails on a zero pivot (not seen): solve, factor intact
        return linalg.cho_solve(factor, np.eye(c.shape[0]), check_finite=False)
    inv, _ = linalg.lapack.dpotri(c, lower=lower, overwrite_c=1)
    # mirror the computed triangle in place (np.tril + transpose allocated three g x g arrays:
    # 0.8 s at 2,000 skills on a busy machine, against 15 ms for this copy)
    g = inv.shape[0]
    other = np.tri(g, g, -1, dtype=bool)  # strictly lower
    np.copyto(inv, inv.T, where=other.T if lower else other)
    return inv


def _diag_of_sandwich(scores: sp.csr_matrix, a_inv: np.ndarray) -> np.ndarray:
    """diag(A^-1 S'S A^-1) = column sums of (S A^-1)^2, S sparse (units x g).

    S has a few entries per task, so S A^-1 costs nnz(S) x g instead of the 2 g^3 of forming
    A^-1 M A^-1. It is computed 64 columns of A^-1 at a time (rows of the symmetric A^-1, made
    contiguous): each entry of S then reads 512 bytes that stay in cache instead of a 16 KB row of
    a 32 MB matrix, 2-3x faster at 2,000 skills; row chunks keep each product at ~16 MB.
    """
    n_units, g = scores.shape
    var = np.zeros(g)
    block = 64
    step = max(1, 2_000_000 // block)
    chunks = [scores[start:start + step] for start in range(0, n_units, step)] if n_units > step else [scores]
    for c in range(0, g, block):
        cols = np.ascontiguousarray(a_inv[c:c + block].T)  # = A^-1[:, c:c+block] (symmetric)
        for part in chunks:
            out = np.asarray(part @ cols)
            var[c:c + block] += np.einsum("ij,ij->j", out, out)
    return var


def _sandwich(Z: sp.csr_matrix, y: np.ndarray, groups: np.ndarray, coef: np.ndarray, level: float, *,
              gram: Csr, alpha: float, factor: tuple[np.ndarray, bool] | None = None,
              ) -> tuple[np.ndarray, np.ndarray, SandwichCov]:
    """Normal intervals and p-values from the task-clustered sandwich covariance of the ridge fit.

    cov = A^-1 (sum_u s_u s_u') A^-1 with A = Z'Z + alpha I and s_u the score of task u. With the
    Cholesky `factor` of A, its diagonal (the per-skill intervals) comes from A^-1 (`_cho_inverse`)
    and the sparse scores (`_diag_of_sandwich`). Without it (lean fits), only the operator is
    returned and the intervals are NaN. The returned operator gives V w for contrasts (library
    means, merge differences); its solves are conjugate gradients on `gram` (= Z'Z), so it holds
    sparse matrices only: the 32 MB dense A^-1 of a 2,000-skill library is dropped once the
    diagonal is read, instead of being carried (and, with -j, pickled to the parent process:
    ~0.15 s per model) for the few contrasts asked of it later.
    """
    import scipy.sparse as sp
    from scipy import special

    n, g = Z.shape
    _, unit = np.unique(groups, return_inverse=True)
    unit = unit.ravel()
    n_units = int(unit.max()) + 1
    resid = y - np.asarray(Z @ coef).ravel()
    agg = sp.csr_matrix((np.ones(n), (unit, np.arange(n))), shape=(n_units, n))
    scores = (agg @ Z.multiply(resid[:, None]).tocsr()).tocsr()
    scale = n_units / max(n_units - 1, 1)
    solve = _CgSolve(gram, alpha)
    if factor is None:
        nan = np.full(g, np.nan)
        return np.column_stack([nan, nan]), nan.copy(), SandwichCov(solve, scores, scale, None)
    var = np.maximum(_diag_of_sandwich(scores, _cho_inverse(factor)) * scale, 0.0)
    se = np.sqrt(var)
    z = special.ndtri(0.5 + level / 2)
    ci = np.column_stack([coef - z * se, coef + z * se])
    with np.errstate(divide="ignore", invalid="ignore"):
        pv = np.where(se > 0, 2 * special.ndtr(-np.abs(coef) / se), 1.0)
    return ci, pv, SandwichCov(solve, scores, scale, var)


def _percentile(samples: np.ndarray, level: float) -> np.ndarray:
    alpha = (1 - level) / 2
    if samples.shape[0] == 0:
        return np.full((samples.shape[1], 2), np.nan)
    return np.quantile(samples, [alpha, 1 - alpha], axis=0).T


def _boot_p(samples: np.ndarray) -> np.ndarray:
    """Two-sided bootstrap p-value of coefficient = 0 (floored at 1/n_boot)."""
    b = samples.shape[0]
    lo = (samples <= 0).mean(axis=0)
    hi = (samples >= 0).mean(axis=0)
    return np.clip(2 * np.minimum(lo, hi), 1.0 / b, 1.0)


