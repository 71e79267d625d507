"""What a file's first bytes say it is: compressed (gzip, zstd, bz2, xz), read as the bytes it
decompresses to whatever its name; or binary (an executable, a Parquet file, an image), named as
such rather than read as text that is not UTF-8.
"""

from __future__ import annotations

import bz2
import hashlib
import lzma
import zlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from tokpack.errors import InputError

#: Magic bytes of each compression a corpus file may come in.
COMPRESSIONS: dict[str, tuple[bytes, ...]] = {
    "gzip": (b"\x1f\x8b",),
    # A zstd file may open with a skippable frame (magic 0x184D2A50 to 0x184D2A5F, little-endian),
    # as pzstd's and the seekable format's do; zstd -d passes over it.
    "zstd": (b"\x28\xb5\x2f\xfd", *(bytes([0x50 + kind]) + b"\x2a\x4d\x18" for kind in range(16))),
    # "BZh" alone opens some text: a bz2 stream goes on with its block size (1-9) and the magic
    # number of a block (pi) or of its end (sqrt(pi), an empty stream).
    "bz2": tuple(b"BZh%d" % level + magic for level in range(1, 10)
                 for magic in (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")),
    "xz": (b"\xfd7zXZ\x00",),
}
#: File name endings of the compressions, which a format is read through (``a.jsonl.gz`` is JSON Lines).
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")
#: Bytes decompressed per step, so memory stays flat.
_BLOCK = 1 << 20


def compression_of(head: bytes) -> str | None:
    """The compression whose magic bytes open ``head``, or ``None``.

    >>> import gzip
    >>> compression_of(gzip.compress(b"text")), compression_of(b"text")
    ('gzip', None)
    """
    return next((name for name, magics in COMPRESSIONS.items() if head.startswith(magics)), None)


def file_compression(path: Path) -> str | None:
    """The compression of the file at ``path`` (by its first bytes), or ``None``."""
    with open(path, "rb") as handle:
        return compression_of(handle.read(16))


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
        for block in _blocks(kind, raw, path):
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


#: What a decompressor raises on data that is not its format, or is damaged.
_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError)
#: Compressed bytes given to a zstd decompressor at a time: its output for one call is not bounded
#: (a block of one repeated byte is 4 bytes for 128 KiB), so the input is, to at most 32 MiB out.
_ZSTD_SLICE = 1 << 10


def _bounded(decompressor: Any, data: bytes) -> Generator[bytes, None, bytes | None]:
    """Decompress ``data`` with a gzip (zlib), bz2 or xz decompressor, ``_BLOCK`` bytes out at a
    time; what it holds back (input not yet read, output not yet given) is asked for until it
    needs more input. Returns the bytes after the stream's end, or ``None`` if it has not ended."""
    out = decompressor.decompress(data, _BLOCK)
    yield out
    while not decompressor.eof and _holds_more(decompressor, full=len(out) == _BLOCK):
        out = decompressor.decompress(getattr(decompressor, "unconsumed_tail", b""), _BLOCK)
        yield out
    return bytes(decompressor.unused_data) if decompressor.eof else None


def _holds_more(decompressor: Any, *, full: bool) -> bool:
    """Whether a decompressor that just gave ``_BLOCK`` bytes or fewer (``full``: exactly that)
    has more to give before it needs input: zlib keeps input it did not read (and may have output
    pending when it filled the block); bz2 and xz say whether they need input."""
    if hasattr(decompressor, "unconsumed_tail"):
        return bool(decompressor.unconsumed_tail) or full
    return not decompressor.needs_input


def _sliced(decompressor: Any, data: bytes) -> Generator[bytes, None, bytes | None]:
    """Decompress ``data`` with a zstd decompressor, a slice of input at a time; returns the bytes
    after its frame's end, or ``None`` if it has not ended."""
    for offset in range(0, len(data), _ZSTD_SLICE):
        yield decompressor.decompress(data[offset : offset + _ZSTD_SLICE])
        if decompressor.eof:
            return bytes(decompressor.unused_data) + data[offset + _ZSTD_SLICE :]
    return None


def _zstd_decompressor() -> Any:
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj()


#: Per compression: a new decompressor of one stream (a gzip member, a bz2 or xz stream, a zstd
#: frame), and how to feed it with bounded output.
_STREAMS: dict[str, tuple[Callable[[], Any], Callable[[Any, bytes], Generator[bytes, None, bytes | None]]]] = {
    "gzip": (lambda: zlib.decompressobj(wbits=31), _bounded),
    "bz2": (bz2.BZ2Decompressor, _bounded),
    "xz": (lambda: lzma.LZMADecompressor(format=lzma.FORMAT_XZ), _bounded),
    "zstd": (_zstd_decompressor, _sliced),
}


def _blocks(kind: str, raw: BinaryIO, path: Path) -> Iterator[bytes]:
    """The decompressed bytes of every stream of a ``kind`` file, one after another as ``gunzip``,
    ``bunzip2``, ``unxz`` and ``zstd -d`` read them, with flat memory. NUL bytes between or after
    streams are padding (as gzip and xz allow); anything else after a stream must be another one
    (a damaged one is refused: the standard library's bz2 and xz readers would stop there
    quietly, dropping the text of every later stream); a file that ends inside one is refused.
    """
    new, feed = _STREAMS[kind]
    errors = _ERRORS
    if kind == "zstd":
        import zstandard

        errors = (*_ERRORS, zstandard.ZstdError)
    decompressor = None
    pending = b""
    while pending or (pending := raw.read(_BLOCK)):
        if decompressor is None:
            pending = pending.lstrip(b"\x00")
            if not pending:
                continue
            decompressor = new()
        try:
            rest = yield from feed(decompressor, pending)
        except errors as error:
            raise _damaged(path, kind, f"is damaged ({error})", raw) from None
        pending = rest or b""
        decompressor = None if rest is not None else decompressor
    if decompressor is not None:
        raise _damaged(path, kind, "ends before its end-of-stream marker" if kind != "zstd" else "ends inside a frame", raw)


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
