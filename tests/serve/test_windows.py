"""Windows: alignment, the target shift, padding, batch gathers, range safety and refusals."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from tokpack import prepare
from tokpack.serve import Windows
from tokpack.serve.memory import pack_of_documents

from conftest import SAMPLE

PAD = 0
DOCUMENTS = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10, 11], [12, 13, 14]]


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    return pack_of_documents(DOCUMENTS, n_vocab=20, pad_id=PAD, directory=tmp_path / "pack")


def test_aligned_items_start_at_documents_and_shift_targets(pack: Path) -> None:
    windows = Windows(pack, block=4)
    assert len(windows) == 4
    for index, document in enumerate(DOCUMENTS):
        x, y = windows[index]
        assert x.dtype == np.int64 and x.shape == y.shape == (4,)
        assert x[0] == document[0]
        assert np.array_equal(y[:-1], x[1:]) and y[-1] == PAD


def test_windows_run_on_into_the_next_documents(pack: Path) -> None:
    x, y = Windows(pack, block=4)[1]
    assert x.tolist() == [6, 7, 8, 9] and y.tolist() == [7, 8, 9, PAD]


def test_the_last_window_is_padded_past_the_end(pack: Path) -> None:
    windows = Windows(pack, block=6)
    x, y = windows[3]
    stream = sum(DOCUMENTS, [])
    tail = len(stream) - stream.index(12)
    assert x[:tail].tolist() == [12, 13, 14] and (x[tail:] == PAD).all()
    assert y[: tail - 1].tolist() == [13, 14] and (y[tail - 1 :] == PAD).all()


def test_contiguous_blocks(pack: Path) -> None:
    windows = Windows(pack, block=4, aligned=False)
    assert len(windows) == 14 // 4
    x, y = windows[1]
    assert x.tolist() == [5, 6, 7, 8] and y.tolist() == [6, 7, 8, PAD]
    with pytest.raises(IndexError):
        windows[len(windows)]


def test_batch_gather_equals_items_one_by_one(pack: Path) -> None:
    for aligned in (True, False):
        windows = Windows(pack, block=5, aligned=aligned)
        indices = np.array([len(windows) - 1, 0, len(windows) - 1, 1, 1])
        xs, ys = windows.window_batch(indices)
        assert xs.shape == ys.shape == (5, 5)
        for row, index in enumerate(indices):
            x, y = windows[int(index)]
            assert np.array_equal(xs[row], x) and np.array_equal(ys[row], y)


def test_refusals(pack: Path, tmp_path: Path) -> None:
    windows = Windows(pack, block=4)
    for bad in (-1, 4):
        with pytest.raises(IndexError):
            windows[bad]
    with pytest.raises(IndexError):
        windows.window_batch([0, 99])
    with pytest.raises(ValueError, match="at least 2"):
        Windows(pack, block=1)
    with pytest.raises(ValueError, match="no 'validation' range"):
        Windows(pack, block=4, split="validation")
    with pytest.raises(ValueError, match="no padding id"):
        Windows(pack_of_documents(DOCUMENTS, n_vocab=20, directory=tmp_path / "nopad"), block=4)


def test_training_windows_never_read_validation_ids(tmp_path: Path) -> None:
    train = [[1, 2, 3]] * 20
    validation = [[9, 9, 9, 9]] * 5
    pack = pack_of_documents(train + validation, n_vocab=10, pad_id=0, train_documents=20, directory=tmp_path / "p")
    windows = Windows(pack, block=8)
    xs, ys = windows.window_batch(np.arange(len(windows)))
    assert 9 not in xs and 9 not in ys  # the last training windows pad instead of running on
    x, _ = Windows(pack, block=8, split="validation")[0]
    assert x.tolist() == [9] * 8


def test_a_thousand_random_windows_stay_in_the_vocabulary(tmp_path: Path) -> None:
    prepared = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path, vocab_size=500, document_bytes=512)
    windows = Windows(prepared.tokens_dir, block=64)
    assert windows.pad_id == prepared.tokenizer.eot_id  # text pads with <|endoftext|>, never in the text
    indices = np.random.default_rng(0).integers(0, len(windows), size=1000)
    xs, ys = windows.window_batch(indices)
    assert xs.min() >= 0 and xs.max() < prepared.n_vocab and ys.max() < prepared.n_vocab
    train_end = prepared.meta.ranges["train"].tokens[1]
    tokens = prepared.pack().tokens
    first = windows.origins(indices)
    assert np.array_equal(xs[:, 0], tokens[first])
    assert (first + 64 <= train_end).sum() >= 990  # nearly all whole; the rest padded, never validation


def test_pickling_sends_the_path_not_the_stream(tmp_path: Path) -> None:
    big = pack_of_documents([list(range(1, 1000))] * 200, n_vocab=1000, pad_id=0, directory=tmp_path / "big")
    windows = Windows(big, block=32)
    payload = pickle.dumps(windows)
    assert len(payload) < 1_000  # the stream is 400 kB
    again = pickle.loads(payload)
    assert np.array_equal(again.window_batch([5, 7])[0], windows.window_batch([5, 7])[0])
    assert isinstance(again.pack.tokens, np.memmap)
