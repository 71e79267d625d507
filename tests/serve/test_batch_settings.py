"""PackedBatches' settings as one record: the same batches as its keywords, checked once when made."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from tokpack import PackedBatches
from tokpack.errors import InputError
from tokpack.serve import BatchSettings
from tokpack.serve.memory import pack_of_documents


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_of_documents([list(range(1, 40)), list(range(41, 60))], n_vocab=64, pad_id=0,
                             directory=tmp_path_factory.mktemp("settings") / "pack")


def test_a_record_serves_what_its_keywords_serve(pack: Path) -> None:
    settings = BatchSettings(length=4, global_batch=4, rank=1, world_size=2, dtype="int32", seed=3)
    by_record, by_keywords = PackedBatches(pack, settings), PackedBatches(pack, length=4, global_batch=4, rank=1,
                                                                          world_size=2, dtype="int32", seed=3)
    for step in range(5):
        a, b = by_record.batch(step), by_keywords.batch(step)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert a["input_ids"].dtype == np.int32 and by_keywords.settings == settings
    again = pickle.loads(pickle.dumps(by_record))  # a loader worker gets the record and the position
    assert np.array_equal(again.batch(5)["input_ids"], by_record.batch(5)["input_ids"])


def test_a_setting_given_both_ways_is_refused(pack: Path) -> None:
    with pytest.raises(InputError, match=r"^seed given beside settings="):
        PackedBatches(pack, BatchSettings(length=4, global_batch=4), seed=1)


@pytest.mark.parametrize(("settings", "message"), [
    ({"length": 4, "global_batch": 4, "rank": 2, "world_size": 2}, "rank must be"),
    ({"length": 4, "global_batch": 4, "dtype": "int16"}, "dtype must be one of"),
    ({"length": 0, "global_batch": 4}, "length must be"),
    ({"length": 4, "global_batch": 6, "micro_batches": 4}, "micro_batches 4 does not divide"),
])
def test_each_setting_is_checked_when_the_record_is_made(settings: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=f"^{message}"):
        BatchSettings(**settings)  # type: ignore[arg-type]
