"""A bounded, in-order map over a pool of spawned worker processes, which says so when a worker dies.

>>> with process_pool(2) as pool:
...     list(ordered_map(pool, pow, [(2, 3), (3, 2), (10, 0)]))
[8, 9, 1]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

from tokpack.errors import WorkerDied

R = TypeVar("R")


@contextmanager
def process_pool(workers: int, initializer: Callable[..., object] | None = None,
                 initargs: tuple[Any, ...] = ()) -> Iterator[ProcessPoolExecutor]:
    """``workers`` spawned processes (a fresh interpreter each, never a fork of a process holding
    threads), each running ``initializer(*initargs)`` first; on leaving, work not started is
    cancelled."""
    import multiprocessing

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=initializer,
                               initargs=initargs)
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


__all__ = ["ordered_map", "process_pool"]
