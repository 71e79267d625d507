"""Long pieces merge in ``n log n`` at any length (a piece of 2**24 bytes or more once fell onto a
quadratic scan and never finished): a 32 MiB piece whose ids are known by construction, and
pieces across the merge's every boundary (the scan's 32 bytes, the heap's blocks of 128) against
tiktoken, with vocabularies whose ranks are in no merge order (a merge may make a pair of lower rank
than its own)."""

from __future__ import annotations

import gzip
import random
from importlib import resources
from pathlib import Path

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from tokpack import GPT2_PATTERN
from tokpack.vocab.compiled import CompiledBpe

BYTES = {bytes([b]): b for b in range(256)}


def test_a_32_mib_piece_is_merged_whole() -> None:
    # "a" * 2**k for k = 1..10: the merges pair the piece off from the left, level by level (32
    # million merges), into 32,768 tokens of 1,024 bytes
    ranks = BYTES | {b"a" * (1 << k): 255 + k for k in range(1, 11)}
    ids = CompiledBpe(ranks, GPT2_PATTERN).encode([" a" + "a" * ((32 << 20) + 1)])[0]
    # the space (no token joins it), 32,768 tokens of 1,024 bytes, then "aa"
    assert ids.tolist() == [ranks[b" "], *[ranks[b"a" * 1024]] * 32768, ranks[b"aa"]]


@st.composite
def vocabulary_and_text(draw: st.DrawFn) -> tuple[dict[bytes, int], str]:
    alphabet = "abc"
    tokens: list[bytes] = []
    for _ in range(draw(st.integers(1, 30))):
        size = draw(st.integers(2, 9))
        token = "".join(draw(st.sampled_from(alphabet)) for _ in range(size)).encode()
        if token not in tokens:
            tokens.append(token)
    ids = list(range(256, 256 + len(tokens)))
    random.Random(draw(st.integers(0, 2**32 - 1))).shuffle(ids)  # in no merge order
    length = draw(st.sampled_from([31, 32, 33, 127, 128, 129, 255, 257, 1000, 4000]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    text = "".join(rng.choice(alphabet[:draw(st.integers(1, 3))]) for _ in range(length))
    return BYTES | dict(zip(tokens, ids)), text


@settings(max_examples=120, deadline=None)
@given(case=vocabulary_and_text())
def test_long_pieces_equal_tiktoken(case: tuple[dict[bytes, int], str]) -> None:
    ranks, text = case
    oracle = tiktoken.Encoding(name="oracle", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    assert CompiledBpe(ranks, GPT2_PATTERN).encode([text])[0].tolist() == oracle.encode_ordinary(text)


def test_a_long_piece_of_a_real_vocabulary_equals_tiktoken(tmp_path: Path) -> None:
    path = tmp_path / "cl100k_base.tiktoken"
    path.write_bytes(gzip.decompress(resources.files("bpe_openai.data").joinpath("cl100k_base.tiktoken.gz").read_bytes()))
    ranks = load_tiktoken_bpe(str(path))
    rng = random.Random(3)
    text = "".join(rng.choice("etaoinshrdlucmfw") for _ in range(25_000))  # one piece
    oracle = tiktoken.Encoding(name="oracle", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    assert CompiledBpe(ranks, GPT2_PATTERN).encode([text])[0].tolist() == oracle.encode_ordinary(text)
