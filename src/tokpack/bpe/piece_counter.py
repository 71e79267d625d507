"""The BPE trainer's piece counter: how often each piece of a pattern occurs, equal to
``regex.findall`` plus a ``Counter``, for the patterns of the compiled pre-tokenizer
(:mod:`tokpack.vocab.pattern_scanners`, with the ``regex`` module's classes) and for whole documents.

Algorithm: texts are turned into one array of code points (``utf-32-le``) with the ends of their
parts; the pre-tokenizer's scanner cuts each part. Each piece is hashed (64 bits) and counted in
an open-addressing table whose entries keep the piece's code points: equal hashes are compared
code point by code point, so a collision can never merge two pieces. The scan and the count
release the GIL, so threads count in parallel without a second interpreter.

Trade-off: a count several times cheaper than ``regex.findall`` + ``Counter`` (BENCHMARKS.md,
"Training BPE"), for the price of the class tables, the numba runtime, and per distinct piece 8-16
bytes of slots, a 24-byte row and its code points at 4 bytes each; the table's cache misses, not
the scan, are most of its time. Any other pattern goes through ``regex``.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
from numba import njit

from tokpack._kernels import code_points, fnv1a, inlined, mix, utf8, utf8_size
from tokpack._signals import held
from tokpack.errors import InputError
from tokpack.vocab.pattern_scanners import COMPILED, WHOLE, ScannerTables, piece_end, tables

_NO_TABLE = np.zeros(1, dtype=np.uint8)


_hash = fnv1a  # the pieces' table is keyed by FNV-1a over their code points


_LOW = np.uint64(0xFFFFFFFF)
_HIGH = np.uint64(32)


class PieceTable(NamedTuple):
    """A counter's open-addressing table, passed to its kernels as one argument."""

    slots: np.ndarray  # uint64, a power of two long: the hash's high half << 32 | piece number + 1; 0: empty
    records: np.ndarray  # int64 (capacity, 3): each piece's start in ``store``, length, count
    store: np.ndarray  # uint32: the pieces' code points, one after another
    scalars: np.ndarray  # int64: pieces, code points stored, where _count stopped


@inlined
def _insert(cps, begin, end, h, count, table):
    """Add ``count`` occurrences of the piece ``cps[begin:end]`` (hash ``h``) to ``table``.

    A slot holds the hash's high 32 bits beside the piece's number + 1 (0: empty), and a piece's
    start, length and count share a row: a look-up touches the slot, the row and the code
    points, three cache lines."""
    slots, records, store, scalars = table
    mask = np.uint64(slots.size - 1)
    position = np.int64(mix(h) & mask)
    tag = h >> _HIGH
    length = end - begin
    while True:
        slot = slots[position]
        if slot == 0:
            index = scalars[0]
            used = scalars[1]
            slots[position] = (tag << _HIGH) | np.uint64(index + 1)
            records[index, 0] = used
            records[index, 1] = length
            records[index, 2] = count
            for k in range(length):
                store[used + k] = cps[begin + k]
            scalars[0] = index + 1
            scalars[1] = used + length
            return
        entry = np.int64(slot & _LOW) - 1
        if (slot >> _HIGH) == tag and records[entry, 1] == length:
            # Never trust a hash: the same code points, or a different piece.
            at = records[entry, 0]
            same = True
            for k in range(length):
                if store[at + k] != cps[begin + k]:
                    same = False
                    break
            if same:
                records[entry, 2] += count
                return
        position = (position + 1) & np.int64(mask)


@njit(cache=True, nogil=True)
def _count(cps, part_ends, part, i, mode, tables, table):
    """Split the parts of ``cps`` from part ``part``, position ``i`` on, with the scanner of ``mode``
    and its ``tables``, and count their pieces into ``table``. Returns -1 when done, or the part (and in ``scalars[2]`` the position) where the
    table ran out of room: the caller grows it and calls again from there (a table sized for the
    worst case would be mostly empty, and every probe a cache miss)."""
    slots, records, store, scalars = table
    for p in range(part, part_ends.size):
        end = part_ends[p]
        if p > part:
            i = part_ends[p - 1] if p > 0 else 0
        while True:
            # A whole part is one piece, even an empty one (as Counter.update(parts) counts it).
            if mode != WHOLE and i >= end:
                break
            j = end if mode == WHOLE else piece_end(cps, i, end, mode, tables)
            if scalars[0] + 1 > records.shape[0] or 2 * (scalars[0] + 1) > slots.size or scalars[1] + j - i > store.size:
                scalars[2] = i
                return p
            _insert(cps, i, j, _hash(cps, i, j), 1, table)
            i = j
            if i >= end:
                break
    return -1


@njit(cache=True, nogil=True)
def _rehash(table, n):
    """Put pieces ``0..n`` of ``table`` into its empty slots (their hashes recomputed: cheaper than
    keeping 8 bytes a piece)."""
    slots, records, store, _ = table
    mask = np.uint64(slots.size - 1)
    for index in range(n):
        h = _hash(store, records[index, 0], records[index, 0] + records[index, 1])
        position = np.int64(mix(h) & mask)
        while slots[position] != 0:
            position = (position + 1) & np.int64(mask)
        slots[position] = ((h >> _HIGH) << _HIGH) | np.uint64(index + 1)


@njit(cache=True, nogil=True)
def _to_utf8(records, store, n):
    """The pieces of two UTF-8 bytes or more: concatenated bytes, byte lengths, counts; and the
    first lone surrogate met (or -1)."""
    sizes = np.zeros(n, dtype=np.int64)
    surrogate = -1
    for index in range(n):
        size = 0
        for k in range(records[index, 0], records[index, 0] + records[index, 1]):
            cp = store[k]
            if 0xD800 <= cp < 0xE000 and surrogate < 0:
                surrogate = cp
            size += utf8_size(cp)
        sizes[index] = size
    keep = sizes >= 2
    flat = np.empty(sizes[keep].sum(), dtype=np.uint8)
    at = 0
    for index in range(n):
        if keep[index]:
            at += utf8(store, records[index, 0], records[index, 0] + records[index, 1], flat[at:])
    return flat, sizes[keep], records[:n, 2][keep], surrogate


class PieceCounter:
    """How often each piece occurs, counted by the compiled scanner for one pattern of
    :data:`COMPILED`. One counter per thread: :meth:`add` releases the GIL while it works, and
    :meth:`update` adds another counter's pieces."""

    def __init__(self, pattern: str | None) -> None:
        self.mode = COMPILED[pattern]
        # Whole documents need no character classes.
        self.tables = tables() if self.mode != WHOLE else ScannerTables(_NO_TABLE, _NO_TABLE, _NO_TABLE)
        self.clear()

    def clear(self) -> None:
        """Forget every piece (and give back the memory)."""
        self.table = PieceTable(slots=np.zeros(1 << 12, dtype=np.uint64), records=np.zeros((1 << 11, 3), dtype=np.int64),
                                store=np.zeros(1 << 14, dtype=np.uint32), scalars=np.zeros(3, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.table.scalars[0])

    def _reserve(self, pieces: int, code_points: int) -> None:
        """Room for ``pieces`` more pieces of ``code_points`` in all, at a load of at most 1/2."""
        # Each array is replaced in self.table at once, so the old one is freed before the next grows.
        n, used = int(self.table.scalars[0]), int(self.table.scalars[1])
        if n + pieces > self.table.records.shape[0]:
            records = np.zeros((max(n + pieces, 2 * self.table.records.shape[0]), 3), dtype=np.int64)
            records[:n] = self.table.records[:n]
            self.table = self.table._replace(records=records)
        if used + code_points > self.table.store.size:
            store = np.zeros(max(used + code_points, 2 * self.table.store.size), dtype=np.uint32)
            store[:used] = self.table.store[:used]
            self.table = self.table._replace(store=store)
        if 2 * (n + pieces) > self.table.slots.size:
            size = self.table.slots.size
            while 2 * (n + pieces) > size:
                size *= 2
            self.table = self.table._replace(slots=np.zeros(0, dtype=np.uint64))  # free the old slots first
            self.table = self.table._replace(slots=np.zeros(size, dtype=np.uint64))
            _rehash(self.table, n)

    def add(self, parts: list[str]) -> None:
        """Split each of ``parts`` (one piece each for ``pattern=None``) and count the pieces."""
        if not parts:
            return
        cps, ends = code_points(parts)
        part, position = 0, 0
        while True:
            part = _count(cps, ends, part, position, self.mode, self.tables, self.table)
            if part < 0:
                return
            position = int(self.table.scalars[2])
            self._reserve(1, int(ends[part]) - position)

    def update(self, other: PieceCounter) -> None:
        """Add ``other``'s counts to this counter's."""
        n = len(other)
        if n == 0:
            return
        self._reserve(n, int(other.table.scalars[1]))
        _merge(other.table.store, other.table.records, np.int64(n), self.table)

    def to_counter(self) -> Counter[str]:
        """The counts as ``{piece: count}``, as ``Counter(regex.findall(...))`` would hold them."""
        n = len(self)
        records = self.table.records
        text = self.table.store[: int(self.table.scalars[1])].tobytes().decode("utf-32-le", "surrogatepass")
        starts = records[:n, 0]
        ends = (starts + records[:n, 1]).tolist()
        return Counter(dict(zip((text[a:b] for a, b in zip(starts.tolist(), ends)), records[:n, 2].tolist())))

    def to_utf8(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces of two UTF-8 bytes or more as one uint8 array, their byte lengths and their
        counts (the merge loop's input; a piece of one byte has no pair).

        Raises:
            InputError: a piece holds a lone surrogate, which has no UTF-8.
        """
        with held():  # boxing its arrays must not meet a pending Ctrl-C (tokpack._signals)
            flat, lengths, counts, surrogate = _to_utf8(self.table.records, self.table.store, np.int64(len(self)))
        if surrogate >= 0:
            raise InputError(f"the text holds a lone surrogate U+{surrogate:04X}, which has no UTF-8; "
                             "decode the input with errors='replace'")
        return flat, lengths, counts


@njit(cache=True, nogil=True)
def _merge(other_store, other_records, n, table):
    """Add the ``n`` pieces of another counter's store and records to ``table``."""
    for index in range(n):
        begin = other_records[index, 0]
        end = begin + other_records[index, 1]
        _insert(other_store, begin, end, _hash(other_store, begin, end), other_records[index, 2], table)
