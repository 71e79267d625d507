"""The compiled encoder is a C extension built by ``pip install``: it is built and used here, its
Unicode classes are tiktoken's (the header regenerates to the same bytes), and without it tokpack
encodes with tiktoken and says why."""

from __future__ import annotations

import pytest
import tiktoken

import tokpack.vocab.compiled as compiled
from tokpack import GPT2_PATTERN
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.unicode_classes import HEADER, generate

RANKS = {bytes([b]): b for b in range(256)} | {b"ab": 256, b" ab": 257}


def test_the_extension_is_built_and_encodes() -> None:
    assert compiled.MISSING is None and compiled._bpe is not None
    tokenizer = BpeTokenizer(ranks=RANKS, pattern=GPT2_PATTERN)
    assert tokenizer.engine == "compiled" and tokenizer.fallback_reason is None
    assert tokenizer.encode("abc ab") == [256, 99, 257]
    assert tokenizer._compiled is not None
    # the window scanners' masks agree with the class table here (else the byte scanners alone run)
    assert compiled._bpe.WINDOWS == 1  # type: ignore[attr-defined]


def test_the_class_table_regenerates_from_tiktoken_to_the_shipped_bytes() -> None:
    assert HEADER.read_text(encoding="ascii") == generate(), (
        "tiktoken's Unicode classes changed: run `python -m tokpack.vocab.unicode_classes` and rebuild")


def test_without_the_extension_tiktoken_encodes_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "_bpe", None)
    monkeypatch.setattr(compiled, "MISSING", "tokpack's compiled encoder (its C extension) is not built (test)")
    tokenizer = BpeTokenizer(ranks=RANKS, pattern=GPT2_PATTERN)
    assert tokenizer.engine == "tiktoken"
    assert tokenizer.encoder_report() == {"engine": "tiktoken", "reason": compiled.MISSING}
    oracle = tiktoken.Encoding(name="oracle", pat_str=GPT2_PATTERN, mergeable_ranks=RANKS, special_tokens={})
    text = "abc ab \ud800 ab"
    assert [ids.tolist() for ids in tokenizer.encode_arrays([text, "ab"])] == [
        oracle.encode_ordinary(text), oracle.encode_ordinary("ab")]
