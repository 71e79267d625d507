"""Ctrl-C landing while compiled code runs, over and over: what each one raised.

Python only notes a signal that comes while a numba function runs; its handler runs at the next
bytecode, which may be numba's own Python code that boxes the function's result. A timer of the
kernel (``setitimer``, not a thread, which could not run while the compiled code holds the GIL)
sends SIGALRM, whose handler raises ``KeyboardInterrupt`` as Ctrl-C's does, three quarters of a
call after it is armed, and is armed again once that interrupt's outcome is noted."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_LOOP = """
import signal
import time

call()
started = time.perf_counter()
call()
period = 0.77 * (time.perf_counter() - started)
signal.signal(signal.SIGALRM, signal.default_int_handler)
outcomes = []
while len(outcomes) < {times}:
    try:
        # One alarm at a time, armed again once the last one's outcome is noted: a repeating
        # timer could fire again while the handler below runs, outside any try.
        signal.setitimer(signal.ITIMER_REAL, period)
        while True:
            call()
    except KeyboardInterrupt:
        outcomes.append("KeyboardInterrupt")
    except BaseException as error:
        outcomes.append(type(error).__name__)
signal.setitimer(signal.ITIMER_REAL, 0)
print(" ".join(outcomes))
"""


def interrupted_calls(setup: str, times: int = 20) -> list[str]:
    """The exception each of ``times`` interrupts raised in a fresh process that runs ``setup``
    (which defines ``call()``, a call of compiled code a few milliseconds long) and then calls
    ``call()`` in a loop."""
    script = textwrap.dedent(setup) + _LOOP.format(times=times)
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout.split()
