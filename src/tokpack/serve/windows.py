"""Windows: fixed-size ``(x, y)`` items over one range of a pack, one at a time or many at once.

With ``aligned=True`` item ``i`` starts at the first token of the range's document ``i`` and runs
on into the documents after it (packing, so almost no position is padding); with
``aligned=False`` item ``i`` is the ``i``-th consecutive ``block``-sized cut of the range. Each
item is ``x``, ``block`` ids, and ``y``, the id after each one: ``y[t] = x[t + 1]``. ``y[-1]`` is
padding because its real target lies outside the window, and a window running past the end of
the range is padded; the padding id is the pack's (see ``PackMeta.pad_id``), and it is the
``ignore_index`` of the loss.

**Aligned windows serve only document heads.** One window per document means a document longer
than ``block`` is served only up to its first ``block`` ids: on text cut into long documents that
is a few percent of the range (3.3 % for 4 KB documents and ``block=64``). Opening such windows
warns; train on :class:`tokpack.serve.PackedBatches` (``layout="stream"`` or ``"documents"``),
which serves every id.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from tokpack import _checks as checks
from tokpack.errors import InputError
from tokpack.serve.schedule import check_ids
from tokpack.store import TokenSource


class Windows:
    """Windows of ``block`` ids over the ``split`` range of a pack.

    >>> from tokpack.serve.memory import pack_of_documents
    >>> windows = Windows(pack_of_documents([[1, 2, 3], [4, 5]], n_vocab=7, pad_id=0), block=4)
    >>> x, y = windows[1]
    >>> x.tolist(), y.tolist()
    ([4, 5, 0, 0], [5, 0, 0, 0])
    """

    def __init__(self, pack: TokenSource | str | Path, block: int, *, aligned: bool = True, split: str = "train") -> None:
        """Open windows over ``pack``.

        Args:
            pack: a pack or sharded dataset, or its directory (opened; checksums verified on the
                first open, see :func:`tokpack.store.open_tokens`).
            block: ids per item, at least 2.
            aligned: start items at documents (``True``) or cut the range into blocks.
            split: the pack range to read (``train`` unless you evaluate).

        Raises:
            ValueError: ``block`` below 2, no ``split`` range, or a vocabulary with no padding
                id (one the encoder never emits), so padding would collide with a real token.
        """
        block = checks.integer("block", block, low=2, what="an integer of at least 2")
        checks.fits_in_memory(f"a window of block {block:,}", 4 * 8 * (block + 1), fix="use a smaller block")
        aligned, split = checks.boolean("aligned", aligned), checks.text("split", split)
        from tokpack.serve.layouts import open_source

        self.pack = open_source(pack, name="pack")
        if split not in self.pack.meta.ranges:
            from tokpack.serve.layouts import missing_range

            raise InputError(self.pack.path, missing_range(split, self.pack.meta.ranges, self.pack.path))
        if self.pack.meta.pad_id is None:
            raise InputError(f"{self.pack.path}: its vocabulary records no padding id distinct from real tokens")
        self.block, self.aligned, self.split = block, aligned, split
        self.pad_id: int = self.pack.meta.pad_id
        span = self.pack.meta.ranges[split]
        self.lo, self.hi = span.tokens
        first_doc, last_doc = span.documents
        self._origins = self.pack.starts[first_doc:last_doc] if aligned else None
        n_tokens = self.hi - self.lo
        self._length = last_doc - first_doc if aligned else (max(1, n_tokens // block) if n_tokens else 0)
        if aligned and n_tokens:
            lengths = np.diff(np.append(np.asarray(self._origins, dtype=np.int64), self.hi))
            self.served_share = float(np.minimum(lengths, block).sum()) / n_tokens
            if self.served_share < 0.5:
                warnings.warn(f"{self.pack.path}: aligned windows of {block} ids serve only document heads, "
                              f"{self.served_share:.1%} of the {split!r} range's ids; use "
                              "tokpack.serve.PackedBatches(layout='stream' or 'documents') to serve every id",
                              UserWarning, stacklevel=2)
        else:
            self.served_share = 1.0

    @property
    def ignore_index(self) -> int:
        """The target id the loss must ignore: the padding id."""
        return self.pad_id

    def __len__(self) -> int:
        return self._length

    def origins(self, indices: np.ndarray) -> np.ndarray:
        """Where items ``indices`` start in the pack's token stream (``int64``).

        Raises:
            IndexError: an index outside ``[0, len(self))``.
        """
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self._length):
            bad = int(indices.min()) if indices.min() < 0 else int(indices.max())
            raise IndexError(f"window {bad} outside [0, {self._length})")
        if self._origins is not None:
            return self._origins[indices]
        return self.lo + indices * self.block

    def window_batch(self, indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """Items ``indices`` as ``(x, y)``, ``int64`` arrays of shape ``(len(indices), block)``.

        One numpy gather serves every window that fits whole; there is no Python loop over
        items. ``x`` and ``y`` are two contiguous arrays (``y`` is ``x`` moved one id on), so
        ``y.reshape(-1)`` and torch's ``y.view(-1)`` work as loss code expects.

        Raises:
            IndexError: an index outside ``[0, len(self))``.
        """
        origins = self.origins(indices)
        if not len(origins) or int(origins.max()) + self.block + 1 <= self.hi:  # one reduction, not a mask
            chunk = self.pack.gather_rows(origins, self.block + 1)
        else:  # some windows run past the end of the range: clip, then pad
            positions = origins[:, None] + np.arange(self.block + 1)
            inside = positions < self.hi
            chunk = np.full(positions.shape, self.pad_id, dtype=np.int64)
            chunk[inside] = self.pack.take(positions[inside])
        check_ids(chunk, self.pack)
        x = chunk[:, :-1].astype(np.int64, order="C")  # each cast is also the copy that makes it contiguous
        y = chunk[:, 1:].astype(np.int64, order="C")
        y[:, -1] = self.pad_id  # y[-1]: its real target lies outside the window
        return x, y

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Item ``index`` as ``(x, y)``, ``block`` ``int64`` ids each."""
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"window index must be an integer, got {type(index).__name__}")
        x, y = self.window_batch(np.array([index]))
        return x[0], y[0]

    def __getstate__(self) -> dict[str, Any]:
        # Pickled for a worker process: send the path, not the mapped stream, so every worker
        # maps the same file pages instead of receiving a copy of the tokens.
        return {"path": str(self.pack.path), "block": self.block, "aligned": self.aligned, "split": self.split}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(Path(state["path"]), state["block"], aligned=state["aligned"], split=state["split"])  # type: ignore[misc]

    def __repr__(self) -> str:
        kind = "aligned" if self.aligned else "contiguous"
        return f"Windows({str(self.pack.path)!r}, block={self.block}, {kind}, split={self.split!r}, n={len(self)})"
