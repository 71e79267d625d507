"""The Ray engine on a real cluster started as users start one: ``ray start --head``, then a second
``ray start --address …`` as another node on this machine, and ``tokpack prepare --engine ray
--ray-address …`` run against it from the command line. One node's worker is killed while it
makes a shard; the dataset must still be byte-identical to the local engine's. Joining a cluster
that is not there, or without its token, is one line with the fix, soon: a wrong address is refused
within seconds (Ray's own attempts go on for minutes), and a cluster started with token
authentication, joined without RAY_AUTH_MODE=token, gets the hint. The module's tests share one
cluster (starting one is most of their time).

The cluster is torn down by process id (every process whose command line names this test's own
Ray temporary folder), never with ``ray stop``, which would stop every Ray cluster on the machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokpack import prepare, sample_corpus

pytest.importorskip("ray", reason="Ray is not installed (./dev test installs it)")

SHARDS = 6
DOCUMENT_BYTES = 2048
#: Ray's smallest object store (bytes): the shards travel through files, not the store.
OBJECT_STORE = 80 * 1024 * 1024
RAY = str(Path(sys.executable).with_name("ray"))
TOKPACK = str(Path(sys.executable).with_name("tokpack"))


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


class Cluster:
    """A head node and a second node on this machine, each with one CPU and a small object store."""

    def __init__(self, temp: Path, environment: dict[str, str]) -> None:
        self.temp, self.environment = temp, environment
        self.address = f"127.0.0.1:{free_port()}"
        self.second_raylets: set[int] = set()

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
        """Kill every process of this cluster, by id (see the module docstring)."""
        for _ in range(3):
            ours = set(processes_naming(str(self.temp)))
            if not ours:
                break
            kill(descendants(ours))
            time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # A short folder of our own: Ray's socket paths must fit 107 bytes, and naming it lets the
    # teardown find exactly this cluster's processes.
    temp = Path(tempfile.mkdtemp(prefix="tpray-", dir="/tmp"))
    # Ray starts clusters with token authentication: a token of this cluster's own, never the
    # user's ~/.ray/auth_token, and every process (nodes, driver) told to send it.
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_USAGE_STATS_ENABLED": "0",
                   "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    running = Cluster(temp, environment)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("ray-vocab")
    return prepare(sample_corpus(), cache_dir=cache, vocab_size=300, document_bytes=DOCUMENT_BYTES).vocabulary_path


def files_of(dataset: Path) -> dict[str, bytes]:
    """The dataset's record and every shard's files (not the job's markers and locks)."""
    files = [dataset / "dataset.json", *sorted(p for p in dataset.glob("shard-*/**/*") if p.is_file())]
    return {p.relative_to(dataset).as_posix(): p.read_bytes() for p in files}


def _prepare_on_ray(address: str, vocabulary: Path, out: Path, environment: dict[str, str]) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run([TOKPACK, "prepare", str(sample_corpus()), "--vocab", str(vocabulary), "--shards", "2",
                           "--engine", "ray", "--ray-address", address, "--out", str(out)],
                          env=environment, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stderr, time.monotonic() - started


def test_a_wrong_address_is_refused_within_seconds(vocabulary: Path, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    code, stderr, seconds = _prepare_on_ray(address, vocabulary, tmp_path / "out", dict(os.environ))
    assert code == 2 and seconds < 60, (seconds, stderr)
    assert stderr.strip().splitlines()[-1] == (f"error: no Ray cluster answers at {address} (connection refused); start "
                                               "one with `ray start --head` and give the address it prints, or leave "
                                               "out the address to run on a Ray of this process's own")


def test_a_cluster_with_token_authentication_joined_without_it_gets_the_hint(cluster: Cluster, vocabulary: Path,
                                                                              tmp_path: Path) -> None:
    environment = {name: value for name, value in cluster.environment.items()
                   if name not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    # Ray asks the refusing cluster once a second, 20 times by default, before giving up; the
    # answer is the same on the second attempt.
    environment["RAY_NUM_REDIS_GET_RETRIES"] = "2"
    code, stderr, _ = _prepare_on_ray(cluster.address, vocabulary, tmp_path / "out", environment)
    last = stderr.strip().splitlines()[-1]
    assert code == 2 and last.startswith(f"error: could not join the Ray cluster at {cluster.address}"), stderr[-3000:]
    assert last.endswith("recent Ray starts clusters with token authentication: set RAY_AUTH_MODE=token and the "
                         "cluster's token (RAY_AUTH_TOKEN, or ~/.ray/auth_token) in this environment, as on every node")


def test_prepare_on_a_real_cluster_survives_a_killed_worker(cluster: Cluster, vocabulary: Path, tmp_path: Path) -> None:
    common = [str(sample_corpus()), "--vocab", str(vocabulary), "--shards", str(SHARDS), "--document-bytes", str(DOCUMENT_BYTES)]
    local = subprocess.run([TOKPACK, "prepare", *common, "--out", str(tmp_path / "local"), "--workers", "1"],
                           env=cluster.environment, capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    out = tmp_path / "ray"
    run = subprocess.Popen([TOKPACK, "prepare", *common, "--out", str(out), "--engine", "ray", "--ray-address", cluster.address],
                           env=cluster.environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed: set[int] = set()
    deadline = time.monotonic() + 300
    try:
        # Kill the second node's worker the moment it is seen making a shard: a shard can take
        # little more than a poll's interval, so waiting for a finished one first may miss them all.
        while run.poll() is None and time.monotonic() < deadline and not killed:
            killed = cluster.busy_workers_of_second_node()
            kill(killed)
            time.sleep(0.01)
        stdout, stderr = run.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, stdout + stderr
    assert killed, "the second node ran no shard after the first one was done: nothing was killed"
    assert files_of(out) == files_of(tmp_path / "local")
