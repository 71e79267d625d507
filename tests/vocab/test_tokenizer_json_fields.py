"""The fields of a Hugging Face ``tokenizer.json`` that change its ids (dropout, a subword prefix or
suffix, a post-processor): a file is either encoded exactly as Hugging Face encodes it, or refused
naming the field (exit 2 on the command line)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tokpack import load_vocabulary
from tokpack.cli import app
from tokpack.errors import InputError

from conftest import DATA, REPO

runner = CliRunner()
TOKENIZER_JSON = REPO / "artifacts" / "polish-8192" / "tokenizer.json"
TEXT = (DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_text(encoding="utf-8")[:20_000]

_TEMPLATE = {
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
}

#: Fields Hugging Face honours that tiktoken's rank rule cannot reproduce.
ALTERED: dict[str, Callable[[dict[str, Any]], None]] = {
    "dropout": lambda doc: doc["model"].update(dropout=0.5),
    "continuing_subword_prefix": lambda doc: doc["model"].update(continuing_subword_prefix="##"),
    "end_of_word_suffix": lambda doc: doc["model"].update(end_of_word_suffix="</w>"),
    "post_processor": lambda doc: doc.update(post_processor=_TEMPLATE),
}


def _eot_id(document: dict[str, Any]) -> int:
    return int(document["model"]["vocab"]["<|endoftext|>"])


def _written(tmp_path: Path, name: str, alter: Callable[[dict[str, Any]], None] | None) -> Path:
    document = json.loads(TOKENIZER_JSON.read_text(encoding="utf-8"))
    if alter is not None:
        alter(document)
    if name == "post_processor":
        eot = _eot_id(document)
        document["post_processor"]["special_tokens"] = {
            "<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot], "tokens": ["<|endoftext|>"]}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_the_unaltered_file_encodes_as_hugging_face_does(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    path = _written(tmp_path, "plain", None)
    expected = tokenizers.Tokenizer.from_file(str(path)).encode(TEXT).ids
    assert [int(i) for i in load_vocabulary(path).encode(TEXT)] == expected


@pytest.mark.parametrize("field", sorted(ALTERED))
def test_a_field_that_changes_hugging_face_ids_is_refused(tmp_path: Path, field: str) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    path = _written(tmp_path, field, ALTERED[field])
    plain = tokenizers.Tokenizer.from_file(str(_written(tmp_path, "plain", None))).encode(TEXT).ids
    try:  # Hugging Face honours the field: other ids, or none at all
        honoured = tokenizers.Tokenizer.from_file(str(path)).encode(TEXT).ids
    except BaseException:  # noqa: BLE001 - a Rust panic is a BaseException (pyo3's PanicException)
        honoured = None
    assert honoured != plain
    with pytest.raises(InputError, match=field):
        load_vocabulary(path)


def test_prepare_refuses_such_a_file_with_exit_2(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    path = _written(tmp_path, "dropout", ALTERED["dropout"])
    result = runner.invoke(app, ["prepare", str(corpus), "--vocab", str(path), "--cache-dir", str(tmp_path / "cache"),
                                 "-o", str(tmp_path / "p")])
    assert result.exit_code == 2, result.output
    assert "dropout" in result.output and not (tmp_path / "p").exists()


