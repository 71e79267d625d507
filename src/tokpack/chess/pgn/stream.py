"""PGN inputs as streams: compressed files and standard input opened as decompressed bytes, cut into chunks that end where a game starts.

:func:`open_pgn` opens ``.pgn``, ``.pgn.zst``, ``.pgn.bz2``, ``.pgn.gz`` (recognised by their
magic bytes) or ``-`` (standard input) as one decompressed byte stream (a compressed file that does
not end cleanly is an error naming the offset, never a shorter stream); :func:`pgn_chunks` cuts it
into text chunks that end where a game ends, so memory is flat in the file's size. A chunk ends only
where a game starts whatever came before (:func:`last_game_start`), so how a file is cut into chunks
never changes a game; :mod:`tokpack.chess.pgn.read` reads a chunk's games.
"""

from __future__ import annotations

import bz2
import gzip
import io
import re
import sys
import zlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tokpack.errors import InputError

#: Bytes read (decompressed) per chunk; a chunk grows until it ends at a game's start. Reading a
#: chunk (its text, the scanners' arrays) peaks at several times its size, and that spike sets the
#: converter's memory; 4 MiB of Lichess-style games (about 2,900) are still a large batch for the
#: compiled steps.
CHUNK_BYTES = 4 << 20
#: A chunk grows up to this many bytes to end where a game surely starts (see
#: :func:`last_game_start`); past it, a comment never closed for that long, it ends before any tags.
MAX_GAME_BYTES = 64 << 20
_MAGIC = {b"\x28\xb5\x2f\xfd": "zstd", b"\x1f\x8b": "gzip", b"BZh": "bz2"}
# A zstd file may open with a skippable frame (magic 0x184D2A50 to 0x184D2A5F, little-endian), as
# pzstd's and the seekable format's do: ``zstd -d`` passes over it, and so must the reader.
_MAGIC.update({bytes([0x50 + kind]) + b"\x2a\x4d\x18": "zstd" for kind in range(16)})

def open_pgn(path: Path | str) -> tuple[BinaryIO, BinaryIO]:
    """One file (or ``-``, standard input) as a stream of decompressed bytes, and the raw file under it.

    Raises:
        InputError: the file cannot be opened, or is not a regular file.
    """
    if str(path) == "-":
        raw: BinaryIO = sys.stdin.buffer
    else:
        path = Path(path)
        if not path.is_file():
            raise InputError("not a file", where=path)
        try:
            raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
        except OSError as error:
            raise InputError(error.strerror or "cannot be read", where=path) from None
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    head = buffered.peek(4)[:4]
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            if kind == "zstd":
                return _ZstdFrames(buffered, str(path)), raw  # type: ignore[return-value]
            inner: gzip.GzipFile | bz2.BZ2File = gzip.GzipFile(fileobj=buffered) if kind == "gzip" else bz2.BZ2File(buffered)
            return _Checked(inner, raw, str(path), kind), raw  # type: ignore[return-value]
    return buffered, raw


_TRUNCATED_FIX = "the file was cut short or damaged; copy or download it again"


class _ZstdFrames:
    """The decompressed bytes of a zstd file of one or more frames, read as a stream.

    Unlike ``zstandard``'s stream reader, which ends quietly where the file does, a file that
    ends inside a frame (cut at any byte after a frame's first) or holds a damaged frame is an
    :class:`~tokpack.errors.InputError` naming the file and the compressed byte offset.
    """

    def __init__(self, raw: BinaryIO, where: str) -> None:
        import zstandard

        self._raw, self._where, self._zstd = raw, where, zstandard
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame: zstandard.ZstdDecompressionObj | None = None  # the frame under way
        self._frame_start = 0  # its compressed offset
        self._consumed = 0  # compressed bytes decompressed so far
        self._pieces: deque[bytes | memoryview] = deque()  # decompressed and not read yet, in order
        self._ready = 0  # their bytes

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` decompressed bytes (all that is left for -1); ``b""`` at the end.

        The decompressor's pieces are kept as they come and joined once into what is read (a
        growing and shrinking ``bytearray`` would move the bytes twice more).
        """
        while (size < 0 or self._ready < size) and self._decompress_more():
            pass
        if size < 0 or size >= self._ready:
            taken, self._pieces, self._ready = list(self._pieces), deque(), 0
        else:
            taken, left = [], size
            while left:
                piece = self._pieces.popleft()
                if len(piece) > left:
                    view = memoryview(piece)
                    taken.append(view[:left])
                    self._pieces.appendleft(view[left:])
                    break
                taken.append(piece)
                left -= len(piece)
            self._ready -= size
        if len(taken) == 1 and isinstance(taken[0], bytes):
            return taken[0]
        return b"".join(taken)

    def _decompress_more(self) -> bool:
        block = self._raw.read(1 << 20)
        if not block:
            if self._frame is not None:
                raise InputError(f"not a readable zstd stream: the frame starting at byte {self._frame_start} "
                                 "is cut short (the file ends before the frame does)", where=self._where, byte=self._consumed,
                                 fix=_TRUNCATED_FIX)
            return False
        while block:
            if self._frame is None:
                self._frame, self._frame_start = self._decompressor.decompressobj(), self._consumed
            try:
                out = self._frame.decompress(block)
            except self._zstd.ZstdError as error:
                # zstd cannot say which byte is bad (a checksum fails at the frame's end): report the
                # compressed offset where reading failed, and the frame that holds the damage.
                failed_at = self._consumed + len(block)
                raise InputError(f"not a readable zstd stream: the frame starting at byte "
                                 f"{self._frame_start:,} is damaged before this byte ({error})", where=self._where,
                                 byte=failed_at, fix=_TRUNCATED_FIX) from None
            if out:
                self._pieces.append(out)
                self._ready += len(out)
            if not self._frame.eof:
                self._consumed += len(block)
                break
            rest = self._frame.unused_data
            self._consumed += len(block) - len(rest)
            self._frame, block = None, rest
        return True

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> _ZstdFrames:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Checked:
    """A gzip or bz2 stream whose read errors (a truncated or damaged file) are an
    :class:`~tokpack.errors.InputError` naming the file and the compressed byte offset reached."""

    def __init__(self, stream: gzip.GzipFile | bz2.BZ2File, raw: BinaryIO, where: str, kind: str) -> None:
        self._stream, self._raw, self._where, self._kind = stream, raw, where, kind

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` decompressed bytes; ``b""`` at the end."""
        try:
            return self._stream.read(size)
        except (OSError, EOFError, zlib.error) as error:  # gzip.BadGzipFile is an OSError
            try:
                at: int | None = int(self._raw.tell())
            except (OSError, ValueError):
                at = None
            what = "ends before its end-of-stream marker" if isinstance(error, EOFError) else f"is damaged ({error})"
            raise InputError(f"cannot be read: the {self._kind} stream {what}", where=self._where, byte=at,
                             fix=_TRUNCATED_FIX) from None

    def close(self) -> None:
        self._stream.close()
        self._raw.close()

    def __enter__(self) -> _Checked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pgn_chunks(stream: BinaryIO, where: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, bytes)`` pieces of a decompressed stream, each ending just before a game's tags.

    Raises:
        InputError: the compressed stream is corrupt or truncated.
    """
    offset, pending = 0, b""
    while True:
        try:
            block = stream.read(chunk_bytes)
        except InputError:
            raise
        except (OSError, EOFError, ValueError) as error:  # a decompressor's own errors
            raise InputError(f"byte {offset + len(pending)} of the decompressed text: cannot be read ({error})", where=where) from None
        if not block:
            break
        pending += block
        cut = last_game_start(pending)
        if cut < 0 and len(pending) >= max(chunk_bytes, MAX_GAME_BYTES):
            cut = max(pending.rfind(b"\n\n["), pending.rfind(b"\n\r\n["))  # no sure start: any will do
            cut = pending.index(b"[", cut) if cut > 0 else -1
        if cut <= 0:
            continue
        yield offset, pending[:cut]
        offset += cut
        pending = pending[cut:]
    if pending:
        yield offset, pending


def last_game_start(data: bytes) -> int:
    """The start of the last line of ``data`` where a game starts whatever came before, or -1.

    That is a ``[`` after a blank line, outside any brace comment (the last brace before it is a
    ``}``, or there is none), and not after a paragraph ending in a tag or escape line, unless
    two blank lines come between (:func:`cut_games` joins tags to tags after one blank line). A
    chunk cut there reads as the whole text does.
    """
    end = len(data)
    while True:
        cut = data.rfind(b"\n\n[", 0, end)
        cut = max(cut, data.rfind(b"\n\r\n[", cut + 1, end))  # only the text after it: the last of the two
        if cut <= 0:
            # ``\r`` line ends, or blank lines holding spaces or tabs: the same search, slower
            return _last_start_spaced(data) if b"\r" in data or b"\n[" not in data else -1
        if (found := _start_at(data, cut)) is not None:
            if found < 0:
                end = -found - 1
                continue
            return found
        end = cut


#: A blank line (which may hold spaces or tabs) before a line starting, after spaces or tabs, with ``[``.
_SPACED_START = re.compile(rb"\n[ \t]*\n[ \t]*\[")


def _last_start_spaced(data: bytes) -> int:
    """:func:`last_game_start` of a text whose line ends may be ``\\r`` and whose blank lines may hold
    spaces or tabs: searched in a copy of the same length with ``\\r\\n`` made `` \\n`` and ``\\r`` made
    ``\\n`` (a space at a line's end changes nothing the cut reads)."""
    plain = data.replace(b"\r\n", b" \n").replace(b"\r", b"\n")
    end = len(plain)
    for match in reversed(list(_SPACED_START.finditer(plain))):
        cut = match.start()
        if cut <= 0:
            break
        if match.end() > end:
            continue
        found = _start_at(plain, cut)
        if found is None:
            end = cut
        elif found < 0:
            end = -found - 1
        else:
            return found
    return -1


def _start_at(data: bytes, cut: int) -> int | None:
    """Whether the blank line at ``data[cut]`` starts a game whatever came before: the start of the
    ``[``'s line (where the cut puts the game, spaces before its ``[`` included); ``-1 - p`` when a ``{`` at ``p`` may hold it in a comment (so every ``[`` up to ``p``);
    None when it follows a paragraph ending in a tag or escape line (it may join that one)."""
    opened = data.rfind(b"{", data.rfind(b"}", 0, cut) + 1, cut)  # a '{' after the last '}'
    if opened >= 0:
        return -1 - opened
    if not _after_tag_line(data, cut):
        return data.rfind(b"\n", cut, data.index(b"[", cut)) + 1  # the start of the ``[``'s line
    return None


def _after_tag_line(data: bytes, cut: int) -> bool:
    """Whether the blank line at ``data[cut]`` is the only one after a line that is a tag or escape line."""
    j = cut
    while j > 0 and data[j - 1] in b" \t\r\n":
        j -= 1
    if data.count(b"\n", j, data.index(b"[", cut)) >= 3:
        return False
    line = data[data.rfind(b"\n", 0, j) + 1:j].lstrip()
    return line[:1] in (b"[", b"%", b";")
