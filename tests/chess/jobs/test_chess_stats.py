"""Statistics count exactly what each encoder emits, framing included."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from tokpack.chess.jobs.stats import ChessStats, compute_stats
from tokpack.chess.pgn.games import games_table, read_games_strictly
from tokpack.chess.schemes import make_encoder
from tokpack.chess.schemes.game_encoder import GameEncoder
from tokpack.chess.schemes.uci_bpe import train_bpe

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL_GAMES = Path(__file__).resolve().parents[3] / "data" / "chess" / "games.parquet"


def _independent_lengths(parquet: Path, encoder: GameEncoder, n_games: int) -> np.ndarray:
    """Game by game through ``encode_game``: a different code path from the statistics' batches."""
    rows = pq.read_table(parquet).slice(0, n_games).to_pylist()
    return np.array([len(encoder.encode_game(r["uci"], r["white_elo"], r["black_elo"], r["result"], max_len=1 << 30))
                     for r in rows])


def _check(stats: ChessStats, parquet: Path, encoders: list[GameEncoder], n_games: int, max_len: int) -> None:
    assert stats.n_games == n_games and stats.max_len == max_len and list(stats.schemes) == ["uci", "san", "bpe"]
    for encoder in encoders:
        lengths = _independent_lengths(parquet, encoder, n_games)
        row = stats.schemes[encoder.scheme]
        assert row.vocabulary == encoder.identity
        assert row.mean == round(lengths.mean(), 2), encoder.scheme
        assert (row.p50, row.p95) == (round(float(np.percentile(lengths, 50)), 2), round(float(np.percentile(lengths, 95)), 2))
        assert row.max == lengths.max()
        assert row.within_max_len == round(100 * float(np.mean(lengths <= max_len)), 2)


def test_stats_on_the_fixture_equal_lengths_from_the_encoders(tmp_path: Path) -> None:
    games = read_games_strictly(FIXTURES / "chess_games.pgn")
    parquet = tmp_path / "games.parquet"
    pq.write_table(games_table(games), parquet)
    encoders = [make_encoder("uci"), make_encoder("san"), make_encoder("bpe", train_bpe([g.uci for g in games], 300))]
    stats = compute_stats(parquet, encoders, n_games=20, max_len=200, n_longest=5)
    _check(stats, parquet, encoders, 20, 200)
    uci = stats.schemes["uci"]
    assert uci.mean == round(np.mean([g.n_plies + 5 for g in games]), 2)
    assert uci.within_max_len == 95.0  # one fixture game has 233 plies
    assert stats.schemes["san"].mean > 4 * uci.mean and stats.schemes["san"].vocabulary.n_vocab == 37
    longest = stats.bpe_longest
    assert len(longest) == 5 and longest[0].n_chars >= longest[-1].n_chars and longest[0].moves == longest[0].n_chars / 4
    assert json.loads(stats.to_json())["schema"] == "tokpack.chess.stats.v1"
    assert compute_stats(parquet, encoders[:1], n_games=3, max_len=10).n_games == 3


def test_stats_on_real_games_equal_lengths_from_the_encoders(tmp_path: Path) -> None:
    bpe = train_bpe(pq.read_table(REAL_GAMES, columns=["uci"]).column("uci").to_pylist()[:300], 1000)
    encoders = [make_encoder("uci"), make_encoder("san"), make_encoder("bpe", bpe)]
    stats = compute_stats(REAL_GAMES, encoders, n_games=400, max_len=200)
    _check(stats, REAL_GAMES, encoders, 400, 200)
