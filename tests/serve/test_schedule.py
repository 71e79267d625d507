"""TokenBatches: the step formula, target shift, range safety, prefetch timing, the schedule record."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from tokpack import require_vocabulary
from tokpack.serve import TokenBatches
from tokpack.store import DocumentCut, Pack, PackWriter, Source, Span
from tokpack.vocab import VocabIdentity

IDENTITY = VocabIdentity(scheme="positions", sha256=hashlib.sha256(b"positions").hexdigest(), n_vocab=65_536)


def positional_pack(directory: Path, *, validation: int, train: int, test: int = 0) -> Path:
    """A pack whose id at position p is p: validation first, then train, then test, so the
    training range does not start at 0 and every id says where it was read."""
    ids = np.arange(validation + train + test, dtype=np.int64)
    with PackWriter(directory, vocabulary=IDENTITY) as writer:
        cuts = np.cumsum([0, validation, train, test])
        ranges = {}
        for name, (a, b) in zip(("validation", "train", "test"), zip(cuts[:-1], cuts[1:])):
            d0 = writer.n_docs
            writer.add_documents([ids[a:b]])
            ranges[name] = Span(documents=(d0, writer.n_docs), tokens=(int(a), int(b)))
        writer.commit(source=Source(name="positions", sha256="0" * 64, n_bytes=0), cut=DocumentCut(rule="list"),
                      ranges=ranges)
    return directory


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    return positional_pack(tmp_path / "pack", validation=100, train=1000, test=50)


def expected_start(step: int, row: int, *, batch: int, length: int, lo: int, hi: int) -> int:
    position = lo
    advance = step * batch * length + row * length
    return position + advance % (hi - lo - length - 1)


def test_first_steps_follow_the_formula(pack: Path) -> None:
    batches = TokenBatches(pack, batch=3, length=10)
    # lo = 100, hi = 1100, modulus = 1000 - 10 - 1 = 989: step 0 rows start at 100, 110, 120
    assert batches.ids(0)[:, 0].tolist() == [100, 110, 120]
    assert batches.ids(1)[:, 0].tolist() == [130, 140, 150]
    for step in range(40):
        starts = batches.ids(step)[:, 0].tolist()
        assert starts == [expected_start(step, row, batch=3, length=10, lo=100, hi=1100) for row in range(3)]


def test_wrap_around_and_last_valid_offset(pack: Path) -> None:
    batches = TokenBatches(pack, batch=1, length=10)
    modulus = 1000 - 10 - 1
    # step 98 starts at 100 + 980; step 99 wraps to 100 + (990 % 989) = 101
    assert batches.ids(98)[0, 0] == 1080 and batches.ids(99)[0, 0] == 101
    last = [s for s in range(5000) if batches.offsets(s)[0] == 100 + modulus - 1]
    assert last, "the last valid offset is reached"
    row = batches.ids(last[0])[0]
    assert row[-1] == 1098 < 1100  # the furthest read still ends inside the training range


def test_targets_are_inputs_shifted_by_one(pack: Path) -> None:
    ids = TokenBatches(pack, batch=4, length=16).ids(7)
    assert ids.shape == (4, 17) and ids.dtype == np.int32
    inputs, targets = ids[:, :-1], ids[:, 1:]
    assert np.array_equal(targets, inputs + 1)  # positional ids: the next id is the next position


def test_no_step_ever_reads_outside_the_training_range(pack: Path) -> None:
    batches = TokenBatches(pack, batch=7, length=33)
    every = np.concatenate([batches.ids(step).ravel() for step in range(0, 3000, 7)])
    assert every.min() >= 100 and every.max() < 1100


def test_huge_step_numbers_do_not_overflow(pack: Path) -> None:
    batches = TokenBatches(pack, batch=2, length=8)
    step = 10**15
    assert batches.ids(step)[:, 0].tolist() == [expected_start(step, r, batch=2, length=8, lo=100, hi=1100) for r in range(2)]


def test_refusals(pack: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shorter than one row"):
        TokenBatches(pack, batch=1, length=999)
    TokenBatches(pack, batch=1, length=998)  # exactly enough: 1000 ids = length + 2
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        TokenBatches(pack, batch=0, length=4)
    with pytest.raises(ValueError, match="step must be"):
        TokenBatches(pack, batch=1, length=4).ids(-1)
    tokens = pack / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[500] ^= 0xFF
    tokens.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        TokenBatches(pack, batch=1, length=4)  # verified on open, not only when read
    no_train = tmp_path / "v"
    with PackWriter(no_train, vocabulary=IDENTITY) as writer:
        writer.add_documents([[1, 2, 3]])
        writer.commit(source=Source(name="v", sha256="0" * 64, n_bytes=0), cut=DocumentCut(rule="list"),
                      ranges={"validation": Span(documents=(0, 1), tokens=(0, 3))})
    with pytest.raises(ValueError, match="no training range"):
        TokenBatches(no_train, batch=1, length=1)


def test_prefetch_yields_the_schedule(pack: Path) -> None:
    batches = TokenBatches(pack, batch=2, length=8)
    got = list(batches.prefetch(5, 20, depth=3))
    assert [step for step, _ in got] == list(range(5, 25))
    assert all(np.array_equal(ids, batches.ids(step)) for step, ids in got)
    assert list(batches.prefetch(0, 0)) == []
    with pytest.raises(ValueError):
        batches.prefetch(-1, 3)


class FailingAt(TokenBatches):
    def __init__(self, *args: object, fail: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fail, self.made = fail, []

    def ids(self, step: int) -> np.ndarray:
        self.made.append(step)
        if step == self.fail:
            raise RuntimeError(f"broken at {step}")
        return super().ids(step)


def test_prefetch_raises_at_its_own_step_and_makes_nothing_after(pack: Path) -> None:
    batches = FailingAt(pack, batch=2, length=8, fail=3)
    seen = []
    with pytest.raises(RuntimeError, match="broken at 3"):
        for step, _ in batches.prefetch(0, 10, depth=2):
            seen.append(step)
    assert seen == [0, 1, 2]
    assert max(batches.made) == 3


def test_prefetch_never_has_more_than_depth_batches_alive(pack: Path) -> None:
    batches = FailingAt(pack, batch=2, length=8, fail=-1)
    for step, _ in batches.prefetch(0, 12, depth=2):
        assert max(batches.made) <= step + 1  # the one held, and at most one made ahead


def test_schedule_record_carries_the_vocabulary(pack: Path) -> None:
    batches = TokenBatches(pack, batch=2, length=8)
    schedule = batches.data_schedule(run="demo")
    assert schedule["schema"] == "tokpack.schedule.v1" and schedule["extra"] == {"run": "demo"}
    assert schedule["train_tokens"] == [100, 1100] and schedule["vocabulary"]["sha256"] == IDENTITY.sha256

    class Encoder:
        identity = IDENTITY

    require_vocabulary(schedule, Encoder())
    described = batches.describe()
    assert described["tokens_sha256"] == Pack(pack).meta.tokens_sha256 and described["batch"] == 2
