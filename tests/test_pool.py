"""The ordered map over worker processes: results in input order, a bounded number in flight, and a
worker that dies is said to have died (never a hang, never a bare pool error); a worker sees the
caller's environment, path and working folder as they are when its pool starts."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokpack._pool import ordered_map, process_pool
from tokpack.errors import WorkerDied

from processes import survivors_of_kill_9


def test_results_come_in_order_and_the_input_is_read_as_results_are_taken() -> None:
    taken: list[int] = []

    def arguments() -> Iterator[tuple[int, int]]:
        for n in range(40):
            taken.append(n)
            yield (n, 2)

    with process_pool(2) as pool:
        results = ordered_map(pool, pow, arguments(), ahead=3)
        assert next(results) == 0
        assert len(taken) == 3  # no more than `ahead` handed to the pool before the first result
        assert list(results) == [n * n for n in range(1, 40)]


def test_a_worker_that_dies_is_a_worker_died_error() -> None:
    with process_pool(2) as pool, pytest.raises(WorkerDied, match="ended without its result"):
        list(ordered_map(pool, os._exit, [(1,)]))


def test_an_error_in_the_function_is_raised_as_it_is() -> None:
    with process_pool(1) as pool, pytest.raises(ValueError):
        list(ordered_map(pool, int, [("7",), ("not a number",)]))


def _seen(name: str) -> tuple[str | None, str, list[str]]:
    return os.environ.get(name), os.getcwd(), sys.path


def test_a_worker_sees_the_environment_path_and_folder_of_its_pool_s_start(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with process_pool(1) as pool:  # the fork server is running from here on (if the platform has one)
        assert list(ordered_map(pool, _seen, [("TOKPACK_POOL_TEST",)]))[0][0] is None
    monkeypatch.setenv("TOKPACK_POOL_TEST", "set later")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "later"))
    with process_pool(2) as pool:
        seen = list(ordered_map(pool, _seen, [("TOKPACK_POOL_TEST",)] * 4))
    assert {(value, folder) for value, folder, _ in seen} == {("set later", str(tmp_path))}
    assert all(str(tmp_path / "later") in path for _, _, path in seen)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_a_pool_s_caller_leaves_neither_workers_nor_the_fork_server_running(tmp_path: Path) -> None:
    # A pool's worker waits on a queue whose writing end it holds itself, and holds the fork
    # server's "caller alive" pipe: unless it dies with the caller, both outlive a kill -9.
    import subprocess
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    script = f"""
import os, time
from tokpack._pool import ordered_map, process_pool
def record_and_sleep(n):
    for pid in (os.getpid(), os.getppid()):  # the worker and its parent, the fork server
        open(os.path.join({str(pids)!r}, str(pid)), "w").close()
    time.sleep(60)
if __name__ == "__main__":
    with process_pool(2) as pool:
        list(ordered_map(pool, record_and_sleep, [(1,), (2,)]))
"""
    (tmp_path / "caller.py").write_text(script)
    caller = subprocess.Popen([sys.executable, str(tmp_path / "caller.py")])
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 3 and time.monotonic() < deadline:  # 2 workers + the fork server
        time.sleep(0.1)
    started = [int(p.name) for p in pids.iterdir()]
    assert len(started) >= 2, started
    assert not survivors_of_kill_9(caller, started), "a killed caller's workers (or its fork server) kept running"
