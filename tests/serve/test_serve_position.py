"""The serving position is the step the run reached, whatever call served it: ``batch(k)``,
``micro_batches(k)``, iteration or ``batches.step = k``; a position that cannot be known is
refused, never guessed.

The pack is positional: id ``1 + i`` sits at position ``i``, so a stream row's first id names it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokpack.errors import InputError
from tokpack.serve import PackedBatches
from tokpack.serve.memory import pack_of_documents

LENGTH = 4


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ids = np.arange(1, 1 + 2001)
    documents = [ids[i : i + 37].tolist() for i in range(0, len(ids), 37)]
    return pack_of_documents(documents, n_vocab=3000, pad_id=0, directory=tmp_path_factory.mktemp("position") / "pack")


def rows_of(batch: dict) -> list[int]:
    return ((batch["input_ids"][:, 0] - 1) // LENGTH).tolist()


def test_thirty_batch_calls_then_state_dict_resume_with_another_global_batch_serves_every_row_once(pack: Path) -> None:
    batches = PackedBatches(pack, length=LENGTH, global_batch=8, seed=5)
    n_rows = batches.layouts[0].n_rows
    served = [row for k in range(30) for row in rows_of(batches.batch(k))]
    state = batches.state_dict()
    assert state["step"] == 30 and batches.position == 30
    resumed = PackedBatches(pack, length=LENGTH, global_batch=12, seed=5)
    resumed.load_state_dict(state)
    while len(served) < n_rows:
        served += rows_of(resumed.batch(resumed.step))
        resumed.step += 1
    assert sorted(served[:n_rows]) == list(range(n_rows))  # every row of the epoch once


def test_micro_batches_and_iteration_record_the_position_too(pack: Path) -> None:
    batches = PackedBatches(pack, length=LENGTH, global_batch=8, micro_batches=2)
    for k in range(4):
        batches.micro_batches(k)
    assert batches.state_dict()["step"] == 4
    iterated = PackedBatches(pack, length=LENGTH, global_batch=8)
    for _, _ in zip(range(3), iterated):
        pass
    assert iterated.state_dict()["step"] == 3 and iterated.step == 3


def test_serving_a_step_again_or_assigning_the_step_keeps_the_position_known(pack: Path) -> None:
    batches = PackedBatches(pack, length=LENGTH, global_batch=8)
    for k in (0, 1, 2, 1, 2):  # a step served again (a retried step) does not move the position back
        batches.batch(k)
    assert batches.state_dict()["step"] == 3
    batches.step = 10  # said by the run: the position is what it says
    assert batches.state_dict()["step"] == 10
    batches.batch(10)
    assert batches.state_dict()["step"] == 11


def test_a_step_served_past_the_position_makes_it_unknown_and_state_dict_refuses(pack: Path) -> None:
    batches = PackedBatches(pack, length=LENGTH, global_batch=8)
    for k in (0, 1, 2, 7, 8):
        batches.batch(k)
    with pytest.raises(InputError, match=r"steps 3 to 6 were never served.*state_dict\(step=N\)"):
        batches.state_dict()
    with pytest.raises(InputError, match="steps 3 to 6"):
        batches.data_schedule()
    state = batches.state_dict(step=9)  # the run says where it is
    assert state["step"] == 9 and state["parts"][0]["rows"] == 72
    first = PackedBatches(pack, length=LENGTH, global_batch=8)
    first.batch(5)
    with pytest.raises(InputError, match=r"step 5 first: steps 0 to 4 were never served"):
        first.state_dict()


def test_state_dict_at_a_given_step_is_the_state_an_uninterrupted_run_saves_there(pack: Path) -> None:
    batches = PackedBatches(pack, length=LENGTH, global_batch=[(0, 8), (4, 16)], seed=1)
    run = PackedBatches(pack, length=LENGTH, global_batch=[(0, 8), (4, 16)], seed=1)
    for _ in zip(range(6), run):
        pass
    assert batches.state_dict(step=6) == run.state_dict()
    with pytest.raises(InputError, match="step must be"):
        batches.state_dict(step=-1)
