"""The board every chess replay here shares: piece codes, a 65-cell mailbox and its move tables.

Squares 0..63 are numbered as python-chess numbers them; cell 64 is an off-board sentinel that
ends every ray. Pieces are signed by colour (white positive). Used by the rules of a legal move
(:mod:`tokpack.chess.board.rules`, which hold the one attack test), by reading SAN as UCI and by the
lockstep replay that spells UCI as SAN.
"""

from __future__ import annotations

import numpy as np

PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = 1, 2, 3, 4, 5, 6
OFF = 7  # the sentinel cell: not empty, not a piece, so a ray stops there and finds nothing
SENTINEL = 64

_DIRECTIONS = ((0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1))  # (file, rank)


def _build_tables() -> dict[str, np.ndarray]:
    ray = np.full((65, 8, 8), SENTINEL, dtype=np.intp)
    direction = np.full((65, 65), -1, dtype=np.intp)
    knight = np.full((65, 8), SENTINEL, dtype=np.intp)
    king = np.full((65, 8), SENTINEL, dtype=np.intp)
    pawn_attackers = np.full((2, 65, 2), SENTINEL, dtype=np.intp)  # [attacker colour, target]
    jumps = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
    for square in range(64):
        file, rank = square % 8, square // 8
        for d, (df, dr) in enumerate(_DIRECTIONS):
            for k in range(1, 8):
                f, r = file + k * df, rank + k * dr
                if not (0 <= f < 8 and 0 <= r < 8):
                    break
                ray[square, d, k - 1] = r * 8 + f
                direction[square, r * 8 + f] = d
            f, r = file + df, rank + dr
            if 0 <= f < 8 and 0 <= r < 8:
                king[square, d] = r * 8 + f
        for j, (df, dr) in enumerate(jumps):
            f, r = file + df, rank + dr
            if 0 <= f < 8 and 0 <= r < 8:
                knight[square, j] = r * 8 + f
        for colour, forward in ((0, 1), (1, -1)):
            for side, df in enumerate((-1, 1)):
                f, r = file - df, rank - forward  # where a pawn attacking this square stands
                if 0 <= f < 8 and 0 <= r < 8:
                    pawn_attackers[colour, square, side] = r * 8 + f
    allowed = np.zeros((7, 8), dtype=bool)  # piece type -> directions it slides along
    allowed[BISHOP, 4:] = allowed[ROOK, :4] = allowed[QUEEN, :] = True
    corner_rights = np.zeros(65, dtype=np.uint8)  # rook squares whose move or capture ends a right
    corner_rights[[7, 0, 63, 56]] = [1, 2, 4, 8]
    return {"ray": ray, "direction": direction, "knight": knight, "king": king,
            "pawn_attackers": pawn_attackers, "allowed": allowed, "corner_rights": corner_rights}


TABLES = _build_tables()
START = np.zeros(65, dtype=np.int8)
START[:8] = [ROOK, KNIGHT, BISHOP, QUEEN, KING, BISHOP, KNIGHT, ROOK]
START[8:16] = PAWN
START[48:56] = -PAWN
START[56:64] = -START[:8]
START[SENTINEL] = OFF
