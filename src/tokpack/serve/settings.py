""":class:`BatchSettings`: what :class:`~tokpack.serve.loader.PackedBatches` serves, as one record
checked when it is made (the data aside)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokpack import _checks as checks
from tokpack.errors import InputError
from tokpack.serve.common import DTYPES
from tokpack.serve.history import batch_plan
from tokpack.serve.layouts import LAYOUTS


@dataclass(frozen=True)
class BatchSettings:
    """How a loader cuts its data into training batches for one rank.

    Attributes:
        length: input ids per row (each row holds ``length + 1`` ids).
        global_batch: rows per step over all ranks; or a schedule ``[(0, 256), (2000, 512),
            ...]``: from each step on, that many rows (a warm-up as Megatron's ramp does; see
            :func:`~tokpack.serve.history.batch_ramp`).
        layout: ``"stream"``, ``"documents"`` or ``"bestfit"`` (:data:`~tokpack.serve.layouts.LAYOUTS`).
        seed: fixes the shuffle of every epoch.
        rank, world_size: this process's share; ``world_size`` must divide every global batch.
        micro_batches: gradient-accumulation steps; must divide the rank's rows.
        split: the range to read.
        dtype: ``"int64"`` (default) or ``"int32"`` for ids, labels and positions.
        position_ids, cu_seqlens, document_ids: add these to each batch (see
            :meth:`~tokpack.serve.loader.PackedBatches.batch`).
        shuffle: ``False`` serves each layout's rows in order (for inspection).
        layout_options: passed to the layout (``bestfit``: ``lookahead``, ``cache``).

    >>> BatchSettings(length=4, global_batch=[(0, 4), (10, 8)], world_size=2).plan.tolist()
    [[0, 4], [10, 8]]
    >>> BatchSettings(length=4, global_batch=6, world_size=4)
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: world_size 4 does not divide global_batch 6; use a global_batch that is a multiple of 4 (e.g. 8), or a world_size that divides it

    Raises:
        InputError: a setting out of range, or a world size or micro-batch count that does not
            divide a step's rows.
    """

    length: int
    global_batch: int | Sequence[tuple[int, int]]
    layout: str = "stream"
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    micro_batches: int = 1
    split: str = "train"
    dtype: str = "int64"
    position_ids: bool = False
    cu_seqlens: bool = False
    document_ids: bool = False
    shuffle: bool = True
    layout_options: dict[str, Any] | None = None
    #: ``global_batch`` as rows ``(start_step, rows)`` (:func:`~tokpack.serve.history.batch_plan`).
    plan: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        checks.choice("layout", self.layout, LAYOUTS)
        length = checks.positive_int("length", self.length)
        world_size = checks.positive_int("world_size", self.world_size)
        micro_batches = checks.positive_int("micro_batches", self.micro_batches)
        checks.non_negative_int("seed", self.seed)
        checks.integer("rank", self.rank, low=0, high=world_size - 1)
        checks.text("split", self.split)
        checks.choice("dtype", self.dtype, DTYPES)
        for name in ("position_ids", "cu_seqlens", "document_ids", "shuffle"):
            checks.boolean(name, getattr(self, name))
        if self.layout_options is not None:
            checks.mapping("layout_options", self.layout_options)
        plan = batch_plan(self.global_batch)
        # a step's plan holds global_batch entries; a rank's batch about five arrays of its rows
        most = int(plan[:, 1].max())
        checks.fits_in_memory(f"a step of global_batch {most:,} rows of length {length:,}",
                              16 * most + 5 * 8 * (most // world_size) * (length + 1),
                              fix="use a smaller global_batch or length")
        bad = np.flatnonzero((plan[:, 1] % world_size != 0) | ((plan[:, 1] // world_size) % micro_batches != 0))
        if len(bad):
            start, rows = (int(v) for v in plan[bad[0]])
            if rows % world_size:
                raise InputError(f"world_size {world_size} does not divide global_batch {rows}"
                                 + (f" (from step {start})" if start else ""),
                                 fix=f"use a global_batch that is a multiple of {world_size} "
                                     f"(e.g. {-(-rows // world_size) * world_size}), or a world_size that divides it")
            raise InputError(f"micro_batches {micro_batches} does not divide the rank's {rows // world_size} rows"
                             + (f" (from step {start})" if start else ""))
        object.__setattr__(self, "plan", plan)


__all__ = ["BatchSettings"]
