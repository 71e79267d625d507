"""A text file's manifest pins the document cut its ranges were made with: later runs that do not
ask for another cut read it that way (``bpe train`` included), and the warning of an empty
held-out range names the manifest to delete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.bpe import train_from_files
from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.preparing import prepare

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stderr


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    # Documents of about 2 KB (a line each), so --document-bytes 4096 and 1 MiB cut them differently.
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"doc {i} " + "the cat sat on the mat " * 90 + "\n" for i in range(60)), encoding="utf-8")
    return path


def test_later_runs_take_the_manifest_cut(corpus: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    code, err = run("prepare", str(corpus), "--vocab-size", "265", "--validation", "0.1", "--document-bytes", "4096",
                    "-o", str(tmp_path / "pack"), "--cache-dir", cache)
    assert code == 0, err
    made_by = json.loads((tmp_path / "corpus.txt.manifest.json").read_text())["made_by"]
    assert made_by["document_bytes"] == 4096

    code, err = run("bpe", "train", str(corpus), "-o", str(tmp_path / "vocab"), "--vocab-size", "265")
    assert code == 0, err
    assert (tmp_path / "vocab" / "ranks.tiktoken").is_file()

    again = prepare(corpus, vocab_size=265, cache_dir=cache)  # no document_bytes: the manifest's
    assert again.meta.cut.document_bytes == 4096
    assert train_from_files(corpus, 5, workers=1).training.merges

    code, err = run("prepare", str(corpus), "--vocab-size", "265", "--cache-dir", cache)  # CLI, no flag
    assert code == 0, err


def test_an_explicit_other_cut_is_still_refused(corpus: Path, tmp_path: Path) -> None:
    code, err = run("prepare", str(corpus), "--vocab-size", "265", "--validation", "0.1", "--document-bytes", "4096",
                    "-o", str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "cache"))
    assert code == 0, err
    code, err = run("bpe", "train", str(corpus), "-o", str(tmp_path / "vocab"), "--document-bytes", "8192")
    assert code == 2 and "its ranges were cut with --document-bytes 4096" in err, err
    with pytest.raises(InputError, match="document_bytes=4096"):
        prepare(corpus, vocab_size=265, cache_dir=tmp_path / "cache", document_bytes=8192)


def test_bpe_train_reads_a_manifest_elsewhere(corpus: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "elsewhere.json"
    code, err = run("prepare", str(corpus), "--vocab-size", "265", "--validation", "0.1", "--document-bytes", "4096",
                    "--manifest", str(manifest), "-o", str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "cache"))
    assert code == 0, err
    code, err = run("bpe", "train", str(corpus), "-o", str(tmp_path / "vocab"), "--vocab-size", "265",
                    "--manifest", str(manifest), "--document-bytes", "1024")
    assert code == 2 and "elsewhere.json" in err and "--document-bytes 4096" in err, err


def test_an_empty_held_out_range_names_the_manifest_to_delete(tmp_path: Path) -> None:
    corpus = tmp_path / "big.txt"
    corpus.write_text("".join("x" * 3000 + "\n" for _ in range(3)), encoding="utf-8")  # three big documents
    code, err = run("prepare", str(corpus), "--vocab-size", "257", "--validation", "0.05",
                    "--cache-dir", str(tmp_path / "cache"))
    manifest = tmp_path / "big.txt.manifest.json"
    assert code == 0 and f"delete {manifest} and cut again with a smaller --document-bytes" in " ".join(err.split()), err
    manifest.unlink()  # the fix the warning names
    code, err = run("prepare", str(corpus), "--vocab-size", "257", "--validation", "0.05", "--document-bytes", "200",
                    "--cache-dir", str(tmp_path / "cache"))
    assert code == 0 and "warning" not in err, err
