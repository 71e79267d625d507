"""The assembly of a batch: rows of ``length + 1`` ids, read from each part's layout with their
document boundaries, become the arrays a model takes (``input_ids``, ``labels``, and on request
``position_ids``, ``document_ids``, ``cu_seqlens``, ``max_seqlen``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokpack.serve.common import check_ids
from tokpack.serve.layouts import Layout, kernels
from tokpack.store import TokenSource

#: The segment starts of a batch that asks for no boundary array.
NO_SEGMENTS = np.empty(0, dtype=np.int64)


def gather(layouts: list[Layout], sources: list[TokenSource], part_of: np.ndarray, row_of: np.ndarray, *,
           starts: bool = True, check: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Rows ``row_of`` of parts ``part_of`` (indices into ``layouts``), in that order: the rows,
    their segment starts (flat, ascending; ``None`` with ``starts=False``) and real lengths;
    ``check``: the ids are checked against the vocabulary here (else the caller checks the
    largest id it meets; only with one part)."""
    if len(layouts) == 1:  # the common case: no per-part split, no copies
        ids, segments, real = layouts[0].segments(row_of, starts=starts)
        if check:
            check_ids(ids, sources[0])  # one reduction guards every batch
        return ids, segments, real
    width = layouts[0].length + 1
    ids = np.empty((len(part_of), width), dtype=sources[0].meta.dtype)
    pieces: list[np.ndarray] = []
    real = np.empty(len(part_of), dtype=np.int64)
    for part in np.unique(part_of).tolist():  # one gather per part
        chosen = np.flatnonzero(part_of == part)
        part_ids, part_segments, real[chosen] = layouts[part].segments(row_of[chosen], starts=starts)
        check_ids(part_ids, sources[part])  # one reduction guards every batch
        ids[chosen] = part_ids
        if part_segments is not None:  # renumber the part's rows to their places in the batch
            rows, columns = np.divmod(part_segments, width)
            pieces.append(chosen[rows] * width + columns)
    segments = np.sort(np.concatenate(pieces)) if starts and pieces else (NO_SEGMENTS if starts else None)
    return ids, segments, real


def assemble(ids: np.ndarray, starts: np.ndarray | None, *, dtype: np.dtype, position_ids: bool = False,
             cu_seqlens: bool = False, document_ids: bool = False, real: np.ndarray | None = None,
             ignore_index: int | None = None) -> dict[str, Any]:
    """Rows of ``length + 1`` ids and their segment-start mask → the arrays a model takes.

    With ``real`` (real ids per row) and ``ignore_index``, labels of padding become
    ``ignore_index`` (needed where the source has no padding id of its own). ``starts`` may be
    ``None`` when no boundary array is asked for; column 0 always starts a segment, whatever
    ``starts`` says. (:func:`assemble_segments` takes the segment starts as a flat list.)

    >>> ids = np.array([[5, 6, 7, 8, 0]]); starts = np.array([[True, False, True, False, True]])
    >>> batch = assemble(ids, starts, dtype=np.dtype(np.int64), position_ids=True, cu_seqlens=True, document_ids=True)
    >>> batch["position_ids"].tolist(), batch["document_ids"].tolist(), batch["cu_seqlens"].tolist(), batch["max_seqlen"]
    ([[0, 1, 0, 1]], [[0, 0, 1, 1]], [0, 2, 4], 2)
    """
    segments = None
    if position_ids or cu_seqlens or document_ids:
        if starts is None:
            raise ValueError("assemble: boundary arrays need the segment starts")
        segments = np.flatnonzero(starts)
    if real is None or ignore_index is None:
        real, ignore_index = None, 0
    return assemble_segments(ids, segments, real, dtype=dtype, position_ids=position_ids, cu_seqlens=cu_seqlens,
                             document_ids=document_ids, ignore_index=ignore_index)[0]


def assemble_segments(ids: np.ndarray, segments: np.ndarray | None, real: np.ndarray | None, *, dtype: np.dtype,
                      ignore_index: int, position_ids: bool = False, cu_seqlens: bool = False,
                      document_ids: bool = False) -> tuple[dict[str, Any], int]:
    """:func:`assemble` from the segment starts as ascending flat indices into ``ids`` (``(n,
    length + 1)``), as layouts hand them over (:meth:`Layout.segments`); ``real=None``: no
    padding to ignore. Returns the batch and the largest id of ``ids`` (for the vocabulary
    check, at no extra pass).

    One compiled pass (:func:`tokpack.serve.batch_kernels.fill_batch`) writes every array in its
    final dtype: ``input_ids``, ``labels``, and on request ``position_ids``, ``document_ids``,
    ``cu_seqlens`` (``int32``) and ``max_seqlen``.
    """
    # Each numpy call costs about a microsecond on a batch this size: only the needed ones.
    if not ids.flags.c_contiguous:
        ids = np.ascontiguousarray(ids)
    n, width = ids.shape
    length = width - 1
    dtype = np.dtype(dtype)
    want = bool(position_ids or cu_seqlens or document_ids)
    if want and segments is None:
        raise ValueError("assemble: boundary arrays need the segment starts")
    input_ids = np.empty((n, length), dtype=dtype)
    labels = np.empty((n, length), dtype=dtype)
    positions = np.empty((n, length), dtype=dtype) if position_ids else np.empty((0, 0), dtype=dtype)
    documents = np.empty((n, length), dtype=dtype) if document_ids else positions[:0, :0]
    flat = NO_SEGMENTS
    if want and segments is not None:
        flat = segments if segments.dtype == np.int64 else segments.astype(np.int64)
    bounds = np.empty(len(flat) + n + 1, dtype=np.int32)  # at most one segment more a row (column 0)
    real = np.full(n, width, dtype=np.int64) if real is None else np.asarray(real, dtype=np.int64)
    count, longest, largest = kernels().fill_batch(ids, flat, real, int(ignore_index), input_ids, labels, positions, documents,
                                         bounds, bool(position_ids), bool(document_ids), want)
    batch: dict[str, Any] = {"input_ids": input_ids, "labels": labels}
    if position_ids:
        batch["position_ids"] = positions
    if document_ids:
        batch["document_ids"] = documents
    if cu_seqlens:
        batch["cu_seqlens"] = bounds[: count + 1]
        batch["max_seqlen"] = int(longest)
    return batch, int(largest)


def boundaries(starts: np.ndarray, *, dtype: np.dtype, position_ids: bool = True, cu_seqlens: bool = True,
               document_ids: bool = True) -> dict[str, Any]:
    """``position_ids``, ``document_ids`` (``(rows, length)``, ``dtype``), ``cu_seqlens`` (``int32``)
    and ``max_seqlen`` from the ``(rows, length)`` segment-start mask of the inputs (column 0
    counts as a start whatever it holds)."""
    n, length = starts.shape
    grid = np.zeros((n, length + 1), dtype=bool)
    grid[:, :-1] = starts
    batch, _ = assemble_segments(np.zeros((n, length + 1), dtype=np.int64), np.flatnonzero(grid), None, dtype=dtype,
                                 ignore_index=0, position_ids=position_ids, cu_seqlens=cu_seqlens,
                                 document_ids=document_ids)
    del batch["input_ids"], batch["labels"]
    return batch


__all__ = ["NO_SEGMENTS", "assemble", "assemble_segments", "boundaries", "gather"]
