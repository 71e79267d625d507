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
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from tokpack._files import FileBytes, Fingerprint, changed, fingerprint, regular_file
from tokpack._schema import Record
from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import (
    DEFAULT_DOCUMENT_BYTES,
    MANIFEST_FILE,
    MANIFEST_SUFFIX,
    CorpusManifest,
    Source,
    corpus_manifest,
    file_sha256,
    manifest_beside,
    recorded_cut,
)
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
    """One document to encode: its range name (``train``, …), its text and its byte length."""

    range_name: str
    text: str
    n_bytes: int


class DocumentSource:
    """Base of every format: a name, a fingerprint, ``n_units`` and the documents of a unit span."""

    format: Format
    text_field: str | None = None  # the field or column holding the text, for record formats
    takes_text_field: ClassVar[bool] = False  # whether the constructor takes ``text_field``

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", separator: str | None = None) -> None:
        self.path = Path(path)
        self.document_bytes = document_bytes
        self.separator = separator  # the text that ends a document and belongs to none, if any
        self.on_error = on_error
        self.skipped = 0  # files or records skipped for bad input, when on_error == "skip"
        self.problems: list[str] = []  # what was skipped and why (the first few)
        # Taken before anything is hashed, compared again before a pack is published: the bytes
        # encoded must be the bytes the record's hash names.
        self.fingerprint: tuple[Fingerprint, ...] = fingerprint(self.input_files())

    def input_files(self) -> list[Path]:
        """Every file whose bytes this source reads."""
        return [self.path]

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
        text file with a manifest)."""
        return [("train", 0, self.n_units)]

    def range_bytes(self, name: str) -> tuple[int, int] | None:
        """The byte span of range ``name`` in the input, where that means something (a text file)."""
        return None

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        """The size in bytes of each unit of ``[first, last)`` (an estimate for record formats),
        by which a vocabulary sample is spread; equal weights unless a format knows better."""
        return np.ones(max(last - first, 0), np.int64)

    def training_sample(self, n_bytes: int) -> TrainingSample:
        """About ``n_bytes`` of training text for a vocabulary trainer, as whole documents spread
        evenly over the whole training range (never validation or test text), so the order of the
        input does not decide what the vocabulary sees; the same input always gives the same sample.
        Iterate it once; it then knows how many documents and bytes it gave."""
        spans = [(first, last) for name, first, last in self.unit_ranges() if name == "train"]
        sizes = np.concatenate([self.unit_bytes(first, last) for first, last in spans]) if spans else np.zeros(0, np.int64)
        units = np.concatenate([np.arange(first, last, dtype=np.int64) for first, last in spans]) if spans else sizes
        chosen = units[spread_evenly(sizes, n_bytes)]
        return TrainingSample(self, chosen, n_bytes, range_bytes=int(sizes.sum()))

    def _skip(self, problem: str) -> None:
        self.skipped += 1
        if len(self.problems) < 5:
            self.problems.append(problem)

    @property
    def separator_bytes(self) -> bytes | None:
        """The separator as UTF-8, as :func:`cut_documents` takes it."""
        return self.separator.encode("utf-8") if self.separator else None

    def _cut(self, data: bytes | FileBytes, start: int, end: int, where: str, range_name: str = "train") -> Iterator[Piece]:
        for begin, finish in cut_documents(data, start, end, self.document_bytes, self.separator_bytes):
            yield Piece(range_name, _decode(data, begin, finish, where, self._utf8_fix), finish - begin)

    #: What to say after ``invalid UTF-8`` in this format (a text file cannot be skipped in part).
    _utf8_fix = "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or use --on-error skip to leave it out"

    def _cut_text(self, text: str, where: str) -> Iterator[Piece]:
        """A record's text as documents: whole when it fits (no re-decoding), else cut by the rule."""
        data = text.encode("utf-8")
        if len(data) <= self.document_bytes and not (self.separator and self.separator in text):
            yield Piece("train", text, len(data))
        else:
            yield from self._cut(data, 0, len(data), where)


class TrainingSample:
    """The documents a vocabulary is trained on (see :meth:`DocumentSource.training_sample`):
    an iterable of texts that counts what it gave (``n_documents``, ``n_bytes``) once iterated."""

    def __init__(self, source: DocumentSource, units: np.ndarray, limit_bytes: int, *, range_bytes: int) -> None:
        self.source, self.units, self.limit_bytes = source, units, limit_bytes
        self.range_bytes = range_bytes  # bytes of the whole training range
        self.n_documents = self.n_bytes = 0

    def __iter__(self) -> Iterator[str]:
        self.n_documents = self.n_bytes = 0
        # Consecutive chosen units are read as one run, so a source reads each stretch once.
        runs = np.split(self.units, np.flatnonzero(np.diff(self.units) != 1) + 1) if len(self.units) else []
        for run in runs:
            for piece in self.source.pieces(int(run[0]), int(run[-1]) + 1):
                left = self.limit_bytes - self.n_bytes
                if left <= 0:
                    return
                text = piece.text
                if piece.n_bytes > left:  # only when one document is larger than the whole sample
                    text = piece.text.encode("utf-8")[:left].decode("utf-8", errors="ignore")
                self.n_documents += 1
                self.n_bytes += min(piece.n_bytes, left)
                yield text

    def describe(self) -> str:
        """One line for the user: ``trained on 10.0 of 18.5 MB, 412 documents spread over the range``."""
        return describe_sample(self.n_bytes, self.range_bytes, self.n_documents)


def describe_sample(n_bytes: int, range_bytes: int, n_documents: int) -> str:
    """What a vocabulary was trained on, in one line.

    >>> describe_sample(10_000_000, 18_500_000, 412)
    'trained on 10.0 of 18.5 MB, 412 documents spread over the range'
    >>> describe_sample(300, 300, 1)
    'trained on all 0.0 MB, 1 document'
    """
    plural = "s" if n_documents != 1 else ""
    if n_bytes >= range_bytes:
        return f"trained on all {range_bytes / 1e6:.1f} MB, {n_documents:,} document{plural}"
    return f"trained on {n_bytes / 1e6:.1f} of {range_bytes / 1e6:.1f} MB, {n_documents:,} document{plural} spread over the range"


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
        return np.unique(np.searchsorted(ends, points, side="right"))

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
    _utf8_fix = "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8); --on-error skip skips whole files or records, not part of one file"

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", separator: str | None = None,
                 manifest: Path | None = None) -> None:
        self.manifest_path = None if manifest is None else Path(manifest)  # given, else found beside the file
        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self.sha256 = file_sha256(self.path)
        self.manifest: CorpusManifest
        self.manifest, self.manifest_found = corpus_manifest(self.path, self.sha256, manifest=self.manifest_path,
                                                             separator=separator, document_bytes=document_bytes)
        self._data = FileBytes(self.path)
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

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        last = self.n_units if last is None else last
        for name, low, high in self._unit_ranges:
            for begin, end in self._bounds[max(first, low) : min(last, high)].tolist():
                yield Piece(name, _decode(self._data, begin, end, str(self.path), self._utf8_fix), end - begin)


def _read_in_place(inside: Path, kind: str) -> bool:
    """Whether a folder's walk reads the entry at ``inside`` (a path relative to the folder) in its
    own place: no part of it hidden, and a file no manifest.

    >>> _read_in_place(Path("news/2024"), "folder"), _read_in_place(Path(".git/objects"), "folder")
    (True, False)
    """
    return (not any(part.startswith(".") for part in inside.parts)
            and not (kind == "file" and inside.name.endswith(MANIFEST_SUFFIX)))


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

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", separator: str | None = None) -> None:
        self.path, self.on_error = Path(path), on_error
        # A placeholder unit (begin == end == 0) stands for each unreadable entry, so that the pass
        # (or the shard) that reaches it counts the skip, once.
        self.files, self._unreadable = self._listing()
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
            data.close()
        self._units = np.concatenate(units) if units else np.zeros((0, 3), np.int64)

    def _listing(self) -> tuple[list[Path], dict[int, str]]:
        found: list[tuple[Path, str | None]] = []

        def unreadable(error: OSError) -> None:
            where = Path(error.filename) if error.filename else self.path
            problem = f"cannot read folder ({error.strerror or error})"
            if self.on_error != "skip":
                raise InputError(problem, where=where, fix="fix its permissions, or use --on-error skip to leave it out")
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
                raise InputError(problem, where=entry, fix="remove the link (or the loop), or leave it out with "
                                                           "--on-error skip (on_error='skip' in Python)")
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
            return FileBytes(file)
        except InputError:
            if self.on_error != "skip":
                raise
            self._unreadable[self.files.index(file)] = f"{file}: cannot be read"
            return None
        except OSError as error:
            if self.on_error != "skip":
                raise InputError(f"cannot read ({error.strerror or error})", where=file,
                                 fix="fix its permissions, or use --on-error skip to leave it out") from None
            self._unreadable[self.files.index(file)] = f"{file}: cannot read ({error.strerror or error})"
            return None

    def input_files(self) -> list[Path]:
        return [file for index, file in enumerate(self.files) if index not in self._unreadable]

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
        return Source(name=self.path.name, sha256=digest.hexdigest(), n_bytes=sum(entry.n_bytes for entry in self._hashed))

    def pins(self) -> Pins:
        return Pins(inputs=list(self._hashed))

    @property
    def n_units(self) -> int:
        return len(self._units)

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        units = self._units[first:last]
        return units[:, 2] - units[:, 1]

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
                        self._skip(f"{self.files[index]}: invalid UTF-8 at byte {bad}")
                    continue
                for _, begin, end in same_file:
                    yield from self._cut(data, begin, end, str(self.files[index]))
            finally:
                data.close()


#: The fix that leaves a bad record out.
_SKIP_RECORDS = "skip such records with --on-error skip (on_error='skip' in Python)"


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
                 separator: str | None = None) -> None:
        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self.text_field = text_field
        ends, size = _line_ends(self.path), self.path.stat().st_size
        if size and (not len(ends) or ends[-1] != size):
            ends = np.append(ends, size)
        self._line_starts = np.concatenate(([0], ends[:-1])).astype(np.int64) if len(ends) else np.zeros(0, np.int64)
        self._line_ends = ends.astype(np.int64)

    @property
    def n_units(self) -> int:
        return len(self._line_starts)

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        return self._line_ends[first:last] - self._line_starts[first:last]  # the record's JSON line

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

    def _no_text_field(self, value: object, offset: int) -> InputError:
        """The error of a record without a string ``text_field``: what it holds, and the fix (the
        first record names the field to read; a later one is a bad record, to fix or skip; a field
        that is there but no string is to make one, or skip)."""
        if isinstance(value, dict) and self.text_field in value:
            return InputError(f"field {self.text_field!r} of the record at byte {offset} is "
                              f"{_json_kind(value[self.text_field])}, not a string", where=self.path,
                              fix=f"make it a string, or {_SKIP_RECORDS}")
        if isinstance(value, dict):
            names = [repr(name) for name in list(value)[:8]] + (["…"] if len(value) > 8 else [])
            holds = f"its fields: {', '.join(names)}" if names else "it has no fields"
        else:
            holds = f"it is {_json_kind(value)}, not an object"
        if offset == 0:
            fix = "name the field with --text-field NAME (text_field= in Python)"
        else:
            fix = f"fix the record, or {_SKIP_RECORDS}"
        return InputError(f"record at byte {offset} has no string field {self.text_field!r} ({holds})",
                          where=self.path, fix=fix)

    def _text_of(self, line: bytes, offset: int) -> str | None:
        try:
            try:
                decoded = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(f"invalid UTF-8 at byte {offset + error.start}", where=self.path,
                                 fix="fix the record, or use --on-error skip to skip such records") from None
            try:
                value = json.loads(decoded)
            except json.JSONDecodeError as error:
                raise InputError(f"invalid JSON at byte {offset} ({error.msg})", where=self.path) from None
            except RecursionError:
                raise InputError("JSON nested too deeply", where=self.path, byte=offset) from None
            except ValueError as error:  # e.g. a number past Python's 4,300-digit limit
                raise InputError(f"unreadable JSON ({str(error).split(':')[0]})", where=self.path, byte=offset) from None
            text = value.get(self.text_field) if isinstance(value, dict) else None
            if not isinstance(text, str):
                raise self._no_text_field(value, offset)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:  # JSON may escape a lone surrogate; no encoder can take it
                raise InputError(f"field {self.text_field!r} holds a lone surrogate "
                                 f"(U+{ord(text[error.start]):04X}), which is not text", where=self.path, byte=offset,
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
                 separator: str | None = None) -> None:
        import pyarrow.parquet as pq

        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self.text_field = text_field
        try:
            self._file = pq.ParquetFile(self.path)
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(f"not a readable Parquet file ({str(error).splitlines()[0]})", where=self.path) from None
        if text_field not in self._file.schema_arrow.names:
            raise InputError(f"no column {text_field!r} (has {self._file.schema_arrow.names})", where=self.path)
        counts = [self._file.metadata.row_group(i).num_rows for i in range(self._file.num_row_groups)]
        self._group_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)

    @property
    def n_units(self) -> int:
        return int(self._group_starts[-1])

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        # Each row is estimated at its row group's mean (the text column's uncompressed size).
        column = self._file.schema_arrow.names.index(self.text_field)
        metadata = self._file.metadata
        per_row = [metadata.row_group(g).column(column).total_uncompressed_size / max(metadata.row_group(g).num_rows, 1)
                   for g in range(self._file.num_row_groups)]
        rows = np.arange(first, last)
        groups = np.searchsorted(self._group_starts, rows, side="right") - 1
        return np.maximum(np.asarray(per_row)[groups], 1).astype(np.int64) if len(rows) else np.zeros(0, np.int64)

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        import pyarrow as pa

        last = self.n_units if last is None else last
        for group in range(self._file.num_row_groups):
            low, high = int(self._group_starts[group]), int(self._group_starts[group + 1])
            if high <= first or low >= last:
                continue
            problem: str | None
            try:
                column = self._file.read_row_group(group, columns=[self.text_field]).column(0)
                if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                    # Decoded here, row by row, so invalid UTF-8 is reported with its row.
                    column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
                values = column.to_pylist()[max(first, low) - low : min(last, high) - low]
            except (OSError, ValueError) as error:
                problem = f"{self.path}: row group {group} (rows {low}-{high - 1}) unreadable ({str(error).splitlines()[0]})"
                if self.on_error == "skip":
                    self._skip(problem)
                    continue
                raise InputError(problem) from None
            for row, value in enumerate(values, start=max(first, low)):
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
                    raise InputError(problem, fix="fix the row, or use --on-error skip to skip such rows")
                yield from self._cut_text(value, f"{self.path} row {row}")


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
    if manifest is not None:
        if source_type is not TextFile:
            raise InputError(f"--manifest splits one text file; {path} is read as {kind}", fix="drop --manifest")
        return TextFile(path, document_bytes=document_bytes, on_error=on_error, separator=separator, manifest=Path(manifest))
    if source_type.takes_text_field:
        return source_type(path, document_bytes=document_bytes, on_error=on_error, text_field=text_field,  # type: ignore[call-arg]
                           separator=separator)
    return source_type(path, document_bytes=document_bytes, on_error=on_error, separator=separator)


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
        InputError: naming ``--separator`` and the fix.
    """
    if separator is None:
        return
    if not isinstance(separator, str) or not separator:
        raise InputError(f"must be a non-empty string, got {separator!r}", where="--separator",
                         fix="e.g. --separator '<|endoftext|>', or --separator $'\\n\\n' for a blank line")
    try:
        separator.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{separator!r} is not valid text (a lone surrogate)", where="--separator") from None


#: Every input format by name: adding one is a class above and a line here (and a suffix below).
FORMATS: dict[str, type[DocumentSource]] = {
    "text": TextFile, "directory": TextDirectory, "jsonl": JsonLines, "parquet": ParquetTexts,
}
#: File name suffixes that select a record format; any other file is one text file.
SUFFIXES: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def format_of(path: Path) -> str:
    """The format :func:`open_corpus` reads ``path`` in: a folder is ``directory``, else by suffix.

    >>> format_of(Path("a.ndjson")), format_of(Path("a.txt"))
    ('jsonl', 'text')
    """
    return "directory" if path.is_dir() else SUFFIXES.get(path.suffix, "text")


#: Bytes read or validated per step, so memory stays flat on a large file.
_CHUNK = 16 << 20


def _bounds(cuts: Iterator[tuple[int, int]]) -> np.ndarray:
    """``(begin, end)`` pairs as an ``(n, 2)`` ``int64`` array, built without a list of tuples.

    >>> _bounds(iter([(0, 3), (3, 5)])).tolist()
    [[0, 3], [3, 5]]
    """
    return np.fromiter(itertools.chain.from_iterable(cuts), dtype=np.int64).reshape(-1, 2)


def _decode(data: bytes | FileBytes, begin: int, end: int, where: str, fix: str | None = None) -> str:
    """The text of bytes ``[begin, end)``.

    Raises:
        InputError: invalid UTF-8, naming ``where``, the byte offset and ``fix``.
    """
    try:
        return data[begin:end].decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"invalid UTF-8 at byte {begin + error.start}", where=where, fix=fix) from None


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
