"""How long runs give the memory they freed back to the system: glibc's allocator keeps it.

glibc's arenas keep what is freed for reuse, and a run that frees blocks of varying sizes in
varying order leaves holes only reuse can fill, so without a remedy ``prepare``'s main arena
grows with the corpus while little of it is in use (BENCHMARKS.md, "prepare's peak memory").
Both remedies are glibc's own (``malloc_trim``, ``mallopt``); elsewhere they do nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _glibc(name: str) -> Callable[..., int] | None:
    """glibc's allocator function ``name`` (``malloc_trim``, ``mallopt``), or ``None`` elsewhere."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError, TypeError):  # not glibc
        return None


@functools.cache
def map_large_allocations() -> None:
    """Keep glibc's mmap threshold at its start-up value (128 KiB) for the rest of the process.

    glibc raises the threshold each time a mapped block is freed, up to 32 MiB, so after the
    first few large arrays are freed the counting tables and the merge state's arrays come from
    the heap, and the copies a growing array leaves behind stay resident there (``malloc_trim``
    returns only some of it). Pinned, every block over 128 KiB is mapped and unmapped on its own,
    which lowers the trainer's peak memory (BENCHMARKS.md, "Against rustbpe"). The setting is
    process-wide and stays (glibc cannot be told to adapt again); it changes nothing for blocks
    under 128 KiB, and larger ones are then handled as in a fresh process.
    Elsewhere than glibc, nothing is done.
    """
    mallopt = _glibc("mallopt")
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 128 * 1024)


@functools.cache
def reuse_freed_blocks() -> None:
    """Let glibc keep freed blocks of up to 32 MiB, and up to 32 MiB free at its heap's top, for
    the allocations that follow, instead of handing them back to the system at once.

    glibc starts a process with both limits low (128 KiB) and raises them as mapped blocks are
    freed; until then each array over 128 KiB is mapped, faulted in page by page, and unmapped,
    and the next one faults in again. A ``prepare`` of 10 MB makes most of its arrays in that
    window (the rank file's, the documents', the ids'), so these limits save page faults and CPU
    for a little more peak memory (32 MiB is glibc's own ceiling for the first; figures in
    BENCHMARKS.md, "prepare's peak memory"). ``prepare`` still returns what is free every 64 MiB
    of text (:func:`return_freed_memory`). The setting is process-wide and stays (glibc cannot
    be told to adapt again). Elsewhere than glibc, nothing is done.
    """
    mallopt = _glibc("mallopt")
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        mallopt(_M_TRIM_THRESHOLD, 32 << 20)


#: glibc's ``mallopt`` parameter numbers for the mmap and trim thresholds (``malloc.h``).
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1


def return_freed_memory() -> None:
    """Hand the free pages of every malloc arena back to the system (glibc; elsewhere nothing).

    The BPE trainer calls it between its stages (the counting threads' tables, freed before the
    merge state is built, and the arrays the merge loop outgrows stay resident otherwise:
    BENCHMARKS.md, "Against rustbpe"); ``prepare`` after every 64 MiB of text it encodes. A call
    takes well under a millisecond when there is little to return; what it returns is faulted in
    again when next used, so it is not called after every allocation.
    """
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim(0)
