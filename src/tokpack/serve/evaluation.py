"""Evaluation batches: one ordered pass over a range (``validation`` by default), every id a
target exactly once across all ranks, the last steps padded rather than repeated.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tokpack import _checks as checks
from tokpack.errors import InputError
from tokpack.serve.assembly import NO_SEGMENTS, assemble_segments
from tokpack.serve.common import DTYPES, Data, check_ids
from tokpack.serve.layouts import make_layout


class EvalBatches:
    """One pass over ``split``, in order: every id but the range's first is a target exactly once
    across all ranks; the last steps are padded (labels = :attr:`ignore_index`), never repeated.

    Every rank yields the same number of batches, so collective calls stay matched. Step ``k``
    gives rank ``r`` the ``batch_size`` rows from ``(k * world_size + r) * batch_size``.
    ``position_ids``, ``cu_seqlens`` and ``document_ids`` add the same arrays as
    :meth:`PackedBatches.batch` (built by the same :func:`assemble_segments`).

    >>> from tokpack.serve.memory import pack_of_documents
    >>> pack = pack_of_documents([[1, 2, 3], [4, 5, 6, 7, 8]], n_vocab=9, pad_id=0, train_documents=1)
    >>> [b["labels"].tolist() for b in EvalBatches(pack, length=2, batch_size=1)]
    [[[5, 6]], [[7, 8]]]
    """

    def __init__(self, data: Data, *, length: int, batch_size: int, rank: int = 0, world_size: int = 1,
                 split: str = "validation", dtype: str = "int64", position_ids: bool = False,
                 cu_seqlens: bool = False, document_ids: bool = False) -> None:
        batch_size, length = checks.positive_int("batch_size", batch_size), checks.positive_int("length", length)
        world_size = checks.positive_int("world_size", world_size)
        rank = checks.integer("rank", rank, low=0, high=world_size - 1)
        checks.choice("dtype", dtype, DTYPES)
        for flag, value in (("position_ids", position_ids), ("cu_seqlens", cu_seqlens), ("document_ids", document_ids)):
            checks.boolean(flag, value)
        checks.fits_in_memory(f"a batch of batch_size {batch_size:,} rows of length {length:,}",
                              5 * 8 * batch_size * (length + 1), fix="use a smaller batch_size or length")
        self.layout = make_layout("stream", data, length=length, split=split)
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self.dtype = np.dtype(DTYPES[dtype])
        self.want_positions, self.want_cu_seqlens, self.want_documents = position_ids, cu_seqlens, document_ids
        self.ignore_index = self.layout.ignore_index
        self.n_vocab = self.layout.source.vocabulary.n_vocab

    def __len__(self) -> int:
        return max(0, -(-self.layout.n_rows // (self.batch_size * self.world_size)))

    def batch(self, step: int) -> dict[str, Any]:
        """Rank :attr:`rank`'s rows of step ``step`` (rows past the range are all padding): the
        arrays of :meth:`PackedBatches.batch`, boundary arrays included when asked for (a row of
        padding is one segment).

        Raises:
            InputError: ``step`` is not a non-negative integer, or is past the last step
                (``len(self)``): a batch there would be all padding, silently.
        """
        step = checks.non_negative_int("step", step)
        count = len(self)
        if step >= count:
            raise InputError(f"step {step} is past the end: there are {count} batches",
                             fix=f"use a step from 0 to {count - 1}, or iterate over the EvalBatches" if count
                             else "the range is empty; nothing to evaluate")
        first = (step * self.world_size + self.rank) * self.batch_size
        rows = np.arange(first, first + self.batch_size)
        real = rows[rows < self.layout.n_rows]
        width = self.layout.length + 1
        ids = np.full((self.batch_size, width), self.layout.fill, dtype=self.layout.source.meta.dtype)
        want_starts = bool(self.want_positions or self.want_cu_seqlens or self.want_documents)
        lengths = np.zeros(self.batch_size, dtype=np.int64)  # rows past the range: all padding
        segments = NO_SEGMENTS
        if len(real):
            part_ids, part_segments, lengths[: len(real)] = self.layout.segments(real, starts=want_starts)
            ids[: len(real)] = part_ids
            if part_segments is not None:
                segments = part_segments
            check_ids(ids, self.layout.source)
        if want_starts and len(real) < self.batch_size:  # a row of padding is one segment
            segments = np.concatenate([segments, np.arange(len(real), self.batch_size, dtype=np.int64) * width])
        return assemble_segments(ids, segments if want_starts else None, lengths, dtype=self.dtype,
                                 position_ids=self.want_positions, cu_seqlens=self.want_cu_seqlens,
                                 document_ids=self.want_documents, ignore_index=self.ignore_index)[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for step in range(len(self)):
            yield self.batch(step)


__all__ = ["EvalBatches"]
