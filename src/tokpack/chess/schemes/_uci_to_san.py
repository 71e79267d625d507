"""UCI to SAN: many games replayed together, one ply at a time, every move spelled in SAN, or the position before it.

This is the opposite direction of reading PGN (:mod:`tokpack.chess.pgn._san_to_uci`). Replaying a
game with python-chess costs a Python call per ply, which is what makes the san scheme slow. Here the games of a table advance in lockstep: ply ``t`` of every game that
has one is checked, spelled and applied with a few dozen numpy operations over all those games
at once, so the Python cost is per ply *index*, not per ply. Boards are ``int8`` arrays of 65
cells (squares 0..63 as python-chess numbers them, plus an off-board sentinel at 64 that ends
every ray), pieces signed by colour.

Work is kept per ply and per game close to a few 8-cell rays: a move can only give check
directly, or by opening a line through a square it empties (its from-square, the pawn taken en
passant); it can only expose its own king the same way, unless that king was in check or is the
piece moving, and only then is the king's square searched in full. Other pieces that could go to
the same square (for SAN's disambiguation) are searched for only when the side has two pieces of
the moving kind, which per-game piece counts say.

Every move is checked for legality (piece of the side to move, shape and path, castling rights
and attacked squares, en passant only right after the double step, own king not left in check)
and an illegal one raises :class:`~tokpack.chess.schemes.game_encoder.GameError`. The SAN rules are
python-chess's own (disambiguation by file, then rank, then both, among *legal* moves only;
``+``/``#``; a null move ``0000`` is ``--``). Deciding mate needs the defender's legal moves:
when the checked king has no square to step to, that rare position is handed to python-chess.

:func:`replay_positions` runs the same lockstep replay and keeps, before every move, what a FEN
says of the position (the position scheme's input, :mod:`tokpack.chess.schemes.position`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from tokpack.chess.board.mailbox import BISHOP, KING, KNIGHT, PAWN, QUEEN, ROOK, SENTINEL, START, TABLES
from tokpack.chess.schemes._uci_moves import ParsedMoves
from tokpack.chess.schemes.game_encoder import GameError

_ORTHOGONAL = np.arange(8) < 4  # the first four of a square's eight rays
#: Width of one move's SAN in :func:`replay_san`'s output (``Qh4xe1+`` and ``exd8=Q#`` need 7).
SAN_WIDTH = 9
_START_COUNTS = np.bincount(START[:64].astype(np.int64) + 6, minlength=13)  # pieces by value + 6
_PIECE_LETTERS = np.frombuffer(b"\0\0NBRQK", dtype=np.uint8)
_FILES = np.frombuffer(b"abcdefgh", dtype=np.uint8)
_RANKS = np.frombuffer(b"12345678", dtype=np.uint8)


def _first_piece(board: np.ndarray, rows: np.ndarray, rays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first occupied cell along each ray: its content and its square (last axis is the ray)."""
    cells = board[rows.reshape(rows.shape + (1,) * (rays.ndim - rows.ndim)), rays]
    first = (cells != 0).argmax(axis=-1)[..., None]
    return np.take_along_axis(cells, first, -1)[..., 0], np.take_along_axis(rays, first, -1)[..., 0]


def _attacked(board: np.ndarray, rows: np.ndarray, squares: np.ndarray, by: int) -> np.ndarray:
    """Whether each ``squares[i]`` of board ``rows[i]`` is attacked by the side ``by`` (+1 white);
    the board rules' attack test (:func:`tokpack.chess.board.rules.attacked_on`)."""
    from tokpack.chess.board.rules import attacked_on  # numba: loaded when a game is replayed

    rows = np.asarray(rows, dtype=np.int64)
    squares = np.ascontiguousarray(np.broadcast_to(np.asarray(squares, dtype=np.int64), rows.shape))
    return attacked_on(board, rows, squares, by)


def replay_san(parsed: ParsedMoves) -> np.ndarray:
    """The SAN of every move of ``parsed`` (games from the standard start), as ASCII bytes.

    Returns an ``(n_moves, SAN_WIDTH)`` ``uint8`` array: row ``i`` is move ``i``'s SAN padded
    with zero bytes (read a row's non-zero bytes in order).

    Raises:
        GameError: the first illegal or malformed move, naming the game's row and the ply.
    """
    n_moves = int(parsed.counts.sum())
    out = np.zeros((n_moves, SAN_WIDTH), dtype=np.uint8)
    if n_moves == 0:
        return out
    _check_readable(parsed)
    for ply, moves, order, state in _lockstep(parsed):
        out[moves] = state.play(ply, parsed, moves, order)
    return out


def _check_readable(parsed: ParsedMoves) -> None:
    """Raise :class:`GameError` for the first move that is not UCI (nor the null move)."""
    readable = parsed.well_formed | parsed.null
    if not readable.all():
        first_moves = np.cumsum(parsed.counts) - parsed.counts
        bad = int(np.flatnonzero(~readable)[0])
        game = int(np.searchsorted(first_moves, bad, side="right") - 1)
        raise GameError(game, f"ply {bad - first_moves[game] + 1}: not a UCI move")


def _lockstep(parsed: ParsedMoves) -> Iterator[tuple[int, np.ndarray, np.ndarray, _Boards]]:
    """``(ply, moves, order, boards)`` for every ply index, before it is played: ``moves`` are the
    indices (into ``parsed``) of ply ``ply`` of every game that has one, on boards ``[0,
    len(moves))``; board row ``r`` is game ``order[r]``. The caller plays them."""
    counts = parsed.counts
    # Longest games first, so the games still playing at ply t are always rows [0, active).
    order = np.argsort(-counts, kind="stable")
    row_first_move = (np.cumsum(counts) - counts)[order]
    active_at = np.searchsorted(-counts[order], -np.arange(int(counts.max()) if len(counts) else 0), side="left")
    state = _Boards(len(counts))
    for ply, active in enumerate(active_at.tolist()):
        yield ply, row_first_move[:active] + ply, order, state


@dataclass(frozen=True)
class Positions:
    """The position before every move of many games, as FEN spells it (row ``i``: before move ``i``).

    ``board`` holds the 64 squares (python-chess's numbering), pieces signed by colour (white
    positive); ``rights`` the castling rights (1 K, 2 Q, 4 k, 8 q); ``en_passant`` the square a
    pawn may take en passant *legally* (python-chess's ``board.fen()`` names it only then), or -1;
    ``halfmove`` the plies since the last capture or pawn move; ``ply`` the move's ply in its game
    (0: White's first), which gives the side to move and the full-move number.
    """

    board: np.ndarray
    rights: np.ndarray
    en_passant: np.ndarray
    halfmove: np.ndarray
    ply: np.ndarray


def replay_positions(parsed: ParsedMoves) -> Positions:
    """Every position of ``parsed`` (games from the standard start) before each move, replaying
    the games in lockstep as :func:`replay_san` does, every move checked for legality.

    Raises:
        GameError: the first illegal, malformed or null move, naming the game's row and the ply.
    """
    _check_readable(parsed)
    if parsed.null.any():
        first_moves = np.cumsum(parsed.counts) - parsed.counts
        bad = int(np.flatnonzero(parsed.null)[0])
        game = int(np.searchsorted(first_moves, bad, side="right") - 1)
        raise GameError(game, f"ply {bad - first_moves[game] + 1} (0000): a null move is no move of chess")
    n_moves = int(parsed.counts.sum())
    board = np.zeros((n_moves, 64), dtype=np.int8)
    rights = np.zeros(n_moves, dtype=np.uint8)
    en_passant = np.full(n_moves, -1, dtype=np.int8)
    halfmove = np.zeros(n_moves, dtype=np.int32)
    ply_of = np.zeros(n_moves, dtype=np.int32)
    clock = np.zeros(len(parsed.counts), dtype=np.int32)
    for ply, moves, order, state in _lockstep(parsed):
        active = len(moves)
        rows = np.arange(active)
        side = 1 if ply % 2 == 0 else -1
        board[moves] = state.board[:active, :64]
        rights[moves] = state.rights[:active]
        en_passant[moves] = _legal_en_passant(state, active, side)
        halfmove[moves] = clock[:active]
        ply_of[moves] = ply
        # A capture or a pawn move sets the clock back to zero (checked before the move is played).
        zeroing = (np.abs(state.board[rows, parsed.from_square[moves]]) == PAWN) | (state.board[rows, parsed.to_square[moves]] != 0)
        state.play(ply, parsed, moves, order)
        clock[:active] = np.where(zeroing, 0, clock[:active] + 1)
    return Positions(board, rights, en_passant, halfmove, ply_of)


def _legal_en_passant(state: _Boards, active: int, side: int) -> np.ndarray:
    """For boards ``[0, active)`` with ``side`` to move: the en passant square where a pawn of
    ``side`` may legally take (its own king not left attacked), else -1."""
    square = state.en_passant[:active]
    out = np.full(active, -1, dtype=np.int8)
    rows = np.flatnonzero(square >= 0)
    if not len(rows):
        return out
    target = square[rows]
    legal = np.zeros(len(rows), dtype=bool)
    for slot in range(2):  # the two squares a pawn of the side takes the target from
        origin = TABLES["pawn_attackers"][0 if side > 0 else 1, target, slot]
        has = state.board[rows, origin] == side * PAWN  # (the off-board cell never holds a pawn)
        if not has.any():
            continue
        boards = state.board[rows[has]].copy()
        pick = np.arange(len(boards))
        boards[pick, origin[has]] = 0
        boards[pick, target[has]] = side * PAWN
        boards[pick, target[has] - 8 * side] = 0
        king = state.kings[rows[has], 0 if side > 0 else 1]
        legal[has] |= ~_attacked(boards, pick, king, -side)
    out[rows[legal]] = target[legal]
    return out


def _first_on_line(board: np.ndarray, rows: np.ndarray, origin: np.ndarray, line: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first occupied cell from ``origin`` along direction ``line`` (one per row): value, square."""
    rays = TABLES["ray"][origin, line]
    cells = board[rows[:, None], rays]
    first = (cells != 0).argmax(axis=1)
    pick = np.arange(len(rows))
    return cells[pick, first], rays[pick, first]


def _slider_behind(board: np.ndarray, rows: np.ndarray, king: np.ndarray, square: np.ndarray, by: int) -> np.ndarray:
    """Whether a slider of side ``by`` attacks ``king`` along the line from ``king`` through ``square``.

    That is the only way emptying or filling ``square`` can change whether ``king`` is attacked.
    """
    line = TABLES["direction"][king, square]
    hit = np.zeros(len(rows), dtype=bool)
    aligned = np.flatnonzero(line >= 0)
    if len(aligned):
        along = line[aligned]
        found, _ = _first_on_line(board, rows[aligned], king[aligned], along)
        hit[aligned] = (found == by * QUEEN) | (found == np.where(along < 4, by * ROOK, by * BISHOP))
    return hit


class _Boards:
    """The positions of every game, and what legality and SAN need besides the squares."""

    _FIELDS = ("board", "kings", "rights", "en_passant", "in_check", "counts")

    def __init__(self, n_games: int) -> None:
        self.board = np.tile(START, (n_games, 1))
        self.kings = np.tile(np.array([4, 60], dtype=np.intp), (n_games, 1))
        self.rights = np.full(n_games, 15, dtype=np.uint8)  # castling: 1 K, 2 Q, 4 k, 8 q
        self.en_passant = np.full(n_games, -1, dtype=np.intp)  # where a pawn may capture e.p.
        self.in_check = np.zeros(n_games, dtype=bool)  # the side to move is in check
        self.counts = np.tile(_START_COUNTS, (n_games, 1))  # pieces on the board, by value + 6

    def play(self, ply: int, parsed: ParsedMoves, moves: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Check, spell and apply ply ``ply`` on boards ``[0, len(moves))``; return their SAN bytes."""
        active = len(moves)
        passes = parsed.null[moves]
        if passes.any():
            return self._play_with_passes(ply, parsed, moves, order, passes)
        board, kings = self.board, self.kings
        rows = np.arange(active)
        side, me = (1, 0) if ply % 2 == 0 else (-1, 1)
        start = parsed.from_square[moves].astype(np.intp)
        end = parsed.to_square[moves].astype(np.intp)
        promotion = parsed.promotion[moves].astype(np.int8)

        def refuse(where: np.ndarray, reason: str) -> None:
            if where.any():
                bad = rows[where]
                game_row = bad[np.argmin(order[bad])]
                move = int(moves[game_row])
                raise GameError(int(order[game_row]), f"ply {ply + 1} ({parsed.move_text(move)}): {reason}")

        piece = board[rows, start] * side
        target = board[rows, end] * side
        refuse(piece <= 0, "no piece of the side to move on the from-square")
        refuse(target > 0, "lands on a piece of its own side")
        file_step = end % 8 - start % 8
        rank_step = (end // 8 - start // 8) * side
        distance = np.maximum(np.abs(file_step), np.abs(rank_step))
        is_pawn, is_knight, is_king = piece == PAWN, piece == KNIGHT, piece == KING
        refuse((promotion != 0) != (is_pawn & (end // 8 == (7 if side > 0 else 0))),
               "a pawn reaching the last rank must promote, and nothing else may")

        # Pawns: one step onto an empty square, two from the start rank over an empty one, or a
        # diagonal capture (en passant onto the square just skipped by the enemy's double step).
        over = board[rows, np.clip(start + 8 * side, 0, SENTINEL)]
        pushes = (file_step == 0) & (target == 0) & (
            (rank_step == 1) | ((rank_step == 2) & (start // 8 == (1 if side > 0 else 6)) & (over == 0)))
        diagonal = (np.abs(file_step) == 1) & (rank_step == 1)
        takes_en_passant = diagonal & (target == 0) & (end == self.en_passant[:active])
        refuse(is_pawn & ~(pushes | (diagonal & (target < 0)) | takes_en_passant), "not a pawn move")
        takes_en_passant &= is_pawn
        refuse(is_knight & (np.abs(file_step * rank_step) != 2), "not a knight move")
        castles = is_king & (np.abs(file_step) == 2) & (rank_step == 0) & (start == (4 if side > 0 else 60))
        refuse(is_king & ~castles & (distance != 1), "not a king move")
        self._check_slides(rows, piece, start, end, distance, refuse)
        file_flag, rank_flag = self._disambiguate(rows, piece, start, end, side, me)
        if castles.any():
            self._check_castling(rows[castles], start[castles], end[castles], side, me, refuse, rows)

        # Apply the move, and keep the piece counts, kings, castling rights and e.p. square.
        counts = self.counts
        captured = np.flatnonzero(target < 0)
        counts[captured, board[captured, end[captured]] + 6] -= 1
        board[rows, start] = 0
        board[rows, end] = np.where(promotion > 0, promotion, piece) * side
        promoted = np.flatnonzero(promotion > 0)
        counts[promoted, side * PAWN + 6] -= 1
        counts[promoted, side * promotion[promoted] + 6] += 1
        taken_at = end - 8 * side
        board[rows[takes_en_passant], taken_at[takes_en_passant]] = 0
        counts[rows[takes_en_passant], 6 - side * PAWN] -= 1
        short = end % 8 == 6
        rook_from, rook_to = np.where(short, end + 1, end - 2), np.where(short, end - 1, end + 1)
        board[rows[castles], rook_from[castles]] = 0
        board[rows[castles], rook_to[castles]] = ROOK * side
        kings[rows[is_king], me] = end[is_king]
        lost = TABLES["corner_rights"][start] | TABLES["corner_rights"][end]
        lost |= np.where(is_king, 3 if side > 0 else 12, 0).astype(np.uint8)
        self.rights[:active] &= ~lost
        self.en_passant[:active] = np.where(is_pawn & (rank_step == 2), start + 8 * side, -1)

        # Own king: searched in full if it moved or was in check, else only behind the emptied squares.
        own = kings[:active, me]
        full = is_king | self.in_check[:active]
        exposed = np.zeros(active, dtype=bool)
        exposed[full] = _attacked(board, rows[full], own[full], -side)
        quick = ~full
        exposed[quick] = _slider_behind(board, rows[quick], own[quick], start[quick], -side)
        exposed[takes_en_passant] |= _slider_behind(board, rows[takes_en_passant], own[takes_en_passant],
                                                    taken_at[takes_en_passant], -side)
        refuse(exposed, "leaves its own king in check")

        # Enemy king: attacked by the piece that moved, or along a line the move opened.
        enemy = kings[:active, 1 - me]
        moved = board[rows, end] * side
        check = (moved == KNIGHT) & (np.abs((enemy % 8 - end % 8) * (enemy // 8 - end // 8)) == 2)
        check |= (moved == PAWN) & (TABLES["pawn_attackers"][me, enemy] == end[:, None]).any(axis=1)
        check |= _slider_behind(board, rows, enemy, end, side) | _slider_behind(board, rows, enemy, start, side)
        check[takes_en_passant] |= _slider_behind(board, rows[takes_en_passant], enemy[takes_en_passant],
                                                  taken_at[takes_en_passant], side)
        check[castles] |= _slider_behind(board, rows[castles], enemy[castles], rook_to[castles], side)
        self.in_check[:active] = check
        mate = np.zeros(active, dtype=bool)
        if check.any():
            mate[check] = self._mated(rows[check], -side)

        san = np.zeros((active, SAN_WIDTH), dtype=np.uint8)
        captures = (target < 0) | takes_en_passant
        san[:, 0] = np.where(is_pawn, np.where(captures, _FILES[start % 8], 0), _PIECE_LETTERS[piece])
        san[:, 1] = np.where(file_flag, _FILES[start % 8], 0)
        san[:, 2] = np.where(rank_flag, _RANKS[start // 8], 0)
        san[:, 3] = np.where(captures, ord("x"), 0)
        san[:, 4] = _FILES[end % 8]
        san[:, 5] = _RANKS[end // 8]
        san[:, 6] = np.where(promotion > 0, ord("="), 0)
        san[:, 7] = np.where(promotion > 0, _PIECE_LETTERS[promotion], 0)
        san[castles, :8] = np.where(short[castles, None], np.frombuffer(b"O-O\0\0\0\0\0", np.uint8),
                                    np.frombuffer(b"O-O-O\0\0\0", np.uint8))
        san[:, 8] = np.where(mate, ord("#"), np.where(check, ord("+"), 0))
        return san

    def _play_with_passes(self, ply: int, parsed: ParsedMoves, moves: np.ndarray, order: np.ndarray,
                          passes: np.ndarray) -> np.ndarray:
        """A ply where some games pass (``0000``): those spell ``--`` and only lose en passant.

        The other games are played on a compacted copy of their state, then written back.
        """
        san = np.zeros((len(moves), SAN_WIDTH), dtype=np.uint8)
        san[passes, :2] = ord("-")
        passing = np.flatnonzero(passes)
        self.en_passant[passing] = -1
        # After a pass the side to move is the other one: whether it is in check, ask the board.
        enemy = self.kings[passing, 1 if ply % 2 == 0 else 0]
        self.in_check[passing] = _attacked(self.board, passing, enemy, 1 if ply % 2 == 0 else -1)
        playing = np.flatnonzero(~passes)
        if len(playing):
            sub = _Boards(0)
            for name in self._FIELDS:
                setattr(sub, name, getattr(self, name)[playing])
            san[playing] = sub.play(ply, parsed, moves[playing], order[playing])
            for name in self._FIELDS:
                getattr(self, name)[playing] = getattr(sub, name)
        return san

    def _check_slides(self, rows: np.ndarray, piece: np.ndarray, start: np.ndarray, end: np.ndarray,
                      distance: np.ndarray, refuse: Callable[[np.ndarray, str], None]) -> None:
        """Refuse a bishop, rook or queen move off its lines or through a piece."""
        sliding = np.flatnonzero((piece >= BISHOP) & (piece <= QUEEN))
        line = TABLES["direction"][start[sliding], end[sliding]]
        along = np.maximum(line, 0)
        cells = self.board[sliding[:, None], TABLES["ray"][start[sliding], along]]
        blocked = ((cells != 0) & (np.arange(8) < distance[sliding, None] - 1)).any(axis=1)
        bad = (line < 0) | ~TABLES["allowed"][piece[sliding], along] | blocked
        refuse(np.isin(rows, sliding[bad]), "not a move of that piece, or its path is blocked")

    def _disambiguate(self, rows: np.ndarray, piece: np.ndarray, start: np.ndarray, end: np.ndarray,
                      side: int, me: int) -> tuple[np.ndarray, np.ndarray]:
        """Where SAN needs the from-file and the from-rank of a knight, bishop, rook or queen move.

        The other pieces of the same kind that could legally go to the same square are the
        knights a knight's jump away and the sliders first met along the allowed rays from it,
        less those pinned to their king off the line they would move along. Only games where the
        side has two or more pieces of that kind are searched.
        """
        board = self.board
        file_flag = np.zeros(len(rows), dtype=bool)
        rank_flag = np.zeros(len(rows), dtype=bool)
        kinds = np.clip(piece, KNIGHT, QUEEN)
        twins = (piece >= KNIGHT) & (piece <= QUEEN) & (self.counts[rows, side * kinds + 6] >= 2)
        pieces = rows[twins]
        if not len(pieces):
            return file_flag, rank_flag
        kind, origin, square = piece[pieces], start[pieces], end[pieces]
        slides = kind != KNIGHT
        found, found_at = _first_piece(board, pieces, TABLES["ray"][square])
        jumps = TABLES["knight"][square]
        candidates_at = np.where(slides[:, None], found_at, jumps)
        candidates = np.where(slides[:, None], (found == side * kind[:, None]) & TABLES["allowed"][kind],
                              board[pieces[:, None], jumps] == side * KNIGHT)
        candidates &= candidates_at != origin[:, None]
        which, slot = np.nonzero(candidates)
        if not len(which):
            return file_flag, rank_flag
        other = candidates_at[which, slot]
        legal = ~self._pinned_off_line(pieces[which], other, square[which], side, me)
        which, other = which[legal], other[legal]
        same_rank = np.zeros(len(pieces), dtype=bool)
        same_file = np.zeros(len(pieces), dtype=bool)
        has_other = np.zeros(len(pieces), dtype=bool)
        has_other[which] = True
        np.logical_or.at(same_rank, which, other // 8 == origin[which] // 8)
        np.logical_or.at(same_file, which, other % 8 == origin[which] % 8)
        file_flag[pieces] = has_other & (same_rank | ~same_file)
        rank_flag[pieces] = has_other & same_file
        return file_flag, rank_flag

    def _pinned_off_line(self, rows: np.ndarray, squares: np.ndarray, targets: np.ndarray, side: int, me: int) -> np.ndarray:
        """Whether the piece on ``squares`` is pinned to its king and ``targets`` is off the pin line."""
        board, king = self.board, self.kings[rows, me]
        line = TABLES["direction"][king, squares]
        along = np.maximum(line, 0)
        _, first_at = _first_piece(board, rows, TABLES["ray"][king, along])
        beyond, _ = _first_piece(board, rows, TABLES["ray"][squares, along])
        pinner = np.where(line < 4, side * -ROOK, side * -BISHOP)
        pinned = (line >= 0) & (first_at == squares) & ((beyond == pinner) | (beyond == -side * QUEEN))
        return pinned & (TABLES["direction"][king, targets] != line)

    def _check_castling(self, castling: np.ndarray, start: np.ndarray, end: np.ndarray, side: int, me: int,
                        refuse: Callable[[np.ndarray, str], None], rows: np.ndarray) -> None:
        board = self.board
        short = end > start
        right = np.where(short, 1, 2) << (2 * me)
        rook_square = np.where(short, start + 3, start - 4)
        between_ok = np.where(short, (board[castling, start + 1] == 0) & (board[castling, start + 2] == 0),
                              (board[castling, start - 1] == 0) & (board[castling, start - 2] == 0)
                              & (board[castling, start - 3] == 0))
        unsafe = _attacked(board, castling, start, -side) | _attacked(board, castling, np.where(short, start + 1, start - 1), -side)
        bad = ((self.rights[castling] & right) == 0) | (board[castling, rook_square] != side * ROOK) | ~between_ok | unsafe
        refuse(np.isin(rows, castling[bad]), "castling is not allowed here")

    def _mated(self, rows: np.ndarray, defender: int) -> np.ndarray:
        """For kings of ``defender`` in check on boards ``rows``: whether it is mate."""
        board = self.board
        king = self.kings[rows, 0 if defender > 0 else 1]
        steps = TABLES["king"][king]
        which, slot = np.nonzero((steps != SENTINEL) & (board[rows[:, None], steps] * defender <= 0))
        board[rows, king] = 0  # lift the king so that a slider's ray runs on through its square
        safe = ~_attacked(board, rows[which], steps[which, slot], -defender)
        board[rows, king] = defender * KING
        mate = np.ones(len(rows), dtype=bool)
        mate[which[safe]] = False
        if mate.any():
            mate[mate] = ~self._answered(rows[mate], king[mate], defender)
        return mate

    def _answered(self, rows: np.ndarray, king: np.ndarray, defender: int) -> np.ndarray:
        """For kings of ``defender`` in check that cannot step aside: can another piece answer it?

        A double check cannot be answered. A single one can by a piece, not pinned off its line,
        that captures the checker or steps between it and the king (a pawn by a capture onto the
        checker's square, or by one or two steps onto a square between). The rare check by a pawn
        that could be taken en passant is left to python-chess.
        """
        board, attacker = self.board, -defender
        n, pick = len(rows), np.arange(len(rows))
        found, found_at = _first_piece(board, rows, TABLES["ray"][king])
        by_slider = (found == np.where(_ORTHOGONAL, attacker * ROOK, attacker * BISHOP)) | (found == attacker * QUEEN)
        jumps = TABLES["knight"][king]
        by_knight = board[rows[:, None], jumps] == attacker * KNIGHT
        pawns_at = TABLES["pawn_attackers"][0 if attacker > 0 else 1, king]
        by_pawn = board[rows[:, None], pawns_at] == attacker * PAWN
        single = by_slider.sum(axis=1) + by_knight.sum(axis=1) + by_pawn.sum(axis=1) == 1
        line = by_slider.argmax(axis=1)
        checker = np.where(by_slider.any(axis=1), found_at[pick, line],
                           np.where(by_knight.any(axis=1), jumps[pick, by_knight.argmax(axis=1)],
                                    pawns_at[pick, by_pawn.argmax(axis=1)]))
        # The squares that answer: along the checking line up to the checker, or the checker alone.
        ray = np.where(by_slider.any(axis=1)[:, None], TABLES["ray"][king, line], SENTINEL)
        ray[:, 0] = np.where(by_slider.any(axis=1), ray[:, 0], checker)
        upto = np.arange(8) <= (ray == checker[:, None]).argmax(axis=1)[:, None]
        which, slot = np.nonzero(upto & single[:, None])
        target = ray[which, slot]
        pair_rows = rows[which]
        takes = target == checker[which]
        # Knights, sliders and capturing pawns of the defender that reach each answering square.
        knight_at = TABLES["knight"][target]
        slide_found, slide_at = _first_piece(board, pair_rows, TABLES["ray"][target])
        pawn_at = np.where(takes[:, None], TABLES["pawn_attackers"][0 if defender > 0 else 1, target], SENTINEL)
        one_back = np.clip(target - 8 * defender, 0, SENTINEL)
        two_back = np.clip(target - 16 * defender, 0, SENTINEL)
        double_rank = target // 8 == (3 if defender > 0 else 4)
        push_at = np.stack([np.where(~takes, one_back, SENTINEL),
                            np.where(~takes & double_rank & (board[pair_rows, one_back] == 0), two_back, SENTINEL)], axis=1)
        squares = np.concatenate([knight_at, slide_at, pawn_at, push_at], axis=1)
        wanted = np.concatenate([
            np.full(knight_at.shape, defender * KNIGHT),
            np.where(board[pair_rows[:, None], slide_at] == defender * QUEEN, defender * QUEEN,
                     np.where(_ORTHOGONAL, defender * ROOK, defender * BISHOP)),
            np.full((len(target), 4), defender * PAWN)], axis=1)
        hit = (board[pair_rows[:, None], squares] == wanted) & (squares != SENTINEL)
        del slide_found
        pair, column = np.nonzero(hit)
        me = 0 if defender > 0 else 1
        legal = ~self._pinned_off_line(pair_rows[pair], squares[pair, column], target[pair], defender, me)
        answered = np.zeros(n, dtype=bool)
        answered[which[pair[legal]]] = True
        # A checking pawn that has just stepped two squares might be taken en passant.
        ep = self.en_passant[rows]
        odd = single & ~answered & by_pawn.any(axis=1) & (ep >= 0) & (checker == ep + 8 * attacker)
        for i in np.flatnonzero(odd):
            answered[i] = not self._python_chess_mate(int(rows[i]), defender)
        return answered

    def _python_chess_mate(self, row: int, defender: int) -> bool:
        import chess

        cells = self.board[row, :64]
        position = chess.Board(None)
        for square in np.flatnonzero(cells):
            value = int(cells[square])
            position.set_piece_at(int(square), chess.Piece(abs(value), value > 0))
        position.turn = defender > 0
        ep = int(self.en_passant[row])
        position.ep_square = ep if ep >= 0 else None
        return position.is_checkmate()
