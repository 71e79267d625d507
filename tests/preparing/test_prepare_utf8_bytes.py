"""``prepare`` hands the encoder each document of a text file or folder as the bytes it read (no
``str`` made), checked as UTF-8 by the encoder: the pack is byte-identical to the one made from
the decoded text (its character count too), and a document that is not UTF-8 gets the very error
reading it as text gives (the file, the offset of its first bad byte, the fix), in any batch, on
one thread or two."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tokpack import prepare
from tokpack.corpus.sources import DocumentSource, Piece, Utf8Piece
from tokpack.errors import InputError, InputsSkipped
from tokpack.vocab import BpeTokenizer

TEXT = "Ala ma kota, a kot ma Alę. Zażółć gęślą jaźń. 中文字 😀 The cat sat.\n" * 40


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))


def _as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every document decoded to ``str`` before the encoder, as prepare did before bytes."""
    def decoded(self: DocumentSource, first: int = 0, last: int | None = None) -> Iterator[Piece | Utf8Piece]:
        return self.pieces(first, last)

    monkeypatch.setattr(DocumentSource, "utf8_pieces", decoded)
    for name in ("tokpack.corpus.sources.text_file.TextFile", "tokpack.corpus.sources.text_directory.TextDirectory"):
        monkeypatch.delattr(name + ".utf8_pieces")


def _corpora(folder: Path, data: bytes, second: bytes = TEXT.encode()) -> dict[str, Path]:
    folder.mkdir(parents=True)
    (folder / "corpus.txt").write_bytes(data)
    (folder / "d").mkdir()
    (folder / "d" / "a.txt").write_bytes(second)
    (folder / "d" / "b.txt").write_bytes(data)
    return {"file": folder / "corpus.txt", "folder": folder / "d"}


def _files(pack: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(pack.iterdir()) if path.is_file()}


@pytest.mark.parametrize("workers", [1, 2])
def test_documents_reach_the_encoder_as_their_bytes_and_pack_as_their_text(
        tmp_path: Path, gpt2_rank_file: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    given: list[type] = []
    encode_arrays = BpeTokenizer.encode_arrays

    def recording(self: BpeTokenizer, texts: Sequence[str | bytes], **options: object) -> object:
        given.extend(type(text) for text in texts)
        return encode_arrays(self, texts, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(BpeTokenizer, "encode_arrays", recording)
    common = {"vocab": gpt2_rank_file, "pattern": "gpt2", "document_bytes": 256, "batch_documents": 4,
              "workers": workers}
    for kind, corpus in _corpora(tmp_path / "in", TEXT.encode()).items():
        given.clear()
        as_bytes = prepare(corpus, cache_dir=tmp_path / "bytes", out=tmp_path / f"bytes-{kind}", **common)  # type: ignore[arg-type]
        assert given and set(given) == {bytes}, kind
        with monkeypatch.context() as text:
            _as_text(text)
            given.clear()
            as_str = prepare(corpus, cache_dir=tmp_path / "str", out=tmp_path / f"str-{kind}", **common)  # type: ignore[arg-type]
            assert given and set(given) == {str}, kind
        assert as_bytes.meta.counts == as_str.meta.counts and as_bytes.meta.counts["characters"] > 0
        assert as_bytes.meta.n_tokens == as_str.meta.n_tokens > 0
        assert _files(tmp_path / f"bytes-{kind}") == _files(tmp_path / f"str-{kind}")


BAD = {"a byte no character starts with": b"\xff", "a surrogate": b"\xed\xa0\x80", "an overlong": b"\xc0\xaf",
       "above U+10FFFF": b"\xf4\x90\x80\x80", "a stray continuation byte": b"\x80", "a truncated character": b"\xe2\x82 x"}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("bad", list(BAD.values()), ids=list(BAD))
def test_invalid_utf8_gives_the_error_reading_text_gives(tmp_path: Path, byte_vocab: Path, bad: bytes,
                                                         monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    # The bad bytes in the 23rd document of 64 bytes (its sixth batch of four), and at the very end.
    good = TEXT.encode()[:1500]
    for at in (1470, len(good)):
        data = good[:at] + bad + good[at:]
        for kind, corpus in _corpora(tmp_path / f"in-{at}", data).items():
            options = {"vocab": byte_vocab, "document_bytes": 64, "batch_documents": 4, "workers": workers}
            with pytest.raises(InputError) as from_bytes:
                prepare(corpus, cache_dir=tmp_path / "c", **options)  # type: ignore[arg-type]
            with monkeypatch.context() as text:
                _as_text(text)
                with pytest.raises(InputError) as from_text:
                    prepare(corpus, cache_dir=tmp_path / "c", **options)  # type: ignore[arg-type]
            where = corpus if kind == "file" else corpus / "b.txt"
            assert str(from_bytes.value) == str(from_text.value)
            assert str(from_bytes.value).startswith(f"{where}: invalid UTF-8 at byte {at}; convert it to UTF-8"), kind
            assert not (tmp_path / "c" / "packs").exists() or not [
                p for p in (tmp_path / "c" / "packs").iterdir() if not p.name.endswith(".lock")]


def test_a_binary_file_is_named_as_one(tmp_path: Path, byte_vocab: Path) -> None:
    corpus = tmp_path / "windows.txt"
    corpus.write_bytes(TEXT.encode("utf-16"))
    with pytest.raises(InputError, match=r"windows\.txt: is UTF-16 text .*; convert it to UTF-8 \(e\.g\. iconv"):
        prepare(corpus, cache_dir=tmp_path / "c", vocab=byte_vocab)


def test_a_folder_skipping_bad_files_packs_the_others(tmp_path: Path, byte_vocab: Path) -> None:
    corpora = _corpora(tmp_path / "in", TEXT.encode()[:100] + b"\xff" + TEXT.encode()[:100])
    with pytest.warns(InputsSkipped, match=r"b\.txt: invalid UTF-8 at byte 100"):
        skipped = prepare(corpora["folder"], cache_dir=tmp_path / "c", vocab=byte_vocab, on_error="skip")
    assert skipped.meta.counts["skipped"] == 1 and skipped.meta.n_tokens == len(TEXT.encode())


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_the_error_names_the_bytes_read_even_when_the_file_changed_since(
        tmp_path: Path, byte_vocab: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """A document the encoder refuses is decoded from the bytes it was given, not read again: a
    file mended (or changed) while prepare runs still gets its one-line error, not a crash."""
    from tokpack.corpus.sources.text_directory import TextDirectory
    from tokpack.corpus.sources.text_file import TextFile

    good = TEXT.encode()[:300]
    corpus = _corpora(tmp_path / "in", good[:100] + b"\xff" + good[100:])[kind]
    where = corpus if kind == "file" else corpus / "b.txt"
    source = TextFile if kind == "file" else TextDirectory
    decoded = source.decoded

    def mended_first(self: DocumentSource, piece: Utf8Piece) -> str:
        where.write_bytes(good[:100] + b"?" + good[100:])  # mended in place, its length kept, after the read
        return decoded(self, piece)  # type: ignore[arg-type]

    monkeypatch.setattr(source, "decoded", mended_first)
    with pytest.raises(InputError, match=rf"^{where}: invalid UTF-8 at byte 100; convert it to UTF-8"):
        prepare(corpus, cache_dir=tmp_path / "c", vocab=byte_vocab)
