"""Shared fixtures: the real data committed under ``data/``, GPT-2's ranks from PyPI, small corpora."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import tokpack

# The tests' helpers (tests/support/) import by their plain names, in test files of every folder
# and in the worker processes those start (which inherit sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import registry  # noqa: E402

if TYPE_CHECKING:
    from ray_cluster import Cluster

#: Test files run longest first, and those sharing the Ray cluster on one worker (see their docstrings).
pytest_plugins = ["longest_first", "file_groups"]

# The suite never reads or writes the user's cache: an index or stamp left there by another tokpack
# version would decide what a test sees. Each process (and the processes it starts) gets its own.
os.environ["TOKPACK_CACHE"] = tempfile.mkdtemp(prefix="tokpack-tests-cache-")
atexit.register(shutil.rmtree, os.environ["TOKPACK_CACHE"], ignore_errors=True)

# Nor the user's Ray token (~/.ray/auth_token): every Ray of the suite uses token authentication
# with a token of the test process's own. Ray reads these when it is first imported, so they are set
# before any test module imports it: a test's driver then joins the process's cluster (ray_cluster).
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
SAMPLE = REPO / "src" / "tokpack" / "sample"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's real data (``data/`` in the repository; a clone has it, so nothing skips)."""
    assert (DATA / "SOURCES.md").is_file(), f"{DATA} is part of the repository; restore it with git"
    return DATA


@pytest.fixture(scope="session")
def gpt2_rank_file() -> Path:
    """GPT-2's ranks (fetched once from PyPI's openai-whisper sdist; skipped without a registry)."""
    try:
        return registry.gpt2_rank_file()
    except RuntimeError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Cluster]:
    """A two-node Ray cluster on this machine, one per test process (tests/support/ray_cluster.py)."""
    pytest.importorskip("ray", reason="Ray is not installed (./dev test installs it)")
    from ray_cluster import start_cluster

    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tokpack.TokenizedCorpus:
    """The bundled sample, prepared once per test module (300 ids, documents of at most 4 KiB): a
    module may damage its files, so modules never share one."""
    return tokpack.prepare(SAMPLE / "polish.txt", cache_dir=tmp_path_factory.mktemp("cache"), vocab_size=300,
                           document_bytes=4096)


@pytest.fixture(scope="session")
def byte_vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level vocabulary's ``vocabulary.json`` (ids are the bytes, ``<|endoftext|>`` 256): ids decode exactly."""
    from tokpack.vocab import BpeTokenizer

    return BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).save(tmp_path_factory.mktemp("byte-vocab"))


@pytest.fixture()
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture()
def eot_corpus(tmp_path: Path) -> Path:
    """Real narrative documents joined by ``<|endoftext|>``, in one text file."""
    from tokenizer_fixtures import narrative_texts

    corpus = tmp_path / "eot.txt"
    corpus.write_text("<|endoftext|>".join(narrative_texts()), encoding="utf-8")
    return corpus
