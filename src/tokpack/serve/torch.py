"""PyTorch adapters: the batch loader of the training path (:func:`make_batch_loader`), and a
Dataset over the fixed windows of :mod:`tokpack.serve.fixed` with its loader (:func:`make_loader`).

Importing this module imports torch; nothing else in tokpack does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from tokpack import _checks as checks
from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.serve.fixed import Windows
from tokpack.serve.loader import PackedBatches

Batch = tuple[torch.Tensor, torch.Tensor]


class WindowDataset(Dataset[Batch]):
    """Windows as ``int64`` tensors: ``dataset[i]`` is one ``(x, y)``, ``dataset[[i, j, …]]`` a
    whole batch gathered at once by :meth:`Windows.window_batch`.

    Pickling sends the pack's path, so loader workers map the same pages rather than copying.
    """

    def __init__(self, windows: Windows) -> None:
        if not isinstance(windows, Windows):
            raise InputError(f"windows must be a tokpack.serve.Windows, got {type(windows).__name__}")
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
        return torch.from_numpy(x), torch.from_numpy(y)  # contiguous: ``y.view(-1)`` works


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
        if not isinstance(dataset, WindowDataset):
            raise InputError(f"dataset must be a WindowDataset, got {type(dataset).__name__}")
        batch_size, workers = checks.positive_int("batch_size", batch_size), checks.non_negative_int("workers", workers)
        seed = checks.non_negative_int("seed", seed)
        shuffle, drop_last = checks.boolean("shuffle", shuffle), checks.boolean("drop_last", drop_last)
        if drop_last and batch_size > len(dataset):
            raise InputError(f"batch_size {batch_size} is larger than the dataset's {len(dataset)} windows, so an "
                             "epoch would have no batch", fix="use a smaller batch_size, or drop_last=False")
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
        """``{epoch, position, seed, …}``: where the next batch comes from, with the data's
        checksums and the vocabulary's identity (so :func:`tokpack.require_vocabulary` accepts a
        checkpoint holding it as ``"loader"``)."""
        sampler = self._batches
        meta = self.dataset.windows.pack.meta
        return {"epoch": sampler.epoch, "position": sampler.position, "seed": sampler.seed,
                "batch_size": sampler.batch_size, "shuffle": sampler.shuffle, "drop_last": sampler.drop_last,
                "n_items": sampler.n_items, "tokens_sha256": meta.tokens_sha256, "starts_sha256": meta.starts_sha256,
                "vocabulary": meta.vocabulary.model_dump(mode="json", by_alias=True)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``.

        Raises:
            VocabularyMismatch: ``state`` was saved over another vocabulary.
            IntegrityError: ``state`` was saved over other data.
            InputError: ``state`` was saved with other settings (a state that records no
                checksums is checked on these alone).
        """
        state = checks.mapping("state", state)
        sampler = self._batches
        meta = self.dataset.windows.pack.meta
        saved = state.get("vocabulary")
        if isinstance(saved, dict) and (saved.get("sha256"), saved.get("n_vocab")) != (meta.vocabulary.sha256, meta.vocabulary.n_vocab):
            raise VocabularyMismatch(f"loader state was saved over vocabulary {str(saved.get('sha256'))[:16]} "
                                     f"(n_vocab {saved.get('n_vocab')}); this loader serves {meta.vocabulary.short} "
                                     f"(n_vocab {meta.vocabulary.n_vocab})")
        if "tokens_sha256" in state and (state["tokens_sha256"], state.get("starts_sha256")) != (
                meta.tokens_sha256, meta.starts_sha256):
            raise IntegrityError(f"loader state was saved over other data (ids {str(state['tokens_sha256'])[:16]}); "
                                 f"this loader serves {self.dataset.windows.pack.path} (ids {meta.tokens_sha256[:16]})")
        mine = {"seed": sampler.seed, "batch_size": sampler.batch_size, "shuffle": sampler.shuffle,
                "drop_last": sampler.drop_last, "n_items": sampler.n_items}
        theirs = {key: state.get(key) for key in mine}
        if mine != theirs:
            raise InputError(f"loader state was saved with {theirs}, this loader has {mine}")
        if not _whole(state.get("position")) or not _whole(state.get("epoch")):
            raise InputError(f"loader state position {state.get('position')!r} / epoch {state.get('epoch')!r} are not whole numbers")
        if not 0 <= state["position"] <= len(sampler) or state["epoch"] < 0:
            raise InputError(f"loader state position {state['position']} / epoch {state['epoch']} is out of range")
        sampler.epoch, sampler.position = int(state["epoch"]), int(state["position"])


def _whole(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def make_loader(dataset: WindowDataset, batch_size: int, seed: int = 0, workers: int = 0, shuffle: bool = True,
                drop_last: bool = True) -> WindowLoader:
    """A :class:`WindowLoader`: the order is fixed by ``seed`` (same seed, same batches), workers
    persist across epochs, and each batch is one gather.
    """
    return WindowLoader(dataset, batch_size, seed=seed, workers=workers, shuffle=shuffle, drop_last=drop_last)


def to_tensors(batch: dict[str, Any]) -> dict[str, Any]:
    """A batch of numpy arrays as torch tensors sharing their memory (ints stay ints)."""
    return {key: torch.from_numpy(value) if isinstance(value, np.ndarray) else value for key, value in batch.items()}


class _Steps(Dataset[dict[str, Any]]):
    """``dataset[k]`` is the rank's batch of step ``k`` as tensors: one gather per step."""

    def __init__(self, batches: PackedBatches) -> None:
        self.batches = batches

    def __getitem__(self, step: int) -> dict[str, Any]:
        return to_tensors(self.batches.batch(int(step)))


class _StepsFrom(Sampler[int]):
    """Steps ``start, start + 1, ...`` forever, past the ``skipped`` spans ``[a, b)``."""

    def __init__(self, start: int, skipped: list[tuple[int, int]]) -> None:
        self.start, self.skipped = start, skipped

    def __iter__(self) -> Iterator[int]:
        step = self.start
        while True:
            for a, b in self.skipped:
                if a <= step < b:
                    step = b
            yield step
            step += 1


class BatchLoader:
    """Iterates the rank's batches of a :class:`PackedBatches` as dicts of contiguous tensors, in
    step order, from ``batches.step`` on (forever: stop after the steps you train).

    With ``num_workers`` above 0, worker processes build the batches ahead; PyTorch's map-style
    loading keeps them in step order. :meth:`state_dict` counts the batches handed out (not the
    ones prefetched), so a checkpoint resumes exactly after the last batch the model saw. A
    change while it runs (``set_weights``, ``skip``, a loaded state) drops the batches built
    ahead and builds on from the next step under the change.
    """

    def __init__(self, batches: PackedBatches, *, num_workers: int = 0, prefetch_factor: int | None = None) -> None:
        if not isinstance(batches, PackedBatches):
            raise InputError(f"batches must be a PackedBatches, got {type(batches).__name__}")
        num_workers = checks.non_negative_int("num_workers", num_workers)
        if prefetch_factor is not None:
            prefetch_factor = checks.positive_int("prefetch_factor", prefetch_factor)
        self.batches, self.num_workers, self.prefetch_factor = batches, num_workers, prefetch_factor

    @property
    def ignore_index(self) -> int:
        """The label value the loss must ignore (the padding id)."""
        return self.batches.ignore_index

    def __iter__(self) -> Iterator[dict[str, Any]]:
        batches = self.batches
        if not self.num_workers:
            # In-process, a DataLoader would only add its per-batch bookkeeping (profiler scope,
            # fetcher, default_convert over the dict) to the same calls; this is what it does.
            yield from map(to_tensors, batches)
            return
        extra: dict[str, Any] = {"prefetch_factor": self.prefetch_factor or 2}
        while True:
            revision = batches._revision  # the workers build from a copy: a change starts them again
            sampler = _StepsFrom(batches.step, batches.skipped)
            loader = DataLoader(_Steps(batches), batch_size=None, sampler=sampler, num_workers=self.num_workers,
                                **extra)
            for step, batch in zip(sampler, loader):
                batches.step = step + 1  # delivered, not merely prefetched
                yield batch
                if batches._revision != revision:
                    break

    def state_dict(self) -> dict[str, Any]:
        """:meth:`PackedBatches.state_dict`: the next step, seed, layout, data and vocabulary identity."""
        return self.batches.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue after the step ``state`` was saved at (see :meth:`PackedBatches.load_state_dict`);
        a loop started afterwards begins there."""
        self.batches.load_state_dict(state)


def make_batch_loader(batches: PackedBatches, *, num_workers: int = 0) -> BatchLoader:
    """A :class:`BatchLoader` over ``batches`` (see there)."""
    return BatchLoader(batches, num_workers=num_workers)
