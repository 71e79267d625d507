"""Hostile inputs to the pack writer: what it accepts must give a pack that passes a full
verification (the writer may stamp it verified), and what it refuses it refuses with an
:class:`InputError` before writing anything."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokpack.errors import InputError
from tokpack.store import DocumentCut, Pack, PackWriter, Source
from tokpack.vocab.identity import VocabIdentity

VOCABULARY = VocabIdentity(scheme="demo", sha256="0" * 64, n_vocab=50)
SOURCE = Source(name="demo.txt", sha256="1" * 64, n_bytes=5)


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification stamps go to this test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))


def _flat_2d(writer: PackWriter) -> None:
    writer.add_flat(np.array([[1, 2], [3, 4]]), np.array([2]))


def _documents_2d(writer: PackWriter) -> None:
    writer.add_documents([np.array([[1, 2], [3, 4]])])


def _documents_mixed_dimensions(writer: PackWriter) -> None:
    writer.add_documents([np.array([1, 2]), np.array([[1, 2], [3, 4]])])


def _document_a_number(writer: PackWriter) -> None:
    writer.add_documents([np.array([1, 2]), 7])  # type: ignore[list-item]


@pytest.mark.parametrize("add", [_flat_2d, _documents_2d, _documents_mixed_dimensions, _document_a_number])
def test_ids_that_are_not_one_flat_array_are_refused_before_anything_is_written(tmp_path: Path, add: object) -> None:
    # A 2-D array's len() is its rows: it passed the length check, its 4 ids were written and
    # hashed as 2, and commit published a pack whose tokens.npy does not match its meta.json.
    with PackWriter(tmp_path / "pack", vocabulary=VOCABULARY) as writer:
        with pytest.raises(InputError, match="flat"):
            add(writer)  # type: ignore[operator]
        writer.add_documents([[5, 6]])
        writer.commit(source=SOURCE, cut=DocumentCut(rule="demo"), stamp_verified=True)
    pack = Pack(tmp_path / "pack", verify=True)
    assert pack.n_tokens == 2 and pack.read_span(0, 2).tolist() == [5, 6]
