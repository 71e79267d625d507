"""The fast trainer: the rules of :mod:`tokpack.bpe.reference`, the same merges and trace, at
corpus scale.

How it gets there, and why each piece keeps the rules exact:

* Documents (or, with a pattern, pre-tokens) are deduplicated into ``(bytes, count)`` pairs.
  Pair counts are sums over occurrences times counts, so nothing depends on order.
* All sequences live in one flat array with ``next``/``prev`` links (a linked list per
  sequence); a dead position or the sentinel past the end holds id ``-1``, so a link never
  matches a pair.
* A merge only changes the slots (adjacent position pairs) that touch its occurrences. The step
  subtracts the counts of those slots before the merge and adds them back after it, so the
  counts stay exactly what :func:`~tokpack.bpe.reference.count_pairs` would return — overlapping
  runs such as ``aaaa`` included — and every occurrence is handled in one numpy pass.
* The positions of a pair are found without a global index: a slot holding ``(c, d)`` was last
  written at the start (both bytes) or by the step that created ``c`` or ``d``. Each step keeps
  its written slots sorted by pair code; a lookup reads at most three sorted arrays.
* The winner comes from a heap of ``(-count, pair code)`` (the tie rule, as integers), with
  lazy invalidation: a count that rises pushes a new entry; one that falls pushes nothing, and
  its old, too-high entry is requeued at the true count when it surfaces. An entry whose count
  is current is therefore the true maximum, ties broken by the smallest code.
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import regex

from tokpack.bpe.records import TraceRow
from tokpack.bpe.reference import token_table
from tokpack.errors import InputError
from tokpack.vocab import GPT2_PATTERN, BpeTokenizer

Pair = tuple[int, int]

#: Ids are packed two to a code as ``left << _ID_BITS | right`` (int64), so code order is pair order.
_ID_BITS = 24
_RIGHT_MASK = (1 << _ID_BITS) - 1
#: Below this many characters of text, starting worker processes costs more than it saves.
_PARALLEL_MIN_CHARS = 1_000_000
#: A batch sent to a worker: this many characters or this many texts, whichever comes first.
_BATCH_CHARS = 1_000_000
_BATCH_TEXTS = 4096
#: Groups of at most this many slots sum their count changes in a dict (faster there than a
#: numpy bincount over all ids).
_SMALL_STEP = 64


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
            ValueError: training ran without a pattern (a byte-level vocabulary needs one).
        """
        if self.pattern is None:
            raise InputError("a vocabulary needs the pre-tokenizer pattern it was trained with; train with pattern=")
        specials = dict(self.special_tokens) or None
        return BpeTokenizer(ranks=self.ranks(), pattern=self.pattern, special_tokens=specials)


def train_fast(
    texts: Iterable[str],
    num_merges: int,
    *,
    pattern: str | None = None,
    min_frequency: int = 1,
    special_tokens: Sequence[str] = (),
    workers: int | None = None,
) -> BpeTraining:
    """Learn up to ``num_merges`` merges by the exact rules, quickly.

    Args:
        texts: the documents (any iterable of ``str``; read once, in batches).
        num_merges: how many merges to learn at most.
        pattern: a pre-tokenizer regex (``regex`` syntax, e.g. :data:`~tokpack.vocab.GPT2_PATTERN`);
            its pieces act as the documents, so merges never cross them. ``None``: each text is
            one document, as in :func:`~tokpack.bpe.reference.train_bpe`.
        min_frequency: stop when the best pair occurs fewer times than this.
        special_tokens: names that take ids 256, 257, … before the first merge; their occurrences
            in the texts are cut out and never trained on.
        workers: processes that split and count (default: one per core, once the input passes
            about a million characters).

    Returns:
        The merges and trace; with no pattern and no special tokens they equal
        :func:`~tokpack.bpe.reference.train_bpe`'s.

    Raises:
        TypeError: a text is not a ``str``.
        ValueError: a negative ``num_merges``, ``min_frequency`` below 1, or a repeated or empty
            special token.

    >>> training = train_fast(["abab", "abab", "baba", "aaaa"], 3)
    >>> training.merges, [row.frequency for row in training.trace]
    ([(97, 98), (97, 97), (256, 256)], [5, 3, 2])
    """
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of strings, not one string")
    if num_merges < 0:
        raise InputError(f"num_merges must be 0 or more, got {num_merges}")
    if min_frequency < 1:
        raise InputError(f"min_frequency must be at least 1, got {min_frequency}")
    if len(set(special_tokens)) != len(special_tokens) or any(not name for name in special_tokens):
        raise InputError("special tokens must be distinct, non-empty strings")
    specials = {name: 256 + index for index, name in enumerate(special_tokens)}
    first_id = 256 + len(specials)
    if first_id + num_merges > _RIGHT_MASK:
        raise InputError(f"at most {_RIGHT_MASK - first_id} merges fit in a pair code")
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    pieces = count_pieces(texts, pattern=pattern, special_tokens=special_tokens, workers=workers)
    seconds["split_count"] = time.perf_counter() - started
    merges, trace = _merge_loop(pieces, num_merges, min_frequency=min_frequency, first_id=first_id, seconds=seconds)
    return BpeTraining(merges=merges, trace=trace, pattern=pattern, special_tokens=specials, seconds=seconds)


def train_bytelevel(
    texts: Iterable[str], *, vocab_size: int, min_frequency: int = 2, pattern: str = GPT2_PATTERN
) -> BpeTokenizer:
    """Train a byte-level vocabulary of ``vocab_size`` ranks (the 256 bytes included) exactly.

    The counterpart of :func:`tokpack.vocab.train_hf_bytelevel` with the same signature: byte
    ``b`` has rank ``b`` and merge ``i`` rank ``256 + i``; ``<|endoftext|>`` follows the last
    rank. Training stops early when no pair reaches ``min_frequency``.

    Raises:
        ValueError: ``vocab_size`` below 256 or ``min_frequency`` below 1.
        TypeError: a text is not a ``str``.
    """
    if vocab_size < 256:
        raise InputError(f"vocab_size must be at least 256 (one rank per byte), got {vocab_size}")
    training = train_fast(texts, vocab_size - 256, pattern=pattern, min_frequency=min_frequency)
    return training.as_tokenizer()


def count_pieces(
    texts: Iterable[str],
    *,
    pattern: str | None,
    special_tokens: Sequence[str] = (),
    workers: int | None = None,
) -> Counter[str]:
    """How often each document (``pattern=None``) or each pre-token occurs in ``texts``.

    Past about a million characters, splitting and counting run in ``workers`` processes
    (default: one per core), each keeping its own counts and sending them back once; the result
    does not depend on how the work was divided.

    >>> count_pieces(["ab ab", "ab"], pattern=r" ?\\w+")
    Counter({'ab': 2, ' ab': 1})

    Raises:
        TypeError: a text is not a ``str``.
        regex.error: ``pattern`` does not compile.
    """
    splitter = _Splitter(pattern, tuple(special_tokens))
    splitter.compile()  # a bad pattern fails here, not in a worker
    processes = workers if workers is not None else (os.cpu_count() or 1)
    total: Counter[str] = Counter()
    batches = _batches(texts)
    if isinstance(texts, Sequence) and sum(len(t) for t in texts if isinstance(t, str)) < _PARALLEL_MIN_CHARS:
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
    for counts in _count_in_workers(splitter, batches, processes):
        if not total:
            total = counts  # adopting the first result saves merging the largest dict
        else:
            total.update(counts)
    return total


def _count_in_workers(splitter: _Splitter, batches: Iterator[list[str]], processes: int) -> list[Counter[str]]:
    """Feed ``batches`` to ``processes`` workers through a bounded queue; return their counts."""
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    tasks = context.Queue(maxsize=2 * processes)  # bounded: the input is never all in flight
    results = context.Queue()
    pool = [context.Process(target=_count_worker, args=(splitter, tasks, results), daemon=True) for _ in range(processes)]
    for process in pool:
        process.start()
    try:
        for batch in batches:
            tasks.put(batch)
        for _ in pool:
            tasks.put(None)
        counts = [results.get() for _ in pool]
        for process in pool:
            process.join()
    finally:
        for process in pool:
            if process.is_alive():
                process.terminate()
    failures = [item for item in counts if isinstance(item, BaseException)]
    if failures:
        raise failures[0]
    return counts


def _count_worker(splitter: _Splitter, tasks: Any, results: Any) -> None:
    counts: Counter[str] = Counter()
    try:
        while (batch := tasks.get()) is not None:
            splitter.count_into(counts, batch)
    except Exception as error:  # report to the parent instead of dying silently
        while tasks.get() is not None:
            pass
        results.put(error)
        return
    results.put(counts)


class _Splitter:
    """Cuts texts into pieces and counts them (picklable, for worker processes)."""

    def __init__(self, pattern: str | None, special_tokens: tuple[str, ...]) -> None:
        self.pattern = pattern
        self.special_tokens = special_tokens
        self._compiled: tuple[regex.Pattern[str] | None, regex.Pattern[str] | None] | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"pattern": self.pattern, "special_tokens": self.special_tokens, "_compiled": None}

    def compile(self) -> tuple[regex.Pattern[str] | None, regex.Pattern[str] | None]:
        if self._compiled is None:
            cut = regex.compile("|".join(map(regex.escape, self.special_tokens))) if self.special_tokens else None
            self._compiled = (None if self.pattern is None else regex.compile(self.pattern), cut)
        return self._compiled

    def count_into(self, counts: Counter[str], batch: list[str]) -> None:
        pieces_of, cut = self.compile()
        for text in batch:
            parts = cut.split(text) if cut is not None else [text]
            if pieces_of is None:
                counts.update(parts)
            else:
                for part in parts:
                    counts.update(pieces_of.findall(part))


def _batches(texts: Iterable[str]) -> Iterator[list[str]]:
    """Texts in batches of about a megabyte (or ``_BATCH_TEXTS`` texts), each checked to be a ``str``."""
    batch: list[str] = []
    size = 0
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is {type(text).__name__}, not str")
        batch.append(text)
        size += len(text)
        if size >= _BATCH_CHARS or len(batch) >= _BATCH_TEXTS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


class _Sequences:
    """The deduplicated sequences as linked lists over one flat array (see the module docstring)."""

    def __init__(self, pieces: Counter[str]) -> None:
        encoded = [piece.encode("utf-8") for piece in pieces]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        counts = np.fromiter(pieces.values(), dtype=np.int64, count=len(encoded))
        keep = lengths >= 2  # a sequence of one byte has no pair and never changes
        flat = np.frombuffer(b"".join(e for e, k in zip(encoded, keep.tolist()) if k), dtype=np.uint8)
        lengths, counts = lengths[keep], counts[keep]
        size = int(flat.size)
        self.sentinel = size
        self.ids = np.full(size + 1, -1, dtype=np.int32)
        self.ids[:size] = flat
        ends = np.cumsum(lengths)
        starts = ends - lengths
        positions = np.arange(size + 1, dtype=np.int32)
        self.next = positions + 1
        self.next[ends - 1] = size
        self.next[size] = size
        self.prev = positions - 1
        self.prev[starts] = size
        self.prev[size] = size
        self.weight = np.zeros(size + 1, dtype=np.int64)
        self.weight[:size] = np.repeat(counts, lengths)
        # Scratch marks for one merge step (see _apply_merge); never equal to a real step's marks.
        self.stamp = np.full(size + 1, -1, dtype=np.int32)

    def slot_codes(self, lefts: np.ndarray) -> np.ndarray:
        """Pair codes of the slots starting at ``lefts`` (each must have a right neighbour)."""
        return (self.ids[lefts].astype(np.int64) << _ID_BITS) | self.ids[self.next[lefts]]


class _SlotLog:
    """``(pair code, left position)`` arrays: the initial slots and those each step wrote.

    A step's arrays are sorted by code the first time a lookup needs them; most late steps are
    never looked up, so they are never sorted.
    """

    def __init__(self) -> None:
        self._by_origin: dict[int, tuple[np.ndarray, np.ndarray, bool]] = {}

    def add(self, origin: int, codes: np.ndarray, lefts: np.ndarray, *, is_sorted: bool = False) -> None:
        self._by_origin[origin] = (codes, lefts, is_sorted)

    def positions(self, code: int, origins: Iterable[int]) -> np.ndarray:
        """Left positions logged with ``code`` by any of ``origins``, ascending (may be stale)."""
        found = []
        for origin in origins:
            codes, lefts, is_sorted = self._by_origin[origin]
            if not is_sorted:
                order = np.argsort(codes)
                codes, lefts = codes[order], lefts[order]
                self._by_origin[origin] = (codes, lefts, True)
            low, high = np.searchsorted(codes, [code, code + 1])
            if high > low:
                found.append(lefts[low:high])
        if not found:
            return np.empty(0, dtype=np.int32)
        # Positions must ascend: a left-to-right scan is what the rules prescribe.
        return np.sort(np.concatenate(found)) if len(found) > 1 else np.sort(found[0])


def _merge_loop(
    pieces: Counter[str], num_merges: int, *, min_frequency: int, first_id: int, seconds: dict[str, float]
) -> tuple[list[Pair], list[TraceRow]]:
    started = time.perf_counter()
    seqs = _Sequences(pieces)
    del pieces
    ids, nxt, prv, weight, sentinel = seqs.ids, seqs.next, seqs.prev, seqs.weight, seqs.sentinel
    lefts = np.flatnonzero(nxt[:sentinel] != sentinel).astype(np.int32)
    # Every initial pair is two bytes: as a 16-bit key it is counted by a bincount and sorted by
    # numpy's stable sort, a radix sort at this width.
    byte_pairs = ((ids[lefts] << 8) | ids[nxt[lefts]]).astype(np.uint16)
    totals = np.bincount(byte_pairs, weights=weight[lefts], minlength=1 << 16)  # exact below 2**53
    present = np.flatnonzero(totals)
    counts = {
        ((key >> 8) << _ID_BITS) | (key & 0xFF): total
        for key, total in zip(present.tolist(), totals[present].astype(np.int64).tolist())
    }
    lefts = lefts[np.argsort(byte_pairs, kind="stable")]
    log = _SlotLog()
    log.add(-1, seqs.slot_codes(lefts), lefts, is_sorted=True)
    heap = [(-count, code) for code, count in counts.items()]
    heapq.heapify(heap)
    del lefts, byte_pairs, totals, present
    seconds["index"] = time.perf_counter() - started
    started = time.perf_counter()

    merges: list[Pair] = []
    trace: list[TraceRow] = []
    while len(merges) < num_merges and heap:
        negative, code = heapq.heappop(heap)
        frequency = counts.get(code, 0)
        if frequency != -negative:
            # Stale. Only rises push an entry, so a pair's highest entry is never below its count:
            # one above it is requeued at the true count, one below it has a newer twin.
            if 0 < frequency < -negative:
                heapq.heappush(heap, (-frequency, code))
            continue
        if frequency < min_frequency:
            break
        left, right = code >> _ID_BITS, code & _RIGHT_MASK
        new_id = first_id + len(merges)
        # Where a slot holding this pair was last written: at the start, or when either id was made.
        origins = sorted({origin for origin in (left, right) if origin >= first_id}) or [-1]
        candidates = log.positions(code, origins)
        occurrences = candidates[(ids[candidates] == left) & (ids[nxt[candidates]] == right)]
        if left == right:
            occurrences = _leftmost_of_runs(occurrences, prv)
        changed = _apply_merge(seqs, occurrences, (left, right), new_id, log)
        for changed_code, delta in changed.items():
            if not delta:
                continue
            count = counts.get(changed_code, 0) + delta
            if count:
                counts[changed_code] = count
                if delta > 0:
                    heapq.heappush(heap, (-count, changed_code))
            else:
                counts.pop(changed_code, None)
        merges.append((left, right))
        trace.append(TraceRow(left_id=left, right_id=right, result_id=new_id, frequency=frequency))
    seconds["merge"] = time.perf_counter() - started
    return merges, trace


def _leftmost_of_runs(occurrences: np.ndarray, prv: np.ndarray) -> np.ndarray:
    """Keep the occurrences a left-to-right scan replaces when a pair ``(x, x)`` overlaps itself.

    In a run of chained occurrences (each starting where the previous one's right half is), the
    scan takes the first, skips the second, takes the third, and so on.
    """
    if occurrences.size < 2:
        return occurrences
    chained = np.zeros(occurrences.size, dtype=bool)
    chained[1:] = prv[occurrences[1:]] == occurrences[:-1]
    index = np.arange(occurrences.size)
    run_start = np.maximum.accumulate(np.where(chained, 0, index))
    return occurrences[(index - run_start) % 2 == 0]


def _apply_merge(
    seqs: _Sequences, occurrences: np.ndarray, pair: Pair, new_id: int, log: _SlotLog
) -> dict[int, int]:
    """Merge ``pair`` at ``occurrences`` (ascending left positions); return the count change of
    every pair code it touched.

    The slots that change are the occurrences themselves, the slots into them and the slots out
    of their right halves; after the merge, the slots into and out of the new tokens. Each group
    shares one side of its pair (``(t, left)``, ``(right, t)``, ``(t, new)``, ``(new, t)``), so
    summing its weights by the other side ``t`` — a bincount over ids — gives the changes
    without sorting.
    """
    ids, nxt, prv, weight, sentinel, stamp = seqs.ids, seqs.next, seqs.prev, seqs.weight, seqs.sentinel, seqs.stamp
    left, right = pair
    rights = nxt[occurrences]
    beyond = nxt[rights]
    before_prev = prv[occurrences]
    # When two occurrences touch, the slot into the second is the slot out of the first one's
    # right half; the stamp marks right halves so that slot is counted once, as the latter.
    right_mark, occurrence_mark = 2 * new_id, 2 * new_id + 1
    stamp[rights] = right_mark
    into = before_prev[(before_prev != sentinel) & (stamp[before_prev] != right_mark)]
    continues = beyond != sentinel
    changes: dict[int, int] = {}
    _add_by_side(changes, ids[into], weight[into], fixed=left, fixed_is_left=False, sign=-1)
    _add_by_side(changes, ids[beyond[continues]], weight[rights[continues]], fixed=right, fixed_is_left=True, sign=-1)
    code = (left << _ID_BITS) | right
    changes[code] = changes.get(code, 0) - int(weight[occurrences].sum())

    ids[occurrences] = new_id
    ids[rights] = -1
    nxt[occurrences] = beyond
    prv[beyond] = occurrences  # the sentinel's prev gets garbage; it is never read

    # Touching occurrences are now linked directly: the slot into the second is the slot out of
    # the first, counted once, as the latter.
    stamp[occurrences] = occurrence_mark
    after_prev = prv[occurrences]
    new_into = after_prev[(after_prev != sentinel) & (stamp[after_prev] != occurrence_mark)]
    new_out = occurrences[continues]
    _add_by_side(changes, ids[new_into], weight[new_into], fixed=new_id, fixed_is_left=False, sign=1)
    _add_by_side(changes, ids[beyond[continues]], weight[new_out], fixed=new_id, fixed_is_left=True, sign=1)
    written = np.concatenate([new_into, new_out])
    log.add(new_id, seqs.slot_codes(written), written)
    return changes


def _add_by_side(
    changes: dict[int, int], others: np.ndarray, weights: np.ndarray, *, fixed: int, fixed_is_left: bool, sign: int
) -> None:
    """Add ``sign * weight`` to the pair ``(fixed, other)`` (or ``(other, fixed)``) of each slot."""
    if others.size <= _SMALL_STEP:
        # Few slots: a dict beats numpy's per-call cost.
        keys, sums = others.tolist(), weights.tolist()
    else:
        totals = np.bincount(others, weights=weights)  # exact: integer sums far below 2**53
        keys_array = np.flatnonzero(totals)
        keys, sums = keys_array.tolist(), totals[keys_array].astype(np.int64).tolist()
    for other, total in zip(keys, sums):
        code = (fixed << _ID_BITS) | other if fixed_is_left else (other << _ID_BITS) | fixed
        changes[code] = changes.get(code, 0) + sign * total
