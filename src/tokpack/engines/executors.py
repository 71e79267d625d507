"""Executors: three ways to run the same per-shard task over every rank.

- :func:`run_local`: a pool of processes on this machine, retrying ranks whose process died;
- :func:`rank_from_environment` + :func:`tokpack.engines.lifecycle.run_shard`: one rank per job
  of a scheduler's job array (Slurm: ``sbatch --array=0-N-1``), no dependency between jobs: the
  last task to finish writes ``dataset.json``;
- :func:`run_ray`: Ray tasks on an existing cluster (``pip install 'tokpack[ray]'``), retried by
  Ray when a worker dies. Ray is imported only here, only when asked for.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing.managers import BaseProxy, SyncManager
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import Any

from tokpack._atomic import remove_abandoned
from tokpack._pool import die_with, in_environment, worker_context
from tokpack._progress import PrepareProgress
from tokpack.engines.lifecycle import run_shard
from tokpack.errors import InputError, MissingExtra, WorkerDied
from tokpack.store.dataset import shard_name

ShardTask = Callable[..., bool]  # task(dataset, rank, *, report) -> whether it wrote the shard


class ShardReporter:
    """What a shard task calls as it writes: puts ``(rank, bytes, ids, documents)`` done on a queue the
    driver drains, so one progress bar can follow every worker. Picklable, for any engine."""

    def __init__(self, queue: Any, rank: int) -> None:
        self.queue: Any = queue
        self.rank = rank
        self._pickled: bytes | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The queue travels pickled inside, and is unpickled on first use: unpickling a manager's
        # proxy connects to the manager, and a manager that died (killed) must not make the
        # worker fail before its shard even starts.
        if not isinstance(self.queue, BaseProxy):  # another engine's queue (Ray's) travels as it is
            return {"rank": self.rank, "pickled": self._pickled, "queue": self.queue}
        pickled = self._pickled if self._pickled is not None else pickle.dumps(self.queue)
        return {"rank": self.rank, "pickled": pickled, "queue": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.rank, self._pickled, self.queue = state["rank"], state["pickled"], state["queue"]

    def __call__(self, event: PrepareProgress) -> None:
        try:
            if self.queue is None and self._pickled is not None:
                self.queue = pickle.loads(self._pickled)
            if self.queue is not None:
                self.queue.put((self.rank, event.done_bytes, event.n_tokens, event.n_docs))
        except Exception:  # noqa: BLE001 - progress is only for show, never a reason to fail a shard
            # The progress queue's process is gone (killed, "Connection refused"): stop reporting.
            self.queue, self._pickled = None, None


def _ignore_interrupts() -> None:
    """A shard worker ignores Ctrl-C: the job hears it and stops the workers (see
    :func:`_deaf_to_interrupts`). It dies with the job's process through :func:`in_environment`."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_progress_manager(job: int) -> None:
    """The progress queue's process, like a shard worker, ignores Ctrl-C and dies with the job's
    process (it starts without :func:`in_environment`)."""
    _ignore_interrupts()
    die_with(job)


ProgressSink = Callable[[int, int, int, int], None]  # (rank, bytes, ids, documents) done so far


@contextmanager
def _deaf_to_interrupts() -> Iterator[None]:
    """Ignore SIGINT while worker processes are started, so they start ignoring it: a terminal's
    Ctrl-C reaches every process of the job, and each worker would print its own traceback (20 to
    60 lines, from wherever its imports were). The parent alone hears it, stops the job and says
    so once. Outside the main thread (where signals cannot be set) a no-op."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _drain(queue: Any, sink: ProgressSink | None) -> None:
    while True:
        try:
            event = queue.get_nowait()
        except (Empty, Exception):  # ray's queue raises its own Empty
            return
        if sink is not None:
            sink(*event)


def run_local(dataset: Path, ranks: Sequence[int], *, processes: int | None = None, retries: int = 2,
              task: ShardTask = run_shard, on_done: Callable[[int], None] | None = None,
              on_progress: ProgressSink | None = None) -> None:
    """Run ``task(dataset, rank, report=…)`` for ``ranks`` on a pool of ``processes`` (default: cores).

    A rank whose process dies (killed, out of memory) is run again, up to ``retries`` more
    times, in a fresh pool; an input error (``ValueError``) is not retried but raised.
    ``on_progress(rank, bytes, ids, documents)`` hears from the workers as they write.

    Raises:
        ValueError: the task's input error.
        WorkerDied: a rank whose process still died after its retries (a ``RuntimeError``).
    """
    pending = list(ranks)
    processes = max(1, min(processes or os.cpu_count() or 1, len(pending) or 1))
    context = worker_context((task.__module__,))
    manager = SyncManager(ctx=context)
    with _deaf_to_interrupts():
        try:
            manager.start(_start_progress_manager, (os.getpid(),))
        except EOFError:
            # Its usual cause: a worker imports the caller's script, and an unguarded top level
            # starts the job again there, which multiprocessing refuses.
            raise WorkerDied("the progress queue's process ended as it started",
                             fix='a script that starts tokpack\'s workers must keep its top level under '
                                 'if __name__ == "__main__": (workers import the script)') from None
    with manager:
        queue = manager.Queue()
        for _ in range(retries + 1):
            failed: list[int] = []
            pool = ProcessPoolExecutor(processes, mp_context=context, initializer=in_environment,
                                       initargs=(dict(os.environ), os.getpid(), _ignore_interrupts))
            try:
                # Each future reports itself done on a queue: waiting costs the same per shard
                # however many shards are pending (waiting on every pending future after each one
                # finishes would cost time quadratic in shards).
                finished: SimpleQueue[Future[bool]] = SimpleQueue()
                futures: dict[Future[bool], int] = {}
                with _deaf_to_interrupts():  # the workers start while submitting
                    for rank in pending:
                        future = pool.submit(task, dataset, rank, report=ShardReporter(queue, rank))
                        futures[future] = rank
                        future.add_done_callback(finished.put)
                for _ in range(len(futures)):
                    while True:
                        try:
                            future = finished.get(timeout=0.2)
                            break
                        except Empty:
                            _drain(queue, on_progress)
                    _drain(queue, on_progress)
                    rank = futures[future]
                    try:
                        future.result()
                    except BrokenProcessPool:
                        failed.append(rank)
                    else:
                        if on_done is not None:
                            on_done(rank)
            except BaseException:
                # Interrupted (Ctrl-C) or failed: the workers go now, not when their shards end,
                # and the shards they were writing go with them (complete shards stay).
                workers = list(getattr(pool, "_processes", {}).values())
                for process in workers:
                    process.kill()
                for process in workers:
                    process.join(5)
                pool.shutdown(wait=False, cancel_futures=True)
                for rank in pending:
                    remove_abandoned(Path(dataset) / shard_name(rank))
                raise
            pool.shutdown()
            _drain(queue, on_progress)
            if not failed:
                return
            pending = sorted(failed)
    raise WorkerDied(f"shards {pending}: their worker process died {retries + 1} times (killed, or out of memory?)",
                     fix="rerun to resume; complete shards are kept")


def rank_from_environment(environment: Mapping[str, str] | None = None) -> tuple[int, int]:
    """This job's ``(rank, world_size)`` from a job array's variables.

    Slurm's ``SLURM_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_COUNT`` (with ``SLURM_ARRAY_TASK_MIN``
    as the first id), or tokpack's own ``TOKPACK_RANK`` and ``TOKPACK_WORLD_SIZE``.

    >>> rank_from_environment({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "8"})
    (4, 8)

    Raises:
        InputError: neither set of variables, or values that are not whole numbers.
    """
    env = os.environ if environment is None else environment
    try:
        if "SLURM_ARRAY_TASK_ID" in env:
            first = int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
            return int(env["SLURM_ARRAY_TASK_ID"]) - first, int(env["SLURM_ARRAY_TASK_COUNT"])
        if "TOKPACK_RANK" in env:
            return int(env["TOKPACK_RANK"]), int(env["TOKPACK_WORLD_SIZE"])
    except (KeyError, ValueError) as error:
        raise InputError(f"job array variables are incomplete or not numbers ({error})",
                         fix="set both SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (or TOKPACK_RANK and "
                             "TOKPACK_WORLD_SIZE) to whole numbers, or pass rank=N") from None
    raise InputError("no rank: no job array variables are set",
                     fix="pass rank=N, or set SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT "
                         "(or TOKPACK_RANK and TOKPACK_WORLD_SIZE)")


def run_ray(dataset: Path, ranks: Sequence[int], *, address: str | None = None, retries: int = 2,
            task: ShardTask = run_shard, num_cpus: int | None = None, on_done: Callable[[int], None] | None = None,
            on_progress: ProgressSink | None = None) -> None:
    """Run ``task(dataset, rank, report=…)`` for ``ranks`` as Ray tasks; ``dataset`` must be on
    storage every node sees. ``address`` joins an existing cluster (``None`` starts a local one with
    ``num_cpus``). A task whose worker dies is retried by Ray up to ``retries`` times.

    Raises:
        ImportError: Ray is not installed (``pip install 'tokpack[ray]'``).
    """
    try:
        import ray
        from ray.util.queue import Queue
    except ImportError:
        raise MissingExtra("the Ray engine needs Ray: pip install 'tokpack[ray]'") from None
    if not ray.is_initialized():
        if address not in (None, "auto"):
            check_reachable(address)  # Ray's own attempts at a wrong address go on for minutes
        try:
            ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     ignore_reinit_error=True)
        except ConnectionError as error:
            raise _not_joined(address, error) from None
    queue = Queue()
    remote = ray.remote(max_retries=retries, num_cpus=1)(task)
    waiting = {remote.remote(dataset, rank, report=ShardReporter(queue, rank)): rank for rank in ranks}  # type: ignore[call-arg]
    try:
        while waiting:
            # Every task done within the interval at once: one wait per interval, not per task.
            done, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=0.2)
            _drain(queue, on_progress)
            for reference in done:
                ray.get(reference)
                rank = waiting.pop(reference)
                if on_done is not None:
                    on_done(rank)
        _drain(queue, on_progress)
    finally:
        queue.shutdown()


#: How long to wait for a Ray cluster's address to answer before saying it does not.
RAY_CONNECT_SECONDS = 10.0


def check_reachable(address: str, timeout: float = RAY_CONNECT_SECONDS) -> None:
    """Refuse a Ray address (``host:port``, or ``ray://host:port`` of Ray Client) that nothing
    answers at within ``timeout`` seconds.

    Raises:
        InputError: naming the address, what happened and the fix.
    """
    import socket

    where = address.removeprefix("ray://")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"Ray address {address!r} is not HOST:PORT", fix="give the head node's address as `ray status` "
                                                                          "shows it (e.g. 10.0.0.5:6379), or auto for this machine's")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        said = f"no answer within {timeout:g} s" if isinstance(error, TimeoutError) else (error.strerror or str(error)).lower()
        raise InputError(f"no Ray cluster answers at {address} ({said})",
                         fix="start one with `ray start --head` and give the address it prints, or leave out the "
                             "address to run on a Ray of this process's own") from None


def _not_joined(address: str | None, error: Exception) -> InputError:
    """Why Ray could not join the cluster at ``address``: clusters of recent Ray need token
    authentication, which the driver's environment must ask for too."""
    auth = os.environ.get("RAY_AUTH_MODE", "")
    fix = ("check that the cluster is up (`ray status`)" if auth == "token" else
           "recent Ray starts clusters with token authentication: set RAY_AUTH_MODE=token and the "
           "cluster's token (RAY_AUTH_TOKEN, or ~/.ray/auth_token) in this environment, as on every node")
    return InputError(f"could not join the Ray cluster at {address or 'this machine'} ({error})", fix=fix)


class RunOptions:
    """What the driver hands every executor; each takes the options that mean something to it."""

    def __init__(self, *, processes: int | None = None, address: str | None = None, cpus: int | None = None,
                 retries: int = 2, task: ShardTask = run_shard, on_done: Callable[[int], None] | None = None,
                 on_progress: ProgressSink | None = None) -> None:
        self.processes, self.address, self.cpus, self.retries = processes, address, cpus, retries
        self.task, self.on_done, self.on_progress = task, on_done, on_progress


def _run_local(dataset: Path, ranks: Sequence[int], options: RunOptions) -> None:
    run_local(dataset, ranks, processes=options.processes, retries=options.retries, task=options.task,
              on_done=options.on_done, on_progress=options.on_progress)


def _run_ray(dataset: Path, ranks: Sequence[int], options: RunOptions) -> None:
    run_ray(dataset, ranks, address=options.address, retries=options.retries, task=options.task,
            num_cpus=options.cpus, on_done=options.on_done, on_progress=options.on_progress)


#: Executors that run every shard of a job themselves, by name (``--engine``): adding one is a
#: function and a line here. A job array is not one: the scheduler runs its shards
#: (:func:`tokpack.engines.start_job`, then :func:`run_array_task` in each array job).
EXECUTORS: dict[str, Callable[[Path, Sequence[int], RunOptions], None]] = {"local": _run_local, "ray": _run_ray}


def task_of(dataset: Path) -> tuple[ShardTask, int]:
    """The shard task of the job in ``dataset`` (:func:`~tokpack.engines.lifecycle.run_shard`,
    whichever kind it is) and its number of shards, from ``job.json``.

    Raises:
        InputError: no readable ``job.json``, or a kind of job this tokpack does not know.
    """
    from tokpack.engines.lifecycle import JOB_FILE, job_header

    return run_shard, job_header(Path(dataset) / JOB_FILE)[1]


def run_array_task(dataset: Path, rank: int | None = None,
                   environment: Mapping[str, str] | None = None) -> tuple[int, int, bool]:
    """One job of a job array: make shard ``rank`` (by default the array's own, from
    :func:`rank_from_environment`, which must agree with the job's shard count) of whichever kind
    of job ``dataset`` holds (:data:`tokpack.engines.kinds.KINDS`).

    Returns:
        ``(rank, world_size, written)``: ``written`` is false when the shard was already complete.

    Raises:
        InputError: no rank, or an array whose size is not the job's number of shards.
    """
    task, world_size = task_of(Path(dataset))
    if rank is None:
        rank, world = rank_from_environment(environment)
        if world != world_size:
            raise InputError(f"the job array has {world} tasks but the job has {world_size} shards", where=dataset,
                             fix=f"run it as an array of {world_size} tasks (e.g. sbatch --array=0-{world_size - 1}), or "
                                 "pass rank=N")
    return rank, world_size, task(Path(dataset), rank)
