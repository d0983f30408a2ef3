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
static const char *POLICY_NAMES[P_COUNT] = {"DTR",  "DTRLocal", "MSPS",      "LRU",     "LargestStorage",
                                            "NbhdPenalty", "HEStar", "CostStale", "TwoPhase"};
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

/* ---- growable int vectors --------------------------------------------------------------- */
typedef struct {
    int32_t *items;
    Py_ssize_t len, cap;
} Vec32;

static int vec_reserve(Vec32 *v, Py_ssize_t need) {
    if (need <= v->cap) return 0;
    Py_ssize_t cap = v->cap ? v->cap : 64;
    while (cap < need) cap *= 2;
    int32_t *grown = (int32_t *)PyMem_Realloc(v->items, sizeof(int32_t) * cap);
    if (!grown) { PyErr_NoMemory(); return -1; }
    v->items = grown;
    v->cap = cap;
    return 0;
}

/* ---- state ------------------------------------------------------------------------------ */
typedef struct {
    int32_t t;        /* the tensor being materialized */
    int8_t remat;     /* a rebuild (not the operator's first computation) */
    int8_t phase;     /* 0: locking / rebuilding arguments, 1: in the budget check loop */
    int8_t returning; /* 1: a rebuild of und[i] was started and has finished */
    int32_t i;        /* next undefined argument to handle */
    int32_t und_off, und_len;
} Frame;

typedef struct {
    int64_t clock, memory, pool_bytes;
    int64_t model_compute, remat_compute;
    int64_t evictions, policy_evictions, rematerializations, operators;
    int64_t max_memory, peak_pinned, depth_at_peak_pinned, max_depth, depth;
    int64_t heuristic_evals;
    int64_t fits_max, exceeds_min; /* exceeds_min == INT64_MAX: none yet */
    int64_t budget;
    int32_t pool_head, pool_tail, pool_count;
    int32_t step;       /* schedule position */
    int32_t mat_active; /* the step's materialization is in progress */
    int32_t status;
    int32_t has_failure;
    int64_t f_operator, f_request, f_pinned, f_depth, f_over_by;
    int32_t fs_top, und_top;
    /* walks only (see "trajectories" below): the state hash, and the open segment's sums */
    uint64_t h1, h2;
    int64_t n_points; /* points of this run's trajectory passed so far */
    int32_t seg_open; /* 1: the segment of point n_points - 1 is open */
    int64_t seg_evictions, seg_policy_evictions, seg_remats, seg_evals; /* counters at its start */
    int64_t seg_max_memory, seg_max_pinned, seg_depth_at_max_pinned, seg_max_depth;
    int64_t seg_fits_max, seg_exceeds_min;
} Scalars;

/* One point of a run's trajectory, and the segment from it to the next point. Points are the
   boundaries before each COMPUTE step (frames empty) and the completions of computations
   inside a materialization (mid-cascade). What a run that merges at a point takes over. */
typedef struct {
    int32_t step, boundary; /* boundary: before COMPUTE step `step` (frames empty) */
    int64_t clock;
    uint64_t h1, h2;   /* the whole state's hash at the point */
    uint64_t ah1, ah2; /* the arena's part of it */
    /* the scalars at the point (what a jump to it sets), and where its frame stack is kept */
    int64_t memory, pool_bytes, model_compute, remat_compute, operators, depth;
    int32_t pool_head, pool_tail, pool_count, mat_active, fs_top, und_top;
    Py_ssize_t fr_off, und_off;
    int64_t evictions, policy_evictions, remats, evals; /* counted within the segment */
    int64_t max_memory, max_pinned, depth_at_max_pinned, max_depth, fits_max, exceeds_min;
    Py_ssize_t log_off, log_len; /* the arena words the segment changed: bytes of the log */
    int32_t unlogged;            /* 1: past the log's limit, the segment's words were not kept */
    int32_t bare;                /* 1: made past the limit, its frame stack was not kept either */
} Point;

/* per-storage and per-tensor arrays inside the arena, as offsets */
typedef struct {
    uint8_t *defined, *material, *pinned, *in_pool;
    int32_t *ref_int, *ref_ext, *last_op, *st_len, *ch_len, *pa_len, *pool_prev, *pool_next;
    int64_t *last_access, *compute, *fwd_sum, *rev_sum;
    uint64_t *fwd_int, *fwd_fr, *rev_int, *rev_fr;
} Arrays;

typedef struct {
    int64_t value; /* the exceeding value compared at this point: the next walk budget */
    int lazy;      /* the live state itself (a merged run's boundary): nothing was copied */
    Scalars s;
    char *arena;
    Frame *frames;
    int32_t *und;
    int32_t *dirty; /* the open segment's changed words so far (its delta must include them) */
    uint64_t *dirty_old; /* and their values at the segment's start */
    Py_ssize_t n_dirty;
} Snapshot;

/* the event log (only when asked for; never with snapshots) */
typedef struct {
    Vec32 kind, storage, depth, pool_size, runner_up;
    int64_t *i64; /* seq, operator, size, pinned per row: 4 per row */
    double *f64;  /* score, runner_up_score per row: 2 per row */
    Py_ssize_t rows, cap;
    int64_t *op_max_pinned, *op_max_depth;
    int64_t seq;
} Events;

typedef struct {
    PyObject_HEAD
    /* static program */
    int32_t n, n_ops, n_steps;
    Py_ssize_t words;
    int64_t *op_compute, *op_total, *tensor_size, *size;
    int32_t *op_first, *op_nout, *op_args_off, *op_args;
    int32_t *tensor_storage, *tensor_op;
    int8_t *step_kind;
    int32_t *step_arg;
    int32_t *st_off, *st_items; /* tensors of each storage, in creation order */
    int32_t *ch_off, *ch_items; /* children of each storage, in the order edges appear */
    int32_t *pa_off, *pa_items; /* parents */
    uint8_t *retain;
    /* configuration */
    int policy, regions, budget_inf, snapshots, record_events;
    double nbhd_b;
    int32_t twophase_k;
    int64_t remat_limit; /* thrashed when remat_compute > remat_limit */
    double deadline;     /* monotonic seconds; 0 = none */
    /* dynamic state */
    Scalars s;
    char *arena;
    size_t arena_bytes;
    Arrays a;
    Frame *frames;
    Py_ssize_t frames_cap;
    Vec32 und;
    uint64_t *scratch_a, *scratch_b, *scratch_d;
    int32_t *stack;
    /* closures of one after_compute: for an evicted storage u, the evicted storages reachable
       from u through evicted ones (u included) and the resident ones bordering them, per
       direction; valid while mark == epoch (material does not change within the call) */
    int32_t *mark[2], *done[2], *slot[2]; /* shared_pass's scratch (see there) */
    int32_t epoch;
    uint64_t *clo;
    Py_ssize_t clo_used, clo_cap;
    uint64_t *gclo;   /* shared_pass's closures as global rows (see there) */
    Py_ssize_t gclo_cap;
    int64_t *lc;      /* shared_pass's compute by local id */
    int32_t *base_entry, *entry_base; /* shared_pass's: each base's memo entry, each entry's first base */
    int shared_rows;  /* how shared_pass builds its rows: ROWS_AUTO, or one way (a test switch) */
    /* shared_pass's results by closure union: bases whose evicted neighbours' closures unite
       to the same local sets get the same global rows (half of them, in deep cascades) */
    uint64_t *memo;        /* entries of (key words, global interior, global frontier) */
    int64_t *memo_total;   /* each entry's interior compute */
    uint64_t *memo_hash;   /* each entry's key hash */
    int32_t *memo_slot;    /* open addressing: entry index + 1, 0 empty */
    Py_ssize_t memo_cap, memo_slots;
    int64_t memo_hits;
    int32_t *dfs_node, *dfs_edge, *bases;
    uint64_t *label_rows; /* sweep_pass's rows of 64 bases */
    int64_t sweep_passes;
    /* every edge of the storage graph goes from a lower storage id to a higher one (true of
       the DTR traces: an operator's new storage is numbered after its arguments); then the
       label passes sweep ids in order instead of walking the region first (sweep_pass) */
    int topological;
    uint64_t *sweep_lab, *sweep_flab; /* sweep_pass's words by storage (zero between passes) */
    uint64_t *sweep_act, *sweep_res;  /* its storages to pass on, and the resident ones reached */
    int shared_search; /* 0: plain searches only (a test switch) */
    Vec32 cover;       /* TwoPhase's candidates */
    Vec32 order, news; /* compute_op's outputs and their new storages */
    double time_limit; /* seconds; 0 = none */
    int32_t resumed_operator; /* where the last resume replayed from */
    Snapshot *snaps;
    Py_ssize_t n_snaps, snaps_cap, max_snaps, snaps_dropped, snaps_taken;
    char *spare[2]; /* arenas of released snapshots, for the next ones (see arena_take) */
    int n_spare;
    Events ev;
    /* trajectories (walks): the last run's points, in order; the running run's own points
       (from own_from on) until it ends and they are spliced in */
    int tracking, verify_hash, merging, resuming, traj_valid, merged;
    Point *pts, *own;
    Py_ssize_t n_pts, pts_cap, n_own, own_cap, own_from, search_from, merge_at;
    int64_t *sufmin;    /* min exceeds_min over the trajectory's segments from a point on */
    Py_ssize_t *nextflip; /* the first segment from a point on that compares the budget */
    Py_ssize_t aux_cap;
    int32_t traj_status, traj_has_failure;
    int64_t traj_f_operator, traj_f_request, traj_f_pinned, traj_f_depth, traj_f_value;
    int64_t traj_clock, traj_model, traj_remat, traj_operators;
    Scalars out; /* the last run's result (differs from s when the run merged) */
    uint64_t *dirty;      /* one bit per arena word: changed in the open segment */
    Vec32 dirty_list;     /* those words */
    uint64_t *dirty_old;  /* their values when the segment opened (dirty_list's order) */
    Py_ssize_t dirty_old_cap;
    /* The segments' changed words, encoded (see encode_segment): a thrashing run changes
       48M-87M words, 1 GB at 12 bytes a word; encoded, 5.6 bytes a word. */
    uint8_t *log;
    Py_ssize_t log_len, log_cap, log_live; /* bytes */
    /* A thrashing run changes words at every one of its ~10^5 evictions: its log reached 48M
       words on the TreeLSTM near 0.106, 87M on InceptionV4 at 0.20, and a walk's worker 4 GB.
       Past log_limit bytes in all (log and frame stacks), or a resumed run's own
       run_log_limit (its predecessor's log is kept until it ends: a run that resumes early
       and never rejoins it, as on the TreeLSTM, doubles the log), a segment keeps its point
       (hash and sums: merges need no more) but not its words: a jump over it is refused and
       the run replays instead (see jump_allowed). run_bytes counts the bytes the running
       run's segments took, kept or not. */
    Py_ssize_t log_limit, run_log_limit, run_bytes;
    int64_t unlogged_segments, jumps_refused;
    Frame *fr_log;        /* the points' frame stacks (mid-cascade), and their und lists */
    int32_t *ul_log;
    Py_ssize_t fr_len, fr_cap, ul_len, ul_cap;
    int64_t words_logged; /* changed words encoded into the log, for its bytes-a-word figure */
    int64_t log_compactions, frame_compactions;
    uint64_t *row_old[2]; /* rows before a rewrite (to find the words it changed) */
    int64_t jumps, steps_jumped;
    int dirty_failed; /* out of memory while marking: the segment's delta is incomplete */
    int64_t merges, merges_blocked, steps_skipped, points_resumed, mid_merges;
    int64_t searches, visited, edges_seen, plain_passes, cycle_passes, shared_passes, global_passes;
    char error[240];
    int started;
} Core;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int test_bit(const uint64_t *b, Py_ssize_t i) { return (b[i >> 6] >> (i & 63)) & 1; }
static inline void set_bit(uint64_t *b, Py_ssize_t i) { b[i >> 6] |= (uint64_t)1 << (i & 63); }
static inline void clear_bit(uint64_t *b, Py_ssize_t i) { b[i >> 6] &= ~((uint64_t)1 << (i & 63)); }

static inline uint64_t *row(Core *c, uint64_t *table, Py_ssize_t s) { return table + s * c->words; }

/* ---- the state hash (walks only) ------------------------------------------------------------
   A walk's run that reaches a boundary in exactly the state the previous run had there goes on
   exactly as that run did (up to budget comparisons, checked separately), so it can take the
   rest over instead of replaying it. "Exactly the state" is tested by a 128-bit hash of the
   whole arena, kept up to date on every write: the XOR over every non-zero element (and every
   non-zero bitset word) of a mix of its arena offset and value. The writers below update it;
   with `verify_hash` every boundary recomputes it from scratch and compares (the tests). */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline void hash_term(Core *c, const void *p, uint64_t v) {
    if (!v) return;
    uint64_t key = (uint64_t)((const char *)p - c->arena);
    uint64_t x = mix64(key * 0x9e3779b97f4a7c15ULL ^ v);
    c->s.h1 ^= x;
    c->s.h2 ^= mix64(x ^ (v * 0xc2b2ae3d27d4eb4fULL) ^ (key << 17));
}

/* Room for one more changed word. dirty_old's capacity follows dirty_list's (it is only ever
   grown here), so dirty_list's capacity is the one to check. */
static int dirty_grow(Core *c) {
    if (vec_reserve(&c->dirty_list, c->dirty_list.len + 1) < 0) return -1;
    if (c->dirty_list.cap > c->dirty_old_cap) {
        uint64_t *grown =
            (uint64_t *)PyMem_Realloc(c->dirty_old, sizeof(uint64_t) * c->dirty_list.cap);
        if (!grown) { PyErr_NoMemory(); return -1; }
        c->dirty_old = grown;
        c->dirty_old_cap = c->dirty_list.cap;
    }
    return 0;
}

/* Arena word w changed in the open segment; old is its value before (kept at the first change
   only: the segment's log keeps old ^ new when it closes, see encode_segment). */
static inline void mark_dirty_word(Core *c, Py_ssize_t w, uint64_t old) {
    uint64_t bit = (uint64_t)1 << (w & 63);
    if (c->dirty[w >> 6] & bit) return;
    c->dirty[w >> 6] |= bit;
    if (c->dirty_list.len == c->dirty_list.cap && dirty_grow(c) < 0) {
        c->dirty_failed = 1;
        return;
    }
    c->dirty_old[c->dirty_list.len] = old;
    c->dirty_list.items[c->dirty_list.len++] = (int32_t)w;
}

/* Before a write to p (its word still holds the old value). */
static inline void mark_dirty(Core *c, const void *p) {
    Py_ssize_t w = ((const char *)p - c->arena) >> 3;
    mark_dirty_word(c, w, ((const uint64_t *)c->arena)[w]);
}

/* Tracked writes of one arena element: the hash, and the word's dirty mark. */
#define PUT(c, lvalue, value)                                                                   \
    do {                                                                                        \
        __typeof__(lvalue) *p_ = &(lvalue);                                                     \
        __typeof__(lvalue) v_ = (value);                                                        \
        if ((c)->tracking && *p_ != v_) {                                                       \
            hash_term((c), p_, (uint64_t)*p_);                                                  \
            hash_term((c), p_, (uint64_t)v_);                                                   \
            mark_dirty((c), p_);                                                                \
        }                                                                                       \
        *p_ = v_;                                                                               \
    } while (0)

static inline void put_word(Core *c, uint64_t *w, uint64_t v) {
    if (*w == v) return;
    if (c->tracking) {
        hash_term(c, w, *w);
        hash_term(c, w, v);
        mark_dirty(c, w);
    }
    *w = v;
}

/* A bitset row about to be rewritten wholesale (memset, then bits set): keep its old words in
   row_old[k], and after the rewrite account for the words that changed. */
static inline void row_begin(Core *c, const uint64_t *r, int k) {
    if (c->tracking) memcpy(c->row_old[k], r, sizeof(uint64_t) * c->words);
}

static inline void row_end(Core *c, uint64_t *r, int k) {
    if (!c->tracking) return;
    const uint64_t *old = c->row_old[k];
    for (Py_ssize_t i = 0; i < c->words; i++) {
        if (r[i] == old[i]) continue;
        hash_term(c, r + i, old[i]);
        hash_term(c, r + i, r[i]);
        mark_dirty_word(c, ((const char *)(r + i) - c->arena) >> 3, old[i]);
    }
}

/* ---- events ----------------------------------------------------------------------------- */
enum { E_EVICT_POLICY = 0, E_EVICT_EAGER = 1, E_REMAT = 2 };

static int ev_push(Core *c, int kind, int64_t seq, int64_t op, int32_t depth, int32_t storage,
                   int64_t size, double score, int32_t pool_size, int64_t pinned,
                   int32_t runner_up, double runner_score) {
    Events *e = &c->ev;
    if (e->rows == e->cap) {
        Py_ssize_t cap = e->cap ? e->cap * 2 : 1024;
        int64_t *i64 = (int64_t *)PyMem_Realloc(e->i64, sizeof(int64_t) * 4 * cap);
        if (!i64) { PyErr_NoMemory(); return -1; }
        e->i64 = i64;
        double *f64 = (double *)PyMem_Realloc(e->f64, sizeof(double) * 2 * cap);
        if (!f64) { PyErr_NoMemory(); return -1; }
        e->f64 = f64;
        e->cap = cap;
    }
    Vec32 *vecs[5] = {&e->kind, &e->storage, &e->depth, &e->pool_size, &e->runner_up};
    int32_t vals[5] = {kind, storage, depth, pool_size, runner_up};
    for (int i = 0; i < 5; i++) {
        if (vec_reserve(vecs[i], e->rows + 1) < 0) return -1;
        vecs[i]->items[e->rows] = vals[i];
        vecs[i]->len = e->rows + 1;
    }
    e->i64[4 * e->rows + 0] = seq;
    e->i64[4 * e->rows + 1] = op;
    e->i64[4 * e->rows + 2] = size;
    e->i64[4 * e->rows + 3] = pinned;
    e->f64[2 * e->rows + 0] = score;
    e->f64[2 * e->rows + 1] = runner_score;
    e->rows++;
    return 0;
}

/* ---- the pool: storages in the order they became evictable (a linked list) -------------- */
static inline void make_evictable(Core *c, int32_t s) {
    Arrays *a = &c->a;
    if (a->in_pool[s] || c->retain[s]) return;
    PUT(c, a->in_pool[s], 1);
    PUT(c, a->pool_prev[s], c->s.pool_tail);
    PUT(c, a->pool_next[s], -1);
    if (c->s.pool_tail >= 0) PUT(c, a->pool_next[c->s.pool_tail], s);
    else c->s.pool_head = s;
    c->s.pool_tail = s;
    c->s.pool_count++;
    c->s.pool_bytes += c->size[s];
}

static inline void make_unevictable(Core *c, int32_t s) {
    Arrays *a = &c->a;
    if (!a->in_pool[s]) return;
    PUT(c, a->in_pool[s], 0);
    int32_t p = a->pool_prev[s], q = a->pool_next[s];
    if (p >= 0) PUT(c, a->pool_next[p], q);
    else c->s.pool_head = q;
    if (q >= 0) PUT(c, a->pool_prev[q], p);
    else c->s.pool_tail = p;
    c->s.pool_count--;
    c->s.pool_bytes -= c->size[s];
}

static inline void lock(Core *c, int32_t s) {
    if (c->a.ref_int[s] == 0) make_unevictable(c, s);
    PUT(c, c->a.ref_int[s], c->a.ref_int[s] + 1);
}

static inline void unlock(Core *c, int32_t s) {
    PUT(c, c->a.ref_int[s], c->a.ref_int[s] - 1);
    if (c->a.ref_int[s] == 0) make_evictable(c, s);
}

/* ---- maintained evicted neighbourhoods (engine/sim/regions.py is the reference) ---------- */
static void search(Core *c, int32_t base, int forward) {
    Arrays *a = &c->a;
    const int32_t *off = forward ? c->ch_off : c->pa_off;
    const int32_t *items = forward ? c->ch_items : c->pa_items;
    const int32_t *len = forward ? a->ch_len : a->pa_len;
    uint64_t *interior = row(c, forward ? a->fwd_int : a->rev_int, base);
    uint64_t *frontier = row(c, forward ? a->fwd_fr : a->rev_fr, base);
    row_begin(c, interior, 0);
    row_begin(c, frontier, 1);
    memset(interior, 0, sizeof(uint64_t) * c->words);
    memset(frontier, 0, sizeof(uint64_t) * c->words);
    const uint8_t *material = a->material;
    int64_t total = 0;
    Py_ssize_t top = 0;
    c->stack[top++] = base;
    c->searches++;
    while (top > 0) {
        int32_t v = c->stack[--top];
        const int32_t *e = items + off[v];
        int32_t m = len[v];
        c->visited++;
        c->edges_seen += m;
        for (int32_t j = 0; j < m; j++) {
            int32_t u = e[j];
            if (material[u]) {
                if (u != base) set_bit(frontier, u);
            } else if (!test_bit(interior, u)) {
                set_bit(interior, u);
                total += a->compute[u];
                c->stack[top++] = u; /* each storage is pushed at most once */
            }
        }
    }
    row_end(c, interior, 0);
    row_end(c, frontier, 1);
    PUT(c, (forward ? a->fwd_sum : a->rev_sum)[base], total);
}

/* Room for nb entries of `words` words, and an empty table of slots for them. */
static int memo_reserve(Core *c, Py_ssize_t nb, Py_ssize_t words) {
    if (nb * words > c->memo_cap) {
        Py_ssize_t cap = nb * words * 2;
        uint64_t *memo = (uint64_t *)PyMem_Realloc(c->memo, sizeof(uint64_t) * cap);
        if (!memo) return -1;
        c->memo = memo;
        c->memo_cap = cap;
    }
    Py_ssize_t slots = 16;
    while (slots < 2 * nb) slots *= 2;
    if (slots > c->memo_slots) {
        PyMem_Free(c->memo_slot);
        PyMem_Free(c->memo_hash);
        PyMem_Free(c->memo_total);
        c->memo_slot = (int32_t *)PyMem_Malloc(sizeof(int32_t) * slots);
        c->memo_hash = (uint64_t *)PyMem_Malloc(sizeof(uint64_t) * slots);
        c->memo_total = (int64_t *)PyMem_Malloc(sizeof(int64_t) * slots);
        c->memo_slots = slots;
        if (!c->memo_slot || !c->memo_hash || !c->memo_total) {
            c->memo_slots = 0;
            return -1;
        }
    }
    memset(c->memo_slot, 0, sizeof(int32_t) * c->memo_slots);
    return 0;
}

/* Writes base's fresh rows (what search() finds): interior and frontier as built in the
   scratch rows (its resident neighbours and its own bit are settled here), word by word, so
   that only the words that change are hashed and marked. */
static void put_rows(Core *c, int32_t base, int forward, const uint64_t *interior_rows,
                     uint64_t *frontier_rows, int64_t total) {
    Arrays *a = &c->a;
    const int32_t *off = forward ? c->ch_off : c->pa_off;
    const int32_t *items = forward ? c->ch_items : c->pa_items;
    const int32_t *len = forward ? a->ch_len : a->pa_len;
    uint64_t *interior = row(c, forward ? a->fwd_int : a->rev_int, base);
    uint64_t *frontier = row(c, forward ? a->fwd_fr : a->rev_fr, base);
    const int32_t *e = items + off[base];
    for (int32_t k = 0; k < len[base]; k++)
        if (a->material[e[k]]) set_bit(frontier_rows, e[k]);
    clear_bit(frontier_rows, base); /* a search never lists its base */
    for (Py_ssize_t x = 0; x < c->words; x++) {
        put_word(c, &interior[x], interior_rows[x]);
        put_word(c, &frontier[x], frontier_rows[x]);
    }
    PUT(c, (forward ? a->fwd_sum : a->rev_sum)[base], total);
    c->searches++;
}

/* The fresh searches of a pass's bases, 64 at a time, for a topological storage graph.

   Each storage the bases reach gets a word: bit j set when base j reaches it through evicted
   storages. The bases' evicted neighbours are seeded with their bits, and every evicted
   storage passes its word on to its neighbours; an evicted storage's word then says whose
   interior it is in, a resident one's whose frontier. Ids in order are a topological order
   (every edge goes from a lower id to a higher one), so one sweep over the ids (ascending
   forward, descending backward) takes each storage after every storage that can pass it a
   bit: the region is walked once per 64 bases, without a search first. Plain searches walk
   it once per base, and the bases of one computation mostly border the same region (on the
   LSTM their interiors add up to about three times the region: a fresh run at 0.22 took
   0.53x the time). It is also cheaper than shared_pass's closures, which stay for storage
   graphs whose ids are not in order, with many bases too: an Unrolled GAN run whose passes
   often have more than 64 took 0.48x the time, a walk on InceptionV4 near 0.233 0.61x. */
static void sweep_pass(Core *c, const int32_t *bases, Py_ssize_t nb, int forward) {
    Arrays *a = &c->a;
    const int32_t *off = forward ? c->ch_off : c->pa_off;
    const int32_t *items = forward ? c->ch_items : c->pa_items;
    const int32_t *len = forward ? a->ch_len : a->pa_len;
    const uint8_t *material = a->material;
    Py_ssize_t GW = c->words;
    uint64_t *lab = c->sweep_lab, *flab = c->sweep_flab, *act = c->sweep_act, *res = c->sweep_res;
    uint64_t *rows = c->label_rows;
    int64_t total[64];
    c->sweep_passes++;
    for (Py_ssize_t first = 0; first < nb; first += 64) {
        int k = nb - first < 64 ? (int)(nb - first) : 64;
        Py_ssize_t pending = 0, lo = GW, hi = -1, rlo = GW, rhi = -1;
        for (int j = 0; j < k; j++) {
            int32_t base = bases[first + j];
            const int32_t *e = items + off[base];
            for (int32_t x = 0; x < len[base]; x++) {
                int32_t u = e[x];
                if (material[u]) continue;
                if (!lab[u]) {
                    set_bit(act, u);
                    pending++;
                    if ((u >> 6) < lo) lo = u >> 6;
                    if ((u >> 6) > hi) hi = u >> 6;
                }
                lab[u] |= (uint64_t)1 << j;
            }
        }
        memset(rows, 0, sizeof(uint64_t) * 2 * GW * k);
        memset(total, 0, sizeof total);
        Py_ssize_t visited = 0, edges = 0;
        for (Py_ssize_t x = forward ? lo : hi; pending > 0; x += forward ? 1 : -1) {
            /* storages taken one after another mostly have the same word (on the LSTM it
               changes at one in four): their bits and compute are gathered while it stays and
               given to its bases at once */
            uint64_t word, run = 0, run_bits = 0;
            int64_t run_cost = 0;
            while ((word = act[x]) != 0) {
                int b = forward ? __builtin_ctzll(word) : 63 - __builtin_clzll(word);
                act[x] = word & ~((uint64_t)1 << b);
                pending--;
                int32_t v = (int32_t)((x << 6) + b);
                uint64_t L = lab[v], bit = (uint64_t)1 << b;
                int64_t cost = a->compute[v];
                lab[v] = 0;
                visited++;
                if (L != run) {
                    for (uint64_t m = run; m; m &= m - 1) {
                        int j = __builtin_ctzll(m);
                        rows[2 * j * GW + x] |= run_bits;
                        total[j] += run_cost;
                    }
                    run = L;
                    run_bits = run_cost = 0;
                }
                run_bits |= bit;
                run_cost += cost;
                const int32_t *e = items + off[v];
                edges += len[v];
                for (int32_t y = 0; y < len[v]; y++) {
                    int32_t w = e[y];
                    if (material[w]) {
                        if (!flab[w]) {
                            set_bit(res, w);
                            if ((w >> 6) < rlo) rlo = w >> 6;
                            if ((w >> 6) > rhi) rhi = w >> 6;
                        }
                        flab[w] |= L;
                    } else {
                        if (!lab[w]) {
                            set_bit(act, w);
                            pending++;
                        }
                        lab[w] |= L;
                    }
                }
            }
            for (uint64_t m = run; m; m &= m - 1) {
                int j = __builtin_ctzll(m);
                rows[2 * j * GW + x] |= run_bits;
                total[j] += run_cost;
            }
        }
        for (Py_ssize_t x = rlo; x <= rhi; x++) {
            uint64_t word = res[x], run = 0, run_bits = 0;
            res[x] = 0;
            while (word) {
                int b = __builtin_ctzll(word);
                word &= word - 1;
                int32_t w = (int32_t)((x << 6) + b);
                if (flab[w] != run) {
                    for (uint64_t m = run; m; m &= m - 1) rows[(2 * __builtin_ctzll(m) + 1) * GW + x] |= run_bits;
                    run = flab[w];
                    run_bits = 0;
                }
                run_bits |= (uint64_t)1 << b;
                flab[w] = 0;
            }
            for (uint64_t m = run; m; m &= m - 1) rows[(2 * __builtin_ctzll(m) + 1) * GW + x] |= run_bits;
        }
        c->visited += visited;
        c->edges_seen += edges;
        for (int j = 0; j < k; j++)
            put_rows(c, bases[first + j], forward, rows + 2 * j * GW, rows + (2 * j + 1) * GW,
                     total[j]);
    }
}

/* All the fresh searches of one direction in one after_compute, sharing their work, where
   sweep_pass cannot (a storage graph whose ids are not a topological order).

   The affected storages mostly border the same evicted region, so their plain searches walk
   it again and again (20-35x the region's size on the DTR traces). Here the region is walked
   once: its storages get local ids (evicted ones in post-order, which is topological when the
   region is acyclic), then each evicted storage's closure - the evicted storages reachable
   from it through evicted ones, itself included (R), and the resident storages bordering
   them (F) - is a local bitset built from its neighbours' closures. A base's interior is the
   union of its evicted neighbours' R, its frontier that of their F plus its resident
   neighbours, which is exactly what search() finds. On a cycle through evicted storages it
   returns -1 before writing anything, and the caller searches plainly. */
static int shared_pass(Core *c, const int32_t *bases, Py_ssize_t nb, int forward) {
    Arrays *a = &c->a;
    const int32_t *off = forward ? c->ch_off : c->pa_off;
    const int32_t *items = forward ? c->ch_items : c->pa_items;
    const int32_t *len = forward ? a->ch_len : a->pa_len;
    const uint8_t *material = a->material;
    int32_t *mark = c->mark[0], *done = c->done[0], *local = c->slot[0];
    int32_t *global = c->slot[1], *post = c->mark[1];
    int32_t m = 0, n_post = 0;
    c->epoch++;
    for (Py_ssize_t b = 0; b < nb; b++) {
        const int32_t *e = items + off[bases[b]];
        for (int32_t k = 0; k < len[bases[b]]; k++) {
            int32_t u = e[k];
            if (material[u] || mark[u] == c->epoch) continue;
            Py_ssize_t top = 0;
            mark[u] = c->epoch;
            local[u] = m;
            global[m++] = u;
            c->dfs_node[top] = u;
            c->dfs_edge[top++] = 0;
            while (top > 0) {
                int32_t v = c->dfs_node[top - 1];
                int32_t j = c->dfs_edge[top - 1];
                if (j < len[v]) {
                    c->dfs_edge[top - 1]++;
                    int32_t w = items[off[v] + j];
                    if (mark[w] == c->epoch) {
                        if (!material[w] && done[w] != c->epoch) return -1; /* a cycle */
                        continue;
                    }
                    mark[w] = c->epoch;
                    local[w] = m;
                    global[m++] = w;
                    if (material[w]) {
                        done[w] = c->epoch;
                    } else {
                        c->dfs_node[top] = w;
                        c->dfs_edge[top++] = 0;
                    }
                    continue;
                }
                done[v] = c->epoch;
                post[n_post++] = v;
                top--;
            }
        }
    }
    Py_ssize_t W = (m >> 6) + 1, GW = c->words;
    /* Closures cost about W word operations per edge of the region, plain searches about
       one edge check per edge per base: share only when there are more bases than that. */
    if (nb <= W * SHARE_FACTOR) return -3;
    Py_ssize_t need = (Py_ssize_t)2 * W * (m + 1);
    if (need > c->clo_cap) {
        uint64_t *grown = (uint64_t *)PyMem_Realloc(c->clo, sizeof(uint64_t) * need);
        if (!grown) return -2;
        c->clo = grown;
        c->clo_cap = need;
    }
    /* Local ids in ascending storage order (any numbering gives the same closures; this one
       makes a local union's conversion to a global row a walk over ascending words). */
    uint64_t *region = c->scratch_d;
    memset(region, 0, sizeof(uint64_t) * GW);
    for (int32_t i = 0; i < m; i++) set_bit(region, global[i]);
    for (Py_ssize_t x = 0, i = 0; x < GW; x++) {
        uint64_t word = region[x];
        while (word) {
            int32_t g = (int32_t)((x << 6) + __builtin_ctzll(word));
            word &= word - 1;
            local[g] = (int32_t)i;
            global[i++] = g;
        }
    }
    c->visited += n_post;
    Py_ssize_t region_edges = 0;
    for (int32_t i = 0; i < n_post; i++) {
        int32_t v = post[i];
        uint64_t *R = c->clo + (Py_ssize_t)local[v] * 2 * W, *F = R + W;
        memset(R, 0, sizeof(uint64_t) * 2 * W);
        set_bit(R, local[v]);
        const int32_t *e = items + off[v];
        region_edges += len[v];
        for (int32_t k = 0; k < len[v]; k++) {
            int32_t w = e[k];
            if (material[w]) {
                set_bit(F, local[w]);
            } else {
                const uint64_t *Rw = c->clo + (Py_ssize_t)local[w] * 2 * W, *Fw = Rw + W;
                for (Py_ssize_t x = 0; x < W; x++) {
                    R[x] |= Rw[x];
                    F[x] |= Fw[x];
                }
            }
        }
    }
    c->edges_seen += region_edges;

    /* Each base's interior is the union of its evicted neighbours' R; bases with the same
       union get the same rows. A union's frontier is the resident storages its members point
       to, a function of the union, so the interior alone is the memo's key. First every base
       finds its union's entry (or opens one), then the new entries get their global rows. */
    uint64_t *li = c->clo + (Py_ssize_t)m * 2 * W, *lf = li + W; /* a union, local */
    Py_ssize_t entry_words = W + 2 * GW, entries = 0;
    if (memo_reserve(c, nb, entry_words) < 0) return -2;
    int32_t *base_entry = c->base_entry, *entry_base = c->entry_base;
    int64_t new_bits = 0, new_links = 0; /* over the new entries: interior bits, evicted links */
    for (Py_ssize_t b = 0; b < nb; b++) {
        const int32_t *e = items + off[bases[b]];
        int links = 0;
        memset(li, 0, sizeof(uint64_t) * W);
        for (int32_t k = 0; k < len[bases[b]]; k++) {
            int32_t u = e[k];
            if (material[u]) continue;
            links++;
            const uint64_t *R = c->clo + (Py_ssize_t)local[u] * 2 * W;
            for (Py_ssize_t x = 0; x < W; x++) li[x] |= R[x];
        }
        if (!links) {
            base_entry[b] = -1;
            continue;
        }
        uint64_t h = 0x243f6a8885a308d3ULL;
        for (Py_ssize_t x = 0; x < W; x++) h = (h ^ li[x]) * 0x9e3779b97f4a7c15ULL;
        h = mix64(h);
        Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)(c->memo_slots - 1));
        int32_t found = -1;
        while (c->memo_slot[slot]) {
            Py_ssize_t i = c->memo_slot[slot] - 1;
            if (c->memo_hash[i] == h && memcmp(c->memo + i * entry_words, li, sizeof(uint64_t) * W) == 0) {
                found = (int32_t)i;
                c->memo_hits++;
                break;
            }
            slot = (slot + 1) & (c->memo_slots - 1);
        }
        if (found < 0) {
            found = (int32_t)entries++;
            memcpy(c->memo + (Py_ssize_t)found * entry_words, li, sizeof(uint64_t) * W);
            c->memo_hash[found] = h;
            c->memo_slot[slot] = found + 1;
            entry_base[found] = bases[b];
            for (Py_ssize_t x = 0; x < W; x++) new_bits += __builtin_popcountll(li[x]);
            new_links += links;
        }
        base_entry[b] = found;
    }

    /* The new entries' global rows, one of two ways (the same rows either way):
       - converting each union's local bits to storage ids, about a dozen operations a bit;
       - or first each region storage's closure as global rows (2 * GW words per region edge,
         in post-order), then a union is the OR of its members' rows; its compute total is
         still summed bit by bit, without the scatter.
       Walks timed with each way forced, alternating in one process: closures took 0.75x the
       time on InceptionV4 near 0.233, 0.9x on ResNet-32 and the same on DenseNet-121, but
       1.2x on Unrolled GAN, whose regions are small against its rows (107 words). The
       estimate below picks per pass; it was within the timing noise of the better way on all
       four (InceptionV4 0.8x, GAN 0.96x of the conversion). */
    int global_rows = c->shared_rows == ROWS_CLOSURES ||
                      (c->shared_rows == ROWS_AUTO &&
                       2 * GW * (region_edges + new_links) < GLOBAL_ROWS_FACTOR * new_bits);
    c->shared_passes++;
    int32_t *gpos = c->done[1];
    if (global_rows) {
        Py_ssize_t gneed = (Py_ssize_t)2 * GW * n_post;
        if (gneed > c->gclo_cap) {
            uint64_t *grown = (uint64_t *)PyMem_Realloc(c->gclo, sizeof(uint64_t) * gneed);
            if (!grown) return -2;
            c->gclo = grown;
            c->gclo_cap = gneed;
        }
        for (int32_t i = 0; i < n_post; i++) {
            int32_t v = post[i];
            gpos[v] = i;
            uint64_t *R = c->gclo + (Py_ssize_t)i * 2 * GW, *F = R + GW;
            memset(R, 0, sizeof(uint64_t) * 2 * GW);
            set_bit(R, v);
            const int32_t *e = items + off[v];
            for (int32_t k = 0; k < len[v]; k++) {
                int32_t w = e[k];
                if (material[w]) {
                    set_bit(F, w);
                } else {
                    const uint64_t *Rw = c->gclo + (Py_ssize_t)gpos[w] * 2 * GW;
                    for (Py_ssize_t x = 0; x < 2 * GW; x++) R[x] |= Rw[x];
                }
            }
        }
        for (int32_t i = 0; i < m; i++) c->lc[i] = a->compute[global[i]];
        c->global_passes++;
    }
    for (Py_ssize_t i = 0; i < entries; i++) {
        uint64_t *key = c->memo + i * entry_words, *gi = key + W, *gf = gi + GW;
        int32_t base = entry_base[i];
        const int32_t *e = items + off[base];
        int64_t total = 0;
        memset(gi, 0, sizeof(uint64_t) * 2 * GW);
        if (global_rows) {
            for (int32_t k = 0; k < len[base]; k++) {
                int32_t u = e[k];
                if (material[u]) continue;
                const uint64_t *Ru = c->gclo + (Py_ssize_t)gpos[u] * 2 * GW;
                for (Py_ssize_t x = 0; x < 2 * GW; x++) gi[x] |= Ru[x];
            }
            /* The compute total, bit by bit: from scratch, or from the previous new entry's
               total over the bits where the two differ when those are fewer (neighbouring
               bases' unions are mostly nested: a few bits apart out of thousands). */
            const uint64_t *prev = i ? c->memo + (i - 1) * entry_words : NULL;
            int64_t own = 0, apart = 0;
            for (Py_ssize_t x = 0; x < W; x++) {
                own += __builtin_popcountll(key[x]);
                if (prev) apart += __builtin_popcountll(key[x] ^ prev[x]);
            }
            if (prev && apart < own) {
                total = c->memo_total[i - 1];
                for (Py_ssize_t x = 0; x < W; x++) {
                    uint64_t gained = key[x] & ~prev[x], lost = prev[x] & ~key[x];
                    while (gained) {
                        total += c->lc[(x << 6) + __builtin_ctzll(gained)];
                        gained &= gained - 1;
                    }
                    while (lost) {
                        total -= c->lc[(x << 6) + __builtin_ctzll(lost)];
                        lost &= lost - 1;
                    }
                }
            } else {
                for (Py_ssize_t x = 0; x < W; x++) {
                    uint64_t word = key[x];
                    while (word) {
                        total += c->lc[(x << 6) + __builtin_ctzll(word)];
                        word &= word - 1;
                    }
                }
            }
        } else {
            memset(lf, 0, sizeof(uint64_t) * W);
            for (int32_t k = 0; k < len[base]; k++) {
                int32_t u = e[k];
                if (material[u]) continue;
                const uint64_t *F = c->clo + (Py_ssize_t)local[u] * 2 * W + W;
                for (Py_ssize_t x = 0; x < W; x++) lf[x] |= F[x];
            }
            /* ascending local ids are ascending storages: gather each global word's bits in
               a register and store it once */
            for (int side = 0; side < 2; side++) {
                const uint64_t *src = side ? lf : key;
                uint64_t *dst = side ? gf : gi, acc = 0;
                Py_ssize_t at = -1;
                for (Py_ssize_t x = 0; x < W; x++) {
                    uint64_t word = src[x];
                    while (word) {
                        int32_t g = global[(x << 6) + __builtin_ctzll(word)];
                        word &= word - 1;
                        if ((g >> 6) != at) {
                            if (at >= 0) dst[at] = acc;
                            at = g >> 6;
                            acc = 0;
                        }
                        acc |= (uint64_t)1 << (g & 63);
                        if (!side) total += a->compute[g];
                    }
                }
                if (at >= 0) dst[at] = acc;
            }
        }
        c->memo_total[i] = total;
    }

    for (Py_ssize_t b = 0; b < nb; b++) {
        int32_t base = bases[b];
        uint64_t *interior = row(c, forward ? a->fwd_int : a->rev_int, base);
        uint64_t *frontier = row(c, forward ? a->fwd_fr : a->rev_fr, base);
        uint64_t *fresh = c->scratch_d; /* the new frontier (the region's bits are spent) */
        int64_t total = 0;
        /* word by word, so that only the words that change are hashed and marked */
        if (base_entry[b] < 0) {
            for (Py_ssize_t x = 0; x < GW; x++) put_word(c, &interior[x], 0);
            memset(fresh, 0, sizeof(uint64_t) * GW);
        } else {
            const uint64_t *entry = c->memo + (Py_ssize_t)base_entry[b] * entry_words;
            for (Py_ssize_t x = 0; x < GW; x++) put_word(c, &interior[x], entry[W + x]);
            memcpy(fresh, entry + W + GW, sizeof(uint64_t) * GW);
            total = c->memo_total[base_entry[b]];
        }
        const int32_t *e = items + off[base];
        for (int32_t k = 0; k < len[base]; k++)
            if (material[e[k]]) set_bit(fresh, e[k]);
        if (material[base]) clear_bit(fresh, base); /* a search never lists its base */
        for (Py_ssize_t x = 0; x < GW; x++) put_word(c, &frontier[x], fresh[x]);
        PUT(c, (forward ? a->fwd_sum : a->rev_sum)[base], total);
        c->searches++;
    }
    return 0;
}

/* The fresh searches of one direction: shared when several bases can share them. */
static int search_all(Core *c, const int32_t *bases, Py_ssize_t nb, int forward) {
    if (c->shared_search && nb > 1 && c->topological &&
        (c->shared_rows == ROWS_AUTO || c->shared_rows == ROWS_LABELS)) {
        sweep_pass(c, bases, nb, forward);
        return 0;
    }
    if (c->shared_search && nb > 1) {
        int r = shared_pass(c, bases, nb, forward);
        if (r == 0) return 0;
        if (r == -2) { PyErr_NoMemory(); return -1; }
        c->plain_passes++;
        if (r == -1) c->cycle_passes++;
    }
    for (Py_ssize_t b = 0; b < nb; b++) search(c, bases[b], forward);
    return 0;
}

static int after_compute(Core *c, const int32_t *storages, int count) {
    Arrays *a = &c->a;
    uint64_t *aff_fwd = c->scratch_a, *aff_rev = c->scratch_b;
    memset(aff_fwd, 0, sizeof(uint64_t) * c->words);
    memset(aff_rev, 0, sizeof(uint64_t) * c->words);
    for (int i = 0; i < count; i++) {
        int32_t s = storages[i];
        search(c, s, 1);
        search(c, s, 0);
        const uint64_t *rf = row(c, a->rev_fr, s), *ff = row(c, a->fwd_fr, s);
        for (Py_ssize_t w = 0; w < c->words; w++) {
            aff_fwd[w] |= rf[w];
            aff_rev[w] |= ff[w];
        }
    }
    /* then the unpinned storages whose neighbourhoods the new ones cut */
    for (int pass = 0; pass < 2; pass++) {
        const uint64_t *aff = pass == 0 ? aff_fwd : aff_rev;
        Py_ssize_t nb = 0;
        for (Py_ssize_t w = 0; w < c->words; w++) {
            uint64_t word = aff[w];
            while (word) {
                int32_t s = (int32_t)((w << 6) + __builtin_ctzll(word));
                word &= word - 1;
                if (!a->pinned[s]) c->bases[nb++] = s;
            }
        }
        if (search_all(c, c->bases, nb, pass == 0) < 0) return -1;
    }
    return 0;
}

static int absorb_into(Core *c, int32_t s, int forward) {
    Arrays *a = &c->a;
    uint64_t *int_t = forward ? a->fwd_int : a->rev_int;
    uint64_t *fr_t = forward ? a->fwd_fr : a->rev_fr;
    int64_t *sum = forward ? a->fwd_sum : a->rev_sum;
    /* forward neighbourhoods change for the storages on s's reverse frontier, and back */
    const uint64_t *drivers = row(c, forward ? a->rev_fr : a->fwd_fr, s);
    const uint64_t *s_front = row(c, fr_t, s), *s_int = row(c, int_t, s);
    uint64_t *diff = c->scratch_d;
    for (Py_ssize_t w = 0; w < c->words; w++) {
        uint64_t word = drivers[w];
        while (word) {
            int32_t p = (int32_t)((w << 6) + __builtin_ctzll(word));
            word &= word - 1;
            if (a->pinned[p]) continue;
            uint64_t *front = row(c, fr_t, p), *interior = row(c, int_t, p);
            if (!test_bit(front, s)) {
                snprintf(c->error, sizeof c->error,
                         "maintained neighbourhood of storage %d lacks evicted storage %d on its "
                         "frontier (simrd stops on an assertion here)", p, s);
                return -1;
            }
            put_word(c, &front[s >> 6], front[s >> 6] & ~((uint64_t)1 << (s & 63)));
            for (Py_ssize_t k = 0; k < c->words; k++) {
                put_word(c, &front[k], front[k] | s_front[k]);
                diff[k] = s_int[k] & ~interior[k];
            }
            set_bit(diff, s);
            int64_t added = 0;
            for (Py_ssize_t k = 0; k < c->words; k++) {
                uint64_t d = diff[k];
                if (!d) continue;
                put_word(c, &interior[k], interior[k] | d);
                while (d) {
                    added += a->compute[(k << 6) + __builtin_ctzll(d)];
                    d &= d - 1;
                }
            }
            PUT(c, sum[p], sum[p] + added);
        }
    }
    return 0;
}

static int absorb_evicted(Core *c, int32_t s) {
    Arrays *a = &c->a;
    if (absorb_into(c, s, 1) < 0 || absorb_into(c, s, 0) < 0) return -1;
    uint64_t *rows[4] = {row(c, a->fwd_int, s), row(c, a->fwd_fr, s), row(c, a->rev_int, s),
                         row(c, a->rev_fr, s)};
    for (int k = 0; k < 4; k++) {
        row_begin(c, rows[k], 0);
        memset(rows[k], 0, sizeof(uint64_t) * c->words);
        row_end(c, rows[k], 0);
    }
    PUT(c, a->fwd_sum[s], 0);
    PUT(c, a->rev_sum[s], 0);
    return 0;
}

static int64_t e_star_size(Core *c, int32_t s) {
    const uint64_t *f = row(c, c->a.fwd_int, s), *r = row(c, c->a.rev_int, s);
    int64_t count = 0;
    for (Py_ssize_t w = 0; w < c->words; w++) count += __builtin_popcountll(f[w] | r[w]);
    return count;
}

/* ---- scores: the same arithmetic as engine/sim/policies.py ------------------------------- */
/* Python computes `size * (clock - last_access)` with last_access possibly -inf: then the
   staleness is inf, the product inf (size > 0) or nan (size 0), and the score 0.0 or inf. */
static int ratio_score(int64_t num, int64_t size, int64_t clock, int64_t last, double *out) {
    if (last == NEVER) {
        *out = size > 0 ? 0.0 : INFINITY;
        return 0;
    }
    int64_t stale = clock - last;
    if (size <= 0 || stale <= 0) { /* denominator <= 0 (never negative here) */
        *out = INFINITY;
        return 0;
    }
    return true_divide(num, (unsigned __int128)size * (unsigned __int128)stale, out);
}

static int cost_stale(Core *c, int32_t s, double *out) {
    Arrays *a = &c->a;
    int64_t num = a->compute[s] + a->fwd_sum[s] + a->rev_sum[s];
    if (a->last_access[s] == NEVER) { *out = 0.0; return 0; }
    int64_t stale = c->s.clock - a->last_access[s];
    if (stale <= 0) { *out = INFINITY; return 0; }
    return true_divide(num, (unsigned __int128)stale, out);
}

static int score(Core *c, int32_t s, double *out) {
    Arrays *a = &c->a;
    int64_t size = c->size[s];
    switch (c->policy) {
    case P_DTR:
        return ratio_score(a->compute[s] + a->fwd_sum[s] + a->rev_sum[s], size, c->s.clock,
                           a->last_access[s], out);
    case P_DTRLOCAL:
        return ratio_score(a->compute[s], size, c->s.clock, a->last_access[s], out);
    case P_MSPS:
        if (size <= 0) { *out = INFINITY; return 0; }
        return true_divide(a->compute[s] + a->rev_sum[s], (unsigned __int128)size, out);
    case P_LRU:
        *out = a->last_access[s] == NEVER ? -INFINITY : (double)a->last_access[s];
        return 0;
    case P_LARGEST:
        *out = size > 0 ? 1.0 / (double)size : INFINITY;
        return 0;
    case P_NBHD: {
        double h;
        if (ratio_score(a->compute[s] + a->fwd_sum[s] + a->rev_sum[s], size, c->s.clock,
                        a->last_access[s], &h) < 0)
            return -1;
        if (isinf(h) && h > 0) { *out = INFINITY; return 0; } /* denominator not > 0 */
        *out = h * (1 + c->nbhd_b * (double)e_star_size(c, s));
        return 0;
    }
    case P_HESTAR:
        *out = (double)e_star_size(c, s);
        return 0;
    case P_COSTSTALE:
        return cost_stale(c, s, out);
    }
    *out = INFINITY;
    return 0;
}

static int exceeds(Core *c, int64_t value);

/* TwoPhase: candidates covering the shortfall (each test a budget comparison), else the k
   largest; the lowest c(e*)/staleness wins, ties to the larger size, then the smaller id. */
static int choose_twophase(Core *c, int64_t request, int32_t *victim, double *best,
                           int32_t *runner, double *runner_score) {
    Arrays *a = &c->a;
    int64_t needed = c->s.memory + request;
    c->cover.len = 0;
    for (int32_t s = c->s.pool_head; s >= 0; s = a->pool_next[s]) {
        if (!exceeds(c, needed - c->size[s])) {
            if (vec_reserve(&c->cover, c->cover.len + 1) < 0) return -1;
            c->cover.items[c->cover.len++] = s;
        }
    }
    if (c->cover.len == 0) { /* the k largest, by (-size, id) */
        int32_t k = c->twophase_k;
        for (int32_t s = c->s.pool_head; s >= 0; s = a->pool_next[s]) {
            if (vec_reserve(&c->cover, c->cover.len + 1) < 0) return -1;
            Py_ssize_t j = c->cover.len++;
            while (j > 0) { /* insertion keeps the list sorted by (-size, id) */
                int32_t q = c->cover.items[j - 1];
                if (c->size[q] > c->size[s] || (c->size[q] == c->size[s] && q < s)) break;
                c->cover.items[j] = q;
                j--;
            }
            c->cover.items[j] = s;
            if (c->cover.len > k) c->cover.len = k;
        }
    }
    c->s.heuristic_evals += c->cover.len;
    *victim = -1;
    *runner = -1;
    double b1 = INFINITY, b2 = INFINITY;
    for (Py_ssize_t i = 0; i < c->cover.len; i++) {
        int32_t s = c->cover.items[i];
        double x;
        if (cost_stale(c, s, &x) < 0) return -1;
        /* (cost, -size, id) lexicographic */
        int better1 = *victim < 0 || x < b1 ||
                      (x == b1 && (c->size[s] > c->size[*victim] ||
                                   (c->size[s] == c->size[*victim] && s < *victim)));
        if (better1) {
            *runner = *victim;
            b2 = b1;
            *victim = s;
            b1 = x;
        } else if (*runner < 0 || x < b2 ||
                   (x == b2 && (c->size[s] > c->size[*runner] ||
                                (c->size[s] == c->size[*runner] && s < *runner)))) {
            *runner = s;
            b2 = x;
        }
    }
    *best = b1;
    *runner_score = b2;
    return 0;
}

/* simrd's scan: the LAST candidate whose score is <= the best so far; stop at a score of 0.
   The runner-up (for the event log) is the candidate the same rule picks without the victim. */
static int choose(Core *c, int64_t request, int32_t *victim, double *best, int32_t *runner,
                  double *runner_score) {
    if (c->policy == P_TWOPHASE)
        return choose_twophase(c, request, victim, best, runner, runner_score);
    Arrays *a = &c->a;
    double b1 = INFINITY, b2 = INFINITY;
    int32_t v1 = -1, v2 = -1;
    int64_t evaluated = 0;
    for (int32_t s = c->s.pool_head; s >= 0; s = a->pool_next[s]) {
        double x;
        evaluated++;
        if (score(c, s, &x) < 0) return -1;
        if (x <= b1) {
            v2 = v1;
            b2 = b1;
            v1 = s;
            b1 = x;
        } else if (x <= b2) {
            v2 = s;
            b2 = x;
        }
        if (x == 0) break;
    }
    c->s.heuristic_evals += evaluated;
    *victim = v1;
    *best = b1;
    *runner = v2;
    *runner_score = b2;
    return 0;
}

/* ---- snapshots ---------------------------------------------------------------------------- */
/* A state's worth of memory for a snapshot. Walks take and release snapshots all the time,
   and a freshly allocated block of megabytes is mapped anew and faulted in page by page
   (5% of an InceptionV4 walk went to page faults): released ones are kept for reuse. */
static char *arena_take(Core *c) {
    if (c->n_spare > 0) return c->spare[--c->n_spare];
    return (char *)PyMem_Malloc(c->arena_bytes);
}

static void arena_give(Core *c, char *arena) {
    if (!arena) return;
    if (c->n_spare < (int)(sizeof c->spare / sizeof c->spare[0]))
        c->spare[c->n_spare++] = arena;
    else
        PyMem_Free(arena);
}

/* The live state moves to `base` (a copy of it): the arrays inside follow. */
static void arena_rebase(Core *c, char *base) {
    ptrdiff_t d = base - c->arena;
    Arrays *a = &c->a;
#define SHIFT(f) (a->f = (__typeof__(a->f))((char *)a->f + d))
    SHIFT(defined); SHIFT(material); SHIFT(pinned); SHIFT(in_pool);
    SHIFT(ref_int); SHIFT(ref_ext); SHIFT(last_op); SHIFT(st_len);
    SHIFT(ch_len); SHIFT(pa_len); SHIFT(pool_prev); SHIFT(pool_next);
    SHIFT(last_access); SHIFT(compute); SHIFT(fwd_sum); SHIFT(rev_sum);
    SHIFT(fwd_int); SHIFT(fwd_fr); SHIFT(rev_int); SHIFT(rev_fr);
#undef SHIFT
    c->arena = base;
}

static int push_snapshot(Core *c, int64_t value, int lazy) {
    if (c->n_snaps == c->max_snaps) { /* drop the oldest: it would save the least replay */
        Snapshot *old = &c->snaps[0];
        arena_give(c, old->arena);
        PyMem_Free(old->frames);
        PyMem_Free(old->und);
        PyMem_Free(old->dirty);
        PyMem_Free(old->dirty_old);
        memmove(c->snaps, c->snaps + 1, sizeof(Snapshot) * (c->n_snaps - 1));
        c->n_snaps--;
        c->snaps_dropped++;
    }
    if (c->n_snaps == c->snaps_cap) {
        Py_ssize_t cap = c->snaps_cap ? c->snaps_cap * 2 : 16;
        Snapshot *grown = (Snapshot *)PyMem_Realloc(c->snaps, sizeof(Snapshot) * cap);
        if (!grown) { PyErr_NoMemory(); return -1; }
        c->snaps = grown;
        c->snaps_cap = cap;
    }
    Snapshot *snap = &c->snaps[c->n_snaps];
    snap->value = value;
    snap->lazy = lazy;
    if (lazy) {
        snap->arena = NULL;
        snap->frames = NULL;
        snap->und = NULL;
        snap->dirty = NULL;
        snap->dirty_old = NULL;
        snap->n_dirty = 0;
        c->n_snaps++;
        return 0;
    }
    snap->s = c->s;
    snap->arena = arena_take(c);
    snap->frames = (Frame *)PyMem_Malloc(sizeof(Frame) * (c->s.fs_top + 1));
    snap->und = (int32_t *)PyMem_Malloc(sizeof(int32_t) * (c->s.und_top + 1));
    snap->n_dirty = c->tracking ? c->dirty_list.len : 0;
    snap->dirty = (int32_t *)PyMem_Malloc(sizeof(int32_t) * (snap->n_dirty + 1));
    snap->dirty_old = (uint64_t *)PyMem_Malloc(sizeof(uint64_t) * (snap->n_dirty + 1));
    if (!snap->arena || !snap->frames || !snap->und || !snap->dirty || !snap->dirty_old) {
        arena_give(c, snap->arena);
        PyMem_Free(snap->frames);
        PyMem_Free(snap->und);
        PyMem_Free(snap->dirty);
        PyMem_Free(snap->dirty_old);
        PyErr_NoMemory();
        return -1;
    }
    if (snap->n_dirty) {
        memcpy(snap->dirty, c->dirty_list.items, sizeof(int32_t) * snap->n_dirty);
        memcpy(snap->dirty_old, c->dirty_old, sizeof(uint64_t) * snap->n_dirty);
    }
    memcpy(snap->arena, c->arena, c->arena_bytes);
    memcpy(snap->frames, c->frames, sizeof(Frame) * c->s.fs_top);
    memcpy(snap->und, c->und.items, sizeof(int32_t) * c->s.und_top);
    c->n_snaps++;
    c->snaps_taken++;
    return 0;
}

static int take_snapshot(Core *c, int64_t value) { return push_snapshot(c, value, 0); }

static int reserve_frames(Core *c, Py_ssize_t need) {
    if (need <= c->frames_cap) return 0;
    Py_ssize_t cap = c->frames_cap ? c->frames_cap : 64;
    while (cap < need) cap *= 2;
    Frame *grown = (Frame *)PyMem_Realloc(c->frames, sizeof(Frame) * cap);
    if (!grown) { PyErr_NoMemory(); return -1; }
    c->frames = grown;
    c->frames_cap = cap;
    return 0;
}

/* Restore the newest snapshot and make its value the budget (it then fits). */
static int restore_snapshot(Core *c) {
    Snapshot *snap = &c->snaps[c->n_snaps - 1];
    if (snap->lazy) { /* the live state is that point already */
        c->s.budget = snap->value;
        c->n_snaps--;
        return 0;
    }
    if (reserve_frames(c, snap->s.fs_top + 1) < 0 || vec_reserve(&c->und, snap->s.und_top + 1) < 0)
        return -1;
    c->s = snap->s;
    /* the snapshot's copy becomes the live state (it is not needed after this), and the
       live state's memory the next snapshot's */
    char *live = c->arena;
    arena_rebase(c, snap->arena);
    arena_give(c, live);
    memcpy(c->frames, snap->frames, sizeof(Frame) * snap->s.fs_top);
    memcpy(c->und.items, snap->und, sizeof(int32_t) * snap->s.und_top);
    c->und.len = snap->s.und_top;
    c->s.budget = snap->value;
    if (c->tracking) { /* the open segment's changed words are the snapshot's */
        for (Py_ssize_t i = 0; i < c->dirty_list.len; i++) {
            int32_t w = c->dirty_list.items[i];
            c->dirty[w >> 6] &= ~((uint64_t)1 << (w & 63));
        }
        c->dirty_list.len = 0;
        for (Py_ssize_t i = 0; i < snap->n_dirty; i++) {
            int32_t w = snap->dirty[i];
            mark_dirty_word(c, w, snap->dirty_old[i]);
        }
        if (c->dirty_failed) return -1;
    }
    PyMem_Free(snap->frames);
    PyMem_Free(snap->und);
    PyMem_Free(snap->dirty);
    PyMem_Free(snap->dirty_old);
    c->n_snaps--;
    return 0;
}

/* ---- trajectories (walks) ------------------------------------------------------------------
   Prefix sharing starts a walk's next run where it first differs from the previous one; most
   such runs then fall back into the previous run's exact state soon after (the other
   decision is made up for at a later budget check), often within the same cascade of
   rebuilds. From there the run would replay the previous run's rest, with one possible
   exception: a comparison whose outcome the new budget flips. So every run in a walk keeps
   its trajectory, a list of points: the boundaries before each COMPUTE step and the
   completions of computations inside a materialization. At each point it keeps the state's
   hash, and for the segment up to the next point what the run's record needs (counter
   increments, maxima, the nearest compared values on each side of the budget) and the arena
   words the segment changed. A resumed run that reaches a point whose state equals a point of
   the trajectory (same step and clock, same hash), where no later comparison of the
   trajectory has a value the new budget flips (all its exceeding values are >= the new
   budget, so exactly those equal to it), merges: its record is its own up to that point plus
   the trajectory's segments from there, and its trajectory is its own points followed by the
   previous one's from there. Where such a comparison lies ahead, a run at a boundary skips
   to the last boundary before it, applying the segments' changed words (a jump): up to
   there it is the previous run. After a merge the live state stays at the point: when the
   next budget's first difference lies in the taken-over part, its run restarts from there
   (a "lazy" snapshot, nothing copied). */
enum { ST_MERGED = 6, ST_JUMPED = 7 };

static void full_hash(Core *c, uint64_t *h1, uint64_t *h2) {
    uint64_t keep1 = c->s.h1, keep2 = c->s.h2;
    Arrays *a = &c->a;
    Py_ssize_t n = c->n;
    c->s.h1 = c->s.h2 = 0;
    uint8_t *u8s[4] = {a->defined, a->material, a->pinned, a->in_pool};
    int32_t *i32s[8] = {a->ref_int, a->ref_ext, a->last_op, a->st_len,
                        a->ch_len, a->pa_len, a->pool_prev, a->pool_next};
    int64_t *i64s[4] = {a->last_access, a->compute, a->fwd_sum, a->rev_sum};
    uint64_t *sets[4] = {a->fwd_int, a->fwd_fr, a->rev_int, a->rev_fr};
    for (Py_ssize_t i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++) hash_term(c, &u8s[k][i], (uint64_t)u8s[k][i]);
        for (int k = 0; k < 8; k++) hash_term(c, &i32s[k][i], (uint64_t)i32s[k][i]);
        for (int k = 0; k < 4; k++) hash_term(c, &i64s[k][i], (uint64_t)i64s[k][i]);
    }
    for (int k = 0; k < 4; k++)
        for (Py_ssize_t i = 0; i < n * c->words; i++)
            if (sets[k][i]) hash_term(c, &sets[k][i], sets[k][i]);
    uint64_t got1 = c->s.h1, got2 = c->s.h2;
    c->s.h1 = keep1;
    c->s.h2 = keep2;
    *h1 = got1; /* after the restore: the caller may pass &c->s.h1 */
    *h2 = got2;
}

static inline void chain(uint64_t *x1, uint64_t *x2, uint64_t v, uint64_t i) {
    *x1 = mix64(*x1 ^ (v + 0x9e3779b97f4a7c15ULL * (i + 1)));
    *x2 = mix64(*x2 + (v ^ (0xd6e8feb86659fd93ULL * (i + 1))));
}

/* The whole state's hash: the arena's, the scalars that decide what happens next, and
   mid-cascade the stack of materializations in progress. */
static void point_hash(Core *c, uint64_t *o1, uint64_t *o2) {
    const Scalars *s = &c->s;
    int64_t v[14] = {s->clock,      s->memory,     s->pool_bytes, s->model_compute, s->remat_compute,
                     s->operators,  s->pool_head,  s->pool_tail,  s->pool_count,    s->step,
                     s->mat_active, s->fs_top,     s->und_top,    s->depth};
    uint64_t x1 = s->h1, x2 = s->h2;
    for (int i = 0; i < 14; i++) chain(&x1, &x2, (uint64_t)v[i], (uint64_t)i);
    for (int32_t i = 0; i < s->fs_top; i++) {
        const Frame *f = &c->frames[i];
        uint64_t packed = (uint64_t)(uint32_t)f->t | ((uint64_t)(uint8_t)f->remat << 32) |
                          ((uint64_t)(uint8_t)f->phase << 40) |
                          ((uint64_t)(uint8_t)f->returning << 48);
        chain(&x1, &x2, packed, 20);
        chain(&x1, &x2, (uint64_t)(uint32_t)f->i | ((uint64_t)(uint32_t)f->und_len << 32), 21);
        chain(&x1, &x2, (uint64_t)(uint32_t)f->und_off, 22);
    }
    for (int32_t i = 0; i < s->und_top; i++) chain(&x1, &x2, (uint64_t)(uint32_t)c->und.items[i], 23);
    *o1 = x1;
    *o2 = x2;
}

static void open_segment(Core *c) {
    Scalars *s = &c->s;
    s->seg_open = 1;
    s->seg_evictions = s->evictions;
    s->seg_policy_evictions = s->policy_evictions;
    s->seg_remats = s->rematerializations;
    s->seg_evals = s->heuristic_evals;
    s->seg_max_memory = INT64_MIN;
    s->seg_max_pinned = INT64_MIN;
    s->seg_depth_at_max_pinned = 0;
    s->seg_max_depth = 0;
    s->seg_fits_max = INT64_MIN;
    s->seg_exceeds_min = INT64_MAX;
}

static int log_reserve(Core *c, Py_ssize_t need) {
    if (need <= c->log_cap) return 0;
    Py_ssize_t cap = c->log_cap ? c->log_cap : 65536;
    while (cap < need) cap *= 2;
    uint8_t *grown = (uint8_t *)PyMem_Realloc(c->log, cap);
    if (!grown) { PyErr_NoMemory(); return -1; }
    c->log = grown;
    c->log_cap = cap;
    return 0;
}

/* A segment's changed words, encoded: a jump from the segment's start applies
   words[i] ^= x, x = old ^ new. Per word, a varint of (the zigzagged difference from the
   previous word's index) << 7 | a code: 64 + b when x is the single bit b (an eviction flips
   one tensor's bit in the neighbourhood rows of the tensors around it: 40% of the words of
   InceptionV4's thrashing runs), else (x's first nonzero byte) << 3 | (its length - 1),
   followed by those bytes of x. About 6 bytes a word instead of 12 (index and value): the
   rows a change touches are far apart in the arena. Words back at their old value are left
   out. At most ENCODED_MAX bytes a word. */
#define ENCODED_MAX 15
static Py_ssize_t encode_segment(uint8_t *out, const int32_t *idx, const uint64_t *old,
                                 const uint64_t *words, Py_ssize_t n, int64_t *encoded) {
    uint8_t *o = out;
    int64_t prev = 0, count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t x = old[i] ^ words[idx[i]];
        if (!x) continue;
        int lo = __builtin_ctzll(x) >> 3, hi = (63 - __builtin_clzll(x)) >> 3;
        int64_t d = (int64_t)idx[i] - prev;
        prev = idx[i];
        int single = !(x & (x - 1));
        uint64_t code = single ? 64 + (uint64_t)__builtin_ctzll(x) : (uint64_t)(lo << 3 | (hi - lo));
        uint64_t v = ((((uint64_t)d << 1) ^ (uint64_t)(d >> 63)) << 7) | code;
        while (v >= 0x80) {
            *o++ = (uint8_t)(v | 0x80);
            v >>= 7;
        }
        *o++ = (uint8_t)v;
        if (!single) {
            x >>= 8 * lo;
            for (int b = lo; b <= hi; b++, x >>= 8) *o++ = (uint8_t)x;
        }
        count++;
    }
    *encoded += count;
    return o - out;
}

/* Apply a segment's encoded words to the arena (in the state at the segment's start). */
static void apply_segment(uint64_t *words, const uint8_t *in, Py_ssize_t len) {
    const uint8_t *end = in + len;
    int64_t at = 0;
    while (in < end) {
        uint64_t v = 0;
        int shift = 0;
        for (;;) {
            uint8_t b = *in++;
            v |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
            shift += 7;
        }
        uint64_t z = v >> 7;
        at += (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        if (v & 64) { /* a single bit */
            words[at] ^= (uint64_t)1 << (v & 63);
            continue;
        }
        int lo = (int)(v >> 3) & 7, n = (int)(v & 7) + 1;
        uint64_t x = 0;
        for (int b = 0; b < n; b++) x |= (uint64_t)in[b] << (8 * b);
        in += n;
        words[at] ^= x << (8 * lo);
    }
}

/* Compaction is in place, in address order (a copy would hold the log twice at the peak:
   0.5-0.8 GB more on a thrashing band): each point's range slides down, never over a range
   not moved yet. A point copied from another (a jump's) shares its range. */
typedef struct {
    Py_ssize_t off, len, i;
} Range;

/* What the points' frame stacks and their und lists take: they count in the log's limit. */
static inline Py_ssize_t frame_bytes(const Core *c) {
    return (Py_ssize_t)sizeof(Frame) * c->fr_len + (Py_ssize_t)sizeof(int32_t) * c->ul_len;
}

static int compare_ranges(const void *a, const void *b) {
    Py_ssize_t x = ((const Range *)a)->off, y = ((const Range *)b)->off;
    return (x > y) - (x < y);
}

/* Slide the ranges (in elements of elem bytes) down to the start of base; each range's off
   becomes its new offset. Returns the elements kept. */
static Py_ssize_t slide_down(char *base, size_t elem, Range *ranges, Py_ssize_t n) {
    qsort(ranges, n, sizeof(Range), compare_ranges);
    Py_ssize_t at = 0, from = -1, to = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Range *r = &ranges[k];
        if (r->off == from) {
            r->off = to;
            continue;
        }
        from = r->off;
        to = at;
        memmove(base + elem * at, base + elem * r->off, elem * r->len);
        r->off = at;
        at += r->len;
    }
    return at;
}

/* The log is append-only: a run rewrites the segments it executes, and what the previous run
   had logged for them becomes garbage. Compact when the garbage outweighs the live part. */
static void compact_frames(Core *c) {
    Py_ssize_t frames = 0, und = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++) {
        if (c->pts[i].bare) continue; /* nothing kept */
        frames += c->pts[i].fs_top;
        und += c->pts[i].und_top;
    }
    if (c->fr_len < 2 * frames + 4096 && c->ul_len < 2 * und + 4096) return;
    Range *ranges = (Range *)PyMem_Malloc(sizeof(Range) * (c->n_pts + 1));
    if (!ranges) return; /* keep them as they are: compaction is only an economy */
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++)
        if (!c->pts[i].bare && c->pts[i].fs_top > 0)
            ranges[n++] = (Range){c->pts[i].fr_off, c->pts[i].fs_top, i};
    c->fr_len = slide_down((char *)c->fr_log, sizeof(Frame), ranges, n);
    for (Py_ssize_t k = 0; k < n; k++) c->pts[ranges[k].i].fr_off = ranges[k].off;
    n = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++)
        if (!c->pts[i].bare && c->pts[i].und_top > 0)
            ranges[n++] = (Range){c->pts[i].und_off, c->pts[i].und_top, i};
    c->ul_len = slide_down((char *)c->ul_log, sizeof(int32_t), ranges, n);
    for (Py_ssize_t k = 0; k < n; k++) c->pts[ranges[k].i].und_off = ranges[k].off;
    PyMem_Free(ranges);
    c->frame_compactions++;
}

static void compact_log(Core *c) {
    compact_frames(c);
    Py_ssize_t live = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++) live += c->pts[i].log_len;
    c->log_live = live;
    /* near the limit too, when the garbage takes half the room left: it must not push the
       next run past the limit (see log_limit). Not at every run: moving a log of hundreds
       of MB costs more than a merged run (milliseconds). */
    int near_limit =
        c->log_limit > 0 && 2 * (c->log_len - live) > c->log_limit - live - frame_bytes(c);
    if (c->log_len < 2 * live + (1 << 16) && !near_limit) return;
    Range *ranges = (Range *)PyMem_Malloc(sizeof(Range) * (c->n_pts + 1));
    if (!ranges) return;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++)
        if (c->pts[i].log_len > 0) ranges[n++] = (Range){c->pts[i].log_off, c->pts[i].log_len, i};
    c->log_len = slide_down((char *)c->log, 1, ranges, n);
    for (Py_ssize_t k = 0; k < n; k++) c->pts[ranges[k].i].log_off = ranges[k].off;
    PyMem_Free(ranges);
    c->log_compactions++;
}

/* Whether n more bytes would take the log past a limit (see log_limit). Within a run, once
   true it stays true: the log and the run's bytes only grow until the run ends. */
static inline int past_log_limit(Core *c, Py_ssize_t n) {
    return (c->log_limit > 0 && c->log_len + n + frame_bytes(c) > c->log_limit) ||
           (c->resuming && c->run_log_limit > 0 && c->run_bytes > c->run_log_limit);
}

/* The open segment ends: its sums and changed words go to the run's last point. */
static void close_segment(Core *c) {
    Scalars *s = &c->s;
    Point *g = &c->own[c->n_own - 1];
    g->evictions = s->evictions - s->seg_evictions;
    g->policy_evictions = s->policy_evictions - s->seg_policy_evictions;
    g->remats = s->rematerializations - s->seg_remats;
    g->evals = s->heuristic_evals - s->seg_evals;
    g->max_memory = s->seg_max_memory;
    g->max_pinned = s->seg_max_pinned;
    g->depth_at_max_pinned = s->seg_depth_at_max_pinned;
    g->max_depth = s->seg_max_depth;
    g->fits_max = s->seg_fits_max;
    g->exceeds_min = s->seg_exceeds_min;
    s->seg_open = 0;
    const uint64_t *words = (const uint64_t *)c->arena;
    Py_ssize_t n = c->dirty_list.len, bytes = 0;
    g->unlogged = 0;
    if (log_reserve(c, c->log_len + ENCODED_MAX * n) < 0) {
        c->dirty_failed = 1;
    } else {
        bytes = encode_segment(c->log + c->log_len, c->dirty_list.items, c->dirty_old, words, n,
                               &c->words_logged);
        c->run_bytes += bytes;
        if (past_log_limit(c, bytes)) {
            g->unlogged = 1; /* see log_limit */
            c->unlogged_segments++;
            bytes = 0;
        }
    }
    g->log_off = c->log_len;
    g->log_len = bytes;
    c->log_len += bytes;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t w = c->dirty_list.items[i];
        c->dirty[w >> 6] &= ~((uint64_t)1 << (w & 63));
    }
    c->dirty_list.len = 0;
}

static int own_reserve(Core *c, Py_ssize_t need) {
    if (need <= c->own_cap) return 0;
    Py_ssize_t cap = c->own_cap ? c->own_cap * 2 : 1024;
    while (cap < need) cap *= 2;
    Point *grown = (Point *)PyMem_Realloc(c->own, sizeof(Point) * cap);
    if (!grown) { PyErr_NoMemory(); return -1; }
    c->own = grown;
    c->own_cap = cap;
    return 0;
}

/* Append a point to the run's own list (a copy of one of the trajectory's, or the live state
   as it is) and open its segment. */
static int append_point(Core *c, const Point *copy, int boundary, uint64_t h1, uint64_t h2) {
    if (own_reserve(c, c->n_own + 1) < 0) return ST_ERROR;
    Point *p = &c->own[c->n_own++];
    if (copy) {
        *p = *copy;
    } else {
        const Scalars *s = &c->s;
        memset(p, 0, sizeof *p);
        p->step = s->step;
        p->boundary = boundary;
        p->clock = s->clock;
        p->h1 = h1;
        p->h2 = h2;
        p->ah1 = s->h1;
        p->ah2 = s->h2;
        p->memory = s->memory;
        p->pool_bytes = s->pool_bytes;
        p->model_compute = s->model_compute;
        p->remat_compute = s->remat_compute;
        p->operators = s->operators;
        p->pool_head = s->pool_head;
        p->pool_tail = s->pool_tail;
        p->pool_count = s->pool_count;
        p->depth = s->depth;
        p->mat_active = s->mat_active;
        p->fs_top = s->fs_top;
        p->und_top = s->und_top;
        /* past the log's limit no jump can reach this point (its segment will miss its words
           too): its frame stack is not kept, 0.5-1 GB a trajectory on the TreeLSTM */
        p->bare = past_log_limit(c, 0);
        if (p->bare) {
            p->fr_off = p->und_off = 0;
            open_segment(c);
            c->s.n_points++;
            return 0;
        }
        /* mid-cascade, the frame stack too (a jump to this point restores it) */
        if (s->fs_top > c->fr_cap - c->fr_len) {
            Py_ssize_t cap = c->fr_cap ? c->fr_cap : 4096;
            while (cap < c->fr_len + s->fs_top) cap *= 2;
            Frame *grown = (Frame *)PyMem_Realloc(c->fr_log, sizeof(Frame) * cap);
            if (!grown) { PyErr_NoMemory(); return ST_ERROR; }
            c->fr_log = grown;
            c->fr_cap = cap;
        }
        if (s->und_top > c->ul_cap - c->ul_len) {
            Py_ssize_t cap = c->ul_cap ? c->ul_cap : 4096;
            while (cap < c->ul_len + s->und_top) cap *= 2;
            int32_t *grown = (int32_t *)PyMem_Realloc(c->ul_log, sizeof(int32_t) * cap);
            if (!grown) { PyErr_NoMemory(); return ST_ERROR; }
            c->ul_log = grown;
            c->ul_cap = cap;
        }
        p->fr_off = c->fr_len;
        p->und_off = c->ul_len;
        memcpy(c->fr_log + c->fr_len, c->frames, sizeof(Frame) * s->fs_top);
        memcpy(c->ul_log + c->ul_len, c->und.items, sizeof(int32_t) * s->und_top);
        c->fr_len += s->fs_top;
        c->ul_len += s->und_top;
        open_segment(c);
    }
    c->s.n_points++;
    return 0;
}

/* Add a trajectory segment's sums to a run's record so far. */
static void take_segment(Scalars *o, const Point *g) {
    o->evictions += g->evictions;
    o->policy_evictions += g->policy_evictions;
    o->rematerializations += g->remats;
    o->heuristic_evals += g->evals;
    if (g->max_memory > o->max_memory) o->max_memory = g->max_memory;
    if (g->max_pinned > o->peak_pinned) { /* strictly: the first to reach it */
        o->peak_pinned = g->max_pinned;
        o->depth_at_peak_pinned = g->depth_at_max_pinned;
    }
    if (g->max_depth > o->max_depth) o->max_depth = g->max_depth;
    if (g->fits_max > o->fits_max) o->fits_max = g->fits_max;
    if (g->exceeds_min < o->exceeds_min) o->exceeds_min = g->exceeds_min;
}

/* The live state becomes a point's (its arena words already applied). */
static int point_state(Core *c, const Point *g) {
    Scalars *s = &c->s;
    if (reserve_frames(c, g->fs_top + 1) < 0 || vec_reserve(&c->und, g->und_top + 1) < 0)
        return -1;
    memcpy(c->frames, c->fr_log + g->fr_off, sizeof(Frame) * g->fs_top);
    memcpy(c->und.items, c->ul_log + g->und_off, sizeof(int32_t) * g->und_top);
    c->und.len = g->und_top;
    s->fs_top = g->fs_top;
    s->und_top = g->und_top;
    s->mat_active = g->mat_active;
    s->depth = g->depth;
    s->clock = g->clock;
    s->memory = g->memory;
    s->pool_bytes = g->pool_bytes;
    s->model_compute = g->model_compute;
    s->remat_compute = g->remat_compute;
    s->operators = g->operators;
    s->pool_head = g->pool_head;
    s->pool_tail = g->pool_tail;
    s->pool_count = g->pool_count;
    s->h1 = g->ah1;
    s->h2 = g->ah2;
    s->step = g->step;
    return 0;
}

static int push_snapshot(Core *c, int64_t value, int lazy);

/* From trajectory point m (in its state) to point g: the segments' changed words are applied
   to the arena, their sums added to the record, the points copied into the run's own list,
   and the state becomes g's. Where a segment holds an exceeding value below every one this
   run met so far, the next runs may need to resume there: the state at the segment's start
   is copied first (the replay would have snapshotted inside the segment). */
static int jump(Core *c, Py_ssize_t m, Py_ssize_t g) {
    Scalars *s = &c->s;
    uint64_t *words = (uint64_t *)c->arena;
    for (Py_ssize_t k = m; k < g; k++) {
        const Point *p = &c->pts[k];
        if (p->exceeds_min < s->exceeds_min) {
            if (point_state(c, p) < 0) return ST_ERROR;
            if (push_snapshot(c, p->exceeds_min, 0) < 0) return ST_ERROR;
        }
        take_segment(s, p);
        if (append_point(c, p, 0, 0, 0) < 0) return ST_ERROR;
        apply_segment(words, c->log + p->log_off, p->log_len);
    }
    if (point_state(c, &c->pts[g]) < 0) return ST_ERROR;
    c->jumps++;
    c->steps_jumped += c->pts[g].step - c->pts[m].step;
    return ST_JUMPED;
}

/* A jump applies the changed words of the segments it skips: all of them must have been kept
   (past the log's limit they were not; the run then replays those segments). */
static int jump_allowed(Core *c, Py_ssize_t m, Py_ssize_t g) {
    if (c->pts[g].bare) {
        c->jumps_refused++;
        return 0;
    }
    for (Py_ssize_t k = m; k < g; k++)
        if (c->pts[k].unlogged) {
            c->jumps_refused++;
            return 0;
        }
    return 1;
}

/* The trajectory's point equal to the live state, searched from the run's position on. */
static Py_ssize_t find_point(Core *c, uint64_t h1, uint64_t h2) {
    int32_t step = c->s.step;
    int64_t clock = c->s.clock;
    Py_ssize_t lo = c->search_from, hi = c->n_pts;
    while (lo < hi) { /* points are in (step, clock) order */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        const Point *p = &c->pts[mid];
        if (p->step < step || (p->step == step && p->clock < clock)) lo = mid + 1;
        else hi = mid;
    }
    for (Py_ssize_t i = lo; i < c->n_pts && c->pts[i].step == step && c->pts[i].clock == clock; i++)
        if (c->pts[i].h1 == h1 && c->pts[i].h2 == h2) return i;
    return -1;
}

/* At a point: close the segment, merge or jump if the state is the trajectory's, else record
   the point and open its segment. */
static int at_point(Core *c, int boundary) {
    if (c->s.seg_open) close_segment(c);
    if (c->dirty_failed) return ST_ERROR;
    uint64_t h1, h2;
    if (c->verify_hash) {
        full_hash(c, &h1, &h2);
        if (h1 != c->s.h1 || h2 != c->s.h2) {
            snprintf(c->error, sizeof c->error,
                     "state hash out of date at step %d (a write bypassed the hash)", c->s.step);
            return ST_ERROR;
        }
    }
    point_hash(c, &h1, &h2);
    if (c->resuming && c->merging && c->traj_valid) {
        c->points_resumed++;
        Py_ssize_t m = find_point(c, h1, h2);
        if (m >= 0) {
            if (c->sufmin[m] > c->s.budget) {
                c->merge_at = m;
                return ST_MERGED;
            }
            /* The same state, but a later segment compares exactly the budget (and will
               decide otherwise there): until that segment this run is the trajectory, so
               go to its start. */
            c->merges_blocked++;
            Py_ssize_t g = c->nextflip[m];
            if (g > m && jump_allowed(c, m, g)) return jump(c, m, g);
        }
    }
    return append_point(c, NULL, boundary, h1, h2);
}

static int pts_reserve(Core *c, Py_ssize_t need) {
    if (need <= c->pts_cap) return 0;
    Py_ssize_t cap = c->pts_cap ? c->pts_cap * 2 : 1024;
    while (cap < need) cap *= 2;
    Point *grown = (Point *)PyMem_Realloc(c->pts, sizeof(Point) * cap);
    if (!grown) { PyErr_NoMemory(); return -1; }
    c->pts = grown;
    c->pts_cap = cap;
    return 0;
}

/* The run's trajectory: the shared prefix, its own points, and (merged) the taken-over rest. */
static int splice(Core *c, Py_ssize_t tail_from) {
    Py_ssize_t tail = tail_from >= 0 ? c->n_pts - tail_from : 0;
    Py_ssize_t at = c->own_from + c->n_own;
    if (pts_reserve(c, at + tail + 1) < 0) return -1;
    if (tail) memmove(c->pts + at, c->pts + tail_from, sizeof(Point) * tail);
    memcpy(c->pts + c->own_from, c->own, sizeof(Point) * c->n_own);
    c->n_pts = at + tail;
    c->n_own = 0;
    compact_log(c);
    return 0;
}

/* For a resumed run over the trajectory: from each point, the min exceeding value ahead and
   the first segment comparing the budget. */
static int suffix_minima(Core *c) {
    if (c->n_pts + 1 > c->aux_cap) {
        Py_ssize_t cap = 2 * (c->n_pts + 1);
        PyMem_Free(c->sufmin);
        PyMem_Free(c->nextflip);
        c->sufmin = (int64_t *)PyMem_Malloc(sizeof(int64_t) * cap);
        c->nextflip = (Py_ssize_t *)PyMem_Malloc(sizeof(Py_ssize_t) * cap);
        c->aux_cap = cap;
        if (!c->sufmin || !c->nextflip) {
            c->aux_cap = 0;
            PyErr_NoMemory();
            return -1;
        }
    }
    int64_t m = INT64_MAX;
    Py_ssize_t flip = -1;
    for (Py_ssize_t i = c->n_pts - 1; i >= 0; i--) {
        const Point *p = &c->pts[i];
        if (p->exceeds_min < m) m = p->exceeds_min;
        if (p->exceeds_min == c->s.budget) flip = i;
        c->sufmin[i] = m;
        c->nextflip[i] = flip;
    }
    return 0;
}

/* A run that ended on its own: its trajectory is complete. */
static int end_trajectory(Core *c, int status) {
    Scalars *s = &c->s;
    if (status != ST_OK && status != ST_OOM && status != ST_THRASHED) {
        c->traj_valid = 0;
        return 0;
    }
    if (s->seg_open) close_segment(c);
    if (splice(c, -1) < 0) return -1;
    c->traj_status = status;
    c->traj_has_failure = s->has_failure && status == ST_OOM;
    c->traj_f_operator = s->f_operator;
    c->traj_f_request = s->f_request;
    c->traj_f_pinned = s->f_pinned;
    c->traj_f_depth = s->f_depth;
    c->traj_f_value = s->f_over_by + s->budget;
    c->traj_clock = s->clock;
    c->traj_model = s->model_compute;
    c->traj_remat = s->remat_compute;
    c->traj_operators = s->operators;
    c->traj_valid = !c->dirty_failed;
    return 0;
}

/* The run's state is the trajectory's at point merge_at: its record takes the rest over. */
static int merge(Core *c) {
    Scalars *o = &c->out;
    *o = c->s;
    Py_ssize_t m = c->merge_at;
    for (Py_ssize_t j = m; j < c->n_pts; j++) take_segment(o, &c->pts[j]);
    o->clock = c->traj_clock;
    o->model_compute = c->traj_model;
    o->remat_compute = c->traj_remat;
    o->operators = c->traj_operators;
    o->status = c->traj_status;
    o->has_failure = c->traj_has_failure;
    o->f_operator = c->traj_f_operator;
    o->f_request = c->traj_f_request;
    o->f_pinned = c->traj_f_pinned;
    o->f_depth = c->traj_f_depth;
    o->f_over_by = c->traj_f_value - o->budget;
    if (o->status == ST_OOM && o->f_pinned > o->peak_pinned) {
        o->peak_pinned = o->f_pinned;
        o->depth_at_peak_pinned = o->f_depth;
    }
    c->merged = 1;
    c->merges++;
    if (c->s.mat_active) c->mid_merges++;
    c->steps_skipped += c->n_steps - c->s.step;
    /* the trajectory becomes this run's: the live state is its point at own_from + n_own */
    c->s.n_points = c->own_from + c->n_own;
    if (splice(c, m) < 0) return ST_ERROR;
    if (o->exceeds_min < c->s.exceeds_min) {
        /* the next budget first differs in the taken-over part: restart from here */
        if (push_snapshot(c, o->exceeds_min, 1) < 0) return ST_ERROR;
    }
    return o->status;
}

/* ---- the runtime -------------------------------------------------------------------------- */
/* The one place the budget is read: `used + request > budget`, recorded for the interval. */
static int exceeds(Core *c, int64_t value) {
    if (!c->budget_inf && value > c->s.budget) {
        if (value < c->s.exceeds_min) c->s.exceeds_min = value;
        if (value < c->s.seg_exceeds_min) c->s.seg_exceeds_min = value;
        return 1;
    }
    if (value > c->s.fits_max) c->s.fits_max = value;
    if (value > c->s.seg_fits_max) c->s.seg_fits_max = value;
    return 0;
}

static int evict(Core *c, int32_t s, int by_policy, double score_value, int32_t runner,
                 double runner_score) {
    Arrays *a = &c->a;
    if (c->record_events) {
        c->ev.seq++;
        if (ev_push(c, by_policy ? E_EVICT_POLICY : E_EVICT_EAGER, c->ev.seq, c->s.operators,
                    (int32_t)c->s.depth, s, c->size[s], by_policy ? score_value : NAN,
                    c->s.pool_count, c->s.memory - c->s.pool_bytes, runner, runner_score) < 0)
            return -1;
    }
    PUT(c, a->material[s], 0);
    c->s.memory -= c->size[s];
    make_unevictable(c, s);
    const int32_t *ts = c->st_items + c->st_off[s];
    for (int32_t i = 0; i < a->st_len[s]; i++) PUT(c, a->defined[ts[i]], 0);
    c->s.evictions++;
    if (by_policy) c->s.policy_evictions++;
    if (c->regions && absorb_evicted(c, s) < 0) return -1;
    return 0;
}

/* Start materializing tensor t: touch and lock its defined parents, list the others. */
static int enter(Core *c, int32_t t, int remat) {
    Arrays *a = &c->a;
    if (reserve_frames(c, c->s.fs_top + 1) < 0) return -1;
    c->s.depth++;
    if (c->s.depth > c->s.max_depth) c->s.max_depth = c->s.depth;
    if (c->s.depth > c->s.seg_max_depth) c->s.seg_max_depth = c->s.depth;
    if (remat) {
        c->s.rematerializations++;
        if (c->record_events &&
            ev_push(c, E_REMAT, 0, c->s.operators, (int32_t)c->s.depth, c->tensor_storage[t], 0,
                    NAN, 0, 0, -1, NAN) < 0)
            return -1;
    }
    int32_t op = c->tensor_op[t];
    const int32_t *args = c->op_args + c->op_args_off[op];
    int32_t n_args = c->op_args_off[op + 1] - c->op_args_off[op];
    for (int32_t j = 0; j < n_args; j++) PUT(c, a->last_access[c->tensor_storage[args[j]]], c->s.clock);
    for (int32_t j = 0; j < n_args; j++)
        if (a->defined[args[j]]) lock(c, c->tensor_storage[args[j]]);
    if (vec_reserve(&c->und, c->s.und_top + n_args + 1) < 0) return -1;
    int32_t off = c->s.und_top, count = 0;
    for (int32_t j = 0; j < n_args; j++)
        if (!a->defined[args[j]]) c->und.items[off + count++] = args[j];
    c->s.und_top += count;
    Frame *f = &c->frames[c->s.fs_top++];
    f->t = t;
    f->remat = (int8_t)remat;
    f->phase = 0;
    f->returning = 0;
    f->i = 0;
    f->und_off = off;
    f->und_len = count;
    return 0;
}

static int compute_op(Core *c, int32_t t, int remat) {
    Arrays *a = &c->a;
    int32_t op = c->tensor_op[t];
    int32_t first = c->op_first[op], n_out = c->op_nout[op];
    if (vec_reserve(&c->order, n_out + 1) < 0 || vec_reserve(&c->news, n_out + 1) < 0) return -1;
    int32_t *order = c->order.items, *news = c->news.items;
    /* outputs other than t, then t: the order in which new storages join the pool */
    int32_t n_order = 0, n_new = 0;
    for (int32_t u = first; u < first + n_out; u++)
        if (u != t) order[n_order++] = u;
    order[n_order++] = t;
    for (int32_t i = 0; i < n_order; i++)
        if (!a->material[c->tensor_storage[order[i]]]) news[n_new++] = c->tensor_storage[order[i]];
    int64_t cost = c->op_compute[op];
    c->s.clock += cost;
    c->s.memory += c->op_total[op];
    if (c->s.memory > c->s.max_memory) c->s.max_memory = c->s.memory;
    if (c->s.memory > c->s.seg_max_memory) c->s.seg_max_memory = c->s.memory;
    if (remat) c->s.remat_compute += cost;
    else c->s.model_compute += cost;
    /* outputs already defined were computed twice: their copies are dropped */
    for (int32_t i = 0; i < n_order - 1; i++)
        if (a->defined[order[i]]) c->s.memory -= c->tensor_size[order[i]];
    for (int32_t i = 0; i < n_order; i++) {
        PUT(c, a->material[c->tensor_storage[order[i]]], 1);
        PUT(c, a->defined[order[i]], 1);
    }
    for (int32_t i = 0; i < n_new; i++)
        if (a->ref_int[news[i]] == 0) make_evictable(c, news[i]);
    if (c->regions && after_compute(c, news, n_new) < 0) return -1;
    return 0;
}

/* Run the frame stack until it is empty, or to a terminal status. */
static int materialize(Core *c) {
    Arrays *a = &c->a;
    while (c->s.fs_top > 0) {
        Frame *f = &c->frames[c->s.fs_top - 1];
        int32_t op = c->tensor_op[f->t];
        if (f->phase == 0) {
            const int32_t *und = c->und.items + f->und_off;
            if (f->returning) {
                lock(c, c->tensor_storage[und[f->i]]);
                f->i++;
                f->returning = 0;
            }
            int descended = 0;
            while (f->i < f->und_len) {
                int32_t p = und[f->i];
                if (!a->defined[p]) { /* a sibling's rebuild may have defined it meanwhile */
                    f->returning = 1;
                    if (enter(c, p, 1) < 0) return ST_ERROR;
                    descended = 1;
                    break;
                }
                lock(c, c->tensor_storage[p]);
                f->i++;
            }
            if (descended) continue;
            int64_t pinned = c->s.memory - c->s.pool_bytes;
            if (pinned > c->s.peak_pinned) {
                c->s.peak_pinned = pinned;
                c->s.depth_at_peak_pinned = c->s.depth;
            }
            if (pinned > c->s.seg_max_pinned) {
                c->s.seg_max_pinned = pinned;
                c->s.seg_depth_at_max_pinned = c->s.depth;
            }
            if (c->record_events) {
                int64_t o = c->s.operators;
                if (pinned > c->ev.op_max_pinned[o]) c->ev.op_max_pinned[o] = pinned;
                if (c->s.depth > c->ev.op_max_depth[o]) c->ev.op_max_depth[o] = c->s.depth;
            }
            f->phase = 1;
        }
        int64_t request = c->op_total[op];
        for (;;) {
            int64_t value = c->s.memory + request;
            if (c->snapshots && !c->budget_inf && value > c->s.budget && value < c->s.exceeds_min) {
                /* This comparison may be where the next budget's run first differs. */
                if (take_snapshot(c, value) < 0) return ST_ERROR;
            }
            if (!exceeds(c, value)) break;
            if (c->s.pool_count == 0) {
                c->s.has_failure = 1;
                c->s.f_operator = c->s.operators;
                c->s.f_request = request;
                c->s.f_pinned = c->s.memory - c->s.pool_bytes;
                c->s.f_depth = c->s.depth;
                c->s.f_over_by = c->s.memory + request - c->s.budget;
                return ST_OOM;
            }
            int32_t victim, runner;
            double best, runner_score;
            if (choose(c, request, &victim, &best, &runner, &runner_score) < 0) return ST_ERROR;
            if (evict(c, victim, 1, best, runner, runner_score) < 0) return ST_ERROR;
            if (c->deadline > 0 && now_s() > c->deadline) return ST_TIMEOUT;
        }
        int32_t t = f->t;
        int remat = f->remat;
        if (compute_op(c, t, remat) < 0) return ST_ERROR;
        const int32_t *args = c->op_args + c->op_args_off[op];
        int32_t n_args = c->op_args_off[op + 1] - c->op_args_off[op];
        for (int32_t j = 0; j < n_args; j++) unlock(c, c->tensor_storage[args[j]]);
        if (c->s.remat_compute > c->remat_limit) return ST_THRASHED;
        f = &c->frames[c->s.fs_top - 1];
        c->s.und_top = f->und_off;
        c->s.fs_top--;
        c->s.depth--;
        if (c->tracking && c->s.fs_top > 0) { /* a point mid-cascade */
            int r = at_point(c, 0);
            if (r) return r;
        }
    }
    return 0;
}

/* Create op's output tensors (before materializing them), as the trace defines. */
static int new_operator(Core *c, int32_t op) {
    Arrays *a = &c->a;
    int32_t first = c->op_first[op];
    int64_t cost = c->op_compute[op];
    const int32_t *args = c->op_args + c->op_args_off[op];
    int32_t n_args = c->op_args_off[op + 1] - c->op_args_off[op];
    for (int32_t i = 0; i < c->op_nout[op]; i++) {
        int32_t t = first + i;
        int32_t s = c->tensor_storage[t];
        /* the static list holds t at this position (built in the same order) */
        PUT(c, a->st_len[s], a->st_len[s] + 1);
        PUT(c, a->ref_ext[s], a->ref_ext[s] + 1);
        if (a->last_op[s] < 0) {
            PUT(c, a->last_op[s], op);
            PUT(c, a->compute[s], cost);
        } else if (a->last_op[s] != op) {
            PUT(c, a->last_op[s], op);
            PUT(c, a->compute[s], a->compute[s] + cost);
        }
        for (int32_t j = 0; j < n_args; j++) {
            int32_t p = c->tensor_storage[args[j]];
            if (p == s) continue;
            /* the static lists are in the order edges first appear: the edge is new exactly
               when it is the next one in the list */
            int32_t k = a->ch_len[p];
            if (c->ch_off[p] + k < c->ch_off[p + 1] && c->ch_items[c->ch_off[p] + k] == s)
                PUT(c, a->ch_len[p], k + 1);
            k = a->pa_len[s];
            if (c->pa_off[s] + k < c->pa_off[s + 1] && c->pa_items[c->pa_off[s] + k] == p)
                PUT(c, a->pa_len[s], k + 1);
        }
    }
    return first;
}

static int finish_step(Core *c) {
    Arrays *a = &c->a;
    int kind = c->step_kind[c->s.step];
    int32_t x = c->step_arg[c->s.step];
    if (kind == K_COMPUTE) {
        int32_t first = c->op_first[x];
        for (int32_t i = 0; i < c->op_nout[x]; i++)
            PUT(c, a->last_access[c->tensor_storage[first + i]], c->s.clock);
        if (c->deadline > 0 && now_s() > c->deadline) return ST_TIMEOUT;
    } else if (kind == K_PIN) {
        int32_t s = c->tensor_storage[x];
        if (!a->pinned[s]) {
            lock(c, s);
            PUT(c, a->pinned[s], 1);
        }
    }
    return 0;
}

/* After a jump the state is a trajectory point's: mid-cascade, that point is recorded here
   (at a boundary, run_on's next COMPUTE step does it). ST_JUMPED: go on from there. */
static int settle(Core *c, int r) {
    while (r == ST_JUMPED && c->s.mat_active && c->s.fs_top > 0) {
        int again = at_point(c, 0);
        if (again == 0) return ST_JUMPED;
        r = again;
    }
    return r;
}

/* Run from the current position to the end of the trace or a terminal status. */
static int run_on(Core *c) {
    Arrays *a = &c->a;
    while (c->s.step < c->n_steps) {
        if (!c->s.mat_active) {
            int kind = c->step_kind[c->s.step];
            int32_t x = c->step_arg[c->s.step];
            if (kind == K_COMPUTE) {
                if (c->tracking) {
                    int r = settle(c, at_point(c, 1));
                    if (r == ST_JUMPED) continue; /* now at a later point */
                    if (r) return r;
                }
                c->s.operators++;
                int32_t first = new_operator(c, x);
                if (enter(c, first, 0) < 0) return ST_ERROR;
                c->s.mat_active = 1;
            } else if (kind == K_GET) {
                PUT(c, a->ref_ext[c->tensor_storage[x]], a->ref_ext[c->tensor_storage[x]] + 1);
                c->s.step++;
                continue;
            } else if (kind == K_RELEASE) {
                int32_t s = c->tensor_storage[x];
                PUT(c, a->ref_ext[s], a->ref_ext[s] - 1);
                if (a->ref_ext[s] == 0 && a->material[s] && !a->pinned[s])
                    if (evict(c, s, 0, NAN, -1, NAN) < 0) return ST_ERROR;
                c->s.step++;
                continue;
            } else if (!a->defined[x]) { /* PIN of an evicted tensor: rebuild it first */
                if (enter(c, x, 1) < 0) return ST_ERROR;
                c->s.mat_active = 1;
            }
        }
        if (c->s.mat_active) {
            int r = materialize(c);
            if (r == ST_JUMPED) r = settle(c, r);
            if (r == ST_JUMPED) continue; /* now at a later point */
            if (r) return r;
            c->s.mat_active = 0;
        }
        int r = finish_step(c);
        if (r) return r;
        c->s.step++;
    }
    return ST_OK;
}

static int run_to_end(Core *c) {
    c->merged = 0;
    c->run_bytes = 0;
    int status = 0;
    if (c->tracking && !c->s.seg_open && c->s.fs_top > 0) /* resumed at a point mid-cascade */
        status = settle(c, at_point(c, 0));
    if (!status || status == ST_JUMPED) status = run_on(c);
    if (status == ST_MERGED) return merge(c);
    c->s.status = status;
    if (status == ST_OOM && c->s.f_pinned > c->s.peak_pinned) {
        c->s.peak_pinned = c->s.f_pinned;
        c->s.depth_at_peak_pinned = c->s.f_depth;
    }
    if (c->tracking && end_trajectory(c, status) < 0) return ST_ERROR;
    c->out = c->s;
    return status;
}

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
                     c->scratch_b, c->scratch_d, c->stack, c->cover.items, c->ev.kind.items,
                     c->ev.storage.items, c->ev.depth.items, c->ev.pool_size.items,
                     c->ev.runner_up.items, c->ev.i64, c->ev.f64, c->ev.op_max_pinned,
                     c->ev.op_max_depth, c->order.items, c->news.items, c->dfs_node,
                     c->dfs_edge, c->mark[0], c->mark[1], c->done[0], c->done[1], c->slot[0],
                     c->slot[1], c->clo, c->bases, c->pts, c->own, c->sufmin, c->nextflip,
                     c->fr_log, c->ul_log,
                     c->dirty, c->dirty_list.items, c->dirty_old, c->log, c->row_old[0],
                     c->row_old[1], c->memo, c->memo_slot, c->memo_hash, c->memo_total,
                     c->gclo, c->lc, c->base_entry, c->entry_base, c->label_rows,
                     c->sweep_lab, c->sweep_flab, c->sweep_act, c->sweep_res};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) PyMem_Free(owned[i]);
    for (int i = 0; i < c->n_spare; i++) PyMem_Free(c->spare[i]);
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
                Py_ssize_t h = (Py_ssize_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 20) & (hcap - 1);
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
    if (!c->st_off || !c->st_items || !c->ch_off || !c->pa_off || !c->ch_items || !c->pa_items || !fill) {
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
    size_t bits = sizeof(uint64_t) * n * c->words;
    size_t offs[20], at = 0, k = 0;
#define PLACE(bytes) (offs[k++] = at, at = align8(at + (bytes)))
    PLACE(n); PLACE(n); PLACE(n); PLACE(n);                          /* u8 x4 */
    for (int i = 0; i < 8; i++) PLACE(sizeof(int32_t) * n);          /* i32 x8 */
    for (int i = 0; i < 4; i++) PLACE(sizeof(int64_t) * n);          /* i64 x4 */
    for (int i = 0; i < 4; i++) PLACE(bits);                          /* bitsets x4 */
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
    uint64_t **sets[4] = {&a->fwd_int, &a->fwd_fr, &a->rev_int, &a->rev_fr};
    for (int i = 0; i < 4; i++) *sets[i] = (uint64_t *)(b + offs[k++]);
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
        max_snapshots=64, shared_search=True, verify_hash=False, merging=True, shared_rows=0) */
static int Core_init(Core *c, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"n_tensors", "op_compute", "op_first", "op_nout", "op_args_off",
                             "op_args", "op_total", "tensor_size", "tensor_storage", "tensor_op",
                             "storage_size", "step_kind", "step_arg", "policy", "budget",
                             "remat_limit", "retain", "nbhd_b", "twophase_k", "time_limit",
                             "events", "snapshots", "max_snapshots", "shared_search", "verify_hash",
                             "merging", "shared_rows", "max_log_bytes", "max_run_log_bytes", NULL};
    Py_ssize_t n;
    PyObject *bufs[12];
    const char *policy;
    PyObject *budget, *remat_limit, *retain = NULL, *time_limit = Py_None;
    double nbhd_b = 0.25;
    int twophase_k = 8, events = 0, snapshots = 0;
    Py_ssize_t max_snapshots = 64;
    Py_ssize_t max_log_bytes = 0, max_run_log_bytes = 0; /* 0: no limit */
    int shared_search = 1, verify_hash = 0, merging = 1, shared_rows = ROWS_AUTO;
    if (c->started) {
        PyErr_SetString(PyExc_RuntimeError, "Core: already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nOOOOOOOOOOOOsOO|OdiOppnpppinn", kwlist, &n, &bufs[0],
                                     &bufs[1], &bufs[2], &bufs[3], &bufs[4], &bufs[5], &bufs[6],
                                     &bufs[7], &bufs[8], &bufs[9], &bufs[10], &bufs[11], &policy,
                                     &budget, &remat_limit, &retain, &nbhd_b, &twophase_k,
                                     &time_limit, &events, &snapshots, &max_snapshots, &shared_search,
                                     &verify_hash, &merging, &shared_rows, &max_log_bytes,
                                     &max_run_log_bytes))
        return -1;
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
    c->tracking = c->snapshots;
    c->verify_hash = verify_hash && c->tracking;
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
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Core: retain id out of range");
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
    c->scratch_a = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->scratch_b = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->scratch_d = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->stack = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->dfs_node = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->dfs_edge = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->bases = (int32_t *)PyMem_Calloc(n + 1, sizeof(int32_t));
    c->lc = (int64_t *)PyMem_Calloc(n + 1, sizeof(int64_t));
    c->sweep_lab = (uint64_t *)PyMem_Calloc(n + 1, sizeof(uint64_t));
    c->sweep_flab = (uint64_t *)PyMem_Calloc(n + 1, sizeof(uint64_t));
    c->sweep_act = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->sweep_res = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
    c->label_rows = (uint64_t *)PyMem_Calloc((size_t)128 * c->words, sizeof(uint64_t));
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
    if (c->tracking) {
        c->dirty = (uint64_t *)PyMem_Calloc(c->arena_bytes / 8 / 64 + 1, sizeof(uint64_t));
        c->row_old[0] = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
        c->row_old[1] = (uint64_t *)PyMem_Calloc(c->words, sizeof(uint64_t));
        if (!c->dirty || !c->row_old[0] ||
            !c->row_old[1] || vec_reserve(&c->dirty_list, 1024) < 0 || dirty_grow(c) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        if (c->arena_bytes / 8 >= UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "Core: the state is too large for a walk");
            return -1;
        }
    }
    if (!c->scratch_a || !c->scratch_b || !c->scratch_d || !c->stack || !c->dfs_node || !c->dfs_edge || !c->bases || !c->lc || !c->label_rows ||
        !c->sweep_lab || !c->sweep_flab || !c->sweep_act || !c->sweep_res || !c->base_entry || !c->entry_base) {
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
    c->s.status = ST_RUNNING;
    c->s.seg_open = 0;
    if (reserve_frames(c, 64) < 0 || vec_reserve(&c->und, 256) < 0) return -1;
    return 0;
}

/* ---- Python methods ------------------------------------------------------------------------ */
static PyObject *status_result(Core *c, int status) {
    if (status == ST_ERROR) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, c->error[0] ? c->error : "Core: error");
        return NULL;
    }
    static const char *names[] = {"running", "ok", "oom", "thrashed", "timeout"};
    return PyUnicode_FromString(names[status]);
}

static PyObject *Core_run(Core *c, PyObject *unused) {
    if (c->s.status != ST_RUNNING || c->s.step != 0 || c->s.operators != 0) {
        PyErr_SetString(PyExc_RuntimeError, "Core.run: already run (use resume)");
        return NULL;
    }
    if (c->time_limit > 0) c->deadline = now_s() + c->time_limit;
    c->resuming = 0;
    c->own_from = 0;
    c->n_own = 0;
    if (c->tracking) full_hash(c, &c->s.h1, &c->s.h2);
    return status_result(c, run_to_end(c));
}

/* Pop the newest snapshot, make its exceeding value the budget, and run on from there. */
static PyObject *Core_resume(Core *c, PyObject *unused) {
    if (c->n_snaps == 0) {
        PyErr_SetString(PyExc_RuntimeError, "Core.resume: no snapshot to resume from");
        return NULL;
    }
    if (restore_snapshot(c) < 0) return NULL;
    c->s.status = ST_RUNNING;
    c->resumed_operator = (int32_t)c->s.operators;
    c->resuming = 1;
    c->n_own = 0;
    if (c->tracking) {
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
        "{sLsLsLsLsLsLsLsLsLsLsLsLsNsLsNsLsLsnsL}", "clock", (long long)s->clock, "model_compute",
        (long long)s->model_compute, "remat_compute", (long long)s->remat_compute, "evictions",
        (long long)s->evictions, "policy_evictions", (long long)s->policy_evictions,
        "rematerializations", (long long)s->rematerializations, "operators",
        (long long)s->operators, "max_memory", (long long)s->max_memory, "peak_pinned",
        (long long)(s->peak_pinned > 0 ? s->peak_pinned : 0), "depth_at_peak_pinned",
        (long long)s->depth_at_peak_pinned, "max_nesting_depth", (long long)s->max_depth,
        "heuristic_evals", (long long)s->heuristic_evals, "failure", failure, "lo",
        (long long)s->fits_max, "hi", hi, "budget", (long long)s->budget, "resumed_operator",
        (long long)c->resumed_operator, "snapshots", c->n_snaps, "merged_operator",
        (long long)(c->merged ? c->s.operators : -1));
}

static PyObject *Core_stats(Core *c, PyObject *unused) {
    PyObject *d = Py_BuildValue(
        "{sLsLsLsnsnsnsnsLsLsLsLsLsLsLsLsLsLsLsLsLsLsLsL}", "searches", (long long)c->searches,
        "visited", (long long)c->visited, "edges", (long long)c->edges_seen, "snapshots",
        c->n_snaps, "snapshots_taken", c->snaps_taken, "snapshots_dropped", c->snaps_dropped,
        "state_bytes", (Py_ssize_t)c->arena_bytes, "merges", (long long)c->merges,
        "steps_skipped", (long long)c->steps_skipped, "merges_blocked",
        (long long)c->merges_blocked, "points_resumed", (long long)c->points_resumed,
        "mid_cascade_merges", (long long)c->mid_merges, "jumps", (long long)c->jumps,
        "steps_jumped", (long long)c->steps_jumped, "shared_passes", (long long)c->shared_passes,
        "shared_passes_closure_rows", (long long)c->global_passes, "memo_hits",
        (long long)c->memo_hits, "plain_passes", (long long)c->plain_passes, "cycle_passes",
        (long long)c->cycle_passes, "sweep_passes", (long long)c->sweep_passes, "topological",
        (long long)c->topological, "unlogged_segments", (long long)c->unlogged_segments,
        "jumps_refused", (long long)c->jumps_refused);
    if (!d) return NULL;
    /* the trajectory log's size: its words' bytes (live and garbage), the points' frame
       stacks, what the running run's segments took, and the words encoded so far */
    PyObject *more = Py_BuildValue(
        "{snsnsnsnsLsLsL}", "log_bytes", (Py_ssize_t)c->log_len, "log_live_bytes",
        (Py_ssize_t)c->log_live, "frame_bytes", frame_bytes(c), "run_bytes",
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
    {"run", (PyCFunction)Core_run, METH_NOARGS, "run() -> status: replay from the start"},
    {"resume", (PyCFunction)Core_resume, METH_NOARGS,
     "resume() -> status: the run at next_budget(), replayed from its divergence point"},
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

static PyObject *py_policies(PyObject *self, PyObject *unused) {
    PyObject *out = PyTuple_New(P_COUNT);
    if (!out) return NULL;
    for (int i = 0; i < P_COUNT; i++) PyTuple_SET_ITEM(out, i, PyUnicode_FromString(POLICY_NAMES[i]));
    return out;
}

static PyMethodDef module_methods[] = {
    {"true_divide", py_true_divide, METH_VARARGS, "num / den as Python's int true division."},
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
    return m;
}
