/* tokpack's compiled byte-level BPE encoder: tiktoken's encode_ordinary ids, on UTF-8 bytes.
 *
 * The module docstring (MODULE_DOC below) and tokpack/vocab/compiled.py say what it does and why;
 * this file is organised in the order a text goes through it:
 *   1. the text's UTF-8 (an ASCII str is read in place; any other is transcoded into the
 *      thread's buffer, lone surrogates as tiktoken's encode_ordinary treats them);
 *   2. the pre-tokenizer: one scanner per pattern, over bytes, with byte-class tables for ASCII
 *      and a two-stage table of Unicode classes (_bpe_classes.h, generated from tiktoken);
 *   3. each piece: one byte is its rank; a piece of at most 15 bytes is keyed by its bytes in two
 *      machine words and looked up among the vocabulary's tokens (tiktoken's shortcut: a piece
 *      that is a token is that token), then in the thread's piece cache; a longer piece by a hash
 *      of its bytes, verified against them;
 *   4. a miss is merged as tiktoken's byte_pair_merge does (lowest rank first, leftmost on ties):
 *      by a scan for short pieces, by an indexed heap for long ones (n log n at any length).
 *
 * C11 and the CPython API only; no third-party code, no intrinsics.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "_bpe_classes.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#define TP_BIG_ENDIAN 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TP_INLINE static inline __attribute__((always_inline))
#define TP_LIKELY(x) __builtin_expect(!!(x), 1)
#define TP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TP_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define TP_INLINE static inline
#define TP_LIKELY(x) (x)
#define TP_UNLIKELY(x) (x)
#define TP_PREFETCH(p) ((void)(p))
#endif

/* ------------------------------------------------------------------------------------------ */
/* Character classes                                                                          */
/* ------------------------------------------------------------------------------------------ */

enum { CL_L = 1, CL_N = 2, CL_S = 4, CL_UP = 8, CL_LO = 16, CL_LNS = 7, CL_CASED = 24 };
/* Scanners, numbered as tokpack.vocab.pretokenizer numbers them. */
enum { MODE_GPT2 = 1, MODE_GPT4 = 2, MODE_O200K = 3, MODE_POLISH = 4, MODE_POLISH_PHRASE = 5 };

static uint8_t ascii_class[128];

TP_INLINE uint8_t class_of(uint32_t cp) {
    return tp_class_blocks[tp_class_index[cp / TP_CLASS_BLOCK]][cp % TP_CLASS_BLOCK];
}

TP_INLINE size_t char_len(uint8_t lead) {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/* The code point at s[i] (valid UTF-8: this module writes or checks every text it scans). */
TP_INLINE uint32_t decode_at(const uint8_t *s, size_t i, size_t *len) {
    uint32_t b = s[i];
    if (b < 0x80) { *len = 1; return b; }
    if (b < 0xE0) { *len = 2; return ((b & 0x1F) << 6) | (s[i + 1] & 0x3F); }
    if (b < 0xF0) { *len = 3; return ((b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F); }
    *len = 4;
    return ((b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6)
           | (s[i + 3] & 0x3F);
}

TP_INLINE uint8_t class_at(const uint8_t *s, size_t i, size_t *len) {
    uint8_t b = s[i];
    if (TP_LIKELY(b < 0x80)) { *len = 1; return ascii_class[b]; }
    return class_of(decode_at(s, i, len));
}

/* The contraction letter (1-8 for s d m t l v r e, 0 for none) of the character at s[i]. */
TP_INLINE unsigned letter_at(const uint8_t *s, size_t i, size_t *len, int fold) {
    uint8_t b = s[i];
    if (b < 0x80) { *len = 1; return fold ? tp_fold_ascii[b] : tp_exact_ascii[b]; }
    uint32_t cp = decode_at(s, i, len);
    if (fold) {
        for (int k = 0; k < TP_FOLD_WIDE_COUNT; k++) if (tp_fold_wide[k][0] == cp) return tp_fold_wide[k][1];
    } else {
        for (int k = 0; k < TP_EXACT_WIDE_COUNT; k++) if (tp_exact_wide[k][0] == cp) return tp_exact_wide[k][1];
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The pre-tokenizer: each pattern's alternatives in its order, over bytes                    */
/* ------------------------------------------------------------------------------------------ */

/* Eight bytes at a time (SWAR, plain 64-bit arithmetic): a run of ASCII letters, digits or spaces
   ends at the lowest byte whose high bit the member mask leaves clear, found by counting trailing
   zeros instead of a branch per byte (whose mispredicted exit cost about a word's worth of time).
   Only where bytes load little-endian and the compiler counts zeros; checked against the class
   table when the module loads (swar_ok), else a byte at a time. */
#if !defined(TP_BIG_ENDIAN) && (defined(__GNUC__) || defined(__clang__))
#define TP_SWAR 1
#endif
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

static int swar_ok;

/* The high bit of each byte of x strictly between m and n (m < n <= 128), exactly (Bit Twiddling
   Hacks' hasbetween). */
TP_INLINE uint64_t between(uint64_t x, uint64_t m, uint64_t n) {
    uint64_t low = x & (ONES * 127);
    return (ONES * (127 + n) - low) & ~x & (low + ONES * (127 - m)) & HIGHS;
}

/* The high bit of each byte of x that is ASCII and in class `bits` (one of L, N, S, UP, LO). */
TP_INLINE uint64_t swar_member(uint64_t x, uint8_t bits) {
    switch (bits) {
    case CL_L: return between(x | (ONES * 0x20), 0x60, 0x7B);
    case CL_LO: return between(x, 0x60, 0x7B);
    case CL_UP: return between(x, 0x40, 0x5B);
    case CL_N: return between(x, 0x2F, 0x3A);
    default: return between(x, 0x08, 0x0E) | between(x, 0x1F, 0x21); /* \t \n \v \f \r, space */
    }
}

/* The end of the run of characters in class `bits` from i. */
TP_INLINE size_t run(const uint8_t *s, size_t i, size_t n, uint8_t bits) {
#ifdef TP_SWAR
    if (TP_LIKELY(swar_ok)) {
        while (i + 8 <= n) {
            uint64_t x;
            memcpy(&x, s + i, 8);
            uint64_t outside = ~swar_member(x, bits) & HIGHS;
            if (!outside) {
                i += 8;
                continue;
            }
            i += (size_t)__builtin_ctzll(outside) >> 3;
            if (s[i] < 0x80) return i;
            size_t len;
            if (!(class_of(decode_at(s, i, &len)) & bits)) return i;
            i += len;
        }
    }
#endif
    while (i < n) {
        uint8_t b = s[i];
        if (TP_LIKELY(b < 0x80)) {
            if (!(ascii_class[b] & bits)) break;
            i++;
        } else {
            size_t len;
            if (!(class_of(decode_at(s, i, &len)) & bits)) break;
            i += len;
        }
    }
    return i;
}

/* The end of the run of [^\s\p{L}\p{N}] from i. */
TP_INLINE size_t other_run(const uint8_t *s, size_t i, size_t n) {
    while (i < n) {
        uint8_t b = s[i];
        if (TP_LIKELY(b < 0x80)) {
            if (ascii_class[b] & CL_LNS) break;
            i++;
        } else {
            size_t len;
            if (class_of(decode_at(s, i, &len)) & CL_LNS) break;
            i += len;
        }
    }
    return i;
}

TP_INLINE size_t newlines(const uint8_t *s, size_t i, size_t n) {
    while (i < n && (s[i] == '\r' || s[i] == '\n')) i++;
    return i;
}

/* [^\r\n\p{L}\p{N}] */
TP_INLINE int is_lead(uint8_t cls, uint8_t byte) {
    return !(cls & (CL_L | CL_N)) && byte != '\r' && byte != '\n';
}

/* The end of '(?:[sdmt]|ll|ve|re) at i (letters folded or exact), or 0. */
TP_INLINE size_t contraction(const uint8_t *s, size_t i, size_t n, int fold) {
    if (s[i] != '\'' || i + 1 >= n) return 0;
    size_t len1, len2;
    unsigned first = letter_at(s, i + 1, &len1, fold);
    if (first >= 1 && first <= 4) return i + 1 + len1;
    if (first == 0 || i + 1 + len1 >= n) return 0;
    unsigned second = letter_at(s, i + 1 + len1, &len2, fold);
    if ((first == 5 && second == 5) || (first == 6 && second == 8) || (first == 7 && second == 8))
        return i + 1 + len1 + len2;
    return 0;
}

/* \p{N}{1,3} at i, which holds a digit of `len` bytes. */
TP_INLINE size_t digits(const uint8_t *s, size_t i, size_t len, size_t n) {
    size_t j = i + len;
    for (int count = 1; count < 3 && j < n; count++) {
        size_t l;
        if (!(class_at(s, j, &l) & CL_N)) break;
        j += l;
    }
    return j;
}

/* At i, which holds whitespace: \s++$ (end_first) | \s*[\r\n] (newline_rule) | \s+(?!\S) | \s. */
TP_INLINE size_t whitespace(const uint8_t *s, size_t i, size_t n, int newline_rule, int end_first) {
    size_t j = run(s, i, n, CL_S);
    if (end_first && j == n) return j;
    if (newline_rule) {
        /* \s* gives back characters until a newline follows: the last one in the run (CR and LF
           are never part of a longer character's bytes). */
        for (size_t k = j; k > i; k--) if (s[k - 1] == '\r' || s[k - 1] == '\n') return k;
    }
    if (j == n) return j;
    size_t last = j - 1;
    while ((s[last] & 0xC0) == 0x80) last--;
    if (last > i) return last; /* two or more characters: all but the last */
    return i + char_len(s[i]);
}

static size_t gpt4_piece(const uint8_t *s, size_t i, size_t n) {
    uint8_t b = s[i];
    if (b == '\'') {
        size_t j = contraction(s, i, n, 1);
        if (j) return j;
    }
    size_t len;
    uint8_t kind = class_at(s, i, &len);
    /* [^\r\n\p{L}\p{N}]?+\p{L}++ */
    if (kind & CL_L) return run(s, i + len, n, CL_L);
    if (!(kind & CL_N) && b != '\r' && b != '\n' && i + len < n) {
        size_t len2;
        if (class_at(s, i + len, &len2) & CL_L) return run(s, i + len + len2, n, CL_L);
    }
    /* \p{N}{1,3} */
    if (kind & CL_N) return digits(s, i, len, n);
    /*  ?[^\s\p{L}\p{N}]++[\r\n]*+ */
    size_t start = i, start_len = len;
    uint8_t start_kind = kind;
    if (b == ' ' && i + 1 < n) {
        size_t len2;
        uint8_t next = class_at(s, i + 1, &len2);
        if (!(next & CL_LNS)) { start = i + 1; start_len = len2; start_kind = next; }
    }
    if (!(start_kind & CL_LNS)) return newlines(s, other_run(s, start + start_len, n), n);
    /* \s++$ | \s*[\r\n] | \s+(?!\S) | \s */
    return whitespace(s, i, n, 1, 1);
}

static size_t gpt2_piece(const uint8_t *s, size_t i, size_t n) {
    if (s[i] == '\'') {
        size_t j = contraction(s, i, n, 0);
        if (j) return j;
    }
    size_t start = (s[i] == ' ' && i + 1 < n) ? i + 1 : i;
    size_t len;
    uint8_t kind = class_at(s, start, &len);
    /*  ?\p{L}++ |  ?\p{N}++ |  ?[^\s\p{L}\p{N}]++ */
    if (kind & CL_L) return run(s, start + len, n, CL_L);
    if (kind & CL_N) return run(s, start + len, n, CL_N);
    if (!(kind & CL_LNS)) return other_run(s, start + len, n);
    /* \s++$ | \s+(?!\S) | \s */
    return whitespace(s, i, n, 0, 1);
}

#define NO_END SIZE_MAX

/* The end of o200k's [UPPER]*[LOWER]+ at i (greedy, backtracking), or NO_END. */
TP_INLINE size_t upper_lower(const uint8_t *s, size_t i, size_t n) {
    size_t a = run(s, i, n, CL_UP);
    if (a < n) {
        size_t len;
        if (class_at(s, a, &len) & CL_LO) return run(s, a + len, n, CL_LO);
    }
    /* [UPPER]* gives back characters until one is in LOWER too (Lm, Lo, marks): the last one,
       after which no LOWER character follows, so [LOWER]+ ends right after it. */
    size_t k = a;
    while (k > i) {
        size_t end = k;
        k--;
        while ((s[k] & 0xC0) == 0x80) k--;
        size_t len;
        if (class_at(s, k, &len) & CL_LO) return end;
    }
    return NO_END;
}

static size_t o200k_piece(const uint8_t *s, size_t i, size_t n) {
    uint8_t b = s[i];
    size_t len;
    uint8_t kind = class_at(s, i, &len);
    int lead = is_lead(kind, b) && i + len < n; /* [^\r\n\p{L}\p{N}]? may take this character */
    size_t len2 = 0;
    uint8_t next = lead ? class_at(s, i + len, &len2) : 0;
    if ((kind & CL_CASED) || (lead && (next & CL_CASED))) {
        /* [^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?: with the lead first, then
           without it (a mark is both a lead and a cased character). */
        size_t j = lead ? upper_lower(s, i + len, n) : NO_END;
        if (j == NO_END) j = upper_lower(s, i, n);
        if (j == NO_END) {
            /* [^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(?i:...)? */
            if (lead && (next & CL_UP)) j = run(s, i + len + len2, n, CL_UP);
            else if (kind & CL_UP) j = run(s, i + len, n, CL_UP);
            if (j != NO_END) j = run(s, j, n, CL_LO);
        }
        if (j != NO_END) {
            if (j < n && s[j] == '\'') {
                size_t c = contraction(s, j, n, 1);
                if (c) return c;
            }
            return j;
        }
    }
    /* \p{N}{1,3} */
    if (kind & CL_N) return digits(s, i, len, n);
    /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
    size_t start = i, start_len = len;
    uint8_t start_kind = kind;
    if (b == ' ' && i + 1 < n) {
        size_t l;
        uint8_t k2 = class_at(s, i + 1, &l);
        if (!(k2 & CL_LNS)) { start = i + 1; start_len = l; start_kind = k2; }
    }
    if (!(start_kind & CL_LNS)) {
        size_t j = other_run(s, start + start_len, n);
        while (j < n && (s[j] == '\r' || s[j] == '\n' || s[j] == '/')) j++;
        return j;
    }
    /* \s*[\r\n]+ | \s+(?!\S) | \s+ */
    return whitespace(s, i, n, 1, 0);
}

static size_t polish_piece(const uint8_t *s, size_t i, size_t n, int phrase) {
    /* [\r\n]*+[ \t]*+ leads the first two alternatives. */
    size_t b = newlines(s, i, n);
    while (b < n && (s[b] == ' ' || s[b] == '\t')) b++;
    /* [^\r\n\p{L}\p{N}]?+\p{L}++ */
    size_t k = b;
    if (b < n) {
        size_t len;
        uint8_t cls = class_at(s, b, &len);
        if (b + len < n && is_lead(cls, s[b])) k = b + len;
    }
    size_t len;
    if (k < n && (class_at(s, k, &len) & CL_L)) {
        size_t j = run(s, k + len, n, CL_L);
        while (phrase) {
            /* (?:[,.:;]?+ [^\r\n\p{L}\p{N}]?+\p{L}++)*+ */
            k = j;
            if (k < n && (s[k] == ',' || s[k] == '.' || s[k] == ':' || s[k] == ';')) k++;
            if (k >= n || s[k] != ' ') break;
            k++;
            if (k < n) {
                size_t l;
                uint8_t cls = class_at(s, k, &l);
                if (k + l < n && is_lead(cls, s[k])) k += l;
            }
            size_t l;
            if (k >= n || !(class_at(s, k, &l) & CL_L)) break;
            j = run(s, k + l, n, CL_L);
        }
        return j;
    }
    /* [^\s\p{L}\p{N}]++[\r\n]*+ */
    if (b < n && !(class_at(s, b, &len) & CL_LNS)) return newlines(s, other_run(s, b + len, n), n);
    /*  ?\p{N}{1,3} */
    size_t start = i;
    if (s[i] == ' ' && i + 1 < n && (class_at(s, i + 1, &len) & CL_N)) start = i + 1;
    if (class_at(s, start, &len) & CL_N) return digits(s, start, len, n);
    /* \s++$ | \s*[\r\n] | \s+(?!\S) | \s */
    return whitespace(s, i, n, 1, 1);
}

TP_INLINE size_t piece_end(int mode, const uint8_t *s, size_t i, size_t n) {
    switch (mode) {
    case MODE_GPT4: return gpt4_piece(s, i, n);
    case MODE_GPT2: return gpt2_piece(s, i, n);
    case MODE_O200K: return o200k_piece(s, i, n);
    case MODE_POLISH: return polish_piece(s, i, n, 0);
    default: return polish_piece(s, i, n, 1);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The window scanners: a pattern's pieces 64 bytes at a time                                 */
/* ------------------------------------------------------------------------------------------ */

/* From a piece's start p, the 64 bytes s[p:p+64] are classified into one bit mask per class (bit k:
   byte p+k), and where every piece in them starts is worked out with whole-word bit operations, no
   branch per piece: the regex matched from p depends only on the bytes from p on, and each rule of
   the pattern is a relation between neighbouring bytes' classes (in each scanner below). Only starts
   the window decides are used: those before its first byte the masks do not classify (a character
   from U+0080 on that is not a letter the masks can hold, one that crosses the window's end, the
   two bytes after an apostrophe that are not ASCII) and before a run of whitespace that reaches
   that point (where the run ends and what follows decide its cuts). The pieces between those starts
   are taken; the last start is the next window's p. A window that decides no start but p's takes
   one piece from the byte scanner. GPT-2's, cl100k's and o200k's patterns have one; the Polish ones
   use the byte scanners alone. tests/vocab/test_encoder_windows.py holds each to its byte scanner. */
/* (upper and slash: only where `cased`, for o200k's rules) */
typedef struct { uint64_t letter, upper, digit, space, tab, newline, apostrophe, slash, high; } Masks;

#if defined(__SSE2__) && !defined(TP_SCALAR_MASKS)
#include <emmintrin.h>

TP_INLINE uint64_t bits16(__m128i v, int k) { return (uint64_t)(uint16_t)_mm_movemask_epi8(v) << (16 * k); }

/* The bytes whose value minus `from` is below `count` (unsigned). */
TP_INLINE __m128i in_range(__m128i v, char from, char count) {
    __m128i shifted = _mm_xor_si128(_mm_sub_epi8(v, _mm_set1_epi8(from)), _mm_set1_epi8((char)0x80));
    return _mm_cmplt_epi8(shifted, _mm_set1_epi8((char)(0x80 + count)));
}

TP_INLINE void classify(const uint8_t *p, Masks *m, int cased) {
    memset(m, 0, sizeof(*m));
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        __m128i newline = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
        m->letter |= bits16(in_range(_mm_or_si128(v, _mm_set1_epi8(0x20)), 'a', 26), k);
        if (cased) m->upper |= bits16(in_range(v, 'A', 26), k);
        m->digit |= bits16(in_range(v, '0', 10), k);
        m->space |= bits16(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), k);
        m->tab |= bits16(_mm_andnot_si128(newline, in_range(v, '\t', 5)), k);
        m->newline |= bits16(newline, k);
        m->apostrophe |= bits16(_mm_cmpeq_epi8(v, _mm_set1_epi8('\'')), k);
        if (cased) m->slash |= bits16(_mm_cmpeq_epi8(v, _mm_set1_epi8('/')), k);
        m->high |= bits16(v, k);
    }
}
#else
/* The high bits of x's eight bytes as eight bits. */
TP_INLINE uint64_t gather_highs(uint64_t x) { return (((x & HIGHS) >> 7) * 0x0102040810204080ull) >> 56; }

/* The bytes of x equal to b (as high bits). */
TP_INLINE uint64_t equal_to(uint64_t x, uint8_t b) { return between(x, (uint64_t)b - 1, (uint64_t)b + 1); }

TP_INLINE void classify(const uint8_t *p, Masks *m, int cased) {
    memset(m, 0, sizeof(*m));
    for (int k = 0; k < 8; k++) {
        uint64_t x = 0;
        for (int q = 0; q < 8; q++) x |= (uint64_t)p[8 * k + q] << (8 * q);
        uint64_t ascii = ~x & HIGHS, newline = (equal_to(x, '\r') | equal_to(x, '\n')) & ascii;
        int shift = 8 * k;
        m->letter |= gather_highs(between(x | (ONES * 0x20), 'a' - 1, 'z' + 1) & ascii) << shift;
        if (cased) m->upper |= gather_highs(between(x, 'A' - 1, 'Z' + 1) & ascii) << shift;
        m->digit |= gather_highs(between(x, '0' - 1, '9' + 1) & ascii) << shift;
        m->space |= gather_highs(equal_to(x, ' ') & ascii) << shift;
        m->tab |= gather_highs(between(x, '\t' - 1, '\r' + 1) & ~newline & ascii) << shift;
        m->newline |= gather_highs(newline) << shift;
        m->apostrophe |= gather_highs(equal_to(x, '\'') & ascii) << shift;
        if (cased) m->slash |= gather_highs(equal_to(x, '/') & ascii) << shift;
        m->high |= gather_highs(x) << shift;
    }
}
#endif

/* Whether the masks' classes of the 128 ASCII bytes are the class table's (checked at load). */
static int window_ok;

/* The bits of `within` at or below a bit of `seed` in the same run of `within`'s bits. */
TP_INLINE uint64_t smear_down(uint64_t seed, uint64_t within) {
    uint64_t a = seed & within, m = within;
    for (int shift = 1; shift < 64; shift <<= 1) {
        a |= (a >> shift) & m;
        m &= m >> shift;
    }
    return a;
}

/* The bits of `within` at or above a bit of `seed` in the same run of `within`'s bits. */
TP_INLINE uint64_t smear_up(uint64_t seed, uint64_t within) {
    uint64_t a = seed & within, m = within;
    for (int shift = 1; shift < 64; shift <<= 1) {
        a |= (a << shift) & m;
        m &= m << shift;
    }
    return a;
}

/* The window's letters from U+0080 on, added to the masks: any letter (`cased` 0), or, for o200k's
   case rules, a letter that is in its upper class or its lower class alone (`cased` 1; `upper` gets
   the former). Returns where the masks stop: the first character they cannot hold. */
TP_INLINE unsigned wide_letters(const uint8_t *s, size_t p, uint64_t high, int cased, uint64_t *letter,
                                uint64_t *upper) {
    while (high) {
        unsigned k = (unsigned)__builtin_ctzll(high);
        size_t len;
        uint8_t cls = class_of(decode_at(s, p + k, &len));
        uint8_t kind = cls & CL_CASED;
        if (!(cls & CL_L) || k + len > 64 || (cased && kind != CL_UP && kind != CL_LO)) return k;
        uint64_t bytes = (((uint64_t)1 << len) - 1) << k;
        *letter |= bytes;
        if (kind == CL_UP) *upper |= bytes;
        high &= ~bytes;
    }
    return 64;
}

/* \p{N}{1,3}: the starts of each digit run's groups of three. */
TP_INLINE uint64_t digit_groups(uint64_t digit) {
    uint64_t starts = digit & ~(digit << 1), group = starts;
    uint64_t three = digit & (digit << 1) & (digit << 2);
    while ((group = (group << 3) & three)) starts |= group;
    return starts;
}

/* \s*[\r\n]+? | \s+(?!\S) | \s: the starts in runs of whitespace (`run`: those not taken by an
   earlier piece): a run is a piece through its last newline, then all but its last character, then
   that one (which a following letter or other may join). */
TP_INLINE uint64_t whitespace_starts(uint64_t run, uint64_t newline) {
    uint64_t tail = newline & run ? run & ~smear_down(newline & run, run) : run;
    return (run & ~(run << 1)) | (tail & ~(tail << 1)) | (tail & ~(tail >> 1) & (tail << 1));
}

/* The starts the window decides: those before `edge` and before a run of whitespace reaching it. */
TP_INLINE uint64_t decided(uint64_t starts, uint64_t ws, unsigned edge) {
    uint64_t below = edge == 64 ? ~(uint64_t)0 : ((uint64_t)1 << edge) - 1;
    if (edge > 0 && ((ws >> (edge - 1)) & 1)) {
        uint64_t before = ~ws & (((uint64_t)1 << (edge - 1)) - 1);
        unsigned from = before ? 64 - (unsigned)__builtin_clzll(before) : 0;
        below = ((uint64_t)1 << from) - 1;
    }
    return (starts & below) | 1;
}

/* The end of the contraction the apostrophe at s[at] begins ('s 'd 'm 't 'll 've 're, letters folded
   or exact), 0 if none, or NO_END if a byte after it is not ASCII (a letter that folds to one). */
TP_INLINE size_t contraction_end(const uint8_t *s, size_t at, int fold) {
    uint8_t a = s[at + 1], b = s[at + 2];
    if ((a | b) >= 0x80) return NO_END;
    if (fold) {
        a |= 0x20;
        b |= 0x20;
    }
    if (a == 's' || a == 'd' || a == 'm' || a == 't') return at + 2;
    if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return at + 3;
    return 0;
}

/* The apostrophes in `quotes` that begin a contraction become a piece of their own (`prefix`: cl100k's
   and GPT-2's, at a piece's start) or the end of the letters' piece before them (o200k's); the piece
   after starts where it ends. Returns the starts; *edge comes down to an apostrophe the masks cannot
   decide. */
TP_INLINE uint64_t contractions(const uint8_t *s, size_t p, uint64_t quotes, uint64_t starts, int fold, int prefix,
                                unsigned *edge) {
    uint64_t taken = 0;
    while (quotes) {
        unsigned k = (unsigned)__builtin_ctzll(quotes);
        quotes &= quotes - 1;
        if (!prefix && k > 0 && ((taken >> (k - 1)) & 1)) continue; /* (it follows a contraction, not letters) */
        if (k + 3 > *edge) {
            if (k < *edge) *edge = k;
            break;
        }
        size_t end = contraction_end(s, p + k, fold);
        if (end == NO_END) {
            *edge = k;
            break;
        }
        if (!end) continue;
        unsigned stop = (unsigned)(end - p);
        uint64_t below_stop = stop == 64 ? ~(uint64_t)0 : ((uint64_t)1 << stop) - 1;
        uint64_t inside = below_stop & ~(((uint64_t)1 << (k + 1)) - 1);
        if (!prefix) inside |= (uint64_t)1 << k;
        starts &= ~inside;
        taken |= inside | ((uint64_t)1 << k);
        if (stop < 64) starts |= (uint64_t)1 << stop;
    }
    return starts;
}

/* cl100k's pattern (GPT4_PATTERN):
   '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s */
static uint64_t gpt4_window(const uint8_t *s, size_t p) {
    Masks m;
    classify(s + p, &m, 0);
    uint64_t letter = m.letter, upper = 0;
    unsigned edge = wide_letters(s, p, m.high, 0, &letter, &upper);
    uint64_t space_like = m.space | m.tab; /* whitespace that may lead a letter run */
    uint64_t ws = space_like | m.newline;
    uint64_t other = ~(letter | m.digit | ws | m.high);
    /* ?[^\s\p{L}\p{N}]++[\r\n]*+: a run of others starts a piece unless a space before it does;
       the newlines right after it are its own */
    uint64_t other_start = other & ~((other | m.space) << 1);
    uint64_t taken = m.newline & ~(m.newline + (m.newline & (other << 1)));
    /* [^\r\n\p{L}\p{N}]?+\p{L}++: a letter run starts a piece unless a space, a tab or an other that
       starts a piece leads it */
    uint64_t letter_start = letter & ~((letter | space_like | other_start) << 1);
    uint64_t starts = letter_start | other_start | digit_groups(m.digit) | whitespace_starts(ws & ~taken, m.newline);
    starts = contractions(s, p, m.apostrophe & other_start, starts, 1, 1, &edge);
    return decided(starts, ws, edge);
}

/* o200k's pattern (O200K_PATTERN): [^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)? |
   the same with [UPPER]+[LOWER]* | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) |
   \s+ (UPPER: Lu Lt Lm Lo M, LOWER: Ll Lm Lo M) */
static uint64_t o200k_window(const uint8_t *s, size_t p) {
    Masks m;
    classify(s + p, &m, 1);
    uint64_t letter = m.letter, upper = m.upper;
    unsigned edge = wide_letters(s, p, m.high, 1, &letter, &upper);
    uint64_t space_like = m.space | m.tab;
    uint64_t ws = space_like | m.newline;
    uint64_t other = ~(letter | m.digit | ws | m.high);
    /* ?[^\s\p{L}\p{N}]+[\r\n/]*: after a run of others, line ends and slashes are its own */
    uint64_t tail = smear_up(m.newline & (other << 1), m.newline | m.slash);
    uint64_t other_start = other & ~tail & ~(((other & ~tail) | m.space) << 1);
    /* a letter run starts a piece unless a lead does, and is cut where an upper follows a lower */
    uint64_t letter_start = (letter & ~((letter | space_like | other_start) << 1)) | (upper & ((letter & ~upper) << 1));
    uint64_t starts = letter_start | other_start | digit_groups(m.digit) | whitespace_starts(ws & ~tail, m.newline);
    starts = contractions(s, p, m.apostrophe & (letter << 1), starts, 1, 0, &edge);
    return decided(starts, ws, edge);
}

/* GPT-2's pattern (GPT2_PATTERN): '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s */
static uint64_t gpt2_window(const uint8_t *s, size_t p) {
    Masks m;
    classify(s + p, &m, 0);
    uint64_t letter = m.letter, upper = 0;
    unsigned edge = wide_letters(s, p, m.high, 0, &letter, &upper);
    uint64_t ws = m.space | m.tab | m.newline;
    uint64_t other = ~(letter | m.digit | ws | m.high);
    /* each run starts a piece unless a space leads it; whitespace: all but its last character */
    uint64_t led = m.space << 1;
    uint64_t starts = (letter & ~((letter << 1) | led)) | (m.digit & ~((m.digit << 1) | led))
                      | (other & ~((other << 1) | led)) | (ws & ~(ws << 1)) | (ws & ~(ws >> 1) & (ws << 1));
    starts = contractions(s, p, m.apostrophe & ~((other << 1) | led), starts, 0, 1, &edge);
    return decided(starts, ws, edge);
}

/* A window's piece starts (bit 0 only: the pattern has no window scanner, or the masks are off). */
TP_INLINE uint64_t window_starts(int mode, const uint8_t *s, size_t i) {
    if (!window_ok) return 1;
    switch (mode) {
    case MODE_GPT4: return gpt4_window(s, i);
    case MODE_O200K: return o200k_window(s, i);
    case MODE_GPT2: return gpt2_window(s, i);
    default: return 1;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Keys and hashes                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Bytes of a short key: a piece of 1 to SHORT bytes is two words, its length in the top byte. */
#define SHORT 15
#define NONE 0xFFFFFFFFu
/* Ids must be below this (they are packed with a count in one word of the piece cache). */
#define MAX_ID (1u << 24)

typedef struct { uint64_t lo, hi; } Key;

/* `p[0:len]` (1 <= len <= SHORT) as a key; `limit`: how far past p may be read. */
TP_INLINE Key short_key(const uint8_t *p, size_t len, const uint8_t *limit) {
    Key key;
#ifndef TP_BIG_ENDIAN
    if (TP_LIKELY(p + 16 <= limit)) {
        memcpy(&key.lo, p, 8);
        memcpy(&key.hi, p + 8, 8);
        size_t low = len < 8 ? len : 8; /* (no branch: the lengths come in no order) */
        key.lo &= ~(uint64_t)0 >> (64 - 8 * low);
        key.hi &= (~(uint64_t)0 >> (63 - 8 * (len - low))) >> 1;
        key.hi |= (uint64_t)len << 56;
        return key;
    }
#endif
    key.lo = 0;
    key.hi = (uint64_t)len << 56;
    for (size_t k = 0; k < len; k++) {
        if (k < 8) key.lo |= (uint64_t)p[k] << (8 * k);
        else key.hi |= (uint64_t)p[k] << (8 * (k - 8));
    }
    return key;
}

TP_INLINE uint64_t key_hash(Key key) {
    uint64_t h = key.lo * 0x9E3779B97F4A7C15ull ^ (key.hi + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

/* A 64-bit hash of any bytes (pieces and tokens longer than SHORT). */
static uint64_t bytes_hash(const uint8_t *p, size_t len) {
    uint64_t h = 0x243F6A8885A308D3ull ^ (len * 0x9E3779B97F4A7C15ull);
    size_t k = 0;
    for (; k + 8 <= len; k += 8) {
        uint64_t w;
        memcpy(&w, p + k, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    for (size_t q = k; q < len; q++) w |= (uint64_t)p[q] << (8 * (q - k));
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

/* ------------------------------------------------------------------------------------------ */
/* Aligned zeroed memory (calloc'd: untouched pages cost nothing)                              */
/* ------------------------------------------------------------------------------------------ */

typedef struct { void *raw; void *data; } Block;

#define HUGE_PAGE ((size_t)2 << 20)

/* Zeroed memory aligned to a cache line; a table of 2 MiB or more is aligned to 2 MiB and, on
   Linux, asked to sit on huge pages (its look-ups land anywhere in it: one TLB entry instead of
   512). Every page is written now: a new piece cache is faulted in when it is made, not during
   the first pass over a text. */
static int block_new(Block *b, size_t bytes) {
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    b->raw = malloc(bytes + align);
    if (!b->raw) { b->data = NULL; return -1; }
    b->data = (void *)(((uintptr_t)b->raw + align - 1) & ~(uintptr_t)(align - 1));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == HUGE_PAGE) madvise(b->data, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    memset(b->data, 0, bytes);
    return 0;
}

static void block_free(Block *b) {
    free(b->raw);
    b->raw = b->data = NULL;
}

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

TP_INLINE uint32_t short_rank(const Encoder *e, Key key, uint64_t h) {
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

/* ------------------------------------------------------------------------------------------ */
/* A thread's piece cache and scratch                                                         */
/* ------------------------------------------------------------------------------------------ */

/* A short piece's entry: its key, then its ids: v[0] = count << 24 | first id, v[1..3] the rest.
   Two entries a set, one 64-byte line: a new entry goes first, the first moves second. A piece of
   5 to WIDE_IDS ids takes the whole set: its entry first, its ids from the fifth on in the second
   (whose words are ids below 2^24, so its top byte, where a key has its length, is 0: no piece's
   key matches it). */
typedef struct { uint64_t lo, hi; uint32_t v[4]; } Entry;
#define ENTRY_IDS 4
#define WIDE_IDS 12
/* A row (direct-mapped, 256 bytes): a piece of 16 to 128 bytes, or a shorter one with more ids
   than an entry holds; its hash, length and ids, then its bytes. */
#define ROW_BYTES 128
#define ROW_IDS 28
typedef struct { uint64_t hash; uint32_t len, count; uint32_t ids[ROW_IDS]; uint8_t bytes[ROW_BYTES]; } Row;

enum { STAT_HITS, STAT_MISSES, STAT_UNCACHED, STAT_TOKENS, STAT_PARTS, STAT_PART_HITS, STAT_COUNT };

typedef struct {
    PyObject_HEAD
    Block entry_block;
    Entry *entries;
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
    int busy;
} Cache;

/* ------------------------------------------------------------------------------------------ */
/* Merging a piece                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Pieces of at most this many bytes merge by tiktoken's scan (n^2, on the stack); longer ones by
   an indexed heap (n log n). */
#define SCAN_MERGE 32

/* The pair memo: what two adjacent parts (by their ids) make, per thread, direct-mapped: 2 << 14
   words (256 KiB, in a core's L2), a pair's key ((left + 1) << 24 | right) beside the id the two
   make (or NONE). A merge's look-ups in the vocabulary's table (megabytes, read in no order) were
   most of a missed piece's cost, and the same pairs recur from piece to piece. */
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
        rank[i] = i + 1 < m ? pair_of(e, c, tok[i], tok[i + 1], p + start[i], start[i + 2] - start[i], limit) : NONE;
        if (i > 0) rank[i - 1] = pair_of(e, c, tok[i - 1], tok[i], p + start[i - 1], start[i + 1] - start[i - 1], limit);
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

/* ------------------------------------------------------------------------------------------ */
/* Encoding texts                                                                             */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    uint32_t *ids;
    size_t len, cap;
} Out;

static int out_reserve(Out *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    size_t cap = o->cap + o->cap / 2 + more + 1024;
    uint32_t *grown = realloc(o->ids, cap * sizeof(uint32_t));
    if (!grown) return -1;
    o->ids = grown;
    o->cap = cap;
    return 0;
}

/* A piece found ahead of its encoding: where it starts, its length, and (2 to SHORT bytes) its
   key and the key's hash, whose table slots were prefetched. */
typedef struct { size_t start, len; Key key; uint64_t hash; } Ahead;

/* Pieces found, and their slots prefetched, before the first of them is encoded: the vocabulary's
   table and the piece cache are larger than the CPU's caches and read in no order, and a look-up
   that waits for memory costs more than scanning and hashing a piece. */
#define AHEAD 32

TP_INLINE Entry *cache_set(const Cache *c, uint64_t h) {
    return &c->entries[2 * ((h >> 20) & c->set_mask)];
}

TP_INLINE Row *cache_row(const Cache *c, uint64_t h) {
    return &c->rows[(h >> 20) & c->row_mask];
}

TP_INLINE void look_ahead(const Cache *c, const uint8_t *p, size_t n, const uint8_t *limit, Ahead *a) {
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

/* ------------------------------------------------------------------------------------------ */
/* Cutting a piece where no token spans a boundary                                            */
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
#define CUT_BITS 20
#define RIGHT_SIDE ((uint64_t)1 << 40)
#define NO_CUT ((size_t)-2)

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
static int build_cuts(Encoder *e, PyObject *ranks) {
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
    Py_ssize_t pos = 0;
    PyObject *token, *value;
    while (PyDict_Next(ranks, &pos, &token, &value)) {
        const uint8_t *t = (const uint8_t *)PyBytes_AS_STRING(token);
        size_t b = 0, e_ = (size_t)PyBytes_GET_SIZE(token);
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

/* Keep ids[0:count] as the piece's in its set (if they fit: up to WIDE_IDS). */
TP_INLINE void keep_short(Entry *set, Key key, const uint32_t *ids, size_t count) {
    if (count > WIDE_IDS) return;
    if (count > ENTRY_IDS) {
        memcpy(&set[1], ids + ENTRY_IDS, (count - ENTRY_IDS) * sizeof(uint32_t));
        memset((uint32_t *)&set[1] + (count - ENTRY_IDS), 0, (WIDE_IDS - count) * sizeof(uint32_t));
    } else if ((set[0].v[0] >> 24) > ENTRY_IDS) {
        memset(&set[1], 0, sizeof(Entry)); /* a wide entry's ids go with it */
    } else {
        set[1] = set[0];
    }
    set[0].lo = key.lo;
    set[0].hi = key.hi;
    set[0].v[0] = (uint32_t)(count << 24) | ids[0];
    for (size_t k = 1; k < ENTRY_IDS; k++) set[0].v[k] = k < count ? ids[k] : 0;
}

/* The piece's entry in its set (`key`), or NULL. */
TP_INLINE const Entry *find_short(const Entry *set, Key key) {
    return (set[0].lo == key.lo && set[0].hi == key.hi) ? &set[0]
           : (set[1].lo == key.lo && set[1].hi == key.hi) ? &set[1] : NULL;
}

/* An entry's ids to dst (all four words of the entry, and all eight of a wide one's second entry:
   dst has room); returns their count. */
TP_INLINE size_t entry_ids(const Entry *hit, uint32_t *dst) {
    size_t count = hit->v[0] >> 24;
    memcpy(dst, hit->v, sizeof(hit->v));
    dst[0] &= MAX_ID - 1;
    if (TP_UNLIKELY(count > ENTRY_IDS)) memcpy(dst + ENTRY_IDS, hit + 1, sizeof(Entry));
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
                keep_short(cache_set(c, h), key, &id, 1);
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
            entry_ids(hit, dst);
            c->stats[part ? STAT_PART_HITS : STAT_HITS]++;
            return count;
        }
        uint32_t id = n == 2 ? NONE : short_rank(e, key, h);
        if (id != NONE) {
            keep_short(set, key, &id, 1);
            c->stats[STAT_TOKENS]++;
            if (part && !reachable(e, c, id, p, n, limit, dst)) return merge_scan(e, c, p, n, limit, dst);
            dst[0] = id;
            return 1;
        }
        /* a piece of more ids than an entry holds is kept in a row */
        Row *row = cache_row(c, h);
        if (row->hash == h && row->len == n && memcmp(row->bytes, p, n) == 0) {
            memcpy(dst, row->ids, row->count * sizeof(uint32_t));
            c->stats[part ? STAT_PART_HITS : STAT_HITS]++;
            return row->count;
        }
        size_t count = NO_CUT;
        if (!part && has_wide(p, n)) count = encode_cut(e, c, p, n, limit, dst);
        if (count == NO_CUT) count = merge_scan(e, c, p, n, limit, dst);
        if (count == (size_t)-1) return count;
        if (count <= WIDE_IDS) keep_short(set, key, dst, count);
        else keep_row(row, h, p, n, dst, count);
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

/* Encode s[0:n]: find AHEAD pieces or more (by windows where the pattern has a window scanner,
   WINDOW(s, i) giving a window's starts, else by SCAN), prefetch their slots, then encode them. */
#define ENCODE_LOOP(SCAN, WINDOW)                                                                \
    while (i < n) {                                                                              \
        size_t found = 0, bytes = 0;                                                             \
        while (found < AHEAD && i < n) {                                                         \
            uint64_t starts = i + 64 <= n ? (WINDOW) & ~(uint64_t)1 : 0;                         \
            if (starts) {                                                                        \
                size_t from = i;                                                                 \
                do {                                                                             \
                    size_t to = i + (size_t)__builtin_ctzll(starts);                             \
                    starts &= starts - 1;                                                        \
                    ahead[found].start = from;                                                   \
                    ahead[found++].len = to - from;                                              \
                    from = to;                                                                   \
                } while (starts);                                                                \
                i = from;                                                                        \
            } else {                                                                             \
                size_t j = SCAN;                                                                 \
                ahead[found].start = i;                                                          \
                ahead[found++].len = j - i;                                                      \
                i = j;                                                                           \
            }                                                                                    \
        }                                                                                        \
        for (size_t k = 0; k < found; k++) {                                                     \
            look_ahead(c, s + ahead[k].start, ahead[k].len, limit, &ahead[k]);                  \
            bytes += ahead[k].len;                                                               \
        }                                                                                        \
        if (TP_UNLIKELY(o->len + bytes + WIDE_IDS > o->cap) && out_reserve(o, bytes + WIDE_IDS) < 0) return -1; \
        uint32_t *ids = o->ids;                                                                  \
        size_t len = o->len, hits = 0;                                                           \
        for (size_t k = 0; k < found; k++) {                                                     \
            const Ahead *a = &ahead[k];                                                          \
            if (TP_LIKELY(a->len <= SHORT)) {                                                    \
                /* the hit, inline */                                                            \
                const Entry *hit = find_short(cache_set(c, a->hash), a->key);                    \
                if (TP_LIKELY(hit != NULL)) {                                                    \
                    len += entry_ids(hit, ids + len);                                            \
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
        for (size_t k = 0; k < length; k++) {
            uint8_t b = u[k];
            if (b < 0x80) *d++ = b;
            else { *d++ = (uint8_t)(0xC0 | (b >> 6)); *d++ = (uint8_t)(0x80 | (b & 0x3F)); }
        }
    } else {
        size_t k = 0;
        while (k < length) {
            /* ASCII runs, four at a time where they are */
            if (kind == PyUnicode_2BYTE_KIND) {
                const Py_UCS2 *u = data;
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
/* A buffer of ids handed to numpy (np.frombuffer) without a copy                             */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t count;
    Py_ssize_t itemsize;
    char *format;
    Py_ssize_t exports;
} Buffer;

static void buffer_dealloc(Buffer *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int buffer_get(Buffer *self, Py_buffer *view, int flags) {
    int done = PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : (void *)"",
                                 self->count * self->itemsize, 1, flags);
    if (done < 0) return -1;
    view->itemsize = self->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
    if (flags & PyBUF_ND) {
        view->ndim = 1;
        view->shape = &self->count;
        view->strides = (flags & PyBUF_STRIDES) ? &view->itemsize : NULL;
    }
    return 0;
}

static PyBufferProcs buffer_procs = {(getbufferproc)buffer_get, NULL};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokpack.vocab._bpe.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory the encoder wrote (ids or ends), read with numpy.frombuffer.",
};

/* A Buffer owning `data` (freed with it, or now if the object cannot be made). */
static PyObject *buffer_wrap(void *data, Py_ssize_t count, Py_ssize_t itemsize, char *format) {
    Buffer *b = PyObject_New(Buffer, &BufferType);
    if (!b) { free(data); return NULL; }
    b->data = data;
    b->count = count;
    b->itemsize = itemsize;
    b->format = format;
    b->exports = 0;
    return (PyObject *)b;
}

/* ------------------------------------------------------------------------------------------ */
/* Cache: the Python type                                                                     */
/* ------------------------------------------------------------------------------------------ */

static int cache_init(Cache *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"set_bits", "row_bits", NULL};
    int set_bits = 17, row_bits = 13;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ii", names, &set_bits, &row_bits)) return -1;
    if (set_bits < 0 || set_bits > 30 || row_bits < 0 || row_bits > 30) {
        PyErr_SetString(PyExc_ValueError, "set_bits and row_bits must be from 0 to 30");
        return -1;
    }
    block_free(&self->entry_block);
    block_free(&self->row_block);
    block_free(&self->pair_block);
    size_t sets = (size_t)1 << set_bits, rows = (size_t)1 << row_bits;
    if (block_new(&self->entry_block, 2 * sets * sizeof(Entry)) < 0 || block_new(&self->row_block, rows * sizeof(Row)) < 0
        || block_new(&self->pair_block, 2 * PAIRS * sizeof(uint64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    self->entries = self->entry_block.data;
    self->set_mask = sets - 1;
    self->rows = self->row_block.data;
    self->pairs = self->pair_block.data; /* (a key of 0 is no pair's: the left id is stored + 1) */
    self->row_mask = rows - 1;
    memset(self->stats, 0, sizeof(self->stats));
    return 0;
}

static void cache_dealloc(Cache *self) {
    block_free(&self->entry_block);
    block_free(&self->row_block);
    block_free(&self->pair_block);
    free(self->text);
    free(self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *cache_stats(Cache *self, PyObject *unused) {
    (void)unused;
    size_t held = 0, rows_held = 0;
    for (size_t k = 0; k < 2 * (self->set_mask + 1); k++) held += (self->entries[k].hi >> 56) != 0; /* (a key's length) */
    for (size_t k = 0; k <= self->row_mask; k++) rows_held += self->rows[k].len != 0;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:n,s:n,s:n,s:n,s:n,s:n}",
                         "parts", (unsigned long long)self->stats[STAT_PARTS],
                         "part_hits", (unsigned long long)self->stats[STAT_PART_HITS],
                         "hits", (unsigned long long)self->stats[STAT_HITS],
                         "misses", (unsigned long long)self->stats[STAT_MISSES],
                         "uncached", (unsigned long long)self->stats[STAT_UNCACHED],
                         "tokens", (unsigned long long)self->stats[STAT_TOKENS],
                         "entries", (Py_ssize_t)(2 * (self->set_mask + 1)),
                         "entries_held", (Py_ssize_t)held,
                         "rows", (Py_ssize_t)(self->row_mask + 1),
                         "rows_held", (Py_ssize_t)rows_held,
                         "bytes", (Py_ssize_t)(2 * (self->set_mask + 1) * sizeof(Entry) + (self->row_mask + 1) * sizeof(Row)),
                         "buffer_bytes", (Py_ssize_t)(self->text_cap + self->scratch_cap * 12));
}

static PyMethodDef cache_methods[] = {
    {"stats", (PyCFunction)cache_stats, METH_NOARGS,
     "What the cache did and holds: hits, misses (merged, then kept), uncached (merged, too long to "
     "keep), tokens (pieces that are a token), its entries and rows and how many hold a piece, its "
     "bytes, and the bytes of its thread's buffers."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokpack.vocab._bpe.Cache",
    .tp_basicsize = sizeof(Cache),
    .tp_dealloc = (destructor)cache_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Cache(set_bits=17, row_bits=13): one thread's piece cache (2 << set_bits entries of "
              "pieces of up to 15 bytes and 4 ids, two for one of 5 to 12 ids, 1 << row_bits rows of "
              "pieces of up to 128 bytes and 28 "
              "ids, fixed) and "
              "its scratch. One call uses it at a time.",
    .tp_methods = cache_methods,
    .tp_init = (initproc)cache_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------ */
/* Encoder: the Python type                                                                   */
/* ------------------------------------------------------------------------------------------ */

static uint64_t table_size(size_t n) {
    uint64_t size = 256;
    while (size < 2 * (uint64_t)n + 2) size *= 2;
    return size;
}

static int encoder_init(Encoder *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"ranks", "mode", NULL};
    PyObject *ranks;
    int mode;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!i", names, &PyDict_Type, &ranks, &mode)) return -1;
    if (mode < MODE_GPT2 || mode > MODE_POLISH_PHRASE) {
        PyErr_Format(PyExc_ValueError, "no scanner numbered %d", mode);
        return -1;
    }
    if (self->pair_rank) {
        PyErr_SetString(PyExc_RuntimeError, "an Encoder is initialised once");
        return -1;
    }
    self->mode = mode;
    size_t shorts = 0, longs = 0, long_total = 0;
    Py_ssize_t pos = 0;
    PyObject *token, *value;
    while (PyDict_Next(ranks, &pos, &token, &value)) {
        if (!PyBytes_Check(token) || !PyLong_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "ranks must map bytes to int");
            return -1;
        }
        unsigned long id = PyLong_AsUnsignedLong(value);
        if (id == (unsigned long)-1 && PyErr_Occurred()) return -1;
        if (id >= MAX_ID) {
            PyErr_Format(PyExc_ValueError, "id %lu is not below %u", id, MAX_ID);
            return -1;
        }
        if (id > self->max_id) self->max_id = (uint32_t)id;
        Py_ssize_t len = PyBytes_GET_SIZE(token);
        if (len > SHORT) { longs++; long_total += (size_t)len; }
        else if (len > 0) shorts++;
    }
    self->pair_rank = malloc(65536 * sizeof(uint32_t));
    uint64_t short_size = table_size(shorts), long_size = table_size(longs);
    self->long_bytes = malloc(long_total + 1);
    if (!self->pair_rank || !self->long_bytes || block_new(&self->short_block, short_size * sizeof(ShortSlot)) < 0
        || block_new(&self->long_block, long_size * sizeof(LongSlot)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    memset(self->pair_rank, 0xFF, 65536 * sizeof(uint32_t));
    for (int b = 0; b < 256; b++) self->byte_rank[b] = NONE;
    self->shorts = self->short_block.data;
    self->short_mask = short_size - 1;
    self->longs = self->long_block.data;
    self->long_mask = long_size - 1;
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
    pos = 0;
    while (PyDict_Next(ranks, &pos, &token, &value)) {
        uint32_t id = (uint32_t)PyLong_AsUnsignedLong(value);
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(token);
        size_t len = (size_t)PyBytes_GET_SIZE(token);
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
        uint64_t i = key_hash(key) & self->short_mask;
        while (self->shorts[i].hi != 0) i = (i + 1) & self->short_mask;
        self->shorts[i] = *t;
    }
    free(staged);
    free(order);
    free(starts);
    for (int b = 0; b < 256; b++) {
        if (self->byte_rank[b] == NONE) {
            PyErr_Format(PyExc_ValueError, "the ranks lack the single byte %d", b);
            return -1;
        }
    }
    self->n_tokens = PyDict_GET_SIZE(ranks);
    self->reach = calloc((size_t)self->max_id + 1, 1);
    if (!self->reach || build_cuts(self, ranks) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void encoder_dealloc(Encoder *self) {
    free(self->pair_rank);
    free(self->long_bytes);
    free(self->cut_pairs);
    free(self->sides);
    free(self->left_sides);
    free(self->right_sides);
    free(self->reach);
    block_free(&self->short_block);
    block_free(&self->long_block);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_ready(Encoder *self, Cache *cache) {
    if (!self->pair_rank) {
        PyErr_SetString(PyExc_RuntimeError, "the Encoder was not initialised");
        return -1;
    }
    if (!cache->entries) {
        PyErr_SetString(PyExc_RuntimeError, "the Cache was not initialised");
        return -1;
    }
    if (cache->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a Cache serves one call at a time");
        return -1;
    }
    return 0;
}

static PyObject *encoder_encode(Encoder *self, PyObject *args) {
    PyObject *texts;
    Cache *cache;
    if (!PyArg_ParseTuple(args, "OO!", &texts, &CacheType, &cache)) return NULL;
    if (check_ready(self, cache) < 0) return NULL;
    PyObject *seq = PySequence_Fast(texts, "texts must be a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* the strs, held: another thread may change the list while this one encodes without the GIL */
    PyObject **held = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(PyObject *));
    int64_t *ends = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!held || !ends) {
        PyMem_Free(held);
        free(ends);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    size_t total = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *text = items[k];
        if (!PyUnicode_Check(text)) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] is %.80s, not str", k, Py_TYPE(text)->tp_name);
            PyMem_Free(held);
            free(ends);
            Py_DECREF(seq);
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(text) < 0) {
            PyMem_Free(held);
            free(ends);
            Py_DECREF(seq);
            return NULL;
        }
#endif
        total += (size_t)PyUnicode_GET_LENGTH(text);
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        held[k] = items[k];
        Py_INCREF(held[k]);
    }
    Py_DECREF(seq);
    Out out = {NULL, 0, 0};
    int failed = out_reserve(&out, total / 3 + 64);
    cache->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < count && !failed; k++) {
        size_t n;
        const uint8_t *s = str_utf8(cache, held[k], &n);
        failed = !s || encode_utf8(self, cache, s, n, &out) < 0;
        ends[k] = (int64_t)out.len;
    }
    Py_END_ALLOW_THREADS
    cache->busy = 0;
    for (Py_ssize_t k = 0; k < count; k++) Py_DECREF(held[k]);
    PyMem_Free(held);
    if (failed) {
        free(out.ids);
        free(ends);
        return PyErr_NoMemory();
    }
    if (out.len < out.cap) {
        uint32_t *shrunk = realloc(out.ids, (out.len ? out.len : 1) * sizeof(uint32_t));
        if (shrunk) out.ids = shrunk;
    }
    PyObject *ids = buffer_wrap(out.ids, (Py_ssize_t)out.len, sizeof(uint32_t), "I");
    if (!ids) { free(ends); return NULL; }
    PyObject *bounds = buffer_wrap(ends, count, sizeof(int64_t), "q");
    if (!bounds) { Py_DECREF(ids); return NULL; }
    return Py_BuildValue("(NN)", ids, bounds);
}

static PyObject *encoder_pieces(Encoder *self, PyObject *args) {
    PyObject *text;
    Cache *cache;
    int windows = 1;
    if (!PyArg_ParseTuple(args, "UO!|p", &text, &CacheType, &cache, &windows)) return NULL;
    if (check_ready(self, cache) < 0) return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return NULL;
#endif
    size_t n;
    const uint8_t *s = str_utf8(cache, text, &n);
    if (!s) return PyErr_NoMemory();
    PyObject *ends = PyList_New(0);
    if (!ends) return NULL;
    for (size_t i = 0; i < n;) {
        /* as encode finds them: a window's starts, else one piece from the byte scanner */
        uint64_t starts = windows && i + 64 <= n ? window_starts(self->mode, s, i) & ~(uint64_t)1 : 0;
        size_t from = i;
        if (!starts) i = piece_end(self->mode, s, i, n);
        do {
            if (starts) {
                i = from + (size_t)__builtin_ctzll(starts);
                starts &= starts - 1;
            }
            PyObject *end = PyLong_FromSize_t(i);
            if (!end || PyList_Append(ends, end) < 0) {
                Py_XDECREF(end);
                Py_DECREF(ends);
                return NULL;
            }
            Py_DECREF(end);
        } while (starts);
    }
    PyObject *utf8 = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)n);
    if (!utf8) { Py_DECREF(ends); return NULL; }
    return Py_BuildValue("(NN)", utf8, ends);
}

static PyObject *encoder_merge(Encoder *self, PyObject *args) {
    Py_buffer piece;
    Cache *cache;
    if (!PyArg_ParseTuple(args, "y*O!", &piece, &CacheType, &cache)) return NULL;
    if (check_ready(self, cache) < 0) { PyBuffer_Release(&piece); return NULL; }
    size_t n = (size_t)piece.len;
    uint32_t *ids = malloc((n ? n : 1) * sizeof(uint32_t));
    size_t count = 0;
    if (ids && n == 1) { ids[0] = self->byte_rank[((const uint8_t *)piece.buf)[0]]; count = 1; }
    else if (ids && n > 1) {
        const uint8_t *p = piece.buf;
        cache->busy = 1;
        Py_BEGIN_ALLOW_THREADS
        count = merge(self, cache, p, n, p + n, ids);
        Py_END_ALLOW_THREADS
        cache->busy = 0;
    }
    PyBuffer_Release(&piece);
    if (!ids || count == (size_t)-1) { free(ids); return PyErr_NoMemory(); }
    return buffer_wrap(ids, (Py_ssize_t)count, sizeof(uint32_t), "I");
}

static PyMethodDef encoder_methods[] = {
    {"encode", (PyCFunction)encoder_encode, METH_VARARGS,
     "encode(texts, cache) -> (ids, ends): every text's ids (uint32) and the end of each text's ids "
     "(int64), as buffers for numpy.frombuffer. Releases the GIL while it encodes."},
    {"pieces", (PyCFunction)encoder_pieces, METH_VARARGS,
     "pieces(text, cache, windows=True) -> (utf8, ends): the text's UTF-8 (lone surrogates as "
     "tiktoken's encode_ordinary treats them) and the end of each pre-tokenizer piece in it, in bytes, "
     "found as encode finds them (windows=False: by the byte scanner alone)."},
    {"merge", (PyCFunction)encoder_merge, METH_VARARGS,
     "merge(piece, cache) -> ids: tiktoken's byte_pair_merge of the bytes (without the shortcut for "
     "a piece that is a token), as a buffer for numpy.frombuffer."},
    {NULL, NULL, 0, NULL},
};

static PyObject *encoder_n_tokens(Encoder *self, void *unused) {
    (void)unused;
    return PyLong_FromSsize_t(self->n_tokens);
}

static PyObject *encoder_bytes(Encoder *self, void *unused) {
    (void)unused;
    return PyLong_FromSize_t(65536 * sizeof(uint32_t) + (self->short_mask + 1) * sizeof(ShortSlot)
                             + (self->long_mask + 1) * sizeof(LongSlot));
}

static PyGetSetDef encoder_getset[] = {
    {"n_tokens", (getter)encoder_n_tokens, NULL, "How many tokens the ranks hold.", NULL},
    {"table_bytes", (getter)encoder_bytes, NULL, "The bytes of the vocabulary's tables.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokpack.vocab._bpe.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_dealloc = (destructor)encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(ranks, mode): the tables of one vocabulary ({token bytes: id}, every single byte "
              "present, ids below MAX_ID) and one scanner (mode: 1 gpt2, 2 gpt4/cl100k, 3 o200k, 4 polish, "
              "5 polish-phrase). Read-only once made: any number of threads may use it, each with its "
              "own Cache.",
    .tp_methods = encoder_methods,
    .tp_getset = encoder_getset,
    .tp_init = (initproc)encoder_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------ */
/* The module                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tokpack.vocab._bpe",
    .m_doc = "tokpack's compiled BPE encoder (see tokpack.vocab.compiled).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__bpe(void) {
    for (int b = 0; b < 128; b++) ascii_class[b] = class_of((uint32_t)b);
#ifdef TP_SWAR
    /* the eight-byte runs agree with the class table on every byte, or are not used */
    swar_ok = 1;
    static const uint8_t classes[5] = {CL_L, CL_N, CL_S, CL_UP, CL_LO};
    for (int k = 0; k < 5; k++) {
        for (int b = 0; b < 256; b++) {
            uint64_t member = swar_member(ONES * (uint64_t)b, classes[k]) != 0;
            uint64_t expected = b < 0x80 && (ascii_class[b] & classes[k]);
            if (member != expected) swar_ok = 0;
        }
    }
#endif
    /* the window scanner's masks agree with the class table on every ASCII byte, or it is not used */
    window_ok = 1;
    uint8_t ascii[128];
    for (int b = 0; b < 128; b++) ascii[b] = (uint8_t)b;
    for (int half = 0; half < 2; half++) {
        Masks m;
        classify(ascii + 64 * half, &m, 1);
        for (int k = 0; k < 64; k++) {
            uint8_t cls = ascii_class[64 * half + k], b = (uint8_t)(64 * half + k);
            int space_like = (int)((m.space | m.tab) >> k & 1), newline = (int)(m.newline >> k & 1);
            if ((int)(m.letter >> k & 1) != !!(cls & CL_L) || (int)(m.digit >> k & 1) != !!(cls & CL_N)
                || (space_like | newline) != !!(cls & CL_S) || newline != (b == '\r' || b == '\n')
                || (int)(m.space >> k & 1) != (b == ' ') || (int)(m.apostrophe >> k & 1) != (b == '\'')
                || (int)(m.slash >> k & 1) != (b == '/') || (int)(m.upper >> k & 1) != !!(cls & CL_UP)
                || (int)((m.letter & ~m.upper) >> k & 1) != !!(cls & CL_LO) || (m.high >> k & 1))
                window_ok = 0;
        }
    }
    if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&CacheType) < 0 || PyType_Ready(&EncoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EncoderType);
    Py_INCREF(&CacheType);
    Py_INCREF(&BufferType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0
        || PyModule_AddObject(m, "Cache", (PyObject *)&CacheType) < 0
        || PyModule_AddObject(m, "Buffer", (PyObject *)&BufferType) < 0
        || PyModule_AddIntConstant(m, "MAX_ID", MAX_ID) < 0
        || PyModule_AddIntConstant(m, "SHORT", SHORT) < 0
        || PyModule_AddIntConstant(m, "WINDOWS", window_ok) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
