"""Where prepared corpora live, and the lock that lets two processes share them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tokpack._files import file_kind
from tokpack.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX; renames alone still keep packs whole
    fcntl = None  # type: ignore[assignment]


def default_cache_dir() -> Path:
    """``$TOKPACK_CACHE`` if set, else ``~/.cache/tokpack``."""
    return Path(os.environ.get("TOKPACK_CACHE") or Path.home() / ".cache" / "tokpack")


#: What to do when the cache cannot be written.
UNWRITABLE_CACHE = "make the cache writable, or point cache_dir= or TOKPACK_CACHE at one that is"


@contextmanager
def locked(target: Path, *, fix: str = "make that folder writable, or write elsewhere") -> Iterator[None]:
    """Hold an exclusive lock on ``target`` (a sibling ``.lock`` file) while the block runs;
    ``fix`` is what the error says to do when the lock cannot be created (the cache's callers
    say :data:`UNWRITABLE_CACHE`).

    A second process preparing the same corpus waits here, then finds the finished pack. A cache
    that cannot be written (read-only, another user's) but already holds ``target`` is read
    without a lock: a published directory is complete and never changes, so readers need none.

    ``flock`` may be node-local on a network file system; nothing depends on it for safety (see
    README, "Shared file systems"): directories appear by atomic rename, and the loser of a race
    finds the winner's identical result.
    """
    if not target.name:  # the root of a file system: no sibling can hold its lock
        raise InputError("is the root of the file system; tokpack writes into a folder of its own", where=target,
                         fix="name a new folder")
    lock_path = target.with_name(target.name + ".lock")
    while True:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # Without blocking: opening a FIFO of the lock's name would wait for a reader forever.
            handle = open(lock_path, "a", opener=_without_blocking)
        except OSError as error:
            if target.exists():  # only reading a finished result: no lock needed
                yield
                return
            _refuse_no_lock_file(lock_path)
            raise InputError(f"cannot create the lock ({error.strerror or error})", where=lock_path, fix=fix) from None
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # a FIFO that has a reader opens
            handle.close()
            _refuse_no_lock_file(lock_path)
        if fcntl is None or _still_there(handle, lock_path):
            break
        handle.close()  # its holder removed the lock file while we waited: lock the new one
    with handle:
        try:
            yield
        finally:
            if fcntl is not None:
                # The lock file goes while still held, so it is never left beside the output; a
                # waiter on the removed file sees that above and locks a new one.
                try:
                    os.unlink(lock_path)
                except OSError:
                    pass
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _without_blocking(path: str, flags: int) -> int:
    """``open``'s opener: ``os.open`` that does not wait (for a FIFO's reader)."""
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o666)


def _refuse_no_lock_file(lock_path: Path) -> None:
    """Refuse a lock path that holds something other than a regular file (a FIFO, a folder):
    tokpack makes its locks as regular files and removes them, so someone else put it there.

    Raises:
        InputError: naming the path and what it is.
    """
    try:
        mode = os.lstat(lock_path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
        raise InputError(f"is {file_kind(mode)}, not a lock file (tokpack's locks are regular files it makes and "
                         "removes)", where=lock_path, fix="delete it and run again")


def _still_there(handle: object, lock_path: Path) -> bool:
    """Lock ``handle``; whether ``lock_path`` is still the file it holds (not removed meanwhile)."""
    descriptor = handle.fileno()  # type: ignore[attr-defined]
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    try:
        held, present = os.fstat(descriptor), os.stat(lock_path)
    except OSError:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    if (held.st_dev, held.st_ino) != (present.st_dev, present.st_ino):
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    return True
