"""Resolve the SAN moves of many games to UCI by replaying all of them together, one ply at a time.

This is the reverse of :func:`tokpack.chess._replay.replay_san` on the same lockstep boards:
ply ``t`` of every game that has one is resolved with a few dozen numpy operations over all
those games at once. A SAN move names a piece kind, a target square and, optionally, the file
and rank it comes from and a promotion; the move it stands for is the one *legal* move that fits
(python-chess's ``Board.parse_san`` rules, which ignore ``x``, ``+`` and ``#``).

For every game and ply the candidates are the pieces of the named kind that could reach the
target (a knight's jumps, the first piece along each ray, the king's steps, a pawn's pushes and
captures), filtered by the given file and rank; each candidate is then played on a copy of its
board and kept only when its own king is not attacked afterwards. A game resolves only when every
ply has exactly one legal candidate. Anything else (an illegal, ambiguous or unusual move: null
moves, drops, squares-only moves such as ``e2e4``, a king naming a castling square) marks the game
as *unresolved*, and the caller hands that game to python-chess, so a resolved game is always
python-chess's own answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tokpack.chess._replay import (
    _START,
    _T,
    BISHOP,
    KING,
    KNIGHT,
    PAWN,
    QUEEN,
    ROOK,
    SENTINEL,
    _attacked,
    _first_piece,
    _slider_behind,
)

#: Kinds of a parsed SAN token.
NORMAL, SHORT_CASTLE, LONG_CASTLE, UNUSUAL = 0, 1, 2, 3
_SAN = re.compile(r"^([NBKRQ])?([a-h])?([1-8])?[\-x]?([a-h][1-8])(=?[nbrqkNBRQK])?[\+#]?\Z")  # python-chess's
_PIECES = "pnbrqk"
NO_MOVE, SEPARATOR, MANY_MOVES = -1, -2, -3
_CASTLES = {"O-O": SHORT_CASTLE, "0-0": SHORT_CASTLE, "O-O-O": LONG_CASTLE, "0-0-0": LONG_CASTLE}


@dataclass(frozen=True)
class SanTable:
    """Parsed fields of distinct SAN tokens, indexed by token code (one row per code)."""

    kind: np.ndarray
    piece: np.ndarray
    to: np.ndarray
    from_file: np.ndarray
    from_rank: np.ndarray
    promotion: np.ndarray


class SanCodes(dict):  # type: ignore[type-arg]
    """Codes of movetext *words* (whitespace-separated): a SAN token's code, or one of the markers.

    A word holds at most one move in well-formed movetext (``12.Nf3``, ``e4!?``, ``Qxf7#``); its
    code is that move's, :data:`NO_MOVE` for a word without one (``12.``, ``$1``, ``1-0``), or
    :data:`MANY_MOVES` (the game goes to python-chess). Each distinct word and each distinct SAN
    token is parsed once; tokens come from python-chess's movetext expression, word by word, which
    gives the same tokens as over the whole line since no token holds whitespace.
    """

    def __init__(self, tokens: re.Pattern[str], separator: str) -> None:
        super().__init__({separator: SEPARATOR})
        self.tokens = tokens
        self.moves: dict[str, int] = {}
        self._rows: list[tuple[int, int, int, int, int, int]] = []
        self._table: SanTable | None = None

    def __missing__(self, word: str) -> int:
        found = [t for t in self.tokens.findall(word) if t]
        if not found:
            code = NO_MOVE
        elif len(found) > 1:
            code = MANY_MOVES
        else:
            code = self.moves.get(found[0], -1)
            if code < 0:
                code = self.moves[found[0]] = len(self._rows)
                self._rows.append(_parse(found[0]))
                self._table = None
        self[word] = code
        return code

    @property
    def table(self) -> SanTable:
        if self._table is None:
            rows = np.array(self._rows or [(UNUSUAL, 0, 0, -1, -1, 0)], dtype=np.int16).reshape(-1, 6)
            self._table = SanTable(*(rows[:, i].astype(np.intp) for i in range(6)))
        return self._table


def _parse(token: str) -> tuple[int, int, int, int, int, int]:
    """``(kind, piece, to, from_file, from_rank, promotion)`` of one SAN token."""
    if token in _CASTLES:
        return (_CASTLES[token], KING, 0, -1, -1, 0)
    match = _SAN.match(token)
    if not match or (match.group(2) and match.group(3) and not match.group(1)):
        return (UNUSUAL, 0, 0, -1, -1, 0)  # null moves, drops, squares-only moves: python-chess decides
    piece = _PIECES.index(match.group(1).lower()) + 1 if match.group(1) else PAWN
    target = match.group(4)
    to = (ord(target[1]) - ord("1")) * 8 + ord(target[0]) - ord("a")
    from_file = ord(match.group(2)) - ord("a") if match.group(2) else -1
    from_rank = int(match.group(3)) - 1 if match.group(3) else -1
    if piece == PAWN and from_file < 0:
        from_file = to % 8  # python-chess: a pawn move without a file stays on the target's file
    promotion = _PIECES.index(match.group(5)[-1].lower()) + 1 if match.group(5) else 0
    return (NORMAL, piece, to, from_file, from_rank, promotion)


def resolve_san(codes: np.ndarray, counts: np.ndarray, table: SanTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The UCI move of every SAN move (``codes``, game after game; ``counts`` moves per game).

    Returns ``(from_square, to_square, promotion, resolved)``: three arrays over the moves and a
    boolean per game. The moves of an unresolved game are meaningless.
    """
    n_games, n_moves = len(counts), len(codes)
    start = np.zeros(n_moves, dtype=np.int8)
    end = np.zeros(n_moves, dtype=np.int8)
    promo = np.zeros(n_moves, dtype=np.int8)
    resolved = np.ones(n_games, dtype=bool)
    if n_moves == 0:
        return start, end, promo, resolved
    kind = table.kind[codes]
    first_moves = np.cumsum(counts) - counts
    order = np.argsort(-counts, kind="stable")  # longest first: the games at ply t are rows [0, active)
    row_first = first_moves[order]
    alive = np.ones(n_games, dtype=bool)
    unusual = np.bitwise_or.reduceat((kind == UNUSUAL).astype(np.uint8), first_moves[counts > 0]) > 0
    alive[np.argsort(order)[np.flatnonzero(counts > 0)[unusual]]] = False
    state = _ResolvingBoards(n_games)
    active_at = np.searchsorted(-counts[order], -np.arange(int(counts.max())), side="left")
    for ply, active in enumerate(active_at.tolist()):
        rows = np.flatnonzero(alive[:active])
        if not len(rows):
            continue
        moves = row_first[rows] + ply
        code = codes[moves]
        ok, frm, to, pr = state.play(ply, rows, kind[moves], table.piece[code], table.to[code],
                                     table.from_file[code], table.from_rank[code], table.promotion[code])
        alive[rows[~ok]] = False
        start[moves], end[moves], promo[moves] = frm, to, pr
    resolved[order] = alive
    return start, end, promo, resolved


class _ResolvingBoards:
    """Positions of every game, castling rights, en passant squares and checks; moves are resolved, not given."""

    def __init__(self, n_games: int) -> None:
        self.board = np.tile(_START, (n_games, 1))
        self.kings = np.tile(np.array([4, 60], dtype=np.intp), (n_games, 1))
        self.rights = np.full(n_games, 15, dtype=np.uint8)  # castling: 1 K, 2 Q, 4 k, 8 q
        self.en_passant = np.full(n_games, -1, dtype=np.intp)
        self.in_check = np.zeros(n_games, dtype=bool)  # the side to move is in check

    def play(self, ply: int, rows: np.ndarray, kind: np.ndarray, piece: np.ndarray, to: np.ndarray,
             from_file: np.ndarray, from_rank: np.ndarray, promotion: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Resolve and apply one ply on boards ``rows``: (ok, from, to, promotion) per row.

        A row that is not ok is left in any state (its game is handed to python-chess).
        """
        side, me = (1, 0) if ply % 2 == 0 else (-1, 1)
        n = len(rows)
        ok = np.zeros(n, dtype=bool)
        frm = np.zeros(n, dtype=np.intp)
        to = to.astype(np.intp).copy()
        promotion = np.where(kind == NORMAL, promotion, 0)
        normal = np.flatnonzero(kind == NORMAL)
        if len(normal):
            good, chosen = self._resolve(rows[normal], side, me, piece[normal], to[normal], from_file[normal],
                                         from_rank[normal], promotion[normal])
            ok[normal] = good
            frm[normal] = chosen
        castles = kind != NORMAL
        castling = np.flatnonzero(castles)
        if len(castling):
            good, king_from, king_to = self._castle(rows[castling], side, me, kind[castling] == SHORT_CASTLE)
            ok[castling] = good
            frm[castling], to[castling] = king_from, king_to
        done = np.flatnonzero(ok)
        ok[done] = self._apply(rows[done], side, me, frm[done], to[done], promotion[done], castles[done])
        return ok, frm, to, promotion

    def _resolve(self, rows: np.ndarray, side: int, me: int, piece: np.ndarray, to: np.ndarray,
                 from_file: np.ndarray, from_rank: np.ndarray, promotion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The one candidate of each row that fits its SAN (False where none or several do)."""
        board = self.board
        n = len(rows)
        target = board[rows, to] * side
        candidates = np.full((n, 8), SENTINEL, dtype=np.intp)
        for kind, jumps in ((KNIGHT, _T["knight"]), (KING, _T["king"])):
            which = np.flatnonzero(piece == kind)
            candidates[which] = jumps[to[which]]
        for kind, lines in ((ROOK, slice(0, 4)), (BISHOP, slice(4, 8)), (QUEEN, slice(0, 8))):
            which = np.flatnonzero(piece == kind)  # the first piece along each line the kind moves on
            if len(which):
                _, found_at = _first_piece(board, rows[which], _T["ray"][to[which], lines])
                candidates[which, lines] = found_at
        pawns = np.flatnonzero(piece == PAWN)
        if len(pawns):
            t = to[pawns]
            back = t - 8 * side
            on_board = (back >= 0) & (back < 64)
            back_ok = np.where(on_board, back, SENTINEL)
            double = t - 16 * side
            double_ok = on_board & (double // 8 == (1 if side > 0 else 6)) & (board[rows[pawns], back_ok] == 0)
            file = t % 8
            empty = target[pawns] == 0
            capturable = (target[pawns] < 0) | (empty & (t == self.en_passant[rows[pawns]]))
            candidates[pawns, 0] = np.where(on_board & empty, back_ok, SENTINEL)
            candidates[pawns, 1] = np.where(double_ok & empty, np.clip(double, 0, SENTINEL), SENTINEL)
            candidates[pawns, 2] = np.where(on_board & capturable & (file > 0), back - 1, SENTINEL)
            candidates[pawns, 3] = np.where(on_board & capturable & (file < 7), back + 1, SENTINEL)
            candidates[pawns, 4:] = SENTINEL
        # The side's pieces of the named kind, on the named file and rank, not landing on their own.
        fits = board[rows[:, None], candidates] == (side * piece)[:, None]
        fits &= (candidates != SENTINEL) & (target <= 0)[:, None]
        fits &= (from_file[:, None] < 0) | (candidates % 8 == from_file[:, None])
        fits &= (from_rank[:, None] < 0) | (candidates // 8 == from_rank[:, None])
        promotes = (piece == PAWN) & (to // 8 == (7 if side > 0 else 0))
        fits &= np.where(promotes, (promotion >= KNIGHT) & (promotion <= QUEEN), promotion == 0)[:, None]
        several = np.flatnonzero(fits.sum(axis=1) > 1)
        if len(several):  # only legal moves count: play each candidate on a copy of its board
            which, slot = np.nonzero(fits[several])
            which = several[which]
            copies = board[rows[which]].copy()
            pick = np.arange(len(which))
            origin, landing = candidates[which, slot], to[which]
            copies[pick, landing] = copies[pick, origin]
            copies[pick, origin] = 0
            king = np.where(piece[which] == KING, landing, self.kings[rows[which], me])
            legal = ~_attacked(copies, pick, king, -side)  # (pawns never have two candidates)
            fits[which[~legal], slot[~legal]] = False
        good = fits.sum(axis=1) == 1
        return good, candidates[np.arange(n), fits.argmax(axis=1)]

    def _castle(self, rows: np.ndarray, side: int, me: int, short: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        board = self.board
        king_from = np.full(len(rows), 4 if side > 0 else 60, dtype=np.intp)
        king_to = np.where(short, king_from + 2, king_from - 2)
        rook = np.where(short, king_from + 3, king_from - 4)
        right = np.where(short, 1, 2) << (2 * me)
        between = np.where(short[:, None], king_from[:, None] + np.array([1, 2, 2]), king_from[:, None] - np.array([1, 2, 3]))
        ok = (board[rows, king_from] == side * KING) & ((self.rights[rows] & right) != 0)
        ok &= (board[rows, rook] == side * ROOK) & (board[rows[:, None], between] == 0).all(axis=1)
        path = np.where(short, king_from + 1, king_from - 1)
        board[rows, king_from] = 0  # python-chess looks at the path with the king lifted
        for square in (king_from, path, king_to):
            ok &= ~_attacked(board, rows, square, -side)
        board[rows, king_from] = side * KING
        return ok, king_from, king_to

    def _apply(self, rows: np.ndarray, side: int, me: int, start: np.ndarray, end: np.ndarray,
               promotion: np.ndarray, castles: np.ndarray) -> np.ndarray:
        """Play the moves; whether each left its own king safe (and note checks given)."""
        board = self.board
        piece = board[rows, start] * side
        is_pawn, is_king = piece == PAWN, piece == KING
        takes_en_passant = is_pawn & (end == self.en_passant[rows]) & (start % 8 != end % 8)
        taken_at = end - 8 * side
        board[rows, start] = 0
        board[rows, end] = np.where(promotion > 0, promotion, piece) * side
        board[rows[takes_en_passant], taken_at[takes_en_passant]] = 0
        short = end % 8 == 6
        rook_from, rook_to = np.where(short, end + 1, end - 2), np.where(short, end - 1, end + 1)
        board[rows[castles], rook_from[castles]] = 0
        board[rows[castles], rook_to[castles]] = ROOK * side
        self.kings[rows[is_king], me] = end[is_king]
        lost = _T["corner_rights"][start] | _T["corner_rights"][end]
        lost |= np.where(is_king, 3 if side > 0 else 12, 0).astype(np.uint8)
        self.rights[rows] &= ~lost
        self.en_passant[rows] = np.where(is_pawn & (np.abs(end - start) == 16), start + 8 * side, -1)
        # Own king: searched in full if it moved or was in check, else only behind the emptied squares.
        own = self.kings[rows, me]
        full = is_king | self.in_check[rows]
        exposed = np.zeros(len(rows), dtype=bool)
        exposed[full] = _attacked(board, rows[full], own[full], -side)
        quick = ~full
        exposed[quick] = _slider_behind(board, rows[quick], own[quick], start[quick], -side)
        exposed[takes_en_passant] |= _slider_behind(board, rows[takes_en_passant], own[takes_en_passant],
                                                    taken_at[takes_en_passant], -side)
        # Enemy king: attacked by the piece that moved, or along a line the move opened.
        enemy = self.kings[rows, 1 - me]
        moved = board[rows, end] * side
        check = (moved == KNIGHT) & (np.abs((enemy % 8 - end % 8) * (enemy // 8 - end // 8)) == 2)
        check |= (moved == PAWN) & (_T["pawn_attackers"][me, enemy] == end[:, None]).any(axis=1)
        both = np.concatenate([rows, rows])  # lines through the landing and the emptied square, in one pass
        through = _slider_behind(board, both, np.concatenate([enemy, enemy]), np.concatenate([end, start]), side)
        check |= through[: len(rows)] | through[len(rows):]
        check[takes_en_passant] |= _slider_behind(board, rows[takes_en_passant], enemy[takes_en_passant],
                                                  taken_at[takes_en_passant], side)
        check[castles] |= _slider_behind(board, rows[castles], enemy[castles], rook_to[castles], side)
        self.in_check[rows] = check
        return ~exposed
