"""Messages a new user reads, said right: a job array's output names only the jobs it wrote, in
the right number; an expired challenge says the day it names and how to audit an old proof; a
resume on other data says what to pass on the command line; the help says what the code does;
and the README and guides say what the dev script and the extras install."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokpack.bpe.challenge import make_proof, new_challenge
from tokpack.chess.jobs.pipeline import available_months
from tokpack.chess.pgn.convert import convert_pgn
from tokpack.cli import app
from tokpack.serve.memory import pack_of_documents

from conftest import REPO
from example_runs import run_example

runner = CliRunner()


def said(*args: object) -> tuple[int, str]:
    """Exit code and output (joined into one line: rich wraps long lines) of ``tokpack ARGS``."""
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, " ".join(result.output.split())


def test_a_chess_job_array_names_only_the_jobs_it_wrote(tmp_path: Path) -> None:
    convert_pgn([REPO / "tests" / "fixtures" / "chess_games.pgn"], tmp_path / "games")
    months = available_months(tmp_path / "games")
    (tmp_path / "chess.toml").write_text(
        f'games_dir = "{tmp_path / "games"}"\nout_dir = "{tmp_path / "tokens"}"\n'
        f"train_months = {months[:-1]!r}\nval_months = {months[-1:]!r}\n".replace("'", '"'), encoding="utf-8")
    code, output = said("chess", "tokenize", "--scheme", "uci", "--pack", "--engine", "array",
                        "--config", tmp_path / "chess.toml")
    assert code == 0, output
    train = tmp_path / "tokens" / "uci" / "train"
    assert f"job written to {train}; run its 1 shard as a job array" in output
    assert "1 shards" not in output
    assert f"wrote {train}" not in output and not (train / "dataset.json").exists()


def test_an_expired_challenge_names_its_day_and_the_way_to_audit_an_old_proof(tmp_path: Path) -> None:
    corpus = ["abab ab", "aaaa ba", "abba"]
    challenge = new_challenge(corpus, 3, challenge_id="c2", expires="2020-01-01")
    (tmp_path / "c.json").write_text(challenge.to_json(), encoding="utf-8")
    (tmp_path / "p.json").write_text(make_proof(new_challenge(corpus, 3, challenge_id="c2")).to_json(), encoding="utf-8")
    code, output = said("bpe", "verify", tmp_path / "p.json", tmp_path / "c.json")
    assert code == 2
    assert "challenge c2 expired at the end of 2020-01-01" in output and "2020-01-02" not in output
    assert output.rstrip().endswith("an old proof is checked against it with --ignore-expiry"), output
    assert said("bpe", "verify", tmp_path / "p.json", tmp_path / "c.json", "--ignore-expiry")[0] == 0


def test_resuming_on_other_data_says_what_to_pass_on_the_command_line(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the torch extra is not installed (./dev test installs it)")
    ids = np.arange(900) % 97 + 1
    packs = {name: pack_of_documents([(ids[i : i + 23] + shift) % 97 + 1 for i in range(0, 900, 23)], n_vocab=100,
                                     pad_id=0, directory=tmp_path / name)
             for name, shift in (("apack", 0), ("jpack", 5))}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", TOKPACK_CACHE=str(tmp_path / "cache"))
    tiny = ["--length", "8", "--layers", "1", "--width", "16", "--heads", "2", "--threads", "1", "--global-batch", "2"]
    example = REPO / "examples" / "train_gpt.py"
    saved = run_example(example, ["--data", str(packs["apack"]), "--steps", "2", "--save", str(tmp_path / "run.pt"), *tiny], env=env)
    assert saved.returncode == 0, saved.stderr
    resumed = run_example(example, ["--resume", str(tmp_path / "run.pt"), "--data", str(packs["jpack"]), "--steps", "4",
                                    "--threads", "1"], env=env)
    assert resumed.returncode == 2, resumed.stderr
    message = resumed.stderr.strip()
    assert message.startswith("train_gpt.py: error: ") and len(message.splitlines()) == 1, message
    assert "Mixture(" not in message and "--data" in message and "--mixture DIR=WEIGHT" in message
    assert re.search(r"ids \(tokens sha256\) \w+ when it was saved, \w+ in this loader", message), message


def test_the_help_says_what_the_code_does() -> None:
    code, output = said("prepare", "--help")
    assert code == 0 and "cut at the last newline at or before it" in output
    code, output = said("bpe", "train", "--help")
    assert code == 0 and all(name in output for name in ("polish-phrase", "o200k")), output


def test_the_readme_and_guides_say_what_is_installed() -> None:
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    dev = (REPO / "dev").read_text(encoding="utf-8")
    # ./dev demo installs the core alone, ./dev test the extras the README names.
    assert '_ensure_venv("", with_torch=False)' in dev and '_ensure_venv("test,torch,ray"' in dev
    assert "`./dev demo` installs the core only, `./dev test` adds the test, torch and ray extras" in readme
    assert "with everything" not in readme
    assert "The first `tokpack demo` compiles tokpack's kernels once" in readme
    (data_row,) = [line for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `data/` |")]
    assert "the tests, the demo" not in data_row and "the demo's sample is `src/tokpack/sample/`" in data_row
    # zstandard is in the core (a .zst corpus is read as its text), as docs/chess.md says.
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(d.startswith("zstandard") for d in project["dependencies"])
    assert not any(d.startswith("zstandard") for d in project["optional-dependencies"]["chess"])
    chess = " ".join((REPO / "docs" / "chess.md").read_text(encoding="utf-8").split())
    assert "`zstandard` is in the core" in chess and "`zstandard` comes with the `chess` extra" not in chess


def test_one_document_is_counted_in_the_singular(tmp_path: Path) -> None:
    from tokpack.vocab.bytelevel import BpeTokenizer

    corpus = tmp_path / "one.txt"
    corpus.write_text("Ala ma kota.\n", encoding="utf-8")
    vocab = BpeTokenizer(ranks={bytes([b]): b for b in range(256)},
                         special_tokens={"<|endoftext|>": 256}).save(tmp_path / "bytes")
    outputs = [said("prepare", corpus, "--vocab", vocab, "--shards", "1", "-o", tmp_path / "ds"),
               said("inspect", tmp_path / "ds"), said("merge", tmp_path / "ds", tmp_path / "merged"),
               said("export", tmp_path / "merged", tmp_path / "nano", "--format", "nanogpt"),
               said("import", tmp_path / "nano", tmp_path / "back", "--tokenizer", vocab)]
    for code, output in outputs:
        assert code == 0, output
        assert "1 document" in output and "1 documents" not in output and "1 shards" not in output, output


def test_an_empty_held_out_range_of_a_folder_names_the_fix_that_works(tmp_path: Path) -> None:
    """A folder holds out whole files: when --validation comes to less than one, a smaller
    --document-bytes cannot help, so the warning names only a larger share."""
    from tokpack.vocab.bytelevel import BpeTokenizer

    folder = tmp_path / "docs"
    folder.mkdir()
    for index in range(5):
        (folder / f"{index}.txt").write_text(f"Dokument {index}: Ala ma kota.\n", encoding="utf-8")
    vocab = BpeTokenizer(ranks={bytes([b]): b for b in range(256)},
                         special_tokens={"<|endoftext|>": 256}).save(tmp_path / "bytes")
    result = runner.invoke(app, ["prepare", str(folder), "--vocab", str(vocab), "--validation", "0.01",
                                 "-o", str(tmp_path / "pack")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    warning = " ".join(result.output.split())
    assert "'validation' range" in warning and "holds no document" in warning, warning
    assert "a larger --validation (whole files, records or rows are held out" in warning
    assert "--document-bytes" not in warning
