"""The san scheme: python-chess's own SAN, and the lockstep replayer that must equal it exactly."""

from __future__ import annotations

from pathlib import Path

import chess
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokpack.chess.pgn.games import read_games_strictly
from tokpack.chess.schemes.game_encoder import GameError
from tokpack.chess.schemes.san import BOS_ID, EOS_ID, TOKENS, SanEncoder, san_moves, san_text

from cached import cached_sharp_games

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL_GAMES = Path(__file__).resolve().parents[3] / "data" / "chess" / "games.parquet"


@pytest.fixture(scope="module")
def encoder() -> SanEncoder:
    return SanEncoder()


def _python_chess_movetext(uci: str) -> str:
    """SAN as python-chess numbers a game (``1. e4 e5 2. Nf3``)."""
    return chess.Board().variation_san([chess.Move.from_uci(m) for m in uci.split()])


def _table(games: list[tuple[str, str]]) -> pa.Table:
    return pa.table({"uci": [u for u, _ in games], "white_elo": [None] * len(games),
                     "black_elo": [None] * len(games), "result": [r for _, r in games]})


def test_vocabulary_is_the_characters_san_needs(encoder: SanEncoder) -> None:
    assert encoder.vocab_size() == len(TOKENS) == 37
    assert TOKENS[:4] == ("<pad>", "<bos>", "<eos>", "<unk>") and (TOKENS[4], TOKENS[-1]) == (" ", "x")


def test_san_equals_python_chess_for_every_fixture_game(encoder: SanEncoder) -> None:
    games = read_games_strictly(FIXTURES / "chess_games.pgn")
    batch = encoder.encode_batch(_table([(g.uci, g.result) for g in games]))
    for index, game in enumerate(games):
        text = san_text(san_moves(game.uci), game.result)
        assert text.replace(".", ". ") == f"{_python_chess_movetext(game.uci)} {game.result}"
        ids = encoder.encode_game(game.uci, game.white_elo, game.black_elo, game.result, max_len=1 << 30)
        assert ids == [BOS_ID, *(TOKENS.index(c) for c in text), EOS_ID]
        assert batch.game(index) == ids, game.id
        assert encoder.decode(ids).uci == game.uci and encoder.decode(ids).result == game.result


def test_the_ratings_are_not_encoded(encoder: SanEncoder) -> None:
    assert encoder.encode_game("e2e4", 800, 2800, "*", 99) == encoder.encode_game("e2e4", None, None, "*", 99)
    assert encoder.decode(encoder.encode_game("e2e4", 800, 2800, "*", 99)).white_elo is None


def test_replayer_equals_python_chess_on_random_games_full_of_odd_moves(encoder: SanEncoder,
                                                                         pytestconfig: pytest.Config) -> None:
    """Random legal games, biased to captures, checks and promotions (:func:`lichess_games.sharp_game`):
    pins, several queens, under-promotions, en passant, mates, disambiguation by file, rank and both."""
    games = cached_sharp_games(pytestconfig, 150, seed=2024)
    batch = encoder.encode_batch(_table(games))
    spelled = "".join(TOKENS[i] for i in batch.ids)
    for marker in ("=N", "=B", "=R", "#", "x"):
        assert marker in spelled
    for index, (uci, result) in enumerate(games):
        assert batch.game(index) == encoder.encode_game(uci, None, None, result, 1 << 30)


def test_replayer_equals_python_chess_on_real_games(encoder: SanEncoder) -> None:
    table = pq.read_table(REAL_GAMES).slice(0, 1500)
    batch = encoder.encode_batch(table)
    for index, row in enumerate(table.to_pylist()):
        assert batch.game(index) == encoder.encode_game(row["uci"], None, None, row["result"], 1 << 30)


@pytest.mark.parametrize(("moves", "reason"), [
    ("e2e4 e7e5 e1e3", "not a king move"),
    ("e2e5", "not a pawn move"),
    ("e2e4 f7f6 d1h5 a7a6", "own king in check"),
    ("g1f3 a7a6 e2e3 a6a5 f1e2 a5a4 h1g1 b7b6 g1h1 b6b5 e1g1", "castling"),  # the rook has moved
    ("e2e4 e7e5 g1f3 d8h4 f1c4 h4f2 e1g1", "castling"),  # in check
    ("e2e4 d7d5 e4e5 f7f5 a2a3 a7a6 e5f6", "not a pawn move"),  # en passant one move too late
    ("a2a4 e7e5 a4a5 e5e4 a5a6 e4e3 a6b7 e3d2 e1d2 a7a6 b7a8", "must promote"),
    ("e2e4 e7e5 e4e5", "not a pawn move"),
    ("g1g3", "not a knight move"),
    ("e7e5", "no piece of the side to move"),
    ("e2e4 e7e6 d1d7", "blocked"),
])
def test_an_illegal_move_names_its_row_and_ply(encoder: SanEncoder, moves: str, reason: str) -> None:
    ply = len(moves.split())
    with pytest.raises(GameError, match=rf"row 1: ply {ply} .*{reason}"):
        encoder.encode_batch(_table([("e2e4", "*"), (moves, "*")]))
    with pytest.raises(ValueError):
        san_moves(moves)


def test_null_moves_and_empty_games(encoder: SanEncoder) -> None:
    games = [("e2e4 0000 d2d4", "*"), ("", "1-0"), ("f2f3 e7e5 g2g4 d8h4", "0-1")]
    batch = encoder.encode_batch(_table(games))
    texts = ["".join(TOKENS[i] for i in batch.game(k)[1:-1]) for k in range(3)]
    assert texts == ["1.e4 -- 2.d4 *", "1-0", "1.f3 e5 2.g4 Qh4# 0-1"]
    assert [encoder.encode_game(u, None, None, r, 99) for u, r in games] == [batch.game(k) for k in range(3)]
