"""Resume under change, attacked: random sequences of changes (global batch, weights, parts, world
size) keep every row of an epoch once; a fresh loader given the history replays every step; a
forged or refused state leaves the loader as it was.

The packs are positional (id ``offset + i`` at position ``i``), as in ``test_resume_change.py``.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokpack.errors import InputError
from tokpack.serve import Mixture, PackedBatches
from tokpack.serve.history import History, Segment
from tokpack.serve.memory import pack_of_documents

LENGTH = 4
N_VOCAB = 30_000
OFFSETS = {"a": 1, "b": 10_001, "c": 20_001}
SIZES = {"a": 401, "b": 121, "c": 201}  # stream rows: 100, 30, 50


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("positional")
    out = {}
    for name, n_ids in SIZES.items():
        ids = np.arange(OFFSETS[name], OFFSETS[name] + n_ids)
        documents = [ids[i : i + 23].tolist() for i in range(0, n_ids, 23)]
        out[name] = pack_of_documents(documents, n_vocab=N_VOCAB, pad_id=0, directory=folder / name)
    return out


def where(first_ids: np.ndarray) -> list[tuple[str, int]]:
    """(part, position of the row's first id) of each row."""
    out = []
    for first in first_ids.tolist():
        name = max((n for n, o in OFFSETS.items() if first >= o), key=lambda n: OFFSETS[n])
        out.append((name, first - OFFSETS[name]))
    return out


def loaders(packs: dict[str, Path], weights: dict[str, float], global_batch: int, world_size: int,
            layout: str = "stream") -> list[PackedBatches]:
    mixture = Mixture([(packs[n], w) for n, w in weights.items()], seed=7, names=list(weights))
    return [PackedBatches(mixture, layout=layout, length=LENGTH, global_batch=global_batch, seed=1, rank=r,
                          world_size=world_size) for r in range(world_size)]


# one change: steps to serve, the global batch per rank, the world size, and weights of a, b, c
# (a part of weight 0 is left out of the mixture: removed, or not yet added)
change = st.tuples(st.integers(1, 6), st.sampled_from([1, 2, 3, 5, 16, 40]), st.sampled_from([1, 2, 3]),
                   st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0]), min_size=3, max_size=3).filter(lambda w: sum(w) > 0))


def run(packs: dict[str, Path], changes: list[tuple[int, int, int, list[float]]],
        layout: str = "stream") -> tuple[list[np.ndarray], dict]:
    """Serve the changes one after the other, each resuming from the state the last saved (through
    pickle, as a checkpoint holds it); the global rows of every step, and the last state."""
    served: list[np.ndarray] = []
    state: dict | None = None
    for steps, per_rank, world_size, ws in changes:
        weights = {n: w for n, w in zip("abc", ws) if w > 0}
        ranks = loaders(packs, weights, per_rank * world_size, world_size, layout)
        for loader in ranks:
            if state is not None:
                loader.load_state_dict(pickle.loads(pickle.dumps(state)))
        for _ in range(steps):
            step = ranks[0].step
            served.append(np.concatenate([loader.batch(step)["input_ids"] for loader in ranks]))
            for loader in ranks:
                loader.step += 1
        state = ranks[-1].state_dict()
    assert state is not None
    return served, state


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(change, min_size=1, max_size=5))
def test_any_sequence_of_changes_serves_every_row_of_an_epoch_once_and_replays(
        packs: dict[str, Path], changes: list[tuple[int, int, int, list[float]]]) -> None:
    served, state = run(packs, changes)
    # a part's rows in a step are interleaved with the other parts' (a step may cross its
    # epoch): after every step, each row of a part was served its whole epochs, or one more time
    counts = {n: np.zeros(SIZES[n] // LENGTH, dtype=np.int64) for n in "abc"}
    for batch in served:
        for name, position in where(batch[:, 0]):
            assert position % LENGTH == 0
            counts[name][position // LENGTH] += 1
        for name, count in counts.items():
            epochs, extra = divmod(int(count.sum()), len(count))
            assert set(np.unique(count).tolist()) <= {epochs, epochs + 1}, f"part {name}: a row twice in an epoch"
            assert int((count == epochs + 1).sum()) == extra
    # a fresh loader over every part, given the last state, serves the same rows at every step
    fresh = loaders(packs, {"a": 1.0, "b": 1.0, "c": 1.0}, 8, 1)[0]
    fresh.load_state_dict(state)
    for step, expected in enumerate(served):
        assert np.array_equal(fresh.global_rows(step)[:, :LENGTH], expected), step
    assert {e["name"]: e["rows"] for e in fresh.repeats()} == {n: int(c.sum()) for n, c in counts.items()}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(change, min_size=1, max_size=4))
def test_documents_serves_every_id_of_an_epoch_at_least_once_under_changes(
        packs: dict[str, Path], changes: list[tuple[int, int, int, list[float]]]) -> None:
    served, state = run(packs, changes, layout="documents")
    per_epoch = {n: loaders(packs, {n: 1.0}, 1, 1, "documents")[0].layouts[0].n_rows for n in "abc"}
    fresh = loaders(packs, {"a": 1.0, "b": 1.0, "c": 1.0}, 8, 1, "documents")[0]
    fresh.load_state_dict(state)
    rows = {e["name"]: e["rows"] for e in fresh.repeats()}
    # a step may cross a part's epoch (its rows interleaved): the step where the first epoch
    # ends has served every id of the part at least once
    seen: dict[str, set[int]] = {n: set() for n in "abc"}
    count = {n: 0 for n in "abc"}
    for step, batch in enumerate(served):
        assert np.array_equal(fresh.global_rows(step)[:, :LENGTH], batch), step
        for row in fresh.global_rows(step):
            ids = row[row > 0]
            name = where(ids[:1])[0][0]
            seen[name].update((ids - OFFSETS[name]).tolist())
            count[name] += 1
        for name in "abc":
            if count[name] >= per_epoch[name]:
                assert seen[name] >= set(range(SIZES[name] - 1)), f"part {name}: an id not served in its first epoch"
                seen[name] = set()
                per_epoch[name] = 10**9  # checked once
    assert count == rows


def test_a_part_added_at_a_resume_leaves_the_steps_before_it_as_they_were_served(packs: dict[str, Path]) -> None:
    # steps 0-2 on one part and 2 ranks; at step 3 part b joins
    first = loaders(packs, {"a": 1.0}, 4, 2)
    before = [[loader.batch(step)["input_ids"] for loader in first] for step in range(3)]
    first[0].step = 3
    grown = loaders(packs, {"a": 1.0, "b": 1.0}, 4, 2)
    for loader in grown:
        loader.load_state_dict(first[0].state_dict())
    # rank r of the grown run, asked for a step before b joined, gives what rank r was served
    for step, batches in enumerate(before):
        for loader, batch in zip(grown, batches):
            assert np.array_equal(loader.batch(step)["input_ids"], batch), step
    later = loaders(packs, {"a": 1.0, "b": 1.0}, 4, 1)[0]
    later.load_state_dict(pickle.loads(pickle.dumps(grown[1].state_dict())))
    assert np.array_equal(later.global_rows(1), first[0].global_rows(1))
    assert np.array_equal(later.global_rows(5), grown[0].global_rows(5))


def test_a_refused_state_leaves_the_loader_as_it_was(packs: dict[str, Path]) -> None:
    loader = loaders(packs, {"a": 0.5, "b": 0.5}, 8, 1)[0]
    expected = [loader.global_rows(step) for step in range(4)]
    other = loaders(packs, {"a": 0.5, "c": 0.5}, 8, 1)[0]
    other.step = 4
    forged = other.state_dict()
    forged["history"][0]["weights"] = [0.5, -1.0]
    with pytest.raises(InputError, match="weight that is negative"):
        loader.load_state_dict(forged)
    forged = other.state_dict()
    forged["parts"][0]["rows"] += 5
    with pytest.raises(InputError, match="rows .* before step 4 do not"):
        loader.load_state_dict(forged)
    assert loader.step == 0 and [p["name"] for p in loader.state_dict()["parts"]] == ["a", "b"]
    assert all(np.array_equal(loader.global_rows(step), rows) for step, rows in enumerate(expected))


def test_a_state_that_names_a_part_twice_or_another_global_batch_is_refused(packs: dict[str, Path]) -> None:
    makers = [lambda: PackedBatches(packs["a"], length=LENGTH, global_batch=8, seed=1),
              lambda: loaders(packs, {"a": 1.0}, 8, 1)[0]]
    for make in makers:
        source = make()
        source.step = 5
        state = source.state_dict()
        twice = copy.deepcopy(state)
        twice["parts"].append({**state["parts"][0], "rows": 0})
        twice["history"][0]["weights"] = [1.0, 0.0]
        with pytest.raises(InputError, match="names part 'a' twice"):
            make().load_state_dict(twice)
        with pytest.raises(InputError, match="global_batch 999.*8 at its step 5"):
            make().load_state_dict({**state, "global_batch": 999})
        negative = copy.deepcopy(state)
        negative["parts"][0]["rows_per_epoch"] = -3
        with pytest.raises(InputError, match="not a tokpack loader state"):
            make().load_state_dict(negative)


def test_a_steps_counts_are_each_parts_deficit_against_its_exact_share() -> None:
    # the counts as the History docstring defines them, in numpy, over anchored and plain segments
    rng = np.random.default_rng(5)
    for _ in range(40):
        n = int(rng.integers(2, 5))
        segments, served = [], [0] * n
        step = 0
        for index in range(int(rng.integers(1, 4))):
            weights = [float(w) for w in rng.choice([0.0, 0.1, 1 / 3, 0.7, 2.0], n)]
            weights[int(rng.integers(n))] = 1.0
            anchor = list(served) if index and rng.random() < 0.5 else None
            segments.append(Segment(step=step, global_batch=int(rng.choice([1, 3, 8, 64])), weights=weights,
                                    anchor=anchor))
            history = History(segments)
            length = int(rng.integers(1, 60))
            for k in range(step, step + length):
                counts = history.counts(k, served)
                weights_now = history.weights(k)
                deficit = history.exact(k + 1) - np.asarray(served, dtype=np.float64)
                floor = [max(int(np.floor(d)), 0) if w > 0 else 0 for d, w in zip(deficit, weights_now)]
                assert sum(counts) == history.global_batch(k)
                assert all(c - f in (0, 1) or (f > 0 and c == f - 1) for c, f in zip(counts, floor))
                assert all(c == 0 for c, w in zip(counts, weights_now) if w == 0)
                served = [s + c for s, c in zip(served, counts)]
            assert history.before(step + length) == served
            step += length
