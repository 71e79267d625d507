"""A ``tokenizer.json`` holds one id a spelling: ranks in which an ordinary token is spelled as a
special token (two ids, one spelling) are refused wherever the document would be written (the
Python writer, the compiled one, a copy kept in the cache), naming the token, its two ids and the
fix, never written with ids Hugging Face would read apart from tiktoken's. Such ranks still load:
tiktoken keeps the two ids apart (text never gives the special id), only the document cannot."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from spelled_specials import EOT, SPACES_PATTERN, learned_ranks, rank_file, spelled_corpus
from typer.testing import CliRunner

import tokpack
from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.vocab import BpeTokenizer, compiled
from tokpack.vocab.merge_files import (
    GPT2_PATTERN,
    _json_spellings,
    _skeleton,
    tokenizer_json,
    tokenizer_json_bytes,
)
from tokpack.vocab.rank_files import TokenTable
from tokpack.vocab.tokenizer_json_cache import CachedTokenizerJson, cached_paths, reuse_tokenizer_json

SAID = (r"the ordinary token '<\|endoftext\|>' \(id {rank}\) is spelled as the special token '<\|endoftext\|>' "
        r"\(id {special}\): a tokenizer.json holds one id a spelling, so Hugging Face's ids would differ from "
        r"tiktoken's on text that spells it; train the vocabulary again \(tokpack's trainers cut the special "
        r"tokens' spellings out of the text\), or rename the special token or remove that rank")


@pytest.fixture(scope="module")
def learned() -> dict[bytes, int]:
    return learned_ranks()


def said(ranks: dict[bytes, int], special: int) -> str:
    return SAID.format(rank=ranks[EOT.encode()], special=special)


def test_both_writers_refuse_a_special_token_spelled_as_an_ordinary_one(learned: dict[bytes, int]) -> None:
    specials = {EOT: max(learned.values()) + 1}
    with pytest.raises(InputError, match=said(learned, specials[EOT])):
        tokenizer_json(learned, SPACES_PATTERN, specials, where="ranks.tiktoken")
    for given in (learned, TokenTable.of(learned)):  # the compiled writer's path, and the dict's
        with pytest.raises(InputError, match="^ranks.tiktoken: " + said(learned, specials[EOT])):
            tokenizer_json_bytes(given, SPACES_PATTERN, specials, where="ranks.tiktoken")
    tokenizer = BpeTokenizer(ranks=learned, pattern=SPACES_PATTERN)
    with pytest.raises(InputError, match=said(learned, specials[EOT])):
        tokenizer.to_tokenizer_json()
    with pytest.raises(InputError, match=said(learned, specials[EOT])):
        BpeTokenizer.from_table(TokenTable.of(learned), pattern=SPACES_PATTERN).tokenizer_json_bytes()


@pytest.mark.skipif(compiled._bpe is None, reason="the compiled extension did not build here")
def test_the_compiled_writer_itself_refuses_a_name_spelled_as_a_token() -> None:
    table = TokenTable.of({b"a": 0, b"b": 1, b"ab": 2})
    with pytest.raises(ValueError, match=r"tokenizer_json: name 0 \(id 3\) is spelled as the token of id 2: "
                                         "a tokenizer.json holds one id a spelling"):
        compiled.tokenizer_json_text(table, np.array([0, 0, 1]), [b"ab"], np.array([3]), _json_spellings(),
                                     _skeleton(GPT2_PATTERN))
    written = compiled.tokenizer_json_text(table, np.array([0, 0, 1]), [b"ba"], np.array([3]), _json_spellings(),
                                           _skeleton(GPT2_PATTERN))
    assert written is not None and b'"ba": 3' in written


def test_a_copy_in_the_cache_is_never_passed_off_for_such_ranks(learned: dict[bytes, int], tmp_path: Path) -> None:
    tokenizer = BpeTokenizer(ranks=learned, pattern=SPACES_PATTERN)
    document, record = cached_paths(tokenizer.identity, tmp_path)
    document.parent.mkdir(parents=True)
    content = b'{"a copy": "kept before the check"}'
    document.write_bytes(content)
    record.write_text(CachedTokenizerJson(identity=tokenizer.identity, layout=int(record.name.split("-l")[1].split(".")[0]),
                                          size=len(content), sha256=hashlib.sha256(content).hexdigest())
                      .model_dump_json(by_alias=True), encoding="utf-8")
    with pytest.raises(InputError, match=said(learned, tokenizer.special_tokens[EOT])):
        reuse_tokenizer_json(tokenizer, tmp_path)
    assert not tokenizer.has_tokenizer_json()


def test_a_users_rank_file_with_such_a_token_loads_and_encodes_but_prepare_refuses_it(
        learned: dict[bytes, int], tmp_path: Path) -> None:
    ranks_file = rank_file(learned, tmp_path / "mine.tiktoken")
    vocabulary = tokpack.load_vocabulary(ranks_file, pattern=SPACES_PATTERN)
    assert vocabulary.encode(EOT) == [learned[EOT.encode()]] != [vocabulary.eot_id]  # tiktoken: text is text
    corpus = spelled_corpus(tmp_path / "corpus.txt", 20_000)
    with pytest.raises(InputError, match=f"^{ranks_file}: " + said(learned, vocabulary.eot_id)):
        tokpack.prepare(corpus, vocab=ranks_file, pattern=SPACES_PATTERN, cache_dir=tmp_path / "cache")
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(ranks_file), "--pattern", SPACES_PATTERN,
                                      "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "pack")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "is spelled as the special token" in result.output and not (tmp_path / "pack").exists()
    assert not (tmp_path / "cache" / "packs").exists() or not any((tmp_path / "cache" / "packs").iterdir())
