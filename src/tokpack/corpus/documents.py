"""Cutting a corpus into documents: the rule that fixes where BPE may never merge across.

A document never spans a range boundary and is at most ``document_bytes`` long. It ends at the
last newline at or before that limit (the newline belongs to it); with no newline there, it ends
at the limit moved back to the start of a UTF-8 character, so no character is ever split.

With a ``separator`` (``<|endoftext|>``, a blank line, ...), every occurrence of it ends a
document and belongs to none: the text is first split at its occurrences, found left to right
without overlap, and each piece is then cut by the rule above; an empty piece is no document.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokpack._files import FileBytes

from tokpack.errors import InputError

#: The longest UTF-8 character: a smaller limit could leave no room for one.
MIN_DOCUMENT_BYTES = 4


def cut_documents(data: bytes | memoryview | FileBytes, start: int, end: int, document_bytes: int,
                  separator: bytes | None = None) -> Iterator[tuple[int, int]]:
    """Yield ``(begin, end)`` byte offsets of the documents of ``data[start:end]``.

    Args:
        data: the whole corpus (``bytes`` or a memory map).
        start, end: the range to cut; an empty range yields nothing.
        document_bytes: the longest document, at least 4.
        separator: the UTF-8 bytes that end a document and belong to none (``None``: no separator).

    >>> list(cut_documents(b"ab\\ncd\\nef", 0, 8, 4))
    [(0, 3), (3, 6), (6, 8)]
    >>> list(cut_documents("żżż".encode(), 0, 6, 5))  # no newline: back to a character start
    [(0, 4), (4, 6)]
    >>> data = b"one<|endoftext|><|endoftext|>two<|endoftext|>"
    >>> [data[a:b] for a, b in cut_documents(data, 0, len(data), 64, b"<|endoftext|>")]
    [b'one', b'two']

    Raises:
        InputError: ``document_bytes`` below 4.
    """
    if document_bytes < MIN_DOCUMENT_BYTES:
        raise InputError(f"document_bytes must be at least {MIN_DOCUMENT_BYTES}, got {document_bytes}")
    if not separator:
        yield from _cut_lines(data, start, end, document_bytes)
        return
    begin = start
    for found in separator_offsets(data, start, end, separator):
        yield from _cut_lines(data, begin, found, document_bytes)
        begin = found + len(separator)
    yield from _cut_lines(data, begin, end, document_bytes)


#: Bytes searched for a separator per read, so memory stays flat on a large file.
_CHUNK = 16 << 20


def separator_offsets(data: bytes | memoryview | FileBytes, start: int, end: int, separator: bytes,
                      *, chunk: int = _CHUNK) -> Iterator[int]:
    """Offsets of the occurrences of ``separator`` in ``data[start:end]``, left to right, none
    overlapping the one before, read ``chunk`` bytes at a time.

    >>> list(separator_offsets(b"a\\n\\n\\nb\\n\\n", 0, 7, b"\\n\\n", chunk=3))
    [1, 5]
    """
    width = len(separator)
    chunk = max(chunk, 2 * width)
    low = start
    while low < end:
        high = min(low + chunk, end)
        window = bytes(data[low:high])
        at = 0
        while (found := window.find(separator, at)) >= 0:
            yield low + found
            at = found + width
        if high == end:
            return
        low += max(at, len(window) - width + 1)  # an occurrence may straddle the window's end


def inside_separator(data: bytes | memoryview | FileBytes, offset: int, separator: bytes) -> bool:
    """Whether byte ``offset`` falls strictly inside an occurrence of ``separator`` (a range
    boundary there would cut the separator in two, leaving its halves in two documents).

    >>> inside_separator(b"ab<|x|>cd", 4, b"<|x|>"), inside_separator(b"ab<|x|>cd", 2, b"<|x|>")
    (True, False)
    """
    width = len(separator)
    low = max(offset - width + 1, 0)
    window = bytes(data[low : min(offset + width - 1, len(data))])
    found = window.find(separator)
    while found >= 0:
        if low + found < offset < low + found + width:
            return True
        found = window.find(separator, found + 1)
    return False


def _cut_lines(data: bytes | memoryview | FileBytes, start: int, end: int, document_bytes: int) -> Iterator[tuple[int, int]]:
    position = start
    while position < end:
        limit = position + document_bytes
        if limit >= end:
            yield position, end
            return
        newline = data.rfind(b"\n", position, limit)  # type: ignore[union-attr]
        if newline >= 0:
            cut = newline + 1
        else:
            cut = limit
            while cut > position and data[cut] & 0xC0 == 0x80:  # a continuation byte
                cut -= 1
            if cut == position:  # not UTF-8 at all; decoding will name the offset
                cut = limit
        yield position, cut
        position = cut
