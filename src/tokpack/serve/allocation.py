"""The allocation of a global batch's rows to parts: step ``k`` → a (part, layout row) pair for
each of its rows, from the history of settings (how many rows each part served before ``k``,
and how many it gives ``k``) and each part's seeded permutation per epoch. Nothing in it depends
on the number of ranks.

>>> from tokpack.serve.history import History, Segment
>>> history = History([Segment(step=0, global_batch=4, weights=[0.5, 0.5])])
>>> allocation = Allocation([3, 5], history=history, local=[0, 1], names=["a", "b"], seed=0, mixture_seed=0,
...                         shuffle=False, mixed_from=None)
>>> part_of, row_of = allocation.plan(1)
>>> part_of.tolist(), row_of.tolist()
([0, 0, 1, 1], [2, 0, 2, 3])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokpack.errors import InputError
from tokpack.serve.history import History


class Allocation:
    """Which rows of which part fill each step's global batch.

    Args:
        rows_per_epoch: each served part's rows (its layout's ``n_rows``), in the loader's order.
        history: the settings from step 0 on, over the parts as the history numbers them (slots).
        local: slot → the served part it is (``None``: a part removed at a resume).
        names: what the loader state calls each slot (for messages).
        seed, mixture_seed: the seeds of every part's permutation and of the interleaving.
        shuffle: ``False`` takes each part's rows in order.
        mixed_from: the first step whose rows interleave the parts (``None``: one part all along).
    """

    def __init__(self, rows_per_epoch: Sequence[int], *, history: History, local: list[int | None],
                 names: list[str], seed: int, mixture_seed: int, shuffle: bool, mixed_from: int | None) -> None:
        self.rows_per_epoch = [int(rows) for rows in rows_per_epoch]
        self.history, self.local, self.names = history, local, names
        self.seed, self.mixture_seed, self.shuffle, self.mixed_from = seed, mixture_seed, shuffle, mixed_from
        self._permutations: dict[tuple[int, int], np.ndarray] = {}

    def order(self, slot: int, epoch: int) -> np.ndarray | None:
        """Slot ``slot``'s rows in epoch ``epoch`` (its seeded permutation; ``None``: in order)."""
        if not self.shuffle:
            return None
        key = (slot, epoch)
        if key not in self._permutations:
            if len(self._permutations) >= 4 * len(self.rows_per_epoch):  # keep a few epochs, not all
                self._permutations.pop(next(iter(self._permutations)))
            rng = np.random.default_rng([self.seed, self.mixture_seed, slot, epoch])
            local = self.local[slot]
            assert local is not None
            self._permutations[key] = rng.permutation(self.rows_per_epoch[local])
        return self._permutations[key]

    def plan(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Step ``step``'s global rows as (part, layout row) pairs, in global-batch order.

        Raises:
            InputError: the step served a part this loader no longer serves.
        """
        before = self.history.before(step)
        counts = self.history.counts(step, before)
        parts, rows = [], []
        for slot, (first, count) in enumerate(zip(before, counts)):
            if not count:
                continue
            part = self.local[slot]
            if part is None:  # only a step before the resume that removed it
                raise InputError(f"step {step} served part {self.names[slot]!r}, which this loader does "
                                 "not serve (removed at a resume, or its data not given)",
                                 fix="give its data to serve or explain that step")
            n_rows = self.rows_per_epoch[part]
            epoch = first // n_rows
            if (first + count - 1) // n_rows == epoch:  # nearly every step lies inside one epoch
                offset = first - epoch * n_rows
                order = self.order(slot, epoch)
                chosen = np.arange(offset, offset + count, dtype=np.int64) if order is None else order[offset : offset + count]
            else:
                served = np.arange(first, first + count, dtype=np.int64)
                epochs, positions = np.divmod(served, n_rows)
                chosen = positions.copy()
                for epoch in np.unique(epochs).tolist():  # a step may span several epochs of a small part
                    order = self.order(slot, epoch)
                    if order is not None:
                        inside = epochs == epoch
                        chosen[inside] = order[positions[inside]]
            parts.append(np.full(count, part, dtype=np.int64))
            rows.append(chosen)
        part_of, row_of = (parts[0], rows[0]) if len(parts) == 1 else (np.concatenate(parts), np.concatenate(rows))
        if self.mixed_from is not None and step >= self.mixed_from:  # interleave the parts, so every rank sees the mixture
            mixing = self._mixing(step, len(part_of))
            part_of, row_of = part_of[mixing], row_of[mixing]
        return part_of, row_of

    def _mixing(self, step: int, rows: int) -> np.ndarray:
        """The order of step ``step``'s rows: global row ``g`` holds the parts' concatenated row ``mixing[g]``."""
        return np.random.default_rng([self.seed, self.mixture_seed, step, 1]).permutation(rows)

    def where(self, slot: int, served: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inverse of :meth:`plan`: for each ``served`` index ``n`` of slot ``slot`` (its
        ``n``-th row, counted from 0 over all its epochs), the step that serves it and its row in
        that step's global batch; ``-1`` for both where no step ever does (the part's weight
        stays 0 from some step on). Vectorized: one table of rows per part per step, and one
        permutation per step that interleaves parts."""
        served = np.asarray(served, dtype=np.int64)
        need = int(served.max()) if len(served) else -1
        table = self.history.served(0)
        while table[-1, slot] <= need and not self.history.stopped(slot, len(table) - 1):
            table = self.history.served(max(2 * len(table), 1024))
        column = table[:, slot]
        reached = served < column[-1]
        cap = self.history.caps[slot]
        if cap is not None:  # a part stops before its cap (a single part's run ends there)
            reached &= served < cap
        steps = np.searchsorted(column, served, side="right") - 1  # before(step) <= n < before(step + 1)
        steps[~reached] = -1
        known = steps[reached]
        order = np.argsort(known, kind="stable")
        # the parts' rows are concatenated in slot order: the rows of the slots before come first
        index = (served[reached] - column[known]
                 + (table[known + 1, :slot] - table[known, :slot]).sum(axis=1))
        rows = np.full(len(served), -1, dtype=np.int64)
        if self.mixed_from is not None and len(known):
            sorted_steps = known[order]
            bounds = np.flatnonzero(np.diff(sorted_steps)) + 1
            for group in np.split(order, bounds):
                step = int(known[group[0]])
                if step >= self.mixed_from:
                    mixing = self._mixing(step, int(table[step + 1].sum() - table[step].sum()))
                    inverse = np.empty_like(mixing)
                    inverse[mixing] = np.arange(len(mixing))
                    index[group] = inverse[index[group]]
        rows[reached] = index
        return steps, rows


__all__ = ["Allocation"]
