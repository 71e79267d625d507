"""The pattern scanners: a named pre-tokenizer pattern's pieces, found by numba kernels with a regex engine's classes.

Every pattern tokpack names has a scanner: GPT-2's, GPT-4's (``cl100k_base``, in tokpack's and in
tiktoken's spelling), ``o200k_base``'s, and the Polish word and phrase patterns. A scanner walks a
text's code points (``utf-32-le``) and, at every position, tries the pattern's alternatives in the
pattern's order, reproducing its possessive quantifiers, the backtracking of its greedy ones
(``\\s*[\\r\\n]``, ``\\s+(?!\\S)``, o200k's ``[...]*[...]+`` letter runs and optional leading
character) and its case-insensitive contractions. Any other pattern has no scanner: the trainer
splits it with ``regex``, the encoder falls back to tiktoken.

Character classes come from tables built once over every code point **by a regex engine
itself**, so the Unicode versions cannot disagree: :func:`tables` asks the ``regex`` module (the
trainer's engine, whose ``findall`` the trainer's counts must equal), :func:`tiktoken_tables`
asks tiktoken's engine (the encoder's oracle: U+18D80, a letter since Unicode 14, is none to
tiktoken 0.14). A table gives each code point its class bits (``\\p{L}``, ``\\p{N}``, ``\\s`` and
o200k's two case classes) and the contraction letter it matches case-insensitively (``fold``:
``ſ`` U+017F folds to ``s``) and case-sensitively (``exact``).

The scanners' helpers are :func:`~tokpack._kernels.inlined`: LLVM inlines them into the scan, and
they count no references to the arrays they take (see :mod:`tokpack._kernels` for why both matter).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import regex
from numba import njit

from tokpack._atomic import partial_sibling
from tokpack._kernels import code_points, inlined
from tokpack.vocab.patterns import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    GPT4_PATTERN,
    POLISH_PATTERN,
    POLISH_PHRASE_PATTERN,
)
from tokpack.vocab.published import O200K_PATTERN

#: What each scanner splits: a whole part is one piece, or a named pattern's rules.
WHOLE, GPT2, GPT4, O200K, POLISH, POLISH_PHRASE = 0, 1, 2, 3, 4, 5
#: The patterns (and ``None``: no splitting) that have a compiled scanner, and which one.
COMPILED: dict[str | None, int] = {
    None: WHOLE,
    GPT2_PATTERN: GPT2,
    GPT4_PATTERN: GPT4,
    CL100K_PATTERN: GPT4,  # its possessive digit groups cut as GPT4_PATTERN's greedy ones
    O200K_PATTERN: O200K,
    POLISH_PATTERN: POLISH,
    POLISH_PHRASE_PATTERN: POLISH_PHRASE,
}

# Bits of the class table: \p{L}, \p{N}, \s, and o200k's case classes (marks are in both).
_L, _N, _S, _UPPER, _LOWER = 1, 2, 4, 8, 16
_LNS = _L | _N | _S
_CASED = _UPPER | _LOWER
#: o200k's case classes, as its pattern writes them.
UPPER_CLASS = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
LOWER_CLASS = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_CLASSES = ((_L, r"\p{L}"), (_N, r"\p{N}"), (_S, r"\s"), (_UPPER, UPPER_CLASS), (_LOWER, LOWER_CLASS))
# Contraction letters in the fold tables (0: none): 's, 'd, 'm, 't, 'll, 've, 're.
LETTERS = "sdmtlvre"
#: The layout of the cached tables: a cache of another layout is never read.
_LAYOUT = 3
_CR, _LF, _TAB, _SPACE, _APOSTROPHE, _SLASH = 13, 10, 9, 32, 39, 47
_COMMA, _PERIOD, _COLON, _SEMICOLON = 44, 46, 58, 59


class ScannerTables(NamedTuple):
    """A regex engine's classes of every code point (``uint8``, ``0x110000`` long each), passed to
    the scanners as one argument."""

    classes: np.ndarray  # class bits: \p{L}, \p{N}, \s and o200k's two case classes
    fold: np.ndarray  # the contraction letter matched case-insensitively (1-based in LETTERS; 0 none)
    exact: np.ndarray  # the contraction letter matched case-sensitively


def _build(members: Callable[[str], np.ndarray]) -> ScannerTables:
    """``(classes, fold, exact)`` with ``members(pattern)``: the code points a one-character
    pattern matches, as an engine decides."""
    classes = np.zeros(0x110000, dtype=np.uint8)
    for bit, pattern in _CLASSES:
        classes[members(pattern)] |= bit
    fold = np.zeros(0x110000, dtype=np.uint8)
    exact = np.zeros(0x110000, dtype=np.uint8)
    for index, letter in enumerate(LETTERS, start=1):
        fold[members(f"(?i:{letter})")] = index
        exact[members(letter)] = index
    return ScannerTables(classes, fold, exact)


def _cached(name: str, build: Callable[[], ScannerTables], *, folder: Path | None = None) -> ScannerTables:
    """Tables kept in ``folder`` (``__pycache__`` beside this module) as ``name``; where that is
    read-only, built per process. The file ends with the SHA-256 of ``name`` (which says the
    engine's version) and the tables: one that does not match is rebuilt and replaced, never read."""
    cache = (folder or Path(__file__).parent / "__pycache__") / f"{name}-layout{_LAYOUT}.npy"
    size = 3 * 0x110000
    try:
        stored = np.load(cache, allow_pickle=False)
        if stored.shape == (size + 32,) and stored.dtype == np.uint8:
            stacked = stored[:size].reshape(3, 0x110000)
            if stored[size:].tobytes() == _digest(name, stacked):
                return ScannerTables(stacked[0], stacked[1], stacked[2])
    except (OSError, ValueError):  # missing or damaged: built again
        pass
    built = build()
    stacked = np.stack(built).astype(np.uint8, copy=False)
    try:
        cache.parent.mkdir(exist_ok=True)
        partial = partial_sibling(cache)
        try:
            with partial.open("wb") as handle:
                np.save(handle, np.concatenate([stacked.ravel(), np.frombuffer(_digest(name, stacked), dtype=np.uint8)]))
            partial.replace(cache)  # atomic: a concurrent reader sees the old file or the whole new one
        finally:
            partial.unlink(missing_ok=True)
    except OSError:
        pass
    return built


def _digest(name: str, stacked: np.ndarray) -> bytes:
    digest = hashlib.sha256(name.encode() + b"\0")
    digest.update(np.ascontiguousarray(stacked).data)  # no copy of the tables
    return digest.digest()


def build_tables() -> ScannerTables:
    """The class tables as the ``regex`` module decides them (uncached; see :func:`tables`)."""
    every = np.arange(0x110000, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")

    def members(pattern: str) -> np.ndarray:
        found = "".join(regex.findall(pattern, every))
        return np.frombuffer(found.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)

    return _build(members)


def build_tiktoken_tables() -> ScannerTables:
    """The class tables as tiktoken's regex engine decides them (uncached): each class is read
    off tiktoken itself, which encodes only what its pattern matches."""
    import tiktoken

    every = np.arange(0x110000, dtype=np.uint32)
    every = every[(every < 0xD800) | (every >= 0xE000)]  # no surrogates: tiktoken takes UTF-8 only
    text = every.tobytes().decode("utf-32-le")
    bytes_only = {bytes([b]): b for b in range(256)}

    def members(pattern: str) -> np.ndarray:
        encoding = tiktoken.Encoding(name="classes", pat_str=pattern, mergeable_ranks=bytes_only, special_tokens={})
        matched = encoding.decode_bytes(encoding.encode_ordinary(text)).decode("utf-8")
        return np.frombuffer(matched.encode("utf-32-le"), dtype=np.uint32)

    return _build(members)


@functools.lru_cache(maxsize=None)
def tables() -> ScannerTables:
    """``(classes, fold, exact)`` as the ``regex`` module decides them: per code point its class
    bits, and the contraction letter (1-based index in ``sdmtlvre``, 0 for none) it matches
    case-insensitively and case-sensitively. Built once per ``regex`` version and cached (see
    :func:`_cached`), a scan over every code point that loading the cache skips."""
    return _cached(f"pretokenizer-classes-regex-{regex.__version__}", build_tables)


@functools.lru_cache(maxsize=None)
def tiktoken_tables() -> ScannerTables:
    """:func:`tables` as tiktoken's regex engine decides them (the compiled encoder's, whose ids
    must be tiktoken's). Built once per tiktoken version."""
    import tiktoken

    version = getattr(tiktoken, "__version__", "unknown")
    return _cached(f"pretokenizer-classes-tiktoken-{version}", build_tiktoken_tables)


@inlined
def _run(cps, i, end, classes, bits):
    """The end of the run of characters in class ``bits`` starting at ``i``."""
    while i < end and classes[cps[i]] & bits:
        i += 1
    return i


@inlined
def _other_run(cps, i, end, classes):
    """The end of the run of ``[^\\s\\p{L}\\p{N}]`` starting at ``i``."""
    while i < end and classes[cps[i]] & _LNS == 0:
        i += 1
    return i


@inlined
def _lead(classes, cp):
    """``[^\\r\\n\\p{L}\\p{N}]``."""
    return classes[cp] & (_L | _N) == 0 and cp != _CR and cp != _LF


@inlined
def _contraction(cps, i, end, letters):
    """The end of ``'(?:[sdmt]|ll|ve|re)`` at ``i`` (letters by ``letters``), or ``i``."""
    if i + 1 >= end or cps[i] != _APOSTROPHE:
        return i
    first = letters[cps[i + 1]]
    if 1 <= first <= 4:
        return i + 2
    if i + 2 < end:
        second = letters[cps[i + 2]]
        if (first == 5 and second == 5) or (first == 6 and second == 8) or (first == 7 and second == 8):
            return i + 3
    return i


@inlined
def _whitespace(cps, i, end, classes, newline_rule, end_first):
    """At ``i``, which holds whitespace: ``\\s++$`` (when ``end_first``) | ``\\s*[\\r\\n]+``
    (when ``newline_rule``) | ``\\s+(?!\\S)`` | ``\\s``."""
    j = _run(cps, i, end, classes, _S)
    if end_first and j == end:
        return j
    if newline_rule:
        # \s* gives back characters until a newline follows: the last one in the run.
        k = j - 1
        while k >= i:
            if cps[k] == _CR or cps[k] == _LF:
                return k + 1
            k -= 1
    if j == end:
        return j
    if j - i >= 2:
        return j - 1
    return i + 1


@inlined
def _digits(cps, i, end, classes):
    """``\\p{N}{1,3}`` at ``i``, which holds a digit."""
    j = i + 1
    while j < end and j < i + 3 and classes[cps[j]] & _N:
        j += 1
    return j


@inlined
def _gpt4_piece(cps, i, end, classes, fold):
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
        return _digits(cps, i, end, classes)
    # ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
    start = i
    if c == _SPACE and i + 1 < end and classes[cps[i + 1]] & _LNS == 0:
        start = i + 1
    if classes[cps[start]] & _LNS == 0:
        j = _other_run(cps, start + 1, end, classes)
        while j < end and (cps[j] == _CR or cps[j] == _LF):
            j += 1
        return j
    # \s++$ | \s*[\r\n] | \s+(?!\S) | \s
    return _whitespace(cps, i, end, classes, True, True)


@inlined
def _gpt2_piece(cps, i, end, classes, exact):
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
    if kind & _LNS == 0:
        return _other_run(cps, start + 1, end, classes)
    # \s++$ | \s+(?!\S) | \s
    return _whitespace(cps, i, end, classes, False, True)


@inlined
def _upper_lower(cps, s, end, classes):
    """The end of o200k's ``[UPPER]*[LOWER]+`` at ``s`` (greedy, backtracking), or -1."""
    a = _run(cps, s, end, classes, _UPPER)
    if a < end and classes[cps[a]] & _LOWER:
        return _run(cps, a + 1, end, classes, _LOWER)
    # [UPPER]* gives back characters until one is in LOWER too (Lm, Lo, marks): the last one,
    # after which no LOWER character follows, so [LOWER]+ ends right after it.
    k = a - 1
    while k >= s:
        if classes[cps[k]] & _LOWER:
            return k + 1
        k -= 1
    return -1


@inlined
def _o200k_piece(cps, i, end, classes, fold):
    """The end of the o200k piece starting at ``i``: the first alternative that matches."""
    c = cps[i]
    kind = classes[c]
    lead = _lead(classes, c) and i + 1 < end  # [^\r\n\p{L}\p{N}]? may take c
    if kind & _CASED or (lead and classes[cps[i + 1]] & _CASED):
        # [^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?: with c as the lead
        # first, then without it (a mark is both a lead and a cased character).
        j = _upper_lower(cps, i + 1, end, classes) if lead else -1
        if j < 0:
            j = _upper_lower(cps, i, end, classes)
        if j < 0:
            # [^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(?i:...)?
            if lead and classes[cps[i + 1]] & _UPPER:
                j = _run(cps, i + 2, end, classes, _UPPER)
            elif kind & _UPPER:
                j = _run(cps, i + 1, end, classes, _UPPER)
            if j >= 0:
                j = _run(cps, j, end, classes, _LOWER)
        if j >= 0:
            return _contraction(cps, j, end, fold)
    # \p{N}{1,3}
    if kind & _N:
        return _digits(cps, i, end, classes)
    #  ?[^\s\p{L}\p{N}]+[\r\n/]*
    start = i
    if c == _SPACE and i + 1 < end and classes[cps[i + 1]] & _LNS == 0:
        start = i + 1
    if classes[cps[start]] & _LNS == 0:
        j = _other_run(cps, start + 1, end, classes)
        while j < end and (cps[j] == _CR or cps[j] == _LF or cps[j] == _SLASH):
            j += 1
        return j
    # \s*[\r\n]+ | \s+(?!\S) | \s+
    return _whitespace(cps, i, end, classes, True, False)


@inlined
def _polish_piece(cps, i, end, classes, phrase):
    """The end of the piece of the Polish pattern (``phrase``: the phrase pattern) at ``i``."""
    # [\r\n]*+[ \t]*+ leads the first two alternatives.
    b = i
    while b < end and (cps[b] == _CR or cps[b] == _LF):
        b += 1
    while b < end and (cps[b] == _SPACE or cps[b] == _TAB):
        b += 1
    # [^\r\n\p{L}\p{N}]?+\p{L}++
    k = b + 1 if b + 1 < end and _lead(classes, cps[b]) else b
    if k < end and classes[cps[k]] & _L:
        j = _run(cps, k + 1, end, classes, _L)
        while phrase:
            # (?:[,.:;]?+ [^\r\n\p{L}\p{N}]?+\p{L}++)*+
            k = j
            if k < end and (cps[k] == _COMMA or cps[k] == _PERIOD or cps[k] == _COLON or cps[k] == _SEMICOLON):
                k += 1
            if k >= end or cps[k] != _SPACE:
                break
            k += 1
            if k + 1 < end and _lead(classes, cps[k]):
                k += 1
            if k >= end or not classes[cps[k]] & _L:
                break
            j = _run(cps, k + 1, end, classes, _L)
        return j
    # [^\s\p{L}\p{N}]++[\r\n]*+
    if b < end and classes[cps[b]] & _LNS == 0:
        j = _other_run(cps, b + 1, end, classes)
        while j < end and (cps[j] == _CR or cps[j] == _LF):
            j += 1
        return j
    #  ?\p{N}{1,3}
    start = i + 1 if cps[i] == _SPACE and i + 1 < end and classes[cps[i + 1]] & _N else i
    if classes[cps[start]] & _N:
        return _digits(cps, start, end, classes)
    # \s++$ | \s*[\r\n] | \s+(?!\S) | \s
    return _whitespace(cps, i, end, classes, True, True)


@inlined
def piece_end(cps, i, end, mode, tables):
    """The end of the piece of pattern ``mode`` that starts at ``i`` (``i < end``) in the text
    ``cps[:end]``, with the classes of ``tables`` (:class:`ScannerTables`); the whole rest for
    :data:`WHOLE`."""
    classes, fold, exact = tables
    if mode == GPT4:
        return _gpt4_piece(cps, i, end, classes, fold)
    if mode == GPT2:
        return _gpt2_piece(cps, i, end, classes, exact)
    if mode == O200K:
        return _o200k_piece(cps, i, end, classes, fold)
    if mode == POLISH:
        return _polish_piece(cps, i, end, classes, False)
    if mode == POLISH_PHRASE:
        return _polish_piece(cps, i, end, classes, True)
    return end


@njit(cache=True, nogil=True)
def split_all(cps, part_ends, mode, tables, out):
    """Write the end of every piece of every part (parts end at ``part_ends``) into ``out``;
    return how many. A whole part is one piece, even an empty one."""
    n = 0
    begin = 0
    for p in range(part_ends.size):
        end = part_ends[p]
        i = begin
        if mode == WHOLE:
            out[n] = end
            n += 1
        while mode != WHOLE and i < end:
            i = piece_end(cps, i, end, mode, tables)
            out[n] = i
            n += 1
        begin = end
    return n


def split(text: str, pattern: str | None) -> list[str]:
    """``regex.findall(pattern, text)`` for a pattern in :data:`COMPILED` (``None``: ``[text]``),
    by the compiled scanner with the ``regex`` module's classes.

    >>> split("We've 12345 cats\\n\\n", GPT4_PATTERN)
    ['We', "'ve", ' ', '123', '45', ' cats', '\\n\\n']
    """
    mode = COMPILED[pattern]
    cps, ends = code_points([text])
    out = np.empty(len(text) + 1, dtype=np.int64)
    n = split_all(cps, ends, mode, tables(), out)
    bounds = [0, *out[:n].tolist()]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]
