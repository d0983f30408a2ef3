/* Part of the C runtime: the fresh neighbourhood searches of a pass swept over the storage ids
   (topological storage graphs, every DTR trace), and the rows they write.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_SWEEPS_H
#define DTR_SWEEPS_H

/* Writes base's fresh rows (what search() finds): the block of both rows as built in scratch
   (interleaved as row()'s; its resident neighbours and its own bit are settled here), word by
   word, so that only the words that change are hashed and marked. */
static void put_rows(Core *c, int32_t base, int forward, uint64_t *built, int64_t total) {
    Arrays *a = &c->a;
    Graph g = graph_of(c, forward);
    const int32_t *off = g.off, *items = g.items, *len = g.len;
    uint64_t *block = row(c, forward ? a->fwd_int : a->rev_int, base);
    uint64_t *frontier_rows = built + 1;
    const int32_t *e = items + off[base];
    for (int32_t k = 0; k < len[base]; k++)
        if (a->material[e[k]]) row_set(frontier_rows, e[k]);
    row_clear(frontier_rows, base); /* a search never lists its base */
    /* most words stay as they were: blocks of 16 are compared first (word by word, put_rows
       took 20% of a fresh InceptionV4 run at 0.20; by blocks the run takes 4.5 s, not 4.7 s) */
    Py_ssize_t BW = 2 * c->words;
    for (Py_ssize_t x = 0; x < BW; x += 16) {
        Py_ssize_t end = x + 16 < BW ? x + 16 : BW;
        uint64_t diff = 0;
        for (Py_ssize_t y = x; y < end; y++) diff |= block[y] ^ built[y];
        if (!diff) continue;
        if (c->tracking)
            for (Py_ssize_t y = x; y < end; y++) put_word_as(c, &block[y], built[y], 1);
        else
            memcpy(block + x, built + x, sizeof(uint64_t) * (end - x));
    }
    PUT(c, (forward ? a->fwd_sum : a->rev_sum)[base], total);
    mark_fresh(c, base, forward);
    c->searches++;
}

/* The fresh searches of a pass's bases, up to 64 * SWEEP_WORDS at a time, for a topological
   storage graph.

   Each storage the bases reach gets a label of W words (W = bases / 64, rounded up): bit j set
   when base j reaches it through evicted storages. The bases' evicted neighbours are seeded
   with their bits, and every evicted storage passes its label on to its neighbours; an
   evicted storage's label then says whose interior it is in, a resident one's whose frontier.
   Ids in order are a topological order (every edge goes from a lower id to a higher one), so
   one sweep over the ids (ascending forward, descending backward) takes each storage after
   every storage that can pass it a bit: the region is walked once per chunk of bases, without
   a search first. Plain searches walk it once per base, and the bases of one computation
   mostly border the same region (on the LSTM their interiors add up to about three times the
   region: a fresh run at 0.22 took 0.53x the time). It is also cheaper than shared_pass's
   closures, which stay for storage graphs whose ids are not in order, with many bases too: an
   Unrolled GAN run whose passes often have more than 64 took 0.48x the time, a walk on
   InceptionV4 near 0.233 0.61x.

   Labels are wider than one word because InceptionV4's passes have ~150 bases, over 500: with
   64 bases a sweep its region was walked 2.4 times per pass at 0.20 (176M storages visited
   where 73M were distinct per pass), 3.3 times at 0.235. A storage's label is non-zero exactly
   while its bit in act (evicted) or res (resident) is set. */
#define SWEEP_WORDS 8

static inline __attribute__((always_inline)) void
sweep_chunk(Core *c, const int32_t *bases, int k, int forward, const int W) {
    Arrays *a = &c->a;
    Graph g = graph_of(c, forward);
    const int32_t *off = g.off, *items = g.items, *len = g.len;
    const uint8_t *material = a->material;
    Py_ssize_t GW = c->words;
    uint64_t *lab = c->sweep_lab, *flab = c->sweep_flab, *act = c->sweep_act, *res = c->sweep_res;
    uint64_t *rows = c->label_rows;
    int64_t total[64 * SWEEP_WORDS];
    Py_ssize_t pending = 0, lo = GW, hi = -1, rlo = GW, rhi = -1;
    for (int j = 0; j < k; j++) {
        int32_t base = bases[j];
        const int32_t *e = items + off[base];
        for (int32_t x = 0; x < len[base]; x++) {
            int32_t u = e[x];
            if (material[u]) continue;
            if (!test_bit(act, u)) {
                set_bit(act, u);
                pending++;
                if ((u >> 6) < lo) lo = u >> 6;
                if ((u >> 6) > hi) hi = u >> 6;
            }
            lab[(Py_ssize_t)u * W + (j >> 6)] |= (uint64_t)1 << (j & 63);
        }
    }
    memset(rows, 0, sizeof(uint64_t) * 2 * GW * k);
    memset(total, 0, sizeof(int64_t) * k);
    Py_ssize_t visited = 0, edges = 0;
    for (Py_ssize_t x = forward ? lo : hi; pending > 0; x += forward ? 1 : -1) {
        /* storages taken one after another mostly have the same label word (on the LSTM it
           changes at one in four): each word's bits and compute are gathered while it stays
           and given to its bases at once (a word at a time: whole labels change more often) */
        uint64_t word, run[SWEEP_WORDS], run_bits[SWEEP_WORDS], L[SWEEP_WORDS];
        int64_t run_cost[SWEEP_WORDS];
        for (int i = 0; i < W; i++) run[i] = run_bits[i] = 0, run_cost[i] = 0;
        while ((word = act[x]) != 0) {
            int b = forward ? __builtin_ctzll(word) : 63 - __builtin_clzll(word);
            act[x] = word & ~((uint64_t)1 << b);
            pending--;
            int32_t v = (int32_t)((x << 6) + b);
            uint64_t *lv = lab + (Py_ssize_t)v * W;
            int64_t cost = a->compute[v];
            visited++;
            for (int i = 0; i < W; i++) {
                L[i] = lv[i];
                lv[i] = 0;
                if (L[i] != run[i]) {
                    for (uint64_t m = run[i]; m; m &= m - 1) {
                        int j = (i << 6) + __builtin_ctzll(m);
                        rows[2 * (j * GW + x)] |= run_bits[i];
                        total[j] += run_cost[i];
                    }
                    run[i] = L[i];
                    run_bits[i] = 0;
                    run_cost[i] = 0;
                }
                run_bits[i] |= (uint64_t)1 << b;
                run_cost[i] += cost;
            }
            const int32_t *e = items + off[v];
            edges += len[v];
            for (int32_t y = 0; y < len[v]; y++) {
                int32_t w = e[y];
                int resident = material[w];
                uint64_t *lw = (resident ? flab : lab) + (Py_ssize_t)w * W, any = 0;
                for (int i = 0; i < W; i++) {
                    any |= lw[i];
                    lw[i] |= L[i];
                }
                /* reached before? One word is loaded anyway; several, the bit is quicker */
                if (W == 1 ? any != 0 : test_bit(resident ? res : act, w)) continue;
                if (resident) {
                    set_bit(res, w);
                    if ((w >> 6) < rlo) rlo = w >> 6;
                    if ((w >> 6) > rhi) rhi = w >> 6;
                } else {
                    set_bit(act, w);
                    pending++;
                }
            }
        }
        for (int i = 0; i < W; i++)
            for (uint64_t m = run[i]; m; m &= m - 1) {
                int j = (i << 6) + __builtin_ctzll(m);
                rows[2 * (j * GW + x)] |= run_bits[i];
                total[j] += run_cost[i];
            }
    }
    for (Py_ssize_t x = rlo; x <= rhi; x++) {
        uint64_t word = res[x], run[SWEEP_WORDS], run_bits[SWEEP_WORDS];
        for (int i = 0; i < W; i++) run[i] = run_bits[i] = 0;
        res[x] = 0;
        while (word) {
            int b = __builtin_ctzll(word);
            word &= word - 1;
            uint64_t *fw = flab + (Py_ssize_t)((x << 6) + b) * W;
            for (int i = 0; i < W; i++) {
                if (fw[i] != run[i]) {
                    for (uint64_t m = run[i]; m; m &= m - 1)
                        rows[2 * (((i << 6) + __builtin_ctzll(m)) * GW + x) + 1] |= run_bits[i];
                    run[i] = fw[i];
                    run_bits[i] = 0;
                }
                run_bits[i] |= (uint64_t)1 << b;
                fw[i] = 0;
            }
        }
        for (int i = 0; i < W; i++)
            for (uint64_t m = run[i]; m; m &= m - 1)
                rows[2 * (((i << 6) + __builtin_ctzll(m)) * GW + x) + 1] |= run_bits[i];
    }
    c->visited += visited;
    c->edges_seen += edges;
    for (int j = 0; j < k; j++)
        put_rows(c, bases[j], forward, rows + 2 * j * GW, total[j]);
}

static void sweep_pass(Core *c, const int32_t *bases, Py_ssize_t nb, int forward) {
    Py_ssize_t most = 64 * (Py_ssize_t)c->sweep_words;
    c->sweep_passes++;
    for (Py_ssize_t first = 0; first < nb; first += most) {
        int k = nb - first < most ? (int)(nb - first) : (int)most;
        if (k > c->sweep_widest) c->sweep_widest = k;
        /* one copy of the chunk per width, so that each one's loops over W are unrolled */
        switch ((k + 63) >> 6) {
        case 1: sweep_chunk(c, bases + first, k, forward, 1); break;
        case 2: sweep_chunk(c, bases + first, k, forward, 2); break;
        case 3: sweep_chunk(c, bases + first, k, forward, 3); break;
        case 4: sweep_chunk(c, bases + first, k, forward, 4); break;
        case 5: sweep_chunk(c, bases + first, k, forward, 5); break;
        case 6: sweep_chunk(c, bases + first, k, forward, 6); break;
        case 7: sweep_chunk(c, bases + first, k, forward, 7); break;
        default: sweep_chunk(c, bases + first, k, forward, SWEEP_WORDS); break;
        }
    }
}

#endif /* DTR_SWEEPS_H */
