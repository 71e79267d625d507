"""Signals held off while compiled code returns arrays.

A signal that arrives while a numba function runs only marks itself pending (Python runs handlers
between bytecodes); numba then boxes the function's result, and boxing an array or a named tuple
runs Python code of numba's own (the unpickling of the result's type). A pending handler that
raises (Ctrl-C's ``KeyboardInterrupt``) runs there, inside the boxing, which does not expect it:
a named tuple's boxing goes on with a null pointer (a segmentation fault), a tuple of arrays'
makes a ``SystemError``; a single array's passes the ``KeyboardInterrupt`` on. :func:`held`
swaps every Python handler for one that only notes the signal while such calls run, and runs the
noted handlers between them and after them. It costs tens of microseconds, so a call made once
a batch returns one array instead (writing any other into an array it is given).
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


@functools.cache
def _signals() -> list[int]:
    """Every signal number of this system, as plain ints (read once, when first held: asking
    makes an enum of each, which the ``tokpack`` command's start need not pay for)."""
    return sorted(int(signum) for signum in signal.valid_signals())


class Held:
    """The signals noted while :func:`held` holds them, and the handlers they are for."""

    def __init__(self) -> None:
        self.noted: list[tuple[int, FrameType | None]] = []
        self.handlers: dict[int, Any] = {}  # as signal.signal returns them

    def note(self, signum: int, frame: FrameType | None) -> None:
        self.noted.append((signum, frame))

    def deliver(self) -> None:
        """Run the handlers of the signals noted so far, now (between two calls of compiled code:
        Ctrl-C raises its ``KeyboardInterrupt`` here). Costs nothing when none came."""
        while self.noted:
            signum, frame = self.noted.pop(0)
            self.handlers[signum](signum, frame)


@contextmanager
def held() -> Iterator[Held]:
    """Around calls of compiled functions that return arrays: every signal with a Python handler
    is only noted while the block runs; its handler runs at :meth:`Held.deliver`, or as the block
    ends. Setting the handlers costs tens of microseconds, so a loop of many calls holds once and
    delivers between them. Outside the main thread it holds nothing: Python runs handlers in the
    main thread only, so another thread's boxing never meets one."""
    holder = Held()
    if threading.current_thread() is not threading.main_thread():
        yield holder
        return
    for signum in _signals():
        handler = signal.getsignal(signum)
        if callable(handler):
            holder.handlers[signum] = signal.signal(signum, holder.note)
    try:
        yield holder
    finally:
        for signum, handler in holder.handlers.items():
            signal.signal(signum, handler)
        holder.deliver()
