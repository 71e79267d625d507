"""The torch side of serving: block-causal attention from the batch's boundaries, the batch loader
(order with workers, resume), and the seed loader's contiguous targets."""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tokpack
from tokpack.serve import Mixture, PackedBatches, Windows
from tokpack.torch import WindowDataset, make_batch_loader, make_loader


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tokpack.TokenizedCorpus:
    """The bundled Polish sample with a 512-id vocabulary and short (256-byte) documents, so rows
    hold several documents."""
    return tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path_factory.mktemp("cache"), vocab_size=512,
                           document_bytes=256)


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` (``(..., T, D)``) at ``positions`` (``(..., T)``)."""
    half = x.shape[-1] // 2
    frequencies = 1.0 / (10_000 ** (torch.arange(half, dtype=torch.float64) / half))
    angles = positions[..., None].to(torch.float64) * frequencies
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


@pytest.mark.parametrize("layout", ["stream", "documents", "bestfit"])
def test_block_causal_attention_equals_attention_on_each_document_alone(
        corpus: tokpack.TokenizedCorpus, layout: str) -> None:
    batches = PackedBatches(corpus.tokens_dir, layout=layout, length=192, global_batch=6, seed=2, position_ids=True,
                            document_ids=True, cu_seqlens=True, layout_options={"cache": False} if layout == "bestfit" else None)
    batch = {key: torch.as_tensor(value) for key, value in batches.batch(1).items()}
    rows, length = batch["input_ids"].shape
    assert int((batch["document_ids"].amax(dim=1) + 1).sum()) == len(batch["cu_seqlens"]) - 1 > rows  # documents meet in rows
    generator = torch.Generator().manual_seed(0)
    table = torch.randn(batches.n_vocab, 3, 16, generator=generator, dtype=torch.float64)  # q, k, v per id
    qkv = table[batch["input_ids"]]
    q, k, v = (qkv[:, :, i] for i in range(3))
    # Packed: one block-causal mask from document_ids, rotary positions from position_ids.
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    same_document = batch["document_ids"][:, :, None] == batch["document_ids"][:, None, :]
    positions = batch["position_ids"]
    packed = attention(rotate(q, positions), rotate(k, positions), v, causal & same_document)
    # Alone: each document cut out by cu_seqlens, positions from 0, plain causal attention.
    flat_q, flat_k, flat_v = (t.reshape(rows * length, 16) for t in (q, k, v))
    alone = torch.empty(rows * length, 16, dtype=torch.float64)
    bounds = batch["cu_seqlens"].tolist()
    for start, end in itertools.pairwise(bounds):
        n = end - start
        local = torch.arange(n)
        alone[start:end] = attention(rotate(flat_q[start:end], local), rotate(flat_k[start:end], local),
                                     flat_v[start:end], torch.ones(n, n, dtype=torch.bool).tril())
    assert batch["max_seqlen"] == max(b - a for a, b in itertools.pairwise(bounds))
    torch.testing.assert_close(packed.reshape(rows * length, 16), alone)
    # and PyTorch's own kernel with the same mask agrees
    fused = F.scaled_dot_product_attention(rotate(q, positions), rotate(k, positions), v,
                                           attn_mask=causal & same_document)
    torch.testing.assert_close(fused, packed)


@pytest.mark.parametrize("workers", [0, 2])
def test_batch_loader_keeps_step_order_and_resumes_exactly(corpus: tokpack.TokenizedCorpus, workers: int) -> None:
    def batches() -> PackedBatches:
        return PackedBatches(corpus.tokens_dir, layout="documents", length=32, global_batch=4, seed=9, cu_seqlens=True)

    reference = batches()
    expected = [reference.batch(step)["labels"] for step in range(8)]
    loader = make_batch_loader(batches(), num_workers=workers)
    seen = []
    for batch in loader:
        assert isinstance(batch["input_ids"], torch.Tensor) and batch["input_ids"].dtype == torch.int64
        assert batch["labels"].is_contiguous() and batch["cu_seqlens"].dtype == torch.int32
        seen.append(batch["labels"].numpy())
        if len(seen) == 5:
            state = loader.state_dict()
            break
    assert state["step"] == 5  # counted as delivered, not as prefetched by the workers
    resumed = make_batch_loader(batches(), num_workers=workers)
    resumed.load_state_dict(state)
    for batch in resumed:
        seen.append(batch["labels"].numpy())
        if len(seen) == 8:
            break
    assert all(np.array_equal(a, b) for a, b in zip(seen, expected)) and len(seen) == 8


@pytest.mark.parametrize("workers", [0, 2])
def test_the_batch_loader_serves_a_change_made_while_it_iterates(corpus: tokpack.TokenizedCorpus, tmp_path: Path,
                                                                 workers: int) -> None:
    other = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab=corpus.vocabulary_path, document_bytes=512)

    def batches() -> PackedBatches:
        return PackedBatches(Mixture([(corpus.tokens_dir, 1), (other.tokens_dir, 1)], names=["a", "b"]), length=32,
                             global_batch=4, seed=9)

    served = batches()
    loader = make_batch_loader(served, num_workers=workers)
    seen = []
    for batch in loader:  # workers build batches ahead from their own copies: a change must reach them
        seen.append(batch["input_ids"].numpy())
        if len(seen) == 3:
            served.set_weights(3, [0.25, 0.75])
            served.skip(5, 7)
        if len(seen) == 8:
            break
    reference = batches()
    reference.step = 3
    reference.set_weights(3, [0.25, 0.75])
    steps = [0, 1, 2, 3, 4, 7, 8, 9]
    assert all(np.array_equal(a, reference.batch(k)["input_ids"]) for a, k in zip(seen, steps))
    assert served.step == 10 and loader.state_dict()["skipped"] == [[5, 7]]


def test_a_training_loop_learns_through_the_batch_loader(corpus: tokpack.TokenizedCorpus) -> None:
    torch.manual_seed(0)
    batches = PackedBatches(corpus.tokens_dir, layout="bestfit", length=32, global_batch=16, layout_options={"cache": False})
    loader = make_batch_loader(batches)
    model = torch.nn.Sequential(torch.nn.Embedding(batches.n_vocab, 64), torch.nn.Linear(64, batches.n_vocab))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-2)
    losses = []
    for step, batch in enumerate(loader):
        logits = model(batch["input_ids"])
        loss = F.cross_entropy(logits.view(-1, batches.n_vocab), batch["labels"].view(-1), ignore_index=loader.ignore_index)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step == 30:
            break
    assert np.mean(losses[-5:]) < np.mean(losses[:3]) - 1.0


def test_seed_loader_targets_are_contiguous_for_the_usual_loss_line(tmp_path: Path) -> None:
    corpus = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab_size=300, document_bytes=512)
    with pytest.warns(UserWarning, match="serve only document heads"):
        windows = Windows(corpus.tokens_dir, block=64)
    dataset = WindowDataset(windows)
    x, y = next(iter(make_loader(dataset, batch_size=4)))
    assert x.is_contiguous() and y.is_contiguous()
    logits = torch.zeros(*x.shape, corpus.n_vocab)
    F.cross_entropy(logits.view(-1, corpus.n_vocab), y.view(-1), ignore_index=dataset.ignore_index)  # nanoGPT's line


def test_torch_distributed_checkpoint_saves_and_restores_the_loader(corpus: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.stateful import Stateful

    loader = make_batch_loader(PackedBatches(corpus.tokens_dir, length=32, global_batch=4, seed=1))
    assert isinstance(loader, Stateful) and isinstance(loader.batches, Stateful)
    for step, _ in enumerate(loader):
        if step == 4:
            break
    resumed = make_batch_loader(PackedBatches(corpus.tokens_dir, length=32, global_batch=4, seed=1))
    with warnings.catch_warnings():  # one process, no process group: DCP warns and saves locally
        warnings.simplefilter("ignore")
        dcp.save({"loader": loader}, checkpoint_id=tmp_path / "checkpoint")
        dcp.load({"loader": resumed}, checkpoint_id=tmp_path / "checkpoint")
    assert resumed.batches.step == 5
    assert np.array_equal(next(iter(resumed))["labels"].numpy(), loader.batches.batch(5)["labels"])


def test_the_seed_loader_state_names_its_data_and_vocabulary(tmp_path: Path) -> None:
    from tokpack.errors import IntegrityError, VocabularyMismatch

    first = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab_size=300, document_bytes=512)
    other_cut = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab=first.vocabulary_path, document_bytes=400)
    other_vocabulary = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab_size=280, document_bytes=512)

    def loader(corpus: tokpack.TokenizedCorpus):  # type: ignore[no-untyped-def]
        with pytest.warns(UserWarning):
            return make_loader(WindowDataset(Windows(corpus.tokens_dir, block=16)), batch_size=4)

    state = loader(first).state_dict()
    assert tokpack.require_vocabulary({"loader": state}, first.tokenizer)  # a checkpoint alone is enough
    with pytest.raises(IntegrityError, match="other data"):
        loader(other_cut).load_state_dict(state)
    with pytest.raises(VocabularyMismatch, match="saved over vocabulary"):
        loader(other_vocabulary).load_state_dict(state)
