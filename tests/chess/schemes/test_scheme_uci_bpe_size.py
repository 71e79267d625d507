"""``tokpack chess tokenize --scheme bpe`` refuses a BPE smaller than asked, as the text trainers
do, unless told to accept it."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from tokpack.chess.pgn.games import games_table, read_games_strictly
from tokpack.cli import app

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
runner = CliRunner()


def test_an_unreachable_bpe_size_is_refused_then_accepted_on_request(tmp_path: Path) -> None:
    games = tmp_path / "games.parquet"
    pq.write_table(games_table(read_games_strictly(FIXTURES / "chess_games.pgn")), games)
    config = tmp_path / "pipeline.toml"
    config.write_text('games_dir = "games"\nout_dir = "tokens"\ntrain_month = "2016-01"\nval_month = "2016-02"\n'
                      'bpe_vocab_size = 4096\nbpe_train_games = 2\n', encoding="utf-8")
    tokenizer = tmp_path / "tokens" / "bpe" / "tokenizer.json"

    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "bpe", "--games", str(games), "--config", str(config)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "of the 4,096 asked for" in lines[0] and "--allow-smaller-vocab" in lines[0], result.output
    assert "bpe_vocab_size = " in lines[0] and not tokenizer.exists()

    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "bpe", "--games", str(games), "--config", str(config),
                                 "--allow-smaller-vocab"])
    assert result.exit_code == 0, result.output
    assert tokenizer.is_file()

    config.write_text(config.read_text(encoding="utf-8") + "bpe_allow_smaller_vocab = true\n", encoding="utf-8")
    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "bpe", "--games", str(games), "--config", str(config)])
    assert result.exit_code == 0, result.output
