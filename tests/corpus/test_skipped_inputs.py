"""``on_error='skip'``: an input that is no text (invalid UTF-8, a binary) is named with the way out, and a
run that would skip every input is refused with a fix that fits."""

from __future__ import annotations

from pathlib import Path

from cli_runs import cli_run, prepare_json
from typer.testing import CliRunner

from tokpack.cli import app

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
