"""The training path: step ``k`` → the global batch → this rank's rows → arrays a model takes.

:class:`PackedBatches` serves a global batch of ``global_batch`` rows per step from one token
source or a :class:`Mixture` of several. Each part walks its layout's rows in a seeded
permutation per epoch and rolls into the next epoch inside a step, so no step is short. The
position is the rows each part has served, and the settings are a history of ``(step,
global_batch, weights)`` (:mod:`tokpack.serve.history`): the rows of step ``k`` depend only on
that history, the data, the layout and the seed (never on the world size): rank ``r`` of ``W``
takes rows ``[r*B/W, (r+1)*B/W)``. The global batch and the weights may change on a schedule
given up front or at a resume, and every part continues its permutation where it stopped. :class:`EvalBatches` walks a
validation range once, in order, every id a target exactly once across all ranks.

>>> from tokpack.serve.memory import pack_of_documents
>>> pack = pack_of_documents([list(range(1, 30)), [40, 41, 42]], n_vocab=50, pad_id=0)
>>> batches = PackedBatches(pack, length=4, global_batch=4, shuffle=False)
>>> batch = batches.batch(0)
>>> batch["input_ids"].tolist()[0], batch["labels"].tolist()[0]
([1, 2, 3, 4], [2, 3, 4, 5])
>>> PackedBatches(pack, length=4, global_batch=4, rank=1, world_size=2, shuffle=False).batch(0)["input_ids"].tolist()
[[9, 10, 11, 12], [13, 14, 15, 16]]
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationError

from tokpack import _checks as checks
from tokpack._schema import Record
from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.serve.history import History, Segment, batch_plan
from tokpack.serve.layouts import LAYOUTS, Layout, data_identity, kernels, make_layout, open_source, start_mask
from tokpack.serve.schedule import check_ids
from tokpack.store import TokenSource
from tokpack.vocab.identity import VocabIdentity

Data = TokenSource | str | Path
_DTYPES = {"int64": np.int64, "int32": np.int32}
#: The segment starts of a batch that asks for no boundary array.
_NO_SEGMENTS = np.empty(0, dtype=np.int64)


class Mixture:
    """Several token sources served together in proportion to their weights.

    Args:
        parts: ``[(data, weight), ...]``: a token source or its directory, and a positive weight
            (weights are normalized).
        seed: mixed into every part's shuffle and the order of rows inside a step.
        stages: ``[(start_step, [weight, ...]), ...]``: from ``start_step`` on, these weights
            (a curriculum); the first stage must start at step 0. Given stages replace the
            parts' own weights (which stay in the data schedule as given).
        names: what a loader state calls each part (default: its directory's name, with ``~2``,
            ``~3``... for a name met again). A resume matches parts by name: a part of the
            saved run that is missing here is removed (its position is kept), a new name is a
            part added.

    The rows each part gives step ``k`` follow from ``k`` and the weights alone: the running
    total of every part stays within one row of its exact share (``weight * global_batch *
    steps``, summed over stages).

    Raises:
        InputError: no parts, a weight that is not positive, malformed stages, or two parts of
            one name.
    """

    def __init__(self, parts: Sequence[tuple[Data, float]], *, seed: int = 0,
                 stages: Sequence[tuple[int, Sequence[float]]] | None = None,
                 names: Sequence[str] | None = None) -> None:
        if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence) or not parts:
            raise InputError(None, "a mixture needs at least one part: parts=[(data, weight), ...]")
        for index, part in enumerate(parts):
            if not isinstance(part, (tuple, list)) or len(part) != 2:
                raise InputError(None, f"mixture part {index} must be a (data, weight) pair, got {type(part).__name__}")
        self.parts = [(data, checks.finite_float(f"mixture weight {index}", weight))
                      for index, (data, weight) in enumerate(parts)]
        self.seed = checks.non_negative_int("seed", seed)
        weights = [weight for _, weight in self.parts]
        stage_list: list[tuple[int, list[float]]] = [(0, weights)]
        if stages:
            stage_list = []
            for index, stage in enumerate(stages):
                if not isinstance(stage, (tuple, list)) or len(stage) != 2 or not isinstance(stage[1], Sequence):
                    raise InputError(None, f"mixture stage {index} must be (start_step, [weight, ...])")
                start = checks.non_negative_int(f"mixture stage {index}'s start step", stage[0])
                stage_list.append((start, [checks.finite_float(f"mixture stage {index}'s weight {i}", w)
                                           for i, w in enumerate(stage[1])]))
        if stage_list[0][0] != 0 or any(b[0] <= a[0] for a, b in itertools.pairwise(stage_list)):
            raise InputError(None, "mixture stages must start at step 0 and increase",
                             fix="e.g. stages=[(0, [0.9, 0.1]), (1000, [0.5, 0.5])]")
        for start, stage_weights in stage_list:
            if len(stage_weights) != len(self.parts):
                raise InputError(None, f"mixture stage at step {start} has {len(stage_weights)} weights for {len(self.parts)} parts")
            if any(not math.isfinite(w) or w < 0 for w in stage_weights) or sum(stage_weights) <= 0:
                raise InputError(None, f"mixture weights must be non-negative with a positive sum, got {stage_weights}")
        if any(weight <= 0 for weight in weights) and not stages:
            raise InputError(None, f"mixture weights must be positive, got {weights}")
        # scaled by the largest weight first, so weights near the float limit (1e308) sum finitely
        self.stages = [(start, _normalized(ws)) for start, ws in stage_list]
        if names is not None:
            self.names: list[str] | None = [str(name) for name in names]
            if len(self.names) != len(self.parts) or len(set(self.names)) != len(self.names):
                raise InputError(None, f"mixture names {self.names} must be one distinct name a part")
        else:
            self.names = None

    def __len__(self) -> int:
        return len(self.parts)


def default_names(names: Sequence[str]) -> list[str]:
    """Names made distinct in order: the second ``a`` is ``a~2``.

    >>> default_names(["a", "b", "a"])
    ['a', 'b', 'a~2']
    """
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}~{seen[name]}")
    return out


class PartState(Record):
    """One part of a loader state: its name, its data's identity, and where it stands."""

    name: str
    data: dict[str, Any]
    #: rows served before the state's step, over all its epochs (epoch = rows // rows_per_epoch)
    rows: int = Field(ge=0)
    rows_per_epoch: int | None = Field(default=None, ge=0)
    #: targets served before the state's step (ids that were a label), over all its epochs
    tokens: int | None = Field(default=None, ge=0)
    #: the step the part joined the run (a part added at a resume: that step); the rows of a
    #: step are interleaved among the parts that had joined by then
    since: int = Field(default=0, ge=0)


class LoaderState(Record):
    """What :meth:`PackedBatches.state_dict` returns: enough to continue, and to refuse other data.

    ``parts`` lists every part the run has served, in the order they first appeared (a part
    removed at a resume stays, with weight 0); ``history`` the settings from step 0 on.
    """

    schema_: Literal["tokpack.loader.v3"] = Field(default="tokpack.loader.v3", alias="schema")
    step: int = Field(ge=0)
    seed: int
    #: the mixture's seed (``None``: a single source, shuffled as with 0)
    mixture_seed: int | None = None
    #: the global batch of ``step`` (the history has them all)
    global_batch: int = Field(ge=1)
    layout: dict[str, Any]
    parts: list[PartState] = Field(min_length=1)
    history: list[Segment] = Field(min_length=1)
    vocabulary: VocabIdentity


class LoaderStateV2(Record):
    """The loader state tokpack wrote before the history of settings (read, converted exactly)."""

    schema_: Literal["tokpack.loader.v2"] = Field(alias="schema")
    step: int = Field(ge=0)
    seed: int
    global_batch: int = Field(ge=1)
    layout: dict[str, Any]
    data: list[dict[str, Any]]
    mixture: dict[str, Any] | None = None
    part_rows: list[int] | None = None
    vocabulary: VocabIdentity

    def upgraded(self) -> LoaderState:
        """The same position as a v3 state: its stages become the history (none anchored)."""
        names = default_names([str(record.get("name")) for record in self.data])
        rows = self.part_rows if self.part_rows is not None else [self.step * self.global_batch]
        if len(rows) != len(self.data):
            raise InputError(None, "not a tokpack loader state (part_rows do not match its data)")
        stages: list[Any] = self.mixture["stages"] if self.mixture else [[0, [1.0]]]
        try:
            history = [Segment(step=int(start), global_batch=self.global_batch, weights=[float(w) for w in weights])
                       for start, weights in stages]
        except (TypeError, ValueError) as error:
            raise InputError(None, f"not a tokpack loader state (its mixture stages: {error})") from None
        return LoaderState(step=self.step, seed=self.seed, mixture_seed=self.mixture["seed"] if self.mixture else None,
                           global_batch=self.global_batch, layout=self.layout, vocabulary=self.vocabulary,
                           parts=[PartState(name=name, data=record, rows=count)
                                  for name, record, count in zip(names, self.data, rows)],
                           history=history)


class ServeSchedule(Record):
    """``data_schedule()``: which data, in which proportions and order, from which vocabulary.

    ``parts`` are every part the run has served (``removed`` for one no longer in it), each with
    its rows served, epochs and tokens (targets) seen at the loader's step; ``history`` the
    settings from step 0 on; ``stages`` the (normalized) weights in force from each step of the
    history, in the order of ``parts``; ``global_batch`` the rows of the loader's step; ``stats``
    each served part's layout statistics, in the loader's order.
    """

    schema_: Literal["tokpack.serve-schedule.v2"] = Field(default="tokpack.serve-schedule.v2", alias="schema")
    vocabulary: VocabIdentity
    parts: list[dict[str, Any]]
    stages: list[tuple[int, list[float]]]
    history: list[Segment]
    step: int
    seed: int
    shuffle: bool
    layout: dict[str, Any]
    global_batch: int
    length: int
    stats: list[dict[str, float]]
    extra: dict[str, Any] = Field(default_factory=dict)


class PackedBatches:
    """Training batches for one rank of a data-parallel run (see the module docstring).

    Args:
        data: a token source, its directory, or a :class:`Mixture`.
        layout: ``"stream"``, ``"documents"`` or ``"bestfit"`` (:data:`~tokpack.serve.layouts.LAYOUTS`).
        length: input ids per row (each row holds ``length + 1`` ids).
        global_batch: rows per step over all ranks; or a schedule ``[(0, 256), (2000, 512),
            ...]``: from each step on, that many rows (a warm-up as Megatron's ramp does; see
            :func:`~tokpack.serve.history.batch_ramp`).
        seed: fixes the shuffle of every epoch.
        rank, world_size: this process's share; ``world_size`` must divide every global batch.
        micro_batches: gradient-accumulation steps; must divide the rank's rows.
        split: the range to read.
        dtype: ``"int64"`` (default) or ``"int32"`` for ids, labels and positions.
        position_ids, cu_seqlens, document_ids: add these to each batch (see :meth:`batch`).
        shuffle: ``False`` serves each layout's rows in order (for inspection).
        layout_options: passed to the layout (``bestfit``: ``lookahead``, ``cache``).

    Raises:
        InputError: a bad argument; VocabularyMismatch: mixture parts of two vocabularies.
    """

    def __init__(self, data: Data | Mixture, *, layout: str = "stream", length: int,
                 global_batch: int | Sequence[tuple[int, int]], seed: int = 0, rank: int = 0, world_size: int = 1,
                 micro_batches: int = 1, split: str = "train", dtype: str = "int64", position_ids: bool = False,
                 cu_seqlens: bool = False, document_ids: bool = False, shuffle: bool = True,
                 layout_options: dict[str, Any] | None = None) -> None:
        self._arguments = {"layout": layout, "length": length, "global_batch": global_batch, "seed": seed,
                           "rank": rank, "world_size": world_size, "micro_batches": micro_batches, "split": split,
                           "dtype": dtype, "position_ids": position_ids, "cu_seqlens": cu_seqlens,
                           "document_ids": document_ids, "shuffle": shuffle, "layout_options": layout_options}
        self._data = data
        layout = checks.choice("layout", layout, LAYOUTS)
        length = checks.positive_int("length", length)
        world_size = checks.positive_int("world_size", world_size)
        micro_batches = checks.positive_int("micro_batches", micro_batches)
        seed = checks.non_negative_int("seed", seed)
        rank = checks.integer("rank", rank, low=0, high=world_size - 1)
        split, dtype = checks.text("split", split), checks.choice("dtype", dtype, _DTYPES)
        for flag, value in (("position_ids", position_ids), ("cu_seqlens", cu_seqlens),
                            ("document_ids", document_ids), ("shuffle", shuffle)):
            checks.boolean(flag, value)
        options = {} if layout_options is None else checks.mapping("layout_options", layout_options)
        self._batch_plan = batch_plan(global_batch)
        # a step's plan holds global_batch entries; a rank's batch about five arrays of its rows
        most = max(rows for _, rows in self._batch_plan)
        checks.fits_in_memory(f"a step of global_batch {most:,} rows of length {length:,}",
                              16 * most + 5 * 8 * (most // world_size) * (length + 1),
                              fix="use a smaller global_batch or length")
        for start, rows in self._batch_plan:
            if rows % world_size:
                raise InputError(None, f"world_size {world_size} does not divide global_batch {rows}"
                                 + (f" (from step {start})" if start else ""),
                                 fix=f"use a global_batch that is a multiple of {world_size} "
                                     f"(e.g. {-(-rows // world_size) * world_size}), or a world_size that divides it")
            if (rows // world_size) % micro_batches:
                raise InputError(None, f"micro_batches {micro_batches} does not divide the rank's {rows // world_size} rows"
                                 + (f" (from step {start})" if start else ""))
        if not 0 <= rank < world_size:
            raise InputError(None, f"rank {rank} outside [0, {world_size})")
        if dtype not in _DTYPES:
            raise InputError(None, f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        self.mixture = data if isinstance(data, Mixture) else None
        parts = data.parts if isinstance(data, Mixture) else [(data, 1.0)]
        self.sources = [open_source(part) for part, _ in parts]
        _check_one_vocabulary(self.sources)
        self.layouts: list[Layout] = [make_layout(layout, source, length=length, split=split, **options)
                                      for source in self.sources]
        self.layout_name, self.length = layout, int(length)
        self.seed, self.rank, self.world_size = int(seed), int(rank), int(world_size)
        self.micro_batch_count, self.split, self.dtype = int(micro_batches), split, np.dtype(_DTYPES[dtype])
        self.want_positions, self.want_cu_seqlens, self.want_documents = position_ids, cu_seqlens, document_ids
        self.shuffle = shuffle
        self.vocabulary: VocabIdentity = self.sources[0].vocabulary
        self.n_vocab = self.vocabulary.n_vocab
        self.ignore_index: int = self.layouts[0].ignore_index
        given = self.mixture.names if self.mixture is not None else None
        #: what a loader state calls each of this loader's parts
        self.names: list[str] = given or default_names([str(data_identity(s)["name"]) for s in self.sources])
        # Parts as the history numbers them (in the order they first appeared): this loader's own
        # parts at first; a loaded state may add parts it no longer serves and renumber these.
        self._slots: list[PartState] = [PartState(name=name, data=record, rows=0, rows_per_epoch=layout.n_rows)
                                        for name, record, layout in zip(self.names, self._data_records(), self.layouts)]
        self._local: list[int | None] = list(range(len(self.layouts)))  # slot -> this loader's part (None: removed)
        self._mixed_from = 0 if len(self._slots) > 1 else None  # the first step that interleaves parts
        self._history = History(self._planned(0))
        self._permutations: dict[tuple[int, int], np.ndarray] = {}
        self.step = 0

    # -- the settings -------------------------------------------------------------------------
    @property
    def global_batch(self) -> int:
        """Rows of the global batch at :attr:`step`."""
        return self._history.global_batch(self.step)

    def global_batch_at(self, step: int) -> int:
        """Rows of the global batch of step ``step`` (over all ranks)."""
        return self._history.global_batch(_check_step(step))

    def _planned(self, first: int, numbering: list[int | None] | None = None) -> list[Segment]:
        """This loader's own settings (its global batch schedule and mixture stages) from step
        ``first`` on, over the parts as numbered now (or by ``numbering``: slot -> this loader's
        part); merged where nothing changes."""
        numbering = self._local if numbering is None else numbering
        stages = self.mixture.stages if self.mixture is not None else [(0, np.ones(1))]
        points = sorted({first} | {s for s, _ in self._batch_plan if s > first} | {s for s, _ in stages if s > first})
        segments: list[Segment] = []
        for point in points:
            rows = self._batch_plan[bisect.bisect_right([s for s, _ in self._batch_plan], point) - 1][1]
            local = stages[bisect.bisect_right([s for s, _ in stages], point) - 1][1]
            weights = [0.0 if part is None else float(local[part]) for part in numbering]
            if segments and (segments[-1].global_batch, segments[-1].weights) == (rows, weights):
                continue
            segments.append(Segment(step=point, global_batch=rows, weights=weights))
        return segments

    # -- the schedule -----------------------------------------------------------------------
    def _order(self, slot: int, epoch: int) -> np.ndarray | None:
        if not self.shuffle:
            return None
        key = (slot, epoch)
        if key not in self._permutations:
            if len(self._permutations) >= 4 * len(self.layouts):  # keep a few epochs, not all
                self._permutations.pop(next(iter(self._permutations)))
            rng = np.random.default_rng([self.seed, self._mixture_seed, slot, epoch])
            local = self._local[slot]
            assert local is not None
            self._permutations[key] = rng.permutation(self.layouts[local].n_rows)
        return self._permutations[key]

    @property
    def _mixture_seed(self) -> int:
        return self.mixture.seed if self.mixture is not None else 0

    def _plan(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Step ``step``'s global rows as (part, layout row) pairs, in global-batch order."""
        step = _check_step(step)
        before = self._history.before(step)
        counts = self._history.counts(step, before)
        parts, rows = [], []
        for slot, (first, count) in enumerate(zip(before, counts)):
            if not count:
                continue
            part = self._local[slot]
            if part is None:  # only a step before the resume that removed it
                raise InputError(None, f"step {step} served part {self._slots[slot].name!r}, which this loader does "
                                 "not serve (it was removed at a resume)", fix="add it back to serve that step")
            n_rows = self.layouts[part].n_rows
            epoch = first // n_rows
            if (first + count - 1) // n_rows == epoch:  # nearly every step lies inside one epoch
                offset = first - epoch * n_rows
                order = self._order(slot, epoch)
                chosen = np.arange(offset, offset + count, dtype=np.int64) if order is None else order[offset : offset + count]
            else:
                served = np.arange(first, first + count, dtype=np.int64)
                epochs, positions = np.divmod(served, n_rows)
                chosen = positions.copy()
                for epoch in np.unique(epochs).tolist():  # a step may span several epochs of a small part
                    order = self._order(slot, epoch)
                    if order is not None:
                        inside = epochs == epoch
                        chosen[inside] = order[positions[inside]]
            parts.append(np.full(count, part, dtype=np.int64))
            rows.append(chosen)
        part_of, row_of = (parts[0], rows[0]) if len(parts) == 1 else (np.concatenate(parts), np.concatenate(rows))
        if self._mixed_from is not None and step >= self._mixed_from:  # interleave the parts, so every rank sees the mixture
            mixing = np.random.default_rng([self.seed, self._mixture_seed, step, 1]).permutation(len(part_of))
            part_of, row_of = part_of[mixing], row_of[mixing]
        return part_of, row_of

    def _gather(self, part_of: np.ndarray, row_of: np.ndarray, *, starts: bool = True,
                check: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """The rows, their segment starts (flat, ascending; ``None`` with ``starts=False``) and
        real lengths; ``check``: the ids are checked against the vocabulary here (else the
        caller checks the largest id it meets)."""
        if len(self.layouts) == 1:  # the common case: no per-part split, no copies
            ids, segments, real = self.layouts[0].segments(row_of, starts=starts)
            if check:
                check_ids(ids, self.sources[0])  # one reduction guards every batch
            return ids, segments, real
        width = self.length + 1
        ids = np.empty((len(part_of), width), dtype=self.sources[0].meta.dtype)
        pieces: list[np.ndarray] = []
        real = np.empty(len(part_of), dtype=np.int64)
        for part in np.unique(part_of).tolist():  # one gather per part
            chosen = np.flatnonzero(part_of == part)
            part_ids, part_segments, real[chosen] = self.layouts[part].segments(row_of[chosen], starts=starts)
            check_ids(part_ids, self.sources[part])  # one reduction guards every batch
            ids[chosen] = part_ids
            if part_segments is not None:  # renumber the part's rows to their places in the batch
                rows, columns = np.divmod(part_segments, width)
                pieces.append(chosen[rows] * width + columns)
        segments = np.sort(np.concatenate(pieces)) if starts and pieces else (_NO_SEGMENTS if starts else None)
        return ids, segments, real

    def global_rows(self, step: int) -> np.ndarray:
        """All ``global_batch`` rows of step ``step`` (``(global_batch, length + 1)``, the source's
        dtype), the same for every world size."""
        return self._gather(*self._plan(step), starts=False)[0]

    def _rank_segments(self, step: int, *, starts: bool, check: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        part_of, row_of = self._plan(step)
        share, rest = divmod(len(part_of), self.world_size)
        if rest or share % self.micro_batch_count:  # only a step from a loaded history can be
            raise InputError(None, f"step {step}'s global batch of {len(part_of)} rows does not split into "
                             f"{self.world_size} ranks of {self.micro_batch_count} micro-batches (it was served "
                             "before a resume that changed them)", fix="serve it with the world size it had")
        mine = slice(self.rank * share, (self.rank + 1) * share)
        return self._gather(part_of[mine], row_of[mine], starts=starts, check=check)

    def rank_rows(self, step: int, *, starts: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """This rank's rows of step ``step``, their segment-start mask (``None`` with
        ``starts=False``) and real lengths (see :meth:`Layout.read`)."""
        ids, segments, real = self._rank_segments(step, starts=starts)
        return ids, None if segments is None else start_mask(ids.shape, segments), real

    @property
    def _want_boundaries(self) -> bool:
        return bool(self.want_positions or self.want_cu_seqlens or self.want_documents)

    # -- what a batch carries -----------------------------------------------------------------
    def batch(self, step: int) -> dict[str, Any]:
        """This rank's batch of step ``step``.

        ``input_ids`` and ``labels`` (``(rows, length)``, contiguous, ``dtype``): labels are the
        inputs moved one id on; padding is the pad id, which is :attr:`ignore_index`. On request:
        ``position_ids`` (0 at every row and document start), ``document_ids`` (the segment of
        each position within its row, from 0; padding is a segment of its own), ``cu_seqlens``
        (``int32``: the segments' boundaries over the flattened rows, for varlen attention) and
        ``max_seqlen`` (the longest segment).
        """
        single = len(self.layouts) == 1  # its ids are checked by the assembly's own pass
        ids, segments, real = self._rank_segments(step, starts=self._want_boundaries, check=not single)
        batch, largest = self._assemble(ids, segments, real)
        if single and largest >= self.n_vocab:
            check_ids(ids, self.sources[0])  # raises, naming the source
        return batch

    def micro_batches(self, step: int) -> list[dict[str, Any]]:
        """This rank's batch of step ``step`` split into ``micro_batches`` equal parts, in order."""
        ids, segments, real = self._rank_segments(step, starts=self._want_boundaries)
        size = len(ids) // self.micro_batch_count
        width = self.length + 1
        out = []
        for i in range(self.micro_batch_count):
            part = slice(i * size, (i + 1) * size)
            part_segments = None
            if segments is not None:  # the part's segment starts, renumbered from its first row
                lo, hi = np.searchsorted(segments, [i * size * width, (i + 1) * size * width])
                part_segments = segments[lo:hi] - i * size * width
            out.append(self._assemble(ids[part], part_segments, real[part])[0])
        return out

    def _assemble(self, ids: np.ndarray, segments: np.ndarray | None, real: np.ndarray) -> tuple[dict[str, Any], int]:
        return assemble_segments(ids, segments, real, dtype=self.dtype, position_ids=self.want_positions,
                                 cu_seqlens=self.want_cu_seqlens, document_ids=self.want_documents,
                                 ignore_index=self.ignore_index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Batches from :attr:`step` on, forever; :attr:`step` counts the batches handed out."""
        while True:
            batch = self.batch(self.step)
            self.step += 1
            yield batch

    # -- what a run keeps -------------------------------------------------------------------------
    def repeats(self, step: int | None = None) -> list[dict[str, Any]]:
        """Per part, before ``step`` (default: :attr:`step`): its ``name``, ``rows`` served, whole
        ``epochs`` completed, ``rows_per_epoch``, ``tokens`` (targets: ids that were a label)
        and ``weight`` (normalized, at ``step``), in the order of the state's ``parts`` and
        ``history`` (the order the parts first appeared); a part the run served before and no
        longer does is ``removed``."""
        step = self.step if step is None else _check_step(step)
        before = self._history.before(step)
        weights = self._history.weights(step)
        out: list[dict[str, Any]] = []
        for slot in range(len(self._slots)):
            part, record, rows = self._local[slot], self._slots[slot], int(before[slot])
            per_epoch = self.layouts[part].n_rows if part is not None else record.rows_per_epoch
            entry: dict[str, Any] = {"name": record.name, "rows": rows, "rows_per_epoch": per_epoch,
                                     "epochs": rows // per_epoch if per_epoch else None,
                                     "tokens": self._tokens(slot, rows), "weight": float(weights[slot])}
            if part is None:
                entry["removed"] = True
            out.append(entry)
        return out

    def _tokens(self, slot: int, rows: int) -> int | None:
        """Targets in the first ``rows`` rows a part served (whole epochs, then its permutation's head)."""
        part = self._local[slot]
        if part is None:  # not served since the state that recorded it
            return self._slots[slot].tokens
        layout = self.layouts[part]
        epochs, offset = divmod(rows, layout.n_rows)
        total = epochs * layout.targets_per_epoch
        if offset:
            order = self._order(slot, epochs)
            head = np.arange(offset, dtype=np.int64) if order is None else order[:offset]
            total += int(layout.targets(head).sum())
        return int(total)

    def _layout_record(self) -> dict[str, Any]:
        layout = self.layouts[0]
        return {"layout": layout.name, "length": self.length, "split": self.split, "options": layout.options,
                "shuffle": self.shuffle}

    def _data_records(self) -> list[dict[str, Any]]:
        return [{**data_identity(source), "range": [layout.lo, layout.hi]}
                for source, layout in zip(self.sources, self.layouts)]

    def _part_states(self, step: int) -> list[PartState]:
        before = self._history.before(step)
        return [record.model_copy(update={"rows": int(rows), "tokens": self._tokens(slot, int(rows))})
                for slot, (record, rows) in enumerate(zip(self._slots, before))]

    def state_dict(self) -> dict[str, Any]:
        """Where the next batch comes from (PyTorch's ``Stateful``): the step, the rows each part
        served (and its data's identity and checksums), the history of settings (global batch
        and weights), the seeds, the layout and the vocabulary's identity.

        :func:`tokpack.require_vocabulary` accepts it (and a checkpoint holding it as ``"loader"``).
        """
        state = LoaderState(step=self.step, seed=self.seed, mixture_seed=self.mixture.seed if self.mixture else None,
                            global_batch=self.global_batch, layout=self._layout_record(),
                            parts=self._part_states(self.step), history=self._history.segments,
                            vocabulary=self.vocabulary)
        return state.model_dump(mode="json", by_alias=True)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at the step ``state`` was saved at (any rank count may have saved it), where
        each part stopped in its permutation.

        Settings may change here: this loader's global batch (or schedule) and weights (or
        stages) take effect from the saved step on, when they differ from what the saved run
        planned; a part of a new name is added (it starts its first epoch), a saved part whose
        name this loader lacks is removed (kept in the state, so adding it back continues it).
        A state saved by tokpack before the history of settings (``tokpack.loader.v2``) loads
        exactly.

        Raises:
            VocabularyMismatch: ``state`` was saved over another vocabulary.
            IntegrityError: ``state`` was saved over other data for a part that continues
                (checksums or range differ).
            InputError: not a loader state, or another seed, mixture seed, layout, length,
                split or shuffle.
        """
        saved = _parse_state(state)
        if (saved.vocabulary.sha256, saved.vocabulary.n_vocab) != (self.vocabulary.sha256, self.vocabulary.n_vocab):
            raise VocabularyMismatch(None, f"loader state was saved over vocabulary {saved.vocabulary.scheme}:"
                                     f"{saved.vocabulary.short} (n_vocab {saved.vocabulary.n_vocab}); this loader serves "
                                     f"{self.vocabulary.scheme}:{self.vocabulary.short} (n_vocab {self.n_vocab})")
        mixture_seed = self.mixture.seed if self.mixture is not None else None
        if saved.seed != self.seed:
            raise InputError(None, f"loader state has seed {saved.seed}, this loader {self.seed}: another seed is "
                             "another order of every epoch", fix="resume with the seed of the saved run")
        if (saved.mixture_seed or 0) != (mixture_seed or 0):
            raise InputError(None, f"loader state has mixture seed {saved.mixture_seed}, this loader {mixture_seed}",
                             fix="resume with the Mixture(seed=...) of the saved run")
        mine = self._layout_record()
        for key in ("layout", "length", "split", "options", "shuffle"):
            if saved.layout.get(key) != mine[key]:
                raise InputError(None, f"loader state has {_SETTING[key]} {saved.layout.get(key)!r}, this loader "
                                 f"{mine[key]!r}: each part's position is a row of its layout, which another "
                                 f"{key} numbers differently", fix=f"resume with the {key} of the saved run")
        records = self._data_records()
        keys = ("tokens_sha256", "starts_sha256", "range")
        if self.mixture is None and saved.mixture_seed is None and len(saved.parts) == 1:
            matched = {0: 0}  # one source continues another, whatever its folder is called
        else:
            matched = _match_parts(saved.parts, self.names, records, keys)
        for local, slot in matched.items():
            theirs = saved.parts[slot]
            if [theirs.data.get(k) for k in keys] != [records[local][k] for k in keys]:
                raise IntegrityError(None, f"loader state was saved over other data for part {theirs.name!r}: "
                                     + _difference(theirs.data, records[local]),
                                     fix="serve the same ids under that name, or give it another name (Mixture(names=...)) "
                                         "to add it as a new part")
        if not matched and self.mixture is None:
            raise IntegrityError(None, f"loader state was saved over other data: {_names([p.data for p in saved.parts])}; "
                                 f"this loader serves {_names(records)}")
        # The parts as the saved history numbers them, then this loader's new ones.
        slots = list(saved.parts)
        local_of: list[int | None] = [None] * len(slots)
        for local, slot in matched.items():
            local_of[slot] = local
            slots[slot] = slots[slot].model_copy(update={"name": self.names[local], "data": records[local],
                                                         "rows_per_epoch": self.layouts[local].n_rows})
        for local in range(len(self.layouts)):
            if local not in matched:
                local_of.append(local)
                slots.append(PartState(name=self.names[local], data=records[local], rows=0,
                                       rows_per_epoch=self.layouts[local].n_rows, since=saved.step))
        added = len(slots) - len(saved.parts)
        _distinct_removed_names(slots, local_of)
        step = saved.step
        past = [segment.model_copy(update={"weights": segment.weights + [0.0] * added,
                                           "anchor": None if segment.anchor is None else segment.anchor + [0] * added})
                for segment in saved.history]
        rows = [part.rows for part in saved.parts] + [0] * added
        planned = self._planned(step, local_of)
        if _same_future(past, planned, step):
            history = past
        else:  # the settings change here: the shares count from the rows each part served
            history = [segment for segment in past if segment.step < step]
            history += [planned[0].model_copy(update={"anchor": rows}), *planned[1:]]
        checked = History(history)
        checked.remember(step, rows)
        # nothing is changed before every check passed: a refused state leaves the loader as it was
        joined = sorted(slot.since for slot in slots)
        self._slots, self._local, self._history = slots, local_of, checked
        self._mixed_from = joined[1] if len(joined) > 1 else None
        self._permutations.clear()
        self.step = step

    def data_schedule(self, **extra: Any) -> dict[str, Any]:
        """The record a run keeps with its checkpoints (``run=...`` and other keywords go under
        ``extra``): every part with its weight and position, the history of settings, the
        layout; :func:`tokpack.require_vocabulary` accepts it."""
        given = [w for _, w in self.mixture.parts] if self.mixture is not None else [1.0]
        served = {entry["name"]: entry for entry in self.repeats()}
        parts = []
        for slot, record in enumerate(self._slots):
            part = self._local[slot]
            entry = {**record.data, "name": record.name, "weight": given[part] if part is not None else 0.0,
                     **{k: served[record.name][k] for k in ("rows", "epochs", "rows_per_epoch", "tokens")}}
            if part is None:
                entry["removed"] = True
            parts.append(entry)
        # The weights in force from each step of the history, in the parts' order (a resume's
        # new weights from its step, not from 0).
        stages: list[tuple[int, list[float]]] = []
        for segment in self._history.segments:
            total = sum(segment.weights) or 1.0
            weights = [w / total for w in segment.weights]
            if not stages or not np.allclose(stages[-1][1], weights, rtol=0, atol=1e-12):
                stages.append((segment.step, weights))
        schedule = ServeSchedule(vocabulary=self.vocabulary, parts=parts, stages=stages, history=self._history.segments,
                                 step=self.step, seed=self.seed, shuffle=self.shuffle, layout=self._layout_record(),
                                 global_batch=self.global_batch, length=self.length, stats=self.stats, extra=extra)
        return schedule.model_dump(mode="json", by_alias=True)

    @property
    def stats(self) -> list[dict[str, float]]:
        """Each part's layout statistics (repetition, padding, moved and cut shares) and, at
        :attr:`step`, its ``rows`` served, ``epochs`` completed and ``tokens`` (targets) seen; in
        this loader's order of parts (:attr:`names`)."""
        served = {entry["name"]: entry for entry in self.repeats()}
        return [{**layout.stats, **{k: float(served[self._slots[self._local.index(part)].name][k])
                                    for k in ("rows", "epochs", "tokens")}}
                for part, layout in enumerate(self.layouts)]

    def __getstate__(self) -> dict[str, Any]:
        # Sent to spawned loader workers: directories, not mapped streams, where the data has one;
        # and the loader state, whose history the arguments alone may not give.
        def portable(data: Any) -> Any:
            return str(data.path) if type(data).__name__ in ("Pack", "ShardedDataset") else data
        data = self._data
        if isinstance(data, Mixture):
            data = Mixture([(portable(p), w) for p, w in data.parts], seed=data.seed,
                           stages=[(s, ws.tolist()) for s, ws in data.stages], names=data.names)
        else:
            data = portable(data)
        return {"data": data, "arguments": self._arguments, "state": self.state_dict()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["data"], **state["arguments"])  # type: ignore[misc]
        self.load_state_dict(state["state"])


class EvalBatches:
    """One pass over ``split``, in order: every id but the range's first is a target exactly once
    across all ranks; the last steps are padded (labels = :attr:`ignore_index`), never repeated.

    Every rank yields the same number of batches, so collective calls stay matched. Step ``k``
    gives rank ``r`` the ``batch_size`` rows from ``(k * world_size + r) * batch_size``.
    ``position_ids``, ``cu_seqlens`` and ``document_ids`` add the same arrays as
    :meth:`PackedBatches.batch` (built by the same :func:`assemble_segments`).

    >>> from tokpack.serve.memory import pack_of_documents
    >>> pack = pack_of_documents([[1, 2, 3], [4, 5, 6, 7, 8]], n_vocab=9, pad_id=0, train_documents=1)
    >>> [b["labels"].tolist() for b in EvalBatches(pack, length=2, batch_size=1)]
    [[[5, 6]], [[7, 8]]]
    """

    def __init__(self, data: Data, *, length: int, batch_size: int, rank: int = 0, world_size: int = 1,
                 split: str = "validation", dtype: str = "int64", position_ids: bool = False,
                 cu_seqlens: bool = False, document_ids: bool = False) -> None:
        batch_size, length = checks.positive_int("batch_size", batch_size), checks.positive_int("length", length)
        world_size = checks.positive_int("world_size", world_size)
        rank = checks.integer("rank", rank, low=0, high=world_size - 1)
        checks.choice("dtype", dtype, _DTYPES)
        for flag, value in (("position_ids", position_ids), ("cu_seqlens", cu_seqlens), ("document_ids", document_ids)):
            checks.boolean(flag, value)
        checks.fits_in_memory(f"a batch of batch_size {batch_size:,} rows of length {length:,}",
                              5 * 8 * batch_size * (length + 1), fix="use a smaller batch_size or length")
        self.layout = make_layout("stream", data, length=length, split=split)
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self.dtype = np.dtype(_DTYPES[dtype])
        self.want_positions, self.want_cu_seqlens, self.want_documents = position_ids, cu_seqlens, document_ids
        self.ignore_index = self.layout.ignore_index
        self.n_vocab = self.layout.source.vocabulary.n_vocab

    def __len__(self) -> int:
        return max(0, -(-self.layout.n_rows // (self.batch_size * self.world_size)))

    def batch(self, step: int) -> dict[str, Any]:
        """Rank :attr:`rank`'s rows of step ``step`` (rows past the range are all padding): the
        arrays of :meth:`PackedBatches.batch`, boundary arrays included when asked for (a row of
        padding is one segment).

        Raises:
            InputError: ``step`` is not a non-negative integer, or is past the last step
                (``len(self)``): a batch there would be all padding, silently.
        """
        step = checks.non_negative_int("step", step)
        count = len(self)
        if step >= count:
            raise InputError(None, f"step {step} is past the end: there are {count} batches",
                             fix=f"use a step from 0 to {count - 1}, or iterate over the EvalBatches" if count
                             else "the range is empty; nothing to evaluate")
        first = (step * self.world_size + self.rank) * self.batch_size
        rows = np.arange(first, first + self.batch_size)
        real = rows[rows < self.layout.n_rows]
        width = self.layout.length + 1
        ids = np.full((self.batch_size, width), self.layout.fill, dtype=self.layout.source.meta.dtype)
        want_starts = bool(self.want_positions or self.want_cu_seqlens or self.want_documents)
        lengths = np.zeros(self.batch_size, dtype=np.int64)  # rows past the range: all padding
        segments = _NO_SEGMENTS
        if len(real):
            part_ids, part_segments, lengths[: len(real)] = self.layout.segments(real, starts=want_starts)
            ids[: len(real)] = part_ids
            if part_segments is not None:
                segments = part_segments
            check_ids(ids, self.layout.source)
        if want_starts and len(real) < self.batch_size:  # a row of padding is one segment
            segments = np.concatenate([segments, np.arange(len(real), self.batch_size, dtype=np.int64) * width])
        return assemble_segments(ids, segments if want_starts else None, lengths, dtype=self.dtype,
                                 position_ids=self.want_positions, cu_seqlens=self.want_cu_seqlens,
                                 document_ids=self.want_documents, ignore_index=self.ignore_index)[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for step in range(len(self)):
            yield self.batch(step)


def assemble(ids: np.ndarray, starts: np.ndarray | None, *, dtype: np.dtype, position_ids: bool = False,
             cu_seqlens: bool = False, document_ids: bool = False, real: np.ndarray | None = None,
             ignore_index: int | None = None) -> dict[str, Any]:
    """Rows of ``length + 1`` ids and their segment-start mask → the arrays a model takes.

    With ``real`` (real ids per row) and ``ignore_index``, labels of padding become
    ``ignore_index`` (needed where the source has no padding id of its own). ``starts`` may be
    ``None`` when no boundary array is asked for; column 0 always starts a segment, whatever
    ``starts`` says. (:func:`assemble_segments` takes the segment starts as a flat list.)

    >>> ids = np.array([[5, 6, 7, 8, 0]]); starts = np.array([[True, False, True, False, True]])
    >>> batch = assemble(ids, starts, dtype=np.dtype(np.int64), position_ids=True, cu_seqlens=True, document_ids=True)
    >>> batch["position_ids"].tolist(), batch["document_ids"].tolist(), batch["cu_seqlens"].tolist(), batch["max_seqlen"]
    ([[0, 1, 0, 1]], [[0, 0, 1, 1]], [0, 2, 4], 2)
    """
    segments = None
    if position_ids or cu_seqlens or document_ids:
        if starts is None:
            raise ValueError("assemble: boundary arrays need the segment starts")
        segments = np.flatnonzero(starts)
    if real is None or ignore_index is None:
        real, ignore_index = None, 0
    return assemble_segments(ids, segments, real, dtype=dtype, position_ids=position_ids, cu_seqlens=cu_seqlens,
                             document_ids=document_ids, ignore_index=ignore_index)[0]


def assemble_segments(ids: np.ndarray, segments: np.ndarray | None, real: np.ndarray | None, *, dtype: np.dtype,
                      ignore_index: int, position_ids: bool = False, cu_seqlens: bool = False,
                      document_ids: bool = False) -> tuple[dict[str, Any], int]:
    """:func:`assemble` from the segment starts as ascending flat indices into ``ids`` (``(n,
    length + 1)``), as layouts hand them over (:meth:`Layout.segments`); ``real=None``: no
    padding to ignore. Returns the batch and the largest id of ``ids`` (for the vocabulary
    check, at no extra pass).

    One compiled pass (:func:`tokpack.serve.compiled.fill_batch`) writes every array in its
    final dtype: ``input_ids``, ``labels``, and on request ``position_ids``, ``document_ids``,
    ``cu_seqlens`` (``int32``) and ``max_seqlen``.
    """
    # Each numpy call costs about a microsecond on a batch this size: only the needed ones.
    if not ids.flags.c_contiguous:
        ids = np.ascontiguousarray(ids)
    n, width = ids.shape
    length = width - 1
    dtype = np.dtype(dtype)
    want = bool(position_ids or cu_seqlens or document_ids)
    if want and segments is None:
        raise ValueError("assemble: boundary arrays need the segment starts")
    input_ids = np.empty((n, length), dtype=dtype)
    labels = np.empty((n, length), dtype=dtype)
    positions = np.empty((n, length), dtype=dtype) if position_ids else np.empty((0, 0), dtype=dtype)
    documents = np.empty((n, length), dtype=dtype) if document_ids else positions[:0, :0]
    flat = _NO_SEGMENTS
    if want and segments is not None:
        flat = segments if segments.dtype == np.int64 else segments.astype(np.int64)
    bounds = np.empty(len(flat) + n + 1, dtype=np.int32)  # at most one segment more a row (column 0)
    real = np.full(n, width, dtype=np.int64) if real is None else np.asarray(real, dtype=np.int64)
    count, longest, largest = kernels().fill_batch(ids, flat, real, int(ignore_index), input_ids, labels, positions, documents,
                                         bounds, bool(position_ids), bool(document_ids), want)
    batch: dict[str, Any] = {"input_ids": input_ids, "labels": labels}
    if position_ids:
        batch["position_ids"] = positions
    if document_ids:
        batch["document_ids"] = documents
    if cu_seqlens:
        batch["cu_seqlens"] = bounds[: count + 1]
        batch["max_seqlen"] = int(longest)
    return batch, int(largest)



def boundaries(starts: np.ndarray, *, dtype: np.dtype, position_ids: bool = True, cu_seqlens: bool = True,
               document_ids: bool = True) -> dict[str, Any]:
    """``position_ids``, ``document_ids`` (``(rows, length)``, ``dtype``), ``cu_seqlens`` (``int32``)
    and ``max_seqlen`` from the ``(rows, length)`` segment-start mask of the inputs (column 0
    counts as a start whatever it holds)."""
    n, length = starts.shape
    grid = np.zeros((n, length + 1), dtype=bool)
    grid[:, :-1] = starts
    batch, _ = assemble_segments(np.zeros((n, length + 1), dtype=np.int64), np.flatnonzero(grid), None, dtype=dtype,
                                 ignore_index=0, position_ids=position_ids, cu_seqlens=cu_seqlens,
                                 document_ids=document_ids)
    del batch["input_ids"], batch["labels"]
    return batch


#: How a loader state's layout record is named in a message.
_SETTING = {"layout": "layout", "length": "length", "split": "split", "options": "layout options", "shuffle": "shuffle"}


def _match_parts(saved: list[PartState], names: list[str], records: list[dict[str, Any]],
                 keys: tuple[str, ...]) -> dict[int, int]:
    """This loader's part -> the saved part it continues: the saved part of the same ids
    (checksums and range; of the same name first, where several hold those ids), else the saved
    part of its name (whose data the caller then checks)."""
    matched: dict[int, int] = {}
    taken: set[int] = set()
    identity = [[part.data.get(k) for k in keys] for part in saved]
    for local, record in enumerate(records):
        same = [slot for slot, ids in enumerate(identity) if ids == [record[k] for k in keys] and slot not in taken]
        if same:
            slot = next((s for s in same if saved[s].name == names[local]), same[0])
            matched[local] = slot
            taken.add(slot)
    by_name = {part.name: slot for slot, part in enumerate(saved)}
    for local, name in enumerate(names):
        if local not in matched and name in by_name and by_name[name] not in taken:
            matched[local] = by_name[name]
            taken.add(by_name[name])
    return matched


def _distinct_removed_names(slots: list[PartState], local_of: list[int | None]) -> None:
    """Rename (in place) a removed part whose name a served part now carries: ``name~removed``,
    ``name~removed2``, ... (a part is matched by its ids, so the name is only a label)."""
    live = {slot.name for slot, local in zip(slots, local_of) if local is not None}
    used = {slot.name for slot in slots}
    for index, (slot, local) in enumerate(zip(slots, local_of)):
        if local is None and slot.name in live:
            name, n = f"{slot.name}~removed", 2
            while name in used:
                name, n = f"{slot.name}~removed{n}", n + 1
            used.add(name)
            slots[index] = slot.model_copy(update={"name": name})


def _check_step(step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise InputError(None, f"step must be a non-negative integer, got {step!r}")
    return int(step)


def _parse_state(state: Any) -> LoaderState:
    """A loader state of this version, or one of ``tokpack.loader.v2`` converted exactly."""
    if not isinstance(state, Mapping):
        raise InputError(None, f"state must be the dict state_dict() returned, got {type(state).__name__}")
    try:
        record = dict(state)
        if record.get("schema") == "tokpack.loader.v2":
            saved = LoaderStateV2.model_validate(record).upgraded()
        else:
            saved = LoaderState.model_validate(record)
    except (ValidationError, TypeError) as error:
        raise InputError(None, f"not a tokpack loader state ({str(error).splitlines()[0]})") from None
    n_parts = len(saved.parts)
    names = [part.name for part in saved.parts]
    for name in names:
        if names.count(name) > 1:
            raise InputError(None, f"not a tokpack loader state (it names part {name!r} twice)")
    if any(len(s.weights) != n_parts or (s.anchor is not None and len(s.anchor) != n_parts) for s in saved.history):
        raise InputError(None, f"not a tokpack loader state (its history does not name its {n_parts} parts)")
    in_force = [s for s in saved.history if s.step <= saved.step]
    if in_force and in_force[-1].global_batch != saved.global_batch:
        raise InputError(None, f"not a tokpack loader state (global_batch {saved.global_batch}, but its history has "
                         f"{in_force[-1].global_batch} at its step {saved.step})")
    return saved


def _same_future(past: list[Segment], planned: list[Segment], step: int) -> bool:
    """Whether the saved history from ``step`` on is what this loader plans from there."""
    index = bisect.bisect_right([s.step for s in past], step) - 1
    future = [(step, past[index].global_batch, past[index].weights)] + [
        (s.step, s.global_batch, s.weights) for s in past[index + 1 :]]
    ours = [(s.step, s.global_batch, s.weights) for s in planned]
    return len(future) == len(ours) and all(
        a[:2] == b[:2] and np.allclose(a[2], b[2], rtol=0, atol=1e-12) for a, b in zip(future, ours))


def _normalized(weights: list[float]) -> np.ndarray:
    scaled = np.asarray(weights, dtype=np.float64) / max(weights)
    return scaled / scaled.sum()


def _difference(saved: dict[str, Any], mine: dict[str, Any]) -> str:
    """What differs between the data a loader state was saved over and this loader's, in words."""
    labels = (("tokens_sha256", "ids (tokens sha256)"), ("starts_sha256", "document starts (sha256)"),
              ("range", "range of ids"))
    for key, label in labels:
        if saved.get(key) != mine.get(key):
            return f"its {label} {_shown(saved.get(key))} was saved, this loader has {_shown(mine.get(key))}"
    return "the data records differ"


def _shown(value: Any) -> str:
    return value[:16] if isinstance(value, str) else str(value)


def _names(records: list[dict[str, Any]]) -> str:
    return ", ".join(f"{d.get('name')} ({str(d.get('tokens_sha256'))[:16]})" for d in records)


def _check_one_vocabulary(sources: list[TokenSource]) -> None:
    first = sources[0]
    for other in sources[1:]:
        a, b = first.vocabulary, other.vocabulary
        if (a.sha256, a.n_vocab) != (b.sha256, b.n_vocab):
            raise VocabularyMismatch(None, f"mixture parts use two vocabularies: {first.path} has {a.scheme}:{a.short} "
                                     f"(n_vocab {a.n_vocab}), {other.path} has {b.scheme}:{b.short} (n_vocab {b.n_vocab})")
        if first.meta.pad_id != other.meta.pad_id:
            raise VocabularyMismatch(None, f"mixture parts pad with two ids: {first.path} with {first.meta.pad_id}, "
                                     f"{other.path} with {other.meta.pad_id}")


__all__ = ["EvalBatches", "LoaderState", "Mixture", "PackedBatches", "PartState", "ServeSchedule", "assemble", "assemble_segments",
           "boundaries"]
