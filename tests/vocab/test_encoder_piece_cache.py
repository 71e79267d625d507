"""The compiled encoder's piece caches, attacked against tiktoken (the oracle): a cache entry must
hold what tiktoken gives that piece whole *and* what merging its bytes gives (a cut-off part of a
piece reads the same entries). Hostile vocabularies hold tokens that are no text's UTF-8
(overlong forms, surrogates, past U+10FFFF, characters begun or ended outside them), tokens that
merging their own bytes does not give, ids near :data:`MAX_ID`, gaps in the ids, and tokens in no
id order; caches of one set and row to a few; texts of tokens run together and cut by Han
characters; threads, each with its own cache."""

from __future__ import annotations

import random

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack import GPT2_PATTERN
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.compiled import COMPILED_PATTERNS, MAX_ID, CompiledBpe
from tokpack.vocab.pattern_scanners import split

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
            | _run(b"a", 30, 300) | _run(b"b", 70, 400)  # "a" * 30 is reachable and fits a row, "b" * 70 does not
            | {b"": 1000})  # last: an empty token is no piece's


def test_every_entry_is_what_tiktoken_gives_the_piece_whole_and_merged() -> None:
    # after encoding texts of the vocabulary's tokens (whole pieces and cut parts), through caches
    # of every size, the same texts again give the same ids (read from the entries)
    for seed, bits in enumerate([0, 1, 2, 6, 16] * 8):
        rng = random.Random(seed)
        vocabulary = HANDMADE if seed == 0 else _vocabulary(rng)
        texts = _texts(rng, vocabulary)
        oracle = _oracle(vocabulary, GPT2_PATTERN)
        ours = CompiledBpe(vocabulary, GPT2_PATTERN)
        cache = ours.new_cache(set_bits=bits, row_bits=bits)
        for _ in range(3):
            ours._pool.put(cache)
            assert [ids.tolist() for ids in ours.encode(texts)] == [oracle.encode_ordinary(t) for t in texts], seed
            ours._pool.get()


def test_overlong_and_out_of_range_tokens_never_stand_for_text() -> None:
    # b"\xe0\x80\x80\xe0\x80\x80" decodes loosely to "\x00\x00": that text is two zero bytes' ids
    ours, oracle = CompiledBpe(HANDMADE, GPT2_PATTERN), _oracle(HANDMADE, GPT2_PATTERN)
    texts = ["\x00\x00", "a\x00\x00中\x00\x00", "\U0010ffff\U0010ffff", "\ud800\udc00", "abcd中abcd", "abc ab",
             "a" * 30, "a" * 31, "b" * 70, "c" * 30, "中" * 3, "b" * 70 + "中" + "b" * 70]
    expected = [oracle.encode_ordinary(text) for text in texts]
    assert expected[0] == [0, 0]
    for _ in range(2):  # from a new cache, then from what the first pass wrote
        assert [ids.tolist() for ids in ours.encode(texts)] == expected


def test_ids_of_24_bits_and_counts_share_a_cache_word() -> None:
    # an entry packs its count above its first id: ids just under MAX_ID come back whole
    vocabulary = {bytes([b]): b for b in range(256)} | {b"ab": MAX_ID - 3, b"abc": MAX_ID - 1, b"xy": (1 << 20) - 1,
                                                       b"xyz": 1 << 20, b"qq": MAX_ID - 2}
    ours, oracle = CompiledBpe(vocabulary, GPT2_PATTERN), _oracle(vocabulary, GPT2_PATTERN)
    texts = ["ab abc xy xyz ab abqq qqab", "xyz abc", "ab", "abqqab"]
    for _ in range(2):
        assert [ids.tolist() for ids in ours.encode(texts)] == [oracle.encode_ordinary(text) for text in texts]


def test_a_short_piece_is_keyed_by_its_own_bytes_alone() -> None:
    # A piece of each length from 1 to 16 bytes (letters of one and two bytes), every one a token
    # that merging its bytes does not give, followed by bytes that would change its key if any of
    # them were kept in it: in the middle of a text (read 16 bytes at a time) and at its end.
    rng = random.Random(7)
    letters = list("qwertyuiopasdfghjklzxcvbnméżąÓð")
    words = []
    for length in range(1, 17):
        word = ""
        while len(word.encode()) < length:
            word += rng.choice(letters if length - len(word.encode()) > 1 else letters[:26])
        words.append(word)
    vocabulary = {bytes([b]): b for b in range(256)} | {w.encode(): 1000 + k for k, w in enumerate(words)
                                                        if len(w.encode()) > 1}
    oracle = _oracle(vocabulary, GPT2_PATTERN)
    texts = [" ".join(words) + " " + "x" * 40, *words, *(w + "," + w[::-1] for w in words),
             *(" ".join(words[k:]) for k in range(len(words)))]
    expected = [oracle.encode_ordinary(text) for text in texts]
    assert all(ids == [1000 + k] for k, ids in enumerate(expected[2:len(words) + 1], start=1))
    ours = CompiledBpe(vocabulary, GPT2_PATTERN)
    for _ in range(2):  # found in the vocabulary, then in the cache
        assert [ids.tolist() for ids in ours.encode(texts)] == expected


def test_pieces_of_five_to_twelve_ids_keep_the_rest_in_their_sets_overflow() -> None:
    # with single bytes only, " " + "a" * k is k + 1 ids: up to 4 in an entry, 5 to 12 in an entry
    # and its set's overflow, more in a row; in a cache of one set they evict each other both ways
    vocabulary = {bytes([b]): b for b in range(256)}
    oracle = _oracle(vocabulary, GPT2_PATTERN)
    words = [" " + "a" * k for k in range(1, 15)]
    texts = ["".join(words), "".join(words[::-1]), "".join(w + words[0] for w in words)]
    expected = [oracle.encode_ordinary(text) for text in texts]
    ours = CompiledBpe(vocabulary, GPT2_PATTERN)
    for bits in (0, 17):
        cache = ours.new_cache(set_bits=bits, row_bits=bits)
        ours._pool.put(cache)
        for _ in range(2):
            assert [ids.tolist() for ids in ours.encode(texts)] == expected
        ours._pool.get()
    stats = cache.stats()  # type: ignore[attr-defined]
    # in the large cache each word was merged once and found where it was kept ever after
    pieces = 4 * len(words)  # a pass: each word in the first two texts, each and " a" in the third
    assert stats["misses"] == len(words) and stats["hits"] == 2 * pieces - len(words)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pattern=st.sampled_from(PATTERNS),
       bits=st.sampled_from([(0, 0), (1, 1), (2, 0), (6, 1), (16, 14)]), as_tuple=st.booleans())
def test_hostile_vocabularies_equal_tiktoken_from_new_caches(
        seed: int, pattern: str, bits: tuple[int, int], as_tuple: bool) -> None:
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    texts = _texts(rng, vocabulary)
    oracle = _oracle(vocabulary, pattern)
    expected = [oracle.encode_ordinary(text) for text in texts]
    ours = CompiledBpe(vocabulary, pattern)
    for _ in range(2):  # a new (tiny) cache each time, the earlier one kept in the pool too
        ours._pool.put(ours.new_cache(*bits))
        batch = tuple(texts) if as_tuple else texts
        assert [ids.tolist() for ids in ours.encode(batch)] == expected
    assert [ids.tolist() for ids in ours.encode(texts[::-1])] == expected[::-1]


def test_threads_each_fill_their_cache_and_give_tiktokens_ids() -> None:
    for seed in range(6):
        rng = random.Random(seed)
        vocabulary = HANDMADE if seed == 0 else _vocabulary(rng)
        pattern = PATTERNS[seed % len(PATTERNS)]
        texts = _texts(rng, vocabulary) * 3
        oracle = _oracle(vocabulary, pattern)
        tokenizer = BpeTokenizer(ranks=vocabulary, pattern=pattern, special_tokens={})
        got = tokenizer.encode_arrays(tuple(texts), num_threads=2)
        assert [ids.tolist() for ids in got] == [oracle.encode_ordinary(text) for text in texts]


def test_a_piece_of_many_ids_and_one_of_few_share_a_set() -> None:
    # in a cache of one set, a piece of 7 ids (its entry and the overflow) and one of 2 both stay:
    # each is merged once and found ever after; two pieces of many ids drop each other
    vocabulary = {bytes([b]): b for b in range(256)}
    oracle = _oracle(vocabulary, GPT2_PATTERN)
    ours = CompiledBpe(vocabulary, GPT2_PATTERN)
    for text, misses in ((" aaaaaa b" * 4, 2), (" aaaaaa cccccc" * 3, 6)):
        cache = ours.new_cache(set_bits=0, row_bits=0)
        ours._pool.put(cache)
        assert ours.encode([text])[0].tolist() == oracle.encode_ordinary(text)
        ours._pool.get()
        stats = cache.stats()  # type: ignore[attr-defined]
        assert (stats["misses"], stats["hits"]) == (misses, len(split(text, GPT2_PATTERN)) - misses)
