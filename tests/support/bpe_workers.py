"""Splitters that fail inside a spawned BPE count worker (importable by the worker process)."""

from __future__ import annotations

import os
import signal
from collections import Counter

from tokpack.bpe.fast import _Splitter


class RaisingSplitter(_Splitter):
    """Raises on its first batch, as a bug in a worker would."""

    def count_into(self, counts: Counter[str], batch: list[str]) -> None:
        raise RuntimeError("worker failed")


class KilledSplitter(_Splitter):
    """Dies by SIGKILL on its first batch, as the kernel's out-of-memory killer does."""

    def count_into(self, counts: Counter[str], batch: list[str]) -> None:
        os.kill(os.getpid(), signal.SIGKILL)
