"""Where ``prepare`` writes: a new or empty folder (or a pack of the same corpus); the root of the
file system, a file, a folder holding other files, or one that cannot be written is refused with
one line that says what to do, before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.store import Pack
from tokpack.vocab.bytelevel import BpeTokenizer


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "corpus.txt").write_text("Ala ma kota.\nKot ma Alę.\n" * 20, encoding="utf-8")
    BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256}).save(folder / "vocab")
    return folder / "corpus.txt", folder / "vocab" / "vocabulary.json"


def prepare(inputs: tuple[Path, Path], out: Path | str, *extra: str) -> tuple[int, str]:
    corpus, vocab = inputs
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(vocab), "-o", str(out),
                                      "--cache-dir", str(corpus.parent / "cache"), *extra])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def refused(code: int, output: str, *words: str) -> None:
    assert code == 2 and len(output.strip().splitlines()) == 1, output
    assert output.startswith("error: ") and "internal error" not in output and "cache" not in output, output
    for word in words:
        assert word in output, output


def test_the_root_of_the_file_system_is_refused(inputs: tuple[Path, Path]) -> None:
    """(``--shards`` into ``/`` is refused as a folder of other files, below, where a failure
    would not write into the root.)"""
    before = sorted(os.listdir("/"))
    refused(*prepare(inputs, "/"), "root of the file system", "-o")
    assert sorted(os.listdir("/")) == before


@pytest.mark.parametrize("shards", [[], ["--shards", "2"]])
def test_a_folder_of_other_files_or_a_file_is_refused_and_left_alone(inputs: tuple[Path, Path], tmp_path: Path,
                                                                    shards: list[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    refused(*prepare(inputs, tmp_path, *shards), "holds other files", "notes.txt" if shards else "no pack")
    assert os.listdir(tmp_path) == ["notes.txt"]
    refused(*prepare(inputs, tmp_path / "notes.txt", *shards), "is a file")


@pytest.mark.parametrize("shards", [[], ["--shards", "2"]])
def test_an_empty_folder_takes_the_output(inputs: tuple[Path, Path], tmp_path: Path, shards: list[str]) -> None:
    (tmp_path / "out").mkdir()
    code, output = prepare(inputs, tmp_path / "out", *shards)
    assert code == 0, output
    if not shards:
        assert Pack(tmp_path / "out", verify=True).n_docs > 0
        assert prepare(inputs, tmp_path / "out")[0] == 0  # the same pack again: checked and used


@pytest.mark.parametrize("shards", [[], ["--shards", "2"]])
def test_a_folder_that_cannot_be_written_says_so_not_the_cache(inputs: tuple[Path, Path], shards: list[str]) -> None:
    unwritable = Path("/sys/tokpack-output")  # sysfs takes no new files, whoever asks (root included)
    if not Path("/sys/kernel").is_dir():
        pytest.skip("needs Linux's /sys, a folder no one can write")
    refused(*prepare(inputs, unwritable / "pack", *shards), str(unwritable), "-o")


@pytest.mark.parametrize("shards", [[], ["--shards", "2"]])
def test_a_folder_the_corpus_reads_through_a_link_is_refused(inputs: tuple[Path, Path], tmp_path: Path,
                                                            shards: list[str]) -> None:
    """A corpus folder's linked subfolder is read as the corpus: an output inside it would be
    read as text by the next task or run, as one inside the corpus folder itself would."""
    corpus, vocab = inputs
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_bytes(corpus.read_bytes())
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "texts" / "more").symlink_to(tmp_path / "elsewhere")
    for out in (tmp_path / "elsewhere", tmp_path / "elsewhere" / "out"):
        result = CliRunner().invoke(app, ["prepare", str(tmp_path / "texts"), "--vocab", str(vocab), "-o", str(out),
                                          "--cache-dir", str(tmp_path / "store"), *shards])
        refused(result.exit_code, result.output, "through its link", str(tmp_path / "texts" / "more"))
        assert os.listdir(tmp_path / "elsewhere") == []


def test_a_cache_inside_the_corpus_folder_is_refused_and_a_hidden_one_is_used(tmp_path: Path) -> None:
    """A cache in the corpus folder would be read by the next run as corpus text: its packs are
    refused as binary, and with ``on_error="skip"`` its vocabularies' JSON would be trained on.
    A hidden folder is never read as the corpus (``~/.cache`` when the corpus is ``~``)."""
    import tokpack
    from tokpack.errors import InputError

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("Ala ma kota.\nKot ma Alę.\n" * 20, encoding="utf-8")
    ranks = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256})
    with pytest.raises(InputError, match=f"{folder / 'cache'}: the cache is inside the corpus folder {folder}.*"
                                         "outside the corpus"):
        tokpack.prepare(folder, vocab=ranks, cache_dir=folder / "cache")
    assert not (folder / "cache").exists()
    result = CliRunner().invoke(app, ["prepare", str(folder), "--vocab-size", "260", "--cache-dir", str(folder / "c")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    tokpack.prepare(folder, vocab=ranks, cache_dir=folder / ".cache" / "tokpack")
    tokpack.prepare(folder, vocab=ranks, cache_dir=folder / ".cache" / "tokpack")  # read again: the cache is not text
