"""Resume under change: the global batch, the mixture and the world size may change at a resume (or
on a schedule given up front), and every part still serves each row of an epoch exactly once.

The packs are positional: id ``offset + i`` sits at position ``i``, so a served row's first id says
which row of which part it is.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import tokpack
from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.serve import Mixture, PackedBatches
from tokpack.serve.history import History, Segment, batch_ramp
from tokpack.serve.memory import pack_of_documents

FIXTURES = Path(__file__).parents[1] / "fixtures"
LENGTH = 4
N_VOCAB = 30_000
OFFSETS = {"a": 1, "b": 10_001, "c": 20_001}


def positional(folder: Path, name: str, n_ids: int, *, document: int = 37, n_vocab: int = N_VOCAB) -> Path:
    """A pack whose id at position ``i`` is ``OFFSETS[name] + i``, in documents of ``document`` ids."""
    ids = np.arange(OFFSETS[name], OFFSETS[name] + n_ids)
    documents = [ids[i : i + document].tolist() for i in range(0, n_ids, document)]
    return pack_of_documents(documents, n_vocab=n_vocab, pad_id=0, directory=folder / name)


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("positional")
    # a: 251 stream rows of 4 inputs; b: 51 rows (it wraps epochs often); c: 101 rows
    return {"a": positional(folder, "a", 1001), "b": positional(folder, "b", 201), "c": positional(folder, "c", 401)}


def row_ids(first_ids: np.ndarray) -> list[tuple[str, int]]:
    """(part, stream row) of each served row, from its first id."""
    out = []
    for first in first_ids.tolist():
        name = max((n for n, o in OFFSETS.items() if first >= o), key=lambda n: OFFSETS[n])
        position = first - OFFSETS[name]
        assert position % LENGTH == 0, first
        out.append((name, position // LENGTH))
    return out


def ranks(make: Callable[..., PackedBatches], world_size: int, state: dict | None = None) -> list[PackedBatches]:
    loaders = [make(rank=r, world_size=world_size) for r in range(world_size)]
    if state is not None:
        for loader in loaders:
            loader.load_state_dict(pickle.loads(pickle.dumps(state)))  # what a checkpoint holds
    return loaders


def serve(loaders: list[PackedBatches], steps: int) -> list[np.ndarray]:
    """Each step's global first ids, the ranks' batches concatenated; the loaders advance."""
    served = []
    for _ in range(steps):
        iterators = [iter(loader) for loader in loaders]
        served.append(np.concatenate([next(it)["input_ids"][:, 0] for it in iterators]))
    return served


def epochs_of(rows: list[int], n_rows: int) -> list[list[int]]:
    return [rows[i : i + n_rows] for i in range(0, len(rows), n_rows)]


def assert_every_row_once_per_epoch(rows: list[int], n_rows: int) -> None:
    for index, epoch in enumerate(epochs_of(rows, n_rows)):
        assert len(set(epoch)) == len(epoch), f"a row served twice in epoch {index}"
        if len(epoch) == n_rows:
            assert sorted(epoch) == list(range(n_rows)), f"epoch {index} skipped rows"


def test_global_batch_8_16_12_mid_epoch_with_the_world_size_changed_serves_every_row_once(packs: dict[str, Path]) -> None:
    def make(global_batch: int | list[tuple[int, int]]) -> Callable[..., PackedBatches]:
        return lambda **ranks_: PackedBatches(packs["a"], length=LENGTH, global_batch=global_batch, seed=3, **ranks_)

    n_rows = make(8)().layouts[0].n_rows
    assert n_rows == 250
    first = ranks(make(8), 2)
    served = serve(first, 5)  # 40 rows, on 2 ranks
    state = first[1].state_dict()
    second = ranks(make(16), 4, state)  # 16 rows a step on 4 ranks, from step 5
    served += serve(second, 6)  # 96 rows
    state = second[3].state_dict()
    assert state["history"][-1] == {"step": 5, "global_batch": 16, "weights": [1.0], "anchor": [40]}
    third = ranks(make(12), 3, state)  # 12 rows a step on 3 ranks, from step 11
    served += serve(third, 20)  # 240 rows: the first epoch ends mid-step, the second begins
    assert [len(step) for step in served] == [8] * 5 + [16] * 6 + [12] * 20
    rows = [row for _, row in row_ids(np.concatenate(served))]
    assert len(rows) > n_rows
    assert_every_row_once_per_epoch(rows, n_rows)
    assert third[0].repeats()[0] | {"tokens": 0} == {"name": "a", "rows": 376, "skipped_rows": 0, "rows_per_epoch": 250,
                                                     "epochs": 1, "tokens": 0, "weight": 1.0}
    # a fresh loader given the same history up front serves the same steps, on any world size
    planned = make([(0, 8), (5, 16), (11, 12)])()
    for step, expected in enumerate(served):
        assert np.array_equal(planned.global_rows(step)[:, 0], expected), step
    schedule = third[2].data_schedule()
    assert [(s["step"], s["global_batch"], s["anchor"]) for s in schedule["history"]] == [
        (0, 8, None), (5, 16, [40]), (11, 12, [136])]
    assert schedule["global_batch"] == 12 and schedule["step"] == 31


def test_a_global_batch_schedule_given_up_front_serves_every_row_once(packs: dict[str, Path]) -> None:
    schedule = [(0, 8), (3, 16), (7, 12), (30, 20)]
    whole = PackedBatches(packs["a"], length=LENGTH, global_batch=schedule, seed=1)
    loaders = [PackedBatches(packs["a"], length=LENGTH, global_batch=schedule, seed=1, rank=r, world_size=4)
               for r in range(4)]
    served = serve(loaders, 40)
    assert [len(s) for s in served] == [8] * 3 + [16] * 4 + [12] * 23 + [20] * 10
    assert all(np.array_equal(whole.global_rows(k)[:, 0], s) for k, s in enumerate(served))
    assert [whole.global_batch_at(k) for k in (0, 2, 3, 6, 7, 29, 30, 99)] == [8, 8, 16, 16, 12, 12, 20, 20]
    assert_every_row_once_per_epoch([row for _, row in row_ids(np.concatenate(served))], 250)
    with pytest.raises(InputError, match="world_size 4 does not divide global_batch 10 \\(from step 3\\)"):
        PackedBatches(packs["a"], length=LENGTH, global_batch=[(0, 8), (3, 10)], world_size=4)
    with pytest.raises(InputError, match="must start at step 0"):
        PackedBatches(packs["a"], length=LENGTH, global_batch=[(1, 8)])


def megatron_batch(consumed: int, start: int, increment: int, ramp_samples: int, final: int) -> int:
    """Megatron-LM's RampupBatchsizeNumMicroBatches.update, as written there."""
    if consumed > ramp_samples:
        return final
    per_increment = ramp_samples / ((final - start) // increment)
    return start + int(consumed / per_increment) * increment


@pytest.mark.parametrize("ramp", [(4, 4, 24, 12), (32, 32, 10_000, 256), (16, 8, 1000, 64)])
def test_batch_ramp_is_megatrons_rampup_batch_size(packs: dict[str, Path], ramp: tuple[int, int, int, int]) -> None:
    plan = batch_ramp(*ramp)
    batches = PackedBatches(packs["a"], length=LENGTH, global_batch=plan)
    consumed = 0
    for step in range(plan[-1][0] + 5):
        assert batches.global_batch_at(step) == megatron_batch(consumed, *ramp), step
        consumed += batches.global_batch_at(step)


def assert_balanced_at_every_step(served: list[np.ndarray], n_rows: dict[str, int]) -> None:
    """After every step, each part has served each of its rows ``floor(t / n)`` or ``ceil(t / n)``
    times (``t`` rows served, ``n`` a epoch): no row twice in an epoch, none skipped. (Inside
    a step a mixture's rows are interleaved, so an epoch that ends mid-step ends somewhere in it.)"""
    counts = {name: np.zeros(n, dtype=np.int64) for name, n in n_rows.items()}
    for index, step in enumerate(served):
        for name, row in row_ids(step):
            counts[name][row] += 1
        for name, count in counts.items():
            assert count.max() - count.min() <= 1, (name, index)


def mixture_parts(served: list[np.ndarray]) -> dict[str, list[int]]:
    by_part: dict[str, list[int]] = {}
    for name, row in row_ids(np.concatenate(served)):
        by_part.setdefault(name, []).append(row)
    return by_part


def test_weights_changed_at_resume_take_effect_from_that_step(packs: dict[str, Path]) -> None:
    def make(weights: tuple[float, float]) -> Callable[..., PackedBatches]:
        return lambda **r: PackedBatches(Mixture([(packs["a"], weights[0]), (packs["b"], weights[1])], seed=2),
                                         length=LENGTH, global_batch=10, seed=4, **r)

    first = ranks(make((0.5, 0.5)), 2)
    served = serve(first, 10)
    second = ranks(make((0.8, 0.2)), 5, first[0].state_dict())
    served += serve(second, 40)
    since = [[name for name, _ in row_ids(step)] for step in served[10:]]
    for k in range(1, 41):  # each part's rows since step 10 within one row of its exact share
        a = sum(step.count("a") for step in since[:k])
        assert abs(a - 0.8 * 10 * k) <= 1 and abs((10 * k - a) - 0.2 * 10 * k) <= 1, k
    assert [name for name, _ in row_ids(np.concatenate(served[:10]))].count("a") == 50
    by_part = mixture_parts(served)
    assert_balanced_at_every_step(served, {"a": 250, "b": 50})
    assert len(by_part["b"]) > 100  # b went through its permutation more than twice
    # a fresh loader with the same history (loaded from the state) agrees step by step
    fresh = make((0.8, 0.2))()
    fresh.load_state_dict(second[3].state_dict())
    assert [s["weights"] for s in fresh.data_schedule()["history"]] == [[0.5, 0.5], [0.8, 0.2]]
    assert all(np.array_equal(fresh.global_rows(k)[:, 0], served[k]) for k in range(10, 50))
    assert [r["rows"] for r in fresh.repeats(50)] == [by_part["a"].__len__(), len(by_part["b"])]


def test_stages_given_up_front_still_hold_and_a_same_settings_resume_changes_nothing(packs: dict[str, Path]) -> None:
    def make(**r: int) -> PackedBatches:
        return PackedBatches(Mixture([(packs["a"], 1), (packs["b"], 1)], stages=[(0, [1, 1]), (6, [3, 1])]),
                             length=LENGTH, global_batch=[(0, 6), (4, 12)], **r)

    whole = make()
    rank = make(rank=1, world_size=2)
    rank.step = 5
    state = rank.state_dict()
    assert all(segment["anchor"] is None for segment in state["history"])
    resumed = make(rank=0, world_size=3)
    resumed.load_state_dict(state)
    assert resumed.data_schedule()["history"] == whole.data_schedule()["history"]
    for step in range(5, 20):
        assert np.array_equal(resumed.global_rows(step), whole.global_rows(step))
    a_rows = [r["rows"] for r in whole.repeats(20)]
    exact = [6 * 0.5 * 4 + 12 * 0.5 * 2 + 12 * 0.75 * 14, 6 * 0.5 * 4 + 12 * 0.5 * 2 + 12 * 0.25 * 14]
    assert all(abs(r - e) <= 1 for r, e in zip(a_rows, exact))


def test_a_part_added_starts_its_first_epoch_and_one_removed_continues_when_added_back(packs: dict[str, Path]) -> None:
    def single(**r: int) -> PackedBatches:
        return PackedBatches(packs["a"], length=LENGTH, global_batch=8, seed=1, **r)

    def mixture(*names: str, **r: int) -> PackedBatches:
        return PackedBatches(Mixture([(packs[n], 1) for n in names]), length=LENGTH, global_batch=8, seed=1, **r)

    first = ranks(single, 2)
    served = serve(first, 4)  # a alone
    second = ranks(lambda **r: mixture("a", "b", **r), 2, first[0].state_dict())
    served += serve(second, 10)  # b added: half the rows
    added = mixture_parts(served[4:])["b"]
    fresh_b = PackedBatches(Mixture([(packs["c"], 1), (packs["b"], 1)]), length=LENGTH, global_batch=2, seed=1)
    fresh = [row for name, row in row_ids(np.concatenate([fresh_b.global_rows(k)[:, 0] for k in range(80)])) if name == "b"]
    assert len(added) == 40 and set(added) == set(fresh[:40])  # the head of b's first epoch (b is part 1 in both)
    third = ranks(lambda **r: mixture("a", "c", **r), 4, second[1].state_dict())  # b removed, c added
    served += serve(third, 10)
    repeats = third[0].repeats()
    # in the order the parts first appeared, as the state's parts and history
    assert [(r["name"], r.get("removed", False)) for r in repeats] == [("a", False), ("b", True), ("c", False)]
    assert repeats[1]["rows"] == 40 and repeats[1]["weight"] == 0.0
    assert "b" not in mixture_parts(served[14:])
    with pytest.raises(InputError, match="step 13 served part 'b', which this loader does not serve"):
        third[0].global_rows(13)
    fourth = ranks(lambda **r: mixture("a", "b", "c", **r), 1, third[2].state_dict())  # b back
    served += serve(fourth, 30)
    by_part = mixture_parts(served)
    assert_balanced_at_every_step(served, {"a": 250, "b": 50, "c": 100})  # b continued where it stopped
    assert by_part["b"][40:50] != by_part["b"][:10] and len(by_part["b"]) > 50
    names = [p["name"] for p in fourth[0].state_dict()["parts"]]
    assert names == ["a", "b", "c"]


def test_every_change_that_stays_refused_names_what_differs(packs: dict[str, Path], tmp_path: Path) -> None:
    def make(data: object = None, **options: object) -> PackedBatches:
        settings = {"length": LENGTH, "global_batch": 8, "seed": 1, **options}
        return PackedBatches(data or Mixture([(packs["a"], 1), (packs["b"], 1)], names=["web", "code"]),  # type: ignore[arg-type]
                             **settings)  # type: ignore[arg-type]

    saved = make()
    saved.step = 3
    state = saved.state_dict()
    other_code = positional(tmp_path, "c", 201)  # other ids under the name "code"
    with pytest.raises(IntegrityError, match="other data for part 'code'"):
        make(Mixture([(packs["a"], 1), (other_code, 1)], names=["web", "code"])).load_state_dict(state)
    other_vocabulary = positional(tmp_path / "v", "b", 201, n_vocab=N_VOCAB + 1)
    with pytest.raises(VocabularyMismatch, match=f"n_vocab {N_VOCAB}\\).*n_vocab {N_VOCAB + 1}"):
        make(Mixture([(packs["a"], 1), (other_vocabulary, 1)], names=["web", "code"])).load_state_dict(state)
    with pytest.raises(InputError, match="state has layout 'stream', this loader 'documents'"):
        make(layout="documents").load_state_dict(state)
    with pytest.raises(InputError, match="state has length 4, this loader 5"):
        make(length=5).load_state_dict(state)
    with pytest.raises(InputError, match="state has shuffle True, this loader False"):
        make(shuffle=False).load_state_dict(state)
    with pytest.raises(InputError, match="seed 1, this loader 2"):
        make(seed=2).load_state_dict(state)
    with pytest.raises(InputError, match="mixture seed 0, this loader 7"):
        make(Mixture([(packs["a"], 1), (packs["b"], 1)], names=["web", "code"], seed=7)).load_state_dict(state)
    with pytest.raises(IntegrityError, match="saved over other data"):  # one source for another, whatever the names
        PackedBatches(packs["b"], length=LENGTH, global_batch=8, seed=1).load_state_dict(
            PackedBatches(packs["a"], length=LENGTH, global_batch=8, seed=1).state_dict())
    with pytest.raises(InputError, match="not a tokpack loader state"):
        make().load_state_dict({**state, "history": [{**state["history"][0], "weights": [1.0]}]})
    make(global_batch=24).load_state_dict(state)  # what may change does not raise
    eight = make(global_batch=32, world_size=8, micro_batches=2)
    eight.load_state_dict(state)
    assert len(eight.batch(3)["input_ids"]) == 4  # from the saved step on: 32 rows, 4 a rank
    with pytest.raises(InputError, match="step 2's global batch of 8 rows does not split into 8 ranks of 2 micro"):
        eight.batch(2)  # a step served before the resume, at 8 rows
    make(Mixture([(packs["a"], 9), (packs["b"], 1)], names=["web", "code"])).load_state_dict(state)


def test_a_state_of_loader_schema_v2_loads_exactly(tmp_path: Path) -> None:
    """tests/fixtures/loader_state_v2.json: states of the loader schema ``tokpack.loader.v2``,
    saved at step 7, and the rows it served at steps 7 to 11, over two packs made here again."""
    a = pack_of_documents([list(range(s, s + 40)) for s in range(1, 400, 40)], n_vocab=2000, pad_id=0,
                          directory=tmp_path / "a")
    b = pack_of_documents([list(range(1000 + s, 1025 + s)) for s in range(0, 300, 25)], n_vocab=2000, pad_id=0,
                          directory=tmp_path / "b")
    recorded = json.loads((FIXTURES / "loader_state_v2.json").read_text())
    data = {"single": lambda: a, "mixture": lambda: Mixture([(a, 3), (b, 1)], seed=4, stages=[(0, [3, 1]), (6, [1, 1])])}
    for name, make in data.items():
        batches = PackedBatches(make(), length=8, global_batch=6, seed=5, layout="documents")
        assert recorded[name]["state"]["schema"] == "tokpack.loader.v2"
        batches.load_state_dict(recorded[name]["state"])
        assert batches.step == 7
        for step, rows in zip(range(7, 12), recorded[name]["rows"]):
            assert batches.global_rows(step).tolist() == rows, (name, step)


def test_tokens_seen_count_the_labels_served_and_pickling_keeps_the_history(packs: dict[str, Path]) -> None:
    batches = PackedBatches(packs["a"], layout="documents", length=LENGTH, global_batch=6, seed=2)
    changed = PackedBatches(packs["a"], layout="documents", length=LENGTH, global_batch=[(0, 12)], seed=2)
    for _ in range(5):
        next(iter(batches))
    changed.load_state_dict(batches.state_dict())
    labels = [changed.batch(k)["labels"] for k in range(5, 40)]
    changed.step = 40
    again = pickle.loads(pickle.dumps(changed))
    assert again.data_schedule()["history"] == changed.data_schedule()["history"]
    assert np.array_equal(again.global_rows(30), changed.global_rows(30))
    first = sum(int((batches.batch(k)["labels"] != batches.ignore_index).sum()) for k in range(5))
    served = first + sum(int((label != changed.ignore_index).sum()) for label in labels)
    stats = changed.stats[0]
    assert stats["tokens"] == served and stats["rows"] == 30 + 35 * 12
    assert stats["epochs"] == (30 + 35 * 12) // changed.layouts[0].n_rows > 0


def test_a_history_keeps_each_part_within_one_row_across_anchors() -> None:
    history = History([Segment(step=0, global_batch=7, weights=[0.3, 0.7, 0.0]),
                       Segment(step=50, global_batch=13, weights=[0.9, 0.0, 0.1], anchor=[105, 245, 0]),
                       Segment(step=90, global_batch=5, weights=[0.2, 0.5, 0.3])])
    totals = [0, 0, 0]
    for step in range(200):
        assert history.before(step) == totals
        counts = history.counts(step, totals)
        assert sum(counts) == history.global_batch(step)
        totals = [t + c for t, c in zip(totals, counts)]
        exact = history.exact(step + 1)
        assert max(abs(t - e) for t, e in zip(totals, exact)) <= 1 + 1e-9, step
        if 50 <= step < 90:
            assert counts[1] == 0  # weight 0: no row


# -- examples/train_gpt.py: a real run changes its global batch and its mixture at a resume -------

def _example_log(path: Path) -> list[tuple[int, str, int]]:
    rows = [line.split() for line in path.read_text().splitlines()]
    assert all(len(row) == 4 for row in rows), rows  # STEP SHA256 LOSS ROWS
    return [(int(step), digest, int(count)) for step, digest, _, count in rows]


def _digest(rows: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(rows[:, :-1], dtype="<i8").tobytes()).hexdigest()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tokpack.TokenizedCorpus:
    return tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path_factory.mktemp("cache"), vocab_size=512,
                           document_bytes=4096)


EXAMPLE_MODEL = ["--length", "32", "--seed", "3", "--layers", "1", "--width", "32", "--heads", "2"]


def test_train_gpt_resumes_with_a_mixture_and_refuses_other_data_under_a_saved_name(
        corpus: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")
    import torch
    from test_train_gpt import run

    other = tokpack.prepare(tokpack.sample_corpus(), cache_dir=tmp_path / "other", vocab=corpus.vocabulary_path,
                            document_bytes=2048)
    data = ["--data", str(corpus.tokens_dir), *EXAMPLE_MODEL, "--global-batch", "8", "--log-batches",
            str(tmp_path / "run.log")]
    saved = run([*data, "--steps", "4", "--save", str(tmp_path / "run.pt")], cache=tmp_path)
    assert saved.returncode == 0, saved.stderr[-3000:]
    mixture = ["--mixture", f"{corpus.tokens_dir}=0.75", "--mixture", f"{other.tokens_dir}=0.25"]
    resumed = run([*data, *mixture, "--steps", "8", "--resume", str(tmp_path / "run.pt")], cache=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    logged = _example_log(tmp_path / "run.log")
    assert [step for step, _, _ in logged] == list(range(8))
    fresh = PackedBatches(Mixture([(corpus.tokens_dir, 0.75), (other.tokens_dir, 0.25)]), length=32, global_batch=8,
                          seed=3)
    fresh.load_state_dict(torch.load(tmp_path / "run.pt", weights_only=False)["loader"])
    assert [_digest(fresh.global_rows(k)) for k in range(4, 8)] == [digest for _, digest, _ in logged[4:]]
    assert [r["rows"] for r in fresh.repeats(8)] == [32 + 24, 8]  # 3/4 and 1/4 of the 32 rows since step 4
    # the saved part's name given to other ids is refused, naming the part
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    shutil.copytree(other.tokens_dir, renamed / Path(corpus.tokens_dir).name)
    refused = run([*data, "--mixture", f"{renamed / Path(corpus.tokens_dir).name}=1", "--steps", "8", "--resume",
                   str(tmp_path / "run.pt")], cache=tmp_path)
    assert refused.returncode == 2, refused.stderr[-3000:]
    message = refused.stderr.strip()
    assert "\n" not in message and f"other data for part {Path(corpus.tokens_dir).name!r}" in message, message


# -- opening big data: bestfit's packing is one compiled loop ---------------------------------------

@pytest.mark.parametrize(("width", "lookahead"), [(33, 5), (64, 7), (65, 64), (97, 3), (2049, 1024)])
def test_compiled_best_fit_packs_as_the_plain_sorted_buffer_at_any_width(width: int, lookahead: int) -> None:
    from test_serve_layouts import _best_fit_reference

    from tokpack.serve.layouts import _best_fit

    rng = np.random.default_rng(width)
    lengths = np.minimum(width, np.maximum(1, rng.lognormal(np.log(width / 4), 1.2, size=3000).astype(np.int64)))
    placed, row_ptr, moved = _best_fit(lengths, width, lookahead)
    assert (placed.tolist(), row_ptr.tolist(), moved) == _best_fit_reference(lengths.tolist(), width, lookahead)


def test_the_documents_layout_finds_each_row_from_its_document(packs: dict[str, Path]) -> None:
    from tokpack.serve import make_layout
    from tokpack.store import open_tokens

    pack = pack_of_documents([[1] * n for n in (1, 4, 5, 9, 3, 12, 1)], n_vocab=4, pad_id=0)
    layout = make_layout("documents", pack, length=4)
    starts = open_tokens(pack).starts.tolist()
    expected = [s + j * 4 for s, n in zip(starts, (1, 4, 5, 9, 3, 12, 1)) for j in range(max(1, -(-n // 4)))]
    assert layout.origins(np.arange(layout.n_rows)).tolist() == expected
    assert layout._first_row.nbytes + layout._starts.nbytes == 16 * 7  # the index: 16 bytes a document
