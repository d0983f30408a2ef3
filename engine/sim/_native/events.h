/* Part of the C runtime: the event log that run details and `diverge` read.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_EVENTS_H
#define DTR_EVENTS_H

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

#endif /* DTR_EVENTS_H */
