"""The command line: the whole job end to end, and one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tokpack.cli import app

from conftest import SAMPLE

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_demo_prepares_the_sample_and_shows_a_batch(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", "--cache-dir", str(tmp_path)], env={"COLUMNS": "250"})  # table cells on one line
    code, out = result.exit_code, result.stdout
    assert code == 0
    assert "characters per token" in out and "First batch" in out and "n_vocab" in out
    assert "2,048" in out  # --vocab-size counts ids: 2,047 trained ranks and <|endoftext|>
    # The sample holds a validation range: the vocabulary saw the training range, and says so.
    assert "trained on all 0.3 MB of the training range, 34 documents (validation held out)" in out
    assert "trained on all 0.3 MB," not in out


def test_prepare_then_inspect_verify(tmp_path: Path) -> None:
    code, out, _ = run("prepare", str(SAMPLE / "polish.txt"), "--cache-dir", str(tmp_path), "--vocab-size", "400")
    assert code == 0 and "tokens" in out
    pack = next(p for p in (tmp_path / "packs").iterdir() if not p.name.endswith(".lock"))
    code, out, _ = run("inspect", str(pack), "--verify")
    assert code == 0 and "tokpack.pack.v1" in out and "checksums verified" in out


def test_missing_corpus_is_one_line_exit_2(tmp_path: Path) -> None:
    code, _, err = run("prepare", str(tmp_path / "nope.txt"), "--cache-dir", str(tmp_path))
    assert_one_line_error(code, err, "nope.txt")


def test_invalid_utf8_names_the_offset(tmp_path: Path) -> None:
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"ok\n" * 10 + b"\xc3(")
    code, _, err = run("prepare", str(corpus), "--cache-dir", str(tmp_path / "c"), "--vocab-size", "257")
    assert_one_line_error(code, err, "bad.txt", "byte 30")


def test_corrupted_cache_is_one_line_exit_2(tmp_path: Path) -> None:
    assert run("prepare", str(SAMPLE / "polish.txt"), "--cache-dir", str(tmp_path), "--vocab-size", "300")[0] == 0
    pack = next(p for p in (tmp_path / "packs").iterdir() if not p.name.endswith(".lock"))
    (pack / "starts.npy").write_bytes(b"garbage")
    code, _, err = run("prepare", str(SAMPLE / "polish.txt"), "--cache-dir", str(tmp_path), "--vocab-size", "300")
    assert_one_line_error(code, err, "starts.npy")
    code, _, err = run("inspect", str(pack))
    assert_one_line_error(code, err, "starts.npy")


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    code, _, err = run("prepare", str(SAMPLE / "polish.txt"), "--trainer", "magic", "--cache-dir", str(tmp_path))
    assert_one_line_error(code, err, "--trainer")
    code, _, err = run("prepare", str(SAMPLE / "polish.txt"), "--vocab-size", "ten")
    assert code == 2 and "--vocab-size" in err
    code, _, err = run("inspect", str(tmp_path))
    assert_one_line_error(code, err, "meta.json")
