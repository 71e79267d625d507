"""Hostile vocabularies for the compiled encoder, against tiktoken: every compiled pattern, ranks
in no merge order (single bytes too), ids near the encoder's limit (:data:`MAX_ID`: they are packed
with a count in the piece cache), tokens of up to 40 bytes that begin or end inside characters and
that merging cannot reach (whole pieces, cut parts), long pieces (uncached, merged by the heap),
and piece caches of a few entries (every look-up collides), the texts again in other orders and
batches."""

from __future__ import annotations

import random

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.vocab.compiled import COMPILED_PATTERNS, MAX_ID, CompiledBpe

#: Characters of 1 to 4 UTF-8 bytes (sharing lead bytes), letters, digits, spaces, marks,
#: apostrophes and punctuation: every class the patterns split on.
ALPHABET = (list("abcab  \n\t1234é中文😀ąðżÓ'sre!,.ÿǅßİ\u0301Ā") + ["ab", "abc", "😀😀", "'S", "  \n"])
LETTERS = [c for c in ALPHABET if c.isalpha()]


def _text(rng: random.Random, size: int, alphabet: list[str] = ALPHABET) -> str:
    return "".join(rng.choice(alphabet) for _ in range(size))


def _vocabulary(rng: random.Random) -> dict[bytes, int]:
    """256 single bytes (ranks shuffled or not) and up to 120 tokens: spans of a text (any byte
    boundary), concatenations of tokens (reachable or not), pieces of text; ids in a shuffled or
    insertion order from a base near 256, 2**20 or 2**21."""
    order = list(range(256))
    if rng.random() < 0.5:
        rng.shuffle(order)
    ranks: dict[bytes, int] = {bytes([b]): order[b] for b in range(256)}
    source = _text(rng, rng.randint(5, 60)).encode()
    tokens: list[bytes] = []
    for _ in range(rng.randint(0, 120)):
        draw = rng.random()
        if draw < 0.4:
            start = rng.randrange(len(source))
            token = source[start:start + rng.randint(2, 40)]
        elif draw < 0.8 and tokens:
            token = rng.choice(tokens) + rng.choice([*tokens, source[:1]])
        else:
            token = _text(rng, rng.randint(1, 8)).encode()
        if 2 <= len(token) <= 60 and token not in ranks:
            tokens.append(token)
            ranks[token] = -1
    base = rng.choice([256, 256 + rng.randint(0, 3000), (1 << 20) - rng.randint(0, 60), MAX_ID - 200, (1 << 21) - 50])
    ids = list(range(base, base + len(tokens)))
    if rng.random() < 0.5:
        rng.shuffle(ids)
    return ranks | dict(zip(tokens, ids))


def _texts(rng: random.Random, ranks: dict[bytes, int]) -> list[str]:
    whole = []  # the tokens that are text: each alone (a whole piece), run together, with spaces
    for token in ranks:
        try:
            whole.append(token.decode())
        except UnicodeDecodeError:
            pass
    whole = [t for t in whole if len(t.encode()) >= 2]
    texts = [_text(rng, rng.randint(0, 300)) for _ in range(3)]
    texts += [_text(rng, rng.randint(20, 400), LETTERS) for _ in range(2)]  # long pieces
    if whole:
        texts += whole
        texts += ["".join(rng.choice(whole) for _ in range(rng.randint(1, 40))) for _ in range(2)]
        texts += [" ".join(rng.sample(whole, min(len(whole), 8))), "".join(t.replace(" ", "") for t in whole)]
    return texts


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pattern=st.sampled_from(sorted(COMPILED_PATTERNS)),
       bits=st.sampled_from([None, 0, 2, 6]))
def test_hostile_vocabularies_equal_tiktoken(seed: int, pattern: str, bits: int | None) -> None:
    rng = random.Random(seed)
    ranks = _vocabulary(rng)
    texts = _texts(rng, ranks)
    ours = CompiledBpe(ranks, pattern)
    if bits is not None:  # the pool hands this one out: a cache of a few entries, each overwritten
        ours._pool.put(ours.new_cache(set_bits=bits, row_bits=bits))
    oracle = tiktoken.Encoding(name="oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    expected = [oracle.encode_ordinary(text) for text in texts]
    assert [ids.tolist() for ids in ours.encode(texts)] == expected
    order = list(range(len(texts)))
    rng.shuffle(order)  # warm, in another order
    assert [ids.tolist() for ids in ours.encode([texts[i] for i in order])] == [expected[i] for i in order]
    for i in order[:4]:  # warm, one text a batch
        assert ours.encode([texts[i]])[0].tolist() == expected[i]
