"""A compiled exact byte-level BPE encoder: tiktoken's ``encode_ordinary`` ids, from numba.

Algorithm, per batch of texts (one numba call that releases the GIL):

1. The texts become one array of code points (``utf-32-le``, a C codec) with the end of each, at
   most :data:`GROUP_CODE_POINTS` at a time.
2. The compiled pre-tokenizer (:mod:`tokpack.vocab.pretokenizer`) cuts each text into pieces,
   with class tables read off tiktoken's own regex engine
   (:func:`~tokpack.vocab.pretokenizer.tiktoken_tables`), so the Unicode version is the oracle's.
3. A piece of one ASCII character is its byte's rank; a piece of one character of the Basic
   Multilingual Plane reads its ids from a table built with the vocabulary
   (:func:`_build_chars`). An ASCII piece of 2 to 8 characters is looked up first in a small
   cache keyed by its packed bytes (up to 3 ids in one word, :data:`SMALL_SLOTS` lines, a core's
   L2 at most). Any other piece of at most
   :data:`CACHE_ROW` ``- 2`` code points is looked up in a **piece cache**: a direct-mapped
   table of :data:`CACHE_SLOTS` rows, each holding a piece's code points and its ids. A hit
   copies the ids; a miss encodes the piece and overwrites the row, so the cache's size is fixed
   whatever the corpus (a cache that grows on a terabyte is a bug). Hits compare the code
   points, never only the hash. A new cache starts filled with the vocabulary's tokens
   (:func:`_warm`), so a piece that is a token is a hit the first time it is seen (two thirds
   of an English text's new pieces; a few milliseconds per thread, once). The pre-tokenizer
   runs :data:`_AHEAD` pieces ahead of the encoding, and the rows of those pieces (or their
   small cache's lines) are prefetched: the cache is larger than the CPU's caches, and even the
   small cache's line is out of the core's as often as not (a profile of English text had a
   fifth of the encoder's samples on that one load before it was prefetched).
4. A miss is encoded as tiktoken's ``byte_pair_merge`` does: adjacent parts are merged lowest
   rank first (leftmost on ties) until no adjacent pair is a token. Byte pairs come from a
   65,536-entry array, later pairs from a table of (left id, right id) -> id, packed in one word a
   slot; pieces of more than 16 bytes merge by a heap (its scratch reused from piece to piece),
   in the same order. tiktoken first takes a piece that is a token as that token; merging a
   token's bytes gives that token back for all but a few tokens (:func:`_build_unreachable`;
   none of GPT-2's or cl100k's), so only when the merge gives more than one id is the piece
   looked up, among those few (tokens of up to 7 bytes keyed by their packed bytes, longer ones
   by a 64-bit hash verified against the bytes). The look-up of every piece in the whole
   vocabulary, a table of megabytes, is what this saves.
5. Before that, a piece that missed and holds a Han, kana or Hangul character
   (:data:`_CUT_FROM`) is **cut** wherever no token can span the boundary between
   two of its characters (:func:`_cut_ok`: a bitmap built from every token's character
   boundaries, behind a per-character table of which of its sides any token's boundary has),
   and each part is encoded alone, through the same caches and tables: exactly the piece's ids
   (the proof is :func:`_encode`'s). A long run of Han or kana letters, a piece that rarely
   repeats, becomes parts that do (mostly single characters).

Ids are ranks (tiktoken's convention), written as ``uint32``. Each thread owns its cache (taken
from a pool), so threads never share mutable state. A pattern without a compiled pre-tokenizer is
not handled here: :class:`~tokpack.vocab.bytelevel.BpeTokenizer` falls back to tiktoken.

Lone surrogates, which have no UTF-8, are treated as tiktoken's ``encode_ordinary`` treats them:
the text goes through ``utf-16`` with ``surrogatepass`` and back with ``replace`` (a high and a low
surrogate in a row become their astral character; any other becomes U+FFFD).
"""

from __future__ import annotations

import ctypes
import queue
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from tokpack._kernels import borrowing, inlined
from tokpack.vocab.patterns import GPT2_PATTERN  # noqa: F401 - CompiledBpe's doctest
from tokpack.vocab.pretokenizer import COMPILED, tiktoken_tables
from tokpack.vocab.pretokenizer import fnv1a as _fnv1a
from tokpack.vocab.pretokenizer import mix as _mix
from tokpack.vocab.pretokenizer import piece_end as _piece_end
from tokpack.vocab.pretokenizer import same_bytes as _same_bytes
from tokpack.vocab.pretokenizer import utf8 as _utf8

#: Patterns with a compiled pre-tokenizer, and which one; any other falls back to tiktoken.
COMPILED_PATTERNS: dict[str, int] = {pattern: mode for pattern, mode in COMPILED.items() if pattern is not None}

#: Piece-cache slots per thread (a power of two): 32 MiB of rows. The 11 MB of mixed text in the
#: benchmarks has ~200,000 distinct pieces that fit a row; 4x the 65,536 rows of before took a
#: second pass over it from 222,700 misses to 124,800 (1.14-1.24x), and ``prepare`` of 9 copies
#: of it from 2.67x to 2.83x its speed before the compiled encoder, one worker (each new cache:
#: ~10 ms of page faults).
CACHE_SLOTS = 1 << 18
#: 32-bit words of a cache row: a piece of ``n`` code points and ``k`` ids is cached if
#: ``1 + n + k <= CACHE_ROW``; longer ones are encoded each time.
CACHE_ROW = 32
#: Lines of the small cache of short ASCII pieces, per thread (a power of two): 1 MiB. With its
#: lines prefetched, 65,536 lines ran 1.02-1.03x on mixed text, 1.16x on English and 1.12x on code
#: against 16,384 (fewer short pieces thrown out by others, each then looked up in the piece cache).
SMALL_SLOTS = 1 << 16

#: Pieces whose ends and cache rows are found ahead of their encoding: the rows' memory is
#: asked for (prefetched) while the pieces before them are encoded.
_AHEAD = 16


@intrinsic
def _prefetch(typingctx: Any, rows: Any, row: Any, column: Any) -> Any:
    """Ask the CPU to bring the cache line of ``rows[row, column]`` in (a hint: it changes no
    result). A piece cache of 32 MiB is beyond what the caches hold, and its rows are read in no
    order: without it every look-up waits for memory."""
    signature = types.void(rows, row, column)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, array, [args[1], args[2]],
                                           wraparound=False, boundscheck=False)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0i8")
        # read (0), keep in every cache level (3), data (1)
        builder.call(function, [builder.bitcast(pointer, byte_pointer), ir.Constant(i32, 0), ir.Constant(i32, 3),
                                ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return signature, codegen


_NONE = np.int64(1) << np.int64(40)  # "no rank": above every id
_NO_PAIR = np.uint32(0xFFFFFFFF)
_LOW = np.uint64(0xFFFFFFFF)
_HIGH = np.uint64(32)


@inlined
def _byte_hash(data, begin, end):
    """FNV-1a over ``data[begin:end]``, then splitmix64's finalizer (64 bits)."""
    return _mix(_fnv1a(data, begin, end))


_SHORT = 7  # tokens of at most this many bytes are keyed by their bytes themselves


@inlined
def _short_key(data, begin, end):
    """Bytes ``data[begin:end]`` (at most 7) packed into 64 bits, their count in the top byte: the
    key is the bytes, so a match needs no comparison and no key is 0."""
    key = np.uint64(end - begin) << np.uint64(56)
    for k in range(begin, end):
        key |= np.uint64(data[k]) << np.uint64(8 * (k - begin))
    return key


@njit(cache=True)
def _build_tables(flat, offsets, ids, short_size, long_size):
    """Two open-addressing tables of the tokens: those of at most 7 bytes by their packed bytes
    (``short_keys`` beside ``short_ids``), longer ones by a slot holding their hash's high 32 bits
    beside their number + 1 (0: empty), verified against ``flat`` on a match."""
    short_keys = np.zeros(short_size, dtype=np.uint64)
    short_ids = np.zeros(short_size, dtype=np.int64)
    long_slots = np.zeros(long_size, dtype=np.uint64)
    short_mask = np.uint64(short_size - 1)
    long_mask = np.uint64(long_size - 1)
    for token in range(offsets.size - 1):
        begin, end = offsets[token], offsets[token + 1]
        if end - begin <= _SHORT:
            key = _short_key(flat, begin, end)
            position = _mix(key) & short_mask
            while short_keys[position] != 0:
                position = (position + np.uint64(1)) & short_mask
            short_keys[position] = key
            short_ids[position] = ids[token]
        else:
            h = _byte_hash(flat, begin, end)
            position = h & long_mask
            while long_slots[position] != 0:
                position = (position + np.uint64(1)) & long_mask
            long_slots[position] = ((h >> _HIGH) << _HIGH) | np.uint64(token + 1)
    return short_keys, short_ids, long_slots


@inlined
def _rank_of(piece, begin, end, short_keys, short_ids, flat, offsets, ids, long_slots):
    """The rank of the bytes ``piece[begin:end]``, or ``_NONE``."""
    length = end - begin
    if length <= _SHORT:
        key = _short_key(piece, begin, end)
        mask = np.uint64(short_keys.size - 1)
        position = _mix(key) & mask
        while True:
            found = short_keys[position]
            if found == key:
                return short_ids[position]
            if found == 0:
                return _NONE
            position = (position + np.uint64(1)) & mask
    h = _byte_hash(piece, begin, end)
    mask = np.uint64(long_slots.size - 1)
    position = h & mask
    tag = h >> _HIGH
    while True:
        slot = long_slots[position]
        if slot == 0:
            return _NONE
        if (slot >> _HIGH) == tag:
            token = np.int64(slot & _LOW) - 1
            at = offsets[token]
            if offsets[token + 1] - at == length and _same_bytes(flat, at, piece, begin, length):
                return np.int64(ids[token])
        position = (position + np.uint64(1)) & mask


#: Bits of an id in the merge table's packed words: ``(left + 1) << 42 | right << 21 | id``.
_ID_BITS = np.uint64(21)
_ID_MASK = (np.uint64(1) << _ID_BITS) - np.uint64(1)
#: Ids must be below this for the compiled encoder (2,097,152; real vocabularies are far smaller).
MAX_ID = 1 << 21


@njit(cache=True)
def _build_pairs(flat, offsets, ids, short_keys, short_ids, long_slots):
    """The merge table: for every token and every cut of its bytes into two tokens ``left`` and
    ``right``, one word ``(left + 1) << 42 | right << 21 | token's id`` (never 0; ids below
    :data:`MAX_ID`), placed by the hash of its upper 42 bits. Every part of tiktoken's merge is a
    token, so the rank of two adjacent parts is this table's entry for their ids: a look-up of one
    64-bit word, the bytes neither hashed nor compared, in a table small enough for the caches
    (load at most 1/2, 8 bytes a slot)."""
    count = 0
    for token in range(offsets.size - 1):
        begin, end = offsets[token], offsets[token + 1]
        for cut in range(begin + 1, end):
            if (_rank_of(flat, begin, cut, short_keys, short_ids, flat, offsets, ids, long_slots) != _NONE
                    and _rank_of(flat, cut, end, short_keys, short_ids, flat, offsets, ids, long_slots) != _NONE):
                count += 1
    size = 1 << 8
    while size < 2 * count:
        size *= 2
    table = np.zeros(size, dtype=np.uint64)
    mask = np.uint64(size - 1)
    for token in range(offsets.size - 1):
        begin, end = offsets[token], offsets[token + 1]
        for cut in range(begin + 1, end):
            left = _rank_of(flat, begin, cut, short_keys, short_ids, flat, offsets, ids, long_slots)
            right = _rank_of(flat, cut, end, short_keys, short_ids, flat, offsets, ids, long_slots)
            if left == _NONE or right == _NONE:
                continue
            key = (np.uint64(left + 1) << _ID_BITS) | np.uint64(right)
            position = _mix(key) & mask
            while table[position] != 0 and (table[position] >> _ID_BITS) != key:
                position = (position + np.uint64(1)) & mask
            table[position] = (key << _ID_BITS) | np.uint64(ids[token])
    return table


@inlined
def _byte_pair(pair_rank, first, second):
    """The id of the two-byte token ``first second``, or ``_NONE``."""
    found = pair_rank[(np.int64(first) << 8) | np.int64(second)]
    return _NONE if found == _NO_PAIR else np.int64(found)


@inlined
def _pair(table, left, right):
    """The id of the token made of tokens ``left`` and ``right``, or ``_NONE``."""
    key = (np.uint64(left + 1) << _ID_BITS) | np.uint64(right)
    mask = np.uint64(table.size - 1)
    position = _mix(key) & mask
    while True:
        found = table[position]
        if (found >> _ID_BITS) == key:
            return np.int64(found & _ID_MASK)
        if found == 0:
            return _NONE
        position = (position + np.uint64(1)) & mask


#: Pieces of more bytes than this merge by a heap (``n log n``) rather than by tiktoken's scan
#: for the lowest rank after each merge (``n²``); both merge in the same order.
_LONG = 16
_POSITION_BITS = np.int64(24)
_POSITION_MASK = (np.int64(1) << _POSITION_BITS) - 1


@njit(cache=True, nogil=True)
def _heap_push(heap, size, key):
    heap[size] = key
    child = size
    while child > 0:
        parent = (child - 1) >> 1
        if heap[parent] <= heap[child]:
            break
        heap[parent], heap[child] = heap[child], heap[parent]
        child = parent
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(heap, size):
    """Remove the smallest key into ``heap[size - 1]``; return the new size."""
    size -= 1
    heap[0], heap[size] = heap[size], heap[0]
    parent = 0
    while True:
        best, left, right = parent, 2 * parent + 1, 2 * parent + 2
        if left < size and heap[left] < heap[best]:
            best = left
        if right < size and heap[right] < heap[best]:
            best = right
        if best == parent:
            break
        heap[parent], heap[best] = heap[best], heap[parent]
        parent = best
    return size


@njit(cache=True, nogil=True)
def _merge_long(piece, n, byte_rank, pair_rank, pair_table, out, at, scratch, heap):
    """:func:`_merge_piece`'s merges for a long piece (not a token itself), in the same order: the
    parts form a linked list over their first bytes, and a heap holds ``rank << 24 | first byte``
    of every adjacent pair, so the smallest key is the lowest rank, leftmost on ties. An entry is
    current when its part still has that rank with its next part (a rank names one token, so
    one byte span: an equal rank is the same pair). ``scratch`` (4 rows of at least ``n``) and
    ``heap`` (at least ``2 n``: it starts with at most ``n - 1`` entries, and each of the at most
    ``n - 1`` merges pops one and pushes at most two) are the caller's, reused from piece to piece."""
    tok = scratch[0]
    rank = scratch[1]
    following = scratch[2]
    previous = scratch[3]
    size = 0
    for k in range(n):
        tok[k] = byte_rank[piece[k]]
        following[k] = k + 1
        previous[k] = k - 1
    for k in range(n - 1):
        rank[k] = _byte_pair(pair_rank, piece[k], piece[k + 1])
        if rank[k] != _NONE:
            size = _heap_push(heap, size, (rank[k] << _POSITION_BITS) | k)
    rank[n - 1] = _NONE
    while size > 0:
        size = _heap_pop(heap, size)
        key = heap[size]
        first = key & _POSITION_MASK
        r = key >> _POSITION_BITS
        if rank[first] != r:
            continue  # stale
        gone = following[first]
        tok[first] = r
        following[first] = following[gone]
        rank[gone] = _NONE
        after = following[first]
        if after < n:
            previous[after] = first
            rank[first] = _pair(pair_table, tok[first], tok[after])
            if rank[first] != _NONE:
                size = _heap_push(heap, size, (rank[first] << _POSITION_BITS) | first)
        else:
            rank[first] = _NONE
        before = previous[first]
        if before >= 0:
            rank[before] = _pair(pair_table, tok[before], tok[first])
            if rank[before] != _NONE:
                size = _heap_push(heap, size, (rank[before] << _POSITION_BITS) | before)
    k = 0
    while k < n:
        out[at] = tok[k]
        at += 1
        k = following[k]
    return at


@inlined
def _merge_piece(piece, n, short_keys, short_ids, flat, offsets, ids, long_slots, byte_rank, pair_rank,
                 pair_table, rks, toks, out, at, scratch, heap, shortcut=True):
    """Write the ids of the ``n`` bytes ``piece[:n]`` to ``out[at:]`` as tiktoken's
    ``byte_pair_merge`` finds them (first, with ``shortcut``, the piece's own rank if it is a
    token, as tiktoken's ``encode_ordinary`` does); return the new end. ``rks`` and ``toks`` are
    scratch of at least ``n + 1``: part ``k`` is token ``toks[k]``, and ``rks[k]`` the rank of it
    merged with the next part."""
    if n == 1:
        out[at] = byte_rank[piece[0]]
        return at + 1
    if shortcut:
        whole = _rank_of(piece, 0, n, short_keys, short_ids, flat, offsets, ids, long_slots)
        if whole != _NONE:
            out[at] = whole
            return at + 1
    if n > _LONG and n < (1 << 24):
        return _merge_long(piece, n, byte_rank, pair_rank, pair_table, out, at, scratch, heap)
    best = _NONE
    where = -1
    for i in range(n - 1):
        r = _byte_pair(pair_rank, piece[i], piece[i + 1])
        rks[i] = r
        toks[i] = byte_rank[piece[i]]
        if r < best:
            best = r
            where = i
    rks[n - 1] = _NONE
    toks[n - 1] = byte_rank[piece[n - 1]]
    m = n  # parts
    while best != _NONE:
        i = where
        toks[i] = best  # parts i and i + 1 become the token of that rank (ids are ranks)
        for k in range(i + 1, m - 1):
            toks[k] = toks[k + 1]
            rks[k] = rks[k + 1]
        m -= 1
        if i > 0:
            rks[i - 1] = _pair(pair_table, toks[i - 1], toks[i])
        rks[i] = _pair(pair_table, toks[i], toks[i + 1]) if i + 1 < m else _NONE
        best = _NONE
        for k in range(m - 1):
            if rks[k] < best:
                best = rks[k]
                where = k
    for k in range(m):
        out[at] = toks[k]
        at += 1
    return at


#: Pieces that miss the cache are cut only if they hold a character at or above this one (CJK
#: radicals onward: Han, kana, Hangul, full-width forms): there a letter run is a phrase with no
#: spaces, rarely seen twice, whose parts (mostly single characters) repeat. In other scripts a
#: missed word seldom has a cut, and when it has one (cl100k's Cyrillic), its parts miss too:
#: looking for cuts there cost more than it saved (measured: 1.04-1.19x without it on mixed text).
_CUT_FROM = 0x2E80

#: Bits of the cut table (a bitmap over hashed pairs of sides, 512 KiB: it stays in a core's L2).
_CUT_BITS = 22


@inlined
def _side_bit(left, right):
    """The cut table's bit of the two sides ``left`` and ``right`` of a boundary (see
    :func:`_build_cuts`)."""
    return _mix((np.uint64(left) << np.uint64(24)) | np.uint64(right)) >> np.uint64(64 - _CUT_BITS)


@inlined
def _left_key(value, count, whole):
    """The key of a boundary's left side: a whole code point ``value``, or (``whole`` false) the
    last ``count`` (1-3) bytes of a character, ``value`` their 6-bit payloads."""
    if whole:
        return value
    return (1 << 21) | (count << 18) | value


@inlined
def _right_key(value, count, whole):
    """The key of a boundary's right side: a whole code point ``value``, or the first ``count``
    (1-3) bytes of a character, ``value`` its lead byte then 6-bit payloads."""
    if whole:
        return value
    return (1 << 23) | (count << 20) | value


_RIGHT_SIDE = 1 << 40  # right sides' keys are told from left sides' in the bitmaps of sides


@inlined
def _side_hash(key):
    """A side's bit in :func:`_build_cuts`' bitmaps of the left and right sides seen."""
    return _mix(np.uint64(key)) >> np.uint64(64 - _CUT_BITS)


@inlined
def _left_side(c, s):
    """The key of the code point ``c`` on a boundary's left: whole (``s`` 0) or its last ``s`` bytes."""
    return _left_key(c, 0, True) if s == 0 else _left_key(c & ((1 << (6 * s)) - 1), s, False)


@inlined
def _right_side(c, size_c, r):
    """The key of the code point ``c`` (of ``size_c`` bytes) on a boundary's right: whole (``r``
    0) or its first ``r`` bytes (its lead byte, then 6-bit payloads)."""
    if r == 0:
        return _right_key(c, 0, True)
    v = (0xC0, 0xE0, 0xF0)[size_c - 2] | (c >> (6 * (size_c - 1)))
    for q in range(1, r):
        v = (v << 6) | ((c >> (6 * (size_c - 1 - q))) & 0x3F)
    return _right_key(v, r, False)


@njit(cache=True)
def _build_cuts(flat, offsets):
    """The cut table: a bitmap over the hashed (left side, right side) of every character
    boundary inside every token. A token's bytes parse as UTF-8 does in any valid text that holds
    them: a head of continuation bytes (the end of a character begun before the token), whole
    characters, then maybe the beginning of a character; a side is a whole character, or that
    head or that beginning. Tokens that no valid UTF-8 text holds (a continuation byte where a
    character begins, a byte UTF-8 never uses, a lead byte inside a character) are left out:
    they never equal a piece's bytes.

    Also returns, per character of the Basic Multilingual Plane, which of its sides some token's
    boundary has on its left (bit ``s``: the whole character if ``s`` is 0, else its last ``s``
    bytes) or on its right (bit ``4 + r``: the whole character, or its first ``r`` bytes): a
    boundary with no such side on either hand needs no pair look-up (most boundaries between
    Han characters)."""
    bits = np.zeros((1 << _CUT_BITS) >> 6, dtype=np.uint64)
    left_sides = np.zeros((1 << _CUT_BITS) >> 6, dtype=np.uint64)
    right_sides = np.zeros((1 << _CUT_BITS) >> 6, dtype=np.uint64)
    longest = 1
    for t in range(offsets.size - 1):
        longest = max(longest, offsets[t + 1] - offsets[t])
    keys_left = np.empty(longest + 1, dtype=np.int64)
    keys_right = np.empty(longest + 1, dtype=np.int64)
    for t in range(offsets.size - 1):
        b, e = offsets[t], offsets[t + 1]
        k = b
        while k < e and (flat[k] & 0xC0) == 0x80:
            k += 1
        head = k - b
        if head > 3:
            continue
        m = 0  # sides: m characters (whole or not) after the head
        if head > 0:
            v = 0
            for q in range(b, k):
                v = (v << 6) | (flat[q] & 0x3F)
            keys_left[0] = _left_key(v, head, False)
        valid = True
        while k < e:
            x = np.int64(flat[k])
            if x < 0x80:
                size, cp = 1, x
            elif 0xC2 <= x < 0xE0:
                size, cp = 2, x & 0x1F
            elif 0xE0 <= x < 0xF0:
                size, cp = 3, x & 0x0F
            elif 0xF0 <= x < 0xF5:
                size, cp = 4, x & 0x07
            else:
                valid = False
                break
            stop = min(k + size, e)
            v = x
            for q in range(k + 1, stop):
                if (flat[q] & 0xC0) != 0x80:
                    valid = False
                cp = (cp << 6) | (flat[q] & 0x3F)
                v = (v << 6) | (flat[q] & 0x3F)
            if not valid:
                break
            if k + size > e:
                keys_right[m] = _right_key(v, e - k, False)
            else:
                keys_right[m] = _right_key(cp, size, True)
                keys_left[m + 1] = _left_key(cp, size, True)
            m += 1
            k += size
        if not valid:
            continue
        # boundaries: before character q (q >= 1), or before the first if a head precedes it
        for q in range(0 if head > 0 else 1, m):
            bit = _side_bit(keys_left[q], keys_right[q])
            bits[bit >> np.uint64(6)] |= np.uint64(1) << (bit & np.uint64(63))
            lk = _side_hash(keys_left[q])
            left_sides[lk >> np.uint64(6)] |= np.uint64(1) << (lk & np.uint64(63))
            rk = _side_hash(keys_right[q] | _RIGHT_SIDE)
            right_sides[rk >> np.uint64(6)] |= np.uint64(1) << (rk & np.uint64(63))
    sides = np.zeros(0x10000, dtype=np.uint8)
    for c in range(0x10000):
        size_c = 1 if c < 0x80 else (2 if c < 0x800 else 3)
        flags = 0
        for s in range(size_c):
            lk = _side_hash(_left_side(c, s))
            if (left_sides[lk >> np.uint64(6)] >> (lk & np.uint64(63))) & np.uint64(1):
                flags |= 1 << s
            rk = _side_hash(_right_side(c, size_c, s) | _RIGHT_SIDE)
            if (right_sides[rk >> np.uint64(6)] >> (rk & np.uint64(63))) & np.uint64(1):
                flags |= 16 << s
        sides[c] = flags
    return bits, sides


@inlined
def _cut_ok(a, b, cut_pairs, sides):
    """Whether no token can span the boundary between code points ``a`` and ``b`` (``False``
    may be wrong, ``True`` never is). A token that spans it holds, just before it, ``a`` whole or
    a proper end of ``a`` (where the token begins), and just after it ``b`` whole or a proper
    beginning of ``b`` (where it ends): every such pair of sides that ``sides`` (see
    :func:`_build_cuts`) does not rule out is looked up."""
    size_a = 1 if a < 0x80 else (2 if a < 0x800 else (3 if a < 0x10000 else 4))
    size_b = 1 if b < 0x80 else (2 if b < 0x800 else (3 if b < 0x10000 else 4))
    left_flags = 15
    right_flags = 15
    if a < 0x10000 and b < 0x10000:
        left_flags = np.int64(sides[a]) & 15
        right_flags = np.int64(sides[b]) >> 4
        if left_flags == 0 or right_flags == 0:
            return True
    for s in range(size_a):  # s = 0: a whole; else its last s bytes
        if not (left_flags >> s) & 1:
            continue
        left = _left_side(a, s)
        for r in range(size_b):  # r = 0: b whole; else its first r bytes
            if not (right_flags >> r) & 1:
                continue
            right = _right_side(b, size_b, r)
            bit = _side_bit(left, right)
            if (cut_pairs[bit >> np.uint64(6)] >> (bit & np.uint64(63))) & np.uint64(1):
                return False
    return True


@njit(cache=True)
def _build_unreachable(short_keys, short_ids, flat, offsets, ids, long_slots, byte_rank, pair_rank,
                       pair_table):
    """Per id, 1 if merging the token's own bytes does not give that token back (the piece
    shortcut of :func:`_merge_piece` gives it; a cut-off part of a piece must not)."""
    longest = 1
    for t in range(offsets.size - 1):
        longest = max(longest, offsets[t + 1] - offsets[t])
    unreachable = np.zeros(ids.max() + 1 if ids.size else 1, dtype=np.uint8)
    size = longest + 1
    rks = np.empty(size, dtype=np.int64)
    toks = np.empty(size, dtype=np.int64)
    scratch = np.empty((4, size), dtype=np.int64)
    heap = np.empty(3 * size + 1, dtype=np.int64)
    out = np.empty(size, dtype=np.uint32)
    for t in range(offsets.size - 1):
        b, e = offsets[t], offsets[t + 1]
        if e - b < 2:
            continue
        at = _merge_piece(flat[b:e], e - b, short_keys, short_ids, flat, offsets, ids, long_slots, byte_rank,
                          pair_rank, pair_table, rks, toks, out, 0, scratch, heap, False)
        if at != 1 or out[0] != ids[t]:
            unreachable[ids[t]] = 1
    return unreachable


@njit(cache=True)
def _build_chars(short_keys, short_ids, flat, offsets, ids, long_slots, byte_rank, pair_rank, pair_table,
                 unreachable):
    """The ids of every character of the Basic Multilingual Plane (U+0080 to U+FFFF, no
    surrogates) alone, packed in one word: ``count << 62`` and each of its (at most 3) ids in 20
    bits; 0 where a character has none (an id of 20 bits or more, or a token that merging its
    bytes does not give: its ids differ as a piece and as a part of one)."""
    chars = np.zeros(0x10000, dtype=np.uint64)
    piece = np.empty(4, dtype=np.uint8)
    cp = np.empty(1, dtype=np.uint32)
    rks = np.empty(5, dtype=np.int64)
    toks = np.empty(5, dtype=np.int64)
    scratch = np.empty((4, 5), dtype=np.int64)
    heap = np.empty(16, dtype=np.int64)
    out = np.empty(4, dtype=np.uint32)
    for c in range(0x80, 0x10000):
        if 0xD800 <= c < 0xE000:
            continue
        cp[0] = c
        n = _utf8(cp, 0, 1, piece)
        count = _merge_piece(piece, n, short_keys, short_ids, flat, offsets, ids, long_slots, byte_rank, pair_rank,
                             pair_table, rks, toks, out, 0, scratch, heap, True)
        if count == 1 and unreachable[out[0]]:
            continue
        word = np.uint64(count) << np.uint64(62)
        fits = True
        for k in range(count):
            if out[k] >= (1 << 20):
                fits = False
            word |= np.uint64(out[k]) << np.uint64(20 * k)
        if fits:
            chars[c] = word
    return chars


@inlined
def _char_ids(chars, c, out, at):
    """Write the ids of the character ``c`` alone from :func:`_build_chars`'s table; return the
    new end, or -1 if the table has none."""
    if c < 0x80 or c >= 0x10000:
        return -1
    word = chars[c]
    if word == 0:
        return -1
    count = np.int64(word >> np.uint64(62))
    for k in range(count):
        out[at + k] = np.uint32((word >> np.uint64(20 * k)) & np.uint64(0xFFFFF))
    return at + count


@inlined
def _one_character(c, byte_rank, chars, out, at):
    """Write the ids of a piece (or a cut piece's part) that is the one character ``c``, from the
    byte ranks (ASCII) or :func:`_build_chars`'s table; return the new end, or -1 if neither has it."""
    if c < 0x80:
        out[at] = byte_rank[c]
        return at + 1
    return _char_ids(chars, np.int64(c), out, at)


@inlined
def _probe(cps, i, j, cache, cache_mask, out, at, slot=-1):
    """The cache row of the piece ``cps[i:j]`` (``slot``, if the caller hashed it already), and the
    end of its ids copied to ``out[at:]`` on a hit (-1 on a miss). A row: its piece's length | its
    id count << 8, the code points, the ids."""
    length = j - i
    if slot < 0:
        slot = np.int64(_mix(_fnv1a(cps, i, j)) & cache_mask)
    if cache[slot, 0] & 0xFF == length:
        for k in range(length):
            if cache[slot, 1 + k] != cps[i + k]:
                return slot, -1
        count = np.int64(cache[slot, 0] >> 8)
        for k in range(count):
            out[at + k] = cache[slot, 1 + length + k]
        return slot, at + count
    return slot, -1


@inlined
def _store(cps, i, j, cache, slot, out, first, at, unreachable):
    """Write the piece ``cps[i:j]`` and its ids ``out[first:at]`` to its cache row if they fit,
    unless its ids are one token that merging its bytes does not give (a cut-off part of a
    piece reads the cache too, and must get the merge's ids)."""
    length = j - i
    count = at - first
    if 1 + length + count > cache.shape[1] or (count == 1 and unreachable[out[first]]):
        return
    cache[slot, 0] = length | (count << 8)
    for k in range(length):
        cache[slot, 1 + k] = cps[i + k]
    for k in range(count):
        cache[slot, 1 + length + k] = out[first + k]


@inlined
def _unreachable_token(piece, n, count, short_keys, short_ids, flat, offsets, ids, long_slots):
    """The id of the token whose bytes are ``piece[:n]`` if it is one that merging does not give
    (the tables hold only those) and the merge gave ``count`` ids; else ``_NONE``."""
    if ids.size == 0 or count < 2:
        return _NONE
    return _rank_of(piece, 0, n, short_keys, short_ids, flat, offsets, ids, long_slots)


@inlined
def _small_key(cps, i, j):
    """The small cache's key of the piece ``cps[i:j]``: its length and its characters' 7 bits
    packed, if it is 2 to 8 ASCII characters; else 0 (the small cache does not hold it)."""
    length = j - i
    if length < 2 or length > 8:
        return np.uint64(0)
    key = np.uint64(length) << np.uint64(56)
    for k in range(i, j):
        if cps[k] >= 0x80:
            return np.uint64(0)
        key |= np.uint64(cps[k]) << np.uint64(7 * (k - i))
    return key


@inlined
def _store_small(small, line, key, out, first, at):
    """Write a short ASCII piece's key and its ids ``out[first:at]`` to the small cache's line
    ``line`` if they fit in one word: at most 3 ids, each below 2**20."""
    count = at - first
    if count > 3:
        return
    word = np.uint64(count) << np.uint64(62)
    for k in range(count):
        if out[first + k] >= (1 << 20):
            return
        word |= np.uint64(out[first + k]) << np.uint64(20 * k)
    small[line, 0] = key
    small[line, 1] = word


@njit(cache=True, nogil=True)
def _encode(cps, ends, mode, classes, fold, exact, short_keys, short_ids, flat, offsets, ids, long_slots,
            byte_rank, pair_rank, pair_table, cut_pairs, cut_sides, unreachable, chars, cache, small, stats):
    """The ids of every text of ``cps`` (texts end at ``ends``): one ``uint32`` array, and the end
    of each text's ids in it (:func:`_encode_run`'s, which this allocates for: numba counts
    references to an array that a loop may replace at every turn of the loop, which cost
    1.2x when the buffers were grown inside it). When the run stops because a piece needs more
    room (a piece of ``n`` code points writes at most ``4 n`` ids, one a UTF-8 byte, and its merge
    needs a scratch entry a byte), the ids' buffer or the merge's scratch grows and the run
    resumes where it stopped."""
    out = np.empty(max(64, cps.size + cps.size // 2), dtype=np.uint32)
    doc_ends = np.empty(ends.size, dtype=np.int64)
    state = np.zeros(3, dtype=np.int64)
    ahead_end = np.empty(_AHEAD, dtype=np.int64)
    ahead_slot = np.empty(_AHEAD, dtype=np.int64)
    ahead_key = np.empty(_AHEAD, dtype=np.uint64)
    size = 257
    piece = np.empty(size, dtype=np.uint8)
    rks = np.empty(size, dtype=np.int64)
    toks = np.empty(size, dtype=np.int64)
    scratch = np.empty((4, size), dtype=np.int64)
    heap = np.empty(2 * size, dtype=np.int64)
    while True:
        size = _encode_run(cps, ends, mode, classes, fold, exact, short_keys, short_ids, flat, offsets, ids,
                           long_slots, byte_rank, pair_rank, pair_table, cut_pairs, cut_sides, unreachable, chars,
                           cache, small, stats, out, doc_ends, state, piece, rks, toks, scratch, heap, ahead_end,
                           ahead_slot, ahead_key)
        if size == 0:
            return out[:state[2]].copy(), doc_ends
        at = state[2]
        if at + size > out.size:
            grown = np.empty(max(2 * out.size, at + size), dtype=np.uint32)
            grown[:at] = out[:at]
            out = grown
        if size > piece.size:
            piece = np.empty(size, dtype=np.uint8)
            rks = np.empty(size, dtype=np.int64)
            toks = np.empty(size, dtype=np.int64)
            scratch = np.empty((4, size), dtype=np.int64)
            heap = np.empty(2 * size, dtype=np.int64)


@borrowing
def _encode_run(cps, ends, mode, classes, fold, exact, short_keys, short_ids, flat, offsets, ids, long_slots,
                byte_rank, pair_rank, pair_table, cut_pairs, cut_sides, unreachable, chars, cache, small, stats,
                out, doc_ends, state, piece, rks, toks, scratch, heap, ahead_end, ahead_slot, ahead_key):
    """Encode the texts of :func:`_encode` from the text ``state[0]``, position ``state[1]``, ids'
    end ``state[2]`` on, writing the ids to ``out`` and each text's end to ``doc_ends``: return
    0 when done; or, where a piece of ``n`` code points would not fit (``4 n`` more ids than
    ``out`` holds, or more bytes than ``piece`` holds: ``rks``, ``toks``, ``scratch``'s rows and
    half ``heap`` have an entry a byte of it), ``8 n + 1``, with ``state`` where to resume.

    ``stats`` counts [cache hits, misses, uncached pieces, hits of cut parts, misses of cut
    parts]. The token tables (``short_keys`` to ``long_slots``) hold only the
    tokens that merging their own bytes does not give (:func:`_build_unreachable`): a whole piece
    is merged, and looked up there only if the merge gives more than one id. That is tiktoken's
    order (the piece's own rank first, if it is a token) with the same ids: a piece that is a
    token merges to that token unless the token is one of those. A part of a cut piece whose
    bytes are one of those tokens keeps the merge's ids, and is not written to the cache, which
    whole pieces read too.

    A piece that misses the cache (and holds a character from :data:`_CUT_FROM` on: cutting is
    only ever a saving, never needed) is cut where :func:`_cut_ok` proves that no token spans the
    boundary, and each part is encoded alone (through the cache, parts repeat far more than
    whole pieces do) with the merge alone, never the piece shortcut. That gives the piece's ids
    exactly: every part that the merge ever holds is a token made of the piece's bytes, so no
    part ever crosses a cut; the rank of a pair across a cut would be a token spanning it, so
    such a pair never has one; the lowest-rank pair of the whole piece is therefore the
    lowest-rank pair of the side it lies in (leftmost on ties, the left side's first), and each
    side goes through the very merges, in the same order, that it goes through alone. A piece
    with a cut is not a token (that token would span the cut), so the shortcut does not apply
    to it either."""
    cache_mask = np.uint64(cache.shape[0] - 1)
    small_mask = np.uint64(small.shape[0] - 1)
    line = 0
    row = cache.shape[1]
    at = state[2]
    begin = ends[state[0] - 1] if state[0] > 0 else 0
    for d in range(state[0], ends.size):
        end = ends[d]
        i = state[1] if d == state[0] and state[1] > begin else begin
        found = 0  # pieces found ahead
        taken = 0  # of which encoded
        while i < end:
            if taken == found:  # the next pieces' ends, and the rows of those the rows may hold
                found = 0
                taken = 0
                k = i
                while found < _AHEAD and k < end:
                    e = _piece_end(cps, k, end, mode, classes, fold, exact)
                    ahead_end[found] = e
                    ahead_slot[found] = -1
                    key = _small_key(cps, k, e)
                    ahead_key[found] = key
                    if key != 0:  # the small cache's line: out of the core's caches as often as not
                        _prefetch(small, np.int64(_mix(key) & small_mask), 0)
                    elif 2 <= e - k <= row - 2:  # not one character (a table): the piece cache's row
                        ahead_slot[found] = np.int64(_mix(_fnv1a(cps, k, e)) & cache_mask)
                        _prefetch(cache, ahead_slot[found], 0)  # a row is two cache lines
                        _prefetch(cache, ahead_slot[found], row // 2)
                    found += 1
                    k = e
            j = ahead_end[taken]
            slot_ahead = ahead_slot[taken]
            key = ahead_key[taken]
            taken += 1
            length = j - i
            if at + 4 * length > out.size or 4 * length + 1 > piece.size:  # the caller grows them
                state[0] = d
                state[1] = i
                state[2] = at
                return 8 * length + 1
            if length == 1:
                done = _one_character(cps[i], byte_rank, chars, out, at)
                if done >= 0:
                    at = done
                    i = j
                    continue
            if key != 0:  # an ASCII piece of 2 to 8 characters: the small cache, by its bytes
                line = np.int64(_mix(key) & small_mask)
                if small[line, 0] == key:
                    word = small[line, 1]
                    for k in range(np.int64(word >> np.uint64(62))):
                        out[at] = np.uint32((word >> np.uint64(20 * k)) & np.uint64(0xFFFFF))
                        at += 1
                    stats[0] += 1
                    i = j
                    continue
            slot = -1
            if length <= row - 2:
                slot, hit = _probe(cps, i, j, cache, cache_mask, out, at, slot_ahead)
                if hit >= 0:
                    if key != 0:
                        _store_small(small, line, key, out, at, hit)
                    at = hit
                    stats[0] += 1
                    i = j
                    continue
                stats[1] += 1
            else:
                stats[2] += 1
            first = at
            s = i
            cut = False  # only pieces with a character of the East Asian scripts are worth cutting
            if length >= 2:
                for k in range(i, j):
                    if cps[k] >= _CUT_FROM:
                        cut = True
                        break
            if cut:
                for k in range(i + 1, j + 1):
                    if k < j and not _cut_ok(np.int64(cps[k - 1]), np.int64(cps[k]), cut_pairs, cut_sides):
                        continue
                    if s == i and k == j:
                        break  # no cut: the whole piece below
                    # the part cps[s:k]
                    if k - s == 1:
                        done = _one_character(cps[s], byte_rank, chars, out, at)
                        if done >= 0:
                            at = done
                            s = k
                            continue
                    part = -1
                    if k - s <= row - 2:
                        part, hit = _probe(cps, s, k, cache, cache_mask, out, at)
                        if hit >= 0:
                            at = hit
                            stats[3] += 1
                            s = k
                            continue
                    stats[4] += 1
                    n = _utf8(cps, s, k, piece)
                    start = at
                    at = _merge_piece(piece, n, short_keys, short_ids, flat, offsets, ids, long_slots, byte_rank,
                                      pair_rank, pair_table, rks, toks, out, at, scratch, heap, False)
                    # a part keeps the merge's ids even if its bytes are a token the merge does not
                    # reach, but then the row is not written: a whole piece of those bytes is that token
                    if part >= 0 and _unreachable_token(piece, n, at - start, short_keys, short_ids, flat, offsets,
                                                        ids, long_slots) == _NONE:
                        _store(cps, s, k, cache, part, out, start, at, unreachable)
                    s = k
            if s == i:
                n = _utf8(cps, i, j, piece)
                at = _merge_piece(piece, n, short_keys, short_ids, flat, offsets, ids, long_slots, byte_rank,
                                  pair_rank, pair_table, rks, toks, out, at, scratch, heap, False)
                whole = _unreachable_token(piece, n, at - first, short_keys, short_ids, flat, offsets, ids, long_slots)
                if whole != _NONE:
                    out[first] = whole
                    at = first + 1
            if slot >= 0:
                _store(cps, i, j, cache, slot, out, first, at, unreachable)
            if key != 0:
                _store_small(small, line, key, out, first, at)
            i = j
        doc_ends[d] = at
        begin = end
    state[2] = at
    return 0


@njit(cache=True)
def _token_code_points(flat, offsets, ids, unreachable, longest):
    """The tokens whose bytes are a text's (strict UTF-8: what decoding and encoding again gives
    back, no surrogate) of 1 to ``longest`` code points, and that merging their own bytes gives:
    their code points (one array), the end of each token's, and their ids, in id order."""
    cps = np.empty(flat.size, dtype=np.uint32)
    ends = np.empty(offsets.size, dtype=np.int64)
    taken = np.empty(offsets.size, dtype=np.int64)
    again = np.empty(4 * longest + 4, dtype=np.uint8)
    n = 0  # code points written
    count = 0
    for t in np.argsort(ids):  # the vocabulary's order need not be the ids'
        b, e = offsets[t], offsets[t + 1]
        if unreachable[ids[t]] or e == b:  # an empty token is no piece
            continue
        start = n
        k = b
        valid = True
        while k < e and valid:
            x = np.int64(flat[k])
            size = 1 if x < 0x80 else (2 if 0xC2 <= x < 0xE0 else (3 if 0xE0 <= x < 0xF0 else
                                                                 (4 if 0xF0 <= x < 0xF5 else 0)))
            if size == 0 or k + size > e or n - start >= longest:
                valid = False
                break
            cp = x if size == 1 else x & (0x7F >> size)
            for q in range(k + 1, k + size):
                if (flat[q] & 0xC0) != 0x80:
                    valid = False
                cp = (cp << 6) | (flat[q] & 0x3F)
            if 0xD800 <= cp < 0xE000 or cp > 0x10FFFF:
                valid = False
            cps[n] = cp
            n += 1
            k += size
        # the shortest form only: encoding the code points again gives the token's bytes back
        if valid and _utf8(cps, start, n, again) == e - b and _same_bytes(again, 0, flat, b, e - b):
            ends[count] = n
            taken[count] = ids[t]
            count += 1
        else:
            n = start
    return cps[:n].copy(), ends[:count].copy(), taken[:count].copy()


@njit(cache=True, nogil=True)
def _warm(cache, small, token_cps, token_ends, token_ids, unreachable):
    """Fill a new piece cache with the tokens of :func:`_token_code_points`, each as a piece whose
    ids are that token alone (tiktoken's rule for a piece that is a token, and what merging its
    bytes gives, so a cut-off part reads it rightly too), highest id first: where two share a
    row, the lower id (the earlier merge, as a rule the more frequent) stays. The first
    occurrence of a piece that is a token is then a hit, not a merge."""
    cache_mask = np.uint64(cache.shape[0] - 1)
    small_mask = np.uint64(small.shape[0] - 1)
    one = np.empty(1, dtype=np.uint32)
    for t in range(token_ids.size - 1, -1, -1):
        i = token_ends[t - 1] if t > 0 else 0
        j = token_ends[t]
        one[0] = token_ids[t]
        if j - i >= 2 or token_cps[i] >= 0x80:  # a single ASCII character is never looked up
            _store(token_cps, i, j, cache, np.int64(_mix(_fnv1a(token_cps, i, j)) & cache_mask), one, 0, 1,
                   unreachable)
        key = _small_key(token_cps, i, j)
        if key != 0:  # (an id of 20 bits or more is not written: _store_small's rule)
            _store_small(small, np.int64(_mix(key) & small_mask), key, one, 0, 1)


def _aligned_zeros(rows: int, words: int) -> np.ndarray:
    """A zeroed ``uint32`` array of ``rows`` rows, each beginning on a 128-byte boundary (a large
    array from ``numpy`` begins 16 bytes into a page: a row of 128 bytes would span three cache
    lines, not two)."""
    buffer = np.zeros(rows * words + 32, dtype=np.uint32)
    skip = (-buffer.ctypes.data % 128) // 4
    return buffer[skip:skip + rows * words].reshape(rows, words)


@dataclass
class PieceCache:
    """One thread's piece cache: a fixed array of rows, overwritten row by row. A row holds its
    piece's length and id count, the piece's code points, then its ids (a piece fits if
    ``1 + length + ids <= CACHE_ROW``): each row is two aligned cache lines. In
    front of it, a small cache (:data:`SMALL_SLOTS` lines of two words, a core's L2 at most)
    holds ASCII pieces of 2 to 8 characters by their packed bytes, with up to 3 ids
    packed in one word. Its thread also keeps the code points of the run of texts it encodes in
    ``text`` (:func:`code_points`; a run longer than :data:`GROUP_CODE_POINTS`, one long text,
    gets an array of its own)."""

    rows: np.ndarray
    small: np.ndarray
    stats: np.ndarray  # hits, misses, pieces too long to cache; hits and misses of cut-off parts
    text: np.ndarray

    @classmethod
    def new(cls, slots: int | None = None, small_slots: int | None = None) -> PieceCache:
        return cls(_aligned_zeros(slots or CACHE_SLOTS, CACHE_ROW),
                   np.zeros((small_slots or SMALL_SLOTS, 2), dtype=np.uint64), np.zeros(5, dtype=np.int64),
                   np.empty(GROUP_CODE_POINTS, dtype=np.uint32))

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.small.nbytes)


@dataclass(frozen=True)
class CacheReport:
    """What the piece caches hold and did since they were made: their fixed size (``bytes_each``
    counts both the rows and the small cache; ``buffer_bytes_each``, the code points' buffer the
    same thread keeps), the pieces each part holds (the vocabulary's tokens
    it started with among them), lookups of whole pieces
    (``hits`` counts either part's; ``uncached``: pieces too long for a row) and of the parts of
    cut pieces. Pieces of one ASCII character, and characters of the Basic Multilingual Plane
    alone, are read from tables and counted nowhere."""

    caches: int
    slots_each: int
    row_words: int
    bytes_each: int
    buffer_bytes_each: int
    pieces_held: int
    small_slots_each: int
    small_pieces_held: int
    hits: int
    misses: int
    uncached: int
    part_hits: int
    part_misses: int


def _table_size(n: int) -> int:
    """A power of two at least 4 times ``n`` (a load of at most 1/4: few probes)."""
    size = 1 << 8
    while size < 4 * n:
        size *= 2
    return size


_TokenTables = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _token_tables(tokens: list[bytes], ids: np.ndarray) -> _TokenTables:
    """:func:`_build_tables`' look-up of ``tokens`` (their ids ``ids``), in the order
    :func:`_rank_of` takes it: short keys, short ids, all tokens' bytes, each one's offset in them,
    ids, long slots."""
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8).copy()
    short = int(np.count_nonzero(lengths <= _SHORT))
    short_keys, short_ids, long_slots = _build_tables(flat, offsets, ids, _table_size(short),
                                                      _table_size(len(tokens) - short))
    return short_keys, short_ids, flat, offsets, ids, long_slots


#: Code points encoded by one call of the kernel (a text longer than this is one call alone): the
#: buffers of a call (4 bytes a code point, then its ids) stay a few MiB: the code points' buffer
#: each thread keeps (:class:`PieceCache`); one buffer for a whole batch of 10 MB of text was
#: allocated afresh by the system every time, and its page faults cost 1.10-1.17x on mixed text.
GROUP_CODE_POINTS = 1 << 20


def _groups(texts: Sequence[str]) -> Iterator[Sequence[str]]:
    """``texts`` in runs of consecutive texts of at most :data:`GROUP_CODE_POINTS` code points
    together (or one longer text alone).

    >>> [len(group) for group in _groups(["a" * GROUP_CODE_POINTS, "b", "c", "d" * GROUP_CODE_POINTS])]
    [1, 2, 1]
    """
    start = 0
    size = 0
    for k, text in enumerate(texts):
        if k > start and size + len(text) > GROUP_CODE_POINTS:
            yield texts[start:k]
            start = k
            size = 0
        size += len(text)
    if start < len(texts):
        yield texts[start:]


def _fix_surrogates(text: str) -> str:
    """What tiktoken's ``encode_ordinary`` encodes for a text with lone surrogates."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


#: CPython's own copy of a ``str``'s code points into memory of ours (``PyUnicode_AsUCS4``; the
#: GIL held, an error raised as such): the code points of a run of texts go to a buffer its
#: thread reuses. Going through ``str.encode("utf-32-le")`` made a new ``bytes`` object a run,
#: whose fresh pages cost more than the copy itself (11 MB of mixed text: ~5,500 page faults and
#: 24 ms, against none and 4 ms).
_AS_UCS4 = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)(
    ("PyUnicode_AsUCS4", ctypes.pythonapi))


@njit(cache=True, nogil=True)
def _has_surrogates(cps):
    """Whether ``cps`` holds a code point from U+D800 to U+DFFF (a ``str`` holds one only as a lone
    surrogate, or as half of a pair written as two)."""
    count = 0
    for k in range(cps.size):
        count += (cps[k] >= 0xD800) & (cps[k] < 0xE000)
    return count > 0


def code_points(texts: Sequence[str], buffer: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``texts`` as one ``uint32`` array of code points (lone surrogates fixed as tiktoken does, per
    text) and the end of each text in it. The code points are the start of ``buffer`` (``uint32``)
    if it is long enough, else a new array.

    >>> cps, ends = code_points(["ab", "", "\\ud800\\U0001F600"])
    >>> [hex(cp) for cp in cps], ends.tolist()
    (['0x61', '0x62', '0xfffd', '0x1f600'], [2, 2, 4])
    """
    joined = "".join(texts)
    n = len(joined)
    cps = buffer[:n] if buffer is not None and buffer.size >= n else np.empty(n, dtype=np.uint32)
    if n:
        _AS_UCS4(joined, cps.ctypes.data, n, 0)
        if _has_surrogates(cps):  # (none is left after the fix: a second call does not recurse)
            return code_points([_fix_surrogates(text) for text in texts], buffer)
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    return cps, ends


class CompiledBpe:
    """The compiled encoder of one vocabulary (``ranks``: token bytes to id) and one pattern of
    :data:`COMPILED_PATTERNS`. Thread-safe: each call takes a piece cache of its own from a pool.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b" ab": 257}
    >>> CompiledBpe(ranks, GPT2_PATTERN).encode(["abc ab", "b"])[0].tolist()
    [256, 99, 257]
    """

    def __init__(self, ranks: Mapping[bytes, int], pattern: str) -> None:
        """Raises:
            KeyError: ``pattern`` has no compiled pre-tokenizer, or an id is not below
                :data:`MAX_ID`.
        """
        self.mode = COMPILED_PATTERNS[pattern]
        tokens = list(ranks)
        ids = np.fromiter(ranks.values(), dtype=np.int64, count=len(tokens))
        if ids.size and int(ids.max()) >= MAX_ID:
            raise KeyError(f"ids of at least {MAX_ID} have no compiled encoder")
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        (self.short_keys, self.short_ids, self.flat, self.offsets, self.ids,
         self.long_slots) = _token_tables(tokens, ids)
        self.byte_rank = np.array([ranks[bytes([b])] for b in range(256)], dtype=np.uint32)
        # uint32 (``_NO_PAIR``: none) so the 65,536 byte pairs fit in 256 KiB, in a core's L2
        self.pair_rank = np.full(1 << 16, _NO_PAIR, dtype=np.uint32)
        two = lengths == 2
        if two.any():
            pairs = self.flat[self.offsets[:-1][two]].astype(np.int64) << 8 | self.flat[self.offsets[:-1][two] + 1]
            self.pair_rank[pairs] = self.ids[two]
        self.pair_table = _build_pairs(self.flat, self.offsets, self.ids, self.short_keys, self.short_ids,
                                       self.long_slots)
        self.cut_pairs, self.cut_sides = _build_cuts(self.flat, self.offsets)
        self.unreachable = _build_unreachable(self.short_keys, self.short_ids, self.flat, self.offsets, self.ids,
                                              self.long_slots, self.byte_rank, self.pair_rank, self.pair_table)
        self.chars = _build_chars(self.short_keys, self.short_ids, self.flat, self.offsets, self.ids, self.long_slots,
                                  self.byte_rank, self.pair_rank, self.pair_table, self.unreachable)
        self.odd_tokens = _token_tables([tokens[t] for t in np.flatnonzero(self.unreachable[self.ids]).tolist()],
                                        self.ids[self.unreachable[self.ids] == 1])
        self.tables = tiktoken_tables()
        #: the tokens a new cache starts with (in id order): their code points, the end of each, their ids
        self.warm_tokens: tuple[np.ndarray, np.ndarray, np.ndarray] = _token_code_points(
            self.flat, self.offsets, self.ids, self.unreachable, CACHE_ROW - 2)
        self._pool: queue.SimpleQueue[PieceCache] = queue.SimpleQueue()
        self._caches: list[PieceCache] = []

    def new_cache(self, slots: int | None = None, small_slots: int | None = None) -> PieceCache:
        """A piece cache (of :meth:`PieceCache.new`'s size) filled with this vocabulary's tokens
        (:func:`_warm`): the first time a piece that is a token is seen, it is a hit."""
        cache = PieceCache.new(slots, small_slots)
        token_cps, token_ends, token_ids = self.warm_tokens
        _warm(cache.rows, cache.small, token_cps, token_ends, token_ids, self.unreachable)
        return cache

    @contextmanager
    def _cache(self) -> Iterator[PieceCache]:
        try:
            cache = self._pool.get_nowait()
        except queue.Empty:
            cache = self.new_cache()
            self._caches.append(cache)
        try:
            yield cache
        finally:
            self._pool.put(cache)

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The ids of each text, as ``uint32`` arrays (views of one buffer per run of texts:
        :func:`_groups`)."""
        classes, fold, exact = self.tables
        ids: list[np.ndarray] = []
        with self._cache() as cache:
            for group in _groups(texts):
                cps, ends = code_points(group, cache.text)
                out, doc_ends = _encode(cps, ends, self.mode, classes, fold, exact, *self.odd_tokens, self.byte_rank,
                                        self.pair_rank, self.pair_table, self.cut_pairs, self.cut_sides,
                                        self.unreachable, self.chars, cache.rows, cache.small, cache.stats)
                ids.extend(np.split(out, doc_ends[:-1]))
        return ids

    def cache_report(self) -> CacheReport:
        """The piece caches' size and what they did so far."""
        caches = list(self._caches)
        stats = sum((cache.stats for cache in caches), np.zeros(5, dtype=np.int64))
        return CacheReport(caches=len(caches), slots_each=CACHE_SLOTS, row_words=CACHE_ROW,
                           bytes_each=CACHE_SLOTS * CACHE_ROW * 4 + SMALL_SLOTS * 16,
                           buffer_bytes_each=GROUP_CODE_POINTS * 4,
                           pieces_held=int(sum(int(np.count_nonzero(cache.rows[:, 0])) for cache in caches)),
                           small_slots_each=SMALL_SLOTS,
                           small_pieces_held=int(sum(int(np.count_nonzero(cache.small[:, 0])) for cache in caches)),
                           hits=int(stats[0]), misses=int(stats[1]), uncached=int(stats[2]),
                           part_hits=int(stats[3]), part_misses=int(stats[4]))
