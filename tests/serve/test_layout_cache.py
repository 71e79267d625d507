"""The cached ``bestfit`` index is a speed-up, never a source of truth: a file in
``$TOKPACK_CACHE/layouts/`` that is damaged, forged (with its checksum recomputed), or built
from other data is rebuilt, and the rows served are always the ones the data gives."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.serve import layouts as layouts_module
from tokpack.serve import make_layout
from tokpack.serve.memory import pack_of_documents

LENGTH = 5


@pytest.fixture()
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A pack of documents of a few equal lengths (so pieces can be swapped for others of the
    same length) and the one index file its bestfit layout cached."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(7)
    documents = [rng.integers(1, 50, size=int(rng.choice([2, 3, 4, 9]))).tolist() for _ in range(60)]
    pack = pack_of_documents(documents, n_vocab=60, pad_id=0, directory=tmp_path / "pack")
    make_layout("bestfit", pack, length=LENGTH)
    (index,) = (tmp_path / "cache" / "layouts").iterdir()
    return pack, index


def served(pack: Path, **options: object) -> np.ndarray:
    layout = make_layout("bestfit", pack, length=LENGTH, **options)
    return layout.rows(np.arange(layout.n_rows))[0]


def stream_positions(pack: Path) -> Counter[int]:
    """How many times an epoch serves each stream position."""
    layout = make_layout("bestfit", pack, length=LENGTH)
    positions = layout._positions(np.arange(layout.n_rows))
    return Counter(positions[positions >= 0].tolist())


def test_a_piece_pointed_at_another_of_the_same_length_is_not_served(cached: tuple[Path, Path]) -> None:
    """A piece's start set to another piece's start (same length, so the ids still add up)
    would serve some ids twice an epoch and skip others: the index is rebuilt instead."""
    pack, index = cached
    with np.load(index, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    uncached = served(pack, cache=False)
    name = "piece_start" if "piece_start" in arrays else "order"
    column = arrays[name].copy()
    # Point entry 1 at entry 0's piece (any two entries of one index file name different pieces).
    column[1] = column[0]
    arrays[name] = column
    np.savez(index, **arrays)
    assert np.array_equal(served(pack), uncached)
    assert set(stream_positions(pack).values()) == {1}


def test_a_forged_index_with_a_recomputed_checksum_is_rebuilt(cached: tuple[Path, Path]) -> None:
    """The checksum has no key, so anyone can recompute it: what the index says is checked
    against the pieces the data gives (each exactly once, rows within their width)."""
    pack, index = cached
    uncached = served(pack, cache=False)
    with np.load(index, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    assert "checksum" in arrays and "built_from" in arrays
    forgeries = []
    order = arrays["order"].copy()
    order[1] = order[0]  # a piece twice, another never
    forgeries.append({"order": order})
    row_ptr = arrays["row_ptr"].copy()
    row_ptr[1:-1] = row_ptr[2:]  # two rows' pieces in one row: wider than a row
    forgeries.append({"row_ptr": row_ptr[:-1]})
    order = arrays["order"].copy()
    order[[0, -1]] = order[[-1, 0]]  # the first row headed by the newest piece, not the oldest
    forgeries.append({"order": order})
    for forged in forgeries:
        changed = arrays | forged
        changed["checksum"] = np.array(layouts_module._index_checksum(changed["order"], changed["row_ptr"],
                                                                      str(changed["built_from"])))
        np.savez(index, **changed)
        assert np.array_equal(served(pack), uncached)
        assert set(stream_positions(pack).values()) == {1}
        with np.load(index, allow_pickle=False) as stored:  # rebuilt in place
            assert np.array_equal(stored["order"], arrays["order"])


def test_an_index_of_other_data_under_this_name_is_rebuilt(cached: tuple[Path, Path], tmp_path: Path) -> None:
    """A file copied under another key (another pack's index, same shape) names what it was
    built from, so it is never served for this data."""
    pack, index = cached
    other = pack_of_documents([[1, 2, 3, 4]] * 60, n_vocab=60, pad_id=0, directory=tmp_path / "other")
    shutil.copy(index, tmp_path / "saved.npz")
    index.unlink()
    make_layout("bestfit", other, length=LENGTH)
    (other_index,) = (tmp_path / "cache" / "layouts").iterdir()
    shutil.copy(other_index, index)
    assert np.array_equal(served(pack), served(pack, cache=False))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing field"])
def test_a_damaged_index_is_rebuilt_not_an_error(cached: tuple[Path, Path], damage: str) -> None:
    pack, index = cached
    uncached = served(pack, cache=False)
    if damage == "truncate":
        index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    elif damage == "garbage":
        index.write_bytes(b"not an index")
    else:
        with np.load(index, allow_pickle=False) as stored:
            np.savez(index, **{name: stored[name] for name in stored.files if name != "checksum"})
    assert np.array_equal(served(pack), uncached)
    with np.load(index, allow_pickle=False) as stored:
        assert "checksum" in stored.files


def test_an_index_is_named_by_the_whole_key_it_was_built_from(cached: tuple[Path, Path]) -> None:
    """The file's name is the whole SHA-256 it carries as ``built_from``: a cache shared with a
    tokpack whose index has other arrays, named by the first 32 digits, holds both apart."""
    _, index = cached
    with np.load(index, allow_pickle=False) as stored:
        built_from = str(stored["built_from"])
    assert len(built_from) == 64
    assert index.name == f"bestfit-{built_from}.npz"


def _other_layout_of_arrays(index: Path) -> None:
    """The pieces as (start, length) columns, row offsets and counts: a layout of arrays other
    tokpack versions write under the same folder."""
    with np.load(index, allow_pickle=False) as stored:
        n = len(stored["order"])
        np.savez(index, piece_start=np.arange(n, dtype=np.int64) * LENGTH, piece_len=np.full(n, LENGTH, np.int64),
                 row_ptr=stored["row_ptr"], counts=np.array([0, 0], dtype=np.int64))


def _pickled_objects(index: Path) -> None:
    with np.load(index, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    arrays["order"] = np.array([object()] * 3, dtype=object)
    np.savez(index, **arrays)


@pytest.mark.parametrize("written", [_other_layout_of_arrays, _pickled_objects], ids=["other arrays", "pickled"])
def test_an_index_in_another_layout_of_arrays_is_rebuilt_not_an_error(cached: tuple[Path, Path],
                                                                      written: Callable[[Path], None]) -> None:
    """A cache folder outlives the tokpack that wrote it: an index file of other arrays under
    this name (``piece_start``, ``piece_len``, ``row_ptr``, ``counts``), or of arrays numpy only
    reads by unpickling, is rebuilt and replaced, never an ``IntegrityError``."""
    pack, index = cached
    uncached = served(pack, cache=False)
    written(index)
    assert np.array_equal(served(pack), uncached)
    assert set(stream_positions(pack).values()) == {1}
    with np.load(index, allow_pickle=False) as stored:
        assert {"order", "row_ptr", "built_from", "checksum"} <= set(stored.files)
        assert stored["order"].dtype == np.int64


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 24), st.integers(1, 8), st.data())
def test_no_forged_packing_that_loses_or_repeats_an_id_passes_the_check(width: int, lookahead: int,
                                                                         data: st.DataObject) -> None:
    """Whatever a cached file holds (any order, any row offsets), what the check accepts
    serves each piece exactly once, in non-empty rows within their width, each headed by the
    oldest piece still waiting: the packing's own rules, only its choice of fills taken on trust."""
    from tokpack.serve import batch_kernels as compiled

    lengths = np.array(data.draw(st.lists(st.integers(1, width), min_size=1, max_size=40)), dtype=np.int64)
    order, row_ptr, moved = layouts_module._best_fit(lengths, width, lookahead)
    assert moved >= 0  # the packing made passes its own check
    n = len(lengths)
    forged_order = np.array(data.draw(st.lists(st.integers(-1, n), min_size=n - 1, max_size=n + 1)), dtype=np.int64)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, n), max_size=n))) | {n})
    for candidate, ptr in ((forged_order, np.array([0, *cuts])), (data.draw(st.permutations(order.tolist())), row_ptr)):
        candidate = np.asarray(candidate, dtype=np.int64)
        if compiled.bestfit_moved(candidate, ptr[1:], lengths, width, lookahead) < 0:
            continue
        assert sorted(candidate.tolist()) == list(range(n))
        assert ptr[-1] == n and (np.diff(ptr) > 0).all()
        assert (np.add.reduceat(lengths[candidate], ptr[:-1]) <= width).all()
        oldest_waiting = np.minimum.accumulate(candidate[::-1])[::-1]
        assert (candidate[ptr[:-1]] == oldest_waiting[ptr[:-1]]).all()
        row_start = np.repeat(ptr[:-1], np.diff(ptr))  # pieces placed before each piece's row
        assert (candidate < np.minimum(n, row_start + lookahead)).all()


def test_a_forged_index_that_fills_a_row_from_past_the_lookahead_is_rebuilt(cached: tuple[Path, Path]) -> None:
    """A fill is one of the ``lookahead`` pieces waiting: a forged index (checksum recomputed) that
    pulls a piece from further on into the first row, keeping every other rule, is rebuilt."""
    pack, _ = cached
    lookahead = 2
    uncached = served(pack, cache=False, lookahead=lookahead)
    layout = make_layout("bestfit", pack, length=LENGTH, lookahead=lookahead)
    index = next(path for path in (pack.parent / "cache" / "layouts").iterdir() if path.stat().st_mtime_ns
                 == max(p.stat().st_mtime_ns for p in (pack.parent / "cache" / "layouts").iterdir()))
    with np.load(index, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    lengths = np.empty(len(arrays["order"]), dtype=np.int64)
    lengths[arrays["order"]] = layout._piece_len
    # One piece a row, oldest first, but for row `head`, which also takes piece `far`.
    head, far = next((i, j) for i in range(len(lengths)) for j in range(i + lookahead + 5, len(lengths))
                     if lengths[i] + lengths[j] <= LENGTH + 1)
    order = np.array([*range(head + 1), far, *[k for k in range(head + 1, len(lengths)) if k != far]], dtype=np.int64)
    row_ptr = np.array([0, *range(1, head + 1), *range(head + 2, len(lengths) + 1)], dtype=np.int64)
    forged = arrays | {"order": order, "row_ptr": row_ptr,
                       "checksum": np.array(layouts_module._index_checksum(order, row_ptr, str(arrays["built_from"])))}
    np.savez(index, **forged)
    assert np.array_equal(served(pack, lookahead=lookahead), uncached)
    with np.load(index, allow_pickle=False) as stored:  # rebuilt in place
        assert np.array_equal(stored["order"], arrays["order"])
