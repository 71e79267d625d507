"""``on_error='skip'``: an input that is no text (invalid UTF-8, a binary) is named with the way out, and a
run that would skip every input is refused with a fix that fits."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runs import cli_run, prepare_json
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.errors import InputsSkipped
from tokpack.preparing import prepare

runner = CliRunner()


def test_invalid_utf8_in_a_folder_names_on_error_skip(tmp_path: Path, byte_vocab: Path) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("fine\n", encoding="utf-8")
    (folder / "b.txt").write_bytes(b"abc\xff\n")
    result = runner.invoke(app, ["prepare", str(folder), "--vocab", str(byte_vocab), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2 and "invalid UTF-8 at byte 3" in result.output and "--on-error skip" in result.output
    skipped = prepare_json(folder, "--vocab", byte_vocab, "--cache-dir", tmp_path / "c", "--on-error", "skip")
    assert skipped["counts"]["skipped"] == 1


def test_skipping_every_file_is_refused(byte_vocab: Path, tmp_path: Path) -> None:
    folder = tmp_path / "gz"
    folder.mkdir()
    for name in ("a.1.gz", "b.1.gz"):
        (folder / name).write_bytes(b"\x1f\x8b\x08\x00\xff\xfe binary")
    code, output = cli_run("prepare", folder, "--vocab", byte_vocab, "--on-error", "skip", "-o", tmp_path / "p",
                        "--cache-dir", tmp_path / "cache")
    assert code == 2, output
    assert "skipped every file or record (2)" in output and "a.1.gz" in output
    assert not (tmp_path / "p").exists()


def test_skipping_every_binary_file_gives_a_fix_that_fits(byte_vocab: Path, tmp_path: Path) -> None:
    """Compressed text is read as its text, so the fix for inputs that are no text never says to decompress."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "tool").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)))
    code, output = cli_run("prepare", folder, "--vocab", byte_vocab, "--on-error", "skip", "-o", tmp_path / "p",
                        "--cache-dir", tmp_path / "cache")
    assert code == 2 and "skipped every file or record (1)" in output, output
    assert "decompress" not in output and output.rstrip().endswith("fix these inputs, or give the text they hold"), output


def test_the_skipped_inputs_named_are_the_pack_s_each_once(tmp_path: Path) -> None:
    """A trained vocabulary reads the training files before the pack is encoded; the warning names
    the inputs the pack left out, each once (not a mix of both passes' skips)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name in "abcdefgh":
        (folder / name).write_text(f"text of {name} " * 50 + "\n", encoding="utf-8")
    for name in "beg":
        (folder / f"{name}-link").symlink_to(name)
    with pytest.warns(InputsSkipped) as caught:
        prepare(folder, vocab_size=260, on_error="skip", validation=0.2, manifest=tmp_path / "split.json",
                out=tmp_path / "pack", cache_dir=tmp_path / "cache")
    [skipped] = [warning.message for warning in caught if isinstance(warning.message, InputsSkipped)]
    assert skipped.count == 3
    assert sorted(problem.split(": ", 1)[0] for problem in skipped.problems) == \
        [str(folder / f"{name}-link") for name in "beg"]


def test_a_binary_file_in_a_folder_names_on_error_skip(byte_vocab: Path, tmp_path: Path) -> None:
    """A folder of sources holds compiled files (``__pycache__``): leaving them out is a fix there; a
    lone binary corpus has nothing else to read, so its fix does not offer it."""
    folder = tmp_path / "code"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "a.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    (folder / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\x00\x00\x00\x00" + bytes(range(256)))
    code, output = cli_run("prepare", folder, "--vocab", byte_vocab, "--cache-dir", tmp_path / "c")
    line = " ".join(output.split())
    assert code == 2 and "a.cpython-311.pyc: is binary data" in line and "move it out of the corpus" in line, output
    assert "--on-error skip" in line, output
    assert prepare_json(folder, "--vocab", byte_vocab, "--cache-dir", tmp_path / "c",
                        "--on-error", "skip")["counts"]["skipped"] == 1
    code, output = cli_run("prepare", folder / "__pycache__" / "a.cpython-311.pyc", "--vocab", byte_vocab,
                           "--cache-dir", tmp_path / "c")
    assert code == 2 and "is binary data" in output and "on-error" not in output, output
