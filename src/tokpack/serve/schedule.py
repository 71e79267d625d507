"""``TokenBatches``: a fixed step schedule over a pack's training range.

Step ``k`` (zero-based), row ``b`` reads the ``length + 1`` ids starting at::

    lo + (k * batch * length + b * length) % (hi - lo - length - 1)

where ``[lo, hi)`` is the training range in tokens. Every read ends before ``hi``, so no run of
any length ever sees a validation or test id, and the batch of a step depends on nothing but
``k``: a run resumed at step ``k`` sees what an uninterrupted run saw.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from tokpack import _checks as checks
from tokpack._schema import Record
from tokpack.errors import InputError, IntegrityError
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
                an opened token source such as :class:`tokpack.store.datatrove.DatatroveFolder`.
            batch: rows per batch, at least 1.
            length: inputs per row, at least 1 (each row holds ``length + 1`` ids).

        Raises:
            ValueError: the pack does not match its meta, it has no ``train`` range, or that
                range has fewer than ``length + 2`` ids.
        """
        batch, length = checks.positive_int("batch", batch), checks.positive_int("length", length)
        if isinstance(tokens_dir, (str, os.PathLike)):
            from tokpack.serve.layouts import open_source

            self.pack = open_source(tokens_dir, name="tokens_dir")  # verified on first open, stamped after
        elif not all(hasattr(tokens_dir, attribute) for attribute in ("meta", "verify", "path")):
            raise InputError(None, f"tokens_dir must be a pack directory or an opened token source, "
                             f"got {type(tokens_dir).__name__}")
        else:  # an opened source (e.g. a datatrove folder): verified here all the same
            self.pack = tokens_dir
            self.pack.verify()
        if "train" not in self.pack.meta.ranges:
            raise InputError(f"{self.pack.path}: no training range")
        self.lo, self.hi = self.pack.meta.ranges["train"].tokens
        self.batch, self.length = batch, length
        self._modulus = self.hi - self.lo - length - 1
        if self._modulus < 1:
            raise InputError(
                f"{self.pack.path}: training range has {self.hi - self.lo} ids, shorter than one row "
                f"(needs at least length + 2 = {length + 2})"
            )
        if batch * length > self.hi - self.lo:
            # Refused before anything is allocated: such a batch repeats the range within one step,
            # and batch=10**9 would otherwise allocate until the process is killed.
            raise InputError(self.pack.path, f"a batch of {batch:,} rows of {length:,} ids is larger than the training "
                             f"range ({self.hi - self.lo:,} ids)", fix="use a smaller batch or length")
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
            ValueError: ``start_step`` or ``steps`` below 0, or ``depth`` below 1.
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


def check_ids(ids: np.ndarray, source: TokenSource) -> None:
    """One reduction over a served batch: every id must be below ``n_vocab``.

    Raises:
        IntegrityError: naming ``source``, for an id a corrupt pack would otherwise serve.
    """
    n_vocab = source.vocabulary.n_vocab
    if ids.size and int(ids.max()) >= n_vocab:
        raise IntegrityError(source.path, f"id {int(ids.max())} outside the vocabulary (n_vocab {n_vocab})",
                             fix="the data is corrupt; verify it with tokpack inspect --verify")
