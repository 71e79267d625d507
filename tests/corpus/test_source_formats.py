"""The registry of corpus formats: every format a name opens, every name a format, one rule each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from tokpack.corpus.sources import FORMATS, SUFFIXES, Format, format_of, hold_out, open_corpus, reading_cut
from tokpack.errors import InputError


def test_every_registered_format_is_named_by_its_key_and_in_the_format_type() -> None:
    assert set(FORMATS) == set(get_args(Format))
    assert {name: kind.format for name, kind in FORMATS.items()} == {name: name for name in FORMATS}
    assert set(SUFFIXES.values()) <= set(FORMATS)


@pytest.mark.parametrize("name", ["corpus.txt", "corpus.jsonl", "corpus.ndjson", "folder"])
def test_open_corpus_gives_the_kind_format_of_names(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name == "folder":
        path.mkdir()
        (path / "a.txt").write_text("one document\n", encoding="utf-8")
    elif name.endswith("json") or name.endswith("jsonl"):
        path.write_text(json.dumps({"text": "one document\n"}) + "\n", encoding="utf-8")
    else:
        path.write_text("one document\n", encoding="utf-8")
    with open_corpus(path, document_bytes=4096) as source:
        assert type(source) is FORMATS[format_of(path)]
        assert [piece.text for piece in source.pieces()] == ["one document\n"]


def test_only_a_text_file_takes_its_cut_from_its_manifest(tmp_path: Path) -> None:
    text, records = tmp_path / "corpus.txt", tmp_path / "corpus.jsonl"
    text.write_text("a\n\n" * 100, encoding="utf-8")
    records.write_text('{"text": "a"}\n' * 100, encoding="utf-8")
    assert [kind.format for kind in FORMATS.values() if kind.split_by_bytes] == ["text"]
    for path in (text, records):
        hold_out(path, validation=0.1, test=0.1, document_bytes=64, separator="\n\n")
    assert reading_cut(text, document_bytes=None, separator=None) == (64, "\n\n")
    assert reading_cut(records, document_bytes=None, separator=None) == (1 << 20, None)


def test_an_unknown_format_names_the_registered_ones(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("a\n", encoding="utf-8")
    with pytest.raises(InputError, match=f"use one of {', '.join(FORMATS)}$"):
        open_corpus(path, format="csv")
