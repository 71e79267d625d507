"""``tokpack.torch``: PyTorch loaders over packs (imports torch).

:func:`make_batch_loader` serves :class:`tokpack.serve.PackedBatches` as tensors (the training
path); :class:`WindowDataset` and :func:`make_loader` are the seed contract's windows.
"""

from tokpack.serve.torch import BatchLoader, WindowDataset, WindowLoader, make_batch_loader, make_loader, to_tensors

__all__ = ["BatchLoader", "WindowDataset", "WindowLoader", "make_batch_loader", "make_loader", "to_tensors"]
