"""Shared fixtures: real data beside the repository, GPT-2's ranks from PyPI, small corpora."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLE = REPO / "src" / "tokpack" / "sample"
TEST_CACHE = REPO / ".cache" / "tests"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's real data (``../shared/data`` beside the repository)."""
    if not (SHARED_DATA / "SOURCES.md").exists():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def gpt2_rank_file() -> Path:
    """GPT-2's ranks as a tiktoken file, from the ``openai-whisper`` sdist on PyPI (cached)."""
    target = TEST_CACHE / "gpt2.tiktoken"
    if target.exists():
        return target
    download = TEST_CACHE / "whisper-sdist"
    download.mkdir(parents=True, exist_ok=True)
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
         "-d", str(download), "openai-whisper"],
        capture_output=True, text=True, timeout=300,
    )
    archives = sorted(download.glob("openai[-_]whisper-*.tar.gz"))
    if not archives:
        pytest.skip(f"no package registry reachable to fetch openai-whisper: {fetched.stderr.strip()[-200:]}")
    with tarfile.open(archives[-1]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("whisper/assets/gpt2.tiktoken"))
        source = archive.extractfile(member)
        assert source is not None
        partial = target.with_suffix(".partial")
        partial.write_bytes(source.read())
        partial.rename(target)
    return target


@pytest.fixture()
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"
