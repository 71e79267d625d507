"""Published patterns are recognized by what they mean, not by their characters: tiktoken's own
spellings of cl100k's and o200k's patterns are accepted for their ranks, and a spelling that cuts
some text differently is still refused."""

from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

from tokpack import load_vocabulary
from tokpack.errors import InputError
from tokpack.vocab.patterns import (
    CL100K_PATTERN,
    GPT4_PATTERN,
    KNOWN_PATTERNS,
    O200K_PATTERN,
    _meaning,
    canonical_pattern,
    same_meaning,
)
from tokpack.vocab.published import PUBLISHED

#: A spelling of GPT-4's pattern with greedy quantifiers and no ``\s++$`` alternative: it cuts
#: trailing whitespace otherwise than cl100k's published pattern, so it means something else.
GREEDY_GPT4_SPELLING = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def _published_rank_file(name: str, folder: Path) -> Path:
    """A rank file the ``bpe-openai`` package ships (gzipped), written out as tiktoken publishes it."""
    path = folder / f"{name}.tiktoken"
    path.write_bytes(gzip.decompress(resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").read_bytes()))
    return path


def _tiktoken_pattern(name: str, rank_file: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The ``pat_str`` tiktoken's own definition of ``name`` gives (its ranks read from the local
    copy of the same file, so nothing is downloaded)."""
    from tiktoken.load import load_tiktoken_bpe

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe",
                        lambda url, expected_hash=None: load_tiktoken_bpe(str(rank_file), expected_hash))
    return str(getattr(openai_public, name)()["pat_str"])


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tiktoken_s_own_pattern_is_accepted_for_its_ranks(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rank_file = _published_rank_file(name, tmp_path)
    published = load_vocabulary(rank_file)
    spelled = _tiktoken_pattern(name, rank_file, monkeypatch)
    given_pattern = load_vocabulary(rank_file, pattern=spelled)
    # The published vocabulary, its recorded pattern and identity unchanged.
    assert given_pattern.identity == published.identity and given_pattern.pattern == published.pattern
    assert canonical_pattern(spelled) == published.pattern
    text = "Zażółć 12345 gęślą jaźń.\n\n  def f(x):\n\treturn x  \n"
    assert given_pattern.encode(text) == published.encode(text)
    # A saved copy accepts it too (its recorded pattern is compared by meaning as well).
    saved = published.save(tmp_path / "saved")
    assert load_vocabulary(saved, pattern=spelled).identity == published.identity


def test_a_spelling_that_cuts_differently_is_refused(tmp_path: Path) -> None:
    rank_file = _published_rank_file("cl100k_base", tmp_path)
    assert regex.findall(GREEDY_GPT4_SPELLING, "a  \n  ") != regex.findall(GPT4_PATTERN, "a  \n  ")
    assert not same_meaning(GREEDY_GPT4_SPELLING, GPT4_PATTERN) and canonical_pattern(GREEDY_GPT4_SPELLING) == GREEDY_GPT4_SPELLING
    with pytest.raises(InputError, match="is cl100k_base, whose pre-tokenizer pattern is published"):
        load_vocabulary(rank_file, pattern=GREEDY_GPT4_SPELLING)


def test_every_known_pattern_is_its_own_canonical_spelling() -> None:
    assert {published.pattern for published in PUBLISHED.values()} <= set(KNOWN_PATTERNS)
    for pattern in KNOWN_PATTERNS:
        assert canonical_pattern(pattern) == pattern
    assert canonical_pattern(CL100K_PATTERN) == GPT4_PATTERN
    assert len({_meaning(pattern) for pattern in KNOWN_PATTERNS}) == len(KNOWN_PATTERNS)  # none taken for another


#: Text from the characters the patterns tell apart: letters of several scripts and cases, digits,
#: spaces, tabs, line ends, apostrophes, punctuation.
_TEXT = st.lists(st.sampled_from([*"aZżŻ界ſ0١9 \t\r\n'’.,-/_(\u0301", "'s", "'LL"]), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_equivalent_spellings_cut_every_text_alike(text: str) -> None:
    for pattern in (*KNOWN_PATTERNS, CL100K_PATTERN, O200K_PATTERN):
        assert regex.findall(_meaning(pattern), text) == regex.findall(pattern, text)
    assert regex.findall(CL100K_PATTERN, text) == regex.findall(GPT4_PATTERN, text)


@pytest.mark.parametrize("atom", [r"\p{N}", r"\P{L}", r"\N{DIGIT ONE}"])
def test_a_plus_after_an_escape_in_braces_is_a_quantifier_not_a_possessive_mark(atom: str) -> None:
    # ``\p{N}+`` takes every digit of a run, ``\p{N}`` one: the braces close an escape, not a
    # quantifier, so the ``+`` after them is no possessive mark to drop.
    one, many = rf"\p{{L}}+|{atom}|\s+", rf"\p{{L}}+|{atom}+|\s+"
    assert not same_meaning(one, many)
    text = "ab 1234 AAA ١٢"
    assert regex.findall(one, text) != regex.findall(many, text) or atom == r"\N{DIGIT ONE}"
    assert same_meaning(r"\p{L}+|\p{N}{1,3}", r"\p{L}+|\p{N}{1,3}+") and same_meaning(r"a|\d{2,}", r"a|\d{2,}+")
