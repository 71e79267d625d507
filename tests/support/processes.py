"""What the tests that kill jobs ask of Linux's process table."""

from __future__ import annotations

from pathlib import Path


def living(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended: only its parent's reaping is left)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status
