"""What every reader sees: a token source, one pack or many shards read as one stream (the
protocol and the counts they share; :mod:`tokpack.store.opening` opens one).

A token source has a ``path``; a ``meta`` record with ``n_docs``, ``n_tokens``, ``dtype``,
``vocabulary``, ``ranges``, ``pad_id``, ``tokens_sha256`` and ``starts_sha256`` (of the whole
stream, so a sharded dataset and its merged pack share them); the global ``starts`` index; and
three reads: rows of a fixed width at many origins, ids at arbitrary positions, a span of the
stream as one array; and ``verify()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tokpack.vocab.identity import VocabIdentity

#: Ids read per step by :func:`chunks`: enough for fast writes, small enough that memory stays flat.
CHUNK_TOKENS = 8 << 20


@runtime_checkable
class TokenSource(Protocol):
    """A stream of ids with a document index, read without concatenating files."""

    path: Path
    starts: np.ndarray

    @property
    def meta(self) -> Any: ...

    @property
    def vocabulary(self) -> VocabIdentity: ...

    @property
    def n_docs(self) -> int: ...

    @property
    def n_tokens(self) -> int: ...

    def gather_rows(self, origins: np.ndarray, width: int) -> np.ndarray: ...

    def take(self, positions: np.ndarray) -> np.ndarray: ...

    def read_span(self, start: int, end: int) -> np.ndarray:
        """The ids ``stream[start:end]`` as one array: slices of the parts, never a gather per id
        (a part that checks itself before its first read does so here too)."""
        ...

    def verify(self) -> None: ...


class RecordedStream:
    """The counts and identity every token source reads off its ``meta`` record."""

    meta: Any

    @property
    def vocabulary(self) -> VocabIdentity:
        """The identity of the vocabulary every id comes from."""
        return self.meta.vocabulary

    @property
    def n_docs(self) -> int:
        return self.meta.n_docs

    @property
    def n_tokens(self) -> int:
        return self.meta.n_tokens


def document_ends(source: TokenSource) -> np.ndarray:
    """Where each document ends in the stream (the next one's start, or the stream's end)."""
    return np.append(np.asarray(source.starts[1:], dtype=np.int64), np.int64(source.n_tokens))


def chunks(source: TokenSource, documents: tuple[int, int], *,
           chunk_tokens: int = CHUNK_TOKENS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Whole documents ``[d0, d1)`` in order, about ``chunk_tokens`` ids at a time: ``(ids,
    lengths)`` with ``lengths.sum() == len(ids)``. A longer document comes alone."""
    starts = np.asarray(source.starts, dtype=np.int64)
    ends = document_ends(source)
    first, stop = documents
    while first < stop:
        limit = starts[first] + chunk_tokens
        last = int(np.searchsorted(ends, limit, side="right"))  # documents ending within the limit
        last = min(max(last, first + 1), stop)
        lengths = ends[first:last] - starts[first:last]
        yield source.read_span(int(starts[first]), int(ends[last - 1])), lengths
        first = last
