/* Part of the C runtime: the runtime's types: the program, the dynamic state (arena arrays,
   scalars, frames), snapshots, trajectory points and the event log.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_STATE_H
#define DTR_STATE_H

/* ---- growable int vectors --------------------------------------------------------------- */
typedef struct {
    int32_t *items;
    Py_ssize_t len, cap;
} Vec32;

/* released arenas kept for reuse (snapshots.h arena_give) */
#define SPARE_ARENAS 16
#define SPARE_BYTES ((size_t)64 << 20)

/* Room for `need` items in a growable array (items, capacity): the capacity doubles from
   `first` until it holds them. 0, or -1 with a MemoryError set (the array as it was). */
#define RESERVE(items, capacity, need, first)                                                   \
    __extension__({                                                                             \
        int r_ = 0;                                                                             \
        Py_ssize_t need_ = (need);                                                              \
        if (need_ > (capacity)) {                                                               \
            Py_ssize_t n_ = (capacity) ? (capacity) : (first);                                  \
            while (n_ < need_) n_ *= 2;                                                         \
            __typeof__(items) g_ =                                                              \
                (__typeof__(items))PyMem_Realloc((items), sizeof *(items) * n_);                \
            if (g_) {                                                                           \
                (items) = g_;                                                                   \
                (capacity) = n_;                                                                \
            } else {                                                                            \
                PyErr_NoMemory();                                                               \
                r_ = -1;                                                                        \
            }                                                                                   \
        }                                                                                       \
        r_;                                                                                     \
    })

static int vec_reserve(Vec32 *v, Py_ssize_t need) { return RESERVE(v->items, v->cap, need, 64); }

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
    /* Its frame stack is kept as what changed since the previous point (mid-cascade, a stack
       hundreds deep differs from the last point's in its top one or two frames): the frames
       at levels [fr_low, fs_top) at fr_off, the und list from position ul_low at und_off; the
       levels and positions below are the previous point's (see load_stack). */
    Py_ssize_t fr_off, und_off;
    int32_t fr_low, ul_low;
    int64_t evictions, policy_evictions, remats, evals; /* counted within the segment */
    int64_t max_memory, max_pinned, depth_at_max_pinned, max_depth, fits_max, exceeds_min;
    Py_ssize_t log_off, log_len; /* the arena words the segment changed: bytes of the log */
    int32_t unlogged;            /* 1: past the log's limit, the segment's words were not kept */
    int32_t bare;                /* 1: made past the limit, its frame stack was not kept either */
    int32_t ck;                  /* 1 + the checkpoint holding the arena at this point; 0: none */
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
    int64_t traj_epoch; /* the trajectory's epoch it was taken in (-1: in a run that kept none) */
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
    /* The lowest frame level written since the last point: the levels below are as they were
       there (frames change only at the top of the stack), which keeps the points' stacks as
       deltas and their hashes by prefix: fh[2k], fh[2k + 1] hash the frames below level k,
       uh the und list's first k items, valid up to the stack as it was at the last point. */
    int32_t fr_low, stack_chain; /* stack_chain: points since the last whole stack kept */
    uint64_t *fh, *uh;
    Py_ssize_t fh_cap, uh_cap;
    uint64_t *scratch_a, *scratch_b, *scratch_d;
    int32_t *word_list; /* absorb_into: the words an evicted storage's rows have bits in */
    int64_t *word_compute; /* absorb_into: the compute each of those words adds */
    uint64_t *split_out, *split_next; /* split_interior: the storages it answers, and the next
                                         to decide (zero between its calls) */
    uint64_t *log_bits; /* fresh_reverse: the log's storages since a row was fresh (zero between
                           shrink_fresh_one's and absorb_into's calls) */
    int32_t *log_words; /* and the words they lie in */
    /* The storages not pinned, as bits: the arena's pinned flags, for the loops over a row's
       bits that skip pinned storages (half the bits of the rows after_compute and absorb_into
       go through on InceptionV4's thrashing walks). Not in the arena: made again wherever the
       arena changes but by the run's own steps (rebuild_derived). */
    uint64_t *unpinned;
    /* The pool's storages with a size, in its order (policy.h's sized_link): the victim scan's
       candidates. Not in the arena either (rebuild_derived). */
    int32_t *sized_next, *sized_prev;
    int32_t sized_head, sized_tail;
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
    /* shared_pass's: each base's memo entry, each entry's first base */
    int32_t *base_entry, *entry_base;
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
    /* shrink_reverse's table of the new storages' parents (incremental.h, note_parents):
       parent p's index in par_idx[p] while par_stamp[p] is par_epoch; its children that are
       not resident in nr_items[nr_off[i]..nr_off[i + 1]); its resident ones with bit i in
       res_mask[u] while res_stamp[u] is par_epoch */
    int64_t *par_stamp, *res_stamp, par_epoch;
    uint64_t *res_mask;
    int32_t *par_idx, *nr_items, nr_off[65];
    uint64_t *label_rows; /* sweep_chunk's rows of up to 64 * SWEEP_WORDS bases */
    int64_t sweep_passes, sweep_widest; /* passes; the most bases one chunk of a pass took */
    int sweep_words; /* a sweep's label words: up to 64 * sweep_words bases (a test switch) */
    int point_every; /* mid-cascade points at about 1 computation in point_every (runtime.h) */
    /* every edge of the storage graph goes from a lower storage id to a higher one (true of
       the DTR traces: an operator's new storage is numbered after its arguments); then the
       label passes sweep ids in order instead of walking the region first (sweep_pass) */
    int topological;
    uint64_t *sweep_lab, *sweep_flab; /* sweep_chunk's labels by storage (zero between chunks) */
    uint64_t *sweep_act, *sweep_res;  /* its storages to pass on, and the resident ones reached */
    int shared_search; /* 0: plain searches only (a test switch) */
    /* incremental.h: the log of changes reverse searches read, each storage's position in it
       when its reverse rows were last made fresh (+1; 0: never), the first position that
       counts (the state was restored there), where the computation's new storages start */
    int32_t *changes;
    Py_ssize_t n_changes, changes_cap, changes_valid_from, changes_mark;
    int64_t *rev_fresh_at, *fwd_fresh_at; /* forward rows too (derive_forward) */
    int incremental; /* 0: every reverse search from scratch (a test switch) */
    uint64_t *verify_rows; /* with verify_hash: a fresh search's rows, to compare */
    int64_t incremental_searches, fresh_absorbs, derived_searches;
    int64_t split_derivations, splits_abandoned; /* derive_forward: with storages s does not
                                                    reach; a parent's given up (SPLIT_MAX) */
    int64_t cut_derivations, cuts_abandoned; /* cut_forward: done; given up (CUT_MAX) */
    int64_t scans_whole_pool;    /* choose_ratio: the sized storages' runner-up inf */
    int64_t scans_stopped_unsized; /* ... stopped at a score of 0 past storages of no size */
    Vec32 cover;       /* TwoPhase's candidates */
    Vec32 order, news; /* compute_op's outputs and their new storages */
    double time_limit; /* seconds; 0 = none */
    int32_t resumed_operator; /* where the last resume replayed from */
    Snapshot *snaps;
    Py_ssize_t n_snaps, snaps_cap, max_snaps, snaps_dropped, snaps_taken;
    char *spare[SPARE_ARENAS]; /* released arenas (snapshots, checkpoints), for the next ones */
    int n_spare;
    Events ev;
    /* trajectories (walks): the last run's points, in order; the running run's own points
       (from own_from on) until it ends and they are spliced in */
    int tracking, verify_hash, merging, resuming, traj_valid, merged;
    /* A walk chooses per run whether it keeps a trajectory (`tracking`; possible when
       `can_track`): where runs rarely rejoin their predecessor, keeping one costs more than
       the merges save. A trajectory is its epoch's: a run that keeps none ends the epoch, and a
       run that keeps one resuming from a snapshot of another epoch starts a new one
       (start_epoch). `compared`: the run had a trajectory to merge into; `skipped_clock`:
       the compute its merge or jumps took over instead of running it. */
    int can_track, compared;
    int64_t traj_epoch, epochs_started, untracked_runs, skipped_clock, resumed_clock;
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
    uint64_t *row_old; /* a block of rows before a rewrite (to find the words it changed) */
    int64_t jumps, steps_jumped;
    /* Checkpoints: copies of the arena at some points of the trajectory, one every
       ck_every changed words of a run's own points. A jump applies every changed word of the
       segments it skips, and thrashing segments change the same words again and again
       (InceptionV4 at 0.20: 8.4M words applied a jump, 57,000 of them distinct); from the
       last checkpoint before its target, or back from the first one after it (XOR undoes a
       segment), it applies at most ck_every, the nearer one's. A checkpoint belongs
       to its point's state, wherever the point goes (copied by a jump, kept by a splice),
       and is released when no point of the trajectory holds it. They count in the log's
       limit (kept_bytes), and give their room up to the log (shed_checkpoints). */
    char **ck_arena;      /* by slot; NULL: free */
    Py_ssize_t ck_slots, ck_count;
    int64_t ck_every, ck_words_at; /* words between checkpoints; words_logged at the last one */
    int64_t ck_taken, ck_restores, ck_back_restores, ck_shed;
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

/* A storage's neighbourhood rows of one direction are interleaved in one block of 2 * words:
   word w of its interior at [2 * w], of its frontier at [2 * w + 1] (fwd_fr is fwd_int + 1,
   rev_fr is rev_int + 1). The checks that read both rows at one storage's bit (still_fresh,
   shrink_reverse, absorb_into) then load one cache line instead of two rows' apart. */
static inline uint64_t *row(Core *c, uint64_t *table, Py_ssize_t s) {
    return table + s * 2 * c->words;
}
static inline int row_test(const uint64_t *r, Py_ssize_t i) {
    return (r[2 * (i >> 6)] >> (i & 63)) & 1;
}
static inline void row_set(uint64_t *r, Py_ssize_t i) {
    r[2 * (i >> 6)] |= (uint64_t)1 << (i & 63);
}
static inline void row_clear(uint64_t *r, Py_ssize_t i) {
    r[2 * (i >> 6)] &= ~((uint64_t)1 << (i & 63));
}
/* Whether storage i is in either row of a block (its interior or its frontier). */
static inline int block_has(const uint64_t *block, Py_ssize_t i) {
    const uint64_t *w = block + 2 * (i >> 6);
    return ((w[0] | w[1]) >> (i & 63)) & 1;
}

/* c->unpinned from the arena's pinned flags (a storage, once pinned, stays pinned in a run,
   but a restore or a jump may take the arena back to before its pin). */
static inline void unpinned_rebuild(Core *c) {
    const uint8_t *pinned = c->a.pinned;
    for (Py_ssize_t w = 0; w < c->words; w++) {
        uint64_t bits = 0;
        for (Py_ssize_t i = w << 6, end = i + 64 < c->n ? i + 64 : c->n; i < end; i++)
            bits |= (uint64_t)!pinned[i] << (i & 63);
        c->unpinned[w] = bits;
    }
}

/* Frame levels from `level` up may be written (see fr_low). */
static inline void lower_frames(Core *c, int32_t level) {
    if (level < c->fr_low) c->fr_low = level;
}

/* One direction of the storage graph: storage s's neighbours are items[off[s] ..
   off[s] + len[s]) (children forward, parents backward; len lives in the state). */
typedef struct {
    const int32_t *off, *items, *len;
} Graph;

static inline Graph graph_of(Core *c, int forward) {
    Graph g = {forward ? c->ch_off : c->pa_off, forward ? c->ch_items : c->pa_items,
               forward ? c->a.ch_len : c->a.pa_len};
    return g;
}

#endif /* DTR_STATE_H */
