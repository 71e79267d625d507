"""Seams between a vocabulary and the commands that make or read one: the cache key holds the
training range, a rank file never guesses its pattern, every trainer has one default pattern, an
unreachable size is refused (or accepted on request), and a pack carries its vocabulary."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack import load_vocabulary, prepare, tokenizer_for
from tokpack.cli import app
from tokpack.errors import InputError, IntegrityError
from tokpack.grading.training import TrainingRecipe
from tokpack.store import Pack
from tokpack.vocab import GPT2_PATTERN, GPT4_PATTERN

from conftest import DATA, REPO

runner = CliRunner()
ARTIFACT = REPO / "artifacts" / "polish-8192"
FORMATS = REPO / "docs" / "formats.md"
TEXT = (DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_bytes()[:60_000]


def corpus_in(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "c.txt"
    corpus.write_bytes(TEXT[: TEXT.rindex(b"\n") + 1])
    return corpus


def cli(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def refused(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: ") and "Traceback" not in result.output, result.output
    return " ".join(result.output.split())


def test_the_same_request_gets_the_same_vocabulary_whatever_the_cache_held(tmp_path: Path) -> None:
    corpus, cache = corpus_in(tmp_path / "a"), str(tmp_path / "cache")
    whole = cli("prepare", str(corpus), "--vocab-size", "1200", "--document-bytes", "4096", "--cache-dir", cache)
    held_out = cli("prepare", str(corpus), "--vocab-size", "1200", "--document-bytes", "4096", "--validation", "0.4", "-o", str(tmp_path / "p"),
                   "--cache-dir", cache)
    fresh = cli("prepare", str(corpus_in(tmp_path / "b")), "--vocab-size", "1200", "--document-bytes", "4096", "--validation", "0.4",
                "-o", str(tmp_path / "q"), "--cache-dir", str(tmp_path / "fresh"))
    assert held_out["vocabulary"] == fresh["vocabulary"] != whole["vocabulary"]
    assert held_out["vocabulary_sample"] == fresh["vocabulary_sample"] != whole["vocabulary_sample"]
    # And a plain run afterwards works, with the vocabulary of its own request.
    again = cli("prepare", str(corpus), "--vocab-size", "1200", "--document-bytes", "4096", "--cache-dir", cache)
    assert again["n_tokens"] > 0


def test_a_rank_file_and_the_tokenizer_json_of_one_tokenizer_give_byte_identical_packs(tmp_path: Path) -> None:
    corpus = corpus_in(tmp_path / "a")
    packs = {}
    for name, vocab in (("ranks", ARTIFACT / "ranks.tiktoken"), ("json", ARTIFACT / "tokenizer.json")):
        made = cli("prepare", str(corpus), "--vocab", str(vocab), "-o", str(tmp_path / name), "--cache-dir", str(tmp_path / "c"))
        packs[name] = {str(p.relative_to(made["pack"])): p.read_bytes() for p in sorted(Path(made["pack"]).rglob("*"))
                       if p.is_file()}
    assert packs["ranks"] == packs["json"] and "tokens.npy" in packs["ranks"]
    # A rank file alone records no pattern: never guessed, asked for, then equal with the right one.
    bare = tmp_path / "bare" / "ranks.tiktoken"
    bare.parent.mkdir()
    shutil.copy(ARTIFACT / "ranks.tiktoken", bare)
    message = refused("prepare", str(corpus), "--vocab", str(bare), "--cache-dir", str(tmp_path / "c"))
    assert "--pattern" in message and "gpt4" in message and "polish" in message and str(bare) in message
    named = cli("prepare", str(corpus), "--vocab", str(bare), "--pattern", "polish-phrase", "-o", str(tmp_path / "named"),
                "--cache-dir", str(tmp_path / "c"))
    assert (Path(named["pack"]) / "tokens.npy").read_bytes() == packs["ranks"]["tokens.npy"]
    assert named["vocabulary"] == json.loads(packs["ranks"]["meta.json"])["vocabulary"]


def test_a_published_rank_file_brings_its_own_pattern_and_special_tokens(gpt2_rank_file: Path) -> None:
    gpt2 = load_vocabulary(gpt2_rank_file)
    assert gpt2.pattern == GPT2_PATTERN and gpt2.special_tokens == {"<|endoftext|>": 50256} and gpt2.n_vocab == 50257
    with pytest.raises(InputError, match="r50k_base"):
        load_vocabulary(gpt2_rank_file, pattern=GPT4_PATTERN)


def test_every_trainer_defaults_to_one_pattern_stated_in_its_help(tmp_path: Path) -> None:
    corpus = corpus_in(tmp_path / "a")
    prepared = cli("prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "c"))
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
    corpus = corpus_in(tmp_path / "a")
    message = refused("prepare", str(corpus), "--cache-dir", str(tmp_path / "c"))  # GPT-2's 50,257 by default
    assert "reaches only" in message and "50,257" in message and "--allow-smaller-vocab" in message
    reachable = int(message.split("reaches only ")[1].split(" ")[0].replace(",", ""))
    accepted = cli("prepare", str(corpus), "--allow-smaller-vocab", "--cache-dir", str(tmp_path / "c"))
    assert accepted["vocabulary"]["n_vocab"] == reachable < 50257
    with pytest.raises(InputError, match=f"reaches only {reachable:,} ids"):
        prepare(corpus, cache_dir=tmp_path / "c")
    # The other trainers: the same refusal, the same opt-in.
    assert "--allow-smaller-vocab" in refused("bpe", "train", str(corpus), "-o", str(tmp_path / "b"), "--vocab-size", "50257")
    assert not (tmp_path / "b").exists()
    accepted_bpe = runner.invoke(app, ["bpe", "train", str(corpus), "-o", str(tmp_path / "b"), "--vocab-size", "50257",
                                       "--allow-smaller-vocab"])
    assert accepted_bpe.exit_code == 0, accepted_bpe.output
    folder = tmp_path / "domains" / "prose"
    folder.mkdir(parents=True)
    shutil.copy(corpus, folder / "c.txt")
    out = str(tmp_path / "t" / "tokenizer.json")
    assert "--allow-smaller-vocab" in refused("tokenizer", "train", str(folder.parent), "-o", out, "--vocab-size", "50257")
    smaller = runner.invoke(app, ["tokenizer", "train", str(folder.parent), "-o", out, "--vocab-size", "50257",
                                  "--allow-smaller-vocab"])
    assert smaller.exit_code == 0, smaller.output


def test_vocab_with_vocab_size_is_refused_and_tokenizer_train_says_what_it_reads(tmp_path: Path) -> None:
    corpus = corpus_in(tmp_path / "a")
    message = refused("prepare", str(corpus), "--vocab", str(ARTIFACT / "tokenizer.json"), "--vocab-size", "300",
                      "--cache-dir", str(tmp_path / "c"))
    assert "--vocab-size" in message and "--vocab " in message
    message = refused("prepare", str(corpus), "--vocab", str(ARTIFACT / "tokenizer.json"), "--min-frequency", "3",
                      "--cache-dir", str(tmp_path / "c"))
    assert "--min-frequency is for training" in message
    with pytest.raises(InputError, match="^vocab_size is for training a vocabulary; vocab= gives one"):
        prepare(corpus, vocab=ARTIFACT / "tokenizer.json", vocab_size=300, cache_dir=tmp_path / "c")
    message = refused("tokenizer", "train", str(corpus), "-o", str(tmp_path / "t" / "tokenizer.json"))
    assert "one subfolder per domain" in message and "tokpack bpe train" in message


def test_a_pack_carries_its_vocabulary_and_decodes_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = corpus_in(tmp_path / "a")
    made = cli("prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "cache"))
    moved = tmp_path / "elsewhere" / "pack"
    shutil.copytree(made["pack"], moved)
    shutil.rmtree(tmp_path / "cache")
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "other-cache"))
    shown = runner.invoke(app, ["inspect", str(moved), "--decode", "0"])
    assert shown.exit_code == 0, shown.output
    first = Pack(moved)
    text = corpus.read_text(encoding="utf-8")
    assert shown.stdout.endswith(text[: len(load_vocabulary(moved).decode(first.document(0).tolist()))])
    assert f"vocabulary: {moved / 'vocabulary'}" in " ".join(shown.stdout.split()).replace("\n", "")
    assert json.loads(runner.invoke(app, ["inspect", str(moved), "--json"]).stdout)["vocabulary_dir"] == str(moved / "vocabulary")
    tokenizer = tokenizer_for(first.meta, moved)
    assert tokenizer.identity == first.vocabulary and "".join(
        tokenizer.decode(first.document(d).tolist()) for d in range(first.n_docs)) == text
    assert {p.name for p in (moved / "vocabulary").iterdir()} >= {"tokenizer.json", "ranks.tiktoken", "vocabulary.json"}
    # A tampered vocabulary file is refused, by the loader and by inspect.
    tampered = moved / "vocabulary" / "tokenizer.json"
    tampered.write_bytes(tampered.read_bytes().replace(b'"<|endoftext|>"', b'"<|endoftext|> "', 1))
    with pytest.raises(IntegrityError, match="tokenizer.json"):
        load_vocabulary(moved)
    assert "tokenizer.json" in refused("inspect", str(moved))


def test_a_sharded_dataset_carries_its_vocabulary(tmp_path: Path) -> None:
    corpus = corpus_in(tmp_path / "a")
    made = runner.invoke(app, ["prepare", str(corpus), "--vocab", str(ARTIFACT / "tokenizer.json"), "--shards", "2",
                               "--workers", "1", "--document-bytes", "4096", "--out", str(tmp_path / "d")])
    assert made.exit_code == 0, made.output
    assert load_vocabulary(tmp_path / "d").identity == load_vocabulary(ARTIFACT / "tokenizer.json").identity
    merged = runner.invoke(app, ["merge", str(tmp_path / "d"), str(tmp_path / "m")])
    assert merged.exit_code == 0, merged.output
    assert load_vocabulary(tmp_path / "m").identity == load_vocabulary(ARTIFACT / "tokenizer.json").identity


def test_a_pack_written_before_packs_carried_vocabularies_still_opens(tmp_path: Path) -> None:
    corpus = corpus_in(tmp_path / "a")
    made = cli("prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "cache"))
    old = tmp_path / "old"
    shutil.copytree(made["pack"], old)
    shutil.rmtree(old / "vocabulary")
    meta = json.loads((old / "meta.json").read_text())
    del meta["vocabulary_files"], meta["seal"]
    # Sealed as tokpack sealed meta.json before the field existed: the SHA-256 of the other fields.
    meta["seal"] = hashlib.sha256(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    (old / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    assert Pack(old, verify=True).n_tokens == made["n_tokens"]
    with pytest.raises(InputError, match="carries no vocabulary files"):
        load_vocabulary(old)
    shown = runner.invoke(app, ["inspect", str(old)])
    assert shown.exit_code == 0 and "not carried" in shown.output


def test_the_readme_loads_a_pack_vocabulary_in_tiktoken(tmp_path: Path) -> None:
    text = FORMATS.read_text(encoding="utf-8").split("## The pack format\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert "ranks.tiktoken" in code and 'Path("pack/vocabulary")' in code
    corpus = corpus_in(tmp_path / "a")
    cli("prepare", str(corpus), "--vocab-size", "300", "-o", str(tmp_path / "pack"), "--cache-dir", str(tmp_path / "c"))
    check = ("\nimport numpy\nfrom tokpack.store import Pack\npack = Pack(Path('pack'))\n"
             "sample = open('a/c.txt', encoding='utf-8').read()\n"
             "assert encoding.encode_ordinary(sample) == pack.tokens.tolist(), 'ids differ'\n"
             "assert len(ids) > 3\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-c", code + check], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "TOKPACK_CACHE": str(tmp_path / "c")}, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
