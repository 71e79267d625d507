"""Attacks on the PGN reader and chess packing that found defects: each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard
from typer.testing import CliRunner

from tokpack.chess.pgn.games import read_games
from tokpack.cli import app

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "chess_games.pgn"
runner = CliRunner()


def _skippable(payload: bytes, kind: int = 0) -> bytes:
    """A zstd skippable frame (magic 0x184D2A50-5F, then the payload's length): decoders pass over it."""
    return (0x184D2A50 + kind).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


@pytest.mark.parametrize("kind", [0, 0xF])
def test_a_zstd_file_starting_with_a_skippable_frame_is_read_as_zstd(tmp_path: Path, kind: int) -> None:
    """zstd files may open with a skippable frame (pzstd and seekable-format writers put metadata
    there, and ``zstd -d`` reads them): the games inside are read, not the bytes as plain text."""
    pgn = FIXTURE.read_bytes()
    path = tmp_path / "games.pgn.zst"
    path.write_bytes(_skippable(b"metadata", kind) + zstandard.ZstdCompressor(write_checksum=True).compress(pgn))
    plain = tmp_path / "games.pgn"
    plain.write_bytes(pgn)
    assert [entry for _, entry in read_games(path)] == [entry for _, entry in read_games(plain)]
    out = tmp_path / "out"
    result = runner.invoke(app, ["chess", "convert", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "convert-report.json").read_text(encoding="utf-8"))
    rows = sum(pq.read_metadata(part).num_rows for part in out.rglob("games.parquet"))
    assert rows == report["games_written"] > 0


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
