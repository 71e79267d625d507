"""Where a pack's documents came from: reading ``origins.npy`` against its record, and locating
any span of a document's ids in its input (the bytes of a file or of a record's text, or a
table's row).

A span's bytes are found from the document's origin and the byte length of each id before and
inside the span (from the vocabulary the pack carries): byte-level BPE ids decode to exactly the
bytes they were encoded from, so ``ids[a:b]`` of a document are bytes ``[start + len(ids[:a]),
start + len(ids[:b]))`` of its input.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from tokpack.errors import InputError, IntegrityError
from tokpack.store.format import META_FILE, NPY_HEADER_BYTES, ORIGINS_FILE, Origins
from tokpack.store.reader import Pack
from tokpack.store.source import TokenSource

#: What :meth:`Locator.locate` returns: ``(file, byte_start, byte_end)`` for a file's bytes,
#: ``(file, record, byte_start, byte_end)`` for a record's text, ``(table, row)`` for a table's row.
Place = tuple[Any, ...]


def read_origins(pack: Pack) -> tuple[Origins, np.ndarray] | None:
    """``pack``'s origins record and its ``(n_docs, 3)`` rows (a memory map), checked against
    ``meta.json``; ``None`` for a pack that records none.

    Raises:
        IntegrityError: ``origins.npy`` is missing, of another shape, or not the file the record
            hashes; or a row that is no span of bytes (``0 <= start <= end``) or table row
            (``end == start + 1``), as a forged checksum and seal could make.
    """
    record = pack.meta.origins
    if record is None:
        return None
    path = pack.path / ORIGINS_FILE
    expected = NPY_HEADER_BYTES + 24 * pack.n_docs
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise IntegrityError(f"missing, though {META_FILE} records the documents' origins", where=path,
                             fix="copy the whole pack folder, or rebuild it") from None
    if size != expected:
        raise IntegrityError(f"{size} bytes, expected {expected} (three int64 a document)", where=path)
    try:
        rows = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as error:
        raise IntegrityError(f"unreadable .npy ({error})", where=path) from None
    if rows.dtype != np.dtype("<i8") or rows.shape != (pack.n_docs, 3):
        raise IntegrityError(f"holds {rows.dtype} {rows.shape}, expected int64 ({pack.n_docs}, 3)", where=path)
    digest = hashlib.sha256()
    # A seal has no key: rows rewritten with a recomputed checksum must still be spans (or one row each).
    broken: int | None = None  # the first document whose row is neither
    for first in range(0, len(rows), 1 << 20):  # a million documents at a time: no copy of the whole file
        block = np.ascontiguousarray(rows[first : first + (1 << 20)])
        digest.update(block.tobytes())
        bad = (block[:, 1] < 0) | (block[:, 2] != block[:, 1] + 1 if record.kind == "rows" else block[:, 2] < block[:, 1])
        if broken is None and bad.any():
            broken = first + int(np.argmax(bad))
    if digest.hexdigest() != record.sha256:
        raise IntegrityError(f"SHA-256 differs from {META_FILE}", where=path,
                             fix="the pack's origins were altered; restore them or rebuild the pack")
    units = rows[:, 0]
    if len(rows) and (int(units.min()) < 0 or (record.kind != "records" and int(units.max()) >= len(record.files))):
        raise IntegrityError(f"names a file outside the {len(record.files)} {META_FILE} lists", where=path)
    if broken is not None:
        start, end = (int(v) for v in rows[broken, 1:])
        what = "row" if record.kind == "rows" else "span of bytes"
        raise IntegrityError(f"document {broken} ({start}, {end}) is no {what}", where=path,
                             fix="the pack's origins were altered; restore them or rebuild the pack")
    return record, rows


class Locator:
    """Where the ids of any document of a token source came from (a pack or a sharded dataset
    of packs that record their origins; any other source, or a pack without, gives ``None``)."""

    def __init__(self, source: TokenSource) -> None:
        self.source = source
        shards: list[Pack] = list(getattr(source, "shards", None) or ([source] if isinstance(source, Pack) else []))
        if not all(isinstance(shard, Pack) for shard in shards):  # shards read through a cache (a remote dataset)
            shards = []
        self._origins = [read_origins(shard) for shard in shards]
        self._shards = shards
        self._doc_offsets = np.cumsum([0] + [shard.n_docs for shard in shards])
        self._token_offsets = np.cumsum([0] + [shard.n_tokens for shard in shards])
        self._lengths: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def recorded(self) -> bool:
        """Whether every document's origin is known."""
        return bool(self._shards) and all(found is not None for found in self._origins)

    def locate(self, document: int, start: int, end: int) -> Place | None:
        """Where ids ``[start, end)`` (stream positions, inside document ``document``) came from:
        ``(file, byte_start, byte_end)``, ``(file, record, byte_start, byte_end)`` or ``(table,
        row)`` (see :class:`~tokpack.store.format.Origins`); ``None`` when not recorded."""
        if not self._shards:
            return None
        shard = int(np.searchsorted(self._doc_offsets, document, side="right")) - 1
        found = self._origins[shard] if 0 <= shard < len(self._shards) else None
        if found is None:
            return None
        record, rows = found
        local = document - int(self._doc_offsets[shard])
        unit, first, last = (int(v) for v in rows[local])
        if record.kind == "rows":
            return (record.files[unit], first)
        pack = self._shards[shard]
        offset = int(self._token_offsets[shard])
        doc_start = int(pack.starts[local])
        doc_end = int(pack.starts[local + 1]) if local + 1 < pack.n_docs else pack.n_tokens
        a, b = start - offset, end - offset
        if (a, b) == (doc_start, doc_end):
            low, high = first, last
        else:
            lengths = self._byte_lengths(self.source.read_span(offset + doc_start, end))
            low = first + int(lengths[: a - doc_start].sum())
            high = low + int(lengths[a - doc_start :].sum())
        if record.kind == "records":
            return (record.files[0], unit, low, high)
        return (record.files[unit], low, high)

    def _byte_lengths(self, ids: np.ndarray) -> np.ndarray:
        """The length in bytes of each id's token, from the vocabulary the data carries."""
        if self._lengths is None:
            from tokpack.vocab.loading import load_vocabulary

            try:
                tokenizer = load_vocabulary(Path(self.source.path))
            except InputError as error:
                raise InputError(f"cannot tell where part of a document came from: {error}",
                                 fix="the data carries no vocabulary; prepare it again") from None
            pairs = sorted([(rank, len(token)) for token, rank in tokenizer.ranks.items()]
                           + [(rank, len(name.encode("utf-8"))) for name, rank in tokenizer.special_tokens.items()])
            table = np.array(pairs, dtype=np.int64).reshape(-1, 2)
            self._lengths = (table[:, 0].copy(), table[:, 1].copy())
        ranks, lengths = self._lengths
        return lengths[np.searchsorted(ranks, np.asarray(ids, dtype=np.int64))]


__all__ = ["Locator", "Place", "read_origins"]
