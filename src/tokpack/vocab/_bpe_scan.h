/* The compiled encoder's pre-tokenizer (part of _bpe.c's one translation unit, included once):
   one byte scanner per pattern, each alternative in the pattern's order, and the window scanners
   that find GPT-2's, cl100k's and o200k's pieces 64 bytes at a time. */
#ifndef TP_BPE_SCAN_H
#define TP_BPE_SCAN_H

#include "_bpe_base.h"
#include "_bpe_classes.h"

/* ------------------------------------------------------------------------------------------ */
/* Character classes                                                                          */
/* ------------------------------------------------------------------------------------------ */

enum { CL_L = 1, CL_N = 2, CL_S = 4, CL_UP = 8, CL_LO = 16, CL_LNS = 7, CL_CASED = 24 };
/* Scanners, numbered as tokpack.vocab.pattern_scanners numbers them. */
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
static int swar_ok;
#endif
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

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

/* The class table for ASCII, and whether the eight-byte runs (swar_ok) and the window scanners'
   masks (window_ok) agree with it on every byte: each is used only if it does. Once, when the
   module loads. */
static void scan_check(void) {
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
}

#endif
