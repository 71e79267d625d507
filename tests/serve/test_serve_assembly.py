"""The compiled batch assembly equals a straightforward numpy one.

The reference below is that numpy implementation, kept only here: each layout's rows and
segment-start mask built with numpy (``searchsorted`` and scatters for the contiguous layouts,
a ``cumsum`` of position steps and one gather for ``bestfit``), and the batch arrays built from
the mask (``flatnonzero``, one ``repeat`` per array, ``astype`` casts). Random packs, layouts,
row choices, boundary requests and dtypes must give identical arrays, in dtype and content.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.serve import PackedBatches, make_layout
from tokpack.serve.assembly import assemble, assemble_segments
from tokpack.serve.layouts import BestFitLayout, Layout, _ContiguousLayout
from tokpack.serve.memory import pack_of_documents
from tokpack.store import Pack


class NotAPack:
    """A pack seen only through the token-source protocol (as a sharded or foreign source is):
    ``bestfit`` then gathers positions instead of copying runs from one flat array."""

    def __init__(self, pack: Pack) -> None:
        self._pack = pack

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pack, name)


# -- the reference: a plain numpy implementation ---------------------------------------------------


def reference_rows(layout: Layout, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``indices`` of ``layout`` as ``(ids, starts mask, real ids per row)``."""
    width = layout.length + 1
    n = len(indices)
    if isinstance(layout, _ContiguousLayout):
        origins = layout.origins(indices)
        tokens = np.asarray(layout.source.tokens)
        positions = origins[:, None] + np.arange(width)
        inside = positions < layout.hi
        ids = np.where(inside, tokens[np.where(inside, positions, 0)], layout.fill).astype(tokens.dtype)
        real = np.minimum(width, layout.hi - origins)
        starts = np.zeros((n, width), dtype=bool)
        starts[:, 0] = True
        document_starts = layout.source.starts
        first = np.searchsorted(document_starts, origins, side="right")
        last = np.searchsorted(document_starts, np.minimum(origins + width, layout.hi), side="left")
        for row in range(n):
            starts[row, document_starts[first[row]:last[row]] - origins[row]] = True
        padded = origins + width > layout.hi
        starts[np.flatnonzero(padded), layout.hi - origins[padded]] = True
        return ids, starts, real
    assert isinstance(layout, BestFitLayout)
    first, last = layout._row_ptr[indices], layout._row_ptr[indices + 1]
    counts = last - first
    heads = np.cumsum(counts) - counts
    pieces = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(first - heads, counts)
    lengths = layout._piece_len[pieces].astype(np.int64)
    row_of_piece = np.repeat(np.arange(n, dtype=np.int64), counts)
    before = np.cumsum(lengths) - lengths
    column = before - np.repeat(before[heads], counts) if n else before
    destination = row_of_piece * width + column
    shift = layout._piece_start[pieces] - destination
    steps = np.ones(n * width, dtype=np.int64)
    if len(pieces):
        steps[destination[1:]] = np.diff(shift) + 1
        steps[0] = shift[0]
    positions = np.cumsum(steps).reshape(n, width)
    used = np.bincount(row_of_piece, weights=lengths, minlength=n).astype(np.int64)
    padding = np.arange(width) >= used[:, None]
    positions[padding] = layout.lo
    ids = np.asarray(layout.source.tokens)[positions]
    ids[padding] = layout.fill
    starts = np.zeros((n, width), dtype=bool)
    starts[row_of_piece, column] = True
    padded = np.flatnonzero(used < width)
    starts[padded, used[padded]] = True
    return ids, starts, used


def reference_assemble(ids: np.ndarray, starts: np.ndarray, *, dtype: np.dtype, position_ids: bool,
                       cu_seqlens: bool, document_ids: bool, real: np.ndarray | None,
                       ignore_index: int | None) -> dict[str, Any]:
    """The batch arrays from rows and their segment-start mask."""
    batch: dict[str, Any] = {"input_ids": ids[:, :-1].astype(dtype, order="C"),
                             "labels": ids[:, 1:].astype(dtype, order="C")}
    if real is not None and ignore_index is not None and len(real):
        batch["labels"][np.arange(1, ids.shape[1]) >= real[:, None]] = ignore_index
    if not (position_ids or cu_seqlens or document_ids):
        return batch
    mask = starts[:, :-1].copy()
    n, length = mask.shape
    mask[:, 0] = True
    first = np.flatnonzero(mask)
    bounds = np.append(first, n * length)
    sizes = np.diff(bounds)
    if position_ids:
        batch["position_ids"] = (np.arange(n * length) - np.repeat(first, sizes)).reshape(n, length).astype(dtype)
    if document_ids:
        batch["document_ids"] = (np.cumsum(mask, axis=1) - 1).astype(dtype)
    if cu_seqlens:
        batch["cu_seqlens"] = bounds.astype(np.int32)
        batch["max_seqlen"] = int(sizes.max()) if len(sizes) else 0
    return batch


def assert_same_batch(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert list(got) == list(expected)
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype, key
            assert got[key].flags.c_contiguous, key
            assert np.array_equal(got[key], value), key
        else:
            assert got[key] == value, key


# -- the properties -------------------------------------------------------------------------------

documents = st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=30), min_size=1, max_size=25)


@settings(max_examples=80, deadline=None)
@given(docs=documents, layout=st.sampled_from(["stream", "documents", "bestfit"]), length=st.integers(1, 24),
       lookahead=st.integers(1, 6), pad=st.booleans(), flat=st.booleans(), data=st.data())
def test_layout_rows_and_batches_equal_the_reference(docs: list[list[int]], layout: str, length: int, lookahead: int,
                                                     pad: bool, flat: bool, data: st.DataObject) -> None:
    if sum(map(len, docs)) < 2:
        docs = [*docs, [1, 2]]
    with tempfile.TemporaryDirectory() as folder:
        pack = Pack(pack_of_documents(docs, n_vocab=42, pad_id=41 if pad else None, directory=Path(folder) / "p"))
        source = pack if flat else NotAPack(pack)
        options = {"lookahead": lookahead, "cache": False} if layout == "bestfit" else {}
        rows = make_layout(layout, source, length=length, **options)  # type: ignore[arg-type]
        indices = np.array(data.draw(st.lists(st.integers(0, rows.n_rows - 1), max_size=9)), dtype=np.int64)
        ids, starts, real = reference_rows(rows, indices)
        got_ids, got_starts, got_real = rows.read(indices)
        assert np.array_equal(got_ids, ids) and got_ids.dtype == ids.dtype
        assert np.array_equal(got_starts, starts) and np.array_equal(got_real, real)
        assert np.array_equal(rows.read(indices, starts=False)[2], real)
        flags = {key: data.draw(st.booleans()) for key in ("position_ids", "cu_seqlens", "document_ids")}
        dtype = np.dtype(data.draw(st.sampled_from(["int64", "int32"])))
        expected = reference_assemble(ids, starts, dtype=dtype, real=real, ignore_index=rows.ignore_index, **flags)
        _, segments, _ = rows.segments(indices)
        got, largest = assemble_segments(got_ids, segments, got_real, dtype=dtype, ignore_index=rows.ignore_index,
                                         **flags)
        assert_same_batch(got, expected)
        assert largest == (int(ids.max()) if ids.size else 0)
        assert_same_batch(assemble(ids, starts, dtype=dtype, real=real, ignore_index=rows.ignore_index, **flags),
                          expected)


@settings(max_examples=25, deadline=None)
@given(docs=documents, layout=st.sampled_from(["stream", "documents", "bestfit"]), length=st.integers(1, 16),
       rows_per_rank=st.integers(1, 4), micro=st.sampled_from([1, 2]), step=st.integers(0, 30), data=st.data())
def test_packed_batches_equal_the_reference(docs: list[list[int]], layout: str, length: int, rows_per_rank: int,
                                            micro: int, step: int, data: st.DataObject) -> None:
    if sum(map(len, docs)) < 2:
        docs = [*docs, [1, 2]]
    flags = {key: data.draw(st.booleans()) for key in ("position_ids", "cu_seqlens", "document_ids")}
    dtype = data.draw(st.sampled_from(["int64", "int32"]))
    with tempfile.TemporaryDirectory() as folder:
        path = pack_of_documents(docs, n_vocab=42, pad_id=41, directory=Path(folder) / "p")
        batches = PackedBatches(path, layout=layout, length=length, global_batch=2 * rows_per_rank * micro, rank=1,
                                world_size=2, micro_batches=micro, dtype=dtype, seed=step,
                                layout_options={"cache": False} if layout == "bestfit" else None, **flags)
        part_of, row_of = batches._plan(step)
        share = len(row_of) // 2
        ids, starts, real = reference_rows(batches.layouts[0], row_of[share:])
        expected = reference_assemble(ids, starts, dtype=np.dtype(dtype), real=real,
                                      ignore_index=batches.ignore_index, **flags)
        assert_same_batch(batches.batch(step), expected)
        size = share // micro
        for index, part in enumerate(batches.micro_batches(step)):
            rows = slice(index * size, (index + 1) * size)
            assert_same_batch(part, reference_assemble(ids[rows], starts[rows], dtype=np.dtype(dtype), real=real[rows],
                                                       ignore_index=batches.ignore_index, **flags))
