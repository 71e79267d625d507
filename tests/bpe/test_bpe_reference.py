"""The reference rules on the hand examples, and their errors on bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.bpe import TraceRow, count_pairs, merge_pair, select_pair, train_bpe
from tokpack.bpe.explain import walk


def test_lesson_example_first_row_and_overlapping_run() -> None:
    docs = ["abab", "abab", "baba", "aaaa"]
    merges, trace = train_bpe(docs, 2)
    assert trace[0] == TraceRow(left_id=97, right_id=98, result_id=256, frequency=5)
    # aaaa counts (97, 97) three times but replaces it twice.
    assert trace[1] == TraceRow(left_id=97, right_id=97, result_id=257, frequency=3)
    assert merge_pair([list(b"aaaa")], (97, 97), 257) == [[257, 257]]


def test_pairs_never_cross_documents_and_duplicates_count() -> None:
    assert count_pairs([[97], [98]]) == {}
    assert count_pairs([[97, 98], [97, 98]]) == {(97, 98): 2}


def test_ties_compare_ids_as_integers_not_strings_or_insertion_order() -> None:
    assert select_pair({(256, 97): 4, (98, 97): 4}) == (98, 97)  # "256" < "98" as strings
    assert select_pair({(97, 99): 1, (97, 98): 1}) == (97, 98)


def test_merge_is_left_to_right_and_does_not_mutate() -> None:
    docs = [[97, 97, 97], [97]]
    assert merge_pair(docs, (97, 97), 256) == [[256, 97], [97]]
    assert docs == [[97, 97, 97], [97]]


def test_ids_keep_counting_and_training_stops_when_no_pair_is_left() -> None:
    merges, trace = train_bpe(["ab", "cd"], 10)
    assert merges == [(97, 98), (99, 100)]
    assert [row.result_id for row in trace] == [256, 257]
    assert train_bpe(["", "a"], 3) == ([], [])


def test_polish_letters_are_two_bytes() -> None:
    merges, trace = train_bpe(["żż"], 1)
    assert merges == [(197, 188)] and trace[0].frequency == 2


def test_bad_input_errors() -> None:
    with pytest.raises(ValueError, match="nothing left to merge"):
        select_pair({})
    with pytest.raises(ValueError, match="num_merges"):
        train_bpe(["ab"], -1)
    with pytest.raises(TypeError, match="text 1 is bytes"):
        train_bpe(["ab", b"ab"], 1)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not one string"):
        train_bpe("abab", 1)


@settings(max_examples=100, deadline=None)
@given(corpus=st.lists(st.text(alphabet="abż ", max_size=20), max_size=6), num_merges=st.integers(0, 12))
def test_step_walk_writes_the_training_trace(corpus: list[str], num_merges: int) -> None:
    # `explain` and `verify` walk the merges step by step; they must see train_bpe's trace.
    assert [step.row for step in walk(corpus, num_merges)] == train_bpe(corpus, num_merges)[1]
