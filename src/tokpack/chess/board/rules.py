"""The rules of a legal move on a mailbox board, compiled by numba: attacks, pins, check, castling, playing a move.

One board is a 65-cell ``int8`` array (:mod:`tokpack.chess.board.mailbox`); the state that goes with
it is five integers (both kings' squares, the castling rights, the en passant square, whether the
side to move is in check: :func:`new_game`). :func:`find_origin` finds the one legal origin of a
move given by its piece kind, target square and the file, rank and promotion SAN may name, as
python-chess's ``Board.parse_san`` filters its legal moves; :func:`castle_target` decides a
castling; :func:`apply_move` plays a move and keeps the state. Reading PGN resolves SAN to UCI with
these (:mod:`tokpack.chess.pgn._san_to_uci_compiled`), and the lockstep UCI to SAN replay asks
:func:`attacked_on`, so the attack test is written once.

A move's legality looks at one line (from its king through the square it leaves) unless its side
is in check, which :func:`apply_move` tracks move by move. The helpers are inlined by LLVM where
they are called (numba's own IR inlining would count references to the board at every call; see
:mod:`tokpack._kernels`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokpack.chess.board.mailbox import BISHOP, KING, KNIGHT, PAWN, QUEEN, ROOK, SENTINEL, START, TABLES

# A small helper of a kernel's loop, inlined by LLVM where it is called.
_helper = njit(nogil=True, cache=True, forceinline=True)

_RAY = np.ascontiguousarray(TABLES["ray"][:64, :, :7])  # [square, direction (4 orthogonal first), step]
_KNIGHT = np.ascontiguousarray(TABLES["knight"][:64])
_KING = np.ascontiguousarray(TABLES["king"][:64])
_PAWN_ATTACKERS = np.ascontiguousarray(TABLES["pawn_attackers"][:, :64])  # [attacker colour, target, 2]
_CORNER = np.ascontiguousarray(TABLES["corner_rights"][:64].astype(np.int64))
_DIRECTION = np.ascontiguousarray(TABLES["direction"][:64, :64])  # [from, to]: the ray from one to the other, or -1
_BOARD = START.copy()


@_helper
def attacked(board: np.ndarray, square: int, by: int) -> bool:
    """Whether ``square`` is attacked by side ``by`` (+1 white, -1 black)."""
    for d in range(8):
        for k in range(7):
            cell = _RAY[square, d, k]
            value = board[cell]
            if value == 0:
                continue
            if value == by * QUEEN or value == by * (ROOK if d < 4 else BISHOP):
                return True
            break
    for j in range(8):
        if board[_KNIGHT[square, j]] == by * KNIGHT or board[_KING[square, j]] == by * KING:
            return True
    colour = 0 if by > 0 else 1
    return board[_PAWN_ATTACKERS[colour, square, 0]] == by * PAWN or board[_PAWN_ATTACKERS[colour, square, 1]] == by * PAWN


@njit(nogil=True, cache=True)
def attacked_on(boards: np.ndarray, rows: np.ndarray, squares: np.ndarray, by: int) -> np.ndarray:
    """Whether each ``squares[i]`` of board ``boards[rows[i]]`` is attacked by side ``by``: the
    attack test of the lockstep UCI to SAN replay's boards (the off-board cell never is)."""
    out = np.zeros(len(rows), dtype=np.bool_)
    for i in range(len(rows)):
        if squares[i] < SENTINEL:
            out[i] = attacked(boards[rows[i]], squares[i], by)
    return out


@_helper
def _legal_after(board: np.ndarray, side: int, frm: int, to: int, en_passant: int, king: int) -> bool:
    """Whether moving ``frm`` to ``to`` leaves the side's king unattacked (the board is restored)."""
    moving, taken = board[frm], board[to]
    takes_en_passant = moving == side * PAWN and to == en_passant and frm % 8 != to % 8
    behind = to - 8 * side
    board[to], board[frm] = moving, 0
    if takes_en_passant:
        board[behind] = 0
    safe = not attacked(board, to if moving == side * KING else king, -side)
    board[frm], board[to] = moving, taken
    if takes_en_passant:
        board[behind] = -side * PAWN
    return safe


@_helper
def _first_on_ray(board: np.ndarray, square: int, d: int) -> int:
    """The first cell from ``square`` along direction ``d`` that is not empty (the off-board cell at the edge)."""
    for k in range(7):
        cell = _RAY[square, d, k]
        if board[cell] != 0:
            return cell
    return SENTINEL


@_helper
def _slides_to(board: np.ndarray, square: int, d: int, by: int) -> bool:
    """Whether the first piece from ``square`` along direction ``d`` is a piece of side ``by`` that
    slides along it (so it attacks ``square``)."""
    value = board[_first_on_ray(board, square, d)]
    return value == by * QUEEN or value == by * (ROOK if d < 4 else BISHOP)


@_helper
def _safe_after(board: np.ndarray, side: int, frm: int, to: int, en_passant: int, king: int, in_check: bool) -> bool:
    """:func:`_legal_after`, looking at one line where that is enough: when the side is not in
    check and moves a piece other than its king (not taking en passant), the only attack the move
    can let through is along the line from its king through ``frm``."""
    moving = board[frm]
    if in_check or moving == side * KING or (moving == side * PAWN and to == en_passant and frm % 8 != to % 8):
        return _legal_after(board, side, frm, to, en_passant, king)
    d = _DIRECTION[king, frm]
    if d < 0:
        return True
    taken = board[to]
    board[to], board[frm] = moving, 0
    safe = not _slides_to(board, king, d, -side)
    board[frm], board[to] = moving, taken
    return safe


@_helper
def _gives_check(board: np.ndarray, side: int, frm: int, to: int, their_king: int, passant: int) -> bool:
    """Whether the move ``side`` just played from ``frm`` to ``to`` (taking en passant on
    ``passant``, else -1) attacks the other side's king.

    Before it the other king was not attacked (every move played was legal), so an attack comes
    from the piece on ``to``, or along a line the move opened: through ``frm``, through the pawn
    taken en passant, or from the rook a castling moved.
    """
    piece = board[to] * side
    if piece == KNIGHT:
        for j in range(8):
            if _KNIGHT[their_king, j] == to:
                return True
    elif piece == PAWN:
        colour = 0 if side > 0 else 1
        if _PAWN_ATTACKERS[colour, their_king, 0] == to or _PAWN_ATTACKERS[colour, their_king, 1] == to:
            return True
    elif piece != KING:
        d = _DIRECTION[their_king, to]
        if d >= 0 and (piece == QUEEN or piece == (ROOK if d < 4 else BISHOP)) and _first_on_ray(board, their_king, d) == to:
            return True
    d = _DIRECTION[their_king, frm]
    if d >= 0 and _slides_to(board, their_king, d, side):
        return True
    if piece == KING and (to - frm == 2 or frm - to == 2):  # castling: the rook now beside the king
        rook = (frm + to) // 2
        d = _DIRECTION[their_king, rook]
        if 0 <= d < 4 and _first_on_ray(board, their_king, d) == rook:
            return True
    elif passant >= 0:
        d = _DIRECTION[their_king, passant]
        if d >= 0 and _slides_to(board, their_king, d, side):
            return True
    return False


@_helper
def find_origin(board: np.ndarray, side: int, piece: int, to: int, from_file: int, from_rank: int, promotion: int,
          en_passant: int, king: int, in_check: bool, candidates: np.ndarray) -> int:
    """The one legal origin of a SAN move, or -1 (none or several); ``in_check``: the side's king
    is attacked; ``candidates`` is scratch (8 cells)."""
    target = board[to] * side
    if target > 0:
        return -1  # python-chess masks the target with the side's own pieces
    promotes = piece == PAWN and to // 8 == (7 if side > 0 else 0)
    if promotes:
        if promotion < KNIGHT or promotion > QUEEN:
            return -1
    elif promotion != 0:
        return -1
    candidates[:] = SENTINEL
    if piece == KNIGHT:
        for j in range(8):
            candidates[j] = _KNIGHT[to, j]
    elif piece == KING:
        for j in range(8):
            candidates[j] = _KING[to, j]
    elif piece == PAWN:
        back = to - 8 * side
        if 0 <= back < 64:
            if target == 0:
                candidates[0] = back
                double = to - 16 * side
                if double // 8 == (1 if side > 0 else 6) and board[back] == 0:
                    candidates[1] = double
            if target < 0 or (target == 0 and to == en_passant):
                if to % 8 > 0:
                    candidates[2] = back - 1
                if to % 8 < 7:
                    candidates[3] = back + 1
    else:
        first, last = (0, 4) if piece == ROOK else (4, 8) if piece == BISHOP else (0, 8)
        for d in range(first, last):
            for k in range(7):
                cell = _RAY[to, d, k]
                if board[cell] != 0:
                    candidates[d] = cell
                    break
    found, count = -1, 0
    for j in range(8):
        origin = candidates[j]
        if origin == SENTINEL or board[origin] != side * piece:
            continue
        if (from_file >= 0 and origin % 8 != from_file) or (from_rank >= 0 and origin // 8 != from_rank):
            continue
        if _safe_after(board, side, origin, to, en_passant, king, in_check):
            found, count = origin, count + 1
    return found if count == 1 else -1


@_helper
def castle_target(board: np.ndarray, side: int, short: bool, rights: int) -> int:
    """The king's target square of a castling move, or -1 when python-chess would not allow it."""
    home = 4 if side > 0 else 60
    right = (1 if short else 2) << (0 if side > 0 else 2)
    rook = home + 3 if short else home - 4
    if board[home] != side * KING or board[rook] != side * ROOK or (rights & right) == 0:
        return -1
    for square in range(min(home, rook) + 1, max(home, rook)):
        if board[square] != 0:
            return -1
    step = 1 if short else -1
    board[home] = 0  # python-chess looks at the king's path with the king lifted
    safe = not (attacked(board, home, -side) or attacked(board, home + step, -side) or attacked(board, home + 2 * step, -side))
    board[home] = side * KING
    return home + 2 * step if safe else -1


@_helper
def new_game(board: np.ndarray, state: np.ndarray) -> None:
    """The standard starting position, and its state: both kings' squares, castling rights, en passant,
    whether the side to move is in check."""
    board[:] = _BOARD
    state[0], state[1], state[2], state[3], state[4] = 4, 60, 15, -1, 0


@_helper
def apply_move(board: np.ndarray, state: np.ndarray, side: int, f: int, t: int, p: int) -> None:
    """Play the legal move ``f`` to ``t`` (promoting to piece ``p``, 0 for none) for ``side`` on
    ``board``, and bring ``state`` (:func:`new_game`'s) up to date: the kings' squares, castling
    rights, the en passant square, and whether the other side is now in check."""
    rights, en_passant = state[2], state[3]
    moving = board[f] * side
    passant = -1
    if moving == PAWN and t == en_passant and f % 8 != t % 8:
        passant = t - 8 * side
        board[passant] = 0
    board[f] = 0
    board[t] = (p if p > 0 else moving) * side
    if moving == KING:
        state[0 if side > 0 else 1] = t
        rights &= ~(3 if side > 0 else 12)
        if t - f == 2:
            board[f + 3], board[f + 1] = 0, side * ROOK
        elif f - t == 2:
            board[f - 4], board[f - 1] = 0, side * ROOK
    state[2] = rights & ~(_CORNER[f] | _CORNER[t])
    state[3] = f + 8 * side if moving == PAWN and abs(t - f) == 16 else -1
    state[4] = _gives_check(board, side, f, t, state[1] if side > 0 else state[0], passant)
