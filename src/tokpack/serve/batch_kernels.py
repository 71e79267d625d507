"""The serving hot loops, compiled by numba: a layout's rows and a batch's arrays in one pass each.

A batch is described by the rows' ids (``(n, width)``, the source's dtype, ``width = length + 1``),
how many real ids each row holds, and the **segment starts**: the ascending flat indices into
that ``(n, width)`` grid where a segment begins (every row's column 0, every document start
inside a row, the first padding position). Layouts produce the segment starts directly
(:func:`contiguous_segments`, :func:`bestfit_rows`), and :func:`fill_batch` writes
``input_ids``, ``labels``, ``position_ids``, ``document_ids`` and ``cu_seqlens`` from them in
one pass over the batch.

Why compiled: a batch of 8 rows of 2,049 ids holds a few dozen segments. Built from numpy
calls, the segment-start mask, its ``flatnonzero``, a ``repeat`` per output and the casts cost
about 20 array operations, most of their cost fixed per call; one compiled loop writes each
output element once (figures: BENCHMARKS.md, "The training loader against litdata"). numba compiles these
once per machine (``cache=True``, beside the module or in numba's user cache).

The kernels a batch calls return one array at most, and write any other into an array they are
given: a Ctrl-C that lands while numba boxes the result raises its ``KeyboardInterrupt`` from
an array's boxing, where a tuple's makes a ``SystemError``. Holding the signals instead
(:func:`tokpack._signals.held`) would cost as much as the batch; the layout's once-built kernels
that return tuples are called under it.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def outside(indices: np.ndarray, n_rows: int) -> bool:  # pragma: no cover - compiled
    """Whether any index lies outside ``[0, n_rows)``: one loop over a batch's few row indices,
    where numpy's ``min`` and ``max`` would be two calls of fixed cost."""
    for index in indices:
        if index < 0 or index >= n_rows:
            return True
    return False


@njit(cache=True)
def contiguous_segments(document_starts: np.ndarray, origins: np.ndarray, width: int,
                        hi: int, real: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Rows ``stream[o : o + width]`` (padded past ``hi``): their segment starts (flat, ascending),
    returned, and the real ids each row holds, written into ``real``. ``document_starts`` is the
    stream's ascending document starts; a start strictly inside ``(o, min(o + width, hi))``
    begins a segment. One array returned, not a tuple: see the module docstring."""
    n = len(origins)
    first = np.searchsorted(document_starts, origins, side="right")
    ends = np.minimum(origins + width, hi)
    last = np.searchsorted(document_starts, ends, side="left")
    total = 2 * n
    for r in range(n):
        if last[r] > first[r]:
            total += last[r] - first[r]
    segments = np.empty(total, dtype=np.int64)
    k = 0
    for r in range(n):
        base = r * width - origins[r]
        segments[k] = r * width
        k += 1
        for d in range(first[r], last[r]):
            segments[k] = document_starts[d] + base
            k += 1
        used = ends[r] - origins[r]
        real[r] = used
        if used < width:
            segments[k] = r * width + used
            k += 1
    return segments[:k]


@njit(cache=True)
def contiguous_gather(tokens: np.ndarray, origins: np.ndarray, width: int, hi: int, fill: int,
                      out: np.ndarray) -> None:  # pragma: no cover - compiled
    """Rows ``tokens[o : o + width]`` copied into ``out`` (``(n, width)``), ``fill`` past ``hi``."""
    for r in range(len(origins)):
        origin = origins[r]
        keep = min(width, hi - origin)
        row = out[r]
        source = tokens[origin : origin + keep]
        for c in range(keep):
            row[c] = source[c]
        tail = row[keep:]
        for c in range(width - keep):
            tail[c] = fill


@njit(cache=True)
def bestfit_segments(piece_start: np.ndarray, piece_len: np.ndarray, row_ptr: np.ndarray,
                     indices: np.ndarray, width: int, real: np.ndarray) -> np.ndarray:  # pragma: no cover
    """Rows ``indices`` of a best-fit index: their segment starts (a piece's first column and the
    first padding column), returned, and the real ids each row holds, written into ``real``."""
    n = len(indices)
    total = n
    for r in range(n):
        total += row_ptr[indices[r] + 1] - row_ptr[indices[r]]
    segments = np.empty(total, dtype=np.int64)
    k = 0
    for r in range(n):
        column = 0
        for p in range(row_ptr[indices[r]], row_ptr[indices[r] + 1]):
            segments[k] = r * width + column
            k += 1
            column += piece_len[p]
        real[r] = column
        if column < width:
            segments[k] = r * width + column
            k += 1
    return segments[:k]


@njit(cache=True)
def bestfit_positions(piece_start: np.ndarray, piece_len: np.ndarray, row_ptr: np.ndarray,
                      indices: np.ndarray, width: int) -> np.ndarray:  # pragma: no cover - compiled
    """Where each id of rows ``indices`` comes from in the stream (``(n, width)``, ``-1`` for
    padding): each piece's positions written as one run."""
    n = len(indices)
    positions = np.empty((n, width), dtype=np.int64)
    for r in range(n):
        column = 0
        for p in range(row_ptr[indices[r]], row_ptr[indices[r] + 1]):
            start = piece_start[p]
            for c in range(piece_len[p]):
                positions[r, column + c] = start + c
            column += piece_len[p]
        for c in range(column, width):
            positions[r, c] = -1
    return positions


@njit(cache=True)
def bestfit_gather(tokens: np.ndarray, piece_start: np.ndarray, piece_len: np.ndarray, row_ptr: np.ndarray,
                   indices: np.ndarray, width: int, fill: int, out: np.ndarray) -> None:  # pragma: no cover
    """Rows ``indices`` of a best-fit index copied from the flat stream ``tokens`` into ``out``
    (``(n, width)``): each piece one contiguous run, the rest of a row ``fill``."""
    for r in range(len(indices)):
        column = 0
        for p in range(row_ptr[indices[r]], row_ptr[indices[r] + 1]):
            start = piece_start[p]
            size = piece_len[p]
            out[r, column : column + size] = tokens[start : start + size]
            column += size
        for c in range(column, width):
            out[r, c] = fill


@njit(cache=True)
def _highest_bit(word: int) -> int:  # pragma: no cover - compiled
    """The index of the highest set bit of a non-zero value below 2**32 (five halvings)."""
    bit = 0
    for shift in (16, 8, 4, 2, 1):
        if word >> shift:
            word >>= shift
            bit += shift
    return bit


@njit(cache=True)
def best_fit_rows(lengths: np.ndarray, width: int, lookahead: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Pack pieces (``lengths``, each in ``[1, width]``) into rows by best fit from a look-ahead
    buffer: the pieces in row order and each row's end in that order (see
    :func:`tokpack.serve.layouts._best_fit` for the rule).

    Waiting pieces of one length leave in age order, so each length is a FIFO queue: a slice of
    that length's pieces (sorted by index once) between a head and the number added so far. A
    bit per length (32 to an ``int64`` word) says its queue is not empty; the longest length that
    fits is the highest set bit at or below the space left.
    """
    total = len(lengths)
    count = np.zeros(width + 1, dtype=np.int64)
    for index in range(total):
        if lengths[index] < width:
            count[lengths[index]] += 1
    first = np.zeros(width + 1, dtype=np.int64)  # where each length's pieces begin in by_length
    for size in range(1, width + 1):
        first[size] = first[size - 1] + count[size - 1]
    by_length = np.empty(max(1, int(count.sum())), dtype=np.int64)
    filled = first.copy()
    for index in range(total):
        size = lengths[index]
        if size < width:
            by_length[filled[size]] = index
            filled[size] += 1
    head = first.copy()  # the oldest waiting piece of each length
    added = first.copy()  # one past the newest piece of each length in the buffer
    words = np.zeros(width // 32 + 1, dtype=np.int64)
    taken = np.zeros(total + 1, dtype=np.uint8)  # one spare: the pointer to the oldest may rest past the end
    order = np.empty(total, dtype=np.int64)
    row_ends = np.empty(total, dtype=np.int64)
    placed = rows = following = oldest = waiting = 0
    while following < total or waiting:
        if waiting < lookahead and following < total:
            stop = min(total, following + lookahead - waiting)
            for index in range(following, stop):
                size = lengths[index]
                if size < width:
                    if head[size] == added[size]:
                        words[size >> 5] |= 1 << (size & 31)
                    added[size] += 1
            waiting += stop - following
            following = stop
        while taken[oldest]:
            oldest += 1
        taken[oldest] = 1  # the oldest waiting piece heads the row
        order[placed] = oldest
        placed += 1
        waiting -= 1
        size = lengths[oldest]
        space = width - size
        if space:
            head[size] += 1  # the oldest of all is the oldest of its length
            if head[size] == added[size]:
                words[size >> 5] &= ~(1 << (size & 31))
            while space:
                word = space >> 5
                bits = words[word] & ((1 << ((space & 31) + 1)) - 1)
                while not bits and word > 0:
                    word -= 1
                    bits = words[word]
                if not bits:
                    break
                size = word * 32 + _highest_bit(bits)  # the longest length that fits
                index = by_length[head[size]]
                head[size] += 1
                if head[size] == added[size]:
                    words[size >> 5] &= ~(1 << (size & 31))
                taken[index] = 1
                order[placed] = index
                placed += 1
                waiting -= 1
                space -= size
        row_ends[rows] = placed
        rows += 1
    return order[:placed], row_ends[:rows]


@njit(cache=True)
def bestfit_pieces(starts: np.ndarray, hi: int, width: int) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover
    """Every piece of the documents starting at ``starts`` (ascending; the last ends at ``hi``)
    in stream order: its start and length, each document whole or cut into pieces of ``width``
    ids when longer; and the ids of the documents that were cut."""
    n = len(starts)
    total = 0
    for d in range(n):
        end = starts[d + 1] if d + 1 < n else hi
        total += (end - starts[d] + width - 1) // width
    piece_start = np.empty(total, dtype=np.int64)
    piece_len = np.empty(total, dtype=np.int64)
    k = cut = 0
    for d in range(n):
        end = starts[d + 1] if d + 1 < n else hi
        if end - starts[d] > width:
            cut += end - starts[d]
        at = starts[d]
        while at < end:
            piece_start[k] = at
            piece_len[k] = min(width, end - at)
            at += width
            k += 1
    return piece_start, piece_len, cut


@njit(cache=True)
def bestfit_moved(order: np.ndarray, row_ends: np.ndarray, lengths: np.ndarray, width: int,
                  lookahead: int) -> int:  # pragma: no cover
    """The ids of pieces placed while an older piece still waited, for the packing of pieces
    ``lengths`` into rows that ``order`` (the pieces in row order) and ``row_ends`` (each row's
    end in that order) describe; ``-1`` when they describe no packing :func:`best_fit_rows`
    could make: a piece missing, repeated or unknown, an empty or too wide row, a row not
    headed by the oldest piece still waiting, or a piece placed before it was among the
    ``lookahead`` waiting (the buffer is topped up before each row)."""
    total = len(lengths)
    if len(order) != total:
        return -1
    taken = np.zeros(total + 1, dtype=np.uint8)  # one spare: the pointer to the oldest may rest past the end
    oldest = placed = moved = following = 0
    for row in range(len(row_ends)):
        end = row_ends[row]
        if end <= placed or end > total:
            return -1
        following = max(following, min(total, placed + lookahead))  # every piece placed so far came before it
        used = 0
        for slot in range(placed, end):
            piece = order[slot]
            if piece < 0 or piece >= following or taken[piece]:
                return -1
            while taken[oldest]:
                oldest += 1
            if slot == placed and piece != oldest:
                return -1
            if piece != oldest:
                moved += lengths[piece]
            taken[piece] = 1
            used += lengths[piece]
        if used > width:
            return -1
        placed = end
    return moved if placed == total else -1


@njit(cache=True)
def fill_batch(ids: np.ndarray, segments: np.ndarray, real: np.ndarray, ignore_index: int,
               input_ids: np.ndarray, labels: np.ndarray, positions: np.ndarray, documents: np.ndarray,
               cu_seqlens: np.ndarray, want_positions: bool, want_documents: bool,
               want_boundaries: bool) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """Write a batch's arrays from rows ``ids`` (``(n, width)``), their ``segments`` (flat
    starts into that grid, ascending; column 0 of a row counts as a start whatever they say;
    a start at column ``width - 1`` is no input's) and ``real`` ids per row.

    ``input_ids[r, c] = ids[r, c]``; ``labels[r, c] = ids[r, c + 1]``, or ``ignore_index`` where
    ``c + 1 >= real[r]``. With ``want_boundaries``: ``positions`` (restarting at 0 per segment)
    and ``documents`` (the segment's number in its row) when asked for, and ``cu_seqlens``
    (segment boundaries over the flattened ``(n, width - 1)`` inputs, ending with their size).
    Returns the number of segments, the longest segment, and the largest id.
    """
    n, width = ids.shape
    length = width - 1
    largest = 0
    for r in range(n):  # simple loops over row views, indexed from 0: each one vectorizes
        row, inputs, targets = ids[r], input_ids[r], labels[r]
        for c in range(length):
            inputs[c] = row[c]
        stop = min(max(real[r] - 1, 0), length)
        for c in range(stop):
            targets[c] = row[c + 1]
        tail = targets[stop:]
        for c in range(length - stop):
            tail[c] = ignore_index
        for c in range(width):
            largest = max(largest, row[c])
    if not want_boundaries:
        return 0, 0, largest
    p, m, count, longest = 0, len(segments), 0, 0
    for r in range(n):
        base = r * width
        while p < m and segments[p] <= base:  # this row's column 0 (always a start) and anything before
            p += 1
        start, document = 0, 0
        while True:
            if p < m and segments[p] < base + length:
                end = segments[p] - base
                p += 1
            else:
                end = length
            if end <= start:  # a repeated start makes no empty segment
                continue
            cu_seqlens[count] = r * length + start
            count += 1
            if end - start > longest:
                longest = end - start
            # Through slices indexed from 0: an index numba cannot prove non-negative costs a
            # wrap-around test per element and stops the loop vectorizing (BENCHMARKS.md, "The
            # training loader against litdata").
            if want_positions:
                run = positions[r, start:end]
                for j in range(end - start):
                    run[j] = j
            if want_documents:
                documents[r, start:end] = document
            if end >= length:
                break
            start = end
            document += 1
    cu_seqlens[count] = n * length
    return count, longest, largest


__all__ = ["best_fit_rows", "bestfit_gather", "bestfit_moved", "bestfit_pieces", "bestfit_positions", "bestfit_segments", "contiguous_gather", "contiguous_segments",
           "fill_batch", "outside"]
