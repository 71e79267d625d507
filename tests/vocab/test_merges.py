"""The merge list implied by ranks (behind ``derive_merges``: the compiled encoder's
``last_joins``, ``tokpack.vocab._merges`` in numpy without it): the same merges as the plain
Python rule, refusals included, for every vocabulary, and no compiler loaded to find them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.errors import InputError
from tokpack.vocab import _merges, compiled
from tokpack.vocab.merge_files import _derive_merges_python, derive_merges, tokenizer_json_bytes
from tokpack.vocab.patterns import GPT2_PATTERN
from tokpack.vocab.rank_files import read_rank_file

BYTES = {bytes([b]): b for b in range(256)}


def python_rule(ranks: dict[bytes, int]) -> list[tuple[str, str]] | str:
    """The merges by the plain rule, or the refusal's message."""
    try:
        return _derive_merges_python(ranks, sorted(ranks.items(), key=lambda item: item[1]))
    except InputError as error:
        return str(error)


def derived(ranks: dict[bytes, int]) -> list[tuple[str, str]] | str:
    try:
        return derive_merges(ranks)
    except InputError as error:
        return str(error)


# Tokens over a few bytes (quotes and backslashes among them: JSON escapes them), long ones
# included (more than seven bytes are looked up by hash), in any rank order with gaps: many of
# them cannot be built from lower ranks, which must be refused the same way.
tokens = st.binary(min_size=2, max_size=12).map(lambda raw: bytes(b"ab\"\\\x00\xff"[b % 6] for b in raw))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(tokens, st.integers(0, 5000)), max_size=60, unique_by=lambda pair: pair[0]))
def test_the_merges_are_the_python_rules_for_any_ranks(extra: list[tuple[bytes, int]]) -> None:
    ranks = dict(BYTES)
    for token, gap in sorted(extra, key=lambda pair: pair[1]):
        ranks.setdefault(token, 256 + len(ranks) + gap)
    assert derived(ranks) == python_rule(ranks)


def test_the_merges_of_a_buildable_vocabulary_are_the_python_rules() -> None:
    # Every token the join of the two before it: each one's merge is found in many steps.
    ranks = dict(BYTES)
    for _ in range(40):
        ranks[b"a" * (len(ranks) - 254)] = len(ranks)
    ranks[b'"\\'] = len(ranks) + 1  # a quote and a backslash (JSON escapes them), twice
    ranks[b'"\\"\\'] = len(ranks) + 2
    merges = derived(ranks)
    assert merges == python_rule(ranks)
    assert isinstance(merges, list) and merges[0] == ("a", "a")


def test_a_token_lower_ranks_cannot_build_is_refused() -> None:
    ranks = dict(BYTES) | {bytes([a, b]): 256 + 64 * a + b for a in range(64) for b in range(64)}
    ranks[b"\x00\x01\x02\x03"] = len(ranks)  # buildable: 00 01 + 02 03
    ranks[b"zzz"] = len(ranks)  # "zz" is no token: nothing joins first
    with pytest.raises(InputError, match="zzz.*cannot be built from lower ranks"):
        derive_merges(ranks)
    del ranks[b"zzz"]
    assert derive_merges(ranks)[-1] == ("\u0100\u0101", "\u0102\u0103")


def test_colliding_hashes_leave_the_merges_to_the_python_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tokens' keys equal (forced here: every long slice hashes alike) cannot be told apart
    by the table: the plain rule decides, with the same result."""
    ranks = dict(BYTES) | {b"ab": 256, b"cd": 257, b"abcd": 258, b"cdcd": 259, b"abcdabcd": 260,
                           b"cdcdcdcd": 261}
    monkeypatch.setattr(_merges, "_BASE", 0)
    assert _merges.split_points(sorted(ranks, key=ranks.__getitem__), np.arange(len(ranks))) is None
    assert derive_merges(ranks) == python_rule(ranks)
    assert derive_merges(ranks)[-2:] == [("abcd", "abcd"), ("cdcd", "cdcd")]


def test_a_published_vocabulary_merges_as_the_python_rule_without_numba(gpt2_rank_file: Path) -> None:
    ranks = read_rank_file(gpt2_rank_file)
    merges = derive_merges(ranks)
    assert merges == python_rule(ranks)
    assert len(merges) == len(ranks) - 256 and merges[0] == ("Ġ", "t")
    loaded = subprocess.run([sys.executable, "-c", "import sys; from tokpack.vocab.merge_files import derive_merges; from tokpack.vocab.rank_files import "
                             "read_rank_file; derive_merges(read_rank_file(sys.argv[1])); print('numba' in sys.modules)",
                             str(gpt2_rank_file)], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"


def test_without_the_compiled_encoder_numpy_finds_the_same_merges_and_text(gpt2_rank_file: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ranks = read_rank_file(gpt2_rank_file)
    assert compiled.last_joins([b"a", b"b", b"ab"], np.arange(3)) is not None
    expected = derive_merges(ranks)
    text = tokenizer_json_bytes(ranks, GPT2_PATTERN, {"<|endoftext|>": len(ranks)})
    monkeypatch.setattr(compiled, "_bpe", None)
    assert compiled.last_joins([b"a", b"b", b"ab"], np.arange(3)) is None
    assert derive_merges(ranks) == expected
    assert tokenizer_json_bytes(ranks, GPT2_PATTERN, {"<|endoftext|>": len(ranks)}) == text
    unbuildable = dict(BYTES) | {b"zzz": 256}
    with pytest.raises(InputError, match="zzz.*cannot be built from lower ranks"):
        derive_merges(unbuildable)


def test_ids_beyond_the_compiled_tables_merge_by_the_numpy_rule() -> None:
    ranks = dict(BYTES) | {b"ab": 1 << 24, b"abb": (1 << 24) + 1}
    assert compiled.last_joins(list(ranks), np.fromiter(ranks.values(), np.int64)) is None
    assert derive_merges(ranks) == python_rule(ranks) == [("a", "b"), ("ab", "b")]
