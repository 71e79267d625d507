"""The seeds' fixed schedules: where a batch or item starts is a formula of its step or index
alone (no shuffle, no history of settings). They are contracts kept as they were promised; train
on :class:`tokpack.PackedBatches`.

**TokenBatches** (the first seed): step ``k`` (zero-based), row ``b`` reads the ``length + 1``
ids starting at::

    lo + (k * batch * length + b * length) % (hi - lo - length - 1)

where ``[lo, hi)`` is the training range in tokens. Every read ends before ``hi``, so no run of
any length ever sees a validation or test id, and the batch of a step depends on nothing but
``k``: a run resumed at step ``k`` sees what an uninterrupted run saw.

**Windows** (the chess seed): fixed-size ``(x, y)`` items over one range of a pack, one at a time
or many at once. With ``aligned=True`` item ``i`` starts at the first token of the range's
document ``i`` and runs on into the documents after it (packing, so almost no position is
padding); with ``aligned=False`` item ``i`` is the ``i``-th consecutive ``block``-sized cut of the
range. Each item is ``x``, ``block`` ids, and ``y``, the id after each one: ``y[t] = x[t + 1]``.
``y[-1]`` is padding because its real target lies outside the window, and a window running past
the end of the range is padded; the padding id is the pack's (see ``PackMeta.pad_id``), and it is
the ``ignore_index`` of the loss. Their PyTorch loader is :class:`tokpack.torch.WindowLoader`.

**Aligned windows serve only document heads.** One window per document means a document longer
than ``block`` is served only up to its first ``block`` ids: on text cut into long documents that
is a few percent of the range (3.3 % for 4 KB documents and ``block=64``). Opening such windows
warns; train on :class:`tokpack.serve.PackedBatches` (``layout="stream"`` or ``"documents"``),
which serves every id.
"""

from __future__ import annotations

import os
import queue
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from tokpack import _checks as checks
from tokpack._schema import Record
from tokpack.errors import InputError
from tokpack.serve.common import check_ids
from tokpack.store import TokenSource
from tokpack.vocab.identity import VocabIdentity

SCHEDULE_RULE = "lo + (k * batch * length + b * length) % (hi - lo - length - 1)"


class DataSchedule(Record):
    """What a trainer keeps in every checkpoint: which ids, in which order, from which vocabulary."""

    schema_: Literal["tokpack.schedule.v1"] = Field(default="tokpack.schedule.v1", alias="schema")
    vocabulary: VocabIdentity
    tokens_sha256: str
    starts_sha256: str
    train_tokens: tuple[int, int]
    batch: int
    length: int
    rule: str = SCHEDULE_RULE
    extra: dict[str, Any] = Field(default_factory=dict)


class TokenBatches:
    """Training batches from a pack, on the fixed schedule of this module.

    >>> from tokpack.serve.memory import pack_of_documents
    >>> batches = TokenBatches(pack_of_documents([list(range(1, 21))], n_vocab=32), batch=2, length=4)
    >>> batches.ids(0)
    array([[1, 2, 3, 4, 5],
           [5, 6, 7, 8, 9]], dtype=int32)
    """

    def __init__(self, tokens_dir: str | Path | TokenSource, batch: int, length: int) -> None:
        """Open and verify the pack at ``tokens_dir``.

        Args:
            tokens_dir: a pack or sharded dataset directory (``TokenizedCorpus.tokens_dir``), or
                an opened token source such as :class:`tokpack.store.formats.datatrove.DatatroveFolder`.
            batch: rows per batch, at least 1.
            length: inputs per row, at least 1 (each row holds ``length + 1`` ids).

        Raises:
            InputError / IntegrityError: the pack does not match its meta, it has no ``train`` range, or that
                range has fewer than ``length + 2`` ids.
        """
        batch, length = checks.positive_int("batch", batch), checks.positive_int("length", length)
        if isinstance(tokens_dir, (str, os.PathLike)):
            from tokpack.serve.layouts import open_source

            self.pack = open_source(tokens_dir, name="tokens_dir")  # verified on first open, stamped after
        elif not all(hasattr(tokens_dir, attribute) for attribute in ("meta", "verify", "path")):
            raise InputError(f"tokens_dir must be a pack directory or an opened token source, "
                             f"got {type(tokens_dir).__name__}")
        else:  # an opened source (e.g. a datatrove folder): verified here all the same
            self.pack = tokens_dir
            self.pack.verify()
        if "train" not in self.pack.meta.ranges:
            raise InputError("no training range", where=self.pack.path)
        self.lo, self.hi = self.pack.meta.ranges["train"].tokens
        self.batch, self.length = batch, length
        self._modulus = self.hi - self.lo - length - 1
        if self._modulus < 1:
            raise InputError(
                f"training range has {self.hi - self.lo} ids, shorter than one row "
                f"(needs at least length + 2 = {length + 2})", where=self.pack.path
            )
        if batch * length > self.hi - self.lo:
            # Refused before anything is allocated: such a batch repeats the range within one step,
            # and batch=10**9 would otherwise allocate until the process is killed.
            raise InputError(f"a batch of {batch:,} rows of {length:,} ids is larger than the training "
                             f"range ({self.hi - self.lo:,} ids)", where=self.pack.path, fix="use a smaller batch or length")
        self._row_steps = np.arange(batch, dtype=np.int64) * length

    @property
    def vocabulary(self) -> VocabIdentity:
        """The identity record of the pack's vocabulary."""
        return self.pack.vocabulary

    def offsets(self, step: int) -> np.ndarray:
        """Where each row of step ``step`` starts in the token stream (``int64``, shape ``(batch,)``)."""
        step = checks.non_negative_int("step", step)
        base = (step * self.batch * self.length) % self._modulus  # Python ints: no overflow
        return self.lo + (base + self._row_steps) % self._modulus

    def ids(self, step: int) -> np.ndarray:
        """The batch of step ``step``: ``int32``, shape ``(batch, length + 1)``.

        Inputs are ``[:, :-1]``, targets ``[:, 1:]``.

        Raises:
            IntegrityError: an id at or above ``n_vocab`` (the data changed after it was verified).
        """
        rows = self.pack.gather_rows(self.offsets(step), self.length + 1)
        check_ids(rows, self.pack)
        return rows.astype(np.int32)

    def prefetch(self, start_step: int, steps: int, *, depth: int = 2) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(step, ids)`` for ``steps`` steps from ``start_step``, reading ahead in a thread.

        At most ``depth`` batches are alive at once (the one the consumer holds included). An
        error making a batch is raised when the consumer reaches that step, and no later batch
        is made.

        Raises:
            InputError: ``start_step`` or ``steps`` below 0, or ``depth`` below 1.
        """
        start_step, steps = checks.non_negative_int("start_step", start_step), checks.non_negative_int("steps", steps)
        depth = checks.positive_int("depth", depth)
        return self._prefetch(start_step, steps, depth)

    def _prefetch(self, start_step: int, steps: int, depth: int) -> Iterator[tuple[int, np.ndarray]]:
        ready: queue.Queue[tuple[int, np.ndarray | None, BaseException | None]] = queue.Queue()
        slots = threading.Semaphore(depth)
        stop = threading.Event()

        def produce() -> None:
            for step in range(start_step, start_step + steps):
                slots.acquire()
                if stop.is_set():
                    return
                try:
                    ready.put((step, self.ids(step), None))
                except BaseException as error:  # handed to the consumer at its own step
                    ready.put((step, None, error))
                    return

        worker = threading.Thread(target=produce, name="tokpack-prefetch", daemon=True)
        worker.start()
        try:
            for _ in range(steps):
                step, ids, error = ready.get()
                if error is not None:
                    raise error
                assert ids is not None
                yield step, ids
                slots.release()  # the consumer is done with the batch it held
        finally:
            stop.set()
            slots.release()
            worker.join()

    def describe(self) -> dict[str, Any]:
        """The token file, its hashes, the training range and the schedule."""
        meta = self.pack.meta
        return {
            "tokens_dir": str(self.pack.path),
            "tokens_sha256": meta.tokens_sha256,
            "starts_sha256": meta.starts_sha256,
            "vocabulary": meta.vocabulary.model_dump(mode="json", by_alias=True),
            "train_tokens": [self.lo, self.hi],
            "batch": self.batch,
            "length": self.length,
            "rule": SCHEDULE_RULE,
            "steps_per_pass": -(-self._modulus // (self.batch * self.length)),
        }

    def data_schedule(self, **extra: Any) -> dict[str, Any]:
        """The record a trainer keeps in every checkpoint; keyword arguments go under ``extra``.

        :func:`tokpack.require_vocabulary` and :func:`tokpack.tokenizer_for` accept it.
        """
        meta = self.pack.meta
        record = DataSchedule(
            vocabulary=meta.vocabulary,
            tokens_sha256=meta.tokens_sha256,
            starts_sha256=meta.starts_sha256,
            train_tokens=(self.lo, self.hi),
            batch=self.batch,
            length=self.length,
            extra=extra,
        )
        return record.model_dump(mode="json", by_alias=True)


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
            InputError: ``block`` below 2, no ``split`` range, or a vocabulary with no padding
                id (one the encoder never emits), so padding would collide with a real token.
        """
        block = checks.integer("block", block, low=2, what="an integer of at least 2")
        checks.fits_in_memory(f"a window of block {block:,}", 4 * 8 * (block + 1), fix="use a smaller block")
        aligned, split = checks.boolean("aligned", aligned), checks.text("split", split)
        from tokpack.serve.layouts import open_source

        self.pack = open_source(pack, name="pack")
        if split not in self.pack.meta.ranges:
            from tokpack.serve.layouts import missing_range

            raise InputError(missing_range(split, self.pack.meta.ranges, self.pack.path), where=self.pack.path)
        if self.pack.meta.pad_id is None:
            raise InputError("its vocabulary records no padding id distinct from real tokens", where=self.pack.path)
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
