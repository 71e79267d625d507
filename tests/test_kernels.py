"""How kernels avoid counting references: helpers inlined by LLVM add no counts to their callers' loops, and a
borrowing kernel cannot allocate (so it never holds an array nobody counted)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from tokpack._kernels import borrowing, inlined

from conftest import REPO

# The shape of a scanner's helpers: a helper taking the text and tables, with a branch, a loop and
# a helper of its own; the same code compiled the two ways.


def _contraction(text, i, marks):
    if i + 1 < text.size and marks[text[i + 1]]:
        return i + 2
    return i


_contraction_by_llvm = inlined(_contraction)
_contraction_by_numba = njit(inline="always")(_contraction)


@inlined
def _piece_end_by_llvm(text, i, classes, marks):
    j = _contraction_by_llvm(text, i, marks) if text[i] == 39 else i
    if j == i:
        j = i + 1
        while j < text.size and classes[text[j]] == classes[text[i]]:
            j += 1
    return j


@njit(inline="always")
def _piece_end_by_numba(text, i, classes, marks):
    j = _contraction_by_numba(text, i, marks) if text[i] == 39 else i
    if j == i:
        j = i + 1
        while j < text.size and classes[text[j]] == classes[text[i]]:
            j += 1
    return j


@njit
def _pieces_by_llvm(text, classes, marks):
    pieces, i = 0, 0
    while i < text.size:
        i = _piece_end_by_llvm(text, i, classes, marks)
        pieces += 1
    return pieces


@njit
def _pieces_by_numba(text, classes, marks):
    pieces, i = 0, 0
    while i < text.size:
        i = _piece_end_by_numba(text, i, classes, marks)
        pieces += 1
    return pieces


def _reference_counts(kernel: Any, *args: Any) -> int:
    """Calls of numba's reference counting in ``kernel``'s optimized LLVM IR."""
    kernel(*args)
    return len(re.findall(r"call void @NRT_(?:incref|decref)", kernel.inspect_llvm(kernel.signatures[0])))


def test_an_inlined_helper_adds_no_reference_counts_to_its_callers_loop() -> None:
    text = np.frombuffer("aab  cc 's 'x".encode("utf-32-le"), dtype=np.uint32).copy()
    classes = np.zeros(128, dtype=np.uint8)
    classes[ord(" ")] = 1
    marks = np.zeros(128, dtype=np.uint8)
    marks[ord("s")] = 1
    # aab, "  ", cc, " ", 's, " ", 'x
    assert _pieces_by_llvm(text, classes, marks) == _pieces_by_numba(text, classes, marks) == 7
    by_llvm = _reference_counts(_pieces_by_llvm, text, classes, marks)
    by_numba = _reference_counts(_pieces_by_numba, text, classes, marks)
    # numba's own inlining counts the helpers' arrays at their calls (22 calls of the counters
    # with numba 0.68, against 5 that the kernel has for its own arguments)
    assert by_llvm < by_numba / 2, (by_llvm, by_numba)


def test_no_kernel_helper_is_inlined_by_numba() -> None:
    """Every helper of a kernel is `inlined` (numba's own inlining counts references per call)."""
    users = [path.relative_to(REPO).as_posix() for path in sorted((REPO / "src" / "tokpack").rglob("*.py"))
             if 'inline="always"' in path.read_text(encoding="utf-8") and path.name != "_kernels.py"]
    assert users == []


def _grows(buffer, n):
    if n > buffer.size:
        buffer = np.empty(2 * n, dtype=buffer.dtype)
    buffer[:n] = 1
    return n


def test_a_borrowing_kernel_cannot_allocate() -> None:
    # a buffer grown inside it would be an array no one counts: numba refuses to compile that
    with pytest.raises(TypingError):
        borrowing(_grows)(np.zeros(2), 3)
