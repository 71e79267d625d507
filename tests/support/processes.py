"""What the tests that kill jobs ask of Linux's process table."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def living(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended: only its parent's reaping is left)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def survivors_of_kill_9(process: subprocess.Popen[Any], pids: list[int], seconds: float = 20) -> list[int]:
    """``kill -9`` ``process``, wait up to ``seconds`` for ``pids`` (its workers) to end, and
    return those still running (killed here, so none outlives the test)."""
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + seconds
    while any(living(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = [pid for pid in pids if living(pid)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    return survivors
