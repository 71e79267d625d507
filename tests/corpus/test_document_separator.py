"""A separator (``separator=``) marks documents: one document a piece, never merged, cut only by the
document size; it holds across a split and across shards, is part of the cache key, and a trainer
never learns across it."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from cli_runs import EOT, pack_documents, prepare_json
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.vocab import BpeTokenizer

from tokenizer_fixtures import narrative_texts

runner = CliRunner()


def _separated(tmp_path: Path, separator: str) -> tuple[Path, list[bytes]]:
    """A corpus of real documents joined by ``separator``, with empty pieces at the start, in the
    middle and at the end, and one document longer than 4,096 bytes; and the pieces expected."""
    texts = [re.sub(r"\n+", "\n", text.strip()) for text in narrative_texts()[:12]]  # no blank line inside
    long = "\n".join(texts[:4])  # > 4 KiB: cut by the newline rule too
    assert len(long.encode()) > 4096
    pieces = [texts[4], texts[5], "", texts[6], long, *texts[7:12]]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(separator + separator.join(pieces) + separator, encoding="utf-8")
    return corpus, [piece.encode() for piece in pieces if piece]


@pytest.mark.parametrize("separator", [EOT, "\n\n"], ids=["endoftext", "blank-line"])
def test_a_separator_makes_one_document_per_piece(tmp_path: Path, byte_vocab: Path, separator: str) -> None:
    corpus, pieces = _separated(tmp_path, separator)
    made = prepare_json(corpus, "--separator", separator, "--document-bytes", "4096", "--vocab", byte_vocab,
                    "--cache-dir", tmp_path / "c", "-o", tmp_path / "pack")
    documents = pack_documents(tmp_path / "pack")
    assert not any(separator.encode() in document for document in documents)
    short = [piece for piece in pieces if len(piece) <= 4096]
    assert [d for d in documents if d in short] == short  # every short piece is exactly one document, in order
    assert b"".join(documents) == b"".join(pieces)  # a long piece is cut, never merged with another
    assert all(len(d) <= 4096 for d in documents) and len(documents) == made["n_docs"]
    meta = json.loads((tmp_path / "pack" / "meta.json").read_text())
    assert meta["cut"] == {"rule": "newline", "document_bytes": 4096, "separator": separator}


def test_a_separator_holds_across_a_split_and_across_shards(tmp_path: Path, byte_vocab: Path) -> None:
    corpus, pieces = _separated(tmp_path, EOT)
    common = ["--separator", EOT, "--document-bytes", "4096", "--vocab", byte_vocab]
    made = prepare_json(corpus, "--validation", "0.3", "--test", "0.1", *common, "--cache-dir", tmp_path / "c", "-o", tmp_path / "pack")
    documents = pack_documents(tmp_path / "pack")
    assert not any(EOT.encode() in document for document in documents)
    assert b"".join(documents) == b"".join(pieces)
    # Each range starts a document and no range boundary cuts a separator.
    data = corpus.read_bytes()
    ranges = json.loads((tmp_path / "corpus.txt.manifest.json").read_text())["ranges"]
    width = len(EOT)
    for start, _ in ranges.values():
        assert not any(data[p : p + width] == EOT.encode() for p in range(start - width + 1, start)), start
    starts = [made["ranges"][name]["documents"][0] for name in ("train", "validation", "test")]
    assert starts == sorted(starts) and len(set(starts)) == 3
    # Sharded, the same documents, the same ranges, the same ids.
    result = runner.invoke(app, ["prepare", str(corpus), "--shards", "3", "--out", str(tmp_path / "shards"), "--workers", "1",
                                 *map(str, common), "--validation", "0.3", "--test", "0.1"])
    assert result.exit_code == 0, result.output
    dataset = json.loads((tmp_path / "shards" / "dataset.json").read_text())
    pack = json.loads((tmp_path / "pack" / "meta.json").read_text())
    assert dataset["cut"] == pack["cut"]
    assert (dataset["tokens_sha256"], dataset["starts_sha256"], dataset["n_docs"]) == (pack["tokens_sha256"], pack["starts_sha256"], pack["n_docs"])
    assert {n: r["documents"] for n, r in dataset["ranges"].items()} == {n: r["documents"] for n, r in pack["ranges"].items()}


def test_the_separator_is_part_of_the_cache_key_and_the_api_takes_it(tmp_path: Path, byte_vocab: Path) -> None:
    import tokpack

    corpus, pieces = _separated(tmp_path, EOT)
    cache = tmp_path / "c"
    plain = prepare_json(corpus, "--vocab", byte_vocab, "--document-bytes", "4096", "--cache-dir", cache)
    separated = prepare_json(corpus, "--vocab", byte_vocab, "--document-bytes", "4096", "--cache-dir", cache, "--separator", EOT)
    assert plain["pack"] != separated["pack"] and plain["n_docs"] != separated["n_docs"]
    api = tokpack.prepare(corpus, vocab=byte_vocab, document_bytes=4096, cache_dir=cache, separator=EOT)
    assert str(api.tokens_dir) == separated["pack"] and api.meta.cut.separator == EOT
    # A vocabulary trained on separated documents never sees the separator.
    trained = tokpack.prepare(corpus, vocab_size=400, document_bytes=4096, cache_dir=cache, separator=EOT)
    tokenizer = trained.tokenizer
    assert all(EOT.encode() not in tokenizer.decode_bytes([i]) for i in range(256, 399))
    again = tokpack.prepare(corpus, vocab_size=400, document_bytes=4096, cache_dir=cache)
    assert again.vocabulary_path != trained.vocabulary_path


def test_a_range_boundary_inside_the_separator_is_refused(tmp_path: Path, byte_vocab: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    data = f"first document{EOT}second document{EOT}".encode()
    corpus.write_bytes(data)
    inside = data.index(EOT.encode()) + 3
    (tmp_path / "corpus.txt.manifest.json").write_text(json.dumps({
        "schema": "tokpack.corpus.v1", "file": "corpus.txt", "sha256": hashlib.sha256(data).hexdigest(),
        "n_bytes": len(data), "ranges": {"train": [0, inside], "validation": [inside, len(data)]}}))
    result = runner.invoke(app, ["prepare", str(corpus), "--separator", EOT, "--vocab", str(byte_vocab),
                                 "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2 and f"byte {inside}, inside the separator" in result.output, result.output


def test_an_empty_separator_is_refused(tmp_path: Path, byte_vocab: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("text\n", encoding="utf-8")
    result = runner.invoke(app, ["prepare", str(corpus), "--separator", "", "--vocab", str(byte_vocab),
                                 "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2 and "--separator: must be a non-empty string" in result.output, result.output


# --- invalid UTF-8 names the way out -------------------------------------------------------------


# --- two encoders of one vocabulary agree ---------------------------------------------------------


@pytest.mark.parametrize("separator", [EOT, "\n\n"], ids=["endoftext", "blank-line"])
def test_a_split_never_changes_the_documents(tmp_path: Path, byte_vocab: Path, separator: str) -> None:
    # Runs of blank lines: "\n\n\n" holds a separator and a newline, wherever a boundary falls.
    text = "\n\n\n".join(t.replace("\n\n", "\n\n\n") for t in narrative_texts()[:10]).replace("\n\n\n\n", separator + "\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    common = ["--separator", separator, "--document-bytes", "1024", "--vocab", byte_vocab, "--cache-dir", tmp_path / "c"]
    whole = prepare_json(corpus, *common, "-o", tmp_path / "whole")
    split = prepare_json(corpus, *common, "--validation", "0.37", "--test", "0.11", "-o", tmp_path / "split")
    assert pack_documents(tmp_path / "split") == pack_documents(tmp_path / "whole") and split["n_docs"] == whole["n_docs"]
    assert set(split["ranges"]) == {"train", "validation", "test"}


def test_bpe_train_never_learns_across_the_separator(tmp_path: Path) -> None:
    lines = [line for text in narrative_texts()[:30] for line in text.splitlines() if line.strip()]  # hundreds of documents
    corpus = tmp_path / "corpus.txt"
    marker = "<|qqx|>"  # no special token: <|endoftext|> is never learned, separator or not
    corpus.write_text(marker.join(lines) + marker, encoding="utf-8")

    def learned(*extra: str) -> list[bytes]:
        out = tmp_path / ("with" if extra else "without")
        result = runner.invoke(app, ["bpe", "train", str(corpus), "-o", str(out), "--vocab-size", "600", "--workers", "1", *extra])
        assert result.exit_code == 0, result.output
        tokenizer = BpeTokenizer.load_saved(out / "vocabulary.json")
        return [tokenizer.decode_bytes([i]) for i in range(256, tokenizer.n_vocab - 1)]

    assert any(b"qqx" in token for token in learned())  # without: the separator's text is learned as text
    assert not any(b"qqx" in token or b"<|" in token for token in learned("--separator", marker))
