/* Part of the C runtime: the trajectories that let a walk's run merge into or jump along the
   previous one.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_TRAJECTORY_H
#define DTR_TRAJECTORY_H

/* ---- trajectories (walks) ------------------------------------------------------------------
   Prefix sharing starts a walk's next run where it first differs from the previous one; most
   such runs then fall back into the previous run's exact state soon after (the other
   decision is made up for at a later budget check), often within the same cascade of
   rebuilds. From there the run would replay the previous run's rest, with one possible
   exception: a comparison whose outcome the new budget flips. So every run in a walk keeps
   its trajectory, a list of points: the boundaries before each COMPUTE step and the
   completions of some computations inside a materialization (about one in POINT_EVERY, see
   point_here in runtime.h). At each point it keeps the state's hash, and for the segment up
   to the next point what the run's record needs (counter increments, maxima, the nearest
   compared values on each side of the budget) and the arena words the segment changed. A
   resumed run that reaches a point whose state equals a point of
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

/* The arena's hash from scratch (the arena holds the state's arrays and nothing else; its
   padding words stay 0 and add nothing). */
static void full_hash(Core *c, uint64_t *h1, uint64_t *h2) {
    uint64_t keep1 = c->s.h1, keep2 = c->s.h2;
    c->s.h1 = c->s.h2 = 0;
    const uint64_t *words = (const uint64_t *)c->arena;
    for (Py_ssize_t w = 0; w < (Py_ssize_t)(c->arena_bytes / 8); w++) hash_word(c, w, words[w]);
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

/* The und list's position from which the stack may differ from the last point's: below the
   lowest frame written since, every frame and its und items are as they were. */
static inline int32_t und_low(const Core *c, int32_t low) {
    return low < c->s.fs_top ? c->frames[low].und_off : c->s.und_top;
}

/* A frame stack's and und list's hashes by prefix: fh[2k], fh[2k + 1] hash the frames below
   level k, uh the und list's first k items; those from level low and position ulow up are
   computed here (the ones below are as they were). */
static void hash_stack_from(const Frame *frames, int32_t top, const int32_t *und,
                            int32_t und_top, int32_t low, int32_t ulow, uint64_t *fh,
                            uint64_t *uh, uint64_t out[4]) {
    fh[0] = uh[0] = 0x243f6a8885a308d3ULL;
    fh[1] = uh[1] = 0x13198a2e03707344ULL;
    for (int32_t i = low; i < top; i++) {
        const Frame *f = &frames[i];
        uint64_t x1 = fh[2 * i], x2 = fh[2 * i + 1];
        uint64_t packed = (uint64_t)(uint32_t)f->t | ((uint64_t)(uint8_t)f->remat << 32) |
                          ((uint64_t)(uint8_t)f->phase << 40) |
                          ((uint64_t)(uint8_t)f->returning << 48);
        chain(&x1, &x2, packed, 20);
        chain(&x1, &x2, (uint64_t)(uint32_t)f->i | ((uint64_t)(uint32_t)f->und_len << 32), 21);
        chain(&x1, &x2, (uint64_t)(uint32_t)f->und_off, 22);
        fh[2 * i + 2] = x1;
        fh[2 * i + 3] = x2;
    }
    for (int32_t i = ulow; i < und_top; i++) {
        uint64_t x1 = uh[2 * i], x2 = uh[2 * i + 1];
        chain(&x1, &x2, (uint64_t)(uint32_t)und[i], 23);
        uh[2 * i + 2] = x1;
        uh[2 * i + 3] = x2;
    }
    out[0] = fh[2 * top];
    out[1] = fh[2 * top + 1];
    out[2] = uh[2 * und_top];
    out[3] = uh[2 * und_top + 1];
}

/* The live frame stack's and und list's hashes (mid-cascade, the materializations in
   progress), from the lowest level written since the last point (fr_low) up. A thrashing
   LSTM run's stack is up to 955 frames deep at its 200,000 points, and hashing it whole took
   9% of a tracked run. from_scratch: all of it (verify_hash compares). */
static int stack_hash(Core *c, int from_scratch, uint64_t out[4]) {
    const Scalars *s = &c->s;
    int32_t top = s->fs_top, low = c->fr_low < top ? c->fr_low : top;
    if (from_scratch) low = 0;
    if (RESERVE(c->fh, c->fh_cap, 2 * (Py_ssize_t)top + 2, 128) < 0 ||
        RESERVE(c->uh, c->uh_cap, 2 * (Py_ssize_t)s->und_top + 2, 128) < 0)
        return -1;
    hash_stack_from(c->frames, top, c->und.items, s->und_top, low, und_low(c, low), c->fh, c->uh,
                    out);
    return 0;
}

/* The whole state's hash: the arena's (a1, a2), the scalars that decide what happens next
   (v), and mid-cascade the stack of materializations in progress (stack: stack_hash's). */
static void hash_fields(uint64_t a1, uint64_t a2, const int64_t v[14], const uint64_t stack[4],
                        uint64_t *o1, uint64_t *o2) {
    uint64_t x1 = a1, x2 = a2;
    for (int i = 0; i < 14; i++) chain(&x1, &x2, (uint64_t)v[i], (uint64_t)i);
    for (int i = 0; i < 4; i++) chain(&x1, &x2, stack[i], (uint64_t)(24 + i));
    *o1 = x1;
    *o2 = x2;
}

static void point_hash(Core *c, const uint64_t stack[4], uint64_t *o1, uint64_t *o2) {
    const Scalars *s = &c->s;
    int64_t v[14] = {s->clock,         s->memory,        s->pool_bytes, s->model_compute,
                     s->remat_compute, s->operators,     s->pool_head,  s->pool_tail,
                     s->pool_count,    s->step,          s->mat_active, s->fs_top,
                     s->und_top,       s->depth};
    hash_fields(s->h1, s->h2, v, stack, o1, o2);
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

/* The log needs the checkpoints' room: they are an economy for jumps, and a segment without
   its words costs a replay instead (seconds, in a thrashing band). All go at once, and new
   ones are taken only while there is room for them (see append_point). */
static void shed_checkpoints(Core *c) {
    for (Py_ssize_t i = 0; i < c->n_pts; i++) c->pts[i].ck = 0;
    for (Py_ssize_t i = 0; i < c->n_own; i++) c->own[i].ck = 0;
    for (Py_ssize_t k = 0; k < c->ck_slots; k++)
        if (c->ck_arena[k]) {
            arena_give(c, c->ck_arena[k]);
            c->ck_arena[k] = NULL;
        }
    c->ck_count = 0;
    c->ck_shed++;
}

/* Whether the log has room for n more bytes, once the checkpoints gave theirs up. Asked as
   points open (their frame stacks) and as segments close (their words): past the limit at
   one, past it at every later one of the run (see past_log_limit), so that a point made past
   it, whose frame stack was not kept, never has a segment whose words were. */
static int room_for_log(Core *c, Py_ssize_t n) {
    if (c->ck_count > 0 && past_log_limit(c, n)) shed_checkpoints(c);
    return !past_log_limit(c, n);
}

/* The open segment ends: its sums and changed words go to the run's last point, and the
   changed words into the state hash (see hash.h). */
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
    Py_ssize_t bytes = 0;
    g->unlogged = 0;
    if (log_reserve(c, c->log_len + ENCODED_MAX * c->dirty_list.len) < 0) {
        c->dirty_failed = 1; /* the run ends with the error */
        discard_dirty(c);
    } else {
        bytes = close_words(c, c->log + c->log_len);
        c->run_bytes += bytes;
        if (!room_for_log(c, bytes)) {
            g->unlogged = 1; /* see log_limit */
            c->unlogged_segments++;
            bytes = 0;
        }
    }
    g->log_off = c->log_len;
    g->log_len = bytes;
    c->log_len += bytes;
}

/* ---- checkpoints (see ck_arena in state.h) ---- */
/* Every CHECKPOINT_STATES states' worth of changed words (InceptionV4's state is 0.7M
   words, a thrashing run's trajectory some 87M): a jump applies at most that many words
   (8.4M on average at 0.20 before there were checkpoints). One state's worth: InceptionV4's
   walks from 0.195 and 0.2005 take 8% and 6% less time than with six (docs/WALKS.md), the
   other traces' the same, for a tenth to a sixth of a GB more. */
#define CHECKPOINT_STATES 1

/* Mid-cascade points at about one computation in POINT_EVERY (see point_here, runtime.h). */
#define POINT_EVERY 32

/* Copy the live arena (the state at point p) into a free slot. An economy: without memory
   the point has none. */
static void take_checkpoint(Core *c, Point *p) {
    Py_ssize_t slot = 0;
    while (slot < c->ck_slots && c->ck_arena[slot]) slot++;
    if (slot == c->ck_slots) {
        Py_ssize_t cap = c->ck_slots ? 2 * c->ck_slots : 16;
        char **grown = (char **)PyMem_Realloc(c->ck_arena, sizeof(char *) * cap);
        if (!grown) return;
        for (Py_ssize_t i = c->ck_slots; i < cap; i++) grown[i] = NULL;
        c->ck_arena = grown;
        c->ck_slots = cap;
    }
    char *copy = arena_take(c);
    if (!copy) return;
    memcpy(copy, c->arena, c->arena_bytes);
    c->ck_arena[slot] = copy;
    c->ck_count++;
    c->ck_taken++;
    c->ck_words_at = c->words_logged;
    p->ck = (int32_t)slot + 1;
}

/* Release the checkpoints no point of the trajectory holds any more (the points a run
   rewrote, and those of the rest it did not take over). */
static void release_checkpoints(Core *c) {
    if (c->ck_count == 0) return;
    uint8_t *held = (uint8_t *)PyMem_Calloc(c->ck_slots, 1);
    if (!held) return; /* kept until the next splice */
    for (Py_ssize_t i = 0; i < c->n_pts; i++)
        if (c->pts[i].ck) held[c->pts[i].ck - 1] = 1;
    for (Py_ssize_t k = 0; k < c->ck_slots; k++)
        if (c->ck_arena[k] && !held[k]) {
            arena_give(c, c->ck_arena[k]);
            c->ck_arena[k] = NULL;
            c->ck_count--;
        }
    PyMem_Free(held);
}

static int own_reserve(Core *c, Py_ssize_t need) {
    return RESERVE(c->own, c->own_cap, need, 1024);
}

/* A point's stack is rebuilt from at most this many points' deltas (see load_stack): the
   whole stack once in 64 points costs the LSTM's thrashing runs some 200 bytes a point, where
   keeping it whole at every point took 12 KB. */
#define STACK_CHAIN 64

/* Keep the live frame stack's levels from `low` up, and its und list from the first of
   their items, for point p (the rest is the previous point's). low = 0: all of it. */
static int keep_stack(Core *c, Point *p, int32_t low) {
    const Scalars *s = &c->s;
    int32_t ulow = und_low(c, low);
    Py_ssize_t nf = s->fs_top - low, nu = s->und_top - ulow;
    if (RESERVE(c->fr_log, c->fr_cap, c->fr_len + nf, 4096) < 0 ||
        RESERVE(c->ul_log, c->ul_cap, c->ul_len + nu, 4096) < 0)
        return -1;
    p->fr_low = low;
    p->ul_low = ulow;
    p->fr_off = c->fr_len;
    p->und_off = c->ul_len;
    memcpy(c->fr_log + c->fr_len, c->frames + low, sizeof(Frame) * nf);
    memcpy(c->ul_log + c->ul_len, c->und.items + ulow, sizeof(int32_t) * nu);
    c->fr_len += nf;
    c->ul_len += nu;
    c->stack_chain = low == 0 ? 0 : c->stack_chain + 1;
    return 0;
}

/* The live frame stack and und list become trajectory point g's: its own delta, then the
   levels below from the points before it, until the stack is whole. A point's delta is
   relative to the point before it in the trajectory: a run's first point, the first point a
   jump copies and the first a merge takes over keep their whole stacks, so no chain crosses
   from one run's points into another's. */
static int load_stack(Core *c, Py_ssize_t g) {
    const Point *p = &c->pts[g];
    if (reserve_frames(c, p->fs_top + 1) < 0 || vec_reserve(&c->und, p->und_top + 1) < 0)
        return -1;
    int32_t need = p->fs_top, uneed = p->und_top;
    for (Py_ssize_t i = g; need > 0 || uneed > 0; i--) {
        const Point *q = i >= 0 ? &c->pts[i] : NULL;
        if (!q || q->bare) {
            snprintf(c->error, sizeof c->error, "point %zd's frame stack cannot be rebuilt", g);
            return -1;
        }
        if (q->fr_low < need) {
            memcpy(c->frames + q->fr_low, c->fr_log + q->fr_off,
                   sizeof(Frame) * (need - q->fr_low));
            need = q->fr_low;
        }
        if (q->ul_low < uneed) {
            memcpy(c->und.items + q->ul_low, c->ul_log + q->und_off,
                   sizeof(int32_t) * (uneed - q->ul_low));
            uneed = q->ul_low;
        }
    }
    c->und.len = p->und_top;
    c->fr_low = 0;
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
           too): its frame stack is not kept (nor, then, the later points' of the run) */
        p->bare = !room_for_log(c, 0);
        if (p->bare) {
            p->fr_off = p->und_off = 0;
            c->fr_low = s->fs_top;
            open_segment(c);
            c->s.n_points++;
            return 0;
        }
        /* mid-cascade, the frame stack too (a jump to this point restores it): what changed
           since the previous point, and every STACK_CHAIN points all of it */
        int32_t low = c->fr_low < s->fs_top ? c->fr_low : s->fs_top;
        if (keep_stack(c, p, c->stack_chain >= STACK_CHAIN ? 0 : low) < 0) return ST_ERROR;
        c->fr_low = s->fs_top;
        if (c->ck_every > 0 && c->words_logged - c->ck_words_at >= c->ck_every &&
            !past_log_limit(c, (Py_ssize_t)c->arena_bytes))
            take_checkpoint(c, p);
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
static int point_state(Core *c, Py_ssize_t at) {
    Scalars *s = &c->s;
    forget_fresh(c);
    if (load_stack(c, at) < 0) return -1;
    const Point *g = &c->pts[at];
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
    rebuild_derived(c); /* (after the pool's head and tail) */
    s->h1 = g->ah1;
    s->h2 = g->ah2;
    s->step = g->step;
    if (c->verify_hash) { /* the stack rebuilt from the points' deltas is the point's own */
        uint64_t stack[4], h1, h2;
        if (stack_hash(c, 1, stack) < 0) return -1;
        point_hash(c, stack, &h1, &h2);
        if (h1 != g->h1 || h2 != g->h2) {
            snprintf(c->error, sizeof c->error, "point %zd's frame stack rebuilt wrong", at);
            return -1;
        }
    }
    return 0;
}

static int push_snapshot(Core *c, int64_t value, int lazy);

/* The nearest checkpoint at or past point x whose state reaches back to x's through fewer
   than `within` bytes of logged segments (a segment's words are old ^ new: applied to the
   state after it, they give the state before it), or -1; *bytes is that log's size. */
static Py_ssize_t checkpoint_after(Core *c, Py_ssize_t x, Py_ssize_t within, Py_ssize_t *bytes) {
    Py_ssize_t sum = 0;
    for (Py_ssize_t k = x; k < c->n_pts && sum < within; k++) {
        const Point *p = &c->pts[k];
        if (p->ck) {
            *bytes = sum;
            return k;
        }
        if (p->unlogged || p->bare) return -1;
        sum += p->log_len;
    }
    return -1;
}

/* The arena from point *at's state (at <= x) to point x's, by the cheapest of: the log from
   *at (`bytes` of it up to x), the copy at checkpoint point ck (in (*at, x], or -1; the log
   from *at up to it is ck_bytes) and the log on from there, or the copy at the nearest
   checkpoint past x and the log back from there (XOR undoes a segment). A copy costs as
   much as applying a quarter of its bytes of log. */
static void advance_arena(Core *c, Py_ssize_t *at, Py_ssize_t x, Py_ssize_t ck,
                          Py_ssize_t ck_bytes, Py_ssize_t bytes) {
    Py_ssize_t copy = (Py_ssize_t)(c->arena_bytes / 4);
    Py_ssize_t from = *at, cost = bytes;
    if (ck > *at && copy + bytes - ck_bytes < cost) {
        from = ck;
        cost = copy + bytes - ck_bytes;
    }
    Py_ssize_t back_bytes = 0;
    Py_ssize_t back = cost > copy ? checkpoint_after(c, x, cost - copy, &back_bytes) : -1;
    uint64_t *words = (uint64_t *)c->arena;
    if (back >= 0) {
        memcpy(c->arena, c->ck_arena[c->pts[back].ck - 1], c->arena_bytes);
        for (Py_ssize_t k = x; k < back; k++)
            apply_segment(words, c->log + c->pts[k].log_off, c->pts[k].log_len);
        c->ck_restores++;
        c->ck_back_restores++;
        *at = x;
        return;
    }
    if (from != *at) {
        memcpy(c->arena, c->ck_arena[c->pts[from].ck - 1], c->arena_bytes);
        *at = from;
        c->ck_restores++;
    }
    for (Py_ssize_t k = *at; k < x; k++)
        apply_segment(words, c->log + c->pts[k].log_off, c->pts[k].log_len);
    *at = x;
}

/* From trajectory point m (in its state) to point g: the segments' sums are added to the
   record, the points copied into the run's own list, the arena brought to g's state (the
   changed words from the nearer checkpoint before or after g, see advance_arena), and the
   state becomes g's. Where a segment
   holds an exceeding value below every one this run met so far, the next runs may need to
   resume there: the state at the segment's start is copied first (the replay would have
   snapshotted inside the segment). */
static int jump(Core *c, Py_ssize_t m, Py_ssize_t g) {
    Scalars *s = &c->s;
    Py_ssize_t at = m;       /* the arena holds point at's state */
    Py_ssize_t ck = -1;      /* the last point past `at` with a checkpoint, */
    Py_ssize_t ck_bytes = 0; /* the log's bytes from `at` to it, */
    Py_ssize_t bytes = 0;    /* and from `at` to point k */
    for (Py_ssize_t k = m; k < g; k++) {
        const Point *p = &c->pts[k];
        if (k > at && p->ck) {
            ck = k;
            ck_bytes = bytes;
        }
        if (p->exceeds_min < s->exceeds_min) {
            advance_arena(c, &at, k, ck, ck_bytes, bytes);
            ck = -1;
            bytes = 0;
            if (point_state(c, k) < 0) return ST_ERROR;
            if (push_snapshot(c, p->exceeds_min, 0) < 0) return ST_ERROR;
        }
        take_segment(s, p);
        if (append_point(c, p, 0, 0, 0) < 0) return ST_ERROR;
        /* the first copy follows the run's own points: its stack whole (the live one is
           point m's) */
        if (k == m && (p->fr_low > 0 || p->ul_low > 0) &&
            keep_stack(c, &c->own[c->n_own - 1], 0) < 0)
            return ST_ERROR;
        bytes += p->log_len;
    }
    if (g > at && c->pts[g].ck) {
        ck = g;
        ck_bytes = bytes;
    }
    advance_arena(c, &at, g, ck, ck_bytes, bytes);
    if (point_state(c, g) < 0) return ST_ERROR;
    c->jumps++;
    c->steps_jumped += c->pts[g].step - c->pts[m].step;
    c->skipped_clock += c->pts[g].clock - c->pts[m].clock;
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
        if (c->pts[k].unlogged || c->pts[k].bare) { /* (a bare point's segment is unlogged) */
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
    uint64_t stack[4];
    if (stack_hash(c, 0, stack) < 0) return ST_ERROR;
    if (c->verify_hash) {
        uint64_t whole[4];
        if (stack_hash(c, 1, whole) < 0) return ST_ERROR;
        if (memcmp(stack, whole, sizeof stack) != 0) {
            snprintf(c->error, sizeof c->error,
                     "frame stack hash out of date at step %d (a frame written unnoticed)",
                     c->s.step);
            return ST_ERROR;
        }
    }
    point_hash(c, stack, &h1, &h2);
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

/* verify_hash (the tests' walks): every point's stack, rebuilt from the trajectory's deltas
   in order, hashes with the point's fields to the point's hash. Checked after every splice,
   so a delta that does not follow the point before it (at a junction of two runs' points)
   is found even where no jump reaches it. */
static int check_stacks(Core *c) {
    Frame *fr = NULL;
    int32_t *un = NULL;
    uint64_t *fh = NULL, *uh = NULL;
    Py_ssize_t fr_cap = 0, un_cap = 0, fh_cap = 0, uh_cap = 0;
    int whole_next = 1, r = 0;
    for (Py_ssize_t i = 0; i < c->n_pts && r == 0; i++) {
        const Point *p = &c->pts[i];
        if (p->bare) {
            whole_next = 1;
            continue;
        }
        if (RESERVE(fr, fr_cap, p->fs_top + 1, 64) < 0 ||
            RESERVE(un, un_cap, p->und_top + 1, 64) < 0 ||
            RESERVE(fh, fh_cap, 2 * (Py_ssize_t)p->fs_top + 2, 128) < 0 ||
            RESERVE(uh, uh_cap, 2 * (Py_ssize_t)p->und_top + 2, 128) < 0) {
            r = -1;
            break;
        }
        memcpy(fr + p->fr_low, c->fr_log + p->fr_off, sizeof(Frame) * (p->fs_top - p->fr_low));
        memcpy(un + p->ul_low, c->ul_log + p->und_off, sizeof(int32_t) * (p->und_top - p->ul_low));
        uint64_t stack[4], h1, h2;
        hash_stack_from(fr, p->fs_top, un, p->und_top, p->fr_low, p->ul_low, fh, uh, stack);
        int64_t v[14] = {p->clock,         p->memory,    p->pool_bytes, p->model_compute,
                         p->remat_compute, p->operators, p->pool_head,  p->pool_tail,
                         p->pool_count,    p->step,      p->mat_active, p->fs_top,
                         p->und_top,       p->depth};
        hash_fields(p->ah1, p->ah2, v, stack, &h1, &h2);
        if ((whole_next && (p->fr_low > 0 || p->ul_low > 0)) || h1 != p->h1 || h2 != p->h2) {
            snprintf(c->error, sizeof c->error,
                     "point %zd's frame stack does not follow point %zd's", i, i - 1);
            r = -1;
        }
        whole_next = 0;
    }
    PyMem_Free(fr);
    PyMem_Free(un);
    PyMem_Free(fh);
    PyMem_Free(uh);
    return r;
}

static int pts_reserve(Core *c, Py_ssize_t need) {
    return RESERVE(c->pts, c->pts_cap, need, 1024);
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
    release_checkpoints(c);
    compact_log(c);
    return c->verify_hash ? check_stacks(c) : 0;
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

/* A tracked run resuming from a snapshot of another epoch (taken before a run that kept no
   trajectory, or in one): its state did not come through this trajectory, whose points and
   log are dropped, and so are the snapshot's changed words (they were its segment's). The run
   numbers its points from 0 and records them from where it resumes (a snapshot is taken
   inside a materialization, or at a point: run_to_end records its first point at once, before
   any write); it has nothing to merge into. The state hash is computed afresh (no write since
   the epoch ended kept it). */
static void start_epoch(Core *c) {
    c->traj_epoch++;
    c->epochs_started++;
    c->n_pts = 0;
    c->n_own = 0;
    c->traj_valid = 0;
    release_checkpoints(c); /* no point holds one */
    c->log_len = c->log_live = 0;
    c->fr_len = c->ul_len = 0;
    discard_dirty(c);
    c->s.seg_open = 0;
    c->s.n_points = 0;
    full_hash(c, &c->s.h1, &c->s.h2);
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
    c->skipped_clock += c->traj_clock - c->s.clock;
    /* the trajectory becomes this run's: the live state is its point at own_from + n_own */
    c->s.n_points = c->own_from + c->n_own;
    /* the first point taken over follows this run's own: its stack whole (the live one is
       its) */
    Point *first = &c->pts[m];
    if (!first->bare && (first->fr_low > 0 || first->ul_low > 0) && keep_stack(c, first, 0) < 0)
        return ST_ERROR;
    if (splice(c, m) < 0) return ST_ERROR;
    if (o->exceeds_min < c->s.exceeds_min) {
        /* the next budget first differs in the taken-over part: restart from here */
        if (push_snapshot(c, o->exceeds_min, 1) < 0) return ST_ERROR;
    }
    return o->status;
}

#endif /* DTR_TRAJECTORY_H */
