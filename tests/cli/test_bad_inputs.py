"""The command line and bad input: a table of a user's mistakes, each one line on stderr naming
the file, exit code 2; and a bug, which says so with exit code 1 and no traceback unless --debug."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import _console, app

from conftest import SAMPLE

runner = CliRunner()
Case = Callable[[Path, Path], tuple[list[str], str]]  # (folder, a vocabulary) -> (arguments, what the line names)


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vocabulary")
    return prepare(SAMPLE / "polish.txt", cache_dir=folder, vocab_size=300, document_bytes=4096).vocabulary_path


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_console, "debug", False)


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def prepare_args(corpus: Path, vocab: Path | None, *more: str) -> list[str]:
    return ["prepare", str(corpus), *(["--vocab", str(vocab)] if vocab else ["--vocab-size", "300"]),
            "--document-bytes", "4096", *more]


def small_pack(folder: Path) -> Path:
    from tokpack.serve.memory import pack_of_documents

    return pack_of_documents([[1, 2, 3], [4, 5]], n_vocab=8, pad_id=0, directory=folder / "pack")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _manifest(folder: Path, text: bytes, ranges: dict[str, list[int]]) -> Path:
    import hashlib

    corpus = write(folder / "corpus.txt", text)
    write(folder / "manifest.json", json.dumps({"schema": "tokpack.corpus.v1", "sha256": hashlib.sha256(text).hexdigest(),
                                                 "n_bytes": len(text), "ranges": ranges}))
    return corpus


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _fifo_meta(folder: Path) -> Path:
    pack = small_pack(folder)
    (pack / "meta.json").unlink()
    os.mkfifo(pack / "meta.json")
    return pack


def _flipped(folder: Path) -> Path:
    pack = small_pack(folder)
    data = bytearray((pack / "tokens.npy").read_bytes())
    data[129] ^= 1
    (pack / "tokens.npy").write_bytes(bytes(data))
    return pack


def _rank_file(folder: Path, rank: int = 2**32 + 5) -> Path:
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines.append(f"{base64.b64encode(b'ab').decode()} {rank}")
    return write(folder / "ranks.tiktoken", "\n".join(lines) + "\n")


def _tokenizer_json(folder: Path, model: object) -> Path:
    return write(folder / "tokenizer.json", json.dumps({"model": model, "added_tokens": [], "pre_tokenizer": None}))


def _parquet(folder: Path, rows: list[object], kind: str = "string") -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "corpus.parquet"
    folder.mkdir(parents=True, exist_ok=True)
    column = pa.array(rows, type=pa.binary())
    # A string column holding invalid UTF-8, as tools that do not validate write it.
    pq.write_table(pa.table({"text": column.view(pa.string()) if kind == "string" else column}), path)
    return path


CASES: dict[str, Case] = {
    "missing corpus": lambda f, v: (prepare_args(f / "nope.txt", v), "nope.txt"),
    "a device as corpus": lambda f, v: (prepare_args(Path("/dev/zero"), v), "/dev/zero"),
    "a FIFO as corpus": lambda f, v: (prepare_args(_fifo(f / "pipe.txt"), v), "pipe.txt"),
    "invalid UTF-8": lambda f, v: (prepare_args(write(f / "bad.txt", b"ok\n\xff\xfe\n"), v), "bad.txt"),
    "JSON Lines: not JSON": lambda f, v: (prepare_args(write(f / "a.jsonl", '{"text": "x"}\n{oops\n'), v), "a.jsonl"),
    "JSON Lines: no text field": lambda f, v: (prepare_args(write(f / "a.jsonl", '{"body": "x"}\n'), v), "a.jsonl"),
    "JSON Lines: nested 100,000 deep": lambda f, v: (prepare_args(write(f / "a.jsonl", '{"text": ' + nested(100_000) + "}\n"), v), "a.jsonl"),
    "JSON Lines: a lone surrogate": lambda f, v: (prepare_args(write(f / "a.jsonl", '{"text": "a\\ud800b"}\n'), v), "a.jsonl"),
    "JSON Lines: a 10,000-digit number": lambda f, v: (prepare_args(write(f / "a.jsonl", '{"text": "x", "n": ' + "9" * 10_000 + "}\n"), v), "a.jsonl"),
    "manifest: not JSON": lambda f, v: (prepare_args(write(f / "corpus.txt", "abc\n") and write(f / "manifest.json", "{") and f / "corpus.txt", v), "manifest.json"),
    "manifest: nested 100,000 deep": lambda f, v: (prepare_args(write(f / "corpus.txt", "abc\n") and write(f / "manifest.json", nested(100_000)) and f / "corpus.txt", v), "manifest.json"),
    "manifest: a boundary inside a character": lambda f, v: (prepare_args(_manifest(f, "zażółć\n".encode(), {"train": [0, 3], "validation": [3, 11]}), v), "manifest.json"),
    "parquet: not parquet": lambda f, v: (prepare_args(write(f / "corpus.parquet", b"PAR1 this is not parquet"), v), "corpus.parquet"),
    "parquet: invalid UTF-8 in the text column": lambda f, v: (prepare_args(_parquet(f, [b"ok", b"\xff\xfe"]), v), "corpus.parquet"),
    "vocabulary: rank 2**32": lambda f, v: (prepare_args(write(f / "c.txt", "abc\n"), _rank_file(f)), "ranks.tiktoken"),
    # Its <|endoftext|> would take id 2**32, which tiktoken cannot hold.
    "vocabulary: rank 2**32 - 1": lambda f, v: (prepare_args(write(f / "c.txt", "abc\n"), _rank_file(f, 2**32 - 1), "--pattern", "gpt2"), "ranks.tiktoken"),
    "vocabulary: tokenizer.json model not an object": lambda f, v: (prepare_args(write(f / "c.txt", "abc\n"), _tokenizer_json(f, [1, 2])), "tokenizer.json"),
    "vocabulary: tokenizer.json vocab of lists": lambda f, v: (prepare_args(write(f / "c.txt", "abc\n"), _tokenizer_json(f, {"type": "BPE", "vocab": [["a", 1]], "merges": []})), "tokenizer.json"),
    "vocabulary: tokenizer.json merges of numbers": lambda f, v: (prepare_args(write(f / "c.txt", "abc\n"), _tokenizer_json(f, {"type": "BPE", "vocab": {"a": 0}, "merges": [1, 2]})), "tokenizer.json"),
    "inspect: not a pack": lambda f, v: (["inspect", str(write(f / "x" / "y.txt", "x").parent)], "x"),
    "inspect: meta.json is a FIFO": lambda f, v: (["inspect", str(_fifo_meta(f))], "meta.json"),
    "inspect: a flipped byte": lambda f, v: (["inspect", str(_flipped(f))], "tokens.npy"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_input_is_one_line_naming_the_file_and_exit_2(name: str, tmp_path: Path, vocabulary: Path) -> None:
    arguments, names = CASES[name](tmp_path / "in", vocabulary)
    result = runner.invoke(app, arguments)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.stderr[-3000:], result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_a_bug_is_exit_1_and_says_so_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tokpack.store as commands  # inspect imports open_tokens from here when it runs

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("vocabulary")

    monkeypatch.setattr(commands, "open_tokens", broken)
    pack = small_pack(tmp_path)
    result = runner.invoke(app, ["inspect", str(pack)])
    assert result.exit_code == 1
    assert "bug" in result.stderr and "KeyError" in result.stderr and "--debug" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    debug = runner.invoke(app, ["--debug", "inspect", str(pack)])
    assert debug.exit_code == 1 and isinstance(debug.exception, KeyError)  # the traceback is let through


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_inspect_of_a_folder_named_without_a_name_of_its_own_is_a_user_mistake(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tokpack inspect .`` (or ``''``, ``..``) in a folder that holds no pack: one line, exit 2,
    not an internal error from a Megatron prefix made of a path without a name."""
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    result = CliRunner().invoke(app, ["inspect", name])
    assert result.exit_code == 2, result.output
    assert "neither a pack" in result.output and "internal error" not in result.output
