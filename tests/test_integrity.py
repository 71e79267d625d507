"""Issue 12: every bad input and fault found so far, each reproduced and refused with a located error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokpack import prepare
from tokpack.errors import InputError, IntegrityError, TokpackError

from conftest import SAMPLE

SMALL = {"vocab_size": 300, "document_bytes": 4096, "min_frequency": 1}


def jsonl_with_a_bad_record(path: Path) -> Path:
    lines = [json.dumps({"text": f"document {i}: " + "zażółć gęślą jaźń " * 20}) for i in range(30)]
    lines[3] = '{"text": broken'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_skipped_records_are_counted_once_when_prepare_trains_its_vocabulary(tmp_path: Path) -> None:
    corpus = jsonl_with_a_bad_record(tmp_path / "corpus.jsonl")
    trained = prepare(corpus, cache_dir=tmp_path / "a", on_error="skip", **SMALL)  # trains and skips in one run
    assert trained.manifest.counts["skipped"] == 1
    # The same pack made with the vocabulary given (so the trainer never reads the corpus) says the same.
    given = prepare(corpus, vocab=trained.vocabulary_path, cache_dir=tmp_path / "b", on_error="skip", **SMALL)
    assert given.manifest.counts == trained.manifest.counts


def test_a_pack_made_skipping_is_not_reused_by_a_run_that_raises(tmp_path: Path) -> None:
    corpus = jsonl_with_a_bad_record(tmp_path / "corpus.jsonl")
    skipped = prepare(corpus, cache_dir=tmp_path / "cache", on_error="skip", **SMALL)
    with pytest.raises(ValueError, match=r"corpus\.jsonl"):  # InputError once main converts the site
        prepare(corpus, vocab=skipped.vocabulary_path, cache_dir=tmp_path / "cache", **SMALL)


# --- Item 2: a corpus that changes while prepare reads it is never published --------------------

def test_a_corpus_rewritten_during_prepare_is_refused_and_nothing_is_cached(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((SAMPLE / "polish.txt").read_bytes()[:200_000])
    vocab = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "v", **SMALL).vocabulary_path

    def rewrite(event: object) -> None:  # same size, other bytes, while encoding
        if getattr(event, "stage") == "encoding" and corpus.read_bytes()[:1] != b"#":
            with open(corpus, "r+b") as handle:
                handle.write(b"#" * 1000)

    with pytest.raises(InputError, match=r"corpus\.txt: changed while it was being read"):
        prepare(corpus, vocab=vocab, cache_dir=tmp_path / "cache", batch_documents=1, progress=rewrite, **SMALL)
    assert not any((tmp_path / "cache" / "packs").glob("*-d4096")), "a pack of the changed corpus was published"
    # Once the file is still, the pack holds the bytes its record names.
    prepared = prepare(corpus, vocab=vocab, cache_dir=tmp_path / "cache", **SMALL)
    assert prepared.tokenizer().decode_bytes(prepared.pack().tokens) == corpus.read_bytes()


def test_a_corpus_truncated_during_prepare_is_an_input_error_not_sigbus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((SAMPLE / "polish.txt").read_bytes()[:200_000])
    vocab = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "v", **SMALL).vocabulary_path
    script = f"""
import os, sys
from tokpack import prepare
from tokpack.errors import InputError
def cut(event):
    if event.stage == "encoding" and os.path.getsize({str(corpus)!r}) > 1000:
        os.truncate({str(corpus)!r}, 1000)
try:
    prepare({str(corpus)!r}, vocab={str(vocab)!r}, cache_dir={str(tmp_path / 'cache')!r}, batch_documents=1,
            progress=cut, vocab_size=300, document_bytes=4096)
except InputError as error:
    print(error)
    sys.exit(2)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])  # -7 was SIGBUS
    assert str(corpus) in run.stdout and ("truncated" in run.stdout or "changed" in run.stdout)


# --- Item 10: a FIFO or a device never blocks ----------------------------------------------------

def test_a_device_or_fifo_as_corpus_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"/dev/zero: not a regular file \(a character device\)"):
        prepare("/dev/zero", cache_dir=tmp_path / "cache", **SMALL)
    fifo = tmp_path / "corpus.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"corpus\.txt: not a regular file \(a FIFO\)"):
        prepare(fifo, cache_dir=tmp_path / "cache", **SMALL)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n")
    os.mkfifo(folder / "b.txt")
    with pytest.raises(InputError, match=r"b\.txt: not a regular file \(a FIFO\)"):
        prepare(folder, cache_dir=tmp_path / "cache", **SMALL)
    assert prepare(folder, cache_dir=tmp_path / "cache", on_error="skip", **SMALL).manifest.counts["skipped"] == 1


def test_a_fifo_as_meta_json_is_refused(tmp_path: Path) -> None:
    from tokpack.serve.memory import pack_of_documents
    from tokpack.store import Pack

    pack = pack_of_documents([[1, 2, 3]], n_vocab=8, directory=tmp_path / "pack")
    (pack / "meta.json").unlink()
    os.mkfifo(pack / "meta.json")
    with pytest.raises(TokpackError, match=r"meta\.json: not a regular file \(a FIFO\)"):
        Pack(pack)


# --- Item 5: an unreadable subfolder or file is never dropped silently ---------------------------

def test_an_unreadable_subfolder_stops_the_run_or_is_skipped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "corpus"
    (folder / "locked").mkdir(parents=True)
    (folder / "a.txt").write_text("zażółć gęślą jaźń\n" * 50, encoding="utf-8")
    (folder / "locked" / "b.txt").write_text("hidden text\n" * 50, encoding="utf-8")
    real_scandir = os.scandir

    def scandir(path: object = ".") -> object:  # what chmod 000 does for a user who is not root
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(InputError, match=r"locked: cannot read folder \(Permission denied\).*--on-error skip"):
        prepare(folder, cache_dir=tmp_path / "cache", **SMALL)
    prepared = prepare(folder, cache_dir=tmp_path / "cache", on_error="skip", **SMALL)
    assert prepared.manifest.counts["skipped"] == 1


def test_an_unreadable_file_is_skipped_with_on_error_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("zażółć gęślą jaźń\n" * 50, encoding="utf-8")
    (folder / "b.txt").write_text("hidden text\n" * 50, encoding="utf-8")
    real_open = os.open

    def refuse(path: object, flags: int, *args: object) -> int:
        if str(path).endswith("b.txt"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(InputError, match=r"b\.txt: cannot read \(Permission denied\)"):
        prepare(folder, cache_dir=tmp_path / "cache", **SMALL)
    prepared = prepare(folder, cache_dir=tmp_path / "cache", on_error="skip", **SMALL)
    assert prepared.manifest.counts["skipped"] == 1
    assert b"hidden" not in prepared.tokenizer().decode_bytes(prepared.pack().tokens)
