"""The board's compiled rules agree with python-chess: which squares a side attacks, the one legal
origin of a move named by piece, target and disambiguation, castling, and the state a move leaves."""

from __future__ import annotations

import random

import chess
import numpy as np

from tokpack.chess.board.mailbox import OFF, SENTINEL, START
from tokpack.chess.board.results import RESULTS
from tokpack.chess.board.rules import apply_move, attacked_on, castle_target, find_origin, new_game


def _mailbox(board: chess.Board) -> np.ndarray:
    """python-chess's board as the 65-cell mailbox the rules read (white positive, cell 64 off the board)."""
    cells = np.zeros(65, dtype=np.int8)
    for square, piece in board.piece_map().items():
        cells[square] = piece.piece_type if piece.color == chess.WHITE else -piece.piece_type
    cells[SENTINEL] = OFF
    return cells


def _random_positions(n_games: int, plies: int, seed: int) -> list[chess.Board]:
    rng, positions = random.Random(seed), []
    for _ in range(n_games):
        board = chess.Board()
        for _ in range(plies):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
            positions.append(board.copy(stack=False))
    return positions


def test_the_start_is_python_chess_start() -> None:
    assert np.array_equal(START, _mailbox(chess.Board()))
    assert RESULTS == ("1-0", "0-1", "1/2-1/2", "*")


def test_every_attacked_square_is_python_chess_answer() -> None:
    positions = _random_positions(n_games=12, plies=60, seed=3)
    boards = np.stack([_mailbox(board) for board in positions])
    rows = np.repeat(np.arange(len(positions), dtype=np.int64), 64)
    squares = np.tile(np.arange(64, dtype=np.int64), len(positions))
    for by, colour in ((1, chess.WHITE), (-1, chess.BLACK)):
        ours = attacked_on(boards, rows, squares, by).reshape(len(positions), 64)
        theirs = np.array([[board.is_attacked_by(colour, square) for square in range(64)] for board in positions])
        assert np.array_equal(ours, theirs)
    assert not attacked_on(boards[:1], np.zeros(1, dtype=np.int64), np.array([SENTINEL]), 1).any()  # off the board


def _rights(board: chess.Board) -> int:
    return (board.has_kingside_castling_rights(chess.WHITE) | board.has_queenside_castling_rights(chess.WHITE) << 1
            | board.has_kingside_castling_rights(chess.BLACK) << 2 | board.has_queenside_castling_rights(chess.BLACK) << 3)


def test_a_move_named_by_piece_and_target_has_python_chess_one_legal_origin() -> None:
    candidates = np.empty(8, dtype=np.int64)
    checked = 0
    for board in _random_positions(n_games=8, plies=50, seed=5):
        cells, side = _mailbox(board), 1 if board.turn == chess.WHITE else -1
        legal = list(board.legal_moves)
        en_passant = board.ep_square if board.ep_square is not None else -1
        for piece in range(chess.PAWN, chess.KING + 1):
            for to in range(64):
                for promotion in ((0,) if piece != chess.PAWN else (0, chess.KNIGHT, chess.QUEEN)):
                    files = range(8) if piece == chess.PAWN else (-1,)  # SAN names a pawn's file
                    for from_file in files:
                        fits = [m for m in legal if m.to_square == to and board.piece_type_at(m.from_square) == piece
                                and (m.promotion or 0) == promotion and not board.is_castling(m)
                                and (from_file < 0 or chess.square_file(m.from_square) == from_file)]
                        found = find_origin(cells, side, piece, to, from_file, -1, promotion, en_passant,
                                            board.king(board.turn), board.is_check(), candidates)
                        assert found == (fits[0].from_square if len(fits) == 1 else -1), (board.fen(), piece, to)
                        checked += len(fits)
        for short, target in ((True, 6), (False, 2)):
            home = 0 if side > 0 else 56
            castle = chess.Move(home + 4, home + target)
            expected = home + target if castle in legal and board.is_castling(castle) else -1
            assert castle_target(cells, side, short, _rights(board)) == expected, board.fen()
    assert checked > 1000


def test_a_played_move_leaves_python_chess_board_and_state() -> None:
    board, cells, state = chess.Board(), np.empty(65, dtype=np.int8), np.empty(5, dtype=np.int64)
    rng = random.Random(11)
    new_game(cells, state)
    for _ in range(200):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        side = 1 if board.turn == chess.WHITE else -1
        apply_move(cells, state, side, move.from_square, move.to_square, move.promotion or 0)
        board.push(move)
        assert np.array_equal(cells, _mailbox(board)), board.fen()
        assert (state[0], state[1], state[2]) == (board.king(chess.WHITE), board.king(chess.BLACK), _rights(board))
        assert state[3] == (board.ep_square if board.ep_square is not None else -1)
        assert bool(state[4]) == board.is_check(), board.fen()
