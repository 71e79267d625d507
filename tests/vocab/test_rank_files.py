"""Reading tiktoken rank files: the fast reading of tiktoken's own layout gives what the
line-by-line parse gives (the same ranks in the same order, or the same refusal), for any text;
and a file in the canonical layout stands for the canonical text, so the identity hashes it as read."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack import load_vocabulary
from tokpack.errors import InputError
from tokpack.vocab import BpeTokenizer, bytelevel, compiled, rank_files
from tokpack.vocab.rank_files import TokenTable, parse_rank_lines, parse_rank_table, parse_rank_text, rank_file_lines


def line_by_line(text: bytes) -> dict[bytes, int] | str:
    try:
        return parse_rank_lines(text, where="ranks")
    except InputError as error:
        return str(error)


def read(text: bytes) -> tuple[dict[bytes, int], bool] | str:
    try:
        return parse_rank_text(text, where="ranks")
    except InputError as error:
        return str(error)


#: Edits a hand or another tool might make to a rank file: each keeps or breaks its layout.
EDITS = {
    "none": lambda lines: lines,
    "shuffled": lambda lines: lines[::-1],
    "a leading zero": lambda lines: [lines[0].replace(b" ", b" 0")] + lines[1:],
    "padding dropped": lambda lines: [line.replace(b"=", b"") for line in lines],
    "a repeated line": lambda lines: lines + lines[:1],
    "a repeated rank": lambda lines: lines[:-1] + [lines[-1].split(b" ")[0] + b" " + lines[0].split(b" ")[1]],
    "a rank of eleven digits": lambda lines: [lines[0].replace(b" ", b" 0000000000")] + lines[1:],
    "a third field": lambda lines: lines[:-1] + [lines[-1] + b" 5"],
    "a blank line": lambda lines: lines[:1] + [b""] + lines[1:],
    "padding inside": lambda lines: [lines[0][:1] + b"=" + lines[0][2:]] + lines[1:],
    "a plus sign": lambda lines: [lines[0].replace(b" ", b" +")] + lines[1:],
    "leftover bits": lambda lines: [b"YR== " + lines[0].split(b" ")[1]] + lines[1:],
    "a rank past 2**32": lambda lines: [lines[0].replace(b" ", b" 99999999999")] + lines[1:],
    "a tab": lambda lines: [lines[0].replace(b" ", b"\t")] + lines[1:],
    "a byte order mark": lambda lines: [b"\xef\xbb\xbf" + lines[0]] + lines[1:],
}


@settings(max_examples=400, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=24), min_size=1, max_size=12, unique=True),
       gaps=st.lists(st.integers(0, 3), min_size=12, max_size=12), edit=st.sampled_from(sorted(EDITS)),
       ending=st.sampled_from([b"\n", b"\r\n", b"\r", b"none"]))
def test_any_text_reads_as_the_line_by_line_parse_reads_it(tokens: list[bytes], gaps: list[int], edit: str,
                                                            ending: bytes) -> None:
    ranks = {}
    for token, gap in zip(tokens, gaps):
        ranks[token] = len(ranks) + sum(gaps[: len(ranks)]) + gap
    lines = EDITS[edit]([base64.b64encode(token) + b" %d" % rank for token, rank in ranks.items()])
    text = (b"\n" if ending == b"none" else ending).join(lines) + (b"" if ending == b"none" else ending)
    expected, found, as_table = line_by_line(text), read(text), read_table(text)
    if isinstance(expected, str):
        assert found == expected and as_table == expected
        return
    assert isinstance(found, tuple) and isinstance(as_table, tuple)
    parsed, canonical = found
    assert parsed == expected and list(parsed) == list(expected)  # the same ranks, in the file's order
    assert canonical == (rank_file_lines(parsed) == text)
    table, table_canonical = as_table
    assert list(table.ranks().items()) == list(expected.items()) and table_canonical == canonical
    # The compiled reading takes exactly the texts numpy's reading of tiktoken's layout takes.
    fast, layout = compiled.parse_ranks(text), rank_files._parse_tiktoken_layout(text)
    assert (fast is None) == (layout is None)
    if fast is not None and layout is not None:
        assert list(TokenTable(*fast[:3]).ranks().items()) == list(layout[0].items()) and fast[3] == layout[1]


def read_table(text: bytes) -> tuple[TokenTable, bool] | str:
    try:
        return parse_rank_table(text, where="ranks")
    except InputError as error:
        return str(error)


def test_a_published_rank_file_is_its_own_canonical_text(gpt2_rank_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = gpt2_rank_file.read_bytes()
    ranks, canonical = parse_rank_text(text, where=gpt2_rank_file)
    assert canonical and rank_file_lines(ranks) == text
    monkeypatch.setattr(bytelevel, "rank_file_lines", lambda ranks: pytest.fail("the canonical text was written out"))
    loaded = load_vocabulary(gpt2_rank_file)
    assert loaded.rank_lines == text
    monkeypatch.undo()
    assert loaded.identity == BpeTokenizer(ranks=ranks, pattern=loaded.pattern,
                                           special_tokens=loaded.special_tokens).identity


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.binary(max_size=9), st.integers(0, 2**32 - 1), max_size=12))
def test_the_canonical_text_is_each_token_in_base64_and_its_rank_in_rank_order(ranks: dict[bytes, int]) -> None:
    lines = [base64.b64encode(token) + b" %d\n" % rank for token, rank in sorted(ranks.items(), key=lambda item: item[1])]
    assert rank_file_lines(ranks) == b"".join(lines)


def test_a_published_rank_file_reads_into_a_table_of_its_tokens_and_builds_the_same_tokenizer(
        gpt2_rank_file: Path) -> None:
    text = gpt2_rank_file.read_bytes()
    ranks, canonical = parse_rank_text(text, where=gpt2_rank_file)
    table, table_canonical = parse_rank_table(text, where=gpt2_rank_file)
    assert compiled.parse_ranks(text) is not None  # read in C, not by the fallback
    assert table_canonical == canonical and list(table.ranks().items()) == list(ranks.items())
    loaded = load_vocabulary(gpt2_rank_file)
    assert "ranks" not in loaded.__dict__  # the dict is made only when asked for
    from_dict = BpeTokenizer(ranks=ranks, pattern=loaded.pattern, special_tokens=loaded.special_tokens)
    sample = (Path(__file__).parents[2] / "data" / "other" / "english" / "wesnoth-narrative-en.txt").read_text(
        encoding="utf-8")[:100_000]
    assert loaded.encode(sample) == from_dict.encode(sample)
    assert loaded.identity == from_dict.identity and loaded.n_vocab == from_dict.n_vocab
    assert loaded.ranks == ranks


@pytest.mark.parametrize(("ranks", "specials", "said"), [
    ({bytes([b]): b for b in range(255)}, None, "ranks lack 1 of the 256 single bytes (first: 255)"),
    ({bytes([b]): b for b in range(256)}, {"<|endoftext|>": 7}, "distinct non-negative ids"),
    ({bytes([b]): b for b in range(256)}, {"<|a|>": 300, "<|b|>": 300}, "distinct non-negative ids"),
    ({bytes([b]): b for b in range(256)}, {"<|a|>": -1}, "distinct non-negative ids"),
    ({bytes([b]): b for b in range(256)} | {b"ab": 2**32 - 1}, None, "ids must be below 2**32"),
])
def test_a_tokenizer_from_a_table_refuses_what_the_constructor_refuses(
        ranks: dict[bytes, int], specials: dict[str, int] | None, said: str) -> None:
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        BpeTokenizer(ranks=ranks, special_tokens=specials)
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        BpeTokenizer.from_table(TokenTable.of(ranks), special_tokens=specials)


@pytest.mark.parametrize(("extra", "specials"), [
    ({b"ab": 256, b"abc": 257}, {"<|endoftext|>": 258}),
    ({b"abc": 257, b"ab": 256}, {"<|endoftext|>": 258}),  # not in rank order
    ({b"ab": 257}, {"<|endoftext|>": 256}),  # a special id among the ranks'
])
def test_tokenizer_json_from_a_table_is_the_one_from_its_dict(extra: dict[bytes, int], specials: dict[str, int]) -> None:
    from tokpack.vocab.merge_files import GPT2_PATTERN, tokenizer_json_bytes

    singles = {bytes([b]): b for b in range(256)}
    for ranks in (singles | extra, dict(reversed(list((singles | extra).items())))):
        assert (tokenizer_json_bytes(TokenTable.of(ranks), GPT2_PATTERN, specials)
                == tokenizer_json_bytes(ranks, GPT2_PATTERN, specials))


def test_tokenizer_json_of_a_special_token_spelled_as_a_token_is_refused_from_a_table_as_from_its_dict() -> None:
    from tokpack.vocab.merge_files import GPT2_PATTERN, tokenizer_json_bytes

    ranks = {bytes([b]): b for b in range(256)} | {b"<|": 256, b"x|": 257, b"<|x|": 258, b"<|x|>": 259}
    for written in (ranks, TokenTable.of(ranks)):
        with pytest.raises(InputError, match=r"the ordinary token '<\|x\|>' \(id 259\) is spelled as the special "
                                             r"token '<\|x\|>' \(id 300\)"):
            tokenizer_json_bytes(written, GPT2_PATTERN, {"<|x|>": 300})
