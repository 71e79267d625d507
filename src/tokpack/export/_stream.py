"""What every exporter shares: the parts to write, whole documents read in bounded chunks, the
sidecar record, and outputs that appear whole or not at all."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from tokpack import _checks as checks
from tokpack._atomic import write_atomically
from tokpack._schema import Record, read_record
from tokpack.corpus.manifest import SplitName
from tokpack.errors import InputError
from tokpack.store.format import DocumentCut, Source, Span
from tokpack.store.source import TokenSource
from tokpack.vocab.identity import VocabIdentity

#: The ranges an export writes as its splits.
SPLIT_NAMES: tuple[str, ...] = get_args(SplitName)

#: Ids read per step: enough for fast writes, small enough that memory stays flat.
CHUNK_TOKENS = 8 << 20
#: The sidecar inside a folder export; a Megatron prefix ``OUT`` gets ``OUT.tokpack.json``.
SIDECAR = "tokpack-export.json"
EXPORT_SCHEMA = "tokpack.export.v1"

Progress = Callable[[int], None]
"""Called with the number of ids just written (to drive a progress bar)."""


class ExportPart(Record):
    """One exported part (a named range of the source, or all of it) and its files."""

    documents: tuple[int, int]
    tokens: tuple[int, int]
    files: list[str]


class ExportRecord(Record):
    """The sidecar (``"schema": "tokpack.export.v1"``) written beside every export, so tokpack
    reopens the files knowing their vocabulary, and an import restores the pack exactly.

    Fields:
        format: the registry name (``megatron``, ``nanogpt``, ``litdata``, ``mds``, ``hf``).
        vocabulary, pad_id, source, cut: the exported pack's.
        source_tokens_sha256 / source_starts_sha256 / source_n_docs: the exported stream's checksums and size.
        eod_id: the id appended after every document (``None``: documents written as they are).
        dtype: the element type of the written ids.
        ranges: the source's named ranges (an import of a whole export restores them).
        parts: what was written, by name, as spans of the source.
        files_sha256: SHA-256 of every written file, by its name in ``parts`` (what ``inspect``
            and ``import`` check the files against; empty in exports written before it existed),
            and of the vocabulary files carried (``VOCABULARY_DIR/NAME``).
        vocabulary_dir: the folder, beside the sidecar, holding the source pack's vocabulary
            files (``vocabulary`` in a folder export, ``OUT.vocabulary`` beside a Megatron
            prefix), so the ids decode where they are copied; ``None`` when it carried none.
    """

    schema_: Literal["tokpack.export.v1"] = Field(default="tokpack.export.v1", alias="schema")
    format: str
    vocabulary: VocabIdentity
    pad_id: int | None = None
    source: Source
    cut: DocumentCut
    source_tokens_sha256: str
    source_starts_sha256: str
    source_n_docs: int = Field(ge=0)
    eod_id: int | None = None
    dtype: str
    ranges: dict[str, Span] = Field(default_factory=dict)
    parts: dict[str, ExportPart]
    files_sha256: dict[str, str] = Field(default_factory=dict)
    vocabulary_dir: str | None = Field(default=None, pattern=r"^[^/\\]+$")

    @model_serializer(mode="wrap")
    def _no_vocabulary_dir_field_without_one(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Written only when set, so exports of packs without vocabulary files stay as they were.
        data: dict[str, Any] = handler(self)
        if data.get("vocabulary_dir") is None:
            data.pop("vocabulary_dir", None)
        return data


@dataclass(frozen=True)
class ExportOptions:
    """What the user chose: ``append_eod`` (the end-of-document id after every document;
    nanoGPT always has it), ``eod_id`` (that id, if not the source's padding id), the one range to
    export (``None``: the format's default), and rows (documents) per output file."""

    append_eod: bool = False
    eod_id: int | None = None
    range_name: str | None = None
    rows_per_file: int = 1 << 20


def check_options(options: ExportOptions) -> None:
    """Refuse options no format can honour, before anything is written.

    Raises:
        InputError: ``rows_per_file`` is not a positive integer.
    """
    checks.positive_int("--rows-per-file", options.rows_per_file, what="a positive number of documents per file",
                        fix="pass --rows-per-file 1 or more (default 1048576)")


def split_rows(ids: np.ndarray, lengths: np.ndarray, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(ids, lengths)`` of whole documents cut into pieces of at most ``rows`` documents.

    >>> [(i.tolist(), n.tolist()) for i, n in split_rows(np.array([1, 2, 3, 4]), np.array([2, 1, 1]), 2)]
    [([1, 2, 3], [2, 1]), ([4], [1])]
    """
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    for first in range(0, len(lengths), rows):
        last = min(first + rows, len(lengths))
        yield ids[bounds[first] : bounds[last]], lengths[first:last]


def parts_of(source: TokenSource, range_name: str | None, *, split: bool) -> dict[str, tuple[int, int]]:
    """The document spans to write, by name: the one ``range_name``; else, with ``split``, every
    split range (``train``, ``validation``, ``test``; ``train`` = everything when there are none);
    else everything as ``all``. Other named ranges (a chess dataset's months, which lie inside its
    split) are selections, written only when named.

    Raises:
        InputError: ``range_name`` is not one of the source's ranges.
    """
    ranges: dict[str, Span] = dict(source.meta.ranges)
    if range_name is not None:
        if range_name not in ranges:
            raise InputError(source.path, f"no range {range_name!r} (ranges: {', '.join(ranges) or 'none'})",
                             fix="omit --range to export everything")
        return {range_name: ranges[range_name].documents}
    splits = {name: span for name, span in ranges.items() if name in SPLIT_NAMES}
    if split and splits:
        return {name: span.documents for name, span in sorted(splits.items(), key=lambda item: item[1].documents)}
    return {"train" if split else "all": (0, source.n_docs)}


def document_ends(source: TokenSource) -> np.ndarray:
    """Where each document ends in the stream (the next one's start, or the stream's end)."""
    return np.append(np.asarray(source.starts[1:], dtype=np.int64), np.int64(source.n_tokens))


def read_span(source: TokenSource, start: int, end: int) -> np.ndarray:
    """The ids ``stream[start:end]`` as one array: slices of the parts, never a gather per id."""
    shards = getattr(source, "shards", None)
    offsets = getattr(source, "offsets", None)
    if shards is not None and offsets is not None:
        first = int(np.searchsorted(offsets, start, side="right")) - 1
        pieces = []
        index = first
        reading = getattr(source, "_reading", None)  # a dataset verifies a shard before its first read
        while index < len(shards) and offsets[index] < end:
            lo, hi = max(start, int(offsets[index])), min(end, int(offsets[index + 1]))
            if hi > lo:
                if reading is not None:
                    reading(index)
                pieces.append(np.asarray(shards[index].tokens[lo - offsets[index] : hi - offsets[index]]))
            index += 1
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.asarray(shards[0].tokens[:0]).dtype)
    tokens = getattr(source, "tokens", None)
    if tokens is not None:
        return np.asarray(tokens[start:end])
    return source.take(np.arange(start, end, dtype=np.int64))


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
        yield read_span(source, int(starts[first]), int(ends[last - 1])), lengths
        first = last


def with_separators(ids: np.ndarray, lengths: np.ndarray, eod_id: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` with ``eod_id`` after every document, and the new lengths (unchanged without one).

    >>> with_separators(np.array([1, 2, 3]), np.array([2, 1]), 9)
    (array([1, 2, 9, 3, 9]), array([3, 2]))
    """
    if eod_id is None:
        return ids, lengths
    return np.insert(ids, np.cumsum(lengths), eod_id), lengths + 1


def check_fits(source: TokenSource, dtype: np.dtype, eod_id: int | None, fmt: str) -> None:
    """Refuse a vocabulary (or separator) whose ids ``dtype`` cannot hold.

    Raises:
        InputError: naming the format and its limit.
    """
    limit = int(np.iinfo(dtype).max)
    highest = max(source.vocabulary.n_vocab - 1, eod_id if eod_id is not None else -1)
    if highest > limit:
        raise InputError(source.path, f"{fmt} stores ids as {dtype.name} (at most {limit:,}), the vocabulary "
                         f"has {source.vocabulary.n_vocab:,} ids", fix="use --format megatron or hf")


def default_eod(source: TokenSource, eod_id: int | None) -> int:
    """The separator id: ``eod_id`` if given, else the source's padding id (``<|endoftext|>`` for text).

    Raises:
        InputError: neither exists, or it is outside the vocabulary.
    """
    chosen = source.meta.pad_id if eod_id is None else eod_id
    if chosen is None:
        raise InputError(source.path, "the vocabulary has no end-of-text id to separate documents", fix="pass --eod-id")
    if not 0 <= chosen < source.vocabulary.n_vocab:
        raise InputError(None, f"--eod-id {chosen} is outside the vocabulary (n_vocab {source.vocabulary.n_vocab})")
    return int(chosen)


def carried_vocabulary(source: TokenSource) -> dict[str, bytes]:
    """The vocabulary files ``source`` carries (a pack's ``vocabulary/``, a dataset's first
    shard's, or a tokpack export's own), checked against their record; empty when it has none."""
    from tokpack.store.dataset import ShardedDataset
    from tokpack.store.reader import Pack

    pack = source if isinstance(source, Pack) else source.shards[0] if isinstance(source, ShardedDataset) and source.shards else None
    if isinstance(pack, Pack):
        if pack.vocabulary_dir is None:
            return {}
        pack.verify_vocabulary_files()
        return {Path(name).name: (pack.path / name).read_bytes() for name in sorted(pack.meta.vocabulary_files)}
    sidecar = getattr(source, "sidecar", None)
    folder = getattr(sidecar, "vocabulary_dir", None)
    if sidecar is None or folder is None:
        return {}
    where = Path(source.path)
    root = getattr(source, "folder", None) or (where if where.is_dir() else where.parent)
    from tokpack.store.foreign import check_files

    names = [name for name in sidecar.files_sha256 if name.startswith(f"{folder}/")]
    check_files(sidecar, Path(root), names)
    return {name.split("/", 1)[1]: (Path(root) / name).read_bytes() for name in sorted(names)}


def record_for(source: TokenSource, fmt: str, *, eod_id: int | None, dtype: np.dtype,
               parts: dict[str, ExportPart], root: Path, vocabulary_dir: str = "vocabulary") -> ExportRecord:
    """The sidecar record of an export of ``source``, with the SHA-256 of every part's file
    (``root`` is the folder the parts' file names are relative to); the vocabulary files the
    source carries are written to ``root/vocabulary_dir`` and listed too."""
    from tokpack.store.foreign import file_sha256

    vocabulary = carried_vocabulary(source)
    if vocabulary:
        (Path(root) / vocabulary_dir).mkdir()
        for name, data in vocabulary.items():
            write_atomically(Path(root) / vocabulary_dir / name, data)
    meta = source.meta
    fallback_source = Source(name=Path(source.path).name or "stream", sha256=meta.tokens_sha256, n_bytes=0)
    return ExportRecord(format=fmt, vocabulary=source.vocabulary, pad_id=meta.pad_id,
                        source=getattr(meta, "source", None) or fallback_source,
                        cut=getattr(meta, "cut", None) or DocumentCut(rule="imported"),
                        source_tokens_sha256=meta.tokens_sha256, source_starts_sha256=meta.starts_sha256,
                        source_n_docs=source.n_docs,
                        eod_id=eod_id, dtype=dtype.name, ranges=dict(meta.ranges), parts=parts,
                        files_sha256={name: file_sha256(Path(root) / name)
                                      for part in parts.values() for name in part.files}
                        | {f"{vocabulary_dir}/{name}": file_sha256(Path(root) / vocabulary_dir / name)
                           for name in vocabulary},
                        vocabulary_dir=vocabulary_dir if vocabulary else None)


def part_span(source: TokenSource, documents: tuple[int, int], files: list[str]) -> ExportPart:
    """An :class:`ExportPart` for documents ``[d0, d1)``."""
    starts, ends = np.asarray(source.starts), document_ends(source)
    d0, d1 = documents
    tokens = (int(starts[d0]), int(ends[d1 - 1])) if d1 > d0 else (0, 0)
    return ExportPart(documents=documents, tokens=tokens, files=files)


def write_sidecar(record: ExportRecord, path: Path) -> Path:
    """Write the sidecar atomically."""
    return write_atomically(path, record.to_json())


def read_sidecar(path: Path) -> ExportRecord | None:
    """The sidecar at ``path``, or ``None`` when there is none."""
    return read_record(ExportRecord, path) if Path(path).exists() else None


def replace_into(partial: Path, final: Path) -> None:
    """Rename a finished ``partial`` file onto ``final`` (atomic on one file system)."""
    os.replace(partial, final)


__all__ = ["CHUNK_TOKENS", "SIDECAR", "ExportOptions", "check_options", "split_rows", "ExportPart", "ExportRecord", "Progress", "chunks",
           "parts_of", "read_sidecar", "read_span", "record_for", "with_separators", "write_sidecar"]
