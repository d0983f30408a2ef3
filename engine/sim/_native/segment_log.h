/* Part of the C runtime: the trajectory log (see trajectory.h): the words each segment changed,
   encoded and applied, the log's compaction, and its limit.
   core.c includes the parts once, in order, as one translation unit (so their static
   functions inline across parts as they did in one file). */
#ifndef DTR_SEGMENT_LOG_H
#define DTR_SEGMENT_LOG_H

static int log_reserve(Core *c, Py_ssize_t need) {
    return RESERVE(c->log, c->log_cap, need, 65536);
}

/* A segment's changed words, encoded: a jump from the segment's start applies
   words[i] ^= x, x = old ^ new. Per word, a varint of (the zigzagged difference from the
   previous word's index) << 7 | a code: 64 + b when x is the single bit b (an eviction flips
   one tensor's bit in the neighbourhood rows of the tensors around it: 40% of the words of
   InceptionV4's thrashing runs), else (x's first nonzero byte) << 3 | (its length - 1),
   followed by those bytes of x. About 6 bytes a word instead of 12 (index and value): the
   rows a change touches are far apart in the arena. Words back at their old value are left
   out. At most ENCODED_MAX bytes a word. In the same pass (one read of each word) the open
   segment's marks are cleared and its changed words go into the state hash (see hash.h). */
#define ENCODED_MAX 15
static Py_ssize_t close_words(Core *c, uint8_t *out) {
    const int32_t *idx = c->dirty_list.items;
    const uint64_t *old = c->dirty_old, *words = (const uint64_t *)c->arena;
    Py_ssize_t n = c->dirty_list.len;
    uint8_t *o = out;
    int64_t prev = 0, count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t w = idx[i];
        c->dirty[w >> 6] = 0; /* every bit set there is a word of this list, cleared with it */
        uint64_t now = words[w], x = old[i] ^ now;
        if (!x) continue;
        hash_word(c, w, x);
        int lo = __builtin_ctzll(x) >> 3, hi = (63 - __builtin_clzll(x)) >> 3;
        int64_t d = (int64_t)idx[i] - prev;
        prev = idx[i];
        int single = !(x & (x - 1));
        uint64_t code =
            single ? 64 + (uint64_t)__builtin_ctzll(x) : (uint64_t)(lo << 3 | (hi - lo));
        uint64_t v = ((((uint64_t)d << 1) ^ (uint64_t)(d >> 63)) << 7) | code;
        while (v >= 0x80) {
            *o++ = (uint8_t)(v | 0x80);
            v >>= 7;
        }
        *o++ = (uint8_t)v;
        if (!single) {
            x >>= 8 * lo;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* all 8 bytes at once (a loop of single bytes was a quarter of this function's
               instructions): those past hi lie within this word's ENCODED_MAX, overwritten by
               the next word's or past the segment's end */
            memcpy(o, &x, 8);
            o += hi - lo + 1;
#else
            for (int b = lo; b <= hi; b++, x >>= 8) *o++ = (uint8_t)x;
#endif
        }
        count++;
    }
    c->dirty_list.len = 0;
    c->words_logged += count;
    return o - out;
}

/* Apply a segment's encoded words to the arena (in the state at the segment's start). */
static void apply_segment(uint64_t *words, const uint8_t *in, Py_ssize_t len) {
    const uint8_t *end = in + len;
    int64_t at = 0;
    while (in < end) {
        uint64_t v = 0;
        int shift = 0;
        for (;;) {
            uint8_t b = *in++;
            v |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
            shift += 7;
        }
        uint64_t z = v >> 7;
        at += (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        if (v & 64) { /* a single bit */
            words[at] ^= (uint64_t)1 << (v & 63);
            continue;
        }
        int lo = (int)(v >> 3) & 7, n = (int)(v & 7) + 1;
        uint64_t x = 0;
        for (int b = 0; b < n; b++) x |= (uint64_t)in[b] << (8 * b);
        in += n;
        words[at] ^= x << (8 * lo);
    }
}

/* Compaction is in place, in address order (a copy would hold the log twice at the peak:
   0.5-0.8 GB more on a thrashing band): each point's range slides down, never over a range
   not moved yet. A point copied from another (a jump's) shares its range. */
typedef struct {
    Py_ssize_t off, len, i;
} Range;

/* What the points' frame stacks and their und lists take: they count in the log's limit. */
static inline Py_ssize_t frame_bytes(const Core *c) {
    return (Py_ssize_t)sizeof(Frame) * c->fr_len + (Py_ssize_t)sizeof(int32_t) * c->ul_len;
}

/* What the log's limit counts besides the words: the frame stacks and the checkpoints. */
static inline Py_ssize_t kept_bytes(const Core *c) {
    return frame_bytes(c) + c->ck_count * (Py_ssize_t)c->arena_bytes;
}

static int compare_ranges(const void *a, const void *b) {
    Py_ssize_t x = ((const Range *)a)->off, y = ((const Range *)b)->off;
    return (x > y) - (x < y);
}

/* Slide the ranges (in elements of elem bytes) down to the start of base; each range's off
   becomes its new offset. Returns the elements kept. */
static Py_ssize_t slide_down(char *base, size_t elem, Range *ranges, Py_ssize_t n) {
    qsort(ranges, n, sizeof(Range), compare_ranges);
    Py_ssize_t at = 0, from = -1, to = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Range *r = &ranges[k];
        if (r->off == from) {
            r->off = to;
            continue;
        }
        from = r->off;
        to = at;
        memmove(base + elem * at, base + elem * r->off, elem * r->len);
        r->off = at;
        at += r->len;
    }
    return at;
}

/* The log is append-only: a run rewrites the segments it executes, and what the previous run
   had logged for them becomes garbage. Compact when the garbage outweighs the live part. */
static void compact_frames(Core *c) {
    Py_ssize_t frames = 0, und = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++) {
        if (c->pts[i].bare) continue; /* nothing kept */
        frames += c->pts[i].fs_top - c->pts[i].fr_low;
        und += c->pts[i].und_top - c->pts[i].ul_low;
    }
    if (c->fr_len < 2 * frames + 4096 && c->ul_len < 2 * und + 4096) return;
    Range *ranges = (Range *)PyMem_Malloc(sizeof(Range) * (c->n_pts + 1));
    if (!ranges) return; /* keep them as they are: compaction is only an economy */
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++)
        if (!c->pts[i].bare && c->pts[i].fs_top > c->pts[i].fr_low)
            ranges[n++] = (Range){c->pts[i].fr_off, c->pts[i].fs_top - c->pts[i].fr_low, i};
    c->fr_len = slide_down((char *)c->fr_log, sizeof(Frame), ranges, n);
    for (Py_ssize_t k = 0; k < n; k++) c->pts[ranges[k].i].fr_off = ranges[k].off;
    n = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++)
        if (!c->pts[i].bare && c->pts[i].und_top > c->pts[i].ul_low)
            ranges[n++] = (Range){c->pts[i].und_off, c->pts[i].und_top - c->pts[i].ul_low, i};
    c->ul_len = slide_down((char *)c->ul_log, sizeof(int32_t), ranges, n);
    for (Py_ssize_t k = 0; k < n; k++) c->pts[ranges[k].i].und_off = ranges[k].off;
    PyMem_Free(ranges);
    c->frame_compactions++;
}

static void compact_log(Core *c) {
    compact_frames(c);
    Py_ssize_t live = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++) live += c->pts[i].log_len;
    c->log_live = live;
    /* near the limit too, when the garbage takes half the room left: it must not push the
       next run past the limit (see log_limit). Not at every run: moving a log of hundreds
       of MB costs more than a merged run (milliseconds). */
    int near_limit =
        c->log_limit > 0 && 2 * (c->log_len - live) > c->log_limit - live - kept_bytes(c);
    if (c->log_len < 2 * live + (1 << 16) && !near_limit) return;
    Range *ranges = (Range *)PyMem_Malloc(sizeof(Range) * (c->n_pts + 1));
    if (!ranges) return;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < c->n_pts; i++)
        if (c->pts[i].log_len > 0) ranges[n++] = (Range){c->pts[i].log_off, c->pts[i].log_len, i};
    c->log_len = slide_down((char *)c->log, 1, ranges, n);
    for (Py_ssize_t k = 0; k < n; k++) c->pts[ranges[k].i].log_off = ranges[k].off;
    PyMem_Free(ranges);
    c->log_compactions++;
}

/* Whether n more bytes would take the log past a limit (see log_limit). Within a run, once
   true with no checkpoints left it stays true: the log, its frame stacks and the run's bytes
   only grow until the run ends, and no checkpoint is taken past the limit (room_for_log
   sheds them first). */
static inline int past_log_limit(Core *c, Py_ssize_t n) {
    return (c->log_limit > 0 && c->log_len + n + kept_bytes(c) > c->log_limit) ||
           (c->resuming && c->run_log_limit > 0 && c->run_bytes > c->run_log_limit);
}

#endif /* DTR_SEGMENT_LOG_H */
