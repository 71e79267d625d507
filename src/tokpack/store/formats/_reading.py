"""What the readers of other frameworks' token files share: the vocabulary named by the user or
by a tokpack export's sidecar, the record readers expect, and the checks of their ids and sizes.

Those files carry no vocabulary identity, so a reader needs ``tokenizer=`` (as
:class:`tokpack.store.DatatroveFolder` does) unless tokpack wrote them and left its sidecar; a
tokenizer that contradicts the sidecar is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.store.dataset import stream_hashes
from tokpack.store.format import Span
from tokpack.vocab.identity import VocabIdentity
from tokpack.vocab.loading import VocabularySpec, load_vocabulary

#: Ids checked per step: memory stays flat whatever the file's size.
_CHECK_CHUNK = 32 << 20


def resolve_vocabulary(where: Path, tokenizer: VocabularySpec | None, recorded: VocabIdentity | None) -> VocabIdentity:
    """The vocabulary of a foreign file: ``tokenizer``'s, checked against the sidecar's ``recorded`` one.

    Raises:
        InputError: neither is given.
        VocabularyMismatch: both are, and they differ.
    """
    if tokenizer is None:
        if recorded is None:
            raise InputError("records no vocabulary", where=where, fix="name the tokenizer that made it with tokenizer=PATH")
        return recorded
    identity = load_vocabulary(tokenizer).identity
    if recorded is not None and identity != recorded:
        raise VocabularyMismatch(f"was exported with vocabulary {recorded.short}, not {identity.short}", where=where,
                                 fix="name the tokenizer it was made with")
    return identity


class TokenFile:
    """One flat file of little-endian ids, memory-mapped, with the starts of its documents."""

    def __init__(self, path: Path, tokens: np.ndarray, starts: np.ndarray) -> None:
        self.path, self.tokens, self.starts = path, tokens, starts
        self.n_tokens = len(tokens)
        self._rows: dict[int, np.ndarray] = {}

    def gather_rows(self, origins: np.ndarray, width: int) -> np.ndarray:
        rows = self._rows.get(width)
        if rows is None:  # a view: rows of any width cost nothing to keep
            rows = self._rows[width] = sliding_window_view(self.tokens, width)
        return rows[origins]


class ForeignMeta:
    """The record readers expect (counts, dtype, identity, ranges, padding id, checksums) for
    files tokpack did not write; the checksums are computed on first use, in one pass."""

    def __init__(self, *, schema: str, parts: Sequence[TokenFile], vocabulary: VocabIdentity,
                 ranges: dict[str, Span], pad_id: int | None, dtype: str, **extra: Any) -> None:
        self.schema, self.vocabulary, self.ranges, self.pad_id, self.dtype = schema, vocabulary, ranges, pad_id, dtype
        self.counts: dict[str, int] = {}
        self._parts = parts
        self.n_tokens = int(sum(p.n_tokens for p in parts))
        self.n_docs = int(sum(len(p.starts) for p in parts))
        self.extra = extra

    @cached_property
    def tokens_sha256(self) -> str:
        return self._hashes[0]

    @cached_property
    def starts_sha256(self) -> str:
        return self._hashes[1]

    @cached_property
    def _hashes(self) -> tuple[str, str]:
        return stream_hashes(self._parts)

    def to_json(self) -> str:
        fields = {"schema": self.schema, "n_docs": self.n_docs, "n_tokens": self.n_tokens, "dtype": self.dtype,
                  "vocabulary": self.vocabulary.model_dump(mode="json", by_alias=True), "pad_id": self.pad_id,
                  "ranges": {k: v.model_dump(mode="json") for k, v in self.ranges.items()},
                  "tokens_sha256": self.tokens_sha256, "starts_sha256": self.starts_sha256, **self.extra}
        return json.dumps(fields, indent=2, sort_keys=True)


def check_ids(parts: Sequence[TokenFile], n_vocab: int) -> None:
    """Every id is inside ``[0, n_vocab)``, read in bounded chunks.

    Raises:
        VocabularyMismatch: naming the file and the id.
    """
    for part in parts:
        step = max(1, _CHECK_CHUNK // part.tokens.itemsize)
        for offset in range(0, part.n_tokens, step):
            chunk = part.tokens[offset : offset + step]
            low, high = int(chunk.min()), int(chunk.max())
            if low < 0 or high >= n_vocab:
                raise VocabularyMismatch(f"id {low if low < 0 else high} is outside the vocabulary "
                                         f"(n_vocab {n_vocab})", where=part.path, fix="is it the tokenizer that made them?")


def verified_what(sidecar: Any) -> str:
    """What verifying a foreign source checks, in words, for ``tokpack inspect``."""
    record = getattr(sidecar, "sealed_record", None)
    whole = record is not None and sum(p.documents[1] - p.documents[0] for p in sidecar.parts.values()) == record.n_docs
    stream = "; the ids are the exported pack's stream, as its sealed record hashes it" if whole else ""
    if sidecar is not None and getattr(sidecar, "files_sha256", None):
        return f"every file's SHA-256 matches the export's sidecar; every id is in the vocabulary{stream}"
    if sidecar is not None:
        return "every id is in the vocabulary; no file checksums checked (the sidecar records none)"
    return "every id is in the vocabulary; no checksums checked (these files record none)"


def require_size(path: Path, expected: int, what: str) -> None:
    """Raises IntegrityError unless ``path`` is exactly ``expected`` bytes."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputError("missing", where=path) from None
    if size != expected:
        raise IntegrityError(f"{size:,} bytes, but {what} says {expected:,}", where=path, fix="the file is truncated or not this index's")


__all__ = ["ForeignMeta", "TokenFile", "check_ids", "require_size", "resolve_vocabulary", "verified_what"]
