"""The compiled encoder gives tiktoken's ids exactly (tiktoken is the oracle), for GPT-2's ranks
and cl100k's (shipped in the ``bpe-openai`` package), on the repository's data and on generated
text over every Unicode plane; packs are byte-identical; patterns without a compiled
pre-tokenizer fall back to tiktoken and say so (the named patterns, o200k's and the Polish ones
included, are tested in test_encoder_patterns)."""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokpack import GPT2_PATTERN, load_vocabulary, prepare
from tokpack.cli import app
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.compiled import COMPILED_PATTERNS
from tokpack.vocab.patterns import CL100K_PATTERN, GPT4_PATTERN, POLISH_PATTERN, POLISH_PHRASE_PATTERN
from tokpack.vocab.published import O200K_PATTERN

#: Sample of each data file compared (characters): every file, its first 40,000 characters.
SAMPLE_CHARS = 40_000


_ORACLES: dict[str, tiktoken.Encoding] = {}


def _oracle(tokenizer: BpeTokenizer) -> tiktoken.Encoding:
    """tiktoken's encoding of ``tokenizer``'s vocabulary (built once per tokenizer)."""
    key = tokenizer.identity.sha256
    if key not in _ORACLES:
        _ORACLES[key] = tiktoken.Encoding(name="oracle", pat_str=tokenizer.pattern,
                                                    mergeable_ranks=tokenizer.ranks,
                                                    special_tokens=tokenizer.special_tokens)
    return _ORACLES[key]


def _bpe_openai_ranks(name: str, folder: Path) -> Path:
    """A rank file that the ``bpe-openai`` package ships (gzipped) as a plain rank file."""
    packed = resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").read_bytes()
    path = folder / f"{name}.tiktoken"
    path.write_bytes(gzip.decompress(packed))
    return path


@pytest.fixture(scope="session")
def gpt2(gpt2_rank_file: Path) -> BpeTokenizer:
    return load_vocabulary(gpt2_rank_file)


@pytest.fixture(scope="session")
def cl100k(tmp_path_factory: pytest.TempPathFactory) -> BpeTokenizer:
    # The published cl100k loads with tokpack's GPT-4 spelling; the same ranks under tiktoken's own
    # (possessive) spelling of that pattern must encode alike, so both are tested.
    published = load_vocabulary(_bpe_openai_ranks("cl100k_base", tmp_path_factory.mktemp("cl100k")))
    assert published.pattern == GPT4_PATTERN
    return BpeTokenizer(ranks=published.ranks, pattern=CL100K_PATTERN, special_tokens=published.special_tokens)


@pytest.fixture(scope="session")
def data_texts(shared_data: Path) -> list[str]:
    texts = []
    for path in sorted(p for p in shared_data.rglob("*") if p.is_file()):
        try:
            texts.append(path.read_text(encoding="utf-8")[:SAMPLE_CHARS])
        except UnicodeDecodeError:  # no such file today; a binary one would not be text to encode
            continue
    assert len(texts) > 2000
    return texts


@pytest.fixture(scope="session", params=["gpt2", "cl100k", "gpt4"])
def vocabulary(request: pytest.FixtureRequest, gpt2: BpeTokenizer, cl100k: BpeTokenizer) -> BpeTokenizer:
    if request.param == "gpt2":
        return gpt2
    if request.param == "cl100k":
        return cl100k
    # cl100k's ranks under tokpack's spelling of the GPT-4 pattern
    return BpeTokenizer(ranks=cl100k.ranks, pattern=GPT4_PATTERN, special_tokens=cl100k.special_tokens)


def test_the_rank_files_are_the_real_ones(gpt2: BpeTokenizer, cl100k: BpeTokenizer) -> None:
    assert len(gpt2.ranks) == 50256 and len(cl100k.ranks) == 100256
    assert gpt2.engine == cl100k.engine == "compiled"
    assert cl100k.encode("hello world") == [15339, 1917]  # cl100k's published ids


def test_ids_equal_tiktoken_on_every_data_file(vocabulary: BpeTokenizer, data_texts: list[str]) -> None:
    oracle = _oracle(vocabulary)
    ours = vocabulary.encode_arrays(data_texts, num_threads=1)
    assert all(ids.dtype == np.uint32 for ids in ours)
    for index, (text, ids) in enumerate(zip(data_texts, ours)):
        assert ids.tolist() == oracle.encode_ordinary(text), f"data file {index} differs"


def test_threads_do_not_change_the_ids(gpt2: BpeTokenizer, data_texts: list[str]) -> None:
    texts = data_texts[::7]
    one = gpt2.encode_arrays(texts, num_threads=1)
    two = gpt2.encode_arrays(texts, num_threads=2)
    assert [a.tolist() for a in one] == [b.tolist() for b in two]
    assert gpt2.encode_batch(texts[:5], num_threads=2) == [a.tolist() for a in one[:5]]


#: Characters where pre-tokenizers go wrong: whitespace of several kinds, apostrophes and the
#: letters of contractions (``ſ`` folds to ``s``, ``K`` (Kelvin) to ``k``), digits of several
#: scripts, letters of several cases and scripts, marks, emoji, and lone surrogates.
TRICKY = list(" \t\n\r\x0b\x0c\x85\xa0\u1680\u2028\u2029\u3000'’sSſdDmMtTlLvVeErR"
              "09٣۴३৯๓１²½ⅫaéłŁǅ中ｶ한あ\u0301\u200d😀🇵🇱.,;:!?-_/\\\"()<>\U0001F600\U000E0001\U0010FFFD") + [
    "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
TEXTS = st.text(st.one_of(st.sampled_from(TRICKY), st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                                                 categories=None)), max_size=60)


@settings(max_examples=1000, deadline=None)
@given(text=TEXTS)
def test_ids_equal_tiktoken_on_any_text(vocabulary: BpeTokenizer, text: str) -> None:
    oracle = _oracle(vocabulary)
    assert vocabulary.encode(text) == oracle.encode_ordinary(text)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(TEXTS, max_size=6))
def test_batches_equal_tiktoken_text_by_text(gpt2: BpeTokenizer, texts: list[str]) -> None:
    oracle = _oracle(gpt2)
    assert [ids.tolist() for ids in gpt2.encode_arrays(texts, num_threads=2)] == [
        oracle.encode_ordinary(text) for text in texts]


def test_a_batch_of_texts_of_every_kind_keeps_each_texts_ids(gpt2: BpeTokenizer) -> None:
    # One call encodes the batch into one buffer: each text's ids end where the next one's begin,
    # whatever the texts (empty, ASCII read in place, others transcoded, lone surrogates).
    oracle = _oracle(gpt2)
    texts = ["Ala ma kota", "", "", "x", "日本語のテキスト", "a\ud800b", "", "It's 12345 words", "y", "😀 z", ""]
    tokenizer = BpeTokenizer(ranks=gpt2.ranks)
    assert [ids.tolist() for ids in tokenizer.encode_arrays(texts, num_threads=1)] == [
        oracle.encode_ordinary(text) for text in texts]


def test_a_lone_surrogate_is_encoded_as_tiktoken_encode_ordinary_does(gpt2: BpeTokenizer) -> None:
    oracle = _oracle(gpt2)
    for text in ["a\ud800b", "\ud83d\ude00 x", "x\udfff", "\ude00\ud83d"]:
        assert [ids.tolist() for ids in gpt2.encode_arrays([text, "ok"])] == [oracle.encode_ordinary(text),
                                                                             oracle.encode_ordinary("ok")]


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.one_of(st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d\ude00", "a", "é",
                                                "中", "😀", "\xff"]),
                               st.characters(min_codepoint=0xD700, max_codepoint=0xE0FF, categories=None)),
                     max_size=12).map("".join))
def test_surrogates_become_what_tiktoken_encode_ordinary_encodes(gpt2: BpeTokenizer, text: str) -> None:
    # the extension's own transcoding of a str (any of CPython's three widths) to UTF-8 fixes
    # surrogates as utf-16 with surrogatepass, then replace, does
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    compiled = gpt2._compiled
    assert compiled is not None
    with compiled.cache() as cache:
        utf8, _ = compiled.encoder.pieces(text, cache)
    assert utf8 == fixed.encode("utf-8")
    assert gpt2.encode(text) == _oracle(gpt2).encode_ordinary(text)


def test_long_pieces_and_runs(gpt2: BpeTokenizer, cl100k: BpeTokenizer) -> None:
    texts = ["x" * 5000, " " * 3000 + "a", "\n" * 100 + " \t" * 50, "ą" * 2000, "1234567890" * 300,
             "ab" * 4000 + "ſ't 'LL 'Ve", "😀" * 500]
    for vocabulary in (gpt2, cl100k):
        oracle = _oracle(vocabulary)
        assert [ids.tolist() for ids in vocabulary.encode_arrays(texts)] == [oracle.encode_ordinary(t) for t in texts]


def test_long_pieces_among_short_ones_are_merged_and_counted(gpt2: BpeTokenizer) -> None:
    # pieces longer than a cache row's 128 bytes ("ż" * 3000) or of more ids than a row holds (28;
    # "y" * 70 is 35) are merged each time, between short pieces, at a text's start and in the
    # middle of a batch; " x..." (101 bytes, 14 ids) and "1" * 80 (21 ids) fit a row
    texts = ["Ala ma kota " + "x" * 100 + " i psa " + "ż" * 3000 + " koniec", "y" * 70, "", "ok, " + "1" * 80]
    tokenizer = BpeTokenizer(ranks=gpt2.ranks)  # fresh caches, counted from zero
    oracle = _oracle(gpt2)
    assert [ids.tolist() for ids in tokenizer.encode_arrays(texts, num_threads=1)] == [
        oracle.encode_ordinary(text) for text in texts]
    report = tokenizer.encoder_report()["piece_cache"]
    assert isinstance(report, dict)
    assert report["uncached"] == 2


def test_the_piece_cache_is_bounded(gpt2: BpeTokenizer) -> None:
    from tokpack.vocab.compiled import CACHE_BYTES

    tokenizer = BpeTokenizer(ranks=gpt2.ranks)  # fresh caches
    compiled = tokenizer._compiled
    assert compiled is not None
    slots = compiled.cache_report().slots_each
    # more distinct pieces (none a token, each two tokens run together) than the cache has entries
    heads = sorted(t.decode() for t in gpt2.ranks if len(t) > 3 and t[:1] == b" " and t[1:].isalpha() and t.isascii())
    tails = sorted(t.decode() for t in gpt2.ranks if len(t) > 3 and t.isalpha() and t.isascii() and t.islower())
    words = [head + tail for head in heads[:1000] for tail in tails[:500]]
    words = [word for word in words if word.encode() not in gpt2.ranks][:slots * 3 // 2]
    assert len(words) == slots * 3 // 2
    tokenizer.encode_arrays(["".join(words)], num_threads=1)
    report = tokenizer.encoder_report()["piece_cache"]
    assert isinstance(report, dict)
    assert report["caches"] == 1 and report["bytes_each"] == CACHE_BYTES
    assert report["tokens"] + report["hits"] + report["misses"] + report["uncached"] == len(words)
    assert report["misses"] > report["slots_each"]
    assert 0 < report["pieces_held"] <= report["slots_each"]


def _pack_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_corpus_packs_byte_identically_with_tiktoken(gpt2_rank_file: Path, shared_data: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    parts = [p.read_text(encoding="utf-8") for p in sorted((shared_data / "polish" / "technical").glob("*"))[:40]]
    corpus.write_text("\n".join(parts + [(shared_data / "other" / "english").iterdir().__next__().read_text()[:50_000]]),
                      encoding="utf-8")
    compiled = load_vocabulary(gpt2_rank_file)
    by_tiktoken = load_vocabulary(gpt2_rank_file)
    by_tiktoken.__dict__["_compiled"] = None  # this one encodes with tiktoken (the engine a pattern falls back to)
    packs = []
    for name, tokenizer in (("compiled", compiled), ("tiktoken", by_tiktoken)):
        packs.append(prepare(corpus, vocab=tokenizer, cache_dir=tmp_path / name, document_bytes=4096, workers=2))
    assert packs[0].meta.n_tokens > 10_000
    assert _pack_files(packs[0].tokens_dir) == _pack_files(packs[1].tokens_dir)
    assert compiled.encoder_report()["engine"] == "compiled"


def test_prepare_json_names_the_engine_and_its_cache(gpt2_rank_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Zażółć gęślą jaźń.\nThe quick brown fox.\n" * 50, encoding="utf-8")
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(gpt2_rank_file), "--cache-dir",
                                      str(tmp_path / "c"), "--json"])
    assert result.exit_code == 0, result.output
    encoder = json.loads(result.output)["encoder"]
    assert encoder["engine"] == "compiled"
    cache = encoder["piece_cache"]
    assert cache["slots_each"] > 0 and cache["bytes_each"] > 0 and cache["tokens"] > 0 and cache["pieces_held"] >= 0


def test_the_compiled_patterns_are_the_named_ones() -> None:
    assert set(COMPILED_PATTERNS) == {GPT2_PATTERN, GPT4_PATTERN, CL100K_PATTERN, O200K_PATTERN, POLISH_PATTERN,
                                      POLISH_PHRASE_PATTERN}


def test_character_classes_are_tiktokens_own_over_every_code_point(gpt2: BpeTokenizer, cl100k: BpeTokenizer) -> None:
    """tiktoken's regex engine has its own Unicode version (U+18D80 is a letter to the ``regex``
    module, not to tiktoken 0.14): every code point, in letter, digit, space and apostrophe
    company, cuts as tiktoken cuts it."""
    every = np.arange(0x110000, dtype=np.uint32)
    every = every[(every < 0xD800) | (every >= 0xE000)]
    chars = every.tobytes().decode("utf-32-le")
    contexts = [":A", " 1", "'S", "  ", "\n"]
    texts = ["".join(f"{chars[k]}{contexts[k % 5]}{chars[k + 1: k + 3]}" for k in range(start, min(start + 20_000, len(chars)), 3))
             for start in range(0, len(chars), 20_000)]
    texts.append("\U00018d80:A")
    for vocabulary in (gpt2, cl100k):
        oracle = _oracle(vocabulary)
        ours = vocabulary.encode_arrays(texts, num_threads=1)
        for text, ids in zip(texts, ours):
            assert ids.tolist() == oracle.encode_ordinary(text)
