"""Where tokpack's worker processes come from, and a bounded, in-order map over a pool of them
which says so when a worker dies.

Workers start from a fork server where the platform has one (Linux, macOS): a fresh interpreter,
started once per process (never a fork of the caller, which may hold threads and locks), imports
numpy and the first pool's modules, then forks a worker for each request. A worker so costs a fork
instead of an interpreter's start and its imports, which were most of a short job's CPU. A worker
sees the caller's ``sys.path`` and working folder (multiprocessing sends them) and the caller's
environment as it was when the pool started (:func:`in_environment`), as a spawned one would,
except where a preloaded module read a setting when it was imported: numpy's OpenBLAS keeps the
thread count (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``) of the fork server's start, the first
pool of the process. Every worker dies with its caller, even one killed by ``kill -9``
(:func:`die_with`), and the fork server ends when its last worker has.
Elsewhere (Windows) workers are spawned.

>>> with process_pool(2) as pool:
...     list(ordered_map(pool, pow, [(2, 3), (3, 2), (10, 0)]))
[8, 9, 1]
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from tokpack._atomic import process_alive
from tokpack.errors import WorkerDied

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext

R = TypeVar("R")


def worker_context(preload: Sequence[str] = ()) -> ForkServerContext | SpawnContext:
    """The multiprocessing context of tokpack's workers: the fork server, importing numpy and the
    modules ``preload`` names when the first pool of this process starts it; spawn where there is
    no fork server. Start workers through :func:`in_environment`."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["numpy", *preload])  # once started, the server keeps what it has
    return context


def in_environment(environment: Mapping[str, str], caller: int, function: Callable[..., R] | None = None,
                   *args: Any) -> R | None:
    """In a worker: make this process's environment ``environment`` (the caller's when its pool
    started), end this process when process ``caller`` ends (:func:`die_with`), then return
    ``function(*args)``."""
    die_with(caller)
    os.environ.clear()
    os.environ.update(environment)
    return function(*args) if function is not None else None


def die_with(pid: int) -> None:
    """Kill this process when process ``pid`` (the caller's) ends, even by ``kill -9``, so no
    worker of a killed job keeps working, or waits on its queues (it holds their writing ends
    itself), for ever. A worker's parent is the fork server, not the caller, so Linux's
    parent-death signal cannot say it: a thread waits on ``pid`` instead (a pidfd where the system
    has them, else a look every half second). The fork server ends once no worker is left."""
    import select
    import signal
    import threading
    import time

    def end() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        end()  # the caller ended before this worker started
        return
    except (AttributeError, OSError):
        handle = None

    def wait() -> None:
        if handle is not None:
            select.select([handle], [], [])
        else:
            while process_alive(pid):
                time.sleep(0.5)
        end()

    threading.Thread(target=wait, name="tokpack-die-with-caller", daemon=True).start()


@contextmanager
def process_pool(workers: int, initializer: Callable[..., object] | None = None, initargs: tuple[Any, ...] = (),
                 preload: Sequence[str] = ()) -> Iterator[ProcessPoolExecutor]:
    """``workers`` processes of :func:`worker_context` (its fork server importing ``preload``), each
    running ``initializer(*initargs)`` first; on leaving, work not started is cancelled."""
    pool = ProcessPoolExecutor(workers, mp_context=worker_context(preload), initializer=in_environment,
                               initargs=(dict(os.environ), os.getpid(), initializer, *initargs))
    try:
        yield pool
    finally:
        pool.shutdown(cancel_futures=True)


def ordered_map(pool: ProcessPoolExecutor, function: Callable[..., R], arguments: Iterable[tuple[Any, ...]], *,
                ahead: int | None = None) -> Iterator[R]:
    """``function(*args)`` for each ``args`` of ``arguments``, in their order, computed by ``pool``.

    At most ``ahead`` calls (default: twice the pool's processes) are in flight, so memory stays
    flat however long ``arguments`` is; ``arguments`` is read only as results are taken.

    Raises:
        WorkerDied: a worker process ended without its result (killed, out of memory).
        Exception: whatever ``function`` raised, for the first call that raised.
    """
    limit = ahead if ahead is not None else 2 * max(1, getattr(pool, "_max_workers", 1))
    pending: deque[Future[R]] = deque()
    for args in arguments:
        pending.append(pool.submit(function, *args))
        if len(pending) >= limit:
            yield _result(pending.popleft())
    while pending:
        yield _result(pending.popleft())


def _result(future: Future[R]) -> R:
    try:
        return future.result()
    except BrokenProcessPool:
        raise WorkerDied("a worker process ended without its result (killed, or out of memory?)",
                         fix="run again with fewer workers, or on a machine with more memory") from None


__all__ = ["die_with", "in_environment", "ordered_map", "process_pool", "worker_context"]
