"""The fast trainer's merge loop, compiled by numba: the exact rules, one scalar pass per merge.

The state (see :class:`MergeTables`) keeps each distinct piece's ids contiguous in one flat array
(``uint16`` while every id fits, else ``int32``), with the piece's start, length and count; every
pair ever seen with its count, found from its code through an open-addressing hash table; and, for
every pair, a segment of a pool of piece numbers: the pieces where it was written (stale entries,
pieces that no longer hold it, are skipped; a pair's segment is dropped when the pool is full
and the pair can no longer win). A merge walks its
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

Trade-off: counts, starts and lengths are per distinct piece, the index holds piece numbers, and
the pairs a step makes below ``min_frequency`` are forgotten at once, so the state grows with the
distinct pieces, not with the corpus's bytes (per-position linked lists would keep ids, links, a
count and a pair for every byte). The price: a merge rereads each piece it rewrites, not only the
occurrence, and finds the destroyed slots' pairs by hash (cached per neighbour within a step).
Sizes and times: BENCHMARKS.md, "Training BPE".

numba compiles these functions once per machine (cached beside the module, or in numba's user
cache when that is read-only); it ships wheels for every Python tokpack supports, so nothing is
compiled at install time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from tokpack._signals import held

#: Ids are packed two to a code as ``left << ID_BITS | right``, so code order is pair order.
ID_BITS = 24
_ID_MASK = (1 << ID_BITS) - 1

# Columns of the pair table (int64, one row of 32 bytes: a merge touches a pair once, one cache
# line): the pair's code, its count, where its segment of the pool starts, its length.
_CODE, _COUNT, _START, _LENGTH = range(4)
# Columns of the piece table (int64): where its ids start, how many it holds now, how often it occurs.
_P_START, _P_LENGTH, _P_WEIGHT = range(3)
# Columns of ``fresh``, per pair made in this step (by index past the step's first): the last
# piece logged for it (each piece is logged once), then how many of its entries are placed.
_LAST, _FILL = range(2)
# Columns of ``side``, per neighbour id x, each pair with the step it was stored in: the pairs
# (x, new) and (new, x) this step creates, then the pairs (x, left) and (right, x) it destroys
# (cached: every destroyed slot is one of these or the merged pair itself, and the hash lookup
# is the dearest part of a replacement).
_LEFT_PAIR, _LEFT_STAMP, _RIGHT_PAIR, _RIGHT_STAMP, _OLD_LEFT, _OLD_LEFT_STAMP, _OLD_RIGHT, _OLD_RIGHT_STAMP = range(8)


class MergeTables(NamedTuple):
    """The merge loop's arrays, passed to the compiled loop as one argument (and returned by it:
    it replaces the arrays it grows)."""

    ids: np.ndarray  # uint16 (int32 past 65,535 ids): every piece's ids, contiguous; a piece shrinks in place
    pieces: np.ndarray  # int64 (pieces, 3): see the column names above
    pairs: np.ndarray  # int64 (capacity, 4): see the column names above
    table: np.ndarray  # int32, a power of two long: pair code -> pair index by linear probing; -1 empty
    pool: np.ndarray  # int32: the pair segments of piece numbers, in pair order
    heap: np.ndarray  # int64 (capacity, 2): count, pair code
    log: np.ndarray  # int32 (capacity, 2) scratch: (new pair, piece) logged in this step
    buf: np.ndarray  # ids' dtype, the longest piece: a copy of the piece being rewritten
    mark: np.ndarray  # uint8, the longest piece: its positions inside a replaced occurrence
    side: np.ndarray  # int32 (max_id + 1, 8): see the column names above
    fresh: np.ndarray  # int32 (2 * max_id + 2, 2) scratch: see the column names above
    scalars: np.ndarray  # int64: pairs, pool entries used, heap size, merges done


@dataclass
class MergeState:
    """Everything the merge loop keeps between calls."""

    tables: MergeTables
    min_frequency: int  # build left out the pairs below it, so every run must stop at it too


def build(
    flat: np.ndarray, lengths: np.ndarray, counts: np.ndarray, max_id: int, min_frequency: int = 1
) -> MergeState:
    """The state for sequences ``flat`` (uint8, concatenated) of ``lengths`` occurring ``counts``
    times; ``max_id`` bounds every id a merge will make. A pair counted below ``min_frequency``
    can never win (counts only fall, but for new pairs), so it is neither indexed nor queued."""
    dtype = np.uint16 if max_id < 1 << 16 else np.int32
    table = np.empty((lengths.size, 3), dtype=np.int64)
    np.cumsum(lengths, out=table[:, _P_START], dtype=np.int64)
    table[:, _P_START] -= lengths
    table[:, _P_LENGTH] = lengths
    table[:, _P_WEIGHT] = counts
    longest = int(lengths.max()) if lengths.size else 1
    scalars = np.zeros(4, dtype=np.int64)
    ids = flat.astype(dtype)
    with held():  # boxing its arrays must not meet a pending Ctrl-C (tokpack._signals)
        pairs, hashed, pool, heap = _build(ids, table, scalars, np.int64(min_frequency))
    tables = MergeTables(
        ids=ids, pieces=table, pairs=pairs, table=hashed, pool=pool, heap=heap,
        log=np.zeros((1024, 2), dtype=np.int32),
        buf=np.zeros(longest, dtype=dtype), mark=np.zeros(longest, dtype=np.uint8),
        side=np.full((max_id + 1, 8), -1, dtype=np.int32), fresh=np.zeros((2 * max_id + 2, 2), dtype=np.int32),
        scalars=scalars,
    )
    return MergeState(tables=tables, min_frequency=min_frequency)


def run(state: MergeState, until: int, first_id: int, out: np.ndarray) -> int:
    """Merge until ``until`` merges are done in all, or no pair reaches the state's ``min_frequency``;
    write each merge's ``(left, right, frequency)`` into the next row of ``out``. Returns the merges
    done. Call it inside :func:`tokpack._signals.held` (its boxing must not meet a pending Ctrl-C:
    with a named tuple to box that was a segmentation fault), delivering the held signals between
    calls."""
    state.tables = _merge(state.tables, np.int64(until), np.int64(first_id), np.int64(state.min_frequency), out)
    return int(state.tables.scalars[3])


@njit(cache=True)
def _grow(array, needed):
    """``array`` with at least ``needed`` rows: itself, or a copy a quarter larger (memory is the
    scarce resource here, so growth is by a small factor)."""
    if needed <= array.shape[0]:
        return array
    capacity = max(needed, array.shape[0] + array.shape[0] // 4)
    bigger = np.zeros((capacity,) + array.shape[1:], dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


@njit(cache=True)
def _hash(code, mask):
    h = code ^ (code >> 29)
    h *= -4658895280553007687  # 0xBF58476D1CE4E5B9 (splitmix64); int64 products wrap
    h ^= h >> 32
    return h & mask


@njit(cache=True)
def _find(table, pairs, code):
    """The index of the pair with ``code``, or -1."""
    mask = table.shape[0] - 1
    slot = _hash(code, mask)
    while True:
        pair = table[slot]
        if pair < 0 or pairs[pair, _CODE] == code:
            return pair
        slot = (slot + 1) & mask


@njit(cache=True)
def _insert(table, pairs, pair):
    mask = table.shape[0] - 1
    slot = _hash(pairs[pair, _CODE], mask)
    while table[slot] >= 0:
        slot = (slot + 1) & mask
    table[slot] = pair


@njit(cache=True)
def _rehash(pairs, n_pairs, size):
    table = np.full(size, -1, dtype=np.int32)
    for pair in range(n_pairs):
        _insert(table, pairs, pair)
    return table


@njit(cache=True)
def _new_pair(pairs, table, scalars, code):
    """A new pair with count 0; returns its index (the caller has made room)."""
    pair = scalars[0]
    pairs[pair, _CODE] = code
    pairs[pair, _COUNT] = 0
    pairs[pair, _START] = 0
    pairs[pair, _LENGTH] = 0
    _insert(table, pairs, pair)
    scalars[0] = pair + 1
    return pair


@njit(cache=True)
def _better(heap, a, b):
    """Does heap row ``a`` win over row ``b``: a higher count, or the same and a smaller pair."""
    if heap[a, 0] != heap[b, 0]:
        return heap[a, 0] > heap[b, 0]
    return heap[a, 1] < heap[b, 1]


@njit(cache=True)
def _swap(heap, a, b):
    for column in range(2):
        value = heap[a, column]
        heap[a, column] = heap[b, column]
        heap[b, column] = value


@njit(cache=True)
def _push(heap, scalars, count, code):
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
def _pop(heap, scalars):
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
def _build(ids, pieces, scalars, min_frequency):
    """The byte pairs with their counts, the hash table, the pool (each pair's pieces, each
    piece once, by a counting sort) and the heap; no array is larger than its final size."""
    n_pieces = pieces.shape[0]
    # Pass 1, by byte-pair key: counts and the number of distinct pieces holding each pair.
    count = np.zeros(1 << 16, dtype=np.int64)
    entries = np.zeros(1 << 16, dtype=np.int64)
    last = np.full(1 << 16, -1, dtype=np.int32)
    for piece in range(n_pieces):
        start = pieces[piece, _P_START]
        w = pieces[piece, _P_WEIGHT]
        for k in range(start, start + pieces[piece, _P_LENGTH] - 1):
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
    pairs = np.zeros((n_pairs + n_pairs // 4 + 1024, 4), dtype=np.int64)
    offset = 0
    for key in range(1 << 16):
        pair = index[key]
        if pair < 0:
            continue
        pairs[pair, _CODE] = ((key >> 8) << ID_BITS) | (key & 255)
        pairs[pair, _COUNT] = count[key]
        pairs[pair, _START] = offset
        pairs[pair, _LENGTH] = 0  # filled below
        last[key] = -1
        if count[key] >= min_frequency:
            offset += entries[key]
    # Pass 2: each piece into the segment of each pair it holds, once.
    pool = np.zeros(total + total // 8 + 1024, dtype=np.int32)
    for piece in range(n_pieces):
        start = pieces[piece, _P_START]
        for k in range(start, start + pieces[piece, _P_LENGTH] - 1):
            key = (np.int64(ids[k]) << 8) | np.int64(ids[k + 1])
            pair = index[key]
            if last[key] != piece and pairs[pair, _COUNT] >= min_frequency:
                last[key] = piece
                pool[pairs[pair, _START] + pairs[pair, _LENGTH]] = piece
                pairs[pair, _LENGTH] += 1
    size = 1 << 10
    while size < 2 * pairs.shape[0]:
        size *= 2
    table = _rehash(pairs, n_pairs, size)
    heap = np.zeros((n_pairs + n_pairs // 4 + 1024, 2), dtype=np.int64)
    for pair in range(n_pairs):
        if pairs[pair, _COUNT] >= min_frequency:
            _push(heap, scalars, pairs[pair, _COUNT], pairs[pair, _CODE])
    scalars[0] = n_pairs
    scalars[1] = total
    return pairs, table, pool, heap


@njit(cache=True)
def _holds(ids, start, length, left, right):
    """The position in the piece of the first occurrence of ``(left, right)``, or -1."""
    for k in range(length - 1):
        if ids[start + k] == left and ids[start + k + 1] == right:
            return k
    return -1


@njit(cache=True)
def _compact(pool, pairs, scalars, n_pairs, min_frequency):
    """Drop, in place, the segments of the pairs counted below ``min_frequency`` (merged, or
    destroyed in too many places: none can rise again, since a merge creates only pairs with the
    new id). Segments lie in pair order, so each moves down. The stale entries of live pairs
    stay: finding them means reading a piece per entry, which costs the loop more time than the
    memory it would save (BENCHMARKS.md, "Training BPE")."""
    kept = 0
    for pair in range(n_pairs):
        start = pairs[pair, _START]
        length = pairs[pair, _LENGTH]
        pairs[pair, _START] = kept
        if pairs[pair, _COUNT] < min_frequency:
            pairs[pair, _LENGTH] = 0
            continue
        pool[kept : kept + length] = pool[start : start + length]
        kept += length
    scalars[1] = kept


@njit(cache=True)
def _drop_hopeless(pairs, table, fresh, scalars, n_before, min_frequency):
    """Forget the pairs made in this step that are counted below ``min_frequency``: they can
    never win and no one asks for them (a lookup that misses means such a pair). Most pairs a
    merge makes occur once, so this keeps the pair table a fraction of the pairs ever made.
    The step's pairs are the last inserted into the table, and removing the last insert of a
    linear-probing table restores it exactly, so they are all removed, newest first, and the
    kept ones reinserted at their new, compacted indices. ``fresh[k, _LAST]`` becomes the new
    index of the step's pair ``k`` (or -1). Returns the new pair count."""
    n_after = scalars[0]
    mask = table.shape[0] - 1
    for made in range(n_after - 1, n_before - 1, -1):
        slot = _hash(pairs[made, _CODE], mask)
        while table[slot] != made:
            slot = (slot + 1) & mask
        table[slot] = -1
    kept = n_before
    for made in range(n_before, n_after):
        if pairs[made, _COUNT] < min_frequency:
            fresh[made - n_before, _LAST] = -1
            continue
        for column in range(4):
            pairs[kept, column] = pairs[made, column]
        _insert(table, pairs, kept)
        fresh[made - n_before, _LAST] = kept
        kept += 1
    scalars[0] = kept
    return kept


@njit(cache=True)
def _created(pairs, table, side, scalars, x, y, new_id, step, self_pair):
    """The pair of the created slot ``(x, y)`` (one of them is ``new_id``), made on first sight in
    this step; returns it and the (new, new) pair, which both sides can reach."""
    if x == new_id and y == new_id:
        if self_pair < 0:
            self_pair = _new_pair(pairs, table, scalars, (new_id << ID_BITS) | new_id)
        return np.int64(self_pair), np.int64(self_pair)
    if y == new_id:
        if side[x, _LEFT_STAMP] != step:
            side[x, _LEFT_PAIR] = _new_pair(pairs, table, scalars, (x << ID_BITS) | new_id)
            side[x, _LEFT_STAMP] = step
        return np.int64(side[x, _LEFT_PAIR]), np.int64(self_pair)
    if side[y, _RIGHT_STAMP] != step:
        side[y, _RIGHT_PAIR] = _new_pair(pairs, table, scalars, (new_id << ID_BITS) | y)
        side[y, _RIGHT_STAMP] = step
    return np.int64(side[y, _RIGHT_PAIR]), np.int64(self_pair)


@njit(cache=True)
def _merge(tables, until, first_id, min_frequency, out):
    ids, pieces, pairs, table, pool, heap, log, buf, mark, side, fresh, scalars = tables
    while scalars[3] < until and scalars[2] > 0:
        top = _pop(heap, scalars)
        claimed = heap[top, 0]
        code = heap[top, 1]
        pair = _find(table, pairs, code)
        frequency = pairs[pair, _COUNT]
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
        pairs = _grow(pairs, needed)
        if 2 * pairs.shape[0] > table.shape[0]:
            size = table.shape[0]
            while 2 * pairs.shape[0] > size:
                size *= 2
            table = np.zeros(0, dtype=np.int32)  # free the old table before the new one
            table = _rehash(pairs, n_before, size)
        logged = 0
        fresh_used = 0
        self_pair = -1  # (new, new): reachable from both sides, so it has one variable
        begin = pairs[pair, _START]
        for entry in range(begin, begin + pairs[pair, _LENGTH]):
            piece = pool[entry]
            start = pieces[piece, _P_START]
            length = pieces[piece, _P_LENGTH]
            first = _holds(ids, start, length, left, right)
            if first < 0:
                continue  # stale: an earlier merge rewrote this occurrence
            w = pieces[piece, _P_WEIGHT]
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
            pieces[piece, _P_LENGTH] = m
            # Destroyed: every old slot touching a replaced occurrence.
            for k in range(low, length - 1):
                if mark[k] or mark[k + 1]:
                    x, y = np.int64(buf[k]), np.int64(buf[k + 1])
                    if x == left and y == right and mark[k] and mark[k + 1]:
                        old = pair
                    elif mark[k + 1]:  # (x, left), x before an occurrence
                        if side[x, _OLD_LEFT_STAMP] != step:
                            side[x, _OLD_LEFT] = _find(table, pairs, (x << ID_BITS) | y)
                            side[x, _OLD_LEFT_STAMP] = step
                        old = side[x, _OLD_LEFT]
                    else:  # (right, y), y after an occurrence
                        if side[y, _OLD_RIGHT_STAMP] != step:
                            side[y, _OLD_RIGHT] = _find(table, pairs, (x << ID_BITS) | y)
                            side[y, _OLD_RIGHT_STAMP] = step
                        old = side[y, _OLD_RIGHT]
                    if old >= 0:  # else it was counted below min_frequency when made: not kept
                        pairs[old, _COUNT] -= w
            # Created: every new slot touching the new id; each (pair, piece) logged once.
            for k in range(low, m - 1):
                x, y = np.int64(ids[start + k]), np.int64(ids[start + k + 1])
                if x != new_id and y != new_id:
                    continue
                made, self_pair = _created(pairs, table, side, scalars, x, y, new_id, step, self_pair)
                pairs[made, _COUNT] += w
                if made - n_before >= fresh_used:  # first sight of this pair in this step
                    fresh[made - n_before, _LAST] = -1
                    fresh_used = made - n_before + 1
                if fresh[made - n_before, _LAST] != piece:
                    fresh[made - n_before, _LAST] = piece
                    pairs[made, _LENGTH] += 1
                    if logged == log.shape[0]:
                        log = _grow(log, logged + 1)
                    log[logged, 0] = made
                    log[logged, 1] = piece
                    logged += 1
        n_after = _drop_hopeless(pairs, table, fresh, scalars, n_before, min_frequency)
        # The new pairs' segments, after the last one, grouped by a counting sort of the log.
        if scalars[1] + logged > pool.shape[0]:
            _compact(pool, pairs, scalars, n_before, min_frequency)
            if scalars[1] + logged > pool.shape[0] - pool.shape[0] // 8:
                pool = _grow(pool, scalars[1] + logged + pool.shape[0] // 8)
        offset = scalars[1]
        for made in range(n_before, n_after):
            pairs[made, _START] = offset
            offset += pairs[made, _LENGTH]
            fresh[made - n_before, _FILL] = 0
        for k in range(logged):
            made = fresh[log[k, 0] - n_before, _LAST]  # its index now, or -1 if dropped
            if made >= 0:
                pool[pairs[made, _START] + fresh[made - n_before, _FILL]] = log[k, 1]
                fresh[made - n_before, _FILL] += 1
        scalars[1] = offset
        pairs[pair, _LENGTH] = 0  # the merged pair cannot return
        # Only new pairs can rise, and each rose from nothing.
        heap = _grow(heap, scalars[2] + n_after - n_before + 1)
        for made in range(n_before, n_after):
            _push(heap, scalars, pairs[made, _COUNT], pairs[made, _CODE])
        out[step, 0] = left
        out[step, 1] = right
        out[step, 2] = frequency
        scalars[3] = step + 1
    return MergeTables(ids, pieces, pairs, table, pool, heap, log, buf, mark, side, fresh, scalars)
