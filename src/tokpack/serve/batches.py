"""The training path: step ``k`` → the global batch → this rank's rows → arrays a model takes.

:class:`PackedBatches` serves a global batch of ``global_batch`` rows per step from one token
source or a :class:`Mixture` of several. The rows of step ``k`` depend only on the data, the
layout, the seed and ``k`` (never on the world size): rank ``r`` of ``W`` takes rows
``[r*B/W, (r+1)*B/W)``. Each part walks its layout's rows in a seeded permutation per epoch and
rolls into the next epoch inside a step, so no step is short. :class:`EvalBatches` walks a
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
from tokpack.serve.layouts import LAYOUTS, Layout, data_identity, kernels, make_layout, open_source, start_mask
from tokpack.serve.schedule import check_ids
from tokpack.store import TokenSource
from tokpack.vocab.identity import VocabIdentity

Data = TokenSource | str | Path
_DTYPES = {"int64": np.int64, "int32": np.int32}
#: The segment starts of a batch that asks for no boundary array.
_NO_SEGMENTS = np.empty(0, dtype=np.int64)
#: Cumulative row counts of a mixture are remembered every this many steps (resume replays the rest).
_CHECKPOINT_EVERY = 1024


class Mixture:
    """Several token sources served together in proportion to their weights.

    Args:
        parts: ``[(data, weight), ...]``: a token source or its directory, and a positive weight
            (weights are normalized).
        seed: mixed into every part's shuffle and the order of rows inside a step.
        stages: ``[(start_step, [weight, ...]), ...]``: from ``start_step`` on, these weights
            (a curriculum); the first stage must start at step 0. Given stages replace the
            parts' own weights (which stay in the data schedule as given).

    The rows each part gives step ``k`` follow from ``k`` and the weights alone: the running
    total of every part stays within one row of its exact share (``weight * global_batch *
    steps``, summed over stages).

    Raises:
        InputError: no parts, a weight that is not positive, or malformed stages.
    """

    def __init__(self, parts: Sequence[tuple[Data, float]], *, seed: int = 0,
                 stages: Sequence[tuple[int, Sequence[float]]] | None = None) -> None:
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

    def __len__(self) -> int:
        return len(self.parts)


class _Allocation:
    """How many rows each part gives each step: running totals within one row of the exact share.

    Step ``k``'s counts follow from the rows served before it: each part's deficit against its
    exact share, rounded down, and the rows left over to the largest remainders (ties: the lower
    part). The totals before any step are replayed from the nearest remembered step (every
    1,024 steps, and the last one asked), or seeded from a loader state.
    """

    def __init__(self, stages: list[tuple[int, np.ndarray]], global_batch: int) -> None:
        self.global_batch = global_batch
        self.starts = [start for start, _ in stages]
        self.weights = [[float(w) for w in weights] for _, weights in stages]
        self.n_parts = len(self.weights[0])
        # the exact rows per part served before each stage starts
        self.stage_base: list[list[float]] = [[0.0] * self.n_parts]
        for index in range(1, len(self.starts)):
            steps = self.starts[index] - self.starts[index - 1]
            self.stage_base.append([b + w * global_batch * steps
                                    for b, w in zip(self.stage_base[-1], self.weights[index - 1])])
        self._checkpoints: dict[int, list[int]] = {0: [0] * self.n_parts}
        self._last: tuple[int, list[int]] = (0, [0] * self.n_parts)

    def exact(self, step: int) -> list[float]:
        """The exact (fractional) rows per part served before ``step``."""
        stage = bisect.bisect_right(self.starts, step) - 1
        steps = step - self.starts[stage]
        return [b + w * self.global_batch * steps for b, w in zip(self.stage_base[stage], self.weights[stage])]

    def counts_from(self, step: int, before: list[int]) -> list[int]:
        """Rows per part in step ``step``, given the rows per part served ``before`` it."""
        if self.n_parts == 1:  # a single part takes every row (the float arithmetic below agrees)
            return [self.global_batch]
        deficit = [e - b for e, b in zip(self.exact(step + 1), before)]
        base = [max(math.floor(d), 0) for d in deficit]
        rest = self.global_batch - sum(base)
        if rest:
            by_remainder = sorted(range(self.n_parts), key=lambda i: (base[i] - deficit[i], i))
            if rest > 0:  # the largest remainders get one more row each
                for part in by_remainder[:rest]:
                    base[part] += 1
            else:  # (rare) rounding gave too many: take them back from the smallest remainders
                for part in reversed(by_remainder):
                    if rest and base[part] > 0:
                        base[part] -= 1
                        rest += 1
        return base

    def before(self, step: int) -> list[int]:
        """Rows per part served before ``step``."""
        if self.n_parts == 1:
            return [step * self.global_batch]
        known = max(k for k in self._checkpoints if k <= step)
        totals = list(self._checkpoints[known])
        if known < self._last[0] <= step:  # a run asks for consecutive steps: continue from the last
            known, totals = self._last[0], list(self._last[1])
        for k in range(known, step):
            totals = [t + c for t, c in zip(totals, self.counts_from(k, totals))]
            if (k + 1) % _CHECKPOINT_EVERY == 0:
                self._checkpoints[k + 1] = list(totals)
        self._last = (step, list(totals))
        return totals

    def remember(self, step: int, totals: list[int]) -> None:
        """Seed the totals before ``step`` (from a loader state), so resuming needs no replay.

        Raises:
            InputError: totals that this allocation could not have produced.
        """
        exact = self.exact(step)
        if len(totals) != self.n_parts or sum(totals) != step * self.global_batch or any(
                abs(t - e) > 1 + 1e-6 for t, e in zip(totals, exact)):
            raise InputError(None, f"loader state's mixture rows {totals} do not fit step {step} of this mixture")
        self._checkpoints[step] = list(totals)
        self._last = (step, list(totals))


class LoaderState(Record):
    """What :meth:`PackedBatches.state_dict` returns: enough to continue, and to refuse other data."""

    schema_: Literal["tokpack.loader.v2"] = Field(default="tokpack.loader.v2", alias="schema")
    step: int = Field(ge=0)
    seed: int
    global_batch: int = Field(ge=1)
    layout: dict[str, Any]
    data: list[dict[str, Any]]
    mixture: dict[str, Any] | None = None
    #: rows each mixture part served before ``step`` (so a resume needs no replay)
    part_rows: list[int] | None = None
    vocabulary: VocabIdentity


class ServeSchedule(Record):
    """``data_schedule()``: which data, in which proportions and order, from which vocabulary."""

    schema_: Literal["tokpack.serve-schedule.v1"] = Field(default="tokpack.serve-schedule.v1", alias="schema")
    vocabulary: VocabIdentity
    parts: list[dict[str, Any]]
    stages: list[tuple[int, list[float]]]
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
        global_batch: rows per step over all ranks.
        seed: fixes the shuffle of every epoch.
        rank, world_size: this process's share; ``world_size`` must divide ``global_batch``.
        micro_batches: gradient-accumulation steps; must divide the rank's rows.
        split: the range to read.
        dtype: ``"int64"`` (default) or ``"int32"`` for ids, labels and positions.
        position_ids, cu_seqlens, document_ids: add these to each batch (see :meth:`batch`).
        shuffle: ``False`` serves each layout's rows in order (for inspection).
        layout_options: passed to the layout (``bestfit``: ``lookahead``, ``cache``).

    Raises:
        InputError: a bad argument; VocabularyMismatch: mixture parts of two vocabularies.
    """

    def __init__(self, data: Data | Mixture, *, layout: str = "stream", length: int, global_batch: int,
                 seed: int = 0, rank: int = 0, world_size: int = 1, micro_batches: int = 1, split: str = "train",
                 dtype: str = "int64", position_ids: bool = False, cu_seqlens: bool = False,
                 document_ids: bool = False, shuffle: bool = True, layout_options: dict[str, Any] | None = None) -> None:
        self._arguments = {"layout": layout, "length": length, "global_batch": global_batch, "seed": seed,
                           "rank": rank, "world_size": world_size, "micro_batches": micro_batches, "split": split,
                           "dtype": dtype, "position_ids": position_ids, "cu_seqlens": cu_seqlens,
                           "document_ids": document_ids, "shuffle": shuffle, "layout_options": layout_options}
        self._data = data
        layout = checks.choice("layout", layout, LAYOUTS)
        length = checks.positive_int("length", length)
        global_batch = checks.positive_int("global_batch", global_batch)
        world_size = checks.positive_int("world_size", world_size)
        micro_batches = checks.positive_int("micro_batches", micro_batches)
        seed = checks.non_negative_int("seed", seed)
        rank = checks.integer("rank", rank, low=0, high=world_size - 1)
        split, dtype = checks.text("split", split), checks.choice("dtype", dtype, _DTYPES)
        for flag, value in (("position_ids", position_ids), ("cu_seqlens", cu_seqlens),
                            ("document_ids", document_ids), ("shuffle", shuffle)):
            checks.boolean(flag, value)
        options = {} if layout_options is None else checks.mapping("layout_options", layout_options)
        if global_batch % world_size:
            raise InputError(None, f"world_size {world_size} does not divide global_batch {global_batch}: every rank "
                             "takes an equal share of a step's rows", fix="choose a global_batch the ranks divide")
        if (global_batch // world_size) % micro_batches:
            raise InputError(None, f"micro_batches {micro_batches} does not divide the rank's {global_batch // world_size} rows")
        # a step's plan holds global_batch entries; a rank's batch about five arrays of its rows
        checks.fits_in_memory(f"a step of global_batch {global_batch:,} rows of length {length:,}",
                              16 * global_batch + 5 * 8 * (global_batch // world_size) * (length + 1),
                              fix="use a smaller global_batch or length")
        self.mixture = data if isinstance(data, Mixture) else None
        parts = data.parts if isinstance(data, Mixture) else [(data, 1.0)]
        self.sources = [open_source(part) for part, _ in parts]
        _check_one_vocabulary(self.sources)
        self.layouts: list[Layout] = [make_layout(layout, source, length=length, split=split, **options)
                                      for source in self.sources]
        self.layout_name, self.length, self.global_batch = layout, length, global_batch
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.micro_batch_count, self.split, self.dtype = micro_batches, split, np.dtype(_DTYPES[dtype])
        self.want_positions, self.want_cu_seqlens, self.want_documents = position_ids, cu_seqlens, document_ids
        self.shuffle = shuffle
        self.vocabulary: VocabIdentity = self.sources[0].vocabulary
        self.n_vocab = self.vocabulary.n_vocab
        self.ignore_index: int = self.layouts[0].ignore_index
        stages = self.mixture.stages if self.mixture is not None else [(0, np.ones(1))]
        self._allocation = _Allocation(stages, self.global_batch)
        self._permutations: dict[tuple[int, int], np.ndarray] = {}
        self.step = 0

    # -- the schedule -----------------------------------------------------------------------
    def _order(self, part: int, epoch: int) -> np.ndarray | None:
        if not self.shuffle:
            return None
        key = (part, epoch)
        if key not in self._permutations:
            if len(self._permutations) >= 4 * len(self.layouts):  # keep a few epochs, not all
                self._permutations.pop(next(iter(self._permutations)))
            mixture_seed = self.mixture.seed if self.mixture is not None else 0
            rng = np.random.default_rng([self.seed, mixture_seed, part, epoch])
            self._permutations[key] = rng.permutation(self.layouts[part].n_rows)
        return self._permutations[key]

    def _plan(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Step ``step``'s global rows as (part, layout row) pairs, in global-batch order."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise InputError(None, f"step must be a non-negative integer, got {step!r}")
        step = int(step)
        before = self._allocation.before(step)
        counts = self._allocation.counts_from(step, before)
        parts, rows = [], []
        for part, (first, count) in enumerate(zip(before, counts)):
            if not count:
                continue
            n_rows = self.layouts[part].n_rows
            epoch = first // n_rows
            if (first + count - 1) // n_rows == epoch:  # nearly every step lies inside one epoch
                offset = first - epoch * n_rows
                order = self._order(part, epoch)
                chosen = np.arange(offset, offset + count, dtype=np.int64) if order is None else order[offset : offset + count]
            else:
                served = np.arange(first, first + count, dtype=np.int64)
                epochs, positions = np.divmod(served, n_rows)
                chosen = positions.copy()
                for epoch in np.unique(epochs).tolist():  # a step may span several epochs of a small part
                    order = self._order(part, epoch)
                    if order is not None:
                        inside = epochs == epoch
                        chosen[inside] = order[positions[inside]]
            parts.append(np.full(count, part, dtype=np.int64))
            rows.append(chosen)
        part_of, row_of = (parts[0], rows[0]) if len(parts) == 1 else (np.concatenate(parts), np.concatenate(rows))
        if len(self.layouts) > 1:  # interleave the parts, so every rank sees the mixture
            mixing = np.random.default_rng([self.seed, self.mixture.seed if self.mixture else 0, step, 1]).permutation(self.global_batch)
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
        share = self.global_batch // self.world_size
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
    def repeats(self, step: int | None = None) -> list[dict[str, int]]:
        """Per part, before ``step`` (default: :attr:`step`): rows served and whole epochs completed."""
        before = self._allocation.before(self.step if step is None else step)
        return [{"rows": int(rows), "epochs": int(rows) // layout.n_rows, "rows_per_epoch": layout.n_rows}
                for rows, layout in zip(before, self.layouts)]

    def _layout_record(self) -> dict[str, Any]:
        layout = self.layouts[0]
        return {"layout": layout.name, "length": self.length, "split": self.split, "options": layout.options,
                "shuffle": self.shuffle}

    def _data_records(self) -> list[dict[str, Any]]:
        return [{**data_identity(source), "range": [layout.lo, layout.hi]}
                for source, layout in zip(self.sources, self.layouts)]

    def _mixture_record(self) -> dict[str, Any] | None:
        if self.mixture is None:
            return None
        return {"seed": self.mixture.seed, "stages": [[start, weights.tolist()] for start, weights in self.mixture.stages]}

    def state_dict(self) -> dict[str, Any]:
        """Where the next batch comes from (PyTorch's ``Stateful``): the step, seed, global batch,
        layout, the data's identity and checksums, the mixture and the vocabulary's identity.

        :func:`tokpack.require_vocabulary` accepts it (and a checkpoint holding it as ``"loader"``).
        """
        state = LoaderState(step=self.step, seed=self.seed, global_batch=self.global_batch,
                            layout=self._layout_record(), data=self._data_records(),
                            mixture=self._mixture_record(), vocabulary=self.vocabulary,
                            part_rows=self._allocation.before(self.step) if self.mixture is not None else None)
        return state.model_dump(mode="json", by_alias=True)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at the step ``state`` was saved at (any rank count may have saved it).

        Raises:
            VocabularyMismatch: ``state`` was saved over another vocabulary.
            IntegrityError: ``state`` was saved over other data (checksums differ).
            InputError: not a loader state, or another seed, global batch, layout or mixture.
        """
        if not isinstance(state, Mapping):
            raise InputError(None, f"state must be the dict state_dict() returned, got {type(state).__name__}")
        try:
            saved = LoaderState.model_validate(dict(state))
        except (ValidationError, TypeError) as error:
            raise InputError(None, f"not a tokpack loader state ({str(error).splitlines()[0]})") from None
        if (saved.vocabulary.sha256, saved.vocabulary.n_vocab) != (self.vocabulary.sha256, self.vocabulary.n_vocab):
            raise VocabularyMismatch(None, f"loader state was saved over vocabulary {saved.vocabulary.scheme}:"
                                     f"{saved.vocabulary.short} (n_vocab {saved.vocabulary.n_vocab}); this loader serves "
                                     f"{self.vocabulary.scheme}:{self.vocabulary.short} (n_vocab {self.n_vocab})")
        keys = ("tokens_sha256", "starts_sha256", "range")
        mine = self._data_records()
        if [[d.get(k) for k in keys] for d in saved.data] != [[d[k] for k in keys] for d in mine]:
            raise IntegrityError(None, "loader state was saved over other data: "
                                 + _difference(saved.data, mine, saved.layout.get("split"), self.split),
                                 fix="resume with the data and split of the saved run")
        theirs = {"seed": saved.seed, "global_batch": saved.global_batch, "layout": saved.layout, "mixture": saved.mixture}
        ours = {"seed": self.seed, "global_batch": self.global_batch, "layout": self._layout_record(),
                "mixture": self._mixture_record()}
        for key, value in ours.items():
            if theirs[key] != value:
                raise InputError(None, f"loader state has {key} {theirs[key]!r}, this loader {value!r}",
                                 fix="resume with the settings of the saved run")
        if self.mixture is not None and saved.part_rows is not None:
            self._allocation.remember(saved.step, saved.part_rows)
        self.step = saved.step

    def data_schedule(self, **extra: Any) -> dict[str, Any]:
        """The record a run keeps with its checkpoints (``run=...`` and other keywords go under
        ``extra``); :func:`tokpack.require_vocabulary` accepts it."""
        weights = [w for _, w in self.mixture.parts] if self.mixture is not None else [1.0]
        parts = [{**record, "weight": weight} for record, weight in zip(self._data_records(), weights)]
        stages = [(start, ws.tolist()) for start, ws in (self.mixture.stages if self.mixture else [(0, np.ones(1))])]
        record = ServeSchedule(vocabulary=self.vocabulary, parts=parts, stages=stages, seed=self.seed,
                               shuffle=self.shuffle, layout=self._layout_record(), global_batch=self.global_batch,
                               length=self.length, stats=[layout.stats for layout in self.layouts], extra=extra)
        return record.model_dump(mode="json", by_alias=True)

    @property
    def stats(self) -> list[dict[str, float]]:
        """Each part's layout statistics (repetition, padding, moved and cut shares)."""
        return [layout.stats for layout in self.layouts]

    def __getstate__(self) -> dict[str, Any]:
        # Sent to spawned loader workers: directories, not mapped streams, where the data has one.
        def portable(data: Any) -> Any:
            return str(data.path) if type(data).__name__ in ("Pack", "ShardedDataset") else data
        data = self._data
        if isinstance(data, Mixture):
            data = Mixture([(portable(p), w) for p, w in data.parts], seed=data.seed,
                           stages=[(s, ws.tolist()) for s, ws in data.stages])
        else:
            data = portable(data)
        return {"data": data, "arguments": self._arguments, "step": self.step}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["data"], **state["arguments"])  # type: ignore[misc]
        self.step = state["step"]


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
            InputError: ``step`` is not a non-negative integer.
        """
        step = checks.non_negative_int("step", step)
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


def _normalized(weights: list[float]) -> np.ndarray:
    scaled = np.asarray(weights, dtype=np.float64) / max(weights)
    return scaled / scaled.sum()


def _difference(saved: list[dict[str, Any]], mine: list[dict[str, Any]], saved_split: Any, split: str) -> str:
    """What differs between the data a loader state was saved over and this loader's, in words."""
    if saved_split != split:
        return f"the {saved_split!r} split was saved, this loader serves the {split!r} split"
    if len(saved) != len(mine):
        return f"{len(saved)} parts were saved, this loader serves {len(mine)}"
    labels = (("tokens_sha256", "ids (tokens sha256)"), ("starts_sha256", "document starts (sha256)"),
              ("range", "range of ids"))
    for index, (theirs, ours) in enumerate(zip(saved, mine)):
        for key, label in labels:
            if theirs.get(key) != ours.get(key):
                return (f"part {index} ({ours.get('name')}): its {label} {_shown(theirs.get(key))} was saved, this "
                        f"loader has {_shown(ours.get(key))}")
    return "the data records differ"


def _shown(value: Any) -> str:
    return value[:16] if isinstance(value, str) else str(value)


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


__all__ = ["EvalBatches", "LoaderState", "Mixture", "PackedBatches", "ServeSchedule", "assemble", "assemble_segments",
           "boundaries"]
