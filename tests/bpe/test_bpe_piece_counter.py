"""The pattern scanners and the piece counter against ``regex.findall`` + ``Counter``: random text over
the characters the patterns treat specially, every code point, and the real multi-script data in ``data/``."""

from __future__ import annotations

from collections import Counter

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.bpe import count_pieces, train_fast
from tokpack.bpe.piece_counter import PieceCounter
from tokpack.errors import InputError
from tokpack.vocab import GPT2_PATTERN, GPT4_PATTERN
from tokpack.vocab.pattern_scanners import build_tables, split, tables

from conftest import DATA

PATTERNS = [GPT4_PATTERN, GPT2_PATTERN]

# What the patterns treat specially: apostrophes and contraction letters in both cases (and the
# characters regex folds onto them: long s U+017F, Kelvin sign U+212A), every kind of whitespace,
# \r\n, digits of other scripts, combining marks, letters of other scripts, emoji, punctuation.
_WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000"
_SPECIAL = "'’sSdDmMtTlLvVeErRſ\u212akK" + _WHITESPACE + "0٣७௫𝟘½Ⅻ" + "\u0301\u0308\u200d" + "żŻΩж中ǅ" + "🙂👍🏽!?.,-_\"#$\x00\x7f"
_SPECIAL_TEXT = st.text(alphabet=st.sampled_from(_SPECIAL), max_size=60)
# Any code point but the surrogates (which have no UTF-8 and cannot reach a trainer from a file).
_ANY = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=60)
_MIXED = st.lists(st.one_of(_SPECIAL_TEXT, _ANY), max_size=4).map("".join)


@settings(max_examples=1500, deadline=None)
@given(text=st.one_of(_SPECIAL_TEXT, _ANY, _MIXED), pattern=st.sampled_from(PATTERNS))
def test_split_equals_regex_findall(text: str, pattern: str) -> None:
    assert split(text, pattern) == regex.findall(pattern, text)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.one_of(_SPECIAL_TEXT, _MIXED, st.just("")), max_size=8),
       pattern=st.sampled_from([*PATTERNS, None]))
def test_counts_equal_regex_counts(texts: list[str], pattern: str | None) -> None:
    counter = PieceCounter(pattern)
    counter.add(texts)
    counter.add(texts[::-1])  # a second batch: counts add up, pieces already seen are found again
    expected: Counter[str] = Counter()
    for text in texts * 2:
        expected.update(regex.findall(pattern, text) if pattern is not None else [text])
    assert counter.to_counter() == expected


def test_class_tables_come_from_regex() -> None:
    classes, fold, exact = tables()
    # The copy cached on disk is what the installed regex builds.
    assert all((cached == built).all() for cached, built in zip(tables(), build_tables()))
    lns = classes & 7  # \p{L} 1, \p{N} 2, \s 4 (higher bits: o200k's case classes)
    assert lns[ord("ż")] == 1 and lns[ord("٣")] == 2 and lns[ord("\u3000")] == 4
    assert classes[ord("!")] == 0 and classes[ord("🙂")] == 0
    # regex folds the long s onto s and the Kelvin sign onto k (not a contraction letter).
    assert fold[0x17F] == fold[ord("s")] == fold[ord("S")] == 1 and exact[0x17F] == 0 and fold[0x212A] == 0
    assert split("it'ſ 'LL 'Ve", GPT4_PATTERN) == regex.findall(GPT4_PATTERN, "it'ſ 'LL 'Ve")


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("folder", ["polish", "other"])
def test_real_multiscript_data(folder: str, pattern: str) -> None:
    texts = [path.read_text(encoding="utf-8") for path in sorted((DATA / folder).rglob("*.txt"))]
    assert texts
    found = [regex.findall(pattern, text) for text in texts]
    for text, pieces in zip(texts, found):
        assert split(text, pattern) == pieces
    counter = PieceCounter(pattern)
    for start in range(0, len(texts), 7):  # many batches, so the table grows while counting
        counter.add(texts[start:start + 7])
    assert counter.to_counter() == Counter(piece for pieces in found for piece in pieces)


def test_threads_add_up_to_one_count(monkeypatch: pytest.MonkeyPatch) -> None:
    import tokpack.bpe.fast as fast

    texts = [path.read_text(encoding="utf-8") for path in sorted((DATA / "other").rglob("*.txt"))]
    alone = count_pieces(texts, pattern=GPT4_PATTERN, workers=1)
    monkeypatch.setattr(fast, "_PARALLEL_MIN_CHARS", 1)
    monkeypatch.setattr(fast, "_BATCH_TEXTS", 3)
    assert count_pieces(texts, pattern=GPT4_PATTERN, workers=3) == alone
    assert count_pieces(iter(texts), pattern=GPT4_PATTERN, workers=2) == alone


def test_an_error_in_a_counting_thread_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import tokpack.bpe.fast as fast

    monkeypatch.setattr(fast, "_PARALLEL_MIN_CHARS", 1)
    monkeypatch.setattr(fast, "_BATCH_TEXTS", 2)
    with pytest.raises(TypeError, match="text 5 is bytes"):
        count_pieces(["ab"] * 5 + [b"x"] + ["cd"] * 20, pattern=GPT4_PATTERN, workers=2)  # type: ignore[list-item]


def test_a_lone_surrogate_is_counted_but_not_trained_on() -> None:
    assert count_pieces(["a\ud800b"], pattern=GPT4_PATTERN) == Counter(regex.findall(GPT4_PATTERN, "a\ud800b"))
    with pytest.raises(InputError, match="lone surrogate U\\+D800"):
        train_fast(["a\ud800b"], 3, pattern=GPT4_PATTERN)
