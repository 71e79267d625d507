"""prepare(): documents, ranges, training on the training range only, the cache and its refusals."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tokpack import prepare
from tokpack.errors import InputError
from tokpack.preparing import TokenizedCorpus
from tokpack.store import Pack

from conftest import SAMPLE

SMALL = {"vocab_size": 600, "document_bytes": 4096}


def write_corpus(directory: Path, text: bytes, ranges: dict[str, list[int]] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    corpus = directory / "corpus.txt"
    corpus.write_bytes(text)
    if ranges is not None:
        manifest = {"schema": "tokpack.corpus.v1", "sha256": hashlib.sha256(text).hexdigest(),
                    "n_bytes": len(text), "ranges": ranges}
        (directory / "manifest.json").write_text(json.dumps(manifest))
    return corpus


def pack_bytes(prepared: TokenizedCorpus) -> dict[str, bytes]:
    return {str(p.relative_to(prepared.tokens_dir)): p.read_bytes() for p in sorted(prepared.tokens_dir.rglob("*"))
            if p.is_file()}


def test_sample_pack_decodes_back_to_the_corpus(cache_dir: Path) -> None:
    corpus = SAMPLE / "polish.txt"
    prepared = prepare(corpus, cache_dir=cache_dir, **SMALL)
    meta, tokenizer, pack = prepared.meta, prepared.tokenizer, prepared.pack()
    assert meta.source.name == "polish.txt" and meta.n_tokens == len(pack.tokens) and prepared.n_vocab == 600
    assert meta.ranges["train"].source_bytes == (0, 270569)
    assert meta.ranges["train"].tokens[1] == meta.ranges["validation"].tokens[0]
    assert tokenizer.decode_bytes(pack.tokens) == corpus.read_bytes()  # lossless, nothing inserted
    for index in range(pack.n_docs):  # every document is within the limit and encoded alone
        document = tokenizer.decode_bytes(pack.document(index))
        assert len(document) <= 4096 and tokenizer.encode(document.decode()) == pack.document(index).tolist()
    assert (cache_dir / "packs").is_dir() and not list(SAMPLE.glob("*.npy"))  # nothing in the package


def test_a_fresh_cache_gives_byte_identical_packs(tmp_path: Path) -> None:
    first = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "a", **SMALL)
    second = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "b", **SMALL)
    assert pack_bytes(first) == pack_bytes(second)


def test_vocabulary_never_sees_validation_or_test_text(tmp_path: Path) -> None:
    train = (SAMPLE / "polish.txt").read_bytes()[:60_000]
    train = train[: train.rindex(b"\n") + 1]
    held_out = b"qxqxqx zvzvzv " * 2000
    corpus = write_corpus(tmp_path / "c", train + held_out + held_out,
                          {"train": [0, len(train)], "validation": [len(train), len(train) + len(held_out)],
                           "test": [len(train) + len(held_out), len(train) + 2 * len(held_out)]})
    prepared = prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=400, document_bytes=4096)
    assert not [t for t in prepared.tokenizer.ranks if b"qx" in t or b"zv" in t]
    spans = prepared.meta.ranges
    assert spans["train"].documents[1] == spans["validation"].documents[0]
    assert spans["validation"].tokens[1] == spans["test"].tokens[0] and spans["test"].tokens[1] == prepared.meta.n_tokens
    # training on everything would have learnt them: the probe can fail
    unsplit = write_corpus(tmp_path / "u", train + held_out + held_out)
    assert [t for t in prepare(unsplit, cache_dir=tmp_path / "cache", vocab_size=400).tokenizer.ranks if b"qx" in t]


def test_empty_ranges_and_an_empty_corpus(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c", b"abc\n", {"train": [0, 4], "validation": [4, 4]})
    prepared = prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=257)
    assert prepared.meta.ranges["validation"].documents == (1, 1)
    empty = write_corpus(tmp_path / "e", b"")
    assert prepare(empty, cache_dir=tmp_path / "cache", vocab_size=257).meta.n_tokens == 0


def test_rerun_reuses_the_verified_cache_without_retraining(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)
    stamps = {p: p.stat().st_mtime_ns for p in first.tokens_dir.iterdir()}

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("retrained although the cache holds the vocabulary")

    monkeypatch.setattr("tokpack.preparing.preparation._trainer", lambda name: no_training)
    second = prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)
    assert (second.tokens_dir, second.vocabulary_path) == (first.tokens_dir, first.vocabulary_path)
    assert {p: p.stat().st_mtime_ns for p in second.tokens_dir.iterdir()} == stamps


def test_an_altered_cache_is_refused_not_rebuilt(cache_dir: Path) -> None:
    prepared = prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)
    tokens = prepared.tokens_dir / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-1] ^= 1
    tokens.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)
    tokens.unlink()
    with pytest.raises(ValueError, match="missing"):
        prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)


def test_an_altered_cached_vocabulary_is_refused(cache_dir: Path) -> None:
    prepared = prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)
    ranks = prepared.vocabulary_path.parent / "ranks.tiktoken"
    lines = ranks.read_bytes().splitlines(keepends=True)
    ranks.write_bytes(b"".join(lines[:-1]))
    with pytest.raises(ValueError, match="ranks.tiktoken: SHA-256 differs"):
        prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)


def test_corpus_must_match_its_manifest(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c", b"hello world\n", {"train": [0, 12]})
    # The file's own manifest (a folder-wide manifest.json of another hash is another file's).
    (tmp_path / "c" / "manifest.json").rename(tmp_path / "c" / "corpus.txt.manifest.json")
    corpus.write_bytes(b"hello World\n")
    with pytest.raises(ValueError, match="SHA-256 .* differs from"):
        prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=257)
    corpus.write_bytes(b"hello world!\n")
    with pytest.raises(ValueError, match="13 bytes, but") as caught:
        prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=257)
    # An edited corpus gets the fix: restore it, or cut it again knowing the held-out ranges move.
    manifest = tmp_path / "c" / "corpus.txt.manifest.json"
    assert str(caught.value) == (f"{corpus}: 13 bytes, but {manifest} says 12: it changed since it was split; restore "
                                 f"corpus.txt as it was when split, or delete {manifest} to cut it again (the held-out "
                                 "ranges move, so evaluate anew)")
    write_corpus(tmp_path / "d", b"hello world\n", {"train": [0, 5], "test": [6, 12]})
    with pytest.raises(ValueError, match="gap or overlaps"):
        prepare(tmp_path / "d" / "corpus.txt", cache_dir=tmp_path / "cache", vocab_size=257)


def test_invalid_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c", b"fine line\n" * 50 + b"bad \xff byte\n")
    with pytest.raises(ValueError, match=r"corpus\.txt: invalid UTF-8 at byte 504"):
        prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=257, document_bytes=64)
    assert not (tmp_path / "cache" / "packs").exists() or not [
        p for p in (tmp_path / "cache" / "packs").iterdir() if not p.name.endswith(".lock")]


def test_bad_sizes_are_refused(tmp_path: Path) -> None:
    for name, value in (("vocab_size", 100), ("document_bytes", 3), ("batch_documents", 0), ("min_frequency", 0)):
        with pytest.raises(ValueError, match=name):
            prepare(SAMPLE / "polish.txt", cache_dir=tmp_path, **{name: value})
    # tokpack's own error, as a missing pack's (PackedBatches), also where held-out ranges are asked for
    for held_out in ({}, {"validation": 0.1}):
        with pytest.raises(InputError, match=r"nope.txt: no such corpus file or folder$"):
            prepare(tmp_path / "nope.txt", cache_dir=tmp_path, **held_out)


def test_user_vocabulary_is_used_as_given(cache_dir: Path, tmp_path: Path) -> None:
    trained = prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)
    rank_file = trained.vocabulary_path.parent / "ranks.tiktoken"
    mine = prepare(SAMPLE / "polish.txt", vocab=rank_file, cache_dir=tmp_path / "other", document_bytes=4096)
    assert mine.identity == trained.identity and mine.vocabulary_path.parent.name.startswith("user-")
    assert pack_bytes(mine) == pack_bytes(trained)
    with pytest.raises(ValueError, match="'bytes'"):
        prepare(SAMPLE / "polish.txt", vocab="bytes", cache_dir=cache_dir)


def _prepare_in_child(cache_dir: str) -> str:
    return str(prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL).tokens_dir)


def test_two_processes_preparing_at_once_share_one_good_pack(cache_dir: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_prepare_in_child, [str(cache_dir)] * 2)
    assert results[0] == results[1]
    Pack(Path(results[0]), verify=True)
    assert [p.name for p in (cache_dir / "packs").iterdir() if not p.name.endswith(".lock")] == [Path(results[0]).name]


KILL_MID_STREAM = """
import os, signal, sys
from tokpack import prepare
def progress(event):
    if event.stage == "encoding" and event.done_bytes > 50_000:
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no finally: as a power cut
prepare(sys.argv[1], cache_dir=sys.argv[2], vocab_size=600, document_bytes=4096, batch_documents=1, progress=progress)
"""


def test_a_writer_killed_mid_stream_leaves_nothing_that_opens(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    child = subprocess.run([sys.executable, "-c", KILL_MID_STREAM, str(SAMPLE / "polish.txt"), str(cache)])
    assert child.returncode == -signal.SIGKILL
    leftovers = [p for p in (cache / "packs").iterdir() if not p.name.endswith(".lock")]
    assert leftovers and all(p.name.startswith(".") for p in leftovers)  # only a hidden temporary
    with pytest.raises(ValueError):
        Pack(leftovers[0])  # and it does not open: no meta.json was ever written
    rerun = prepare(SAMPLE / "polish.txt", cache_dir=cache, **SMALL)
    assert not [p for p in (cache / "packs").iterdir() if p.name.startswith(".")]  # the abandoned one is gone
    undisturbed = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "clean", **SMALL)
    assert pack_bytes(rerun) == pack_bytes(undisturbed)


def test_tokens_are_uint16_and_match_meta_counts(cache_dir: Path) -> None:
    prepared = prepare(SAMPLE / "polish.txt", cache_dir=cache_dir, **SMALL)
    tokens = np.load(prepared.tokens_dir / "tokens.npy", mmap_mode="r")
    assert tokens.dtype == np.uint16 and len(tokens) == prepared.meta.n_tokens
    assert int(tokens.max()) < prepared.n_vocab
