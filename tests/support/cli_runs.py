"""Shared helpers of the tests that drive the ``tokpack`` command in process (no tests here): a
small real Polish corpus, a command's ``--json`` answer, and a refusal's one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from tokpack.cli import app

from conftest import DATA

runner = CliRunner()
#: 60 kB of a real Polish dialogue (whole lines).
POLISH_TEXT = (DATA / "polish" / "dialogue" / "wesnoth-Heir_To_The_Throne.txt").read_bytes()[:60_000]


def polish_corpus_in(folder: Path) -> Path:
    """``folder/c.txt`` holding :data:`POLISH_TEXT` cut at its last line end."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "c.txt"
    corpus.write_bytes(POLISH_TEXT[: POLISH_TEXT.rindex(b"\n") + 1])
    return corpus


def cli_json(*args: str) -> Any:
    """The command's ``--json`` answer; it must succeed."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def cli_refused(*args: str) -> str:
    """The command's refusal (exit 2, ``error: ...``, no traceback), its whitespace folded."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: ") and "Traceback" not in result.output, result.output
    return " ".join(result.output.split())


#: GPT-2's end of text, the separator the documents of these tests are joined by.
EOT = "<|endoftext|>"


def cli_run(*args: str | Path) -> tuple[int, str]:
    """The command's exit code and output, whatever they are."""
    result = runner.invoke(app, [*map(str, args)])
    return result.exit_code, result.output


def prepare_json(*args: str | Path) -> Any:
    """``tokpack prepare ARGS --json``'s answer; it must succeed."""
    return cli_json("prepare", *map(str, args))


def pack_documents(pack: Path) -> list[bytes]:
    """Each document of a pack of byte ids, as its bytes (read from the files a user would read)."""
    tokens = np.load(pack / "tokens.npy")
    starts = np.load(pack / "starts.npy")
    ends = np.append(starts[1:], len(tokens))
    return [tokens[a:b].astype(np.uint8).tobytes() for a, b in zip(starts, ends, strict=True)]
