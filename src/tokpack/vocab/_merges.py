"""The merge list implied by ranks, for every token at once with numpy: what
:func:`tokpack.vocab.merge_files.derive_merges` uses where the compiled extension is not built (its
``last_joins`` is the same rule in C), without loading a compiler.

Each token is encoded alone with tiktoken's rank rule (join the adjacent pair whose concatenation
has the lowest rank, the leftmost on a tie) until two parts are left; only joins of a rank below
the token's own count. All tokens take their steps together: a token of ``n`` bytes takes
``n - 2``, so step ``s`` moves the tokens longer than ``s + 2`` bytes, the front of the tokens
sorted longest first, whose boundaries are the front of one flat array. Each boundary holds one
key, the rank of the join across it times a power of two plus its place, so one
``minimum.reduceat`` finds every moving token's next join, leftmost on a tie.

A join's rank is looked up in an open-addressing table of the tokens: a slice of up to seven
bytes is keyed by its bytes, a longer one by a polynomial hash modulo ``2**64`` (any slice's from
the prefix sums of the bytes weighted by inverse powers) confirmed byte for byte, so the result is
exact; tokens whose keys collide are left to the caller's Python rule.
"""

from __future__ import annotations

import numpy as np

#: An odd multiplier (invertible modulo 2**64) and its inverse.
_BASE = 0x9E3779B97F4A7C15
_INVERSE = pow(_BASE, -1, 1 << 64)
#: The key of a boundary already joined (larger than any live key).
_JOINED = np.iinfo(np.int64).max
#: The rank of a join that makes no token (above any rank, which is below 2**32).
_NO_TOKEN = np.int64(1 << 40)


def _powers(base: int, count: int) -> np.ndarray:
    """``base**0 .. base**(count - 1)`` modulo ``2**64``, doubling the filled part each time.

    >>> _powers(3, 5).tolist()
    [1, 3, 9, 27, 81]
    """
    powers = np.empty(max(count, 1), np.uint64)
    powers[0] = 1
    filled = 1
    while filled < count:
        take = min(filled, count - filled)
        # base**(filled + i) = base**i * base**filled; uint64 products wrap modulo 2**64
        powers[filled : filled + take] = powers[:take] * np.uint64(pow(base, filled, 1 << 64))
        filled += take
    return powers


#: Slices of at most this many bytes are keyed by their bytes themselves (and their length).
_SHORT = 7
#: Multiplies a key before its top bits choose its home slot in the look-up table.
_SPREAD = np.uint64(0x9E3779B97F4A7C15)


class _Tokens:
    """The tokens in rank order as one flat byte array, and an exact look-up of any slice of it.

    A slice of up to :data:`_SHORT` bytes is keyed by its bytes and length (exact); a longer one
    by a hash of its bytes with the top bit set, confirmed byte for byte when found. The keys of
    the tokens fill an open-addressing table (linear probing) probed for every slice at once.
    """

    def __init__(self, tokens: list[bytes], ranks: np.ndarray) -> None:
        self.n = len(tokens)
        self.lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=self.n)
        self.offsets = np.zeros(self.n + 1, np.int64)
        np.cumsum(self.lengths, out=self.offsets[1:])
        joined = b"".join(tokens)
        self.flat = np.frombuffer(joined, dtype=np.uint8)
        self.ranks = ranks
        size = len(self.flat)
        # The 8 bytes from each offset, big-endian: a short slice's bytes are its top bytes.
        padded = np.frombuffer(joined + bytes(8), dtype=np.uint8).astype(np.uint64)
        self._words = np.zeros(size + 1, np.uint64)  # one past the end: an empty token's place
        for shift in range(8):
            self._words[:size] |= padded[shift : shift + size] << np.uint64(8 * (7 - shift))
        with np.errstate(over="ignore"):
            self._powers = _powers(_BASE, size + 1)
            weights = (self.flat.astype(np.uint64) + np.uint64(1)) * _powers(_INVERSE, size)
            self._prefix = np.zeros(size + 1, np.uint64)
            np.cumsum(weights, out=self._prefix[1:])
        keys = self.keys(self.offsets[:-1], self.offsets[1:])
        ordered = np.sort(keys)
        self.keys_unique = not bool(np.any(ordered[1:] == ordered[:-1]))
        bits = max(int(2 * self.n).bit_length(), 4)  # at most half full
        self._shift, self._mask = np.uint64(64 - bits), np.int64((1 << bits) - 1)
        # Each slot holds a key and its token's index + 1 (0: empty), side by side: one cache line.
        self._table = np.zeros((1 << bits, 2), np.uint64)
        waiting, home = np.arange(self.n), self._home(keys)
        while len(waiting):  # each round places, per free slot, the first token probing it
            free = self._table[home, 1] == 0
            slots, first = np.unique(home[free], return_index=True)
            placed = waiting[free][first]
            self._table[slots, 0], self._table[slots, 1] = keys[placed], placed.astype(np.uint64) + np.uint64(1)
            kept = np.ones(len(waiting), bool)
            kept[np.flatnonzero(free)[first]] = False
            waiting, home = waiting[kept], (home[kept] + 1) & self._mask

    def _home(self, keys: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return ((keys * _SPREAD) >> self._shift).astype(np.int64)

    def keys(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The key of each slice ``flat[starts[i]:ends[i]]`` (non-empty)."""
        sizes = ends - starts
        keep = np.uint64(8) * np.clip(sizes, 1, _SHORT).astype(np.uint64)  # bytes kept, in bits
        keys = np.where(sizes > 0, self._words[starts] >> (np.uint64(64) - keep), np.uint64(0))
        keys |= sizes.astype(np.uint64) << np.uint64(56)
        long_ = np.flatnonzero(sizes > _SHORT)
        if len(long_):
            first, end = starts[long_], ends[long_]
            with np.errstate(over="ignore"):
                keys[long_] = self._powers[end - 1] * (self._prefix[end] - self._prefix[first]) | np.uint64(1 << 63)
        return keys

    def ranks_of(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The rank of the token each slice spells, or :data:`_NO_TOKEN`."""
        wanted = self.keys(starts, ends)
        found = np.full(len(starts), -1, np.int64)
        probing, slot = np.arange(len(starts)), self._home(wanted)
        while len(probing):
            entry = self._table[slot]
            done = (entry[:, 1] == 0) | (entry[:, 0] == wanted[probing])
            found[probing[done]] = entry[done, 1].astype(np.int64) - 1
            probing, slot = probing[~done], (slot[~done] + 1) & self._mask
        sizes = ends - starts
        found[(found >= 0) & (self.lengths[found] != sizes)] = -1  # a short key fixes the length; a hash may not
        long_ = np.flatnonzero((found >= 0) & (sizes > _SHORT))
        if len(long_):  # confirm byte for byte: a hash says which token, never that it is one
            long_sizes = sizes[long_]
            firsts = np.cumsum(long_sizes) - long_sizes
            within = np.arange(int(long_sizes.sum())) - np.repeat(firsts, long_sizes)
            same = (self.flat[np.repeat(starts[long_], long_sizes) + within]
                    == self.flat[np.repeat(self.offsets[found[long_]], long_sizes) + within])
            found[long_[~np.logical_and.reduceat(same, firsts)]] = -1
        hit = found >= 0
        return np.where(hit, self.ranks[found], _NO_TOKEN)


def split_points(tokens: list[bytes], ranks: np.ndarray) -> tuple[np.ndarray, int] | None:
    """For each token (in rank order, ``ranks`` ascending), the length of the left part of its
    last merge (0 for a single byte), and the index of the first token that lower ranks cannot
    build (-1: none); ``None`` when two tokens' keys collide (the caller's Python rule decides).

    >>> left, bad = split_points([b"a", b"b", b"c", b"ab", b"abc", b"bc", b"bcc"], np.arange(7))
    >>> left.tolist(), bad
    ([0, 0, 0, 1, 2, 1, 2], -1)
    >>> split_points([b"a", b"b", b"c", b"abc"], np.arange(4))[1]  # no pair of it is a token
    3
    """
    table = _Tokens(tokens, np.asarray(ranks, dtype=np.int64))
    if not table.keys_unique:
        return None
    lengths, offsets, flat = table.lengths, table.offsets, table.flat
    left = np.zeros(table.n, np.int64)
    left[lengths == 2] = 1
    moving = np.flatnonzero(lengths >= 3)
    if not len(moving):
        return left, -1
    moving = moving[np.argsort(-lengths[moving], kind="stable")]  # longest first
    size, start, own = lengths[moving], offsets[moving], table.ranks[moving]
    base = np.zeros(len(moving) + 1, np.int64)  # token k's boundary b (1..size-1) is slot base[k] + b - 1
    np.cumsum(size - 1, out=base[1:])
    owner = np.repeat(np.arange(len(moving)), size - 1)
    place = np.arange(base[-1]) - base[owner] + 1  # each slot's boundary: bytes before it
    before, after = place - 1, place + 1  # the neighbouring boundaries (0 and size: the ends)
    # Two bytes: their rank from a table of every two-byte token.
    pairs = np.full(1 << 16, _NO_TOKEN, np.int64)
    two = offsets[:-1][lengths == 2]
    pairs[flat[two].astype(np.int64) << 8 | flat[two + 1]] = table.ranks[lengths == 2]
    at = start[owner] + place
    joins = np.minimum(pairs[flat[at - 1].astype(np.int64) << 8 | flat[at]], own[owner])
    width = 1 << int(size[0]).bit_length()  # above every place
    keys = joins * width + place
    bad = table.n
    longest_first = -size
    for step in range(int(size[0]) - 2):
        count = int(np.searchsorted(longest_first, -(step + 2), side="left"))  # tokens longer than step + 2
        lowest = np.minimum.reduceat(keys[: base[count]], base[:count])
        join, where = lowest // width, lowest % width
        stuck = np.flatnonzero(join >= own[:count])
        if len(stuck):
            bad = min(bad, int(moving[stuck].min()))
        slot = base[:count] + where - 1
        keys[slot] = _JOINED
        first, last = before[slot], after[slot]
        has_first = np.flatnonzero(first >= 1)
        has_last = np.flatnonzero(last < size[:count])
        slot_first = base[has_first] + first[has_first] - 1
        slot_last = base[has_last] + last[has_last] - 1
        after[slot_first] = last[has_first]
        before[slot_last] = first[has_last]
        # The two joins across the new part's ends: [before first, last) and [first, after last).
        starts = np.concatenate([start[has_first] + before[slot_first], start[has_last] + first[has_last]])
        ends = np.concatenate([start[has_first] + last[has_first], start[has_last] + after[slot_last]])
        tokens_of = np.concatenate([has_first, has_last])
        slots = np.concatenate([slot_first, slot_last])
        places = np.concatenate([first[has_first], last[has_last]])
        keys[slots] = np.minimum(table.ranks_of(starts, ends), own[tokens_of]) * width + places
    left[moving] = np.minimum.reduceat(keys, base[:-1]) % width
    return left, (-1 if bad == table.n else bad)
