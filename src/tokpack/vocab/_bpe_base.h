/* The compiled encoder's base (part of _bpe.c's one translation unit, included once): the
   build's switches, keys and hashes of a piece's bytes, and aligned zeroed tables. */
#ifndef TP_BPE_BASE_H
#define TP_BPE_BASE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif


#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#define TP_BIG_ENDIAN 1
#endif

/* SSSE3's byte shuffle (the str writer's blocks of two-byte characters, the vector UTF-8 check) is
   compiled for x86 with GCC or clang in functions of its own target, and run only where the CPU
   has it (ssse3_ok, asked once when the module is imported): the build targets no more than the
   compiler's default x86, so one build runs on every x86 CPU. TP_SCALAR_MASKS leaves out SSE2's
   and SSSE3's code altogether: the portable path every other CPU runs, which
   tests/vocab/test_encoder_scalar_build.py builds and tests on x86 too. */
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) \
    && !defined(TP_SCALAR_MASKS)
#define TP_SSSE3 1
#include <tmmintrin.h>
static int ssse3_ok;
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
        /* the bytes each word keeps, by length (a table: no branch, fewer instructions than shifts
           worked out from the length, in the loop every piece goes through) */
        static const uint64_t lo_keep[SHORT + 1] = {
            0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFF, 0xFFFFFFFFFFFF, 0xFFFFFFFFFFFFFF,
            ~(uint64_t)0, ~(uint64_t)0, ~(uint64_t)0, ~(uint64_t)0, ~(uint64_t)0, ~(uint64_t)0, ~(uint64_t)0,
            ~(uint64_t)0};
        static const uint64_t hi_keep[SHORT + 1] = {
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFF, 0xFFFFFFFFFFFF,
            0xFFFFFFFFFFFFFF};
        memcpy(&key.lo, p, 8);
        memcpy(&key.hi, p + 8, 8);
        key.lo &= lo_keep[len];
        key.hi = (key.hi & hi_keep[len]) | (uint64_t)len << 56;
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

/* A short key's hash: each word times an odd constant, the two products xored, and two of its
   higher stretches folded down, so that the low bits (the vocabulary table's slot), bits 20 on
   (the piece cache's set and row) and bits 24 on (the filter) each depend on every byte; as
   evenly spread over cl100k's and o200k's tokens and the benchmark's pieces as a third product
   made them, with one product less on the path every piece takes. */
TP_INLINE uint64_t key_hash(Key key) {
    uint64_t h = key.lo * 0x9E3779B97F4A7C15ull ^ key.hi * 0xC2B2AE3D27D4EB4Full;
    return h ^ (h >> 23) ^ (h >> 41);
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
/* Aligned zeroed memory                                                                      */
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

/* Pages about to be written, faulted in by one madvise instead of a trap into the kernel each (on
   a fresh process's first pass the traps for its ids' pages were a noticeable share: BENCHMARKS.md,
   "The compiled encoder"). Pages already in memory, which malloc reuses from its heap, are left
   alone, as mincore tells them: asking for them again costs more than it saves. */
#define POPULATE_PAGES 128

static void populate(void *from, void *to) {
#if defined(__linux__)
    const uintptr_t page = 4096;
    uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), b = (uintptr_t)to & ~(page - 1);
    while (a < b) {
        size_t pages = (b - a) / page < POPULATE_PAGES ? (b - a) / page : POPULATE_PAGES;
        unsigned char resident[POPULATE_PAGES];
        if (mincore((void *)a, pages * page, resident) != 0) return;
        size_t first = 0;
        while (first < pages && (resident[first] & 1)) first++;
        /* MADV_POPULATE_WRITE: Linux 5.14 on; an older kernel refuses it, and the pages fault */
        if (first < pages && madvise((void *)(a + first * page), (pages - first) * page, 23) != 0) return;
        a += pages * page;
    }
#else
    (void)from;
    (void)to;
#endif
}

static void block_free(Block *b) {
    free(b->raw);
    b->raw = b->data = NULL;
}

#endif
