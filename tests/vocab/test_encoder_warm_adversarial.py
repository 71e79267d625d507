"""The compiled encoder's new piece caches start filled with the vocabulary's tokens, and a batch
is encoded a run of texts at a time: attacks on both, against tiktoken (the oracle) and against a
plain-Python ``byte_pair_merge``. A cache row must hold what tiktoken gives that piece whole *and*
what merging its bytes gives (a cut-off part of a piece reads the same rows): so only tokens whose
bytes are strict UTF-8 (no overlong form, no surrogate, nothing past U+10FFFF, no character begun
or ended outside the token) of 1 to ``CACHE_ROW - 2`` code points, that merging their own bytes
gives. Hostile vocabularies hold every kind of other token, ids past the small cache's 20 bits and
near :data:`MAX_ID`, gaps in the ids, and tokens in no id order; caches of one to a few rows; runs
of one to seven code points; texts of tokens run together and cut by Han characters."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpack.vocab.compiled as compiled
from tokpack import GPT2_PATTERN
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.compiled import CACHE_ROW, COMPILED_PATTERNS, MAX_ID, CompiledBpe, PieceCache

PATTERNS = sorted(COMPILED_PATTERNS)
#: Characters of 1 to 4 UTF-8 bytes, the extremes of the planes, classes the patterns split on.
CHARS = list("abcdé中文日本😀ąðżÓ's ! 1\n\x00ÿǅ\u0301\ufffd\ud7ff\ue000\U0010ffff")
#: Characters from U+2E80 on: a piece holding one is cut where no token spans a boundary.
HAN = list("中日本語あ한，")
#: Byte strings no text's UTF-8 holds (overlong forms, surrogates, past U+10FFFF, bytes UTF-8 never
#: uses, characters begun or ended outside them), and some it does.
ODD = [b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x80\x80\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xf0\x80\x80\x80",
       b"\xf0\x8f\xbf\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\x80\xed\xb0\x80", b"\xf4\x90\x80\x80",
       b"\xf7\xbf\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\xa9a", b"a\xc3", b"\xc3\xa9\xc3", "中".encode()[1:],
       "😀".encode()[:3], b"\x00\x00", "\ufffd\ufffd".encode(), "\U0010ffff".encode(), "é".encode(), "中文".encode()]


def _merge(ranks: dict[bytes, int], data: bytes) -> list[int]:
    """tiktoken's ``byte_pair_merge`` of ``data`` (no whole-piece look-up): the lowest-rank adjacent
    pair is merged first, the leftmost on ties."""
    parts = [data[k:k + 1] for k in range(len(data))]
    while len(parts) > 1:
        found = [(ranks[a + b], k) for k, (a, b) in enumerate(zip(parts, parts[1:])) if a + b in ranks]
        if not found:
            break
        _, k = min(found)
        parts[k:k + 2] = [parts[k] + parts[k + 1]]
    return [ranks[part] for part in parts]


def _merges_to(data: bytes, rng: random.Random) -> list[bytes]:
    """Tokens that merge ``data`` pair by pair in a random tree (given rising ids, often reachable)."""
    parts = [data[k:k + 1] for k in range(len(data))]
    made = []
    while len(parts) > 1:
        k = rng.randrange(len(parts) - 1)
        parts[k:k + 2] = [parts[k] + parts[k + 1]]
        made.append(parts[k])
    return made


def _vocabulary(rng: random.Random) -> dict[bytes, int]:
    """256 single bytes and up to ~150 tokens: merge trees of texts of 2 to 32 code points (which
    may begin or end inside a character), the odd byte strings (reachable by merges or not),
    concatenations of tokens (often unreachable); ids from near 256, 2**20 or MAX_ID, maybe with
    gaps, maybe shuffled, and the dict in any order."""
    order = list(range(256))
    if rng.random() < 0.5:
        rng.shuffle(order)
    ranks = {bytes([b]): order[b] for b in range(256)}
    tokens: list[bytes] = []

    def add(token: bytes) -> None:
        if token and token not in ranks and token not in tokens:
            tokens.append(token)

    for _ in range(rng.randint(0, 10)):
        data = "".join(rng.choice(CHARS + HAN) for _ in range(rng.choice([2, 3, 5, 8, 12, 29, 30, 31, 32]))).encode()
        data = data[rng.choice([0, 0, 1, 2]):len(data) - rng.choice([0, 0, 1, 2])]
        for token in _merges_to(data, rng):
            add(token)
    for odd in rng.sample(ODD, rng.randint(0, len(ODD))):
        for token in _merges_to(odd, rng) if rng.random() < 0.6 else [odd]:
            add(token)
    for _ in range(rng.randint(0, 30)):
        if tokens:
            add(rng.choice(tokens) + rng.choice([*tokens, b"a", b" "]))
    base = rng.choice([256, 256 + rng.randint(0, 5000), (1 << 20) - rng.randint(0, 40),
                       MAX_ID - len(tokens) - rng.randint(1, 5)])
    ids = list(range(base, base + len(tokens)))
    if rng.random() < 0.3:  # gaps
        ids = sorted(rng.sample(range(base, min(MAX_ID, base + 3 * len(tokens) + 10)), len(tokens)))
    if rng.random() < 0.5:
        rng.shuffle(ids)
    items = list((ranks | dict(zip(tokens, ids))).items())
    if rng.random() < 0.3:
        rng.shuffle(items)
    return dict(items)


def _texts(rng: random.Random, ranks: dict[bytes, int]) -> list[str]:
    """Texts of the vocabulary's tokens: alone, run together, cut by Han characters (so cut-off
    parts equal tokens), between spaces; empty texts; random text with lone surrogates."""
    words = []
    for token in ranks:
        try:
            words.append(token.decode())
        except UnicodeDecodeError:
            pass
    words = [word for word in words if len(word.encode()) >= 2] or ["ab"]
    texts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.randrange(7)
        if kind == 0:
            texts.append(rng.choice(HAN).join(rng.choice(words) for _ in range(rng.randint(1, 6))))
        elif kind == 1:
            texts.append("".join(rng.choice(words + HAN) for _ in range(rng.randint(1, 10))))
        elif kind == 2:
            texts.append("")
        elif kind == 3:
            texts.append(rng.choice(words))
        elif kind == 4:
            texts.append("".join(rng.choice([*CHARS, *HAN, "\ud800", "\udc00", "\ud83d\ude00"])
                                 for _ in range(rng.randint(0, 40))))
        elif kind == 5:
            texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))))
        else:
            texts.append("".join(rng.choice(HAN) + rng.choice(words) + rng.choice(HAN) for _ in range(3)))
    return texts


def _oracle(ranks: dict[bytes, int], pattern: str) -> tiktoken.Encoding:
    return tiktoken.Encoding(name="oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def _warmable(ranks: dict[bytes, int]) -> list[tuple[int, str]]:
    """The tokens a new cache may start with, in id order: strict UTF-8 of 1 to
    ``CACHE_ROW - 2`` code points, that merging their own bytes gives."""
    held = []
    for token, rank in ranks.items():
        try:
            text = token.decode("utf-8")  # strict: no overlong form, no surrogate, nothing past U+10FFFF
        except UnicodeDecodeError:
            continue
        if 1 <= len(text) <= CACHE_ROW - 2 and _merge(ranks, token) == [rank]:
            held.append((rank, text))
    return sorted(held)


def _held(encoder: CompiledBpe) -> list[tuple[int, str]]:
    cps, ends, ids = encoder.warm_tokens
    return [(int(rank), "".join(map(chr, cps[begin:end]))) for rank, begin, end in zip(ids, [0, *ends[:-1]], ends)]


def _run(letter: bytes, count: int, first: int) -> dict[bytes, int]:
    """Tokens (ids from ``first``) that merge ``count`` copies of ``letter`` into one: powers of two
    first (the merge pairs them off from the left), then the rest from the longest down."""
    runs = [letter * (1 << k) for k in range(1, count.bit_length())]
    whole = letter * (1 << (count.bit_length() - 1))
    for k in range(count.bit_length() - 2, -1, -1):
        if count & (1 << k):
            whole += letter * (1 << k)
            runs.append(whole)
    return {token: first + k for k, token in enumerate(runs)}


HANDMADE = ({bytes([b]): b for b in range(256)}
            | {b"\xe0\x80": 256, b"\xe0\x80\x80": 257, b"\xe0\x80\x80\xe0\x80\x80": 258,  # overlong "\x00\x00"
               b"\xed\xa0": 259, b"\xed\xa0\x80": 260, b"\xf4\x90": 261, b"\xf4\x90\x80": 262,
               b"\xf4\x90\x80\x80": 263, b"ab": 264, b"abc": (1 << 20) + 3, b"cd": 265, b"bc": 266,
               b"abcd": 267,  # unreachable: merging gives ab|cd
               "中".encode()[1:]: 268, b"c" * 30: 269}
            | _run(b"a", 30, 300) | _run(b"b", 31, 400)  # "a" * 30 is reachable and fits a row, "b" * 31 does not
            | {b"": 1000})  # last: its code points begin where all the others' end


def test_a_new_cache_starts_with_exactly_the_strict_reachable_tokens_that_fit_a_row() -> None:
    # The empty token (last here) is no piece's: a new cache must not hold it (its start is the
    # end of the other tokens' code points, which the cache's filling read past).
    for vocabulary in [HANDMADE, *(_vocabulary(random.Random(seed)) for seed in range(40))]:
        assert _held(CompiledBpe(vocabulary, GPT2_PATTERN)) == _warmable(vocabulary)


def test_every_row_of_a_new_cache_is_what_tiktoken_gives_the_piece_whole_and_merged() -> None:
    for seed, (slots, small_slots) in enumerate([(1, 1), (2, 2), (4, 1), (64, 2), (None, None)] * 8):
        vocabulary = HANDMADE if seed == 0 else _vocabulary(random.Random(seed))
        cache = CompiledBpe(vocabulary, GPT2_PATTERN).new_cache(slots, small_slots)
        for row in cache.rows[np.flatnonzero(cache.rows[:, 0])]:
            length, count = int(row[0] & 0xFF), int(row[0] >> 8)
            data = "".join(map(chr, row[1:1 + length])).encode()  # no surrogate
            ids = row[1 + length:1 + length + count].tolist()
            assert ids == [vocabulary[data]] == _merge(vocabulary, data), (seed, data)
        for key, word in cache.small[np.flatnonzero(cache.small[:, 0])].tolist():
            data = bytes((key >> (7 * k)) & 0x7F for k in range(key >> 56))
            assert [(word >> (20 * k)) & 0xFFFFF for k in range(word >> 62)] == [vocabulary[data]], (seed, data)


def test_where_tokens_share_a_row_the_lowest_id_stays() -> None:
    # the vocabulary's dict is in no id order: a cache of one row (and one small line) keeps the
    # token of the lowest id, as the filling promises
    vocabulary = {bytes([b]): b for b in range(256)} | {b"xy": 300, "żó".encode(): 280, b"ab": 256, b"cd": 290}
    cache = CompiledBpe(vocabulary, GPT2_PATTERN).new_cache(slots=1, small_slots=1)
    assert cache.rows[0, :4].tolist() == [2 | 1 << 8, ord("a"), ord("b"), 256]
    assert cache.small[0, 1] == 1 << 62 | 256


def test_overlong_and_out_of_range_tokens_never_stand_for_text() -> None:
    # b"\xe0\x80\x80\xe0\x80\x80" decodes loosely to "\x00\x00": that text is two zero bytes' ids
    ours, oracle = CompiledBpe(HANDMADE, GPT2_PATTERN), _oracle(HANDMADE, GPT2_PATTERN)
    texts = ["\x00\x00", "a\x00\x00中\x00\x00", "\U0010ffff\U0010ffff", "\ud800\udc00", "abcd中abcd", "abc ab",
             "a" * 30, "a" * 31, "b" * 31, "c" * 30, "中" * 3]
    expected = [oracle.encode_ordinary(text) for text in texts]
    assert expected[0] == [0, 0]
    for _ in range(2):  # from the new cache, then from what the first pass wrote
        assert [ids.tolist() for ids in ours.encode(texts)] == expected


def test_ids_past_20_bits_are_never_packed_into_the_small_cache() -> None:
    vocabulary = {bytes([b]): b for b in range(256)} | {b"ab": (1 << 20) + 3, b"abc": MAX_ID - 1, b"xy": (1 << 20) - 1,
                                                       b"xyz": 1 << 20}
    ours, oracle = CompiledBpe(vocabulary, GPT2_PATTERN), _oracle(vocabulary, GPT2_PATTERN)
    texts = ["ab abc xy xyz ab", "xyz abc", "ab"]
    for _ in range(2):
        assert [ids.tolist() for ids in ours.encode(texts)] == [oracle.encode_ordinary(text) for text in texts]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pattern=st.sampled_from(PATTERNS),
       sizes=st.sampled_from([(1, 1), (2, 2), (4, 1), (64, 2), (None, None)]), group=st.sampled_from([1, 2, 7, 1 << 20]),
       as_tuple=st.booleans())
def test_hostile_vocabularies_equal_tiktoken_from_new_caches_run_by_run(
        seed: int, pattern: str, sizes: tuple[int | None, int | None], group: int, as_tuple: bool) -> None:
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    texts = _texts(rng, vocabulary)
    oracle = _oracle(vocabulary, pattern)
    expected = [oracle.encode_ordinary(text) for text in texts]
    ours = CompiledBpe(vocabulary, pattern)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "GROUP_CODE_POINTS", group)  # a run ends anywhere: between any two texts
        for _ in range(2):  # a new (tiny) cache, then the same one again after the first pass
            ours._pool.put(ours.new_cache(*sizes))
            batch = tuple(texts) if as_tuple else texts
            assert [ids.tolist() for ids in ours.encode(batch)] == expected
        assert [ids.tolist() for ids in ours.encode(texts[::-1])] == expected[::-1]


def test_threads_each_fill_their_cache_and_give_tiktokens_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "GROUP_CODE_POINTS", 7)
    for seed in range(6):
        rng = random.Random(seed)
        vocabulary = HANDMADE if seed == 0 else _vocabulary(rng)
        pattern = PATTERNS[seed % len(PATTERNS)]
        texts = _texts(rng, vocabulary) * 3
        oracle = _oracle(vocabulary, pattern)
        tokenizer = BpeTokenizer(ranks=vocabulary, pattern=pattern, special_tokens={})
        got = tokenizer.encode_arrays(tuple(texts), num_threads=2)
        assert [ids.tolist() for ids in got] == [oracle.encode_ordinary(text) for text in texts]


def test_a_cache_made_empty_and_one_made_full_give_the_same_ids() -> None:
    rng = random.Random(7)
    vocabulary = HANDMADE
    texts = _texts(rng, vocabulary) + [text for _, text in _warmable(vocabulary)]
    ours = CompiledBpe(vocabulary, GPT2_PATTERN)
    ours._pool.put(PieceCache.new(slots=4, small_slots=2))
    cold = [ids.tolist() for ids in ours.encode(texts)]
    warm = CompiledBpe(vocabulary, GPT2_PATTERN)
    assert [ids.tolist() for ids in warm.encode(texts)] == cold
    assert cold == [_oracle(vocabulary, GPT2_PATTERN).encode_ordinary(text) for text in texts]
