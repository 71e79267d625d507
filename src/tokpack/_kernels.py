"""What tokpack's numba kernels share: how they are compiled (borrowing their arrays, helpers inlined by LLVM)
and the helpers several use (a text's code points, UTF-8, the hashes of their tables).

numba counts references to arrays (``NRT_incref``/``NRT_decref``: a call and an atomic add each)
and prunes the counts only where it can see both ends of a simple path. Two patterns keep them in
hot loops, and the two decorators here avoid both:

- A helper written with numba's own ``inline="always"`` is copied into its caller's numba IR, and
  the caller counts every array the helper takes at every call, when the helper has a branch or a
  loop (a scanner whose helpers each take the text and a class table spends most of its time
  there; ``tests/test_kernels.py`` counts the calls).
- A loop in which an array variable may be replaced (a buffer grown when full) counts that array at
  every turn, so a hot loop's buffers are allocated before it.

:func:`borrowing` compiles a kernel without reference counts (numba's ``_nrt=False``): it borrows
every array from its caller, may neither allocate an array (numba refuses to compile it) nor
return one (its caller would take a reference nobody counted), and what it calls is compiled the
same way. Its caller allocates, and calls it again with larger buffers if it stops for want of
room. :func:`inlined` is the same for a small helper of a hot loop, which LLVM inlines
(``forceinline``) where it is called.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import numpy as np
from numba import njit
from numba.core import event

_Function = TypeVar("_Function", bound=Callable[..., Any])

# ``_nrt`` is a target option that numba's type stubs do not list (numba's own tests use it). numba's
# cache does not key on these options: after changing them, delete the ``__pycache__`` folders.
_BORROWING: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}


def borrowing(function: _Function) -> _Function:
    """``function`` compiled as a kernel that borrows every array it is given and allocates none
    (see the module's docstring); cached beside its source, releasing the GIL."""
    return cast(_Function, njit(**_BORROWING)(function))


def inlined(function: _Function) -> _Function:
    """``function`` compiled as a :func:`borrowing` helper of a kernel's hot loop, which LLVM
    inlines where it is called."""
    return cast(_Function, njit(**_BORROWING, forceinline=True)(function))


@contextmanager
def compiling_said(say: Callable[[bool], None]) -> Iterator[None]:
    """Inside, ``say(True)`` when numba starts compiling a kernel (its cache holds none for it: a
    first run, or a new numba or tokpack) and ``say(False)`` when it is done; a kernel's callees,
    compiled inside it, are part of its compilation. A kernel loaded from the cache says nothing.
    Calls from any thread while inside (numba's public event API, ``numba:compile``)."""
    depth = [0]
    lock = threading.Lock()

    class Said(event.Listener):
        def on_start(self, _event: event.Event) -> None:
            with lock:
                depth[0] += 1
                if depth[0] == 1:
                    say(True)

        def on_end(self, _event: event.Event) -> None:
            with lock:
                depth[0] -= 1
                if depth[0] == 0:
                    say(False)

    with event.install_listener("numba:compile", Said()):
        yield


def code_points(parts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``parts`` as one array of code points (``uint32``) and the end of each part.

    Every ``str`` element is one code point, as ``regex`` sees it: a lone surrogate stays itself,
    and a high and a low surrogate in a row stay two code points (Python strings never join them).
    What a surrogate then means is the caller's rule (the trainer refuses it before UTF-8).

    >>> cps, ends = code_points(["a\\ud800", "", "\\ud83d\\ude00"])
    >>> [hex(cp) for cp in cps], ends.tolist()
    (['0x61', '0xd800', '0xd83d', '0xde00'], [2, 2, 4])
    """
    cps = np.frombuffer("".join(parts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    ends = np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)))
    return cps, ends


@inlined
def utf8_size(cp):
    """The UTF-8 bytes of code point ``cp``."""
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 3
    return 4


@inlined
def utf8(cps, begin, end, out):
    """UTF-8 of ``cps[begin:end]`` into ``out`` from its start; returns the byte count. (A lone
    surrogate is written as its three bytes, which no UTF-8 decoder takes: callers refuse or
    replace surrogates first.)"""
    n = 0
    for k in range(begin, end):
        cp = cps[k]
        if cp < 0x80:
            out[n] = cp
            n += 1
        elif cp < 0x800:
            out[n] = 0xC0 | (cp >> 6)
            out[n + 1] = 0x80 | (cp & 0x3F)
            n += 2
        elif cp < 0x10000:
            out[n] = 0xE0 | (cp >> 12)
            out[n + 1] = 0x80 | ((cp >> 6) & 0x3F)
            out[n + 2] = 0x80 | (cp & 0x3F)
            n += 3
        else:
            out[n] = 0xF0 | (cp >> 18)
            out[n + 1] = 0x80 | ((cp >> 12) & 0x3F)
            out[n + 2] = 0x80 | ((cp >> 6) & 0x3F)
            out[n + 3] = 0x80 | (cp & 0x3F)
            n += 4
    return n


@inlined
def fnv1a(data, begin, end):
    """FNV-1a (64 bits) over ``data[begin:end]``, bytes or code points: the hash a table of pieces
    keys them by."""
    h = np.uint64(0xCBF29CE484222325)
    for k in range(begin, end):
        h = (h ^ np.uint64(data[k])) * np.uint64(0x100000001B3)
    return h


@inlined
def mix(h):
    """splitmix64's finalizer: where a 64-bit hash probes a table first (FNV's low bits alone
    probe badly)."""
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h
