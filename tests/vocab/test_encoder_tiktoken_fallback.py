"""The compiled encoder's limits: ids past its packed merge table fall back to tiktoken, exactly,
and ``prepare`` packs ids up to 2**32 that way; either encoder takes str and bytes texts only."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
import tiktoken

import tokpack
from tokpack import GPT2_PATTERN
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.compiled import MAX_ID


def test_ids_past_the_packed_table_fall_back_to_tiktoken() -> None:
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": MAX_ID}
    tokenizer = BpeTokenizer(ranks=ranks, pattern=GPT2_PATTERN)
    assert tokenizer.engine == "tiktoken"
    oracle = tiktoken.Encoding(name="big", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    text = "abc abcab ab"
    assert [ids.tolist() for ids in tokenizer.encode_arrays([text])] == [oracle.encode_ordinary(text)]


def test_ids_below_the_limit_stay_compiled() -> None:
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": MAX_ID - 1}
    tokenizer = BpeTokenizer(ranks=ranks, pattern=GPT2_PATTERN)
    assert tokenizer.engine == "compiled"
    oracle = tiktoken.Encoding(name="near", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    text = "abc abcab ab"
    assert [ids.tolist() for ids in tokenizer.encode_arrays([text])] == [oracle.encode_ordinary(text)]


def test_a_vocabulary_with_ids_up_to_2_to_the_32_prepares_with_tiktoken(tmp_path: Path) -> None:
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 4_000_000_000}
    path = tmp_path / "huge.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello ab world\n", encoding="utf-8")
    prepared = tokpack.prepare(corpus, vocab=path, pattern="gpt2", cache_dir=tmp_path / "cache")
    assert prepared.tokenizer.engine == "tiktoken"
    assert 4_000_000_000 in np.load(prepared.tokens_dir / "tokens.npy").tolist()


@pytest.mark.parametrize("extra", [{}, {b"abc": MAX_ID}], ids=["compiled", "tiktoken"])
@pytest.mark.parametrize("item", [bytearray(b"ab"), memoryview(b"ab"), 7, None], ids=["bytearray", "memoryview", "int", "None"])
def test_texts_neither_str_nor_bytes_are_a_type_error_on_either_encoder(extra: dict[bytes, int], item: object) -> None:
    # The tiktoken path decoded anything that was not a str: a bytearray was encoded (the compiled
    # encoder refuses it) and a memoryview, an int or None raised AttributeError.
    tokenizer = BpeTokenizer(ranks={bytes([b]): b for b in range(256)} | {b"ab": 256} | extra, pattern=GPT2_PATTERN)
    with pytest.raises(TypeError, match=r"texts\[1\] is \w+, not str or bytes"):
        tokenizer.encode_arrays(["ab", item, b"a\xff"], num_threads=1)  # type: ignore[list-item]
    assert [ids.tolist() for ids in tokenizer.encode_arrays(["ab", b"ab"], num_threads=2)] == [[256], [256]]
