"""What every reader sees: a token source, one pack or many shards read as one stream.

A token source has a ``path``; a ``meta`` record with ``n_docs``, ``n_tokens``, ``dtype``,
``vocabulary``, ``ranges``, ``pad_id``, ``tokens_sha256`` and ``starts_sha256`` (of the whole
stream, so a sharded dataset and its merged pack share them); the global ``starts`` index; and
three reads: rows of a fixed width at many origins, ids at arbitrary positions, and ``verify()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tokpack.errors import InputError
from tokpack.store.format import META_FILE
from tokpack.vocab.identity import VocabIdentity

DATASET_FILE = "dataset.json"


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


def open_tokens(path: Path, *, verify: bool | None = None) -> TokenSource:
    """Open ``path`` as a pack (``meta.json``), a sharded dataset (``dataset.json``), or another
    framework's files that tokpack exported (Megatron ``.bin/.idx``, nanoGPT ``.bin``; see
    :mod:`tokpack.store.importing`).

    ``verify``: ``None`` verifies checksums on the first open (a dataset: each shard when it is
    first read) and trusts a verification stamp after that; ``True`` verifies everything now;
    ``False`` checks counts, sizes and seals only.

    Raises:
        ValueError: neither, or anything that does not match its record.
    """
    from tokpack.store.dataset import ShardedDataset
    from tokpack.store.reader import Pack

    path = Path(path)
    if (path / DATASET_FILE).exists():
        return ShardedDataset(path, verify=verify)
    if not (path / META_FILE).exists():
        # Another framework's files (Megatron, nanoGPT, datatrove): readable here when a tokpack
        # export's sidecar names their vocabulary (else the error asks for the tokenizer).
        from tokpack.store.importing import detect, open_foreign

        try:
            kind = detect(path)
        except InputError:
            kind = None
        if kind is not None:
            return open_foreign(path, kind=kind, verify=verify)
    if (path / META_FILE).exists() or not path.is_dir():
        return Pack(path, verify=verify)
    raise InputError(f"{path}: neither a pack ({META_FILE}) nor a sharded dataset ({DATASET_FILE})")
