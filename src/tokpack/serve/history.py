"""The history of a run's settings, and how many rows each part gives each step under it.

A run's position is the rows each part has served (each part walks its layout's rows in a seeded
permutation per epoch), and its settings are a list of segments ``(step, global_batch, weights)``:
from ``step`` on, steps hold ``global_batch`` rows, shared among the parts in proportion to
``weights``. A segment that a resume started (the settings changed there) is *anchored*: it
records the rows each part had served before it, and the shares count from there. Everything
the loader serves at step ``k`` follows from this history, the data, the layout and the seed.

>>> history = History([Segment(step=0, global_batch=8, weights=[1.0]), Segment(step=3, global_batch=16, weights=[1.0])])
>>> history.before(5), history.counts(5, history.before(5))
([56], [16])
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from tokpack import _checks as checks
from tokpack._schema import Record
from tokpack.errors import InputError

#: The rows per part before every this many steps are remembered (a later step replays the rest).
CHECKPOINT_EVERY = 1024


class Segment(Record):
    """From ``step`` on (until the next segment): ``global_batch`` rows a step, in proportion to
    ``weights`` (one a part, in the order the parts first appeared; a part absent from the run
    then has weight 0). ``anchor``: the rows each part had served before ``step``, where a resume
    changed the settings (the shares count from there); ``None`` where the segment continues
    the exact shares of the one before (settings given up front)."""

    step: int = Field(ge=0)
    global_batch: int = Field(ge=1)
    weights: list[float]
    anchor: list[int] | None = None


def batch_plan(global_batch: int | Sequence[tuple[int, int]]) -> np.ndarray:
    """``global_batch`` as rows ``(start_step, rows)`` of an ``(n, 2)`` ``int64`` array: an
    integer is ``[(0, rows)]``.

    >>> batch_plan([(0, 8), (100, 16)]).tolist()
    [[0, 8], [100, 16]]

    Raises:
        InputError: not a positive integer or a list of ``(step, rows)`` starting at step 0 with
            increasing steps and positive rows.
    """
    if isinstance(global_batch, (int, np.integer)) and not isinstance(global_batch, bool):
        return np.array([[0, checks.positive_int("global_batch", global_batch)]], dtype=np.int64)
    try:
        pairs = list(global_batch)  # type: ignore[arg-type]
        # the types of every value at once (a schedule may hold a million entries): integers, no bools
        kinds = set(map(type, itertools.chain.from_iterable(pairs)))
        ok = bool(pairs) and all(issubclass(kind, (int, np.integer)) and not issubclass(kind, (bool, np.bool_))
                                 for kind in kinds)
        plan = np.array(pairs, dtype=np.int64) if ok else np.zeros((0, 2), np.int64)
    except (TypeError, ValueError, OverflowError):
        ok, plan = False, np.zeros((0, 2), np.int64)
    if not ok or plan.ndim != 2 or plan.shape[1] != 2:
        raise InputError(f"global_batch must be a positive integer or a list of (step, rows), got {_shortened(global_batch)}",
                         fix="e.g. global_batch=256 or global_batch=[(0, 256), (2000, 512), (4000, 1024)]")
    steps, rows = plan[:, 0], plan[:, 1]
    if steps[0] != 0 or np.any(np.diff(steps) <= 0):
        raise InputError(f"global_batch schedule must start at step 0 and increase, got {_shortened(plan.tolist())}",
                         fix="e.g. global_batch=[(0, 256), (2000, 512), (4000, 1024)]")
    if np.any(rows < 1):
        step, bad = (int(v) for v in plan[int(np.argmax(rows < 1))])
        checks.positive_int(f"global_batch from step {step}" if step else "global_batch", bad)
    return plan


def _shortened(value: object) -> str:
    """``repr(value)``, cut to its first 200 characters (a schedule may hold a million entries)."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + " ..."


def batch_ramp(start: int, increment: int, ramp_samples: int, global_batch: int) -> list[tuple[int, int]]:
    """Megatron's ``--rampup-batch-size start increment ramp_samples`` as a ``global_batch``
    schedule: the global batch is ``start + j * increment`` while the rows consumed so far are
    below ``(j + 1) * ramp_samples / n`` (``n = (global_batch - start) / increment``), then
    ``global_batch``.

    >>> batch_ramp(4, 4, 24, 12)
    [(0, 4), (3, 8), (5, 12)]

    Raises:
        InputError: the increment does not divide ``global_batch - start``, or a value below 1.
    """
    values = {"start": start, "increment": increment, "ramp_samples": ramp_samples, "global_batch": global_batch}
    for name, value in values.items():
        checks.positive_int(f"batch_ramp: {name}", value)
    if global_batch < start or (global_batch - start) % increment:
        raise InputError(f"batch_ramp: increment {increment} does not lead from {start} to {global_batch}")
    increments = (global_batch - start) // increment
    per_increment = ramp_samples / increments if increments else 0.0
    plan: list[tuple[int, int]] = []
    step = consumed = 0
    for level in range(increments):
        rows = start + level * increment
        end = (level + 1) * per_increment
        steps = max(0, math.ceil((end - consumed) / rows))
        while steps and int((consumed + (steps - 1) * rows) / per_increment) > level:  # float edges: as Megatron's test
            steps -= 1
        while int((consumed + steps * rows) / per_increment) <= level and consumed + steps * rows <= ramp_samples:
            steps += 1
        if steps:
            plan.append((step, rows))
            step, consumed = step + steps, consumed + steps * rows
    plan.append((step, global_batch))
    return plan


class History:
    """Rows per part per step under a list of :class:`Segment` (see the module docstring).

    Each part's running total stays within one row of its exact share: inside a segment, the
    exact rows before step ``k`` are the segment's base plus ``weight * global_batch * (k -
    start)``; the base is the segment's anchor, or the exact rows the segment before reached.
    Step ``k``'s counts are each part's deficit against its exact share after ``k``, rounded
    down, and the rows left over go to the largest remainders (ties: the lower part) among the
    parts of positive weight (a part of weight 0 gets no row).

    The segments are held as arrays (a schedule may have a million of them); :attr:`segments`
    gives them back as records.
    """

    def __init__(self, segments: Sequence[Segment]) -> None:
        if not segments:
            raise InputError("a history of settings must start at step 0 and increase")
        n_parts = len(segments[0].weights)
        if any(len(s.weights) != n_parts or (s.anchor is not None and len(s.anchor) != n_parts) for s in segments):
            raise InputError("a history of settings names another number of parts in some segment")
        self._build(np.array([s.step for s in segments], dtype=np.int64),
                    np.array([s.global_batch for s in segments], dtype=np.int64),
                    np.array([s.weights for s in segments], dtype=np.float64).reshape(len(segments), n_parts),
                    {index: list(s.anchor) for index, s in enumerate(segments) if s.anchor is not None})
        self._forget(0)
        self.cap([None] * self.n_parts)
        self._segments: list[Segment] | None = list(segments)

    @classmethod
    def of_arrays(cls, starts: np.ndarray, global_batches: np.ndarray, weights: np.ndarray,
                  anchors: dict[int, list[int]] | None = None) -> History:
        """A history from its columns: each segment's start step, global batch and weights (a
        row a segment), and the anchors of the anchored segments by index (built without a
        record per segment: what a loader's own schedule is made into)."""
        history = cls.__new__(cls)
        history._build(np.asarray(starts, dtype=np.int64), np.asarray(global_batches, dtype=np.int64),
                       np.asarray(weights, dtype=np.float64), dict(anchors or {}))
        history._forget(0)
        history.cap([None] * history.n_parts)
        return history

    def _build(self, starts: np.ndarray, batches: np.ndarray, weights: np.ndarray, anchors: dict[int, list[int]]) -> None:
        n = len(starts)
        if not n or starts[0] != 0 or np.any(np.diff(starts) <= 0):
            raise InputError("a history of settings must start at step 0 and increase")
        if np.any(batches < 1):
            raise InputError("a history of settings has a global batch below 1")
        self.n_parts = weights.shape[1]
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or np.any(weights.sum(axis=1) <= 0):
            raise InputError("a history of settings has a weight that is negative or none positive")
        self._starts, self._batches, self._raw, self._anchors = starts, batches, weights, anchors
        self.starts = starts.tolist()
        # weights already normalized are kept bit for bit (normalizing again may move the last bit)
        sums = weights.sum(axis=1)
        self._weights = np.where((np.abs(sums - 1) < 1e-9)[:, None], weights, weights / sums[:, None])
        steps = np.diff(starts)
        # total rows before each segment
        self._rows_before = np.concatenate(([0], np.cumsum(batches[:-1] * steps))).astype(np.int64)
        # The exact rows per part before each segment: the one before's base plus its rows, or
        # the anchor; the same IEEE operations, in the same order, as one segment at a time.
        increments = np.zeros((n, self.n_parts))
        increments[1:] = (self._weights[:-1] * batches[:-1, None].astype(np.float64)) * steps[:, None].astype(np.float64)
        for index, anchor in anchors.items():
            if sum(anchor) != self._rows_before[index] or min(anchor) < 0:
                raise InputError(f"a history's rows {anchor} before step {starts[index]} do not add "
                                 f"up to the {self._rows_before[index]} rows its global batches served")
            increments[index] = anchor
        self._base = np.empty_like(increments)
        bounds = sorted({0, n} | set(anchors))
        for low, high in itertools.pairwise(bounds):  # the running sum restarts at each anchor
            np.cumsum(increments[low:high], axis=0, out=self._base[low:high])
        self._segments = None

    def _forget(self, step: int) -> None:
        """Drop what was computed past ``step`` (the rows per part before later steps): a history
        changed from ``step`` on counts them again. The caps stay: a part that stops at step 0
        leaves the others' caps as they were."""
        if step == 0:
            self._checkpoints: dict[int, list[int]] = {}
            self._table = np.zeros((0, self.n_parts), dtype=np.int64)  # see served()
            self._last: tuple[int, list[int]] = (0, [0] * self.n_parts)
            #: the step at which every part has stopped (its cap reached): the run serves no row
            #: from there; ``None`` while no such step has been counted
            self.end: int | None = None
        if self.end is not None and self.end > step:
            self.end = None
        self._checkpoints = {k: v for k, v in self._checkpoints.items() if k <= step}
        self._checkpoints.update({int(self._starts[i]): list(a) for i, a in self._anchors.items()})
        self._checkpoints[0] = [0] * self.n_parts
        self._known = sorted(self._checkpoints)  # the steps of the checkpoints, for a search
        self._table = self._table[: step + 1]
        if self._last[0] > step:
            self._last = (0, [0] * self.n_parts)

    @property
    def segments(self) -> list[Segment]:
        """The history as records, in step order."""
        if self._segments is None:
            self._segments = [Segment(**record) for record in self.records()]
        return self._segments

    def records(self) -> list[dict[str, Any]]:
        """The history as :class:`Segment` records in their JSON form, made from the columns
        directly (a million segments as models cost seconds at every checkpoint)."""
        anchors = self._anchors
        return [{"step": step, "global_batch": rows, "weights": weights, "anchor": anchors.get(index)}
                for index, (step, rows, weights) in enumerate(zip(self.starts, self._batches.tolist(), self._raw.tolist()))]

    def __len__(self) -> int:
        return len(self.starts)

    def _segment(self, step: int) -> int:
        return bisect.bisect_right(self.starts, step) - 1

    def global_batch(self, step: int) -> int:
        """Rows of step ``step``."""
        return int(self._batches[self._segment(step)])

    def weights(self, step: int) -> np.ndarray:
        """The normalized weights in force at ``step``."""
        return self._weights[self._segment(step)]

    def rows_before(self, step: int) -> int:
        """Rows of every step before ``step``, over all parts."""
        index = self._segment(step)
        return int(self._rows_before[index]) + int(self._batches[index]) * (step - self.starts[index])

    def exact(self, step: int) -> np.ndarray:
        """The exact (fractional) rows per part served before ``step``."""
        index = self._segment(step)
        return self._base[index] + self._weights[index] * int(self._batches[index]) * (step - self.starts[index])

    def counts(self, step: int, before: list[int]) -> list[int]:
        """Rows per part in step ``step``, given the rows per part served ``before`` it. A part
        that would pass its cap (:meth:`cap`) stops here (see :meth:`_stop`); the rows it leaves
        go to the others, which may pass theirs in turn (so the step is the same whenever it is
        counted, whether or not the stops are known yet).

        Raises:
            InputError: every part has stopped by ``step``: the run serves no row there (:attr:`end`).
        """
        counts = self._capped_counts(step, before)
        if counts is None:
            raise InputError(f"every part has reached its max_epochs by step {step}: no row is left to serve",
                             fix="raise max_epochs, or stop the run there")
        return counts

    def _capped_counts(self, step: int, before: list[int]) -> list[int] | None:
        """:meth:`counts`, or ``None`` where the run ends (every part stopped)."""
        counts = self._counts(step, before)
        while over := [part for part, cap in enumerate(self._caps)
                       if cap is not None and counts[part] and before[part] + counts[part] > cap]:
            if not self._stop(step, before, over):
                return None
            counts = self._counts(step, before)
        return counts

    @property
    def caps(self) -> list[int | None]:
        """Each part's cap in rows (``None``: none)."""
        return list(self._caps)

    def cap(self, caps: Sequence[int | None], capped_at: dict[int, int] | None = None) -> None:
        """Limit each part to ``caps[part]`` rows in all (``None``: no limit), counting from step 0;
        ``capped_at``: the parts that already stopped, and where (from a loader state)."""
        if len(caps) != self.n_parts:
            raise InputError(f"{len(caps)} caps for a history of {self.n_parts} parts")
        self._caps: list[int | None] = list(caps)
        #: the step each capped part stopped at (its weight 0 from there)
        self.capped_at: dict[int, int] = dict(capped_at or {})

    def _stop(self, step: int, before: list[int], parts: list[int]) -> bool:
        """Parts ``parts`` would pass their caps at ``step``: from ``step`` on they have weight 0
        in every segment (the others renormalized), in a segment anchored at ``before``. Returns
        ``False``, changing nothing but :attr:`end`, where no part would be left with a weight."""
        index = self._segment(step)
        starts, batches, raw = self._starts.copy(), self._batches.copy(), self._raw.copy()
        anchors = dict(self._anchors)
        if starts[index] != step:  # a new segment at step, with the settings in force there
            index += 1
            starts = np.insert(starts, index, step)
            batches = np.insert(batches, index, batches[index - 1])
            raw = np.insert(raw, index, raw[index - 1], axis=0)
            anchors = {i + (i >= index): anchor for i, anchor in anchors.items()}
        raw[index:, parts] = 0.0
        if not np.all(raw[index:].sum(axis=1) > 0):
            self.end = step
            return False
        anchors[index] = list(before)
        self._build(starts, batches, raw, anchors)
        self._forget(step)
        for part in parts:
            self.capped_at[part] = step
        return True

    def _counts(self, step: int, before: list[int]) -> list[int]:
        index = self._segment(step)
        rows = int(self._batches[index])
        if self.n_parts == 1:  # a single part takes every row (the float arithmetic below agrees)
            return [rows]
        weights, bases = self._weights[index].tolist(), self._base[index].tolist()
        steps = step + 1 - self.starts[index]
        # exact(step + 1) - before, as numpy computes exact(): base + (weight * rows) * steps
        deficit = [base + weight * rows * steps - float(served) for base, weight, served in zip(bases, weights, before)]
        eligible = [i for i in range(self.n_parts) if weights[i] > 0]
        counts = [max(math.floor(deficit[i]), 0) if weights[i] > 0 else 0 for i in range(self.n_parts)]
        rest = rows - sum(counts)
        if rest > 0:  # the largest remainders get one more row each
            by_remainder = sorted(eligible, key=lambda i: (counts[i] - deficit[i], i))
            for part in itertools.islice(itertools.cycle(by_remainder), rest):
                counts[part] += 1
        elif rest < 0:  # (rare) rounding gave too many: take them back from the smallest remainders
            by_remainder = sorted(eligible, key=lambda i: (counts[i] - deficit[i], i))
            for part in reversed(by_remainder):
                if rest and counts[part] > 0:
                    counts[part] -= 1
                    rest += 1
        return counts

    def before(self, step: int) -> list[int]:
        """Rows per part served before ``step``."""
        if self.n_parts == 1:
            return [self.rows_before(step)]
        known = self._known[bisect.bisect_right(self._known, step) - 1]
        totals = list(self._checkpoints[known])
        if known < self._last[0] <= step:  # a run asks for consecutive steps: continue from the last
            known, totals = self._last[0], list(self._last[1])
        for k in range(known, step):
            totals = [t + c for t, c in zip(totals, self.counts(k, totals))]
            if (k + 1) % CHECKPOINT_EVERY == 0:
                self._checkpoint(k + 1, totals)
        self._last = (step, list(totals))
        return totals

    def served(self, steps: int) -> np.ndarray:
        """Rows per part served before each step ``0 .. steps`` (``(steps + 1, n_parts)``,
        ``int64``): the table that finds the step a part's ``n``-th row is served in; it stops
        at :attr:`end` where the run ends before ``steps``."""
        table = self._table
        if len(table) <= steps:
            if self.n_parts == 1:
                every = np.arange(steps + 1, dtype=np.int64)
                index = np.searchsorted(self._starts, every, side="right") - 1
                table = (self._rows_before[index] + self._batches[index] * (every - self._starts[index]))[:, None]
            else:
                rows = table.tolist() if len(table) else [[0] * self.n_parts]
                totals = rows[-1]
                for k in range(len(rows) - 1, steps):
                    counts = self._capped_counts(k, totals)
                    if counts is None:  # the run ends at step k: the table stops there
                        break
                    totals = [t + c for t, c in zip(totals, counts)]
                    rows.append(totals)
                table = np.array(rows, dtype=np.int64)
            self._table = table
        return table[: steps + 1]

    def stopped(self, part: int, step: int) -> bool:
        """Whether part ``part`` has weight 0 in every segment from ``step``'s on: it serves no row
        after (a part that reached its cap has weight 0 from the step it stopped at, which may lie
        after ``step``: it serves rows until then), or the run has ended by ``step``."""
        if self.end is not None and step >= self.end:
            return True
        return not bool(np.any(self._weights[self._segment(step) :, part] > 0))

    def _checkpoint(self, step: int, totals: list[int]) -> None:
        if step not in self._checkpoints:
            bisect.insort(self._known, step)
        self._checkpoints[step] = list(totals)

    def remember(self, step: int, totals: list[int]) -> None:
        """Seed the rows per part before ``step`` (from a loader state), so resuming needs no replay.

        Raises:
            InputError: totals that this history could not have produced.
        """
        exact = self.exact(step)
        if len(totals) != self.n_parts or sum(totals) != self.rows_before(step) or any(
                abs(t - e) > 1 + 1e-6 for t, e in zip(totals, exact)):
            raise InputError(f"loader state's rows per part {totals} do not fit step {step} of its history")
        self._checkpoint(step, totals)
        self._last = (step, list(totals))

    def weight_changes(self) -> list[tuple[int, list[float]]]:
        """The weights in force from each step where they change, normalized, in the parts' order
        (a resume's new weights from its step, not from 0)."""
        stages: list[tuple[int, list[float]]] = []
        for segment in self.segments:
            total = sum(segment.weights) or 1.0
            weights = [w / total for w in segment.weights]
            if not stages or any(abs(a - b) > 1e-12 for a, b in zip(stages[-1][1], weights)):
                stages.append((segment.step, weights))
        return stages

    def same_future(self, step: int, planned: History) -> bool:
        """Whether this history from ``step`` on is ``planned`` (a history whose first segment
        starts at ``step``, counted from there), global batches and weights alike."""
        index = self._segment(step)
        starts = np.concatenate(([step], self._starts[index + 1 :]))
        return (len(starts) == len(planned.starts) and np.array_equal(starts - step, planned._starts)
                and np.array_equal(self._batches[index:], planned._batches)
                and bool(np.all(np.abs(self._raw[index:] - planned._raw) <= 1e-12)))

    def replaced_from(self, step: int, planned: History, anchor: list[int]) -> History:
        """This history before ``step``, then ``planned`` (counted from ``step``) anchored at
        ``anchor``, the rows each part served before ``step``: a change of settings at ``step``."""
        keep = bisect.bisect_left(self.starts, step)
        anchors = {index: list(a) for index, a in self._anchors.items() if index < keep}
        anchors[keep] = list(anchor)
        return History.of_arrays(np.concatenate((self._starts[:keep], planned._starts + step)),
                                 np.concatenate((self._batches[:keep], planned._batches)),
                                 np.concatenate((self._raw[:keep], planned._raw)), anchors)

    def weight_stages(self, step: int) -> list[tuple[int, list[float]]]:
        """The weights in force from ``step`` on, as given (not normalized): ``(step, weights)``
        where each later segment starts."""
        index = self._segment(step)
        return [(step, self._raw[index].tolist())] + [(start, weights) for start, weights in
                                                      zip(self.starts[index + 1 :], self._raw[index + 1 :].tolist())]

    def widened(self, n_parts: int) -> History:
        """The same history over ``n_parts`` parts, the new ones of weight 0 and no rows."""
        added = n_parts - self.n_parts
        if not added:
            return self
        return History.of_arrays(self._starts, self._batches, np.hstack((self._raw, np.zeros((len(self), added)))),
                                 {index: anchor + [0] * added for index, anchor in self._anchors.items()})


def same_stages(a: list[tuple[int, list[float]]], b: list[tuple[int, list[float]]]) -> bool:
    """Whether two weight stages are the same: the same steps, weights within 1e-12."""
    return len(a) == len(b) and all(sa == sb and len(wa) == len(wb) and all(abs(x - y) <= 1e-12 for x, y in zip(wa, wb))
                                    for (sa, wa), (sb, wb) in zip(a, b))


def joined_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open spans sorted and joined where they meet or overlap.

    >>> joined_spans([(5, 8), (0, 2), (2, 3), (7, 10)])
    [(0, 3), (5, 10)]
    """
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


__all__ = ["CHECKPOINT_EVERY", "History", "Segment", "batch_plan", "batch_ramp", "joined_spans", "same_stages"]
