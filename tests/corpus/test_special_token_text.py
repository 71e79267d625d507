"""A special token spelled in the text with no separator to take it out is said: how often, where
first, and the fix (the separator), in Python as a warning and on the command line in its words."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tokpack import BpeTokenizer, prepare
from tokpack.cli import app
from tokpack.corpus.sources.spellings import spelled_in
from tokpack.errors import SpecialTokenInText

from conftest import DATA

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def documents() -> list[str]:
    text = b"".join(path.read_bytes() for path in sorted((DATA / "polish" / "narrative").glob("*.txt"))[:4]).decode()
    return [text[i : i + 1500] for i in range(0, 9000, 1500)]


def _found(run: object) -> list[SpecialTokenInText]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()  # type: ignore[operator]
    return [w.message for w in caught if isinstance(w.message, SpecialTokenInText)]


def test_a_text_file_that_spells_the_end_of_text_token_is_said_with_count_place_and_fix(documents: list[str], tmp_path: Path) -> None:
    corpus = tmp_path / "joined.txt"
    corpus.write_text(EOT.join(documents), encoding="utf-8")
    first = len(documents[0].encode("utf-8"))
    (found,) = _found(lambda: prepare(corpus, cache_dir=tmp_path / "c", vocab_size=300))
    assert (found.token, found.count, found.first) == (EOT, 5, f"{corpus}: byte {first:,}" if first >= 10_000 else f"{corpus}: byte {first}")
    assert str(found).endswith(f"documents run across it; if it ends documents, prepare again with separator='{EOT}'")
    # With the separator, nothing to say, and the documents are the ones between the markers.
    assert _found(lambda: prepare(corpus, cache_dir=tmp_path / "c", vocab_size=300, separator=EOT)) == []


def test_the_command_says_it_with_the_flag(documents: list[str], tmp_path: Path) -> None:
    corpus = tmp_path / "joined.txt"
    corpus.write_text(EOT.join(documents[:3]), encoding="utf-8")
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c"), "--json"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout stays JSON
    line = " ".join(result.stderr.split())
    assert f"warning: {corpus}: byte {len(documents[0].encode())}: the text spells the special token '{EOT}' 2 times" in line
    assert line.endswith(f"if it ends documents, prepare again with --separator '{EOT}'")
    assert "separator=" not in line


def test_folders_records_rows_and_a_given_vocabulary_s_special_tokens(documents: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text(documents[0], encoding="utf-8")
    (folder / "b.txt").write_text(documents[1] + EOT + documents[2] + EOT, encoding="utf-8")
    (found,) = _found(lambda: prepare(folder, cache_dir=tmp_path / "c", vocab_size=300))
    assert found.count == 2 and found.first.startswith(f"{folder / 'b.txt'}: byte ")

    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps({"text": d + (EOT if i % 2 else "")}) + "\n" for i, d in enumerate(documents)))
    (found,) = _found(lambda: prepare(records, cache_dir=tmp_path / "c", vocab_size=300))
    assert found.count == 3

    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"text": [d + (EOT * 2 if i == 4 else "") for i, d in enumerate(documents)]}), rows)
    (found,) = _found(lambda: prepare(rows, cache_dir=tmp_path / "c", vocab_size=300))
    assert (found.count, found.first) == (2, f"{rows}: row 4")

    # A given vocabulary's own special tokens are looked for too.
    ranks = {bytes([b]): b for b in range(256)}
    given = BpeTokenizer(ranks=ranks, pattern="gpt4", special_tokens={EOT: 256, "<|fim_prefix|>": 257})
    plain = tmp_path / "plain.txt"
    plain.write_text(documents[0] + "<|fim_prefix|>" + documents[1], encoding="utf-8")
    (found,) = _found(lambda: prepare(plain, cache_dir=tmp_path / "c", vocab=given))
    assert (found.token, found.count) == ("<|fim_prefix|>", 1)


def test_a_folder_s_files_skipped_as_invalid_utf8_are_not_counted(documents: list[str], tmp_path: Path) -> None:
    """``--on-error skip`` leaves a file that is not UTF-8 out of the pack whole: the tokens it
    spells are none of the pack's, so neither the count nor the first place names them."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"\xff " + (EOT * 5).encode())  # first in order, and skipped
    (folder / "b.txt").write_text(documents[0] + EOT + documents[1] + EOT, encoding="utf-8")
    (folder / "c.txt").write_text(documents[2], encoding="utf-8")
    result = CliRunner().invoke(app, ["prepare", str(folder), "--on-error", "skip", "--vocab-size", "300",
                                      "--cache-dir", str(tmp_path / "c"), "--json"])
    assert result.exit_code == 0, result.output
    line = " ".join(result.stderr.split())
    assert f"warning: {folder / 'b.txt'}: byte {len(documents[0].encode())}: the text spells the special token '{EOT}' 2 times" in line
    assert f"{folder / 'a.txt'}: invalid UTF-8 at byte 0" in line  # said as skipped, once


def test_json_lines_that_escape_a_special_token_s_characters_are_said_too(documents: list[str], tmp_path: Path) -> None:
    """JSON encoders escape characters: Go's and .NET's ``<`` and ``>`` (``\\u003c``, ``\\u003C``),
    PHP's ``/``, Python's every non-ASCII one by default; the records' text holds the token
    all the same."""
    sentence = "<｜end▁of▁sentence｜>"  # full-width bars and a block character, as DeepSeek spells it
    ranks = {bytes([b]): b for b in range(256)}
    given = BpeTokenizer(ranks=ranks, pattern="gpt4", special_tokens={EOT: 256, sentence: 257, "</s>": 258})
    escapes = [lambda line: line.replace("<", "\\u003c").replace(">", "\\u003e"),
               lambda line: line.replace("<", "\\u003C").replace(">", "\\u003E"),
               lambda line: line.replace("/", "\\/")]
    records = tmp_path / "r.jsonl"
    for token, escape in [(EOT, escapes[0]), (EOT, escapes[1]), ("</s>", escapes[2]), (sentence, lambda line: line)]:
        records.write_text("".join(escape(json.dumps({"text": d + token})) + "\n" for d in documents[:3]))
        assert token not in records.read_text(encoding="utf-8")
        (found,) = _found(lambda: prepare(records, cache_dir=tmp_path / "c", vocab=given))
        assert (found.token, found.count) == (token, 3)


def counted_one_by_one(data: bytes, tokens: list[str], chunk: int) -> dict[str, tuple[int, str]]:
    """What ``spelled_in`` gives, counting every token in every chunk (no screen)."""
    found: dict[str, tuple[int, str]] = {}
    for token in tokens:
        marker = token.encode("utf-8")
        count, first = 0, -1
        for low in range(0, len(data), chunk):
            here = data[low : low + chunk + len(marker) - 1].count(marker)
            if here and first < 0:
                first = low + data[low : low + chunk + len(marker) - 1].find(marker)
            count += here
        if count:
            found[token] = (count, f"f.txt: byte {first}")
    return found


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(["<|a|>", "<|ab|>", "<|a", "|>", "<", "<<|a|>|>", "x", "ż", "<|", "aa"]),
                       max_size=40),
       chunk=st.integers(1, 12))
def test_the_search_for_tokens_that_share_a_prefix_counts_as_one_count_each_does(pieces: list[str], chunk: int) -> None:
    data = "".join(pieces).encode("utf-8")
    for tokens in (["<|a|>", "<|ab|>"], ["<|a", "<|ab|>", "<|a|>"], ["<|a|>"], ["aa", "<|a|>"]):
        assert spelled_in([(data, "f.txt")], tokens, chunk=chunk) == counted_one_by_one(data, tokens, chunk)
