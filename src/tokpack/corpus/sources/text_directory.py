"""A folder of text files as a corpus: walked in sorted order, links followed, each file read once."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from tokpack._files import FileBytes, open_bytes, regular_file
from tokpack.corpus.documents import cut_documents
from tokpack.corpus.manifest import (
    MANIFEST_SUFFIX,
    Source,
    file_sha256,
)
from tokpack.corpus.sources.base import DocumentSource, Format, InputFile, OnError, Piece, Pins, Utf8Piece
from tokpack.corpus.sources.decoding import bounds_array, decode_span, invalid_utf8_offset, not_text
from tokpack.corpus.sources.spellings import spelled_in
from tokpack.corpus.sources.training_sample import line_span
from tokpack.errors import InputError


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
    link a user removes so that the walk does not reach ``entry`` that way."""
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
    _skips_whole_files: ClassVar[bool] = True

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", separator: str | None = None,
                 manifest: Path | None = None) -> None:
        self.path, self.on_error = Path(path), on_error
        manifest_outside(self.path, manifest)
        # A placeholder unit (begin == end == 0) stands for each unreadable entry, so that the pass
        # (or the shard) that reaches it counts the skip, once.
        self.files, self._unreadable = self._listing()
        self._text_bytes: dict[int, int] = {}
        self._sampling: tuple[int, FileBytes | None] | None = None  # the file a sample is reading
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
            bounds = bounds_array(cut_documents(data, 0, len(data), document_bytes, self.separator_bytes))
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
                if self.on_error == "skip" and invalid_utf8_offset(data) is not None:
                    continue  # left out of the pack whole (:meth:`_spans`): none of its text is read
                for token, (count, first) in spelled_in([(data, data.where)], tokens).items():
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
        first, last = line_span(data[low:high], head=low == begin, tail=high == end)
        return decode_span(data, low + first, low + last, data.where, self._utf8_fix,
                           skippable=self._skips_whole_files)

    def _sampled_file(self, index: int) -> FileBytes | None:
        """File ``index``'s bytes for a sample's pieces, kept open for the next one (a sample reads
        in file order); ``None`` when it cannot be read or, skipping bad files, is not UTF-8 (the
        pack leaves it out whole, and so does the sample)."""
        if self._sampling is not None and self._sampling[0] == index:
            return self._sampling[1]
        self.close()
        data = self._open(self.files[index])
        if data is not None and self.on_error == "skip" and invalid_utf8_offset(data) is not None:
            data.close()
            data = None
        self._sampling = (index, data)
        return data

    def close(self) -> None:
        if self._sampling is not None and self._sampling[1] is not None:
            self._sampling[1].close()
        self._sampling = None

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        for data, begin, end, index in self._spans(first, last):
            yield from self._cut(data, begin, end, data.where, unit=index)

    def utf8_pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece | Utf8Piece]:
        for data, begin, end, index in self._spans(first, last):
            yield from self._cut_bytes(data, begin, end, unit=index)

    def decoded(self, piece: Utf8Piece) -> str:
        index, begin, end = piece.origin
        data = self._open(self.files[index])  # (closed once its documents were read)
        if data is None:  # pragma: no cover - a file read a moment ago, unreadable now
            raise InputError("cannot be read", where=self.files[index])
        try:
            return decode_span(data, begin, end, data.where, self._utf8_fix, skippable=self._skips_whole_files,
                               read=piece.data)
        finally:
            data.close()

    def _spans(self, first: int, last: int | None) -> Iterator[tuple[FileBytes, int, int, int]]:
        """Each unit of ``[first, last)`` to read: its file's bytes (open while it is read), its
        span in them and its file's index; a file skipped is counted here."""
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
                bad = invalid_utf8_offset(data) if self.on_error == "skip" else None
                if bad is not None:  # the whole file is skipped: never half of it
                    if counted:
                        self._skip(str(not_text(data, data.where) or f"{data.where}: invalid UTF-8 at byte {bad}"))
                    continue
                for _, begin, end in same_file:
                    yield data, begin, end, index
            finally:
                data.close()


