"""The one set of argument checks every public entry point uses before a value is used.

Each check returns the value in its canonical type (``int``, ``float``, ``str``, ``Path``) or
raises :class:`~tokpack.errors.InputError` naming the argument, what it got and what it takes.
A ``bool`` is not an integer here, a float is not an integer even when whole (``seed=1.5`` must
not quietly become 1), ``None`` and strings are refused, and floats must be finite.

>>> positive_int("length", 8)
8
>>> positive_int("length", True)
Traceback (most recent call last):
...
tokpack.errors.InputError: length must be a positive integer, got True
>>> non_negative_int("seed", 1.5)
Traceback (most recent call last):
...
tokpack.errors.InputError: seed must be a non-negative integer, got 1.5
>>> finite_float("weight", float("nan"))
Traceback (most recent call last):
...
tokpack.errors.InputError: weight must be a finite number, got nan
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from tokpack.errors import InputError

__all__ = [
    "boolean",
    "choice",
    "existing_path",
    "finite_float",
    "fits_in_memory",
    "integer",
    "mapping",
    "non_negative_int",
    "positive_int",
    "probability",
]


def _is_int(value: Any) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer))


def integer(name: str, value: Any, *, low: int | None = None, high: int | None = None, what: str = "an integer",
            fix: str | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (either bound optional).

    >>> integer("rank", 3, low=0, high=3)
    3
    >>> integer("rank", 4294967295, low=0, high=3)
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: rank must be an integer in [0, 3], got 4294967295
    """
    if low is not None and high is not None:
        what = f"an integer in [{low}, {high}]"
    if not _is_int(value):
        raise InputError(f"{name} must be {what}, got {_shown(value)}", fix=fix)
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise InputError(f"{name} must be {what}, got {_shown(value)}", fix=fix)
    return number


def positive_int(name: str, value: Any, *, high: int | None = None, what: str | None = None,
                 fix: str | None = None) -> int:
    """``value`` as an ``int`` of at least 1 (and at most ``high``); ``what`` words the
    requirement in the message (default ``"a positive integer"``).

    >>> positive_int("shards", 0, what="at least 1")
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: shards must be at least 1, got 0
    """
    if what is None:
        what = "a positive integer" if high is None else f"an integer in [1, {high}]"
    return integer(name, value, low=1, high=high, what=what, fix=fix)


def non_negative_int(name: str, value: Any, *, high: int | None = None, fix: str | None = None) -> int:
    """``value`` as an ``int`` of at least 0 (and at most ``high``)."""
    what = "a non-negative integer" if high is None else f"an integer in [0, {high}]"
    return integer(name, value, low=0, high=high, what=what, fix=fix)


def finite_float(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, fix: str | None = None) -> float:
    """``value`` (an int or float, not a bool or string) as a finite ``float`` in the bounds
    (``low_open``: strictly above ``low``).

    >>> finite_float("fraction", 0, low=0, low_open=True)
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: fraction must be a finite number above 0, got 0
    """
    bounds = ""
    if low is not None:
        bounds = f" above {low:g}" if low_open else f" of at least {low:g}"
    if high is not None:
        bounds += f"{' and' if bounds else ''} at most {high:g}"
    message = f"{name} must be a finite number{bounds}, got {_shown(value)}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InputError(message, fix=fix)
    try:
        number = float(value)
    except (OverflowError, ValueError):  # an int too large for a float
        raise InputError(message, fix=fix) from None
    if not math.isfinite(number) or (low is not None and (number <= low if low_open else number < low)) or (
            high is not None and number > high):
        raise InputError(message, fix=fix)
    return number


def probability(name: str, value: Any, *, fix: str | None = None) -> float:
    """``value`` as a finite ``float`` in ``[0, 1]``."""
    return finite_float(name, value, low=0.0, high=1.0, fix=fix)


def boolean(name: str, value: Any) -> bool:
    """``value`` as a ``bool`` (``True``/``False`` only: ``"no"`` is not false)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be True or False, got {_shown(value)}")
    return bool(value)


def choice(name: str, value: Any, choices: Collection[str]) -> str:
    """``value`` if it is one of ``choices``.

    >>> choice("dtype", "int16", ("int64", "int32"))
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: dtype must be one of int64, int32, got 'int16'
    """
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"{name} must be one of {', '.join(choices)}, got {_shown(value)}")
    return value


def text(name: str, value: Any) -> str:
    """``value`` if it is a string."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {_shown(value)}")
    return value


def mapping(name: str, value: Any) -> dict[str, Any]:
    """``value`` as a ``dict`` (any mapping), or ``InputError``."""
    from collections.abc import Mapping

    if not isinstance(value, Mapping):
        raise InputError(f"{name} must be a dict, got {_shown(value)}")
    return dict(value)


def existing_path(name: str, value: Any, *, kind: str = "any") -> Path:
    """``value`` (a string or path) as a :class:`Path` that exists (``kind``: ``"file"``,
    ``"dir"`` or ``"any"``); a symlink loop or an unreadable parent is an ``InputError`` too."""
    if not isinstance(value, (str, os.PathLike)):
        raise InputError(f"{name} must be a path, got {_shown(value)}")
    path = Path(value)
    try:
        exists = path.is_dir() if kind == "dir" else path.is_file() if kind == "file" else path.exists()
        path.stat()
    except OSError as error:
        raise InputError(f"{name}: cannot read ({error.strerror or error})", where=path) from None
    if not exists:
        wanted = {"dir": "a directory", "file": "a file"}.get(kind, "an existing path")
        raise InputError(f"{name} must be {wanted}", where=path)
    return path


def memory_bytes() -> int:
    """This machine's physical memory in bytes (2**48 where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 2**48


def fits_in_memory(what: str, n_bytes: int, *, fix: str | None = None) -> None:
    """Refuse before allocating: ``n_bytes`` (what ``what`` needs) more than the machine's memory.

    >>> try:
    ...     fits_in_memory("a batch of length 10**12", 8 * 10**18)
    ... except InputError as error:
    ...     print(str(error).split(", more")[0])
    a batch of length 10**12 needs 8,000,000,000,000,000,000 bytes
    """
    total = memory_bytes()
    if n_bytes > total:
        raise InputError(f"{what} needs {n_bytes:,} bytes, more than this machine's memory ({total:,})",
                         fix=fix)


def _shown(value: Any) -> str:
    """``repr`` of ``value``, cut short (a 5,000-digit integer is not a message)."""
    try:
        shown = repr(value)
    except ValueError:  # int repr beyond the interpreter's digit limit
        shown = f"an integer of {value.bit_length():,} bits" if isinstance(value, int) else type(value).__name__
    return shown if len(shown) <= 60 else shown[:57] + "..."
