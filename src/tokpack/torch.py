"""``tokpack.torch``: PyTorch datasets and loaders over packs (imports torch)."""

from tokpack.serve.torch import WindowDataset, WindowLoader, make_loader

__all__ = ["WindowDataset", "WindowLoader", "make_loader"]
