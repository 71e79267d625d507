/* Encoding texts (part of _bpe.c's one translation unit, included once): a piece's ids (cache,
   vocabulary, cut, merge), the loop over a text's pieces, a str's UTF-8, and bytes checked as UTF-8. */
#ifndef TP_BPE_ENCODE_H
#define TP_BPE_ENCODE_H

#include "_bpe_scan.h"
#include "_bpe_merge.h"

/* ------------------------------------------------------------------------------------------ */
/* Cutting a piece where no token spans a boundary                                            */
/* ------------------------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------------------------ */

/* A piece that misses the caches and holds a character from U+2E80 on (CJK radicals onward: Han,
   kana, Hangul, full-width forms) is cut wherever no token can span the boundary between two of
   its characters, and each part is encoded alone, through the same caches: a run of Han or kana
   letters, a piece that rarely repeats, becomes parts that do (mostly single characters). In
   other scripts a missed word seldom has a cut, and when it has one its parts miss too.

   Exact: every part the merge ever holds is a token made of the piece's bytes, so none crosses a
   cut (it would be a token spanning it); no pair across a cut has a rank; the lowest-rank pair of
   the whole piece is therefore the lowest of the side it lies in (leftmost on ties, the left
   side's first), and each side goes through the very merges, in the same order, that it goes
   through alone. A piece with a cut is no token (that token would span the cut), so tiktoken's
   shortcut does not apply to it, and its parts are merged without the shortcut either: a part
   whose bytes are a token that merging them does not give (reach[] says; none in the published
   vocabularies) gets the merge's ids. */
#define CUT_FROM 0x2E80
#define NO_CUT ((size_t)-2)

static size_t piece_ids(const Encoder *e, Cache *c, const uint8_t *p, size_t n, const Key *key, uint64_t h,
                        const uint8_t *limit, uint32_t *dst, int part);

/* The ids of the piece p[0:n] cut where no token spans a boundary, each part encoded alone; NO_CUT
   if it has no cut; (size_t)-1 on a failed allocation. */
static size_t encode_cut(const Encoder *e, Cache *c, const uint8_t *p, size_t n, const uint8_t *limit,
                         uint32_t *dst) {
    size_t len, start = 0, count = 0;
    uint32_t a = decode_at(p, 0, &len);
    for (size_t k = len; k <= n; k += len) {
        uint32_t b = 0;
        if (k < n) {
            b = decode_at(p, k, &len);
            if (!cut_ok(e, a, b)) { a = b; continue; }
        } else {
            len = 1; /* (ends the loop) */
            if (start == 0) return NO_CUT;
        }
        Key key = {0, 0};
        uint64_t h = 0;
        if (k - start >= 2 && k - start <= SHORT) {
            key = short_key(p + start, k - start, limit);
            h = key_hash(key);
        } else if (k - start > SHORT) {
            h = bytes_hash(p + start, k - start);
        }
        size_t got = piece_ids(e, c, p + start, k - start, &key, h, limit, dst + count, 1);
        if (got == (size_t)-1) return got;
        count += got;
        c->stats[STAT_PARTS]++;
        start = k;
        a = b;
    }
    return count;
}

/* Whether p[0:n] holds a character from CUT_FROM on (lead bytes 0xE2 0xBA and above). */
TP_INLINE int has_wide(const uint8_t *p, size_t n) {
    for (size_t k = 0; k < n; k++) {
        if (p[k] >= 0xE3 || (p[k] == 0xE2 && k + 1 < n && p[k + 1] >= 0xBA)) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* A piece's ids                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* The ids of the piece p[0:n] (n >= 2; key: its key if n <= SHORT; h: its key's hash, or a longer
   piece's bytes_hash) written to dst
   (room for n ids); returns their count, or (size_t)-1 on a failed allocation.

   The piece cache holds what tiktoken gives each piece whole: a piece seen before is one probe.
   A piece it does not hold is looked up among the vocabulary's tokens (a token is that token:
   tiktoken's shortcut), else cut or merged; either way kept. A part of a cut piece (`part`) must
   get what merging its bytes gives instead: the same, except where its bytes are a token that
   merging them does not give (reachable() says; none in the published vocabularies), which is
   then merged and not kept. */
static size_t piece_ids(const Encoder *e, Cache *c, const uint8_t *p, size_t n, const Key *key_at, uint64_t h,
                        const uint8_t *limit, uint32_t *dst, int part) {
    Key key = *key_at;
    if (n <= 2) {
        /* a byte is its rank, a token of two bytes what merging them gives; a whole piece's is
           kept, so that it is a hit like any other (a branch on the length, mispredicted, cost
           more than the probe) */
        uint32_t id = n == 1 ? e->byte_rank[p[0]] : e->pair_rank[(p[0] << 8) | p[1]];
        if (id != NONE) {
            if (!part) {
                keep_short(c, h, key, &id, 1);
                c->stats[STAT_TOKENS]++;
            }
            dst[0] = id;
            return 1;
        }
    }
    if (TP_LIKELY(n <= SHORT)) {
        Entry *set = cache_set(c, h);
        const Entry *hit = find_short(set, key);
        if (TP_LIKELY(hit != NULL)) {
            size_t count = hit->v[0] >> 24;
            if (TP_UNLIKELY(part && count == 1 && !reachable(e, c, hit->v[0] & (MAX_ID - 1), p, n, limit, dst)))
                return merge_scan(e, c, p, n, limit, dst);
            entry_ids(c, h, hit, dst);
            c->stats[part ? STAT_PART_HITS : STAT_HITS]++;
            return count;
        }
        uint32_t id = n == 2 ? NONE : short_rank(e, key, h);
        if (id != NONE) {
            keep_short(c, h, key, &id, 1);
            c->stats[STAT_TOKENS]++;
            if (part && !reachable(e, c, id, p, n, limit, dst)) return merge_scan(e, c, p, n, limit, dst);
            dst[0] = id;
            return 1;
        }
        /* a piece of more ids than an entry holds is kept in a row */
        Row *row = cache_row(c, h);
        if (short_row_marked(c, h) && row->hash == h && row->len == n && memcmp(row->bytes, p, n) == 0) {
            memcpy(dst, row->ids, row->count * sizeof(uint32_t));
            c->stats[part ? STAT_PART_HITS : STAT_HITS]++;
            return row->count;
        }
        size_t count = NO_CUT;
        if (!part && has_wide(p, n)) count = encode_cut(e, c, p, n, limit, dst);
        if (count == NO_CUT) count = merge_scan(e, c, p, n, limit, dst);
        if (count == (size_t)-1) return count;
        if (count <= WIDE_IDS) keep_short(c, h, key, dst, count);
        else if (count <= ROW_IDS) {
            keep_row(row, h, p, n, dst, count);
            short_row_mark(c, h);
        }
        c->stats[count <= ROW_IDS ? STAT_MISSES : STAT_UNCACHED]++;
        return count;
    }
    Row *row = NULL;
    if (n <= ROW_BYTES) {
        row = cache_row(c, h);
        if (row->hash == h && row->len == n && memcmp(row->bytes, p, n) == 0) {
            size_t count = row->count;
            if (TP_UNLIKELY(part && count == 1 && !reachable(e, c, row->ids[0], p, n, limit, dst)))
                return merge(e, c, p, n, limit, dst);
            memcpy(dst, row->ids, count * sizeof(uint32_t));
            c->stats[part ? STAT_PART_HITS : STAT_HITS]++;
            return count;
        }
    }
    uint32_t id = long_rank(e, p, n, h);
    if (id != NONE) {
        keep_row(row, h, p, n, &id, 1);
        c->stats[STAT_TOKENS]++;
        if (part && !reachable(e, c, id, p, n, limit, dst)) return merge(e, c, p, n, limit, dst);
        dst[0] = id;
        return 1;
    }
    size_t count = NO_CUT;
    if (!part && has_wide(p, n)) count = encode_cut(e, c, p, n, limit, dst);
    if (count == NO_CUT) count = merge(e, c, p, n, limit, dst);
    if (count == (size_t)-1) return count;
    keep_row(row, h, p, n, dst, count);
    c->stats[row && count <= ROW_IDS ? STAT_MISSES : STAT_UNCACHED]++;
    return count;
}


/* ------------------------------------------------------------------------------------------ */
/* Encoding texts                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* The ids written so far (len), the room for them (cap), and how many of them have their pages in
   memory (ready): the pages are faulted in a chunk at a time ahead of the writes (populate). */
typedef struct {
    uint32_t *ids;
    size_t len, cap, ready;
} Out;

#define READY_IDS ((size_t)POPULATE_PAGES * 1024)

/* Room for `more` ids after o->len: 0, or -1 on a failed allocation. */
static int out_room(Out *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    size_t cap = o->cap + o->cap / 2 + more + 1024;
    uint32_t *grown = realloc(o->ids, cap * sizeof(uint32_t));
    if (!grown) return -1;
    o->ids = grown;
    o->cap = cap;
    if (o->ready > o->len) o->ready = o->len; /* (perhaps moved: the rest is asked for again) */
    return 0;
}

/* Room for `more` ids after o->len, their pages in memory: 0, or -1 on a failed allocation. */
static int out_reserve(Out *o, size_t more) {
    if (out_room(o, more) < 0) return -1;
    if (o->len + more > o->ready) {
        size_t ready = o->len + more + READY_IDS;
        if (ready > o->cap) ready = o->cap;
        populate(o->ids + o->ready, o->ids + ready);
        o->ready = ready;
    }
    return 0;
}

/* A piece found ahead of its encoding: where it starts, its length, and (2 to SHORT bytes) its
   key and the key's hash, whose table slots were prefetched. */
typedef struct { size_t start, len; Key key; uint64_t hash; } Ahead;

/* Pieces found, and their slots prefetched, before the first of them is encoded: the vocabulary's
   table and the piece cache are larger than the CPU's caches and read in no order, and a look-up
   that waits for memory costs more than scanning and hashing a piece. */
#define AHEAD 32

/* The piece s[start:start+n] as the scanner finds it: its key and hash worked out and its slot
   prefetched there, in the scanner's loop (not in a second loop over the pieces found, reading back
   what the first wrote: for pieces of one to three bytes, most of CSV's, that loop cost about as
   much as their look-ups). */
TP_INLINE void look_ahead(const Cache *c, const uint8_t *s, size_t start, size_t n, const uint8_t *limit, Ahead *a) {
    const uint8_t *p = s + start;
    a->start = start;
    a->len = n;
    if (TP_LIKELY(n <= SHORT)) { /* (pieces of one byte too: the branch would be mispredicted) */
        a->key = short_key(p, n, limit);
        a->hash = key_hash(a->key);
        TP_PREFETCH(cache_set(c, a->hash));
    } else if (n > SHORT) {
        a->hash = bytes_hash(p, n);
        if (n <= ROW_BYTES) {
            const Row *row = cache_row(c, a->hash);
            TP_PREFETCH(row);
            TP_PREFETCH(row->bytes);
        }
    }
}

/* Encode s[0:n]: find AHEAD pieces or more (by windows where the pattern has a window scanner,
   WINDOW(s, i) giving a window's starts, else by SCAN), prefetch their slots, then encode them. */
#define ENCODE_LOOP(SCAN, WINDOW)                                                                \
    while (i < n) {                                                                              \
        size_t found = 0, first = i;                                                             \
        while (found < AHEAD && i < n) {                                                         \
            uint64_t starts = i + 64 <= n ? (WINDOW) & ~(uint64_t)1 : 0;                         \
            if (starts) {                                                                        \
                size_t from = i;                                                                 \
                do {                                                                             \
                    size_t to = i + (size_t)__builtin_ctzll(starts);                             \
                    starts &= starts - 1;                                                        \
                    look_ahead(c, s, from, to - from, limit, &ahead[found++]);                   \
                    from = to;                                                                   \
                } while (starts);                                                                \
                i = from;                                                                        \
            } else {                                                                             \
                size_t j = SCAN;                                                                 \
                look_ahead(c, s, i, j - i, limit, &ahead[found++]);                              \
                i = j;                                                                           \
            }                                                                                    \
        }                                                                                        \
        size_t bytes = i - first;                                                                \
        if (TP_UNLIKELY(o->len + bytes + WIDE_IDS > o->ready) && out_reserve(o, bytes + WIDE_IDS) < 0) return -1; \
        uint32_t *ids = o->ids;                                                                  \
        size_t len = o->len, hits = 0;                                                           \
        for (size_t k = 0; k < found; k++) {                                                     \
            const Ahead *a = &ahead[k];                                                          \
            if (TP_LIKELY(a->len <= SHORT)) {                                                    \
                /* the hit, inline */                                                            \
                const Entry *hit = find_short(cache_set(c, a->hash), a->key);                    \
                if (TP_LIKELY(hit != NULL)) {                                                    \
                    len += entry_ids(c, a->hash, hit, ids + len);                                      \
                    hits++;                                                                      \
                    continue;                                                                    \
                }                                                                                \
            }                                                                                    \
            size_t got = piece_ids(e, c, s + a->start, a->len, &a->key, a->hash, limit, ids + len, 0); \
            if (got == (size_t)-1) return -1;                                                    \
            len += got;                                                                          \
        }                                                                                        \
        o->len = len;                                                                            \
        c->stats[STAT_HITS] += hits;                                                             \
    }

/* The ids of the UTF-8 text s[0:n] appended to o; -1 on a failed allocation. */
static int encode_utf8(const Encoder *e, Cache *c, const uint8_t *s, size_t n, Out *o) {
    const uint8_t *limit = s + n;
    Ahead ahead[AHEAD + 64];
    size_t i = 0;
    switch (e->mode) {
    case MODE_GPT4:
        if (window_ok) ENCODE_LOOP(gpt4_piece(s, i, n), gpt4_window(s, i))
        else ENCODE_LOOP(gpt4_piece(s, i, n), 0)
        break;
    case MODE_GPT2:
        if (window_ok) ENCODE_LOOP(gpt2_piece(s, i, n), gpt2_window(s, i))
        else ENCODE_LOOP(gpt2_piece(s, i, n), 0)
        break;
    case MODE_O200K:
        if (window_ok) ENCODE_LOOP(o200k_piece(s, i, n), o200k_window(s, i))
        else ENCODE_LOOP(o200k_piece(s, i, n), 0)
        break;
    case MODE_POLISH: ENCODE_LOOP(polish_piece(s, i, n, 0), 0) break;
    default: ENCODE_LOOP(polish_piece(s, i, n, 1), 0) break;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* A str's UTF-8                                                                              */
/* ------------------------------------------------------------------------------------------ */

TP_INLINE uint8_t *put_utf8(uint8_t *d, uint32_t cp) {
    if (cp < 0x80) { *d++ = (uint8_t)cp; }
    else if (cp < 0x800) { *d++ = (uint8_t)(0xC0 | (cp >> 6)); *d++ = (uint8_t)(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
        *d++ = (uint8_t)(0xE0 | (cp >> 12));
        *d++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        *d++ = (uint8_t)(0x80 | (cp & 0x3F));
    } else {
        *d++ = (uint8_t)(0xF0 | (cp >> 18));
        *d++ = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        *d++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        *d++ = (uint8_t)(0x80 | (cp & 0x3F));
    }
    return d;
}

/* The code point at data[k] of a str of `kind`, surrogates resolved as tiktoken's encode_ordinary
   does (text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")): a high surrogate and
   a low one in a row are their astral character, any other surrogate U+FFFD. *k moves past it. */
TP_INLINE uint32_t str_char(int kind, const void *data, size_t length, size_t *k) {
    uint32_t cp = kind == PyUnicode_2BYTE_KIND ? ((const Py_UCS2 *)data)[*k] : ((const Py_UCS4 *)data)[*k];
    (*k)++;
    if (TP_LIKELY(cp < 0xD800 || cp > 0xDFFF)) return cp;
    if (cp <= 0xDBFF && *k < length) {
        uint32_t low = kind == PyUnicode_2BYTE_KIND ? ((const Py_UCS2 *)data)[*k] : ((const Py_UCS4 *)data)[*k];
        if (low >= 0xDC00 && low <= 0xDFFF) {
            (*k)++;
            return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
    }
    return 0xFFFD;
}

/* (the str writer's SSSE3 loop: on x86_64 alone, the one it is tested on) */
#if defined(TP_SSSE3) && defined(__x86_64__)
#define TP_UCS2_SSSE3 1

/* For each set of two-byte lanes among eight (bit j: lane j holds a character from U+0080 on),
   the shuffle that keeps each lane's first byte and the second of the two-byte lanes, and how
   many bytes that keeps. */
static uint8_t two_byte_shuffle[256][16], two_byte_kept[256];

static void str_utf8_init(void) {
    for (unsigned mask = 0; mask < 256; mask++) {
        unsigned kept = 0;
        for (unsigned lane = 0; lane < 8; lane++) {
            two_byte_shuffle[mask][kept++] = (uint8_t)(2 * lane);
            if ((mask >> lane) & 1) two_byte_shuffle[mask][kept++] = (uint8_t)(2 * lane + 1);
        }
        two_byte_kept[mask] = (uint8_t)kept;
        while (kept < 16) two_byte_shuffle[mask][kept++] = 0x80;
    }
}

/* The UTF-8 of u[k:length] (a str of two bytes a character) to *d, eight characters at a time:
   eight below U+0800 (ASCII and two-byte characters: Latin, Greek, Cyrillic, Hebrew, Arabic)
   written at once, their bytes put in place by one shuffle; a block with a character from U+0800
   on one character after another if half of it or more is not ASCII (CJK), else up to the first
   that is not and that one alone. Returns where it stopped: a surrogate, or fewer than eight left
   (d has room: the caller's buffer counts three bytes a character and 16 more). */
__attribute__((target("ssse3"))) static size_t ucs2_utf8_ssse3(const Py_UCS2 *u, size_t k, size_t length, uint8_t **dp) {
    uint8_t *d = *dp;
    const __m128i high = _mm_set1_epi16((short)0xFF80), wider = _mm_set1_epi16((short)0xF800);
    /* ASCII blocks after ASCII blocks: stored as they are (a text mostly ASCII); otherwise every
       block below U+0800 goes through the shuffle, ASCII or not (a branch on it would be
       mispredicted where ASCII and other letters mix) until sixteen ASCII blocks in a row */
    unsigned streak = 0;
    while (k + 8 <= length) {
        __m128i v = _mm_loadu_si128((const __m128i *)(u + k));
        __m128i ascii = _mm_cmpeq_epi16(_mm_and_si128(v, high), _mm_setzero_si128());
        if (streak >= 16) {
            if (TP_LIKELY(_mm_movemask_epi8(ascii) == 0xFFFF)) {
                _mm_storel_epi64((__m128i *)d, _mm_packus_epi16(v, v));
                d += 8;
                k += 8;
                continue;
            }
            streak = 0;
        }
        unsigned narrow = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(v, wider), _mm_setzero_si128()));
        unsigned mask = ~(unsigned)_mm_movemask_epi8(_mm_packs_epi16(ascii, ascii)) & 0xFF;
        if (TP_LIKELY(narrow == 0xFFFF)) {
            /* each lane: its character (ASCII), or its lead byte then its continuation byte */
            __m128i lead = _mm_or_si128(_mm_srli_epi16(v, 6), _mm_set1_epi16(0xC0));
            __m128i cont = _mm_or_si128(_mm_and_si128(v, _mm_set1_epi16(0x3F)), _mm_set1_epi16(0x80));
            __m128i two = _mm_or_si128(lead, _mm_slli_epi16(cont, 8));
            __m128i lanes = _mm_or_si128(_mm_and_si128(ascii, v), _mm_andnot_si128(ascii, two));
            _mm_storeu_si128((__m128i *)d, _mm_shuffle_epi8(lanes, _mm_loadu_si128((const __m128i *)two_byte_shuffle[mask])));
            d += two_byte_kept[mask];
            k += 8;
            streak = (streak + 1) & (0u - (unsigned)(mask == 0)); /* (no branch on it) */
            continue;
        }
        if (two_byte_kept[mask] >= 8 + 4
            && !_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(v, wider), _mm_set1_epi16((short)0xD800)))) {
            /* (none of them a surrogate) */
            for (unsigned q = 0; q < 8; q++) {
                uint32_t cp = u[k + q];
                if (cp < 0x80) {
                    *d++ = (uint8_t)cp;
                } else if (cp < 0x800) {
                    d[0] = (uint8_t)(0xC0 | (cp >> 6));
                    d[1] = (uint8_t)(0x80 | (cp & 0x3F));
                    d += 2;
                } else {
                    d[0] = (uint8_t)(0xE0 | (cp >> 12));
                    d[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    d[2] = (uint8_t)(0x80 | (cp & 0x3F));
                    d += 3;
                }
            }
            k += 8;
            continue;
        }
        _mm_storel_epi64((__m128i *)d, _mm_packus_epi16(v, v));
        unsigned run = (unsigned)__builtin_ctz(mask);
        d += run;
        k += run;
        uint32_t cp = u[k];
        if (cp >= 0xD800 && cp <= 0xDFFF) break; /* a surrogate: the caller's */
        d = put_utf8(d, cp);
        k++;
    }
    *dp = d;
    return k;
}
#else
static void str_utf8_init(void) {}
#endif

/* The UTF-8 of a (ready) str: in place for ASCII, else written to c->text. NULL if the buffer
   could not be had. */
static const uint8_t *str_utf8(Cache *c, PyObject *text, size_t *n) {
    size_t length = (size_t)PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text)) {
        *n = length;
        return (const uint8_t *)PyUnicode_DATA(text);
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    size_t need = length * (kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4) + 16;
    if (need > c->text_cap) {
        uint8_t *grown = malloc(need);
        if (!grown) return NULL;
        free(c->text);
        c->text = grown;
        c->text_cap = need;
    }
    uint8_t *d = c->text;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *u = data;
        size_t k = 0;
#if defined(__SSE2__) && !defined(TP_SCALAR_MASKS)
        /* sixteen characters at a time: stored whole, then kept up to the first from U+0080 on
           (d has room: need counts two bytes a character and 16 more) */
        while (k + 16 <= length) {
            __m128i v = _mm_loadu_si128((const __m128i *)(u + k));
            _mm_storeu_si128((__m128i *)d, v);
            unsigned high = (unsigned)_mm_movemask_epi8(v);
            if (!high) {
                d += 16;
                k += 16;
                continue;
            }
            unsigned ascii = (unsigned)__builtin_ctz(high);
            d += ascii;
            k += ascii;
            uint8_t b = u[k++];
            *d++ = (uint8_t)(0xC0 | (b >> 6));
            *d++ = (uint8_t)(0x80 | (b & 0x3F));
        }
#endif
        for (; k < length; k++) {
            uint8_t b = u[k];
            if (b < 0x80) *d++ = b;
            else { *d++ = (uint8_t)(0xC0 | (b >> 6)); *d++ = (uint8_t)(0x80 | (b & 0x3F)); }
        }
    } else {
        size_t k = 0;
        while (k < length) {
            /* ASCII runs, eight (or four) at a time where they are */
            if (kind == PyUnicode_2BYTE_KIND) {
                const Py_UCS2 *u = data;
#ifdef TP_UCS2_SSSE3
                if (ssse3_ok) k = ucs2_utf8_ssse3(u, k, length, &d);
#endif
#if defined(__SSE2__) && !defined(TP_SCALAR_MASKS)
                /* eight characters at a time: their low bytes stored whole, then kept up to the
                   first from U+0080 on, which is written here (two or three bytes; a surrogate
                   below); d has room: need counts three bytes a character and 16 more */
                while (k + 8 <= length) {
                    __m128i v = _mm_loadu_si128((const __m128i *)(u + k));
                    __m128i ascii = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xFF80)), _mm_setzero_si128());
                    _mm_storel_epi64((__m128i *)d, _mm_packus_epi16(v, v));
                    unsigned wide = ~(unsigned)_mm_movemask_epi8(ascii) & 0xFFFF;
                    if (!wide) {
                        d += 8;
                        k += 8;
                        continue;
                    }
                    unsigned run = (unsigned)__builtin_ctz(wide) >> 1;
                    d += run;
                    k += run;
                    uint32_t cp = u[k];
                    if (cp >= 0xD800 && cp <= 0xDFFF) break; /* a surrogate: below */
                    d = put_utf8(d, cp);
                    k++;
                }
#endif
                while (k + 4 <= length && (u[k] | u[k + 1] | u[k + 2] | u[k + 3]) < 0x80) {
                    d[0] = (uint8_t)u[k]; d[1] = (uint8_t)u[k + 1]; d[2] = (uint8_t)u[k + 2]; d[3] = (uint8_t)u[k + 3];
                    d += 4;
                    k += 4;
                }
                if (k >= length) break;
            }
            d = put_utf8(d, str_char(kind, data, length, &k));
        }
    }
    *n = (size_t)(d - c->text);
    return c->text;
}


/* ------------------------------------------------------------------------------------------ */
/* Bytes checked as UTF-8                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Each byte as a character's first: the character's length in bytes (2 to 4; 0: no character
   starts with it: ASCII, handled apart, a continuation byte, C0 and C1 (overlong), F5 and above),
   and the range of the byte after it, utf8_low[b] and utf8_span[b] more: E0 A0-BF (no overlong),
   ED 80-9F (no surrogate), F0 90-BF (no overlong), F4 80-8F (nothing above U+10FFFF), else 80-BF. */
static uint8_t utf8_length[256], utf8_low[256], utf8_span[256];

static void utf8_vector_init(void);

static void utf8_init(void) {
    for (int b = 0xC2; b <= 0xF4; b++) {
        utf8_length[b] = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        utf8_low[b] = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
        utf8_span[b] = b == 0xE0 || b == 0xED ? 0x1F : b == 0xF0 ? 0x2F : b == 0xF4 ? 0x0F : 0x3F;
    }
    utf8_vector_init();
}

/* The bits of a character's bytes after its second that must be 10xxxxxx, by its length (its
   bytes as a little-endian word). */
static const uint32_t utf8_tail_mask[5] = {0, 0, 0, 0x00C00000u, 0xC0C00000u};
static const uint32_t utf8_tail_bits[5] = {0, 0, 0, 0x00800000u, 0x80800000u};

/* Where the bytes s[0:n] stop being UTF-8: the first byte of the first sequence that is no
   character (what Python's UnicodeDecodeError.start names), or n when they are UTF-8. ASCII is
   passed over 32 bytes at a time (SSE2; 8 without it); each other character is checked whole, by
   its first byte's tables and one word (about 4 ns a character from U+0080 on: its branches
   follow the text's mix of lengths, so utf8_invalid asks utf8_valid first where it can). */
static size_t utf8_scan(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
#if defined(__SSE2__) && !defined(TP_SCALAR_MASKS)
            while (i + 32 <= n) {
                unsigned high = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(s + i)))
                                | (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(s + i + 16))) << 16;
                if (high) {
                    i += (size_t)__builtin_ctz(high);
                    break;
                }
                i += 32;
            }
#elif !defined(TP_BIG_ENDIAN)
            while (i + 8 <= n) {
                uint64_t x;
                memcpy(&x, s + i, 8);
                if (x & HIGHS) {
                    i += (size_t)__builtin_ctzll(x & HIGHS) >> 3;
                    break;
                }
                i += 8;
            }
#endif
            while (i < n && s[i] < 0x80) i++;
            if (i == n) break;
        }
        /* a run of characters from U+0080 on (a script's letters), one at a time */
        do {
            uint8_t lead = s[i];
            size_t len = utf8_length[lead];
            if (TP_UNLIKELY(len == 0 || len > n - i)) return i;
            if ((uint8_t)(s[i + 1] - utf8_low[lead]) > utf8_span[lead]) return i;
            if (TP_LIKELY(i + 4 <= n)) {
                uint32_t word = (uint32_t)s[i + 2] << 16 | (uint32_t)s[i + 3] << 24;
                if ((word & utf8_tail_mask[len]) != utf8_tail_bits[len]) return i;
            } else {
                for (size_t k = 2; k < len; k++)
                    if ((s[i + k] & 0xC0) != 0x80) return i;
            }
            i += len;
        } while (i < n && s[i] >= 0x80);
    }
    return n;
}

/* Whether s[0:n] is UTF-8, 16 bytes at a time without a branch per character (SSSE3's byte
   shuffle, where the CPU has it: ssse3_ok). Every way UTF-8 can go wrong shows in a byte and the
   three before it: the byte before and this one's class (its high nibble) tell a character cut
   short (a first byte, then no continuation), a continuation without a first byte after ASCII, an
   overlong (C0 C1, E0 then 80-9F, F0 then 80-8F), a surrogate (ED then A0-BF) and what lies above
   U+10FFFF (F4 then 90-BF, F5-FF); each is one bit, set where three tables of 16 (the byte before's
   high nibble, its low nibble, this byte's high nibble) all allow it. A continuation after a
   continuation (its own bit) must be the third or fourth byte of a character (a first byte from E0
   on two bytes back, from F0 on three back), and the third and fourth bytes of one must be
   continuations: the two agree, or the bytes are not UTF-8. The bytes past the end are taken as
   zero (ASCII), so a character cut short by the end shows as one cut short by ASCII. */
enum {
    U8_SHORT = 1, U8_LONG = 2, U8_OVERLONG3 = 4, U8_SURROGATE = 8, U8_OVERLONG2 = 16, U8_LARGE = 32,
    U8_OVERLONG4 = 64, U8_TWO_CONTINUATIONS = 128,
};
static uint8_t utf8_high1[16], utf8_low1[16], utf8_high2[16];

/* Each class's nibbles (bit k of a mask: nibble k allowed), in the three tables. */
static void utf8_vector_init(void) {
    static const struct { uint8_t bit; uint16_t high1, low1, high2; } classes[] = {
        {U8_SHORT, 0xF000, 0xFFFF, 0xF0FF},             /* C-F, then 0-7 or C-F */
        {U8_LONG, 0x00FF, 0xFFFF, 0x0F00},              /* 0-7, then 8-B */
        {U8_OVERLONG3, 0x4000, 0x0001, 0x0300},         /* E0, then 8-9 */
        {U8_SURROGATE, 0x4000, 0x2000, 0x0C00},         /* ED, then A-B */
        {U8_OVERLONG2, 0x1000, 0x0003, 0x0F00},         /* C0 C1, then 8-B */
        {U8_LARGE, 0x8000, 0xFFF0, 0x0E00},             /* F4-FF, then 9-B */
        {U8_OVERLONG4, 0x8000, 0xFFE1, 0x0100},         /* F0 F5-FF, then 8 */
        {U8_TWO_CONTINUATIONS, 0x0F00, 0xFFFF, 0x0F00}, /* 8-B, then 8-B */
    };
    for (size_t c = 0; c < sizeof(classes) / sizeof(classes[0]); c++) {
        for (int k = 0; k < 16; k++) {
            if (classes[c].high1 >> k & 1) utf8_high1[k] |= classes[c].bit;
            if (classes[c].low1 >> k & 1) utf8_low1[k] |= classes[c].bit;
            if (classes[c].high2 >> k & 1) utf8_high2[k] |= classes[c].bit;
        }
    }
}

#ifdef TP_SSSE3
/* The bits of the classes v's bytes show (prev: the 16 bytes before v), where they are wrong. */
__attribute__((target("ssse3"))) TP_INLINE __m128i utf8_wrong(__m128i prev, __m128i v, __m128i high1, __m128i low1,
                                                              __m128i high2) {
    const __m128i nibble = _mm_set1_epi8(0x0F);
    __m128i before = _mm_alignr_epi8(v, prev, 15);
    __m128i found = _mm_and_si128(
        _mm_and_si128(_mm_shuffle_epi8(high1, _mm_and_si128(_mm_srli_epi16(before, 4), nibble)),
                      _mm_shuffle_epi8(low1, _mm_and_si128(before, nibble))),
        _mm_shuffle_epi8(high2, _mm_and_si128(_mm_srli_epi16(v, 4), nibble)));
    /* a byte from E0 on two back or from F0 on three back: 80 and above once lowered by 60 or 70 */
    __m128i third = _mm_or_si128(_mm_subs_epu8(_mm_alignr_epi8(v, prev, 14), _mm_set1_epi8(0x60)),
                                 _mm_subs_epu8(_mm_alignr_epi8(v, prev, 13), _mm_set1_epi8(0x70)));
    return _mm_xor_si128(found, _mm_and_si128(third, _mm_set1_epi8((char)0x80)));
}

__attribute__((target("ssse3"))) static int utf8_valid(const uint8_t *s, size_t n) {
    const __m128i high1 = _mm_loadu_si128((const __m128i *)utf8_high1);
    const __m128i low1 = _mm_loadu_si128((const __m128i *)utf8_low1);
    const __m128i high2 = _mm_loadu_si128((const __m128i *)utf8_high2);
    __m128i prev = _mm_setzero_si128(), wrong = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i)), b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        if (!_mm_movemask_epi8(_mm_or_si128(a, b))) {
            /* ASCII: right unless the bytes before left a character unfinished */
            wrong = _mm_or_si128(wrong, utf8_wrong(prev, _mm_setzero_si128(), high1, low1, high2));
            prev = b;
            continue;
        }
        wrong = _mm_or_si128(wrong, utf8_wrong(prev, a, high1, low1, high2));
        wrong = _mm_or_si128(wrong, utf8_wrong(a, b, high1, low1, high2));
        prev = b;
    }
    for (; i < n + 16; i += 16) { /* the rest, then 16 bytes past the end, as zeros */
        uint8_t block[16] = {0};
        if (i < n) memcpy(block, s + i, n - i < 16 ? n - i : 16);
        __m128i v = _mm_loadu_si128((const __m128i *)block);
        wrong = _mm_or_si128(wrong, utf8_wrong(prev, v, high1, low1, high2));
        prev = v;
        if (i >= n) break;
    }
    return _mm_movemask_epi8(_mm_cmpeq_epi8(wrong, _mm_setzero_si128())) == 0xFFFF;
}
#endif

/* Where the bytes s[0:n] stop being UTF-8 (utf8_scan's answer): checked by utf8_valid first, where
   the CPU has it; only bytes that are not UTF-8 are scanned a character at a time. */
static size_t utf8_invalid(const uint8_t *s, size_t n) {
#ifdef TP_SSSE3
    if (ssse3_ok && utf8_valid(s, n)) return n;
#endif
    return utf8_scan(s, n);
}

/* A Python UnicodeDecodeError for the bytes object `item`, whose first sequence that is no
   character starts at `start` (utf8_invalid's), with the end and reason Python's own decoder gives
   it: the first byte alone if no character starts with it, else the longest start of a character
   there (through the end of the bytes: "unexpected end of data"). */
static void utf8_error(PyObject *item, size_t start) {
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(item);
    size_t n = (size_t)PyBytes_GET_SIZE(item), len = utf8_length[s[start]], valid = 1;
    const char *reason = "invalid start byte";
    size_t end = start + 1;
    if (len) {
        if (start + 1 < n && (uint8_t)(s[start + 1] - utf8_low[s[start]]) <= utf8_span[s[start]]) {
            valid = 2;
            while (valid < len && start + valid < n && (s[start + valid] & 0xC0) == 0x80) valid++;
        }
        end = start + valid;
        reason = end == n ? "unexpected end of data" : "invalid continuation byte";
    }
    PyObject *error = PyObject_CallFunction(PyExc_UnicodeDecodeError, "sOnns", "utf-8", item, (Py_ssize_t)start,
                                            (Py_ssize_t)end, reason);
    if (error) {
        PyErr_SetObject(PyExc_UnicodeDecodeError, error);
        Py_DECREF(error);
    }
}

/* The characters of the UTF-8 s[0:n]: its bytes that are no continuation byte (10xxxxxx). */
static size_t utf8_characters(const uint8_t *s, size_t n) {
    size_t continuation = 0, i = 0;
#if defined(__SSE2__) && !defined(TP_SCALAR_MASKS)
    /* counted in 16 byte lanes, each at most 255 before they are added up */
    while (i + 16 <= n) {
        size_t blocks = (n - i) / 16 < 255 ? (n - i) / 16 : 255;
        __m128i lanes = _mm_setzero_si128();
        for (size_t k = 0; k < blocks; k++, i += 16) /* (80-BF are the signed bytes below -64) */
            lanes = _mm_sub_epi8(lanes, _mm_cmplt_epi8(_mm_loadu_si128((const __m128i *)(s + i)), _mm_set1_epi8(-64)));
        __m128i sums = _mm_sad_epu8(lanes, _mm_setzero_si128());
        continuation += (size_t)_mm_cvtsi128_si32(sums) + (size_t)_mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
    }
#endif
    for (; i < n; i++) continuation += (s[i] & 0xC0) == 0x80;
    return n - continuation;
}

#endif
