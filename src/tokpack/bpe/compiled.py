"""The fast trainer's merge loop, compiled by numba: the exact rules, one scalar pass per merge.

The state (see :class:`MergeState`) holds the deduplicated sequences as linked lists over one
flat array, every pair ever seen with its count, and for every pair a chain of the positions
where it was written (stale entries are skipped, and dropped when the chain is full). A merge walks its pair's chain,
keeps the positions that still hold the pair, and replaces them one at a time, left to right
(the order matters only for a pair ``(x, x)``, which can overlap itself, so only then are the
positions sorted). Each replacement subtracts the counts of the slots it destroys and adds
those of the slots it creates, exactly as a recount would find them. The winner comes from a
heap of ``(count, pair code)`` with lazy invalidation: a count that rises pushes an entry, a
stale entry above its pair's true count is requeued at that count when it surfaces, so an entry
whose count is current is the true maximum, ties going to the smallest code.

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

# Columns of the pair table (int64): the pair, its count, the head of its position chain, and a
# stamp and a count-before-this-step used to push only the pairs whose count rose.
_LEFT, _RIGHT, _COUNT, _HEAD, _STAMP, _BEFORE = range(6)
# Columns of the heap (int64): count, pair code, pair index.
_H_COUNT, _H_CODE, _H_PAIR = range(3)


@dataclass
class MergeState:
    """Everything the merge loop keeps between calls (arrays owned by the compiled functions)."""

    ids: np.ndarray  # int32 per position; -1 for a dead position and for the sentinel at the end
    nxt: np.ndarray  # int32 per position: the next live position, or the sentinel
    prv: np.ndarray  # int32 per position: the previous live position, or the sentinel
    weight: np.ndarray  # int32 (int64 if needed) per position: how often its sequence occurs
    slot_pair: np.ndarray  # int32 per position: the pair its slot (position, next) holds, or -1
    pairs: np.ndarray  # int64 (capacity, 6): see the column names above
    chain: np.ndarray  # int32 (capacity, 2): position, next entry of the same pair (or -1)
    heap: np.ndarray  # int64 (capacity, 3): see the column names above
    touched: np.ndarray  # int64 scratch: the pairs a step changed
    side: np.ndarray  # int64 (tokens, 4): per neighbour id, the pair (t, new) / (new, t) of this step and its stamp
    scalars: np.ndarray  # int64: pair count, chain length, heap size, merges done


def build(flat: np.ndarray, lengths: np.ndarray, counts: np.ndarray, max_id: int) -> MergeState:
    """The state for sequences ``flat`` (uint8, concatenated) of ``lengths`` occurring ``counts``
    times; ``max_id`` bounds every id a merge will make."""
    size = int(flat.size)
    ids = np.full(size + 1, -1, dtype=np.int32)
    ids[:size] = flat
    ends = np.cumsum(lengths)
    starts = ends - lengths
    positions = np.arange(size + 1, dtype=np.int32)
    nxt = positions + 1
    nxt[ends - 1] = size
    nxt[size] = size
    prv = positions - 1
    prv[starts] = size
    prv[size] = size
    # Counts below 2**31 (all but the largest corpora) take half the memory as int32.
    narrow = counts.size == 0 or int(counts.max()) < 2**31
    weight = np.zeros(size + 1, dtype=np.int32 if narrow else np.int64)
    weight[:size] = np.repeat(counts, lengths)
    slot_pair = np.full(size + 1, -1, dtype=np.int32)
    state = MergeState(
        ids=ids, nxt=nxt, prv=prv, weight=weight, slot_pair=slot_pair,
        pairs=np.zeros((1024, 6), dtype=np.int64),
        # Merges log about twice as many slots again as there are positions, but at most one
        # entry per position is live: the chain is compacted when full (see _compact) and grows
        # only if that frees too little, so it stays near 1.5 entries per position.
        chain=np.zeros((max(16, size + size // 2), 2), dtype=np.int32),
        heap=np.zeros((1024, 3), dtype=np.int64),
        touched=np.zeros(1024, dtype=np.int64),
        side=np.full((max_id + 1, 4), -1, dtype=np.int64),
        scalars=np.zeros(4, dtype=np.int64),
    )
    state.pairs, state.chain, state.heap = _initial_pairs(
        ids, nxt, weight, slot_pair, state.pairs, state.chain, state.heap, state.scalars, np.int64(size)
    )
    return state


def run(
    state: MergeState, until: int, first_id: int, min_frequency: int, out: np.ndarray
) -> int:
    """Merge until ``until`` merges are done in all, or no pair reaches ``min_frequency``; write
    each merge's ``(left, right, frequency)`` into the next row of ``out``. Returns the merges done."""
    state.pairs, state.chain, state.heap, state.touched = _merge(
        state.ids, state.nxt, state.prv, state.weight, state.slot_pair, state.pairs, state.chain,
        state.heap, state.touched, state.side, state.scalars, np.int64(until), np.int64(first_id),
        np.int64(min_frequency), out,
    )
    return int(state.scalars[3])


def sequences(state: MergeState, starts: np.ndarray) -> list[list[int]]:
    """The id sequences starting at ``starts`` as they stand now (for explaining a step)."""
    result = []
    for start in starts.tolist():
        sequence, position = [], start
        while position != state.ids.size - 1:
            sequence.append(int(state.ids[position]))
            position = int(state.nxt[position])
        result.append(sequence)
    return result


@njit(cache=True)
def _grow(array, needed):  # type: ignore[no-untyped-def]
    if needed <= array.shape[0]:
        return array
    capacity = max(needed, array.shape[0] + array.shape[0] // 2)
    bigger = np.zeros((capacity,) + array.shape[1:], dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


@njit(cache=True)
def _better(heap, a, b):  # type: ignore[no-untyped-def]
    """Does heap row ``a`` win over row ``b``: a higher count, or the same and a smaller pair."""
    if heap[a, _H_COUNT] != heap[b, _H_COUNT]:
        return heap[a, _H_COUNT] > heap[b, _H_COUNT]
    return heap[a, _H_CODE] < heap[b, _H_CODE]


@njit(cache=True)
def _swap(heap, a, b):  # type: ignore[no-untyped-def]
    for column in range(3):
        value = heap[a, column]
        heap[a, column] = heap[b, column]
        heap[b, column] = value


@njit(cache=True)
def _push(heap, scalars, count, code, pair):  # type: ignore[no-untyped-def]
    """Push a row; the caller has made room (no array is reallocated inside the loop)."""
    size = scalars[2]
    heap[size, _H_COUNT] = count
    heap[size, _H_CODE] = code
    heap[size, _H_PAIR] = pair
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
def _new_pair(pairs, scalars, left, right):  # type: ignore[no-untyped-def]
    """A new pair with count 0; returns its index (the caller has made room)."""
    index = scalars[0]
    pairs[index, _LEFT] = left
    pairs[index, _RIGHT] = right
    pairs[index, _COUNT] = 0
    pairs[index, _HEAD] = -1
    pairs[index, _STAMP] = -1
    scalars[0] = index + 1
    return index


@njit(cache=True)
def _log(chain, pairs, scalars, pair, position):  # type: ignore[no-untyped-def]
    """Record that ``position``'s slot was written with ``pair`` (the caller has made room)."""
    entry = scalars[1]
    chain[entry, 0] = position
    chain[entry, 1] = pairs[pair, _HEAD]
    pairs[pair, _HEAD] = entry
    scalars[1] = entry + 1


@njit(cache=True)
def _compact(chain, pairs, slot_pair, scalars):  # type: ignore[no-untyped-def]
    """Drop the stale entries of every chain (positions whose slot no longer holds the chain's
    pair), in place, keeping each chain's order (newest first).

    A first pass marks the stale entries; a second moves the live ones down in entry order and
    relinks them through the heads, which serve as "the last entry kept" of each pair: entries
    are appended, so every chain runs from higher to lower entries and keeps its order."""
    for pair in range(scalars[0]):
        entry = pairs[pair, _HEAD]
        while entry >= 0:
            if slot_pair[chain[entry, 0]] != pair:
                chain[entry, 0] = -1
            entry = chain[entry, 1]
        pairs[pair, _HEAD] = -1
    kept = 0
    for entry in range(scalars[1]):
        position = chain[entry, 0]
        if position < 0:
            continue
        pair = slot_pair[position]
        chain[kept, 0] = position
        chain[kept, 1] = pairs[pair, _HEAD]
        pairs[pair, _HEAD] = kept
        kept += 1
    scalars[1] = kept


@njit(cache=True)
def _initial_pairs(ids, nxt, weight, slot_pair, pairs, chain, heap, scalars, sentinel):  # type: ignore[no-untyped-def]
    by_bytes = np.full(1 << 16, -1, dtype=np.int64)
    pairs = _grow(pairs, 1 << 16)
    chain = _grow(chain, sentinel)
    for position in range(sentinel):
        right = nxt[position]
        if right == sentinel:
            continue
        key = (ids[position] << 8) | ids[right]
        pair = by_bytes[key]
        if pair < 0:
            pair = _new_pair(pairs, scalars, ids[position], ids[right])
            by_bytes[key] = pair
        pairs[pair, _COUNT] += weight[position]
        slot_pair[position] = pair
        _log(chain, pairs, scalars, pair, position)
    heap = _grow(heap, scalars[0] + 1)
    for pair in range(scalars[0]):
        code = (pairs[pair, _LEFT] << ID_BITS) | pairs[pair, _RIGHT]
        _push(heap, scalars, pairs[pair, _COUNT], code, pair)
    return pairs, chain, heap


@njit(cache=True)
def _touch(pairs, touched, count_touched, pair, step):  # type: ignore[no-untyped-def]
    """Remember ``pair``'s count before this step's first change to it."""
    if pairs[pair, _STAMP] != step:
        pairs[pair, _STAMP] = step
        pairs[pair, _BEFORE] = pairs[pair, _COUNT]
        touched[count_touched] = pair
        return count_touched + 1
    return count_touched


@njit(cache=True)
def _merge(ids, nxt, prv, weight, slot_pair, pairs, chain, heap, touched, side, scalars, until, first_id,
           min_frequency, out):  # type: ignore[no-untyped-def]
    sentinel = ids.shape[0] - 1
    positions = np.empty(16, dtype=np.int64)
    while scalars[3] < until and scalars[2] > 0:
        top = _pop(heap, scalars)
        pair = heap[top, _H_PAIR]
        claimed = heap[top, _H_COUNT]
        frequency = pairs[pair, _COUNT]
        if frequency != claimed:
            # Stale. Only rises push, so a pair's highest entry is never below its count: one above
            # it is requeued at the true count, one below it has a newer twin.
            if 0 < frequency < claimed:
                _push(heap, scalars, frequency, heap[top, _H_CODE], pair)  # into the row just popped
            continue
        if frequency < min_frequency:
            break
        step = scalars[3]
        new_id = first_id + step
        left, right = pairs[pair, _LEFT], pairs[pair, _RIGHT]
        # The positions still holding the pair.
        found = 0
        entry = pairs[pair, _HEAD]
        while entry >= 0:
            position = chain[entry, 0]
            if slot_pair[position] == pair:
                if found == positions.shape[0]:
                    positions = _grow(positions, found + 1)
                positions[found] = position
                found += 1
            entry = chain[entry, 1]
        if left == right:
            # (x, x) can overlap itself: a left-to-right scan takes the first of two overlapping.
            positions[:found] = np.sort(positions[:found])
        # Room for the worst case, once per step: each replacement makes at most two pairs and
        # logs two slots, and touches at most five pairs.
        pairs = _grow(pairs, scalars[0] + 2 * found + 1)
        if scalars[1] + 2 * found > chain.shape[0]:
            _compact(chain, pairs, slot_pair, scalars)
            if scalars[1] + 2 * found > chain.shape[0] - chain.shape[0] // 8:
                chain = _grow(chain, scalars[1] + 2 * found)
        touched = _grow(touched, scalars[0] + 2 * found + 1)
        count_touched = 0
        self_pair = -1  # (new, new): reachable from both sides, so it has one variable
        for k in range(found):
            position = positions[k]
            if slot_pair[position] != pair:
                continue  # the previous replacement used this position
            half = nxt[position]
            beyond = nxt[half]
            before = prv[position]
            w = np.int64(weight[position])
            count_touched = _touch(pairs, touched, count_touched, pair, step)
            pairs[pair, _COUNT] -= w
            if before != sentinel:
                old = slot_pair[before]
                count_touched = _touch(pairs, touched, count_touched, old, step)
                pairs[old, _COUNT] -= w
                other = ids[before]
                if other == new_id:
                    if self_pair < 0:
                        self_pair = _new_pair(pairs, scalars, new_id, new_id)
                    made = self_pair
                elif side[other, 1] == step:
                    made = side[other, 0]
                else:
                    made = _new_pair(pairs, scalars, other, new_id)
                    side[other, 0] = made
                    side[other, 1] = step
                count_touched = _touch(pairs, touched, count_touched, made, step)
                pairs[made, _COUNT] += w
                slot_pair[before] = made
                _log(chain, pairs, scalars, made, before)
            if beyond != sentinel:
                old = slot_pair[half]
                count_touched = _touch(pairs, touched, count_touched, old, step)
                pairs[old, _COUNT] -= w
                other = ids[beyond]
                if other == new_id:
                    if self_pair < 0:
                        self_pair = _new_pair(pairs, scalars, new_id, new_id)
                    made = self_pair
                elif side[other, 3] == step:
                    made = side[other, 2]
                else:
                    made = _new_pair(pairs, scalars, new_id, other)
                    side[other, 2] = made
                    side[other, 3] = step
                count_touched = _touch(pairs, touched, count_touched, made, step)
                pairs[made, _COUNT] += w
                slot_pair[position] = made
                _log(chain, pairs, scalars, made, position)
                prv[beyond] = position
            else:
                slot_pair[position] = -1
            ids[position] = new_id
            ids[half] = -1
            slot_pair[half] = -1
            nxt[position] = beyond
        heap = _grow(heap, scalars[2] + count_touched + 1)
        for k in range(count_touched):
            changed = touched[k]
            count = pairs[changed, _COUNT]
            if count > pairs[changed, _BEFORE]:
                code = (pairs[changed, _LEFT] << ID_BITS) | pairs[changed, _RIGHT]
                _push(heap, scalars, count, code, changed)
        out[step, 0] = left
        out[step, 1] = right
        out[step, 2] = frequency
        scalars[3] = step + 1
    return pairs, chain, heap, touched
