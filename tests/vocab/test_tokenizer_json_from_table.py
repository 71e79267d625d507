"""A vocabulary's ``tokenizer.json`` written whole by the compiled extension from its token table
(``compiled.tokenizer_json_text``: no bytes object a token): byte for byte the document of the
Python rules (``json.dumps`` of ``merge_files.tokenizer_json``, the oracle) for the published
vocabularies (their shipped joins), GPT-2's, one tokpack ships no joins for, a rank file out of rank
order and any small table (special tokens among the ranks' ids, bytes JSON escapes), refusals
included; Hugging Face's ``tokenizers`` reading it gives tiktoken's ids."""

from __future__ import annotations

import gzip
import json
import random
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokpack.errors import InputError
from tokpack.vocab import compiled
from tokpack.vocab.bytelevel import BpeTokenizer
from tokpack.vocab.loading import load_vocabulary
from tokpack.vocab.merge_files import _json_spellings, tokenizer_json, tokenizer_json_bytes
from tokpack.vocab.patterns import GPT2_PATTERN
from tokpack.vocab.rank_files import TokenTable, rank_file_lines

from conftest import DATA


def oracle(ranks: dict[bytes, int], pattern: str, specials: dict[str, int]) -> bytes:
    """The document by the Python rules: the dict of :func:`tokenizer_json`, dumped."""
    return json.dumps(tokenizer_json(ranks, pattern, specials), ensure_ascii=False).encode("utf-8")


def no_token_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test that makes the table's list of bytes objects (what the compiled document spares)."""

    def refused(self: TokenTable) -> list[bytes]:
        raise AssertionError("made a bytes object per token")

    monkeypatch.setattr(TokenTable, "tokens", refused)


def bpe_openai(name: str, folder: Path) -> Path:
    path = folder / f"{name}.tiktoken"
    path.write_bytes(gzip.decompress(resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").read_bytes()))
    return path


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory: pytest.TempPathFactory, gpt2_rank_file: Path) -> dict[str, tuple[Path, str | None]]:
    """Rank files and the pattern each loads with (``None``: the published one)."""
    folder = tmp_path_factory.mktemp("ranks")
    lines = gpt2_rank_file.read_bytes().splitlines(keepends=True)
    random.Random(7).shuffle(lines)  # the same ranks, not in rank order: the table is sorted by id
    (folder / "gpt2-shuffled.tiktoken").write_bytes(b"".join(lines))
    return {"cl100k": (bpe_openai("cl100k_base", folder), None), "o200k": (bpe_openai("o200k_base", folder), None),
            "gpt2": (gpt2_rank_file, "gpt2"),
            "voyage3, no shipped joins": (bpe_openai("voyage3_base", folder), "cl100k"),
            "gpt2, shuffled": (folder / "gpt2-shuffled.tiktoken", "gpt2")}


@pytest.mark.parametrize("name", ["cl100k", "o200k", "gpt2", "voyage3, no shipped joins", "gpt2, shuffled"])
def test_a_rank_files_document_is_the_python_rules_one(rank_files: dict[str, tuple[Path, str | None]], name: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path, pattern = rank_files[name]
    tokenizer = load_vocabulary(path, pattern=pattern)
    expected = oracle(tokenizer.ranks, tokenizer.pattern, dict(tokenizer.special_tokens))
    tokenizer = load_vocabulary(path, pattern=pattern)  # a new one: no dict of ranks made
    no_token_objects(monkeypatch)
    assert tokenizer.tokenizer_json_bytes() == expected
    # A tokenizer given the ranks as a dict writes it the same way (its table made from the dict).
    monkeypatch.undo()
    built = BpeTokenizer(ranks=tokenizer.ranks, pattern=tokenizer.pattern, special_tokens=tokenizer.special_tokens)
    assert built.tokenizer_json_bytes() == expected


@pytest.mark.parametrize("name", ["cl100k", "o200k", "gpt2"])
def test_hugging_face_reading_the_document_gives_tiktokens_ids(rank_files: dict[str, tuple[Path, str | None]],
                                                                name: str) -> None:
    path, pattern = rank_files[name]
    tokenizer = load_vocabulary(path, pattern=pattern)
    hugging_face = Tokenizer.from_str(tokenizer.to_tokenizer_json())
    reference = tiktoken.Encoding(name=name, pat_str=tokenizer.pattern, mergeable_ranks=tokenizer.ranks,
                                  special_tokens=tokenizer.special_tokens)
    files = sorted(DATA.glob("*/*/*.txt"))
    assert len(files) >= 20
    text = "".join(file.read_text(encoding="utf-8")[:8_000] for file in files) + " zażółć 👩‍👩‍👧 12345\r\n\t x"
    assert hugging_face.encode(text).ids == reference.encode_ordinary(text)
    eot = tokenizer.eot_id
    assert hugging_face.decode([eot], skip_special_tokens=False) == "<|endoftext|>"


# Tokens over a few bytes (quotes, backslashes and bytes GPT-2's alphabet spells in two UTF-8
# bytes among them), many not buildable from lower ranks (refused as the Python rules refuse them).
TOKENS = st.binary(min_size=2, max_size=10).map(lambda raw: bytes(b'ab"\\\x00\xff '[b % 7] for b in raw))


@settings(max_examples=200, deadline=None)
@given(extra=st.lists(TOKENS, max_size=40, unique=True), gaps=st.lists(st.integers(0, 3), min_size=40, max_size=40),
       specials=st.lists(st.integers(0, 400), max_size=3, unique=True), seed=st.integers(0, 1000))
def test_any_table_writes_the_python_rules_document(extra: list[bytes], gaps: list[int], specials: list[int],
                                                    seed: int) -> None:
    singles = [bytes([b]) for b in range(256)]
    extra = [token for token in extra if token not in singles]
    ids = (256 + np.arange(len(extra)) + np.cumsum([0, *gaps])[: len(extra)]).tolist()  # gaps: special tokens may take them
    ranks = dict(zip(singles + extra, list(range(256)) + ids))
    taken = set(ranks.values())
    named = {f"<|s{n}|>": 256 + n for n in specials if 256 + n not in taken}
    order = list(ranks.items())
    random.Random(seed).shuffle(order)  # the table in any order
    table = TokenTable.of(dict(order))
    try:
        expected: bytes | str = oracle(ranks, GPT2_PATTERN, named)
    except InputError as error:
        expected = str(error)
    try:
        found: bytes | str = tokenizer_json_bytes(table, GPT2_PATTERN, named, joins=None)
    except InputError as error:
        found = str(error)
    assert found == expected


def test_a_published_vocabularys_shipped_joins_order_a_table_out_of_rank_order() -> None:
    """Shipped joins are in rank order; a table that is not takes each one at its token's place."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abb": 257, b"ba": 258}
    expected = oracle(ranks, GPT2_PATTERN, {"<|endoftext|>": 259})
    shuffled = TokenTable.of(dict(reversed(list(ranks.items()))))
    joins = np.array([0] * 256 + [1, 2, 1], np.int64)
    assert tokenizer_json_bytes(shuffled, GPT2_PATTERN, {"<|endoftext|>": 259}, joins=joins) == expected


def test_the_compiled_document_refuses_arrays_that_do_not_fit() -> None:
    table = TokenTable.of({b"a": 0, b"b": 1, b"ab": 2})
    spellings, parts = _json_spellings(), (b"{", b"}", b"")
    assert compiled.tokenizer_json_text(table, np.array([0, 0, 1]), [], np.array([], np.int64), spellings, parts) \
        == b'{"a": 0, "b": 1, "ab": 2}["a", "b"]'
    for cuts in ([0, 0, 2], [0, 1, 1], [0, 0, -1], [0, 0]):  # a cut at the end, of one byte, negative, missing
        with pytest.raises(ValueError, match="one int64 cut per token"):
            compiled.tokenizer_json_text(table, np.array(cuts), [], np.array([], np.int64), spellings, parts)
    with pytest.raises(ValueError, match="rising order"):
        compiled.tokenizer_json_text(table, np.zeros(3), [b"x", b"y"], np.array([5, 4]), spellings, parts)
    with pytest.raises(ValueError, match="256 bytes spellings"):
        compiled.tokenizer_json_text(table, np.zeros(3), [], np.array([], np.int64), spellings[:255], parts)
    bad = TokenTable(b"a", np.array([2, 1]), np.array([0, 1]))  # past the bytes, then falling
    with pytest.raises(ValueError, match="rising ends"):
        compiled.tokenizer_json_text(bad, np.zeros(2), [], np.array([], np.int64), spellings, parts)


def test_a_rank_file_out_of_rank_order_is_refused_at_its_lowest_unbuildable_token(tmp_path: Path) -> None:
    ranks = {bytes([b]): b for b in range(256)} | {b"xyz": 300, b"ab": 256, b"qqq": 260}
    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(b"".join(reversed(rank_file_lines(ranks).splitlines(keepends=True))))
    tokenizer = load_vocabulary(path, pattern="gpt2")
    with pytest.raises(InputError, match=r"token b'qqq' \(rank 260\) cannot be built from lower ranks"):
        tokenizer.tokenizer_json_bytes()
