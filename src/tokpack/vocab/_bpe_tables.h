/* The compiled encoder's vocabulary tables (part of _bpe.c's one translation unit, included
   once): every token by its bytes, and the cut table of the character boundaries tokens span.
   Built once per Encoder, read-only after: any number of threads read them. */
#ifndef TP_BPE_TABLES_H
#define TP_BPE_TABLES_H

#include "_bpe_base.h"

/* ------------------------------------------------------------------------------------------ */
/* The vocabulary: every token by its bytes                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct { uint64_t lo, hi; uint32_t id, pad; } ShortSlot;               /* hi == 0: empty */
typedef struct { uint64_t hash; size_t offset; uint32_t len, id; } LongSlot;   /* len == 0: empty */

typedef struct {
    PyObject_HEAD
    int mode;
    uint32_t byte_rank[256];
    uint32_t *pair_rank;    /* 65,536: the id of each two-byte token, NONE if none */
    Block short_block;      /* ShortSlot[short_mask + 1] */
    ShortSlot *shorts;
    uint64_t short_mask;
    Block filter_block;     /* uint64_t[filter_mask + 1]: the short tokens' filter (filter_bits) */
    uint64_t *filter;
    uint64_t filter_mask;
    Block long_block;       /* LongSlot[long_mask + 1] */
    LongSlot *longs;
    uint64_t long_mask;
    uint8_t *long_bytes;    /* the long tokens' bytes */
    Py_ssize_t n_tokens;
    uint64_t *cut_pairs;    /* the cut table: bits over hashed sides of tokens' inner boundaries */
    uint8_t *sides;         /* per character of the Basic Multilingual Plane: which sides occur (sides_of) */
    uint64_t *left_sides, *right_sides; /* bits over the hashed sides on a boundary's left and right */
    uint8_t *reach;         /* per id: 0 not known yet, 1 merging its bytes gives it, 2 not */
    uint32_t max_id;
} Encoder;

/* The short tokens' filter: three bits of one word per token, by bits of its key's hash that the
   table's slot does not use. A piece that is no token (most of a merge's look-ups, and most of the
   pieces that miss the caches) is told apart here, in a table of about ten bits a token that stays
   in the CPU's caches, instead of by a probe of the megabytes of the table (most of a cold pass's
   time was those probes waiting for memory). Exact: a token's bits are always set. */
TP_INLINE uint64_t filter_bits(uint64_t h) {
    return ((uint64_t)1 << ((h >> 40) & 63)) | ((uint64_t)1 << ((h >> 46) & 63)) | ((uint64_t)1 << ((h >> 52) & 63));
}

TP_INLINE const uint64_t *filter_word(const Encoder *e, uint64_t h) { return &e->filter[(h >> 24) & e->filter_mask]; }

TP_INLINE uint32_t short_rank(const Encoder *e, Key key, uint64_t h) {
    uint64_t bits = filter_bits(h);
    if ((*filter_word(e, h) & bits) != bits) return NONE;
    uint64_t i = h & e->short_mask;
    for (;;) {
        const ShortSlot *slot = &e->shorts[i];
        if (slot->lo == key.lo && slot->hi == key.hi) return slot->id;
        if (slot->hi == 0) return NONE;
        i = (i + 1) & e->short_mask;
    }
}

static uint32_t long_rank(const Encoder *e, const uint8_t *p, size_t len, uint64_t h) {
    uint64_t i = h & e->long_mask;
    for (;;) {
        const LongSlot *slot = &e->longs[i];
        if (slot->len == 0) return NONE;
        if (slot->hash == h && slot->len == len && memcmp(e->long_bytes + slot->offset, p, len) == 0) return slot->id;
        i = (i + 1) & e->long_mask;
    }
}

/* The id of the token whose bytes are p[0:len] (len >= 2), or NONE. */
TP_INLINE uint32_t rank_of(const Encoder *e, const uint8_t *p, size_t len, const uint8_t *limit) {
    if (len == 2) return e->pair_rank[(p[0] << 8) | p[1]];
    if (len <= SHORT) {
        Key key = short_key(p, len, limit);
        return short_rank(e, key, key_hash(key));
    }
    return long_rank(e, p, len, bytes_hash(p, len));
}

/* The tokens the tables are built from: a dict {token bytes: id}, or a list of token bytes with
   their ids (an int64 array of the same length), or (list NULL, joined set) the tokens' bytes one
   after another, token k being joined[ends[k - 1]:ends[k]] (from 0 for the first), with ids. */
typedef struct {
    PyObject *dict, *list;
    const int64_t *ids;
    Py_ssize_t pos, count;
    const uint8_t *joined;
    const int64_t *ends;
    Py_ssize_t joined_len;
} Tokens;

/* The next token of t (its bytes and id): 1, or 0 at the end, or -1 with a Python error (a token
   not bytes, an id not an int from 0 to below MAX_ID). */
static int tokens_next(Tokens *t, const uint8_t **p, size_t *len, uint32_t *id) {
    PyObject *token;
    unsigned long long value;
    if (t->dict) {
        PyObject *rank;
        if (!PyDict_Next(t->dict, &t->pos, &token, &rank)) return 0;
        if (!PyBytes_Check(token) || !PyLong_Check(rank)) {
            PyErr_SetString(PyExc_TypeError, "ranks must map bytes to int");
            return -1;
        }
        value = PyLong_AsUnsignedLongLong(rank);
        if (value == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    } else {
        if (t->pos >= t->count) return 0;
        int64_t given = t->ids[t->pos];
        if (t->joined) {
            int64_t start = t->pos ? t->ends[t->pos - 1] : 0, end = t->ends[t->pos];
            if (start < 0 || end < start || end > (int64_t)t->joined_len) {
                PyErr_SetString(PyExc_ValueError, "the ends must rise, within the tokens' bytes");
                return -1;
            }
            t->pos++;
            token = NULL;
            *p = t->joined + start;
            *len = (size_t)(end - start);
        } else {
            token = PyList_GET_ITEM(t->list, t->pos++);
            if (!PyBytes_Check(token)) {
                PyErr_SetString(PyExc_TypeError, "tokens must be bytes");
                return -1;
            }
        }
        if (given < 0) {
            PyErr_Format(PyExc_ValueError, "id %lld is negative", (long long)given);
            return -1;
        }
        value = (unsigned long long)given;
    }
    if (value >= MAX_ID) {
        PyErr_Format(PyExc_ValueError, "id %llu is not below %u", value, MAX_ID);
        return -1;
    }
    if (token) {
        *p = (const uint8_t *)PyBytes_AS_STRING(token);
        *len = (size_t)PyBytes_GET_SIZE(token);
    }
    *id = (uint32_t)value;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* The cut table: the character boundaries some token spans (_bpe_encode.h cuts by it)        */
/* ------------------------------------------------------------------------------------------ */

#define CUT_BITS 20
#define RIGHT_SIDE ((uint64_t)1 << 40)

TP_INLINE uint64_t mix64(uint64_t h) {
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
    return h;
}

/* A side of a boundary: a whole character (its code point), or the last `count` bytes of one (on
   the left: their 6-bit payloads) or its first `count` bytes (on the right: its lead byte, then
   payloads). */
TP_INLINE uint64_t left_key(uint64_t value, unsigned count) {
    return count ? ((uint64_t)1 << 21) | ((uint64_t)count << 18) | value : value;
}
TP_INLINE uint64_t right_key(uint64_t value, unsigned count) {
    return count ? ((uint64_t)1 << 23) | ((uint64_t)count << 20) | value : value;
}
TP_INLINE uint64_t side_bit(uint64_t left, uint64_t right) { return mix64((left << 24) | right) >> (64 - CUT_BITS); }
TP_INLINE uint64_t side_hash(uint64_t key) { return mix64(key) >> (64 - CUT_BITS); }
TP_INLINE int bit_set(const uint64_t *bits, uint64_t bit) { return (int)((bits[bit >> 6] >> (bit & 63)) & 1); }
TP_INLINE void set_bit(uint64_t *bits, uint64_t bit) { bits[bit >> 6] |= (uint64_t)1 << (bit & 63); }

TP_INLINE size_t cp_size(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

/* Code point c on a boundary's left: whole (s 0) or its last s bytes. */
TP_INLINE uint64_t left_side(uint32_t c, unsigned s) {
    return s == 0 ? c : left_key(c & ((1u << (6 * s)) - 1), s);
}

/* Code point c (of `size` bytes) on a boundary's right: whole (r 0) or its first r bytes. */
TP_INLINE uint64_t right_side(uint32_t c, size_t size, unsigned r) {
    if (r == 0) return c;
    static const uint32_t leads[3] = {0xC0, 0xE0, 0xF0};
    uint64_t v = leads[size - 2] | (c >> (6 * (size - 1)));
    for (unsigned q = 1; q < r; q++) v = (v << 6) | ((c >> (6 * (size - 1 - q))) & 0x3F);
    return right_key(v, r);
}

/* The cut table (a bit per hashed pair of sides of every character boundary inside every token)
   and, per BMP character, which of its sides any token's boundary has on its left (bit s: whole
   if s is 0, else its last s bytes) or right (bit 4 + r): a boundary with no such side on either
   hand needs no look-up. A token's bytes parse as in any valid text that holds them: a head of
   continuation bytes (the end of a character begun before it), whole characters, maybe the
   beginning of one; a token no valid text holds is left out (it never equals a piece's bytes). */
static int build_cuts(Encoder *e, Tokens *tokens) {
    size_t words = ((size_t)1 << CUT_BITS) >> 6;
    e->cut_pairs = calloc(words, sizeof(uint64_t));
    uint64_t *left_sides = calloc(words, sizeof(uint64_t)), *right_sides = calloc(words, sizeof(uint64_t));
    e->sides = calloc(0x10000, 1);
    if (!e->cut_pairs || !left_sides || !right_sides || !e->sides) {
        free(left_sides);
        free(right_sides);
        return -1;
    }
    uint64_t keys_left[SHORT + 64], keys_right[SHORT + 64];
    /* a boundary between two ASCII characters, most of them, is hashed once (16,384 can occur) */
    uint64_t ascii_seen[128 * 128 / 64] = {0};
    tokens->pos = 0;
    const uint8_t *t;
    size_t e_;
    uint32_t id;
    while (tokens_next(tokens, &t, &e_, &id) > 0) {
        size_t b = 0;
        size_t k = b;
        while (k < e_ && (t[k] & 0xC0) == 0x80) k++;
        size_t head = k - b;
        if (head > 3 || e_ < 2) continue;
        uint64_t *kl = keys_left, *kr = keys_right;
        uint64_t *heap_l = NULL;
        if (e_ + 2 > SHORT + 64) {
            heap_l = malloc(2 * (e_ + 2) * sizeof(uint64_t));
            if (!heap_l) { free(left_sides); free(right_sides); return -1; }
            kl = heap_l;
            kr = heap_l + e_ + 2;
        }
        size_t m = 0;
        if (head > 0) {
            uint64_t v = 0;
            for (size_t q = b; q < k; q++) v = (v << 6) | (t[q] & 0x3F);
            kl[0] = left_key(v, (unsigned)head);
        }
        int valid = 1;
        while (k < e_) {
            uint32_t x = t[k], cp;
            size_t size;
            if (x < 0x80) { size = 1; cp = x; }
            else if (x >= 0xC2 && x < 0xE0) { size = 2; cp = x & 0x1F; }
            else if (x >= 0xE0 && x < 0xF0) { size = 3; cp = x & 0x0F; }
            else if (x >= 0xF0 && x < 0xF5) { size = 4; cp = x & 0x07; }
            else { valid = 0; break; }
            size_t stop = k + size < e_ ? k + size : e_;
            uint64_t v = x;
            for (size_t q = k + 1; q < stop; q++) {
                if ((t[q] & 0xC0) != 0x80) valid = 0;
                cp = (cp << 6) | (t[q] & 0x3F);
                v = (v << 6) | (t[q] & 0x3F);
            }
            if (!valid) break;
            if (k + size > e_) {
                kr[m] = right_key(v, (unsigned)(e_ - k));
            } else {
                kr[m] = cp;
                kl[m + 1] = cp;
            }
            m++;
            k += size;
        }
        if (valid) {
            for (size_t q = head > 0 ? 0 : 1; q < m; q++) {
                if (kl[q] < 0x80 && kr[q] < 0x80) {
                    uint64_t pair = kl[q] << 7 | kr[q];
                    if (bit_set(ascii_seen, pair)) continue;
                    set_bit(ascii_seen, pair);
                }
                set_bit(e->cut_pairs, side_bit(kl[q], kr[q]));
                set_bit(left_sides, side_hash(kl[q]));
                set_bit(right_sides, side_hash(kr[q] | RIGHT_SIDE));
            }
        }
        free(heap_l);
    }
    e->left_sides = left_sides;
    e->right_sides = right_sides;
    return 0;
}

/* Which of code point c's sides (c below 0x10000) any token's inner boundary has: bits 0-2 on its
   left (whole, or its last 1 or 2 bytes), bits 4-6 on its right; worked out the first time c is
   asked about (bit 7 says it was; threads that race write the same byte). */
TP_INLINE unsigned sides_of(const Encoder *e, uint32_t c) {
#if defined(__GNUC__) || defined(__clang__)
    uint8_t known = __atomic_load_n(&e->sides[c], __ATOMIC_RELAXED);
#else
    uint8_t known = e->sides[c];
#endif
    if (known & 0x80) return known & 0x7F;
    size_t size = cp_size(c);
    uint8_t flags = 0;
    for (unsigned q = 0; q < size; q++) {
        if (bit_set(e->left_sides, side_hash(left_side(c, q)))) flags |= (uint8_t)(1u << q);
        if (bit_set(e->right_sides, side_hash(right_side(c, size, q) | RIGHT_SIDE))) flags |= (uint8_t)(16u << q);
    }
#if defined(__GNUC__) || defined(__clang__)
    __atomic_store_n(&e->sides[c], (uint8_t)(flags | 0x80), __ATOMIC_RELAXED);
#else
    e->sides[c] = (uint8_t)(flags | 0x80);
#endif
    return flags;
}

/* Whether no token can span the boundary between code points a and b (0 may be wrong, 1 never is). */
static int cut_ok(const Encoder *e, uint32_t a, uint32_t b) {
    size_t size_a = cp_size(a), size_b = cp_size(b);
    unsigned left_flags = 15, right_flags = 15;
    if (a < 0x10000 && b < 0x10000) {
        left_flags = sides_of(e, a) & 15u;
        right_flags = sides_of(e, b) >> 4;
        if (left_flags == 0 || right_flags == 0) return 1;
    }
    for (unsigned s = 0; s < size_a; s++) {
        if (!((left_flags >> s) & 1)) continue;
        uint64_t left = left_side(a, s);
        for (unsigned r = 0; r < size_b; r++) {
            if (!((right_flags >> r) & 1)) continue;
            if (bit_set(e->cut_pairs, side_bit(left, right_side(b, size_b, r)))) return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Building the tables                                                                        */
/* ------------------------------------------------------------------------------------------ */

static uint64_t table_size(size_t n) {
    uint64_t size = 256;
    while (size < 2 * (uint64_t)n + 2) size *= 2;
    return size;
}

/* Build e's tables from `tokens`: the look-ups by bytes, and for `encoding` (an Encoder, not a
   rank rule's look-ups alone) the cut table, with every single byte required. -1 with a Python
   error set if it cannot (a token not bytes or an id not an int from 0 to below MAX_ID, a single
   byte missing, no memory). */
static int tables_build(Encoder *self, Tokens *tokens, int encoding) {
    size_t shorts = 0, longs = 0, long_total = 0, count = 0;
    const uint8_t *p;
    size_t len;
    uint32_t id;
    int more;
    tokens->pos = 0;
    while ((more = tokens_next(tokens, &p, &len, &id)) > 0) {
        count++;
        if (id > self->max_id) self->max_id = id;
        if (len > SHORT) { longs++; long_total += len; }
        else if (len > 0) shorts++;
    }
    if (more < 0) return -1;
    self->pair_rank = malloc(65536 * sizeof(uint32_t));
    uint64_t short_size = table_size(shorts), long_size = table_size(longs);
    uint64_t filter_words = 64; /* about ten bits a token */
    while (filter_words * 64 < 10 * (uint64_t)shorts) filter_words *= 2;
    self->long_bytes = malloc(long_total + 1);
    if (!self->pair_rank || !self->long_bytes || block_new(&self->short_block, short_size * sizeof(ShortSlot)) < 0
        || block_new(&self->long_block, long_size * sizeof(LongSlot)) < 0
        || block_new(&self->filter_block, filter_words * sizeof(uint64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    memset(self->pair_rank, 0xFF, 65536 * sizeof(uint32_t));
    for (int b = 0; b < 256; b++) self->byte_rank[b] = NONE;
    self->shorts = self->short_block.data;
    self->short_mask = short_size - 1;
    self->longs = self->long_block.data;
    self->long_mask = long_size - 1;
    self->filter = self->filter_block.data;
    self->filter_mask = filter_words - 1;
    /* The short tokens go in by their home slot's order (a counting sort on its top bits): written
       in the table's order, not at random over megabytes (several times faster for o200k's). */
    ShortSlot *staged = malloc((shorts ? shorts : 1) * sizeof(ShortSlot));
    ShortSlot *order = malloc((shorts ? shorts : 1) * sizeof(ShortSlot));
    int bucket_bits = 0;
    while (bucket_bits < 12 && ((uint64_t)1 << bucket_bits) < short_size) bucket_bits++;
    int bucket_shift = 0;
    while (((uint64_t)1 << (bucket_bits + bucket_shift)) < short_size) bucket_shift++;
    size_t *starts = calloc(((size_t)1 << bucket_bits) + 1, sizeof(size_t));
    if (!staged || !order || !starts) {
        free(staged);
        free(order);
        free(starts);
        PyErr_NoMemory();
        return -1;
    }
    size_t staged_count = 0, offset = 0;
    tokens->pos = 0;
    while (tokens_next(tokens, &p, &len, &id) > 0) {
        if (len == 0) continue;
        if (len == 1) self->byte_rank[p[0]] = id;
        if (len == 2) self->pair_rank[(p[0] << 8) | p[1]] = id;
        if (len <= SHORT) {
            Key key = short_key(p, len, p); /* (bytes one at a time) */
            staged[staged_count].lo = key.lo;
            staged[staged_count].hi = key.hi;
            staged[staged_count].id = id;
            staged[staged_count].pad = 0;
            starts[((key_hash(key) & self->short_mask) >> bucket_shift) + 1]++;
            staged_count++;
        } else {
            uint64_t h = bytes_hash(p, len);
            uint64_t i = h & self->long_mask;
            while (self->longs[i].len != 0) i = (i + 1) & self->long_mask;
            memcpy(self->long_bytes + offset, p, len);
            self->longs[i].hash = h;
            self->longs[i].offset = offset;
            self->longs[i].len = (uint32_t)len;
            self->longs[i].id = id;
            offset += len;
        }
    }
    for (size_t b = 1; b <= ((size_t)1 << bucket_bits); b++) starts[b] += starts[b - 1];
    for (size_t k = 0; k < staged_count; k++) {
        Key key = {staged[k].lo, staged[k].hi};
        order[starts[(key_hash(key) & self->short_mask) >> bucket_shift]++] = staged[k];
    }
    for (size_t k = 0; k < staged_count; k++) {
        const ShortSlot *t = &order[k];
        Key key = {t->lo, t->hi};
        uint64_t h = key_hash(key), i = h & self->short_mask;
        while (self->shorts[i].hi != 0) i = (i + 1) & self->short_mask;
        self->shorts[i] = *t;
        self->filter[(h >> 24) & self->filter_mask] |= filter_bits(h);
    }
    free(staged);
    free(order);
    free(starts);
    self->n_tokens = (Py_ssize_t)count;
    if (!encoding) return 0;
    for (int b = 0; b < 256; b++) {
        if (self->byte_rank[b] == NONE) {
            PyErr_Format(PyExc_ValueError, "the ranks lack the single byte %d", b);
            return -1;
        }
    }
    self->reach = calloc((size_t)self->max_id + 1, 1);
    if (!self->reach || build_cuts(self, tokens) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Free e's tables (any of them may be missing: a failed or absent build). */
static void tables_free(Encoder *self) {
    free(self->pair_rank);
    free(self->long_bytes);
    free(self->cut_pairs);
    free(self->sides);
    free(self->left_sides);
    free(self->right_sides);
    free(self->reach);
    block_free(&self->short_block);
    block_free(&self->long_block);
    block_free(&self->filter_block);
}

#endif
