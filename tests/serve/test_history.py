"""The history of settings: a global batch schedule of any length is linear work to build, and
the history it makes is the one a step-by-step reading of the schedule gives."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from tokpack.serve import PackedBatches
from tokpack.serve.memory import pack_of_documents


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_of_documents([list(range(1, 3000))], n_vocab=4000, pad_id=0,
                             directory=tmp_path_factory.mktemp("history") / "pack")


def test_a_schedule_of_a_million_entries_builds_in_linear_work(pack: Path) -> None:
    # A search per entry over a list rebuilt per entry made this quadratic: 16k entries took 3.9 s,
    # a million did not finish in 300 s. Linear work takes well under a second here; the bound
    # only separates the two shapes, it is no speed claim.
    n = 1_000_000
    schedule = [(step, 8 + 8 * (step % 2)) for step in range(n)]
    started = time.process_time()
    batches = PackedBatches(pack, length=4, global_batch=schedule, shuffle=False)
    assert time.process_time() - started < 30
    assert [batches.global_batch_at(step) for step in (0, 1, 2, n - 2, n - 1, n + 5)] == [8, 16, 8, 8, 16, 16]
    # the rows of a late step follow from every global batch before it
    rows_before = 12 * (n - 1) - 4
    expected = (np.arange(rows_before, rows_before + 16) % batches.layouts[0].n_rows) * 4 + 1
    assert np.array_equal(batches.global_rows(n - 1)[:, 0], expected)


def test_a_schedule_that_repeats_a_global_batch_merges_into_one_segment(pack: Path) -> None:
    batches = PackedBatches(pack, length=4, global_batch=[(0, 8), (10, 8), (20, 16), (30, 16)])
    assert [(s["step"], s["global_batch"]) for s in batches.state_dict()["history"]] == [(0, 8), (20, 16)]
