"""The fast trainer against the reference rules, trace for trace, on generated and real corpora."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bpe_data import real_texts

from tokpack.bpe import count_pieces, train_bpe, train_fast
from tokpack.vocab import GPT2_PATTERN, GPT4_PATTERN

# Small alphabets force ties; the others bring multi-byte UTF-8 (Polish letters, emoji) and runs.
_ALPHABETS = ["ab", "abc", "a", "aż", "zżź ", "ab 🙂", "0123 ", "\x00\xff", "aaaaab"]
_DOCUMENT = st.sampled_from(_ALPHABETS).flatmap(lambda letters: st.text(alphabet=letters, max_size=40))
_RUN = st.builds(lambda char, n: char * n, st.sampled_from(["a", "ż", "🙂", " "]), st.integers(0, 60))
_CORPUS = st.lists(st.one_of(_DOCUMENT, _RUN, st.just(""), st.sampled_from(["a", "ż", "🙂"])), max_size=12)


@settings(max_examples=300, deadline=None)
@given(corpus=_CORPUS, num_merges=st.integers(0, 40))
def test_fast_trainer_equals_reference_trace_for_trace(corpus: list[str], num_merges: int) -> None:
    merges, trace = train_bpe(corpus, num_merges)
    fast = train_fast(corpus, num_merges)
    assert fast.trace == trace
    assert fast.merges == merges


@settings(max_examples=100, deadline=None)
@given(corpus=_CORPUS, num_merges=st.integers(0, 30), pattern=st.sampled_from([GPT2_PATTERN, GPT4_PATTERN]))
def test_pre_tokens_act_as_documents(corpus: list[str], num_merges: int, pattern: str) -> None:
    pieces = [piece for text in corpus for piece in regex.findall(pattern, text)]
    _, trace = train_bpe(pieces, num_merges)
    assert train_fast(corpus, num_merges, pattern=pattern).trace == trace


@settings(max_examples=100, deadline=None)
@given(corpus=_CORPUS, num_merges=st.integers(0, 40), min_frequency=st.integers(2, 6))
def test_min_frequency_cuts_the_reference_trace(corpus: list[str], num_merges: int, min_frequency: int) -> None:
    # The merge loop neither indexes nor queues a pair counted below min_frequency: the trace must
    # still be the reference's, up to its first merge below the threshold.
    _, trace = train_bpe(corpus, num_merges)
    kept = next((k for k, row in enumerate(trace) if row.frequency < min_frequency), len(trace))
    assert train_fast(corpus, num_merges, min_frequency=min_frequency).trace == trace[:kept]


@settings(max_examples=20, deadline=None)
@given(corpus=_CORPUS)
def test_ids_past_16_bits_train_the_same(corpus: list[str]) -> None:
    # Asking for more merges than 16-bit ids hold switches the merge loop to 32-bit ids; the trace
    # stops when no pair is left, so it must still be the reference's.
    _, trace = train_bpe(corpus, 70_000)
    assert train_fast(corpus, 70_000).trace == trace


@settings(max_examples=50, deadline=None)
@given(corpus=_CORPUS, num_merges=st.integers(6, 40))
def test_ids_past_16_bits_merge_as_the_reference(corpus: list[str], num_merges: int) -> None:
    # New ids start at 65,530, so from the sixth merge on they no longer fit 16 bits: the state must
    # hold 32-bit ids, and its merges (new ids moved back to start at 256) must be the reference's.
    from tokpack.bpe import compiled
    from tokpack.bpe.fast import _flatten

    first = 65_530
    _, trace = train_bpe(corpus, num_merges)
    state = compiled.build(*_flatten(Counter(corpus)), first + num_merges)
    assert state.ids.dtype == np.int32
    out = np.zeros((num_merges, 3), dtype=np.int64)
    done = compiled.run(state, num_merges, first, out)

    def moved(token: int) -> int:
        return token - first + 256 if token >= first else token

    assert [(moved(left), moved(right), count) for left, right, count in out[:done].tolist()] == \
        [(row.left_id, row.right_id, row.frequency) for row in trace]


@pytest.fixture(scope="module")
def polish_sample() -> list[str]:
    return real_texts("polish", 60_000)


def test_real_text_documents_equal_reference(polish_sample: list[str]) -> None:
    merges, trace = train_bpe(polish_sample, 60)
    fast = train_fast(polish_sample, 60)
    assert fast.trace == trace and fast.merges == merges
    assert trace[0].frequency > trace[-1].frequency


def test_real_text_pre_tokens_equal_reference(polish_sample: list[str]) -> None:
    pieces = [piece for text in polish_sample for piece in regex.findall(GPT4_PATTERN, text)]
    _, trace = train_bpe(pieces, 80)
    assert train_fast(polish_sample, 80, pattern=GPT4_PATTERN).trace == trace


def test_splitting_in_worker_processes_counts_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    import tokpack.bpe.fast as fast

    texts = [f"dokument {i} zażółć gęślą jaźń {i % 7}" for i in range(3000)]
    alone = count_pieces(texts, pattern=GPT2_PATTERN, workers=1)
    monkeypatch.setattr(fast, "_PARALLEL_MIN_CHARS", 1)
    monkeypatch.setattr(fast, "_BATCH_TEXTS", 100)
    assert count_pieces(iter(texts), pattern=GPT2_PATTERN, workers=2) == alone
    assert count_pieces(texts, pattern=GPT2_PATTERN, workers=2) == alone
    assert count_pieces(texts, pattern=None, special_tokens=["gęślą"], workers=2) == count_pieces(
        texts, pattern=None, special_tokens=["gęślą"], workers=1
    )


def test_a_failing_worker_reports_its_error() -> None:
    import tokpack.bpe.fast as fast

    from bpe_workers import RaisingSplitter

    with pytest.raises(RuntimeError, match="worker failed"):
        fast._count_in_workers(RaisingSplitter(None, ()), iter([["x"] * 10] * 20), 2)


def test_a_killed_worker_is_a_clear_error_not_a_hang() -> None:
    # A worker killed (for memory, say) is an error at once, never a training that waits forever.
    import tokpack.bpe.fast as fast
    from tokpack.errors import WorkerDied

    from bpe_workers import KilledSplitter

    with pytest.raises(WorkerDied, match=r"worker \d .*died with exit code -9"):
        fast._count_in_workers(KilledSplitter(None, ()), iter([["x"] * 10] * 20), 2)


def test_min_frequency_stops_training() -> None:
    training = train_fast(["abab", "abab", "cd"], 10, min_frequency=2)
    assert [row.frequency for row in training.trace] == [4, 2]
    assert all(row.frequency >= 2 for row in training.trace)


def test_special_tokens_take_ids_before_merges_and_are_never_trained_on() -> None:
    training = train_fast(["ab<|endoftext|>ab", "<|pad|>ab"], 2, special_tokens=["<|endoftext|>", "<|pad|>"])
    assert training.special_tokens == {"<|endoftext|>": 256, "<|pad|>": 257}
    assert training.trace[0].model_dump() == {"left_id": 97, "right_id": 98, "result_id": 258, "frequency": 3}
    assert len(training.trace) == 1  # the cut pieces leave no pair across a special token


@pytest.mark.parametrize("bad", [["ok", b"bytes"], ["ok", None]])
def test_non_string_text_is_refused(bad: list[object]) -> None:
    with pytest.raises(TypeError, match="text 1"):
        train_fast(bad, 3)  # type: ignore[arg-type]


def test_negative_merge_count_is_refused() -> None:
    with pytest.raises(ValueError, match="num_merges"):
        train_fast(["ab"], -1)
