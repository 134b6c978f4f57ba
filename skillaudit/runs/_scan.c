/* Column scanner for run logs: a block of JSON Lines -> per-record columns, in one C pass.
 *
 * It reads only the common, plain shape of a record (DESIGN §3.1) and gives up on anything else:
 * scan() returns None and the caller reads the block with msgspec, then with the exact Python path
 * that produces every error message. So this file never reports errors; it must only never accept
 * a line that the other paths would read differently. Hence it is a strict, validating JSON parser
 * (RFC 8259: string escapes, control characters, number grammar, nesting) that bails on:
 *   escapes in keys or in the strings it keeps, a repeated known key, an `arm` that is not null,
 *   non-finite or very long numbers, lone surrogates, deep nesting, blank lines, an object
 *   spread over lines, any value of a known field outside the types the msgspec schema in
 *   runs.py accepts. It checks UTF-8 and control characters (NUL included) itself.
 *
 * Ids are interned into the caller's vocabularies (dicts of str -> first-seen index) only once
 * the whole block has been read, so a block given back leaves them as they were.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_DEPTH 64
#define MAX_NUM 40

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* ------------------------------------------------------------------ vocabularies */
/* Ids are numbered in two steps. While parsing (without the GIL) each block numbers its distinct
 * ids locally, in first-seen order. Then, with the GIL, each local id is looked up in the caller's
 * vocabulary (a dict of str -> first-seen index), in local order, so the vocabularies grow exactly
 * as a one-record-at-a-time reader grows them. A hash table kept across calls (a capsule from
 * tables()) sits in front of each dict: a known id costs a hash and a memcmp, not a new str. */
typedef struct {
    const char *s;
    Py_ssize_t n;
    uint64_t h;
} Key;

typedef struct {
    Key *keys;
    size_t len, kcap;
    int64_t *slots; /* index into keys, -1 empty */
    size_t cap;
} Local;

typedef struct {
    char *s; /* owned copy */
    Py_ssize_t n;
    int64_t id;
    uint64_t h;
} Slot;

typedef struct {
    Slot *slots;
    size_t cap, used;
} Table;

typedef struct {
    Table t[4];
} Tables;

static uint64_t hash_span(const char *s, Py_ssize_t n) {
    /* 8 bytes per step, then a final mix (ids are short; any decent spread will do) */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    while (n >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, s, (size_t)n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

static int local_rehash(Local *L, size_t cap) {
    int64_t *slots = malloc(cap * sizeof(int64_t));
    if (!slots) return -1;
    for (size_t i = 0; i < cap; i++) slots[i] = -1;
    for (size_t k = 0; k < L->len; k++) {
        size_t j = L->keys[k].h & (cap - 1);
        while (slots[j] >= 0) j = (j + 1) & (cap - 1);
        slots[j] = (int64_t)k;
    }
    free(L->slots);
    L->slots = slots;
    L->cap = cap;
    return 0;
}

/* the block-local id of a span (first seen = 0, 1, ...); -1 when out of memory */
static int64_t local_id(Local *L, const char *s, Py_ssize_t n) {
    if (!L->slots && local_rehash(L, 256) < 0) return -1;
    uint64_t h = hash_span(s, n);
    size_t mask = L->cap - 1, j = h & mask;
    while (L->slots[j] >= 0) {
        const Key *k = &L->keys[L->slots[j]];
        if (k->h == h && k->n == n && memcmp(k->s, s, (size_t)n) == 0) return L->slots[j];
        j = (j + 1) & mask;
    }
    if (L->len == L->kcap) {
        size_t kcap = L->kcap ? L->kcap * 2 : 256;
        Key *d = realloc(L->keys, kcap * sizeof(Key));
        if (!d) return -1;
        L->keys = d;
        L->kcap = kcap;
    }
    int64_t id = (int64_t)L->len++;
    L->keys[id].s = s;
    L->keys[id].n = n;
    L->keys[id].h = h;
    L->slots[j] = id;
    if (L->len * 2 > L->cap && local_rehash(L, L->cap * 2) < 0) return -1;
    return id;
}

static void local_free(Local *L) {
    free(L->keys);
    free(L->slots);
}

static void table_clear(Table *t) {
    for (size_t i = 0; i < t->cap; i++) free(t->slots[i].s);
    free(t->slots);
    t->slots = NULL;
    t->cap = t->used = 0;
}

static void tables_free(PyObject *capsule) {
    Tables *ts = PyCapsule_GetPointer(capsule, "skillaudit._scan.tables");
    if (!ts) return;
    for (int i = 0; i < 4; i++) table_clear(&ts->t[i]);
    free(ts);
}

static int table_grow(Table *t, size_t cap) {
    Slot *slots = calloc(cap, sizeof(Slot));
    if (!slots) return -1;
    for (size_t i = 0; i < t->cap; i++) {
        Slot *o = &t->slots[i];
        if (!o->s) continue;
        size_t j = o->h & (cap - 1);
        while (slots[j].s) j = (j + 1) & (cap - 1);
        slots[j] = *o;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

/* the vocabulary index of a key, interned in the dict when new (GIL held); -1 with an error set */
static int64_t global_id(Table *t, PyObject *dict, const Key *key) {
    if (!t->slots && table_grow(t, 1024) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    size_t mask = t->cap - 1, j = key->h & mask;
    while (t->slots[j].s) {
        Slot *o = &t->slots[j];
        if (o->h == key->h && o->n == key->n && memcmp(o->s, key->s, (size_t)key->n) == 0) return o->id;
        j = (j + 1) & mask;
    }
    PyObject *str = PyUnicode_DecodeUTF8(key->s, key->n, "strict");
    if (!str) return -1;
    int64_t id;
    PyObject *val = PyDict_GetItemWithError(dict, str);
    if (val) {
        id = PyLong_AsLongLong(val);
        if (id == -1 && PyErr_Occurred()) {
            Py_DECREF(str);
            return -1;
        }
    } else {
        if (PyErr_Occurred()) {
            Py_DECREF(str);
            return -1;
        }
        id = (int64_t)PyDict_GET_SIZE(dict);
        PyObject *iv = PyLong_FromLongLong(id);
        if (!iv || PyDict_SetItem(dict, str, iv) < 0) {
            Py_XDECREF(iv);
            Py_DECREF(str);
            return -1;
        }
        Py_DECREF(iv);
    }
    Py_DECREF(str);
    char *copy = malloc((size_t)key->n + 1);
    if (!copy) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, key->s, (size_t)key->n);
    t->slots[j].s = copy;
    t->slots[j].n = key->n;
    t->slots[j].id = id;
    t->slots[j].h = key->h;
    if (++t->used * 2 > t->cap && table_grow(t, t->cap * 2) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return id;
}

/* ------------------------------------------------------------------ JSON grammar */
/* A number the fast path cannot convert exactly; converted (and checked finite) later, with the GIL.
 * `out` is its place in the score column, or -1 when only its finiteness matters. */
typedef struct {
    const char *s;
    Py_ssize_t n;
    int64_t out;
} Num;

typedef struct {
    Num *v;
    size_t len, cap;
    int oom;
} Nums;

static int nums_put(Nums *ns, const char *s, Py_ssize_t n, int64_t out) {
    if (ns->len == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        Num *d = realloc(ns->v, cap * sizeof(Num));
        if (!d) {
            ns->oom = 1;
            return -1;
        }
        ns->v = d;
        ns->cap = cap;
    }
    ns->v[ns->len].s = s;
    ns->v[ns->len].n = n;
    ns->v[ns->len].out = out;
    ns->len++;
    return 0;
}

typedef struct {
    const char *p, *end;
    Nums *nums;
} Cur;

#define BAIL (-1)

/* JSON whitespace but the newline: a record is one line, so a newline inside one means "not plain" */
static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
}

static inline int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int read_u4(const char *q, const char *end) {
    if (end - q < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Bytes a string scan stops at: the quote, the backslash, control characters, non-ASCII. */
static unsigned char STOP[256];

static void init_stop(void) {
    for (int i = 0; i < 256; i++) STOP[i] = (i < 0x20 || i == '"' || i == '\\' || i >= 0x80);
}

/* Length of the valid UTF-8 sequence at q (lead byte >= 0x80) as Python's strict decoder reads
 * it (no overlong forms, no surrogates, nothing above U+10FFFF); 0 when invalid. */
static int utf8_len(const unsigned char *q, const unsigned char *end) {
    unsigned char b0 = q[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else return 0;
    if (end - q < n) return 0;
    if (q[1] < lo || q[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (q[i] < 0x80 || q[i] > 0xBF) return 0;
    return n;
}

/* A string at c->p ('"'): its raw content span; *esc set when it holds an escape. */
static int string_span(Cur *c, const char **s, Py_ssize_t *n, int *esc) {
    if (c->p >= c->end || *c->p != '"') return BAIL;
    const unsigned char *q = (const unsigned char *)++c->p, *end = (const unsigned char *)c->end;
    *esc = 0;
    for (;;) {
#ifdef __SSE2__
        /* 16 bytes at a time: the quote, the backslash, and (signed) < 0x20, i.e. control or non-ASCII */
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (end - q >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)q);
            int mask = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                                                      _mm_cmplt_epi8(x, space)));
            if (mask) {
                q += __builtin_ctz((unsigned)mask);
                break;
            }
            q += 16;
        }
#endif
        while (q < end && !STOP[*q]) q++;
        if (q >= end) return BAIL;
        unsigned char ch = *q;
        if (ch == '"') {
            *s = c->p;
            *n = (const char *)q - c->p;
            c->p = (const char *)q + 1;
            return 0;
        }
        if (ch >= 0x80) {
            int k = utf8_len(q, end);
            if (!k) return BAIL;
            q += k;
            continue;
        }
        if (ch < 0x20) return BAIL;
        /* a backslash */
        *esc = 1;
        if (q + 1 >= end) return BAIL;
        unsigned char e = q[1];
        if (e == 'u') {
            int u = read_u4((const char *)q + 2, c->end);
            if (u < 0) return BAIL;
            q += 6;
            if (u >= 0xDC00 && u <= 0xDFFF) return BAIL; /* lone low surrogate */
            if (u >= 0xD800 && u <= 0xDBFF) {            /* needs its low half */
                if (end - q < 6 || q[0] != '\\' || q[1] != 'u') return BAIL;
                int lo = read_u4((const char *)q + 2, c->end);
                if (lo < 0xDC00 || lo > 0xDFFF) return BAIL;
                q += 6;
            }
            continue;
        }
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't')
            return BAIL;
        q += 2;
    }
}

/* A number at c->p by the JSON grammar; its span; *is_int when it has no fraction or exponent. */
static int number_span(Cur *c, const char **s, Py_ssize_t *n, int *is_int) {
    const char *q = c->p;
    *is_int = 1;
    if (q < c->end && *q == '-') q++;
    if (q >= c->end) return BAIL;
    if (*q == '0') {
        q++;
    } else if (*q >= '1' && *q <= '9') {
        while (q < c->end && *q >= '0' && *q <= '9') q++;
    } else {
        return BAIL;
    }
    if (q < c->end && *q == '.') {
        *is_int = 0;
        q++;
        if (q >= c->end || *q < '0' || *q > '9') return BAIL;
        while (q < c->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < c->end && (*q == 'e' || *q == 'E')) {
        *is_int = 0;
        q++;
        if (q < c->end && (*q == '+' || *q == '-')) q++;
        if (q >= c->end || *q < '0' || *q > '9') return BAIL;
        while (q < c->end && *q >= '0' && *q <= '9') q++;
    }
    *s = c->p;
    *n = q - c->p;
    if (*n > MAX_NUM) return BAIL;
    c->p = q;
    return 0;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The value of a number span: *out, or *pending when only Python's conversion is exact (no GIL
 * here); BAIL for a long integer (readers differ on those). */
static int number_value(const char *s, Py_ssize_t n, int is_int, double *out, int *pending) {
    *pending = 0;
    if (is_int && n > 18) return BAIL;
    /* Clinger's fast path: at most 15 significant digits and no exponent: the mantissa and 10^k
     * are exact doubles, so one division is correctly rounded (what every reader returns) */
    const char *q = s, *e = s + n;
    int neg = 0, digits = 0, frac = 0, dot = 0;
    uint64_t m = 0;
    if (*q == '-') {
        neg = 1;
        q++;
    }
    for (; q < e; q++) {
        if (*q == '.') {
            dot = 1;
            continue;
        }
        if (*q < '0' || *q > '9') break; /* an exponent */
        if (m || *q != '0') digits++;
        m = m * 10 + (uint64_t)(*q - '0');
        frac += dot;
        if (digits > 15) break;
    }
    if (q == e && digits <= 15 && frac <= 22) {
        double v = (double)m / POW10[frac];
        *out = neg ? -v : v;
        return 0;
    }
    *out = NAN;
    *pending = 1;
    return 0;
}

/* A number whose value is not kept: only one no reader could hold (too large) is refused, so one
 * with an exponent is checked later. */
static int number_ok(Cur *c, const char *s, Py_ssize_t n, int is_int) {
    if (is_int) return n > 18 ? BAIL : 0;
    if (!memchr(s, 'e', (size_t)n) && !memchr(s, 'E', (size_t)n)) return 0; /* <= 40 chars: finite */
    return nums_put(c->nums, s, n, -1);
}

/* Python's own correctly rounded, locale-independent conversion (with the GIL); BAIL unless finite */
static int convert(const Num *num, double *out) {
    char tmp[MAX_NUM + 1], *stop;
    memcpy(tmp, num->s, (size_t)num->n);
    tmp[num->n] = '\0';
    double v = PyOS_string_to_double(tmp, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return BAIL;
    }
    if (stop != tmp + num->n || !isfinite(v)) return BAIL;
    *out = v;
    return 0;
}

static int literal(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return BAIL;
    c->p += n;
    return 0;
}

/* After a member or an element: whitespace, then ',' (1: another follows) or `close` (0: done). */
static int next_or_close(Cur *c, char close) {
    ws(c);
    if (c->p >= c->end) return BAIL;
    if (*c->p == close) {
        c->p++;
        return 0;
    }
    if (*c->p != ',') return BAIL;
    c->p++;
    ws(c);
    return 1;
}

/* An object member's key and its colon; `plain`: a key with an escape is refused (not compared). */
static int member_key(Cur *c, const char **k, Py_ssize_t *kn, int plain) {
    int esc;
    if (string_span(c, k, kn, &esc) < 0 || (plain && esc)) return BAIL;
    ws(c);
    if (c->p >= c->end || *c->p != ':') return BAIL;
    c->p++;
    ws(c);
    return 0;
}

static int skip_value(Cur *c, int depth) {
    if (depth > MAX_DEPTH || c->p >= c->end) return BAIL;
    const char *s;
    Py_ssize_t n;
    int flag;
    switch (*c->p) {
    case '"':
        return string_span(c, &s, &n, &flag);
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    case '[':
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 0;
        }
        for (;;) {
            if (skip_value(c, depth + 1) < 0) return BAIL;
            int more = next_or_close(c, ']');
            if (more < 0) return BAIL;
            if (!more) return 0;
        }
    case '{':
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return 0;
        }
        for (;;) {
            if (member_key(c, &s, &n, 0) < 0) return BAIL;
            if (skip_value(c, depth + 1) < 0) return BAIL;
            int more = next_or_close(c, '}');
            if (more < 0) return BAIL;
            if (!more) return 0;
        }
    default: {
        if (number_span(c, &s, &n, &flag) < 0) return BAIL;
        /* a number no reader can hold: let the other paths decide */
        return number_ok(c, s, n, flag);
    }
    }
}

/* true/false or the integers 0/1 (the schema's bool | Literal[0, 1]); null allowed when nullable */
static int flag_value(Cur *c, int nullable, int *out) {
    if (c->p >= c->end) return BAIL;
    const char *q = c->p;
    char ch = *q;
    if (ch == 't') {
        *out = 1;
        return literal(c, "true", 4);
    }
    if (ch == 'f') {
        *out = 0;
        return literal(c, "false", 5);
    }
    if (ch == 'n' && nullable) {
        *out = -1;
        return literal(c, "null", 4);
    }
    if ((ch == '0' || ch == '1') && (q + 1 >= c->end || !(q[1] == '.' || q[1] == 'e' || q[1] == 'E' ||
                                                         (q[1] >= '0' && q[1] <= '9')))) {
        *out = ch - '0';
        c->p++;
        return 0;
    }
    return BAIL;
}

/* a string with no escapes (an id); BAIL otherwise */
static int plain_string(Cur *c, const char **s, Py_ssize_t *n) {
    int esc;
    if (string_span(c, s, n, &esc) < 0 || esc) return BAIL;
    return 0;
}

/* ------------------------------------------------------------------ records */
typedef struct {
    const char *s;
    Py_ssize_t n;
    double score;
    const char *num; /* a score still to convert (NULL: none) */
    Py_ssize_t num_n;
} Ref;

typedef struct {
    Ref *refs;
    size_t len, cap;
} Refs;

static int refs_put(Refs *r, const char *s, Py_ssize_t n, double score) {
    if (r->len == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        Ref *d = realloc(r->refs, cap * sizeof(Ref));
        if (!d) return -1;
        r->refs = d;
        r->cap = cap;
    }
    r->refs[r->len].s = s;
    r->refs[r->len].n = n;
    r->refs[r->len].score = score;
    r->refs[r->len].num = NULL;
    r->refs[r->len].num_n = 0;
    r->len++;
    return 0;
}

/* one retrieved skill: "id" or {"id": "...", "score": number | null, ...} */
static int skill_ref(Cur *c, Refs *refs) {
    const char *s = NULL, *k;
    Py_ssize_t n = 0, kn;
    int pending = 0;
    const char *ns = NULL;
    Py_ssize_t nn = 0;
    double score = NAN;
    if (c->p < c->end && *c->p == '"') {
        if (plain_string(c, &s, &n) < 0) return BAIL;
        return refs_put(refs, s, n, NAN) < 0 ? BAIL : 0;
    }
    if (c->p >= c->end || *c->p != '{') return BAIL;
    c->p++;
    ws(c);
    int seen_id = 0, seen_score = 0;
    if (c->p < c->end && *c->p == '}') return BAIL; /* no id */
    for (;;) {
        if (member_key(c, &k, &kn, 1) < 0) return BAIL;
        if (kn == 2 && memcmp(k, "id", 2) == 0) {
            if (seen_id++ || plain_string(c, &s, &n) < 0) return BAIL;
        } else if (kn == 5 && memcmp(k, "score", 5) == 0) {
            if (seen_score++) return BAIL;
            if (c->p < c->end && *c->p == 'n') {
                if (literal(c, "null", 4) < 0) return BAIL;
            } else {
                int is_int;
                if (number_span(c, &ns, &nn, &is_int) < 0 || number_value(ns, nn, is_int, &score, &pending) < 0)
                    return BAIL;
            }
        } else if (skip_value(c, 4) < 0) {
            return BAIL;
        }
        int more = next_or_close(c, '}');
        if (more < 0) return BAIL;
        if (!more) break;
    }
    if (!seen_id || refs_put(refs, s, n, score) < 0) return BAIL;
    if (pending) {
        refs->refs[refs->len - 1].num = ns;
        refs->refs[refs->len - 1].num_n = nn;
    }
    return 0;
}

enum { LIST_NULL, LIST_EMPTY, LIST_ITEMS };

/* null or a list: which of null, an empty list, or a list whose first item is next */
static int open_list(Cur *c) {
    if (c->p < c->end && *c->p == 'n') return literal(c, "null", 4) < 0 ? BAIL : LIST_NULL;
    if (c->p >= c->end || *c->p != '[') return BAIL;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return LIST_EMPTY;
    }
    return LIST_ITEMS;
}

/* a call's 'skills': null or a list of refs */
static int call_skills(Cur *c, Refs *refs) {
    int list = open_list(c);
    if (list != LIST_ITEMS) return list < 0 ? BAIL : 0;
    for (;;) {
        if (skill_ref(c, refs) < 0) return BAIL;
        int more = next_or_close(c, ']');
        if (more <= 0) return more;
    }
}

/* 'retrievals': null or a list of {"skills": null | [ref, ...], ...}; *nonempty when a list with items */
static int retrievals(Cur *c, Refs *refs, int *nonempty) {
    const char *k;
    Py_ssize_t kn;
    int list = open_list(c);
    *nonempty = list == LIST_ITEMS;
    if (list != LIST_ITEMS) return list < 0 ? BAIL : 0;
    for (;;) { /* a call */
        if (c->p >= c->end || *c->p != '{') return BAIL;
        c->p++;
        ws(c);
        int seen_skills = 0;
        if (c->p < c->end && *c->p == '}') {
            c->p++;
        } else {
            for (;;) {
                if (member_key(c, &k, &kn, 1) < 0) return BAIL;
                if (kn == 6 && memcmp(k, "skills", 6) == 0) {
                    if (seen_skills++ || call_skills(c, refs) < 0) return BAIL;
                } else if (skip_value(c, 3) < 0) {
                    return BAIL;
                }
                int more = next_or_close(c, '}');
                if (more < 0) return BAIL;
                if (!more) break;
            }
        }
        int more = next_or_close(c, ']');
        if (more <= 0) return more;
    }
}

enum { K_TASK = 1, K_COND = 2, K_CORRECT = 4, K_EPOCH = 8, K_MODEL = 16, K_BENCH = 32,
       K_RETS = 64, K_INV = 128, K_ERROR = 256, K_SHORT = 512, K_ANSWER = 1024, K_ARM = 2048 };

typedef struct {
    const char *task, *model, *bench;
    Py_ssize_t task_n, model_n, bench_n;
    int64_t epoch;
    int enabled, correct, invoked, error, nonempty, shorthand;
    const char *answer; /* the raw text of a string answer (NULL: none, or not a string) */
    Py_ssize_t answer_n;
    int answer_esc;
} Rec;

static int condition_of(const char *s, Py_ssize_t n) {
#define IS(w) (n == (Py_ssize_t)(sizeof(w) - 1) && memcmp(s, w, sizeof(w) - 1) == 0)
    if (IS("enabled") || IS("on") || IS("skills_on")) return 1;
    if (IS("disabled") || IS("off") || IS("skills_off")) return 0;
    return -1;
#undef IS
}

/* 'retrieved': null or a list of id strings (one call); *present when a list */
static int shorthand(Cur *c, Refs *refs, int *present) {
    const char *s;
    Py_ssize_t n;
    int list = open_list(c);
    *present = list == LIST_EMPTY || list == LIST_ITEMS;
    if (list != LIST_ITEMS) return list < 0 ? BAIL : 0;
    for (;;) {
        if (plain_string(c, &s, &n) < 0 || refs_put(refs, s, n, NAN) < 0) return BAIL;
        int more = next_or_close(c, ']');
        if (more <= 0) return more;
    }
}

/* one line (without its newline) -> rec; its retrieved refs appended to refs, then the
 * 'retrieved' shorthand's to short_refs (they come after the calls' in the record's order) */
static int record(Cur *c, Rec *r, Refs *refs, Refs *short_refs) {
    const char *k, *s;
    Py_ssize_t kn, n;
    int is_int;
    unsigned seen = 0;
    r->model = "default";
    r->model_n = 7;
    r->bench = "default";
    r->bench_n = 7;
    r->epoch = 1;
    r->invoked = -1;
    r->error = 0;
    r->nonempty = 0;
    r->shorthand = 0;
    r->answer = NULL;
    r->answer_n = 0;
    r->answer_esc = 0;
    ws(c);
    if (c->p >= c->end || *c->p != '{') return BAIL;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') return BAIL; /* required fields missing */
    for (;;) {
        if (member_key(c, &k, &kn, 1) < 0) return BAIL;
        unsigned key = 0;
#define KEY(w, bit) else if (kn == (Py_ssize_t)(sizeof(w) - 1) && memcmp(k, w, sizeof(w) - 1) == 0) key = bit
        if (0) {}
        KEY("task_id", K_TASK);
        KEY("condition", K_COND);
        KEY("correct", K_CORRECT);
        KEY("epoch", K_EPOCH);
        KEY("model", K_MODEL);
        KEY("benchmark", K_BENCH);
        KEY("retrievals", K_RETS);
        KEY("invoked", K_INV);
        KEY("error", K_ERROR);
        KEY("retrieved", K_SHORT);
        KEY("answer", K_ANSWER);
        KEY("arm", K_ARM);
#undef KEY
        if (key & seen) return BAIL;
        seen |= key;
        switch (key) {
        case K_TASK:
            if (plain_string(c, &r->task, &r->task_n) < 0 || r->task_n == 0) return BAIL;
            break;
        case K_COND:
            if (plain_string(c, &s, &n) < 0 || (r->enabled = condition_of(s, n)) < 0) return BAIL;
            break;
        case K_CORRECT:
            if (flag_value(c, 0, &r->correct) < 0) return BAIL;
            break;
        case K_EPOCH:
            if (number_span(c, &s, &n, &is_int) < 0 || !is_int || n > 18 || *s == '-') return BAIL;
            r->epoch = 0;
            for (Py_ssize_t i = 0; i < n; i++) r->epoch = r->epoch * 10 + (s[i] - '0');
            if (r->epoch < 1) return BAIL;
            break;
        case K_MODEL:
            if (plain_string(c, &r->model, &r->model_n) < 0) return BAIL;
            break;
        case K_BENCH:
            if (plain_string(c, &r->bench, &r->bench_n) < 0) return BAIL;
            break;
        case K_RETS:
            if (retrievals(c, refs, &r->nonempty) < 0) return BAIL;
            break;
        case K_INV:
            if (flag_value(c, 1, &r->invoked) < 0) return BAIL;
            break;
        case K_SHORT:
            if (shorthand(c, short_refs, &r->shorthand) < 0) return BAIL;
            break;
        case K_ANSWER:
            if (c->p < c->end && *c->p == '"') {
                if (string_span(c, &r->answer, &r->answer_n, &r->answer_esc) < 0) return BAIL;
            } else if (skip_value(c, 1) < 0) {
                return BAIL;
            }
            break;
        case K_ARM: /* an arm record (counterfactual run): read by the other paths, set aside */
            if (!(c->p < c->end && *c->p == 'n')) return BAIL;
            if (skip_value(c, 1) < 0) return BAIL;
            break;
        case K_ERROR:
            r->error = !(c->p < c->end && *c->p == 'n');
            if (skip_value(c, 1) < 0) return BAIL;
            break;
        default:
            if (skip_value(c, 1) < 0) return BAIL;
        }
        int more = next_or_close(c, '}');
        if (more < 0) return BAIL;
        if (!more) break;
    }
    ws(c);
    if (c->p < c->end && *c->p != '\n') return BAIL; /* one value per line */
    if ((seen & (K_TASK | K_COND | K_CORRECT)) != (K_TASK | K_COND | K_CORRECT)) return BAIL;
    return 0;
}

enum { OK = 0, BAILED = 1, NOMEM = 2 };

typedef struct {
    Local loc[4]; /* models, benchmarks, tasks, skills */
    Buf cols[11], rrec, rcol, rsc;
    Refs refs, short_refs;
    Nums nums;
    int64_t nrec;
    const char *start;
} Block;

/* Parse every line of the block into local-id columns; no Python API is called (the GIL is free). */
static int parse_block(const char *p, const char *end, Block *B) {
    B->start = p;
    /* the previous record's model and benchmark: most records repeat them */
    const char *last_s[2] = {NULL, NULL};
    Py_ssize_t last_n[2] = {0, 0};
    int64_t last_id[2] = {0, 0};
    while (p < end) {
        Cur c = {p, end, &B->nums};
        Rec r;
        B->refs.len = B->short_refs.len = 0;
        if (record(&c, &r, &B->refs, &B->short_refs) < 0) return B->nums.oom ? NOMEM : BAILED;
        const char *nl = c.p < end ? c.p : NULL; /* record() stopped at the newline or the end */
        int64_t ids[3];
        const char *spans[3] = {r.model, r.bench, r.task};
        Py_ssize_t lens[3] = {r.model_n, r.bench_n, r.task_n};
        for (int i = 0; i < 3; i++) {
            if (i < 2 && last_s[i] && last_n[i] == lens[i] && memcmp(last_s[i], spans[i], (size_t)lens[i]) == 0) {
                ids[i] = last_id[i];
                continue;
            }
            if ((ids[i] = local_id(&B->loc[i], spans[i], lens[i])) < 0) return NOMEM;
            if (ids[i] > INT32_MAX) return BAILED;
            if (i < 2) {
                last_s[i] = spans[i];
                last_n[i] = lens[i];
                last_id[i] = ids[i];
            }
        }
        int32_t m = (int32_t)ids[0], b = (int32_t)ids[1], t = (int32_t)ids[2];
        uint8_t en = (uint8_t)r.enabled, ok = (uint8_t)r.correct, err = (uint8_t)r.error;
        /* no 'invoked': a call was made when 'retrievals' lists one or 'retrieved' is present */
        uint8_t inv = r.enabled ? (uint8_t)(r.invoked >= 0 ? r.invoked : (r.nonempty || r.shorthand)) : 0;
        Buf *cols = B->cols;
        if (buf_put(&cols[0], &m, 4) || buf_put(&cols[1], &b, 4) || buf_put(&cols[2], &t, 4) ||
            buf_put(&cols[3], &r.epoch, 8) || buf_put(&cols[4], &en, 1) || buf_put(&cols[5], &ok, 1) ||
            buf_put(&cols[6], &err, 1) || buf_put(&cols[7], &inv, 1))
            return NOMEM;
        /* a string answer: where its raw text is in the block (the caller decodes the few it needs) */
        int64_t a_off = r.answer ? (int64_t)(r.answer - B->start) : -1, a_len = r.answer_n;
        uint8_t a_esc = (uint8_t)r.answer_esc;
        if (buf_put(&cols[8], &a_off, 8) || buf_put(&cols[9], &a_len, 8) || buf_put(&cols[10], &a_esc, 1))
            return NOMEM;
        for (size_t i = 0; i < B->short_refs.len; i++) /* the shorthand's ids come after the calls' */
            if (refs_put(&B->refs, B->short_refs.refs[i].s, B->short_refs.refs[i].n, NAN) < 0) return NOMEM;
        for (size_t i = 0; i < B->refs.len; i++) {
            const Ref *ref = &B->refs.refs[i];
            int64_t out = -1;
            if (r.enabled) { /* a disabled run's retrievals are checked, not kept */
                int64_t sid = local_id(&B->loc[3], ref->s, ref->n);
                out = (int64_t)(B->rsc.len / sizeof(double));
                if (sid < 0 || buf_put(&B->rrec, &B->nrec, 8) || buf_put(&B->rcol, &sid, 8) ||
                    buf_put(&B->rsc, &ref->score, 8))
                    return NOMEM;
            }
            if (ref->num && nums_put(&B->nums, ref->num, ref->num_n, out) < 0) return NOMEM;
        }
        B->nrec++;
        if (!nl) break;
        p = nl + 1;
    }
    return OK;
}

static PyObject *as_bytes(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len); }

PyDoc_STRVAR(scan_doc,
"scan(block, models, benchmarks, tasks, skills, tables) -> tuple | None\n\n"
"Per-record columns of a block of whole JSON Lines, or None when a line is not in the plain shape\n"
"(the vocabularies are then unchanged). The columns are bytes of native arrays: n, model, benchmark,\n"
"task (int32), epoch (int64), enabled, correct, error, invoked (uint8), and per retrieved skill of an\n"
"enabled record, in order of appearance: record (int64), skill (int64), score (float64, nan if none);\n"
"then per record the answer's raw text, when it is a string: offset in the block (int64, -1 if\n"
"none), length (int64) and whether it holds escapes (uint8).\n"
"The parsing runs without the GIL, so threads can scan blocks in parallel.");

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *dicts[4], *capsule;
    if (!PyArg_ParseTuple(args, "y*O!O!O!O!O", &view, &PyDict_Type, &dicts[0], &PyDict_Type, &dicts[1],
                          &PyDict_Type, &dicts[2], &PyDict_Type, &dicts[3], &capsule))
        return NULL;
    Tables *ts = PyCapsule_GetPointer(capsule, "skillaudit._scan.tables");
    if (!ts) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Block *B = calloc(1, sizeof(Block));
    if (!B) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    int64_t *map = NULL;
    int status;
    const char *start = view.buf;
    Py_BEGIN_ALLOW_THREADS
    status = parse_block(start, start + view.len, B);
    Py_END_ALLOW_THREADS
    if (status == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == BAILED) goto bail;
    /* numbers only Python converts exactly: a non-finite one means the line is not plain */
    for (size_t i = 0; i < B->nums.len; i++) {
        double v;
        if (convert(&B->nums.v[i], &v) < 0) goto bail;
        if (B->nums.v[i].out >= 0) ((double *)B->rsc.data)[B->nums.v[i].out] = v;
    }
    /* local ids -> vocabulary ids, interned in first-seen order */
    for (int i = 0; i < 4; i++) {
        Local *L = &B->loc[i];
        free(map);
        map = malloc((L->len ? L->len : 1) * sizeof(int64_t));
        if (!map) {
            PyErr_NoMemory();
            goto done;
        }
        for (size_t k = 0; k < L->len; k++) {
            if ((map[k] = global_id(&ts->t[i], dicts[i], &L->keys[k])) < 0) goto done;
            if (map[k] > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "more than 2**31 distinct ids");
                goto done;
            }
        }
        if (i < 3) {
            int32_t *col = (int32_t *)B->cols[i].data;
            for (int64_t r = 0; r < B->nrec; r++) col[r] = (int32_t)map[col[r]];
        } else {
            int64_t *col = (int64_t *)B->rcol.data;
            size_t nref = B->rcol.len / sizeof(int64_t);
            for (size_t r = 0; r < nref; r++) col[r] = map[col[r]];
        }
    }
    result = Py_BuildValue("(LNNNNNNNNNNNNNN)", (long long)B->nrec, as_bytes(&B->cols[0]),
                           as_bytes(&B->cols[1]), as_bytes(&B->cols[2]), as_bytes(&B->cols[3]),
                           as_bytes(&B->cols[4]), as_bytes(&B->cols[5]), as_bytes(&B->cols[6]),
                           as_bytes(&B->cols[7]), as_bytes(&B->rrec), as_bytes(&B->rcol), as_bytes(&B->rsc),
                           as_bytes(&B->cols[8]), as_bytes(&B->cols[9]), as_bytes(&B->cols[10]));
    goto done;
bail:
    result = Py_None;
    Py_INCREF(result);
done:
    free(map);
    for (int i = 0; i < 4; i++) local_free(&B->loc[i]);
    for (int i = 0; i < 11; i++) free(B->cols[i].data);
    free(B->rrec.data);
    free(B->rcol.data);
    free(B->rsc.data);
    free(B->refs.refs);
    free(B->short_refs.refs);
    free(B->nums.v);
    free(B);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ cost columns */
/* costs(): the fields the cost figures read (skillaudit.runs.costs.CostTable), per main record (no
 * arm, no error), in the plain shape only; None otherwise (the caller then decodes the block with
 * msgspec or as dicts, which define what each value means: this reader must agree with them). It
 * runs with the GIL held (numbers it cannot convert exactly are converted by Python at once). */
typedef struct {
    Local loc[5]; /* models, benchmarks, tasks, timeouts, skills */
    Buf m, b, t, e, cond, ok, hu, tok, lat, cached, usd, turns, score, tmo, srec, sskill;
    int64_t nmain;
} CostBlock;

/* a number's value as Python's float() of the decoded value (finite: JSON has no others) */
static int cost_number(Cur *c, double *out, int *is_int) {
    const char *s;
    Py_ssize_t n;
    int pending;
    if (number_span(c, &s, &n, is_int) < 0 || number_value(s, n, *is_int, out, &pending) < 0) return BAIL;
    if (pending) {
        Num num = {s, n, -1};
        if (convert(&num, out) < 0) return BAIL;
    }
    return 0;
}

/* an integer literal (at most 18 digits, either sign) */
static int cost_int(Cur *c, int64_t *out) {
    const char *s;
    Py_ssize_t n;
    int is_int;
    if (number_span(c, &s, &n, &is_int) < 0 || !is_int || n > 18) return BAIL;
    int neg = *s == '-';
    int64_t v = 0;
    for (Py_ssize_t i = neg; i < n; i++) v = v * 10 + (s[i] - '0');
    *out = neg ? -v : v;
    return 0;
}

/* skillaudit.runs.costs._number: a number (not a bool) as a float, anything else nan */
static int number_or_nan(Cur *c, double *out) {
    int is_int;
    *out = NAN;
    if (c->p < c->end && (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return cost_number(c, out, &is_int);
    return skip_value(c, 2);
}

/* cached_tokens: a non-negative int as a float, any other value nan; *given unless null */
static int cached_value(Cur *c, double *out, int *given) {
    *given = !(c->p < c->end && *c->p == 'n');
    *out = NAN;
    if (c->p < c->end && (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) {
        double v;
        int is_int;
        if (cost_number(c, &v, &is_int) < 0) return BAIL;
        if (is_int && v >= 0) *out = v;
        return 0;
    }
    return skip_value(c, 4);
}

/* meta.usage: costs._usage_of and costs._cached_of */
static int usage_value(Cur *c, int *hu, int64_t tok[2], double *cached) {
    const char *k;
    Py_ssize_t kn;
    if (!(c->p < c->end && *c->p == '{')) return skip_value(c, 2); /* not an object: not logged */
    c->p++;
    ws(c);
    unsigned seen = 0;
    int cached_given = 0;
    double details = NAN;
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        if (member_key(c, &k, &kn, 1) < 0) return BAIL;
        unsigned key = 0;
        if (kn == 13 && memcmp(k, "prompt_tokens", 13) == 0) key = 1;
        else if (kn == 17 && memcmp(k, "completion_tokens", 17) == 0) key = 2;
        else if (kn == 13 && memcmp(k, "cached_tokens", 13) == 0) key = 4;
        else if (kn == 21 && memcmp(k, "prompt_tokens_details", 21) == 0) key = 8;
        if (key & seen) return BAIL;
        seen |= key;
        if (key == 1 || key == 2) {
            if (c->p < c->end && *c->p == 'n') { /* null: not logged / 0 */
                if (literal(c, "null", 4) < 0) return BAIL;
            } else {
                int64_t v;
                if (cost_int(c, &v) < 0) return BAIL; /* a bool, float or string: the other paths decide */
                if (key == 1) *hu = 1;
                tok[key - 1] = v;
            }
        } else if (key == 4) {
            if (cached_value(c, cached, &cached_given) < 0) return BAIL;
        } else if (key == 8) {
            if (c->p < c->end && *c->p == '{') {
                c->p++;
                ws(c);
                int seen_c = 0, given;
                if (c->p < c->end && *c->p == '}') {
                    c->p++;
                } else {
                    for (;;) {
                        if (member_key(c, &k, &kn, 1) < 0) return BAIL;
                        if (kn == 13 && memcmp(k, "cached_tokens", 13) == 0) {
                            if (seen_c++ || cached_value(c, &details, &given) < 0) return BAIL;
                        } else if (skip_value(c, 4) < 0) {
                            return BAIL;
                        }
                        int more = next_or_close(c, '}');
                        if (more < 0) return BAIL;
                        if (!more) break;
                    }
                }
            } else if (skip_value(c, 3) < 0) {
                return BAIL;
            }
        } else if (skip_value(c, 3) < 0) {
            return BAIL;
        }
        int more = next_or_close(c, '}');
        if (more < 0) return BAIL;
        if (!more) break;
    }
    if (!*hu) tok[0] = tok[1] = 0; /* no prompt_tokens: the usage is not logged */
    if (!cached_given) *cached = details;
    return 0;
}

/* whether a value is truthy in Python (a call's `error`) */
static int truthy(Cur *c, int *out) {
    if (c->p >= c->end) return BAIL;
    char ch = *c->p;
    if (ch == 'n' || ch == 'f') {
        *out = 0;
        return skip_value(c, 3);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        double v;
        int is_int;
        if (cost_number(c, &v, &is_int) < 0) return BAIL;
        *out = v != 0;
        return 0;
    }
    if (ch == '"') {
        *out = !(c->p + 1 < c->end && c->p[1] == '"');
        return skip_value(c, 3);
    }
    if (ch == '[' || ch == '{') {
        const char *q = c->p + 1;
        while (q < c->end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        *out = !(q < c->end && *q == (ch == '[' ? ']' : '}'));
        return skip_value(c, 3);
    }
    *out = 1;
    return skip_value(c, 3);
}

/* the skills of one call (costs._shown): ids of string items and of objects' string `id`s */
static int cost_call_skills(Cur *c, Refs *refs) {
    const char *k, *s;
    Py_ssize_t kn, n;
    int list = open_list(c);
    if (list != LIST_ITEMS) return list < 0 ? BAIL : 0;
    for (;;) {
        if (c->p < c->end && *c->p == '"') {
            if (plain_string(c, &s, &n) < 0 || refs_put(refs, s, n, NAN) < 0) return BAIL;
        } else if (c->p < c->end && *c->p == '{') {
            c->p++;
            ws(c);
            int seen_id = 0;
            if (c->p < c->end && *c->p == '}') {
                c->p++;
            } else {
                for (;;) {
                    if (member_key(c, &k, &kn, 1) < 0) return BAIL;
                    if (kn == 2 && memcmp(k, "id", 2) == 0) {
                        if (seen_id++) return BAIL;
                        if (c->p < c->end && *c->p == '"') {
                            if (plain_string(c, &s, &n) < 0 || refs_put(refs, s, n, NAN) < 0) return BAIL;
                        } else if (skip_value(c, 5) < 0) {
                            return BAIL;
                        }
                    } else if (skip_value(c, 5) < 0) {
                        return BAIL;
                    }
                    int more = next_or_close(c, '}');
                    if (more < 0) return BAIL;
                    if (!more) break;
                }
            }
        } else if (skip_value(c, 4) < 0) { /* a number, list or null: no skill */
            return BAIL;
        }
        int more = next_or_close(c, ']');
        if (more <= 0) return more;
    }
}

/* 'retrievals': the skills of the calls without an error, appended to refs (calls that are not
 * objects are passed over, as costs._shown does) */
static int cost_retrievals(Cur *c, Refs *refs) {
    const char *k;
    Py_ssize_t kn;
    if (c->p < c->end && (*c->p == '"' || *c->p == '{' || *c->p == 't' || *c->p == 'f'))
        return skip_value(c, 1); /* iterated by the dict path: no call objects */
    int list = open_list(c);
    if (list != LIST_ITEMS) return list < 0 ? BAIL : 0;
    for (;;) {
        if (c->p < c->end && *c->p == '{') {
            size_t mark = refs->len;
            int err = 0, seen_skills = 0, seen_err = 0;
            c->p++;
            ws(c);
            if (c->p < c->end && *c->p == '}') {
                c->p++;
            } else {
                for (;;) {
                    if (member_key(c, &k, &kn, 1) < 0) return BAIL;
                    if (kn == 6 && memcmp(k, "skills", 6) == 0) {
                        if (seen_skills++ || cost_call_skills(c, refs) < 0) return BAIL;
                    } else if (kn == 5 && memcmp(k, "error", 5) == 0) {
                        if (seen_err++ || truthy(c, &err) < 0) return BAIL;
                    } else if (skip_value(c, 3) < 0) {
                        return BAIL;
                    }
                    int more = next_or_close(c, '}');
                    if (more < 0) return BAIL;
                    if (!more) break;
                }
            }
            if (err) refs->len = mark; /* a failed call showed nothing */
        } else if (skip_value(c, 2) < 0) {
            return BAIL;
        }
        int more = next_or_close(c, ']');
        if (more <= 0) return more;
    }
}

enum { C_TASK = 1, C_COND = 2, C_CORRECT = 4, C_EPOCH = 8, C_MODEL = 16, C_BENCH = 32, C_RETS = 64,
       C_ERROR = 128, C_ARM = 256, C_SCORE = 512, C_META = 1024 };

typedef struct {
    const char *task, *model, *bench, *tmo;
    Py_ssize_t task_n, model_n, bench_n, tmo_n;
    int64_t epoch, tok[2];
    int cond, ok, main, hu;
    double score, lat, cached, usd, turns;
} CostRec;

static int cost_meta(Cur *c, CostRec *r) {
    const char *k;
    Py_ssize_t kn;
    if (!(c->p < c->end && *c->p == '{')) return skip_value(c, 1); /* not an object: read as {} */
    c->p++;
    ws(c);
    unsigned seen = 0;
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        if (member_key(c, &k, &kn, 1) < 0) return BAIL;
        unsigned key = 0;
        if (kn == 5 && memcmp(k, "usage", 5) == 0) key = 1;
        else if (kn == 9 && memcmp(k, "latency_s", 9) == 0) key = 2;
        else if (kn == 7 && memcmp(k, "timeout", 7) == 0) key = 4;
        else if (kn == 8 && memcmp(k, "cost_usd", 8) == 0) key = 8;
        else if (kn == 5 && memcmp(k, "turns", 5) == 0) key = 16;
        if (key & seen) return BAIL;
        seen |= key;
        int rc;
        switch (key) {
        case 1:
            rc = usage_value(c, &r->hu, r->tok, &r->cached);
            break;
        case 2: /* costs._latency_of: an int or float (a bool too) */
            if (c->p < c->end && (*c->p == 't' || *c->p == 'f')) {
                r->lat = *c->p == 't';
                rc = skip_value(c, 2);
            } else {
                rc = number_or_nan(c, &r->lat);
            }
            break;
        case 4:
            if (c->p < c->end && *c->p == '"') {
                rc = plain_string(c, &r->tmo, &r->tmo_n);
            } else {
                r->tmo = NULL;
                rc = skip_value(c, 2);
            }
            break;
        case 8:
            rc = number_or_nan(c, &r->usd);
            break;
        case 16:
            rc = number_or_nan(c, &r->turns);
            break;
        default:
            rc = skip_value(c, 2);
        }
        if (rc < 0) return BAIL;
        int more = next_or_close(c, '}');
        if (more < 0) return BAIL;
        if (!more) break;
    }
    return 0;
}

static int cost_record(Cur *c, CostRec *r, Refs *refs) {
    const char *k, *s;
    Py_ssize_t kn, n;
    unsigned seen = 0;
    r->model = r->bench = r->tmo = NULL;
    r->epoch = 1;
    r->cond = 2;
    r->ok = 0;
    r->main = 1;
    r->hu = 0;
    r->tok[0] = r->tok[1] = 0;
    r->score = r->lat = r->cached = r->usd = r->turns = NAN;
    refs->len = 0;
    ws(c);
    if (c->p >= c->end || *c->p != '{') return BAIL;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') return BAIL;
    for (;;) {
        if (member_key(c, &k, &kn, 1) < 0) return BAIL;
        unsigned key = 0;
#define KEY(w, bit) else if (kn == (Py_ssize_t)(sizeof(w) - 1) && memcmp(k, w, sizeof(w) - 1) == 0) key = bit
        if (0) {}
        KEY("task_id", C_TASK);
        KEY("condition", C_COND);
        KEY("correct", C_CORRECT);
        KEY("epoch", C_EPOCH);
        KEY("model", C_MODEL);
        KEY("benchmark", C_BENCH);
        KEY("retrievals", C_RETS);
        KEY("error", C_ERROR);
        KEY("arm", C_ARM);
        KEY("score", C_SCORE);
        KEY("meta", C_META);
#undef KEY
        if (key & seen) return BAIL;
        seen |= key;
        int rc = 0;
        switch (key) {
        case C_TASK:
            rc = plain_string(c, &r->task, &r->task_n);
            break;
        case C_COND: /* CostTable's condition codes: exactly "enabled" 0, "disabled" 1, else 2 */
            if (c->p < c->end && *c->p == '"') {
                if ((rc = plain_string(c, &s, &n)) == 0)
                    r->cond = (n == 7 && memcmp(s, "enabled", 7) == 0) ? 0 : (n == 8 && memcmp(s, "disabled", 8) == 0) ? 1 : 2;
            } else {
                rc = skip_value(c, 1);
            }
            break;
        case C_CORRECT: {
            int v;
            rc = flag_value(c, 1, &v);
            r->ok = v == 1;
            break;
        }
        case C_EPOCH: /* the reader refuses others */
            rc = cost_int(c, &r->epoch) < 0 || r->epoch < 1 ? BAIL : 0;
            break;
        case C_MODEL: /* null: as not logged */
            rc = c->p < c->end && *c->p == 'n' ? literal(c, "null", 4) : plain_string(c, &r->model, &r->model_n);
            break;
        case C_BENCH:
            rc = c->p < c->end && *c->p == 'n' ? literal(c, "null", 4) : plain_string(c, &r->bench, &r->bench_n);
            break;
        case C_RETS:
            rc = cost_retrievals(c, refs);
            break;
        case C_ERROR:
        case C_ARM:
            if (c->p < c->end && *c->p == 'n') rc = literal(c, "null", 4);
            else {
                r->main = 0;
                rc = skip_value(c, 1);
            }
            break;
        case C_SCORE:
            rc = number_or_nan(c, &r->score);
            break;
        case C_META:
            rc = cost_meta(c, r);
            break;
        default:
            rc = skip_value(c, 1);
        }
        if (rc < 0) return BAIL;
        int more = next_or_close(c, '}');
        if (more < 0) return BAIL;
        if (!more) break;
    }
    ws(c);
    if (c->p < c->end && *c->p != '\n') return BAIL;
    if (!(seen & C_TASK)) return BAIL;
    return 0;
}

#define PUT(buf, v) buf_put(&(buf), &(v), sizeof(v))

static int cost_block(const char *p, const char *end, CostBlock *B, Refs *refs, Nums *nums) {
    int64_t shown[64];
    while (p < end) {
        Cur c = {p, end, nums};
        CostRec r;
        if (cost_record(&c, &r, refs) < 0) return nums->oom ? NOMEM : BAILED;
        const char *nl = c.p < end ? c.p : NULL;
        if (r.main) {
            int32_t ids[4];
            const char *spans[4] = {r.model, r.bench, r.task, r.tmo};
            Py_ssize_t lens[4] = {r.model_n, r.bench_n, r.task_n, r.tmo_n};
            for (int i = 0; i < 4; i++) {
                int64_t id = spans[i] ? local_id(&B->loc[i], spans[i], lens[i]) : -1;
                if (spans[i] && id < 0) return NOMEM;
                if (id > INT32_MAX) return BAILED;
                ids[i] = (int32_t)id;
            }
            int8_t cond = (int8_t)r.cond;
            uint8_t ok = (uint8_t)r.ok, hu = (uint8_t)r.hu;
            if (PUT(B->m, ids[0]) || PUT(B->b, ids[1]) || PUT(B->t, ids[2]) || PUT(B->tmo, ids[3]) ||
                PUT(B->e, r.epoch) || PUT(B->cond, cond) || PUT(B->ok, ok) || PUT(B->hu, hu) ||
                buf_put(&B->tok, r.tok, sizeof(r.tok)) || PUT(B->lat, r.lat) || PUT(B->cached, r.cached) ||
                PUT(B->usd, r.usd) || PUT(B->turns, r.turns) || PUT(B->score, r.score))
                return NOMEM;
            if (r.cond == 0) { /* the skills an enabled record was shown, each once, first-seen order */
                size_t ns = 0;
                for (size_t i = 0; i < refs->len; i++) {
                    int64_t sid = local_id(&B->loc[4], refs->refs[i].s, refs->refs[i].n);
                    if (sid < 0) return NOMEM;
                    size_t j = 0;
                    while (j < ns && shown[j] != sid) j++;
                    if (j < ns) continue;
                    if (ns == 64) return BAILED; /* an unusual record: the other paths read it */
                    shown[ns++] = sid;
                    if (PUT(B->srec, B->nmain) || PUT(B->sskill, sid)) return NOMEM;
                }
            }
            B->nmain++;
        }
        if (!nl) break;
        p = nl + 1;
    }
    return OK;
}

static PyObject *vocab_list(const Local *L) {
    PyObject *out = PyList_New((Py_ssize_t)L->len);
    if (!out) return NULL;
    for (size_t k = 0; k < L->len; k++) {
        PyObject *s = PyUnicode_DecodeUTF8(L->keys[k].s, L->keys[k].n, "strict");
        if (!s) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, s);
    }
    return out;
}

PyDoc_STRVAR(costs_doc,
"costs(block) -> tuple | None\n\n"
"The cost columns of the main records (no arm, no error) of a block of whole JSON Lines, or None when\n"
"a line is not in the plain shape. Bytes of native arrays, per main record: model, benchmark, task,\n"
"timeout (int32 block-local ids, -1: not logged / not a string), epoch (int64), condition (int8: 0\n"
"\"enabled\", 1 \"disabled\", 2 other), correct, usage logged (uint8), prompt and completion tokens\n"
"(int64 pairs), latency, cached tokens, cost in USD, turns, score (float64, nan: not logged); then\n"
"per skill an enabled record was shown (calls without an error, each skill once): record (int64,\n"
"index among the main records) and skill (int64 local id); then the local vocabularies (lists of\n"
"str): models, benchmarks, tasks, timeouts, skills.");

static PyObject *costs(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    CostBlock *B = calloc(1, sizeof(CostBlock));
    Refs refs = {NULL, 0, 0};
    PyObject *result = NULL;
    if (!B) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Nums nums = {NULL, 0, 0, 0};
    int status = cost_block(view.buf, (const char *)view.buf + view.len, B, &refs, &nums);
    /* numbers skipped over whose finiteness only Python's conversion tells (an exponent) */
    for (size_t i = 0; status == OK && i < nums.len; i++) {
        double v;
        if (convert(&nums.v[i], &v) < 0) status = BAILED;
    }
    free(nums.v);
    if (status == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == BAILED) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *v[5] = {NULL};
    for (int i = 0; i < 5; i++) {
        if (!(v[i] = vocab_list(&B->loc[i]))) {
            for (int j = 0; j < i; j++) Py_DECREF(v[j]);
            goto done;
        }
    }
    result = Py_BuildValue("(LNNNNNNNNNNNNNNNNNNNNN)", (long long)B->nmain, as_bytes(&B->m), as_bytes(&B->b),
                           as_bytes(&B->t), as_bytes(&B->tmo), as_bytes(&B->e), as_bytes(&B->cond),
                           as_bytes(&B->ok), as_bytes(&B->hu), as_bytes(&B->tok), as_bytes(&B->lat),
                           as_bytes(&B->cached), as_bytes(&B->usd), as_bytes(&B->turns), as_bytes(&B->score),
                           as_bytes(&B->srec), as_bytes(&B->sskill), v[0], v[1], v[2], v[3], v[4]);
done:
    for (int i = 0; i < 5; i++) local_free(&B->loc[i]);
    Buf *bufs[] = {&B->m, &B->b, &B->t, &B->e, &B->cond, &B->ok, &B->hu, &B->tok, &B->lat, &B->cached,
                   &B->usd, &B->turns, &B->score, &B->tmo, &B->srec, &B->sskill};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]->data);
    free(refs.refs);
    free(B);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(maybe_huge_doc,
"maybe_huge(block) -> bool\n\n"
"Whether the bytes hold what could be a number too large for a double: an exponent of three\n"
"digits after a digit or '.', or 200 digits in a row (runs.py's _MAYBE_HUGE, without a regex).");

static PyObject *maybe_huge(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    const unsigned char *p = view.buf, *end = p + view.len;
    int found = 0;
    Py_ssize_t run = 0;
    Py_BEGIN_ALLOW_THREADS
    for (const unsigned char *q = p; q < end; q++) {
        unsigned char ch = *q;
        if (ch >= '0' && ch <= '9') {
            if (++run >= 200) {
                found = 1;
                break;
            }
            continue;
        }
        run = 0;
        if ((ch == 'e' || ch == 'E') && q > p && ((q[-1] >= '0' && q[-1] <= '9') || q[-1] == '.')) {
            const unsigned char *d = q + 1;
            if (d < end && (*d == '+' || *d == '-')) d++;
            if (end - d >= 3 && d[0] >= '0' && d[0] <= '9' && d[1] >= '0' && d[1] <= '9' && d[2] >= '0' &&
                d[2] <= '9') {
                found = 1;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyBool_FromLong(found);
}

static PyObject *tables(PyObject *self, PyObject *unused) {
    Tables *ts = calloc(1, sizeof(Tables));
    if (!ts) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(ts, "skillaudit._scan.tables", tables_free);
    if (!capsule) free(ts);
    return capsule;
}

static PyMethodDef methods[] = {
    {"tables", tables, METH_NOARGS,
     "tables() -> capsule\n\nThe id caches scan() keeps between calls for one set of vocabularies."},
    {"scan", scan, METH_VARARGS, scan_doc},
    {"maybe_huge", maybe_huge, METH_VARARGS, maybe_huge_doc},
    {"costs", costs, METH_VARARGS, costs_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "Column scanner for plain run-log records (see runs.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    init_stop();
    return PyModule_Create(&module);
}
