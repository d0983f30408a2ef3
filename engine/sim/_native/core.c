/* The DTR runtime in C: a whole replay of a program under a budget, decision for decision
   the same as the Python reference (engine/sim/runtime.py + engine/sim/regions.py), which the
   tests run side by side on the golden records, the differential fixtures and random traces.

   Why C: a run is a few million small steps (locks, pool updates, neighbourhood searches,
   score scans); in C they cost nanoseconds, and the whole mutable state lives in one flat
   block of memory, so it can be copied. That copy is what makes exact walks cheap
   (engine/sim/native.py): two neighbouring budgets replay identically up to the first
   comparison `used + request > budget` whose outcome differs between them, so the walk keeps
   a copy of the state at each comparison that may become that point and resumes the next
   budget's run from it instead of from operator 1.

   Layout: the static program (operators, tensors, schedule, the storage graph in the order
   its edges appear) is built once per object; the dynamic state is an arena of per-storage
   and per-tensor arrays plus a struct of scalars plus the stack of materialization frames.
   Snapshots copy exactly those three. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "divide.h"

enum { K_COMPUTE = 0, K_GET = 1, K_RELEASE = 2, K_PIN = 3 };
enum { ST_RUNNING = 0, ST_OK = 1, ST_OOM = 2, ST_THRASHED = 3, ST_TIMEOUT = 4, ST_ERROR = 5 };
enum {
    P_DTR = 0,
    P_DTRLOCAL,
    P_MSPS,
    P_LRU,
    P_LARGEST,
    P_NBHD,
    P_HESTAR,
    P_COSTSTALE,
    P_TWOPHASE,
    P_COUNT
};
static const char *POLICY_NAMES[P_COUNT] = {"DTR",         "DTRLocal", "MSPS",
                                            "LRU",         "LargestStorage",
                                            "NbhdPenalty", "HEStar",   "CostStale",
                                            "TwoPhase"};
static const int POLICY_REGIONS[P_COUNT] = {1, 0, 1, 0, 0, 1, 1, 1, 1};

#define NEVER INT64_MIN /* last_access not yet set: Python's -inf */
/* shared_pass builds its rows from global closures when their words are fewer than this many
   times the bits a conversion would visit (measured: see there) */
#ifndef GLOBAL_ROWS_FACTOR
#define GLOBAL_ROWS_FACTOR 8
#endif
enum { ROWS_AUTO = 0, ROWS_CONVERT = 1, ROWS_CLOSURES = 2, ROWS_LABELS = 3 };
#ifndef SHARE_FACTOR
#define SHARE_FACTOR 1
#endif

/* The parts, in dependency order (each one's first comment says what it holds). */
#include "state.h"
#include "hash.h"
#include "events.h"
#include "incremental.h"
#include "sweeps.h"
#include "closures.h"
#include "regions.h"
#include "policy.h"
#include "snapshots.h"
#include "segment_log.h"
#include "trajectory.h"
#include "runtime.h"

/* ---- construction ------------------------------------------------------------------------- */
static int get_buffer(PyObject *obj, Py_buffer *view, const char *what, Py_ssize_t itemsize) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "Core: %s must hold %zd-byte items", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static void *copy_buffer(PyObject *obj, const char *what, Py_ssize_t itemsize, Py_ssize_t *count) {
    Py_buffer view;
    if (get_buffer(obj, &view, what, itemsize) < 0) return NULL;
    *count = view.len / itemsize;
    void *out = PyMem_Malloc(view.len ? view.len : 1);
    if (!out) PyErr_NoMemory();
    else memcpy(out, view.buf, view.len);
    PyBuffer_Release(&view);
    return out;
}

static void Core_dealloc(Core *c) {
    void *owned[] = {c->op_compute, c->op_total, c->tensor_size, c->size, c->op_first, c->op_nout,
                     c->op_args_off, c->op_args, c->tensor_storage, c->tensor_op, c->step_kind,
                     c->step_arg, c->st_off, c->st_items, c->ch_off, c->ch_items, c->pa_off,
                     c->pa_items, c->retain, c->arena, c->frames, c->und.items, c->scratch_a,
                     c->scratch_b, c->scratch_d, c->word_list, c->word_compute, c->split_out,
                     c->split_next, c->log_bits, c->log_words, c->unpinned, c->sized_next,
                     c->sized_prev, c->stack, c->cover.items, c->ev.kind.items, c->ev.storage.items,
                     c->ev.depth.items, c->ev.pool_size.items, c->ev.runner_up.items, c->ev.i64,
                     c->ev.f64, c->ev.op_max_pinned, c->ev.op_max_depth, c->order.items,
                     c->news.items, c->dfs_node, c->dfs_edge, c->mark[0], c->mark[1], c->done[0],
                     c->done[1], c->slot[0], c->slot[1], c->clo, c->bases, c->par_stamp,
                     c->res_stamp, c->res_mask, c->par_idx, c->nr_items, c->pts, c->own, c->sufmin,
                     c->nextflip, c->fr_log, c->ul_log, c->fh, c->uh, c->dirty, c->dirty_list.items,
                     c->dirty_old, c->log, c->row_old, c->memo, c->memo_slot, c->memo_hash,
                     c->memo_total, c->gclo, c->lc, c->base_entry, c->entry_base, c->label_rows,
                     c->sweep_lab, c->sweep_flab, c->sweep_act, c->sweep_res, c->changes,
                     c->rev_fresh_at, c->fwd_fresh_at, c->verify_rows};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) PyMem_Free(owned[i]);
    for (int i = 0; i < c->n_spare; i++) PyMem_Free(c->spare[i]);
    for (Py_ssize_t i = 0; i < c->ck_slots; i++) PyMem_Free(c->ck_arena[i]);
    PyMem_Free(c->ck_arena);
    for (Py_ssize_t i = 0; i < c->n_snaps; i++) {
        PyMem_Free(c->snaps[i].arena);
        PyMem_Free(c->snaps[i].frames);
        PyMem_Free(c->snaps[i].und);
        PyMem_Free(c->snaps[i].dirty);
        PyMem_Free(c->snaps[i].dirty_old);
    }
    PyMem_Free(c->snaps);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* CSR lists of each storage's tensors and of the storage graph's edges, in the order the
   runtime creates them (the schedule's COMPUTE steps, in order). */
static int build_static(Core *c) {
    int32_t n = c->n;
    int32_t *st_count = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    Vec32 ch_pairs = {0}; /* (parent, child) in order of appearance */
    c->topological = 1;
    uint8_t *seen_op = (uint8_t *)PyMem_Calloc(c->n_ops + 1, 1);
    /* dedupe edges with a hash set of (parent, child) */
    Py_ssize_t pairs = 16, hcap = 1024;
    for (int32_t op = 0; op < c->n_ops; op++)
        pairs += (Py_ssize_t)c->op_nout[op] * (c->op_args_off[op + 1] - c->op_args_off[op]);
    while (hcap < 2 * pairs) hcap *= 2;
    int64_t *hash = (int64_t *)PyMem_Malloc(sizeof(int64_t) * hcap);
    if (!st_count || !seen_op || !hash) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t i = 0; i < hcap; i++) hash[i] = -1;
    for (int32_t step = 0; step < c->n_steps; step++) {
        if (c->step_kind[step] != K_COMPUTE) continue;
        int32_t op = c->step_arg[step];
        if (op < 0 || op >= c->n_ops || seen_op[op]) {
            PyErr_SetString(PyExc_ValueError, "Core: each operator must be computed once");
            goto fail;
        }
        seen_op[op] = 1;
        int32_t first = c->op_first[op];
        const int32_t *args = c->op_args + c->op_args_off[op];
        int32_t n_args = c->op_args_off[op + 1] - c->op_args_off[op];
        for (int32_t i = 0; i < c->op_nout[op]; i++) {
            int32_t s = c->tensor_storage[first + i];
            st_count[s]++;
            for (int32_t j = 0; j < n_args; j++) {
                int32_t p = c->tensor_storage[args[j]];
                if (p == s) continue;
                if (p > s) c->topological = 0;
                int64_t key = (int64_t)p * n + s;
                Py_ssize_t h =
                    (Py_ssize_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 20) & (hcap - 1);
                while (hash[h] != -1 && hash[h] != key) h = (h + 1) & (hcap - 1);
                if (hash[h] == key) continue;
                hash[h] = key;
                if (vec_reserve(&ch_pairs, ch_pairs.len + 2) < 0) goto fail;
                ch_pairs.items[ch_pairs.len++] = p;
                ch_pairs.items[ch_pairs.len++] = s;
            }
        }
    }
    /* tensors per storage */
    c->st_off = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->st_items = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->ch_off = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->pa_off = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    Py_ssize_t n_edges = ch_pairs.len / 2;
    c->ch_items = (int32_t *)PyMem_Calloc(n_edges + 1, sizeof(int32_t));
    c->pa_items = (int32_t *)PyMem_Calloc(n_edges + 1, sizeof(int32_t));
    int32_t *fill = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    if (!c->st_off || !c->st_items || !c->ch_off || !c->pa_off || !c->ch_items || !c->pa_items ||
        !fill) {
        PyMem_Free(fill);
        PyErr_NoMemory();
        goto fail;
    }
    for (int32_t s = 0; s < n; s++) c->st_off[s + 1] = c->st_off[s] + st_count[s];
    for (int32_t step = 0; step < c->n_steps; step++) {
        if (c->step_kind[step] != K_COMPUTE) continue;
        int32_t op = c->step_arg[step];
        for (int32_t i = 0; i < c->op_nout[op]; i++) {
            int32_t t = c->op_first[op] + i, s = c->tensor_storage[t];
            c->st_items[c->st_off[s] + fill[s]++] = t;
        }
    }
    memset(fill, 0, sizeof(int32_t) * (n + 1));
    int32_t *pcount = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    int32_t *pfill = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    if (!pcount || !pfill) {
        PyMem_Free(fill);
        PyMem_Free(pcount);
        PyMem_Free(pfill);
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t e = 0; e < n_edges; e++) {
        fill[ch_pairs.items[2 * e]]++;
        pcount[ch_pairs.items[2 * e + 1]]++;
    }
    for (int32_t s = 0; s < n; s++) {
        c->ch_off[s + 1] = c->ch_off[s] + fill[s];
        c->pa_off[s + 1] = c->pa_off[s] + pcount[s];
    }
    memset(fill, 0, sizeof(int32_t) * (n + 1));
    for (Py_ssize_t e = 0; e < n_edges; e++) {
        int32_t p = ch_pairs.items[2 * e], s = ch_pairs.items[2 * e + 1];
        c->ch_items[c->ch_off[p] + fill[p]++] = s;
        c->pa_items[c->pa_off[s] + pfill[s]++] = p;
    }
    PyMem_Free(fill);
    PyMem_Free(pcount);
    PyMem_Free(pfill);
    PyMem_Free(st_count);
    PyMem_Free(seen_op);
    PyMem_Free(hash);
    PyMem_Free(ch_pairs.items);
    return 0;
fail:
    PyMem_Free(st_count);
    PyMem_Free(seen_op);
    PyMem_Free(hash);
    PyMem_Free(ch_pairs.items);
    return -1;
}

static size_t align8(size_t x) { return (x + 7) & ~(size_t)7; }

static int build_arena(Core *c) {
    size_t n = (size_t)c->n ? (size_t)c->n : 1;
    size_t bits = sizeof(uint64_t) * n * 2 * c->words; /* interleaved pairs of rows (row()) */
    size_t offs[20], at = 0, k = 0;
#define PLACE(bytes) (offs[k++] = at, at = align8(at + (bytes)))
    PLACE(n); PLACE(n); PLACE(n); PLACE(n);                          /* u8 x4 */
    for (int i = 0; i < 8; i++) PLACE(sizeof(int32_t) * n);          /* i32 x8 */
    for (int i = 0; i < 4; i++) PLACE(sizeof(int64_t) * n);          /* i64 x4 */
    at = (at + 63) & ~(size_t)63; /* a pair of row words never straddles a cache line */
    for (int i = 0; i < 2; i++) PLACE(bits);                          /* bitsets x2 */
#undef PLACE
    c->arena_bytes = at;
    c->arena = (char *)PyMem_Calloc(at, 1);
    if (!c->arena) { PyErr_NoMemory(); return -1; }
    Arrays *a = &c->a;
    char *b = c->arena;
    k = 0;
    a->defined = (uint8_t *)(b + offs[k++]);
    a->material = (uint8_t *)(b + offs[k++]);
    a->pinned = (uint8_t *)(b + offs[k++]);
    a->in_pool = (uint8_t *)(b + offs[k++]);
    int32_t **i32s[8] = {&a->ref_int, &a->ref_ext, &a->last_op, &a->st_len,
                         &a->ch_len, &a->pa_len, &a->pool_prev, &a->pool_next};
    for (int i = 0; i < 8; i++) *i32s[i] = (int32_t *)(b + offs[k++]);
    int64_t **i64s[4] = {&a->last_access, &a->compute, &a->fwd_sum, &a->rev_sum};
    for (int i = 0; i < 4; i++) *i64s[i] = (int64_t *)(b + offs[k++]);
    a->fwd_int = (uint64_t *)(b + offs[k++]);
    a->fwd_fr = a->fwd_int + 1;
    a->rev_int = (uint64_t *)(b + offs[k++]);
    a->rev_fr = a->rev_int + 1;
    for (int32_t s = 0; s < c->n; s++) {
        a->last_op[s] = -1;
        a->last_access[s] = NEVER;
        a->pool_prev[s] = a->pool_next[s] = -1;
    }
    return 0;
}

/* Core(n_tensors, op_compute, op_first, op_nout, op_args_off, op_args, op_total, tensor_size,
        tensor_storage, tensor_op, storage_size, step_kind, step_arg, policy, budget, remat_limit,
        retain=(), nbhd_b=0.25, twophase_k=8, time_limit=None, events=False, snapshots=False,
        max_snapshots=64, shared_search=True, verify_hash=False, merging=True, shared_rows=0,
        max_log_bytes=0, max_run_log_bytes=0, checkpoint_words=-1, sweep_words=SWEEP_WORDS,
        incremental=True, point_every=POINT_EVERY) */
static int Core_init(Core *c, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"n_tensors", "op_compute", "op_first", "op_nout", "op_args_off",
                             "op_args", "op_total", "tensor_size", "tensor_storage", "tensor_op",
                             "storage_size", "step_kind", "step_arg", "policy", "budget",
                             "remat_limit", "retain", "nbhd_b", "twophase_k", "time_limit",
                             "events", "snapshots", "max_snapshots", "shared_search", "verify_hash",
                             "merging", "shared_rows", "max_log_bytes", "max_run_log_bytes",
                             "checkpoint_words", "sweep_words", "incremental", "point_every",
                             NULL};
    Py_ssize_t n;
    PyObject *bufs[12];
    const char *policy;
    PyObject *budget, *remat_limit, *retain = NULL, *time_limit = Py_None;
    double nbhd_b = 0.25;
    int twophase_k = 8, events = 0, snapshots = 0;
    Py_ssize_t max_snapshots = 64;
    Py_ssize_t max_log_bytes = 0, max_run_log_bytes = 0; /* 0: no limit */
    Py_ssize_t checkpoint_words = -1; /* -1: CHECKPOINT_STATES states' words; 0: none */
    int shared_search = 1, verify_hash = 0, merging = 1, shared_rows = ROWS_AUTO;
    int sweep_words = SWEEP_WORDS, incremental = 1, point_every = POINT_EVERY;
    if (c->started) {
        PyErr_SetString(PyExc_RuntimeError, "Core: already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nOOOOOOOOOOOOsOO|OdiOppnpppinnnipi", kwlist,
                                     &n, &bufs[0], &bufs[1], &bufs[2], &bufs[3], &bufs[4],
                                     &bufs[5], &bufs[6], &bufs[7], &bufs[8], &bufs[9], &bufs[10],
                                     &bufs[11], &policy, &budget, &remat_limit, &retain, &nbhd_b,
                                     &twophase_k, &time_limit, &events, &snapshots,
                                     &max_snapshots, &shared_search,
                                     &verify_hash, &merging, &shared_rows, &max_log_bytes,
                                     &max_run_log_bytes, &checkpoint_words, &sweep_words,
                                     &incremental, &point_every))
        return -1;
    if (point_every < 1) {
        PyErr_SetString(PyExc_ValueError, "Core: point_every must be at least 1");
        return -1;
    }
    if (sweep_words < 1 || sweep_words > SWEEP_WORDS) {
        PyErr_Format(PyExc_ValueError, "Core: sweep_words must be 1 to %d", SWEEP_WORDS);
        return -1;
    }
    if (shared_rows < ROWS_AUTO || shared_rows > ROWS_LABELS) {
        PyErr_SetString(PyExc_ValueError, "Core: shared_rows must be 0 (auto), 1, 2 or 3");
        return -1;
    }
    c->started = 1;
    if (n < 0 || n >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "Core: bad tensor count");
        return -1;
    }
    c->n = (int32_t)n;
    c->words = (n + 63) / 64 + 1;
    Py_ssize_t n_ops, n_first, n_nout, n_off, n_args, n_total, n_tsize, n_tst, n_top, n_ssize,
        n_kind, n_sarg;
    c->op_compute = (int64_t *)copy_buffer(bufs[0], "op_compute", 8, &n_ops);
    c->op_first = (int32_t *)copy_buffer(bufs[1], "op_first", 4, &n_first);
    c->op_nout = (int32_t *)copy_buffer(bufs[2], "op_nout", 4, &n_nout);
    c->op_args_off = (int32_t *)copy_buffer(bufs[3], "op_args_off", 4, &n_off);
    c->op_args = (int32_t *)copy_buffer(bufs[4], "op_args", 4, &n_args);
    c->op_total = (int64_t *)copy_buffer(bufs[5], "op_total", 8, &n_total);
    c->tensor_size = (int64_t *)copy_buffer(bufs[6], "tensor_size", 8, &n_tsize);
    c->tensor_storage = (int32_t *)copy_buffer(bufs[7], "tensor_storage", 4, &n_tst);
    c->tensor_op = (int32_t *)copy_buffer(bufs[8], "tensor_op", 4, &n_top);
    c->size = (int64_t *)copy_buffer(bufs[9], "storage_size", 8, &n_ssize);
    c->step_kind = (int8_t *)copy_buffer(bufs[10], "step_kind", 1, &n_kind);
    c->step_arg = (int32_t *)copy_buffer(bufs[11], "step_arg", 4, &n_sarg);
    if (PyErr_Occurred()) return -1;
    if (n_first != n_ops || n_nout != n_ops || n_off != n_ops + 1 || n_total != n_ops ||
        n_tsize != n || n_tst != n || n_top != n || n_ssize != n || n_sarg != n_kind ||
        c->op_args_off[n_ops] != n_args) {
        PyErr_SetString(PyExc_ValueError, "Core: inconsistent program arrays");
        return -1;
    }
    c->n_ops = (int32_t)n_ops;
    c->n_steps = (int32_t)n_kind;
    c->policy = -1;
    for (int i = 0; i < P_COUNT; i++)
        if (strcmp(policy, POLICY_NAMES[i]) == 0) c->policy = i;
    if (c->policy < 0) {
        PyErr_Format(PyExc_ValueError, "Core: policy %s is not implemented in C", policy);
        return -1;
    }
    c->budget_inf = budget == Py_None;
    if (!c->budget_inf) {
        c->s.budget = PyLong_AsLongLong(budget);
        if (PyErr_Occurred()) return -1;
    }
    if (remat_limit == Py_None) c->remat_limit = INT64_MAX;
    else {
        c->remat_limit = PyLong_AsLongLong(remat_limit);
        if (PyErr_Occurred()) return -1;
    }
    c->regions = !c->budget_inf && POLICY_REGIONS[c->policy];
    c->nbhd_b = nbhd_b;
    c->twophase_k = twophase_k;
    c->record_events = events;
    /* A budget-reading policy compares inside its scan: resuming there is not supported. */
    c->snapshots = snapshots && c->policy != P_TWOPHASE && !events;
    c->max_snaps = max_snapshots > 0 ? max_snapshots : 1;
    /* trajectories serve merges and jumps only */
    c->can_track = c->snapshots && merging;
    c->tracking = c->can_track;
    c->verify_hash = verify_hash && c->can_track;
    c->merging = merging;
    c->log_limit = max_log_bytes > 0 ? max_log_bytes : 0;
    c->run_log_limit = max_run_log_bytes > 0 ? max_run_log_bytes : 0;
    if (time_limit != Py_None) {
        c->time_limit = PyFloat_AsDouble(time_limit);
        if (PyErr_Occurred()) return -1;
    }
    c->retain = (uint8_t *)PyMem_Calloc(n + 1, 1);
    if (!c->retain) { PyErr_NoMemory(); return -1; }
    if (retain && retain != Py_None) {
        PyObject *it = PyObject_GetIter(retain), *item;
        if (!it) return -1;
        while ((item = PyIter_Next(it))) {
            Py_ssize_t s = PyLong_AsSsize_t(item);
            Py_DECREF(item);
            if (s < 0 || s >= n) {
                Py_DECREF(it);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "Core: retain id out of range");
                return -1;
            }
            c->retain[s] = 1;
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) return -1;
    }
    for (Py_ssize_t i = 0; i < n_args; i++)
        if (c->op_args[i] < 0 || c->op_args[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "Core: argument tensor out of range");
            return -1;
        }
    for (Py_ssize_t i = 0; i < n; i++)
        if (c->tensor_storage[i] < 0 || c->tensor_storage[i] >= n || c->tensor_op[i] < 0 ||
            c->tensor_op[i] >= n_ops) {
            PyErr_SetString(PyExc_ValueError, "Core: tensor table out of range");
            return -1;
        }
    if (build_static(c) < 0 || build_arena(c) < 0) return -1;
    c->ck_every = checkpoint_words >= 0 ? (int64_t)checkpoint_words
                                        : CHECKPOINT_STATES * (int64_t)(c->arena_bytes / 8);
    c->scratch_a = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->scratch_b = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->scratch_d = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->word_list = (int32_t *)PyMem_Calloc(c->words, sizeof(int32_t));
    c->word_compute = (int64_t *)PyMem_Calloc(c->words, sizeof(int64_t));
    c->split_out = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->split_next = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->log_bits = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->log_words = (int32_t *)PyMem_Calloc(c->words, sizeof(int32_t));
    c->unpinned = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->sized_next = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->sized_prev = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->stack = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->dfs_node = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->dfs_edge = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->bases = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->par_stamp = (int64_t *)PyMem_Calloc(n + 1, sizeof(int64_t));
    c->res_stamp = (int64_t *)PyMem_Calloc(n + 1, sizeof(int64_t));
    c->res_mask = (uint64_t *)PyMem_Calloc(n + 1, sizeof(uint64_t));
    c->par_idx = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->nr_items = (int32_t *)PyMem_Calloc((size_t)c->ch_off[n] + 1, sizeof(int32_t));
    c->lc = (int64_t *)PyMem_Calloc(n + 1, sizeof(int64_t));
    c->rev_fresh_at = (int64_t *)PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    c->fwd_fresh_at = (int64_t *)PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    c->sweep_lab = (uint64_t *)PyMem_Calloc((size_t)(n + 1) * SWEEP_WORDS, sizeof(uint64_t));
    c->sweep_flab = (uint64_t *)PyMem_Calloc((size_t)(n + 1) * SWEEP_WORDS, sizeof(uint64_t));
    c->sweep_act = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->sweep_res = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->label_rows =
        (uint64_t *)PyMem_Calloc((size_t)128 * SWEEP_WORDS * c->words, sizeof(uint64_t));
    c->base_entry = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->entry_base = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    for (int d = 0; d < 2; d++) {
        c->mark[d] = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
        c->done[d] = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
        c->slot[d] = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
        if (!c->mark[d] || !c->done[d] || !c->slot[d]) { PyErr_NoMemory(); return -1; }
    }
    c->shared_search = shared_search;
    c->shared_rows = shared_rows;
    c->sweep_words = sweep_words;
    c->point_every = point_every;
    c->incremental = incremental;
    if (c->can_track) {
        c->dirty = (uint64_t *)PyMem_Calloc(c->arena_bytes / 8 / 64 + 1, sizeof(uint64_t));
        c->row_old = (uint64_t *)PyMem_Calloc(2 * c->words, sizeof(uint64_t));
        if (!c->dirty || !c->row_old || vec_reserve(&c->dirty_list, 1024) < 0 ||
            dirty_grow(c) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        if (c->arena_bytes / 8 >= UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "Core: the state is too large for a walk");
            return -1;
        }
    }
    const void *allocated[] = {c->scratch_a, c->scratch_b, c->scratch_d, c->word_list,
                                c->word_compute, c->split_out, c->split_next, c->log_bits,
                                c->log_words, c->unpinned, c->sized_next, c->sized_prev,
                                c->stack,
                                c->dfs_node, c->dfs_edge, c->bases,
                                c->par_stamp, c->res_stamp,
                                c->res_mask, c->par_idx, c->nr_items, c->lc, c->label_rows,
                                c->sweep_lab, c->sweep_flab, c->sweep_act, c->sweep_res,
                                c->base_entry, c->entry_base, c->rev_fresh_at,
                                c->fwd_fresh_at};
    for (size_t i = 0; i < sizeof allocated / sizeof allocated[0]; i++)
        if (!allocated[i]) {
            PyErr_NoMemory();
            return -1;
        }
    if (events) {
        c->ev.op_max_pinned = (int64_t *)PyMem_Calloc(n_ops + 2, sizeof(int64_t));
        c->ev.op_max_depth = (int64_t *)PyMem_Calloc(n_ops + 2, sizeof(int64_t));
        if (!c->ev.op_max_pinned || !c->ev.op_max_depth) { PyErr_NoMemory(); return -1; }
    }
    c->s.clock = 1;
    c->s.peak_pinned = -1; /* below any sample: the first check sets it, with its depth */
    c->s.exceeds_min = INT64_MAX;
    c->s.pool_head = c->s.pool_tail = -1;
    rebuild_derived(c);
    c->s.status = ST_RUNNING;
    c->s.seg_open = 0;
    if (reserve_frames(c, 64) < 0 || vec_reserve(&c->und, 256) < 0) return -1;
    return 0;
}

/* ---- Python methods ------------------------------------------------------------------------ */
static PyObject *status_result(Core *c, int status) {
    if (status == ST_ERROR) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, c->error[0] ? c->error : "Core: error");
        return NULL;
    }
    static const char *names[] = {"running", "ok", "oom", "thrashed", "timeout"};
    return PyUnicode_FromString(names[status]);
}

/* Whether the run about to start keeps a trajectory (`track`, where the runtime can): a run
   that keeps none ends the trajectory's epoch. */
static int choose_tracking(Core *c, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"track", NULL};
    int track = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &track)) return -1;
    c->tracking = track && c->can_track;
    c->compared = 0;
    if (c->can_track && !c->tracking) {
        c->traj_epoch++;
        c->traj_valid = 0;
        c->untracked_runs++;
    }
    return 0;
}

static PyObject *Core_run(Core *c, PyObject *args, PyObject *kw) {
    if (c->s.status != ST_RUNNING || c->s.step != 0 || c->s.operators != 0) {
        PyErr_SetString(PyExc_RuntimeError, "Core.run: already run (use resume)");
        return NULL;
    }
    if (choose_tracking(c, args, kw) < 0) return NULL;
    if (c->time_limit > 0) c->deadline = now_s() + c->time_limit;
    c->resuming = 0;
    c->resumed_clock = c->s.clock;
    c->own_from = 0;
    c->n_own = 0;
    if (c->tracking) full_hash(c, &c->s.h1, &c->s.h2);
    return status_result(c, run_to_end(c));
}

/* Pop the newest snapshot, make its exceeding value the budget, and run on from there. */
static PyObject *Core_resume(Core *c, PyObject *args, PyObject *kw) {
    if (c->n_snaps == 0) {
        PyErr_SetString(PyExc_RuntimeError, "Core.resume: no snapshot to resume from");
        return NULL;
    }
    if (choose_tracking(c, args, kw) < 0) return NULL;
    int64_t epoch = c->snaps[c->n_snaps - 1].traj_epoch;
    if (restore_snapshot(c) < 0) return NULL;
    c->s.status = ST_RUNNING;
    c->resumed_operator = (int32_t)c->s.operators;
    c->resumed_clock = c->s.clock;
    c->resuming = 1;
    c->n_own = 0;
    if (c->tracking) {
        if (epoch != c->traj_epoch) start_epoch(c);
        c->compared = c->traj_valid && c->merging;
        if (c->s.seg_open) { /* inside the segment of point n_points - 1: rewrite that point */
            c->own_from = c->s.n_points - 1;
            if (own_reserve(c, 1) < 0) return NULL;
            c->own[0] = c->pts[c->own_from];
            c->n_own = 1;
            c->search_from = c->own_from + 1;
        } else { /* at a point not recorded yet (after a merge or in a jump) */
            c->own_from = c->s.n_points;
            c->search_from = c->own_from;
        }
        if (c->traj_valid && suffix_minima(c) < 0) return NULL;
    }
    return status_result(c, run_to_end(c));
}

static PyObject *Core_next_budget(Core *c, PyObject *unused) {
    if (c->n_snaps == 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(c->snaps[c->n_snaps - 1].value);
}

static PyObject *Core_result(Core *c, PyObject *unused) {
    Scalars *s = &c->out;
    PyObject *failure;
    if (s->has_failure && s->status == ST_OOM) {
        failure = Py_BuildValue("{sLsLsLsLsL}", "operator", (long long)s->f_operator, "request",
                                (long long)s->f_request, "pinned", (long long)s->f_pinned, "depth",
                                (long long)s->f_depth, "over_by", (long long)s->f_over_by);
    } else {
        failure = Py_NewRef(Py_None);
    }
    if (!failure) return NULL;
    PyObject *hi = s->exceeds_min == INT64_MAX ? Py_NewRef(Py_None)
                                              : PyLong_FromLongLong(s->exceeds_min - 1);
    if (!hi) { Py_DECREF(failure); return NULL; }
    return Py_BuildValue(
        "{sLsLsLsLsLsLsLsLsLsLsLsLsNsLsNsLsLsnsLsisisLsL}",
        "clock", (long long)s->clock, "model_compute", (long long)s->model_compute,
        "remat_compute", (long long)s->remat_compute, "evictions", (long long)s->evictions,
        "policy_evictions", (long long)s->policy_evictions,
        "rematerializations", (long long)s->rematerializations,
        "operators", (long long)s->operators, "max_memory", (long long)s->max_memory,
        "peak_pinned", (long long)(s->peak_pinned > 0 ? s->peak_pinned : 0),
        "depth_at_peak_pinned", (long long)s->depth_at_peak_pinned,
        "max_nesting_depth", (long long)s->max_depth,
        "heuristic_evals", (long long)s->heuristic_evals, "failure", failure,
        "lo", (long long)s->fits_max, "hi", hi, "budget", (long long)s->budget,
        "resumed_operator", (long long)c->resumed_operator, "snapshots", c->n_snaps,
        "merged_operator", (long long)(c->merged ? c->s.operators : -1), "tracked", c->tracking,
        "compared", c->compared, "skipped_clock", (long long)c->skipped_clock,
        "resumed_clock", (long long)c->resumed_clock);
}

static PyObject *Core_stats(Core *c, PyObject *unused) {
    PyObject *d = Py_BuildValue(
        "{sLsLsLsnsnsnsnsLsLsLsLsLsLsLsLsLsLsLsLsLsLsLsLsLsLsL}",
        "searches", (long long)c->searches, "visited", (long long)c->visited,
        "edges", (long long)c->edges_seen, "snapshots", c->n_snaps,
        "snapshots_taken", c->snaps_taken, "snapshots_dropped", c->snaps_dropped,
        "state_bytes", (Py_ssize_t)c->arena_bytes, "merges", (long long)c->merges,
        "steps_skipped", (long long)c->steps_skipped,
        "merges_blocked", (long long)c->merges_blocked,
        "points_resumed", (long long)c->points_resumed,
        "mid_cascade_merges", (long long)c->mid_merges, "jumps", (long long)c->jumps,
        "steps_jumped", (long long)c->steps_jumped, "shared_passes", (long long)c->shared_passes,
        "shared_passes_closure_rows", (long long)c->global_passes,
        "memo_hits", (long long)c->memo_hits, "plain_passes", (long long)c->plain_passes,
        "cycle_passes", (long long)c->cycle_passes, "sweep_passes", (long long)c->sweep_passes,
        "sweep_widest_chunk", (long long)c->sweep_widest, "topological", (long long)c->topological,
        "unlogged_segments", (long long)c->unlogged_segments,
        "jumps_refused", (long long)c->jumps_refused,
        "incremental_searches", (long long)c->incremental_searches,
        "fresh_absorbs", (long long)c->fresh_absorbs);
    if (!d) return NULL;
    PyObject *epochs = Py_BuildValue(
        "{sLsLsLsLsLsLsLsLsL}", "untracked_runs", (long long)c->untracked_runs,
        "epochs_started", (long long)c->epochs_started, "derived_searches",
        (long long)c->derived_searches, "split_derivations", (long long)c->split_derivations,
        "splits_abandoned", (long long)c->splits_abandoned, "cut_derivations",
        (long long)c->cut_derivations, "cuts_abandoned", (long long)c->cuts_abandoned,
        "scans_whole_pool", (long long)c->scans_whole_pool, "scans_stopped_unsized",
        (long long)c->scans_stopped_unsized);
    if (!epochs || PyDict_Update(d, epochs) < 0) {
        Py_XDECREF(epochs);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(epochs);
    /* the trajectory log's size: its words' bytes (live and garbage), the points' frame
       stacks, what the running run's segments took, and the words encoded so far */
    PyObject *more = Py_BuildValue(
        "{snsnsnsnsLsLsLsLsnsLsLsL}", "log_bytes", (Py_ssize_t)c->log_len, "log_live_bytes",
        (Py_ssize_t)c->log_live, "frame_bytes", frame_bytes(c), "checkpoint_bytes",
        c->ck_count * (Py_ssize_t)c->arena_bytes, "checkpoints_taken", (long long)c->ck_taken,
        "checkpoint_restores", (long long)c->ck_restores, "checkpoint_restores_backward",
        (long long)c->ck_back_restores, "checkpoints_shed",
        (long long)c->ck_shed, "run_bytes",
        (Py_ssize_t)c->run_bytes, "words_logged", (long long)c->words_logged,
        "log_compactions", (long long)c->log_compactions, "frame_compactions",
        (long long)c->frame_compactions);
    if (!more || PyDict_Update(d, more) < 0) {
        Py_XDECREF(more);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(more);
    return d;
}

/* For tests: two runs that made the same searches, however they made them, end in the same
   arena, down to every neighbourhood row. */
static PyObject *Core_state_digest(Core *c, PyObject *unused) {
    uint64_t h = 0x243f6a8885a308d3ULL;
    const uint64_t *w = (const uint64_t *)c->arena;
    for (size_t i = 0; i < c->arena_bytes / 8; i++) h = mix64(h ^ w[i]) + i;
    return PyLong_FromUnsignedLongLong(h);
}

static PyObject *list_i32(const Vec32 *v, Py_ssize_t rows) {
    PyObject *out = PyList_New(rows);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < rows; i++) {
        PyObject *x = PyLong_FromLong(v->items[i]);
        if (!x) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

/* The event log as columns: kind, seq, operator, depth, storage, size, score, pool_size,
   pinned, runner_up, runner_up_score; plus per-operator max pinned and depth. */
static PyObject *Core_events(Core *c, PyObject *unused) {
    if (!c->record_events) {
        PyErr_SetString(PyExc_RuntimeError, "Core.events: the run was made without events");
        return NULL;
    }
    Events *e = &c->ev;
    PyObject *cols[6];
    for (int k = 0; k < 6; k++) {
        cols[k] = PyList_New(e->rows);
        if (!cols[k]) return NULL;
    }
    for (Py_ssize_t i = 0; i < e->rows; i++) {
        PyList_SET_ITEM(cols[0], i, PyLong_FromLongLong(e->i64[4 * i + 0]));
        PyList_SET_ITEM(cols[1], i, PyLong_FromLongLong(e->i64[4 * i + 1]));
        PyList_SET_ITEM(cols[2], i, PyLong_FromLongLong(e->i64[4 * i + 2]));
        PyList_SET_ITEM(cols[3], i, PyLong_FromLongLong(e->i64[4 * i + 3]));
        PyList_SET_ITEM(cols[4], i, PyFloat_FromDouble(e->f64[2 * i + 0]));
        PyList_SET_ITEM(cols[5], i, PyFloat_FromDouble(e->f64[2 * i + 1]));
    }
    Py_ssize_t ops = c->s.operators;
    PyObject *mp = PyList_New(ops), *md = PyList_New(ops);
    if (!mp || !md) return NULL;
    for (Py_ssize_t o = 1; o <= ops; o++) {
        PyList_SET_ITEM(mp, o - 1, PyLong_FromLongLong(e->op_max_pinned[o]));
        PyList_SET_ITEM(md, o - 1, PyLong_FromLongLong(e->op_max_depth[o]));
    }
    return Py_BuildValue("{sNsNsNsNsNsNsNsNsNsNsNsNsN}", "kind", list_i32(&e->kind, e->rows),
                         "seq", cols[0], "operator", cols[1], "size", cols[2], "pinned", cols[3],
                         "score", cols[4], "runner_up_score", cols[5], "depth",
                         list_i32(&e->depth, e->rows), "storage", list_i32(&e->storage, e->rows),
                         "pool_size", list_i32(&e->pool_size, e->rows), "runner_up",
                         list_i32(&e->runner_up, e->rows), "op_max_pinned", mp, "op_max_depth",
                         md);
}

static PyMethodDef Core_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Core_run, METH_VARARGS | METH_KEYWORDS,
     "run(track=True) -> status: replay from the start (track: keep a trajectory)"},
    {"resume", (PyCFunction)(void (*)(void))Core_resume, METH_VARARGS | METH_KEYWORDS,
     "resume(track=True) -> status: the run at next_budget(), replayed from its divergence "
     "point (track: keep a trajectory, to merge into the last one and for the next run)"},
    {"next_budget", (PyCFunction)Core_next_budget, METH_NOARGS,
     "the smallest budget above the last run's interval, or None"},
    {"result", (PyCFunction)Core_result, METH_NOARGS, "the last run's counters"},
    {"stats", (PyCFunction)Core_stats, METH_NOARGS, "work counters"},
    {"state_digest", (PyCFunction)Core_state_digest, METH_NOARGS,
     "a hash of the whole per-storage and per-tensor state (every neighbourhood row included)"},
    {"events", (PyCFunction)Core_events, METH_NOARGS, "the event log, as columns"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine.sim._native.core.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
    .tp_doc = "The DTR runtime in C (see engine/sim/native.py).",
};

static PyObject *py_true_divide(PyObject *self, PyObject *args) {
    long long num;
    PyObject *den_obj;
    if (!PyArg_ParseTuple(args, "LO!", &num, &PyLong_Type, &den_obj)) return NULL;
    unsigned __int128 den;
    if (pylong_to_u128(den_obj, &den) < 0) return NULL;
    if (den == 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "division by zero");
        return NULL;
    }
    double q;
    if (true_divide(num, den, &q) < 0) return NULL;
    return PyFloat_FromDouble(q);
}

/* For the tests: the state hash's product, as the runtime computes it and by the loop. */
static PyObject *py_carryless_product(PyObject *self, PyObject *args) {
    unsigned long long a, b;
    int loop = 0;
    if (!PyArg_ParseTuple(args, "KK|p", &a, &b, &loop)) return NULL;
    uint64_t lo, hi;
    if (loop)
        carryless_product_loop(a, b, &lo, &hi);
    else
        carryless_product(a, b, &lo, &hi);
    return u128_to_pylong(((unsigned __int128)hi << 64) | lo);
}

static PyObject *py_policies(PyObject *self, PyObject *unused) {
    PyObject *out = PyTuple_New(P_COUNT);
    if (!out) return NULL;
    for (int i = 0; i < P_COUNT; i++)
        PyTuple_SET_ITEM(out, i, PyUnicode_FromString(POLICY_NAMES[i]));
    return out;
}

static PyMethodDef module_methods[] = {
    {"true_divide", py_true_divide, METH_VARARGS, "num / den as Python's int true division."},
    {"carryless_product", py_carryless_product, METH_VARARGS,
     "(a, b[, loop]): the 128-bit carry-less product of two 64-bit words (the state hash's)"},
    {"policies", py_policies, METH_NOARGS, "the policies implemented in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "engine.sim._native.core", NULL, -1,
                                    module_methods};

PyMODINIT_FUNC PyInit_core(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "SWEEP_WORDS", SWEEP_WORDS) < 0 || /* native.py reads them */
        PyModule_AddIntConstant(m, "POINT_EVERY", POINT_EVERY) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
