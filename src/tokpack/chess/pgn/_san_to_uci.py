"""Code movetext words (a SAN move's fields packed in one int), and resolve many games' SAN moves to UCI.

A SAN move names a piece kind, a target square and, optionally, the file and rank it comes from
and a promotion; the move it stands for is the one *legal* move that fits (python-chess's
``Board.parse_san`` rules, which ignore ``x``, ``+`` and ``#``). :func:`code_words` gives each
movetext word its code (compiled for the common words, :class:`SanCodes` with python-chess's
expression for the others); :func:`resolve_san` replays every game on its own board in compiled code
(:mod:`tokpack.chess.pgn._san_to_uci_compiled`). A game resolves only when every ply has exactly one
legal candidate. Anything else (an illegal, ambiguous or unusual move: null moves, drops,
squares-only moves such as ``e2e4``, a king naming a castling square) marks the game as
*unresolved*, and the caller hands that game to python-chess, so a resolved game is always
python-chess's own answer.
"""

from __future__ import annotations

import re

import numpy as np

from tokpack.chess.board.mailbox import KING, PAWN
from tokpack.chess.pgn._words import ASK, LONG_CASTLE, MANY_MOVES, NO_MOVE, NORMAL, SEPARATOR, SHORT_CASTLE, UNUSUAL

_SAN = re.compile(r"^([NBKRQ])?([a-h])?([1-8])?[\-x]?([a-h][1-8])(=?[nbrqkNBRQK])?[\+#]?\Z")  # python-chess's
_PIECES = "pnbrqk"
_CASTLES = {"O-O": SHORT_CASTLE, "0-0": SHORT_CASTLE, "O-O-O": LONG_CASTLE, "0-0-0": LONG_CASTLE}


def pack(kind: int, piece: int, to: int, from_file: int, from_rank: int, promotion: int) -> int:
    """One parsed SAN move as a non-negative int (the compiled scanner packs the same way).

    >>> pack(NORMAL, 2, 21, -1, -1, 0)  # Nf3: a knight (2) to f3 (21)
    680
    """
    return kind | piece << 2 | to << 5 | (from_file + 1) << 11 | (from_rank + 1) << 15 | promotion << 19


class SanCodes(dict):
    """Codes of movetext *words* (whitespace-separated): a SAN token's packed fields, or a marker.

    A word holds at most one move in well-formed movetext (``12.Nf3``, ``e4!?``, ``Qxf7#``); its
    code is that move's :func:`pack`, :data:`NO_MOVE` for a word without one (``12.``, ``$1``,
    ``1-0``), or :data:`MANY_MOVES` (the game goes to python-chess). Each distinct word is parsed
    once; tokens come from python-chess's movetext expression, word by word, which gives the same
    tokens as over the whole line since no token holds whitespace.
    """

    def __init__(self, tokens: re.Pattern[str], separator: str) -> None:
        super().__init__({separator: SEPARATOR})
        self.tokens = tokens

    def __missing__(self, word: str) -> int:
        found = [t for t in self.tokens.findall(word) if t]
        code = NO_MOVE if not found else MANY_MOVES if len(found) > 1 else pack(*_parse(found[0]))
        self[word] = code
        return code


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


def resolve_san(moves: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The UCI move of every SAN move (``moves``: packed, game after game; ``counts`` moves per game).

    Returns ``(from_square, to_square, promotion, resolved)``: three arrays over the moves and a
    boolean per game. The moves of an unresolved game are meaningless.
    """
    from tokpack.chess.pgn._san_to_uci_compiled import resolve_games_compiled  # numba: imported when first needed

    n_moves = len(moves)
    start = np.zeros(n_moves, dtype=np.int8)
    end = np.zeros(n_moves, dtype=np.int8)
    promo = np.zeros(n_moves, dtype=np.int8)
    resolved = np.ones(len(counts), dtype=bool)
    resolve_games_compiled(np.ascontiguousarray(moves, dtype=np.int64), np.ascontiguousarray(counts, dtype=np.int64),
                           start, end, promo, resolved)
    return start, end, promo, resolved


def code_words(text: str, codes: SanCodes) -> np.ndarray:
    """The code of every whitespace-separated word of ``text`` (as ``codes[word]`` gives it).

    ASCII text is scanned by compiled code, which packs the common words itself (move numbers,
    SAN with ``+#!?``, NAGs, results) and leaves every other word to ``codes``; other text is split
    in Python.
    """
    if not text.isascii():
        return np.fromiter(map(codes.__getitem__, text.split()), dtype=np.int64)
    from tokpack.chess.pgn._san_to_uci_compiled import scan_words

    buffer = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    words = np.empty(len(buffer) // 2 + 1, dtype=np.int64)
    starts = np.empty_like(words)
    ends = np.empty_like(words)
    n = scan_words(buffer, words, starts, ends)
    words, starts, ends = words[:n], starts[:n], ends[:n]
    for i in np.flatnonzero(words == ASK).tolist():
        words[i] = codes[text[starts[i]:ends[i]]]
    return words
