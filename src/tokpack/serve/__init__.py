"""Serving batches: step schedules, document-aligned windows and their batch gathers.

The PyTorch adapters live in :mod:`tokpack.torch`, so importing this package never imports torch.
"""

from tokpack.serve.schedule import TokenBatches
from tokpack.serve.windows import Windows

__all__ = ["TokenBatches", "Windows"]
