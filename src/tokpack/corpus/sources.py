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
import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Literal

import numpy as np

from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import CorpusManifest, corpus_manifest, file_sha256
from tokpack.errors import InputError
from tokpack.store.format import Source

Format = Literal["text", "directory", "jsonl", "parquet"]
OnError = Literal["raise", "skip"]


@dataclass(frozen=True)
class Piece:
    """One document to encode: its range name (``train``, …), its text and its byte length."""

    range_name: str
    text: str
    n_bytes: int


class DocumentSource:
    """Base of every format: a name, a fingerprint, ``n_units`` and the documents of a unit span."""

    format: Format
    text_field: str | None = None  # the field or column holding the text, for record formats

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise") -> None:
        self.path = Path(path)
        self.document_bytes = document_bytes
        self.on_error = on_error
        self.skipped = 0  # files or records skipped for bad input, when on_error == "skip"
        self.problems: list[str] = []  # what was skipped and why (the first few)

    @cached_property
    def record(self) -> Source:
        """The pack's ``source`` record: name, SHA-256 of the input, its size in bytes (hashed
        once, on first use)."""
        name = self.path.name + (f"#{self.text_field}" if self.text_field else "")
        return Source(name=name, sha256=file_sha256(self.path), n_bytes=self.path.stat().st_size)

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

    def layout(self) -> list[tuple[str, int, int]]:
        """The named ranges as ``(name, first unit, last unit)`` in order (all ``train`` but for a
        text file with a manifest)."""
        return [("train", 0, self.n_units)]

    def range_bytes(self, name: str) -> tuple[int, int] | None:
        """The byte span of range ``name`` in the input, where that means something (a text file)."""
        return None

    def training_sample(self, n_bytes: int) -> Iterator[str]:
        """The first ``n_bytes`` of training text, as documents (the last one trimmed at a
        character boundary), for a vocabulary trainer: never validation or test text."""
        left = n_bytes
        for name, first, last in self.layout():
            if name != "train":
                continue
            for piece in self.pieces(first, last):
                if left <= 0:
                    return
                if piece.n_bytes > left:
                    yield piece.text.encode("utf-8")[:left].decode("utf-8", errors="ignore")
                    return
                left -= piece.n_bytes
                yield piece.text

    def _skip(self, problem: str) -> None:
        self.skipped += 1
        if len(self.problems) < 5:
            self.problems.append(problem)

    def _cut(self, data: bytes | mmap.mmap, start: int, end: int, where: str, range_name: str = "train") -> Iterator[Piece]:
        for begin, finish in cut_documents(data, start, end, self.document_bytes):
            yield Piece(range_name, _decode(data, begin, finish, where), finish - begin)
            _release(data, begin, finish)

    def _cut_text(self, text: str, where: str) -> Iterator[Piece]:
        """A record's text as documents: whole when it fits (no re-decoding), else cut by the rule."""
        data = text.encode("utf-8")
        if len(data) <= self.document_bytes:
            yield Piece("train", text, len(data))
        else:
            yield from self._cut(data, 0, len(data), where)


class TextFile(DocumentSource):
    """One UTF-8 text file, split by the ``manifest.json`` beside it (all training without one)."""

    format: Format = "text"

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise") -> None:
        super().__init__(path, document_bytes=document_bytes, on_error=on_error)
        self.sha256 = file_sha256(self.path)
        self.manifest: CorpusManifest = corpus_manifest(self.path, self.sha256)
        self._data = _map(self.path)
        # Document bounds as one int64 array (two per document), not Python tuples: flat memory.
        spans, self._layout = [], []
        for name, start, stop in self.manifest.ordered_ranges():
            spans.append(_bounds(cut_documents(self._data, start, stop, document_bytes)))
            first = self._layout[-1][2] if self._layout else 0
            self._layout.append((name, first, first + len(spans[-1])))
        self._bounds = np.concatenate(spans) if spans else np.zeros((0, 2), np.int64)

    @cached_property
    def record(self) -> Source:
        return Source(name=self.path.name, sha256=self.sha256, n_bytes=self.manifest.n_bytes)

    def close(self) -> None:
        if isinstance(self._data, mmap.mmap):
            self._data.close()

    @property
    def n_units(self) -> int:
        return len(self._bounds)

    def layout(self) -> list[tuple[str, int, int]]:
        return list(self._layout)

    def range_bytes(self, name: str) -> tuple[int, int] | None:
        span = self.manifest.ranges.get(name)  # type: ignore[call-overload]
        return None if span is None else (int(span[0]), int(span[1]))

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        last = self.n_units if last is None else last
        for name, low, high in self._layout:
            for begin, end in self._bounds[max(first, low) : min(last, high)].tolist():
                yield Piece(name, _decode(self._data, begin, end, str(self.path)), end - begin)
                _release(self._data, begin, end)


class TextDirectory(DocumentSource):
    """Every non-hidden file under a folder, in sorted path order; documents never span files."""

    format: Format = "directory"

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise") -> None:
        super().__init__(path, document_bytes=document_bytes, on_error=on_error)
        self.files = sorted(p for p in self.path.rglob("*") if p.is_file()
                            and not any(part.startswith(".") for part in p.relative_to(self.path).parts))
        units = []  # per file: rows of (file index, begin, end), as int64 arrays
        for index, file in enumerate(self.files):
            data = _map(file)
            bounds = _bounds(cut_documents(data, 0, len(data), document_bytes))
            units.append(np.column_stack([np.full(len(bounds), index, np.int64), bounds]))
            if isinstance(data, mmap.mmap):
                data.close()
        self._units = np.concatenate(units) if units else np.zeros((0, 3), np.int64)

    @cached_property
    def record(self) -> Source:
        digest, total = hashlib.sha256(), 0
        for file in self.files:  # names and contents, so a rename changes the fingerprint too
            digest.update(f"{file.relative_to(self.path).as_posix()}\0{file_sha256(file)}\n".encode())
            total += file.stat().st_size
        return Source(name=self.path.name, sha256=digest.hexdigest(), n_bytes=total)

    @property
    def n_units(self) -> int:
        return len(self._units)

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        chosen = self._units[first:last]
        for rows in np.split(chosen, np.flatnonzero(np.diff(chosen[:, 0])) + 1) if len(chosen) else ():
            index, same_file = int(rows[0, 0]), rows.tolist()
            data = _map(self.files[index])
            try:
                bad = _invalid_utf8_offset(data) if self.on_error == "skip" else None
                if bad is not None:  # the whole file is skipped: never half of it
                    self._skip(f"{self.files[index]}: invalid UTF-8 at byte {bad}")
                    continue
                for _, begin, end in same_file:
                    yield from self._cut(data, begin, end, str(self.files[index]))
            finally:
                if isinstance(data, mmap.mmap):
                    data.close()


class JsonLines(DocumentSource):
    """JSON Lines: one record a line, its ``text_field`` the document (cut if longer than the limit)."""

    format: Format = "jsonl"

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", text_field: str = "text") -> None:
        super().__init__(path, document_bytes=document_bytes, on_error=on_error)
        self.text_field = text_field
        ends, size = _line_ends(self.path), self.path.stat().st_size
        if size and (not len(ends) or ends[-1] != size):
            ends = np.append(ends, size)
        self._line_starts = np.concatenate(([0], ends[:-1])).astype(np.int64) if len(ends) else np.zeros(0, np.int64)
        self._line_ends = ends.astype(np.int64)

    @property
    def n_units(self) -> int:
        return len(self._line_starts)

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        with open(self.path, "rb") as handle:
            for start, end in zip(self._line_starts[first:last], self._line_ends[first:last]):
                handle.seek(start)
                line = handle.read(end - start)
                if not line.strip():
                    continue
                text = self._text_of(line, int(start))
                if text is not None:
                    yield from self._cut_text(text, f"{self.path} record at byte {start}")

    def _text_of(self, line: bytes, offset: int) -> str | None:
        try:
            try:
                decoded = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(f"{self.path}: invalid UTF-8 at byte {offset + error.start}") from None
            try:
                value = json.loads(decoded)
            except json.JSONDecodeError as error:
                raise InputError(f"{self.path}: invalid JSON at byte {offset} ({error.msg})") from None
            text = value.get(self.text_field) if isinstance(value, dict) else None
            if not isinstance(text, str):
                raise InputError(f"{self.path}: record at byte {offset} has no string field {self.text_field!r}")
            return text
        except ValueError as error:
            if self.on_error == "skip":
                self._skip(str(error))
                return None
            raise


class ParquetTexts(DocumentSource):
    """A parquet file's text column, read row group by row group (memory holds one group)."""

    format: Format = "parquet"

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", text_field: str = "text") -> None:
        import pyarrow.parquet as pq

        super().__init__(path, document_bytes=document_bytes, on_error=on_error)
        self.text_field = text_field
        self._file = pq.ParquetFile(self.path)
        if text_field not in self._file.schema_arrow.names:
            raise InputError(f"{self.path}: no column {text_field!r} (has {self._file.schema_arrow.names})")
        counts = [self._file.metadata.row_group(i).num_rows for i in range(self._file.num_row_groups)]
        self._group_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)

    @property
    def n_units(self) -> int:
        return int(self._group_starts[-1])

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        last = self.n_units if last is None else last
        for group in range(self._file.num_row_groups):
            low, high = int(self._group_starts[group]), int(self._group_starts[group + 1])
            if high <= first or low >= last:
                continue
            column = self._file.read_row_group(group, columns=[self.text_field]).column(0)
            for row, value in enumerate(column.to_pylist()[max(first, low) - low : min(last, high) - low], start=max(first, low)):
                if not isinstance(value, str):
                    problem = f"{self.path}: row {row} has no text in column {self.text_field!r}"
                    if self.on_error == "skip":
                        self._skip(problem)
                        continue
                    raise InputError(problem)
                yield from self._cut_text(value, f"{self.path} row {row}")


def open_source(path: str | Path, *, document_bytes: int, on_error: OnError = "raise", text_field: str = "text",
                format: Format | None = None) -> DocumentSource:
    """Open ``path`` in its format: a folder is a directory of text files, ``.jsonl``/``.ndjson``
    JSON Lines, ``.parquet`` parquet, anything else one text file (with its manifest).

    Raises:
        FileNotFoundError: no such file or folder.
        ValueError: a bad option or a corpus that does not match its manifest.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such corpus file or folder")
    if on_error not in ("raise", "skip"):
        raise InputError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    kind = format or ("directory" if path.is_dir() else {".jsonl": "jsonl", ".ndjson": "jsonl",
                                                         ".parquet": "parquet"}.get(path.suffix, "text"))
    if kind == "directory":
        return TextDirectory(path, document_bytes=document_bytes, on_error=on_error)
    if kind == "jsonl":
        return JsonLines(path, document_bytes=document_bytes, on_error=on_error, text_field=text_field)
    if kind == "parquet":
        return ParquetTexts(path, document_bytes=document_bytes, on_error=on_error, text_field=text_field)
    if kind == "text":
        return TextFile(path, document_bytes=document_bytes, on_error=on_error)
    raise InputError(f"unknown corpus format {kind!r}")


#: Bytes read or validated per step, so memory stays flat on a large file.
_CHUNK = 16 << 20


def _map(path: Path) -> bytes | mmap.mmap:
    """The bytes of ``path`` as a read-only map (``b""`` for an empty file, which cannot be mapped)."""
    with open(path, "rb") as handle:
        if not path.stat().st_size:
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _bounds(cuts: Iterator[tuple[int, int]]) -> np.ndarray:
    """``(begin, end)`` pairs as an ``(n, 2)`` ``int64`` array, built without a list of tuples.

    >>> _bounds(iter([(0, 3), (3, 5)])).tolist()
    [[0, 3], [3, 5]]
    """
    return np.fromiter(itertools.chain.from_iterable(cuts), dtype=np.int64).reshape(-1, 2)


def _decode(data: bytes | mmap.mmap, begin: int, end: int, where: str) -> str:
    """The text of bytes ``[begin, end)``.

    Raises:
        ValueError: invalid UTF-8, naming ``where`` and the byte offset.
    """
    try:
        return data[begin:end].decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{where}: invalid UTF-8 at byte {begin + error.start}") from None


def _line_ends(path: Path) -> np.ndarray:
    """Offsets just past every newline of ``path``, found chunk by chunk with numpy.

    >>> import tempfile
    >>> sample = Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = sample.write_bytes(b"a\\nbb\\n\\nc")
    >>> _line_ends(sample).tolist()
    [2, 5, 6]
    """
    found, offset = [], 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            found.append(np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == ord("\n")) + offset + 1)
            offset += len(chunk)
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def _invalid_utf8_offset(data: bytes | mmap.mmap, chunk: int = _CHUNK) -> int | None:
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


def _release(data: bytes | mmap.mmap, begin: int, end: int) -> None:
    """Drop mapped pages already decoded, so resident memory stays flat on a huge corpus."""
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    first, last = begin - begin % mmap.PAGESIZE, end - end % mmap.PAGESIZE
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)
