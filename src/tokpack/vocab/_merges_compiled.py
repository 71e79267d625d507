"""The merge list implied by ranks, compiled: :func:`tokpack.vocab.files.derive_merges` for a
large vocabulary (a Python loop over 50k-200k tokens costs most of a second; this, milliseconds).

Each token is encoded alone with tiktoken's rank rule (join the adjacent pair whose concatenation
has the lowest rank, the leftmost on a tie) until two parts are left; only joins of a rank below
the token's own count. The parts' ranks are looked up in an open-addressing table of the tokens
keyed by an FNV-1a hash of their bytes and verified byte for byte.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokpack._kernels import inlined
from tokpack.vocab.pretokenizer import fnv1a, same_bytes


@inlined
def _hash(data, begin, end):
    h = fnv1a(data, begin, end)
    return h ^ (h >> np.uint64(29))


@inlined
def _lookup(data, begin, end, flat, offsets, slots, mask):
    """The index (rank order) of the token whose bytes are ``data[begin:end]``, or -1."""
    position = _hash(data, begin, end) & mask
    length = end - begin
    while slots[position] >= 0:
        token = slots[position]
        first = offsets[token]
        if offsets[token + 1] - first == length and same_bytes(flat, first, data, begin, length):
            return token
        position = (position + np.uint64(1)) & mask
    return -1


@njit(cache=True)
def split_points(flat, offsets, ranks):
    """For each token (``flat[offsets[t]:offsets[t + 1]]``, in rank order, ``ranks`` ascending),
    the length of the left part of its last merge (0 for a single byte), and the index of the
    first token that lower ranks cannot build (-1: none)."""
    n = offsets.size - 1
    size = 1
    while size < 4 * n:
        size *= 2
    mask = np.uint64(size - 1)
    slots = np.full(size, -1, dtype=np.int64)
    for token in range(n):
        position = _hash(flat, offsets[token], offsets[token + 1]) & mask
        while slots[position] >= 0:
            position = (position + np.uint64(1)) & mask
        slots[position] = token
    longest = 0
    for token in range(n):
        longest = max(longest, offsets[token + 1] - offsets[token])
    bounds = np.empty(longest + 1, dtype=np.int64)  # the parts' starts, then the token's end
    pair = np.empty(longest, dtype=np.int64)  # the rank of parts i and i+1 joined, or the token's
    left = np.zeros(n, dtype=np.int64)
    for token in range(n):
        begin, end = offsets[token], offsets[token + 1]
        length = end - begin
        if length < 2:
            continue
        rank = ranks[token]
        for k in range(length + 1):
            bounds[k] = begin + k
        parts = length
        for k in range(parts - 1):
            found = _lookup(flat, bounds[k], bounds[k + 2], flat, offsets, slots, mask)
            pair[k] = ranks[found] if found >= 0 and ranks[found] < rank else rank
        while parts > 2:
            best = 0
            for k in range(1, parts - 1):
                if pair[k] < pair[best]:
                    best = k
            if pair[best] >= rank:
                return left, token
            for k in range(best + 1, parts):  # part best+1 joins part best
                bounds[k] = bounds[k + 1]
            for k in range(best, parts - 2):
                pair[k] = pair[k + 1]
            parts -= 1
            for k in (best - 1, best):
                if 0 <= k < parts - 1:
                    found = _lookup(flat, bounds[k], bounds[k + 2], flat, offsets, slots, mask)
                    pair[k] = ranks[found] if found >= 0 and ranks[found] < rank else rank
        left[token] = bounds[1] - begin
    return left, -1
