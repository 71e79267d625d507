"""The fast trainer: the rules of :mod:`tokpack.bpe.reference`, the same merges and trace, at
corpus scale.

Two phases, each keeping the rules exact:

* **Split and count.** Documents (or, with a pattern, pre-tokens) are deduplicated into
  ``(text, count)``: for every named pattern and for whole documents by the compiled
  scanner and counter of :mod:`tokpack.bpe.piece_counter`, in threads (it releases the GIL); for
  any other pattern by ``regex`` in worker processes, past about a million characters
  (threads need no second interpreter; the two compared in BENCHMARKS.md, "Training BPE"). Pair counts are sums over occurrences times counts, so
  nothing depends on order or on how the work was divided, and memory grows with the number of
  distinct pieces, not with the corpus.
* **Merge.** The compiled loop of :mod:`tokpack.bpe.merge_loop`: a merge rewrites only the
  distinct pieces that hold its pair, subtracting the counts of the slots it destroys and adding
  those it creates, so the counts stay what :func:`~tokpack.bpe.reference.count_pairs` would return
  (overlapping runs such as ``aaaa`` included); the winner comes from a heap ordered by count,
  then by the smallest pair.
"""

from __future__ import annotations

import itertools
import os
import queue
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import regex

from tokpack import _checks as checks
from tokpack._memory import map_large_allocations, return_freed_memory
from tokpack._pool import in_environment, worker_context
from tokpack._signals import held
from tokpack.bpe.piece_counter import PieceCounter
from tokpack.bpe.records import TraceRow
from tokpack.bpe.reference import token_table
from tokpack.errors import InputError, WorkerDied
from tokpack.vocab import END_OF_TEXT, GPT4_PATTERN, BpeTokenizer
from tokpack.vocab.pattern_scanners import COMPILED
from tokpack.vocab.patterns import DEFAULT_PATTERN, check_covers, check_pattern, covering, resolve_pattern
from tokpack.vocab.trainers import TRAINED_SPECIAL_TOKENS, special_cut

Pair = tuple[int, int]

#: The largest id a pair code can hold (ids are packed two to an int64, 24 bits each; see
#: :data:`tokpack.bpe.merge_loop.ID_BITS`).
_MAX_ID = (1 << 24) - 1
#: Below this many characters of text, starting worker processes costs more than it saves.
_PARALLEL_MIN_CHARS = 1_000_000
#: A batch sent to a worker: this many characters or this many texts, whichever comes first.
_BATCH_CHARS = 1_000_000
_BATCH_TEXTS = 4096
#: How often (seconds) a wait on workers checks that they are still alive.
_POLL_SECONDS = 0.5
#: Merges between two progress reports.
_MERGES_PER_REPORT = 256


@dataclass(frozen=True)
class BpeProgress:
    """A progress report: ``done`` of ``total`` (``None``: unknown) ``unit`` in ``stage``:
    characters (texts) or bytes (files) while counting, merges while merging."""

    stage: Literal["count", "merge"]
    done: int
    total: int | None
    unit: Literal["chars", "bytes", "merges"]


@dataclass(frozen=True)
class BpeTraining:
    """What a training run learned.

    ``merges[i]`` made id ``first_merge_id + i``; ``trace[i]`` is its row. Special tokens hold
    the ids between 256 and ``first_merge_id``.
    """

    merges: list[Pair]
    trace: list[TraceRow]
    pattern: str | None
    special_tokens: dict[str, int] = field(default_factory=dict)
    #: Wall-clock seconds per phase: ``split_count`` (pre-tokenize and count), ``index``
    #: (arrays and initial pair counts), ``merge`` (the merge loop). For benchmarks only.
    seconds: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def first_merge_id(self) -> int:
        """The id of the first merge: 256 plus the number of special tokens."""
        return 256 + len(self.special_tokens)

    def token_bytes(self) -> list[bytes]:
        """The bytes of every id from 0 up to the last merge (special tokens as their UTF-8 names)."""
        specials = sorted(self.special_tokens, key=self.special_tokens.__getitem__)
        return token_table(self.merges, specials=specials)

    def ranks(self) -> dict[bytes, int]:
        """``{token bytes: rank}`` for the bytes and the merges (not the special tokens).

        Two merges can spell the same bytes (``(ab, c)`` and ``(a, bc)``); the rank file holds
        each spelling once, at its first id, and the later id stays unused.
        """
        table = self.token_bytes()
        ranks = {bytes([b]): b for b in range(256)}
        for index in range(len(self.merges)):
            ranks.setdefault(table[self.first_merge_id + index], self.first_merge_id + index)
        return ranks

    def as_tokenizer(self) -> BpeTokenizer:
        """This vocabulary as a tiktoken-backed :class:`~tokpack.vocab.BpeTokenizer`.

        Without special tokens, ``<|endoftext|>`` takes the id after the highest rank (the last
        merge, unless that one repeated an earlier spelling).

        Raises:
            InputError: training ran without a pattern (a byte-level vocabulary needs one), or a
                merge spells ``<|endoftext|>`` (trained without ``cut_out=("<|endoftext|>",)``):
                its spelling would have two ids.
        """
        if self.pattern is None:
            raise InputError("a vocabulary needs the pre-tokenizer pattern it was trained with; train with pattern=")
        ranks = self.ranks()
        specials = dict(self.special_tokens) or None
        if specials is None and END_OF_TEXT.encode("utf-8") in ranks:
            raise InputError(f"merge {ranks[END_OF_TEXT.encode('utf-8')] - self.first_merge_id + 1} spells "
                             f"{END_OF_TEXT!r}, the special token this vocabulary numbers after its merges",
                             fix=f"train with cut_out=({END_OF_TEXT!r},), which cuts it out of the text")
        return BpeTokenizer(ranks=ranks, pattern=self.pattern, special_tokens=specials)


def train_fast(
    texts: Iterable[str],
    num_merges: int,
    *,
    pattern: str | None = None,
    min_frequency: int = 1,
    special_tokens: Sequence[str] = (),
    cut_out: Sequence[str] = (),
    workers: int | None = None,
    progress: Callable[[BpeProgress], None] | None = None,
) -> BpeTraining:
    """Learn up to ``num_merges`` merges by the exact rules, quickly.

    Args:
        texts: the documents (any iterable of ``str``; read once, in batches).
        num_merges: how many merges to learn at most.
        pattern: a pre-tokenizer: a name (``gpt4``, ``gpt2``, ``polish``, ``polish-phrase``) or a
            regex (``regex`` syntax, e.g. :data:`~tokpack.vocab.GPT4_PATTERN`); its pieces act as
            the documents, so merges never cross them, and it must match every character of the
            first non-empty text. ``None``: each text is one document, as in
            :func:`~tokpack.bpe.reference.train_bpe`.
        min_frequency: stop when the best pair occurs fewer times than this.
        special_tokens: names that take ids 256, 257, … before the first merge; their occurrences
            in the texts are cut out and never trained on.
        cut_out: more spellings cut out of the texts as ``special_tokens`` are, without ids: the
            special tokens a vocabulary numbers after its merges (:func:`train_bytelevel` cuts
            ``<|endoftext|>``), so no merge makes one.
        workers: threads (compiled patterns) or processes (other patterns) that split and count
            (default: one per core, once the input passes about a million characters).
        progress: called with a :class:`BpeProgress` as characters are counted and merges made.

    Returns:
        The merges and trace; with no pattern and no special tokens they equal
        :func:`~tokpack.bpe.reference.train_bpe`'s.

    On glibc, the first training call pins the process's mmap threshold at 128 KiB, so the large
    arrays training frees go back to the system (see :func:`tokpack._memory.map_large_allocations`).

    Raises:
        TypeError: a text is not a ``str``.
        InputError: a negative ``num_merges``, ``min_frequency`` below 1, a repeated or empty
            special token, an empty ``cut_out`` spelling, or a pattern that does not compile or
            skips text.

    >>> training = train_fast(["abab", "abab", "baba", "aaaa"], 3)
    >>> training.merges, [row.frequency for row in training.trace]
    ([(97, 98), (97, 97), (256, 256)], [5, 3, 2])
    """
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of strings, not one string")
    if num_merges < 0:
        raise InputError(f"num_merges must be 0 or more, got {num_merges}")
    checks.positive_int("min_frequency", min_frequency, what="at least 1")
    if len(set(special_tokens)) != len(special_tokens) or any(not name for name in special_tokens):
        raise InputError("special tokens must be distinct, non-empty strings")
    cuts = _cuts(special_tokens, cut_out)
    specials = {name: 256 + index for index, name in enumerate(special_tokens)}
    first_id = 256 + len(specials)
    if first_id + num_merges > _MAX_ID:
        raise InputError(f"at most {_MAX_ID - first_id:,} merges fit in a pair code, {num_merges:,} asked")
    if pattern is not None:
        pattern = resolve_pattern(pattern, "pattern")
        texts = covering(texts, pattern, "pattern")
    map_large_allocations()
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    pieces = _count(texts, pattern=pattern, special_tokens=cuts, workers=workers, progress=progress)
    seconds["split_count"] = time.perf_counter() - started
    return _train_counted(pieces, num_merges, pattern, min_frequency, specials, seconds, progress)


def _train_counted(
    pieces: Counter[str] | PieceCounter,
    num_merges: int,
    pattern: str | None,
    min_frequency: int,
    specials: dict[str, int],
    seconds: dict[str, float],
    progress: Callable[[BpeProgress], None] | None,
) -> BpeTraining:
    first_id = 256 + len(specials)
    merges, trace = _merge_loop(
        pieces, num_merges, min_frequency=min_frequency, first_id=first_id, seconds=seconds, progress=progress
    )
    return BpeTraining(merges=merges, trace=trace, pattern=pattern, special_tokens=specials, seconds=seconds)


def train_bytelevel(
    texts: Iterable[str], *, vocab_size: int, min_frequency: int = 2, pattern: str = DEFAULT_PATTERN
) -> BpeTokenizer:
    """Train a byte-level vocabulary of ``vocab_size`` ranks (the 256 bytes included) exactly:
    ``vocab_size - 256`` merges, and ``<|endoftext|>`` after them, so its ``n_vocab`` is
    ``vocab_size + 1`` (the CLI's ``--vocab-size`` counts ``<|endoftext|>`` too, and passes one
    less here). ``pattern`` is a name or a regex, as in :func:`train_fast`.

    The counterpart of :func:`tokpack.vocab.train_hf_bytelevel` with the same signature: byte
    ``b`` has rank ``b`` and merge ``i`` rank ``256 + i``; ``<|endoftext|>`` follows the last
    rank. Training stops early when no pair reaches ``min_frequency``. The texts' spellings of
    ``<|endoftext|>`` are cut out (``cut_out``), as :func:`~tokpack.vocab.train_hf_bytelevel`
    cuts them, so no merge makes it.

    Raises:
        InputError: ``vocab_size`` below 256 or ``min_frequency`` below 1.
        TypeError: a text is not a ``str``.
    """
    if vocab_size < 256:
        raise InputError(f"vocab_size must be at least 256 (one rank per byte), got {vocab_size}")
    training = train_fast(texts, vocab_size - 256, pattern=pattern, min_frequency=min_frequency,
                          cut_out=TRAINED_SPECIAL_TOKENS)
    return training.as_tokenizer()


def count_pieces(
    texts: Iterable[str],
    *,
    pattern: str | None,
    special_tokens: Sequence[str] = (),
    workers: int | None = None,
    progress: Callable[[BpeProgress], None] | None = None,
) -> Counter[str]:
    """How often each document (``pattern=None``) or each pre-token occurs in ``texts``.

    Past about a million characters, splitting and counting run in ``workers`` threads (the
    patterns of :data:`tokpack.vocab.pattern_scanners.COMPILED`) or processes (any other pattern),
    default one per core, each keeping its own counts, added up at the end; the result does not
    depend on how the work was divided.

    >>> count_pieces(["ab ab", "ab"], pattern=r" ?\\w+")
    Counter({'ab': 2, ' ab': 1})

    Raises:
        TypeError: a text is not a ``str``.
        regex.error: ``pattern`` does not compile.
    """
    counted = _count(texts, pattern=pattern, special_tokens=special_tokens, workers=workers, progress=progress)
    return counted if isinstance(counted, Counter) else counted.to_counter()


def _count(
    texts: Iterable[str],
    *,
    pattern: str | None,
    special_tokens: Sequence[str] = (),
    workers: int | None = None,
    progress: Callable[[BpeProgress], None] | None = None,
) -> Counter[str] | PieceCounter:
    """:func:`count_pieces`, as a :class:`~tokpack.bpe.piece_counter.PieceCounter` (counted by
    threads) for the patterns that have a compiled scanner, else as a ``Counter`` (counted by
    ``regex`` in worker processes)."""
    splitter = _Splitter(pattern, tuple(special_tokens))
    splitter.compile()  # a bad pattern fails here, not in a worker
    processes = workers if workers is not None else (os.cpu_count() or 1)
    total: Counter[str] = Counter()
    size = sum(len(t) for t in texts if isinstance(t, str)) if isinstance(texts, Sequence) else None
    batches = _batches(texts, progress, size)
    if pattern in COMPILED:
        # Threads: the compiled scan releases the GIL, so no second interpreter is needed.
        threads = 1 if size is not None and size < _PARALLEL_MIN_CHARS else max(1, processes)
        return _count_in_threads(splitter, pattern, threads, _shared(batches))
    if size is not None and size < _PARALLEL_MIN_CHARS:
        processes = 1
    elif not isinstance(texts, Sequence):
        # An iterator's size is unknown: count its first million characters here, and start
        # worker processes only if more follows.
        seen = 0
        for batch in batches:
            splitter.count_into(total, batch)
            seen += sum(map(len, batch))
            if seen >= _PARALLEL_MIN_CHARS:
                break
        else:
            return total
    if processes <= 1:
        for batch in batches:
            splitter.count_into(total, batch)
        return total
    for counts in _count_in_workers(splitter, batches, processes)[0]:
        if not total:
            total = counts  # adopting the first result saves merging the largest dict
        else:
            total.update(counts)
    return total


class _Stopped(Exception):
    """Another counting thread failed: stop this one."""


def _count_in_threads(
    splitter: _Splitter, pattern: str | None, threads: int, work: Callable[[Callable[[list[str]], None]], None]
) -> PieceCounter:
    """Count with ``threads`` threads, each with its own counter: each thread runs
    ``work(add)``, which fetches batches of texts (locking what it shares with the others) and
    passes each to ``add``; the counters are added up at the end. An error in one thread stops
    the others at their next batch and is raised here."""
    stop = threading.Event()
    counters = [PieceCounter(pattern) for _ in range(threads)]
    errors: list[BaseException] = []

    def run(counter: PieceCounter) -> None:
        def add(batch: list[str]) -> None:
            if stop.is_set():
                raise _Stopped
            counter.add(splitter.parts(batch))

        try:
            work(add)
        except _Stopped:
            pass
        except BaseException as error:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(error)
            stop.set()

    if threads == 1:
        run(counters[0])
    else:
        pool = [threading.Thread(target=run, args=(counter,), daemon=True) for counter in counters]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
    if errors:
        raise errors[0]
    total = max(counters, key=len)  # adding the smaller counters into the largest saves work
    for counter in counters:
        if counter is not total:
            total.update(counter)
            counter.clear()
    return total


def _shared(batches: Iterator[list[str]]) -> Callable[[Callable[[list[str]], None]], None]:
    """A thread's work: take batches from the iterator all threads share until it runs dry."""
    lock = threading.Lock()

    def work(add: Callable[[list[str]], None]) -> None:
        while True:
            with lock:  # a generator is not thread-safe
                batch = next(batches, None)
            if batch is None:
                return
            add(batch)

    return work


def _count_in_workers(
    splitter: _Splitter,
    batches: Iterable[list[str] | tuple[int, int]],
    processes: int,
    *,
    source: _SourceSpec | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Counter[str]], int]:
    """Feed ``batches`` (lists of texts, or unit ranges of ``source``) to ``processes`` worker
    processes through a bounded queue; return their counts and how many records they skipped.
    ``progress`` hears of the bytes each unit range held, as workers finish them.

    Workers come from :func:`tokpack._pool.worker_context` (never a fork of this process, which
    may hold threads and a large heap), and every wait has a timeout so that a worker that dies (killed for
    memory, a signal) becomes :class:`~tokpack.errors.WorkerDied` instead of a hang.
    """
    context = worker_context((_count_worker.__module__,))
    tasks = context.Queue(maxsize=2 * processes)  # bounded: the input is never all in flight
    results = context.Queue()
    pool = [
        context.Process(target=in_environment, args=(dict(os.environ), os.getpid(), _count_worker, splitter, source, tasks, results,
                                                     number), daemon=True)
        for number in range(processes)
    ]
    for process in pool:
        process.start()
    received: dict[int, Counter[str] | BaseException] = {}
    skipped = 0

    def check_alive() -> None:
        for number, process in enumerate(pool):
            if number not in received and process.exitcode not in (None, 0):
                raise WorkerDied(
                    f"BPE count worker {number} (pid {process.pid}) died with exit code {process.exitcode} "
                    "before sending its counts (killed for memory?); lower workers= or the input size"
                )

    def drain(timeout: float) -> None:
        nonlocal skipped
        try:
            message = results.get(timeout=timeout)
        except queue.Empty:
            check_alive()
            return
        if message[0] == "done":
            if progress is not None:
                progress(message[1])
        elif message[0] == "skipped":
            skipped += message[1]
        else:
            received[message[1]] = message[2]

    def put(item: list[str] | tuple[int, int] | None) -> None:
        while True:
            try:
                tasks.put(item, timeout=_POLL_SECONDS)
                return
            except queue.Full:
                check_alive()
                drain(0)

    try:
        for batch in batches:
            put(batch)
        for _ in pool:
            put(None)
        while len(received) < len(pool):
            drain(_POLL_SECONDS)
        for process in pool:
            process.join()
    finally:
        for process in pool:
            if process.is_alive():
                process.terminate()
                process.join()
        tasks.cancel_join_thread()  # never block on a queue a dead worker left unread
    failures = [item for item in received.values() if isinstance(item, BaseException)]
    if failures:
        raise failures[0]
    return [item for item in received.values() if not isinstance(item, BaseException)], skipped


def _count_worker(splitter: _Splitter, spec: _SourceSpec | None, tasks: Any, results: Any, number: int) -> None:
    """Count the pieces of each task of ``tasks`` until ``None``; put the counts on ``results``.
    Ctrl-C reaches every process of a terminal's job: the caller hears it and ends the workers
    (each would otherwise print its own traceback), so a worker ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    counts: Counter[str] = Counter()
    try:
        opened = spec.open() if spec is not None else None
        while (task := tasks.get()) is not None:
            if opened is None:
                splitter.count_into(counts, task)
                continue
            done = 0
            batch: list[str] = []
            for piece in opened.pieces(*task):
                batch.append(piece.text)
                done += piece.n_bytes
                if len(batch) >= _BATCH_TEXTS:
                    splitter.count_into(counts, batch)
                    batch = []
            splitter.count_into(counts, batch)
            results.put(("done", done))
        skipped = opened.skipped if opened is not None else 0
    except Exception as error:  # noqa: BLE001 - report any failure to the parent instead of dying silently
        while tasks.get() is not None:
            pass
        results.put(("counts", number, error))
        return
    results.put(("skipped", skipped))
    results.put(("counts", number, counts))


@dataclass(frozen=True)
class _SourceSpec:
    """How a worker opens the corpus itself (a source holds maps and files: it does not pickle)."""

    path: Path
    document_bytes: int
    on_error: str
    text_field: str
    separator: str | None = None
    manifest: Path | None = None

    def open(self) -> Any:
        from tokpack.corpus.sources import open_corpus

        return open_corpus(
            self.path, document_bytes=self.document_bytes, on_error=self.on_error,  # type: ignore[arg-type]
            text_field=self.text_field, separator=self.separator, manifest=self.manifest,
        )


@dataclass(frozen=True)
class FileTraining:
    """:func:`train_from_files`' result: the training, and what was read (``held_out``: whether
    the corpus's manifest held out validation or test documents, which were not)."""

    training: BpeTraining
    n_bytes: int
    skipped: int
    held_out: bool = False


def train_from_files(
    corpus: str | Path,
    num_merges: int,
    *,
    pattern: str | None = GPT4_PATTERN,
    min_frequency: int = 1,
    special_tokens: Sequence[str] = (),
    cut_out: Sequence[str] = (),
    text_field: str = "text",
    document_bytes: int | None = None,
    on_error: Literal["raise", "skip"] = "raise",
    workers: int | None = None,
    progress: Callable[[BpeProgress], None] | None = None,
    separator: str | None = None,
    manifest: str | Path | None = None,
) -> FileTraining:
    """Train on a corpus on disk (a text file, a folder of them, JSON Lines or Parquet: the
    sources of ``prepare``) without ever holding its text: ``workers`` threads (compiled
    patterns) or worker processes (other patterns) each open it, split and count ranges of its
    documents, and add up their counts, so memory grows with the number of distinct pre-tokens,
    not with the corpus.

    The documents are those of the training range that :func:`tokpack.corpus.sources.open_corpus`
    yields (a corpus whose manifest holds out validation or test documents is trained on the rest
    only, as ``prepare`` trains; cut at ``separator`` too, as ``prepare`` cuts them), so the merges
    equal ``train_fast(documents, ...)``'s. ``document_bytes`` and ``separator`` left ``None``
    are those a text file's manifest (``manifest``, else the one beside it) was cut with, else
    1 MiB and none; ``num_merges`` counts merges, not ids (see :func:`train_bytelevel`).
    ``special_tokens`` and ``cut_out`` are cut out of the documents as :func:`train_fast` cuts them
    (``tokpack bpe train`` cuts ``<|endoftext|>``).

    Raises:
        InputError: ``corpus`` does not exist, a bad record (with ``on_error="raise"``), field or option.
        WorkerDied: a worker process was killed.
    """

    if num_merges < 0:
        raise InputError(f"num_merges must be 0 or more, got {num_merges}")
    if pattern is not None:
        pattern = resolve_pattern(pattern, "pattern")
    checks.positive_int("min_frequency", min_frequency, what="at least 1")
    if len(set(special_tokens)) != len(special_tokens) or any(not name for name in special_tokens):
        raise InputError("special tokens must be distinct, non-empty strings")
    cuts = _cuts(special_tokens, cut_out)
    specials = {name: 256 + index for index, name in enumerate(special_tokens)}
    if 256 + len(specials) + num_merges > _MAX_ID:
        raise InputError(f"at most {_MAX_ID - 256 - len(specials):,} merges fit in a pair code")
    from tokpack.corpus.sources import reading_cut

    document_bytes, separator = reading_cut(corpus, document_bytes=document_bytes, separator=separator,
                                            manifest=manifest)
    spec = _SourceSpec(Path(corpus), document_bytes, on_error, text_field, separator,
                       None if manifest is None else Path(manifest))
    splitter = _Splitter(pattern, cuts)
    splitter.compile()  # a bad pattern fails here, not in a worker
    map_large_allocations()
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    if pattern is not None:
        check_pattern(pattern)
    with spec.open() as source:  # validates the corpus and its options once, here
        n_units = source.n_units
        # Never the validation or test documents a manifest holds out (they follow the training ones).
        training_units = [(first, last) for name, first, last in source.unit_ranges() if name == "train"]
        held_out = any(name != "train" for name, _, _ in source.unit_ranges())
        span = source.range_bytes("train")
        disk_bytes = _text_bytes(source) if not held_out else None if span is None else span[1] - span[0]
        # a pattern that skips text would count (and train on) only part of it
        first = next((piece.text for piece in source.pieces(0, n_units) if piece.text), None)
        if first is not None and pattern is not None:
            check_covers(pattern, first[:65536], corpus)
    processes = max(1, workers if workers is not None else (os.cpu_count() or 1))
    # Many more ranges than workers, so a slow range does not leave a worker idle at the end.
    step = max(1, -(-sum(last - first for first, last in training_units) // (processes * 64)))
    ranges = [(unit, min(unit + step, last)) for first, last in training_units for unit in range(first, last, step)]
    done = 0

    def counted(n_bytes: int) -> None:
        nonlocal done
        done += n_bytes
        if progress is not None:
            progress(BpeProgress("count", done, disk_bytes, "bytes"))

    total: Counter[str] | PieceCounter
    if pattern in COMPILED:
        total, skipped = _count_files_in_threads(splitter, spec, ranges, processes, counted)
    else:
        results, skipped = _count_in_workers(splitter, ranges, processes, source=spec, progress=counted)
        total = Counter()
        for counts in results:
            if not total:
                total = counts  # adopting the first result saves merging the largest dict
            else:
                total.update(counts)
    seconds["split_count"] = time.perf_counter() - started
    training = _train_counted(total, num_merges, pattern, min_frequency, specials, seconds, progress)
    return FileTraining(training=training, n_bytes=done, skipped=skipped, held_out=held_out)


def _count_files_in_threads(
    splitter: _Splitter, spec: _SourceSpec, ranges: list[tuple[int, int]], threads: int,
    counted: Callable[[int], None],
) -> tuple[PieceCounter, int]:
    """Count the unit ``ranges`` of ``spec`` with ``threads`` threads, each reading through its
    own opened source; ``counted`` hears of the bytes of every range done. Returns the counts and
    the records skipped."""
    lock = threading.Lock()
    pending = iter(ranges)
    skipped = 0

    def work(add: Callable[[list[str]], None]) -> None:
        nonlocal skipped
        with spec.open() as opened:
            while True:
                with lock:
                    task = next(pending, None)
                if task is None:
                    break
                done = size = 0
                batch: list[str] = []
                for piece in opened.pieces(*task):
                    batch.append(piece.text)
                    done += piece.n_bytes
                    size += len(piece.text)
                    if size >= _BATCH_CHARS or len(batch) >= _BATCH_TEXTS:
                        add(batch)
                        batch, size = [], 0
                add(batch)
                with lock:
                    counted(done)
            with lock:
                skipped += opened.skipped

    counts = _count_in_threads(splitter, splitter.pattern, threads, work)
    return counts, skipped


def _text_bytes(source: Any) -> int | None:
    """The bytes a text source will yield (its files' sizes); ``None`` for record formats, whose
    files hold more than their text."""
    if source.format == "text":
        return int(source.path.stat().st_size)
    if source.format == "directory":
        return sum(file.stat().st_size for file in source.files)
    return None


def _cuts(special_tokens: Sequence[str], cut_out: Sequence[str]) -> tuple[str, ...]:
    """Every spelling cut out of the texts: the special tokens, then ``cut_out``'s others.

    Raises:
        InputError: an empty or non-string ``cut_out`` spelling.
    """
    if isinstance(cut_out, str) or any(not isinstance(name, str) or not name for name in cut_out):
        raise InputError("cut_out must be a sequence of non-empty strings")
    return (*special_tokens, *(name for name in dict.fromkeys(cut_out) if name not in special_tokens))


class _Splitter:
    """Cuts texts into pieces and counts them (picklable, for worker processes); ``special_tokens``
    are the spellings cut out of the texts first (:func:`tokpack.vocab.trainers.special_cut`)."""

    def __init__(self, pattern: str | None, special_tokens: tuple[str, ...]) -> None:
        self.pattern = pattern
        self.special_tokens = special_tokens
        self._compiled: tuple[regex.Pattern[str] | None, Callable[[str], list[str]] | None] | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"pattern": self.pattern, "special_tokens": self.special_tokens, "_compiled": None}

    def compile(self) -> tuple[regex.Pattern[str] | None, Callable[[str], list[str]] | None]:
        if self._compiled is None:
            cut = special_cut(self.special_tokens)
            self._compiled = (None if self.pattern is None else regex.compile(self.pattern), cut)
        return self._compiled

    def parts(self, batch: list[str]) -> list[str]:
        """The texts of ``batch`` with the special tokens cut out."""
        _, cut = self.compile()
        if cut is None:
            return batch
        return [part for text in batch for part in cut(text)]

    def count_into(self, counts: Counter[str], batch: list[str]) -> None:
        pieces_of, cut = self.compile()
        for text in batch:
            parts = cut(text) if cut is not None else [text]
            if pieces_of is None:
                counts.update(parts)
            else:
                for part in parts:
                    counts.update(pieces_of.findall(part))


def _batches(
    texts: Iterable[str], progress: Callable[[BpeProgress], None] | None = None, total: int | None = None
) -> Iterator[list[str]]:
    """Texts in batches of about a megabyte (or ``_BATCH_TEXTS`` texts), each checked to be a
    ``str``; ``progress`` hears of the characters handed out so far."""
    batch: list[str] = []
    size = done = 0
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is {type(text).__name__}, not str")
        batch.append(text)
        size += len(text)
        if size >= _BATCH_CHARS or len(batch) >= _BATCH_TEXTS:
            yield batch
            done += size
            if progress is not None:
                progress(BpeProgress("count", done, total, "chars"))
            batch, size = [], 0
    if batch:
        yield batch
        if progress is not None:
            progress(BpeProgress("count", done + size, total, "chars"))


def _flatten(pieces: Counter[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of two bytes or more as one uint8 array, their lengths and their counts (a
    piece of one byte has no pair and never changes)."""
    encoded = [piece.encode("utf-8") for piece in pieces]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    counts = np.fromiter(pieces.values(), dtype=np.int64, count=len(encoded))
    keep = lengths >= 2
    flat = np.frombuffer(b"".join(itertools.compress(encoded, keep.tolist())), dtype=np.uint8)
    return flat, lengths[keep], counts[keep]


def _merge_loop(
    pieces: Counter[str] | PieceCounter,
    num_merges: int,
    *,
    min_frequency: int,
    first_id: int,
    seconds: dict[str, float],
    progress: Callable[[BpeProgress], None] | None = None,
) -> tuple[list[Pair], list[TraceRow]]:
    """Index the counted pieces and run the compiled merge loop."""
    from tokpack.bpe import merge_loop  # numba is costly to import: only when training

    started = time.perf_counter()
    if isinstance(pieces, PieceCounter):
        flat, lengths, counts = pieces.to_utf8()
        pieces.clear()
    else:
        flat, lengths, counts = _flatten(pieces)
        pieces.clear()  # the caller's counts are no longer needed: free them before the arrays grow
    return_freed_memory()
    state = merge_loop.build(flat, lengths, counts, first_id + num_merges, min_frequency)
    del flat, lengths, counts
    return_freed_memory()
    seconds["index"] = time.perf_counter() - started
    started = time.perf_counter()
    out = np.zeros((num_merges, 3), dtype=np.int64)
    done = 0
    with held() as signals:  # set once; Ctrl-C raises between chunks (tokpack._signals)
        while done < num_merges:
            # In chunks so that progress is reported and Ctrl-C heard; the loop itself never leaves numba.
            until = min(num_merges, done + _MERGES_PER_REPORT)
            done = merge_loop.run(state, until, first_id, out)
            signals.deliver()
            return_freed_memory()  # what the loop's growing arrays left behind
            if progress is not None:
                progress(BpeProgress("merge", done, num_merges, "merges"))
            if done < until:
                break  # no pair reaches min_frequency
    seconds["merge"] = time.perf_counter() - started
    del state  # free the merge state (tens of MiB) before the trace's Python objects are made
    rows = out[:done].tolist()
    merges = [(left, right) for left, right, _ in rows]
    trace = [
        TraceRow(left_id=left, right_id=right, result_id=first_id + index, frequency=frequency)
        for index, (left, right, frequency) in enumerate(rows)
    ]
    return merges, trace
