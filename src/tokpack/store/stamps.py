"""Verification stamps: a pack hashed once against its record is not hashed again until a file of it changes.

A stamp is a small JSON file in the tokpack cache (``$TOKPACK_CACHE/verified/``, never inside the
pack, which may be read-only or shared), named for the pack's absolute path. It records the
pack's seal and, for each of its files, the size, modification time, change time and inode at
the moment the checksums matched. A later open whose files show the same four values trusts the
stamp; any write, replacement or truncation changes at least one of them (the change time cannot
be set back by a user), so the next open verifies again.

What a stamp cannot see: a change made within one tick of a file system whose times are coarse
(some network file systems keep seconds) and that keeps the size. ``verify=True`` or ``tokpack
inspect`` (which hashes by default) always hashes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from tokpack._schema import Record

STAMP_SCHEMA = "tokpack.verified.v2"


class FileState(Record):
    """One file as it was when its checksum matched."""

    name: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


class VerificationStamp(Record):
    """``$TOKPACK_CACHE/verified/<hash of the path>.json``: a pack that matched its record."""

    schema_: Literal["tokpack.verified.v2"] = Field(default="tokpack.verified.v2", alias="schema")
    path: str
    seal: str
    files: list[FileState]


def stamp_file(directory: Path) -> Path:
    """Where the stamp of the pack at ``directory`` lives."""
    from tokpack._cache import default_cache_dir

    key = hashlib.sha256(str(Path(directory).resolve()).encode()).hexdigest()[:32]
    return default_cache_dir() / "verified" / f"{key}.json"


def _states(directory: Path, names: Sequence[str]) -> list[FileState] | None:
    states = []
    for name in names:
        try:
            status = os.stat(directory / name)
        except OSError:
            return None
        states.append(FileState(name=name, size=status.st_size, mtime_ns=status.st_mtime_ns,
                                ctime_ns=status.st_ctime_ns, inode=status.st_ino))
    return states


def is_stamped(directory: Path, seal: str, names: Sequence[str]) -> bool:
    """Whether ``directory``'s files ``names`` are exactly as they were when last verified."""
    from tokpack._schema import read_record

    path = stamp_file(directory)
    if not path.is_file():
        return False
    try:
        stamp = read_record(VerificationStamp, path)
    except ValueError:  # a damaged stamp only costs a verification
        return False
    return (stamp.path == str(Path(directory).resolve()) and stamp.seal == seal
            and stamp.files == _states(directory, names))


def stamp(directory: Path, seal: str, names: Sequence[str]) -> None:
    """Record that ``directory``'s files ``names`` matched the record sealed ``seal`` just now.

    A cache that cannot be written (read-only, full) only means the next open verifies again.
    """
    from tokpack._schema import write_record

    states = _states(directory, names)
    if states is None:
        return
    try:
        write_record(VerificationStamp(path=str(Path(directory).resolve()), seal=seal, files=states),
                     stamp_file(directory))
    except OSError:
        pass
