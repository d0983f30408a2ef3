/* Part of the C runtime: the eviction pool and the policies' scores and choice.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_POLICY_H
#define DTR_POLICY_H

/* ---- the pool: storages in the order they became evictable (a linked list) -------------- */
/* The pool's storages with a size, in the pool's order (Core's sized_*): the victim scan's
   candidates. The others score inf whatever their sums (choose_ratio), and were a quarter of
   its candidates on InceptionV4's thrashing walks (31.0M of 134.9M in a walk of 40 executions
   from 0.2005). Not in the arena: made again from the pool wherever the arena changes but by
   the run's own steps (rebuild_derived, snapshots.h). */
static inline void sized_link(Core *c, int32_t s) {
    c->sized_prev[s] = c->sized_tail;
    c->sized_next[s] = -1;
    if (c->sized_tail >= 0) c->sized_next[c->sized_tail] = s;
    else c->sized_head = s;
    c->sized_tail = s;
}

static inline void sized_unlink(Core *c, int32_t s) {
    int32_t p = c->sized_prev[s], q = c->sized_next[s];
    if (p >= 0) c->sized_next[p] = q;
    else c->sized_head = q;
    if (q >= 0) c->sized_prev[q] = p;
    else c->sized_tail = p;
}

static void pool_sized_rebuild(Core *c) {
    c->sized_head = c->sized_tail = -1;
    for (int32_t s = c->s.pool_head; s >= 0; s = c->a.pool_next[s])
        if (c->size[s] > 0) sized_link(c, s);
}

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
    if (c->size[s] > 0) sized_link(c, s);
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
    /* A storage out of the pool has no links: nothing reads them (every walk of the list starts
       at its head), but the state hash does. Left as they were, they kept two runs that had
       made the same decisions from telling they were in the same state: a walk's run that
       fell back into its predecessor's decisions after a few evictions ran on for hundreds of
       computations (until the storage re-entered the pool) before its state hashed equal. */
    PUT(c, a->pool_prev[s], -1);
    PUT(c, a->pool_next[s], -1);
    c->s.pool_count--;
    c->s.pool_bytes -= c->size[s];
    if (c->size[s] > 0) sized_unlink(c, s);
}

static inline void lock(Core *c, int32_t s) {
    if (c->a.ref_int[s] == 0) make_unevictable(c, s);
    PUT(c, c->a.ref_int[s], c->a.ref_int[s] + 1);
}

static inline void unlock(Core *c, int32_t s) {
    PUT(c, c->a.ref_int[s], c->a.ref_int[s] - 1);
    if (c->a.ref_int[s] == 0) make_evictable(c, s);
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

/* Whether candidate s's score is certainly above the runner-up's b2 (0 < b2 < inf), told
   without the exact division: for the scores that are one int / int quotient, size * staleness
   below (h_DTR, DTRLocal, and NbhdPenalty's h_DTR factor), the exact long double division
   (true_divide) is most of a candidate's cost. An estimate in doubles is within 2**-50 of the
   exact quotient, which is itself its correctly rounded double, so an estimate more than
   2**-45 above b2 is a score above it: such a candidate is neither victim nor runner-up and
   changes nothing. NbhdPenalty multiplies h_DTR by 1 + b * |e*| >= 1 (b >= 0), which rounds
   to no less than h_DTR, so its h_DTR alone suffices (and |e*| is not counted). */
static inline int clearly_above(const Core *c, int32_t s, double b2) {
    const Arrays *a = &c->a;
    int64_t num;
    switch (c->policy) {
    case P_DTR:
        num = a->compute[s] + a->fwd_sum[s] + a->rev_sum[s];
        break;
    case P_NBHD:
        if (!(c->nbhd_b >= 0)) return 0;
        num = a->compute[s] + a->fwd_sum[s] + a->rev_sum[s];
        break;
    case P_DTRLOCAL:
        num = a->compute[s];
        break;
    default:
        return 0;
    }
    /* the exact path's special cases (never accessed, no size, no staleness) stay there */
    if (a->last_access[s] == NEVER || c->size[s] <= 0 || c->s.clock <= a->last_access[s])
        return 0;
    double estimate =
        (double)num / ((double)c->size[s] * (double)(c->s.clock - a->last_access[s]));
    return estimate > b2 * (1.0 + 0x1p-45);
}

/* simrd's rule for a scored candidate s: the last whose score x is <= the best so far is the
   victim, and the one it displaces, or one <= the runner-up, the runner-up. 1: s was taken. */
static inline int take_candidate(int32_t s, double x, int32_t *v1, double *b1, int32_t *v2,
                                 double *b2) {
    if (x <= *b1) {
        *v2 = *v1;
        *b2 = *b1;
        *v1 = s;
        *b1 = x;
        return 1;
    }
    if (x <= *b2) {
        *v2 = s;
        *b2 = x;
        return 1;
    }
    return 0;
}

typedef struct {
    double b1, b2;
    int32_t v1, v2;
    int32_t stopped; /* the candidate of score 0 the scan stopped at, or -1 */
    int64_t evaluated;
} RatioScan;

static inline __attribute__((always_inline)) int scan_ratio(Core *c, int local, int32_t head,
                                                            const int32_t *next, RatioScan *r) {
    const Arrays *a = &c->a;
    const int64_t *compute = a->compute, *fwd = a->fwd_sum, *rev = a->rev_sum;
    const int64_t *last = a->last_access, *size = c->size;
    const int64_t clock = c->s.clock;
    double b1 = INFINITY, b2 = INFINITY;
    double cut = INFINITY; /* estimates above it are clearly above b2 (none while b2 is 0 or inf) */
    int32_t v1 = -1, v2 = -1, stopped = -1;
    int64_t evaluated = 0;
    for (int32_t s = head; s >= 0; s = next[s]) {
        evaluated++;
        int64_t num = local ? compute[s] : compute[s] + fwd[s] + rev[s];
        int64_t sz = size[s], at = last[s];
        /* at != NEVER && clock > at in one test: NEVER (INT64_MIN) wraps to a negative */
        int64_t stale = (int64_t)((uint64_t)clock - (uint64_t)at);
        double x;
        if ((sz > 0) & (stale > 0)) {
            if ((double)num / ((double)sz * (double)stale) > cut) continue;
            if (true_divide(num, (unsigned __int128)sz * (unsigned __int128)stale, &x) < 0)
                return -1;
        } else {
            if (sz <= 0 && cut < INFINITY) continue; /* scores inf, above b2 */
            if (ratio_score(num, sz, clock, at, &x) < 0) return -1;
        }
        if (!take_candidate(s, x, &v1, &b1, &v2, &b2)) continue;
        cut = b2 > 0 && b2 < INFINITY ? b2 * (1.0 + 0x1p-45) : INFINITY;
        if (x == 0) {
            stopped = s;
            break;
        }
    }
    *r = (RatioScan){b1, b2, v1, v2, stopped, evaluated};
    return 0;
}

/* With verify_hash (the tests' walks): the sized list is the pool's storages with a size. */
static int check_sized(Core *c) {
    int32_t t = c->sized_head, prev = -1;
    for (int32_t s = c->s.pool_head; s >= 0; s = c->a.pool_next[s]) {
        if (c->size[s] <= 0) continue;
        if (t != s || c->sized_prev[t] != prev) break;
        prev = t;
        t = c->sized_next[t];
    }
    if (t < 0 && c->sized_tail == prev) return 0;
    snprintf(c->error, sizeof c->error,
             "the pool's storages with a size differ from the pool at step %d", c->s.step);
    return -1;
}

/* choose()'s scan for h_DTR and DTRLocal, the score a quotient of two ints: each candidate's
   words are loaded once and its estimate (clearly_above) computed inline. The scan runs at
   every eviction over some 600 candidates on InceptionV4's thrashing runs, and the runtime is
   bound by the instructions it executes, not its loads (a run at 0.2005 executes 15.9G in
   under a second, cachegrind); through clearly_above and score the scan took 58 of them a
   candidate, here 28. The same decisions as the generic loop below, candidate by candidate.

   It goes through the pool's storages with a size only. A storage of no size scores inf, and
   take_candidate takes an inf only while the runner-up's score is inf: so where the
   runner-up the sized storages give scores below inf, the storages of no size change neither
   the victim nor the runner-up (nor the cut, nor where the scan stops), and the scan counts
   them as the pool's scan would, every one up to where it stops. Else the whole pool is
   scanned. */
static inline __attribute__((always_inline)) int choose_ratio(Core *c, int local, int32_t *victim,
                                                              double *best, int32_t *runner,
                                                              double *runner_score) {
    RatioScan r;
    if (c->verify_hash && check_sized(c) < 0) return -1;
    if (scan_ratio(c, local, c->sized_head, c->sized_next, &r) < 0) return -1;
    if (r.b2 < INFINITY) {
        if (r.stopped < 0) {
            r.evaluated = c->s.pool_count;
        } else { /* (its place in the pool) */
            int unsized = 0;
            r.evaluated = 1;
            for (int32_t s = c->s.pool_head; s != r.stopped; s = c->a.pool_next[s]) {
                r.evaluated++;
                unsized |= c->size[s] <= 0;
            }
            c->scans_stopped_unsized += unsized;
        }
    } else {
        if (scan_ratio(c, local, c->s.pool_head, c->a.pool_next, &r) < 0) return -1;
        c->scans_whole_pool++;
    }
    c->s.heuristic_evals += r.evaluated;
    *victim = r.v1;
    *best = r.b1;
    *runner = r.v2;
    *runner_score = r.b2;
    return 0;
}

/* simrd's scan: the LAST candidate whose score is <= the best so far; stop at a score of 0.
   The runner-up (for the event log) is the candidate the same rule picks without the victim. */
static int choose(Core *c, int64_t request, int32_t *victim, double *best, int32_t *runner,
                  double *runner_score) {
    if (c->policy == P_TWOPHASE)
        return choose_twophase(c, request, victim, best, runner, runner_score);
    if (c->policy == P_DTR) return choose_ratio(c, 0, victim, best, runner, runner_score);
    if (c->policy == P_DTRLOCAL) return choose_ratio(c, 1, victim, best, runner, runner_score);
    Arrays *a = &c->a;
    double b1 = INFINITY, b2 = INFINITY;
    int32_t v1 = -1, v2 = -1;
    int64_t evaluated = 0;
    for (int32_t s = c->s.pool_head; s >= 0; s = a->pool_next[s]) {
        double x;
        evaluated++;
        if (b2 > 0 && b2 < INFINITY && clearly_above(c, s, b2)) continue;
        if (score(c, s, &x) < 0) return -1;
        take_candidate(s, x, &v1, &b1, &v2, &b2);
        if (x == 0) break;
    }
    c->s.heuristic_evals += evaluated;
    *victim = v1;
    *best = b1;
    *runner = v2;
    *runner_score = b2;
    return 0;
}

#endif /* DTR_POLICY_H */
