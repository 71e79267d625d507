"""PackedBatches: global batches, ranks, epochs, resume, mixtures, refusals; EvalBatches."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpack
from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.serve import EvalBatches, Mixture, PackedBatches
from tokpack.serve.memory import pack_of_documents
from tokpack.store import Pack, open_tokens


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tokpack.TokenizedCorpus:
    """The bundled Polish sample with a 512-id vocabulary, cut into 1 KB documents."""
    return tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path_factory.mktemp("cache"), vocab_size=512,
                           document_bytes=1024)


LAYOUT_NAMES = ["stream", "documents", "bestfit"]


def served_rows(batches: PackedBatches, steps: range) -> np.ndarray:
    return np.concatenate([batches.global_rows(step) for step in steps])


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_the_union_of_rank_batches_is_the_global_batch(corpus: tokpack.TokenizedCorpus, layout: str) -> None:
    options = {"layout": layout, "length": 32, "global_batch": 8, "seed": 3, "position_ids": True,
               "document_ids": True, "cu_seqlens": True, "layout_options": {"cache": False} if layout == "bestfit" else None}
    whole = PackedBatches(corpus.tokens_dir, **options)
    for world_size in (1, 2, 4):
        ranks = [PackedBatches(corpus.tokens_dir, rank=r, world_size=world_size, **options) for r in range(world_size)]
        for step in (0, 5, 123):
            rows = whole.global_rows(step).astype(np.int64)
            batches = [rank.batch(step) for rank in ranks]
            assert np.array_equal(np.concatenate([b["input_ids"] for b in batches]), rows[:, :-1])
            assert np.array_equal(np.concatenate([b["labels"] for b in batches]), rows[:, 1:])
            for key in ("position_ids", "document_ids"):
                assert np.array_equal(np.concatenate([b[key] for b in batches]), whole.batch(step)[key])
            for b in batches:
                assert b["input_ids"].flags.c_contiguous and b["labels"].flags.c_contiguous
                assert b["input_ids"].dtype == np.int64 and b["cu_seqlens"].dtype == np.int32
                assert b["cu_seqlens"][-1] == b["input_ids"].size


def test_an_epoch_serves_every_row_once_and_rolls_over_inside_a_step(corpus: tokpack.TokenizedCorpus) -> None:
    batches = PackedBatches(corpus.tokens_dir, layout="stream", length=48, global_batch=7, seed=1)
    layout = batches.layouts[0]
    n_rows = layout.n_rows
    steps = -(-2 * n_rows // 7) + 1
    plans = [batches._plan(step)[1] for step in range(steps)]
    assert all(len(plan) == 7 for plan in plans)  # no short batch at an epoch's end
    rows = np.concatenate(plans)
    assert np.array_equal(np.sort(rows[:n_rows]), np.arange(n_rows))
    assert np.array_equal(np.sort(rows[n_rows : 2 * n_rows]), np.arange(n_rows))
    assert not np.array_equal(rows[:n_rows], rows[n_rows : 2 * n_rows])  # each epoch its own order
    assert n_rows % 7  # so one step really held the end of an epoch and the start of the next
    # the ids: the first epoch's labels are every training id but the first, exactly once
    labels = np.concatenate([batches.global_rows(step)[:, 1:] for step in range(steps)])[:n_rows]
    tokens = np.asarray(open_tokens(corpus.tokens_dir).tokens)
    lo, hi = layout.lo, layout.hi
    real = labels[labels != batches.ignore_index]
    assert np.array_equal(np.bincount(real, minlength=600), np.bincount(tokens[lo + 1 : hi], minlength=600))
    assert batches.repeats(steps)[0]["epochs"] == 2


def test_same_seed_same_batches_other_seed_other_order(corpus: tokpack.TokenizedCorpus) -> None:
    a = PackedBatches(corpus.tokens_dir, length=32, global_batch=4, seed=0)
    b = PackedBatches(corpus.tokens_dir, length=32, global_batch=4, seed=0)
    c = PackedBatches(corpus.tokens_dir, length=32, global_batch=4, seed=1)
    assert np.array_equal(a.global_rows(9), b.global_rows(9))
    assert not np.array_equal(a.global_rows(9), c.global_rows(9))


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_resume_on_another_world_size_sees_the_uninterrupted_global_batches(
        corpus: tokpack.TokenizedCorpus, layout: str) -> None:
    options = {"layout": layout, "length": 32, "global_batch": 8, "seed": 5,
               "layout_options": {"cache": False} if layout == "bestfit" else None}
    uninterrupted = PackedBatches(corpus.tokens_dir, **options)
    expected = [next(iter(uninterrupted))["input_ids"] for _ in range(9)]
    ranks = [PackedBatches(corpus.tokens_dir, rank=r, world_size=2, **options) for r in range(2)]
    iterators = [iter(rank) for rank in ranks]
    for _ in range(4):
        for iterator in iterators:
            next(iterator)
    state = pickle.loads(pickle.dumps(ranks[0].state_dict()))  # what a checkpoint holds
    assert state["step"] == 4
    for world_size in (1, 4):
        resumed = [PackedBatches(corpus.tokens_dir, rank=r, world_size=world_size, **options) for r in range(world_size)]
        for rank in resumed:
            rank.load_state_dict(state)
        iterators = [iter(rank) for rank in resumed]
        for step in range(4, 9):
            got = np.concatenate([next(iterator)["input_ids"] for iterator in iterators])
            assert np.array_equal(got, expected[step])


def test_micro_batches_split_the_rank_batch_in_order(corpus: tokpack.TokenizedCorpus) -> None:
    batches = PackedBatches(corpus.tokens_dir, length=16, global_batch=12, world_size=2, rank=1, micro_batches=3,
                            cu_seqlens=True)
    whole, parts = batches.batch(2), batches.micro_batches(2)
    assert [len(p["input_ids"]) for p in parts] == [2, 2, 2]
    assert np.array_equal(np.concatenate([p["labels"] for p in parts]), whole["labels"])
    assert all(p["cu_seqlens"][-1] == p["input_ids"].size for p in parts)
    with pytest.raises(InputError, match="does not divide"):
        PackedBatches(corpus.tokens_dir, length=16, global_batch=12, world_size=5)
    with pytest.raises(InputError, match="micro_batches 4"):
        PackedBatches(corpus.tokens_dir, length=16, global_batch=12, world_size=2, micro_batches=4)


def test_int32_on_request_and_padding_labels_are_the_ignore_index(corpus: tokpack.TokenizedCorpus) -> None:
    batches = PackedBatches(corpus.tokens_dir, layout="bestfit", length=256, global_batch=64, dtype="int32",
                            layout_options={"cache": False})
    batch = batches.batch(0)
    assert batch["input_ids"].dtype == np.int32 and batch["labels"].dtype == np.int32
    assert batches.ignore_index == corpus.tokenizer.eot_id
    padded = batch["input_ids"] == batches.ignore_index
    assert padded.any()  # 1 KB documents do not fill 257-id rows exactly
    assert (batch["labels"][padded] == batches.ignore_index).all()


def test_state_over_other_data_or_another_vocabulary_is_refused(corpus: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    batches = PackedBatches(corpus.tokens_dir, length=32, global_batch=4)
    state = batches.state_dict()
    other_data = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab=corpus.vocabulary_path,
                                 document_bytes=2048)
    assert other_data.identity.sha256 == corpus.identity.sha256  # same vocabulary, other cut
    with pytest.raises(IntegrityError, match="saved over other data"):
        PackedBatches(other_data.tokens_dir, length=32, global_batch=4).load_state_dict(state)
    other_vocabulary = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab_size=400, document_bytes=1024)
    with pytest.raises(VocabularyMismatch, match="saved over vocabulary"):
        PackedBatches(other_vocabulary.tokens_dir, length=32, global_batch=4).load_state_dict(state)
    PackedBatches(corpus.tokens_dir, length=32, global_batch=8).load_state_dict(state)  # a new global batch: supported
    with pytest.raises(InputError, match="state has length 32, this loader 16"):
        PackedBatches(corpus.tokens_dir, length=16, global_batch=4).load_state_dict(state)
    with pytest.raises(InputError, match="not a tokpack loader state"):
        batches.load_state_dict({"step": 3})


def test_a_checkpoint_alone_is_enough_for_require_vocabulary(corpus: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    batches = PackedBatches(corpus.tokens_dir, length=32, global_batch=4)
    tokenizer = corpus.tokenizer
    checkpoint = {"model": {}, "loader": batches.state_dict()}
    assert tokpack.require_vocabulary(checkpoint, tokenizer) is tokenizer
    assert tokpack.require_vocabulary(batches.data_schedule(run="x"), tokenizer) is tokenizer
    assert tokpack.require_vocabulary(batches.state_dict(), tokenizer) is tokenizer
    other = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path, vocab_size=400, document_bytes=1024)
    with pytest.raises(VocabularyMismatch, match="not the vocabulary"):
        tokpack.require_vocabulary(checkpoint, other.tokenizer)


def two_packs(tmp_path: Path, n_vocab: int = 100) -> tuple[Path, Path, Path]:
    a = pack_of_documents([list(range(1, 30))] * 10, n_vocab=n_vocab, pad_id=0, directory=tmp_path / "a")
    b = pack_of_documents([list(range(40, 60))] * 3, n_vocab=n_vocab, pad_id=0, directory=tmp_path / "b")
    c = pack_of_documents([list(range(70, 99))] * 40, n_vocab=n_vocab, pad_id=0, directory=tmp_path / "c")
    return a, b, c


@settings(max_examples=4, deadline=None)  # each example checks 10,001 steps
@given(weights=st.lists(st.floats(0.01, 10), min_size=2, max_size=4), global_batch=st.integers(1, 33),
       switch=st.integers(1, 9000))
def test_mixture_totals_stay_within_one_row_of_exact_over_ten_thousand_steps(
        tmp_path_factory: pytest.TempPathFactory, weights: list[float], global_batch: int, switch: int) -> None:
    folder = tmp_path_factory.getbasetemp() / "mixture-parts"
    if not folder.exists():
        folder.mkdir()
        two_packs(folder)
    paths = [folder / name for name in "abcab"[: len(weights)]]
    later = list(reversed(weights))
    mixture = Mixture(list(zip(paths, weights)), seed=2, stages=[(0, weights), (switch, later)])
    batches = PackedBatches(mixture, length=8, global_batch=global_batch)
    first, second = np.array(weights) / sum(weights), np.array(later) / sum(later)
    previous = np.zeros(len(weights))
    for step in range(10_001):
        rows = np.array([part["rows"] for part in batches.repeats(step)])
        exact = global_batch * (first * min(step, switch) + second * max(0, step - switch))
        assert np.abs(rows - exact).max() <= 1 + 1e-9, step
        assert rows.sum() == global_batch * step and (rows >= previous).all()
        previous = rows


def test_mixture_rows_come_from_their_parts_with_their_own_epochs(tmp_path: Path) -> None:
    a, b, c = two_packs(tmp_path)
    mixture = Mixture([(a, 0.5), (b, 0.25), (c, 0.25)], seed=1)
    batches = PackedBatches(mixture, length=8, global_batch=8, layout="documents")
    counts = np.zeros(3, dtype=np.int64)
    for step in range(200):
        rows = batches.global_rows(step)
        first = rows[:, 0]
        counts += [(first < 40).sum(), ((first >= 40) & (first < 70)).sum(), (first >= 70).sum()]
    assert counts.tolist() == [800, 400, 400]
    repeats = batches.repeats(200)
    assert [r["rows"] for r in repeats] == [800, 400, 400]
    assert [r["epochs"] for r in repeats] == [800 // repeats[0]["rows_per_epoch"], 400 // repeats[1]["rows_per_epoch"],
                                              400 // repeats[2]["rows_per_epoch"]]
    assert repeats[1]["epochs"] > repeats[2]["epochs"]  # the small part repeats more often
    schedule = batches.data_schedule(run="mix")
    assert [p["weight"] for p in schedule["parts"]] == [0.5, 0.25, 0.25] and schedule["extra"] == {"run": "mix"}
    assert schedule["parts"][1]["tokens_sha256"] == open_tokens(b).meta.tokens_sha256


def test_mixture_of_two_vocabularies_is_refused_naming_both(tmp_path: Path) -> None:
    a = pack_of_documents([[1, 2, 3]] * 5, n_vocab=10, pad_id=0, directory=tmp_path / "ten")
    b = pack_of_documents([[1, 2, 3]] * 5, n_vocab=11, pad_id=0, directory=tmp_path / "eleven")
    with pytest.raises(VocabularyMismatch, match="ten.*eleven"):
        PackedBatches(Mixture([(a, 1), (b, 1)]), length=2, global_batch=2)


def test_a_served_id_outside_the_vocabulary_is_an_integrity_error(tmp_path: Path) -> None:
    pack = pack_of_documents([[1, 2, 3, 4, 5, 6]] * 4, n_vocab=10, pad_id=0, directory=tmp_path / "p")
    tokens = np.load(pack / "tokens.npy", mmap_mode="r+")
    tokens[7] = 60000  # a flipped byte
    tokens.flush()
    with pytest.raises(IntegrityError, match=r"tokens\.npy: SHA-256 differs"):  # the first open verifies
        PackedBatches(pack, length=4, global_batch=6, shuffle=False)
    unverified = Pack(pack, verify=False)  # and if it changed after that, the batch itself refuses it
    with pytest.raises(IntegrityError, match=r"p: id 60000 outside the vocabulary \(n_vocab 10\)"):
        PackedBatches(unverified, length=4, global_batch=6, shuffle=False).batch(0)


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_evaluation_targets_every_validation_id_once_across_ranks(corpus: tokpack.TokenizedCorpus, world_size: int) -> None:
    ranks = [EvalBatches(corpus.tokens_dir, length=40, batch_size=3, rank=r, world_size=world_size)
             for r in range(world_size)]
    assert len({len(rank) for rank in ranks}) == 1  # every rank the same number of batches
    labels = np.concatenate([b["labels"] for rank in ranks for b in rank])
    lo, hi = open_tokens(corpus.tokens_dir).meta.ranges["validation"].tokens
    tokens = np.asarray(open_tokens(corpus.tokens_dir).tokens)
    real = labels[labels != ranks[0].ignore_index]
    assert len(real) == hi - lo - 1
    assert np.array_equal(np.bincount(real, minlength=600), np.bincount(tokens[lo + 1 : hi], minlength=600))
    # in order: rank r's rows of step k are rows (k*W + r)*B ..., so interleaving ranks restores the stream
    ordered = np.concatenate([ranks[r].batch(k)["labels"] for k in range(len(ranks[0])) for r in range(world_size)])
    assert np.array_equal(ordered[ordered != ranks[0].ignore_index], tokens[lo + 1 : hi])


def test_evaluation_batches_carry_the_document_boundaries_on_request() -> None:
    # documents [1 2 3] [4 5 6 7 8] [9 10]: validation is the last two; rows of 4 inputs
    pack = pack_of_documents([[1, 2, 3], [4, 5, 6, 7, 8], [9, 10]], n_vocab=11, pad_id=0, train_documents=1)
    plain = EvalBatches(pack, length=4, batch_size=2)
    full = EvalBatches(pack, length=4, batch_size=2, position_ids=True, cu_seqlens=True, document_ids=True)
    assert set(plain.batch(0)) == {"input_ids", "labels"}
    batch = full.batch(0)
    assert batch["input_ids"].tolist() == [[4, 5, 6, 7], [8, 9, 10, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3], [0, 0, 1, 0]]
    assert batch["document_ids"].tolist() == [[0, 0, 0, 0], [0, 1, 1, 2]]
    assert batch["cu_seqlens"].tolist() == [0, 4, 5, 7, 8] and batch["max_seqlen"] == 4
    assert np.array_equal(batch["labels"], plain.batch(0)["labels"])


def test_pickled_batches_send_the_path_and_keep_their_step(corpus: tokpack.TokenizedCorpus) -> None:
    batches = PackedBatches(corpus.tokens_dir, length=32, global_batch=4, seed=7)
    batches.step = 11
    payload = pickle.dumps(batches)
    assert len(payload) < 20_000
    again = pickle.loads(payload)
    assert again.step == 11 and np.array_equal(again.global_rows(11), batches.global_rows(11))



class _PickledWithKeywords:
    """A PackedBatches pickled with its keyword arguments (``"arguments"``) in place of its
    settings record."""

    def __init__(self, data: Path, arguments: dict[str, object], state: dict[str, object]) -> None:
        self.data, self.arguments, self.state = data, arguments, state

    def __reduce__(self) -> tuple[object, ...]:
        return object.__new__, (PackedBatches,), {"data": self.data, "arguments": self.arguments, "state": self.state}


def test_a_pickle_holding_keyword_arguments_loads_at_its_step(corpus: tokpack.TokenizedCorpus) -> None:
    batches = PackedBatches(corpus.tokens_dir, layout="documents", length=32, global_batch=4, seed=7)
    batches.step = 5
    arguments = {"layout": "documents", "length": 32, "global_batch": 4, "seed": 7, "rank": 0, "world_size": 1,
                 "micro_batches": 1, "split": "train", "dtype": "int64", "position_ids": False,
                 "cu_seqlens": False, "document_ids": False, "shuffle": True, "layout_options": None}
    payload = pickle.dumps(_PickledWithKeywords(corpus.tokens_dir, arguments, batches.state_dict()))
    again = pickle.loads(payload)
    assert isinstance(again, PackedBatches) and again.settings == batches.settings
    assert again.step == 5 and np.array_equal(again.global_rows(5), batches.global_rows(5))

def test_a_mixture_resumes_from_its_state_on_another_world_size(tmp_path: Path) -> None:
    a, b, c = two_packs(tmp_path)
    def mixture() -> Mixture:
        return Mixture([(a, 3), (b, 1), (c, 1)], seed=4, stages=[(0, [3, 1, 1]), (6, [1, 1, 3])])
    whole = PackedBatches(mixture(), length=8, global_batch=6, layout="bestfit", layout_options={"cache": False})
    expected = [whole.global_rows(step) for step in range(12)]
    ranks = [PackedBatches(mixture(), length=8, global_batch=6, layout="bestfit", rank=r, world_size=2,
                           layout_options={"cache": False}) for r in range(2)]
    for rank in ranks:
        rank.step = 7
    state = ranks[1].state_dict()
    assert [part["rows"] for part in state["parts"]] == [r["rows"] for r in whole.repeats(7)]
    resumed = [PackedBatches(mixture(), length=8, global_batch=6, layout="bestfit", rank=r, world_size=3,
                             layout_options={"cache": False}) for r in range(3)]
    for rank in resumed:
        rank.load_state_dict(state)
    for step in range(7, 12):
        got = np.concatenate([rank.batch(step)["input_ids"] for rank in resumed])
        assert np.array_equal(got, expected[step][:, :-1].astype(np.int64))
    with pytest.raises(InputError, match="mixture"):
        PackedBatches(Mixture([(a, 1), (b, 1), (c, 1)]), length=8, global_batch=6, layout="bestfit",
                      layout_options={"cache": False}).load_state_dict(state)


def test_a_datatrove_folder_serves_with_labels_ignored_past_its_end(corpus: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    from tokpack.store import DatatroveFolder

    pack = open_tokens(corpus.tokens_dir)
    documents = [np.asarray(pack.document(i)) for i in range(40)]
    folder = tmp_path / "datatrove"
    folder.mkdir()
    (folder / "000_00000.ds").write_bytes(np.concatenate(documents).astype("<u2").tobytes())  # datatrove's format
    (folder / "000_00000.ds.index").write_bytes(np.cumsum([len(d) for d in documents]).astype("<u8").tobytes())
    source = DatatroveFolder(folder, tokenizer=corpus.vocabulary_path)
    for layout in ("stream", "bestfit"):
        batches = PackedBatches(source, layout=layout, length=64, global_batch=4, shuffle=False, document_ids=True,
                                layout_options={"cache": False} if layout == "bestfit" else None)
        assert batches.ignore_index == -100  # no padding id of its own: PyTorch's default
        n_rows = batches.layouts[0].n_rows
        labels = np.concatenate([batches.batch(step)["labels"] for step in range(-(-n_rows // 4))])[:n_rows]
        stream = np.concatenate(documents)
        real = labels[labels != -100]
        if layout == "stream":
            assert np.array_equal(real, stream[1:])
        else:
            assert len(real) == len(stream) - n_rows  # every id once, all but each row's first as a label


@pytest.mark.parametrize("layout", LAYOUT_NAMES)
def test_a_sharded_dataset_serves_what_its_merged_pack_serves(corpus: tokpack.TokenizedCorpus, tmp_path: Path,
                                                              layout: str) -> None:
    from tokpack.engines import prepare_sharded
    from tokpack.store import merge_dataset

    dataset = prepare_sharded(tokpack.sample_corpus(), tmp_path / "dataset", vocab=corpus.vocabulary_path, shards=3,
                              document_bytes=1024, processes=1)
    merge_dataset(dataset, tmp_path / "merged")
    options = {"layout": layout, "length": 48, "global_batch": 6, "seed": 8, "document_ids": True,
               "layout_options": {"cache": False} if layout == "bestfit" else None}
    sharded, merged = PackedBatches(dataset.path, **options), PackedBatches(tmp_path / "merged", **options)
    for step in (0, 1, 200):  # rows cross shard boundaries somewhere in these
        a, b = sharded.batch(step), merged.batch(step)
        assert all(np.array_equal(a[key], b[key]) for key in a)
    # the same ids: the same checksums, so the state carries over (the steps served skipped 2 to 199: the run says where it is)
    merged.load_state_dict(sharded.state_dict(step=201))


def test_the_seed_readers_refuse_an_id_outside_the_vocabulary_too(tmp_path: Path) -> None:
    from tokpack.serve import TokenBatches, Windows

    pack = pack_of_documents([[1, 2, 3, 4, 5, 6]] * 4, n_vocab=10, pad_id=0, directory=tmp_path / "p")
    batches = TokenBatches(pack, batch=2, length=4)  # verified on open; altered below, while open
    tokens = np.load(pack / "tokens.npy", mmap_mode="r+")
    tokens[2] = 999
    tokens.flush()
    with pytest.raises(IntegrityError, match="id 999 outside the vocabulary"):
        batches.ids(0)
    with pytest.raises(IntegrityError, match="id 999 outside the vocabulary"):
        Windows(Pack(pack, verify=False), block=4).window_batch([0, 1])  # opened by path, the first open refuses it


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_boundary_arrays_agree_with_each_other(data: st.DataObject) -> None:
    from tokpack.serve.assembly import assemble

    rows, width = data.draw(st.integers(1, 5)), data.draw(st.integers(2, 12))
    starts = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=width, max_size=width),
                                         min_size=rows, max_size=rows)))
    ids = np.arange(rows * width).reshape(rows, width) % 7
    batch = assemble(ids, starts, dtype=np.dtype(np.int32), position_ids=True, cu_seqlens=True, document_ids=True)
    length = width - 1
    bounds = batch["cu_seqlens"]
    assert bounds[0] == 0 and bounds[-1] == rows * length and (np.diff(bounds) > 0).all()
    flat_documents = (batch["document_ids"] + np.arange(rows)[:, None] * (length + 1)).ravel()
    for first, end in itertools.pairwise(bounds.tolist()):  # each cu_seqlens segment: one document, positions from 0
        assert len(set(flat_documents[first:end].tolist())) == 1
        assert batch["position_ids"].ravel()[first:end].tolist() == list(range(end - first))
    assert batch["max_seqlen"] == int(np.diff(bounds).max())
    assert batch["position_ids"].dtype == np.int32 and batch["cu_seqlens"].dtype == np.int32
