/* Maintained evicted neighbourhoods in C: the hot part of the DTR runtime.

   `Regions` keeps, for every storage, its forward (children direction) and reverse (parents
   direction) evicted neighbourhood: interior (evicted storages reached through evicted
   storages), frontier (resident storages bordering them) and the compute of the interior.
   Sets are bitsets over storage ids. The semantics are exactly those of the Python
   reference, engine/regions.py (class `PyRegions`), which the tests run side by side:
   fresh searches after a computation, incremental absorption after an eviction (simrd's
   maintenance, which is not always what a fresh search finds).

   The material and pinned flags are bytearrays shared with the runtime; the compute sums
   are also written into two Python lists the scoring loop reads. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int32_t *items;
    int32_t len, cap;
} IntVec;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;      /* storage ids are 0..n-1 */
    Py_ssize_t words;  /* bitset length in 64-bit words */
    IntVec *children;  /* storage graph, grown as operators are created */
    IntVec *parents;
    int64_t *compute;  /* compute of each storage (its distinct operators) */
    uint64_t **fwd_interior, **fwd_frontier, **rev_interior, **rev_frontier;
    int64_t *fwd_sum, *rev_sum;
    PyObject *material;   /* bytearray */
    PyObject *pinned;     /* bytearray */
    PyObject *fwd_list;   /* list of int: mirror of fwd_sum */
    PyObject *rev_list;   /* list of int: mirror of rev_sum */
    uint64_t *scratch_a, *scratch_b, *scratch_d;
    int32_t *stack;
    long long searches, visited, edges;  /* work counters, for profiling */
} Regions;

static int vec_push(IntVec *v, int32_t x) {
    if (v->len == v->cap) {
        int32_t cap = v->cap ? v->cap * 2 : 4;
        int32_t *grown = (int32_t *)PyMem_Realloc(v->items, sizeof(int32_t) * cap);
        if (!grown) { PyErr_NoMemory(); return -1; }
        v->items = grown;
        v->cap = cap;
    }
    v->items[v->len++] = x;
    return 0;
}

static int vec_contains(const IntVec *v, int32_t x) {
    for (int32_t i = 0; i < v->len; i++)
        if (v->items[i] == x) return 1;
    return 0;
}

static uint64_t *bits(Regions *r, uint64_t **table, Py_ssize_t s) {
    if (!table[s]) {
        table[s] = (uint64_t *)PyMem_Calloc(r->words, sizeof(uint64_t));
        if (!table[s]) PyErr_NoMemory();
    }
    return table[s];
}

static inline int test_bit(const uint64_t *b, Py_ssize_t i) { return b && ((b[i >> 6] >> (i & 63)) & 1); }
static inline void set_bit(uint64_t *b, Py_ssize_t i) { b[i >> 6] |= (uint64_t)1 << (i & 63); }
static inline void clear_bit(uint64_t *b, Py_ssize_t i) { b[i >> 6] &= ~((uint64_t)1 << (i & 63)); }

static int mirror(PyObject *list, Py_ssize_t s, int64_t value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (!v) return -1;
    return PyList_SetItem(list, s, v);  /* steals v */
}

static void Regions_dealloc(Regions *r) {
    for (Py_ssize_t s = 0; s < r->n; s++) {
        if (r->children) PyMem_Free(r->children[s].items);
        if (r->parents) PyMem_Free(r->parents[s].items);
        if (r->fwd_interior) PyMem_Free(r->fwd_interior[s]);
        if (r->fwd_frontier) PyMem_Free(r->fwd_frontier[s]);
        if (r->rev_interior) PyMem_Free(r->rev_interior[s]);
        if (r->rev_frontier) PyMem_Free(r->rev_frontier[s]);
    }
    PyMem_Free(r->children);
    PyMem_Free(r->parents);
    PyMem_Free(r->compute);
    PyMem_Free(r->fwd_interior);
    PyMem_Free(r->fwd_frontier);
    PyMem_Free(r->rev_interior);
    PyMem_Free(r->rev_frontier);
    PyMem_Free(r->fwd_sum);
    PyMem_Free(r->rev_sum);
    PyMem_Free(r->scratch_a);
    PyMem_Free(r->scratch_b);
    PyMem_Free(r->scratch_d);
    PyMem_Free(r->stack);
    Py_XDECREF(r->material);
    Py_XDECREF(r->pinned);
    Py_XDECREF(r->fwd_list);
    Py_XDECREF(r->rev_list);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int Regions_init(Regions *r, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"n", "material", "pinned", "fwd_compute", "rev_compute", NULL};
    Py_ssize_t n;
    PyObject *material, *pinned, *fwd_list, *rev_list;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nO!O!O!O!", kwlist, &n, &PyByteArray_Type,
                                     &material, &PyByteArray_Type, &pinned, &PyList_Type,
                                     &fwd_list, &PyList_Type, &rev_list))
        return -1;
    if (n < 0 || n > INT32_MAX || PyByteArray_GET_SIZE(material) < n ||
        PyByteArray_GET_SIZE(pinned) < n || PyList_GET_SIZE(fwd_list) < n ||
        PyList_GET_SIZE(rev_list) < n) {
        PyErr_SetString(PyExc_ValueError, "Regions: inconsistent sizes");
        return -1;
    }
    r->n = n;
    r->words = (n + 63) / 64 + 1;
    Py_ssize_t cells = n ? n : 1;
    r->children = (IntVec *)PyMem_Calloc(cells, sizeof(IntVec));
    r->parents = (IntVec *)PyMem_Calloc(cells, sizeof(IntVec));
    r->compute = (int64_t *)PyMem_Calloc(cells, sizeof(int64_t));
    r->fwd_interior = (uint64_t **)PyMem_Calloc(cells, sizeof(uint64_t *));
    r->fwd_frontier = (uint64_t **)PyMem_Calloc(cells, sizeof(uint64_t *));
    r->rev_interior = (uint64_t **)PyMem_Calloc(cells, sizeof(uint64_t *));
    r->rev_frontier = (uint64_t **)PyMem_Calloc(cells, sizeof(uint64_t *));
    r->fwd_sum = (int64_t *)PyMem_Calloc(cells, sizeof(int64_t));
    r->rev_sum = (int64_t *)PyMem_Calloc(cells, sizeof(int64_t));
    r->scratch_a = (uint64_t *)PyMem_Calloc(r->words, sizeof(uint64_t));
    r->scratch_b = (uint64_t *)PyMem_Calloc(r->words, sizeof(uint64_t));
    r->scratch_d = (uint64_t *)PyMem_Calloc(r->words, sizeof(uint64_t));
    r->stack = (int32_t *)PyMem_Calloc(cells + 1, sizeof(int32_t));
    if (!r->children || !r->parents || !r->compute || !r->fwd_interior || !r->fwd_frontier ||
        !r->rev_interior || !r->rev_frontier || !r->fwd_sum || !r->rev_sum || !r->scratch_a ||
        !r->scratch_b || !r->scratch_d || !r->stack) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(material);
    Py_INCREF(pinned);
    Py_INCREF(fwd_list);
    Py_INCREF(rev_list);
    r->material = material;
    r->pinned = pinned;
    r->fwd_list = fwd_list;
    r->rev_list = rev_list;
    return 0;
}

static int check_id(Regions *r, Py_ssize_t s) {
    if (s < 0 || s >= r->n) {
        PyErr_Format(PyExc_IndexError, "storage id %zd out of range", s);
        return -1;
    }
    return 0;
}

/* Fresh search from base in one direction; stores interior, frontier and their compute. */
static int rebuild_one(Regions *r, Py_ssize_t base, int forward) {
    IntVec *adjacency = forward ? r->children : r->parents;
    uint64_t *interior = bits(r, forward ? r->fwd_interior : r->rev_interior, base);
    uint64_t *frontier = bits(r, forward ? r->fwd_frontier : r->rev_frontier, base);
    if (!interior || !frontier) return -1;
    memset(interior, 0, sizeof(uint64_t) * r->words);
    memset(frontier, 0, sizeof(uint64_t) * r->words);
    const char *material = PyByteArray_AS_STRING(r->material);
    int64_t total = 0;
    Py_ssize_t top = 0;
    r->stack[top++] = (int32_t)base;
    r->searches++;
    while (top > 0) {
        const IntVec *edges = &adjacency[r->stack[--top]];
        r->visited++;
        r->edges += edges->len;
        for (int32_t j = 0; j < edges->len; j++) {
            int32_t u = edges->items[j];
            if (material[u]) {
                if (u != base) set_bit(frontier, u);
            } else if (!test_bit(interior, u)) {
                set_bit(interior, u);
                total += r->compute[u];
                r->stack[top++] = u;  /* each storage is pushed at most once: top <= n */
            }
        }
    }
    if (forward) r->fwd_sum[base] = total;
    else r->rev_sum[base] = total;
    return mirror(forward ? r->fwd_list : r->rev_list, base, total);
}

static PyObject *Regions_add_edge(Regions *r, PyObject *args) {
    Py_ssize_t parent, child;
    if (!PyArg_ParseTuple(args, "nn", &parent, &child)) return NULL;
    if (check_id(r, parent) < 0 || check_id(r, child) < 0) return NULL;
    if (!vec_contains(&r->children[parent], (int32_t)child)) {
        if (vec_push(&r->children[parent], (int32_t)child) < 0) return NULL;
    }
    if (!vec_contains(&r->parents[child], (int32_t)parent)) {
        if (vec_push(&r->parents[child], (int32_t)parent) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Regions_set_compute(Regions *r, PyObject *args) {
    Py_ssize_t s;
    long long value;
    if (!PyArg_ParseTuple(args, "nL", &s, &value)) return NULL;
    if (check_id(r, s) < 0) return NULL;
    r->compute[s] = value;
    Py_RETURN_NONE;
}

static PyObject *Regions_rebuild(Regions *r, PyObject *args) {
    Py_ssize_t base;
    int forward;
    if (!PyArg_ParseTuple(args, "np", &base, &forward)) return NULL;
    if (check_id(r, base) < 0 || rebuild_one(r, base, forward) < 0) return NULL;
    Py_RETURN_NONE;
}

/* After a computation made `storages` resident: search their neighbourhoods afresh, then
   those of the unpinned storages on their frontiers (the ones whose neighbourhood they cut). */
static PyObject *Regions_after_compute(Regions *r, PyObject *storages) {
    if (!PyList_Check(storages)) {
        PyErr_SetString(PyExc_TypeError, "after_compute expects a list of storage ids");
        return NULL;
    }
    uint64_t *affected_fwd = r->scratch_a, *affected_rev = r->scratch_b;
    memset(affected_fwd, 0, sizeof(uint64_t) * r->words);
    memset(affected_rev, 0, sizeof(uint64_t) * r->words);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(storages); i++) {
        Py_ssize_t s = PyLong_AsSsize_t(PyList_GET_ITEM(storages, i));
        if (s == -1 && PyErr_Occurred()) return NULL;
        if (check_id(r, s) < 0 || rebuild_one(r, s, 1) < 0 || rebuild_one(r, s, 0) < 0)
            return NULL;
        const uint64_t *rf = r->rev_frontier[s], *ff = r->fwd_frontier[s];
        for (Py_ssize_t w = 0; w < r->words; w++) {
            affected_fwd[w] |= rf[w];
            affected_rev[w] |= ff[w];
        }
    }
    const char *pinned = PyByteArray_AS_STRING(r->pinned);
    for (int pass = 0; pass < 2; pass++) {
        const uint64_t *affected = pass == 0 ? affected_fwd : affected_rev;
        for (Py_ssize_t w = 0; w < r->words; w++) {
            uint64_t word = affected[w];
            while (word) {
                Py_ssize_t s = (w << 6) + __builtin_ctzll(word);
                word &= word - 1;
                if (!pinned[s] && rebuild_one(r, s, pass == 0) < 0) return NULL;
            }
        }
    }
    Py_RETURN_NONE;
}

/* Fold evicted storage s into the neighbourhood (direction `forward`) of every unpinned
   storage on s's opposite frontier, the incremental way simrd maintains them. */
static int absorb_into(Regions *r, Py_ssize_t s, int forward) {
    uint64_t **interior_t = forward ? r->fwd_interior : r->rev_interior;
    uint64_t **frontier_t = forward ? r->fwd_frontier : r->rev_frontier;
    int64_t *sum = forward ? r->fwd_sum : r->rev_sum;
    PyObject *list = forward ? r->fwd_list : r->rev_list;
    /* forward neighbourhoods are updated for the storages on s's reverse frontier */
    const uint64_t *drivers = forward ? r->rev_frontier[s] : r->fwd_frontier[s];
    if (!drivers) return 0;
    const char *pinned = PyByteArray_AS_STRING(r->pinned);
    for (Py_ssize_t w = 0; w < r->words; w++) {
        uint64_t word = drivers[w];
        while (word) {
            Py_ssize_t p = (w << 6) + __builtin_ctzll(word);
            word &= word - 1;
            if (pinned[p]) continue;
            uint64_t *front = bits(r, frontier_t, p);
            uint64_t *interior = bits(r, interior_t, p);
            if (!front || !interior) return -1;
            if (!test_bit(front, s)) {
                PyErr_Format(PyExc_RuntimeError,
                             "maintained neighbourhood of storage %zd lacks evicted storage %zd "
                             "on its frontier (simrd stops on an assertion here)", p, s);
                return -1;
            }
            clear_bit(front, s);
            const uint64_t *s_front = frontier_t[s];
            const uint64_t *s_interior = interior_t[s];
            uint64_t *diff = r->scratch_d;
            for (Py_ssize_t k = 0; k < r->words; k++) {
                if (s_front) front[k] |= s_front[k];
                diff[k] = s_interior ? (s_interior[k] & ~interior[k]) : 0;
            }
            set_bit(diff, s);
            int64_t added = 0;
            for (Py_ssize_t k = 0; k < r->words; k++) {
                uint64_t d = diff[k];
                interior[k] |= d;
                while (d) {
                    added += r->compute[(k << 6) + __builtin_ctzll(d)];
                    d &= d - 1;
                }
            }
            sum[p] += added;
            if (mirror(list, p, sum[p]) < 0) return -1;
        }
    }
    return 0;
}

static PyObject *Regions_absorb_evicted(Regions *r, PyObject *arg) {
    Py_ssize_t s = PyLong_AsSsize_t(arg);
    if (s == -1 && PyErr_Occurred()) return NULL;
    if (check_id(r, s) < 0) return NULL;
    if (absorb_into(r, s, 1) < 0 || absorb_into(r, s, 0) < 0) return NULL;
    uint64_t *tables[4] = {r->fwd_interior[s], r->fwd_frontier[s], r->rev_interior[s],
                           r->rev_frontier[s]};
    for (int i = 0; i < 4; i++)
        if (tables[i]) memset(tables[i], 0, sizeof(uint64_t) * r->words);
    r->fwd_sum[s] = 0;
    r->rev_sum[s] = 0;
    if (mirror(r->fwd_list, s, 0) < 0 || mirror(r->rev_list, s, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Regions_e_star_size(Regions *r, PyObject *arg) {
    Py_ssize_t s = PyLong_AsSsize_t(arg);
    if (s == -1 && PyErr_Occurred()) return NULL;
    if (check_id(r, s) < 0) return NULL;
    const uint64_t *a = r->fwd_interior[s], *b = r->rev_interior[s];
    long long count = 0;
    for (Py_ssize_t w = 0; w < r->words; w++)
        count += __builtin_popcountll((a ? a[w] : 0) | (b ? b[w] : 0));
    return PyLong_FromLongLong(count);
}

static PyObject *to_set(const uint64_t *b, Py_ssize_t words) {
    PyObject *out = PySet_New(NULL);
    if (!out || !b) return out;
    for (Py_ssize_t w = 0; w < words; w++) {
        uint64_t word = b[w];
        while (word) {
            PyObject *v = PyLong_FromSsize_t((w << 6) + __builtin_ctzll(word));
            word &= word - 1;
            if (!v || PySet_Add(out, v) < 0) { Py_XDECREF(v); Py_DECREF(out); return NULL; }
            Py_DECREF(v);
        }
    }
    return out;
}

static PyObject *Regions_region(Regions *r, PyObject *args) {
    Py_ssize_t s;
    int forward;
    if (!PyArg_ParseTuple(args, "np", &s, &forward)) return NULL;
    if (check_id(r, s) < 0) return NULL;
    PyObject *interior = to_set(forward ? r->fwd_interior[s] : r->rev_interior[s], r->words);
    PyObject *frontier = to_set(forward ? r->fwd_frontier[s] : r->rev_frontier[s], r->words);
    if (!interior || !frontier) { Py_XDECREF(interior); Py_XDECREF(frontier); return NULL; }
    return Py_BuildValue("(NNL)", interior, frontier,
                         (long long)(forward ? r->fwd_sum[s] : r->rev_sum[s]));
}

static PyObject *Regions_neighbours(Regions *r, PyObject *args) {
    Py_ssize_t s;
    int forward;
    if (!PyArg_ParseTuple(args, "np", &s, &forward)) return NULL;
    if (check_id(r, s) < 0) return NULL;
    const IntVec *v = forward ? &r->children[s] : &r->parents[s];
    PyObject *out = PyList_New(v->len);
    if (!out) return NULL;
    for (int32_t i = 0; i < v->len; i++) PyList_SET_ITEM(out, i, PyLong_FromLong(v->items[i]));
    return out;
}

static PyObject *Regions_stats(Regions *r, PyObject *unused) {
    return Py_BuildValue("{sLsLsL}", "searches", r->searches, "visited", r->visited, "edges",
                         r->edges);
}

static PyMethodDef Regions_methods[] = {
    {"stats", (PyCFunction)Regions_stats, METH_NOARGS, "work counters: searches, visited, edges"},
    {"add_edge", (PyCFunction)Regions_add_edge, METH_VARARGS, "add_edge(parent, child)"},
    {"set_compute", (PyCFunction)Regions_set_compute, METH_VARARGS, "set_compute(s, value)"},
    {"rebuild", (PyCFunction)Regions_rebuild, METH_VARARGS, "rebuild(s, forward)"},
    {"after_compute", (PyCFunction)Regions_after_compute, METH_O, "after_compute(storages)"},
    {"absorb_evicted", (PyCFunction)Regions_absorb_evicted, METH_O, "absorb_evicted(s)"},
    {"e_star_size", (PyCFunction)Regions_e_star_size, METH_O, "|e*| of s"},
    {"region", (PyCFunction)Regions_region, METH_VARARGS, "region(s, forward) -> (interior, frontier, compute)"},
    {"neighbours", (PyCFunction)Regions_neighbours, METH_VARARGS, "neighbours(s, forward) -> list"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RegionsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine._native.regions.Regions",
    .tp_basicsize = sizeof(Regions),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Regions_init,
    .tp_dealloc = (destructor)Regions_dealloc,
    .tp_methods = Regions_methods,
    .tp_doc = "Maintained evicted neighbourhoods over bitsets (see engine/regions.py).",
};


/* ---- the DTR scan: Python's int / int true division, correctly rounded ------------------

   simrd scores a storage as `int / int` in Python: the correctly rounded double of the exact
   quotient. Equal doubles tie, and ties decide runs, so we must produce the same double.
   Both operands below 2**53 are exact doubles, and IEEE division rounds correctly. Otherwise
   an 80-bit long double quotient (error < 2**-62 relative) is rounded to double, and kept
   only when it lies clearly inside the rounding interval of that double; in the rare other
   case the quotient is computed by Python itself. */

static PyObject *int128_to_pylong(unsigned __int128 v) {
    PyObject *hi = PyLong_FromUnsignedLongLong((unsigned long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *out = NULL;
    if (hi && lo && shift) {
        PyObject *shifted = PyNumber_Lshift(hi, shift);
        if (shifted) {
            out = PyNumber_Or(shifted, lo);
            Py_DECREF(shifted);
        }
    }
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    return out;
}

/* 0 on success (result in *out), -1 with a Python error set. */
static int true_divide(long long num, unsigned __int128 den, double *out) {
    const unsigned __int128 exact = (unsigned __int128)1 << DBL_MANT_DIG;
    if (num >= 0 && (unsigned __int128)num <= exact && den <= exact) {
        *out = (double)num / (double)(unsigned long long)den;
        return 0;
    }
#if LDBL_MANT_DIG >= 64
    if (num >= 0) {
        long double q = (long double)num / (long double)den;
        double d = (double)q;
        if (isfinite(d) && d > 0) {
            long double below = ((long double)d + (long double)nextafter(d, 0.0)) / 2;
            long double above = ((long double)d + (long double)nextafter(d, INFINITY)) / 2;
            long double margin = q * 0x1p-58L;
            if (q - below > margin && above - q > margin) {
                *out = d;
                return 0;
            }
        }
    }
#endif
    PyObject *n = PyLong_FromLongLong(num);
    PyObject *m = int128_to_pylong(den);
    PyObject *q = (n && m) ? PyNumber_TrueDivide(n, m) : NULL;
    Py_XDECREF(n);
    Py_XDECREF(m);
    if (!q) return -1;
    *out = PyFloat_AsDouble(q);
    Py_DECREF(q);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *py_true_divide(PyObject *self, PyObject *args) {
    long long num;
    PyObject *den_obj;
    if (!PyArg_ParseTuple(args, "LO!", &num, &PyLong_Type, &den_obj)) return NULL;
    unsigned char bytes[16];
    if (_PyLong_AsByteArray((PyLongObject *)den_obj, bytes, 16, 1, 0) < 0) return NULL;
    unsigned __int128 den = 0;
    for (int i = 15; i >= 0; i--) den = (den << 8) | bytes[i];
    double q;
    if (den == 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "division by zero");
        return NULL;
    }
    if (true_divide(num, den, &q) < 0) return NULL;
    return PyFloat_FromDouble(q);
}

static int small_int(PyObject *list, Py_ssize_t i, long long *out) {
    PyObject *item = PyList_GET_ITEM(list, i);
    if (!PyLong_CheckExact(item)) return 0;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(item, &overflow);
    return !overflow && (*out < ((long long)1 << 61)) && (*out > -((long long)1 << 61));
}

/* dtr_choose(pool, size, last_access, compute, fwd, rev, clock) -> (victim, score, evaluated)
   or None when some value is not a small int (the caller then scans in Python). */
static PyObject *dtr_choose(PyObject *self, PyObject *args) {
    PyObject *pool, *size, *last_access, *compute, *fwd, *rev;
    long long clock;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!L", &PyDict_Type, &pool, &PyList_Type, &size,
                          &PyList_Type, &last_access, &PyList_Type, &compute, &PyList_Type, &fwd,
                          &PyList_Type, &rev, &clock))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(size);
    if (PyList_GET_SIZE(last_access) < n || PyList_GET_SIZE(compute) < n ||
        PyList_GET_SIZE(fwd) < n || PyList_GET_SIZE(rev) < n) {
        PyErr_SetString(PyExc_ValueError, "dtr_choose: inconsistent sizes");
        return NULL;
    }
    double best = INFINITY;
    PyObject *victim = NULL;
    long long evaluated = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(pool, &pos, &key, &value)) {
        Py_ssize_t s = PyLong_AsSsize_t(key);
        if (s == -1 && PyErr_Occurred()) return NULL;
        if (s < 0 || s >= n) {
            PyErr_SetString(PyExc_IndexError, "dtr_choose: storage id out of range");
            return NULL;
        }
        long long sz, la, c, f, r;
        if (!small_int(size, s, &sz) || !small_int(last_access, s, &la) ||
            !small_int(compute, s, &c) || !small_int(fwd, s, &f) || !small_int(rev, s, &r))
            Py_RETURN_NONE;
        evaluated++;
        long long stale = clock - la;
        double cost;
        if (sz > 0 && stale > 0) {
            unsigned __int128 den = (unsigned __int128)sz * (unsigned __int128)stale;
            if (true_divide(c + f + r, den, &cost) < 0) return NULL;
        } else if ((sz < 0) != (stale < 0) || sz == 0 || stale == 0) {
            cost = INFINITY;  /* denominator <= 0 */
        } else {
            Py_RETURN_NONE;  /* both negative: leave it to Python */
        }
        if (cost <= best) {
            best = cost;
            victim = key;
        }
        if (cost == 0.0) break;
    }
    if (!victim) Py_RETURN_NONE;
    return Py_BuildValue("(OdL)", victim, best, evaluated);
}

static PyMethodDef module_methods[] = {
    {"dtr_choose", dtr_choose, METH_VARARGS, "The DTR scan over the evictable pool."},
    {"true_divide", py_true_divide, METH_VARARGS, "num / den as Python's int true division."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "engine._native.regions", NULL, -1,
                                    module_methods};

PyMODINIT_FUNC PyInit_regions(void) {
    if (PyType_Ready(&RegionsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&RegionsType);
    if (PyModule_AddObject(m, "Regions", (PyObject *)&RegionsType) < 0) {
        Py_DECREF(&RegionsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
