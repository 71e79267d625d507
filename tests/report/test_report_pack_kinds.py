"""The pack report says what it reports on: a sharded dataset is said to be one (its shard count,
and checksums of its one stream, not of a tokens.npy it does not have), and compression is
computed from the bytes that were encoded (none for a chess pack, whose source is a Parquet table:
tokens per game instead)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tokpack import prepare, sample_corpus
from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.pgn.games import games_table, read_games_strictly
from tokpack.chess.schemes import make_encoder
from tokpack.cli import app
from tokpack.report.pack import pack_report

from conftest import REPO


def _data(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(found.group(1))["pack"]


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html.split("<script")[0]).split())


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare(sample_corpus(), cache_dir=tmp_path_factory.mktemp("cache"), vocab_size=400, document_bytes=1024).tokens_dir


def test_a_sharded_dataset_s_report_says_it_is_sharded(pack: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    result = CliRunner().invoke(app, ["prepare", str(sample_corpus()), "--vocab", str(pack), "--shards", "3", "--workers", "1",
                                      "--document-bytes", "1024", "-o", str(dataset)])
    assert result.exit_code == 0, result.output
    html = pack_report(dataset)
    facts, text = _data(html), _text(html)
    assert facts["kind"] == "dataset" and facts["shards"] == 3
    assert "(sharded dataset, 3 shards): tokpack report" in html
    assert "sharded dataset 3 shards" in text
    assert "tokens.npy" not in text and "ids SHA-256, all 3 shards as one stream" in text
    single = pack_report(pack)
    assert _data(single)["shards"] is None and "tokens.npy SHA-256" in _text(single) and "sharded" not in _text(single)
    # A text pack's compression is of its text: characters and bytes of the file, per token.
    assert _data(single)["bytes_per_token"] == pytest.approx(sample_corpus().stat().st_size / _data(single)["n_tokens"])


def test_a_chess_pack_s_compression_is_not_a_parquet_file_s_size(tmp_path: Path) -> None:
    month = tmp_path / "games.parquet"
    pq.write_table(games_table(read_games_strictly(REPO / "tests" / "fixtures" / "chess_games.pgn")), month)
    meta = pack_games(month, make_encoder("uci"), tmp_path / "uci")
    facts = _data(pack_report(tmp_path / "uci"))
    assert facts["bytes_per_token"] is None and facts["characters_per_token"] is None
    assert facts["tokens_per_game"] == pytest.approx(meta.n_tokens / meta.counts["n_games"])
    text = _text(pack_report(tmp_path / "uci"))
    assert "bytes per token" not in text and f"{facts['tokens_per_game']:.1f} tokens per game" in text
