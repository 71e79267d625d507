"""Parse SAN tokens into a table, and resolve the SAN moves of many games to UCI.

A SAN move names a piece kind, a target square and, optionally, the file and rank it comes from
and a promotion; the move it stands for is the one *legal* move that fits (python-chess's
``Board.parse_san`` rules, which ignore ``x``, ``+`` and ``#``). :class:`SanCodes` gives each
distinct movetext word a code and parses each distinct SAN token once into a :class:`SanTable`
row; :func:`resolve_san` replays every game on its own board in compiled code
(:mod:`tokpack.chess._resolve_compiled`). A game resolves only when every ply has exactly one
legal candidate. Anything else (an illegal, ambiguous or unusual move: null moves, drops,
squares-only moves such as ``e2e4``, a king naming a castling square) marks the game as
*unresolved*, and the caller hands that game to python-chess, so a resolved game is always
python-chess's own answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tokpack.chess._replay import KING, PAWN

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
    from tokpack.chess._resolve_compiled import resolve_games_compiled  # numba: imported when first needed

    n_moves = len(codes)
    start = np.zeros(n_moves, dtype=np.int8)
    end = np.zeros(n_moves, dtype=np.int8)
    promo = np.zeros(n_moves, dtype=np.int8)
    resolved = np.ones(len(counts), dtype=bool)
    resolve_games_compiled(np.ascontiguousarray(codes, dtype=np.int64), np.ascontiguousarray(counts, dtype=np.int64),
                           table.kind, table.piece, table.to, table.from_file, table.from_rank, table.promotion,
                           start, end, promo, resolved)
    return start, end, promo, resolved
