"""A ``tokenizer.json`` that lists ``<|endoftext|>`` in ``added_tokens`` (as Hugging Face's own
trainer and the hub's GPT-2 write it): tokpack encodes text literally, so its ids are Hugging
Face's with ``encode_special_tokens`` (``split_special_tokens`` in ``transformers``), and differ
from Hugging Face's default only where the text spells the special token."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.store.reader import Pack

PREPARING = Path(__file__).resolve().parents[2] / "docs" / "preparing.md"
SPECIAL = "<|endoftext|>"
TRAINING = [
    "The quick brown fox jumps over the lazy dog. It's 2024; we'll see 12,345 dogs!\n",
    "Zażółć gęślą jaźń — pchnąć w tę łódź jeża lub ośm skrzyń fig.\n\n   indented   spaces\t tab\n",
] * 30
DOCUMENTS = [
    f"Hello there{SPECIAL}The fox jumps.",
    f"{SPECIAL} over it's 123 {SPECIAL}{SPECIAL}x Zażółć gęślą",
    "<|endoftext|  <|endof text|> <|", f"a{SPECIAL}\n\n  {SPECIAL}  ",
    "plain words only, the lazy dog",
]


@pytest.fixture(scope="module")
def hub_style(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[int]]]:
    """A byte-level BPE trained by Hugging Face's trainer with ``<|endoftext|>`` as an added special
    token, and the ids of ``tokpack prepare --vocab`` its ``tokenizer.json`` on DOCUMENTS."""
    folder = tmp_path_factory.mktemp("hf-added")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=[SPECIAL], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(TRAINING, trainer)
    vocab = folder / "tokenizer.json"
    tokenizer.save(str(vocab))
    assert [entry["content"] for entry in json.loads(vocab.read_text(encoding="utf-8"))["added_tokens"]] == [SPECIAL]
    corpus = folder / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in DOCUMENTS), encoding="utf-8")
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(vocab),
                                      "--cache-dir", str(folder / "cache"), "--json"])
    assert result.exit_code == 0, result.output
    assert f"lists added tokens ({SPECIAL})" in result.stderr and "encode_special_tokens = True" in result.stderr
    pack = Pack(Path(json.loads(result.stdout)["pack"]))
    return vocab, [pack.document(i).tolist() for i in range(pack.n_docs)]


def test_tokpack_ids_are_hugging_faces_with_encode_special_tokens(hub_style: tuple[Path, list[list[int]]]) -> None:
    vocab, packed = hub_style
    tokenizer = Tokenizer.from_file(str(vocab))
    default = [tokenizer.encode(text).ids for text in DOCUMENTS]
    tokenizer.encode_special_tokens = True
    assert packed == [tokenizer.encode(text).ids for text in DOCUMENTS]
    # The setting matters exactly where the text spells the special token, nowhere else.
    special_id = tokenizer.token_to_id(SPECIAL)
    for text, ours, theirs in zip(DOCUMENTS, packed, default, strict=True):
        assert (ours == theirs) == (SPECIAL not in text), text
        assert special_id not in ours and theirs.count(special_id) == text.count(SPECIAL)
        literal = [tokenizer.encode(part).ids for part in text.split(SPECIAL)]
        assert theirs == [i for k, ids in enumerate(literal) for i in ([special_id] if k else []) + ids]


def test_transformers_agrees_with_split_special_tokens(hub_style: tuple[Path, list[list[int]]]) -> None:
    transformers = pytest.importorskip("transformers")
    vocab, packed = hub_style
    split = transformers.PreTrainedTokenizerFast(tokenizer_file=str(vocab), split_special_tokens=True)
    assert [split(text, add_special_tokens=False)["input_ids"] for text in DOCUMENTS] == packed
    plain = transformers.PreTrainedTokenizerFast(tokenizer_file=str(vocab))
    assert [plain(text)["input_ids"] for text in DOCUMENTS] != packed


def test_an_added_token_that_is_not_special_is_refused(hub_style: tuple[Path, list[list[int]]], tmp_path: Path) -> None:
    vocab, _ = hub_style
    tokenizer = Tokenizer.from_file(str(vocab))
    tokenizer.add_tokens([AddedToken("fox", special=False)])
    tokenizer.encode_special_tokens = True
    text = f"The fox jumps{SPECIAL}"
    assert tokenizer.token_to_id("fox") in tokenizer.encode(text).ids  # read from text even so
    refused = tmp_path / "tokenizer.json"
    tokenizer.save(str(refused))
    corpus = tmp_path / "docs.txt"
    corpus.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(refused), "--cache-dir", str(tmp_path / "c")])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert str(refused) in lines[0] and "'fox'" in lines[0] and "not special" in lines[0] and '"special": true' in lines[0]


def test_readme_names_the_setting_that_removes_the_difference() -> None:
    text = " ".join(PREPARING.read_text(encoding="utf-8").split())
    paragraph = next(p for p in text.split("**") if "added_tokens" in p and "encode_special_tokens" in p)
    assert re.search(r"encode_special_tokens = True", paragraph) and "split_special_tokens=True" in paragraph
