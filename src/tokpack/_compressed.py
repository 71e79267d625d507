"""What a file's first bytes say it is: compressed (gzip, zstd, bz2, xz), read as the bytes it
decompresses to whatever its name; or binary (an executable, a Parquet file, an image), named as
such rather than read as text that is not UTF-8.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from tokpack.errors import InputError

#: Magic bytes of each compression a corpus file may come in.
COMPRESSIONS: dict[str, tuple[bytes, ...]] = {
    "gzip": (b"\x1f\x8b",),
    # A zstd file may open with a skippable frame (magic 0x184D2A50 to 0x184D2A5F, little-endian),
    # as pzstd's and the seekable format's do; zstd -d passes over it.
    "zstd": (b"\x28\xb5\x2f\xfd", *(bytes([0x50 + kind]) + b"\x2a\x4d\x18" for kind in range(16))),
    "bz2": (b"BZh",),
    "xz": (b"\xfd7zXZ\x00",),
}
#: File name endings of the compressions, which a format is read through (``a.jsonl.gz`` is JSON Lines).
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")
#: Bytes decompressed per step, so memory stays flat.
_BLOCK = 1 << 20


def compression_of(head: bytes) -> str | None:
    """The compression whose magic bytes open ``head``, or ``None``.

    >>> compression_of(gzip.compress(b"text")), compression_of(b"text")
    ('gzip', None)
    """
    return next((name for name, magics in COMPRESSIONS.items() if head.startswith(magics)), None)


def file_compression(path: Path) -> str | None:
    """The compression of the file at ``path`` (by its first bytes), or ``None``."""
    with open(path, "rb") as handle:
        return compression_of(handle.read(8))


def decompress_into(path: Path, out: BinaryIO) -> tuple[str, int]:
    """Write the decompressed bytes of the compressed file ``path`` to ``out``; return their
    SHA-256 and length.

    Raises:
        InputError: a damaged file, or one that ends before its compressed stream does (naming
            the compressed byte offset reached and the fix).
    """
    kind = file_compression(path)
    if kind is None:
        raise InputError("is not compressed", where=path)
    digest, total = hashlib.sha256(), 0
    with open(path, "rb") as raw:
        for block in _DECOMPRESSORS[kind](raw, path):
            digest.update(block)
            out.write(block)
            total += len(block)
    out.flush()
    return digest.hexdigest(), total


_DAMAGED_FIX = "the file was cut short or damaged; copy or download it again"


def _damaged(path: Path, kind: str, what: str, raw: BinaryIO) -> InputError:
    try:
        at: int | None = raw.tell()
    except (OSError, ValueError):
        at = None
    return InputError(f"cannot be decompressed: its {kind} stream {what}", where=path, byte=at, fix=_DAMAGED_FIX)


def _library_stream(kind: str, opener: Callable[[BinaryIO], io.BufferedIOBase]) -> Callable[[BinaryIO, Path], Iterator[bytes]]:
    """Blocks of a gzip, bz2 or xz file through the standard library's reader (every member or
    stream, one after another, as ``gunzip`` reads them)."""

    def blocks(raw: BinaryIO, path: Path) -> Iterator[bytes]:
        stream = opener(raw)
        while True:
            try:
                block = stream.read(_BLOCK)
            except EOFError:
                raise _damaged(path, kind, "ends before its end-of-stream marker", raw) from None
            except (OSError, zlib.error, lzma.LZMAError) as error:  # gzip.BadGzipFile is an OSError
                raise _damaged(path, kind, f"is damaged ({error})", raw) from None
            if not block:
                return
            yield block

    return blocks


def _zstd_blocks(raw: BinaryIO, path: Path) -> Iterator[bytes]:
    """Blocks of a zstd file of one or more frames; a file that ends inside a frame is refused
    (``zstandard``'s stream reader would end quietly there)."""
    import zstandard

    decompressor = zstandard.ZstdDecompressor()
    frame = None
    while block := raw.read(_BLOCK):
        while block:
            frame = frame or decompressor.decompressobj()
            try:
                out = frame.decompress(block)
            except zstandard.ZstdError as error:
                raise _damaged(path, "zstd", f"is damaged ({error})", raw) from None
            if out:
                yield out
            block = frame.unused_data if frame.eof else b""
            frame = None if frame.eof else frame
    if frame is not None:
        raise _damaged(path, "zstd", "ends inside a frame", raw)


_DECOMPRESSORS: dict[str, Callable[[BinaryIO, Path], Iterator[bytes]]] = {
    "gzip": _library_stream("gzip", lambda raw: gzip.GzipFile(fileobj=raw)),
    "bz2": _library_stream("bz2", lambda raw: bz2.BZ2File(raw)),
    "xz": _library_stream("xz", lambda raw: lzma.LZMAFile(raw)),
    "zstd": _zstd_blocks,
}

#: Magic bytes of binary formats a corpus folder may hold by mistake, and what to call them.
BINARY_FORMATS: dict[bytes, str] = {
    b"PAR1": "a Parquet file",
    b"\x7fELF": "an executable or shared library (ELF)",
    b"MZ": "a Windows executable",
    b"\xca\xfe\xba\xbe": "a Java class or Mach-O binary",
    b"\xcf\xfa\xed\xfe": "a Mach-O binary",
    b"\x00asm": "a WebAssembly module",
    b"PK\x03\x04": "a zip archive (or .docx, .xlsx, .jar, .whl)",
    b"7z\xbc\xaf\x27\x1c": "a 7-Zip archive",
    b"Rar!": "a RAR archive",
    b"%PDF": "a PDF document",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"SQLite format 3\x00": "an SQLite database",
    b"\x93NUMPY": "a NumPy array",
    b"ARROW1": "an Arrow file",
    b"\xde\x12\x04\x95": "a compiled gettext catalog (.mo)",
    b"\x95\x04\x12\xde": "a compiled gettext catalog (.mo)",
    b"\xff\xfe": "UTF-16 text (a little-endian byte-order mark), not UTF-8",
    b"\xfe\xff": "UTF-16 text (a big-endian byte-order mark), not UTF-8",
}


def binary_kind(head: bytes) -> str | None:
    """What the first bytes of a file that is not UTF-8 say it is, if they say it is no text at
    all: a known binary format, or binary data (a NUL byte early on); ``None`` for text in
    another encoding.

    >>> binary_kind(b"PAR1\\x15\\x04"), binary_kind(b"abc\\x00\\x01"), binary_kind("żółw".encode("iso8859_2"))
    ('a Parquet file', 'binary data (a NUL byte at byte 3)', None)
    """
    for magic, name in BINARY_FORMATS.items():
        if head.startswith(magic):
            return name
    if head[257:262] == b"ustar":
        return "a tar archive"
    nul = head.find(b"\x00", 0, 8192)
    return None if nul < 0 else f"binary data (a NUL byte at byte {nul})"
