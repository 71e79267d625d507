"""``tokpack.torch``: PyTorch loaders over packs (imports torch).

:func:`make_batch_loader` serves :class:`tokpack.serve.PackedBatches` as tensors (the training
path); :class:`WindowDataset` and :func:`make_loader` serve the fixed windows of
:mod:`tokpack.serve.fixed`.

Without torch installed, importing this module raises :class:`~tokpack.errors.MissingExtra`
naming the extra to install (``pip install 'tokpack[torch]'``).
"""

try:
    from tokpack.serve.torch import BatchLoader, WindowDataset, WindowLoader, make_batch_loader, make_loader, to_tensors
except ImportError as error:
    from tokpack._extras import missing_extra

    raise (missing_extra(error) or error) from None

__all__ = ["BatchLoader", "WindowDataset", "WindowLoader", "make_batch_loader", "make_loader", "to_tensors"]
