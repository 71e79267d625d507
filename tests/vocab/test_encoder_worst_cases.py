"""The encoder's worst cases for its buffers, against tiktoken: a vocabulary of the 256 bytes alone
(4 ids a code point, more than the ids' buffer starts with), pieces that outgrow the merge's
scratch or the ids' buffer (many, in many texts), batches across astral characters and
surrogates, long pieces merged by the heap with cascading merges."""

from __future__ import annotations

import random

import pytest
import tiktoken

from tokpack.vocab.compiled import COMPILED_PATTERNS, CompiledBpe

_ORDER = list(range(256))
random.Random(10).shuffle(_ORDER)
#: Every byte its own token, nothing else: every byte is one id (the ids' buffer's worst case).
BYTES_ONLY = {bytes([b]): _ORDER[b] for b in range(256)}
ASTRAL_LETTERS = [chr(c) for c in range(0x1D400, 0x1D434)] + [chr(0x20000 + k) for k in range(50)]


def _check(ranks: dict[bytes, int], pattern: str, texts: list[str]) -> None:
    oracle = tiktoken.Encoding(name="oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    assert [ids.tolist() for ids in CompiledBpe(ranks, pattern).encode(texts)] == [
        oracle.encode_ordinary(text) for text in texts]


@pytest.mark.parametrize("pattern", sorted(COMPILED_PATTERNS))
def test_four_ids_a_code_point_and_runs_resumed_in_many_texts(pattern: str) -> None:
    rng = random.Random(1)
    texts = ["😀" * 300, "𝐀" * 65, "𝐀" * 64, "", "\ud800" * 100, "\ud83d\ude00" * 90, "a\udfffb" * 40,
             "".join(rng.choice(ASTRAL_LETTERS) for _ in range(500)), " " + "𝐀" * 200 + " x", "\U0010FFFF" * 70,
             "", "x" * 65, "", "y" * 200 + " z", "w " + "q" * 1000, "", "ab " * 10 + "c" * 5000, "", "ż" * 70]
    _check(BYTES_ONLY, pattern, texts)


def test_batches_with_astral_characters_and_surrogates() -> None:
    _check(BYTES_ONLY, sorted(COMPILED_PATTERNS)[0],
           ["😀" * 9, "a\ud800", "\ud83d", "\ude00b", "𝐀" * 70, "", "x", "𝐀𝐁 " * 5])


def test_long_pieces_merged_by_the_heap_with_cascading_merges() -> None:
    ranks = dict(BYTES_ONLY)
    for token in [b"a" * 2 ** k for k in range(1, 11)] + [b"ab", b"ba", b"aba", b"bab", b"abab", b"ababab", b"bb"]:
        ranks[token] = len(ranks)
    rng = random.Random(2)
    texts = ["a" * n for n in (17, 63, 64, 65, 129, 4097)] + ["ab" * 999, "a" * 70 + " " + "a" * 300]
    texts += ["".join(rng.choice("ab") for _ in range(n)) for n in (17, 65, 1000, 3000)]
    _check(ranks, sorted(COMPILED_PATTERNS)[0], texts)


def test_the_ids_buffer_grows_mid_run_between_short_pieces() -> None:
    # 4 ids a code point in pieces of 1-2 code points: the ids' buffer (half an id a character at
    # first) fills long before any piece outgrows the merge's scratch
    for pattern in sorted(COMPILED_PATTERNS):
        _check(BYTES_ONLY, pattern, ["😀 " * 100 + "𝐀" * 3, "ok 😀"])


def test_ids_of_megabytes_outgrow_the_first_room_and_the_pages_faulted_in_ahead() -> None:
    # 2.4 million ids (9.6 MB) for 800,000 characters: the buffer grows past its first room
    # while its pages are being faulted in a chunk ahead of the writes, then grows again
    rng = random.Random(3)
    texts = ["x" * 70_000, "😀 " * 200_000, "".join(rng.choice(ASTRAL_LETTERS + [" ", "a"]) for _ in range(130_000))]
    _check(BYTES_ONLY, sorted(COMPILED_PATTERNS)[0], texts)
