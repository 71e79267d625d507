"""Joining a Ray cluster that is not there, or without its token, is one line with the fix, soon:
a wrong address is refused within seconds (Ray's own attempts go on for minutes), and a cluster
started with token authentication, joined without RAY_AUTH_MODE=token, gets the hint."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from test_ray_cluster import TOKPACK, cluster, free_port  # noqa: F401 - the cluster fixture

from tokpack import prepare, sample_corpus

pytest.importorskip("ray", reason="Ray is not installed (./dev test installs it)")


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare(sample_corpus(), cache_dir=tmp_path_factory.mktemp("vocab"), vocab_size=300).vocabulary_path


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


def test_a_cluster_with_token_authentication_joined_without_it_gets_the_hint(cluster, vocabulary: Path,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    environment = {name: value for name, value in cluster.environment.items()
                   if name not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    code, stderr, _ = _prepare_on_ray(cluster.address, vocabulary, tmp_path / "out", environment)
    last = stderr.strip().splitlines()[-1]
    assert code == 2 and last.startswith(f"error: could not join the Ray cluster at {cluster.address}"), stderr[-3000:]
    assert last.endswith("recent Ray starts clusters with token authentication: set RAY_AUTH_MODE=token and the "
                         "cluster's token (RAY_AUTH_TOKEN, or ~/.ray/auth_token) in this environment, as on every node")
