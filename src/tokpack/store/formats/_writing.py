"""What every format's writer shares: the options, the parts to write, the sidecar record of an
export, and outputs that appear whole or not at all (whole documents are read in bounded chunks
by :func:`tokpack.store.source.chunks`; the sidecar's record is :mod:`tokpack.store.sidecar`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokpack import _checks as checks
from tokpack._atomic import write_atomically
from tokpack.errors import InputError
from tokpack.store.dataset import DatasetRecord
from tokpack.store.format import SPLIT_NAMES, DocumentCut, PackMeta, Source, Span
from tokpack.store.sidecar import ExportPart, ExportRecord, file_sha256
from tokpack.store.source import TokenSource, document_ends
from tokpack.store.vocabulary import carried_vocabulary_files

Progress = Callable[[int], None]
"""Called with the number of ids just written (to drive a progress bar)."""


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
    checks.positive_int("rows_per_file", options.rows_per_file, what="a positive number of documents per file",
                        fix="pass rows_per_file=1 or more (default 1048576)")


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
            raise InputError(f"no range {range_name!r} (ranges: {', '.join(ranges) or 'none'})", where=source.path,
                             fix="omit range_name= to export everything")
        return {range_name: ranges[range_name].documents}
    splits = {name: span for name, span in ranges.items() if name in SPLIT_NAMES}
    if split and splits:
        return {name: span.documents for name, span in sorted(splits.items(), key=lambda item: item[1].documents)}
    return {"train" if split else "all": (0, source.n_docs)}


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
        raise InputError(f"{fmt} stores ids as {dtype.name} (at most {limit:,}), the vocabulary "
                         f"has {source.vocabulary.n_vocab:,} ids", where=source.path, fix="use fmt='megatron' or fmt='hf'")


def default_eod(source: TokenSource, eod_id: int | None) -> int:
    """The separator id: ``eod_id`` if given, else the source's padding id (``<|endoftext|>`` for text).

    Raises:
        InputError: neither exists, or it is outside the vocabulary.
    """
    chosen = source.meta.pad_id if eod_id is None else eod_id
    if chosen is None:
        raise InputError("the vocabulary has no end-of-text id to separate documents", where=source.path, fix="pass eod_id=ID")
    if not 0 <= chosen < source.vocabulary.n_vocab:
        raise InputError(f"eod_id={chosen} is outside the vocabulary (n_vocab {source.vocabulary.n_vocab})")
    return int(chosen)


def record_for(source: TokenSource, fmt: str, *, eod_id: int | None, dtype: np.dtype,
               parts: dict[str, ExportPart], root: Path, vocabulary_dir: str = "vocabulary") -> ExportRecord:
    """The sidecar record of an export of ``source``, with the SHA-256 of every part's file
    (``root`` is the folder the parts' file names are relative to); the vocabulary files the
    source carries are written to ``root/vocabulary_dir`` and listed too."""
    vocabulary = carried_vocabulary_files(source)
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
                        counts=dict(getattr(meta, "counts", {})),
                        files_sha256={name: file_sha256(Path(root) / name)
                                      for part in parts.values() for name in part.files}
                        | {f"{vocabulary_dir}/{name}": file_sha256(Path(root) / vocabulary_dir / name)
                           for name in vocabulary},
                        vocabulary_dir=vocabulary_dir if vocabulary else None,
                        sealed_record=meta if isinstance(meta, (PackMeta, DatasetRecord)) else None)


def part_span(source: TokenSource, documents: tuple[int, int], files: list[str]) -> ExportPart:
    """An :class:`ExportPart` for documents ``[d0, d1)``."""
    starts, ends = np.asarray(source.starts), document_ends(source)
    d0, d1 = documents
    if d1 > d0:
        tokens = (int(starts[d0]), int(ends[d1 - 1]))
    else:  # an empty part sits where its range does: before document d0, or at the stream's end
        at = int(starts[d0]) if d0 < source.n_docs else source.n_tokens
        tokens = (at, at)
    return ExportPart(documents=documents, tokens=tokens, files=files)


def replace_into(partial: Path, final: Path) -> None:
    """Rename a finished ``partial`` file onto ``final`` (atomic on one file system)."""
    os.replace(partial, final)


__all__ = ["ExportOptions", "Progress", "check_fits", "check_options", "default_eod", "part_span", "parts_of", "record_for",
           "replace_into", "split_rows", "with_separators"]
