"""Online mixing: a mixture's weights changed while the run trains, from the loss each part gives.

:class:`OnlineMixing` sums each part's loss over ``every`` steps, then calls
:meth:`~tokpack.serve.loader.PackedBatches.set_weights` for the next step with the weights its
``update`` returns (DoReMi's multiplicative update, say: ``examples/online_mixing.py``). The
weights go into the loader's history, so the batches are those a resume with them would serve,
and a resume from any later checkpoint replays them.

>>> from tokpack.serve import Mixture, PackedBatches
>>> from tokpack.serve.memory import pack_of_documents
>>> a = pack_of_documents([list(range(1, 200))], n_vocab=400, pad_id=0)
>>> b = pack_of_documents([list(range(200, 399))], n_vocab=400, pad_id=0)
>>> batches = PackedBatches(Mixture([(a, 1), (b, 1)], names=["a", "b"]), length=8, global_batch=4)
>>> mixing = OnlineMixing(batches, every=2, update=lambda losses, weights: losses / losses.sum())
>>> for step in range(2):
...     losses = np.where(batches.parts_of(step) == 0, 1.0, 3.0)  # each row's mean loss
...     changed = mixing.observe(step, losses)
>>> changed.tolist(), batches.weights(2).tolist()
([0.25, 0.75], [0.25, 0.75])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tokpack import _checks as checks
from tokpack.errors import InputError
from tokpack.serve.loader import PackedBatches

#: ``update(losses, weights)``: each part's mean loss over the last steps (``nan`` for a part
#: that served no row) and the weights in force, in the loader's order of parts; the new weights.
Update = Callable[[np.ndarray, np.ndarray], Sequence[float] | np.ndarray]


class OnlineMixing:
    """Every ``every`` steps, new weights from each part's loss, set from the next step on.

    Args:
        batches: the loader whose weights change (every rank's copy gets the same calls).
        every: steps between two changes.
        update: the new weights from the parts' mean losses and the weights in force (see
            :data:`Update`).
        reduce: sums an array over the ranks (``torch.distributed.all_reduce``, say), so every
            rank sets the same weights; ``None`` with one rank.
    """

    def __init__(self, batches: PackedBatches, *, every: int, update: Update,
                 reduce: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        if not isinstance(batches, PackedBatches):
            raise InputError(f"batches must be a PackedBatches, got {type(batches).__name__}")
        self.batches, self.every = batches, checks.positive_int("every", every)
        self.update, self.reduce = update, reduce
        n = len(batches.names)
        self._sums, self._counts = np.zeros(n), np.zeros(n)

    def observe(self, step: int, losses: np.ndarray, parts: np.ndarray | None = None) -> np.ndarray | None:
        """Add this rank's losses of step ``step``: one a row of its batch (``parts``: each row's
        part, by default :meth:`PackedBatches.parts_of`). After every ``every``-th step, set
        and return the new weights (from step ``step + 1``); else ``None``.

        Raises:
            InputError: losses that are not one finite number a row.
        """
        step = checks.non_negative_int("step", step)
        parts = self.batches.parts_of(step) if parts is None else np.asarray(parts, dtype=np.int64)
        losses = np.asarray(losses, dtype=np.float64).reshape(-1)
        if losses.shape != parts.shape or not np.all(np.isfinite(losses)):
            raise InputError(f"losses must be one finite number a row of the batch ({len(parts)}), got shape "
                             f"{losses.shape}")
        n = len(self._sums)
        self._sums += np.bincount(parts, weights=losses, minlength=n)
        self._counts += np.bincount(parts, minlength=n)
        if (step + 1) % self.every:
            return None
        totals = np.stack([self._sums, self._counts])
        if self.reduce is not None:
            totals = np.asarray(self.reduce(totals), dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(totals[1] > 0, totals[0] / totals[1], np.nan)
        weights = np.asarray(self.update(means, self.batches.weights(step + 1)), dtype=np.float64)
        self.batches.set_weights(step + 1, weights.tolist())
        self._sums[:], self._counts[:] = 0.0, 0.0
        return self.batches.weights(step + 1)

    def state_dict(self) -> dict[str, Any]:
        """The losses summed since the last change (a checkpoint between two changes keeps them)."""
        return {"sums": self._sums.tolist(), "counts": self._counts.tolist()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s sums."""
        state = checks.mapping("state", state)
        sums, counts = (np.asarray(state.get(key), dtype=np.float64) for key in ("sums", "counts"))
        if sums.shape != self._sums.shape or counts.shape != self._counts.shape:
            raise InputError(f"online mixing state has {sums.shape[0] if sums.ndim else 0} parts, this loader "
                             f"{len(self._sums)}")
        self._sums, self._counts = sums, counts


__all__ = ["OnlineMixing", "Update"]
