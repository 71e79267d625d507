"""The text a vocabulary is trained on: pieces spread evenly over a source's training range."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokpack.corpus.sources.base import DocumentSource

#: The longest piece a vocabulary sample takes from one place (see :meth:`DocumentSource.training_sample`).
SAMPLE_PIECE_BYTES = 1 << 12


class TrainingSample:
    """The text a vocabulary is trained on (see :meth:`DocumentSource.training_sample`): every
    document of ``units`` (``spans`` ``None``), or the byte span ``spans[i]`` of unit ``units[i]``.
    An iterable of texts (pieces that follow each other in a document come as one text) that counts
    what it gave (``n_documents``, ``n_pieces``, ``n_bytes``) once iterated."""

    def __init__(self, source: DocumentSource, units: np.ndarray, spans: np.ndarray | None, limit_bytes: int, *,
                 range_bytes: int, piece_bytes: int = SAMPLE_PIECE_BYTES) -> None:
        self.source, self.units, self.spans, self.limit_bytes = source, units, spans, limit_bytes
        self.piece_bytes = piece_bytes
        self.range_bytes = range_bytes  # bytes of the whole training range
        self.n_documents = self.n_pieces = self.n_bytes = 0

    def __iter__(self) -> Iterator[str]:
        self.n_documents = self.n_pieces = self.n_bytes = 0
        for text, n_bytes, new_document, pieces in self._texts():
            left = self.limit_bytes - self.n_bytes
            if left <= 0:
                return
            if n_bytes > left:  # only when one document is larger than the whole sample
                text = text.encode("utf-8")[:left].decode("utf-8", errors="ignore")
            self.n_documents += new_document
            self.n_pieces += pieces
            self.n_bytes += min(n_bytes, left)
            yield text

    def _texts(self) -> Iterator[tuple[str, int, bool, int]]:
        """``(text, its bytes, whether it starts another document, the pieces it joins)`` in input order."""
        if self.spans is None:
            # Consecutive chosen units are read as one run, so a source reads each stretch once.
            runs = np.split(self.units, np.flatnonzero(np.diff(self.units) != 1) + 1) if len(self.units) else []
            for run in runs:
                for piece in self.source.pieces(int(run[0]), int(run[-1]) + 1):
                    yield piece.text, piece.n_bytes, True, 1
            return
        # Pieces that follow each other in one unit are read as one span.
        joined = np.flatnonzero((np.diff(self.units) != 0) | (self.spans[1:, 0] != self.spans[:-1, 1])) + 1
        firsts, lasts = np.concatenate(([0], joined)), np.concatenate((joined, [len(self.units)])) - 1
        previous = -1
        for first, last in zip(firsts.tolist(), lasts.tolist()):
            unit = int(self.units[first])
            text = self.source.unit_text(unit, int(self.spans[first, 0]), int(self.spans[last, 1]))
            if text:
                yield text, len(text.encode("utf-8")), unit != previous, last - first + 1
                previous = unit

    def describe(self) -> str:
        """One line for the user: what was sampled, and how."""
        return describe_sample(self.n_bytes, self.range_bytes, self.n_documents,
                               None if self.spans is None else self.n_pieces, self.piece_bytes,
                               held_out=[name for name, _, _ in self.source.unit_ranges() if name != "train"])


def describe_sample(n_bytes: int, range_bytes: int, n_documents: int, n_pieces: int | None = None,
                    piece_bytes: int = SAMPLE_PIECE_BYTES, held_out: Sequence[str] = ()) -> str:
    """What a vocabulary was trained on, in one line: the whole training range, or pieces of it;
    ``held_out`` names the ranges it never saw.

    >>> describe_sample(10_000_000, 18_500_000, 412, 2_441)
    'trained on 10.0 of 18.5 MB (54%): 2,441 pieces of up to 4 KiB from 412 documents, spread evenly over the range'
    >>> describe_sample(300_000, 300_000, 34, held_out=["validation"])
    'trained on all 0.3 MB of the training range, 34 documents (validation held out)'
    >>> describe_sample(300, 300, 1)
    'trained on all 0.0 MB, 1 document'
    """
    plural = "s" if n_documents != 1 else ""
    kept = f" ({' and '.join(held_out)} held out)" if held_out else ""
    if n_pieces is None:
        return f"trained on all {range_bytes / 1e6:.1f} MB{' of the training range' if held_out else ''}, {n_documents:,} document{plural}{kept}"
    return (f"trained on {n_bytes / 1e6:.1f} of {range_bytes / 1e6:.1f} MB ({n_bytes / max(range_bytes, 1):.0%}): "
            f"{n_pieces:,} piece{'s' if n_pieces != 1 else ''} of up to {piece_bytes >> 10} KiB from "
            f"{n_documents:,} document{plural}, spread evenly over the {'training ' if held_out else ''}range{kept}")


def span_of(data: bytes, start: int, stop: int, size: int) -> str:
    """Bytes ``[start, stop)`` of a unit's text ``data`` whose size was estimated as ``size``
    (scaled to the text when the estimate is off), cut back as :func:`line_span` says.

    >>> span_of(b"ab\\ncd\\nef\\n", 0, 4, 9), span_of(b"ab\\ncd\\nef\\n", 2, 4, 4)
    ('ab\\n', 'ef\\n')
    """
    if size != len(data):
        start, stop = start * len(data) // max(size, 1), (len(data) if stop >= size else stop * len(data) // max(size, 1))
    low, high = line_span(data[start:stop], head=start == 0, tail=stop >= len(data))
    return data[start + low : start + high].decode("utf-8")


def line_span(data: bytes, *, head: bool, tail: bool) -> tuple[int, int]:
    """The part of ``data`` (a span of a document) that holds whole lines: from its start if
    ``head`` (the document's start) else past its first newline, to its end if ``tail`` else past
    its last newline; a span with no such line is cut at whole characters instead (its last
    character left out unless ``tail``: it may run on past the span).

    >>> line_span(b"ab\\ncd\\nef", head=False, tail=False), line_span(b"ab\\ncd", head=True, tail=True)
    ((3, 6), (0, 5))
    >>> line_span("żżż".encode()[1:5], head=False, tail=False)  # no newline: whole characters
    (1, 3)
    """
    first, last = data.find(b"\n"), data.rfind(b"\n")
    low = 0 if head else first + 1 if first >= 0 else -1
    high = len(data) if tail else last + 1 if last >= 0 else -1
    if low >= 0 and high > low:
        return low, high
    low = 0
    while not head and low < len(data) and data[low] & 0xC0 == 0x80:  # past a character begun before the span
        low += 1
    high = len(data) if tail else max(len(data) - 1, low)
    while not tail and high > low and data[high] & 0xC0 == 0x80:  # back to where the last character starts
        high -= 1
    return low, high


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
        found = np.searchsorted(ends, points, side="right")  # ascending: repeats sit together
        return found[np.concatenate(([True], found[1:] != found[:-1]))] if len(found) else found

    low, high = 1, len(sizes)  # the largest k whose picks fit the budget
    while low < high:
        middle = (low + high + 1) // 2
        if int(sizes[picks(middle)].sum()) <= budget:
            low = middle
        else:
            high = middle - 1
    return picks(low)

