"""A compiled pre-tokenizer and piece counter for the GPT-2 and GPT-4 patterns (and for whole
documents), equal to ``regex.findall`` plus a ``Counter``.

Algorithm: texts are turned into one array of code points (``utf-32-le``) with the ends of their
parts. A numba scanner walks each part and, at every position, tries the pattern's alternatives in
the pattern's order, reproducing its possessive quantifiers, the backtracking of ``\\s*[\\r\\n]``
and ``\\s+(?!\\S)``, and its case-insensitive contractions. Character classes (``\\p{L}``,
``\\p{N}``, ``\\s``, and which characters ``(?i:s)`` and the other contraction letters match:
``ſ`` U+017F folds to ``s``) come from a table built once per process **by the ``regex`` module
itself** over every code point, so the Unicode versions cannot disagree. Each piece is hashed
(64 bits) and counted in an open-addressing table whose entries keep the piece's code points:
equal hashes are compared code point by code point, so a collision can never merge two pieces.
The scan and the count release the GIL, so threads count in parallel without a second
interpreter. The scanner's helpers are inlined by numba itself (``inline="always"``): left to
LLVM, each stayed a call per piece and per run, and the scan ran at half the speed.

Measured trade-off (the 10 MB benchmark corpus, GPT-4 pattern, one thread, same process, load
average ~7): 0.48-0.64 CPU-s against 1.64-2.36 for ``regex.findall`` + ``Counter`` (0.27-0.29x),
for the price of three 1.1 MB class tables, the numba runtime, and per distinct piece 8-16 bytes
of slots, a 24-byte row and its code points at 4 bytes each. Most of the time left is the
table's cache misses, not the scan. Any other pattern goes through ``regex``.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import numpy as np
import regex
from numba import njit

from tokpack._atomic import partial_sibling
from tokpack.errors import InputError
from tokpack.vocab.patterns import GPT2_PATTERN, GPT4_PATTERN

#: What each compiled scanner splits: a whole part is one piece, or the GPT-2 / GPT-4 rules.
WHOLE, GPT2, GPT4 = 0, 1, 2
#: The patterns (and ``None``: no splitting) that have a compiled scanner; others use ``regex``.
COMPILED: dict[str | None, int] = {None: WHOLE, GPT2_PATTERN: GPT2, GPT4_PATTERN: GPT4}

# Bits of the class table.
_L, _N, _S = 1, 2, 4
# Contraction letters in the fold table (0: none): 's, 'd, 'm, 't, 'll, 've, 're.
_LETTERS = "sdmtlvre"
_CR, _LF, _SPACE, _APOSTROPHE = 13, 10, 32, 39
_NO_TABLE = np.zeros(1, dtype=np.uint8)


@functools.lru_cache(maxsize=None)
def tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(classes, fold, exact)``: per code point, its class bits (``\\p{L}`` 1, ``\\p{N}`` 2,
    ``\\s`` 4), and the contraction letter (1-based index in ``sdmtlvre``, 0 for none) it matches
    case-insensitively (``fold``) and case-sensitively (``exact``), all as ``regex`` decides.

    Built once per ``regex`` version and kept in ``__pycache__`` beside this module (building
    takes about 0.3 s; loading a few milliseconds); where that is read-only, built per process."""
    cache = Path(__file__).parent / "__pycache__" / f"pretokenize-classes-regex-{regex.__version__}.npy"
    try:
        stacked = np.load(cache)
        if stacked.shape == (3, 0x110000):
            return stacked[0], stacked[1], stacked[2]
    except (OSError, ValueError):
        pass
    built = _build_tables()
    try:
        cache.parent.mkdir(exist_ok=True)
        partial = partial_sibling(cache)
        try:
            with partial.open("wb") as handle:
                np.save(handle, np.stack(built))
            partial.replace(cache)  # atomic: a concurrent reader sees the old file or the whole new one
        finally:
            partial.unlink(missing_ok=True)
    except OSError:
        pass
    return built


def _build_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    every = np.arange(0x110000, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")

    def members(pattern: str) -> np.ndarray:
        found = "".join(regex.findall(pattern, every))
        return np.frombuffer(found.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)

    classes = np.zeros(0x110000, dtype=np.uint8)
    for bit, pattern in ((_L, r"\p{L}"), (_N, r"\p{N}"), (_S, r"\s")):
        classes[members(pattern)] |= bit
    fold = np.zeros(0x110000, dtype=np.uint8)
    exact = np.zeros(0x110000, dtype=np.uint8)
    for index, letter in enumerate(_LETTERS, start=1):
        fold[members(f"(?i:{letter})")] = index
        exact[members(letter)] = index
    return classes, fold, exact


@njit(cache=True, nogil=True, inline="always")
def _run(cps, i, end, classes, bits):  # type: ignore[no-untyped-def]
    """The end of the run of characters in class ``bits`` starting at ``i``."""
    while i < end and classes[cps[i]] & bits:
        i += 1
    return i


@njit(cache=True, nogil=True, inline="always")
def _is_other(classes, cp):  # type: ignore[no-untyped-def]
    """``[^\\s\\p{L}\\p{N}]``."""
    return classes[cp] == 0


@njit(cache=True, nogil=True, inline="always")
def _other_run(cps, i, end, classes):  # type: ignore[no-untyped-def]
    while i < end and classes[cps[i]] == 0:
        i += 1
    return i


@njit(cache=True, nogil=True, inline="always")
def _contraction(cps, i, end, letters):  # type: ignore[no-untyped-def]
    """The end of ``'(?:[sdmt]|ll|ve|re)`` at ``i`` (letters by ``letters``), or ``i``."""
    if cps[i] != _APOSTROPHE or i + 1 >= end:
        return i
    first = letters[cps[i + 1]]
    if 1 <= first <= 4:
        return i + 2
    if i + 2 < end:
        second = letters[cps[i + 2]]
        if (first == 5 and second == 5) or (first == 6 and second == 8) or (first == 7 and second == 8):
            return i + 3
    return i


@njit(cache=True, nogil=True, inline="always")
def _whitespace(cps, i, end, classes, newline_rule):  # type: ignore[no-untyped-def]
    """``\\s++$`` | (``\\s*[\\r\\n]`` when ``newline_rule``) | ``\\s+(?!\\S)`` | ``\\s`` at ``i``,
    which holds whitespace."""
    j = _run(cps, i, end, classes, _S)
    if j == end:
        return j
    if newline_rule:
        k = j - 1
        while k >= i:
            if cps[k] == _CR or cps[k] == _LF:
                return k + 1
            k -= 1
    if j - i >= 2:
        return j - 1
    return i + 1


@njit(cache=True, nogil=True, inline="always")
def _gpt4_piece(cps, i, end, classes, fold):  # type: ignore[no-untyped-def]
    """The end of the GPT-4 piece starting at ``i``: the first alternative that matches."""
    # '(?i:[sdmt]|ll|ve|re)
    j = _contraction(cps, i, end, fold)
    if j > i:
        return j
    c = cps[i]
    kind = classes[c]
    # [^\r\n\p{L}\p{N}]?+\p{L}++
    if kind & _L:
        return _run(cps, i + 1, end, classes, _L)
    if not (kind & _N) and c != _CR and c != _LF and i + 1 < end and classes[cps[i + 1]] & _L:
        return _run(cps, i + 2, end, classes, _L)
    # \p{N}{1,3}
    if kind & _N:
        j = i + 1
        while j < end and j < i + 3 and classes[cps[j]] & _N:
            j += 1
        return j
    # ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
    start = i
    if c == _SPACE and i + 1 < end and classes[cps[i + 1]] == 0:
        start = i + 1
    if classes[cps[start]] == 0:
        j = _other_run(cps, start + 1, end, classes)
        while j < end and (cps[j] == _CR or cps[j] == _LF):
            j += 1
        return j
    # \s++$ | \s*[\r\n] | \s+(?!\S) | \s
    return _whitespace(cps, i, end, classes, True)


@njit(cache=True, nogil=True, inline="always")
def _gpt2_piece(cps, i, end, classes, exact):  # type: ignore[no-untyped-def]
    """The end of the GPT-2 piece starting at ``i``: the first alternative that matches."""
    # '(?:[sdmt]|ll|ve|re)
    j = _contraction(cps, i, end, exact)
    if j > i:
        return j
    start = i
    if cps[i] == _SPACE and i + 1 < end:
        start = i + 1
    kind = classes[cps[start]]
    #  ?\p{L}++ |  ?\p{N}++
    if kind & _L:
        return _run(cps, start + 1, end, classes, _L)
    if kind & _N:
        return _run(cps, start + 1, end, classes, _N)
    #  ?[^\s\p{L}\p{N}]++
    if kind == 0:
        return _other_run(cps, start + 1, end, classes)
    # \s++$ | \s+(?!\S) | \s
    return _whitespace(cps, i, end, classes, False)


@njit(cache=True, nogil=True, inline="always")
def _piece_end(cps, i, end, mode, classes, fold, exact):  # type: ignore[no-untyped-def]
    if mode == GPT4:
        return _gpt4_piece(cps, i, end, classes, fold)
    if mode == GPT2:
        return _gpt2_piece(cps, i, end, classes, exact)
    return end


@njit(cache=True, nogil=True)
def _split(cps, part_ends, mode, classes, fold, exact, out):  # type: ignore[no-untyped-def]
    """Write the end of every piece into ``out``; return how many."""
    n = 0
    begin = 0
    for p in range(part_ends.size):
        end = part_ends[p]
        i = begin
        if mode == WHOLE:
            out[n] = end
            n += 1
        while mode != WHOLE and i < end:
            i = _piece_end(cps, i, end, mode, classes, fold, exact)
            out[n] = i
            n += 1
        begin = end
    return n


_PRIME = np.uint64(0x100000001B3)
_OFFSET = np.uint64(0xCBF29CE484222325)


@njit(cache=True, nogil=True, inline="always")
def _mix(h):  # type: ignore[no-untyped-def]
    """splitmix64's finalizer: FNV's low bits alone probe badly."""
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@njit(cache=True, nogil=True, inline="always")
def _hash(cps, begin, end):  # type: ignore[no-untyped-def]
    """FNV-1a over the code points (64 bits)."""
    h = _OFFSET
    for k in range(begin, end):
        h = (h ^ np.uint64(cps[k])) * _PRIME
    return h


_LOW = np.uint64(0xFFFFFFFF)
_HIGH = np.uint64(32)


@njit(cache=True, nogil=True, inline="always")
def _insert(cps, begin, end, h, count, slots, records, store, scalars):  # type: ignore[no-untyped-def]
    """Add ``count`` occurrences of the piece ``cps[begin:end]`` (hash ``h``).

    A slot holds the hash's high 32 bits beside the piece's number + 1 (0: empty), and a piece's
    start, length and count share a row: a look-up touches the slot, the row and the code
    points, three cache lines."""
    mask = np.uint64(slots.size - 1)
    position = np.int64(_mix(h) & mask)
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
def _count(cps, part_ends, part, i, mode, classes, fold, exact, slots, records, store, scalars):  # type: ignore[no-untyped-def]
    """Split the parts of ``cps`` from part ``part``, position ``i`` on, and count their pieces into
    the table. Returns -1 when done, or the part (and in ``scalars[2]`` the position) where the
    table ran out of room: the caller grows it and calls again from there (a table sized for the
    worst case would be mostly empty, and every probe a cache miss)."""
    for p in range(part, part_ends.size):
        end = part_ends[p]
        if p > part:
            i = part_ends[p - 1] if p > 0 else 0
        while True:
            # A whole part is one piece, even an empty one (as Counter.update(parts) counts it).
            if mode != WHOLE and i >= end:
                break
            j = end if mode == WHOLE else _piece_end(cps, i, end, mode, classes, fold, exact)
            if scalars[0] + 1 > records.shape[0] or 2 * (scalars[0] + 1) > slots.size or scalars[1] + j - i > store.size:
                scalars[2] = i
                return p
            _insert(cps, i, j, _hash(cps, i, j), 1, slots, records, store, scalars)
            i = j
            if i >= end:
                break
    return -1


@njit(cache=True, nogil=True)
def _rehash(slots, records, store, n):  # type: ignore[no-untyped-def]
    """Put pieces ``0..n`` into the empty ``slots`` (their hashes recomputed: cheaper than
    keeping 8 bytes a piece)."""
    mask = np.uint64(slots.size - 1)
    for index in range(n):
        h = _hash(store, records[index, 0], records[index, 0] + records[index, 1])
        position = np.int64(_mix(h) & mask)
        while slots[position] != 0:
            position = (position + 1) & np.int64(mask)
        slots[position] = ((h >> _HIGH) << _HIGH) | np.uint64(index + 1)


@njit(cache=True, nogil=True)
def _utf8_length(cp):  # type: ignore[no-untyped-def]
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 3
    return 4


@njit(cache=True, nogil=True)
def _to_utf8(records, store, n):  # type: ignore[no-untyped-def]
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
            size += _utf8_length(cp)
        sizes[index] = size
    keep = sizes >= 2
    flat = np.empty(sizes[keep].sum(), dtype=np.uint8)
    at = 0
    for index in range(n):
        if not keep[index]:
            continue
        for k in range(records[index, 0], records[index, 0] + records[index, 1]):
            cp = store[k]
            if cp < 0x80:
                flat[at] = cp
                at += 1
            elif cp < 0x800:
                flat[at] = 0xC0 | (cp >> 6)
                flat[at + 1] = 0x80 | (cp & 0x3F)
                at += 2
            elif cp < 0x10000:
                flat[at] = 0xE0 | (cp >> 12)
                flat[at + 1] = 0x80 | ((cp >> 6) & 0x3F)
                flat[at + 2] = 0x80 | (cp & 0x3F)
                at += 3
            else:
                flat[at] = 0xF0 | (cp >> 18)
                flat[at + 1] = 0x80 | ((cp >> 12) & 0x3F)
                flat[at + 2] = 0x80 | ((cp >> 6) & 0x3F)
                flat[at + 3] = 0x80 | (cp & 0x3F)
                at += 4
    return flat, sizes[keep], records[:n, 2][keep], surrogate


def _code_points(parts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``parts`` as one array of code points, and the end of each part in it."""
    cps = np.frombuffer("".join(parts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    ends = np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)))
    return cps, ends


def split(text: str, pattern: str | None) -> list[str]:
    """``regex.findall(pattern, text)`` for a pattern in :data:`COMPILED` (``None``: ``[text]``),
    by the compiled scanner.

    >>> split("We've 12345 cats\\n\\n", GPT4_PATTERN)
    ['We', "'ve", ' ', '123', '45', ' cats', '\\n\\n']
    """
    mode = COMPILED[pattern]
    cps, ends = _code_points([text])
    out = np.empty(len(text) + 1, dtype=np.int64)
    n = _split(cps, ends, mode, *tables(), out)
    bounds = [0, *out[:n].tolist()]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


class PieceCounter:
    """How often each piece occurs, counted by the compiled scanner for one pattern of
    :data:`COMPILED`. One counter per thread: :meth:`add` releases the GIL while it works, and
    :meth:`update` adds another counter's pieces."""

    def __init__(self, pattern: str | None) -> None:
        self.mode = COMPILED[pattern]
        # Whole documents need no character classes.
        self.tables = tables() if self.mode != WHOLE else (_NO_TABLE, _NO_TABLE, _NO_TABLE)
        self.clear()

    def clear(self) -> None:
        """Forget every piece (and give back the memory)."""
        self.scalars = np.zeros(3, dtype=np.int64)  # pieces, code points stored, where _count stopped
        self.slots = np.zeros(1 << 12, dtype=np.uint64)  # hash's high half << 32 | piece number + 1; 0: empty
        self.records = np.zeros((1 << 11, 3), dtype=np.int64)  # start in store, length, count
        self.store = np.zeros(1 << 14, dtype=np.uint32)

    def __len__(self) -> int:
        return int(self.scalars[0])

    def _reserve(self, pieces: int, code_points: int) -> None:
        """Room for ``pieces`` more pieces of ``code_points`` in all, at a load of at most 1/2."""
        n, used = int(self.scalars[0]), int(self.scalars[1])
        if n + pieces > self.records.shape[0]:
            records = np.zeros((max(n + pieces, 2 * self.records.shape[0]), 3), dtype=np.int64)
            records[:n] = self.records[:n]
            self.records = records
        if used + code_points > self.store.size:
            store = np.zeros(max(used + code_points, 2 * self.store.size), dtype=np.uint32)
            store[:used] = self.store[:used]
            self.store = store
        if 2 * (n + pieces) > self.slots.size:
            size = self.slots.size
            while 2 * (n + pieces) > size:
                size *= 2
            self.slots = np.zeros(0, dtype=np.uint64)  # free the old table before the new one
            self.slots = np.zeros(size, dtype=np.uint64)
            _rehash(self.slots, self.records, self.store, n)

    def add(self, parts: list[str]) -> None:
        """Split each of ``parts`` (one piece each for ``pattern=None``) and count the pieces."""
        if not parts:
            return
        cps, ends = _code_points(parts)
        part, position = 0, 0
        while True:
            classes, fold, exact = self.tables
            part = _count(cps, ends, part, position, self.mode, classes, fold, exact, self.slots, self.records,
                          self.store, self.scalars)
            if part < 0:
                return
            position = int(self.scalars[2])
            self._reserve(1, int(ends[part]) - position)

    def update(self, other: PieceCounter) -> None:
        """Add ``other``'s counts to this counter's."""
        n = len(other)
        if n == 0:
            return
        self._reserve(n, int(other.scalars[1]))
        _merge(other.store, other.records, np.int64(n), self.slots, self.records, self.store, self.scalars)

    def to_counter(self) -> Counter[str]:
        """The counts as ``{piece: count}``, as ``Counter(regex.findall(...))`` would hold them."""
        n = len(self)
        text = self.store[: int(self.scalars[1])].tobytes().decode("utf-32-le", "surrogatepass")
        starts = self.records[:n, 0]
        ends = (starts + self.records[:n, 1]).tolist()
        return Counter(dict(zip((text[a:b] for a, b in zip(starts.tolist(), ends)), self.records[:n, 2].tolist())))

    def to_utf8(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces of two UTF-8 bytes or more as one uint8 array, their byte lengths and their
        counts (the merge loop's input; a piece of one byte has no pair).

        Raises:
            InputError: a piece holds a lone surrogate, which has no UTF-8.
        """
        flat, lengths, counts, surrogate = _to_utf8(self.records, self.store, np.int64(len(self)))
        if surrogate >= 0:
            raise InputError(None, f"the text holds a lone surrogate U+{surrogate:04X}, which has no UTF-8; "
                             "decode the input with errors='replace'")
        return flat, lengths, counts


@njit(cache=True, nogil=True)
def _merge(other_store, other_records, n, slots, records, store, scalars):  # type: ignore[no-untyped-def]
    for index in range(n):
        begin = other_records[index, 0]
        end = begin + other_records[index, 1]
        _insert(other_store, begin, end, _hash(other_store, begin, end), other_records[index, 2], slots, records,
                store, scalars)
