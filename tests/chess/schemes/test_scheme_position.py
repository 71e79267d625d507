"""The position scheme reproduces ChessBench's tokenizer (google-deepmind/searchless_chess): 77 FEN
tokens of python-chess's ``board.fen()`` and one of 1,968 actions, on thousands of positions of
real and random games; its rows decode back to the FEN and the move; a deterministic sample; a
sharded pack served one position a row.

The reference below is written from ChessBench's description (the paper and the repository's
``src/tokenizer.py``/``src/utils.py``): the side to move, the 64 squares from a8 with FEN's digits
written out as dots, castling padded to four, the en passant square or two dots, the clocks padded
to three; actions by from-square, the queen's squares then the knight's, then the promotions.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokpack.chess.jobs.config import ChessPipelineConfig
from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.jobs.pipeline import tokenize
from tokpack.chess.pgn.convert import convert_pgn
from tokpack.chess.schemes.game_encoder import GameError
from tokpack.chess.schemes.position import ACTIONS, PAD_ID, PositionEncoder, encode_position, fen_ids
from tokpack.errors import InputError
from tokpack.serve import PackedBatches
from tokpack.store.dataset import ShardedDataset

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ALPHABET = "0123456789abcdefghpnrkqPBNRQKw."
# A legal game ending where a pawn may take en passant only by leaving its king to a rook along the
# fifth rank (so python-chess's FEN names no en passant square), and one where it may.
PINNED_EN_PASSANT = "e2e4 a7a5 e4e5 a8a6 e1e2 a6h6 e2d3 h6h5 d3c4 a5a4 c4b5 f7f5"
FREE_EN_PASSANT = "e2e4 a7a6 e4e5 d7d5"


def reference_state(fen: str) -> list[int]:
    placement, side, castling, en_passant, halfmove, fullmove = fen.split(" ")
    spelled = side
    for rank in placement.split("/"):
        for character in rank:
            spelled += "." * int(character) if character.isdigit() else character
    spelled += "...." if castling == "-" else castling + "." * (4 - len(castling))
    spelled += ".." if en_passant == "-" else en_passant
    spelled += halfmove + "." * (3 - len(halfmove)) + fullmove + "." * (3 - len(fullmove))
    assert len(spelled) == 77
    return [ALPHABET.index(character) for character in spelled]


def reference_actions() -> list[str]:
    moves = []
    for square in chess.SQUARES:
        board = chess.BaseBoard.empty()
        board.set_piece_at(square, chess.Piece(chess.QUEEN, chess.WHITE))
        targets = list(board.attacks(square))
        board.set_piece_at(square, chess.Piece(chess.KNIGHT, chess.WHITE))
        targets += list(board.attacks(square))
        moves += [chess.square_name(square) + chess.square_name(target) for target in targets]
    files = "abcdefgh"
    for rank, last in (("2", "1"), ("7", "8")):
        for index, file in enumerate(files):
            for step in (0, -1, 1):
                if 0 <= index + step < 8:
                    moves += [f"{file}{rank}{files[index + step]}{last}{piece}" for piece in "qrbn"]
    return moves


def random_games(n: int, seed: int) -> list[str]:
    """Legal games that seek promotions, castling and en passant, some to mate or stalemate."""
    rng = random.Random(seed)
    games = []
    for _ in range(n):
        board = chess.Board()
        for _ in range(rng.randint(1, 220)):
            legal = list(board.legal_moves)
            if not legal:
                break
            special = [m for m in legal if m.promotion or board.is_en_passant(m) or board.is_castling(m)
                       or (board.piece_type_at(m.from_square) == chess.PAWN and abs(m.to_square - m.from_square) == 16)]
            board.push(rng.choice(special) if special and rng.random() < 0.6 else rng.choice(legal))
        games.append(" ".join(move.uci() for move in board.move_stack))
    return games


@pytest.fixture(scope="module")
def games(shared_data: Path) -> list[str]:
    real = pq.read_table(shared_data / "chess" / "games.parquet", columns=["uci"]).column("uci").to_pylist()[:120]
    return [*real, *random_games(120, seed=5), PINNED_EN_PASSANT, FREE_EN_PASSANT]


def test_the_actions_are_chessbenchs() -> None:
    assert list(ACTIONS) == reference_actions() and len(ACTIONS) == 1968
    assert (ACTIONS[0], ACTIONS[21], ACTIONS[1792], ACTIONS[-1]) == ("a1b1", "a1c2", "a2a1q", "h7g8n")


def test_thousands_of_positions_tokenize_as_chessbench_and_decode_back(games: list[str]) -> None:
    encoder = PositionEncoder()
    encoded = encoder.encode_batch(pa.table({"uci": games}))
    rows = encoded.ids.reshape(-1, 78)
    assert encoded.documents is not None and encoded.documents.tolist() == [len(g.split()) for g in games]
    expected, fens = [], []
    en_passant = 0
    for game in games:
        board = chess.Board()
        for move in game.split():
            fen = board.fen()
            fens.append((fen, move))
            expected.append([*reference_state(fen), reference_actions_index[move]])
            en_passant += fen.split(" ")[3] != "-"
            board.push_uci(move)
    assert len(rows) == len(expected) > 15_000 and en_passant > 50
    assert rows.tolist() == expected
    assert [tuple(encoder.decode_position(row)) for row in rows] == fens
    assert [fen_ids(fen) + [reference_actions_index[move]] for fen, move in fens[:2000]] == expected[:2000]
    first = encoder.encode_game(games[0], 2500, 2400, "1-0", max_len=10**9)
    assert encoder.decode(first).uci == games[0] and encoder.decode(first).result is None
    assert int(rows.max()) < PAD_ID and encoder.vocab_size() == 1969


reference_actions_index = {move: i for i, move in enumerate(reference_actions())}


def test_en_passant_is_named_only_where_a_pawn_may_legally_take(games: list[str]) -> None:
    encoder = PositionEncoder()
    for game, named in ((PINNED_EN_PASSANT, "-"), (FREE_EN_PASSANT, "d6")):
        board = chess.Board()
        for move in game.split():
            board.push_uci(move)
        assert board.ep_square is not None and board.fen().split(" ")[3] == named
        ids = encoder.encode_game(game + (" b5a4" if named == "-" else " e5d6"), None, None, "*", max_len=10**9)
        assert encoder.decode_position(ids[-78:]).fen == board.fen()


def test_a_sample_is_deterministic_and_does_not_depend_on_the_batch(games: list[str]) -> None:
    whole = PositionEncoder().encode_batch(pa.table({"uci": games}))
    half = PositionEncoder(sample=0.5, seed=3).encode_batch(pa.table({"uci": games}))
    assert half.documents is not None and whole.documents is not None
    assert 0.4 < half.documents.sum() / whole.documents.sum() < 0.6
    # Game by game (a replay is vectorised across the batch, so one game a call is slow: a sixth
    # of the games, the two en passant ones among them).
    some = games[::6] + games[-2:]
    one_by_one = [PositionEncoder(sample=0.5, seed=3).encode_batch(pa.table({"uci": [g]})) for g in some]
    together = PositionEncoder(sample=0.5, seed=3).encode_batch(pa.table({"uci": some}))
    assert np.concatenate([e.ids for e in one_by_one]).tolist() == together.ids.tolist()
    other = PositionEncoder(sample=0.5, seed=4).encode_batch(pa.table({"uci": games}))
    assert other.ids.tolist() != half.ids.tolist()
    # Every kept row is the row the whole game has at that place.
    rows = {tuple(row) for row in whole.ids.reshape(-1, 78).tolist()}
    assert all(tuple(row) in rows for row in half.ids.reshape(-1, 78).tolist())


def test_an_illegal_move_names_its_game_and_ply() -> None:
    with pytest.raises(GameError, match="row 1: ply 3 \\(e2e5\\)"):
        PositionEncoder().encode_batch(pa.table({"uci": ["e2e4 e7e5", "d2d4 d7d5 e2e5"]}))
    with pytest.raises(GameError, match="row 0: ply 2 \\(0000\\): a null move is no move of chess"):
        PositionEncoder().encode_batch(pa.table({"uci": ["e2e4 0000"]}))
    with pytest.raises(InputError, match="none of the 1,968 actions"):
        encode_position(chess.STARTING_FEN, "e2e5q")
    with pytest.raises(ValueError, match="sample must be above 0"):
        PositionEncoder(sample=0)


def test_a_pack_of_positions_serves_a_position_a_row(games: list[str], tmp_path: Path) -> None:
    table = tmp_path / "games.parquet"
    n = 40
    pq.write_table(pa.table({"uci": games[:n], "white_elo": [2000] * n, "black_elo": [2000] * n, "result": ["*"] * n}), table)
    meta = pack_games(table, PositionEncoder(), tmp_path / "pack")
    n_positions = sum(len(g.split()) for g in games[:n])
    assert meta.counts["n_games"] == n and meta.n_docs == n_positions and meta.n_tokens == 78 * n_positions
    batches = PackedBatches(tmp_path / "pack", layout="bestfit", length=77, global_batch=16, seed=0)
    batch = batches.batch(0)
    inputs, labels = np.asarray(batch["input_ids"]), np.asarray(batch["labels"])
    assert inputs.shape == labels.shape == (16, 77)
    encoder = PositionEncoder()
    for row, label in zip(inputs.tolist(), labels.tolist(), strict=True):
        fen, move = encoder.decode_position([*row, label[-1]])
        assert chess.Move.from_uci(move) in chess.Board(fen).legal_moves  # a whole position, its move last
        assert label[:-1] == row[1:]


def test_tokenize_packs_sampled_positions_by_month(tmp_path: Path) -> None:
    games = tmp_path / "games"
    convert_pgn([FIXTURES / "chess_games.pgn"], games)
    cfg = ChessPipelineConfig.model_validate({"games_dir": games, "out_dir": tmp_path / "tokens", "train_months": "all",
                                              "val_fraction": 0.2, "position_sample": 0.5, "position_seed": 1})
    result = tokenize(cfg, "position", pack=True)
    for packed in result.packs:
        dataset = ShardedDataset(packed.path, verify=True)
        rows = sum(pq.ParquetFile(games / f"year={m[:4]}" / f"month={m[5:]}" / "games.parquet").metadata.num_rows
                   for m in packed.months)
        assert packed.n_games == dataset.meta.counts["n_games"] == rows
        months = [dataset.meta.ranges[m].documents for m in packed.months]
        assert months[0][0] == 0 and months[-1][1] == dataset.n_docs and dataset.n_tokens == 78 * dataset.n_docs
        assert all(a[1] == b[0] for a, b in zip(months, months[1:]))
    record = json.loads((tmp_path / "tokens" / "position" / "train" / "encoder.json").read_text(encoding="utf-8"))
    assert record["spec"]["sampling"] == {"sample": 0.5, "seed": 1}  # every worker rebuilds the same sample
