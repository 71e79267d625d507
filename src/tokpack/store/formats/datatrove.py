"""A folder tokenized by Hugging Face datatrove, opened as a tokpack token source.

datatrove's ``DocumentTokenizer`` writes, per task, a ``NAME.ds`` file (every document's ids,
little-endian, 2 bytes each, or 4 for vocabularies past 65,536 ids) and ``NAME.ds.index``
(little-endian ``uint64``: where each document ends, in ids, counted from the file's start). The
files carry no vocabulary identity, so the user names the tokenizer that made them; tokpack then
reads the ``.ds`` files in sorted name order as one stream, without converting them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.store.dataset import PartsStream, stream_hashes
from tokpack.store.format import Span, token_dtype
from tokpack.store.source import RecordedStream
from tokpack.vocab.loading import VocabularySpec, load_vocabulary


class _TokenFile:
    """One ``.ds`` file and its index, checked against each other."""

    def __init__(self, path: Path, dtype: np.dtype) -> None:
        self.path = path
        size = path.stat().st_size
        if size % dtype.itemsize:
            raise IntegrityError(f"{size} bytes is not a whole number of {dtype.itemsize}-byte ids", where=path)
        self.tokens = np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r") if size else np.zeros(0, dtype)
        self.n_tokens = len(self.tokens)
        index = path.with_name(path.name + ".index")
        if not index.exists():
            raise IntegrityError("missing (datatrove writes one beside each .ds file)", where=index)
        if index.stat().st_size % 8:  # np.fromfile would drop the tail silently
            raise IntegrityError(f"{index.stat().st_size} bytes is not a whole number of 8-byte document ends", where=index,
                                 fix="the index is truncated or padded; regenerate it with datatrove")
        ends = np.fromfile(index, dtype="<u8").astype(np.int64)
        if len(ends) and (np.any(np.diff(ends) < 0) or ends[0] < 0):
            raise IntegrityError("document ends are not in order", where=index)
        if (ends[-1] if len(ends) else 0) != self.n_tokens:
            raise IntegrityError(f"last document ends at {ends[-1] if len(ends) else 0}, the file has {self.n_tokens} ids", where=index)
        begins = np.concatenate(([0], ends[:-1]))
        self.starts = begins[ends > begins]  # empty documents have no first id to point at
        self._rows: dict[int, np.ndarray] = {}

    def gather_rows(self, origins: np.ndarray, width: int) -> np.ndarray:
        rows = self._rows.get(width)
        if rows is None:
            rows = self._rows[width] = sliding_window_view(self.tokens, width)
        return rows[origins]


class DatatroveMeta:
    """The record readers expect (counts, dtype, identity, ranges, checksums) for a datatrove folder."""

    ranges: dict[str, Any]  # set with the other fields in __init__

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def to_json(self) -> str:
        import json

        fields = {k: (v.model_dump(mode="json", by_alias=True) if hasattr(v, "model_dump") else v)
                  for k, v in self.__dict__.items()}
        fields["ranges"] = {k: v.model_dump(mode="json") for k, v in self.ranges.items()}
        return json.dumps(fields, indent=2, sort_keys=True)


class DatatroveFolder(PartsStream, RecordedStream):
    """The ``.ds`` files of ``path``, in sorted order, as one stream of ``tokenizer``'s ids.

    All of it is the ``train`` range. There is no padding id: datatrove appends the end-of-text
    token to each document, so every id of the vocabulary may be a real token; schedules
    (:class:`tokpack.serve.TokenBatches`) read it, windows refuse to pad it.
    """

    def __init__(self, path: str | Path, *, tokenizer: VocabularySpec, verify: bool = False) -> None:
        """Raises:
            InputError / IntegrityError / VocabularyMismatch: no ``.ds`` files, a missing or inconsistent index, or (with ``verify``)
                an id outside the tokenizer's vocabulary.
        """
        self.path = Path(path)
        vocabulary = load_vocabulary(tokenizer)
        self.dtype = token_dtype(vocabulary.n_vocab)
        files = sorted(self.path.rglob("*.ds"))
        if not files:
            raise InputError("no datatrove .ds files", where=self.path)
        self.shards = [_TokenFile(file, self.dtype) for file in files]
        self.offsets = np.concatenate(([0], np.cumsum([f.n_tokens for f in self.shards]))).astype(np.int64)
        self.starts = np.concatenate([f.starts + o for f, o in zip(self.shards, self.offsets)])
        n_tokens, n_docs = int(self.offsets[-1]), len(self.starts)
        tokens_sha, starts_sha = stream_hashes(self.shards)
        self.meta = DatatroveMeta(
            schema="datatrove", n_docs=n_docs, n_tokens=n_tokens, dtype=self.dtype.name,
            vocabulary=vocabulary.identity, ranges={"train": Span(documents=(0, n_docs), tokens=(0, n_tokens))},
            pad_id=None, counts={}, tokens_sha256=tokens_sha, starts_sha256=starts_sha,
            files=[str(f.path.relative_to(self.path)) for f in self.shards],
        )
        if verify:
            self.verify()

    @property
    def verified_what(self) -> str:
        """What :meth:`verify` checks, in words (``tokpack inspect`` prints it)."""
        return "every id is in the vocabulary; no checksums checked (these files record none)"

    def verify(self) -> None:
        """Check every id is inside the named tokenizer's vocabulary.

        Raises:
            VocabularyMismatch: naming the file with an id the tokenizer does not have.
        """
        for part in self.shards:
            if part.n_tokens and int(part.tokens.max()) >= self.vocabulary.n_vocab:
                raise VocabularyMismatch(f"ids reach {int(part.tokens.max())}, past the tokenizer's "
                                 f"{self.vocabulary.n_vocab}; is it the tokenizer that made them?", where=part.path)

    def __repr__(self) -> str:
        return f"DatatroveFolder({str(self.path)!r}, files={len(self.shards)}, n_tokens={self.n_tokens})"


def recognizes(path: Path) -> bool:
    """Whether ``path`` is a folder holding datatrove ``.ds`` files (at any depth)."""
    return path.is_dir() and any(path.rglob("*.ds"))


def read(path: Path, *, tokenizer: VocabularySpec | None = None, eod_id: int | None = None) -> DatatroveFolder:
    """``path`` opened in place; ``tokenizer`` is needed (datatrove's files name no vocabulary)."""
    return DatatroveFolder(path, tokenizer=tokenizer)


__all__ = ["DatatroveFolder", "read", "recognizes"]
