/* The inner loops of the heterogeneity permutation test (library_effect.heterogeneity_tests) and the
 * batched exact Skellam test (skellam(), library_effect.stratified_relative).
 *
 * For each permutation q (a row of `shuffled`: task placed[i] takes the outcomes of task
 * shuffled[q, i]) it gathers each row's permuted residual,
 *     res[j] = r_at[shuffled[q, rs[j]] * width + ps[j]],
 * and, for each design (tested columns x rows, CSR), the statistics of its scores
 *     u_g = sum over the column's rows of data * res[offset + row],  z2_g = u_g * u_g / n_g (n_g: the
 *     divisor the caller passes, U_g's permutation variance),
 *     out[0, q] = sum_g z2_g,  out[1, q] = max_g z2_g.
 * The numpy path it replaces moved two (permutations x rows) arrays through memory per chunk
 * (int32 indices, then float64 residuals) and transposed one for the sparse product; here a
 * permutation's residuals stay in one row-sized buffer. The additions happen in the order
 * scipy's csr_matvecs and numpy's axis-0 sum do them (each column's rows in CSR order, the
 * columns in order), so the results are the numpy path's, bit for bit
 * (tests/test_library_effect.py compares the two).
 *
 * Arguments are checked for type, size and index range here; nothing is read out of bounds.
 * Built as an optional extension (setup.py): without a C compiler the numpy path runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF

typedef struct {
    Py_buffer indptr, indices, data, n_g, out;
    Py_ssize_t n_cols, offset;
    int held;
} Design;

static int get(PyObject *obj, Py_buffer *view, const char *fmt, Py_ssize_t itemsize, int writable,
               const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (view->itemsize != itemsize || strcmp(f, fmt) != 0) {
        /* int32 is 'i' (or 'l' where long is 32 bits); float64 is 'd' */
        if (!(itemsize == 4 && view->itemsize == 4 && (strcmp(f, "i") == 0 || strcmp(f, "l") == 0) && fmt[0] == 'i')) {
            PyErr_Format(PyExc_TypeError, "%s: expected a contiguous %s array", name,
                         itemsize == 4 ? "int32" : "float64");
            PyBuffer_Release(view);
            return -1;
        }
    }
    return 0;
}

static void release_design(Design *d) {
    if (!d->held) return;
    PyBuffer_Release(&d->indptr);
    PyBuffer_Release(&d->indices);
    PyBuffer_Release(&d->data);
    PyBuffer_Release(&d->n_g);
    PyBuffer_Release(&d->out);
    d->held = 0;
}

static const char stats_doc[] =
    "stats(shuffled, rs, ps, width, r_at, designs) -> None\n\n"
    "shuffled: int32 (b x n_units); rs, ps: int32 (rows); r_at: float64 (n_units * width);\n"
    "designs: list of (indptr int32, indices int32, data float64, n_g float64, offset, out float64 (2 x b)).\n"
    "Writes each design's (sum, max) of z_g^2 per permutation into its out.";

static PyObject *stats(PyObject *self, PyObject *args) {
    PyObject *o_sh, *o_rs, *o_ps, *o_r, *o_designs;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OOOnOO!", &o_sh, &o_rs, &o_ps, &width, &o_r, &PyList_Type, &o_designs))
        return NULL;
    Py_buffer sh, rs, ps, r;
    if (get(o_sh, &sh, "i", 4, 0, "shuffled") < 0) return NULL;
    if (get(o_rs, &rs, "i", 4, 0, "rs") < 0) { PyBuffer_Release(&sh); return NULL; }
    if (get(o_ps, &ps, "i", 4, 0, "ps") < 0) { PyBuffer_Release(&sh); PyBuffer_Release(&rs); return NULL; }
    if (get(o_r, &r, "d", 8, 0, "r_at") < 0) {
        PyBuffer_Release(&sh); PyBuffer_Release(&rs); PyBuffer_Release(&ps); return NULL;
    }
    Py_ssize_t n_designs = PyList_GET_SIZE(o_designs);
    Design *ds = calloc((size_t)(n_designs > 0 ? n_designs : 1), sizeof(Design));
    double *res = NULL;
    PyObject *ret = NULL;
    if (!ds) { PyErr_NoMemory(); goto done; }
    if (sh.ndim != 2 || width <= 0) { PyErr_SetString(PyExc_ValueError, "shuffled must be 2-d, width > 0"); goto done; }
    const Py_ssize_t b = sh.shape[0], n_units = sh.shape[1];
    const Py_ssize_t m = rs.len / 4, n_r = r.len / 8;
    if (ps.len / 4 != m) { PyErr_SetString(PyExc_ValueError, "rs and ps differ in length"); goto done; }
    const int32_t *shp = sh.buf, *rsp = rs.buf, *psp = ps.buf;
    const double *rp = r.buf;
    for (Py_ssize_t j = 0; j < m; j++) {
        if (rsp[j] < 0 || rsp[j] >= n_units || psp[j] < 0 || psp[j] >= width) {
            PyErr_SetString(PyExc_ValueError, "rs or ps out of range"); goto done;
        }
    }
    for (Py_ssize_t i = 0; i < (Py_ssize_t)b * n_units; i++) {
        /* shuffled holds task positions; r_at has width entries per task */
        if (shp[i] < 0 || (Py_ssize_t)shp[i] * width + width > n_r) {
            PyErr_SetString(PyExc_ValueError, "shuffled out of range"); goto done;
        }
    }
    for (Py_ssize_t k = 0; k < n_designs; k++) {
        PyObject *t = PyList_GET_ITEM(o_designs, k);
        PyObject *a[6];
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 6) {
            PyErr_SetString(PyExc_TypeError, "each design is a 6-tuple"); goto done;
        }
        for (int i = 0; i < 6; i++) a[i] = PyTuple_GET_ITEM(t, i);
        Design *d = &ds[k];
        d->offset = PyLong_AsSsize_t(a[4]);
        if (d->offset == -1 && PyErr_Occurred()) goto done;
        if (get(a[0], &d->indptr, "i", 4, 0, "indptr") < 0) goto done;
        if (get(a[1], &d->indices, "i", 4, 0, "indices") < 0) { PyBuffer_Release(&d->indptr); goto done; }
        if (get(a[2], &d->data, "d", 8, 0, "data") < 0) {
            PyBuffer_Release(&d->indptr); PyBuffer_Release(&d->indices); goto done;
        }
        if (get(a[3], &d->n_g, "d", 8, 0, "n_g") < 0) {
            PyBuffer_Release(&d->indptr); PyBuffer_Release(&d->indices); PyBuffer_Release(&d->data); goto done;
        }
        if (get(a[5], &d->out, "d", 8, 1, "out") < 0) {
            PyBuffer_Release(&d->indptr); PyBuffer_Release(&d->indices); PyBuffer_Release(&d->data);
            PyBuffer_Release(&d->n_g); goto done;
        }
        d->held = 1;
        d->n_cols = d->indptr.len / 4 - 1;
        const int32_t *ip = d->indptr.buf, *ix = d->indices.buf;
        Py_ssize_t nnz = d->indices.len / 4;
        if (d->n_cols < 0 || d->n_g.len / 8 != d->n_cols || d->data.len / 8 != nnz || d->out.len / 8 != 2 * b
            || d->offset < 0) {
            PyErr_SetString(PyExc_ValueError, "design arrays disagree in size"); goto done;
        }
        if (d->n_cols > 0 && (ip[0] != 0 || ip[d->n_cols] != nnz)) {
            PyErr_SetString(PyExc_ValueError, "indptr does not span indices"); goto done;
        }
        for (Py_ssize_t g = 0; g < d->n_cols; g++) {
            if (ip[g + 1] < ip[g]) { PyErr_SetString(PyExc_ValueError, "indptr decreases"); goto done; }
        }
        for (Py_ssize_t z = 0; z < nnz; z++) {
            if (ix[z] < 0 || d->offset + ix[z] >= m) {
                PyErr_SetString(PyExc_ValueError, "design row out of range"); goto done;
            }
        }
    }
    res = malloc((size_t)(m > 0 ? m : 1) * sizeof(double));
    if (!res) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t q = 0; q < b; q++) {
        const int32_t *row = shp + q * n_units;
        for (Py_ssize_t j = 0; j < m; j++) res[j] = rp[(Py_ssize_t)row[rsp[j]] * width + psp[j]];
        for (Py_ssize_t k = 0; k < n_designs; k++) {
            const Design *d = &ds[k];
            const int32_t *ip = d->indptr.buf, *ix = d->indices.buf;
            const double *dat = d->data.buf, *ng = d->n_g.buf;
            const double *base = res + d->offset;
            double sum = 0.0, mx = 0.0;
            for (Py_ssize_t g = 0; g < d->n_cols; g++) {
                double u = 0.0;
                for (int32_t z = ip[g]; z < ip[g + 1]; z++) u += dat[z] * base[ix[z]];
                double uu = u * u;
                double z2 = uu / ng[g];
                if (g == 0) { sum = z2; mx = z2; }
                else {
                    sum += z2;
                    /* numpy's maximum: NaN propagates */
                    if (z2 > mx || z2 != z2) mx = (mx != mx) ? mx : z2;
                }
            }
            double *out = d->out.buf;
            out[q] = sum;
            out[b + q] = mx;
        }
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    ret = Py_None;
done:
    free(res);
    if (ds) {
        for (Py_ssize_t k = 0; k < n_designs; k++) release_design(&ds[k]);
        free(ds);
    }
    PyBuffer_Release(&sh);
    PyBuffer_Release(&rs);
    PyBuffer_Release(&ps);
    PyBuffer_Release(&r);
    return ret;
}

/* numpy's BitGenerator interface (numpy/random/bitgen.h; stable since numpy 1.17) */
typedef struct bitgen {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} bitgen_t;

/* numpy's random_interval (distributions.c): uniform on [0, max] by masked rejection */
static inline uint64_t random_interval(bitgen_t *bg, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, value;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffUL) {
        while ((value = (bg->next_uint32(bg->state) & mask)) > max);
    } else {
        while ((value = (bg->next_uint64(bg->state) & mask)) > max);
    }
    return value;
}

static const char shuffle_doc[] =
    "shuffle(capsule, x, starts, ends) -> None\n\n"
    "For each block [start, end) in order, and each row of the int32 (b x n) array x, the\n"
    "Fisher-Yates shuffle of numpy's Generator.permuted(x[:, start:end], axis=1), from the same\n"
    "bit generator (`rng.bit_generator.capsule`; hold `rng.bit_generator.lock`): the same draws,\n"
    "so the same permutations, in place.";

static PyObject *shuffle(PyObject *self, PyObject *args) {
    PyObject *cap, *o_x, *o_s, *o_e;
    if (!PyArg_ParseTuple(args, "OOOO", &cap, &o_x, &o_s, &o_e)) return NULL;
    bitgen_t *bg = PyCapsule_GetPointer(cap, "BitGenerator");
    if (!bg) return NULL;
    Py_buffer x, st, en;
    if (get(o_x, &x, "i", 4, 1, "x") < 0) return NULL;
    if (get(o_s, &st, "i", 4, 0, "starts") < 0) { PyBuffer_Release(&x); return NULL; }
    if (get(o_e, &en, "i", 4, 0, "ends") < 0) { PyBuffer_Release(&x); PyBuffer_Release(&st); return NULL; }
    PyObject *ret = NULL;
    if (x.ndim != 2) { PyErr_SetString(PyExc_ValueError, "x must be 2-d"); goto done; }
    const Py_ssize_t b = x.shape[0], n = x.shape[1], k = st.len / 4;
    const int32_t *sp = st.buf, *ep = en.buf;
    if (en.len / 4 != k) { PyErr_SetString(PyExc_ValueError, "starts and ends differ in length"); goto done; }
    for (Py_ssize_t i = 0; i < k; i++) {
        if (sp[i] < 0 || ep[i] < sp[i] || ep[i] > n) { PyErr_SetString(PyExc_ValueError, "block out of range"); goto done; }
    }
    int32_t *xp = x.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t blk = 0; blk < k; blk++) {
        const Py_ssize_t s = sp[blk], len = ep[blk] - sp[blk];
        for (Py_ssize_t q = 0; q < b; q++) {
            int32_t *row = xp + q * n + s;
            for (Py_ssize_t i = len - 1; i >= 1; i--) {
                Py_ssize_t j = (Py_ssize_t)random_interval(bg, (uint64_t)i);
                int32_t tmp = row[j];
                row[j] = row[i];
                row[i] = tmp;
            }
        }
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    ret = Py_None;
done:
    PyBuffer_Release(&x);
    PyBuffer_Release(&st);
    PyBuffer_Release(&en);
    return ret;
}

#include <math.h>

static const char skellam_doc[] =
    "skellam(rows, out) -> None\n\n"
    "stats.skellam_test for many tests at once: each row of `rows` (n x 5, float64) is d, lam_up,\n"
    "lam_down, lo, hi (d, lo, hi integers, lo <= d <= hi); each row of `out` (n x 4, float64) holds\n"
    "1 - level in its first place on entry and gets p, the smallest achievable p over [lo, hi], and\n"
    "the acceptance region's ends a, b. The same truncation of the\n"
    "Poisson laws, convolution, cumulative sums and rule as the Python function (its sums in the\n"
    "same order; exp may differ from numpy's in the last bit).";

static int poisson_pmf(double lam, Py_ssize_t top, double *out) {
    if (lam <= 0) {
        for (Py_ssize_t k = 0; k <= top; k++) out[k] = 0.0;
        out[0] = 1.0;
        return 0;
    }
    const double ll = log(lam);
    for (Py_ssize_t k = 0; k <= top; k++) out[k] = exp((double)k * ll - lam - lgamma((double)k + 1.0));
    return 0;
}

static PyObject *skellam(PyObject *self, PyObject *args) {
    PyObject *o_in, *o_out;
    if (!PyArg_ParseTuple(args, "OO", &o_in, &o_out)) return NULL;
    Py_buffer in, out;
    if (get(o_in, &in, "d", 8, 0, "rows") < 0) return NULL;
    if (get(o_out, &out, "d", 8, 1, "out") < 0) { PyBuffer_Release(&in); return NULL; }
    PyObject *ret = NULL;
    const Py_ssize_t n = in.len / (5 * 8);
    double *buf = NULL;
    size_t cap = 0;
    int oom = 0, bad = 0;
    if (in.len != n * 5 * 8 || out.len != n * 4 * 8) {
        PyErr_SetString(PyExc_ValueError, "rows must be n x 5 and out n x 4");
        goto done;
    }
    const double *rows = in.buf;
    double *res = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !oom && !bad; i++) {
        const double *r = rows + 5 * i;
        const double d = r[0], lu = r[1], lv = r[2], lo = r[3], hi = r[4];
        if (!(isfinite(lu) && isfinite(lv) && lu >= 0 && lv >= 0 && lu < 1e6 && lv < 1e6 && lo <= d && d <= hi &&
              fabs(lo) < 1e7 && fabs(hi) < 1e7)) {
            bad = 1;
            break;
        }
        double mu = d > hi ? d : hi, mv = -d > -lo ? -d : -lo;
        if (mu < 0) mu = 0;
        if (mv < 0) mv = 0;
        const Py_ssize_t top_u = (Py_ssize_t)(lu + 12 * sqrt(lu + 1) + 12 + mu);
        const Py_ssize_t top_v = (Py_ssize_t)(lv + 12 * sqrt(lv + 1) + 12 + mv);
        const Py_ssize_t len = top_u + top_v + 1;
        const size_t need = (size_t)(top_u + 1 + top_v + 1 + 3 * len);
        if (need > cap) {
            double *nb = realloc(buf, need * sizeof(double));
            if (!nb) { oom = 1; break; }
            buf = nb;
            cap = need;
        }
        double *pu = buf, *pv = pu + top_u + 1, *pmf = pv + top_v + 1, *cdf = pmf + len, *sf = cdf + len;
        poisson_pmf(lu, top_u, pu);
        poisson_pmf(lv, top_v, pv);
        /* index k <-> D = k - top_v: P(D) = sum over u of P(U = u) P(V = u - D) */
        for (Py_ssize_t k = 0; k < len; k++) {
            const Py_ssize_t dd = k - top_v;
            Py_ssize_t u0 = dd > 0 ? dd : 0, u1 = top_v + dd < top_u ? top_v + dd : top_u;
            double s = 0.0;
            for (Py_ssize_t u = u0; u <= u1; u++) s += pu[u] * pv[u - dd];
            pmf[k] = s;
        }
        double acc = 0.0;
        for (Py_ssize_t k = 0; k < len; k++) cdf[k] = (acc += pmf[k]);
        acc = 0.0;
        for (Py_ssize_t k = len - 1; k >= 0; k--) sf[k] = (acc += pmf[k]);
        /* two-sided p per value: min(1, 2 min(cdf, sf)), into cdf */
        for (Py_ssize_t k = 0; k < len; k++) {
            double m = cdf[k] < sf[k] ? cdf[k] : sf[k], t = 2.0 * m;
            cdf[k] = t < 1.0 ? t : 1.0;
        }
        const double p = cdf[(Py_ssize_t)d + top_v];
        const double p_lo = cdf[(Py_ssize_t)lo + top_v], p_hi = cdf[(Py_ssize_t)hi + top_v];
        double *o = res + 4 * i;
        const double level_thr = o[0]; /* the caller puts 1 - level in out[i, 0] */
        Py_ssize_t first = -1, last = -1;
        for (Py_ssize_t k = 0; k < len; k++)
            if (cdf[k] > level_thr) {
                if (first < 0) first = k;
                last = k;
            }
        o[0] = p < 1.0 ? p : 1.0;
        o[1] = p_lo < p_hi ? p_lo : p_hi;
        o[2] = first >= 0 ? (double)(first - top_v) : d;
        o[3] = first >= 0 ? (double)(last - top_v) : d;
    }
    Py_END_ALLOW_THREADS
    if (oom) PyErr_NoMemory();
    else if (bad) PyErr_SetString(PyExc_ValueError, "a row out of range (lambdas >= 0 and finite, lo <= d <= hi)");
    else {
        Py_INCREF(Py_None);
        ret = Py_None;
    }
done:
    free(buf);
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return ret;
}

static PyMethodDef methods[] = {
    {"stats", stats, METH_VARARGS, stats_doc},
    {"shuffle", shuffle, METH_VARARGS, shuffle_doc},
    {"skellam", skellam, METH_VARARGS, skellam_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_perm", "Inner loop of the heterogeneity permutation test (see library_effect.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__perm(void) { return PyModule_Create(&module); }
