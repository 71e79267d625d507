"""The trainers (``prepare``'s, ``tokenizer train``, ``bpe train``): one default pattern, stated in each
command's help; a vocabulary size the text cannot reach is refused naming the reachable count (or
accepted on request), in the same words everywhere; ``vocab=`` with training settings is refused; a
trained vocabulary depends on the request (its training range), never on what the cache held."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runs import cli_json, cli_refused, cli_run, polish_corpus_in
from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.grading.training import TrainingRecipe
from tokpack.vocab import GPT4_PATTERN

from conftest import REPO

runner = CliRunner()
ARTIFACT = REPO / "artifacts" / "polish-8192"


def test_every_trainer_defaults_to_one_pattern_stated_in_its_help(tmp_path: Path) -> None:
    corpus = polish_corpus_in(tmp_path / "a")
    prepared = cli_json("prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c"))
    folder = tmp_path / "domains" / "prose"
    folder.mkdir(parents=True)
    shutil.copy(corpus, folder / "c.txt")
    trained = runner.invoke(app, ["tokenizer", "train", str(folder.parent), "-o", str(tmp_path / "t" / "tokenizer.json"),
                                  "--vocab-size", "300"])
    assert trained.exit_code == 0, trained.output
    merged = runner.invoke(app, ["bpe", "train", str(corpus), "-o", str(tmp_path / "b"), "--vocab-size", "300"])
    assert merged.exit_code == 0, merged.output
    patterns = {json.loads(Path(prepared["vocabulary_file"]).read_text())["pattern"],
                json.loads((tmp_path / "t" / "vocabulary.json").read_text())["pattern"],
                json.loads((tmp_path / "b" / "vocabulary.json").read_text())["pattern"]}
    assert patterns == {GPT4_PATTERN} and TrainingRecipe(vocab_size=300).pattern == GPT4_PATTERN
    for command in (["prepare"], ["tokenizer", "train"], ["bpe", "train"]):
        helped = runner.invoke(app, [*command, "--help"], terminal_width=400)
        option = " ".join(helped.output.split()).split("--pattern", 1)[1].split(" --", 1)[0]
        assert "default: gpt4" in option or "gpt4 by default" in option, (command, option)


def test_an_unreachable_vocab_size_is_refused_naming_the_reachable_count(tmp_path: Path) -> None:
    corpus = polish_corpus_in(tmp_path / "a")
    message = cli_refused("prepare", str(corpus), "--cache-dir", str(tmp_path / "c"))  # GPT-2's 50,257 by default
    assert "reaches only" in message and "50,257" in message and "--allow-smaller-vocab" in message
    reachable = int(message.split("reaches only ")[1].split(" ")[0].replace(",", ""))
    accepted = cli_json("prepare", str(corpus), "--allow-smaller-vocab", "--cache-dir", str(tmp_path / "c"))
    assert accepted["vocabulary"]["n_vocab"] == reachable < 50257
    with pytest.raises(InputError, match=f"reaches only {reachable:,} ids"):
        prepare(corpus, cache_dir=tmp_path / "c")
    # The other trainers: the same refusal, the same opt-in.
    assert "--allow-smaller-vocab" in cli_refused("bpe", "train", str(corpus), "-o", str(tmp_path / "b"), "--vocab-size", "50257")
    assert not (tmp_path / "b").exists()
    accepted_bpe = runner.invoke(app, ["bpe", "train", str(corpus), "-o", str(tmp_path / "b"), "--vocab-size", "50257",
                                       "--allow-smaller-vocab"])
    assert accepted_bpe.exit_code == 0, accepted_bpe.output
    folder = tmp_path / "domains" / "prose"
    folder.mkdir(parents=True)
    shutil.copy(corpus, folder / "c.txt")
    out = str(tmp_path / "t" / "tokenizer.json")
    assert "--allow-smaller-vocab" in cli_refused("tokenizer", "train", str(folder.parent), "-o", out, "--vocab-size", "50257")
    smaller = runner.invoke(app, ["tokenizer", "train", str(folder.parent), "-o", out, "--vocab-size", "50257",
                                  "--allow-smaller-vocab"])
    assert smaller.exit_code == 0, smaller.output


def test_vocab_with_vocab_size_is_refused_and_tokenizer_train_says_what_it_reads(tmp_path: Path) -> None:
    corpus = polish_corpus_in(tmp_path / "a")
    message = cli_refused("prepare", str(corpus), "--vocab", str(ARTIFACT / "tokenizer.json"), "--vocab-size", "300",
                      "--cache-dir", str(tmp_path / "c"))
    assert "--vocab-size" in message and "--vocab " in message
    message = cli_refused("prepare", str(corpus), "--vocab", str(ARTIFACT / "tokenizer.json"), "--min-frequency", "3",
                      "--cache-dir", str(tmp_path / "c"))
    assert "--min-frequency is for training" in message
    with pytest.raises(InputError, match="^vocab_size is for training a vocabulary; vocab= gives one"):
        prepare(corpus, vocab=ARTIFACT / "tokenizer.json", vocab_size=300, cache_dir=tmp_path / "c")
    message = cli_refused("tokenizer", "train", str(corpus), "-o", str(tmp_path / "t" / "tokenizer.json"))
    assert "one subfolder per domain" in message and "tokpack bpe train" in message


def test_tokenizer_train_words_an_unreachable_size_as_prepare_does(tmp_path: Path) -> None:
    (tmp_path / "t" / "prose").mkdir(parents=True)
    (tmp_path / "t" / "prose" / "a.txt").write_text("hello world, hello again\n", encoding="utf-8")
    code, output = cli_run("tokenizer", "train", tmp_path / "t", "-o", tmp_path / "o" / "tokenizer.json", "--vocab-size", "400")
    assert code == 2, output
    reached = int(output.split("reaches only ")[1].split(" ")[0].replace(",", ""))
    assert f"pass --vocab-size {reached} or less" in output and "--allow-smaller-vocab" in output, output


def test_the_same_request_gets_the_same_vocabulary_whatever_the_cache_held(tmp_path: Path) -> None:
    corpus, cache = polish_corpus_in(tmp_path / "a"), str(tmp_path / "cache")
    whole = cli_json("prepare", str(corpus), "--vocab-size", "1200", "--document-bytes", "4096", "--cache-dir", cache)
    held_out = cli_json("prepare", str(corpus), "--vocab-size", "1200", "--document-bytes", "4096", "--validation", "0.4", "-o", str(tmp_path / "p"),
                   "--cache-dir", cache)
    fresh = cli_json("prepare", str(polish_corpus_in(tmp_path / "b")), "--vocab-size", "1200", "--document-bytes", "4096", "--validation", "0.4",
                "-o", str(tmp_path / "q"), "--cache-dir", str(tmp_path / "fresh"))
    assert held_out["vocabulary"] == fresh["vocabulary"] != whole["vocabulary"]
    assert held_out["vocabulary_sample"] == fresh["vocabulary_sample"] != whole["vocabulary_sample"]
    # And a plain run afterwards works, with the vocabulary of its own request.
    again = cli_json("prepare", str(corpus), "--vocab-size", "1200", "--document-bytes", "4096", "--cache-dir", cache)
    assert again["n_tokens"] > 0
