/* Part of the C runtime: the fresh neighbourhood searches of a pass built from the evicted
   region's closures, for storage graphs whose ids are not a topological order.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_CLOSURES_H
#define DTR_CLOSURES_H

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
    Graph g = graph_of(c, forward);
    const int32_t *off = g.off, *items = g.items, *len = g.len;
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
            if (c->memo_hash[i] == h &&
                memcmp(c->memo + i * entry_words, li, sizeof(uint64_t) * W) == 0) {
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
            for (Py_ssize_t x = 0; x < GW; x++) put_word(c, &interior[2 * x], 0);
            memset(fresh, 0, sizeof(uint64_t) * GW);
        } else {
            const uint64_t *entry = c->memo + (Py_ssize_t)base_entry[b] * entry_words;
            for (Py_ssize_t x = 0; x < GW; x++) put_word(c, &interior[2 * x], entry[W + x]);
            memcpy(fresh, entry + W + GW, sizeof(uint64_t) * GW);
            total = c->memo_total[base_entry[b]];
        }
        const int32_t *e = items + off[base];
        for (int32_t k = 0; k < len[base]; k++)
            if (material[e[k]]) set_bit(fresh, e[k]);
        if (material[base]) clear_bit(fresh, base); /* a search never lists its base */
        for (Py_ssize_t x = 0; x < GW; x++) put_word(c, &frontier[2 * x], fresh[x]);
        PUT(c, (forward ? a->fwd_sum : a->rev_sum)[base], total);
        mark_fresh(c, base, forward);
        c->searches++;
    }
    return 0;
}

#endif /* DTR_CLOSURES_H */
