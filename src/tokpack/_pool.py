"""Where tokpack's worker processes come from, and a bounded, in-order map over a pool of them
which says so when a worker dies.

Workers start from a fork server where the platform has one (Linux, macOS): a fresh interpreter,
started once per process (never a fork of the caller, which may hold threads and locks), imports
numpy and the first pool's modules, then forks a worker for each request. A worker so costs a fork
instead of an interpreter's start and its imports, which were most of a short job's CPU. A worker
sees the caller's ``sys.path`` and working folder (multiprocessing sends them) and the caller's
environment as it was when the pool started (:func:`in_environment`), as a spawned one would.
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


def in_environment(environment: Mapping[str, str], function: Callable[..., R] | None = None, *args: Any) -> R | None:
    """In a worker: make this process's environment ``environment`` (the caller's when its pool
    started), then return ``function(*args)``."""
    os.environ.clear()
    os.environ.update(environment)
    return function(*args) if function is not None else None


@contextmanager
def process_pool(workers: int, initializer: Callable[..., object] | None = None, initargs: tuple[Any, ...] = (),
                 preload: Sequence[str] = ()) -> Iterator[ProcessPoolExecutor]:
    """``workers`` processes of :func:`worker_context` (its fork server importing ``preload``), each
    running ``initializer(*initargs)`` first; on leaving, work not started is cancelled."""
    pool = ProcessPoolExecutor(workers, mp_context=worker_context(preload), initializer=in_environment,
                               initargs=(dict(os.environ), initializer, *initargs))
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


__all__ = ["in_environment", "ordered_map", "process_pool", "worker_context"]
