"""Shared helpers of the tokenizer tests (no tests here): where the real data and the shipped
artifact are, and a small tokenizer trained once per session."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from conftest import DATA, REPO

POLISH = DATA / "polish"
OTHER = DATA / "other"
ARTIFACT = REPO / "artifacts" / "polish-8192"


def require_data() -> Path:
    """The real Polish data folder (committed under ``data/polish``)."""
    return POLISH


@lru_cache(maxsize=1)
def _narrative() -> tuple[str, ...]:
    return tuple(path.read_text(encoding="utf-8") for path in sorted((POLISH / "narrative").glob("*.txt")))


def narrative_texts() -> list[str]:
    """The Polish narrative files (``data/polish/narrative``), whole, in path order, read once."""
    return list(_narrative())


def small_corpus(root: Path) -> Path:
    """A two-domain corpus of real Polish documents (copied from the data, a few per domain)."""
    polish = require_data()
    for domain, count in (("narrative", 4), ("code", 6)):
        (root / domain).mkdir(parents=True)
        for source in sorted((polish / domain).iterdir())[:count]:
            (root / domain / source.name).write_bytes(source.read_bytes())
    return root


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`small_corpus` made once per session (import this fixture into a test module)."""
    return small_corpus(tmp_path_factory.mktemp("corpus"))


def train_small(corpus: Path, out_dir: Path, **recipe: object) -> Path:
    """Train on ``corpus`` with ``TrainingRecipe(**recipe)`` and write ``out_dir/tokenizer.json``."""
    from tokpack.grading.training import TrainingRecipe, train_tokenizer, weighted_documents, write_tokenizer

    texts, _ = weighted_documents([corpus], {})
    out = out_dir / "tokenizer.json"
    write_tokenizer(train_tokenizer(texts, TrainingRecipe(**recipe)), out)  # type: ignore[arg-type]
    return out
