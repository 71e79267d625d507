"""What ``prepare``'s progress callback hears while a vocabulary is trained: the bytes trained on,
out of the bytes it will train on, and that numba compiles the trainer's kernels while it does."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from tokpack import prepare
from tokpack._progress import PrepareProgress
from tokpack.preparing import preparation

from conftest import SAMPLE

SMALL = {"vocab_size": 600, "document_bytes": 4096}


def _training(corpus: Path, tmp_path: Path, **options: object) -> tuple[list[PrepareProgress], object]:
    heard: list[PrepareProgress] = []
    prepared = prepare(corpus, cache_dir=tmp_path / "cache", progress=heard.append, **SMALL, **options)
    return [event for event in heard if event.stage == "training"], prepared


def test_training_counts_the_bytes_it_trains_on_as_it_reads_them(tmp_path: Path) -> None:
    events, prepared = _training(SAMPLE / "polish.txt", tmp_path)
    used, whole = prepared.vocabulary_sample_bytes  # type: ignore[attr-defined]
    assert used == whole  # the whole training range, far below the cap of 500 MB
    assert {event.total_bytes for event in events} == {whole}
    done = [event.done_bytes for event in events]
    assert done == sorted(done) and done[0] == 0 and done[-1] == whole
    assert any(0 < d < whole for d in done)  # it advances while reading, not only at the end


def test_a_capped_sample_counts_to_its_cap(tmp_path: Path) -> None:
    events, prepared = _training(SAMPLE / "polish.txt", tmp_path, vocab_sample_bytes=100_000)
    used, whole = prepared.vocabulary_sample_bytes  # type: ignore[attr-defined]
    assert used <= 100_000 < whole
    assert {event.total_bytes for event in events} == {100_000}
    assert events[-1].done_bytes == 100_000 and not events[-1].compiling


def test_compiling_the_trainers_kernels_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exact = preparation.TRAINERS["exact"]

    def compiling_first(texts: Iterable[str], **options: object) -> object:
        # A kernel numba has never compiled (no cache), as the trainer's are on a first run.
        njit(lambda values: values.sum() + 1)(np.arange(3))
        return exact(texts, **options)

    monkeypatch.setitem(preparation.TRAINERS, "exact", compiling_first)
    events, _ = _training(SAMPLE / "polish.txt", tmp_path)
    said = [event.compiling for event in events]
    assert True in said and not said[-1]
    assert said.index(False, said.index(True)) > said.index(True)  # said done once compiled
