"""The compiled exact byte-level BPE encoder: tiktoken's ``encode_ordinary`` ids, from a C extension.

The encoder is ``tokpack.vocab._bpe``, built by ``pip install`` from ``_bpe.c`` beside this file
(C11 and the CPython API, no other dependency) and the parts it includes, one per role:
``_bpe_scan.h`` (the pre-tokenizer), ``_bpe_tables.h`` (the vocabulary), ``_bpe_cache.h`` (a
thread's piece cache), ``_bpe_merge.h`` (merging a missed piece), ``_bpe_encode.h`` (a piece's ids
and the loop over a text). Per batch of texts, in one call that releases the GIL:

1. A text's **UTF-8**: an ASCII ``str`` is read in place (CPython stores it as its UTF-8); any
   other is transcoded into its thread's buffer (where SSE2 is, 16 or 8 characters at a time, each
   block kept up to its first character from U+0080 on), lone surrogates as tiktoken's ``encode_ordinary``
   treats them (``text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")``: a high and
   a low surrogate in a row become their astral character, any other U+FFFD). A ``bytes`` text is
   read in place once checked as UTF-8 (ASCII passed over 32 bytes at a time, each other character
   checked whole by its first byte): a corpus's documents reach the encoder as the bytes read from
   the file, never decoded to ``str`` (which the encoder would only turn back into UTF-8). The
   first that is not UTF-8 raises the ``UnicodeDecodeError`` ``bytes.decode`` would raise (its
   ``start``, ``end`` and ``reason``).
2. The **pre-tokenizer**, one scanner per pattern of :data:`COMPILED_PATTERNS` over the bytes: each
   alternative in the pattern's order, with its possessive and backtracking quantifiers
   (``\\s+(?!\\S)``, o200k's case runs), a byte-class table for ASCII and, for any other character,
   a two-stage table of Unicode classes generated from tiktoken's own regex engine
   (:mod:`tokpack.vocab.unicode_classes`), so the Unicode version is the oracle's.
3. **Each piece**: a byte is its rank; a piece of 2 to 15 bytes is keyed by its bytes (two machine
   words, its length in the top byte), looked up first among the vocabulary's tokens (tables
   shared by every thread, read-only, in buckets of one cache line: tokens of up to 7 bytes by one
   word, five to a bucket, longer ones three; tiktoken takes a piece that is a token as that token), then
   in its thread's piece cache (2-way sets of 32-byte entries, a set one 64-byte line: a hit is
   one probe); a longer piece by a 64-bit hash of its bytes, verified against them, in a table of
   the long tokens, then in direct-mapped rows of pieces up to 128 bytes. The pieces are found 32
   at a time and their slots prefetched before the first of them is looked up: the tables are
   megabytes, read in no order, and a look-up that waits for memory costs more than finding and
   hashing a piece.
4. A **miss** is merged as tiktoken's ``byte_pair_merge`` does, lowest rank first and leftmost on
   ties, each pair's rank looked up by its bytes: by a scan for pieces of up to 32 bytes, by an
   heap of blocks for longer ones (``n log n`` at any length; 12 bytes of scratch a byte of piece),
   then kept in the cache if its ids fit (a piece of up to 15 bytes with at most 4 ids in an
   entry, with 5 to 12 in an entry and its set's overflow, one of up to 128 bytes with at most 28
   in a row). A short token's look-up goes first through a filter of about ten bits a token, in
   the CPU's caches, which tells most byte strings that are no token apart without the table. The caches have a fixed size (:data:`CACHE_BYTES` a thread): a new
   piece overwrites an old one, never grows them.

Why C and not numba: importing numba and its first dispatch cost more CPU time than a whole
gigatoken process that encodes 10 MB, so ``prepare`` of a 10 MB file could not match it with numba
on the path; a C extension imports in milliseconds and builds its tables in tens of them. Speed,
and the comparison with gigatoken and tiktoken, cold and warm: BENCHMARKS.md, "The compiled
encoder" (``bench/bench_encode.py``); prepare's whole-process cost: its "prepare's fixed cost".

Without the extension (a build that failed, or a platform without a compiler), :data:`MISSING`
says why and :class:`~tokpack.vocab.bytelevel.BpeTokenizer` falls back to tiktoken (same ids),
saying so where it reports its engine. Ids are ranks (tiktoken's convention), written as
``uint32``; they must be below :data:`MAX_ID`.

The same extension serves a pack's ``tokenizer.json`` (:mod:`tokpack.vocab.merge_files`): each token's
last join by the rank rule (:func:`last_joins`, :func:`table_last_joins`: the merges), the whole
document from a token table's arrays (:func:`tokenizer_json_text`), and the vocabulary's and merges'
JSON text from lists of bytes (:func:`entries_json`, :func:`pairs_json`); each returns ``None``
without the extension, and the caller does the same in numpy.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from tokpack.vocab.patterns import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    GPT4_PATTERN,
    POLISH_PATTERN,
    POLISH_PHRASE_PATTERN,
)
from tokpack.vocab.published import O200K_PATTERN

if TYPE_CHECKING:
    from tokpack.vocab.rank_files import TokenTable

#: The extension module (``None`` where it is not built).
_bpe: ModuleType | None
#: Why the compiled encoder is missing (``None``: it is there).
MISSING: str | None
try:
    import tokpack.vocab._bpe as _built
except ImportError as error:  # pragma: no cover - the test environment has it (test_encoder_build.py)
    _bpe = None
    MISSING = f"tokpack's compiled encoder (its C extension) is not built ({error})"
else:
    _bpe = _built
    MISSING = None

#: Patterns with a compiled pre-tokenizer, and its scanner's number; any other falls back to tiktoken.
COMPILED_PATTERNS: dict[str, int] = {
    GPT2_PATTERN: 1,
    GPT4_PATTERN: 2,
    CL100K_PATTERN: 2,  # its possessive digit groups cut as GPT4_PATTERN's greedy ones
    O200K_PATTERN: 3,
    POLISH_PATTERN: 4,
    POLISH_PHRASE_PATTERN: 5,
}

#: Ids must be below this for the compiled encoder (16,777,216; real vocabularies are far smaller).
MAX_ID = 1 << 24
#: The piece cache's entries of pieces of up to 15 bytes and 4 ids (``2 << SET_BITS``, two a set; a
#: piece of 5 to 12 ids keeps the rest in its set's overflow of 8) and rows of pieces of up to 128
#: bytes and 28 ids (``1 << ROW_BITS``), per thread.
SET_BITS, ROW_BITS = 17, 13
#: Bytes of one thread's piece cache (32 a short entry, 32 a set's overflow, 256 a row): 14 MiB.
CACHE_BYTES = (2 << SET_BITS) * 32 + (1 << SET_BITS) * 32 + (1 << ROW_BITS) * 256


@dataclass(frozen=True)
class CacheReport:
    """What the piece caches hold and did since they were made: their fixed size (``slots_each``
    entries and rows, ``bytes_each``), the bytes their threads' buffers hold now (the UTF-8 of
    a text that is not ASCII, a long piece's merge), the pieces they hold, and how each piece was
    found: a token of the vocabulary (``tokens``), in a cache (``hits``), merged and kept
    (``misses``) or merged and too long to keep (``uncached``); a piece of one byte is a token."""

    caches: int
    slots_each: int
    bytes_each: int
    buffer_bytes: int
    pieces_held: int
    tokens: int
    hits: int
    misses: int
    uncached: int


class CompiledBpe:
    """The compiled encoder of one vocabulary (``ranks``: token bytes to id) and one pattern of
    :data:`COMPILED_PATTERNS`. Thread-safe: each call takes a piece cache of its own from a pool.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b" ab": 257}
    >>> CompiledBpe(ranks, GPT2_PATTERN).encode(["abc ab", "b"])[0].tolist()
    [256, 99, 257]
    """

    def __init__(self, ranks: Mapping[bytes, int] | TokenTable, pattern: str, *,
                 _extension: ModuleType | None = None) -> None:
        """``ranks``: a dict, or the same tokens as a :class:`~tokpack.vocab.rank_files.TokenTable`
        (built from its arrays, no Python object per token). ``_extension``: private, for the tests:
        another build of the extension module to encode with instead of the installed one (the
        portable build without SSE2 and SSSE3, tests/vocab/test_encoder_scalar_build.py).

        Raises:
            KeyError: ``pattern`` has no compiled pre-tokenizer.
            ValueError: an id is not below :data:`MAX_ID`, or a single byte is missing.
            RuntimeError: the extension is not built (:data:`MISSING`).
        """
        extension = _bpe if _extension is None else _extension
        if extension is None:
            raise RuntimeError(MISSING)
        self._extension = extension
        given: object
        if isinstance(ranks, tuple):  # a TokenTable
            joined, ends, ids = ranks
            given = (joined, np.ascontiguousarray(ends, np.int64), np.ascontiguousarray(ids, np.int64))
        else:
            given = ranks if isinstance(ranks, dict) else dict(ranks)
        self.encoder = extension.Encoder(given, COMPILED_PATTERNS[pattern])
        self._pool: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._caches: list[object] = []

    def new_cache(self, set_bits: int = SET_BITS, row_bits: int = ROW_BITS) -> object:
        """A piece cache of ``2 << set_bits`` entries and ``1 << row_bits`` rows, empty."""
        return self._extension.Cache(set_bits, row_bits)

    @contextmanager
    def cache(self) -> Iterator[object]:
        """A piece cache from the pool (a new one if every one is in use), back when done."""
        try:
            cache = self._pool.get_nowait()
        except queue.Empty:
            cache = self.new_cache()
            self._caches.append(cache)
        try:
            yield cache
        finally:
            self._pool.put(cache)

    def encode(self, texts: Sequence[str | bytes]) -> list[np.ndarray]:
        """The ids of each text, as ``uint32`` arrays (views of one buffer); a ``bytes`` text is
        read as UTF-8, the ids of the ``str`` it decodes to.

        >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, "ą".encode(): 257}
        >>> [ids.tolist() for ids in CompiledBpe(ranks, GPT2_PATTERN).encode(["abą", "abą".encode()])]
        [[256, 257], [256, 257]]
        >>> CompiledBpe(ranks, GPT2_PATTERN).encode([b"ab", b"a\\xc4b"])
        Traceback (most recent call last):
        ...
        UnicodeDecodeError: 'utf-8' codec can't decode byte 0xc4 in position 1: invalid continuation byte

        Raises:
            UnicodeDecodeError: the first ``bytes`` text that is not UTF-8, as ``bytes.decode``
                raises it (its ``object`` that text).
        """
        with self.cache() as cache:
            ids, ends = self.encoder.encode(texts, cache)
        flat = np.frombuffer(ids, dtype=np.uint32)
        bounds = np.frombuffer(ends, dtype=np.int64).tolist()
        return [flat[a:b] for a, b in zip([0, *bounds], bounds)]

    def cache_report(self) -> CacheReport:
        """The piece caches' size and what they did so far."""
        stats = [cache.stats() for cache in list(self._caches)]  # type: ignore[attr-defined]
        return CacheReport(caches=len(stats), slots_each=(2 << SET_BITS) + (1 << ROW_BITS), bytes_each=CACHE_BYTES,
                           buffer_bytes=sum(s["buffer_bytes"] for s in stats),
                           pieces_held=sum(s["entries_held"] + s["rows_held"] for s in stats),
                           **{name: sum(s[name] for s in stats) for name in ("tokens", "hits", "misses", "uncached")})


def utf8_characters(data: bytes) -> int:
    """The characters of the UTF-8 ``data`` (a :meth:`CompiledBpe.encode` checked it), counted in
    C without decoding: its bytes that are no continuation byte.

    >>> utf8_characters("zażółć 中".encode())
    8
    """
    if _bpe is None:
        return len(data.decode("utf-8"))
    count: int = _bpe.utf8_characters(data)
    return count


def parse_ranks(text: bytes) -> tuple[bytes, np.ndarray, np.ndarray, bool] | None:
    """The tokens of a rank file's ``text`` laid out as tiktoken writes one (every line ``base64
    rank`` and a newline, no token or rank repeated), read in C: their bytes one after another,
    each one's end and rank (``int64``, in the file's order; a
    :class:`~tokpack.vocab.rank_files.TokenTable`'s arrays), and whether ``text`` is canonical
    (:func:`~tokpack.vocab.rank_files.parse_rank_text` says what these mean); ``None`` for any
    other text (the caller's parse decides, and names the mistake) or without the extension.

    >>> joined, ends, ids, canonical = parse_ranks(b"YQ== 0\\nYWI= 7\\n")
    >>> joined, ends.tolist(), ids.tolist(), canonical
    (b'aab', [1, 3], [0, 7], True)
    >>> parse_ranks(b"YQ== 0\\nYQ== 1\\n") is None  # a token twice: for the line parser to name
    True
    """
    if _bpe is None:
        return None
    found = _bpe.parse_ranks(text)
    if found is None:
        return None
    joined, ends, ids, canonical = found
    return joined, np.frombuffer(ends, np.int64), np.frombuffer(ids, np.int64), canonical


def last_joins(tokens: list[bytes], ids: np.ndarray) -> tuple[np.ndarray, int] | None:
    """For each token (``ids`` its ids), the length of the left part of the last join tiktoken's
    rank rule makes when it encodes that token alone, joining only pairs that make a token of a
    lower id (0 for a single byte); and the index of the first token lower ids cannot build (-1:
    none). In C, exact (tokens looked up by their bytes). ``None`` without the extension or when an
    id is outside 0 to :data:`MAX_ID`.

    >>> left, stuck = last_joins([b"a", b"b", b"c", b"ab", b"abc", b"bc", b"bcc"], np.arange(7))
    >>> left.tolist(), stuck
    ([0, 0, 0, 1, 2, 1, 2], -1)
    >>> last_joins([b"a", b"b", b"c", b"abc"], np.arange(4))[1]  # no pair of it is a token
    3
    """
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    if _bpe is None or (len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= MAX_ID)):
        return None
    left, stuck = _bpe.last_joins(tokens, ids)
    return np.frombuffer(left, dtype=np.int64), stuck


def table_last_joins(table: TokenTable) -> tuple[np.ndarray, int] | None:
    """:func:`last_joins` of a table's tokens, read from its arrays (no bytes object a token), in
    the table's order; the index is that of the token of lowest id lower ids cannot build (-1:
    none). ``None`` without the extension or when an id is outside 0 to :data:`MAX_ID`.

    >>> from tokpack.vocab.rank_files import TokenTable
    >>> left, stuck = table_last_joins(TokenTable.of({b"abc": 4, b"a": 0, b"b": 1, b"c": 2, b"ab": 3}))
    >>> left.tolist(), stuck
    ([2, 0, 0, 0, 1], -1)
    """
    ids = np.ascontiguousarray(table.ids, dtype=np.int64)
    if _bpe is None or (len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= MAX_ID)):
        return None
    left, stuck = _bpe.table_last_joins((table.joined, np.ascontiguousarray(table.ends, dtype=np.int64), ids))
    return np.frombuffer(left, dtype=np.int64), stuck


def tokenizer_json_text(table: TokenTable, cuts: np.ndarray, names: list[bytes], name_ids: np.ndarray,
                        spellings: list[bytes], parts: tuple[bytes, bytes, bytes]) -> bytes | None:
    """A ``tokenizer.json`` from a table's arrays, in C, as one bytes object: ``parts[0]``, then
    ``"token": id`` for each token and each of ``names`` (``name_ids`` rising) in id order, a token
    first on a tie, joined by ``", "``; ``parts[1]``; ``["left", "right"]`` for each token cut in
    two (``cuts``: one a token in the table's order, the left part's length; 0: not cut, left
    out) in id order, joined by ``", "``; ``parts[2]``. Each byte written as ``spellings[byte]``.
    ``None`` without the extension. A name spelled as one of the tokens is refused (``ValueError``):
    the document would hold two ids under one spelling.

    >>> from tokpack.vocab.rank_files import TokenTable
    >>> table = TokenTable.of({b"ab": 2, b"a": 0, b"b": 1})
    >>> tokenizer_json_text(table, np.array([1, 0, 0]), [b"<x>"], np.array([3]), [bytes([b]) for b in range(256)],
    ...                     (b"{", b"} [", b"]"))
    b'{"a": 0, "b": 1, "ab": 2, "<x>": 3} [["a", "b"]]'
    """
    if _bpe is None:
        return None
    text: bytes = _bpe.tokenizer_json((table.joined, np.ascontiguousarray(table.ends, dtype=np.int64),
                                       np.ascontiguousarray(table.ids, dtype=np.int64)),
                                      np.ascontiguousarray(cuts, dtype=np.int64), names,
                                      np.ascontiguousarray(name_ids, dtype=np.int64), spellings, parts)
    return text


def pairs_json(tokens: list[bytes], cuts: np.ndarray, spellings: list[bytes]) -> bytes | None:
    """``["left", "right"]`` for each token cut in two (``cuts``: the left part's length; 0: not
    cut, left out), each byte written as ``spellings[byte]``, joined by ``", "``: the merges of a
    ``tokenizer.json`` as ``json.dumps`` writes them, in C. ``None`` without the extension.

    >>> pairs_json([b"a", b"ab", b"abc"], np.array([0, 1, 2]), [bytes([b]) for b in range(256)])
    b'["a", "b"], ["ab", "c"]'
    """
    if _bpe is None:
        return None
    text: bytes = _bpe.pairs_json(tokens, np.ascontiguousarray(cuts, dtype=np.int64), spellings)
    return text


def entries_json(keys: list[bytes], values: np.ndarray, spellings: list[bytes]) -> bytes | None:
    """``"key": value`` for each key (each byte written as ``spellings[byte]``) and non-negative
    value, joined by ``", "``: the vocabulary of a ``tokenizer.json`` as ``json.dumps`` writes a
    dict, in C. ``None`` without the extension.

    >>> entries_json([b"a", b"ab"], np.array([0, 257]), [bytes([b]) for b in range(256)])
    b'"a": 0, "ab": 257'
    """
    if _bpe is None:
        return None
    text: bytes = _bpe.entries_json(keys, np.ascontiguousarray(values, dtype=np.int64), spellings)
    return text
