/* The compiled encoder's vocabulary tables (part of _bpe.c's one translation unit, included
   once): every token by its bytes, and the cut table of the character boundaries tokens span.
   Built once per Encoder, read-only after: any number of threads read them. */
#ifndef TP_BPE_TABLES_H
#define TP_BPE_TABLES_H

#include "_bpe_base.h"

/* ------------------------------------------------------------------------------------------ */
/* The vocabulary: every token by its bytes                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct { uint64_t hash; size_t offset; uint32_t len, id; } LongSlot;   /* len == 0: empty */

/* The short tokens (up to SHORT bytes) by their keys, in two tables of buckets of one 64-byte line
   each: tokens of up to TINY bytes (most of a merge's look-ups that get past the filter), their key
   in one word (the bytes, the length in the top byte), five to a bucket; longer ones, their key's
   two words, three to a bucket. A bucket is filled in order (an empty slot ends it), a full one
   goes on in the next; about four fifths of the slots are used. Dense (about 13 and 21 bytes a
   token), so that a probe, one line read in no order, finds it nearer the core than a sparser
   table's would. */
#define TINY 7
#define TINY_SLOTS 5
#define MID_SLOTS 3
typedef struct { uint64_t key[TINY_SLOTS]; uint32_t id[TINY_SLOTS]; uint32_t pad; } TinyBucket; /* key 0: empty */
typedef struct { uint64_t lo[MID_SLOTS], hi[MID_SLOTS]; uint32_t id[MID_SLOTS]; uint32_t pad; } MidBucket; /* hi 0: empty */

typedef struct {
    PyObject_HEAD
    int mode;
    uint32_t byte_rank[256];
    uint32_t *pair_rank;    /* 65,536: the id of each two-byte token, NONE if none */
    Block tiny_block;       /* TinyBucket[tiny_buckets]: tokens of 1 to TINY bytes */
    TinyBucket *tiny;
    uint64_t tiny_buckets;
    Block mid_block;        /* MidBucket[mid_buckets]: tokens of TINY + 1 to SHORT bytes */
    MidBucket *mid;
    uint64_t mid_buckets;
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

/* A key's home bucket among `count` (any count below 2^24): its hash's low 24 bits (the filter's
   are above them) scaled to the count. */
TP_INLINE uint64_t bucket_of(uint64_t h, uint64_t count) { return ((h & 0xFFFFFFu) * count) >> 24; }

TP_INLINE uint32_t short_rank(const Encoder *e, Key key, uint64_t h) {
    uint64_t bits = filter_bits(h);
    if ((*filter_word(e, h) & bits) != bits) return NONE;
    if ((key.hi >> 56) <= TINY) {
        uint64_t word = key.lo | key.hi, b = bucket_of(h, e->tiny_buckets);
        for (;;) {
            const TinyBucket *t = &e->tiny[b];
            unsigned hit = 0;
            for (unsigned q = 0; q < TINY_SLOTS; q++) hit |= (unsigned)(t->key[q] == word) << q;
            if (TP_LIKELY(hit)) return t->id[__builtin_ctz(hit)];
            if (t->key[TINY_SLOTS - 1] == 0) return NONE;
            b = b + 1 == e->tiny_buckets ? 0 : b + 1;
        }
    }
    uint64_t b = bucket_of(h, e->mid_buckets);
    for (;;) {
        const MidBucket *t = &e->mid[b];
        unsigned hit = 0;
        for (unsigned q = 0; q < MID_SLOTS; q++) hit |= (unsigned)(((t->lo[q] ^ key.lo) | (t->hi[q] ^ key.hi)) == 0) << q;
        if (TP_LIKELY(hit)) return t->id[__builtin_ctz(hit)];
        if (t->hi[MID_SLOTS - 1] == 0) return NONE;
        b = b + 1 == e->mid_buckets ? 0 : b + 1;
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
    size_t tinies = 0, mids = 0, longs = 0, long_total = 0, count = 0;
    const uint8_t *p;
    size_t len;
    uint32_t id;
    int more;
    tokens->pos = 0;
    while ((more = tokens_next(tokens, &p, &len, &id)) > 0) {
        count++;
        if (id > self->max_id) self->max_id = id;
        if (len > SHORT) { longs++; long_total += len; }
        else if (len > TINY) mids++;
        else if (len > 0) tinies++;
    }
    if (more < 0) return -1;
    self->pair_rank = malloc(65536 * sizeof(uint32_t));
    uint64_t long_size = table_size(longs);
    uint64_t filter_words = 64; /* about ten bits a token */
    while (filter_words * 64 < 10 * (uint64_t)(tinies + mids)) filter_words *= 2;
    /* about four fifths of the slots used */
    self->tiny_buckets = tinies / 4 + 1;
    self->mid_buckets = mids * 5 / 12 + 1;
    self->long_bytes = malloc(long_total + 1);
    if (!self->pair_rank || !self->long_bytes || block_new(&self->tiny_block, self->tiny_buckets * sizeof(TinyBucket)) < 0
        || block_new(&self->mid_block, self->mid_buckets * sizeof(MidBucket)) < 0
        || block_new(&self->long_block, long_size * sizeof(LongSlot)) < 0
        || block_new(&self->filter_block, filter_words * sizeof(uint64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    memset(self->pair_rank, 0xFF, 65536 * sizeof(uint32_t));
    for (int b = 0; b < 256; b++) self->byte_rank[b] = NONE;
    self->tiny = self->tiny_block.data;
    self->mid = self->mid_block.data;
    self->longs = self->long_block.data;
    self->long_mask = long_size - 1;
    self->filter = self->filter_block.data;
    self->filter_mask = filter_words - 1;
    size_t offset = 0;
    tokens->pos = 0;
    while (tokens_next(tokens, &p, &len, &id) > 0) {
        if (len == 0) continue;
        if (len == 1) self->byte_rank[p[0]] = id;
        if (len == 2) self->pair_rank[(p[0] << 8) | p[1]] = id;
        if (len <= SHORT) {
            Key key = short_key(p, len, p); /* (bytes one at a time) */
            uint64_t h = key_hash(key);
            self->filter[(h >> 24) & self->filter_mask] |= filter_bits(h);
            if (len <= TINY) {
                uint64_t b = bucket_of(h, self->tiny_buckets);
                unsigned q;
                for (;;) {
                    for (q = 0; q < TINY_SLOTS && self->tiny[b].key[q] != 0; q++) {}
                    if (q < TINY_SLOTS) break;
                    b = b + 1 == self->tiny_buckets ? 0 : b + 1;
                }
                self->tiny[b].key[q] = key.lo | key.hi;
                self->tiny[b].id[q] = id;
            } else {
                uint64_t b = bucket_of(h, self->mid_buckets);
                unsigned q;
                for (;;) {
                    for (q = 0; q < MID_SLOTS && self->mid[b].hi[q] != 0; q++) {}
                    if (q < MID_SLOTS) break;
                    b = b + 1 == self->mid_buckets ? 0 : b + 1;
                }
                self->mid[b].lo[q] = key.lo;
                self->mid[b].hi[q] = key.hi;
                self->mid[b].id[q] = id;
            }
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
    block_free(&self->tiny_block);
    block_free(&self->mid_block);
    block_free(&self->long_block);
    block_free(&self->filter_block);
}

#endif
