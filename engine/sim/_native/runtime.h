/* Part of the C runtime: the replay itself: evictions, materializations, the schedule's steps.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_RUNTIME_H
#define DTR_RUNTIME_H

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
    note_change(c, s);
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
    for (int32_t j = 0; j < n_args; j++)
        PUT(c, a->last_access[c->tensor_storage[args[j]]], c->s.clock);
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
    c->changes_mark = c->n_changes; /* the log from here on: the new storages */
    for (int32_t i = 0; i < n_new; i++) note_change(c, news[i]);
    for (int32_t i = 0; i < n_order; i++) {
        PUT(c, a->material[c->tensor_storage[order[i]]], 1);
        PUT(c, a->defined[order[i]], 1);
    }
    for (int32_t i = 0; i < n_new; i++)
        if (a->ref_int[news[i]] == 0) make_evictable(c, news[i]);
    if (c->regions && after_compute(c, news, n_new) < 0) return -1;
    return 0;
}

/* Whether a computation completed mid-cascade is a point. Every one was: a thrashing run's
   180,000 points, each closing a segment whose changed words are logged and hashed (a quarter
   of a tracked run), where consecutive computations of a cascade rewrite mostly the same
   words. So a point is kept at about one computation in point_every, chosen by the clock
   alone (a hash of it): two runs in the same state choose the same computations, so merges
   still meet, at most a few computations later; a jump lands on the last point before the
   comparison it is for, and replays the computations between. */
static inline int point_here(const Core *c) {
    return c->point_every <= 1 || mix64((uint64_t)c->s.clock) % (uint64_t)c->point_every == 0;
}

/* Run the frame stack until it is empty, or to a terminal status. */
static int materialize(Core *c) {
    Arrays *a = &c->a;
    while (c->s.fs_top > 0) {
        Frame *f = &c->frames[c->s.fs_top - 1];
        int32_t op = c->tensor_op[f->t];
        /* the top frame moves on; frames are pushed above it (and onto an empty stack only
           where fr_low is 0: the bottom frame lowered it when it began) */
        lower_frames(c, c->s.fs_top - 1);
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
        if (c->tracking && c->s.fs_top > 0 && point_here(c)) { /* a point mid-cascade */
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
        note_change(c, s); /* its compute or its parents may change */
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
            clear_bit(c->unpinned, s);
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
    c->skipped_clock = 0;
    c->fr_low = 0; /* the run's first point keeps its whole stack */
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

#endif /* DTR_RUNTIME_H */
