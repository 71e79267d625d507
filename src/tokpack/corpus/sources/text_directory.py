"""Document sources: the input formats a corpus can come in, each read as numbered units.

A unit is the piece a source is split by when packing runs in shards: a document of a text
file (cut by :mod:`tokpack.corpus.documents`), a document of one file of a directory, a line of
JSON Lines, a row of parquet. Each unit yields one or more documents (a record longer than
``document_bytes`` is cut by the same rule), in a fixed order, so shard ``r`` of ``W`` (units
``[r*U/W, (r+1)*U/W)``) is the same whoever computes it.
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import json
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from tokpack._atomic import write_atomically
from tokpack._compressed import COMPRESSED_SUFFIXES, binary_kind, file_compression
from tokpack._files import FileBytes, Fingerprint, changed, fingerprint, open_bytes, regular_file
from tokpack._schema import Record, read_record
from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import (
    DEFAULT_DOCUMENT_BYTES,
    MANIFEST_FILE,
    MANIFEST_SUFFIX,
    CorpusManifest,
    DocumentSplit,
    HeldOutShares,
    Source,
    check_split,
    corpus_manifest,
    file_sha256,
    find_split,
    held_out_ranges,
    manifest_beside,
    recorded_cut,
    split_manifest,
)
from tokpack.errors import InputError, SpecialTokenInText, located

Format = Literal["text", "directory", "jsonl", "parquet"]
OnError = Literal["raise", "skip"]

#: The longest piece a vocabulary sample takes from one place (see :meth:`DocumentSource.training_sample`).
SAMPLE_PIECE_BYTES = 1 << 12


class InputFile(Record):
    """One file a source reads, as a sharded job pins it (see :meth:`DocumentSource.pins`): its
    path (inside a corpus folder, relative to it; else the file's own path), SHA-256 and size
    (``sha256`` ``None``: a file skipped as unreadable)."""

    path: str
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    n_bytes: int = Field(ge=0)


class Pins(Record):
    """Everything a source's documents depend on besides the options: every input file, and the
    manifest its ranges were read from (``None``: none applied, all of it is training)."""

    inputs: list[InputFile]
    manifest: InputFile | None = None


@dataclass(frozen=True)
class Piece:
    """One document to encode: its range name (``train``, …), its text, its byte length, and
    where it came from: ``(unit, start, end)`` as the source's :attr:`DocumentSource.origin_kind`
    reads it (:class:`tokpack.store.format.Origins`)."""

    range_name: str
    text: str
    n_bytes: int
    origin: tuple[int, int, int]


class DocumentSource:
    """Base of every format: a name, a fingerprint, ``n_units`` and the documents of a unit span."""

    format: Format
    text_field: str | None = None  # the field or column holding the text, for record formats
    takes_text_field: ClassVar[bool] = False  # whether the constructor takes ``text_field``
    #: how a piece's origin is read: a file's bytes, or the bytes of a record's text
    origin_kind: ClassVar[Literal["bytes", "records"]] = "records"

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", separator: str | None = None) -> None:
        self.path = Path(path)
        self.document_bytes = document_bytes
        self.separator = separator  # the text that ends a document and belongs to none, if any
        self.on_error = on_error
        self.skipped = 0  # files or records skipped for bad input, when on_error == "skip"
        self.problems: list[str] = []  # what was skipped and why (the first few)
        self._split: list[tuple[str, int, int]] | None = None  # the ranges a document split made, if any
        self._shares = (0.0, 0.0)  # its validation and test shares
        # Taken before anything is hashed, compared again before a pack is published: the bytes
        # encoded must be the bytes the record's hash names.
        self.fingerprint: tuple[Fingerprint, ...] = fingerprint(self.input_files())

    def input_files(self) -> list[Path]:
        """Every file whose bytes this source reads."""
        return [self.path]

    def origin_files(self) -> list[str]:
        """The files a piece's origin names by number, by name (not path: packs move)."""
        return [self.path.name]

    def check_unchanged(self) -> None:
        """Refuse to go on when an input file changed since this source was opened.

        Raises:
            InputError: naming the file that changed (written, replaced, truncated or removed).
        """
        if (old := changed(self.fingerprint)) is not None:
            raise InputError("changed while it was being read (size, time or inode differ); nothing was "
                             "published", where=old.path, fix="rerun once the file no longer changes")

    @cached_property
    def record(self) -> Source:
        """The pack's ``source`` record: name, SHA-256 of the input, its size in bytes (hashed
        once, on first use)."""
        name = self.path.name + (f"#{self.text_field}" if self.text_field else "")
        return Source(name=name, sha256=file_sha256(self.path), n_bytes=self.path.stat().st_size)

    def pins(self) -> Pins:
        """Every file this source's documents come from, hashed (see :class:`Pins`): what a
        sharded job records when it starts and each of its tasks compares before it reads."""
        return Pins(inputs=[InputFile(path=os.path.abspath(self.path), sha256=self.record.sha256,
                                      n_bytes=self.record.n_bytes)])

    def linked_folders(self) -> dict[Path, Path]:
        """Each link to a folder whose files this source reads, and the real folder it leads to
        (a folder corpus's linked subfolders; none for a file)."""
        return {}

    def close(self) -> None:
        """Release open files and maps (a source is also a context manager)."""

    def __enter__(self) -> DocumentSource:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

    @property
    def n_units(self) -> int:
        raise NotImplementedError

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        """Documents of units ``[first, last)`` in order (all of them by default)."""
        raise NotImplementedError

    def unit_ranges(self) -> list[tuple[str, int, int]]:
        """The named ranges as ``(name, first unit, last unit)`` in order (all ``train`` but for a
        corpus with a manifest: a text file's byte ranges, or the documents another format's
        split holds out, which come after the training ones)."""
        return list(self._split) if self._split is not None else [("train", 0, self.n_units)]

    def split_units(self) -> int:
        """How many documents a split of this corpus chooses among (files, lines or rows; see
        :class:`~tokpack.corpus.manifest.DocumentSplit`)."""
        return self.n_units

    def _held_out(self, manifest: Path | None) -> np.ndarray | None:
        """The range of each of :meth:`split_units` (0 train, 1 validation, 2 test) by the split
        in ``manifest`` (or the one beside the corpus), checked against the corpus; ``None``
        without one. The caller orders its units by :meth:`_ranges_of`."""
        found = find_split(self.path, manifest)
        if found is None:
            return None
        path, split = found
        check_split(split, path, name=self.path.name, format=self.format, sha256=self.record.sha256,
                    units=self.split_units())
        self._shares = (split.made_by.validation, split.made_by.test)
        return split.ranges()

    def _ranges_of(self, kinds: np.ndarray) -> np.ndarray:
        """The order that puts units of ``kinds`` (each unit's range, 0 train, 1 validation, 2
        test) by range, keeping their order within one; the named ranges follow from it."""
        counts = np.bincount(kinds, minlength=3).tolist()
        starts = np.concatenate(([0], np.cumsum(counts))).tolist()
        shares = (1.0, *self._shares)
        self._split = [(name, starts[k], starts[k + 1]) for k, name in enumerate(("train", "validation", "test")) if shares[k]]
        return np.argsort(kinds, kind="stable")

    def range_bytes(self, name: str) -> tuple[int, int] | None:
        """The byte span of range ``name`` in the input, where that means something (a text file)."""
        return None

    def spelled(self, tokens: list[str]) -> dict[str, tuple[int, str]]:
        """How often the text spells each of ``tokens`` (special tokens, say), and where it does
        first (a place as errors name one); a token never spelled is left out. Read in one pass
        over every file, with flat memory."""
        found: dict[str, tuple[int, str]] = {}
        for piece in self.pieces():
            for token in tokens:
                if (count := piece.text.count(token)) and token not in found:
                    found[token] = (count, f"{self.path} ({piece.range_name} document at character {piece.text.find(token)})")
                elif count:
                    found[token] = (found[token][0] + count, found[token][1])
        return found

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        """The size in bytes of each unit of ``[first, last)`` (an estimate for record formats),
        by which a vocabulary sample is spread; equal weights unless a format knows better."""
        return np.ones(max(last - first, 0), np.int64)

    def training_sample(self, n_bytes: int, *, piece_bytes: int = SAMPLE_PIECE_BYTES) -> TrainingSample:
        """About ``n_bytes`` of training text for a vocabulary trainer, never validation or test
        text; the same input always gives the same sample. Iterate it once; it then knows what it gave.

        The whole training range when it fits. Else the range is read as pieces of at most
        ``piece_bytes`` (every unit cut at multiples of it: a long document is many pieces, a short
        one is one) and pieces spread evenly over the range's bytes are taken
        (:func:`spread_evenly`): every stretch of the range is as likely to be sampled whatever
        document holds it, so neither the order of the input nor its longest documents decide what
        the vocabulary sees. A piece that starts or ends inside a document is cut back to whole
        lines (see :meth:`unit_text`).
        """
        spans = [(first, last) for name, first, last in self.unit_ranges() if name == "train"]
        sizes = np.concatenate([self.unit_bytes(first, last) for first, last in spans]) if spans else np.zeros(0, np.int64)
        units = np.concatenate([np.arange(first, last, dtype=np.int64) for first, last in spans]) if spans else sizes
        range_bytes = int(sizes.sum())
        if range_bytes <= n_bytes:
            return TrainingSample(self, units, None, n_bytes, range_bytes=range_bytes)
        counts = -(-sizes // piece_bytes)  # pieces per unit (none for an empty one)
        unit_of = np.repeat(units, counts)
        index = np.arange(len(unit_of)) - np.repeat(np.cumsum(counts) - counts, counts)  # the piece's number in its unit
        starts = index * piece_bytes
        stops = np.minimum(starts + piece_bytes, np.repeat(sizes, counts))
        chosen = spread_evenly(stops - starts, n_bytes)
        return TrainingSample(self, unit_of[chosen], np.column_stack([starts[chosen], stops[chosen]]), n_bytes,
                              range_bytes=range_bytes, piece_bytes=piece_bytes)

    def unit_text(self, unit: int, start: int, stop: int) -> str:
        """The text of bytes ``[start, stop)`` of ``unit`` (offsets within it, as :meth:`unit_bytes`
        counts its size; scaled to the text where that size is an estimate), cut back to whole
        lines where the span begins or ends inside the unit (to whole characters in a line longer
        than the span). Every document of the unit, joined, is its text."""
        text = "".join(piece.text for piece in self.pieces(unit, unit + 1))
        return _span_of(text.encode("utf-8"), start, stop, int(self.unit_bytes(unit, unit + 1)[0]))

    def _skip(self, problem: str) -> None:
        self.skipped += 1
        if len(self.problems) < 5:
            self.problems.append(problem)

    @property
    def separator_bytes(self) -> bytes | None:
        """The separator as UTF-8, as :func:`cut_documents` takes it."""
        return self.separator.encode("utf-8") if self.separator else None

    def _cut(self, data: bytes | FileBytes, start: int, end: int, where: str, range_name: str = "train", *,
             unit: int) -> Iterator[Piece]:
        for begin, finish in cut_documents(data, start, end, self.document_bytes, self.separator_bytes):
            yield Piece(range_name, _decode(data, begin, finish, where, self._utf8_fix), finish - begin,
                        (unit, begin, finish))

    #: What to say after ``invalid UTF-8`` in this format (a text file cannot be skipped in part).
    _utf8_fix = "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or leave it out with on_error='skip'"

    def _cut_text(self, text: str, where: str, *, record: int) -> Iterator[Piece]:
        """A record's text as documents: whole when it fits (no re-decoding), else cut by the rule."""
        data = text.encode("utf-8")
        if len(data) <= self.document_bytes and not (self.separator and self.separator in text):
            yield Piece("train", text, len(data), (record, 0, len(data)))
        else:
            yield from self._cut(data, 0, len(data), where, unit=record)


class TrainingSample:
    """The text a vocabulary is trained on (see :meth:`DocumentSource.training_sample`): every
    document of ``units`` (``spans`` ``None``), or the byte span ``spans[i]`` of unit ``units[i]``.
    An iterable of texts (pieces that follow each other in a document come as one text) that counts
    what it gave (``n_documents``, ``n_pieces``, ``n_bytes``) once iterated."""

    def __init__(self, source: DocumentSource, units: np.ndarray, spans: np.ndarray | None, limit_bytes: int, *,
                 range_bytes: int, piece_bytes: int = SAMPLE_PIECE_BYTES) -> None:
        self.source, self.units, self.spans, self.limit_bytes = source, units, spans, limit_bytes
        self.piece_bytes = piece_bytes
        self.range_bytes = range_bytes  # bytes of the whole training range
        self.n_documents = self.n_pieces = self.n_bytes = 0

    def __iter__(self) -> Iterator[str]:
        self.n_documents = self.n_pieces = self.n_bytes = 0
        for text, n_bytes, new_document, pieces in self._texts():
            left = self.limit_bytes - self.n_bytes
            if left <= 0:
                return
            if n_bytes > left:  # only when one document is larger than the whole sample
                text = text.encode("utf-8")[:left].decode("utf-8", errors="ignore")
            self.n_documents += new_document
            self.n_pieces += pieces
            self.n_bytes += min(n_bytes, left)
            yield text

    def _texts(self) -> Iterator[tuple[str, int, bool, int]]:
        """``(text, its bytes, whether it starts another document, the pieces it joins)`` in input order."""
        if self.spans is None:
            # Consecutive chosen units are read as one run, so a source reads each stretch once.
            runs = np.split(self.units, np.flatnonzero(np.diff(self.units) != 1) + 1) if len(self.units) else []
            for run in runs:
                for piece in self.source.pieces(int(run[0]), int(run[-1]) + 1):
                    yield piece.text, piece.n_bytes, True, 1
            return
        # Pieces that follow each other in one unit are read as one span.
        joined = np.flatnonzero((np.diff(self.units) != 0) | (self.spans[1:, 0] != self.spans[:-1, 1])) + 1
        firsts, lasts = np.concatenate(([0], joined)), np.concatenate((joined, [len(self.units)])) - 1
        previous = -1
        for first, last in zip(firsts.tolist(), lasts.tolist()):
            unit = int(self.units[first])
            text = self.source.unit_text(unit, int(self.spans[first, 0]), int(self.spans[last, 1]))
            if text:
                yield text, len(text.encode("utf-8")), unit != previous, last - first + 1
                previous = unit

    def describe(self) -> str:
        """One line for the user: what was sampled, and how."""
        return describe_sample(self.n_bytes, self.range_bytes, self.n_documents,
                               None if self.spans is None else self.n_pieces, self.piece_bytes,
                               held_out=[name for name, _, _ in self.source.unit_ranges() if name != "train"])


def describe_sample(n_bytes: int, range_bytes: int, n_documents: int, n_pieces: int | None = None,
                    piece_bytes: int = SAMPLE_PIECE_BYTES, held_out: Sequence[str] = ()) -> str:
    """What a vocabulary was trained on, in one line: the whole training range, or pieces of it;
    ``held_out`` names the ranges it never saw.

    >>> describe_sample(10_000_000, 18_500_000, 412, 2_441)
    'trained on 10.0 of 18.5 MB (54%): 2,441 pieces of up to 4 KiB from 412 documents, spread evenly over the range'
    >>> describe_sample(300_000, 300_000, 34, held_out=["validation"])
    'trained on all 0.3 MB of the training range, 34 documents (validation held out)'
    >>> describe_sample(300, 300, 1)
    'trained on all 0.0 MB, 1 document'
    """
    plural = "s" if n_documents != 1 else ""
    kept = f" ({' and '.join(held_out)} held out)" if held_out else ""
    if n_pieces is None:
        return f"trained on all {range_bytes / 1e6:.1f} MB{' of the training range' if held_out else ''}, {n_documents:,} document{plural}{kept}"
    return (f"trained on {n_bytes / 1e6:.1f} of {range_bytes / 1e6:.1f} MB ({n_bytes / max(range_bytes, 1):.0%}): "
            f"{n_pieces:,} piece{'s' if n_pieces != 1 else ''} of up to {piece_bytes >> 10} KiB from "
            f"{n_documents:,} document{plural}, spread evenly over the {'training ' if held_out else ''}range{kept}")


def _span_of(data: bytes, start: int, stop: int, size: int) -> str:
    """Bytes ``[start, stop)`` of a unit's text ``data`` whose size was estimated as ``size``
    (scaled to the text when the estimate is off), cut back as :func:`_line_span` says.

    >>> _span_of(b"ab\\ncd\\nef\\n", 0, 4, 9), _span_of(b"ab\\ncd\\nef\\n", 2, 4, 4)
    ('ab\\n', 'ef\\n')
    """
    if size != len(data):
        start, stop = start * len(data) // max(size, 1), (len(data) if stop >= size else stop * len(data) // max(size, 1))
    low, high = _line_span(data[start:stop], head=start == 0, tail=stop >= len(data))
    return data[start + low : start + high].decode("utf-8")


def _line_span(data: bytes, *, head: bool, tail: bool) -> tuple[int, int]:
    """The part of ``data`` (a span of a document) that holds whole lines: from its start if
    ``head`` (the document's start) else past its first newline, to its end if ``tail`` else past
    its last newline; a span with no such line is cut at whole characters instead (its last
    character left out unless ``tail``: it may run on past the span).

    >>> _line_span(b"ab\\ncd\\nef", head=False, tail=False), _line_span(b"ab\\ncd", head=True, tail=True)
    ((3, 6), (0, 5))
    >>> _line_span("żżż".encode()[1:5], head=False, tail=False)  # no newline: whole characters
    (1, 3)
    """
    first, last = data.find(b"\n"), data.rfind(b"\n")
    low = 0 if head else first + 1 if first >= 0 else -1
    high = len(data) if tail else last + 1 if last >= 0 else -1
    if low >= 0 and high > low:
        return low, high
    low = 0
    while not head and low < len(data) and data[low] & 0xC0 == 0x80:  # past a character begun before the span
        low += 1
    high = len(data) if tail else max(len(data) - 1, low)
    while not tail and high > low and data[high] & 0xC0 == 0x80:  # back to where the last character starts
        high -= 1
    return low, high


def spread_evenly(sizes: np.ndarray, budget: int) -> np.ndarray:
    """Indices of units (of the given byte ``sizes``) spread evenly over their total bytes,
    together at most ``budget`` bytes (all of them when they fit; the unit at the middle when
    not even one fits, for the caller to trim). Deterministic and vectorized: ``k`` points evenly
    spaced over the bytes pick the units they fall in, the largest ``k`` that fits is searched.

    >>> spread_evenly(np.array([10] * 10), 30).tolist()
    [1, 5, 8]
    >>> spread_evenly(np.array([10] * 10), 1000).tolist() == list(range(10))
    True
    >>> spread_evenly(np.array([5, 100, 5]), 10).tolist()
    [1]
    """
    total = int(sizes.sum())
    if total <= budget:
        return np.arange(len(sizes))
    ends = np.cumsum(sizes)

    def picks(k: int) -> np.ndarray:
        points = (np.arange(k) + 0.5) * (total / k)
        found = np.searchsorted(ends, points, side="right")  # ascending: repeats sit together
        return found[np.concatenate(([True], found[1:] != found[:-1]))] if len(found) else found

    low, high = 1, len(sizes)  # the largest k whose picks fit the budget
    while low < high:
        middle = (low + high + 1) // 2
        if int(sizes[picks(middle)].sum()) <= budget:
            low = middle
        else:
            high = middle - 1
    return picks(low)


class TextFile(DocumentSource):
    """One UTF-8 text file, split by its manifest (see :func:`tokpack.corpus.manifest.find_manifest`;
    all training without one)."""

    format: Format = "text"
    origin_kind: ClassVar[Literal["bytes", "records"]] = "bytes"
    _utf8_fix = ("convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8); on_error='skip' skips whole files or records, "
                 "not part of one file")

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", separator: str | None = None,
                 manifest: Path | None = None) -> None:
        self.manifest_path = None if manifest is None else Path(manifest)  # given, else found beside the file
        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self._data = open_bytes(self.path)  # a compressed file's decompressed text
        self.sha256 = self._data.sha256()
        self.manifest: CorpusManifest
        self.manifest, self.manifest_found = corpus_manifest(self.path, self.sha256, manifest=self.manifest_path,
                                                             separator=separator, document_bytes=document_bytes,
                                                             data=self._data)
        # Document bounds as one int64 array (two per document), not Python tuples: flat memory.
        spans: list[np.ndarray] = []
        self._unit_ranges: list[tuple[str, int, int]] = []
        for name, start, stop in self.manifest.ordered_ranges():
            spans.append(_bounds(cut_documents(self._data, start, stop, document_bytes, self.separator_bytes)))
            first = self._unit_ranges[-1][2] if self._unit_ranges else 0
            self._unit_ranges.append((name, first, first + len(spans[-1])))
        self._bounds = np.concatenate(spans) if spans else np.zeros((0, 2), np.int64)

    @cached_property
    def record(self) -> Source:
        return Source(name=self.path.name, sha256=self.sha256, n_bytes=self.manifest.n_bytes)

    def pins(self) -> Pins:
        found = self.manifest_found
        manifest = None if found is None else InputFile(path=os.path.abspath(found), sha256=file_sha256(found),
                                                        n_bytes=found.stat().st_size)
        return Pins(inputs=[InputFile(path=os.path.abspath(self.path), sha256=self.sha256, n_bytes=self.manifest.n_bytes)],
                    manifest=manifest)

    def input_files(self) -> list[Path]:
        # Every manifest that could apply (taken before the file is hashed, which decides between
        # them): one that changes meanwhile must stop the run like the corpus itself.
        candidates = [self.manifest_path] if self.manifest_path is not None else [manifest_beside(self.path),
                                                                                  self.path.parent / MANIFEST_FILE]
        return [self.path] + [path for path in candidates if path.exists()]

    def close(self) -> None:
        self._data.close()

    @property
    def n_units(self) -> int:
        return len(self._bounds)

    def unit_ranges(self) -> list[tuple[str, int, int]]:
        return list(self._unit_ranges)

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        bounds = self._bounds[first:last]
        return bounds[:, 1] - bounds[:, 0]

    def range_bytes(self, name: str) -> tuple[int, int] | None:
        span = self.manifest.ranges.get(name)  # type: ignore[call-overload]
        return None if span is None else (int(span[0]), int(span[1]))

    def spelled(self, tokens: list[str]) -> dict[str, tuple[int, str]]:
        return _spelled_in([(self._data, self._data.where)], tokens)

    def unit_text(self, unit: int, start: int, stop: int) -> str:
        begin, end = self._bounds[unit].tolist()
        low, high = begin + start, min(begin + stop, end)  # only the span is read
        first, last = _line_span(self._data[low:high], head=low == begin, tail=high == end)
        return _decode(self._data, low + first, low + last, self._data.where, self._utf8_fix)

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        last = self.n_units if last is None else last
        for name, low, high in self._unit_ranges:
            for begin, end in self._bounds[max(first, low) : min(last, high)].tolist():
                yield Piece(name, _decode(self._data, begin, end, self._data.where, self._utf8_fix), end - begin,
                            (0, begin, end))


def _read_in_place(inside: Path, kind: str) -> bool:
    """Whether a folder's walk reads the entry at ``inside`` (a path relative to the folder) in its
    own place: no part of it hidden, and a file no manifest.

    >>> _read_in_place(Path("news/2024"), "folder"), _read_in_place(Path(".git/objects"), "folder")
    (True, False)
    """
    return (not any(part.startswith(".") for part in inside.parts)
            and not (kind == "file" and inside.name.endswith(MANIFEST_SUFFIX)))


def _link_to(entry: Path, root: Path) -> Path:
    """The link nearest ``entry`` on its way from ``root`` (``entry`` itself if it is one): the
    link a user removes so that the walk no longer reaches ``entry`` that way."""
    for way in (entry, *entry.parents):
        if way == root or root not in way.parents:
            break
        if os.path.islink(way):
            return way
    return entry


def manifest_outside(folder: Path, manifest: Path | None) -> None:
    """Refuse a manifest inside the corpus folder it splits: it would be read as one of the
    folder's files, so writing it would change the folder it records.

    Raises:
        InputError: naming the manifest, the folder and the fix.
    """
    if manifest is None:
        return
    real = Path(os.path.realpath(manifest))
    if real.is_relative_to(os.path.realpath(folder)):
        raise InputError(f"is inside the corpus folder {folder}, so it would be read as one of its files (and the "
                         "folder would change by being split)", where=manifest,
                         fix="give manifest=PATH outside the folder")


class TextDirectory(DocumentSource):
    """Every non-hidden file under a folder, in sorted path order, but for text files' manifests
    (``*.manifest.json``); documents never span files.

    Links are followed: a linked file is read, a linked subfolder is read as if it were there
    (its files named by the link's path). Every file is read once: a link into the folder to
    what is read in its own place, or a second way to a folder (or linked file) read already (a
    loop, two links to one folder) stops the run, or with ``on_error="skip"`` is skipped and
    counted. So is a subfolder or file that cannot be read, or an entry that is not a regular
    file (a FIFO, a device): never dropped silently.
    """

    format: Format = "directory"
    origin_kind: ClassVar[Literal["bytes", "records"]] = "bytes"

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", separator: str | None = None,
                 manifest: Path | None = None) -> None:
        self.path, self.on_error = Path(path), on_error
        manifest_outside(self.path, manifest)
        # A placeholder unit (begin == end == 0) stands for each unreadable entry, so that the pass
        # (or the shard) that reaches it counts the skip, once.
        self.files, self._unreadable = self._listing()
        self._text_bytes: dict[int, int] = {}
        self._sampling: tuple[int, FileBytes | None] | None = None  # the file a sample reads now
        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        units = []  # per file: rows of (file index, begin, end), as int64 arrays
        for index, file in enumerate(self.files):
            if index in self._unreadable:
                units.append(np.array([[index, 0, 0]], np.int64))
                continue
            data = self._open(file)
            if data is None:
                units.append(np.array([[index, 0, 0]], np.int64))
                continue
            bounds = _bounds(cut_documents(data, 0, len(data), document_bytes, self.separator_bytes))
            units.append(np.column_stack([np.full(len(bounds), index, np.int64), bounds]))
            self._text_bytes[index] = len(data)  # a compressed file's: its text's
            data.close()
        self._units = np.concatenate(units) if units else np.zeros((0, 3), np.int64)
        if (held_out := self._held_out(manifest)) is not None:  # whole files, after the training ones
            self._units = self._units[self._ranges_of(held_out[self._units[:, 0]])]

    def split_units(self) -> int:
        return len(self.files)

    def spelled(self, tokens: list[str]) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        for index, file in enumerate(self.files):
            if index in self._unreadable or (data := self._open(file)) is None:
                continue
            try:
                for token, (count, first) in _spelled_in([(data, data.where)], tokens).items():
                    found[token] = (found[token][0] + count, found[token][1]) if token in found else (count, first)
            finally:
                data.close()
        return found

    def _listing(self) -> tuple[list[Path], dict[int, str]]:
        found: list[tuple[Path, str | None]] = []

        def unreadable(error: OSError) -> None:
            where = Path(error.filename) if error.filename else self.path
            problem = f"cannot read folder ({error.strerror or error})"
            if self.on_error != "skip":
                raise InputError(problem, where=where, fix="fix its permissions, or leave it out with on_error='skip'")
            found.append((where, problem))

        def twice(entry: Path, status: os.stat_result, kind: str, through_link: bool) -> bool:
            """Whether ``entry`` would be read a second time: a link into the corpus to what the walk
            reads in its own place, or a folder (a file reached through a link) seen already. Such
            an entry stops the run, or is skipped and counted."""
            problem, is_link = None, os.path.islink(entry)
            if is_link:
                target = Path(os.path.realpath(entry))
                inside = target.relative_to(real_root) if target.is_relative_to(real_root) else None
                if inside is not None and _read_in_place(inside, kind):
                    problem = f"a link to {self.path / inside}, which is read in its own place"
            if problem is None and (kind == "folder" or through_link or is_link):
                first = seen.setdefault((kind, status.st_dev, status.st_ino), entry)
                if first != entry:
                    problem = f"the same {kind} as {first}, read already (through a link)"
            elif kind == "file":
                seen.setdefault((kind, status.st_dev, status.st_ino), entry)
            if problem is None:
                return False
            problem += f" (its {'files' if kind == 'folder' else 'documents'} would be read twice)"
            if self.on_error != "skip":
                # an entry that is no link itself is reached through a linked folder: name the links
                ways = "the link (or the loop)" if is_link else \
                    f"one of the two links to it ({_link_to(first, self.path)} or {_link_to(entry, self.path)})"
                raise InputError(problem, where=entry, fix=f"remove {ways}, or leave it out with "
                                                           "on_error='skip'")
            found.append((entry, problem))
            return True

        # Every folder walked and every file read, by device and inode, so that a link that leads
        # to one again (a loop, a second link) is seen; links into the corpus are the duplicates of
        # what they lead to whatever their names, so which one is read does not depend on the order.
        seen: dict[tuple[str, int, int], Path] = {}
        self._links: dict[Path, Path] = {}
        real_root = Path(os.path.realpath(self.path))
        linked: set[str] = set()  # the folders walked that a link leads to (or into)
        try:
            root = os.stat(self.path)
            seen[("folder", root.st_dev, root.st_ino)] = self.path
        except OSError as error:
            unreadable(error)
        for folder, subfolders, names in os.walk(self.path, onerror=unreadable, followlinks=True):
            kept = []
            for name in sorted(subfolders):
                if name.startswith("."):
                    continue
                subfolder = Path(folder) / name
                try:
                    status = os.stat(subfolder)
                except OSError:  # a dangling link or no permission: os.walk reports it when it lists it
                    kept.append(name)
                    continue
                if not twice(subfolder, status, "folder", folder in linked):
                    kept.append(name)
                    if folder in linked or os.path.islink(subfolder):
                        linked.add(os.path.join(folder, name))  # as os.walk names it
                    if os.path.islink(subfolder):
                        self._links[subfolder] = Path(os.path.realpath(subfolder))
            subfolders[:] = kept
            for name in sorted(names):
                if name.startswith(".") or name.endswith(MANIFEST_SUFFIX):  # a file's split is not text of the corpus
                    continue
                file = Path(folder) / name
                try:
                    regular_file(file)
                except InputError as error:
                    if self.on_error != "skip":
                        raise
                    found.append((file, str(error).split(": ", 1)[1]))
                    continue
                if not twice(file, os.stat(file), "file", folder in linked):
                    found.append((file, None))
        found.sort(key=lambda item: item[0])
        files = [file for file, _ in found]
        return files, {index: f"{file}: {problem}" for index, (file, problem) in enumerate(found) if problem}

    def linked_folders(self) -> dict[Path, Path]:
        return dict(self._links)

    def _open(self, file: Path) -> FileBytes | None:
        """The file's bytes, or ``None`` (skipped and counted) when it cannot be read in skip mode."""
        try:
            return open_bytes(file)  # a compressed file's decompressed text
        except InputError:
            if self.on_error != "skip":
                raise
            self._unreadable[self.files.index(file)] = f"{file}: cannot be read"
            return None
        except OSError as error:
            if self.on_error != "skip":
                raise InputError(f"cannot read ({error.strerror or error})", where=file,
                                 fix="fix its permissions, or leave it out with on_error='skip'") from None
            self._unreadable[self.files.index(file)] = f"{file}: cannot read ({error.strerror or error})"
            return None

    def input_files(self) -> list[Path]:
        return [file for index, file in enumerate(self.files) if index not in self._unreadable]

    def origin_files(self) -> list[str]:
        return [f"{self.path.name}/{file.relative_to(self.path).as_posix()}" for file in self.files]

    @cached_property
    def _hashed(self) -> list[InputFile]:
        """Each file by its path inside the folder, hashed once (an unreadable one without a hash)."""
        return [InputFile(path=file.relative_to(self.path).as_posix(), n_bytes=0) if index in self._unreadable
                else InputFile(path=file.relative_to(self.path).as_posix(), sha256=file_sha256(file), n_bytes=file.stat().st_size)
                for index, file in enumerate(self.files)]

    @cached_property
    def record(self) -> Source:
        digest = hashlib.sha256()
        for entry in self._hashed:  # names and contents, so a rename changes the fingerprint too
            digest.update(f"{entry.path}\0{entry.sha256 or 'unreadable'}\n".encode())
        total = sum(self._text_bytes.get(index, 0) for index in range(len(self.files)) if index not in self._unreadable)
        return Source(name=self.path.name, sha256=digest.hexdigest(), n_bytes=total)

    def pins(self) -> Pins:
        return Pins(inputs=list(self._hashed))

    @property
    def n_units(self) -> int:
        return len(self._units)

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        units = self._units[first:last]
        return units[:, 2] - units[:, 1]

    def unit_text(self, unit: int, start: int, stop: int) -> str:
        index, begin, end = self._units[unit].tolist()
        if index in self._unreadable or (data := self._sampled_file(index)) is None:
            return ""  # counted when the pack is written
        low, high = begin + start, min(begin + stop, end)  # only the span is read
        first, last = _line_span(data[low:high], head=low == begin, tail=high == end)
        return _decode(data, low + first, low + last, data.where, self._utf8_fix)

    def _sampled_file(self, index: int) -> FileBytes | None:
        """File ``index``'s bytes for a sample's pieces, kept open for the next one (a sample reads
        in file order); ``None`` when it cannot be read or, skipping bad files, is not UTF-8 (the
        pack leaves it out whole, and so does the sample)."""
        if self._sampling is not None and self._sampling[0] == index:
            return self._sampling[1]
        self.close()
        data = self._open(self.files[index])
        if data is not None and self.on_error == "skip" and _invalid_utf8_offset(data) is not None:
            data.close()
            data = None
        self._sampling = (index, data)
        return data

    def close(self) -> None:
        if self._sampling is not None and self._sampling[1] is not None:
            self._sampling[1].close()
        self._sampling = None

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        chosen = self._units[first:last]
        groups = np.split(chosen, np.flatnonzero(np.diff(chosen[:, 0])) + 1) if len(chosen) else []
        for number, rows in enumerate(groups):
            index, same_file = int(rows[0, 0]), rows.tolist()
            # A file's units may fall in two shards; both skip a bad file whole, but only the shard
            # holding its first unit counts it (only the first group can start inside a file).
            counted = not (number == 0 and first > 0 and int(self._units[first - 1, 0]) == index)
            if index in self._unreadable:
                self._skip(self._unreadable[index])
                continue
            data = self._open(self.files[index])
            if data is None:
                self._skip(self._unreadable[index])
                continue
            try:
                bad = _invalid_utf8_offset(data) if self.on_error == "skip" else None
                if bad is not None:  # the whole file is skipped: never half of it
                    if counted:
                        self._skip(str(not_text(data, data.where) or f"{data.where}: invalid UTF-8 at byte {bad}"))
                    continue
                for _, begin, end in same_file:
                    yield from self._cut(data, begin, end, data.where, unit=index)
            finally:
                data.close()


#: The fix that leaves a bad record out.
_SKIP_RECORDS = "skip such records with on_error='skip'"


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words.

    >>> _json_kind(5), _json_kind(None), _json_kind(["a"])
    ('a number (int)', 'null', 'an array')
    """
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"a number ({type(value).__name__})"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


class JsonLines(DocumentSource):
    """JSON Lines: one record a line, its ``text_field`` the document (cut if longer than the limit)."""

    format: Format = "jsonl"
    takes_text_field: ClassVar[bool] = True

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", text_field: str = "text",
                 separator: str | None = None, manifest: Path | None = None) -> None:
        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self.text_field = text_field
        self._data = open_bytes(self.path)  # a compressed file's decompressed lines
        ends, size = _line_ends(self._data), len(self._data)
        if size and (not len(ends) or ends[-1] != size):
            ends = np.append(ends, size)
        self._line_starts = np.concatenate(([0], ends[:-1])).astype(np.int64) if len(ends) else np.zeros(0, np.int64)
        self._line_ends = ends.astype(np.int64)
        # Unit i is record _records[i] of the file: whole records held out come after the training ones.
        self._records = np.arange(len(self._line_starts), dtype=np.int64)
        if (held_out := self._held_out(manifest)) is not None:
            self._records = self._ranges_of(held_out)
            self._line_starts, self._line_ends = self._line_starts[self._records], self._line_ends[self._records]

    @cached_property
    def record(self) -> Source:
        # A compressed file is named as it is, and identified by the text it holds.
        return Source(name=f"{self.path.name}#{self.text_field}", sha256=self._data.sha256(), n_bytes=len(self._data))

    def close(self) -> None:
        self._data.close()

    @property
    def n_units(self) -> int:
        return len(self._line_starts)

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        return self._line_ends[first:last] - self._line_starts[first:last]  # the record's JSON line

    def spelled(self, tokens: list[str]) -> dict[str, tuple[int, str]]:
        # Searched in the JSON text, as the token is written there by any common encoder.
        spellings = {token: json_spellings(token) for token in tokens}
        seen = _spelled_in([(self._data, self._data.where)], [spelling for token in tokens for spelling in spellings[token]])
        found: dict[str, tuple[int, str]] = {}
        for token in tokens:
            hits = [seen[spelling] for spelling in spellings[token] if spelling in seen]
            if hits:
                found[token] = (sum(count for count, _ in hits), hits[0][1])
        return found

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        for record, start, end in zip(self._records[first:last].tolist(), self._line_starts[first:last].tolist(),
                                      self._line_ends[first:last].tolist()):
            line = self._data[start:end]
            if not line.strip():
                continue
            text = self._text_of(line, start)
            if text is not None:
                yield from self._cut_text(text, f"{self._data.where} record at byte {start}", record=record)

    def _no_text_field(self, value: object, offset: int) -> InputError:
        """The error of a record without a string ``text_field``: what it holds, and the fix (the
        first record names the field to read; a later one is a bad record, to fix or skip; a field
        that is there but no string is to make one, or skip)."""
        if isinstance(value, dict) and self.text_field in value:
            return InputError(f"field {self.text_field!r} of the record at byte {offset} is "
                              f"{_json_kind(value[self.text_field])}, not a string", where=self._data.where,
                              fix=f"make it a string, or {_SKIP_RECORDS}")
        if isinstance(value, dict):
            names = [repr(name) for name in list(value)[:8]] + (["…"] if len(value) > 8 else [])
            holds = f"its fields: {', '.join(names)}" if names else "it has no fields"
        else:
            holds = f"it is {_json_kind(value)}, not an object"
        if offset == 0:
            fix = "name the field with text_field=NAME"
        else:
            fix = f"fix the record, or {_SKIP_RECORDS}"
        return InputError(f"record at byte {offset} has no string field {self.text_field!r} ({holds})",
                          where=self._data.where, fix=fix)

    def _text_of(self, line: bytes, offset: int) -> str | None:
        try:
            try:
                decoded = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise not_text(self._data, self._data.where) or InputError(
                    f"invalid UTF-8 at byte {offset + error.start}", where=self._data.where,
                    fix=f"fix the record, or {_SKIP_RECORDS}") from None
            try:
                value = json.loads(decoded)
            except json.JSONDecodeError as error:
                raise InputError(f"invalid JSON at byte {offset} ({error.msg})", where=self._data.where) from None
            except RecursionError:
                raise InputError("JSON nested too deeply", where=self._data.where, byte=offset) from None
            except ValueError as error:  # e.g. a number past Python's 4,300-digit limit
                raise InputError(f"unreadable JSON ({str(error).split(':')[0]})", where=self._data.where, byte=offset) from None
            text = value.get(self.text_field) if isinstance(value, dict) else None
            if not isinstance(text, str):
                raise self._no_text_field(value, offset)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:  # JSON may escape a lone surrogate; no encoder can take it
                raise InputError(f"field {self.text_field!r} holds a lone surrogate "
                                 f"(U+{ord(text[error.start]):04X}), which is not text", where=self._data.where, byte=offset,
                                 fix=f"fix the record, or {_SKIP_RECORDS}") from None
            return text
        except ValueError as error:
            if self.on_error == "skip":
                self._skip(str(error))
                return None
            raise


class ParquetTexts(DocumentSource):
    """A parquet file's text column, read row group by row group (memory holds one group)."""

    format: Format = "parquet"
    takes_text_field: ClassVar[bool] = True

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", text_field: str = "text",
                 separator: str | None = None, manifest: Path | None = None) -> None:
        import pyarrow.parquet as pq

        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self.text_field = text_field
        if (compression := file_compression(self.path)) is not None:
            raise InputError(f"is {compression}-compressed; Parquet compresses its own pages and is read as it is",
                             where=self.path, fix="decompress it first")
        try:
            self._file = pq.ParquetFile(self.path)
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(f"not a readable Parquet file ({str(error).splitlines()[0]})", where=self.path) from None
        if text_field not in self._file.schema_arrow.names:
            raise InputError(f"no column {text_field!r} (has {self._file.schema_arrow.names})", where=self.path)
        counts = [self._file.metadata.row_group(i).num_rows for i in range(self._file.num_row_groups)]
        self._group_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._last_column: tuple[int, Any] | None = None
        self._last_values: tuple[int, list[Any]] | None = None
        held_out = self._held_out(manifest)
        # Unit i is row _rows[i]: whole rows held out come after the training ones.
        self._rows = np.arange(self.n_units, dtype=np.int64) if held_out is None else self._ranges_of(held_out)

    @property
    def n_units(self) -> int:
        return int(self._group_starts[-1])

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        rows = self._rows[first:last]
        groups = np.searchsorted(self._group_starts, rows, side="right") - 1
        return self._row_bytes[groups] if len(rows) else np.zeros(0, np.int64)

    @cached_property
    def _row_bytes(self) -> np.ndarray:
        """Each row group's estimate of a row's bytes: its text column's uncompressed size over its rows."""
        column = self._file.schema_arrow.names.index(self.text_field)
        metadata = self._file.metadata
        per_row = [metadata.row_group(g).column(column).total_uncompressed_size / max(metadata.row_group(g).num_rows, 1)
                   for g in range(self._file.num_row_groups)]
        return np.maximum(np.asarray(per_row, dtype=np.float64), 1).astype(np.int64)

    def unit_text(self, unit: int, start: int, stop: int) -> str:
        # One row's value, read from the group's cached column (pieces() would cut the row into documents).
        row = int(self._rows[unit])
        group = int(np.searchsorted(self._group_starts, row, side="right") - 1)
        try:
            if self._last_values is None or self._last_values[0] != group:
                self._last_values = (group, self._column(group).to_pylist())  # one conversion a group
            value = self._last_values[1][row - int(self._group_starts[group])]
        except (OSError, ValueError):  # an unreadable group: the pass that encodes reports (or skips) it
            return ""
        try:
            data = value if isinstance(value, bytes) else value.encode("utf-8") if isinstance(value, str) else None
            if data is not None:
                data.decode("utf-8")  # a row of invalid UTF-8 is the encoding pass's to report
        except (UnicodeDecodeError, UnicodeEncodeError):
            data = None
        return "" if data is None else _span_of(data, start, stop, int(self._row_bytes[group]))

    def _column(self, group: int) -> Any:
        """Row group ``group``'s text column as bytes (decoded row by row by the caller, so invalid
        UTF-8 is reported with its row); the last one read is kept, so a vocabulary sample's rows
        of one group, asked for one at a time, read it once."""
        import pyarrow as pa

        if self._last_column is None or self._last_column[0] != group:
            column = self._file.read_row_group(group, columns=[self.text_field]).column(0)
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
            self._last_column = (group, column)
        return self._last_column[1]

    def spelled(self, tokens: list[str]) -> dict[str, tuple[int, str]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        found: dict[str, tuple[int, str]] = {}
        for group in range(self._file.num_row_groups):
            try:
                column = self._file.read_row_group(group, columns=[self.text_field]).column(0)
                if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                    continue  # not text: the pass that encodes says so
                for token in tokens:
                    counts = pc.count_substring(column, token).to_numpy(zero_copy_only=False)
                    if (count := int(np.nansum(counts))) == 0:
                        continue
                    place = f"{self.path}: row {int(self._group_starts[group]) + int(np.flatnonzero(counts > 0)[0])}"
                    found[token] = (found[token][0] + count, found[token][1]) if token in found else (count, place)
            except (OSError, ValueError):  # unreadable: the pass that encodes reports (or skips) it
                continue
        return found

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        import pyarrow as pa

        rows = self._rows[first:last]
        groups = np.searchsorted(self._group_starts, rows, side="right") - 1
        # Rows of one row group that follow each other here are read with one read of the group.
        for run in np.split(np.arange(len(rows)), np.flatnonzero(np.diff(groups)) + 1) if len(rows) else []:
            group = int(groups[run[0]])
            low, high = int(self._group_starts[group]), int(self._group_starts[group + 1])
            wanted = rows[run]
            problem: str | None
            try:
                values = self._column(group).take(pa.array(wanted - low)).to_pylist()
            except (OSError, ValueError) as error:
                problem = f"{self.path}: row group {group} (rows {low}-{high - 1}) unreadable ({str(error).splitlines()[0]})"
                if self.on_error == "skip":
                    self._skip(problem)
                    continue
                raise InputError(problem) from None
            for row, value in zip(wanted.tolist(), values):
                problem = None
                if isinstance(value, bytes):
                    try:
                        value = value.decode("utf-8")
                    except UnicodeDecodeError as error:
                        problem = f"{self.path}: row {row}: invalid UTF-8 at byte {error.start} of column {self.text_field!r}"
                if problem is None and not isinstance(value, str):
                    problem = f"{self.path}: row {row} has no text in column {self.text_field!r}"
                if problem is not None:
                    if self.on_error == "skip":
                        self._skip(problem)
                        continue
                    raise InputError(problem, fix="fix the row, or skip such rows with on_error='skip'")
                yield from self._cut_text(value, f"{self.path} row {row}", record=row)


def open_corpus(path: str | Path, *, document_bytes: int | None = None, on_error: OnError = "raise", text_field: str = "text",
                format: Format | None = None, separator: str | None = None, manifest: str | Path | None = None) -> DocumentSource:
    """Open ``path`` in its format: a folder is a directory of text files, ``.jsonl``/``.ndjson``
    JSON Lines, ``.parquet`` parquet, anything else one text file (with its manifest: ``manifest``,
    else the one found beside it).

    Args:
        document_bytes: the longest document; ``None``: a text file's manifest's (see
            :func:`reading_cut`), else 1 MiB.
        separator: text that ends a document and belongs to none (see :mod:`tokpack.corpus.documents`);
            ``None``: a text file's manifest's, else none.

    Raises:
        FileNotFoundError: no such file or folder.
        InputError: a bad option or a corpus that does not match its manifest.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such corpus file or folder")
    if on_error not in ("raise", "skip"):
        raise InputError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    check_separator(separator)
    if not path.is_dir():
        regular_file(path, "input")  # a FIFO or device (/dev/zero) would block or never end
    kind = format or format_of(path)
    if kind not in FORMATS:
        raise InputError(f"unknown corpus format {kind!r}", fix=f"use one of {', '.join(FORMATS)}")
    source_type = FORMATS[kind]
    if source_type is TextFile:
        document_bytes, separator = recorded_cut(path, document_bytes=document_bytes, separator=separator,
                                                 manifest=None if manifest is None else Path(manifest))
    elif document_bytes is None:
        document_bytes = DEFAULT_DOCUMENT_BYTES
    given = None if manifest is None else Path(manifest)
    if source_type.takes_text_field:
        return source_type(path, document_bytes=document_bytes, on_error=on_error, text_field=text_field,  # type: ignore[call-arg]
                           separator=separator, manifest=given)
    return source_type(path, document_bytes=document_bytes, on_error=on_error, separator=separator, manifest=given)  # type: ignore[call-arg]


def hold_out(path: str | Path, *, validation: float, test: float, document_bytes: int, separator: str | None = None,
             manifest: str | Path | None = None, text_field: str = "text", on_error: OnError = "raise") -> None:
    """Hold out shares of a corpus as validation and test, recorded in its manifest (beside it, or
    at ``manifest``): a text file's last bytes, cut on document boundaries (see
    :func:`tokpack.corpus.manifest.split_manifest`); whole files of a folder, records of JSON
    Lines or rows of Parquet, spread evenly over it (see :func:`split_documents`). A manifest
    already there is kept when it records the same split.

    Raises:
        InputError: shares that hold out nothing or everything, a manifest there with another
            split, or one that cannot be written.
    """
    path = Path(path)
    given = None if manifest is None else Path(manifest)
    if format_of(path) == "text":
        split_manifest(path, validation=validation, test=test, document_bytes=document_bytes, separator=separator,
                       manifest=given)
    else:
        split_documents(path, validation=validation, test=test, manifest=given, text_field=text_field, on_error=on_error)


def split_documents(path: Path, *, validation: float, test: float, manifest: Path | None = None, text_field: str = "text",
                    on_error: OnError = "raise") -> DocumentSplit:
    """Write the :class:`~tokpack.corpus.manifest.DocumentSplit` of a folder, JSON Lines or
    Parquet corpus: ``validation`` and ``test`` shares of its files, records or rows, whole, chosen
    by :func:`~tokpack.corpus.manifest.held_out_ranges` (deterministic, evenly spread, so every
    part of a corpus sorted by source has its share held out). Beside the corpus
    (``FOLDER.manifest.json``) or at ``manifest``.

    Raises:
        InputError: see :func:`hold_out`.
    """
    if validation + test <= 0 or validation + test >= 1:
        raise InputError(f"validation {validation} and test {test} must hold out a share between 0 and 1")
    target = manifest or manifest_beside(path)
    if Path(path).is_dir():
        manifest_outside(Path(path), target)
    with open_corpus(path, text_field=text_field, on_error=on_error, manifest=target if target.exists() else None) as source:
        units, sha256, kind = source.split_units(), source.record.sha256, source.format
    shares = HeldOutShares(validation=validation, test=test)
    ranges = np.bincount(held_out_ranges(units, validation, test), minlength=3).tolist()
    counts = {name: ranges[k] for k, name in enumerate(("train", "validation", "test")) if k == 0 or (validation, test)[k - 1]}
    made = DocumentSplit(file=path.name, format=kind, sha256=sha256, units=units, counts=counts, made_by=shares)  # type: ignore[arg-type]
    if target.exists():
        existing = read_record(DocumentSplit, target)
        if existing != made:
            raise InputError(f"already there with another split (validation {existing.made_by.validation:g}, "
                             f"test {existing.made_by.test:g})", where=target,
                             fix="delete it to split the corpus again, or drop validation= and test= to use it")
        return existing
    try:
        write_atomically(target, made.to_json())
    except OSError as error:
        raise InputError(f"cannot write the split ({error.strerror or error})", where=target,
                         fix="give manifest= a path in a folder you can write") from None
    return made


def reading_cut(path: str | Path, *, document_bytes: int | None, separator: str | None,
                manifest: str | Path | None = None) -> tuple[int, str | None]:
    """The ``(document_bytes, separator)`` :func:`open_corpus` reads ``path`` by: those given; for a
    text file, what is ``None`` comes from the rule its manifest recorded (see
    :func:`tokpack.corpus.manifest.recorded_cut`); else 1 MiB and no separator.

    Raises:
        InputError: a manifest given that is missing, unreadable or names another file.
    """
    path = Path(path)
    if path.exists() and format_of(path) == "text":
        return recorded_cut(path, document_bytes=document_bytes, separator=separator,
                            manifest=None if manifest is None else Path(manifest))
    return (DEFAULT_DOCUMENT_BYTES if document_bytes is None else document_bytes), separator


def check_separator(separator: str | None) -> None:
    """Refuse a separator that is not text to find: empty, or not encodable as UTF-8.

    Raises:
        InputError: naming ``separator`` and the fix.
    """
    if separator is None:
        return
    if not isinstance(separator, str) or not separator:
        raise InputError(f"must be a non-empty string, got {separator!r}", where="separator",
                         fix="e.g. separator='<|endoftext|>', or separator='\\n\\n' for a blank line")
    try:
        separator.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{separator!r} is not valid text (a lone surrogate)", where="separator") from None


#: Every input format by name: adding one is a class above and a line here (and a suffix below).
FORMATS: dict[str, type[DocumentSource]] = {
    "text": TextFile, "directory": TextDirectory, "jsonl": JsonLines, "parquet": ParquetTexts,
}
#: File name suffixes that select a record format; any other file is one text file.
SUFFIXES: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def format_of(path: Path) -> str:
    """The format :func:`open_corpus` reads ``path`` in: a folder is ``directory``, else by suffix,
    read through a compression's (a file's compression itself is told by its bytes).

    >>> format_of(Path("a.ndjson")), format_of(Path("a.txt")), format_of(Path("a.jsonl.zst"))
    ('jsonl', 'text', 'jsonl')
    """
    if path.is_dir():
        return "directory"
    name = path.name
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return SUFFIXES.get(Path(name).suffix, "text")


#: Bytes read or validated per step, so memory stays flat on a large file.
_CHUNK = 16 << 20


def _bounds(cuts: Iterator[tuple[int, int]]) -> np.ndarray:
    """``(begin, end)`` pairs as an ``(n, 2)`` ``int64`` array, built without a list of tuples.

    >>> _bounds(iter([(0, 3), (3, 5)])).tolist()
    [[0, 3], [3, 5]]
    """
    return np.fromiter(itertools.chain.from_iterable(cuts), dtype=np.int64).reshape(-1, 2)


def warn_spelled_special_tokens(source: DocumentSource, tokens: list[str], stacklevel: int = 2) -> None:
    """Warn (:class:`~tokpack.errors.SpecialTokenInText`) once per special token the text of
    ``source`` spells when no separator takes it out; its caller's caller is named."""
    if source.separator is not None:
        return
    for token, (count, first) in source.spelled(sorted(tokens)).items():
        warnings.warn(SpecialTokenInText(token, count, first), stacklevel=stacklevel + 1)


def json_spellings(token: str) -> list[str]:
    r"""How JSON encoders write ``token`` inside a string: as it is, with every non-ASCII
    character escaped (Python's default), with ``<``, ``>`` and ``&`` escaped (Go's, .NET's: in
    lower or upper case hex), with ``/`` escaped (PHP's); the first is the token itself.

    >>> json_spellings("</s>")
    ['</s>', '<\\/s>', '\\u003c/s\\u003e', '\\u003C/s\\u003E', '\\u003c\\/s\\u003e', '\\u003C\\/s\\u003E']
    """
    found: list[str] = []
    for ascii_only, html, slash, upper in itertools.product((False, True), repeat=4):
        written = json.dumps(token, ensure_ascii=ascii_only)[1:-1]
        if html:
            written = written.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        if slash:
            written = written.replace("/", "\\/")
        if upper:
            written = re.sub(r"\\u([0-9a-f]{4})", lambda hexa: "\\u" + hexa[1].upper(), written)
        if written not in found:
            found.append(written)
    return found


def _spelled_in(files: list[tuple[FileBytes | bytes, str]], tokens: list[str], chunk: int = _CHUNK) -> dict[str, tuple[int, str]]:
    """:meth:`DocumentSource.spelled` over files' bytes, read ``chunk`` bytes at a time; an
    occurrence across two chunks is counted once, in the chunk it starts in.

    >>> _spelled_in([(b"a<|x|>b<|x|><|x", "f.txt"), (b"<|x|>", "g.txt")], ["<|x|>", "<|y|>"], chunk=4)
    {'<|x|>': (3, 'f.txt: byte 1')}
    """
    found: dict[str, tuple[int, str]] = {}
    markers = [token.encode("utf-8") for token in tokens]
    reach = max((len(marker) for marker in markers), default=1) - 1
    for data, where in files:
        counts, firsts = [0] * len(markers), [-1] * len(markers)
        for low in range(0, len(data), chunk):  # each chunk read once, every token counted in it
            window = data[low : min(low + chunk + reach, len(data))]
            for index, marker in enumerate(markers):
                # Occurrences that start in [low, low + chunk), whole: the window runs on past it.
                end = chunk + len(marker) - 1
                counts[index] += window.count(marker, 0, end)
                if firsts[index] < 0 and (at := window.find(marker, 0, end)) >= 0:
                    firsts[index] = low + at
        for token, count, first in zip(tokens, counts, firsts):
            if count:
                place = located(where, "", byte=first).removesuffix(": ")
                found[token] = (found[token][0] + count, found[token][1]) if token in found else (count, place)
    return found


def _decode(data: bytes | FileBytes, begin: int, end: int, where: str, fix: str | None = None) -> str:
    """The text of bytes ``[begin, end)``.

    Raises:
        InputError: invalid UTF-8, naming ``where``, the byte offset and ``fix``; or a file that
            is no text at all (see :func:`not_text`).
    """
    try:
        return data[begin:end].decode("utf-8")
    except UnicodeDecodeError as error:
        raise not_text(data, where) or InputError(f"invalid UTF-8 at byte {begin + error.start}", where=where,
                                                  fix=fix) from None


def not_text(data: bytes | FileBytes, where: str | Path) -> InputError | None:
    """The error for bytes that are not UTF-8 because they are no text at all (a Parquet file, an
    executable, an image: see :func:`tokpack._compressed.binary_kind`), or ``None``.

    >>> print(not_text(b"PAR1\\x15\\x04", "d/x.parquet"))
    d/x.parquet: is a Parquet file, not text; give a Parquet file as the corpus itself (its text column is read), or move it out of a folder of text files
    """
    kind = binary_kind(data[0:8192])
    if kind is None:
        return None
    if kind.startswith("UTF-16"):
        return InputError(f"is {kind}", where=where, fix="convert it to UTF-8 (e.g. iconv -f utf-16 -t utf-8)")
    fix = ("give a Parquet file as the corpus itself (its text column is read), or move it out of a folder of text files"
           if kind == "a Parquet file" else "give text files only: move it out of the corpus, or extract its text first")
    return InputError(f"is {kind}, not text", where=where, fix=fix)


def _line_ends(data: FileBytes) -> np.ndarray:
    """Offsets just past every newline of ``data``, found chunk by chunk with numpy.

    >>> import tempfile
    >>> sample = Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = sample.write_bytes(b"a\\nbb\\n\\nc")
    >>> _line_ends(FileBytes(sample)).tolist()
    [2, 5, 6]
    """
    found = [np.flatnonzero(np.frombuffer(data[offset : offset + _CHUNK], dtype=np.uint8) == ord("\n")) + offset + 1
             for offset in range(0, len(data), _CHUNK)]
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def _invalid_utf8_offset(data: bytes | FileBytes, chunk: int = _CHUNK) -> int | None:
    """Where ``data`` stops being UTF-8, or ``None``; validated ``chunk`` bytes at a time, so no
    whole-file string is ever built.

    >>> _invalid_utf8_offset("żółw".encode(), chunk=3), _invalid_utf8_offset(b"ab\\xffc")
    (None, 2)
    >>> _invalid_utf8_offset("aż".encode() + b"\\xc5(", chunk=2)  # a bad sequence across chunks
    3
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    for offset in range(0, max(len(data), 1), chunk):
        held = len(decoder.getstate()[0])  # an unfinished character carried from the last chunk
        try:
            decoder.decode(data[offset : offset + chunk], final=offset + chunk >= len(data))
        except UnicodeDecodeError as error:
            return offset - held + error.start
    return None
