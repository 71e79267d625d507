"""How the small helpers of tokpack's numba kernels are compiled: inlined by LLVM, without reference counts.

A helper written with numba's own ``inline="always"`` is copied into its caller's numba IR, and the
caller then counts references to every array the helper takes: an ``NRT_incref`` and an
``NRT_decref`` (a call and an atomic add each) per array, per call. numba's reference-count pruning
removes them only where the helper has neither a branch nor a loop, so in a loop over pieces they
stayed: the GPT-2 pre-tokenizer, whose helpers each take the text and a class table, ran 2.2x
faster without them (0.062 -> 0.028 CPU s on the encoder benchmark's 11 MB of mixed text), and the
encoder 1.12-1.29x.

:func:`inlined` compiles a helper on its own without reference counting (numba's ``_nrt=False``:
it borrows its caller's arrays) and marks it for LLVM to inline (``forceinline``). Such a helper
may neither allocate an array nor return one (numba refuses the first when it compiles; the
second would hand its caller a reference it never counted), and what it calls is compiled the
same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

_Function = TypeVar("_Function", bound=Callable[..., Any])

# ``_nrt`` is a target option that numba's type stubs do not list (numba's own tests use it). numba's
# cache does not key on these options: after changing them, delete the ``__pycache__`` folders.
_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "forceinline": True, "_nrt": False}


def inlined(function: _Function) -> _Function:
    """``function`` as a compiled helper of a kernel's hot loop (see the module's docstring);
    cached beside its source, and releasing the GIL like the kernels that call it."""
    return cast(_Function, njit(**_OPTIONS)(function))
