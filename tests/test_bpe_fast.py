"""The fast trainer against the reference rules, trace for trace, on generated and real corpora."""

from __future__ import annotations

from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.bpe import count_pieces, train_bpe, train_fast
from tokpack.vocab import GPT2_PATTERN, GPT4_PATTERN

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

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
