"""The Ray engine on a real cluster started as users start one (tests/support/ray_cluster.py: two
nodes on this machine), and ``tokpack prepare --engine ray --ray-address …`` run against it from
the command line. One node's worker is killed while it makes a shard; the dataset must still be byte-identical to the local engine's. Joining a cluster
that is not there, or without its token, is one line with the fix, soon: a wrong address is refused
within seconds (Ray's own attempts go on for minutes), and a cluster started with token
authentication, joined without RAY_AUTH_MODE=token, gets the hint.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokpack import prepare, sample_corpus

from ray_cluster import Cluster, free_port, kill

pytest.importorskip("ray", reason="Ray is not installed (./dev test installs it)")

SHARDS = 6
DOCUMENT_BYTES = 2048
TOKPACK = str(Path(sys.executable).with_name("tokpack"))


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


def test_a_cluster_with_token_authentication_joined_without_it_gets_the_hint(ray_cluster: Cluster, vocabulary: Path,
                                                                              tmp_path: Path) -> None:
    environment = {name: value for name, value in ray_cluster.environment.items()
                   if name not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    # Ray asks the refusing cluster once a second, 20 times by default, before giving up; the
    # answer is the same on the second attempt.
    environment["RAY_NUM_REDIS_GET_RETRIES"] = "2"
    code, stderr, _ = _prepare_on_ray(ray_cluster.address, vocabulary, tmp_path / "out", environment)
    last = stderr.strip().splitlines()[-1]
    assert code == 2 and last.startswith(f"error: could not join the Ray cluster at {ray_cluster.address}"), stderr[-3000:]
    assert last.endswith("recent Ray starts clusters with token authentication: set RAY_AUTH_MODE=token and the "
                         "cluster's token (RAY_AUTH_TOKEN, or ~/.ray/auth_token) in this environment, as on every node")


def test_prepare_on_a_real_cluster_survives_a_killed_worker(ray_cluster: Cluster, vocabulary: Path, tmp_path: Path) -> None:
    common = [str(sample_corpus()), "--vocab", str(vocabulary), "--shards", str(SHARDS), "--document-bytes", str(DOCUMENT_BYTES)]
    local = subprocess.run([TOKPACK, "prepare", *common, "--out", str(tmp_path / "local"), "--workers", "1"],
                           env=ray_cluster.environment, capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    out = tmp_path / "ray"
    run = subprocess.Popen([TOKPACK, "prepare", *common, "--out", str(out), "--engine", "ray", "--ray-address", ray_cluster.address],
                           env=ray_cluster.environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed: set[int] = set()
    deadline = time.monotonic() + 300
    try:
        # Kill the second node's worker the moment it is seen making a shard: a shard can take
        # little more than a poll's interval, so waiting for a finished one first may miss them all.
        while run.poll() is None and time.monotonic() < deadline and not killed:
            killed = ray_cluster.busy_workers_of_second_node()
            kill(killed)
            time.sleep(0.01)
        stdout, stderr = run.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, stdout + stderr
    assert killed, "the second node ran no shard after the first one was done: nothing was killed"
    assert files_of(out) == files_of(tmp_path / "local")
