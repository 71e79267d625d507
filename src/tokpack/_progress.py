"""Progress reporting: what long work (preparing, a shard task, a chess shard) tells its caller
after each step, and the callback that hears it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Stage = Literal["hashing", "training", "encoding", "verifying"]


@dataclass(frozen=True)
class PrepareProgress:
    """What :func:`tokpack.prepare` reports to its ``progress`` callback after each step of work."""

    stage: Stage
    done_bytes: int
    total_bytes: int
    n_tokens: int = 0
    n_docs: int = 0
    #: numba is compiling the stage's kernels: a first run's wait, which their cache spares later runs.
    compiling: bool = False


ProgressCallback = Callable[[PrepareProgress], None]
