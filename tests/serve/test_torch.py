"""PyTorch loaders: seed-fixed order, batch gathers, exact resume, a real training client."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")

from tokpack import prepare  # noqa: E402
from tokpack.serve import Windows  # noqa: E402
from tokpack.serve.memory import pack_of_documents  # noqa: E402
from tokpack.torch import WindowDataset, make_loader  # noqa: E402

from conftest import SAMPLE  # noqa: E402


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> WindowDataset:
    rng = np.random.default_rng(1)
    documents = [rng.integers(1, 500, size=int(n)).tolist() for n in rng.integers(3, 40, size=103)]
    pack = pack_of_documents(documents, n_vocab=500, pad_id=0, directory=tmp_path_factory.mktemp("p") / "pack")
    return WindowDataset(Windows(pack, block=16))


def epoch_batches(loader) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
    return [x.clone() for x, _ in loader]


def test_items_and_batches_are_int64_tensors(dataset: WindowDataset) -> None:
    x, y = dataset[0]
    assert x.dtype == y.dtype == torch.int64 and x.shape == (16,)
    xs, ys = next(iter(make_loader(dataset, batch_size=8)))
    assert xs.shape == ys.shape == (8, 16) and torch.equal(ys[:, :-1], xs[:, 1:])
    assert (ys[:, -1] == dataset.ignore_index).all()


def test_same_seed_same_batches_other_seed_other_order(dataset: WindowDataset) -> None:
    a = epoch_batches(make_loader(dataset, batch_size=8, seed=7))
    b = epoch_batches(make_loader(dataset, batch_size=8, seed=7))
    c = epoch_batches(make_loader(dataset, batch_size=8, seed=8))
    assert len(a) == 103 // 8
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert any(not torch.equal(p, q) for p, q in zip(a, c))
    unshuffled = epoch_batches(make_loader(dataset, batch_size=8, shuffle=False, drop_last=False))
    assert len(unshuffled) == 13 and unshuffled[-1].shape == (103 - 96, 16)
    assert torch.equal(unshuffled[0], torch.stack([dataset[i][0] for i in range(8)]))


def test_each_batch_is_one_gather(dataset: WindowDataset, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = dataset.windows.window_batch

    def counting(indices):  # type: ignore[no-untyped-def]
        calls.append(len(indices))
        return original(indices)

    monkeypatch.setattr(dataset.windows, "window_batch", counting)
    batches = epoch_batches(make_loader(dataset, batch_size=10))
    assert calls == [10] * len(batches)


def test_epochs_differ_but_are_reproducible(dataset: WindowDataset) -> None:
    loader = make_loader(dataset, batch_size=8, seed=3)
    first, second = epoch_batches(loader), epoch_batches(loader)
    assert loader.epoch == 2
    assert any(not torch.equal(p, q) for p, q in zip(first, second))
    again = make_loader(dataset, batch_size=8, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(first + second, epoch_batches(again) + epoch_batches(again)))


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_after_step_k_yields_exactly_the_rest(dataset: WindowDataset, workers: int) -> None:
    reference = make_loader(dataset, batch_size=8, seed=11, workers=workers)
    uninterrupted = epoch_batches(reference) + epoch_batches(reference) + epoch_batches(reference)
    per_epoch = len(reference)
    for k in (1, per_epoch - 1, per_epoch, per_epoch + 5, 2 * per_epoch + 2):
        run = make_loader(dataset, batch_size=8, seed=11, workers=workers)
        seen, state = 0, None
        while state is None:  # train for k steps, then "checkpoint"
            for _ in run:
                seen += 1
                if seen == k:
                    state = run.state_dict()
                    break
        resumed = make_loader(dataset, batch_size=8, seed=11, workers=workers)
        resumed.load_state_dict(state)
        rest: list[torch.Tensor] = []
        while len(rest) < len(uninterrupted) - k:
            rest += epoch_batches(resumed)
        assert all(torch.equal(p, q) for p, q in zip(rest, uninterrupted[k:])), f"resume after step {k}"


def test_state_from_another_loader_is_refused(dataset: WindowDataset) -> None:
    state = make_loader(dataset, batch_size=8, seed=1).state_dict()
    with pytest.raises(ValueError, match="saved with"):
        make_loader(dataset, batch_size=4, seed=1).load_state_dict(state)


def test_a_tiny_language_model_learns_from_a_real_pack(tmp_path: Path) -> None:
    prepared = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path, vocab_size=512, document_bytes=2048)
    dataset = WindowDataset(Windows(prepared.tokens_dir, block=32, aligned=False))
    n_vocab = prepared.n_vocab
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small only loses to thread synchronisation

    class TinyLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(n_vocab, 64)
            self.position = torch.nn.Embedding(32, 64)
            self.block = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
            self.head = torch.nn.Linear(64, n_vocab)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            hidden = self.embed(x) + self.position(torch.arange(x.shape[1]))
            return self.head(self.block(hidden, src_mask=mask, is_causal=True))

    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_of = torch.nn.CrossEntropyLoss(ignore_index=dataset.ignore_index)
    losses = []
    loader = make_loader(dataset, batch_size=16, seed=0)
    while len(losses) < 200:
        for x, y in loader:
            loss = loss_of(model(x).reshape(-1, n_vocab), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == 200:
                break
    torch.set_num_threads(threads)
    uniform = math.log(n_vocab)
    assert abs(losses[0] - uniform) < 1.0  # starts near chance
    assert np.mean(losses[-20:]) < uniform - 1.5, (losses[0], np.mean(losses[-20:]))
    print(f"loss {losses[0]:.2f} -> {np.mean(losses[-20:]):.2f} (ln n_vocab = {uniform:.2f})")


def test_packed_windows_waste_far_less_than_one_document_per_row(tmp_path: Path) -> None:
    prepared = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path, vocab_size=512, document_bytes=256)
    block = 128
    windows = Windows(prepared.tokens_dir, block=block)
    _, ys = windows.window_batch(np.arange(len(windows)))
    packed_share = float((ys == windows.pad_id).mean())
    lengths = np.diff(np.append(windows.origins(np.arange(len(windows))), windows.hi))
    # one document a row: targets beyond the document (and the last) are padding
    per_row_share = float(np.mean(1 - np.minimum(lengths - 1, block - 1) / block))
    assert packed_share < 0.01 and per_row_share > 0.2, (packed_share, per_row_share)
