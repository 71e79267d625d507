"""Seams around a corpus: a manifest belongs to its file, a separator marks documents, two
encoders of one vocabulary agree, and the MosaicML reader imports for real."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.vocab import BpeTokenizer

from conftest import DATA

runner = CliRunner()
EOT = "<|endoftext|>"


def _texts() -> list[str]:
    """Real documents: the Polish narrative files, whole."""
    return [path.read_text(encoding="utf-8") for path in sorted((DATA / "polish" / "narrative").glob("*.txt"))]


@pytest.fixture(scope="session")
def byte_vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level vocabulary (ids are the bytes, ``<|endoftext|>`` 256): ids decode exactly."""
    return BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).save(tmp_path_factory.mktemp("vocab"))


def _prepare(*args: str | Path) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, ["prepare", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _documents(pack: Path) -> list[bytes]:
    """Each document of a pack of byte ids, as its bytes (read from the files a user would read)."""
    tokens = np.load(pack / "tokens.npy")
    starts = np.load(pack / "starts.npy")
    ends = np.append(starts[1:], len(tokens))
    return [tokens[a:b].astype(np.uint8).tobytes() for a, b in zip(starts, ends)]


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


# --- a manifest belongs to a file ---------------------------------------------------------------

def test_one_files_split_never_touches_its_neighbour(tmp_path: Path, byte_vocab: Path) -> None:
    texts = _texts()
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_text("".join(texts[:6]), encoding="utf-8")
    (folder / "b.txt").write_text("".join(texts[6:9]), encoding="utf-8")
    cache = tmp_path / "cache"
    a = _prepare(folder / "a.txt", "--validation", "0.1", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pa")
    assert set(a["ranges"]) == {"train", "validation"}
    manifest = json.loads((folder / "a.txt.manifest.json").read_text())
    assert manifest["file"] == "a.txt" and not (folder / "manifest.json").exists()
    # The neighbour is all training, and says so; a's own split still holds for a.
    b = _prepare(folder / "b.txt", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pb")
    assert set(b["ranges"]) == {"train"} and b["ranges"]["train"]["source_bytes"] == [0, (folder / "b.txt").stat().st_size]
    again = _prepare(folder / "a.txt", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pa2")
    assert again["ranges"] == a["ranges"]
    # The folder as a corpus holds the two texts, not a's split.
    whole = _prepare(folder, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pf")
    assert b"".join(_documents(tmp_path / "pf")) == (folder / "a.txt").read_bytes() + (folder / "b.txt").read_bytes()
    assert whole["n_tokens"] == (folder / "a.txt").stat().st_size + (folder / "b.txt").stat().st_size
    # b split in its turn gets its own manifest; a's is unchanged.
    before = (folder / "a.txt.manifest.json").read_bytes()
    _prepare(folder / "b.txt", "--validation", "0.2", "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pb2")
    assert json.loads((folder / "b.txt.manifest.json").read_text())["file"] == "b.txt"
    assert (folder / "a.txt.manifest.json").read_bytes() == before


def test_an_older_folder_manifest_applies_to_the_file_it_names_only(tmp_path: Path, byte_vocab: Path) -> None:
    texts = _texts()
    folder = tmp_path / "data"
    folder.mkdir()
    a, b = folder / "a.txt", folder / "b.txt"
    a.write_text("".join(texts[:4]), encoding="utf-8")
    b.write_text("".join(texts[4:6]), encoding="utf-8")
    data, cut = a.read_bytes(), len(texts[0].encode()) + len(texts[1].encode()) + len(texts[2].encode())
    (folder / "manifest.json").write_text(json.dumps({  # as older releases wrote it: no file name
        "schema": "tokpack.corpus.v1", "sha256": hashlib.sha256(data).hexdigest(), "n_bytes": len(data),
        "ranges": {"train": [0, cut], "validation": [cut, len(data)]}}))
    cache = tmp_path / "cache"
    assert _prepare(a, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pa")["ranges"]["validation"]["source_bytes"] == [cut, len(data)]
    assert set(_prepare(b, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pb")["ranges"]) == {"train"}


def test_another_tools_manifest_json_is_not_a_corpus_manifest(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"schema": "tokpack.tokenizer-manifest.v1", "files": {}}))
    (folder / "notes.txt").write_text(_texts()[0], encoding="utf-8")
    assert set(_prepare(folder / "notes.txt", "--vocab", byte_vocab, "--cache-dir", tmp_path / "c")["ranges"]) == {"train"}


def test_a_read_only_data_folder_still_gets_its_split(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(_texts()[:6]), encoding="utf-8")
    before = _listing(folder)
    folder.chmod(0o555)
    try:
        elsewhere = tmp_path / "splits" / "corpus.json"
        cache = tmp_path / "cache"
        made = _prepare(corpus, "--validation", "0.1", "--test", "0.05", "--manifest", elsewhere, "--vocab", byte_vocab,
                        "--cache-dir", cache, "-o", tmp_path / "pack")
        assert set(made["ranges"]) == {"train", "validation", "test"}
        assert json.loads(elsewhere.read_text())["file"] == "corpus.txt"
        # Read back from there by a later run; the data folder was never written (as root, too).
        reused = _prepare(corpus, "--manifest", elsewhere, "--vocab", byte_vocab, "--cache-dir", cache, "-o", tmp_path / "pack2")
        assert reused["ranges"] == made["ranges"]
        assert _listing(folder) == before
        if os.geteuid() != 0:  # chmod binds: without --manifest, one line naming the way out
            refused = runner.invoke(app, ["prepare", str(corpus), "--validation", "0.1", "--vocab", str(byte_vocab),
                                          "--cache-dir", str(cache)])
            assert refused.exit_code == 2 and "--manifest" in refused.output, refused.output
            assert _listing(folder) == before
    finally:
        folder.chmod(0o755)


def test_a_manifest_of_another_file_is_refused_when_given(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_text(_texts()[0], encoding="utf-8")
    (folder / "b.txt").write_text(_texts()[1], encoding="utf-8")
    _prepare(folder / "a.txt", "--validation", "0.2", "--vocab", byte_vocab, "--cache-dir", tmp_path / "c", "-o", tmp_path / "p")
    result = runner.invoke(app, ["prepare", str(folder / "b.txt"), "--manifest", str(folder / "a.txt.manifest.json"),
                                 "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2 and "manifest of a.txt, not of b.txt" in result.output, result.output


# --- a separator marks documents ---------------------------------------------------------------

def _separated(tmp_path: Path, separator: str) -> tuple[Path, list[bytes]]:
    """A corpus of real documents joined by ``separator``, with empty pieces at the start, in the
    middle and at the end, and one document longer than 4,096 bytes; and the pieces expected."""
    texts = [re.sub(r"\n+", "\n", text.strip()) for text in _texts()[:12]]  # no blank line inside
    long = "\n".join(texts[:4])  # > 4 KiB: cut by the newline rule too
    assert len(long.encode()) > 4096
    pieces = [texts[4], texts[5], "", texts[6], long, *texts[7:12]]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(separator + separator.join(pieces) + separator, encoding="utf-8")
    return corpus, [piece.encode() for piece in pieces if piece]


@pytest.mark.parametrize("separator", [EOT, "\n\n"], ids=["endoftext", "blank-line"])
def test_a_separator_makes_one_document_per_piece(tmp_path: Path, byte_vocab: Path, separator: str) -> None:
    corpus, pieces = _separated(tmp_path, separator)
    made = _prepare(corpus, "--separator", separator, "--document-bytes", "4096", "--vocab", byte_vocab,
                    "--cache-dir", tmp_path / "c", "-o", tmp_path / "pack")
    documents = _documents(tmp_path / "pack")
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
    made = _prepare(corpus, "--validation", "0.3", "--test", "0.1", *common, "--cache-dir", tmp_path / "c", "-o", tmp_path / "pack")
    documents = _documents(tmp_path / "pack")
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
    plain = _prepare(corpus, "--vocab", byte_vocab, "--document-bytes", "4096", "--cache-dir", cache)
    separated = _prepare(corpus, "--vocab", byte_vocab, "--document-bytes", "4096", "--cache-dir", cache, "--separator", EOT)
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

def test_invalid_utf8_in_a_folder_names_on_error_skip(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("fine\n", encoding="utf-8")
    (folder / "b.txt").write_bytes(b"abc\xff\n")
    result = runner.invoke(app, ["prepare", str(folder), "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2 and "invalid UTF-8 at byte 3" in result.output and "--on-error skip" in result.output
    skipped = _prepare(folder, "--vocab", byte_vocab, "--cache-dir", tmp_path / "c", "--on-error", "skip")
    assert skipped["counts"]["skipped"] == 1


# --- two encoders of one vocabulary agree ---------------------------------------------------------

SPELLED = ["hello <|endoftext|>", "<|endoftext|>", "a<|endoftext|>b <|endoftext|>\n", "zażółć <|endoftext|> gęślą"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small vocabulary trained by ``tokpack tokenizer train``: its folder (tokenizer.json,
    ranks.tiktoken, vocabulary.json, the transformers files)."""
    folder = tmp_path_factory.mktemp("train")
    (folder / "text").mkdir()
    for index, text in enumerate(_texts()[:20]):
        (folder / "text" / f"{index:02d}.txt").write_text(text, encoding="utf-8")
    out = folder / "out" / "tokenizer.json"
    result = runner.invoke(app, ["tokenizer", "train", str(folder / "text"), "-o", str(out), "--vocab-size", "400"])
    assert result.exit_code == 0, result.output
    return out.parent


def test_hugging_face_never_reads_the_special_token_from_text(trained: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from tokpack import load_vocabulary

    ours = BpeTokenizer.load_saved(trained / "vocabulary.json")
    hf = Tokenizer.from_file(str(trained / "tokenizer.json"))
    fast = AutoTokenizer.from_pretrained(str(trained))
    for text in SPELLED:
        assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text), text
        assert fast(text, add_special_tokens=False)["input_ids"] == ours.encode(text), text
    # The special token is still there, by name, and tokpack reads the file back as the same vocabulary.
    eot = ours.eot_id
    assert hf.token_to_id(EOT) == eot and fast.eos_token_id == eot and hf.decode([eot]) == EOT
    assert load_vocabulary(trained / "tokenizer.json").identity == ours.identity
    # Through the API's own export too.
    assert Tokenizer.from_str(ours.to_tokenizer_json()).encode(SPELLED[0]).ids == ours.encode(SPELLED[0])


def test_a_pack_from_tokenizer_json_has_hugging_faces_ids(tmp_path: Path, trained: Path) -> None:
    from tokenizers import Tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(SPELLED), encoding="utf-8")
    made = _prepare(corpus, "--vocab", trained / "tokenizer.json", "--cache-dir", tmp_path / "c", "-o", tmp_path / "pack")
    assert made["n_docs"] == 1
    ids = np.load(tmp_path / "pack" / "tokens.npy").tolist()
    assert ids == Tokenizer.from_file(str(trained / "tokenizer.json")).encode("".join(SPELLED)).ids


def test_encode_arrays_takes_a_lone_surrogate_as_encode_does(trained: Path) -> None:
    ours = BpeTokenizer.load_saved(trained / "vocabulary.json")
    texts = ["a\ud800b", "\udfff", "zażółć\ud83d gęślą", "fine"]
    assert [array.tolist() for array in ours.encode_arrays(texts, num_threads=2)] == [ours.encode(t) for t in texts]
    assert [array.tolist() for array in ours.encode_arrays(texts[:1], num_threads=1)] == [ours.encode(texts[0])]


def test_a_tokenizer_json_whose_merges_contradict_its_ids_is_refused(tmp_path: Path, trained: Path) -> None:
    document = json.loads((trained / "tokenizer.json").read_text(encoding="utf-8"))
    vocab, merges = document["model"]["vocab"], document["model"]["merges"]
    made = ["".join(merge) if isinstance(merge, list) else merge.replace(" ", "") for merge in merges]
    first, second = made[10], made[40]  # two merged tokens' ids swapped
    vocab[first], vocab[second] = vocab[second], vocab[first]
    bad = tmp_path / "swapped" / "tokenizer.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(_texts()[0], encoding="utf-8")
    result = runner.invoke(app, ["prepare", str(corpus), "--vocab", str(bad), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2, result.output
    assert str(bad) in result.output and "merge 11 " in result.output and "contradict" in result.output, result.output
    # The file as trained is accepted.
    assert _prepare(corpus, "--vocab", trained / "tokenizer.json", "--cache-dir", tmp_path / "c")["n_docs"] == 1


@pytest.mark.parametrize("separator", [EOT, "\n\n"], ids=["endoftext", "blank-line"])
def test_a_split_never_changes_the_documents(tmp_path: Path, byte_vocab: Path, separator: str) -> None:
    # Runs of blank lines: "\n\n\n" holds a separator and a newline, wherever a boundary falls.
    text = "\n\n\n".join(t.replace("\n\n", "\n\n\n") for t in _texts()[:10]).replace("\n\n\n\n", separator + "\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    common = ["--separator", separator, "--document-bytes", "1024", "--vocab", byte_vocab, "--cache-dir", tmp_path / "c"]
    whole = _prepare(corpus, *common, "-o", tmp_path / "whole")
    split = _prepare(corpus, *common, "--validation", "0.37", "--test", "0.11", "-o", tmp_path / "split")
    assert _documents(tmp_path / "split") == _documents(tmp_path / "whole") and split["n_docs"] == whole["n_docs"]
    assert set(split["ranges"]) == {"train", "validation", "test"}


def test_bpe_train_never_learns_across_the_separator(tmp_path: Path) -> None:
    lines = [line for text in _texts()[:30] for line in text.splitlines() if line.strip()]  # hundreds of documents
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(EOT.join(lines) + EOT, encoding="utf-8")

    def learned(*extra: str) -> list[bytes]:
        out = tmp_path / ("with" if extra else "without")
        result = runner.invoke(app, ["bpe", "train", str(corpus), "-o", str(out), "--vocab-size", "600", "--workers", "1", *extra])
        assert result.exit_code == 0, result.output
        tokenizer = BpeTokenizer.load_saved(out / "vocabulary.json")
        return [tokenizer.decode_bytes([i]) for i in range(256, tokenizer.n_vocab - 1)]

    assert any(b"endoftext" in token for token in learned())  # without: the separator's text is learned as text
    assert not any(b"endoftext" in token or b"<|" in token for token in learned("--separator", EOT))
