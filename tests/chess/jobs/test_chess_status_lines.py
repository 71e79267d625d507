"""What `chess tokenize` says it reads: the first N games of a month, or all of them when the month
holds fewer than the setting asks for (never "the first 20,000 games" of a month of 20)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tokpack.chess.jobs.config import ChessPipelineConfig
from tokpack.chess.jobs.pipeline import tokenize
from tokpack.chess.pgn.games import games_table, read_games_strictly

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("games") / "games.parquet"
    pq.write_table(games_table(read_games_strictly(FIXTURES / "chess_games.pgn")), path)
    return path


@pytest.mark.parametrize(("asked", "said"), [(2_000, "all {n} games"), (7, "the first 7 games")])
def test_the_status_says_how_many_games_are_read(month: Path, tmp_path: Path, asked: int, said: str) -> None:
    n = pq.ParquetFile(month).metadata.num_rows
    assert 7 < n < 2_000
    cfg = ChessPipelineConfig.model_validate({"games_dir": tmp_path / "none", "out_dir": tmp_path / "out", "train_month": "2016-01", "val_month": "2016-02",
                                              "bpe_vocab_size": 300, "bpe_train_games": asked, "stats_games": asked,
                                              "bpe_allow_smaller_vocab": True})
    lines: list[str] = []
    tokenize(cfg, "bpe", stats=True, games=month, status=lines.append)
    expected = said.format(n=n)
    assert lines == [f"training a 300-id BPE on {expected} of {month}", f"encoding {expected} of {month} with every scheme"]
