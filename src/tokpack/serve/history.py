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


def batch_plan(global_batch: int | Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``global_batch`` as ``[(start_step, rows), ...]``: an integer is ``[(0, rows)]``.

    Raises:
        InputError: not a positive integer or a list of ``(step, rows)`` starting at step 0 with
            increasing steps and positive rows.
    """
    if isinstance(global_batch, (int, np.integer)) and not isinstance(global_batch, bool):
        plan = [(0, checks.positive_int("global_batch", global_batch))]
    else:
        try:
            plan = [(int(step), int(rows)) for step, rows in global_batch]  # type: ignore[union-attr]
            ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                     for pair in global_batch for v in pair)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            ok, plan = False, []
        if not ok or not plan:
            raise InputError(f"global_batch must be a positive integer or a list of (step, rows), got {global_batch!r}",
                             fix="e.g. global_batch=256 or global_batch=[(0, 256), (2000, 512), (4000, 1024)]")
    if plan[0][0] != 0 or any(b[0] <= a[0] for a, b in itertools.pairwise(plan)):
        raise InputError(f"global_batch schedule must start at step 0 and increase, got {plan}",
                         fix="e.g. global_batch=[(0, 256), (2000, 512), (4000, 1024)]")
    for step, rows in plan:
        checks.positive_int(f"global_batch from step {step}" if step else "global_batch", rows)
    return plan


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
    """

    def __init__(self, segments: Sequence[Segment]) -> None:
        if not segments or segments[0].step != 0 or any(b.step <= a.step for a, b in itertools.pairwise(segments)):
            raise InputError("a history of settings must start at step 0 and increase")
        self.segments = list(segments)
        self.n_parts = len(self.segments[0].weights)
        if any(len(s.weights) != self.n_parts or (s.anchor is not None and len(s.anchor) != self.n_parts)
               for s in self.segments):
            raise InputError("a history of settings names another number of parts in some segment")
        if any(not all(math.isfinite(w) and w >= 0 for w in s.weights) or sum(s.weights) <= 0 for s in self.segments):
            raise InputError("a history of settings has a weight that is negative or none positive")
        self.starts = [s.step for s in self.segments]
        # weights already normalized are kept bit for bit (normalizing again may move the last bit)
        self._weights = [np.asarray(s.weights, dtype=np.float64) for s in self.segments]
        self._weights = [w if abs(float(w.sum()) - 1) < 1e-9 else w / w.sum() for w in self._weights]
        self._rows_before = [0]  # total rows before each segment
        self._base: list[np.ndarray] = []  # exact rows per part before each segment
        for index, segment in enumerate(self.segments):
            if index:
                previous = self.segments[index - 1]
                steps = segment.step - previous.step
                self._rows_before.append(self._rows_before[-1] + previous.global_batch * steps)
                continued = self._base[-1] + self._weights[index - 1] * previous.global_batch * steps
            else:
                continued = np.zeros(self.n_parts)
            if segment.anchor is not None:
                if sum(segment.anchor) != self._rows_before[-1] or min(segment.anchor) < 0:
                    raise InputError(f"a history's rows {segment.anchor} before step {segment.step} do not add "
                                     f"up to the {self._rows_before[-1]} rows its global batches served")
                continued = np.asarray(segment.anchor, dtype=np.float64)
            self._base.append(continued)
        # the same doubles as Python floats: a step's counts in plain arithmetic (the same IEEE
        # operations in the same order as numpy's) cost a third of the small-array calls
        self._weight_lists = [w.tolist() for w in self._weights]
        self._base_lists = [b.tolist() for b in self._base]
        self._checkpoints: dict[int, list[int]] = {s.step: list(s.anchor) for s in self.segments if s.anchor is not None}
        self._checkpoints[0] = [0] * self.n_parts
        self._last: tuple[int, list[int]] = (0, [0] * self.n_parts)

    def _segment(self, step: int) -> int:
        return bisect.bisect_right(self.starts, step) - 1

    def global_batch(self, step: int) -> int:
        """Rows of step ``step``."""
        return self.segments[self._segment(step)].global_batch

    def weights(self, step: int) -> np.ndarray:
        """The normalized weights in force at ``step``."""
        return self._weights[self._segment(step)]

    def rows_before(self, step: int) -> int:
        """Rows of every step before ``step``, over all parts."""
        index = self._segment(step)
        return self._rows_before[index] + self.segments[index].global_batch * (step - self.starts[index])

    def exact(self, step: int) -> np.ndarray:
        """The exact (fractional) rows per part served before ``step``."""
        index = self._segment(step)
        segment = self.segments[index]
        return self._base[index] + self._weights[index] * segment.global_batch * (step - segment.step)

    def counts(self, step: int, before: list[int]) -> list[int]:
        """Rows per part in step ``step``, given the rows per part served ``before`` it."""
        index = self._segment(step)
        segment = self.segments[index]
        rows = segment.global_batch
        if self.n_parts == 1:  # a single part takes every row (the float arithmetic below agrees)
            return [rows]
        weights, bases = self._weight_lists[index], self._base_lists[index]
        steps = step + 1 - segment.step
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
        known = max(k for k in self._checkpoints if k <= step)
        totals = list(self._checkpoints[known])
        if known < self._last[0] <= step:  # a run asks for consecutive steps: continue from the last
            known, totals = self._last[0], list(self._last[1])
        for k in range(known, step):
            totals = [t + c for t, c in zip(totals, self.counts(k, totals))]
            if (k + 1) % CHECKPOINT_EVERY == 0:
                self._checkpoints[k + 1] = list(totals)
        self._last = (step, list(totals))
        return totals

    def remember(self, step: int, totals: list[int]) -> None:
        """Seed the rows per part before ``step`` (from a loader state), so resuming needs no replay.

        Raises:
            InputError: totals that this history could not have produced.
        """
        exact = self.exact(step)
        if len(totals) != self.n_parts or sum(totals) != self.rows_before(step) or any(
                abs(t - e) > 1 + 1e-6 for t, e in zip(totals, exact)):
            raise InputError(f"loader state's rows per part {totals} do not fit step {step} of its history")
        self._checkpoints[step] = list(totals)
        self._last = (step, list(totals))


__all__ = ["CHECKPOINT_EVERY", "History", "Segment", "batch_plan", "batch_ramp"]
