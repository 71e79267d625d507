/* Merging a piece that misses the caches (part of _bpe.c's one translation unit, included once):
   tiktoken's byte_pair_merge, lowest rank first and leftmost on ties. */
#ifndef TP_BPE_MERGE_H
#define TP_BPE_MERGE_H

#include "_bpe_tables.h"
#include "_bpe_cache.h"

/* ------------------------------------------------------------------------------------------ */
/* Merging a piece                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Pieces of at most this many bytes merge by tiktoken's scan (n^2, on the stack); longer ones by
   an indexed heap (n log n). */
#define SCAN_MERGE 32

/* The pair memo: what two adjacent parts (by their ids) make, per thread, direct-mapped: 2 << 14
   words (256 KiB), a pair's key ((left + 1) << 24 | right) beside the id the two make (or NONE).
   For joins of more than SHORT bytes, whose look-up hashes all their bytes: a shorter join's
   look-up (its filter word, then its bucket) costs no more than the memo's. */
#define PAIR_BITS 14
#define PAIRS ((size_t)1 << PAIR_BITS)

/* The id of the token made of the parts `left` and `right` (ids; their bytes p[0:len]), or NONE. */
TP_INLINE uint32_t pair_of(const Encoder *e, Cache *c, uint32_t left, uint32_t right, const uint8_t *p, size_t len,
                           const uint8_t *limit) {
    uint64_t key = ((uint64_t)(left + 1) << 24) | right;
    uint64_t *slot = &c->pairs[2 * ((key * 0x9E3779B97F4A7C15ull) >> (64 - PAIR_BITS))];
    if (slot[0] == key) return (uint32_t)slot[1];
    uint32_t id = rank_of(e, p, len, limit);
    slot[0] = key;
    slot[1] = id;
    return id;
}

/* A join's look-up begun (a join of up to SHORT bytes: its key and hash worked out, its filter word
   and its bucket asked for), so that the two look-ups of a merge step wait for memory together
   instead of one after the other. */
typedef struct { Key key; uint64_t h; } Join;

TP_INLINE void join_begin(const Encoder *e, const uint8_t *p, size_t len, const uint8_t *limit, Join *j) {
    if (len <= SHORT) {
        j->key = short_key(p, len, limit);
        j->h = key_hash(j->key);
        TP_PREFETCH(filter_word(e, j->h));
        if (len <= TINY) TP_PREFETCH(&e->tiny[bucket_of(j->h, e->tiny_buckets)]);
        else TP_PREFETCH(&e->mid[bucket_of(j->h, e->mid_buckets)]);
    } else {
        j->key.lo = j->key.hi = j->h = 0;
    }
}

/* The id of the join begun as j: the parts `left` and `right` (ids), their bytes p[0:len]. */
TP_INLINE uint32_t join_end(const Encoder *e, Cache *c, uint32_t left, uint32_t right, const uint8_t *p, size_t len,
                            const uint8_t *limit, const Join *j) {
    if (len <= SHORT) return short_rank(e, j->key, j->h);
    return pair_of(e, c, left, right, p, len, limit);
}

/* tiktoken's byte_pair_merge of p[0:n] (n >= 2) by scanning; ids to out; returns their count. */
static size_t merge_scan(const Encoder *e, Cache *c, const uint8_t *p, size_t n, const uint8_t *limit, uint32_t *out) {
    uint32_t start[SCAN_MERGE + 1], rank[SCAN_MERGE], tok[SCAN_MERGE];
    size_t m = n;
    for (size_t k = 0; k < n; k++) {
        start[k] = (uint32_t)k;
        tok[k] = e->byte_rank[p[k]];
        rank[k] = k + 1 < n ? e->pair_rank[(p[k] << 8) | p[k + 1]] : NONE;
    }
    start[n] = (uint32_t)n;
    for (;;) {
        uint32_t best = NONE;
        size_t i = 0;
        for (size_t k = 0; k + 1 < m; k++) {
            if (rank[k] < best) { best = rank[k]; i = k; }
        }
        if (best == NONE) break;
        tok[i] = best;
        for (size_t k = i + 1; k + 1 < m; k++) {
            start[k] = start[k + 1];
            rank[k] = rank[k + 1];
            tok[k] = tok[k + 1];
        }
        start[m - 1] = start[m];
        m--;
        size_t right_len = i + 1 < m ? start[i + 2] - start[i] : 0, left_len = i > 0 ? start[i + 1] - start[i - 1] : 0;
        Join right, left;
        if (right_len) join_begin(e, p + start[i], right_len, limit, &right);
        if (left_len) join_begin(e, p + start[i - 1], left_len, limit, &left);
        rank[i] = right_len ? join_end(e, c, tok[i], tok[i + 1], p + start[i], right_len, limit, &right) : NONE;
        if (left_len) rank[i - 1] = join_end(e, c, tok[i - 1], tok[i], p + start[i - 1], left_len, limit, &left);
    }
    memcpy(out, tok, m * sizeof(uint32_t));
    return m;
}

/* The long merge's state. Part x (a position where a part begins) has next[x] and prev[x] and the
   rank of the pair it begins, rank[x] (NONE: no pair, or no part there). Positions are grouped in
   blocks of BLOCK; each block's least key, rank << 32 | position (the least rank, leftmost on
   ties: tiktoken's order), is bkey[block], and a 4-ary indexed heap orders the blocks by it. A
   merge changes at most three ranks; a block is scanned again only when its least key went up.
   The heap has a BLOCK-th of the parts, so it stays in the CPU's caches, where a heap of every part
   misses them on every level (a piece of 8 MiB: 4.4 s that way, under a second this way). 12
   bytes of scratch a byte of piece, and a little for the blocks. */
#define BLOCK_BITS 7
#define BLOCK ((size_t)1 << BLOCK_BITS)
#define NO_KEY UINT64_MAX
#define NOT_IN 0xFFFFFFFFu
#define KEY(rank, part) (((uint64_t)(rank) << 32) | (part))

typedef struct {
    uint32_t *rank, *next, *prev;
    uint64_t *bkey;   /* per block */
    uint64_t *slot;   /* slot[h + 3]: the key at heap index h (children of h: 4h+1..4h+4, one 32-byte group) */
    uint32_t *where;  /* per block: its heap index, or NOT_IN */
    size_t size, n;
} Merge;

TP_INLINE void heap_place(Merge *m, size_t k, uint64_t key) {
    m->slot[k + 3] = key;
    m->where[(uint32_t)key >> BLOCK_BITS] = (uint32_t)k;
}

static void heap_up(Merge *m, size_t k, uint64_t key) {
    while (k > 0) {
        size_t parent = (k - 1) / 4;
        uint64_t above = m->slot[parent + 3];
        if (above <= key) break;
        heap_place(m, k, above);
        k = parent;
    }
    heap_place(m, k, key);
}

static void heap_down(Merge *m, size_t k, uint64_t key) {
    for (;;) {
        size_t first = 4 * k + 1;
        if (first >= m->size) break;
        const uint64_t *kids = &m->slot[first + 3];
        size_t count = m->size - first < 4 ? m->size - first : 4, best = 0;
        for (size_t q = 1; q < count; q++) if (kids[q] < kids[best]) best = q;
        if (kids[best] >= key) break;
        heap_place(m, k, kids[best]);
        k = first + best;
    }
    heap_place(m, k, key);
}

/* Block b's key is now `key` (NO_KEY: none of its parts begins a pair): its place follows. */
static void block_set(Merge *m, size_t b, uint64_t key) {
    uint64_t old = m->bkey[b];
    m->bkey[b] = key;
    uint32_t at = m->where[b];
    if (key == NO_KEY) {
        if (at == NOT_IN) return;
        m->where[b] = NOT_IN;
        m->size--;
        if (at == m->size) return;
        uint64_t moved = m->slot[m->size + 3];
        if (moved < old) heap_up(m, at, moved);
        else heap_down(m, at, moved);
    } else if (at == NOT_IN) {
        m->size++;
        heap_up(m, m->size - 1, key);
    } else if (key < old) {
        heap_up(m, at, key);
    } else {
        heap_down(m, at, key);
    }
}

/* The least key among block b's ranks. */
static uint64_t block_scan(const Merge *m, size_t b) {
    size_t start = b << BLOCK_BITS, stop = start + BLOCK < m->n ? start + BLOCK : m->n;
    uint32_t least = NONE;
    for (size_t x = start; x < stop; x++) least = m->rank[x] < least ? m->rank[x] : least;
    if (least == NONE) return NO_KEY;
    size_t x = start;
    while (m->rank[x] != least) x++;
    return KEY(least, x);
}

/* Part x's pair now has `rank` (NONE: none). */
static void rank_set(Merge *m, uint32_t x, uint32_t rank) {
    m->rank[x] = rank;
    size_t b = x >> BLOCK_BITS;
    uint64_t key = rank == NONE ? NO_KEY : KEY(rank, x);
    if (key < m->bkey[b]) block_set(m, b, key);
    else if (m->bkey[b] != NO_KEY && (uint32_t)m->bkey[b] == x) block_set(m, b, block_scan(m, b));
}

static int ensure_scratch(Cache *c, size_t n) {
    if (n <= c->scratch_cap) return 0;
    size_t cap = n + n / 2 + 8;
    size_t blocks = (cap >> BLOCK_BITS) + 1;
    void *grown = malloc(cap * 3 * sizeof(uint32_t) + blocks * (2 * sizeof(uint64_t) + sizeof(uint32_t)) + 128);
    if (!grown) return -1;
    free(c->scratch);
    c->scratch = grown;
    c->scratch_cap = cap;
    return 0;
}

/* tiktoken's byte_pair_merge of p[0:n] by the blocks' heap; ids to out; returns their count, or
   (size_t)-1 if its scratch could not be had. */
static size_t merge_long(const Encoder *e, Cache *c, const uint8_t *p, size_t n, const uint8_t *limit,
                         uint32_t *out) {
    if (n >= NOT_IN) return (size_t)-1; /* positions are 32 bits (a piece of 4 GiB would need 48 GiB) */
    if (ensure_scratch(c, n) < 0) return (size_t)-1;
    size_t cap = c->scratch_cap, blocks = (cap >> BLOCK_BITS) + 1, used = (n + BLOCK - 1) >> BLOCK_BITS;
    uintptr_t base = ((uintptr_t)c->scratch + 31) & ~(uintptr_t)31;
    Merge m;
    m.slot = (uint64_t *)(base + 32) - 3; /* slot 3 on a 32-byte boundary */
    m.bkey = m.slot + 3 + blocks;
    m.where = (uint32_t *)(m.bkey + blocks);
    m.rank = m.where + blocks;
    m.next = m.rank + cap;
    m.prev = m.next + cap;
    m.size = 0;
    m.n = n;
    for (size_t k = 0; k < n; k++) {
        m.next[k] = (uint32_t)(k + 1);
        m.prev[k] = (uint32_t)k - 1; /* NOT_IN for the first */
        m.rank[k] = k + 1 < n ? e->pair_rank[(p[k] << 8) | p[k + 1]] : NONE;
    }
    for (size_t b = 0; b < used; b++) {
        m.bkey[b] = block_scan(&m, b);
        m.where[b] = NOT_IN;
        if (m.bkey[b] != NO_KEY) {
            m.slot[m.size + 3] = m.bkey[b];
            m.where[b] = (uint32_t)m.size;
            m.size++;
        }
    }
    for (size_t k = m.size; k-- > 0;) heap_down(&m, k, m.slot[k + 3]);
    while (m.size > 0) {
        uint32_t i = (uint32_t)m.slot[3];
        uint32_t gone = m.next[i];
        uint32_t after = m.next[gone];
        m.next[i] = after;
        if (after < n) m.prev[after] = i;
        rank_set(&m, gone, NONE);
        rank_set(&m, i, after < n ? rank_of(e, p + i, m.next[after] - i, limit) : NONE);
        uint32_t before = m.prev[i];
        if (before != NOT_IN) rank_set(&m, before, rank_of(e, p + before, after - before, limit));
    }
    size_t count = 0;
    for (size_t k = 0; k < n; k = m.next[k]) {
        size_t len = m.next[k] - k;
        out[count++] = len == 1 ? e->byte_rank[p[k]] : rank_of(e, p + k, len, limit);
    }
    return count;
}

TP_INLINE size_t merge(const Encoder *e, Cache *c, const uint8_t *p, size_t n, const uint8_t *limit, uint32_t *out) {
    if (n <= SCAN_MERGE) return merge_scan(e, c, p, n, limit, out);
    return merge_long(e, c, p, n, limit, out);
}

/* Whether merging token `id`'s bytes p[0:n] gives that token (dst: room for n ids, scratch). */
static int reachable(const Encoder *e, Cache *c, uint32_t id, const uint8_t *p, size_t n, const uint8_t *limit,
                     uint32_t *dst) {
#if defined(__GNUC__) || defined(__clang__)
    uint8_t known = __atomic_load_n(&e->reach[id], __ATOMIC_RELAXED);
#else
    uint8_t known = e->reach[id];
#endif
    if (known) return known == 1;
    size_t count = merge(e, c, p, n, limit, dst);
    if (count == (size_t)-1) return 0; /* (merged again by the caller, which reports the failure) */
    known = (count == 1 && dst[0] == id) ? 1 : 2;
#if defined(__GNUC__) || defined(__clang__)
    __atomic_store_n(&e->reach[id], known, __ATOMIC_RELAXED);
#else
    e->reach[id] = known;
#endif
    return known == 1;
}


/* ------------------------------------------------------------------------------------------ */
/* A token's last join (the merges a tokenizer.json lists)                                    */
/* ------------------------------------------------------------------------------------------ */

/* The length of the left part of the last join tiktoken's rank rule makes when it encodes the token
   p[0:n] (n >= 3, id `own`) alone, joining only pairs that make a token of a lower id; -1 if it
   stops with more than two parts (lower ids cannot build the token). start: room for n + 1
   words, rank for n. */
static long last_join(const Encoder *e, const uint8_t *p, size_t n, uint32_t own, uint32_t *start, uint32_t *rank) {
    const uint8_t *limit = p + n;
    for (size_t k = 0; k < n; k++) {
        start[k] = (uint32_t)k;
        uint32_t r = k + 1 < n ? e->pair_rank[(p[k] << 8) | p[k + 1]] : NONE;
        rank[k] = r < own ? r : NONE;
    }
    start[n] = (uint32_t)n;
    size_t m = n;
    while (m > 2) {
        uint32_t best = NONE;
        size_t i = 0;
        for (size_t k = 0; k + 1 < m; k++) {
            if (rank[k] < best) { best = rank[k]; i = k; }
        }
        if (best == NONE) return -1;
        for (size_t k = i + 1; k + 1 < m; k++) {
            start[k] = start[k + 1];
            rank[k] = rank[k + 1];
        }
        start[m - 1] = start[m];
        m--;
        uint32_t r = i + 1 < m ? rank_of(e, p + start[i], start[i + 2] - start[i], limit) : NONE;
        rank[i] = r < own ? r : NONE;
        if (i > 0) {
            r = rank_of(e, p + start[i - 1], start[i + 1] - start[i - 1], limit);
            rank[i - 1] = r < own ? r : NONE;
        }
    }
    return (long)start[1];
}

#endif
