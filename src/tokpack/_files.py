"""Reading a user's input files safely: regular files only, read by offset, and noticed if they change.

A FIFO or a device (``/dev/zero``) would block a reader forever or never end, so only regular
files are read. Corpus bytes are read with ``pread`` rather than a memory map: a file truncated
while it is read gives a short read, which becomes an :class:`~tokpack.errors.InputError`, where
a map would kill the process with SIGBUS. A :class:`Fingerprint` taken before a file is hashed
and compared after it was encoded tells whether the bytes encoded are the bytes hashed.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple, overload

from tokpack.errors import InputError

__all__ = ["FileBytes", "Fingerprint", "fingerprint", "open_bytes", "regular_file"]

#: Bytes hashed per read.
_HASH_CHUNK = 8 << 20


def regular_file(path: Path, what: str = "input") -> os.stat_result:
    """The ``stat`` of ``path`` if it is a regular file (a symlink to one counts).

    >>> regular_file(Path("/dev/null"))
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: /dev/null: not a regular file (a character device); an input must be a file
    """
    try:
        status = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):  # a folder's dangling link: say what it points to, and what to do
            raise InputError(f"a link to {os.readlink(path)}, which does not exist", where=path,
                             fix="remove the link or restore what it points to, or leave it out with on_error='skip'") from None
        raise InputError("missing", where=path) from None
    except OSError as error:
        raise InputError(f"cannot read ({error.strerror or error})", where=path) from None
    if not stat.S_ISREG(status.st_mode):
        raise InputError(f"not a regular file ({file_kind(status.st_mode)}); an {what} must be a file", where=path)
    return status


def file_kind(mode: int) -> str:
    """What a ``stat`` mode that is no regular file names: ``"a directory"``, ``"a FIFO"``, …."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


class Fingerprint(NamedTuple):
    """What changes when a file's bytes change: size, modification and change times, inode.

    ``st_ctime_ns`` cannot be set back by a user, so even a write that restores the
    modification time is seen.
    """

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


def fingerprint(paths: Iterable[Path]) -> tuple[Fingerprint, ...]:
    """The fingerprints of ``paths``, in order (a file that vanished has size ``-1``)."""
    found = []
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            found.append(Fingerprint(str(path), -1, 0, 0, 0))
            continue
        found.append(Fingerprint(str(path), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino))
    return tuple(found)


def changed(before: tuple[Fingerprint, ...]) -> Fingerprint | None:
    """The first file of ``before`` whose fingerprint is not the same now, or ``None``."""
    now = fingerprint(Path(entry.path) for entry in before)
    return next((old for old, new in zip(before, now) if old != new), None)


class FileBytes:
    """A regular file's bytes, read by offset: ``len``, slices, single bytes and ``rfind``, like
    ``bytes`` (enough for :func:`tokpack.corpus.documents.cut_documents`).

    >>> import tempfile
    >>> sample = Path(tempfile.mkdtemp()) / "x.txt"
    >>> _ = sample.write_bytes(b"ab\\ncd")
    >>> data = FileBytes(sample)
    >>> len(data), data[1:4], data[3], data.rfind(b"\\n", 0, 5)
    (5, b'b\\nc', 99, 2)

    Raises:
        InputError: the file is shorter than when it was opened (truncated while being read).
    """

    #: The compression the file's bytes were decompressed from (see :func:`open_bytes`), if any.
    compression: str | None = None

    def __init__(self, path: Path) -> None:
        self.path, self._descriptor = Path(path), -1
        regular_file(self.path)
        self._descriptor = os.open(self.path, os.O_RDONLY)
        self._size = os.fstat(self._descriptor).st_size
        self._sha256: str | None = None

    @property
    def where(self) -> str:
        """How messages name these bytes: the file, and whether they are its decompressed text."""
        return str(self.path) if self.compression is None else f"{self.path} (decompressed)"

    def sha256(self) -> str:
        """SHA-256 of the bytes (the decompressed ones, for a compressed file), read in chunks."""
        if self._sha256 is None:
            digest = hashlib.sha256()
            for offset in range(0, self._size, _HASH_CHUNK):
                digest.update(self._read(offset, min(_HASH_CHUNK, self._size - offset)))
            self._sha256 = digest.hexdigest()
        return self._sha256

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, key: int) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> bytes: ...

    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, slice):
            start, stop, step = key.indices(self._size)
            if step != 1:
                raise ValueError("FileBytes slices have step 1")
            return self._read(start, max(0, stop - start))
        index = key + self._size if key < 0 else key
        if not 0 <= index < self._size:
            raise IndexError(f"byte {key} outside a file of {self._size}")
        return self._read(index, 1)[0]

    def rfind(self, sub: bytes, start: int, end: int, *, block: int = 1 << 16) -> int:
        """The last offset of ``sub`` within ``[start, end)``, or -1 (``sub`` not empty), read
        backwards from ``end`` ``block`` bytes at a time: a document's cut looks for the last
        newline of a mebibyte, mostly within its last few hundred bytes.

        >>> import tempfile
        >>> sample = Path(tempfile.mkdtemp()) / "x.txt"
        >>> _ = sample.write_bytes(b"ab\\ncd\\nef")
        >>> data = FileBytes(sample)
        >>> data.rfind(b"\\n", 0, 8, block=2), data.rfind(b"\\ncd", 0, 8, block=1), data.rfind(b"\\n", 0, 2)
        (5, 2, -1)
        """
        start, end = max(start, 0), min(end, self._size)
        high = end
        while high > start:
            low = max(start, high - block)
            # Starts in [low, high): the part of ``sub`` past ``high`` is read too.
            found = self[low : min(end, high + len(sub) - 1)].rfind(sub)
            if found >= 0:
                return low + found
            high = low
        return -1

    def _read(self, offset: int, length: int) -> bytes:
        data = os.pread(self._descriptor, length, offset)
        while len(data) < length:  # pread may return less; only end-of-file returns nothing
            more = os.pread(self._descriptor, length - len(data), offset + len(data))
            if not more:
                raise InputError(f"ends at byte {offset + len(data)}, but it had {self._size} bytes when "
                                 "opened (truncated while being read)", where=self.path, fix="rerun once the file is complete")
            data += more
        return data

    def close(self) -> None:
        if self._descriptor >= 0:
            os.close(self._descriptor)
            self._descriptor = -1

    def __del__(self) -> None:
        self.close()


def open_bytes(path: Path) -> FileBytes:
    """The bytes a corpus file holds: its own, or, for a file compressed with gzip, zstd, bz2 or
    xz (told by its first bytes, whatever its name), the bytes it decompresses to, written once
    to an unnamed temporary file (``$TMPDIR``; gone when closed) so they are read by offset like
    any file's. Their SHA-256 is taken as they are written.

    >>> import gzip, tempfile
    >>> sample = Path(tempfile.mkdtemp()) / "x.txt.gz"
    >>> _ = sample.write_bytes(gzip.compress(b"ab\\ncd"))
    >>> data = open_bytes(sample)
    >>> data.compression, len(data), data[0:5], data.where.endswith("x.txt.gz (decompressed)")
    ('gzip', 5, b'ab\\ncd', True)

    Raises:
        InputError: not a regular file, or a damaged or truncated compressed one.
    """
    import tempfile

    from tokpack._atomic import full_disk
    from tokpack._compressed import decompress_into, file_compression

    regular_file(path)
    kind = file_compression(path)
    if kind is None:
        return FileBytes(path)
    with tempfile.TemporaryFile() as copy:
        try:
            sha256, size = decompress_into(path, copy)
        except OSError as error:
            full = full_disk(error, tempfile.gettempdir(), fix=f"a compressed corpus is decompressed there to be read: set "
                                                              f"TMPDIR to a folder on a disk with room for {path.name}'s text")
            if full is None:
                raise
            raise full from error
        data = FileBytes.__new__(FileBytes)
        data.path, data._descriptor, data._size = Path(path), os.dup(copy.fileno()), size
        data._sha256, data.compression = sha256, kind
    return data
