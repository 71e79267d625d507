"""The exact BPE rules in four small functions: the code to read to learn byte-pair encoding.

Every step here can be checked by hand. Documents are lists of ids (UTF-8 bytes to begin with);
pairs are counted inside each document only; the most frequent pair wins, and a tie goes to the
numerically smallest pair; the winner gets the next free id and replaces its occurrences left to
right. :mod:`tokpack.bpe.fast` follows the same rules quickly; this module is what it is
tested against.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tokpack.bpe.records import TraceRow
from tokpack.errors import InputError

Pair = tuple[int, int]


def count_pairs(docs: Sequence[Sequence[int]]) -> Counter[Pair]:
    """Count adjacent pairs with a sliding window of two inside each document.

    Pairs never cross documents; a repeated document counts again; an empty or one-id document
    adds nothing. Overlapping pairs all count: ``aaaa`` holds ``(97, 97)`` three times.

    >>> docs = [list(b"abab"), list(b"abab"), list(b"baba"), list(b"aaaa")]
    >>> count_pairs(docs)
    Counter({(97, 98): 5, (98, 97): 4, (97, 97): 3})
    >>> count_pairs([[97, 97, 97, 97]])
    Counter({(97, 97): 3})
    >>> count_pairs([[97], [98], []])
    Counter()
    """
    counts: Counter[Pair] = Counter()
    for doc in docs:
        counts.update(zip(doc, doc[1:]))
    return counts


def select_pair(counts: dict[Pair, int]) -> Pair:
    """The pair to merge: the highest count; on a tie the smallest pair (left id, then right id).

    Ids compare as integers, so ``(98, 256)`` comes after ``(98, 97)``, and the order in which
    ``counts`` was filled never matters.

    >>> select_pair({(98, 97): 2, (97, 99): 2, (97, 98): 2})
    (97, 98)
    >>> select_pair({(98, 256): 1, (98, 97): 1})
    (98, 97)

    Raises:
        InputError: ``counts`` holds no pair (the training loop stops before this happens).
    """
    if not counts:
        raise InputError("select_pair needs at least one pair; there is nothing left to merge")
    # Largest count first, then the smallest pair: negate the pair inside the key.
    return max(counts, key=lambda pair: (counts[pair], -pair[0], -pair[1]))


def merge_pair(docs: Sequence[Sequence[int]], pair: Pair, new_id: int) -> list[list[int]]:
    """Replace ``pair`` by ``new_id`` in every document, left to right; return new lists.

    A position used by one replacement is never used again, so three ``a`` give one merge and
    a leftover ``a``. The input is not modified.

    >>> docs = [list(b"abab"), list(b"baba")]
    >>> merge_pair(docs, (97, 98), 256)
    [[256, 256], [98, 256, 97]]
    >>> merge_pair([[97, 97, 97]], (97, 97), 256)
    [[256, 97]]
    >>> docs
    [[97, 98, 97, 98], [98, 97, 98, 97]]
    """
    merged_docs = []
    for doc in docs:
        merged: list[int] = []
        i = 0
        while i < len(doc):
            if i + 1 < len(doc) and doc[i] == pair[0] and doc[i + 1] == pair[1]:
                merged.append(new_id)
                i += 2
            else:
                merged.append(doc[i])
                i += 1
        merged_docs.append(merged)
    return merged_docs


def train_bpe(texts: Sequence[str], num_merges: int) -> tuple[list[Pair], list[TraceRow]]:
    """Learn up to ``num_merges`` merges from ``texts``, each text one document of UTF-8 bytes.

    Returns the merges (``merges[i]`` made id ``256 + i``) and one trace row per merge, whose
    frequency is the pair's count *before* it was replaced. Training stops early, without error,
    when no pair is left.

    >>> merges, trace = train_bpe(["abab", "abab", "baba", "aaaa"], 3)
    >>> merges
    [(97, 98), (97, 97), (256, 256)]
    >>> trace[0]
    TraceRow(left_id=97, right_id=98, result_id=256, frequency=5)
    >>> [row.frequency for row in trace]
    [5, 3, 2]
    >>> train_bpe(["ab"], 5)[0]
    [(97, 98)]

    Raises:
        TypeError: a text is not a ``str``.
        InputError: ``num_merges`` is negative.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is {type(text).__name__}, not str")
    if num_merges < 0:
        raise InputError(f"num_merges must be 0 or more, got {num_merges}")
    docs: list[list[int]] = [list(text.encode("utf-8")) for text in texts]
    merges: list[Pair] = []
    trace: list[TraceRow] = []
    for step in range(num_merges):
        counts = count_pairs(docs)
        if not counts:
            break
        pair = select_pair(counts)
        new_id = 256 + step
        trace.append(TraceRow(left_id=pair[0], right_id=pair[1], result_id=new_id, frequency=counts[pair]))
        merges.append(pair)
        docs = merge_pair(docs, pair, new_id)
    return merges, trace


def token_table(merges: Sequence[Pair], *, specials: Sequence[str] = ()) -> list[bytes]:
    """The bytes every id stands for: the 256 bytes, the ``specials`` (as UTF-8), then one entry
    per merge.

    >>> token_table([(97, 98), (256, 256)])[256:]
    [b'ab', b'abab']
    """
    table = [bytes([b]) for b in range(256)] + [name.encode("utf-8") for name in specials]
    for left, right in merges:
        table.append(table[left] + table[right])
    return table
