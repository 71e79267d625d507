"""A pattern's name means in Python what it means on the command line, and every trainer refuses
a pattern that skips text rather than training on nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import tokpack
from tokpack.bpe import train_bytelevel, train_fast, train_from_files
from tokpack.errors import InputError
from tokpack.vocab import GPT2_PATTERN, GPT4_PATTERN, BpeTokenizer, train_hf_bytelevel
from tokpack.vocab.patterns import NAMED_PATTERNS, check_covers, check_pattern

TEXTS = ["the cat sat on the mat, and the dog sat on the log.\n", "the cat and the dog\n  sat 12345 together"] * 20


def test_train_fast_reads_a_name_as_the_named_pattern() -> None:
    by_name = train_fast(TEXTS, 20, pattern="gpt4")
    by_regex = train_fast(TEXTS, 20, pattern=GPT4_PATTERN)
    assert len(by_name.trace) == 20
    assert by_name.merges == by_regex.merges
    assert by_name.pattern == GPT4_PATTERN


def test_train_bytelevel_reads_a_name_and_counts_ranks() -> None:
    tokenizer = train_bytelevel(TEXTS, vocab_size=270, pattern="gpt4")
    assert tokenizer.pattern == GPT4_PATTERN
    assert tokenizer.n_vocab == 271  # 270 ranks, then <|endoftext|>


def test_hf_trainer_reads_a_name() -> None:
    assert train_hf_bytelevel(TEXTS, vocab_size=280, pattern="gpt2").pattern == GPT2_PATTERN


def test_tokenizer_reads_a_name() -> None:
    ranks = {bytes([b]): b for b in range(256)}
    assert BpeTokenizer(ranks=ranks, pattern="gpt4").pattern == GPT4_PATTERN


@pytest.mark.parametrize("train", [
    lambda: train_fast(TEXTS, 30, pattern=r"\p{L}+"),
    lambda: train_fast(iter(TEXTS), 30, pattern=r"\p{L}+"),
    lambda: train_bytelevel(TEXTS, vocab_size=300, pattern=r"\p{L}+"),
    lambda: train_hf_bytelevel(TEXTS, vocab_size=300, pattern=r"\p{L}+"),
])
def test_trainers_refuse_a_pattern_that_skips_text(train) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=r"^pattern: .*skips ' ' .*gpt4 \(the default\)"):
        train()


def test_train_fast_on_an_iterator_still_trains_on_every_text() -> None:
    assert train_fast(iter(TEXTS), 20, pattern="gpt4").merges == train_fast(TEXTS, 20, pattern="gpt4").merges


def test_files_and_prepare_read_a_name(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(TEXTS) * 5, encoding="utf-8")
    result = train_from_files(corpus, 20, pattern="gpt4", workers=1)
    assert result.training.pattern == GPT4_PATTERN and len(result.training.trace) == 20
    pack = tokpack.prepare(corpus, vocab_size=300, pattern="gpt4", cache_dir=tmp_path / "cache",
                           allow_smaller_vocab=True)
    assert pack.tokenizer.pattern == GPT4_PATTERN


def test_skipped_text_message_names_the_real_default() -> None:
    with pytest.raises(InputError) as caught:
        check_covers(r"\d+", "12 apples")
    assert "gpt2)" not in str(caught.value) and "gpt4 (the default)" in str(caught.value)


def test_every_pattern_passed_without_the_regex_engine_passes_its_check() -> None:
    """check_pattern passes the patterns written in tokpack without compiling them (loading the
    regex engine costs a twentieth of a second): each one must pass the full check."""
    import regex

    from tokpack.vocab import patterns

    assert patterns._WRITTEN_HERE >= set(patterns.NAMED_PATTERNS.values())
    for pattern in patterns._WRITTEN_HERE:
        assert regex.compile(pattern).match("") is None, pattern


def test_a_pattern_that_does_not_compile_names_the_fix_and_the_names() -> None:
    """A regex typed wrong is refused with what to do: correct it, or use one of the names."""
    with pytest.raises(InputError) as refused:
        check_pattern("foo(")
    message = str(refused.value)
    assert "does not compile" in message and "correct the regex" in message
    assert all(name in message for name in NAMED_PATTERNS)
