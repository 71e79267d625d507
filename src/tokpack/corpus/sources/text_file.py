"""One UTF-8 text file as a corpus, cut into documents, split by its manifest."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from tokpack._files import open_bytes
from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import (
    MANIFEST_FILE,
    CorpusManifest,
    Source,
    corpus_manifest,
    file_sha256,
    manifest_beside,
)
from tokpack.corpus.sources.base import DocumentSource, Format, InputFile, OnError, Piece, Pins, Utf8Piece
from tokpack.corpus.sources.decoding import bounds_array, decode_span
from tokpack.corpus.sources.spellings import spelled_in
from tokpack.corpus.sources.training_sample import line_span


class TextFile(DocumentSource):
    """One UTF-8 text file, split by its manifest (see :func:`tokpack.corpus.manifest.find_manifest`;
    all training without one)."""

    format: Format = "text"
    origin_kind: ClassVar[Literal["bytes", "records"]] = "bytes"
    split_by_bytes: ClassVar[bool] = True
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
            spans.append(bounds_array(cut_documents(self._data, start, stop, document_bytes, self.separator_bytes)))
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
        return spelled_in([(self._data, self._data.where)], tokens)

    def unit_text(self, unit: int, start: int, stop: int) -> str:
        begin, end = self._bounds[unit].tolist()
        low, high = begin + start, min(begin + stop, end)  # only the span is read
        first, last = line_span(self._data[low:high], head=low == begin, tail=high == end)
        return decode_span(self._data, low + first, low + last, self._data.where, self._utf8_fix)

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        last = self.n_units if last is None else last
        for name, low, high in self._unit_ranges:
            for begin, end in self._bounds[max(first, low) : min(last, high)].tolist():
                yield Piece(name, decode_span(self._data, begin, end, self._data.where, self._utf8_fix), end - begin,
                            (0, begin, end))

    def utf8_pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece | Utf8Piece]:
        last = self.n_units if last is None else last
        for name, low, high in self._unit_ranges:
            for begin, end in self._bounds[max(first, low) : min(last, high)].tolist():
                yield Utf8Piece(name, self._data[begin:end], (0, begin, end))

    def decoded(self, piece: Utf8Piece) -> str:
        _, begin, end = piece.origin
        return decode_span(self._data, begin, end, self._data.where, self._utf8_fix, read=piece.data)
