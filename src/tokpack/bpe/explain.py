"""BPE step by step, the way a person checks it on paper, computed with the reference core."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tokpack import _checks as checks
from tokpack.bpe.records import TraceRow
from tokpack.bpe.reference import Pair, count_pairs, merge_pair, select_pair, token_table  # noqa: F401 (the doctests use it)
from tokpack.errors import InputError


@dataclass(frozen=True)
class ExplainedStep:
    """One merge with everything needed to check it by hand.

    ``counts`` are all pair counts before the merge; ``ranked`` the top ones in the order the
    rule ranks them (count down, then pair up); ``tied`` the pairs sharing the winner's count,
    so ``len(tied) > 1`` means the tie rule decided. ``replaced`` counts the replacements, which
    is below ``frequency`` when the pair overlaps itself (``aaa``).
    """

    step: int
    before: list[list[int]]
    counts: Counter[Pair]
    ranked: list[tuple[Pair, int]]
    tied: list[Pair]
    winner: Pair
    frequency: int
    new_id: int
    replaced: int
    after: list[list[int]]

    @property
    def row(self) -> TraceRow:
        """The trace row this step writes."""
        return TraceRow(left_id=self.winner[0], right_id=self.winner[1], result_id=self.new_id, frequency=self.frequency)


def walk(texts: Sequence[str], num_merges: int, *, top: int = 5) -> Iterator[ExplainedStep]:
    """Run up to ``num_merges`` merges on ``texts`` (one document each) with the reference
    functions, yielding each step as it is made (so a caller can stop at any step).

    >>> steps = list(walk(["abab", "abab", "baba", "aaaa"], 2, top=3))
    >>> steps[0].ranked, steps[0].winner, steps[0].after[2]
    ([((97, 98), 5), ((98, 97), 4), ((97, 97), 3)], (97, 98), [98, 256, 97])
    >>> steps[1].row
    TraceRow(left_id=97, right_id=97, result_id=257, frequency=3)
    >>> steps[1].replaced
    2

    Raises:
        TypeError: a text is not a ``str``.
        InputError: a negative ``num_merges`` or a ``top`` below 1.
    """
    docs = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is {type(text).__name__}, not str")
        try:
            docs.append(list(text.encode("utf-8")))
        except UnicodeEncodeError as error:  # a command-line argument that was not UTF-8 arrives as surrogates
            raise InputError(f"text {index} is not valid UTF-8 (byte {error.start})",
                             fix="pass each text as UTF-8") from None
    num_merges, top = checks.non_negative_int("num_merges", num_merges), checks.positive_int("top", top)
    for step in range(num_merges):
        counts = count_pairs(docs)
        if not counts:
            return
        winner = select_pair(counts)
        ranked = heapq.nsmallest(top, counts.items(), key=lambda item: (-item[1], item[0]))
        tied = sorted(pair for pair, count in counts.items() if count == counts[winner])
        new_id = 256 + step
        after = merge_pair(docs, winner, new_id)
        replaced = sum(len(old) - len(new) for old, new in zip(docs, after))
        yield ExplainedStep(step + 1, docs, counts, ranked, tied, winner, counts[winner], new_id, replaced, after)
        docs = after


def label(token_id: int, table: Sequence[bytes]) -> str:
    r"""What ``token_id`` stands for: its text, or Python escapes for bytes that are not UTF-8.

    >>> table = token_table([(97, 98)])
    >>> label(256, table), label(197, table)
    ("'ab'", "'\\xc5'")
    """
    if not 0 <= token_id < len(table):
        return "?"
    token = table[token_id]
    try:
        return repr(token.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(token)[1:]  # b'\xc5' -> '\xc5'


def describe(ids: Sequence[int], table: Sequence[bytes]) -> str:
    """``ids`` with what each stands for, e.g. ``256:'ab' 99:'c'``.

    >>> describe([256, 99], token_table([(97, 98)]))
    "256:'ab' 99:'c'"
    """
    return " ".join(f"{i}:{label(i, table)}" for i in ids)
