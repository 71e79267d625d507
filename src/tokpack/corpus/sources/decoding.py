"""Reading a source's bytes as text: UTF-8 spans and checks, line ends, and files that are no text."""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from tokpack._compressed import binary_kind
from tokpack._files import FileBytes
from tokpack.errors import InputError

#: Bytes read or validated per step, so memory stays flat on a large file.
CHUNK_BYTES = 16 << 20


def bounds_array(cuts: Iterator[tuple[int, int]]) -> np.ndarray:
    """``(begin, end)`` pairs as an ``(n, 2)`` ``int64`` array, built without a list of tuples.

    >>> bounds_array(iter([(0, 3), (3, 5)])).tolist()
    [[0, 3], [3, 5]]
    """
    return np.fromiter(itertools.chain.from_iterable(cuts), dtype=np.int64).reshape(-1, 2)



def decode_span(data: bytes | FileBytes, begin: int, end: int, where: str, fix: str | None = None, *,
                skippable: bool = False, read: bytes | None = None) -> str:
    """The text of bytes ``[begin, end)`` of ``data`` (or ``read``, those bytes as the caller read
    them: then they are what is decoded, and ``data`` only tells what kind of file it is, even if
    it changed since).

    Raises:
        InputError: invalid UTF-8, naming ``where``, the byte offset and ``fix``; or a file that
            is no text at all (see :func:`not_text`, told whether the file is ``skippable``).
    """
    try:
        return (data[begin:end] if read is None else read).decode("utf-8")
    except UnicodeDecodeError as error:
        raise not_text(data, where, skippable=skippable) or InputError(
            f"invalid UTF-8 at byte {begin + error.start}", where=where, fix=fix) from None


def not_text(data: bytes | FileBytes, where: str | Path, *, skippable: bool = False) -> InputError | None:
    """The error for bytes that are not UTF-8 because they are no text at all (a Parquet file, an
    executable, an image: see :func:`tokpack._compressed.binary_kind`), or ``None``. A
    ``skippable`` file (one of a folder's) is also offered ``on_error='skip'``: a lone file is not,
    as skipping it would leave nothing to read.

    >>> print(not_text(b"PAR1\\x15\\x04", "d/x.parquet"))
    d/x.parquet: is a Parquet file, not text; give a Parquet file as the corpus itself (its text column is read), or move it out of a folder of text files
    """
    kind = binary_kind(data[0:8192])
    if kind is None:
        return None
    if kind.startswith("UTF-16"):
        return InputError(f"is {kind}", where=where, fix="convert it to UTF-8 (e.g. iconv -f utf-16 -t utf-8)")
    fix = ("give a Parquet file as the corpus itself (its text column is read), or move it out of a folder of text files"
           if kind == "a Parquet file" else "give text files only: move it out of the corpus, or extract its text first")
    return InputError(f"is {kind}, not text", where=where, fix=fix + (", or leave it out with on_error='skip'"
                                                                      if skippable else ""))


def line_ends(data: FileBytes) -> np.ndarray:
    """Offsets just past every newline of ``data``, found chunk by chunk with numpy.

    >>> import tempfile
    >>> sample = Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = sample.write_bytes(b"a\\nbb\\n\\nc")
    >>> line_ends(FileBytes(sample)).tolist()
    [2, 5, 6]
    """
    found = [np.flatnonzero(np.frombuffer(data[offset : offset + CHUNK_BYTES], dtype=np.uint8) == ord("\n")) + offset + 1
             for offset in range(0, len(data), CHUNK_BYTES)]
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def invalid_utf8_offset(data: bytes | FileBytes, chunk: int = CHUNK_BYTES) -> int | None:
    """Where ``data`` stops being UTF-8, or ``None``; validated ``chunk`` bytes at a time, so no
    whole-file string is ever built.

    >>> invalid_utf8_offset("żółw".encode(), chunk=3), invalid_utf8_offset(b"ab\\xffc")
    (None, 2)
    >>> invalid_utf8_offset("aż".encode() + b"\\xc5(", chunk=2)  # a bad sequence across chunks
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
