"""Every pattern tokpack names has a compiled pre-tokenizer: o200k's and the Polish word and phrase
patterns as well as GPT-2's and GPT-4's. Its pieces equal ``regex.findall`` (the trainer's
oracle) on every file of ``data/`` and on generated text over every Unicode plane; the compiled
encoder's ids equal tiktoken's for o200k's published ranks and for a Polish vocabulary trained
here; a corpus packed with the Polish pattern is byte-identical either way."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokpack import load_vocabulary, prepare
from tokpack.bpe.piece_counter import PieceCounter
from tokpack.cli import app
from tokpack.grading.training import TrainingRecipe, train_tokenizer, weighted_documents
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.compiled import COMPILED_PATTERNS
from tokpack.vocab.pattern_scanners import LOWER_CLASS, UPPER_CLASS, split, tables, tiktoken_tables
from tokpack.vocab.patterns import CL100K_PATTERN, NAMED_PATTERNS, POLISH_PATTERN, POLISH_PHRASE_PATTERN
from tokpack.vocab.published import O200K_PATTERN

from conftest import DATA
from tokenizer_fixtures import small_corpus

#: The patterns whose scanners are tested here (GPT-2's and GPT-4's in tests/bpe/test_bpe_piece_counter.py).
TESTED_HERE = {"o200k": O200K_PATTERN, "polish": POLISH_PATTERN, "polish-phrase": POLISH_PHRASE_PATTERN}
#: Each data file's first characters compared.
SAMPLE_CHARS = 40_000

#: What the patterns treat specially: every kind of whitespace (and runs of it), \r\n, tabs and
#: indentation, apostrophes and the contraction letters in both cases with the long s (which
#: folds to s) and the Kelvin sign (to k), the phrase pattern's ,.:; and opening marks, digits of
#: several scripts, combining marks (o200k's classes hold them), upper, lower, title-case,
#: modifier and other letters, slashes, emoji, and lone surrogates.
_WHITESPACE = [" ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", " \n", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000",
               "\u2028", "\u2029", "\u202f", "\u3000", "\x1c"]
_TRICKY = [*_WHITESPACE, *"'’sSſdDmMtTlLvVeErRkK\u212a", "'s", "'S", "'ſ", "'ll", "'LL", "'Ve", "'re", "'d", "'M", "'T",
           *"0123٣۴३৯๓１𝟘²½Ⅻ", *",.:;!?-_/\\\"()<>[]#", *"\u0301\u0308\u0903\u20dd\u200d",
           *"aeząłżAEZĄŁŻ", *"ǅᾈᾼ", *"ʰʼˆ々", *"中ｶ한あ", *"ΩωЖж", "😀", "👍🏽", "🇵🇱", "\U0001d400", "\U00018d80",
           "\U000e0001", "\U0010fffd", "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
_ANY = st.characters(min_codepoint=0, max_codepoint=0x10FFFF)
TEXTS = st.lists(st.one_of(st.sampled_from(_TRICKY), _ANY), max_size=40).map("".join)


def _data_texts() -> list[str]:
    texts = []
    for path in sorted(p for p in DATA.rglob("*") if p.is_file()):
        try:
            texts.append(path.read_text(encoding="utf-8")[:SAMPLE_CHARS])
        except UnicodeDecodeError:  # a binary file is no text to split
            continue
    return texts


@pytest.fixture(scope="session")
def data_texts() -> list[str]:
    texts = _data_texts()
    assert len(texts) > 2000
    return texts


def test_every_named_pattern_has_a_compiled_pretokenizer() -> None:
    assert set(NAMED_PATTERNS.values()) | {O200K_PATTERN, CL100K_PATTERN} <= set(COMPILED_PATTERNS)
    # The case classes the tables hold are o200k's own.
    assert UPPER_CLASS in O200K_PATTERN and LOWER_CLASS in O200K_PATTERN


@pytest.mark.parametrize("name", sorted(TESTED_HERE))
def test_pieces_equal_regex_on_every_data_file(name: str, data_texts: list[str]) -> None:
    pattern = TESTED_HERE[name]
    for index, text in enumerate(data_texts):
        assert split(text, pattern) == regex.findall(pattern, text), f"data file {index} differs"


@settings(max_examples=1500, deadline=None)
@given(text=TEXTS, name=st.sampled_from(sorted(TESTED_HERE)))
def test_pieces_equal_regex_on_any_text(text: str, name: str) -> None:
    assert split(text, TESTED_HERE[name]) == regex.findall(TESTED_HERE[name], text)


@pytest.mark.parametrize(("name", "text", "pieces"), [
    # o200k: a lower-case run may follow upper-case letters; a contraction stays on its word
    ("o200k", "HTTPServer don't THEY'RE", ["HTTPServer", " don't", " THEY'RE"]),
    # o200k: the greedy [UPPER]* gives back its last mark (in both case classes) to [LOWER]+
    ("o200k", "A\u0301B\u0301C", ["A\u0301B\u0301", "C"]),
    ("o200k", " \u0301's\n\n  x", [" \u0301's", "\n\n", " ", " x"]),
    ("polish", "\n\n  Zażółć 12345, x\n", ["\n\n  Zażółć", " 123", "45", ",", " x", "\n"]),
    ("polish-phrase", "nie jest, a  (nie) tak.\n\tKod: x", ["nie jest, a", "  (nie", ")", " tak", ".\n", "\tKod: x"]),
])
def test_examples_cut_as_regex_does(name: str, text: str, pieces: list[str]) -> None:
    assert regex.findall(TESTED_HERE[name], text) == pieces  # the example is right
    assert split(text, TESTED_HERE[name]) == pieces


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(TEXTS, max_size=6), name=st.sampled_from(sorted(TESTED_HERE)))
def test_the_trainer_counts_the_new_patterns_as_regex_does(texts: list[str], name: str) -> None:
    counter = PieceCounter(TESTED_HERE[name])
    counter.add(texts)
    assert counter.to_counter() == Counter(piece for text in texts for piece in regex.findall(TESTED_HERE[name], text))


def test_the_tables_hold_each_engines_case_classes() -> None:
    for classes, _fold, _exact in (tables(), tiktoken_tables()):
        upper, lower = classes & 8, classes & 16
        assert upper[ord("A")] and not lower[ord("A")] and lower[ord("a")] and not upper[ord("a")]
        assert upper[ord("ǅ")] and not lower[ord("ǅ")]  # title case is upper's only
        assert upper[0x301] and lower[0x301] and upper[ord("中")] and lower[ord("ʰ")]  # marks, Lo, Lm: both
        assert not (upper[ord("1")] or lower[ord(" ")] or upper[ord("'")])


# ---- the encoder: tiktoken's ids ----

_ORACLES: dict[str, tiktoken.Encoding] = {}


def _oracle(tokenizer: BpeTokenizer) -> tiktoken.Encoding:
    key = f"{tokenizer.identity.sha256}:{tokenizer.pattern}"
    if key not in _ORACLES:
        _ORACLES[key] = tiktoken.Encoding(name="oracle", pat_str=tokenizer.pattern, mergeable_ranks=tokenizer.ranks,
                                          special_tokens=tokenizer.special_tokens)
    return _ORACLES[key]


@pytest.fixture(scope="session")
def o200k(tmp_path_factory: pytest.TempPathFactory) -> BpeTokenizer:
    path = tmp_path_factory.mktemp("o200k") / "o200k_base.tiktoken"
    path.write_bytes(gzip.decompress(resources.files("bpe_openai.data").joinpath("o200k_base.tiktoken.gz").read_bytes()))
    tokenizer = load_vocabulary(path)  # published: its own pattern
    assert tokenizer.pattern == O200K_PATTERN and len(tokenizer.ranks) == 199998
    return tokenizer


@pytest.fixture(scope="session")
def polish_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_corpus(tmp_path_factory.mktemp("polish-corpus"))


@pytest.fixture(scope="session")
def polish_phrase(polish_corpus: Path) -> BpeTokenizer:
    """A Polish vocabulary trained here: word merges with the Polish pattern, then phrase merges
    with the phrase pattern (the tokenizer's own)."""
    texts, _ = weighted_documents([polish_corpus], {})
    tokenizer = train_tokenizer(texts, TrainingRecipe(vocab_size=700, pattern=POLISH_PATTERN, phrase_merges=60))
    assert tokenizer.pattern == POLISH_PHRASE_PATTERN
    assert any(b" " in token.strip() for token in tokenizer.ranks)  # phrase tokens: more than one word
    return tokenizer


@pytest.fixture(scope="session")
def polish(polish_phrase: BpeTokenizer) -> BpeTokenizer:
    """The same ranks under the word pattern."""
    return BpeTokenizer(ranks=polish_phrase.ranks, pattern=POLISH_PATTERN, special_tokens=polish_phrase.special_tokens)


@pytest.fixture(scope="session", params=["o200k", "polish", "polish-phrase"])
def vocabulary(request: pytest.FixtureRequest) -> BpeTokenizer:
    tokenizer: BpeTokenizer = request.getfixturevalue(request.param.replace("-", "_"))
    assert tokenizer.engine == "compiled"
    return tokenizer


def test_ids_equal_tiktoken_on_every_data_file(vocabulary: BpeTokenizer, data_texts: list[str]) -> None:
    oracle = _oracle(vocabulary)
    ours = vocabulary.encode_arrays(data_texts, num_threads=2)
    for index, (text, ids) in enumerate(zip(data_texts, ours)):
        assert ids.tolist() == oracle.encode_ordinary(text), f"data file {index} differs"


@settings(max_examples=600, deadline=None)
@given(text=TEXTS)
def test_ids_equal_tiktoken_on_any_text(vocabulary: BpeTokenizer, text: str) -> None:
    assert vocabulary.encode(text) == _oracle(vocabulary).encode_ordinary(text)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(TEXTS, max_size=6))
def test_batches_equal_tiktoken_text_by_text(o200k: BpeTokenizer, texts: list[str]) -> None:
    assert o200k.encode_batch(texts, num_threads=2) == [_oracle(o200k).encode_ordinary(text) for text in texts]


def test_o200k_published_ids(o200k: BpeTokenizer) -> None:
    assert o200k.encode("Hello World's HTTPServer") == _oracle(o200k).encode_ordinary("Hello World's HTTPServer")
    assert o200k.encoder_report()["engine"] == "compiled"


def test_every_code_point_cuts_as_tiktoken_does(o200k: BpeTokenizer, polish_phrase: BpeTokenizer) -> None:
    """tiktoken's engine has its own Unicode version: every code point, in the company of
    letters of each case, marks, digits, spaces and apostrophes, cuts as tiktoken cuts it."""
    every = np.arange(0x110000, dtype=np.uint32)
    every = every[(every < 0xD800) | (every >= 0xE000)]
    chars = every.tobytes().decode("utf-32-le")
    contexts = [":A", " 1", "'S", "  ", "\n", "a\u0301", "Bc", "ǅ,"]
    texts = ["".join(f"{chars[k]}{contexts[k % 8]}{chars[k + 1: k + 3]}"
                     for k in range(start, min(start + 20_000, len(chars)), 3))
             for start in range(0, len(chars), 20_000)]
    texts.append("\U00018d80:A \U00018d80a")
    for tokenizer in (o200k, polish_phrase):
        oracle = _oracle(tokenizer)
        for text, ids in zip(texts, tokenizer.encode_arrays(texts, num_threads=2)):
            assert ids.tolist() == oracle.encode_ordinary(text)


def _pack_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_corpus_packs_byte_identically_with_the_polish_pattern(polish: BpeTokenizer, polish_corpus: Path,
                                                                  tmp_path: Path) -> None:
    by_tiktoken = BpeTokenizer(ranks=polish.ranks, pattern=polish.pattern, special_tokens=polish.special_tokens)
    by_tiktoken.__dict__["_compiled"] = None  # this one encodes with tiktoken (the engine a pattern falls back to)
    packs = [prepare(polish_corpus, vocab=tokenizer, cache_dir=tmp_path / name, document_bytes=4096, workers=2)
             for name, tokenizer in (("compiled", polish), ("tiktoken", by_tiktoken))]
    assert packs[0].meta.n_tokens > 10_000
    assert _pack_files(packs[0].tokens_dir) == _pack_files(packs[1].tokens_dir)
    assert polish.encoder_report()["engine"] == "compiled"


@pytest.mark.parametrize(("pattern", "engine"), [("polish", "compiled"), ("polish-phrase", "compiled"),
                                                  (r"\p{L}+|\s+|[^\p{L}\s]+", "tiktoken"),
                                                  (r"""'s|\w+| ?[^\s\w]+|\s+""", "tiktoken")])
def test_prepare_reports_the_engine_of_the_pattern(pattern: str, engine: str, gpt2_rank_file: Path,
                                                   tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Zażółć gęślą jaźń.\n  Kod: x = 1\n" * 20, encoding="utf-8")
    # GPT-2's ranks less the last: no published vocabulary, so the pattern given is the one used.
    ranks = tmp_path / "ranks.tiktoken"
    ranks.write_bytes(b"".join(gpt2_rank_file.read_bytes().splitlines(keepends=True)[:-1]))
    command = ["prepare", str(corpus), "--vocab", str(ranks), "--pattern", pattern, "--cache-dir", str(tmp_path / "c")]
    result = CliRunner().invoke(app, [*command, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["encoder"]["engine"] == engine
    # The fallback is said on stderr too (and in the table), with its reason.
    noted = "note: tiktoken encodes this vocabulary (the pattern has no compiled pre-tokenizer)"
    assert (noted in result.stderr) == (engine == "tiktoken")
    if engine == "tiktoken":  # and what would have the compiled encoder take it
        assert "the patterns --pattern names (gpt2, gpt4, polish, polish-phrase)" in result.stderr
    table = CliRunner().invoke(app, command)
    assert table.exit_code == 0, table.output
    assert ("tiktoken: the pattern has no compiled pre-tokenizer" if engine == "tiktoken"
            else "compiled (tiktoken's ids)") in table.stdout
    sharded = CliRunner().invoke(app, [*command, "--shards", "2", "--out", str(tmp_path / "sharded"), "--json"])
    assert sharded.exit_code == 0, sharded.output
    assert json.loads(sharded.stdout)["encoder"]["engine"] == engine


def test_prepare_without_the_built_extension_says_how_to_build_it(gpt2_rank_file: Path, tmp_path: Path) -> None:
    """An installation whose C extension was not built encodes with tiktoken (same ids) and says
    what builds it, not which patterns the missing encoder would have."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Zażółć gęślą jaźń.\n" * 20, encoding="utf-8")
    program = ("import sys; sys.modules['tokpack.vocab._bpe'] = None; from tokpack.cli import app; "
               "app(sys.argv[1:], prog_name='tokpack')")
    done = subprocess.run([sys.executable, "-c", program, "prepare", str(corpus), "--vocab", str(gpt2_rank_file),
                           "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "pack")],
                          capture_output=True, text=True, env={**os.environ, "TOKPACK_CACHE": str(tmp_path / "c")})
    assert done.returncode == 0, done.stderr
    assert "note: tiktoken encodes this vocabulary (tokpack's compiled encoder (its C extension) is not built" in done.stderr
    assert "reinstall tokpack with a C compiler (gcc or clang) to build it; if one is there, 'pip install -v tokpack' shows why" in done.stderr
    assert "patterns" not in done.stderr
