"""Where prepared corpora live, and the lock that lets two processes share them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX; renames alone still keep packs whole
    fcntl = None  # type: ignore[assignment]


def default_cache_dir() -> Path:
    """``$TOKPACK_CACHE`` if set, else ``~/.cache/tokpack``."""
    return Path(os.environ.get("TOKPACK_CACHE") or Path.home() / ".cache" / "tokpack")


@contextmanager
def locked(target: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``target`` (a sibling ``.lock`` file) while the block runs.

    A second process preparing the same corpus waits here, then finds the finished pack.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
