"""Shard tasks that fail on purpose, for the retry tests (importable by worker processes)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tokpack.engines import run_shard
from tokpack.store.writer import PackWriter

VICTIM = 1


def killed_mid_shard_once(dataset: Path, rank: int, **options: object) -> bool:
    """Shard ``VICTIM`` dies by SIGKILL after writing its first batch, the first time only."""
    flag = Path(dataset) / f".killed-once-{rank}"
    if rank == VICTIM and not flag.exists():
        flag.touch()
        original = PackWriter.add_documents

        def add_then_die(self: PackWriter, documents, **options):  # type: ignore[no-untyped-def]
            original(self, documents, **options)
            os.kill(os.getpid(), signal.SIGKILL)  # mid-shard, no cleanup: like a lost node

        PackWriter.add_documents = add_then_die  # type: ignore[method-assign]
    return run_shard(dataset, rank, **options)  # type: ignore[arg-type]


def record_pid_and_sleep(dataset: Path, rank: int, **options: object) -> bool:
    """Write this worker's pid into ``dataset/pids/`` and sleep: a shard that never ends."""
    import time

    (Path(dataset) / "pids" / str(os.getpid())).touch()
    time.sleep(300)
    return True
