"""What running the suite in parallel (pytest-xdist) relies on, and what a user relies on with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import REPO

# The app imported while COLUMNS says 80 (as an xdist worker's environment does), then invoked
# in-process with COLUMNS=200, as a wrapper script or typer's CliRunner does.
_SCRIPT = """
import os
os.environ["COLUMNS"] = "80"
from rich.table import Table
from tokpack.cli._console import console
os.environ["COLUMNS"] = "200"
table = Table(show_header=False)
table.add_column(no_wrap=True)
table.add_column(overflow="fold")
table.add_row("vocabulary sample", "trained on 10.0 of 18.5 MB, 412 documents spread over the range " + "x" * 60)
console.print(table)
print(console.width)
"""


def test_the_console_takes_its_width_when_it_prints_not_when_imported() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("COLUMNS", None)
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[-1] == "200", out
    assert any("spread over the range " + "x" * 60 in line for line in lines), out  # one line, not folded at 80


class _Cache:
    """pytest's cache as the plugin uses it (``get`` with a default, ``set``)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str, default: Any) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


def test_files_run_longest_first_by_their_last_run_and_new_files_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/support/longest_first.py: the order xdist hands files out in comes from the last
    run's seconds per file, kept in pytest's cache; the controller writes them, never a worker."""
    import longest_first

    monkeypatch.setattr(longest_first, "_seconds", defaultdict(float))  # not this run's own
    config = SimpleNamespace(cache=_Cache())
    first = ["q.py::a", "q.py::b", "s.py::c", "s.py::d"]

    def order(names: list[str]) -> list[str]:
        items = [SimpleNamespace(nodeid=name) for name in names]
        longest_first.pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
        return [item.nodeid for item in items]

    assert order(first) == first  # nothing timed yet: pytest's order
    for name, seconds in zip(first, [0.1, 0.1, 0.3, 0.0]):
        longest_first.pytest_runtest_logreport(SimpleNamespace(nodeid=name, duration=seconds))  # type: ignore[arg-type]
    longest_first.pytest_sessionfinish(SimpleNamespace(config=SimpleNamespace(cache=config.cache, workerinput={})))  # type: ignore[arg-type]
    assert order(first) == first  # a worker's seconds are not written
    longest_first.pytest_sessionfinish(SimpleNamespace(config=config))  # type: ignore[arg-type]
    assert order(first) == first[2:] + first[:2]
    assert order(["q.py::a", "n.py::e", "s.py::c"]) == ["n.py::e", "s.py::c", "q.py::a"]  # a new file first


# A test process that started a cluster's node (as `ray start` leaves one: in a session of its own,
# outliving its parent) and watches it, then hangs until it is killed.
_CLUSTER_OWNER = """
import subprocess, sys, tempfile, time
from ray_cluster import watch
temp = tempfile.mkdtemp(prefix="tpray-", dir="/tmp")
node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", temp], start_new_session=True)
watch(temp)
print(temp, flush=True)
time.sleep(600)
"""


def test_a_clusters_processes_end_with_the_test_process_even_killed_9() -> None:
    """tests/support/ray_cluster.py: a test process killed outright (no teardown) leaves no node of
    its cluster running, nor its folder."""
    from ray_cluster import processes_naming

    env = {**os.environ, "PYTHONPATH": str(REPO / "tests" / "support")}
    owner = subprocess.Popen([sys.executable, "-c", _CLUSTER_OWNER], stdout=subprocess.PIPE, text=True, env=env)
    assert owner.stdout is not None
    temp = owner.stdout.readline().strip()
    assert temp and processes_naming(temp)
    owner.kill()
    owner.wait()
    for _ in range(100):
        if not processes_naming(temp) and not Path(temp).exists():
            break
        time.sleep(0.1)
    assert not processes_naming(temp) and not Path(temp).exists()
