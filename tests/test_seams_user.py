"""Seams a new user hit: a split manifest keeps the cut it was made with, a skip-everything run
is refused, exports carry their vocabulary, and flags are named as typed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.vocab import BpeTokenizer

from conftest import DATA

runner = CliRunner()
EOT = "<|endoftext|>"


@pytest.fixture(scope="session")
def byte_vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level vocabulary (ids are the bytes, ``<|endoftext|>`` 256)."""
    return BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).save(tmp_path_factory.mktemp("vocab"))


@pytest.fixture()
def eot_corpus(tmp_path: Path) -> Path:
    texts = [path.read_text(encoding="utf-8") for path in sorted((DATA / "polish" / "narrative").glob("*.txt"))]
    corpus = tmp_path / "eot.txt"
    corpus.write_text(EOT.join(texts), encoding="utf-8")
    return corpus


def _run(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [*map(str, args)])
    return result.exit_code, result.output


def test_a_separator_split_is_refused_without_the_separator(eot_corpus: Path, byte_vocab: Path, tmp_path: Path) -> None:
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab, "--separator", EOT, "--validation", "0.2",
                        "--cache-dir", tmp_path / "cache")
    assert code == 0, output
    # Later, without the separator: read with the manifest's (never with the literal separator in documents).
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab, "--cache-dir", tmp_path / "cache",
                        "-o", tmp_path / "later")
    assert code == 0, output
    assert json.loads((tmp_path / "later" / "meta.json").read_text())["cut"]["separator"] == EOT
    # Retrying the same split without it finds the same manifest.
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "0.2",
                        "--cache-dir", tmp_path / "cache")
    assert code == 0, output
    # Another document size is named too.
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab, "--separator", EOT, "--document-bytes", "500",
                        "--cache-dir", tmp_path / "cache")
    assert code == 2, output
    assert "--document-bytes 1048576" in output and "--document-bytes 500" in output
    # The same cut still works.
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab, "--separator", EOT, "--cache-dir", tmp_path / "cache")
    assert code == 0, output


def test_other_shares_name_the_shares_made_with(eot_corpus: Path, byte_vocab: Path, tmp_path: Path) -> None:
    assert _run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "0.2", "--cache-dir", tmp_path / "c")[0] == 0
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "0.3", "--cache-dir", tmp_path / "c")
    assert code == 2 and "--validation 0.2" in output, output


def test_skipping_every_file_is_refused(byte_vocab: Path, tmp_path: Path) -> None:
    folder = tmp_path / "gz"
    folder.mkdir()
    for name in ("a.1.gz", "b.1.gz"):
        (folder / name).write_bytes(b"\x1f\x8b\x08\x00\xff\xfe binary")
    code, output = _run("prepare", folder, "--vocab", byte_vocab, "--on-error", "skip", "-o", tmp_path / "p",
                        "--cache-dir", tmp_path / "cache")
    assert code == 2, output
    assert "skipped every file or record (2)" in output and "a.1.gz" in output
    assert not (tmp_path / "p").exists()


def test_skipping_every_binary_file_gives_a_fix_that_fits(byte_vocab: Path, tmp_path: Path) -> None:
    """Compressed text is read as its text, so the fix for inputs that are no text never says to decompress."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "tool").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)))
    code, output = _run("prepare", folder, "--vocab", byte_vocab, "--on-error", "skip", "-o", tmp_path / "p",
                        "--cache-dir", tmp_path / "cache")
    assert code == 2 and "skipped every file or record (1)" in output, output
    assert "decompress" not in output and output.rstrip().endswith("fix these inputs, or give the text they hold"), output


def test_help_and_refusals_name_the_flags(eot_corpus: Path, byte_vocab: Path, tmp_path: Path) -> None:
    helped = runner.invoke(app, ["import", "--help"], terminal_width=400).output
    kind = " ".join(helped.split()).split("--kind", 1)[1].split(" --", 1)[0]
    assert all(name in kind for name in ("litdata", "mds", "hf")), kind
    prepare_help = " ".join(runner.invoke(app, ["prepare", "--help"], terminal_width=400).output.split())
    assert "pack folder" in prepare_help.split("--vocab ", 1)[1].split(" --", 1)[0]
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "1.5")
    assert code == 2 and "--validation 1.5" in output and "up to, not including, 1" in output, output
    # A folder takes --validation too (whole files held out), its split written beside it, not refused.
    folder = tmp_path / "narrative"
    shutil.copytree(DATA / "polish" / "narrative", folder)
    code, output = _run("prepare", folder, "--vocab", byte_vocab, "--validation", "0.1", "--cache-dir", tmp_path / "c")
    assert code == 0 and (tmp_path / "narrative.manifest.json").is_file(), output
    # A rank file with its vocabulary.json beside it records its pattern: --pattern is named.
    code, output = _run("prepare", eot_corpus, "--vocab", byte_vocab.parent / "ranks.tiktoken", "--pattern", "polish",
                        "--cache-dir", tmp_path / "c")
    assert code == 2 and "--pattern" in output and "pattern= contradicts" not in output and "drop --pattern" in output, output


def test_tokenizer_train_words_an_unreachable_size_as_prepare_does(tmp_path: Path) -> None:
    (tmp_path / "t" / "prose").mkdir(parents=True)
    (tmp_path / "t" / "prose" / "a.txt").write_text("hello world, hello again\n", encoding="utf-8")
    code, output = _run("tokenizer", "train", tmp_path / "t", "-o", tmp_path / "o" / "tokenizer.json", "--vocab-size", "400")
    assert code == 2, output
    reached = int(output.split("reaches only ")[1].split(" ")[0].replace(",", ""))
    assert f"pass --vocab-size {reached} or less" in output and "--allow-smaller-vocab" in output, output


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack (with its vocabulary/) exported in every format."""
    root = tmp_path_factory.mktemp("exports")
    texts = [path.read_text(encoding="utf-8") for path in sorted((DATA / "polish" / "narrative").glob("*.txt"))]
    (root / "c.txt").write_text(EOT.join(texts), encoding="utf-8")
    vocab = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).save(root / "vocab")
    code, output = _run("prepare", root / "c.txt", "--vocab", vocab, "--separator", EOT, "--validation", "0.2",
                        "-o", root / "pack", "--cache-dir", root / "cache")
    assert code == 0, output
    for fmt in FORMATS:
        code, output = _run("export", root / "pack", root / "ex" / fmt, "-f", fmt)
        assert code == 0, output
    return root


FORMATS = ("hf", "litdata", "mds", "nanogpt", "megatron")


@pytest.mark.parametrize("fmt", FORMATS)
def test_exports_carry_the_vocabulary_and_imports_keep_it(exported: Path, fmt: str) -> None:
    folder = exported / "ex" / (f"{fmt}.vocabulary" if fmt == "megatron" else f"{fmt}/vocabulary")
    pack_vocabulary = exported / "pack" / "vocabulary"
    assert sorted(path.name for path in folder.iterdir()) == sorted(path.name for path in pack_vocabulary.iterdir())
    # The files decode the ids on their own: Hugging Face's tokenizer.json reads as the pack's.
    from tokenizers import Tokenizer

    assert Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size() == 257
    imported = exported / "im" / fmt
    code, output = _run("import", exported / "ex" / fmt, imported)
    assert code == 0, output
    assert (imported / "vocabulary" / "tokenizer.json").read_bytes() == (pack_vocabulary / "tokenizer.json").read_bytes()
    code, output = _run("inspect", imported, "--decode", "0")
    assert code == 0 and "not carried" not in output, output


def test_an_altered_vocabulary_file_in_an_export_is_refused(exported: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "hf"
    shutil.copytree(exported / "ex" / "hf", copy)
    with open(copy / "vocabulary" / "vocabulary.json", "a", encoding="utf-8") as handle:
        handle.write(" ")
    for command in (["inspect", copy], ["import", copy, tmp_path / "im"]):
        code, output = _run(*command)
        assert code == 2 and "vocabulary.json" in output and "SHA-256 differs" in output, output
