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


def started_as_a_terminal_starts(command: list[str]) -> subprocess.Popen[str]:
    """``command`` started as a terminal starts a job: a process group of its own, where SIGINT
    raises KeyboardInterrupt (a background job's would be ignored); its output piped, as text."""
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def signalled_at_cue(command: list[str], cue: str, signum: int, *, timeout: float) -> tuple[int, str]:
    """``command`` started as a terminal starts it, ``signum`` sent to it once the first line of
    its stderr is ``cue`` (a line the command is made to print where it should be stopped); its
    exit code and the rest of its stderr. A job that outlives the test is killed."""
    job = started_as_a_terminal_starts(command)
    try:
        assert job.stderr is not None
        line = job.stderr.readline()
        assert line == cue, line + job.stderr.read()
        job.send_signal(signum)
        _, errors = job.communicate(timeout=timeout)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    return job.returncode, errors
