"""The uci scheme: its fixed vocabulary, Elo bins, framing, unknown moves and the vectorized batch path."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokpack
from tokpack.chess.pgn.games import read_games_strictly
from tokpack.chess.schemes import make_encoder
from tokpack.chess.schemes.game_encoder import EloBin, GameError
from tokpack.chess.schemes.uci import (
    BOS_ID,
    ELO_MISSING_ID,
    EOS_ID,
    RESULT_IDS,
    UNK_ID,
    UciEncoder,
    elo_bin,
    elo_bin_index,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL_GAMES = Path(__file__).resolve().parents[3] / "data" / "chess" / "games.parquet"


@pytest.fixture(scope="module")
def encoder() -> UciEncoder:
    return UciEncoder()


def test_vocabulary_size_and_the_first_and_last_id_of_each_section(encoder: UciEncoder) -> None:
    tokens = encoder.tokens
    assert encoder.vocab_size() == len(tokens) == 2030
    assert tokens[:8] == ["<pad>", "<bos>", "<eos>", "<unk>", "1-0", "0-1", "1/2-1/2", "*"]
    assert (tokens[8], tokens[60], tokens[61]) == ("<elo:under650>", "<elo:3200+>", "<elo:missing>")
    assert (tokens[62], tokens[1853]) == ("a1b1", "h8g8")  # 1,792 queen and knight moves
    assert (tokens[1854], tokens[2029]) == ("a2a1n", "h7h8q")  # 176 promotions
    assert len(set(tokens)) == 2030
    assert sum(len(t) == 5 for t in tokens[62:]) == 176


def test_every_legal_move_of_every_position_has_an_id(encoder: UciEncoder) -> None:
    import chess

    # Queen-like moves from every square and every knight jump: nothing legal is ever <unk>.
    for square in chess.SQUARES:
        for piece in (chess.QUEEN, chess.KNIGHT):
            board = chess.Board(None)
            board.set_piece_at(square, chess.Piece(piece, chess.WHITE))
            for move in board.pseudo_legal_moves:
                assert encoder.ids[move.uci()] >= 62
    assert encoder.ids["b7a8r"] > encoder.ids["h8g8"] and "a1c4" not in encoder.ids


def test_elo_bins_clamp_and_the_missing_rating_has_its_own_token() -> None:
    assert [elo_bin_index(r) for r in (-5, 0, None)] == [53, 53, 53]
    assert elo_bin_index(100) == elo_bin_index(649) == 0
    assert elo_bin_index(650) == 1 and elo_bin_index(3199) == 51
    assert elo_bin_index(3200) == elo_bin_index(9999) == 52
    assert elo_bin(40) == EloBin(2600, 2649) and elo_bin(53) == EloBin(None, None)
    for rating in range(0, 4000, 7):
        assert elo_bin(elo_bin_index(rating)).contains(rating)


def test_a_game_is_framed_by_five_tokens(encoder: UciEncoder) -> None:
    ids = encoder.encode_game("e2e4 e7e5 g1f3", 2612, None, "1/2-1/2", max_len=1000)
    assert ids == [BOS_ID, 8 + 40, ELO_MISSING_ID, encoder.ids["e2e4"], encoder.ids["e7e5"], encoder.ids["g1f3"],
                   RESULT_IDS["1/2-1/2"], EOS_ID]
    assert encoder.encode_game("e2e4 e7e5 g1f3", 2612, None, "1/2-1/2", max_len=4) == ids[:4]
    with pytest.raises(ValueError, match="result"):
        encoder.encode_game("e2e4", 1, 1, "2-0", max_len=10)


def test_decode_inverts_encode_for_every_fixture_game(encoder: UciEncoder) -> None:
    for game in read_games_strictly(FIXTURES / "chess_games.pgn"):
        ids = encoder.encode_game(game.uci, game.white_elo, game.black_elo, game.result, max_len=1 << 30)
        assert len(ids) == game.n_plies + 5 and ids[0] == BOS_ID and ids[-1] == EOS_ID
        decoded = encoder.decode(ids)
        assert (decoded.uci, decoded.result) == (game.uci, game.result)
        assert decoded.white_elo == elo_bin(elo_bin_index(game.white_elo)) and decoded.white_elo.contains(game.white_elo)
        assert decoded.black_elo is not None and decoded.black_elo.contains(game.black_elo)


def test_unknown_moves_become_unk_and_are_counted(encoder: UciEncoder) -> None:
    games = pa.table({"uci": ["e2e4 a1c4 0000 e7e5", "zz e2e4 e7e8x"], "white_elo": [1500, None],
                      "black_elo": [1500, 0], "result": ["*", "0-1"]})
    encoded = encoder.encode_batch(games)
    assert encoded.unknown_moves == 4
    assert encoded.game(0) == [BOS_ID, 8 + elo_bin_index(1500), 8 + elo_bin_index(1500), encoder.ids["e2e4"], UNK_ID, UNK_ID, encoder.ids["e7e5"], 7, EOS_ID]
    assert encoded.game(1)[1:3] == [ELO_MISSING_ID, ELO_MISSING_ID]
    assert [encoder.encode_game(*row.values(), max_len=99) for row in games.to_pylist()] == [encoded.game(0), encoded.game(1)]
    with pytest.raises(GameError, match="row 1: result"):
        encoder.encode_batch(games.set_column(3, "result", pa.array(["*", "1-1"])))


def test_batch_path_equals_the_per_game_path_on_real_games(encoder: UciEncoder) -> None:
    table = pq.read_table(REAL_GAMES)
    encoded = encoder.encode_batch(table)
    rows = table.to_pylist()
    assert len(encoded.lengths) == len(rows) == 28_499
    assert (encoded.lengths == table.column("n_plies").to_numpy() + 5).all()
    step = 97  # every 97th game, so the check stays fast
    for index in range(0, len(rows), step):
        row = rows[index]
        assert encoded.game(index) == encoder.encode_game(row["uci"], row["white_elo"], row["black_elo"], row["result"], 1 << 30)
    assert encoded.unknown_moves == 1  # the one null move (0000) of the collection


def test_identity_is_stable_and_checked_by_require_vocabulary(encoder: UciEncoder) -> None:
    assert encoder.identity == make_encoder("uci").identity
    assert encoder.identity.scheme == "uci" and encoder.identity.n_vocab == 2030
    assert tokpack.require_vocabulary({"vocabulary": encoder.identity.model_dump(by_alias=True)}, encoder) is encoder
    with pytest.raises(ValueError, match="not the vocabulary"):
        tokpack.require_vocabulary({"vocabulary": make_encoder("san").identity.model_dump(by_alias=True)}, encoder)
    with pytest.raises(ValueError, match="unknown scheme"):
        make_encoder("pgn")
