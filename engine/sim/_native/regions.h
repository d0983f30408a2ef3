/* Part of the C runtime: the maintained evicted neighbourhoods (interiors, frontiers and their compute) of every storage.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_REGIONS_H
#define DTR_REGIONS_H

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
    /* most words stay as they were: blocks of 8 are compared first (word by word, put_rows
       took 20% of a fresh InceptionV4 run at 0.20; by blocks the run takes 4.5 s, not 4.7 s) */
    Py_ssize_t GW = c->words;
    for (Py_ssize_t x = 0; x < GW; x += 8) {
        Py_ssize_t end = x + 8 < GW ? x + 8 : GW;
        uint64_t diff = 0;
        for (Py_ssize_t y = x; y < end; y++)
            diff |= (interior[y] ^ interior_rows[y]) | (frontier[y] ^ frontier_rows[y]);
        if (!diff) continue;
        for (Py_ssize_t y = x; y < end; y++) {
            put_word(c, &interior[y], interior_rows[y]);
            put_word(c, &frontier[y], frontier_rows[y]);
        }
    }
    PUT(c, (forward ? a->fwd_sum : a->rev_sum)[base], total);
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

   Labels are wider than one word because InceptionV4's passes have ~150 bases, up to 500: with
   64 bases a sweep its region was walked 2.4 times per pass at 0.20 (176M storages visited
   where 73M were distinct per pass), 3.3 times at 0.235. A storage's label is non-zero exactly
   while its bit in act (evicted) or res (resident) is set. */
#define SWEEP_WORDS 8

static inline __attribute__((always_inline)) void
sweep_chunk(Core *c, const int32_t *bases, int k, int forward, const int W) {
    Arrays *a = &c->a;
    const int32_t *off = forward ? c->ch_off : c->pa_off;
    const int32_t *items = forward ? c->ch_items : c->pa_items;
    const int32_t *len = forward ? a->ch_len : a->pa_len;
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
                        rows[2 * j * GW + x] |= run_bits[i];
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
                rows[2 * j * GW + x] |= run_bits[i];
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
                        rows[(2 * ((i << 6) + __builtin_ctzll(m)) + 1) * GW + x] |= run_bits[i];
                    run[i] = fw[i];
                    run_bits[i] = 0;
                }
                run_bits[i] |= (uint64_t)1 << b;
                fw[i] = 0;
            }
        }
        for (int i = 0; i < W; i++)
            for (uint64_t m = run[i]; m; m &= m - 1)
                rows[(2 * ((i << 6) + __builtin_ctzll(m)) + 1) * GW + x] |= run_bits[i];
    }
    c->visited += visited;
    c->edges_seen += edges;
    for (int j = 0; j < k; j++)
        put_rows(c, bases[j], forward, rows + 2 * j * GW, rows + (2 * j + 1) * GW, total[j]);
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

#endif /* DTR_REGIONS_H */
