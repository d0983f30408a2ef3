/* Part of the C runtime: the maintained evicted neighbourhoods (interiors, frontiers and their
   compute) of every storage.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_REGIONS_H
#define DTR_REGIONS_H

/* ---- maintained evicted neighbourhoods (engine/sim/regions.py is the reference) ----------
   A computation's fresh searches go through search_all: swept over the ids (sweeps.h), built
   from closures (closures.h), or one by one (search, below). */
/* One search into zeroed rows (interleaved, row()): the interior's bits, the frontier's, and the
   interior's compute. */
static int64_t search_into(Core *c, int32_t base, int forward, uint64_t *interior,
                           uint64_t *frontier) {
    Arrays *a = &c->a;
    Graph g = graph_of(c, forward);
    const int32_t *off = g.off, *items = g.items, *len = g.len;
    const uint8_t *material = a->material;
    const int64_t *compute = a->compute;
    /* the stack and the counters in locals: the rows' stores may alias the core's fields for
       the compiler, which then reloaded and stored them at every storage (cachegrind) */
    int32_t *stack = c->stack;
    int64_t total = 0, visited = 0, edges = 0;
    Py_ssize_t top = 0;
    stack[top++] = base;
    while (top > 0) {
        int32_t v = stack[--top];
        const int32_t *e = items + off[v];
        int32_t m = len[v];
        visited++;
        edges += m;
        for (int32_t j = 0; j < m; j++) {
            int32_t u = e[j];
            if (material[u]) {
                row_set(frontier, u); /* (the base's bit is cleared below) */
            } else if (!row_test(interior, u)) {
                row_set(interior, u);
                total += compute[u];
                stack[top++] = u; /* each storage is pushed at most once */
            }
        }
    }
    row_clear(frontier, base); /* a search never lists its base (the rows came in zeroed) */
    c->visited += visited;
    c->edges_seen += edges;
    return total;
}

static void search(Core *c, int32_t base, int forward) {
    Arrays *a = &c->a;
    uint64_t *interior = row(c, forward ? a->fwd_int : a->rev_int, base);
    uint64_t *frontier = row(c, forward ? a->fwd_fr : a->rev_fr, base);
    row_begin(c, interior); /* the block of both rows */
    memset(interior, 0, sizeof(uint64_t) * 2 * c->words);
    c->searches++;
    int64_t total = search_into(c, base, forward, interior, frontier);
    row_end(c, interior);
    PUT(c, (forward ? a->fwd_sum : a->rev_sum)[base], total);
    mark_fresh(c, base, forward);
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

/* Where a computation's new storage s leaves a forward interior it was in: the part of the
   interior (`interior`, fresh before s was computed) that is decided by which way it is
   reached, into c->split_out (words lo..hi), with its compute; -1 when more than `limit`.
   Two questions, one walk:
   - split (from p, reject s): the storages of p's interior that s does not reach, for s's own
     rows (derive_forward);
   - cut (from s, reject q): the storages of q's interior that q reaches only through s, for
     the rows of s's parent q (cut_forward).
   Each is reached from `from` through storages of its own kind only (a path through another
   storage of the interior would make it the other kind), and none of its parents is `reject`
   or an interior storage of the other kind. So they are decided from from's children, in the
   order of their ids (a topological order: every parent of a storage is decided before it),
   each by its parents. s itself is never one. */
static int split_interior(Core *c, int32_t from, int32_t reject, int32_t s,
                          const uint64_t *interior, int limit, int64_t *compute, int32_t *lo_out,
                          int32_t *hi_out) {
    Arrays *a = &c->a;
    uint64_t *out = c->split_out, *next = c->split_next;
    int32_t lo = (int32_t)c->words, hi = -1, out_lo = lo, out_hi = -1, n = 0;
    int64_t total = 0;
    const int32_t *ch = c->ch_items + c->ch_off[from];
    for (int32_t j = 0; j < a->ch_len[from]; j++) {
        int32_t v = ch[j];
        if (v == s || !row_test(interior, v)) continue;
        set_bit(next, v);
        if (v >> 6 < lo) lo = v >> 6;
        if (v >> 6 > hi) hi = v >> 6;
    }
    for (int32_t w = lo; w <= hi; w++) { /* (hi grows: a child's id is above its parent's) */
        while (next[w]) {
            int32_t v = (w << 6) + __builtin_ctzll(next[w]);
            next[w] &= next[w] - 1;
            const int32_t *ps = c->pa_items + c->pa_off[v];
            int other = 0;
            for (int32_t k = 0; k < a->pa_len[v] && !other; k++) {
                int32_t u = ps[k];
                other = u == reject ||
                        (u != from && row_test(interior, u) && !test_bit(out, u));
            }
            if (other) continue;
            if (++n > limit) {
                for (int32_t x = w; x <= hi; x++) next[x] = 0;
                for (int32_t x = out_lo; x <= out_hi; x++) out[x] = 0;
                return -1;
            }
            set_bit(out, v);
            if (w < out_lo) out_lo = w;
            out_hi = w;
            total += a->compute[v];
            const int32_t *vc = c->ch_items + c->ch_off[v];
            for (int32_t j = 0; j < a->ch_len[v]; j++) {
                int32_t x = vc[j];
                if (x == s || !row_test(interior, x)) continue;
                set_bit(next, x);
                if (x >> 6 > hi) hi = x >> 6;
            }
        }
    }
    *compute = total;
    *lo_out = out_lo;
    *hi_out = out_hi;
    return n;
}

/* v's resident children leave a frontier (the base's) unless the base (`keeper`: s for its
   own rows, q for those of s's parent q) or the base's interior has them as a child. */
static inline void keep_frontier(Core *c, int32_t keeper, int32_t v, const uint64_t *interior,
                                 uint64_t *frontier) {
    Arrays *a = &c->a;
    const int32_t *ch = c->ch_items + c->ch_off[v];
    for (int32_t j = 0; j < a->ch_len[v]; j++) {
        int32_t r = ch[j];
        if (!row_test(frontier, r)) continue;
        const int32_t *rp = c->pa_items + c->pa_off[r];
        int kept = 0;
        for (int32_t k = 0; k < a->pa_len[r] && !kept; k++)
            kept = rp[k] == keeper || row_test(interior, rp[k]);
        if (!kept) row_clear(frontier, r);
    }
}

/* The interior words lo..hi less split_interior's storages (c->split_out, cleared here), and
   the resident children of `from` and of those storages kept on the frontier only where the
   base `keeper` or its new interior has them as a child. */
static void split_rows(Core *c, int32_t keeper, int32_t from, uint64_t *interior,
                       uint64_t *frontier, int32_t lo, int32_t hi) {
    uint64_t *out = c->split_out;
    for (int32_t w = lo; w <= hi; w++) interior[2 * w] &= ~out[w];
    keep_frontier(c, keeper, from, interior, frontier);
    for (int32_t w = lo; w <= hi; w++) {
        for (uint64_t word = out[w]; word; word &= word - 1)
            keep_frontier(c, keeper, (w << 6) + __builtin_ctzll(word), interior, frontier);
        out[w] = 0;
    }
}

/* The end of a derivation of base's forward rows: their compute, the rows fresh, the counts,
   and with verify_hash the rows compared with a fresh search. 1, or -1: an error. */
static int derived(Core *c, int32_t base, int64_t compute) {
    PUT(c, c->a.fwd_sum[base], compute);
    mark_fresh(c, base, 1);
    c->searches++;
    c->derived_searches++;
    return c->verify_hash && check_fresh(c, base, 1) < 0 ? -1 : 1;
}

/* A new storage's own forward rows, derived from a parent's instead of searched. In a cascade
   each rebuilt storage s is an argument of the next, and its parent p (the previous one) had
   its forward rows made by a fresh search when it was computed. Where nothing those rows read
   changed since (incremental.h's log, up to s's own entry), p's interior was s, what s
   reaches, and the storages p reaches without s (split_interior: on InceptionV4's thrashing
   walks 3.8 on average where p has another child in its interior, against the 636 s reaches).
   So s's interior is p's less s and those, its compute p's less theirs, and its frontier p's
   less the resident children of p and of those storages that neither s nor its interior has
   as a child. That is a fresh search's result, word for word (with verify_hash compared with
   one). 0: no parent qualifies (search instead); -1: an error. */
#define SPLIT_MAX 256 /* beyond, a search from s is as cheap */
static int derive_forward(Core *c, int32_t s, Py_ssize_t mark) {
    Arrays *a = &c->a;
    int32_t p = -1, lo = 0, hi = -1, split = 0;
    int64_t split_compute = 0;
    const int32_t *ps = c->pa_items + c->pa_off[s];
    for (int32_t k = 0; k < a->pa_len[s] && p < 0; k++) {
        int32_t q = ps[k];
        const uint64_t *q_int = row(c, a->fwd_int, q);
        if (!row_test(q_int, s) || !fresh_rows(c, q, mark, 1)) continue;
        split = split_interior(c, q, s, s, q_int, SPLIT_MAX, &split_compute, &lo, &hi);
        if (split >= 0) p = q;
        else c->splits_abandoned++;
    }
    if (p < 0) return 0;
    uint64_t *interior = row(c, a->fwd_int, s), *frontier = row(c, a->fwd_fr, s);
    row_begin(c, interior); /* the block of both rows */
    memcpy(interior, row(c, a->fwd_int, p), sizeof(uint64_t) * 2 * c->words);
    row_clear(interior, s);
    split_rows(c, s, p, interior, frontier, lo, hi);
    row_end(c, interior);
    if (split > 0) c->split_derivations++;
    return derived(c, s, a->fwd_sum[p] - a->compute[s] - split_compute);
}

/* The forward rows of q, a parent of the new storage s, cut where s now stops them instead of
   searched again. q's interior held s, what q reaches only through s (split_interior's cut),
   and the rest, which q still reaches: q's interior less s and the cut, its compute less
   theirs, s on its frontier, and the resident children of s and of the cut kept on it only
   where q or its new interior has them as a child. On InceptionV4's thrashing walks the cut is
   at most 16 storages for 13% of s's parents, whose searches would visit some 500 each; for
   most it is hundreds (a branch that no other path joins), more than the search visits, so
   the walk stops at CUT_MAX. 1: done; 0: search instead; -1: an error. */
#define CUT_MAX 16
static int cut_forward(Core *c, int32_t q, int32_t s, Py_ssize_t mark) {
    Arrays *a = &c->a;
    uint64_t *interior = row(c, a->fwd_int, q), *frontier = row(c, a->fwd_fr, q);
    if (!row_test(interior, s)) return 0;
    /* where s is q's only child in its interior, q reaches all of it through s: the cut is
       all of it, and the search visits q alone */
    const int32_t *ch = c->ch_items + c->ch_off[q];
    int other = 0;
    for (int32_t j = 0; j < a->ch_len[q] && !other; j++)
        other = ch[j] != s && row_test(interior, ch[j]);
    if (!other || !fresh_rows(c, q, mark, 1)) return 0;
    int32_t lo, hi;
    int64_t cut_compute;
    if (split_interior(c, s, q, s, interior, CUT_MAX, &cut_compute, &lo, &hi) < 0) {
        c->cuts_abandoned++;
        return 0;
    }
    row_begin(c, interior); /* the block of both rows */
    row_clear(interior, s);
    row_set(frontier, s);
    split_rows(c, q, s, interior, frontier, lo, hi);
    row_end(c, interior);
    c->cut_derivations++;
    return derived(c, q, a->fwd_sum[q] - a->compute[s] - cut_compute);
}

static int after_compute(Core *c, const int32_t *storages, int count) {
    Arrays *a = &c->a;
    uint64_t *aff_fwd = c->scratch_a, *aff_rev = c->scratch_b;
    memset(aff_fwd, 0, sizeof(uint64_t) * c->words);
    memset(aff_rev, 0, sizeof(uint64_t) * c->words);
    for (int i = 0; i < count; i++) {
        int32_t s = storages[i];
        /* (in a cycle s could reach p, which p's own rows never list) */
        int derived = count == 1 && c->incremental && c->topological
                          ? derive_forward(c, s, c->changes_mark)
                          : 0;
        if (derived < 0) return -1;
        if (!derived) search(c, s, 1);
        search(c, s, 0);
        const uint64_t *rf = row(c, a->rev_fr, s), *ff = row(c, a->fwd_fr, s);
        for (Py_ssize_t w = 0; w < c->words; w++) {
            aff_fwd[w] |= rf[2 * w];
            aff_rev[w] |= ff[2 * w];
        }
    }
    /* then the unpinned storages whose neighbourhoods the new ones cut, a word of them at a
       time (half the storages on the new ones' frontiers are pinned on InceptionV4's thrashing
       walks: 46.8M of 91.6M in a walk of 40 executions from 0.2005) */
    int32_t *const bases = c->bases;
    const uint64_t *const unpinned = c->unpinned;
    const Py_ssize_t words = c->words;
    if (c->verify_hash) { /* (the tests' walks: unpinned follows the arena's flags) */
        for (Py_ssize_t s = 0; s < c->n; s++)
            if (test_bit(unpinned, s) == a->pinned[s]) {
                snprintf(c->error, sizeof c->error,
                         "the unpinned bits differ from the pinned flags at storage %zd", s);
                return -1;
            }
    }
    for (int pass = 0; pass < 2; pass++) {
        const uint64_t *aff = pass == 0 ? aff_fwd : aff_rev;
        Py_ssize_t nb = 0;
        for (Py_ssize_t w = 0; w < words; w++)
            for (uint64_t word = aff[w] & unpinned[w]; word; word &= word - 1)
                bases[nb++] = (int32_t)((w << 6) + __builtin_ctzll(word));
        if (pass == 0 && count == 1 && c->incremental && c->topological) {
            /* (s's parents: its reverse frontier, s's own parents all resident) */
            Py_ssize_t left = 0;
            for (Py_ssize_t b = 0; b < nb; b++) {
                int r = cut_forward(c, bases[b], storages[0], c->changes_mark);
                if (r < 0) return -1;
                if (!r) bases[left++] = bases[b];
            }
            nb = left;
        }
        if (pass == 1) {
            nb = shrink_fresh_bases(c, bases, nb, storages, count, c->changes_mark);
            if (nb < 0) return -1;
        }
        if (search_all(c, bases, nb, pass == 0) < 0) return -1;
    }
    return 0;
}

static inline __attribute__((always_inline)) int absorb_into_as(Core *c, int32_t s, int forward,
                                                                const int tracking) {
    Arrays *a = &c->a;
    uint64_t *int_t = forward ? a->fwd_int : a->rev_int;
    uint64_t *fr_t = forward ? a->fwd_fr : a->rev_fr;
    int64_t *sum = forward ? a->fwd_sum : a->rev_sum;
    /* forward neighbourhoods change for the storages on s's reverse frontier, and back */
    const uint64_t *drivers = row(c, forward ? a->rev_fr : a->fwd_fr, s);
    const uint64_t *s_front = row(c, fr_t, s), *s_int = row(c, int_t, s);
    /* Only the words where s's rows have bits can change in a driver's rows (the rest OR in
       nothing and add nothing to the interior): s's own word, where it leaves the frontier and
       joins the interior, and the few its rows touch (InceptionV4 at 0.20: about 53 words a
       row, most of s's empty), visited in increasing order as a loop over every word would. */
    const int32_t s_word = s >> 6;
    const uint64_t s_bit = (uint64_t)1 << (s & 63);
    int32_t *touched = c->word_list, n_touched = 0;
    for (Py_ssize_t w = 0; w < c->words; w++)
        if (s_front[2 * w] | s_int[2 * w] || w == s_word) touched[n_touched++] = (int32_t)w;
    /* What each touched word adds to a driver's interior, s's bit included (set whether or
       not the driver has it), when the driver has none of s's interior bits there: most
       drivers, whose regions s's does not overlap. Summed once here, not per driver. */
    uint64_t *joins = c->scratch_d;
    int64_t *join_compute = c->word_compute;
    for (int32_t i = 0; i < n_touched; i++) {
        int32_t k = touched[i];
        uint64_t m = s_int[2 * k] | (k == s_word ? s_bit : 0);
        int64_t t = 0;
        joins[k] = m;
        for (uint64_t d = m; d; d &= d - 1) t += a->compute[(k << 6) + __builtin_ctzll(d)];
        join_compute[k] = t;
    }
    /* reverse rows fresh before s's eviction (its entry is the log's last), folded into rows
       fresh before it, are what a fresh search finds after it (incremental.h), where the
       storage graph has no cycle (in a cycle s's frontier can hold the storage it is folded
       into, which a search never lists) */
    Py_ssize_t before = c->n_changes - 1;
    int s_fresh = !forward && c->incremental && c->topological && before >= 0 &&
                  c->changes[before] == s && still_fresh(c, s, before);
    LogMasks log = {.from = -2, .n = 0}; /* the drivers' checks */
    for (Py_ssize_t w = 0; w < c->words; w++) {
        uint64_t word = drivers[2 * w] & c->unpinned[w];
        while (word) {
            int32_t p = (int32_t)((w << 6) + __builtin_ctzll(word));
            word &= word - 1;
            uint64_t *front = row(c, fr_t, p), *interior = row(c, int_t, p);
            int p_fresh = s_fresh && fresh_reverse(c, &log, p, interior, before);
            if (!row_test(front, s)) {
                snprintf(c->error, sizeof c->error,
                         "maintained neighbourhood of storage %d lacks evicted storage %d on its "
                         "frontier (simrd stops on an assertion here)", p, s);
                log_masks_clear(c, &log);
                return -1;
            }
            put_word_as(c, &front[2 * s_word], front[2 * s_word] & ~s_bit, tracking);
            int64_t added = 0;
            for (int32_t i = 0; i < n_touched; i++) {
                int32_t k = touched[i];
                put_word_as(c, &front[2 * k], front[2 * k] | s_front[2 * k], tracking);
                uint64_t d = joins[k];
                if (!d) continue;
                if (!(s_int[2 * k] & interior[2 * k])) {
                    added += join_compute[k];
                } else {
                    d &= ~interior[2 * k] | (k == s_word ? s_bit : 0);
                    for (uint64_t e = d; e; e &= e - 1)
                        added += a->compute[(k << 6) + __builtin_ctzll(e)];
                }
                put_word_as(c, &interior[2 * k], interior[2 * k] | d, tracking);
            }
            if (tracking && added) mark_dirty(c, &sum[p]);
            sum[p] += added;
            if (p_fresh) {
                mark_fresh(c, p, 0);
                c->fresh_absorbs++;
                if (c->verify_hash && check_fresh(c, p, 0) < 0) {
                    log_masks_clear(c, &log);
                    return -1;
                }
            }
        }
    }
    log_masks_clear(c, &log);
    return 0;
}

/* One copy with the trajectory's marks and one without (as shrink_fresh_one). */
static int absorb_into(Core *c, int32_t s, int forward) {
    return c->tracking ? absorb_into_as(c, s, forward, 1) : absorb_into_as(c, s, forward, 0);
}

static int absorb_evicted(Core *c, int32_t s) {
    Arrays *a = &c->a;
    if (absorb_into(c, s, 1) < 0 || absorb_into(c, s, 0) < 0) return -1;
    uint64_t *blocks[2] = {row(c, a->fwd_int, s), row(c, a->rev_int, s)};
    for (int k = 0; k < 2; k++) {
        row_begin(c, blocks[k]);
        memset(blocks[k], 0, sizeof(uint64_t) * 2 * c->words);
        row_end(c, blocks[k]);
    }
    PUT(c, a->fwd_sum[s], 0);
    PUT(c, a->rev_sum[s], 0);
    return 0;
}

static int64_t e_star_size(Core *c, int32_t s) {
    const uint64_t *f = row(c, c->a.fwd_int, s), *r = row(c, c->a.rev_int, s);
    int64_t count = 0;
    for (Py_ssize_t w = 0; w < c->words; w++) count += __builtin_popcountll(f[2 * w] | r[2 * w]);
    return count;
}

#endif /* DTR_REGIONS_H */
