"""The fast trainer's merge loop, compiled by numba: the exact rules, one scalar pass per merge.

The state (see :class:`MergeState`) keeps each distinct piece's ids contiguous in one flat array
(``uint16`` while every id fits, else ``int32``), with the piece's start, length and count; every
pair ever seen with its count, found from its code through an open-addressing hash table; and, for
every pair, a segment of a pool of piece numbers: the pieces where it was written (stale entries,
pieces that no longer hold it, are skipped, and dropped when the pool is full). A merge walks its
pair's segment and rewrites each piece that still holds the pair in place, left to right (so a
pair ``(x, x)`` takes the first of two overlapping occurrences, as a recount would). It subtracts
the piece's count from every slot it destroys (a slot touching a replaced occurrence) and adds it
to every slot it creates (a slot touching the new id), so the counts stay exactly what a recount
would find. Every created pair contains the new id, so it is new in this step: it is found through
a per-neighbour table of this step, gets its pool segment at the end of the step (grouped by a
counting sort), and is the only kind of pair whose count can rise. The winner comes from a heap
of ``(count, pair code)`` with lazy invalidation: the new pairs are pushed, a stale entry above
its pair's true count is requeued at that count when it surfaces, so an entry whose count is
current is the true maximum, ties going to the smallest code.

Trade-off, measured at 10 MB of text (GPT-4 pattern, 199,020 distinct pieces of 3.19 M bytes):
the state at 8,192 merges is about 4x smaller than the per-position linked lists it replaces
(those kept ids, next, previous, count and pair for every byte, and a chain of positions per
pair: 133 MiB), because counts, starts and lengths are per piece and the index holds piece
numbers; the price is a hash lookup for each destroyed slot, which a per-position slot pair
avoided (see BENCHMARKS.md, issue 16, for the times).

numba compiles these functions once per machine (cached beside the module, or in numba's user
cache when that is read-only); it ships wheels for every Python tokpack supports, so nothing is
compiled at install time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

#: Ids are packed two to a code as ``left << ID_BITS | right``, so code order is pair order.
ID_BITS = 24
_ID_MASK = (1 << ID_BITS) - 1

# Columns of the int64 pair table: the pair's code, its count, where its segment of the pool starts.
_CODE, _COUNT, _START = range(3)
# Columns of the int32 pair table: its segment's length, and the last piece logged for it (used only
# in the step that creates the pair, to log each piece once, then as a fill counter).
_LENGTH, _LAST = range(2)
# Columns of ``side``, per neighbour id x, each pair with the step it was stored in: the pairs
# (x, new) and (new, x) this step creates, then the pairs (x, left) and (right, x) it destroys
# (cached: every destroyed slot is one of these or the merged pair itself, and the hash lookup
# is the dearest part of a replacement).
_LEFT_PAIR, _LEFT_STAMP, _RIGHT_PAIR, _RIGHT_STAMP, _OLD_LEFT, _OLD_LEFT_STAMP, _OLD_RIGHT, _OLD_RIGHT_STAMP = range(8)


@dataclass
class MergeState:
    """Everything the merge loop keeps between calls (arrays owned by the compiled functions)."""

    ids: np.ndarray  # uint16 (int32 past 65,535 ids): every piece's ids, contiguous; a piece shrinks in place
    piece_start: np.ndarray  # int64 per piece: where its ids start
    piece_len: np.ndarray  # int32 per piece: how many ids it holds now
    weight: np.ndarray  # int64 per piece: how often it occurs
    pairs64: np.ndarray  # int64 (capacity, 3): see the column names above
    pairs32: np.ndarray  # int32 (capacity, 2): see the column names above
    table: np.ndarray  # int32, a power of two long: pair code -> pair index by linear probing; -1 empty
    pool: np.ndarray  # int32: the pair segments of piece numbers, in pair order
    heap: np.ndarray  # int64 (capacity, 2): count, pair code
    log: np.ndarray  # int32 (capacity, 2) scratch: (new pair, piece) logged in this step
    buf: np.ndarray  # ids' dtype, the longest piece: a copy of the piece being rewritten
    mark: np.ndarray  # uint8, the longest piece: its positions inside a replaced occurrence
    side: np.ndarray  # int32 (max_id + 1, 8): see the column names above
    scalars: np.ndarray  # int64: pairs, pool entries used, heap size, merges done


def build(
    flat: np.ndarray, lengths: np.ndarray, counts: np.ndarray, max_id: int, min_frequency: int = 1
) -> MergeState:
    """The state for sequences ``flat`` (uint8, concatenated) of ``lengths`` occurring ``counts``
    times; ``max_id`` bounds every id a merge will make. A pair counted below ``min_frequency``
    can never win (counts only fall, but for new pairs), so it is neither indexed nor queued."""
    dtype = np.uint16 if max_id < 1 << 16 else np.int32
    piece_len = lengths.astype(np.int32)
    piece_start = np.cumsum(lengths, dtype=np.int64)
    piece_start -= lengths
    longest = int(lengths.max()) if lengths.size else 1
    scalars = np.zeros(4, dtype=np.int64)
    ids = flat.astype(dtype)
    weight = np.ascontiguousarray(counts, dtype=np.int64)
    pairs64, pairs32, table, pool, heap = _build(ids, piece_start, piece_len, weight, scalars, np.int64(min_frequency))
    return MergeState(
        ids=ids, piece_start=piece_start, piece_len=piece_len, weight=weight,
        pairs64=pairs64, pairs32=pairs32, table=table, pool=pool, heap=heap,
        log=np.zeros((1024, 2), dtype=np.int32),
        buf=np.zeros(longest, dtype=dtype), mark=np.zeros(longest, dtype=np.uint8),
        side=np.full((max_id + 1, 8), -1, dtype=np.int32), scalars=scalars,
    )


def run(
    state: MergeState, until: int, first_id: int, min_frequency: int, out: np.ndarray
) -> int:
    """Merge until ``until`` merges are done in all, or no pair reaches ``min_frequency``; write
    each merge's ``(left, right, frequency)`` into the next row of ``out``. Returns the merges done."""
    (state.pairs64, state.pairs32, state.table, state.pool, state.heap, state.log) = _merge(
        state.ids, state.piece_start, state.piece_len, state.weight, state.pairs64, state.pairs32, state.table,
        state.pool, state.heap, state.log, state.buf, state.mark, state.side, state.scalars, np.int64(until),
        np.int64(first_id), np.int64(min_frequency), out,
    )
    return int(state.scalars[3])


def pieces(state: MergeState) -> list[list[int]]:
    """Every piece's ids as they stand now (for explaining a step and for tests)."""
    return [
        state.ids[start : start + length].tolist()
        for start, length in zip(state.piece_start.tolist(), state.piece_len.tolist())
    ]


@njit(cache=True)
def _grow(array, needed):  # type: ignore[no-untyped-def]
    """``array`` with at least ``needed`` rows: itself, or a copy a quarter larger (memory is the
    scarce resource here, so growth is by a small factor)."""
    if needed <= array.shape[0]:
        return array
    capacity = max(needed, array.shape[0] + array.shape[0] // 4)
    bigger = np.zeros((capacity,) + array.shape[1:], dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


@njit(cache=True)
def _hash(code, mask):  # type: ignore[no-untyped-def]
    h = code ^ (code >> 29)
    h *= -4658895280553007687  # 0xBF58476D1CE4E5B9 (splitmix64); int64 products wrap
    h ^= h >> 32
    return h & mask


@njit(cache=True)
def _find(table, pairs64, code):  # type: ignore[no-untyped-def]
    """The index of the pair with ``code``, or -1."""
    mask = table.shape[0] - 1
    slot = _hash(code, mask)
    while True:
        pair = table[slot]
        if pair < 0 or pairs64[pair, _CODE] == code:
            return pair
        slot = (slot + 1) & mask


@njit(cache=True)
def _insert(table, pairs64, pair):  # type: ignore[no-untyped-def]
    mask = table.shape[0] - 1
    slot = _hash(pairs64[pair, _CODE], mask)
    while table[slot] >= 0:
        slot = (slot + 1) & mask
    table[slot] = pair


@njit(cache=True)
def _rehash(pairs64, n_pairs, size):  # type: ignore[no-untyped-def]
    table = np.full(size, -1, dtype=np.int32)
    for pair in range(n_pairs):
        _insert(table, pairs64, pair)
    return table


@njit(cache=True)
def _new_pair(pairs64, pairs32, table, scalars, code):  # type: ignore[no-untyped-def]
    """A new pair with count 0; returns its index (the caller has made room)."""
    pair = scalars[0]
    pairs64[pair, _CODE] = code
    pairs64[pair, _COUNT] = 0
    pairs64[pair, _START] = 0
    pairs32[pair, _LENGTH] = 0
    pairs32[pair, _LAST] = -1
    _insert(table, pairs64, pair)
    scalars[0] = pair + 1
    return pair


@njit(cache=True)
def _better(heap, a, b):  # type: ignore[no-untyped-def]
    """Does heap row ``a`` win over row ``b``: a higher count, or the same and a smaller pair."""
    if heap[a, 0] != heap[b, 0]:
        return heap[a, 0] > heap[b, 0]
    return heap[a, 1] < heap[b, 1]


@njit(cache=True)
def _swap(heap, a, b):  # type: ignore[no-untyped-def]
    for column in range(2):
        value = heap[a, column]
        heap[a, column] = heap[b, column]
        heap[b, column] = value


@njit(cache=True)
def _push(heap, scalars, count, code):  # type: ignore[no-untyped-def]
    """Push a row; the caller has made room (no array is reallocated inside the loop)."""
    size = scalars[2]
    heap[size, 0] = count
    heap[size, 1] = code
    child = size
    while child > 0:
        parent = (child - 1) // 2
        if not _better(heap, child, parent):
            break
        _swap(heap, child, parent)
        child = parent
    scalars[2] = size + 1


@njit(cache=True)
def _pop(heap, scalars):  # type: ignore[no-untyped-def]
    """Remove the top row into the spare row past the end; return that row's index."""
    size = scalars[2] - 1
    _swap(heap, 0, size)
    parent = 0
    while True:
        best, left, right = parent, 2 * parent + 1, 2 * parent + 2
        if left < size and _better(heap, left, best):
            best = left
        if right < size and _better(heap, right, best):
            best = right
        if best == parent:
            break
        _swap(heap, parent, best)
        parent = best
    scalars[2] = size
    return size


@njit(cache=True)
def _build(ids, piece_start, piece_len, weight, scalars, min_frequency):  # type: ignore[no-untyped-def]
    """The byte pairs with their counts, the hash table, the pool (each pair's pieces, each
    piece once, by a counting sort) and the heap; no array is larger than its final size."""
    n_pieces = piece_start.shape[0]
    # Pass 1, by byte-pair key: counts and the number of distinct pieces holding each pair.
    count = np.zeros(1 << 16, dtype=np.int64)
    entries = np.zeros(1 << 16, dtype=np.int64)
    last = np.full(1 << 16, -1, dtype=np.int32)
    for piece in range(n_pieces):
        start = piece_start[piece]
        w = weight[piece]
        for k in range(start, start + piece_len[piece] - 1):
            key = (np.int64(ids[k]) << 8) | np.int64(ids[k + 1])
            count[key] += w
            if last[key] != piece:
                last[key] = piece
                entries[key] += 1
    index = np.full(1 << 16, -1, dtype=np.int32)
    n_pairs = 0
    total = 0
    for key in range(1 << 16):
        if entries[key] > 0:
            index[key] = n_pairs
            n_pairs += 1
            if count[key] >= min_frequency:
                total += entries[key]
    pairs64 = np.zeros((n_pairs + n_pairs // 4 + 1024, 3), dtype=np.int64)
    pairs32 = np.zeros((pairs64.shape[0], 2), dtype=np.int32)
    offset = 0
    for key in range(1 << 16):
        pair = index[key]
        if pair < 0:
            continue
        pairs64[pair, _CODE] = ((key >> 8) << ID_BITS) | (key & 255)
        pairs64[pair, _COUNT] = count[key]
        pairs64[pair, _START] = offset
        pairs32[pair, _LENGTH] = 0  # filled below
        pairs32[pair, _LAST] = -1
        if count[key] >= min_frequency:
            offset += entries[key]
    # Pass 2: each piece into the segment of each pair it holds, once.
    pool = np.zeros(total + total // 4 + 1024, dtype=np.int32)
    for piece in range(n_pieces):
        start = piece_start[piece]
        for k in range(start, start + piece_len[piece] - 1):
            pair = index[(np.int64(ids[k]) << 8) | np.int64(ids[k + 1])]
            if pairs32[pair, _LAST] != piece and pairs64[pair, _COUNT] >= min_frequency:
                pairs32[pair, _LAST] = piece
                pool[pairs64[pair, _START] + pairs32[pair, _LENGTH]] = piece
                pairs32[pair, _LENGTH] += 1
    size = 1 << 10
    while size < 2 * pairs64.shape[0]:
        size *= 2
    table = _rehash(pairs64, n_pairs, size)
    heap = np.zeros((n_pairs + n_pairs // 4 + 1024, 2), dtype=np.int64)
    for pair in range(n_pairs):
        if pairs64[pair, _COUNT] >= min_frequency:
            _push(heap, scalars, pairs64[pair, _COUNT], pairs64[pair, _CODE])
    scalars[0] = n_pairs
    scalars[1] = total
    return pairs64, pairs32, table, pool, heap


@njit(cache=True)
def _holds(ids, start, length, left, right):  # type: ignore[no-untyped-def]
    """The position in the piece of the first occurrence of ``(left, right)``, or -1."""
    for k in range(length - 1):
        if ids[start + k] == left and ids[start + k + 1] == right:
            return k
    return -1


@njit(cache=True)
def _compact(pool, pairs64, pairs32, ids, piece_start, piece_len, scalars, n_pairs, min_frequency):  # type: ignore[no-untyped-def]
    """Drop, in place, the segments of the pairs counted below ``min_frequency`` (merged, or
    destroyed in too many places: none can rise again, since a merge creates only pairs with the
    new id) and the stale entries of the others. Segments lie in pair order, so each moves down."""
    kept = 0
    for pair in range(n_pairs):
        start = pairs64[pair, _START]
        length = pairs32[pair, _LENGTH]
        pairs64[pair, _START] = kept
        if pairs64[pair, _COUNT] < min_frequency:
            pairs32[pair, _LENGTH] = 0
            continue
        code = pairs64[pair, _CODE]
        left, right = code >> ID_BITS, code & _ID_MASK
        for entry in range(start, start + length):
            piece = pool[entry]
            if _holds(ids, piece_start[piece], piece_len[piece], left, right) >= 0:
                pool[kept] = piece
                kept += 1
        pairs32[pair, _LENGTH] = kept - pairs64[pair, _START]
    scalars[1] = kept


@njit(cache=True)
def _created(pairs64, pairs32, table, side, scalars, x, y, new_id, step, self_pair):  # type: ignore[no-untyped-def]
    """The pair of the created slot ``(x, y)`` (one of them is ``new_id``), made on first sight in
    this step; returns it and the (new, new) pair, which both sides can reach."""
    if x == new_id and y == new_id:
        if self_pair < 0:
            self_pair = _new_pair(pairs64, pairs32, table, scalars, (new_id << ID_BITS) | new_id)
        return np.int64(self_pair), np.int64(self_pair)
    if y == new_id:
        if side[x, _LEFT_STAMP] != step:
            side[x, _LEFT_PAIR] = _new_pair(pairs64, pairs32, table, scalars, (x << ID_BITS) | new_id)
            side[x, _LEFT_STAMP] = step
        return np.int64(side[x, _LEFT_PAIR]), np.int64(self_pair)
    if side[y, _RIGHT_STAMP] != step:
        side[y, _RIGHT_PAIR] = _new_pair(pairs64, pairs32, table, scalars, (new_id << ID_BITS) | y)
        side[y, _RIGHT_STAMP] = step
    return np.int64(side[y, _RIGHT_PAIR]), np.int64(self_pair)


@njit(cache=True)
def _merge(ids, piece_start, piece_len, weight, pairs64, pairs32, table, pool, heap, log, buf, mark, side,
           scalars, until, first_id, min_frequency, out):  # type: ignore[no-untyped-def]
    while scalars[3] < until and scalars[2] > 0:
        top = _pop(heap, scalars)
        claimed = heap[top, 0]
        code = heap[top, 1]
        pair = _find(table, pairs64, code)
        frequency = pairs64[pair, _COUNT]
        if frequency != claimed:
            # Stale. Only rises push, so a pair's highest entry is never below its count: one above
            # it is requeued at the true count, one below it has a newer twin.
            if 0 < frequency < claimed:
                _push(heap, scalars, frequency, code)  # into the row just popped
            continue
        if frequency < min_frequency:
            break
        step = scalars[3]
        new_id = first_id + step
        left, right = code >> ID_BITS, code & _ID_MASK
        # Room for the worst case, once per step: every new pair is (x, new) or (new, x) for an
        # id x, or (new, new).
        n_before = scalars[0]
        needed = n_before + 2 * new_id + 1
        pairs64 = _grow(pairs64, needed)
        pairs32 = _grow(pairs32, needed)
        if 2 * pairs64.shape[0] > table.shape[0]:
            size = table.shape[0]
            while 2 * pairs64.shape[0] > size:
                size *= 2
            table = np.zeros(0, dtype=np.int32)  # free the old table before the new one
            table = _rehash(pairs64, n_before, size)
        logged = 0
        self_pair = -1  # (new, new): reachable from both sides, so it has one variable
        begin = pairs64[pair, _START]
        for entry in range(begin, begin + pairs32[pair, _LENGTH]):
            piece = pool[entry]
            start = piece_start[piece]
            length = piece_len[piece]
            first = _holds(ids, start, length, left, right)
            if first < 0:
                continue  # stale: an earlier merge rewrote this occurrence
            w = weight[piece]
            low = max(first - 1, 0)  # everything before this slot is untouched
            for k in range(low, length):
                buf[k] = ids[start + k]
                mark[k] = 0
            # Replace left to right, writing the new ids over the old ones (never ahead of them).
            k = first
            m = first
            while k < length:
                if k + 1 < length and buf[k] == left and buf[k + 1] == right:
                    ids[start + m] = new_id
                    mark[k] = 1
                    mark[k + 1] = 1
                    k += 2
                else:
                    ids[start + m] = buf[k]
                    k += 1
                m += 1
            piece_len[piece] = m
            # Destroyed: every old slot touching a replaced occurrence.
            for k in range(low, length - 1):
                if mark[k] or mark[k + 1]:
                    x, y = np.int64(buf[k]), np.int64(buf[k + 1])
                    if x == left and y == right and mark[k] and mark[k + 1]:
                        old = pair
                    elif mark[k + 1]:  # (x, left), x before an occurrence
                        if side[x, _OLD_LEFT_STAMP] != step:
                            side[x, _OLD_LEFT] = _find(table, pairs64, (x << ID_BITS) | y)
                            side[x, _OLD_LEFT_STAMP] = step
                        old = side[x, _OLD_LEFT]
                    else:  # (right, y), y after an occurrence
                        if side[y, _OLD_RIGHT_STAMP] != step:
                            side[y, _OLD_RIGHT] = _find(table, pairs64, (x << ID_BITS) | y)
                            side[y, _OLD_RIGHT_STAMP] = step
                        old = side[y, _OLD_RIGHT]
                    pairs64[old, _COUNT] -= w
            # Created: every new slot touching the new id; each (pair, piece) logged once.
            for k in range(low, m - 1):
                x, y = np.int64(ids[start + k]), np.int64(ids[start + k + 1])
                if x != new_id and y != new_id:
                    continue
                made, self_pair = _created(pairs64, pairs32, table, side, scalars, x, y, new_id, step, self_pair)
                pairs64[made, _COUNT] += w
                if pairs32[made, _LAST] != piece:
                    pairs32[made, _LAST] = piece
                    pairs32[made, _LENGTH] += 1
                    if logged == log.shape[0]:
                        log = _grow(log, logged + 1)
                    log[logged, 0] = made
                    log[logged, 1] = piece
                    logged += 1
        n_after = scalars[0]
        # The new pairs' segments, after the last one, grouped by a counting sort of the log.
        if scalars[1] + logged > pool.shape[0]:
            _compact(pool, pairs64, pairs32, ids, piece_start, piece_len, scalars, n_before, min_frequency)
            if scalars[1] + logged > pool.shape[0] - pool.shape[0] // 8:
                pool = _grow(pool, scalars[1] + logged + pool.shape[0] // 8)
        offset = scalars[1]
        for made in range(n_before, n_after):
            pairs64[made, _START] = offset
            if pairs64[made, _COUNT] < min_frequency:
                pairs32[made, _LENGTH] = 0  # it can never win: no segment
            offset += pairs32[made, _LENGTH]
            pairs32[made, _LAST] = 0
        for k in range(logged):
            made = log[k, 0]
            if pairs32[made, _LAST] < pairs32[made, _LENGTH]:
                pool[pairs64[made, _START] + pairs32[made, _LAST]] = log[k, 1]
                pairs32[made, _LAST] += 1
        scalars[1] = offset
        pairs32[pair, _LENGTH] = 0  # the merged pair cannot return
        # Only new pairs can rise, and each rose from nothing.
        heap = _grow(heap, scalars[2] + n_after - n_before + 1)
        for made in range(n_before, n_after):
            if pairs64[made, _COUNT] >= min_frequency:
                _push(heap, scalars, pairs64[made, _COUNT], pairs64[made, _CODE])
        out[step, 0] = left
        out[step, 1] = right
        out[step, 2] = frequency
        scalars[3] = step + 1
    return pairs64, pairs32, table, pool, heap, log
