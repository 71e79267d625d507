"""Changes while a run trains: ``set_weights`` (by hand, or every N steps from per-part losses),
``skip`` and ``Mixture(max_epochs=...)``; each exact as a resume is, recorded in the state, and
still exact after a resume on another world size with another global batch.

The packs are positional: id ``offset + i`` sits at position ``i``, so a stream row's first id
names its part and row.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tokpack.errors import InputError
from tokpack.serve import Mixture, OnlineMixing, PackedBatches
from tokpack.serve.memory import pack_of_documents

LENGTH = 4
OFFSETS = {"a": 1, "b": 10_001, "c": 20_001, "t": 29_001}
N_ROWS = {"a": 250, "b": 50, "c": 100}


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("live")
    out = {}
    for name, n_ids in (("a", 1001), ("b", 201), ("c", 401)):
        ids = np.arange(OFFSETS[name], OFFSETS[name] + n_ids)
        out[name] = pack_of_documents([ids[i : i + 37].tolist() for i in range(0, n_ids, 37)], n_vocab=30_000,
                                      pad_id=0, directory=folder / name)
    return out


def named_rows(first_ids: np.ndarray) -> list[tuple[str, int]]:
    """(part, stream row) of each row, from its first id."""
    out = []
    for first in first_ids.tolist():
        name = max((n for n, o in OFFSETS.items() if first >= o), key=lambda n: OFFSETS[n])
        out.append((name, (first - OFFSETS[name]) // LENGTH))
    return out


def maker(packs: dict[str, Path], weights: dict[str, float], global_batch: int = 10,
          max_epochs: list[int | None] | None = None) -> Callable[..., PackedBatches]:
    def make(**ranks: int) -> PackedBatches:
        return PackedBatches(Mixture([(packs[n], w) for n, w in weights.items()], seed=2, max_epochs=max_epochs),
                             length=LENGTH, global_batch=global_batch, seed=4, **ranks)
    return make


def serve(loaders: list[PackedBatches], steps: int) -> list[np.ndarray]:
    """Each step's global first ids, the ranks' batches concatenated, by iterating every rank."""
    iterators = [iter(loader) for loader in loaders]
    return [np.concatenate([next(it)["input_ids"][:, 0] for it in iterators]) for _ in range(steps)]


def resumed(make: Callable[..., PackedBatches], world_size: int, state: dict) -> list[PackedBatches]:
    loaders = [make(rank=r, world_size=world_size) for r in range(world_size)]
    for loader in loaders:
        loader.load_state_dict(pickle.loads(pickle.dumps(state)))
    return loaders


def assert_every_row_once_per_epoch(served: list[np.ndarray], parts: dict[str, int] = N_ROWS) -> None:
    """After every step, each part has served each of its rows ``floor(t / n)`` or ``ceil(t / n)``
    times: none twice in an epoch, none left out (a step's rows are interleaved among the parts,
    so an epoch that ends inside a step ends anywhere in it)."""
    counts = {name: np.zeros(n, dtype=np.int64) for name, n in parts.items()}
    for index, step in enumerate(served):
        for name, row in named_rows(step):
            counts[name][row] += 1
        for name, count in counts.items():
            assert count.max() - count.min() <= 1, (name, index)


def test_set_weights_in_a_live_run_serves_what_a_resume_with_those_weights_serves(packs: dict[str, Path]) -> None:
    live = [maker(packs, {"a": 0.5, "b": 0.5})(rank=r, world_size=2) for r in range(2)]
    served = serve(live, 4)
    for loader in live:
        loader.set_weights(6, {"a": 0.8, "b": 0.2})  # two steps ahead: steps 4 and 5 keep 0.5 / 0.5
    served += serve(live, 16)
    run = maker(packs, {"a": 0.5, "b": 0.5})()
    run.step = 6
    resume = maker(packs, {"a": 0.8, "b": 0.2})()
    resume.load_state_dict(run.state_dict())
    assert all(np.array_equal(resume.global_rows(k)[:, 0], served[k]) for k in range(6, 20))
    assert all(np.array_equal(run.global_rows(k)[:, 0], served[k]) for k in range(6))
    state = live[1].state_dict()
    assert state["history"][-1] == {"step": 6, "global_batch": 10, "weights": [0.8, 0.2], "anchor": [30, 30]}
    assert state["mixture_stages"] == [[0, [0.5, 0.5]]]  # what the run was given, apart from what it set
    # A resume given the weights the run was given replays the weights it set, on any world size ...
    again = resumed(maker(packs, {"a": 0.5, "b": 0.5}), 5, state)
    assert all(np.array_equal(again[0].global_rows(k), live[0].global_rows(k)) for k in range(20, 60))
    # ... and with another global batch the set weights go on: 0.8 / 0.2 of every step's rows
    wider = resumed(maker(packs, {"a": 0.5, "b": 0.5}, global_batch=20), 4, state)
    later = serve(wider, 30)
    a_rows = [sum(name == "a" for name, _ in named_rows(step)) for step in later]
    assert abs(sum(a_rows) - 0.8 * 20 * 30) <= 1
    assert_every_row_once_per_epoch(served + later)
    # other weights at a resume are a change from its step too
    other = resumed(maker(packs, {"a": 0.1, "b": 0.9}), 1, state)[0]
    assert other.weights(20).round(6).tolist() == [0.1, 0.9]


def test_set_weights_refuses_a_served_step_and_weights_of_another_shape(packs: dict[str, Path]) -> None:
    batches = maker(packs, {"a": 1, "b": 1})()
    serve([batches], 3)
    with pytest.raises(InputError, match="set_weights at step 2, before the run's position 3"):
        batches.set_weights(2, [1, 1])
    with pytest.raises(InputError, match="one weight a part \\(2: a, b\\)"):
        batches.set_weights(3, [1, 1, 1])
    with pytest.raises(InputError, match="non-negative with a positive sum"):
        batches.set_weights(3, [0, 0])
    with pytest.raises(InputError, match="no part 'z'"):
        batches.set_weights(3, {"z": 1})
    history = batches.state_dict()["history"]
    batches.set_weights(3, [1, 1])  # the weights in force: nothing changes
    assert batches.state_dict()["history"] == history and "mixture_stages" not in batches.state_dict()


def test_online_mixing_sets_weights_every_n_steps_and_a_resume_replays_them(packs: dict[str, Path]) -> None:
    def run(batches: PackedBatches, steps: range, mixing: OnlineMixing) -> list[np.ndarray]:
        served = []
        for step in steps:
            batch = batches.batch(step)
            served.append(batch["input_ids"][:, 0])
            # a loss a row that depends on the part: b is "harder", so it gains weight
            losses = np.where(batches.parts_of(step) == 1, 3.0, 1.0)
            mixing.observe(step, losses)
        return served

    def update(losses: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return weights * np.exp(0.2 * (losses - np.nanmean(losses)))

    batches = maker(packs, {"a": 0.5, "b": 0.5})()
    mixing = OnlineMixing(batches, every=5, update=update)
    served = run(batches, range(12), mixing)
    state, hook_state = batches.state_dict(), mixing.state_dict()
    served += run(batches, range(12, 30), mixing)
    history = batches.state_dict()["history"]
    assert [segment["step"] for segment in history] == [0, 5, 10, 15, 20, 25, 30]
    assert history[1]["weights"][1] > 0.5 and history[-1]["weights"][1] > history[1]["weights"][1]
    again = maker(packs, {"a": 0.5, "b": 0.5})()
    again.load_state_dict(state)
    hook = OnlineMixing(again, every=5, update=update)
    hook.load_state_dict(hook_state)
    replayed = run(again, range(12, 30), hook)
    assert all(np.array_equal(x, y) for x, y in zip(replayed, served[12:]))
    assert again.state_dict()["history"] == history


def test_skip_passes_over_steps_then_serves_what_the_run_would_have_and_counts_them(packs: dict[str, Path]) -> None:
    make = maker(packs, {"a": 0.5, "b": 0.5})
    first = [make(rank=r, world_size=2) for r in range(2)]
    served = serve(first, 3)
    for loader in first:
        loader.skip(3, 7)
        loader.skip(9, 10)  # ahead of the position: passed over when the run gets there
    served += serve(first, 4)  # steps 7, 8, 10, 11
    reference = make()
    assert [np.array_equal(reference.global_rows(k)[:, 0], s) for k, s in zip((0, 1, 2, 7, 8, 10, 11), served)] == [True] * 7
    repeats = first[0].repeats()
    assert first[0].position == 12
    assert [(r["name"], r["rows"], r["skipped_rows"]) for r in repeats] == [("a", 35, 25), ("b", 35, 25)]
    assert repeats[0]["tokens"] == 35 * LENGTH  # tokens trained: the skipped rows' apart
    with pytest.raises(InputError, match=r"step 9 was skipped \(skip\(\) left out steps \[9, 10\)\); serve step 10"):
        first[0].batch(9)
    with pytest.raises(InputError, match="skip from step 5, before the run's position 12"):
        first[0].skip(5, 20)
    state = first[1].state_dict()
    assert state["skipped"] == [[3, 7], [9, 10]] and state["parts"][0]["skipped_rows"] == 25
    # a resume on three ranks with a global batch of 12 keeps the record and every row once an epoch
    later = resumed(maker(packs, {"a": 0.5, "b": 0.5}, global_batch=12), 3, state)
    served_after = serve(later, 30)
    assert later[0].repeats()[1]["skipped_rows"] == 25
    assert [r["name"] for r in later[0].repeats()] == ["a", "b"]
    whole = served[:3] + [reference.global_rows(k)[:, 0] for k in (3, 4, 5, 6, 9)] + served[3:] + served_after
    assert_every_row_once_per_epoch(whole)
    # when() leaves the skipped steps out: the model never saw them
    trained = {(o["step"]) for document in range(28) for o in first[0].when("a", document)}
    assert not trained & {3, 4, 5, 6, 9}


def test_a_capped_part_stops_and_never_repeats_a_row_across_a_resume(packs: dict[str, Path]) -> None:
    make = maker(packs, {"a": 0.4, "b": 0.3, "c": 0.3}, max_epochs=[None, 1, 2])
    first = [make(rank=r, world_size=2) for r in range(2)]
    served = serve(first, 12)  # b (50 rows, 3 a step) stops in step 16 or so: not yet
    state = first[0].state_dict()
    later = resumed(maker(packs, {"a": 0.4, "b": 0.3, "c": 0.3}, global_batch=20, max_epochs=[None, 1, 2]), 4, state)
    served += serve(later, 60)
    by_part: dict[str, list[int]] = {}
    for name, row in named_rows(np.concatenate(served)):
        by_part.setdefault(name, []).append(row)
    assert len(by_part["b"]) == len(set(by_part["b"])) <= 50  # never a row twice
    assert len(by_part["c"]) <= 200 and all(by_part["c"].count(row) <= 2 for row in set(by_part["c"]))
    repeats = {r["name"]: r for r in later[0].repeats()}
    assert repeats["b"]["max_epochs"] == 1 and "capped_at" in repeats["b"] and repeats["b"]["weight"] == 0
    assert repeats["c"]["max_epochs"] == 2 and "capped_at" in repeats["c"]
    assert "max_epochs" not in repeats["a"] and repeats["a"]["weight"] == 1.0
    history = later[0].state_dict()["history"]
    stopped = [s for s in history if s["anchor"] is not None and s["weights"][1] == 0]
    assert stopped and abs(sum(stopped[0]["weights"]) - 0.7) < 1e-12  # b's weight 0, the others' as they were
    # a fresh loader from that state serves the same steps
    fresh = maker(packs, {"a": 0.4, "b": 0.3, "c": 0.3}, global_batch=20, max_epochs=[None, 1, 2])()
    fresh.load_state_dict(later[2].state_dict())
    assert all(np.array_equal(fresh.global_rows(k)[:, 0], served[k]) for k in range(12, 72))


def test_when_finds_a_capped_parts_rows_after_the_run_passed_its_cap(packs: dict[str, Path]) -> None:
    make = maker(packs, {"a": 0.4, "b": 0.3, "c": 0.3}, max_epochs=[None, 1, None])
    served = serve([make()], 30)  # b (50 rows, 3 a step) reaches its cap inside these steps
    loader = make()
    for _ in zip(range(30), loader):
        pass
    assert "capped_at" in {r["name"]: r for r in loader.repeats()}["b"]
    # every row b served, found again by when() from its documents, at the step and row it was served
    seen = {(step, row) for step, firsts in enumerate(served) for row, (name, _) in enumerate(named_rows(firsts))
            if name == "b"}
    found = {(o["step"], o["row"]) for document in range(6) for o in loader.when("b", document)}
    assert seen and found == seen


def test_max_epochs_is_checked_and_a_run_whose_parts_all_stopped_says_so(packs: dict[str, Path]) -> None:
    with pytest.raises(InputError, match="max_epochs must give one cap a part"):
        Mixture([(packs["a"], 1)], max_epochs=[1, 2])
    with pytest.raises(InputError, match="max_epochs of part 0 must be a positive integer, got 0"):
        Mixture([(packs["a"], 1)], max_epochs=[0])
    batches = PackedBatches(Mixture([(packs["b"], 1), (packs["c"], 1)], max_epochs=[1, 1]), length=LENGTH,
                            global_batch=10)
    with pytest.raises(InputError, match="every part has reached its max_epochs by step"):
        for step in range(100):
            batches.global_rows(step)


def test_a_part_capped_in_the_first_step_leaves_the_other_parts_caps(packs: dict[str, Path], tmp_path: Path) -> None:
    # one row an epoch, a share of five rows a step: it stops in step 0, before serving a row
    tiny = pack_of_documents([[29_001, 29_002, 29_003, 29_004, 29_005]], n_vocab=30_000, pad_id=0, directory=tmp_path / "t")
    batches = PackedBatches(Mixture([(packs["a"], 1), (packs["b"], 1), (tiny, 2)], seed=2, max_epochs=[None, 1, 1]),
                            length=LENGTH, global_batch=10, seed=4)
    served = [batches.global_rows(step)[:, 0] for step in range(60)]  # b (50 rows) reaches its cap by step 17
    b_rows = [row for name, row in named_rows(np.concatenate(served)) if name == "b"]
    assert len(b_rows) == len(set(b_rows)) <= 50
    assert {r["name"]: r.get("capped_at") for r in batches.repeats(60)}["b"] is not None


def test_when_finds_the_steps_of_a_capped_part_once_its_cap_is_known(packs: dict[str, Path]) -> None:
    make = maker(packs, {"a": 0.5, "b": 0.5}, max_epochs=[None, 1])
    fresh = make()
    expected = [fresh.when("b", document) for document in range(6)]
    assert all(expected)
    live = make()
    for step in range(30):  # b stops at step 10: the loader knows its cap
        live.batch(step)
    assert [live.when("b", document) for document in range(6)] == expected
    resumed_run = make()
    resumed_run.load_state_dict(live.state_dict())
    assert [resumed_run.when("b", document) for document in range(6)] == expected


def test_two_parts_reaching_their_caps_in_one_step_serve_it_the_same_every_time(packs: dict[str, Path]) -> None:
    # at step 62 b passes its cap; with b stopped, c's larger share passes c's cap in the same step
    batches = maker(packs, {"a": 0.7, "b": 0.1, "c": 0.2}, global_batch=8, max_epochs=[None, 1, 1])()
    served = [batches.global_rows(step)[:, 0] for step in range(80)]
    assert all(np.array_equal(batches.global_rows(step)[:, 0], served[step]) for step in range(80))
    rows = named_rows(np.concatenate(served))
    for name in ("b", "c"):
        assert len([row for part, row in rows if part == name]) == len({row for part, row in rows if part == name})


def test_when_answers_for_a_run_whose_parts_all_reach_their_caps(packs: dict[str, Path]) -> None:
    batches = PackedBatches(Mixture([(packs["b"], 1), (packs["c"], 1)], max_epochs=[1, 1]), length=LENGTH,
                            global_batch=10)
    targets: dict[tuple[str, int], list[int]] = {}
    step = 0
    with pytest.raises(InputError, match="every part has reached its max_epochs by step"):
        while True:
            batches.global_rows(step)  # the run ends where no part is left
            for row in batches.provenance(step):
                column = 0
                for segment in row:
                    start, end = segment["tokens"]
                    if start + (column == 0) < end:  # a row's first id is no target
                        targets.setdefault((segment["part"], segment["document"]), []).append(step)
                    column += end - start
            step += 1
    for name, n_docs in (("b", 6), ("c", 11)):
        for document in range(n_docs):
            assert sorted({o["step"] for o in batches.when(name, document)}) == sorted(set(targets[(name, document)]))


def test_weights_set_after_a_capped_part_was_removed_go_on_at_a_resume(packs: dict[str, Path]) -> None:
    first = maker(packs, {"a": 0.4, "b": 0.3, "c": 0.3}, max_epochs=[None, None, 1])()
    for step in range(3):
        first.batch(step)
    without_c = maker(packs, {"a": 0.4, "b": 0.3}, max_epochs=[None, None])
    live = without_c()
    live.load_state_dict(first.state_dict())  # c removed
    live.set_weights(5, {"a": 0.1, "b": 0.9})
    for step in range(3, 8):
        live.batch(step)
    again = without_c()
    again.load_state_dict(live.state_dict())
    assert again.weights(8).tolist() == live.weights(8).tolist() == pytest.approx([0.1, 0.9])
    assert all(np.array_equal(again.global_rows(k), live.global_rows(k)) for k in range(8, 20))


def test_a_state_taken_past_a_cap_not_yet_counted_loads(packs: dict[str, Path]) -> None:
    make = maker(packs, {"a": 0.5, "b": 0.5}, max_epochs=[None, 1])
    batches = make()
    batches.skip(0, 30)  # b stops at step 10, inside the skipped steps: no step counted it yet
    state = batches.state_dict()
    resumed_run = make()
    resumed_run.load_state_dict(state)
    reference = make()
    assert all(np.array_equal(resumed_run.global_rows(k), reference.global_rows(k)) for k in range(30, 40))
    assert {r["name"]: r.get("capped_at") for r in resumed_run.repeats()} == {"a": None, "b": 10}
