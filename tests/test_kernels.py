"""What the kernels share: helpers inlined by LLVM add no reference counts to their callers' loops, a borrowing
kernel cannot allocate (so it never holds an array nobody counted), and the code-point, UTF-8 and hash helpers
give what Python and the published hashes give."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import pytest
import regex
from numba import njit
from numba.core.errors import TypingError

from tokpack._kernels import borrowing, code_points, compiling_said, fnv1a, inlined, mix, utf8, utf8_size
from tokpack.bpe import count_pieces
from tokpack.vocab import GPT4_PATTERN

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


def test_code_points_keep_every_surrogate_as_regex_sees_it() -> None:
    """The one rule for a text's code points: each ``str`` element is one, a lone surrogate stays
    itself and a pair stays two (the trainer's pieces are ``regex``'s; the encoder's own rule, in C,
    is tiktoken's)."""
    parts = ["a\ud800b", "\ud83d\ude00", "", "\U0001f600z"]
    cps, ends = code_points(parts)
    assert cps.dtype == np.uint32 and cps.tolist() == [ord(c) for c in "".join(parts)]
    assert cps.tolist()[3:5] == [0xD83D, 0xDE00]  # a surrogate pair is not joined into U+1F600
    assert ends.tolist() == [3, 5, 5, 7]
    text = "x \ud83d\ude00\ud800 y"
    assert count_pieces([text], pattern=GPT4_PATTERN) == Counter(regex.findall(GPT4_PATTERN, text))


@borrowing
def _utf8_of(cps, out):
    n = 0
    for k in range(cps.size):
        n += utf8_size(cps[k])
    return n, utf8(cps, 0, cps.size, out)


def test_utf8_of_code_points_is_pythons() -> None:
    text = "aż€😀\x7f\x80\u07ff\u0800\uffff\U00010000\U0010ffff"
    cps, _ = code_points([text])
    out = np.zeros(4 * len(text), dtype=np.uint8)
    sized, written = _utf8_of(cps, out)
    assert sized == written == len(text.encode("utf-8"))
    assert out[:written].tobytes() == text.encode("utf-8")


@borrowing
def _hash_of(data):
    return fnv1a(data, 0, data.size), mix(fnv1a(data, 0, data.size))


def test_fnv1a_is_the_published_hash() -> None:
    # FNV-1a 64's published value for "a", and the empty input's offset basis
    assert _hash_of(np.frombuffer(b"a", dtype=np.uint8))[0] == 0xAF63DC4C8601EC8C
    assert _hash_of(np.zeros(0, dtype=np.uint8))[0] == 0xCBF29CE484222325
    assert _hash_of(np.frombuffer(b"ab", dtype=np.uint8))[1] != _hash_of(np.frombuffer(b"ba", dtype=np.uint8))[1]


def test_compiling_is_said_once_per_kernel_with_its_callees_and_never_for_a_compiled_one() -> None:
    said: list[bool] = []
    helper = njit(lambda x: x + 1)
    kernel = njit(lambda values: helper(values.sum()))
    with compiling_said(said.append):
        kernel(np.arange(3))  # the helper is compiled inside the kernel's compilation
        kernel(np.arange(4))  # the same types: nothing to compile
    assert said == [True, False]
    kernel(np.arange(3.0))  # outside: nobody hears of it
    assert said == [True, False]
