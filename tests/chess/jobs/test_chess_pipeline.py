"""`tokpack chess tokenize` as a library function: ranges of months, sharded output, no half-made pair."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tokpack.chess.jobs.config import ChessPipelineConfig
from tokpack.chess.jobs.pipeline import available_months, split_months, tokenize
from tokpack.chess.pgn.convert import convert_pgn, month_parquet
from tokpack.store.dataset import ShardedDataset

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("games") / "games"
    report = convert_pgn([FIXTURES / "chess_games.pgn"], out)
    assert len(report.months) >= 3
    return out


def config(games: Path, out: Path, **fields: object) -> ChessPipelineConfig:
    return ChessPipelineConfig.model_validate({"games_dir": games, "out_dir": out, **fields})


def test_all_months_with_a_validation_fraction_pack_as_sharded_datasets(games: Path, tmp_path: Path) -> None:
    months = available_months(games)
    cfg = config(games, tmp_path / "tokens", train_months="all", val_fraction=0.2)
    train, val = split_months(cfg)
    assert train + val == months and val == months[-len(val):] and val  # the latest months validate
    result = tokenize(cfg, "uci", pack=True)
    by_folder = {p.folder: p for p in result.packs}
    assert by_folder["train"].months == train and by_folder["val"].months == val
    for folder, split, chosen in (("train", "train", train), ("val", "validation", val)):
        path = tmp_path / "tokens" / "uci" / folder
        n_games = sum(pq.ParquetFile(month_parquet(games, m)).metadata.num_rows for m in chosen)
        dataset = ShardedDataset(path, verify=True)  # one shard: the months are far below 64 MB
        assert len(dataset.meta.shards) == 1 and dataset.n_docs == n_games
        assert sorted(dataset.meta.ranges) == sorted([split, *chosen])


def test_named_months_and_refusals(games: Path, tmp_path: Path) -> None:
    months = available_months(games)
    cfg = config(games, tmp_path / "t", train_months=months[:2], val_months=[months[2]])
    assert split_months(cfg) == (months[:2], [months[2]])
    with pytest.raises(ValueError, match="in both"):
        split_months(config(games, tmp_path / "t", train_months=months[:2], val_months=[months[1]]))
    with pytest.raises(ValueError, match="exactly one of val_month"):
        config(games, tmp_path / "t", train_month=months[0])
    with pytest.raises(ValueError, match="month=13/games.parquet: no such file"):
        tokenize(config(games, tmp_path / "t", train_month=months[0], val_month="2016-13"), "uci", pack=True)
    assert not (tmp_path / "t").exists()  # refused before anything was written


def test_a_failed_validation_split_leaves_no_training_pack(games: Path, tmp_path: Path) -> None:
    """Issue 12 item 13: a failed val_month left the train pack behind, so the rerun refused."""
    import shutil

    broken = tmp_path / "games"
    shutil.copytree(games, broken)
    months = available_months(broken)
    month_parquet(broken, months[-1]).write_bytes(b"not parquet")
    cfg = config(broken, tmp_path / "tokens", train_months=months[:-1], val_months=[months[-1]])
    with pytest.raises(ValueError, match="not a readable parquet file"):
        tokenize(cfg, "uci", pack=True)
    assert not (tmp_path / "tokens" / "uci" / "train").exists()
