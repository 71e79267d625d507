"""One Ray cluster per test process, started as users start one: ``ray start --head``, then a
second ``ray start --address …`` as another node on this machine, each node with one CPU and a
small object store. Starting Ray is most of a Ray test's time, so every test that runs Ray uses
this one (the ``ray_cluster`` fixture), through the command line (``--ray-address``) or as a driver
of its own (``driver``); the test files that use it run in one test process (tests/conftest.py).

Clusters of recent Ray use token authentication: this one uses the test process's own token (never
the user's ``~/.ray/auth_token``; tests/conftest.py), which its nodes and drivers send. The cluster is torn
down by process id (every process whose command line names its own Ray temporary folder), never
with ``ray stop``, which would stop every Ray cluster on the machine; a watcher process does the
same when the test process ends without a teardown (killed outright).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Ray's smallest object store (bytes): the shards travel through files, not the store.
OBJECT_STORE = 80 * 1024 * 1024
RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def processes_naming(text: str) -> dict[int, tuple[int, str]]:
    """Every process whose command line contains ``text``: pid → (parent pid, command line)."""
    found: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if text in command:
            found[int(entry.name)] = (parent, command)
    return found


def descendants(roots: set[int]) -> set[int]:
    """``roots`` and every process below them."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, grown = set(roots), True
    while grown:
        grown = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grown = True
    return found


def kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def stop_processes_of(temp: str | Path) -> None:
    """Kill every process whose command line names the folder ``temp`` (but this one), and those
    below them, by id (see the module docstring); remove the folder."""
    for _ in range(3):
        ours = set(processes_naming(str(temp))) - {os.getpid()}
        if not ours:
            break
        kill(descendants(ours))
        time.sleep(0.5)
    shutil.rmtree(temp, ignore_errors=True)


# The nodes ``ray start`` leaves run in sessions of their own and outlive the process that started
# them: a test process killed outright (no fixture teardown) would leave its cluster running. This
# watcher (in a session of its own too, so a Ctrl-C leaves the teardown to the test process) waits
# for the end of its stdin, a pipe only that process holds, however it ended.
_WATCHER = r"""
import os, sys
while os.read(0, 4096):
    pass
sys.path.insert(0, sys.argv[1])
from ray_cluster import stop_processes_of
stop_processes_of(sys.argv[2])
"""


def watch(temp: str | Path) -> subprocess.Popen[bytes]:
    """A process that runs :func:`stop_processes_of` on ``temp`` when this process ends, or when
    its stdin is closed."""
    return subprocess.Popen([sys.executable, "-c", _WATCHER, str(Path(__file__).parent), str(temp)],
                            stdin=subprocess.PIPE, start_new_session=True)


class Cluster:
    """A head node and a second node on this machine, each with one CPU and a small object store."""

    def __init__(self, temp: Path, environment: dict[str, str]) -> None:
        self.temp, self.environment = temp, environment
        self.address = f"127.0.0.1:{free_port()}"
        self.second_raylets: set[int] = set()
        self.watcher = watch(temp)

    def ray(self, *args: str) -> None:
        done = subprocess.run([RAY, *args], env=self.environment, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr

    def raylets(self) -> set[int]:
        return {pid for pid, (_, command) in processes_naming(str(self.temp)).items() if "/raylet" in command.split(" ")[0]}

    def start(self) -> None:
        # A free port for what Ray would otherwise put on a fixed one (the dashboard agent), so
        # another cluster on this machine cannot collide with this one.
        common = ["--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE), "--disable-usage-stats"]
        self.ray("start", "--head", "--node-ip-address", "127.0.0.1", "--port", self.address.rsplit(":", 1)[1],
                 "--temp-dir", str(self.temp), "--include-dashboard", "false",
                 "--dashboard-agent-listen-port", str(free_port()), *common)
        head = self.raylets()
        self.ray("start", "--address", self.address, "--node-ip-address", "127.0.0.1",
                 "--dashboard-agent-listen-port", str(free_port()), *common)
        self.second_raylets = self.raylets() - head
        assert len(head) == 1 and len(self.second_raylets) == 1, (head, self.second_raylets)

    def busy_workers_of_second_node(self) -> set[int]:
        """The second node's workers running a task now (Ray names a busy worker ``ray::TASK``)."""
        below = descendants(self.second_raylets) - self.second_raylets
        return {pid for pid, (_, command) in processes_naming("ray::run_shard").items() if pid in below}

    def stop(self) -> None:
        """Kill every process of this cluster, by id (see the module docstring), and remove its folder."""
        assert self.watcher.stdin is not None
        self.watcher.stdin.close()  # the watcher stops them
        try:
            self.watcher.wait(timeout=60)
        finally:
            stop_processes_of(self.temp)


def start_cluster() -> Cluster:
    """A running two-node cluster of this process's own (``Cluster.stop`` ends it), whose token is
    the one in this process's environment (tests/conftest.py sets it before Ray is imported)."""
    # A short folder of our own: Ray's socket paths must fit 107 bytes, and naming it lets the
    # teardown find exactly this cluster's processes.
    temp = Path(tempfile.mkdtemp(prefix="tpray-", dir="/tmp"))
    assert os.environ.get("RAY_AUTH_MODE") == "token" and os.environ.get("RAY_AUTH_TOKEN"), "see tests/conftest.py"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_USAGE_STATS_ENABLED": "0"}
    running = Cluster(temp, environment)
    try:
        running.start()
    except BaseException:
        running.stop()
        raise
    return running


@contextmanager
def driver(cluster: Cluster) -> Iterator[None]:
    """This process joined to ``cluster`` as a Ray driver (``ray.init(address=…)``); ``ray.shutdown()``
    at the end leaves the cluster running."""
    import ray

    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
