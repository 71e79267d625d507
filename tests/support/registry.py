"""Files that tests and benchmarks take from a package registry once, then keep in ``.cache/``."""

from __future__ import annotations

from pathlib import Path

from tokpack.grading.baselines import gpt2_rank_file as _fetch_gpt2_ranks

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "tests"


def gpt2_rank_file() -> Path:
    """GPT-2's ranks as a tiktoken file, from the pinned ``openai-whisper`` sdist on PyPI.

    Raises:
        RuntimeError: no registry could be reached (the message says what pip said).
    """
    try:
        return _fetch_gpt2_ranks(CACHE)
    except ValueError as error:
        raise RuntimeError(str(error)) from None
