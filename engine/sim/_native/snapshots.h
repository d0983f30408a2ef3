/* Part of the C runtime: snapshots, copies of the whole state kept at a run's budget comparisons,
   from which a walk's next run resumes (where its budget first decides otherwise).
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_SNAPSHOTS_H
#define DTR_SNAPSHOTS_H

/* The state kept outside the arena, derived from it (the unpinned bits, the pool's storages
   with a size), made again wherever the arena changes but by the run's own steps: a restore,
   a jump to a point, and a new core. One call for all, so that no place makes one again and
   not the other. */
static void rebuild_derived(Core *c) {
    unpinned_rebuild(c);
    pool_sized_rebuild(c);
}

/* ---- snapshots ---------------------------------------------------------------------------- */
/* A state's worth of memory for a snapshot or a checkpoint. Walks take and release them all
   the time, and a freshly allocated block of megabytes is mapped anew and faulted in page by
   page (5% of an InceptionV4 walk went to page faults): released ones are kept for reuse, up
   to SPARE_ARENAS of them and SPARE_BYTES in all. With two kept, a walk of 100 executions from
   InceptionV4's 0.2005 still spent some 2% of its time faulting in checkpoints' copies (`perf`:
   take_checkpoint's memcpy); it takes 105 checkpoints and 80 snapshots. */
static char *arena_take(Core *c) {
    if (c->n_spare > 0) return c->spare[--c->n_spare];
    return (char *)PyMem_Malloc(c->arena_bytes);
}

static void arena_give(Core *c, char *arena) {
    if (!arena) return;
    if (c->n_spare < 2 ||
        (c->n_spare < SPARE_ARENAS && (size_t)(c->n_spare + 1) * c->arena_bytes <= SPARE_BYTES))
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
    if (RESERVE(c->snaps, c->snaps_cap, c->n_snaps + 1, 16) < 0) return -1;
    Snapshot *snap = &c->snaps[c->n_snaps];
    snap->value = value;
    snap->lazy = lazy;
    snap->traj_epoch = c->tracking ? c->traj_epoch : -1;
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
    return RESERVE(c->frames, c->frames_cap, need, 64);
}

/* Restore the newest snapshot and make its value the budget (it then fits). */
static int restore_snapshot(Core *c) {
    Snapshot *snap = &c->snaps[c->n_snaps - 1];
    forget_fresh(c);
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
    memcpy(c->frames, snap->frames, sizeof(Frame) * snap->s.fs_top); /* (fr_low: run_to_end) */
    memcpy(c->und.items, snap->und, sizeof(int32_t) * snap->s.und_top);
    c->und.len = snap->s.und_top;
    c->s.budget = snap->value;
    if (c->can_track) discard_dirty(c);
    if (c->tracking) { /* the open segment's changed words are the snapshot's (see start_epoch) */
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
    rebuild_derived(c);
    return 0;
}

#endif /* DTR_SNAPSHOTS_H */
