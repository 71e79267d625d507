"""The ``tokenizer.json`` a pack carries, kept in the tokpack cache: a second pack with the same
vocabulary carries the cached copy without deriving it, byte for byte the derived document; a
cached copy that is altered, swapped, cut short or recorded for another vocabulary is never
carried: it is derived again and the cache rewritten."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import tokpack
from tokpack.vocab import bytelevel
from tokpack.vocab.tokenizer_json_cache import cached_paths

MERGES = [b"he", b"ll", b"hell", b"hello", b" w", b"or", b" wor", b"ld", b" world"]


def rank_file(folder: Path, merges: list[bytes]) -> Path:
    """A rank file of the 256 bytes and ``merges`` (each the join of two earlier tokens)."""
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines += [f"{base64.b64encode(token).decode()} {256 + n}" for n, token in enumerate(merges)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ranks.tiktoken").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "ranks.tiktoken"


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the derivations of a ``tokenizer.json`` (one entry each)."""
    counted: list[int] = []
    derive = bytelevel.tokenizer_json_bytes

    def counting(*args: object, **kwargs: object) -> bytes:
        counted.append(1)
        return derive(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bytelevel, "tokenizer_json_bytes", counting)
    return counted


def prepared_document(tmp_path: Path, ranks: Path, name: str) -> bytes:
    corpus = tmp_path / f"{name}.txt"
    corpus.write_text(f"hello world, {name}\n" * 50, encoding="utf-8")
    prepared = tokpack.prepare(corpus, vocab=ranks, pattern="gpt2", cache_dir=tmp_path / "cache",
                               out=tmp_path / f"pack-{name}")
    tokpack.Pack(prepared.tokens_dir, verify=True)  # the carried files check out against the record
    return (prepared.tokens_dir / "vocabulary" / "tokenizer.json").read_bytes()


def expected_document(ranks: Path) -> bytes:
    return tokpack.load_vocabulary(ranks, pattern="gpt2").to_tokenizer_json().encode("utf-8")


def test_a_second_pack_of_the_vocabulary_carries_the_cached_tokenizer_json(tmp_path: Path,
                                                                           derivations: list[int]) -> None:
    ranks = rank_file(tmp_path / "vocab", MERGES)
    first = prepared_document(tmp_path, ranks, "first")
    assert len(derivations) == 1
    second = prepared_document(tmp_path, ranks, "second")
    assert len(derivations) == 1, "the second pack derived its tokenizer.json again"
    assert first == second == expected_document(ranks)


def another_vocabularys_document(tmp_path: Path) -> bytes:
    return expected_document(rank_file(tmp_path / "other", MERGES[:4]))


#: What may happen to the cached copy or its record, each to be caught.
DAMAGE = {
    "the document swapped for another vocabulary's": lambda tmp, document, record: document.write_bytes(
        another_vocabularys_document(tmp)),
    "the document and its recorded hash swapped together, its size not": lambda tmp, document, record: (
        document.write_bytes(another_vocabularys_document(tmp) + b" " * 7),
        record.write_text(json.dumps(json.loads(record.read_text()) | {
            "sha256": __import__("hashlib").sha256(document.read_bytes()).hexdigest()}))),
    "the document cut short": lambda tmp, document, record: document.write_bytes(document.read_bytes()[:-10]),
    "one byte of the document changed": lambda tmp, document, record: document.write_bytes(
        document.read_bytes().replace(b'"he"', b'"hE"', 1)),
    "the document removed": lambda tmp, document, record: document.unlink(),
    "the record of another identity": lambda tmp, document, record: record.write_text(json.dumps(
        json.loads(record.read_text()) | {"identity": json.loads(record.read_text())["identity"] | {"sha256": "0" * 64}})),
    "the record of another layout": lambda tmp, document, record: record.write_text(json.dumps(
        json.loads(record.read_text()) | {"layout": 0})),
    "the record not JSON": lambda tmp, document, record: record.write_text("{"),
    "the record with a field too many": lambda tmp, document, record: record.write_text(json.dumps(
        json.loads(record.read_text()) | {"trusted": True})),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_cached_tokenizer_json_is_derived_again_never_carried(tmp_path: Path, derivations: list[int],
                                                                        damage: str) -> None:
    ranks = rank_file(tmp_path / "vocab", MERGES)
    prepared_document(tmp_path, ranks, "first")
    document, record = cached_paths(tokpack.load_vocabulary(ranks, pattern="gpt2").identity, tmp_path / "cache")
    assert document.is_file() and record.is_file()
    DAMAGE[damage](tmp_path, document, record)
    derivations.clear()
    carried = prepared_document(tmp_path, ranks, "second")
    assert len(derivations) == 1
    assert carried == expected_document(ranks)
    assert document.read_bytes() == carried, "the cache was not rewritten"
    derivations.clear()
    assert prepared_document(tmp_path, ranks, "third") == carried and not derivations


def test_an_unwritable_cache_derives_the_tokenizer_json_each_run(tmp_path: Path, derivations: list[int]) -> None:
    ranks = rank_file(tmp_path / "vocab", MERGES)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tokenizer-json").write_text("a file where the folder goes")
    documents = [prepared_document(tmp_path, ranks, "first"), prepared_document(tmp_path, ranks, "second")]
    assert len(derivations) == 2
    assert documents == [expected_document(ranks)] * 2


def test_a_cached_tokenizer_json_that_is_a_fifo_is_never_opened(tmp_path: Path, derivations: list[int]) -> None:
    """A FIFO would block the run for ever (as a device, ``/dev/zero``, would be read until memory
    runs out): it is not opened; the document is derived again and the cache rewritten with a file."""
    from fifos import feeding_fifo

    ranks = rank_file(tmp_path / "vocab", MERGES)
    first = prepared_document(tmp_path, ranks, "first")
    document, record = cached_paths(tokpack.load_vocabulary(ranks, pattern="gpt2").identity, tmp_path / "cache")
    derivations.clear()
    with feeding_fifo(document, first) as opened:  # what a reader that opened it would get: the right document
        carried = prepared_document(tmp_path, ranks, "second")
    assert not opened, "the FIFO was opened"
    assert len(derivations) == 1
    assert carried == first
    assert document.is_file() and document.read_bytes() == carried
