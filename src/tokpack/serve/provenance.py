"""Provenance: what each row of a step holds, and at which steps a document's ids are targets;
both answered from the layouts and the history of settings, without serving a batch.

A row is a list of **segments** in column order, each ``{"part", "document", "tokens",
"source"}``: the part's name, the document's index in the part (its token source), the
positions ``(start, end)`` of its ids in the part's stream, and where those ids came from
(:meth:`tokpack.store.origins.Locator.locate`: a file and byte range for text, a month table and game
for chess; ``None`` when the data does not record it). Padding is one segment ``{"part": None,
"document": None, "tokens": (0, n), "source": None}`` of ``n`` padding ids. Concatenating a
row's segments' ids and its padding gives the ``length + 1`` ids the row was served as.

:meth:`Provenance.when` is the inverse: the steps and global rows at which a document's ids are
targets (a row's ids but its first), from each part's permutation per epoch and the history
(:meth:`tokpack.serve.allocation.Allocation.where`); a step the run skipped trains nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tokpack.errors import InputError
from tokpack.serve.allocation import Allocation
from tokpack.serve.layouts import Layout
from tokpack.store import TokenSource
from tokpack.store.origins import Locator

#: The per-epoch tables :meth:`Provenance.when` keeps (step and row of every layout row): a few epochs.
KEPT_EPOCHS = 8


class Provenance:
    """Segments of served rows, and the steps a document is trained at, for one loader's parts.

    Args:
        layouts, sources, names: the loader's parts (its order).
        width: ids per row (``length + 1``).
    """

    def __init__(self, layouts: Sequence[Layout], sources: Sequence[TokenSource], names: Sequence[str],
                 width: int) -> None:
        self.layouts, self.sources, self.names, self.width = list(layouts), list(sources), list(names), width
        self._starts = [np.asarray(source.starts, dtype=np.int64) for source in sources]
        self._locators: dict[int, Locator] = {}
        self._epochs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def forget(self) -> None:
        """Drop the steps computed for whole epochs: the history changed."""
        self._epochs.clear()

    def locator(self, part: int) -> Locator:
        """Where part ``part``'s documents came from (built on first use: it may load a vocabulary)."""
        if part not in self._locators:
            self._locators[part] = Locator(self.sources[part])
        return self._locators[part]

    def rows(self, part_of: np.ndarray, row_of: np.ndarray) -> list[list[dict[str, Any]]]:
        """The segments of rows ``row_of`` of parts ``part_of`` (loader part indices), in that order."""
        out: list[list[dict[str, Any]]] = [[] for _ in range(len(part_of))]
        filled = np.zeros(len(part_of), dtype=np.int64)
        for part in np.unique(part_of).tolist():
            chosen = np.flatnonzero(part_of == part)
            run_row, run_start, run_length = self.layouts[part].runs(row_of[chosen])
            starts, name, locate = self._starts[part], self.names[part], self.locator(part).locate
            ends = np.append(starts[1:], self.sources[part].n_tokens)
            first_doc = np.searchsorted(starts, run_start, side="right") - 1
            last_doc = np.searchsorted(starts, run_start + run_length - 1, side="right") - 1
            for row, start, length, low, high in zip(chosen[run_row].tolist(), run_start.tolist(), run_length.tolist(),
                                                     first_doc.tolist(), last_doc.tolist()):
                end = start + length
                segments = out[row]
                for document in range(low, high + 1):
                    a, b = max(start, int(starts[document])), min(end, int(ends[document]))
                    segments.append({"part": name, "document": document, "tokens": (a, b),
                                     "source": locate(document, a, b)})
                filled[row] += length
        for row, used in enumerate(filled.tolist()):
            if used < self.width:
                out[row].append({"part": None, "document": None, "tokens": (0, self.width - used), "source": None})
        return out

    def when(self, allocation: Allocation, part: int, slot: int, document: int, epochs: int,
             trained: Callable[[np.ndarray], np.ndarray] | None) -> list[dict[str, Any]]:
        """Every ``{"step", "row", "tokens"}`` at which document ``document`` of loader part
        ``part`` (slot ``slot`` of the history) has targets, over the part's first ``epochs``
        epochs, in step order (then row); ``trained(steps)`` says which steps the run trains
        (``None``: all).

        Raises:
            InputError: the document is not in the layout's range.
        """
        layout, starts = self.layouts[part], self._starts[part]
        if not layout.first_doc <= document < layout.last_doc:
            raise InputError(f"document {document} of part {self.names[part]!r} is not in its {layout.split!r} range "
                             f"(documents {layout.first_doc} to {layout.last_doc - 1})")
        start = int(starts[document])
        end = int(starts[document + 1]) if document + 1 < len(starts) else self.sources[part].n_tokens
        rows, first, last = layout.targets_within(start, min(end, layout.hi))
        found: list[tuple[int, int, int, int]] = []
        for epoch in range(epochs):
            steps, global_rows = self._epoch(allocation, part, slot, epoch)
            at, where = steps[rows], global_rows[rows]
            keep = at >= 0
            if trained is not None and keep.any():
                keep[keep] = trained(at[keep])
            found += zip(at[keep].tolist(), where[keep].tolist(), first[keep].tolist(), last[keep].tolist())
        found.sort()
        return [{"step": step, "row": row, "tokens": (a, b)} for step, row, a, b in found]

    def _epoch(self, allocation: Allocation, part: int, slot: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """For every layout row of part ``part``: the step and global row that serve it in the
        part's epoch ``epoch`` (``-1``: never served), computed once for the whole epoch."""
        key = (slot, epoch)
        if key not in self._epochs:
            if len(self._epochs) >= KEPT_EPOCHS:
                self._epochs.pop(next(iter(self._epochs)))
            n_rows = self.layouts[part].n_rows
            order = allocation.order(slot, epoch)
            position = np.empty(n_rows, dtype=np.int64)  # each layout row's place in the epoch's order
            if order is None:
                position[:] = np.arange(n_rows)
            else:
                position[order] = np.arange(n_rows)
            self._epochs[key] = allocation.where(slot, epoch * n_rows + position)
        return self._epochs[key]


__all__ = ["Provenance"]
