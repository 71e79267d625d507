"""The compiled encoder's limits: ids past its packed merge table fall back to tiktoken, exactly."""

from __future__ import annotations

import tiktoken

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
