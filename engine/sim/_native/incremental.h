/* Part of the C runtime: reverse searches updated in place instead of walked again.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file).

   After a computation, every storage on the new storages' forward frontiers gets a fresh
   reverse search (after_compute), and on the thrashing traces most of these searches find what
   the same storage's previous search found, less the storages just computed: in a cascade a
   storage q below the rebuilt chain is searched again at each of its steps, and at each step
   the chain's next storage leaves q's interior. Of the reverse sweeps' visits, 75% on the LSTM
   at 0.22 (88.7% of the bases), 67% on the TreeLSTM at 0.09, 57% on InceptionV4 at 0.20 were
   in passes where every base's rows were still its previous fresh search's, untouched since but
   by the new storages (counters in a scratch build).

   The rows of q are what a fresh search found when nothing that search read has changed since:
   the residence of its interior and frontier storages, their compute, their parent lists (a
   change anywhere else neither joins nor cuts the region: a storage outside it is no parent of
   q or of an interior storage). So every change to those is logged (`note_change`: evictions,
   materializations, an operator adding a parent or compute to a storage), each storage keeps
   where the log stood when its reverse rows were last made fresh, and the log since then is
   checked against the rows. When the new storages' parents are all resident (a computation's
   inputs are), a new storage c in q's interior leaves it for the frontier, with its compute, and
   reached nothing beyond itself; c's parents stay on q's frontier while a child of theirs is q
   or still interior. That is the fresh search's result, word for word (tests/test_native.py
   runs the switch both ways and compares the whole state). An eviction keeps rows fresh too
   (regions.h absorb_into): the evicted storage's fresh reverse rows folded into fresh rows are
   what a fresh search finds after it, where the storage graph has no cycle.

   The log is the walk's own: a restored or jumped-to state did not come through it, so every
   restore starts it afresh (`forget_fresh`). */
#ifndef DTR_INCREMENTAL_H
#define DTR_INCREMENTAL_H

/* beyond this many entries the log starts over (16 MB); a storage whose rows are older is
   searched from scratch */
#define CHANGES_MAX ((Py_ssize_t)1 << 22)

static void note_change(Core *c, int32_t s) {
    if (!c->incremental) return;
    if (c->n_changes == c->changes_cap) {
        if (c->n_changes >= CHANGES_MAX) {
            c->n_changes = 0;
            c->changes_valid_from = 0;
            c->changes_mark = 0;
            memset(c->rev_fresh_at, 0, sizeof(int64_t) * ((size_t)c->n + 1));
            memset(c->fwd_fresh_at, 0, sizeof(int64_t) * ((size_t)c->n + 1));
        } else if (RESERVE(c->changes, c->changes_cap, c->n_changes + 1, 4096) < 0) {
            PyErr_Clear(); /* out of memory: searches from scratch from here on */
            c->incremental = 0;
            return;
        }
    }
    c->changes[c->n_changes++] = s;
}

/* The state did not come through the log (restored, jumped to): no rows count as fresh. The
   entry written here keeps a row made fresh at this very position from counting. */
static void forget_fresh(Core *c) {
    if (!c->incremental) return;
    note_change(c, -1);
    c->changes_valid_from = c->n_changes;
}

static inline void mark_fresh(Core *c, int32_t base, int forward) {
    (forward ? c->fwd_fresh_at : c->rev_fresh_at)[base] = (int64_t)c->n_changes + 1;
}

/* Whether q's rows of one direction are its last fresh search's, nothing they read changed
   since but the storages of the log from `mark` on (the computation's new ones). A storage an
   operator creates or writes into is logged before it gains its parents (new_operator): a
   forward search from one of them, or through one in its interior, now reaches it. */
static inline __attribute__((always_inline)) int fresh_rows(Core *c, int32_t q, Py_ssize_t mark,
                                                          int forward) {
    int64_t at = (forward ? c->fwd_fresh_at : c->rev_fresh_at)[q] - 1;
    if (at < (int64_t)c->changes_valid_from || at > (int64_t)mark) return 0;
    const uint64_t *block = row(c, forward ? c->a.fwd_int : c->a.rev_int, q);
    for (Py_ssize_t i = (Py_ssize_t)at; i < mark; i++) {
        int32_t v = c->changes[i];
        if (v == q || block_has(block, v)) return 0;
        if (!forward) continue;
        const int32_t *ps = c->pa_items + c->pa_off[v];
        for (int32_t k = 0; k < c->a.pa_len[v]; k++)
            if (ps[k] == q || row_test(block, ps[k])) return 0;
    }
    return 1;
}

static int still_fresh(Core *c, int32_t q, Py_ssize_t mark) {
    return fresh_rows(c, q, mark, 0);
}

static int64_t search_into(Core *c, int32_t base, int forward, uint64_t *interior,
                           uint64_t *frontier);

/* With verify_hash (the tests' walks): rows taken as fresh (kept in place, or derived) are a
   fresh search's, word for word. */
static int check_fresh(Core *c, int32_t q, int forward) {
    Py_ssize_t GW = c->words;
    if (!c->verify_rows) {
        c->verify_rows = (uint64_t *)PyMem_Calloc(2 * (size_t)GW, sizeof(uint64_t));
        if (!c->verify_rows) { PyErr_NoMemory(); return -1; }
    }
    uint64_t *interior = c->verify_rows, *frontier = c->verify_rows + 1; /* interleaved */
    memset(c->verify_rows, 0, sizeof(uint64_t) * 2 * GW);
    int64_t visited = c->visited, edges = c->edges_seen; /* not the run's work */
    int64_t total = search_into(c, q, forward, interior, frontier);
    c->visited = visited;
    c->edges_seen = edges;
    Arrays *a = &c->a;
    if (total != (forward ? a->fwd_sum : a->rev_sum)[q] ||
        memcmp(interior, row(c, forward ? a->fwd_int : a->rev_int, q),
               sizeof(uint64_t) * 2 * GW)) {
        snprintf(c->error, sizeof c->error,
                 "%s neighbourhood of storage %d taken as fresh differs from a fresh search "
                 "at step %d", forward ? "forward" : "reverse", q, c->s.step);
        return -1;
    }
    return 0;
}

/* The parents of a computation's new storages, once per computation for every base of its
   pass: which of each one's children are not resident, and which are. A parent stays on q's
   frontier while a child of it is q or in q's interior, which holds no resident storage, so
   shrink_reverse reads the children that are not resident and one mark for q instead of every
   child (InceptionV4 at 0.2005: 205M of the 260M children listed were resident). 0 when they
   are too many to mark (more than 64): shrink_reverse then scans every child. */
static int note_parents(Core *c, const int32_t *news, int count) {
    Arrays *a = &c->a;
    int64_t epoch = ++c->par_epoch;
    int np = 0;
    int32_t filled = 0;
    for (int i = 0; i < count; i++) {
        const int32_t *ps = c->pa_items + c->pa_off[news[i]];
        for (int32_t k = 0; k < a->pa_len[news[i]]; k++) {
            int32_t p = ps[k];
            if (c->par_stamp[p] == epoch) continue;
            if (np == 64) return 0;
            c->par_stamp[p] = epoch;
            c->par_idx[p] = np;
            c->nr_off[np] = filled;
            const int32_t *ch = c->ch_items + c->ch_off[p];
            for (int32_t j = 0; j < a->ch_len[p]; j++) {
                int32_t u = ch[j];
                if (!a->material[u]) {
                    c->nr_items[filled++] = u;
                    continue;
                }
                if (c->res_stamp[u] != epoch) {
                    c->res_stamp[u] = epoch;
                    c->res_mask[u] = 0;
                }
                c->res_mask[u] |= (uint64_t)1 << np;
            }
            np++;
        }
    }
    c->nr_off[np] = filled;
    return 1;
}

/* Whether parent p has a child that is q or in q's interior. */
static inline int keeps_parent(Core *c, int32_t p, int32_t q, const uint64_t *interior,
                               int noted) {
    Arrays *a = &c->a;
    if (noted && a->material[q]) {
        int i = c->par_idx[p];
        if (c->res_stamp[q] == c->par_epoch && (c->res_mask[q] >> i & 1)) return 1;
        for (int32_t e = c->nr_off[i]; e < c->nr_off[i + 1]; e++)
            if (row_test(interior, c->nr_items[e])) return 1;
        return 0;
    }
    const int32_t *ch = c->ch_items + c->ch_off[p];
    for (int32_t j = 0; j < a->ch_len[p]; j++)
        if (ch[j] == q || row_test(interior, ch[j])) return 1;
    return 0;
}

/* q's reverse rows, fresh before the new storages were computed, made fresh after it. */
static int shrink_reverse(Core *c, int32_t q, const int32_t *news, int count, int noted) {
    Arrays *a = &c->a;
    uint64_t *interior = row(c, a->rev_int, q), *frontier = row(c, a->rev_fr, q);
    int64_t total = a->rev_sum[q];
    for (int i = 0; i < count; i++) {
        int32_t s = news[i];
        uint64_t bit = (uint64_t)1 << (s & 63);
        Py_ssize_t w = 2 * (s >> 6);
        if (!(interior[w] & bit)) continue;
        put_word(c, &interior[w], interior[w] & ~bit);
        put_word(c, &frontier[w], frontier[w] | bit);
        total -= a->compute[s];
    }
    /* the parents the new storages that left were the only way to (those are now on the
       frontier: fresh rows had no new storage there, the new storages were not resident) */
    for (int i = 0; i < count; i++) {
        int32_t s = news[i];
        if (!row_test(frontier, s)) continue;
        const int32_t *ps = c->pa_items + c->pa_off[s];
        for (int32_t k = 0; k < a->pa_len[s]; k++) {
            int32_t p = ps[k];
            if (!row_test(frontier, p) || keeps_parent(c, p, q, interior, noted)) continue;
            put_word(c, &frontier[2 * (p >> 6)],
                     frontier[2 * (p >> 6)] & ~((uint64_t)1 << (p & 63)));
        }
    }
    PUT(c, a->rev_sum[q], total);
    mark_fresh(c, q, 0);
    c->searches++;
    c->incremental_searches++;
    return c->verify_hash ? check_fresh(c, q, 0) : 0;
}

/* A list of storages as word masks: pairs (words[j], bits[j]), at most `cap` of them; -1 when
   they need more. */
static inline int word_masks(const int32_t *ids, Py_ssize_t n, int32_t *words, uint64_t *bits,
                             int cap) {
    int m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t v = ids[i];
        int32_t w = v >> 6;
        int j = 0;
        while (j < m && words[j] != w) j++;
        if (j == m) {
            if (m == cap) return -1;
            words[m] = w;
            bits[m++] = 0;
        }
        bits[j] |= (uint64_t)1 << (v & 63);
    }
    return m;
}

/* The log's storages from `from` on, as a bitset (c->log_bits, its nonzero words listed in
   c->log_words), for the freshness checks of storages made fresh together: what
   fresh_rows(q, to, 0) tests entry by entry, one word AND for each word the log touches. */
typedef struct {
    int64_t from; /* -2: none yet */
    int n;        /* words listed; -1: the log holds an entry that is no storage */
    Py_ssize_t to;
} LogMasks;

/* c->log_bits back to zero (between calls it is) */
static void log_masks_clear(Core *c, LogMasks *m) {
    for (int j = 0; j < m->n; j++) c->log_bits[c->log_words[j]] = 0;
    m->n = 0;
}

static void log_masks(Core *c, LogMasks *m, int64_t from, Py_ssize_t to) {
    /* a row made fresh earlier than the last one's, up to the same entry: only the entries
       between the two are added (the passes' bases and the evictions' drivers come in the
       order of their ids, their positions in no order) */
    Py_ssize_t end = to;
    if (m->n >= 0 && m->from >= 0 && m->to == to && from < m->from) {
        end = (Py_ssize_t)m->from;
    } else {
        log_masks_clear(c, m);
        m->to = to;
    }
    m->from = from;
    /* (the count in a local: the list's stores, int32_t, could be its own for the compiler) */
    const int32_t *changes = c->changes;
    uint64_t *bits = c->log_bits;
    int32_t *words = c->log_words;
    int n = m->n;
    for (Py_ssize_t i = (Py_ssize_t)from; i < end; i++) {
        int32_t v = changes[i];
        if (v < 0) { /* (forget_fresh's entry: still_fresh decides, as it would) */
            m->n = n;
            log_masks_clear(c, m);
            m->n = -1;
            return;
        }
        uint64_t *w = &bits[v >> 6];
        if (!*w) words[n++] = v >> 6;
        *w |= (uint64_t)1 << (v & 63);
    }
    m->n = n;
}

/* Whether q's reverse rows are fresh at `to`, as still_fresh(c, q, to) tells, through the log's
   bitset kept in `m` (made again when q's rows were made fresh at another position). */
static inline int fresh_reverse(Core *c, LogMasks *m, int32_t q, const uint64_t *block,
                                Py_ssize_t to) {
    int64_t at = c->rev_fresh_at[q] - 1;
    if (at < (int64_t)c->changes_valid_from || at > (int64_t)to) return 0;
    if (at != m->from) log_masks(c, m, at, to);
    if (m->n < 0) return still_fresh(c, q, to);
    const uint64_t *bits = c->log_bits;
    if (bits[q >> 6] >> (q & 63) & 1) return 0;
    for (int j = 0; j < m->n; j++) {
        int32_t w = c->log_words[j];
        if ((block[2 * w] | block[2 * w + 1]) & bits[w]) return 0;
    }
    return 1;
}

/* shrink_fresh_bases for a computation of one new storage s, every computation of a cascade.
   Its ~200 bases share what their checks read: the log's storages since they were last fresh
   (most were made fresh together), s's parents and those parents' children that are not
   resident. Those are taken once (a bitset, word masks), and a base's tests become a few word
   ANDs: a thrashing run at 0.2005 spent 350 instructions a base in still_fresh and
   shrink_reverse, 36% of the 15.9G it executed (cachegrind), and here some 180, in a copy of
   the loop for the shape of the tables (docs/WALKS.md, "Instructions, not loads" and "A loop
   per shape, and the scan past storages of no size"). s's parents then leave a base's frontier a word
   at a time, not one by one: 74% of them leave it on InceptionV4's thrashing walks, and one by
   one, with their tests and marks, they took 5.9G of the 37.4G instructions of a walk of 40
   executions from 0.2005 (this function 12,586M -> 10,231M with the pair of marks below;
   docs/WALKS.md, "A base's parents a word at a time"). The same tests, and the same words
   written with the same values, as still_fresh and shrink_reverse (which take the bases these
   tables do not fit). */
#define ONE_PARENTS 64 /* note_parents marks up to 64 parents */
#define ONE_NR 256     /* word masks of the parents' children that are not resident */
#define ONE_NR_PARENT 16 /* of one parent's */
typedef struct {
    uint64_t bit;             /* the parent's bit in its word */
    int32_t word, idx;        /* its word; its index in note_parents' tables */
    int32_t nr_from, nr_n;    /* its children that are not resident: masks [from, from + n) */
} OneParent;

/* One word of a parent's children out of memory (mask, at word): the parent (bit, in the
   frontier word of entry `entry`) stays on a base's frontier when the base's interior holds one
   of them. */
typedef struct {
    uint64_t mask, bit;
    int32_t word, entry;
} KeepTest;

/* What the bases of one computation share, made when the first base with fresh rows needs it. */
typedef struct {
    int32_t s, s_word, np;
    uint64_t s_bit;
    int64_t s_compute;
    const int32_t *ps;  /* s's parents */
    int noted;          /* note_parents' answer */
    int64_t epoch;      /* its marks' */
    int listed;         /* a parent with too many children out of memory for masks */
    OneParent par[ONE_PARENTS];
    /* The frontier words that s's parents lie in, one entry each (s's own word first): the
       parents' bits there, which leave a base's frontier unless its interior keeps them
       (keep, per base; the tests say which), and which leave it all. */
    int n_pw, n_tests;
    int32_t pw_word[ONE_PARENTS + 1];
    uint64_t pw_bits[ONE_PARENTS + 1], keep[ONE_PARENTS + 1];
    KeepTest tests[ONE_NR];
    int32_t nr_word[ONE_NR];
    uint64_t nr_bits[ONE_NR];
} OneTables;

static void one_tables(Core *c, OneTables *t) {
    const int32_t np = t->np;
    t->noted = np <= ONE_PARENTS && note_parents(c, &t->s, 1);
    t->epoch = c->par_epoch;
    t->listed = 0;
    int32_t used = 0;
    t->pw_word[0] = t->s_word; /* entry 0: s's own word, whether or not a parent lies there */
    t->pw_bits[0] = t->keep[0] = 0;
    t->n_pw = 1;
    t->n_tests = 0;
    for (int32_t k = 0; t->noted && k < np; k++) {
        int32_t p = t->ps[k], i = c->par_idx[p];
        int n = word_masks(c->nr_items + c->nr_off[i], c->nr_off[i + 1] - c->nr_off[i],
                           t->nr_word + used, t->nr_bits + used,
                           ONE_NR - used < ONE_NR_PARENT ? ONE_NR - used : ONE_NR_PARENT);
        t->par[k] = (OneParent){(uint64_t)1 << (p & 63), p >> 6, i, used, n};
        if (n > 0) used += n; /* n < 0: keeps_parent reads the list */
        int j = 0;
        while (j < t->n_pw && t->pw_word[j] != p >> 6) j++;
        if (j == t->n_pw) {
            t->pw_word[t->n_pw] = p >> 6;
            t->pw_bits[t->n_pw] = t->keep[t->n_pw] = 0;
            t->n_pw++;
        }
        t->pw_bits[j] |= t->par[k].bit;
        if (n < 0) t->listed = 1; /* keeps_parent reads its list */
        for (int e = 0; e < n; e++) /* (the masks of parent k are used - n .. used) */
            t->tests[t->n_tests++] = (KeepTest){t->nr_bits[used - n + e], t->par[k].bit,
                                                t->nr_word[used - n + e], j};
    }
}

/* q a child of one of s's parents (which then stays on its frontier), or a parent with too
   many children out of memory for masks: parent by parent. Rare (InceptionV4's walk of 40
   executions from 0.2005: 28,599 of 44.1M bases). Returns the compute that left q's interior. */
static __attribute__((noinline)) int64_t
shrink_one_by_parent(Core *c, const OneTables *t, Marks *marks, int tracking, uint64_t *block,
                     Py_ssize_t q_at, int32_t q, uint64_t resident) {
    uint64_t *sw = block + 2 * t->s_word;
    const uint64_t in0 = sw[0], fr0 = sw[1];
    int64_t left = 0;
    if (in0 & t->s_bit) {
        if (tracking) {
            marks_word(c, marks, q_at + 2 * t->s_word, in0);
            if (!(fr0 & t->s_bit)) marks_word(c, marks, q_at + 2 * t->s_word + 1, fr0);
        }
        sw[0] = in0 & ~t->s_bit;
        sw[1] = fr0 | t->s_bit;
        left = t->s_compute;
    }
    for (int32_t k = 0; k < t->np; k++) {
        const OneParent *pp = &t->par[k];
        uint64_t *fw = block + 2 * pp->word + 1, f = *fw;
        if (!(f & pp->bit) || (resident >> pp->idx & 1)) continue;
        int kept;
        if (pp->nr_n < 0) {
            kept = keeps_parent(c, t->ps[k], q, block, 1);
        } else {
            kept = 0;
            for (int32_t j = pp->nr_from, end = j + pp->nr_n; j < end && !kept; j++)
                kept = (block[2 * t->nr_word[j]] & t->nr_bits[j]) != 0;
        }
        if (kept) continue;
        if (tracking) marks_word(c, marks, q_at + 2 * pp->word + 1, f);
        *fw = f & ~pp->bit;
    }
    return left;
}

/* The bases from bases[b] on, once the tables are made. NPW and NT > 0: a copy for that many
   frontier words and tests (a computation's bases share them; on InceptionV4's thrashing
   walks 1-3 words and up to 4 tests, padded to an even count, are 97% of the bases), with the
   tests' masks and the words' keep bits in locals instead of the tables' arrays; 0: any. */
#define ONE_NPW 3 /* the largest copy's */
#define ONE_NT 4
static inline __attribute__((always_inline)) Py_ssize_t
shrink_one_loop(Core *c, OneTables *t, LogMasks *log, int32_t *bases, Py_ssize_t b,
                Py_ssize_t nb, Py_ssize_t left, Py_ssize_t mark, const int NPW, const int NT,
                const int tracking) {
    Arrays *a = &c->a;
    const Py_ssize_t block_words = 2 * c->words;
    uint64_t *const rows = a->rev_int;
    const int32_t s_word = t->s_word;
    const uint64_t s_bit = t->s_bit;
    const int64_t s_compute = t->s_compute, epoch = t->epoch;
    const int64_t fresh_at = (int64_t)c->n_changes + 1; /* mark_fresh's */
    const int listed = NPW ? 0 : t->listed;
    /* the specialized copies' tables: test i's word (as a block offset), mask, and the bit it
       keeps in each frontier word (0 in the words it is not for); each word's offset and bits */
    Py_ssize_t tw[ONE_NT], pwo[ONE_NPW];
    uint64_t tm[ONE_NT], tb[ONE_NT][ONE_NPW], pwb[ONE_NPW];
    if (NPW) {
        for (int i = 0; i < NT; i++) {
            const int pad = i >= t->n_tests; /* a test that keeps nothing */
            tw[i] = pad ? 0 : 2 * (Py_ssize_t)t->tests[i].word;
            tm[i] = pad ? 0 : t->tests[i].mask;
            for (int j = 0; j < NPW; j++)
                tb[i][j] = !pad && t->tests[i].entry == j ? t->tests[i].bit : 0;
        }
        for (int j = 0; j < NPW; j++) {
            pwo[j] = 2 * (Py_ssize_t)t->pw_word[j] + 1;
            pwb[j] = t->pw_bits[j];
        }
    }
    int64_t shrunk = 0;
    /* arena word indexes of the first block and sum (marks by index, not by address) */
    const Py_ssize_t rows_at = ((const char *)rows - c->arena) >> 3;
    const Py_ssize_t sums_at = ((const char *)a->rev_sum - c->arena) >> 3;
    Marks marks = tracking ? marks_open(c) : (Marks){0};
    for (; b < nb; b++) {
        int32_t q = bases[b];
        uint64_t *block = rows + q * block_words; /* interior words at [2w], frontier at [2w+1] */
        const Py_ssize_t q_at = rows_at + q * block_words;
        if (!fresh_reverse(c, log, q, block, mark)) {
            bases[left++] = q;
            continue;
        }
        if (!t->noted || !a->material[q]) {
            if (tracking) marks_close(c, &marks);
            if (shrink_reverse(c, q, &t->s, 1, t->noted) < 0) return -1;
            if (tracking) marks = marks_open(c);
            continue;
        }
        int64_t total = a->rev_sum[q];
        uint64_t *sw = block + 2 * s_word;
        const uint64_t in0 = sw[0], fr0 = sw[1];
        uint64_t resident; /* s's parents that q is a child of (note_parents' marks) */
        if (!((in0 | fr0) & s_bit)) {
            /* s neither in q's interior nor on its frontier: nothing changes */
        } else if (!(resident = c->res_stamp[q] == epoch ? c->res_mask[q] : 0) && !listed) {
            /* q a child of none of s's parents (nearly every base). s leaves the interior for
               the frontier, and s's parents that no child but s linked to q (keeps_parent)
               leave the frontier: a word's at once, those without children out of memory
               always, the others as q's interior decides (s is in no parent's list of those,
               so the interior's s bit does not matter to them) */
            uint64_t keep[ONE_NPW];
            if (NPW) {
                for (int j = 0; j < NPW; j++) keep[j] = 0;
                for (int i = 0; i < NT; i++) { /* a child out of memory in q's interior keeps */
                    const uint64_t held = -(uint64_t)((block[tw[i]] & tm[i]) != 0);
                    for (int j = 0; j < NPW; j++) keep[j] |= tb[i][j] & held;
                }
            } else {
                for (int i = 0; i < t->n_tests; i++)
                    t->keep[t->tests[i].entry] |= t->tests[i].bit & -(uint64_t)(
                        (block[2 * t->tests[i].word] & t->tests[i].mask) != 0);
                keep[0] = t->keep[0];
                t->keep[0] = 0; /* (for the next base) */
            }
            const uint64_t in1 = in0 & ~s_bit;
            const uint64_t fr1 = (fr0 | s_bit) & ~((NPW ? pwb[0] : t->pw_bits[0]) & ~keep[0]);
            if (in1 != in0) total -= s_compute;
            /* the two words' marks lie side by side in one word: a pair of row words begins at
               an even word of the arena (build_arena aligns the tables to 64 bytes, and each
               is an even number of words long) */
            if (tracking) {
                const Py_ssize_t w = q_at + 2 * s_word;
                const uint64_t both = (uint64_t)3 << (w & 63);
                if ((marks.dirty[w >> 6] & both) != both) {
                    if (in1 != in0) marks_word(c, &marks, w, in0);
                    if (fr1 != fr0) marks_word(c, &marks, w + 1, fr0);
                }
            }
            sw[0] = in1;
            sw[1] = fr1;
            const int n_pw = NPW ? NPW : t->n_pw;
            for (int j = 1; j < n_pw; j++) {
                const Py_ssize_t o = NPW ? pwo[j] : 2 * (Py_ssize_t)t->pw_word[j] + 1;
                uint64_t drop;
                if (NPW) {
                    drop = pwb[j] & ~keep[j];
                } else {
                    drop = t->pw_bits[j] & ~t->keep[j];
                    t->keep[j] = 0;
                }
                uint64_t *fw = block + o, f = *fw, now = f & ~drop;
                if (now == f) continue;
                if (tracking) marks_word(c, &marks, q_at + o, f);
                *fw = now;
            }
        } else {
            total -= shrink_one_by_parent(c, t, &marks, tracking, block, q_at, q, resident);
        }
        if (tracking && a->rev_sum[q] != total)
            marks_word(c, &marks, sums_at + q, (uint64_t)a->rev_sum[q]);
        a->rev_sum[q] = total;
        c->rev_fresh_at[q] = fresh_at;
        shrunk++;
        if (c->verify_hash) {
            if (tracking) marks_close(c, &marks); /* (check_fresh marks nothing) */
            int failed = check_fresh(c, q, 0) < 0;
            if (tracking) marks = marks_open(c);
            if (failed) return -1;
        }
    }
    if (tracking) marks_close(c, &marks);
    c->searches += shrunk;
    c->incremental_searches += shrunk;
    return left;
}

/* The copies of shrink_one_loop: with the trajectory's marks and without (so that neither
   tests for them at every write), and for the common shapes of the tables. */
#define ONE_LOOP(NPW, NT)                                                                      \
    (c->tracking ? shrink_one_loop(c, t, log, bases, b, nb, left, mark, NPW, NT, 1)             \
                 : shrink_one_loop(c, t, log, bases, b, nb, left, mark, NPW, NT, 0))

static Py_ssize_t shrink_one_shaped(Core *c, OneTables *t, LogMasks *log, int32_t *bases,
                                    Py_ssize_t b, Py_ssize_t nb, Py_ssize_t left,
                                    Py_ssize_t mark) {
    if (t->noted && !t->listed && t->n_pw <= ONE_NPW && t->n_tests <= ONE_NT) {
        switch (t->n_pw * 8 + (t->n_tests + 1) / 2 * 2) { /* tests padded to an even count */
        case 8: return ONE_LOOP(1, 0);
        case 10: return ONE_LOOP(1, 2);
        case 12: return ONE_LOOP(1, 4);
        case 16: return ONE_LOOP(2, 0);
        case 18: return ONE_LOOP(2, 2);
        case 20: return ONE_LOOP(2, 4);
        case 24: return ONE_LOOP(3, 0);
        case 26: return ONE_LOOP(3, 2);
        case 28: return ONE_LOOP(3, 4);
        }
    }
    return ONE_LOOP(0, 0);
}
#undef ONE_LOOP

static Py_ssize_t shrink_fresh_one(Core *c, int32_t *bases, Py_ssize_t nb, int32_t s,
                                   Py_ssize_t mark) {
    Arrays *a = &c->a;
    LogMasks log = {.from = -2, .n = 0};
    const Py_ssize_t block_words = 2 * c->words;
    Py_ssize_t b = 0, left = 0;
    for (; b < nb; b++) { /* the tables wait for a base with fresh rows */
        int32_t q = bases[b];
        if (fresh_reverse(c, &log, q, a->rev_int + q * block_words, mark)) break;
        bases[left++] = q;
    }
    if (b < nb) {
        OneTables t;
        t.s = s;
        t.s_word = s >> 6;
        t.s_bit = (uint64_t)1 << (s & 63);
        t.s_compute = a->compute[s];
        t.ps = c->pa_items + c->pa_off[s];
        t.np = a->pa_len[s];
        one_tables(c, &t);
        left = shrink_one_shaped(c, &t, &log, bases, b, nb, left, mark);
    }
    log_masks_clear(c, &log);
    return left;
}

/* The reverse searches of a pass: the bases whose rows are still fresh but for the new
   storages are updated in place, the others left in bases[0..returned) for search_all
   (-1: an error). */
static Py_ssize_t shrink_fresh_bases(Core *c, int32_t *bases, Py_ssize_t nb, const int32_t *news,
                                     int count, Py_ssize_t mark) {
    if (!c->incremental) return nb;
    Arrays *a = &c->a;
    for (int i = 0; i < count; i++) { /* nothing beyond a new storage was reached through it */
        const int32_t *ps = c->pa_items + c->pa_off[news[i]];
        for (int32_t k = 0; k < a->pa_len[news[i]]; k++)
            if (!a->material[ps[k]]) return nb;
    }
    if (count == 1) return shrink_fresh_one(c, bases, nb, news[0], mark);
    Py_ssize_t left = 0;
    int noted = -1; /* note_parents' answer, once a base needs it */
    for (Py_ssize_t b = 0; b < nb; b++) {
        if (!still_fresh(c, bases[b], mark)) {
            bases[left++] = bases[b];
            continue;
        }
        if (noted < 0) noted = note_parents(c, news, count);
        if (shrink_reverse(c, bases[b], news, count, noted) < 0) return -1;
    }
    return left;
}

#endif /* DTR_INCREMENTAL_H */
