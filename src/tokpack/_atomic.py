"""Directories that appear whole or not at all: build in a hidden sibling, then rename."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tokpack.errors import InputError

_MARK = ".tmp-"


def temporary_sibling(destination: Path) -> Path:
    """Create and return an empty hidden directory beside ``destination``, named for this process."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    temporary = destination.with_name(f".{destination.name}{_MARK}{os.getpid()}-{secrets.token_hex(4)}")
    temporary.mkdir()
    return temporary


def publish(temporary: Path, destination: Path) -> None:
    """Rename ``temporary`` to ``destination`` and make the rename durable.

    Raises:
        ValueError: ``destination`` exists already (``temporary`` is removed).
    """
    try:
        os.rename(temporary, destination)
    except OSError:
        shutil.rmtree(temporary, ignore_errors=True)
        raise InputError(f"{destination}: appeared while writing; not replaced") from None
    descriptor = os.open(destination.parent, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextmanager
def building(destination: Path) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``destination`` if the block succeeds."""
    temporary = temporary_sibling(destination)
    try:
        yield temporary
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    publish(temporary, destination)


def write_atomically(path: Path, content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8) to ``path`` through a temporary sibling renamed into
    place, so a reader never sees half a file; return ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    os.replace(partial, path)
    return path


def remove_abandoned(destination: Path) -> int:
    """Delete temporary siblings of ``destination`` whose process is gone; return how many.

    Call it while holding the destination's lock, so a live writer's directory is never touched.
    """
    removed = 0
    prefix = f".{destination.name}{_MARK}"
    for candidate in destination.parent.glob(f"{prefix}*"):
        pid = candidate.name[len(prefix) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(candidate, ignore_errors=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
