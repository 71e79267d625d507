"""PyTorch adapters: a Dataset over windows and a loader with a seed-fixed order and exact resume.

Importing this module imports torch; nothing else in tokpack does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from tokpack.errors import InputError
from tokpack.serve.windows import Windows

Batch = tuple[torch.Tensor, torch.Tensor]


class WindowDataset(Dataset[Batch]):
    """Windows as ``int64`` tensors: ``dataset[i]`` is one ``(x, y)``, ``dataset[[i, j, …]]`` a
    whole batch gathered at once by :meth:`Windows.window_batch`.

    Pickling sends the pack's path, so loader workers map the same pages rather than copying.
    """

    def __init__(self, windows: Windows) -> None:
        self.windows = windows

    @property
    def ignore_index(self) -> int:
        """The target id ``CrossEntropyLoss`` must ignore (the padding id)."""
        return self.windows.ignore_index

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int | list[int]) -> Batch:
        if isinstance(index, (int, np.integer)):
            x, y = self.windows[int(index)]
        else:
            x, y = self.windows.window_batch(np.asarray(index, dtype=np.int64))
        return torch.from_numpy(x), torch.from_numpy(y)


class _EpochBatches(Sampler[list[int]]):
    """Index batches of one epoch, from a position: the order is a function of (seed, epoch)."""

    def __init__(self, n_items: int, batch_size: int, *, seed: int, shuffle: bool, drop_last: bool) -> None:
        self.n_items, self.batch_size = n_items, batch_size
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.epoch, self.position = 0, 0

    def __len__(self) -> int:
        full, rest = divmod(self.n_items, self.batch_size)
        return full if self.drop_last or not rest else full + 1

    def order(self, epoch: int) -> np.ndarray:
        """The item order of ``epoch``: a permutation seeded by ``(seed, epoch)``, or the identity."""
        if not self.shuffle:
            return np.arange(self.n_items)
        return np.random.default_rng([self.seed, epoch]).permutation(self.n_items)

    def __iter__(self) -> Iterator[list[int]]:
        order = self.order(self.epoch)
        for batch in range(self.position, len(self)):
            yield order[batch * self.batch_size : (batch + 1) * self.batch_size].tolist()


class WindowLoader:
    """Batches of windows in an order fixed by ``seed``, resumable at any step.

    Iterating runs one epoch from the current position; :meth:`state_dict` after ``k`` batches
    and :meth:`load_state_dict` in a new loader make it yield exactly the batches an
    uninterrupted run yields from batch ``k + 1`` on, across epochs and with workers.
    """

    def __init__(self, dataset: WindowDataset, batch_size: int, *, seed: int = 0, workers: int = 0,
                 shuffle: bool = True, drop_last: bool = True) -> None:
        if batch_size < 1 or workers < 0:
            raise InputError(f"need batch_size >= 1 and workers >= 0, got {batch_size} and {workers}")
        self.dataset = dataset
        self._batches = _EpochBatches(len(dataset), batch_size, seed=seed, shuffle=shuffle, drop_last=drop_last)
        # batch_size=None: each sampled index list reaches the dataset whole, as one gather.
        self._loader = DataLoader(dataset, batch_size=None, sampler=self._batches, num_workers=workers,
                                  persistent_workers=workers > 0)

    @property
    def epoch(self) -> int:
        return self._batches.epoch

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._batches)

    def __iter__(self) -> Iterator[Batch]:
        for batch in self._loader:
            self._batches.position += 1  # counted as delivered, not as prefetched by workers
            yield batch
        self._batches.epoch += 1
        self._batches.position = 0

    def state_dict(self) -> dict[str, Any]:
        """``{epoch, position, seed, …}``: where the next batch comes from."""
        sampler = self._batches
        return {"epoch": sampler.epoch, "position": sampler.position, "seed": sampler.seed,
                "batch_size": sampler.batch_size, "shuffle": sampler.shuffle, "drop_last": sampler.drop_last,
                "n_items": sampler.n_items}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``.

        Raises:
            ValueError: ``state`` was saved by a loader over other data or with other settings.
        """
        sampler = self._batches
        mine = {"seed": sampler.seed, "batch_size": sampler.batch_size, "shuffle": sampler.shuffle,
                "drop_last": sampler.drop_last, "n_items": sampler.n_items}
        theirs = {key: state.get(key) for key in mine}
        if mine != theirs:
            raise InputError(f"loader state was saved with {theirs}, this loader has {mine}")
        if not 0 <= state["position"] <= len(sampler) or state["epoch"] < 0:
            raise InputError(f"loader state position {state['position']} / epoch {state['epoch']} is out of range")
        sampler.epoch, sampler.position = int(state["epoch"]), int(state["position"])


def make_loader(dataset: WindowDataset, batch_size: int, seed: int = 0, workers: int = 0, shuffle: bool = True,
                drop_last: bool = True) -> WindowLoader:
    """A :class:`WindowLoader`: the order is fixed by ``seed`` (same seed, same batches), workers
    persist across epochs, and each batch is one gather.
    """
    return WindowLoader(dataset, batch_size, seed=seed, workers=workers, shuffle=shuffle, drop_last=drop_last)
