"""The command line and a user's bad input: a table of mistakes that each must be one line on
stderr naming the file or argument, and exit code 2 (never an "internal error", a traceback or a
silently wrong result); and the sharded-job faults seen through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokpack
from tokpack.cli import _console, app

from conftest import REPO, SAMPLE
from example_runs import run_example

runner = CliRunner()
#: (folder, a prepared corpus) -> (arguments, text the one error line must contain)
Case = Callable[[Path, tokpack.TokenizedCorpus], tuple[list[str], list[str]]]
#: A port nothing listens on (the discard port; binding it needs root, so nothing does here).
NOWHERE = "http://127.0.0.1:9"
SHORT = {"connect_timeout": 1, "read_timeout": 1, "retries": {"max_attempts": 1}}


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setattr(_console, "debug", False)


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def huge_number_in_meta(folder: Path, corpus: tokpack.TokenizedCorpus) -> tuple[list[str], list[str]]:
    import shutil

    pack = folder / "pack"
    shutil.copytree(corpus.tokens_dir, pack)
    meta = (pack / "meta.json").read_text()
    n_docs = json.loads(meta)["n_docs"]
    (pack / "meta.json").write_text(meta.replace(f'"n_docs": {n_docs}', '"n_docs": ' + "9" * 5000))
    return ["inspect", str(pack)], ["meta.json"]


def tokenizer_json(folder: Path, corpus: tokpack.TokenizedCorpus, **changes: object) -> Path:
    document = json.loads(corpus.tokenizer.to_tokenizer_json())
    if "pattern" in changes:
        document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = changes["pattern"]
    if "dropout" in changes:
        document["model"]["dropout"] = changes["dropout"]
    return write(folder / "tokenizer.json", json.dumps(document))


def array_job(folder: Path, corpus: tokpack.TokenizedCorpus) -> Path:
    job = folder / "job"
    result = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(corpus.vocabulary_path),
                                 "--shards", "2", "-o", str(job), "--engine", "array", "--document-bytes", "4096"])
    assert result.exit_code == 0, result.output
    return job


def exported(folder: Path, corpus: tokpack.TokenizedCorpus, fmt: str) -> Path:
    out = folder / fmt
    tokpack.export(corpus.tokens_dir, fmt, out)
    return out


def other_vocabulary(folder: Path) -> Path:
    """A vocabulary of 320 ids: the 300-id pack's ids fit it, its <|endoftext|> (319) is another."""
    return tokpack.prepare(SAMPLE / "polish.txt", cache_dir=folder / "other", vocab_size=320,
                           document_bytes=4096).vocabulary_path


def s3(*options: str) -> list[str]:
    return ["inspect", "s3://bucket/dataset", "--storage-options", *options]


CASES: dict[str, Case] = {
    "a 5,000-digit integer in meta.json": huge_number_in_meta,
    "shard run --rank 4294967295": lambda f, c: (["shard", "run", str(array_job(f, c)), "--rank", "4294967295"],
                                                 ["rank 4294967295"]),
    "a tokenizer.json Split regex that does not compile": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(tokenizer_json(f, c, pattern="(unclosed")),
         "--document-bytes", "4096"], ["tokenizer.json", "(unclosed"]),
    "a tokenizer.json with BPE dropout": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(tokenizer_json(f, c, dropout=0.5)),
         "--document-bytes", "4096"], ["tokenizer.json", "dropout"]),
    "bpe explain with bytes that are not UTF-8": lambda f, c: (["bpe", "explain", "a\udc80b"], ["text 0", "UTF-8"]),
    "inspect s3:// without credentials": lambda f, c: (s3(json.dumps({"endpoint_url": NOWHERE, "config_kwargs": SHORT})),
                                                      ["s3://bucket/dataset"]),
    "inspect s3:// at an unreachable endpoint": lambda f, c: (
        s3(json.dumps({"endpoint_url": NOWHERE, "key": "k", "secret": "s", "config_kwargs": SHORT})),
        ["s3://bucket/dataset"]),
    "inspect an unknown protocol": lambda f, c: (["inspect", "nosuch://bucket/x"], ["nosuch://bucket/x"]),
    "inspect s3:// with an unknown storage option": lambda f, c: (s3('{"no_such_option": 1}'), ["no_such_option"]),
    "prepare --pattern that skips text": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--pattern", r"\d+", "--vocab-size", "300"], ["polish.txt", "skips"]),
    "prepare --pattern matching the empty string": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--pattern", "x*", "--vocab-size", "300"], ["x*", "empty string"]),
    "prepare --vocab --pattern reaching tiktoken's panic": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(c.vocabulary_path.parent / "ranks.tiktoken"),
         "--pattern", "x*"], ["x*"]),
    "bpe train --pattern matching nothing": lambda f, c: (
        ["bpe", "train", str(SAMPLE / "polish.txt"), "-o", str(f / "v"), "--pattern", "a*", "--vocab-size", "300"],
        ["a*"]),
    "bpe train --pattern that skips text": lambda f, c: (
        ["bpe", "train", str(SAMPLE / "polish.txt"), "-o", str(f / "v"), "--pattern", "[a-z]+", "--vocab-size", "300"],
        ["polish.txt", "[a-z]+", "skips"]),
    "prepare --workers 0": lambda f, c: (["prepare", str(SAMPLE / "polish.txt"), "--workers", "0"], ["workers"]),
    "prepare --shards --workers 0": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(c.vocabulary_path), "--shards", "2", "-o",
         str(f / "ds"), "--workers", "0"], ["--workers"]),
    "prepare --document-bytes 0": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--document-bytes", "0"],
        ["--document-bytes must be an integer of at least 4, got 0"]),
    "prepare --shards --document-bytes 3": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(c.vocabulary_path), "--shards", "2", "-o",
         str(f / "ds"), "--document-bytes", "3"], ["--document-bytes must be an integer of at least 4, got 3"]),
    "bpe train --document-bytes 0": lambda f, c: (
        ["bpe", "train", str(SAMPLE / "polish.txt"), "-o", str(f / "v"), "--document-bytes", "0"],
        ["--document-bytes must be", "at least 4, got 0"]),
    "prepare --validation and --test leaving no training data": lambda f, c: (
        ["prepare", str(SAMPLE / "polish.txt"), "--validation", "0.6", "--test", "0.5", "--vocab-size", "300"],
        ["--validation", "--test", "1.1"]),
    "tokenizer grade --min-global nan": lambda f, c: (
        ["tokenizer", "grade", str(c.vocabulary_path), str(f), "--min-global", "nan"], ["--min-global"]),
    "import --kind datatrove on a Megatron export": lambda f, c: (
        ["import", str(exported(f, c, "megatron")), str(f / "imported"), "--kind", "datatrove"],
        ["megatron", "--kind megatron"]),
    "chess tokenize without a config": lambda f, c: (["chess", "tokenize", "--scheme", "uci", "--pack"],
                                                     ["tokpack-chess.toml", 'games_dir = "games"', "--config"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_input_is_one_line_naming_it_and_exit_2(name: str, tmp_path: Path, prepared: tokpack.TokenizedCorpus,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    arguments, names = CASES[name](tmp_path, prepared)
    result = runner.invoke(app, arguments)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.stderr[-3000:], result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(part in lines[0] for part in names), (names, lines[0])
    assert "Traceback" not in result.output and "internal error" not in result.stderr


def test_a_nanogpt_import_under_the_wrong_tokenizer_does_not_suggest_keep_eod(
        tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    export = exported(tmp_path, prepared, "nanogpt")
    (export / "tokpack-export.json").unlink()  # as a nanoGPT user has it: the bin alone
    result = runner.invoke(app, ["import", str(export), str(tmp_path / "imported"), "--tokenizer",
                                 str(other_vocabulary(tmp_path))])
    assert result.exit_code == 2, result.output
    assert "--keep-eod" not in result.stderr and "--tokenizer" in result.stderr, result.stderr
    assert not (tmp_path / "imported").exists()


def test_a_nanogpt_import_with_the_wrong_eod_id_blames_the_id_given(
        tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    export = exported(tmp_path, prepared, "nanogpt")
    (export / "tokpack-export.json").unlink()
    result = runner.invoke(app, ["import", str(export), str(tmp_path / "imported"), "--tokenizer",
                                 str(prepared.vocabulary_path), "--eod-id", "5"])
    assert result.exit_code == 2, result.output
    assert "<|endoftext|>" not in result.stderr and "--eod-id 5" in result.stderr, result.stderr


@pytest.mark.parametrize("given, missing, not_named", [(["--vocab"], "--out", "--vocab"), (["-o"], "--vocab", "--out")])
def test_prepare_shards_names_only_what_is_missing(given: list[str], missing: str, not_named: str, tmp_path: Path,
                                                   prepared: tokpack.TokenizedCorpus) -> None:
    value = str(prepared.vocabulary_path) if given == ["--vocab"] else str(tmp_path / "ds")
    result = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--shards", "2", *given, value])
    assert result.exit_code == 2, result.output
    assert missing in result.stderr and not_named not in result.stderr, result.stderr


def test_prepare_shards_json_prints_json(tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    result = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path),
                                 "--shards", "2", "-o", str(tmp_path / "ds"), "--document-bytes", "4096",
                                 "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["shards"] == 2 and record["dataset"] == str(tmp_path / "ds")
    assert record["n_tokens"] == prepared.meta.n_tokens
    job = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path),
                              "--shards", "2", "-o", str(tmp_path / "job"), "--engine", "array", "--json"])
    assert job.exit_code == 0 and json.loads(job.stdout)["shards"] == 2, job.output


def test_no_lock_file_is_left_beside_an_output(tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    pack = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path),
                               "-o", str(tmp_path / "pack"), "--document-bytes", "4096"])
    assert pack.exit_code == 0, pack.output
    dataset = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path),
                                  "--shards", "2", "-o", str(tmp_path / "ds"), "--document-bytes", "4096",
                                  "--workers", "1"])
    assert dataset.exit_code == 0, dataset.output
    locks = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.lock"))
    assert locks == [], locks


def test_an_edited_job_json_refuses_through_the_cli(tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    job = array_job(tmp_path, prepared)
    assert runner.invoke(app, ["shard", "run", str(job), "--rank", "0"]).exit_code == 0
    record = job / "job.json"
    record.write_text(record.read_text().replace('"world_size": 2', '"world_size": 3'))
    results = [runner.invoke(app, ["shard", "run", str(job), "--rank", str(rank)]) for rank in (1, 2, 0)]
    assert [r.exit_code for r in results] == [2, 2, 2], [r.output for r in results]
    assert "job.json" in results[0].stderr and len(results[0].stderr.strip().splitlines()) == 1
    assert not (job / "dataset.json").exists()


def test_tokpack_torch_without_torch_names_the_extra(tmp_path: Path) -> None:
    # torch hidden from this one interpreter (an import hook, as if it were not installed)
    script = (
        "import sys\n"
        "class Hidden:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Hidden())\n"
        "from tokpack.torch import make_batch_loader\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("tokpack.errors.MissingExtra") and "pip install 'tokpack[torch]'" in last, result.stderr


def test_train_gpt_names_the_flags_once_when_ranks_do_not_divide_the_batch(
        tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    pytest.importorskip("torch")
    outputs = []
    for rank in (0, 1):  # what torchrun --nproc-per-node 2 sets for each process
        environment = {**os.environ, "PYTHONPATH": str(REPO / "src"), "WORLD_SIZE": "2", "RANK": str(rank),
                       "LOCAL_RANK": str(rank), "TOKPACK_CACHE": str(tmp_path / "cache")}
        outputs.append(run_example(REPO / "examples" / "train_gpt.py",
                                   ["--data", str(prepared.tokens_dir), "--global-batch", "7", "--steps", "1"], env=environment))
    assert [o.returncode for o in outputs] == [2, 2], [o.stderr for o in outputs]
    errors = [line for line in outputs[0].stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--global-batch 7 is not a multiple of the 2 ranks" in errors[0], outputs[0].stderr
    assert "--global-batch 8" in errors[0], errors[0]  # the fix: the nearest multiple
    assert outputs[1].stderr.strip() == "", outputs[1].stderr  # said once, by rank 0
    assert all("Traceback" not in o.stderr for o in outputs)
