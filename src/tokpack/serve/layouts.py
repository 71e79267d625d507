"""Layouts: how a range of a token source is cut into rows of ``length + 1`` ids.

Three layouts, one registry (:data:`LAYOUTS`), each a pure function of the data and its
parameters (shuffling is the schedule's job, not the layout's):

- ``stream``: row ``j`` is ``ids[lo + j*length : lo + (j+1)*length + 1]``; rows overlap by one
  id, so every id of the range but the first is a target exactly once per epoch, across
  document boundaries. The last row is padded.
- ``documents``: rows start at every document start and, inside a document longer than a row,
  at every ``length`` ids; a row its document does not fill runs on into the next documents.
  Every id but the range's first is a target at least once; :attr:`Layout.stats` reports how
  many times on average (``repetition``).
- ``bestfit``: every row starts at a document start and holds whole documents, chosen by best
  fit from a bounded look-ahead buffer; a document longer than a row is cut into pieces of
  ``length + 1`` ids; the rest of a row is padding. Every id is served exactly once per epoch;
  :attr:`Layout.stats` reports the padding share and the shares of ids moved and cut.

A layout's :meth:`Layout.rows` returns the ids and a ``starts`` mask (``True`` where a new
segment begins: a row's first position, every document start, the first padding position).
Batches use :meth:`Layout.segments` instead: the same starts as a flat ascending list, which
compiled loops (:mod:`tokpack.serve.batch_kernels`) write directly (a few dozen entries a batch,
never a mask); ``bestfit`` copies each row's pieces as contiguous runs. That is what makes a
batch with boundaries cost about as much as one without (BENCHMARKS.md, "The training loader
against litdata").

>>> from tokpack.serve.memory import pack_of_documents
>>> pack = pack_of_documents([[1, 2, 3, 4, 5], [6, 7]], n_vocab=9, pad_id=0)
>>> layout = make_layout("stream", pack, length=3)
>>> layout.rows(np.arange(layout.n_rows))[0].tolist()
[[1, 2, 3, 4], [4, 5, 6, 7]]
>>> make_layout("documents", pack, length=3).rows(np.arange(3))[0].tolist()
[[1, 2, 3, 4], [4, 5, 6, 7], [6, 7, 0, 0]]
>>> make_layout("bestfit", pack, length=3, cache=False).rows([0, 1])[0].tolist()
[[1, 2, 3, 4], [5, 6, 7, 0]]
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import secrets
import zipfile
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from tokpack._checks import fits_in_memory, positive_int, text
from tokpack._signals import held
from tokpack.errors import InputError
from tokpack.store import Pack, TokenSource, open_tokens

#: Index files of layouts that are costly to build live under ``<cache>/layouts/``.
LAYOUT_CACHE = "layouts"


_KERNELS: ModuleType | None = None


def kernels() -> Any:
    """:mod:`tokpack.serve.batch_kernels`, imported on the first batch: ``import tokpack`` does not load
    numba (most commands never serve a batch). A function-level ``import`` on every batch would
    cost more than the smallest kernels it reaches."""
    global _KERNELS
    if _KERNELS is None:
        from tokpack.serve import batch_kernels

        _KERNELS = batch_kernels
    return _KERNELS


def open_source(data: TokenSource | str | Path, *, name: str = "data") -> TokenSource:
    """``data`` itself when it is an opened token source, else the pack or dataset at that path.

    Raises:
        InputError: ``data`` (called ``name`` in the message) is neither, or its files cannot be
            read (a symlink loop, no permission).
    """
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        try:
            return open_tokens(path)
        except OSError as error:  # a loop of symlinks, a permission: the user's files, not a bug
            where = Path(error.filename) if error.filename else path
            raise InputError(f"cannot read {name} ({error.strerror or error})", where=where) from None
    if not all(hasattr(data, attribute) for attribute in ("meta", "starts", "path")):
        raise InputError(f"{name} must be a pack or dataset directory or an opened token source, "
                         f"got {type(data).__name__}")
    return data


def data_identity(source: TokenSource) -> dict[str, Any]:
    """What names the ids of ``source``: its checksums, counts and vocabulary (not its path: data moves)."""
    meta = source.meta
    return {
        "name": Path(source.path).name,
        "tokens_sha256": meta.tokens_sha256,
        "starts_sha256": meta.starts_sha256,
        "n_tokens": int(meta.n_tokens),
        "vocabulary": meta.vocabulary.model_dump(mode="json", by_alias=True),
    }



def start_mask(shape: tuple[int, ...], segments: np.ndarray) -> np.ndarray:
    """The boolean mask of ``shape`` that is true at the flat positions ``segments``.

    >>> start_mask((2, 3), np.array([0, 2, 3])).astype(int).tolist()
    [[1, 0, 1], [1, 0, 0]]
    """
    mask = np.zeros(shape, dtype=bool)
    mask.reshape(-1)[segments] = True
    return mask

def missing_range(split: str, ranges: Iterable[str], path: object) -> str:
    """What to say when ``split`` is not one of a source's ``ranges``: a few names (the nearest
    first), how many there are, and how to list them all (a chess pack has one range per month).

    >>> missing_range("2016-13", ["2016-01", "2016-02", "2016-03", "2016-11", "2016-12", "2017-01", "train"], "p")
    "no '2016-13' range; it has 7: 2016-12, 2016-11, 2016-03, ... (list them with: tokpack inspect p)"
    """
    names = sorted(ranges)
    if not names:
        return f"no {split!r} range; it has none"
    if len(names) <= 3:
        return f"no {split!r} range (has {', '.join(names)})"
    import difflib

    near = difflib.get_close_matches(split, names, n=3, cutoff=0.5)
    shown = near + [name for name in names if name not in near][: 3 - len(near) if near else 3]
    return (f"no {split!r} range; it has {len(names):,}: {', '.join(shown)}, ... "
            f"(list them with: tokpack inspect {path})")


class Layout:
    """Rows of ``length + 1`` ids over the ``split`` range of a token source.

    Subclasses set :attr:`n_rows` and implement :meth:`_segments` and :meth:`_positions`.
    """

    name: ClassVar[str]

    def __init__(self, source: TokenSource, *, length: int, split: str = "train") -> None:
        length, split = positive_int("length", length), text("split", split)
        fits_in_memory(f"a row of length {length:,}", (length + 1) * 8, fix="use a smaller length")
        self.source, self.length, self.split = source, length, split
        meta = source.meta
        if split not in meta.ranges:
            raise InputError(missing_range(split, meta.ranges, source.path), where=source.path)
        #: the source's padding id (never a real token), or None (e.g. a datatrove folder)
        self.pad_id: int | None = None if meta.pad_id is None else int(meta.pad_id)
        #: what padding positions hold in ``ids``: the padding id, else 0 (their labels are ignored)
        self.fill: int = 0 if self.pad_id is None else self.pad_id
        #: the label of a padding position: the padding id, else PyTorch's default ``-100``
        self.ignore_index: int = -100 if self.pad_id is None else self.pad_id
        span = meta.ranges[split]
        self.lo, self.hi = (int(v) for v in span.tokens)
        self.first_doc, self.last_doc = (int(v) for v in span.documents)
        if self.hi - self.lo < 2:
            raise InputError(f"the {split!r} range has {self.hi - self.lo} ids; a row needs at least 2", where=source.path)
        self.n_rows: int = 0

    # -- what callers use -------------------------------------------------------------------
    @property
    def options(self) -> dict[str, Any]:
        """The layout's own parameters beyond ``length`` and ``split`` (part of the fingerprint)."""
        return {}

    @property
    def fingerprint(self) -> dict[str, Any]:
        """The layout's parameters and the data's checksums: equal fingerprints, equal rows."""
        return {"layout": self.name, "length": self.length, "split": self.split, "options": self.options,
                "range": [self.lo, self.hi], "data": data_identity(self.source)}

    @property
    def stats(self) -> dict[str, float]:
        """What an epoch of this layout serves; see each layout."""
        return {}

    def rows(self, row_indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``row_indices`` as ``(ids, starts)``, both ``(n, length + 1)``.

        ``ids`` holds the source's ids (its dtype), padding being :attr:`fill`; ``starts`` is
        ``True`` where a segment begins (position 0, a document start, the first padding).

        Raises:
            IndexError: an index outside ``[0, n_rows)``.
        """
        ids, starts, _ = self.read(row_indices)
        assert starts is not None
        return ids, starts

    def read(self, row_indices: Any, *, starts: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """:meth:`rows`, and how many real ids each row holds before its padding (``int64``).

        With ``starts=False`` the segment-start mask is not computed and ``None`` comes in its
        place: a batch without boundary arrays does not pay for it.
        """
        ids, segments, real = self.segments(row_indices, starts=starts)
        return ids, None if segments is None else start_mask(ids.shape, segments), real

    def segments(self, row_indices: Any, *, starts: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """Rows ``row_indices`` as ``(ids, segment starts, real ids per row)``: what a batch is
        built from. The segment starts are the ascending flat indices into ``ids`` (``(n,
        length + 1)``) where :meth:`rows`' mask is ``True`` (``None`` with ``starts=False``).

        Raises:
            IndexError: an index outside ``[0, n_rows)``.
        """
        indices = np.asarray(row_indices, dtype=np.int64).reshape(-1)
        if kernels().outside(indices, self.n_rows):
            raise IndexError(f"row index outside [0, {self.n_rows})")
        return self._segments(indices, starts)

    def _segments(self, indices: np.ndarray, want_starts: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        raise NotImplementedError

    def positions(self, row_indices: Any) -> np.ndarray:
        """Where each id of rows ``row_indices`` comes from in the stream (``(n, length + 1)``
        ``int64``; ``-1`` for padding): what audits and tests count targets with."""
        indices = np.asarray(row_indices, dtype=np.int64).reshape(-1)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= self.n_rows):
            raise IndexError(f"row index outside [0, {self.n_rows})")
        return self._positions(indices)

    def _positions(self, indices: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def targets(self, row_indices: Any) -> np.ndarray:
        """How many targets (ids that are some position's label) each of rows ``row_indices``
        holds: its real ids but the first (``int64``)."""
        indices = np.asarray(row_indices, dtype=np.int64).reshape(-1)
        return np.maximum(self._real(indices) - 1, 0)

    def _real(self, indices: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def runs(self, row_indices: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stream runs rows ``row_indices`` are made of, in row and column order: for each
        run, the row it belongs to (an index into ``row_indices``), where it starts in the stream
        and how many ids it holds. A row's runs fill it from column 0; padding follows them.

        Raises:
            IndexError: an index outside ``[0, n_rows)``.
        """
        indices = np.asarray(row_indices, dtype=np.int64).reshape(-1)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= self.n_rows):
            raise IndexError(f"row index outside [0, {self.n_rows})")
        return self._runs(indices)

    def _runs(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def targets_within(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the stream positions ``[start, end)`` are targets (a row's ids but its first,
        real ids only): each row that holds some as targets, and the positions it holds,
        ``[first, last)``; rows in ascending order. Every position is covered once per epoch
        (``stream``, ``bestfit``) or at least once (``documents``), but a row's first id."""
        raise NotImplementedError

    @functools.cached_property
    def targets_per_epoch(self) -> int:
        """Targets in one epoch's rows (what :meth:`targets` sums to over every row)."""
        return int(self.targets(np.arange(self.n_rows)).sum())


class _ContiguousLayout(Layout):
    """A layout whose row ``j`` is the stream slice ``[origin_j, origin_j + length + 1)``,
    padded past the range's end; subclasses say where rows start (:meth:`origins`)."""

    def origins(self, indices: np.ndarray) -> np.ndarray:
        """Where rows ``indices`` start in the stream."""
        raise NotImplementedError

    def _real(self, indices: np.ndarray) -> np.ndarray:
        return np.minimum(self.length + 1, self.hi - self.origins(indices))

    def _positions(self, indices: np.ndarray) -> np.ndarray:
        positions = self.origins(indices)[:, None] + np.arange(self.length + 1)
        return np.where(positions < self.hi, positions, -1)

    def _runs(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        origins = self.origins(indices)
        return np.arange(len(indices)), origins, np.minimum(self.length + 1, self.hi - origins)

    def _rows_reaching(self, start: int, end: int) -> np.ndarray:
        """The rows (ascending) whose targets ``[origin + 1, origin + length + 1)`` meet ``[start, end)``."""
        raise NotImplementedError

    def targets_within(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        start, end = max(int(start), self.lo + 1), min(int(end), self.hi)
        rows = self._rows_reaching(start, end) if start < end else np.zeros(0, np.int64)
        origins = self.origins(rows)
        return rows, np.maximum(origins + 1, start), np.minimum(origins + self.length + 1, end)

    def _segments(self, indices: np.ndarray, want_starts: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        compiled = kernels()
        origins = self.origins(indices)
        width = self.length + 1
        n = len(origins)
        if isinstance(self.source, Pack):  # one flat array: each row one compiled run copy
            ids = np.empty((n, width), dtype=self.source.tokens.dtype)
            compiled.contiguous_gather(np.asarray(self.source.tokens), origins, width, self.hi, self.fill, ids)
        elif not n:  # (a source shorter than a row has no window view to index)
            ids = np.empty((0, width), dtype=self.source.meta.dtype)
        elif int(origins.max()) + width <= self.hi:  # one reduction decides the common case
            ids = self.source.gather_rows(origins, width)
        else:
            ids = np.full((n, width), self.fill, dtype=self.source.meta.dtype)
            whole = origins + width <= self.hi
            if whole.any():
                ids[whole] = self.source.gather_rows(origins[whole], width)
            for row in np.flatnonzero(~whole):  # at most a few rows per epoch reach the end
                keep = self.hi - int(origins[row])
                ids[row, :keep] = self.source.take(origins[row] + np.arange(keep))
        if not want_starts:
            return ids, None, np.minimum(width, self.hi - origins)
        real = np.empty(n, dtype=np.int64)
        segments = compiled.contiguous_segments(self._document_starts, origins, width, self.hi, real)
        return ids, segments, real

    @functools.cached_property
    def _document_starts(self) -> np.ndarray:
        return np.ascontiguousarray(self.source.starts, dtype=np.int64)


class StreamLayout(_ContiguousLayout):
    """Consecutive rows overlapping by one id (see the module docstring)."""

    name = "stream"

    def __init__(self, source: TokenSource, *, length: int, split: str = "train") -> None:
        super().__init__(source, length=length, split=split)
        self.n_rows = -(-(self.hi - self.lo - 1) // self.length)

    def origins(self, indices: np.ndarray) -> np.ndarray:
        """Where rows ``indices`` start in the stream."""
        return self.lo + np.asarray(indices, dtype=np.int64) * self.length

    def _rows_reaching(self, start: int, end: int) -> np.ndarray:
        # position p > lo is a target of row (p - lo - 1) // length alone
        return np.arange((start - self.lo - 1) // self.length, (end - 1 - self.lo - 1) // self.length + 1, dtype=np.int64)

    @property
    def stats(self) -> dict[str, float]:
        """``repetition`` (always 1.0) and ``padding_share`` of the positions of an epoch."""
        padding = self.n_rows * (self.length + 1) - (self.hi - self.lo) - (self.n_rows - 1)
        return {"repetition": 1.0, "padding_share": padding / (self.n_rows * (self.length + 1))}


class DocumentsLayout(_ContiguousLayout):
    """Rows at document starts and row-sized steps inside long documents (see the module docstring).

    The row index (16 bytes a document: its start and its first row) is built in one vectorized
    pass from the document starts; a row's origin is found by binary search over it.
    """

    name = "documents"

    def __init__(self, source: TokenSource, *, length: int, split: str = "train") -> None:
        super().__init__(source, length=length, split=split)
        starts = np.asarray(source.starts[self.first_doc : self.last_doc], dtype=np.int64)
        lengths = np.diff(np.append(starts, self.hi))
        # ceil(n / length) rows reach one id past the document, so its successor's first id is a target too.
        per_document = np.maximum(1, -(-lengths // self.length))
        self._first_row = np.cumsum(per_document) - per_document  # strictly increasing: every document has a row
        self._starts = starts
        self.n_rows = int(per_document.sum())

    def origins(self, indices: np.ndarray) -> np.ndarray:
        """Where rows ``indices`` start in the stream."""
        indices = np.asarray(indices, dtype=np.int64)
        document = np.searchsorted(self._first_row, indices, side="right") - 1
        return self._starts[document] + (indices - self._first_row[document]) * self.length

    @functools.cached_property
    def _all_origins(self) -> np.ndarray:
        """Every row's origin, ascending (rows follow the documents in stream order)."""
        return self.origins(np.arange(self.n_rows))

    def _rows_reaching(self, start: int, end: int) -> np.ndarray:
        # origin + 1 < end and origin + length + 1 > start: origin in [start - length, end - 2]
        first, last = np.searchsorted(self._all_origins, [start - self.length, end - 1])
        return np.arange(first, last, dtype=np.int64)

    @property
    def stats(self) -> dict[str, float]:
        """``repetition``: targets served per epoch over the range's targets (ids but the first);
        ``padding_share`` of the positions of an epoch."""
        served = self.targets_per_epoch
        return {"repetition": served / (self.hi - self.lo - 1),
                "padding_share": 1 - (served + self.n_rows) / (self.n_rows * (self.length + 1))}


class BestFitLayout(Layout):
    """Whole documents packed by best fit from a look-ahead buffer (see the module docstring).

    Each row takes the oldest waiting document first (so nothing waits more than ``lookahead``
    documents), then, while one fits, the longest waiting document that fits the space left.
    The index (the pieces in row order and the rows' offsets, about 16 bytes a document) is
    cached under ``<cache>/layouts/`` keyed by the data's checksums and the parameters; the file
    carries that key and a checksum of itself, and one that does not check out against the
    data's pieces is rebuilt, never served (see :func:`_load_index`).
    """

    name = "bestfit"

    def __init__(self, source: TokenSource, *, length: int, split: str = "train", lookahead: int = 1024,
                 cache: bool | str | Path = True) -> None:
        super().__init__(source, length=length, split=split)
        self.lookahead = positive_int("lookahead", lookahead)
        if not isinstance(cache, (bool, str, os.PathLike)):
            raise InputError(f"cache must be True, False or a folder, got {type(cache).__name__}")
        width = self.length + 1
        starts = np.ascontiguousarray(self.source.starts[self.first_doc : self.last_doc], dtype=np.int64)
        with held():  # boxing its tuple must not meet a pending Ctrl-C (tokpack._signals)
            piece_start, piece_len, self._cut = kernels().bestfit_pieces(starts, self.hi, width)
        key = _fingerprint_key(self.fingerprint)
        path = _cache_path(self.name, key, cache)
        found = None if path is None else _load_index(path, key, piece_len, width, self.lookahead)
        if found is None:
            order, self._row_ptr, self._moved = _best_fit(piece_len, width, self.lookahead)
            if path is not None:
                _save_index(path, key, order, self._row_ptr)
        else:
            order, self._row_ptr, self._moved = found
        self._piece_start = piece_start[order]
        self._piece_len = piece_len[order].astype(np.int32)
        self.n_rows = len(self._row_ptr) - 1

    @property
    def options(self) -> dict[str, Any]:
        return {"lookahead": self.lookahead}

    def _segments(self, indices: np.ndarray, want_starts: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        # Each row's pieces are copied as contiguous runs (one compiled loop) where the source is
        # one flat array; other sources gather the positions the same loop writes.
        compiled = kernels()
        width = self.length + 1
        real = np.empty(len(indices), dtype=np.int64)
        segments = compiled.bestfit_segments(self._piece_start, self._piece_len, self._row_ptr, indices, width, real)
        if isinstance(self.source, Pack):
            ids = np.empty((len(indices), width), dtype=self.source.tokens.dtype)
            compiled.bestfit_gather(np.asarray(self.source.tokens), self._piece_start, self._piece_len, self._row_ptr,
                           indices, width, self.fill, ids)
        else:
            positions = self._positions(indices)
            padding = positions < 0
            positions[padding] = self.lo  # any valid position: overwritten with the fill below
            ids = self.source.take(positions)
            ids[padding] = self.fill
        return ids, (segments if want_starts else None), real

    def _positions(self, indices: np.ndarray) -> np.ndarray:
        return kernels().bestfit_positions(self._piece_start, self._piece_len, self._row_ptr, indices, self.length + 1)

    def _real(self, indices: np.ndarray) -> np.ndarray:
        ends = np.concatenate([[0], np.cumsum(self._piece_len, dtype=np.int64)])
        return ends[self._row_ptr[indices + 1]] - ends[self._row_ptr[indices]]

    def _runs(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        first, last = self._row_ptr[indices], self._row_ptr[indices + 1]
        counts = last - first
        row = np.repeat(np.arange(len(indices)), counts)
        pieces = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        return row, self._piece_start[pieces], self._piece_len[pieces].astype(np.int64)

    @functools.cached_property
    def _pieces_by_start(self) -> np.ndarray:
        """The pieces (indices in row order) sorted by where they start in the stream."""
        return np.argsort(self._piece_start, kind="stable")

    @functools.cached_property
    def _piece_column(self) -> np.ndarray:
        """The column each piece starts at in its row."""
        ends = np.cumsum(self._piece_len, dtype=np.int64)
        rows = np.repeat(np.arange(self.n_rows), np.diff(self._row_ptr))
        return ends - self._piece_len - np.concatenate(([0], ends))[self._row_ptr[rows]]

    def targets_within(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = self._pieces_by_start
        starts = self._piece_start[order]
        # the pieces that meet [start, end): the one holding start, and those starting before end
        low = max(int(np.searchsorted(starts, start, side="right")) - 1, 0)
        high = int(np.searchsorted(starts, end, side="left"))
        pieces = order[low:high]
        piece_start = self._piece_start[pieces]
        first = np.maximum(piece_start + (self._piece_column[pieces] == 0), start)  # a row's first id is no target
        last = np.minimum(piece_start + self._piece_len[pieces], end)
        keep = first < last
        rows = np.searchsorted(self._row_ptr, pieces[keep], side="right") - 1
        by_row = np.argsort(rows, kind="stable")
        return rows[by_row], first[keep][by_row], last[keep][by_row]

    def row_starts(self, indices: Any) -> np.ndarray:
        """Where in the stream rows ``indices`` start (always a document start or a cut)."""
        return self._piece_start[self._row_ptr[np.asarray(indices, dtype=np.int64)]]

    @property
    def stats(self) -> dict[str, float]:
        """``padding_share`` of an epoch's positions; ``moved_share``: ids served ahead of
        an older document still waiting (picked from the look-ahead by best fit); ``cut_share``: ids in documents longer than a row (cut into
        ``length + 1``-id pieces, so each piece after the first loses its document's context);
        ``repetition`` (1.0: every id is served once, none is dropped)."""
        n_ids = self.hi - self.lo
        return {"repetition": 1.0, "padding_share": 1 - n_ids / (self.n_rows * (self.length + 1)),
                "moved_share": self._moved / n_ids, "cut_share": self._cut / n_ids}


def _best_fit(lengths: np.ndarray, width: int, lookahead: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Pack pieces (``lengths``, each in ``[1, width]``) into rows; return the pieces in row
    order, the row offsets into that order (``n_rows + 1`` of them, ``int64``) and the ids served
    ahead of an older waiting piece (moved).

    Each row is headed by the oldest waiting piece, then filled, while a piece fits, by the
    longest waiting piece that fits the space left (among equal lengths the oldest); before each
    row the buffer is topped up to ``lookahead`` waiting pieces.

    Why it is fast: waiting pieces of one length leave in age order (a row's head is the oldest
    of all, a fill the oldest of its length), so each length is a FIFO queue, and "the longest
    that fits" is the highest set bit at or below the space in a bit set whose bit ``L`` says a
    piece of length ``L`` waits: a few integer operations a piece, no sorted buffer, in one
    compiled loop (:func:`tokpack.serve.batch_kernels.best_fit_rows`). The oldest waiting piece is a
    pointer that only moves forward, and the moved ids are counted afterwards in one compiled
    pass (:func:`tokpack.serve.batch_kernels.bestfit_moved`, which also checks a cached packing). A
    full piece (``width`` ids) can only head a row: it joins no queue.
    """
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    with held():  # boxing its tuple must not meet a pending Ctrl-C (tokpack._signals)
        order, row_ends = kernels().best_fit_rows(lengths, int(width), int(lookahead))
    row_ptr = np.zeros(len(row_ends) + 1, dtype=np.int64)
    row_ptr[1:] = row_ends
    return order, row_ptr, int(kernels().bestfit_moved(order, row_ends, lengths, int(width), int(lookahead)))


def _fingerprint_key(fingerprint: dict[str, Any]) -> str:
    """The SHA-256 that names what a layout index is built from (the data and the parameters)."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def _cache_path(layout: str, key: str, cache: bool | str | Path) -> Path | None:
    """Where the index built from ``key`` is cached: named by the whole key it carries."""
    if cache is False:
        return None
    if cache is True:
        from tokpack._cache import default_cache_dir

        root = default_cache_dir() / LAYOUT_CACHE
    else:
        root = Path(cache)
    # The whole key: indexes of other arrays, named by its first 32 digits, are never opened
    # here, nor these by their readers, so installs sharing a cache do not fail on each other's.
    return root / f"{layout}-{key}.npz"


def _index_checksum(order: np.ndarray, row_ptr: np.ndarray, built_from: str) -> str:
    """The SHA-256 a cached index carries of itself: its two arrays and what it was built from."""
    digest = hashlib.sha256(built_from.encode())
    for array in (order, row_ptr):
        digest.update(np.ascontiguousarray(array, dtype="<i8").data)
    return digest.hexdigest()


def _save_index(path: Path, key: str, order: np.ndarray, row_ptr: np.ndarray) -> None:
    """Cache a bestfit index (the pieces in row order and the rows' offsets) with the key of what
    it was built from and its checksum.

    A unique temporary is renamed into place: ranks on several hosts may build the same index at
    once; each publishes whole, identical bytes. A cache that cannot be written is skipped.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(temporary, order=order, row_ptr=row_ptr, built_from=np.array(key),
                 checksum=np.array(_index_checksum(order, row_ptr, key)))
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):  # the cache may be a file, or read-only: nothing to clean
            temporary.unlink(missing_ok=True)


def _load_index(path: Path, key: str, lengths: np.ndarray, width: int,
                lookahead: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The cached index at ``path`` (the pieces in row order, the rows' offsets, and the ids
    moved ahead of older pieces), or ``None`` when there is none or it cannot be trusted, and so
    is rebuilt.

    Trusted only when it was built from ``key``, matches its own checksum, and describes a
    packing of exactly the pieces of ``lengths`` (what the data gives): each once, every row
    non-empty, within ``width`` ids, headed by the oldest piece still waiting and filled from the
    ``lookahead`` pieces waiting. The checksum
    has no key (anyone can recompute it), so what it could not catch is checked against the
    pieces; only the choice of fills within those rules is taken from the file.
    """
    try:
        with np.load(path, allow_pickle=False) as stored:
            order, row_ptr = stored["order"], stored["row_ptr"]
            built_from, checksum = str(stored["built_from"]), str(stored["checksum"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # missing, damaged, another format
        return None
    if (built_from != key or order.dtype != np.int64 or row_ptr.dtype != np.int64 or order.ndim != 1
            or row_ptr.ndim != 1 or len(row_ptr) < 2 or row_ptr[0] != 0
            or checksum != _index_checksum(order, row_ptr, built_from)):
        return None
    moved = int(kernels().bestfit_moved(order, row_ptr[1:], lengths, int(width), int(lookahead)))
    return None if moved < 0 else (order, row_ptr, moved)


#: Every layout by name: the one place a new layout is added.
LAYOUTS: dict[str, type[Layout]] = {"stream": StreamLayout, "documents": DocumentsLayout, "bestfit": BestFitLayout}


def make_layout(name: str, source: TokenSource | str | Path, *, length: int, split: str = "train",
                **options: Any) -> Layout:
    """The layout ``name`` over ``split`` of ``source`` (a token source or its directory).

    Options: ``bestfit`` takes ``lookahead`` (documents waiting, default 1024) and ``cache``
    (``True``: ``$TOKPACK_CACHE/layouts``; a folder; or ``False``).

    Raises:
        InputError: an unknown layout or option, a bad length, or no such range.
    """
    if not isinstance(name, str) or name not in LAYOUTS:
        raise InputError(f"unknown layout {name!r}", fix=f"use one of {', '.join(LAYOUTS)}")
    try:
        return LAYOUTS[name](open_source(source), length=length, split=split, **options)
    except TypeError as error:
        raise InputError(f"layout {name!r}: {error}") from None


__all__ = ["LAYOUTS", "BestFitLayout", "DocumentsLayout", "Layout", "StreamLayout", "data_identity", "make_layout",
           "open_source"]
