"""Serving batches: the training path (layouts, global batches over ranks, mixtures, resume) and
the seed contracts (step schedules, document-aligned windows).

The PyTorch adapters live in :mod:`tokpack.torch`, so importing this package never imports torch.
"""

from tokpack.serve.batches import EvalBatches, Mixture, PackedBatches
from tokpack.serve.history import batch_ramp
from tokpack.serve.layouts import LAYOUTS, Layout, make_layout
from tokpack.serve.schedule import TokenBatches
from tokpack.serve.windows import Windows

__all__ = ["LAYOUTS", "EvalBatches", "Layout", "Mixture", "PackedBatches", "TokenBatches", "Windows", "batch_ramp",
           "make_layout"]
