/* Part of the C runtime: the state hash, and the tracked writes that mark each segment's
   changed words (the log and the hash take them when the segment closes).
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_HASH_H
#define DTR_HASH_H

/* ---- the state hash (walks only) ------------------------------------------------------------
   A walk's run that reaches a boundary in exactly the state the previous run had there goes on
   exactly as that run did (up to budget comparisons, checked separately), so it can take the
   rest over instead of replaying it. "Exactly the state" is tested by a 128-bit hash of the
   whole arena: the XOR over its words of hash_word(offset, value), the carry-less product of
   the value and a key drawn from the offset. It is linear in the value (the hashes of two
   values XOR to the hash of their XOR), so a segment's change to a word is one term, of
   old ^ new, folded in as the segment closes (close_segment, in the pass that encodes those
   same XORs for the log) rather than two at every write: InceptionV4's thrashing run at 0.2005
   makes 210M changing writes, to 156M distinct words of their segments, of which 89M differ
   when theirs closes. So between points the hash is the arena's as the open segment began
   (its changed words at their dirty_old values); a snapshot keeps those with the hash, and
   takes the invariant along. Collisions: keys are never 0 and a carry-less product of
   non-zero factors is never 0, so states one word apart never collide; two states apart in
   several words collide only if the keys of the differing words fit their differences (for
   two words, with keys without common factor, differences exactly equal to each other's
   keys): with the keys taken as random, a chance of 2**-64 per comparison, against some 10**9
   comparisons in all of InceptionV4's walk. With `verify_hash` every boundary recomputes the
   hash from scratch and compares (the tests). */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* The 128-bit carry-less (GF(2)[x]) product of a and b: one instruction where the build has
   PCLMULQDQ (setup.py), else a loop; the same value either way (tests/test_native.py). */
static inline void carryless_product_loop(uint64_t a, uint64_t b, uint64_t *lo, uint64_t *hi) {
    uint64_t l = 0, h = 0;
    for (int i = 0; i < 64; i++)
        if ((b >> i) & 1) {
            l ^= a << i;
            if (i) h ^= a >> (64 - i);
        }
    *lo = l;
    *hi = h;
}

#ifdef __PCLMUL__
#include <wmmintrin.h>
static inline void carryless_product(uint64_t a, uint64_t b, uint64_t *lo, uint64_t *hi) {
    __m128i p = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)a),
                                     _mm_cvtsi64_si128((long long)b), 0);
    *lo = (uint64_t)_mm_cvtsi128_si64(p);
    *hi = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(p, p));
}
#else
#define carryless_product carryless_product_loop
#endif

/* Arena word w with value v (or a change v = old ^ new of it) into the hash. The key is a
   bijection of w + 1, so never 0. */
static inline void hash_word(Core *c, Py_ssize_t w, uint64_t v) {
    if (!v) return;
    uint64_t lo, hi;
    carryless_product(mix64(((uint64_t)w + 1) * 0x9e3779b97f4a7c15ULL), v, &lo, &hi);
    c->s.h1 ^= lo;
    c->s.h2 ^= hi;
}

/* Room for one more changed word. dirty_old's capacity follows dirty_list's (it is only ever
   grown here), so dirty_list's capacity is the one to check. */
static int dirty_grow(Core *c) {
    if (vec_reserve(&c->dirty_list, c->dirty_list.len + 1) < 0) return -1;
    if (c->dirty_list.cap > c->dirty_old_cap) {
        uint64_t *grown =
            (uint64_t *)PyMem_Realloc(c->dirty_old, sizeof(uint64_t) * c->dirty_list.cap);
        if (!grown) { PyErr_NoMemory(); return -1; }
        c->dirty_old = grown;
        c->dirty_old_cap = c->dirty_list.cap;
    }
    return 0;
}

/* The open segment's marks, held in locals by a loop that marks many words: marked through the
   core (mark_dirty_word, mark_dirty), every mark reloads its fields (the rows' stores may alias
   them for the compiler) and mark_dirty computes the word's index from its address. A
   thrashing InceptionV4 walk marks some 4 words for each of a cascade's reverse rows kept in
   place, 17 instructions a mark (cachegrind). Between marks_open and marks_close nothing else
   may mark: a call that might closes them first and opens them again after. */
typedef struct {
    uint64_t *dirty, *old;
    int32_t *items;
    Py_ssize_t len, cap;
} Marks;

static inline Marks marks_open(const Core *c) {
    return (Marks){c->dirty, c->dirty_old, c->dirty_list.items, c->dirty_list.len,
                   c->dirty_list.cap};
}

static inline void marks_close(Core *c, const Marks *m) { c->dirty_list.len = m->len; }

/* Word w changed in the open segment, marked through m; old is its value before */
static inline __attribute__((always_inline)) void marks_word(Core *c, Marks *m, Py_ssize_t w,
                                                         uint64_t old) {
    uint64_t bit = (uint64_t)1 << (w & 63), *d = &m->dirty[w >> 6];
    if (*d & bit) return;
    *d |= bit;
    if (m->len == m->cap) {
        c->dirty_list.len = m->len;
        if (dirty_grow(c) < 0) {
            c->dirty_failed = 1;
            return;
        }
        *m = marks_open(c);
    }
    m->old[m->len] = old;
    m->items[m->len++] = (int32_t)w;
}

/* Arena word w changed in the open segment; old is its value before (kept at the first change
   only: the segment's log keeps old ^ new when it closes, see encode_segment). The steps of
   marks_word, through the core's fields: a single mark reads them once either way, and going
   through Marks cost a store of the list's length at every call (a walk of 40 executions from
   InceptionV4's 0.2005: 37.39G -> 37.64G instructions). */
static inline __attribute__((always_inline)) void mark_dirty_word(Core *c, Py_ssize_t w,
                                                              uint64_t old) {
    uint64_t bit = (uint64_t)1 << (w & 63);
    if (c->dirty[w >> 6] & bit) return;
    c->dirty[w >> 6] |= bit;
    if (c->dirty_list.len == c->dirty_list.cap && dirty_grow(c) < 0) {
        c->dirty_failed = 1;
        return;
    }
    c->dirty_old[c->dirty_list.len] = old;
    c->dirty_list.items[c->dirty_list.len++] = (int32_t)w;
}

/* The changed words marked so far belong to no segment (restore_snapshot, start_epoch). */
static void discard_dirty(Core *c) {
    for (Py_ssize_t i = 0; i < c->dirty_list.len; i++) {
        int32_t w = c->dirty_list.items[i];
        c->dirty[w >> 6] &= ~((uint64_t)1 << (w & 63));
    }
    c->dirty_list.len = 0;
}

/* Before a write to p (its word still holds the old value). */
static inline void mark_dirty(Core *c, const void *p) {
    Py_ssize_t w = ((const char *)p - c->arena) >> 3;
    mark_dirty_word(c, w, ((const uint64_t *)c->arena)[w]);
}

/* Tracked writes of one arena element: the word's dirty mark (the hash follows at the
   segment's close). */
#define PUT(c, lvalue, value)                                                                   \
    do {                                                                                        \
        __typeof__(lvalue) *p_ = &(lvalue);                                                     \
        __typeof__(lvalue) v_ = (value);                                                        \
        if ((c)->tracking && *p_ != v_) mark_dirty((c), p_);                                    \
        *p_ = v_;                                                                               \
    } while (0)

/* put_word where the caller knows whether the run keeps a trajectory (a copy of its loop for
   each case) */
static inline __attribute__((always_inline)) void put_word_as(Core *c, uint64_t *w, uint64_t v,
                                                              const int tracking) {
    if (*w == v) return;
    if (tracking) mark_dirty(c, w);
    *w = v;
}

/* Inlined everywhere (gcc kept it a call): most calls find the word unchanged, and a fresh
   InceptionV4 run at 0.2005 takes 1.6 s instead of 1.8 s with it inlined. */
static inline __attribute__((always_inline)) void put_word(Core *c, uint64_t *w, uint64_t v) {
    put_word_as(c, w, v, c->tracking);
}

/* A block of rows (both of a storage's rows of one direction, row()) about to be rewritten
   wholesale (memset, then bits set): keep its old words in row_old, and after the rewrite
   account for the words that changed. */
static inline void row_begin(Core *c, const uint64_t *r) {
    if (c->tracking) memcpy(c->row_old, r, sizeof(uint64_t) * 2 * c->words);
}

static inline void row_end(Core *c, uint64_t *r) {
    if (!c->tracking) return;
    const uint64_t *old = c->row_old;
    const Py_ssize_t n = 2 * c->words, at = ((const char *)r - c->arena) >> 3;
    /* most words stay as they were: compared 8 at a time first (as put_rows does) */
    for (Py_ssize_t x = 0; x < n; x += 8) {
        Py_ssize_t end = x + 8 < n ? x + 8 : n;
        uint64_t diff = 0;
        for (Py_ssize_t i = x; i < end; i++) diff |= r[i] ^ old[i];
        if (!diff) continue;
        for (Py_ssize_t i = x; i < end; i++)
            if (r[i] != old[i]) mark_dirty_word(c, at + i, old[i]);
    }
}

#endif /* DTR_HASH_H */
