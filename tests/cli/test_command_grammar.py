"""One grammar for every command: each takes ``-h`` and prints plain text, an output is ``-o``/``--out``,
sizes count ids alike, choices are offered rather than checked by hand, help and refusals name the
flags, and ``inspect --json`` prints the record with long paths whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_runs import cli_run
from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import app

from conftest import DATA

runner = CliRunner()


def test_inspect_json_is_the_record_and_long_paths_are_never_cut(tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-folder-name-" * 6) / "pack"
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((DATA / "polish" / "narrative" / sorted(p.name for p in (DATA / "polish" / "narrative").glob("*.txt"))[0]).read_bytes())
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c"), "--out", str(deep)],
                         env={"COLUMNS": "60"})
    assert made.exit_code == 0, made.output
    assert str(deep) in made.output.replace("\n", "") and "…" not in made.output
    shown = runner.invoke(app, ["inspect", str(deep), "--verify", "--json"])
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert record["verified"] is True and record["schema"].startswith("tokpack.") and record["n_tokens"] > 0


def _commands() -> list[list[str]]:
    import click
    import typer.main

    found: list[list[str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        found.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_every_command_takes_dash_h_and_its_help_is_plain_text() -> None:
    commands = _commands()
    assert ["prepare"] in commands and ["tokenizer", "train"] in commands and len(commands) > 12
    for path in commands:
        result = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "120"})
        assert result.exit_code == 0, (path, result.output)
        for leak in ("<bool>", "``", ":func:", ":class:", "[bold", "\x1b["):
            assert leak not in result.output, (path, leak)
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("tokpack ")


def test_one_grammar_for_outputs_sizes_trainers_and_choices(tmp_path: Path) -> None:
    import inspect

    from tokpack.cli import corpus as corpus_cli
    from tokpack.cli import tokenizer as tokenizer_cli
    from tokpack.grading.training import TrainingRecipe

    # Every option that names a file or folder to write is --out with -o.
    for path in _commands():
        options = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "200"}).output
        declared = [line.split()[:3] for line in options.splitlines() if line.startswith("  -")]
        if any("--output" in names or "--out" in names for names in declared):
            assert any(names[:2] == ["-o,", "--out,"] or names[:2] == ["-o,", "--out"] for names in declared), path
    # --vocab-size counts ids, <|endoftext|> included, in prepare as in tokenizer train.
    corpus = tmp_path / "c.txt"
    corpus.write_bytes((DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_bytes()[:30_000])
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c"), "--json",
                               "--pattern", "gpt4", "--trainer", "hf"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["vocabulary"]["n_vocab"] == 300
    # The same default trainer everywhere, offered as choices rather than checked by hand.
    prepare_default = inspect.signature(corpus_cli.prepare_command).parameters["trainer"].default.default
    train_default = inspect.signature(tokenizer_cli.train).parameters["trainer"].default.default
    assert prepare_default.value == train_default.value == TrainingRecipe(vocab_size=300).trainer == "exact"
    assert inspect.signature(prepare).parameters["trainer"].default == "exact"
    bad = runner.invoke(app, ["prepare", str(corpus), "--on-error", "ignore"])
    assert bad.exit_code == 2 and "error: Invalid value for '--on-error': 'ignore' is not one of 'raise', 'skip'" in bad.output


def test_help_and_refusals_name_the_flags(eot_corpus: Path, byte_vocab: Path, tmp_path: Path) -> None:
    helped = runner.invoke(app, ["import", "--help"], terminal_width=400).output
    kind = " ".join(helped.split()).split("--kind", 1)[1].split(" --", 1)[0]
    assert all(name in kind for name in ("litdata", "mds", "hf")), kind
    prepare_help = " ".join(runner.invoke(app, ["prepare", "--help"], terminal_width=400).output.split())
    assert "pack folder" in prepare_help.split("--vocab ", 1)[1].split(" --", 1)[0]
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab, "--validation", "1.5")
    assert code == 2 and "--validation must be a finite number of at least 0 and at most 1, got 1.5" in output, output
    # A folder takes --validation too (whole files held out), its split written beside it, not refused.
    folder = tmp_path / "narrative"
    shutil.copytree(DATA / "polish" / "narrative", folder)
    code, output = cli_run("prepare", folder, "--vocab", byte_vocab, "--validation", "0.1", "--cache-dir", tmp_path / "c")
    assert code == 0 and (tmp_path / "narrative.manifest.json").is_file(), output
    # A rank file with its vocabulary.json beside it records its pattern: --pattern is named.
    code, output = cli_run("prepare", eot_corpus, "--vocab", byte_vocab.parent / "ranks.tiktoken", "--pattern", "polish",
                        "--cache-dir", tmp_path / "c")
    assert code == 2 and "--pattern" in output and "pattern= contradicts" not in output and "drop --pattern" in output, output
