"""Shared fixtures: real data beside the repository, GPT-2's ranks from PyPI, small corpora."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import registry

REPO = Path(__file__).resolve().parents[1]
# TOKPACK_SHARED_DATA points a git worktree (whose parent holds no shared/) at the data.
SHARED_DATA = Path(os.environ.get("TOKPACK_SHARED_DATA", REPO.parent / "shared" / "data"))
SAMPLE = REPO / "src" / "tokpack" / "sample"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's real data (``../shared/data`` beside the repository)."""
    if not (SHARED_DATA / "SOURCES.md").exists():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def gpt2_rank_file() -> Path:
    """GPT-2's ranks (fetched once from PyPI's openai-whisper sdist; skipped without a registry)."""
    try:
        return registry.gpt2_rank_file()
    except RuntimeError as error:
        pytest.skip(str(error))


@pytest.fixture()
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"
