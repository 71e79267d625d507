"""How tokpack's numba kernels avoid counting references: helpers inlined by LLVM, loops that borrow their arrays.

numba counts references to arrays (``NRT_incref``/``NRT_decref``: a call and an atomic add each)
and prunes the counts only where it can see both ends of a simple path. Two places kept them in
the hot loops:

- A helper written with numba's own ``inline="always"`` is copied into its caller's numba IR, and
  the caller counts every array the helper takes at every call, when the helper has a branch or a
  loop: the GPT-2 pre-tokenizer, whose helpers each take the text and a class table, spent more
  than half of its time on those counts.
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

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

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
