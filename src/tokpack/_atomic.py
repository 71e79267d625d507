"""Directories that appear whole or not at all: build in a hidden sibling, then rename.

Temporary names carry the host and the process id (``.NAME.tmp-PID@HOST-RANDOM``), because a
cache or dataset on a shared file system (NFS, Lustre) is written from many machines, where
process ids repeat and a process of another machine cannot be asked whether it is alive. So an
abandoned temporary is removed only by a process on the host that made it, once its process is
gone; temporaries of other hosts are left alone.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tokpack.errors import InputError

_MARK = ".tmp-"
_PARTIAL = ".partial"


def temporary_sibling(destination: Path) -> Path:
    """Create and return an empty hidden directory beside ``destination``, named for this process
    and host; first remove what killed writers of ``destination`` on this host left behind."""
    temporary = _sibling_name(destination)
    temporary.mkdir()
    return temporary


def _sibling_name(destination: Path) -> Path:
    """:func:`temporary_sibling`'s name, not yet made (its parent is)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(destination)
    return destination.with_name(f".{destination.name}{_MARK}{_owner()}-{secrets.token_hex(4)}")


def publish(temporary: Path, destination: Path) -> None:
    """Rename ``temporary`` to ``destination`` and make the rename durable.

    Raises:
        InputError: ``destination`` exists already (``temporary`` is removed).
    """
    try:
        os.rename(temporary, destination)
    except OSError:
        shutil.rmtree(temporary, ignore_errors=True)
        raise InputError("appeared while writing; not replaced", where=destination) from None
    _sync_directory(destination.parent)


#: What ``errno`` says when a disk, or the user's quota on it, is full.
_FULL = (errno.ENOSPC, errno.EDQUOT)


def full_disk(error: BaseException | None, where: str | os.PathLike[str], fix: str = "free space on that disk, or write to another one"
              ) -> InputError | None:
    """The error to raise instead of ``error`` when it is a full disk's, naming ``where`` (a write
    to a full disk fails with ``[Errno 28]`` and no path) and the fix, or a file too large for
    its file system or the file size limit (``[Errno 27]``, as nameless); ``None`` for any other.

    >>> print(full_disk(OSError(errno.ENOSPC, "No space left on device"), "cache/packs/x"))
    cache/packs/x: no space left on its disk (No space left on device); free space on that disk, or write to another one
    """
    if isinstance(error, OSError) and error.errno in _FULL:
        return InputError(f"no space left on its disk ({error.strerror})", where=where, fix=fix)
    if isinstance(error, OSError) and error.errno == errno.EFBIG:  # as nameless: FAT32's 4 GiB, or ulimit -f
        return InputError(f"too large for its file system, or above this process's file size limit ({error.strerror})",
                          where=where, fix="write to a file system that takes larger files, or raise the limit (ulimit -f)")
    return None


@contextmanager
def building(destination: Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``destination`` if the block succeeds; with
    ``replace``, a ``destination`` that exists already is replaced whole (:func:`replace_directory`)."""
    temporary = _sibling_name(destination)
    # Made and published inside the try: a Ctrl-C that lands between them leaves nothing behind.
    try:
        temporary.mkdir()
        yield temporary
        if replace and os.path.lexists(destination):
            replace_directory(temporary, destination)
        else:
            publish(temporary, destination)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)  # (gone already once renamed into place)
        if (full := full_disk(error, destination)) is not None:
            raise full from error
        raise


def replace_directory(temporary: Path, destination: Path) -> None:
    """Put the directory ``temporary`` (a sibling of ``destination``) in the place of the directory
    ``destination``, which is deleted, keeping its permissions; make it durable.

    The old directory is renamed aside, then ``temporary`` in: a reader sees the old directory,
    none for an instant, or the new one, never parts of both. A signal that comes meanwhile is
    handled once both renames are done and the old directory is gone, so Ctrl-C never leaves
    ``destination`` missing.
    """
    from tokpack._signals import held

    aside = destination.with_name(f".{destination.name}{_MARK}{_owner()}-{secrets.token_hex(4)}")
    try:
        os.chmod(temporary, stat.S_IMODE(os.stat(destination).st_mode))
        with held():
            os.rename(destination, aside)
            try:
                os.rename(temporary, destination)
            except OSError:
                os.rename(aside, destination)
                raise
            shutil.rmtree(aside, ignore_errors=True)
    except OSError:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    _sync_directory(destination.parent)


def _sync_directory(folder: Path) -> None:
    """Make the renames in ``folder`` durable."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def partial_sibling(path: Path) -> Path:
    """Return a fresh hidden name beside ``path`` (``.NAME.PID@HOST-RANDOM.partial``) to write a file
    into before renaming it to ``path``; first remove what killed writers of ``path`` on this host
    left behind (see :func:`remove_abandoned`)."""
    path = Path(path)
    prefix = f".{path.name}."
    for name in _names_in(path.parent, prefix, _PARTIAL):
        owner = name[len(prefix) : -len(_PARTIAL)].rsplit("-", 1)[0]
        if _abandoned(owner):
            (path.parent / name).unlink(missing_ok=True)
    return path.with_name(f"{prefix}{_owner()}-{secrets.token_hex(4)}{_PARTIAL}")


def _names_in(folder: Path, prefix: str, suffix: str = "") -> list[str]:
    """The names in ``folder`` that start with ``prefix`` and end with ``suffix``: one listing,
    compared as strings, not matched as patterns (a folder of thousands of shards is listed before
    each write into it, so this costs no more than the listing itself)."""
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in entries if entry.name.startswith(prefix) and entry.name.endswith(suffix)]
    except FileNotFoundError:
        return []


def write_atomically(path: Path, content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8) to ``path`` through a temporary sibling renamed into
    place, so a reader never sees half a file; return ``path``.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / f".a.json.1@{_host()}-0000.partial").write_text("{")  # a killed writer's; pid 1 lives
    1
    >>> write_atomically(folder / "a.json", "{}").read_text(), len(list(folder.iterdir()))
    ('{}', 2)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_sibling(path)
    try:
        partial.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(partial, path)
    except BaseException as error:
        partial.unlink(missing_ok=True)
        if (full := full_disk(error, path)) is not None:
            raise full from error
        raise
    return path


def remove_abandoned(destination: Path) -> int:
    """Delete temporary siblings of ``destination`` made on this host by a process that is gone;
    return how many.

    A temporary of another host is never touched (its process cannot be checked from here), nor
    one of a live process here, so this is safe without a lock, even where ``flock`` is node-local.
    """
    removed = 0
    prefix = f".{destination.name}{_MARK}"
    for name in _names_in(destination.parent, prefix):
        if _abandoned(name[len(prefix) :].rsplit("-", 1)[0]):
            shutil.rmtree(destination.parent / name, ignore_errors=True)
            removed += 1
    return removed


def _abandoned(owner: str) -> bool:
    """Whether ``owner`` (``PID@HOST``) names a process of this host that is gone."""
    pid, _, host = owner.partition("@")
    return host == _host() and pid.isdigit() and not process_alive(int(pid))


def _host() -> str:
    try:  # the host's name as gethostname() gives it on POSIX, without importing socket (its enums are slow to make)
        name = os.uname().nodename
    except AttributeError:  # Windows
        import socket

        name = socket.gethostname()
    # Only characters that cannot be mistaken for the name's separators.
    return "".join(c if c.isalnum() or c == "." else "_" for c in name) or "localhost"


def _owner() -> str:
    """``PID@HOST``: who made a temporary name."""
    return f"{os.getpid()}@{_host()}"


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine is running (or is another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
