/* A thread's piece cache (part of _bpe.c's one translation unit, included once): what tiktoken
   gives each piece seen before, in fixed-size tables (a new piece overwrites an old one). */
#ifndef TP_BPE_CACHE_H
#define TP_BPE_CACHE_H

#include "_bpe_base.h"

/* ------------------------------------------------------------------------------------------ */
/* A thread's piece cache and scratch                                                         */
/* ------------------------------------------------------------------------------------------ */

/* A short piece's entry: its key, then its ids: v[0] = count << 24 | first id, v[1..3] the rest.
   Two entries a set, one 64-byte line: a new entry goes first, the first moves second. A piece of
   5 to WIDE_IDS ids keeps its ids from the fifth on in its set's overflow (eight words a set, a
   table of its own): at most one entry of a set is such a piece, and a new one drops the other.
   (A piece of many ids taking both entries of its set, as it once did, was dropped by any piece
   that came to that set after it, and took two with it: on Polish text with cl100k's ranks, a
   tenth of a second pass over the text merged again what it had merged in the first.) */
typedef struct { uint64_t lo, hi; uint32_t v[4]; } Entry;
#define ENTRY_IDS 4
#define WIDE_IDS 12
/* A row (direct-mapped, 256 bytes): a piece of 16 to 128 bytes, or a shorter one with more ids
   than an entry holds; its hash, length and ids, then its bytes. */
#define ROW_BYTES 128
#define ROW_IDS 28
typedef struct { uint64_t hash; uint32_t len, count; uint32_t ids[ROW_IDS]; uint8_t bytes[ROW_BYTES]; } Row;

#define SHORT_ROW_BITS 4096

enum { STAT_HITS, STAT_MISSES, STAT_UNCACHED, STAT_TOKENS, STAT_PARTS, STAT_PART_HITS, STAT_COUNT };

typedef struct {
    PyObject_HEAD
    Block entry_block;
    Entry *entries;
    Block over_block;       /* uint32_t[8 * sets]: each set's overflow */
    uint32_t *over;
    uint64_t set_mask;      /* sets - 1 */
    Block row_block;
    Row *rows;
    uint64_t row_mask;
    uint8_t *text;          /* a text's UTF-8, when it is not read in place */
    size_t text_cap;
    Block pair_block;       /* PairMemo[PAIRS] */
    uint64_t *pairs;        /* a merge's pair (left id, right id) and the id they make (or NONE) */
    void *scratch;          /* the long merge's arrays: 12 bytes a byte of piece, and its blocks' */
    size_t scratch_cap;     /* in bytes of piece */
    uint64_t stats[STAT_COUNT];
    /* A bit per group of rows (a row's index, modulo SHORT_ROW_BITS): set when a piece of up to
       SHORT bytes is kept in one of them. A short piece that misses its entries reads its row only
       if its bit is set: such pieces (more ids than an entry holds) are rare, and the row, in
       megabytes read in no order, was the most of a missed short piece's wait for memory. */
    uint64_t short_rows[SHORT_ROW_BITS / 64];
    int busy;
} Cache;

TP_INLINE Entry *cache_set(const Cache *c, uint64_t h) {
    return &c->entries[2 * ((h >> 20) & c->set_mask)];
}

TP_INLINE Row *cache_row(const Cache *c, uint64_t h) {
    return &c->rows[(h >> 20) & c->row_mask];
}

/* Whether a short piece (hash h) may be in its row: its group's bit (short_rows). */
TP_INLINE int short_row_marked(const Cache *c, uint64_t h) {
    uint64_t bit = ((h >> 20) & c->row_mask) % SHORT_ROW_BITS;
    return (int)((c->short_rows[bit >> 6] >> (bit & 63)) & 1);
}

TP_INLINE void short_row_mark(Cache *c, uint64_t h) {
    uint64_t bit = ((h >> 20) & c->row_mask) % SHORT_ROW_BITS;
    c->short_rows[bit >> 6] |= (uint64_t)1 << (bit & 63);
}

/* Set h's overflow: the ids from the fifth on of the piece of more than ENTRY_IDS in it. */
TP_INLINE uint32_t *cache_over(const Cache *c, uint64_t h) {
    return &c->over[8 * ((h >> 20) & c->set_mask)];
}

TP_INLINE void keep_short(Cache *c, uint64_t h, Key key, const uint32_t *ids, size_t count) {
    if (count > WIDE_IDS) return;
    Entry *set = cache_set(c, h);
    set[1] = set[0];
    if (count > ENTRY_IDS) {
        memcpy(cache_over(c, h), ids + ENTRY_IDS, (count - ENTRY_IDS) * sizeof(uint32_t));
        if ((set[1].v[0] >> 24) > ENTRY_IDS) memset(&set[1], 0, sizeof(Entry)); /* its overflow was this */
    }
    set[0].lo = key.lo;
    set[0].hi = key.hi;
    set[0].v[0] = (uint32_t)(count << 24) | ids[0];
    for (size_t k = 1; k < ENTRY_IDS; k++) set[0].v[k] = k < count ? ids[k] : 0;
}

/* The piece's entry in its set (`key`), or NULL. */
TP_INLINE const Entry *find_short(const Entry *set, Key key) {
    /* each entry's two words compared at once (one branch an entry, the first taken most) */
    if (TP_LIKELY(((set[0].lo ^ key.lo) | (set[0].hi ^ key.hi)) == 0)) return &set[0];
    if (((set[1].lo ^ key.lo) | (set[1].hi ^ key.hi)) == 0) return &set[1];
    return NULL;
}

/* An entry's ids (the entry found in set h) to dst (all four words of the entry, and all eight of
   the set's overflow for a piece of more: dst has room); returns their count. */
TP_INLINE size_t entry_ids(const Cache *c, uint64_t h, const Entry *hit, uint32_t *dst) {
    size_t count = hit->v[0] >> 24;
    memcpy(dst, hit->v, sizeof(hit->v));
    dst[0] &= MAX_ID - 1;
    if (TP_UNLIKELY(count > ENTRY_IDS)) memcpy(dst + ENTRY_IDS, cache_over(c, h), 8 * sizeof(uint32_t));
    return count;
}

/* Keep ids[0:count] as the piece p[0:n]'s in a row (if they fit). */
TP_INLINE void keep_row(Row *row, uint64_t h, const uint8_t *p, size_t n, const uint32_t *ids, size_t count) {
    if (!row || count > ROW_IDS) return;
    row->hash = h;
    row->len = (uint32_t)n;
    row->count = (uint32_t)count;
    memcpy(row->ids, ids, count * sizeof(uint32_t));
    memcpy(row->bytes, p, n);
}

#endif
