"""The compiled encoder on any Unicode, against tiktoken (the oracle): every compiled pattern with
a real vocabulary (cl100k's ranks: tiktoken takes any pattern with them), random text over every
plane and text built from what the patterns treat specially (whitespace of every kind, contractions
in both cases, marks, digits of several scripts, astral letters, lone and paired surrogates), the
extension's pieces against the trainer's scanner with tiktoken's classes, and single pieces of
hundreds of kilobytes of each kind (letters of several scripts, digits, spaces, punctuation, Han);
each text also given as its UTF-8 ``bytes`` (read in place once checked), which must give the same
ids."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from tokpack._kernels import code_points
from tokpack.vocab.compiled import COMPILED_PATTERNS, CompiledBpe
from tokpack.vocab.pattern_scanners import split_all, tiktoken_tables

PATTERNS = sorted(COMPILED_PATTERNS)

SPECIAL = [" ", "  ", "\t", "\n", "\r", "\r\n", " \n", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2028",
            "\u3000", "\x1c", *"'’sSſdDmMtTlLvVeErRkK\u212a", "'s", "'S", "'ſ", "'ll", "'LL", "'Ve", "'re", "'d",
            *"0123٣۴३৯๓１𝟘²½Ⅻ", *",.:;!?-_/\\\"()<>[]#", *"\u0301\u0308\u0903\u20dd\u200d", *"aeząłżAEZĄŁŻǅᾈʰʼ々",
            *"中ｶ한あΩωЖж", "😀", "👍🏽", "🇵🇱", "\U0001d400", "\U00018d80", "\U000e0001", "\U0010fffd", "\U00020000",
            "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "\ud83d\ude00", "\x00", "\x7f", "\x80", "\xff"]
TEXTS = st.lists(st.one_of(st.sampled_from(SPECIAL), st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                                                    categories=None)), max_size=50).map("".join)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[bytes, int]:
    path = tmp_path_factory.mktemp("cl100k") / "cl100k_base.tiktoken"
    path.write_bytes(gzip.decompress(resources.files("bpe_openai.data").joinpath("cl100k_base.tiktoken.gz").read_bytes()))
    return load_tiktoken_bpe(str(path))


@pytest.fixture(scope="module")
def encoders(ranks: dict[bytes, int]) -> dict[str, tuple[CompiledBpe, tiktoken.Encoding]]:
    return {pattern: (CompiledBpe(ranks, pattern),
                      tiktoken.Encoding(name="oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}))
            for pattern in PATTERNS}


@settings(max_examples=1500, deadline=None)
@given(text=TEXTS, pattern=st.sampled_from(PATTERNS))
def test_any_text_under_every_pattern_equals_tiktoken(encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]],
                                                      text: str, pattern: str) -> None:
    ours, oracle = encoders[pattern]
    expected = oracle.encode_ordinary(text)
    utf8 = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    as_str, as_bytes = ours.encode([text, utf8])
    assert as_str.tolist() == expected and as_bytes.tolist() == expected


@settings(max_examples=800, deadline=None)
@given(text=TEXTS, pattern=st.sampled_from(PATTERNS))
def test_pieces_equal_the_trainers_scanner_with_tiktokens_classes(
        encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]], text: str, pattern: str) -> None:
    from tokpack.vocab.pattern_scanners import COMPILED

    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    ours, _ = encoders[pattern]
    with ours.cache() as cache:
        utf8, ends = ours.encoder.pieces(text, cache)  # type: ignore[attr-defined]
    assert utf8 == fixed.encode("utf-8")
    cps, part_ends = code_points([fixed])
    out = np.empty(len(fixed) + 1, dtype=np.int64)
    count = split_all(cps, part_ends, COMPILED[pattern], tiktoken_tables(), out)
    expected = [len(fixed[:end].encode("utf-8")) for end in out[:count].tolist()]
    assert ends == expected


#: A str of one byte a character (Latin-1) and one of two (the Basic Multilingual Plane, surrogates
#: too): the text's UTF-8 is written 16 or 8 characters at a time, each block kept up to its first
#: character from U+0080 on, which is written alone.
LATIN1 = [*"az AZ09,.'\n", "\x80", "\xa0", "\xe9", "\xf3", "\xdf", "\xff", "\xd7"]
BMP = [*"az AZ09,.'\n", "\x80", "\xe9", "\xff", *"ąłżŹǅΩЖж\u07ff\u0800中ｶ\uffff", "\ud800", "\udbff", "\udc00",
        "\udfff", "\ud83d\ude00"[0], "\ud83d\ude00"[1]]


@settings(max_examples=600, deadline=None)
@given(lead=st.integers(0, 17), body=st.one_of(st.lists(st.sampled_from(LATIN1), min_size=1, max_size=70),
                                               st.lists(st.sampled_from(BMP), min_size=1, max_size=70)),
       pattern=st.sampled_from(PATTERNS))
def test_latin1_and_bmp_texts_at_every_offset_are_written_as_utf8_and_equal_tiktoken(
        encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]], lead: int, body: list[str], pattern: str) -> None:
    text = "x" * lead + "".join(body)
    ours, oracle = encoders[pattern]
    with ours.cache() as cache:
        utf8, _ = ours.encoder.pieces(text, cache)  # type: ignore[attr-defined]
    assert utf8 == text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    expected = oracle.encode_ordinary(text)
    assert [ids.tolist() for ids in ours.encode([text, utf8])] == [expected, expected]


#: Runs of one kind of character, short and long: a text of two bytes a character is written eight
#: at a time by kind of block (ASCII, below U+0800, mostly from U+0800 on, a surrogate in it), and a
#: run of ASCII blocks after sixteen of them by a loop of its own.
RUNS = st.lists(st.tuples(st.sampled_from([*"a ,\n", "\xe9", *"ąŁżЖ\u07ff", *"\u0800中ｶ\uffff", "\ud800", "\udc00",
                                            "\ud83d\ude00"]), st.integers(1, 300)), min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(runs=RUNS, pattern=st.sampled_from(PATTERNS))
def test_runs_of_ascii_two_byte_and_wide_characters_are_written_as_utf8_and_equal_tiktoken(
        encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]], runs: list[tuple[str, int]], pattern: str) -> None:
    text = "Ż" + "".join(char * count for char, count in runs)  # (a str of two bytes a character)
    ours, oracle = encoders[pattern]
    with ours.cache() as cache:
        utf8, _ = ours.encoder.pieces(text, cache)  # type: ignore[attr-defined]
    assert utf8 == text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    assert ours.encode([text])[0].tolist() == oracle.encode_ordinary(text)


@pytest.mark.parametrize("unit", ["a", "Ż", "ж", "1", " ", "\u3000", "!", "中", "😀", "ab ", "\r\n", "'s"])
def test_single_long_pieces_of_every_kind_equal_tiktoken(encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]],
                                                         unit: str) -> None:
    text = unit * (200_000 // len(unit.encode()))
    for pattern in PATTERNS:
        ours, oracle = encoders[pattern]
        expected = oracle.encode_ordinary("x" + text)
        ids = ours.encode([text, "x" + text, ("x" + text).encode()])
        assert ids[1].tolist() == expected and ids[2].tolist() == expected, pattern


def test_the_published_ids_of_hello_world(encoders: dict[str, tuple[CompiledBpe, tiktoken.Encoding]]) -> None:
    from tokpack.vocab.patterns import CL100K_PATTERN

    assert encoders[CL100K_PATTERN][0].encode(["hello world"])[0].tolist() == [15339, 1917]
