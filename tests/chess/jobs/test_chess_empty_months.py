"""Chess packing over month tables: a month left without games adds no empty shard."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from tokpack.cli import app

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "chess_games.pgn"
runner = CliRunner()


def test_a_month_without_games_after_a_full_shard_adds_no_empty_shard(tmp_path: Path) -> None:
    """A month left with no games still has its named range, but in the shard before it: no shard
    of zero games (the documented rule makes a shard of whole games, one at least)."""
    from tokpack.chess.pgn.convert import month_parquet
    from tokpack.store.dataset import ShardedDataset

    games = tmp_path / "games"
    table = pq.read_table(ROOT / "data" / "chess" / "games.parquet").slice(0, 8)
    for month, rows in (("2016-01", table.slice(0, 4)), ("2016-02", table.slice(0, 0)), ("2016-03", table.slice(4, 4))):
        target = month_parquet(games, month)
        target.parent.mkdir(parents=True)
        pq.write_table(rows, target)
    config = tmp_path / "tokpack-chess.toml"
    config.write_text(f'games_dir = "{games.as_posix()}"\nout_dir = "tokens"\ntrain_months = ["2016-01", "2016-02"]\n'
                      'val_months = ["2016-03"]\n', encoding="utf-8")
    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "uci", "--pack", "--config", str(config),
                                 "--shard-games", "1"])
    assert result.exit_code == 0, result.output
    train = ShardedDataset(tmp_path / "tokens" / "uci" / "train", verify=True)
    assert [shard.n_docs for shard in train.shards] == [1, 1, 1, 1]
    assert train.meta.ranges["2016-02"].documents == (4, 4)
    assert train.meta.ranges["2016-01"].documents == (0, 4)
