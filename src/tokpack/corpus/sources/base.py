"""The base every corpus format builds on: numbered units, their documents, pins and records."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from tokpack._files import FileBytes, Fingerprint, changed, fingerprint
from tokpack._schema import Record
from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import (
    Source,
    check_split,
    file_sha256,
    find_split,
)
from tokpack.corpus.sources.decoding import decode_span
from tokpack.corpus.sources.training_sample import SAMPLE_PIECE_BYTES, TrainingSample, span_of, spread_evenly
from tokpack.errors import InputError

Format = Literal["text", "directory", "jsonl", "parquet"]
OnError = Literal["raise", "skip"]


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


@dataclass(frozen=True)
class Utf8Piece:
    """One document as the bytes it was read as, its UTF-8 not yet checked (see
    :meth:`DocumentSource.utf8_pieces`): its range name, bytes and origin as a :class:`Piece`'s."""

    range_name: str
    data: bytes
    origin: tuple[int, int, int]

    @property
    def n_bytes(self) -> int:
        return len(self.data)


class DocumentSource:
    """Base of every format: a name, a fingerprint, ``n_units`` and the documents of a unit span."""

    format: Format
    text_field: str | None = None  # the field or column holding the text, for record formats
    takes_text_field: ClassVar[bool] = False  # whether the constructor takes ``text_field``
    #: how a piece's origin is read: a file's bytes, or the bytes of a record's text
    origin_kind: ClassVar[Literal["bytes", "records"]] = "records"
    #: whether its manifest holds out byte ranges and records the cut rule (``document_bytes``,
    #: ``separator``) they were cut by, rather than holding out whole units
    split_by_bytes: ClassVar[bool] = False

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
                             "published", where=old.path, fix="rerun once the file stops changing")

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

    def utf8_pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece | Utf8Piece]:
        """:meth:`pieces`, each as the bytes it was read as (a :class:`Utf8Piece`) where the format
        reads a document's bytes from a file: for an encoder that checks them as UTF-8 and reads
        them in place, so no ``str`` is made only to be turned back into UTF-8. A piece that is not
        UTF-8 is the caller's to refuse, with :meth:`decoded`'s error. Formats whose text is a
        ``str`` already give :meth:`pieces`."""
        return self.pieces(first, last)

    def decoded(self, piece: Utf8Piece) -> str:
        """The text of ``piece`` (one :meth:`utf8_pieces` gave): its bytes decoded, as :meth:`pieces`
        decodes them (the file is read again only to tell what kind it is, if they are no UTF-8).

        Raises:
            InputError: what :meth:`pieces` raises for that document (invalid UTF-8, naming the
                file and the offset of its first bad byte, and the fix).
        """
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
        return span_of(text.encode("utf-8"), start, stop, int(self.unit_bytes(unit, unit + 1)[0]))

    def _skip(self, problem: str) -> None:
        self.skipped += 1
        # Each pass over the corpus (a vocabulary's training sample, then the encoding) meets the
        # same bad input again: it is named once, so the few named are distinct inputs.
        if len(self.problems) < 5 and problem not in self.problems:
            self.problems.append(problem)

    @property
    def separator_bytes(self) -> bytes | None:
        """The separator as UTF-8, as :func:`cut_documents` takes it."""
        return self.separator.encode("utf-8") if self.separator else None

    def _cut(self, data: bytes | FileBytes, start: int, end: int, where: str, range_name: str = "train", *,
             unit: int) -> Iterator[Piece]:
        for begin, finish in cut_documents(data, start, end, self.document_bytes, self.separator_bytes):
            yield Piece(range_name, decode_span(data, begin, finish, where, self._utf8_fix,
                                                skippable=self._skips_whole_files), finish - begin,
                        (unit, begin, finish))

    def _cut_bytes(self, data: bytes | FileBytes, start: int, end: int, range_name: str = "train", *,
                   unit: int) -> Iterator[Utf8Piece]:
        """:meth:`_cut`'s documents as their bytes (see :meth:`utf8_pieces`)."""
        for begin, finish in cut_documents(data, start, end, self.document_bytes, self.separator_bytes):
            yield Utf8Piece(range_name, data[begin:finish], (unit, begin, finish))

    #: Whether a file that is no text can be left out of this format with ``on_error='skip'``
    #: (a folder's can: the others are read; a lone file's cannot).
    _skips_whole_files: ClassVar[bool] = False

    #: What to say after ``invalid UTF-8`` in this format (a text file cannot be skipped in part).
    _utf8_fix = "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or leave it out with on_error='skip'"

    def _cut_text(self, text: str, where: str, *, record: int) -> Iterator[Piece]:
        """A record's text as documents: whole when it fits (no re-decoding), else cut by the rule."""
        data = text.encode("utf-8")
        if len(data) <= self.document_bytes and not (self.separator and self.separator in text):
            yield Piece("train", text, len(data), (record, 0, len(data)))
        else:
            yield from self._cut(data, 0, len(data), where, unit=record)

