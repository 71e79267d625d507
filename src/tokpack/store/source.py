"""What every reader sees: a token source, one pack or many shards read as one stream (the
protocol and the counts they share; :mod:`tokpack.store.opening` opens one).

A token source has a ``path``; a ``meta`` record with ``n_docs``, ``n_tokens``, ``dtype``,
``vocabulary``, ``ranges``, ``pad_id``, ``tokens_sha256`` and ``starts_sha256`` (of the whole
stream, so a sharded dataset and its merged pack share them); the global ``starts`` index; and
three reads: rows of a fixed width at many origins, ids at arbitrary positions, and ``verify()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tokpack.vocab.identity import VocabIdentity

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
