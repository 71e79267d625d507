"""A sharded job refuses, before it writes anything, a vocabulary in which an ordinary token is
spelled as its special token: every shard carries its ``tokenizer.json``, which cannot hold the
two ids under one spelling."""

from __future__ import annotations

from pathlib import Path

from spelled_specials import SPACES_PATTERN, learned_ranks, rank_file, spelled_corpus
from typer.testing import CliRunner

from tokpack.cli import app


def test_prepare_shards_refuses_the_vocabulary_before_writing_the_job(tmp_path: Path) -> None:
    ranks = rank_file(learned_ranks(), tmp_path / "mine.tiktoken")
    corpus = spelled_corpus(tmp_path / "corpus.txt", 20_000)
    out = tmp_path / "dataset"
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(ranks), "--pattern", SPACES_PATTERN,
                                      "--shards", "2", "--out", str(out)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"error: {ranks}: the ordinary token '<|endoftext|>'" in " ".join(result.output.split())
    assert not out.exists() or not any(out.iterdir())
