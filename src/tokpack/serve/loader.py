"""The training path: step ``k`` → the global batch → this rank's rows → arrays a model takes.

This is the one way to train on tokpack's data (``from tokpack import PackedBatches``); the
fixed schedules (:mod:`tokpack.serve.fixed`) are formulas of a step, not other training paths.
:class:`PackedBatches` serves a global batch of ``global_batch`` rows per step from one token
source or a :class:`Mixture` of several. Each part walks its layout's rows in a seeded
permutation per epoch and rolls into the next epoch inside a step, so no step is short. The
position is the rows each part has served, and the settings are a history of ``(step,
global_batch, weights)`` (:mod:`tokpack.serve.history`): the rows of step ``k`` depend only on
that history, the data, the layout and the seed (never on the world size): rank ``r`` of ``W``
takes rows ``[r*B/W, (r+1)*B/W)``. The global batch and the weights may change on a schedule
given up front or at a resume, and every part continues its permutation where it stopped.
:class:`~tokpack.serve.evaluation.EvalBatches` walks a validation range once, in order, every id
a target exactly once across all ranks.

The loader composes the serving modules: :mod:`~tokpack.serve.mixture` (the parts and their
weights), :mod:`~tokpack.serve.allocation` (a step's rows per part under the history),
:mod:`~tokpack.serve.assembly` (rows → the arrays a model takes) and :mod:`~tokpack.serve.state`
(what a run keeps, and reading it back); this module adds the rank's slice, micro-batches and a run's state.

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

from collections.abc import Iterator, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from tokpack import _checks as checks
from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.serve.allocation import Allocation
from tokpack.serve.assembly import assemble_segments, gather
from tokpack.serve.common import DTYPES, Data, check_ids
from tokpack.serve.history import History, Segment, joined_spans, same_stages
from tokpack.serve.layouts import Layout, data_identity, make_layout, open_source, start_mask
from tokpack.serve.mixture import Mixture, check_one_vocabulary, default_names, normalized, portable
from tokpack.serve.provenance import Provenance
from tokpack.serve.settings import BatchSettings
from tokpack.serve.state import (
    SETTING,
    LoaderState,
    PartState,
    ServeSchedule,
    difference,
    distinct_removed_names,
    match_parts,
    parse_state,
    part_names,
    parts_of_sources,
)
from tokpack.vocab.identity import VocabIdentity


class PackedBatches:
    """Training batches for one rank of a data-parallel run (see the module docstring).

    Args:
        data: a token source, its directory, or a :class:`Mixture`.
        settings: how the data is cut into batches, as a record (:class:`~tokpack.serve.settings.BatchSettings`);
            or give its fields as keywords (``length`` and ``global_batch`` at least), not both.

    Raises:
        InputError: a bad argument; VocabularyMismatch: mixture parts of two vocabularies.
    """

    def __init__(self, data: Data | Mixture, settings: BatchSettings | None = None, *, layout: str = "stream",
                 length: int | None = None, global_batch: int | Sequence[tuple[int, int]] | None = None,
                 seed: int = 0, rank: int = 0, world_size: int = 1, micro_batches: int = 1, split: str = "train",
                 dtype: str = "int64", position_ids: bool = False, cu_seqlens: bool = False,
                 document_ids: bool = False, shuffle: bool = True,
                 layout_options: dict[str, Any] | None = None) -> None:
        keywords = {"layout": layout, "length": length, "global_batch": global_batch, "seed": seed, "rank": rank,
                    "world_size": world_size, "micro_batches": micro_batches, "split": split, "dtype": dtype,
                    "position_ids": position_ids, "cu_seqlens": cu_seqlens, "document_ids": document_ids,
                    "shuffle": shuffle, "layout_options": layout_options}
        if settings is None:
            settings = BatchSettings(**keywords)  # type: ignore[arg-type]
        else:
            if not isinstance(settings, BatchSettings):
                raise InputError(f"settings must be a BatchSettings, got {type(settings).__name__}")
            defaults = {item.name: item.default for item in fields(BatchSettings)}
            both = [name for name, value in keywords.items() if value is not None and value != defaults.get(name)]
            if both:
                raise InputError(f"{', '.join(both)} given beside settings=", fix="give them in settings= or as keywords, not both")
        self.settings = settings
        self._data = data
        self._batch_plan = settings.plan
        layout, length, split = settings.layout, settings.length, settings.split
        options = settings.layout_options or {}
        self.mixture = data if isinstance(data, Mixture) else None
        parts = data.parts if isinstance(data, Mixture) else [(data, 1.0)]
        self.sources = [open_source(part) for part, _ in parts]
        check_one_vocabulary(self.sources)
        self.layouts: list[Layout] = [make_layout(layout, source, length=length, split=split, **options)
                                      for source in self.sources]
        self.layout_name, self.length = layout, int(length)
        self.seed, self.rank, self.world_size = int(settings.seed), int(settings.rank), int(settings.world_size)
        self.micro_batch_count, self.split = int(settings.micro_batches), split
        self.dtype = np.dtype(DTYPES[settings.dtype])
        self.want_positions, self.want_cu_seqlens = settings.position_ids, settings.cu_seqlens
        self.want_documents, self.shuffle = settings.document_ids, settings.shuffle
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
        local: list[int | None] = list(range(len(self.layouts)))  # slot -> this loader's part (None: removed)
        self._allocation = Allocation([layout.n_rows for layout in self.layouts],
                                      history=self._planned(0, local), local=local,
                                      names=[slot.name for slot in self._slots], seed=self.seed,
                                      mixture_seed=self._mixture_seed, shuffle=self.shuffle,
                                      mixed_from=0 if len(self._slots) > 1 else None)  # the first step that interleaves parts
        self._history.cap(self._caps(local))
        self._skipped: list[tuple[int, int]] = []  # steps [start, end) the run skips
        self._revision = 0  # counts the changes of history or skips (a loader building ahead starts again)
        self._lineage = Provenance(self.layouts, self.sources, self.names, self.length + 1)
        self._step = 0  # the step iteration serves next (set by the run, or by iterating)
        self._reached = 0  # the step after the last one batch() or micro_batches() served in order
        self._gap: tuple[int, int] | None = None  # steps never served before a later one was

    # -- the position -------------------------------------------------------------------------
    @property
    def step(self) -> int:
        """The step iteration serves next: iterating advances it, and a run may set it (``batches.step
        = k`` says the run is at step ``k``). :attr:`position` is where the run is."""
        return self._step

    @step.setter
    def step(self, value: int) -> None:
        self._step = self._reached = checks.non_negative_int("step", value)
        self._gap = None

    @property
    def position(self) -> int:
        """The step the run reached, whatever call served it: the step after the last one served in
        order by :meth:`batch`, :meth:`micro_batches` or iteration, or :attr:`step` when the run set
        it later (what :meth:`state_dict` records); past the steps :meth:`skip` leaves out."""
        return self._trained_from(max(self._step, self._reached))

    def _trained_from(self, step: int) -> int:
        """The first step at or after ``step`` that the run trains (not skipped)."""
        for start, end in self._skipped:
            if start <= step < end:
                step = end
        return step

    def _served(self, step: int) -> None:
        """Record that ``step`` was served: the next step in order moves the position on; a step
        beyond it leaves the steps between unserved, and the position unknown."""
        at = self.position
        if step >= at:
            if step > at and self._gap is None:
                self._gap = (at, step)
            self._reached = step + 1

    def _known_position(self) -> int:
        """:attr:`position`, when the calls that served batches say it.

        Raises:
            InputError: a step was served past the position, so the steps between were never
                served by this loader: the run's position cannot be known.
        """
        if self._gap is not None:
            low, high = self._gap
            what = (f"step {high} first: steps 0 to {high - 1} were never served" if low == 0 else
                    f"step {high} after step {low - 1}: steps {low} to {high - 1} were never served")
            raise InputError(f"this loader served {what} here, so the run's position is unknown",
                             fix="pass the step the run trains next: state_dict(step=N), or set batches.step = N")
        return self.position

    # -- the settings -------------------------------------------------------------------------
    @property
    def _history(self) -> History:
        return self._allocation.history

    @property
    def _local(self) -> list[int | None]:
        """Slot (a part as the history numbers it) -> this loader's part (``None``: removed)."""
        return self._allocation.local

    @property
    def global_batch(self) -> int:
        """Rows of the global batch at :attr:`position`."""
        return self._history.global_batch(self.position)

    def global_batch_at(self, step: int) -> int:
        """Rows of the global batch of step ``step`` (over all ranks)."""
        return self._history.global_batch(checks.non_negative_int("step", step))

    def _own_stages(self, numbering: list[int | None]) -> list[tuple[int, list[float]]]:
        """This loader's mixture stages (normalized) over the parts as numbered by ``numbering``
        (slot -> this loader's part; a removed part has weight 0)."""
        stages = self.mixture.stages if self.mixture is not None else [(0, np.ones(1))]
        return [(int(start), [0.0 if part is None else float(weights[part]) for part in numbering])
                for start, weights in stages]

    def _caps(self, numbering: list[int | None]) -> list[int | None]:
        """Each slot's cap in rows (``max_epochs`` times its rows per epoch; ``None``: none)."""
        epochs = self._max_epochs_of(numbering)
        return [None if part is None or cap is None else cap * self.layouts[part].n_rows
                for part, cap in zip(numbering, epochs)]

    def _planned(self, first: int, numbering: list[int | None],
                 stages: list[tuple[int, list[float]]] | None = None) -> History:
        """This loader's own settings (its global batch schedule and mixture stages, or the
        ``stages`` given, over the slots) from step ``first`` on, over the parts as numbered by
        ``numbering`` (slot -> this loader's part), as a history counted from ``first`` (its step
        0 is step ``first``); merged where nothing changes. Vectorized: a schedule may hold a
        million entries."""
        stages = self._own_stages(numbering) if stages is None else stages
        plan_steps, plan_rows = self._batch_plan[:, 0], self._batch_plan[:, 1]
        stage_steps = np.array([start for start, _ in stages], dtype=np.int64)
        stage_weights = np.array([weights for _, weights in stages],
                                 dtype=np.float64).reshape(len(stages), len(numbering))
        points = np.sort(np.concatenate(([first], plan_steps[plan_steps > first], stage_steps[stage_steps > first])))
        points = points[np.concatenate(([True], np.diff(points) > 0))]
        rows = plan_rows[np.searchsorted(plan_steps, points, side="right") - 1]
        weights = stage_weights[np.searchsorted(stage_steps, points, side="right") - 1]
        changed = np.ones(len(points), dtype=bool)
        changed[1:] = (rows[1:] != rows[:-1]) | np.any(weights[1:] != weights[:-1], axis=1)
        return History.of_arrays(points[changed] - first, rows[changed], weights[changed])

    # -- the schedule -----------------------------------------------------------------------
    @property
    def _mixture_seed(self) -> int:
        return self.mixture.seed if self.mixture is not None else 0

    def _plan(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Step ``step``'s global rows as (part, layout row) pairs, in global-batch order."""
        return self._allocation.plan(checks.non_negative_int("step", step))

    def _gather(self, part_of: np.ndarray, row_of: np.ndarray, *, starts: bool = True,
                check: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        return gather(self.layouts, self.sources, part_of, row_of, starts=starts, check=check)

    def global_rows(self, step: int) -> np.ndarray:
        """All ``global_batch`` rows of step ``step`` (``(global_batch, length + 1)``, the source's
        dtype), the same for every world size."""
        return self._gather(*self._plan(step), starts=False)[0]

    def _rank_segments(self, step: int, *, starts: bool, check: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        part_of, row_of = self._plan(step)
        share, rest = divmod(len(part_of), self.world_size)
        if rest or share % self.micro_batch_count:  # only a step from a loaded history can be
            raise InputError(f"step {step}'s global batch of {len(part_of)} rows does not split into "
                             f"{self.world_size} ranks of {self.micro_batch_count} micro-batches (it was served "
                             "before a resume that changed them)", fix="serve it with the world size it had")
        mine = slice(self.rank * share, (self.rank + 1) * share)
        return self._gather(part_of[mine], row_of[mine], starts=starts, check=check)

    def rank_rows(self, step: int, *, starts: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """This rank's rows of step ``step``, their segment-start mask (``None`` with
        ``starts=False``) and real lengths (see :meth:`Layout.read`)."""
        ids, segments, real = self._rank_segments(step, starts=starts)
        return ids, None if segments is None else start_mask(ids.shape, segments), real

    def _check_trained(self, step: int) -> None:
        """Refuse to serve a step :meth:`skip` left out."""
        step = checks.non_negative_int("step", step)
        if self._trained_from(step) != step:
            raise InputError(f"step {step} was skipped (skip() left out steps "
                             + ", ".join(f"[{a}, {b})" for a, b in self._skipped if a <= step < b) + ")",
                             fix=f"serve step {self._trained_from(step)}, the next step trained")

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
        self._check_trained(step)
        single = len(self.layouts) == 1  # its ids are checked by the assembly's own pass
        ids, segments, real = self._rank_segments(step, starts=self._want_boundaries, check=not single)
        batch, largest = self._assemble(ids, segments, real)
        if single and largest >= self.n_vocab:
            check_ids(ids, self.sources[0])  # raises, naming the source
        self._served(step)
        return batch

    def micro_batches(self, step: int) -> list[dict[str, Any]]:
        """This rank's batch of step ``step`` split into ``micro_batches`` equal parts, in order."""
        self._check_trained(step)
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
        self._served(step)
        return out

    def _assemble(self, ids: np.ndarray, segments: np.ndarray | None, real: np.ndarray) -> tuple[dict[str, Any], int]:
        return assemble_segments(ids, segments, real, dtype=self.dtype, position_ids=self.want_positions,
                                 cu_seqlens=self.want_cu_seqlens, document_ids=self.want_documents,
                                 ignore_index=self.ignore_index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Batches from :attr:`step` on, forever, past the steps :meth:`skip` leaves out;
        :attr:`step` follows the batches handed out."""
        while True:
            step = self._trained_from(self.step)
            batch = self.batch(step)
            self.step = step + 1
            yield batch

    # -- changes while the run runs -----------------------------------------------------------------
    def set_weights(self, step: int, weights: Sequence[float] | dict[str, float]) -> None:
        """From step ``step`` on (not before :attr:`position`: served steps stay as they were),
        serve the parts in proportion to ``weights`` (one a part in :attr:`names`' order, or by
        name; normalized). Recorded in the history exactly as a resume at ``step`` with
        ``Mixture(..., weights)`` records it, so the batches are those of that resume, and a
        resume from a later state replays them. Later stages of the mixture no longer apply.

        Raises:
            InputError: a step before the position, or weights that are not one non-negative
                number a part with a positive sum.
        """
        step = checks.non_negative_int("step", step)
        if step < self.position:
            raise InputError(f"set_weights at step {step}, before the run's position {self.position}: the steps "
                             "served stay as they were", fix=f"set weights from step {self.position} or later")
        given = self._weights_of(weights)
        stages = [(step, [0.0 if part is None else float(given[part]) for part in self._local])]
        self._change(step, self._planned(step, self._local, stages))

    def weights(self, step: int) -> np.ndarray:
        """The weights (normalized) in force at step ``step``, one a part in :attr:`names`' order."""
        weights = self._history.weights(checks.non_negative_int("step", step))
        return np.array([weights[self._local.index(part)] for part in range(len(self.layouts))])

    def _weights_of(self, weights: Sequence[float] | dict[str, float]) -> np.ndarray:
        """``weights`` per part in this loader's order, normalized as a mixture normalizes them."""
        if isinstance(weights, dict):
            unknown = [name for name in weights if name not in self.names]
            if unknown:
                raise InputError(f"no part {unknown[0]!r}; this loader serves {', '.join(map(repr, self.names))}")
            weights = [weights.get(name, 0.0) for name in self.names]
        if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence | np.ndarray) or len(weights) != len(self.names):
            raise InputError(f"weights must give one weight a part ({len(self.names)}: {', '.join(self.names)}), "
                             f"got {weights!r}")
        values = [checks.finite_float(f"weight of part {name!r}", weight) for name, weight in zip(self.names, weights)]
        if any(value < 0 for value in values) or sum(values) <= 0:
            raise InputError(f"weights must be non-negative with a positive sum, got {values}")
        return normalized(values)

    def _change(self, step: int, planned: History) -> None:
        """Make ``planned`` (counted from ``step``) the settings from ``step`` on, as a resume there would."""
        history = self._history
        if history.same_future(step, planned):
            return
        changed = history.replaced_from(step, planned, history.before(step))
        changed.cap(history.caps, {part: at for part, at in history.capped_at.items() if at < step})
        self._allocation.history = changed
        self._lineage.forget()
        self._revision += 1

    def skip(self, start: int, end: int) -> None:
        """Leave steps ``[start, end)`` untrained (say, after a loss spike): their rows are passed
        over, so the batch after them is ``batch(end)``, as in a run that trained them; the
        position moves to ``end`` when it was at ``start``. :meth:`repeats` counts their rows
        as ``skipped_rows``, apart from the rows and tokens trained; the state records them.

        Raises:
            InputError: ``start`` before :attr:`position` (served steps were trained), or ``end``
                not after ``start``.
        """
        start, end = checks.non_negative_int("start", start), checks.non_negative_int("end", end)
        position = self.position
        if start < position:
            raise InputError(f"skip from step {start}, before the run's position {position}: those steps were trained",
                             fix=f"skip from step {position} or later")
        if end <= start:
            raise InputError(f"skip({start}, {end}) leaves out no step", fix="give an end after the start")
        self._skipped = joined_spans([*self._skipped, (start, end)])
        self._revision += 1

    @property
    def skipped(self) -> list[tuple[int, int]]:
        """The steps ``[start, end)`` the run skips (see :meth:`skip`)."""
        return list(self._skipped)

    # -- provenance -------------------------------------------------------------------------------
    def provenance(self, step: int, rank: int | None = None) -> list[list[dict[str, Any]]]:
        """What each row of step ``step``'s global batch holds (or of ``rank``'s slice of it, with
        this loader's ``world_size``), computed without serving it: for each row, its segments in
        column order, each ``{"part", "document", "tokens", "source"}``: the part's name (as
        :attr:`names`), the document's index in the part, the positions ``(start, end)`` of its
        ids in the part's stream, and where they came from (``(file, byte_start, byte_end)`` for
        text, ``(file, record, byte_start, byte_end)`` for a JSON Lines or Parquet record's
        text, ``(month table, game)`` for chess; ``None`` for data that does not record it).
        Padding is a segment with ``"part": None`` and ``"tokens": (0, n)``, its ``n`` ids.

        The ids of a row's segments, then its padding, are the ``length + 1`` ids it was served as
        (``input_ids`` the first ``length``, ``labels`` the last ``length``).

        >>> from tokpack.serve.memory import pack_of_documents
        >>> pack = pack_of_documents([[1, 2, 3], [4, 5, 6, 7]], n_vocab=9, pad_id=0)
        >>> rows = PackedBatches(pack, length=4, global_batch=2, shuffle=False).provenance(0)
        >>> [(s["document"], s["tokens"]) for s in rows[0]], rows[1][-1]["tokens"]
        ([(0, (0, 3)), (1, (3, 5))], (0, 2))

        Raises:
            InputError: a bad step or rank, or a step that served a part this loader no longer serves.
        """
        part_of, row_of = self._plan(step)
        if rank is not None:
            rank = checks.integer("rank", rank, low=0, high=self.world_size - 1)
            share = len(part_of) // self.world_size
            part_of, row_of = part_of[rank * share : (rank + 1) * share], row_of[rank * share : (rank + 1) * share]
        return self._lineage.rows(part_of, row_of)

    def when(self, part: str | int, document: int, epochs: int = 1) -> list[dict[str, Any]]:
        """Every ``{"step", "row", "tokens"}`` at which document ``document`` of part ``part`` (a
        name of :attr:`names`, or its index) has ids that are targets (labels), over the part's
        first ``epochs`` epochs, in step order: ``row`` is the row of the step's global batch
        (rank ``r`` of ``W`` holds rows ``[r*B/W, (r+1)*B/W)``) and ``tokens`` the positions
        ``(start, end)`` of those ids in the part's stream. Computed from the layout and the
        history of settings, without serving a batch: the exact inverse of :meth:`provenance`.

        >>> from tokpack.serve.memory import pack_of_documents
        >>> pack = pack_of_documents([[1, 2, 3], [4, 5, 6, 7]], n_vocab=9, pad_id=0)
        >>> PackedBatches(pack, length=4, global_batch=1, shuffle=False).when(0, 1)
        [{'step': 0, 'row': 0, 'tokens': (3, 5)}, {'step': 1, 'row': 0, 'tokens': (5, 7)}]

        Raises:
            InputError: an unknown part, or a document outside the part's range.
        """
        local = self._part_index(part)
        document = checks.non_negative_int("document", document)
        epochs = checks.positive_int("epochs", epochs)
        return self._lineage.when(self._allocation, local, self._local.index(local), document, epochs,
                                  trained=self._trained if self._skipped else None)

    def _part_index(self, part: str | int) -> int:
        """This loader's index of ``part`` (a name of :attr:`names`, or an index)."""
        if isinstance(part, str):
            if part not in self.names:
                raise InputError(f"no part {part!r}; this loader serves {', '.join(map(repr, self.names))}")
            return self.names.index(part)
        return checks.integer("part", part, low=0, high=len(self.layouts) - 1)

    def _trained(self, steps: np.ndarray) -> np.ndarray:
        """Which of ``steps`` the run trains (not skipped)."""
        trained = np.ones(len(steps), dtype=bool)
        for start, end in self._skipped:
            trained &= (steps < start) | (steps >= end)
        return trained

    def parts_of(self, step: int) -> np.ndarray:
        """The part (an index into :attr:`names`) of each row of this rank's batch of step
        ``step``, in the batch's order: what per-part losses are summed by (see
        :class:`~tokpack.serve.mixing.OnlineMixing`)."""
        part_of, _ = self._plan(step)
        share = len(part_of) // self.world_size
        return part_of[self.rank * share : (self.rank + 1) * share].copy()

    # -- what a run keeps -------------------------------------------------------------------------
    def repeats(self, step: int | None = None) -> list[dict[str, Any]]:
        """Per part, before ``step`` (default: :attr:`position`): its ``name``, ``rows`` trained,
        ``skipped_rows`` (rows of the steps :meth:`skip` left out, apart), whole ``epochs``
        completed (of the rows trained or skipped), ``rows_per_epoch``, ``tokens`` trained
        (targets: ids that were a label) and ``weight`` (normalized, at ``step``), in the order
        of the state's ``parts`` and ``history`` (the order the parts first appeared); a part the
        run served before and no longer does is ``removed``; a part with a cap has its
        ``max_epochs``, and ``capped_at``, the step it stopped at, once it reached it."""
        step = self._known_position() if step is None else checks.non_negative_int("step", step)
        before = self._history.before(step)
        weights = self._history.weights(step)
        skipped_rows, skipped_tokens = self._skipped_before(step)
        caps = self._max_epochs()
        out: list[dict[str, Any]] = []
        for slot in range(len(self._slots)):
            part, record, rows = self._local[slot], self._slots[slot], int(before[slot])
            per_epoch = self.layouts[part].n_rows if part is not None else record.rows_per_epoch
            tokens = self._tokens(slot, rows)
            entry: dict[str, Any] = {"name": record.name, "rows": rows - skipped_rows[slot],
                                     "skipped_rows": skipped_rows[slot], "rows_per_epoch": per_epoch,
                                     "epochs": rows // per_epoch if per_epoch else None,
                                     "tokens": None if tokens is None else tokens - skipped_tokens[slot],
                                     "weight": float(weights[slot])}
            if part is None:
                entry["removed"] = True
            if caps[slot] is not None:
                entry["max_epochs"] = caps[slot]
            stopped = self._history.capped_at.get(slot)
            if stopped is not None and stopped < step:
                entry["capped_at"] = stopped
            out.append(entry)
        return out

    def _skipped_before(self, step: int) -> tuple[list[int], list[int]]:
        """Per slot, the rows and the targets of the skipped steps before ``step`` (a removed
        part's as its state recorded them: its tokens are recorded net of them)."""
        rows, targets = [0] * len(self._slots), [0] * len(self._slots)
        for start, end in self._skipped:
            if start >= step:
                break
            first, last = self._history.before(start), self._history.before(min(end, step))
            for slot, part in enumerate(self._local):
                if part is not None:
                    rows[slot] += last[slot] - first[slot]
                    targets[slot] += int(self._tokens(slot, last[slot]) or 0) - int(self._tokens(slot, first[slot]) or 0)
        for slot, part in enumerate(self._local):
            if part is None:
                rows[slot] = self._slots[slot].skipped_rows
        return rows, targets

    def _max_epochs(self) -> list[int | None]:
        """Each slot's cap in epochs (a removed part's as its state recorded it)."""
        given = self.mixture.max_epochs if self.mixture is not None else None
        return [self._slots[slot].max_epochs if part is None else (given[part] if given is not None else None)
                for slot, part in enumerate(self._local)]

    def _tokens(self, slot: int, rows: int) -> int | None:
        """Targets in the first ``rows`` rows a part served (whole epochs, then its permutation's head)."""
        part = self._local[slot]
        if part is None:  # not served since the state that recorded it
            return self._slots[slot].tokens
        layout = self.layouts[part]
        epochs, offset = divmod(rows, layout.n_rows)
        total = epochs * layout.targets_per_epoch
        if offset:
            order = self._allocation.order(slot, epochs)
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
        skipped_rows, skipped_tokens = self._skipped_before(step)
        caps, stopped = self._max_epochs(), self._history.capped_at
        states = []
        for slot, (record, rows) in enumerate(zip(self._slots, before)):
            tokens = self._tokens(slot, int(rows))
            states.append(record.model_copy(update={
                "rows": int(rows), "skipped_rows": skipped_rows[slot], "max_epochs": caps[slot],
                "capped_at": stopped.get(slot), "tokens": None if tokens is None else tokens - skipped_tokens[slot]}))
        return states

    def state_dict(self, step: int | None = None) -> dict[str, Any]:
        """Where the next batch comes from (PyTorch's ``Stateful``): the step, the rows each part
        served (and its data's identity and checksums), the history of settings (global batch
        and weights), the seeds, the layout and the vocabulary's identity.

        ``step``: the step the run trains next (default: :attr:`position`, the step the run
        reached by the calls that served its batches).
        :func:`tokpack.require_vocabulary` accepts it (and a checkpoint holding it as ``"loader"``).

        Raises:
            InputError: ``step`` not given and the position unknown (a step was served past it,
                so the steps between never were).
        """
        step = self._known_position() if step is None else checks.non_negative_int("step", step)
        return self._state(step)

    def _state(self, step: int) -> dict[str, Any]:
        # counting the rows before step first: a cap reached before it changes the history
        parts = self._part_states(step)
        # the history's records are written from its columns (see History.records), checked by the first one's model
        history = self._history.records()
        # the weights the run was given, where the history from step holds others (set while it ran)
        own = self._own_stages(self._local)
        given = None if self._history.same_future(step, self._planned(step, self._local, own)) else own
        state = LoaderState(step=step, seed=self.seed, mixture_seed=self.mixture.seed if self.mixture else None,
                            global_batch=self._history.global_batch(step), layout=self._layout_record(),
                            parts=parts, history=[Segment(**history[0])],
                            vocabulary=self.vocabulary, skipped=self._skipped,
                            mixture_stages=given).model_dump(mode="json", by_alias=True)
        state["history"] = history
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at the step ``state`` was saved at (any rank count may have saved it), where
        each part stopped in its permutation.

        Settings may change here: this loader's global batch (or schedule) and weights (or
        stages) take effect from the saved step on, when they differ from what the saved run
        planned; a part of a new name is added (it starts its first epoch), a saved part whose
        name this loader lacks is removed (kept in the state, so adding it back continues it).
        A state saved by tokpack before the history of settings (``tokpack.loader.v2``) loads
        exactly, and so does a :meth:`data_schedule` record (the state of its step). Weights
        the run set while it ran (:meth:`set_weights`, a part that reached its cap) go on when
        this loader is given the weights the run was given; other weights are a change.

        Raises:
            VocabularyMismatch: ``state`` was saved over another vocabulary.
            IntegrityError: ``state`` was saved over other data for a part that continues
                (checksums or range differ).
            InputError: not a loader state, or another seed, mixture seed, layout, length,
                split or shuffle.
        """
        self._load(parse_state(state), replay=False)

    @classmethod
    def replaying(cls, data: Sequence[Data], state: dict[str, Any]) -> PackedBatches:
        """A loader over ``data`` (the run's parts, each recognised by its ids) that serves what
        the run that saved ``state`` (a loader state or a :meth:`data_schedule` record) served
        and planned: its layout, length, seed, history of settings, skips and caps, at its step;
        for :meth:`provenance` and :meth:`when` after the run (``tokpack serve which`` and
        ``when``). A part of the run missing from ``data`` is removed: asking for a step that
        served it names it.

        Raises:
            InputError: not a state, or data that is none of the run's parts.
            IntegrityError, VocabularyMismatch: as :meth:`load_state_dict`.
        """
        saved = parse_state(state)
        layout = saved.layout
        sources = [open_source(item) for item in data]
        if not sources:
            raise InputError("replaying a run needs its data: one token source a part")
        names = parts_of_sources(saved, sources)
        caps = {part.name: part.max_epochs for part in saved.parts}
        mixed: Data | Mixture = sources[0]
        if saved.mixture_seed is not None or len(saved.parts) > 1:
            mixed = Mixture([(source, 1.0) for source in sources], seed=saved.mixture_seed or 0, names=names,
                            max_epochs=[caps[name] for name in names])
        loader = cls(mixed, layout=str(layout.get("layout")), length=int(layout.get("length", 0)), global_batch=1,
                     seed=saved.seed, split=str(layout.get("split", "train")), shuffle=bool(layout.get("shuffle", True)),
                     layout_options=layout.get("options") or None)
        loader._load(saved, replay=True)
        return loader

    def _load(self, saved: LoaderState, *, replay: bool) -> None:
        """:meth:`load_state_dict` (``replay``: the saved history is kept whatever this loader's
        own settings are)."""
        if (saved.vocabulary.sha256, saved.vocabulary.n_vocab) != (self.vocabulary.sha256, self.vocabulary.n_vocab):
            raise VocabularyMismatch(f"loader state was saved over vocabulary {saved.vocabulary.scheme}:"
                                     f"{saved.vocabulary.short} (n_vocab {saved.vocabulary.n_vocab}); this loader serves "
                                     f"{self.vocabulary.scheme}:{self.vocabulary.short} (n_vocab {self.n_vocab})")
        mixture_seed = self.mixture.seed if self.mixture is not None else None
        if saved.seed != self.seed:
            raise InputError(f"loader state has seed {saved.seed}, this loader {self.seed}: another seed is "
                             "another order of every epoch", fix="resume with the seed of the saved run")
        if (saved.mixture_seed or 0) != (mixture_seed or 0):
            raise InputError(f"loader state has mixture seed {saved.mixture_seed}, this loader {mixture_seed}",
                             fix="resume with the Mixture(seed=...) of the saved run")
        mine = self._layout_record()
        for key in ("layout", "length", "split", "options", "shuffle"):
            if saved.layout.get(key) != mine[key]:
                raise InputError(f"loader state has {SETTING[key]} {saved.layout.get(key)!r}, this loader "
                                 f"{mine[key]!r}: each part's position is a row of its layout, which another "
                                 f"{key} numbers differently", fix=f"resume with the {key} of the saved run")
        records = self._data_records()
        keys = ("tokens_sha256", "starts_sha256", "range")
        if self.mixture is None and saved.mixture_seed is None and len(saved.parts) == 1:
            matched = {0: 0}  # one source continues another, whatever its folder is called
        else:
            matched = match_parts(saved.parts, self.names, records, keys)
        for local, slot in matched.items():
            theirs = saved.parts[slot]
            if [theirs.data.get(k) for k in keys] != [records[local][k] for k in keys]:
                raise IntegrityError(f"loader state was saved over other data for part {theirs.name!r}: "
                                     + difference(theirs.data, records[local]),
                                     fix="serve the same ids under that name, or give it another name (Mixture(names=...)) "
                                         "to add it as a new part")
        if not matched and self.mixture is None:
            raise IntegrityError(f"loader state was saved over other data: {part_names([p.data for p in saved.parts])}; "
                                 f"this loader serves {part_names(records)}")
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
        distinct_removed_names(slots, local_of)
        step = saved.step
        rows = [part.rows for part in saved.parts] + [0] * added
        past = History(saved.history).widened(len(slots))
        own = self._own_stages(local_of)
        # the caps of the parts served alike (a removed part keeps its cap in the state, not in this loader)
        same_caps = all(theirs == mine for theirs, mine, part in zip([part.max_epochs for part in saved.parts] + [None] * added,
                                                                     self._max_epochs_of(local_of), local_of)
                        if part is not None)
        stages = None
        if saved.mixture_stages is not None and same_caps and same_stages(
                [(start, weights + [0.0] * added) for start, weights in saved.mixture_stages], own):
            stages = past.weight_stages(step)  # given the same weights: those the run set while it ran go on
        planned = self._planned(step, local_of, stages)
        # the settings change here unless they are the saved ones: the shares count from the rows each part served
        kept = replay or past.same_future(step, planned)
        checked = past if kept else past.replaced_from(step, planned, rows)
        checked.cap(self._caps(local_of), {slot: part.capped_at for slot, part in enumerate(saved.parts)
                                           if part.capped_at is not None and (kept or part.capped_at < step)})
        checked.remember(step, rows)
        # nothing is changed before every check passed: a refused state leaves the loader as it was
        joined = sorted(slot.since for slot in slots)
        self._slots = slots
        self._allocation = Allocation([layout.n_rows for layout in self.layouts], history=checked, local=local_of,
                                      names=[slot.name for slot in slots], seed=self.seed,
                                      mixture_seed=self._mixture_seed, shuffle=self.shuffle,
                                      mixed_from=joined[1] if len(joined) > 1 else None)
        self._skipped = joined_spans([(int(a), int(b)) for a, b in saved.skipped])
        self._lineage.forget()
        self._revision += 1
        self.step = step

    def _max_epochs_of(self, numbering: list[int | None]) -> list[int | None]:
        """This loader's cap in epochs of each slot as numbered by ``numbering``."""
        caps = self.mixture.max_epochs if self.mixture is not None else None
        return [None if part is None or caps is None else caps[part] for part in numbering]

    def data_schedule(self, **extra: Any) -> dict[str, Any]:
        """The record a run keeps with its checkpoints (``run=...`` and other keywords go under
        ``extra``): every part with its weight and position, the history of settings, the
        layout; :func:`tokpack.require_vocabulary` accepts it."""
        given = [w for _, w in self.mixture.parts] if self.mixture is not None else [1.0]
        step = self._known_position()
        served = {entry["name"]: entry for entry in self.repeats(step)}
        parts = []
        for slot, record in enumerate(self._slots):
            part = self._local[slot]
            entry = {**record.data, "name": record.name, "weight": given[part] if part is not None else 0.0,
                     **{k: served[record.name][k] for k in ("rows", "epochs", "rows_per_epoch", "tokens")},
                     **{k: served[record.name][k] for k in ("skipped_rows", "max_epochs", "capped_at")
                        if served[record.name].get(k)}}
            if part is None:
                entry["removed"] = True
            if record.since:
                entry["since"] = record.since
            parts.append(entry)
        stages = self._history.weight_changes()
        own = self._own_stages(self._local)
        own_given = None if self._history.same_future(step, self._planned(step, self._local, own)) else own
        schedule = ServeSchedule(vocabulary=self.vocabulary, parts=parts, stages=stages, history=self._history.segments,
                                 step=step, seed=self.seed, shuffle=self.shuffle, layout=self._layout_record(),
                                 global_batch=self.global_batch, length=self.length, stats=self.stats, extra=extra,
                                 mixture_seed=self.mixture.seed if self.mixture is not None else None,
                                 skipped=self._skipped, mixture_stages=own_given)
        return schedule.model_dump(mode="json", by_alias=True)

    @property
    def stats(self) -> list[dict[str, float]]:
        """Each part's layout statistics (repetition, padding, moved and cut shares) and, at
        :attr:`position`, its ``rows`` served, ``epochs`` completed and ``tokens`` (targets) seen; in
        this loader's order of parts (:attr:`names`)."""
        served = {entry["name"]: entry for entry in self.repeats()}
        return [{**layout.stats, **{k: float(served[self._slots[self._local.index(part)].name][k])
                                    for k in ("rows", "epochs", "tokens")}}
                for part, layout in enumerate(self.layouts)]

    def __getstate__(self) -> dict[str, Any]:
        # Sent to spawned loader workers: the data by its directories; and the loader state, whose
        # history the settings alone may not give.
        return {"data": portable(self._data), "settings": self.settings, "state": self._state(self.position)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        settings = state.get("settings") or BatchSettings(**state["arguments"])  # or its keyword arguments: the same fields
        self.__init__(state["data"], settings)  # type: ignore[misc]
        self.load_state_dict(state["state"])


__all__ = ["PackedBatches"]

