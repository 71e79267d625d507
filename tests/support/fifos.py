"""A FIFO in place of a file, fed so that a reader never blocks: a test of code that must never
open it fails on what it counted instead of hanging the suite."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def feeding_fifo(path: Path, content: bytes) -> Iterator[list[int]]:
    """Replace ``path`` by a FIFO that gives each reader ``content`` (up to a pipe's capacity)
    while the block runs, and yield a list that gets one item each time it is opened to read; a
    thread polls for readers, so none waits on it."""
    Path(path).unlink(missing_ok=True)
    os.mkfifo(path)
    stop = threading.Event()
    opened: list[int] = []

    def feed() -> None:
        while not stop.is_set():
            try:  # non-blocking: fails with ENXIO until someone opens the FIFO to read
                descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as error:
                if error.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
                stop.wait(0.005)
                continue
            if not stat.S_ISFIFO(os.fstat(descriptor).st_mode):  # replaced by a file since: not ours
                os.close(descriptor)
                stop.wait(0.005)
                continue
            opened.append(1)
            try:
                os.write(descriptor, content)
            except BlockingIOError:
                pass
            finally:
                os.close(descriptor)
            stop.wait(0.2)  # the reader takes it all and closes before the next one is fed

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        yield opened
    finally:
        stop.set()
        feeder.join()
