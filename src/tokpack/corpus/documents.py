"""Cutting a corpus into documents: the rule that fixes where BPE may never merge across.

A document never spans a range boundary and is at most ``document_bytes`` long. It ends at the
last newline at or before that limit (the newline belongs to it); with no newline there, it ends
at the limit moved back to the start of a UTF-8 character, so no character is ever split.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokpack._files import FileBytes

from tokpack.errors import InputError

#: The longest UTF-8 character: a smaller limit could leave no room for one.
MIN_DOCUMENT_BYTES = 4


def cut_documents(data: bytes | memoryview | FileBytes, start: int, end: int, document_bytes: int) -> Iterator[tuple[int, int]]:
    """Yield ``(begin, end)`` byte offsets of the documents of ``data[start:end]``.

    Args:
        data: the whole corpus (``bytes`` or a memory map).
        start, end: the range to cut; an empty range yields nothing.
        document_bytes: the longest document, at least 4.

    >>> list(cut_documents(b"ab\\ncd\\nef", 0, 8, 4))
    [(0, 3), (3, 6), (6, 8)]
    >>> list(cut_documents("żżż".encode(), 0, 6, 5))  # no newline: back to a character start
    [(0, 4), (4, 6)]

    Raises:
        ValueError: ``document_bytes`` below 4.
    """
    if document_bytes < MIN_DOCUMENT_BYTES:
        raise InputError(f"document_bytes must be at least {MIN_DOCUMENT_BYTES}, got {document_bytes}")
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
