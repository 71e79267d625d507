"""Serving batches: step schedules, document-aligned windows and their batch gathers."""

from tokpack.serve.schedule import TokenBatches

__all__ = ["TokenBatches"]
