"""Which files of a data folder are text a tokenizer may learn from or be graded on.

A data folder holds one file per source document; its first-level subfolders are *domains*
(``polish/narrative``, ``polish/code``, ...). :func:`corpus_files` lists the files that are real,
non-empty UTF-8 text in a stable order and reports every other file with the reason it was left
out, so nothing is used or dropped silently.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tokpack.errors import InputError

#: The domain of a file that sits directly in the data folder rather than in a subfolder.
ROOT_DOMAIN = "."


@dataclass(frozen=True)
class SkippedFile:
    """A file :func:`corpus_files` left out, and why (a short phrase naming the first problem)."""

    path: Path
    reason: str


@dataclass(frozen=True)
class CorpusFiles:
    """The usable text files of a data folder and the files left out.

    ``files`` are sorted by their path relative to ``root`` (code-point order of the POSIX form),
    so the order is the same on every machine and filesystem.
    """

    root: Path
    files: tuple[Path, ...]
    skipped: tuple[SkippedFile, ...]

    def __iter__(self) -> Iterator[Path]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, in POSIX form (the name manifests record)."""
        return path.relative_to(self.root).as_posix()

    def domain_of(self, path: Path) -> str:
        """The first-level subfolder holding ``path``, or ``"."`` for a file directly in the root."""
        parts = path.relative_to(self.root).parts
        return parts[0] if len(parts) > 1 else ROOT_DOMAIN

    def by_domain(self) -> dict[str, list[Path]]:
        """The files grouped by domain; domains sorted by name, files in listing order."""
        groups: dict[str, list[Path]] = {}
        for path in self.files:
            groups.setdefault(self.domain_of(path), []).append(path)
        return dict(sorted(groups.items()))


def read_document(path: Path) -> str:
    """The text of one document, byte for byte: strict UTF-8, line endings kept as written.

    (``Path.read_text`` would turn ``\\r\\n`` into ``\\n``, which a lossless tokenizer must see.)

    Raises:
        InputError: the file is unreadable or not UTF-8; the message names the file and the byte
            offset of the first invalid sequence.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"unreadable ({error.strerror or error})", where=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 (invalid byte at offset {error.start})", where=path) from None


def corpus_files(data_dir: Path) -> CorpusFiles:
    """List the real, non-empty UTF-8 text files under ``data_dir``, recursively.

    Left out, each with its reason in ``skipped``: hidden files and folders (name starting with
    ``.``), symbolic links (never followed, so no file is read twice or from outside the folder),
    anything that is not a regular file, unreadable files, empty or whitespace-only files, files
    with a NUL byte (binary), and files that are not valid UTF-8 (with the byte offset).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "code").mkdir(); _ = (root / "code" / "b.py").write_text("x = 1\\n")
    >>> _ = (root / "a.txt").write_bytes(b"\\xff"); _ = (root / "empty.txt").write_text("")
    >>> listing = corpus_files(root)
    >>> [listing.relative(p) for p in listing], [s.reason for s in listing.skipped]
    (['code/b.py'], ['not UTF-8 (invalid byte at offset 0)', 'empty'])

    Raises:
        InputError: ``data_dir`` is not a directory.
    """
    root = Path(data_dir)
    if not root.is_dir():
        what = "a file" if root.is_file() else "no such folder"
        raise InputError(f"not a directory ({what}); expected a folder of documents, one subfolder per domain", where=root,
                         fix=f"e.g. DIR/prose/{root.name if root.is_file() else 'a.txt'}, then pass DIR")
    files: list[Path] = []
    skipped: list[SkippedFile] = []
    for path in _walk(root, skipped):
        reason = _unusable_because(path)
        if reason is None:
            files.append(path)
        else:
            skipped.append(SkippedFile(path, reason))
    key = lambda path: path.relative_to(root).as_posix()  # noqa: E731 (a one-use sort key)
    return CorpusFiles(
        root=root,
        files=tuple(sorted(files, key=key)),
        skipped=tuple(sorted(skipped, key=lambda entry: key(entry.path))),
    )


def _walk(root: Path, skipped: list[SkippedFile]) -> Iterator[Path]:
    """Every non-hidden entry under ``root`` that is not a directory, recording hidden ones."""
    for folder, subfolders, names in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in list(subfolders):
            if name.startswith("."):
                skipped.append(SkippedFile(base / name, "hidden folder"))
                subfolders.remove(name)
            elif (base / name).is_symlink():
                skipped.append(SkippedFile(base / name, "symbolic link (not followed)"))
        for name in names:
            if name.startswith("."):
                skipped.append(SkippedFile(base / name, "hidden file"))
            else:
                yield base / name


def _unusable_because(path: Path) -> str | None:
    """Why ``path`` is not usable text, or None when it is."""
    try:
        mode = path.lstat().st_mode
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    if stat.S_ISLNK(mode):
        return "symbolic link (not followed)"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    try:
        data = path.read_bytes()
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    if not data:
        return "empty"
    nul = data.find(b"\0")
    if nul >= 0:
        return f"binary (NUL byte at offset {nul})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"not UTF-8 (invalid byte at offset {error.start})"
    if not text.strip():
        return "only whitespace"
    return None
