"""A pre-tokenizer pattern must cover the text: one that skips characters, drops one after an empty match or
matches the empty string is refused naming the document and the fix, before anything is trained or
published, and a regex tiktoken's engine gives up on is an input error, never a panic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tokpack
from tokpack.engines.driver import prepare_sharded
from tokpack.errors import InputError

from conftest import SAMPLE


def _bare_rank_file(prepared: tokpack.TokenizedCorpus, folder: Path) -> Path:
    """The rank file alone (no vocabulary.json beside it), so pattern= says its pattern."""
    ranks = folder / "bare" / "ranks.tiktoken"
    ranks.parent.mkdir(parents=True, exist_ok=True)
    ranks.write_bytes((prepared.vocabulary_path.parent / "ranks.tiktoken").read_bytes())
    return ranks


def test_a_pattern_that_skips_text_is_refused_on_the_first_document(prepared: tokpack.TokenizedCorpus,
                                                                    tmp_path: Path) -> None:
    ranks = _bare_rank_file(prepared, tmp_path)
    with pytest.raises(InputError, match=r"skips .* at character 0 of the first document"):
        tokpack.prepare(SAMPLE / "polish.txt", vocab=ranks, pattern="[a-z]+", cache_dir=tmp_path,
                        document_bytes=4096)
    with pytest.raises(InputError, match="skips"):
        tokpack.prepare(SAMPLE / "polish.txt", pattern=r"\d+", vocab_size=300, cache_dir=tmp_path,
                        document_bytes=4096)
    trained = [p for p in (tmp_path / "vocab").iterdir() if not p.name.startswith("user-")]
    assert not trained, trained  # refused before training


def test_a_pattern_that_skips_text_past_the_first_document_is_refused_there(prepared: tokpack.TokenizedCorpus,
                                                                            tmp_path: Path) -> None:
    # A pattern with no compiled pre-tokenizer (tiktoken encodes) that covers the first document
    # but not a later one: the ids of every document must spell all of its bytes.
    ranks = _bare_rank_file(prepared, tmp_path)
    corpus = tmp_path / "late.txt"
    corpus.write_text("hello world\n" * 2000 + "price: 5€ ok\n" + "bye\n" * 10, encoding="utf-8")
    with pytest.raises(InputError, match=r"late.txt: .*skips '€' at character \d+ of document [1-9][\d,]* "
                                         r"\(counting from 0\)"):
        tokpack.prepare(corpus, vocab=ranks, pattern=r"[\x00-\x7f]+", cache_dir=tmp_path, document_bytes=4096)
    assert not list(tmp_path.rglob("meta.json"))  # no pack published
    prepared_ascii = tokpack.prepare(corpus, vocab=ranks, pattern=r"[\x00-\x7f]+|[^\x00-\x7f]+",
                                     cache_dir=tmp_path, document_bytes=4096)
    assert prepared_ascii.pack().n_tokens > 0


def test_a_regex_that_tiktoken_gives_up_on_is_an_input_error(prepared: tokpack.TokenizedCorpus,
                                                              tmp_path: Path) -> None:
    # polish-phrase wrapped in a group is no named pattern: tiktoken's regex engine encodes it, and
    # its backtracking stack overflows on one long line (the compiled polish-phrase never does).
    from tokpack.vocab.patterns import POLISH_PHRASE_PATTERN

    tokenizer = tokpack.load_vocabulary(_bare_rank_file(prepared, tmp_path), pattern=f"(?:{POLISH_PHRASE_PATTERN})")
    assert tokenizer.engine == "tiktoken"
    line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 150_000
    for encode in (lambda: tokenizer.encode_arrays([line]), lambda: tokenizer.encode(line),
                   lambda: tokenizer.encode_batch([line])):
        with pytest.raises(InputError, match=r"regex engine gave up on the pattern .*; use a named pattern"):
            encode()


def test_tiktokens_other_failures_on_a_regex_are_input_errors(prepared: tokpack.TokenizedCorpus,
                                                              tmp_path: Path) -> None:
    ranks = _bare_rank_file(prepared, tmp_path)
    # An empty match in context (after a word boundary): tiktoken panics slicing past it.
    boundary = tokpack.load_vocabulary(ranks, pattern=r"\b|[\s\S]")
    # A backtracking limit in encode_ordinary (a panic there, a ValueError in encode_to_numpy).
    backtracking = tokpack.load_vocabulary(ranks, pattern=r"(?:a|a)*(?=b)|[\s\S]")
    for tokenizer, text in ((boundary, "Ala ma kota.\n"), (backtracking, "a" * 5000 + " x")):
        for encode, given in ((tokenizer.encode, text), (tokenizer.encode_batch, [text, "b"]),
                              (tokenizer.encode_arrays, [text, "b"])):
            with pytest.raises(InputError, match=r"regex engine gave up on the pattern .*; use a named pattern"):
                encode(given)  # type: ignore[operator]


def test_an_empty_match_that_drops_a_character_names_the_pattern_and_a_fix(prepared: tokpack.TokenizedCorpus,
                                                                         tmp_path: Path) -> None:
    # tiktoken skips the character after an empty match; the regex module's finditer does not, so
    # no gap is found there: the ids' byte count is what tells.
    corpus = tmp_path / "small.txt"
    corpus.write_text("abc def\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"pre-tokenizer pattern '\(\?=b\)\|\[\\s\\S\]' leaves 1 of the 8 bytes of "
                                         r"the first document out of its ids .*; use a pattern that matches every"):
        tokpack.prepare(corpus, vocab=_bare_rank_file(prepared, tmp_path), pattern=r"(?=b)|[\s\S]", cache_dir=tmp_path)


def test_a_shard_names_a_skipping_patterns_document_within_the_shard(prepared: tokpack.TokenizedCorpus,
                                                                      tmp_path: Path) -> None:
    records = ["clean text number %d here\n" % i for i in range(40)]
    records[37] += "bad \x00 nul"
    docs = tmp_path / "late.jsonl"
    docs.write_text("".join(json.dumps({"text": text}) + "\n" for text in records), encoding="utf-8")
    with pytest.raises(InputError, match=r"skips '\\x00' at character \d+ of document \d+ \(counting from 0\) of the "
                                         r"shard of units \d+ to \d+ \(files, records or rows"):
        prepare_sharded(docs, tmp_path / "sharded", shards=3, processes=1,
                        vocab=tokpack.load_vocabulary(_bare_rank_file(prepared, tmp_path), pattern=r"[^\x00]+"))


def test_a_pattern_matching_the_empty_string_never_reaches_tiktoken(prepared: tokpack.TokenizedCorpus,
                                                                   tmp_path: Path) -> None:
    ranks = _bare_rank_file(prepared, tmp_path)
    with pytest.raises(InputError, match="matches the empty string"):
        tokpack.load_vocabulary(ranks, pattern="x*")


def test_a_pattern_hugging_face_cannot_compile_is_refused_with_the_fix(tmp_path: Path) -> None:
    """``(?s).+`` compiles in the ``regex`` module but not in Oniguruma: a vocabulary trained with
    it carried a tokenizer.json Hugging Face could not load (and the hf trainer failed inside), so
    it is refused up front, for either trainer."""
    from tokpack.vocab.patterns import check_pattern

    with pytest.raises(InputError, match=r"does not compile in Hugging Face's regex engine.*\[\\s\\S\]"):
        check_pattern("(?s).+")
    assert check_pattern(r"[\s\S]+") == r"[\s\S]+"
    for trainer in ("exact", "hf"):
        with pytest.raises(InputError, match="Hugging Face's regex engine"):
            tokpack.prepare(SAMPLE, pattern="(?s).+", vocab_size=270, allow_smaller_vocab=True, trainer=trainer,
                            cache_dir=tmp_path / trainer, out=tmp_path / f"pack-{trainer}")
        assert not (tmp_path / f"pack-{trainer}").exists()
