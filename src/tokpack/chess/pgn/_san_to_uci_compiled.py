"""SAN to UCI for many games, compiled by numba: movetext words scanned and coded, each game played on one mailbox board.

Each game starts from the standard position on a 65-cell board and is played by the board's rules
(:mod:`tokpack.chess.board.rules`). A parsed SAN move (packed by
:func:`tokpack.chess.pgn._san_to_uci.pack`) names a piece kind, a target square and optionally the
file, rank and promotion; :func:`_play` decodes it and asks the rules for the one legal origin, as
python-chess's ``Board.parse_san`` filters its legal moves, or for the castling. Anything else (no
candidate, several, an unusual token) stops the game there and marks it unresolved, so the caller
hands it to python-chess and a resolved game is always python-chess's own answer.

:func:`scan_movetexts` codes a chunk's movetext words while dropping comments and variations, one
pass over the bytes; with ``clocks=True`` the same scan reads each move's ``[%clk]`` comment
(:func:`clock_in`). :func:`resolve_main_lines` resolves the moves and writes their UCI text in one
pass. See BENCHMARKS.md, "Chess: converting PGN", for what each step costs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokpack.chess.board.mailbox import BISHOP, KING, KNIGHT, PAWN, QUEEN, ROOK
from tokpack.chess.board.rules import apply_move, castle_target, find_origin, new_game
from tokpack.chess.pgn._words import ASK, LONG_CASTLE, NO_MOVE, NORMAL, SEPARATOR, SHORT_CASTLE, UNUSUAL

# A small helper of the resolver's loop, inlined by LLVM where it is called: numba's own IR
# inlining would count references to the board at every call (see tokpack._kernels).
_helper = njit(nogil=True, cache=True, forceinline=True)

_PROMOTION_LETTER = np.frombuffer(b"\0pnbrqk", np.uint8)  # by piece number


@_helper
def _play(board: np.ndarray, state: np.ndarray, side: int, move: int, candidates: np.ndarray) -> tuple[int, int, int]:
    """Play one packed SAN move (fields as :func:`tokpack.chess.pgn._san_to_uci.pack` lays them out) for
    ``side``: ``(from, to, promotion)``, or ``from`` -1 when it is not exactly one legal move
    (the board is then left as it was). ``state`` is :func:`tokpack.chess.board.rules.new_game`'s;
    ``candidates`` scratch."""
    white_king, black_king, rights, en_passant = state[0], state[1], state[2], state[3]
    k = move & 3
    p = 0
    if k == NORMAL:
        t = (move >> 5) & 63
        p = (move >> 19) & 7
        f = find_origin(board, side, (move >> 2) & 7, t, ((move >> 11) & 15) - 1, ((move >> 15) & 15) - 1, p,
                        en_passant, white_king if side > 0 else black_king, state[4] != 0, candidates)
    elif k == UNUSUAL:
        return -1, 0, 0
    else:
        f = 4 if side > 0 else 60
        t = castle_target(board, side, k == SHORT_CASTLE, rights)
        if t < 0:
            return -1, 0, 0
    if f < 0:
        return -1, 0, 0
    apply_move(board, state, side, f, t, p)
    return f, t, p


@njit(nogil=True, cache=True)
def resolve_games_compiled(moves: np.ndarray, counts: np.ndarray, start: np.ndarray, end: np.ndarray,
                           promo: np.ndarray, resolved: np.ndarray) -> None:
    """Fill ``start``/``end``/``promo`` per move and ``resolved`` per game (see :func:`resolve_san`)."""
    board = np.empty(65, dtype=np.int8)
    state = np.empty(5, dtype=np.int64)
    candidates = np.empty(8, dtype=np.int64)
    first = 0
    for g in range(len(counts)):
        new_game(board, state)
        ok = True
        for i in range(first, first + counts[g]):
            f, t, p = _play(board, state, 1 if (i - first) % 2 == 0 else -1, moves[i], candidates)
            if f < 0:
                ok = False
                break
            start[i], end[i], promo[i] = f, t, p
        resolved[g] = ok
        first += counts[g]


@njit(nogil=True, cache=True)
def resolve_main_lines(codes: np.ndarray, bounds: np.ndarray, refused: np.ndarray, clocks: np.ndarray,
                       out: np.ndarray, out_bounds: np.ndarray, plies: np.ndarray, resolved: np.ndarray,
                       ply_clocks: np.ndarray) -> None:
    """Every game's main line resolved on its board and written as UCI text.

    Game ``g``'s words are ``codes[bounds[g]:bounds[g + 1]]`` (as :func:`scan_movetexts` leaves
    them, with each ``ASK`` replaced by its code): ``NO_MOVE`` words are passed over, a move is
    played by :func:`_play`, and any other code, a move that is not exactly one legal move, or
    ``refused[g]`` leaves the game unresolved (its text empty, ``plies[g]`` 0). A resolved game's
    moves are ``out[out_bounds[g]:out_bounds[g + 1]]``, ASCII, space-separated; with ``clocks``
    (one per word, else empty), its moves' clocks go to ``ply_clocks``, game after game.
    """
    board = np.empty(65, dtype=np.int8)
    state = np.empty(5, dtype=np.int64)
    candidates = np.empty(8, dtype=np.int64)
    timed = len(clocks) > 0
    p, m = 0, 0
    out_bounds[0] = 0
    for g in range(len(bounds) - 1):
        game_start, clock_start = p, m
        ok = not refused[g]
        ply = 0
        if ok:
            new_game(board, state)
            for i in range(bounds[g], bounds[g + 1]):
                code = codes[i]
                if code == NO_MOVE:
                    continue
                if code < 0:
                    ok = False
                    break
                f, t, promotion = _play(board, state, 1 if ply % 2 == 0 else -1, code, candidates)
                if f < 0:
                    ok = False
                    break
                if ply:
                    out[p] = 32
                    p += 1
                out[p] = 97 + f % 8
                out[p + 1] = 49 + f // 8
                out[p + 2] = 97 + t % 8
                out[p + 3] = 49 + t // 8
                p += 4
                if promotion:
                    out[p] = _PROMOTION_LETTER[promotion]
                    p += 1
                if timed:
                    ply_clocks[m] = clocks[i]
                    m += 1
                ply += 1
        if not ok:
            p, m, ply = game_start, clock_start, 0
        resolved[g] = ok
        plies[g] = ply
        out_bounds[g + 1] = p


# Byte classes for scan_words: str.split()'s ASCII whitespace, SAN pieces, promotion letters.
_SPACE = np.zeros(256, dtype=np.bool_)
_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
_PIECE_OF = np.zeros(256, dtype=np.int64)
for _letter, _piece in zip(b"NBRQK", (KNIGHT, BISHOP, ROOK, QUEEN, KING), strict=True):
    _PIECE_OF[_letter] = _piece
_PROMOTION_OF = _PIECE_OF.copy()
for _letter, _piece in zip(b"nbrqk", (KNIGHT, BISHOP, ROOK, QUEEN, KING), strict=True):
    _PROMOTION_OF[_letter] = _piece


@_helper
def _word_code(b: np.ndarray, s: int, e: int) -> int:
    """The code of word ``b[s:e]`` as :class:`tokpack.chess.pgn._san_to_uci.SanCodes` gives it, or ASK.

    Taken on here: the separator, results, NAGs, ``N.``/``N...`` move numbers (at most three
    digits, so never ``0000``), then one SAN move (piece, file, rank, ``x``/``-``, square,
    ``=`` promotion) or ``O-O``/``O-O-O``, then any of ``+#!?``. python-chess's expression finds
    exactly that one token in such a word; any other word is ASK.
    """
    n = e - s
    if n == 1 and b[s] == 0:
        return SEPARATOR
    if n == 1 and b[s] == 42:  # *
        return NO_MOVE
    if n == 3 and b[s + 1] == 45 and ((b[s] == 49 and b[s + 2] == 48) or (b[s] == 48 and b[s + 2] == 49)):
        return NO_MOVE  # 1-0, 0-1
    if n == 7 and b[s] == 49 and b[s + 1] == 47 and b[s + 2] == 50 and b[s + 3] == 45 and b[s + 4] == 49 \
            and b[s + 5] == 47 and b[s + 6] == 50:
        return NO_MOVE  # 1/2-1/2
    if b[s] == 36:  # $: a NAG when digits follow
        for i in range(s + 1, e):
            if b[i] < 48 or b[i] > 57:
                return ASK
        return NO_MOVE if n > 1 else ASK
    p = s
    while p < e and 48 <= b[p] <= 57:
        p += 1
    if p > s:  # a move number: at most three digits, then dots
        if p - s > 3 or p == e or b[p] != 46:
            return ASK
        while p < e and b[p] == 46:
            p += 1
    while e > p and (b[e - 1] == 43 or b[e - 1] == 35 or b[e - 1] == 33 or b[e - 1] == 63):  # + # ! ?
        e -= 1
    if e == p:
        return NO_MOVE
    n = e - p
    if b[p] == 79:  # O-O, O-O-O
        if n == 3 and b[p + 1] == 45 and b[p + 2] == 79:
            return SHORT_CASTLE | KING << 2  # castles pack like _parse's (kind, KING, 0, -1, -1, 0)
        if n == 5 and b[p + 1] == 45 and b[p + 2] == 79 and b[p + 3] == 45 and b[p + 4] == 79:
            return LONG_CASTLE | KING << 2
        return ASK
    piece = _PIECE_OF[b[p]]
    lettered = piece != 0
    if lettered:
        p += 1
    else:
        piece = PAWN
    promotion = _PROMOTION_OF[b[e - 1]] if e > p else 0
    if promotion:
        e -= 1
        if e > p and b[e - 1] == 61:  # =
            e -= 1
    if e - p < 2 or not (97 <= b[e - 2] <= 104 and 49 <= b[e - 1] <= 56):
        return ASK
    to = (b[e - 1] - 49) * 8 + b[e - 2] - 97
    e -= 2
    from_file, from_rank = -1, -1
    if p < e and 97 <= b[p] <= 104:
        from_file = b[p] - 97
        p += 1
    if p < e and 49 <= b[p] <= 56:
        from_rank = b[p] - 49
        p += 1
    if p < e and (b[p] == 120 or b[p] == 45):  # x, -
        p += 1
    if p != e or (not lettered and from_file >= 0 and from_rank >= 0):
        return ASK  # leftovers; a squares-only move (python-chess decides those)
    if piece == PAWN and from_file < 0:
        from_file = to % 8
    return NORMAL | piece << 2 | to << 5 | (from_file + 1) << 11 | (from_rank + 1) << 15 | promotion << 19


@njit(nogil=True, cache=True)
def scan_words(b: np.ndarray, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """Split ASCII bytes at whitespace as ``str.split()`` does; each word's code and span. Returns the count."""
    n, i, size = 0, 0, len(b)
    while i < size:
        while i < size and _SPACE[b[i]]:
            i += 1
        if i == size:
            break
        s = i
        while i < size and not _SPACE[b[i]]:
            i += 1
        codes[n], starts[n], ends[n] = _word_code(b, s, i), s, i
        n += 1
    return n


@_helper
def _word_at_depth(b: np.ndarray, s: int, e: int) -> int:
    """A main-line word's code, or -99 for a word holding a byte outside ASCII (never a move)."""
    for i in range(s, e):
        if b[i] >= 128:
            return -99
    return _word_code(b, s, e)


#: What :func:`clock_in` finds in a comment.
NO_CLOCK, CLOCK, CLOCK_IN_DOUBT = 0, 1, 2


@njit(nogil=True, cache=True)
def _digits_end(b: np.ndarray, p: int, e: int) -> int:
    while p < e and 48 <= b[p] <= 57:
        p += 1
    return p


@njit(nogil=True, cache=True)
def clock_in(b: np.ndarray, s: int, e: int) -> tuple[int, float]:
    """The first ``[%clk h:mm:ss(.f)]`` in the comment ``b[s:e]``, read as :data:`tokpack.chess.pgn.read._CLOCK`
    is: ``(CLOCK, seconds)``, ``(NO_CLOCK, 0.0)``, or ``(CLOCK_IN_DOUBT, 0.0)`` for a comment with a
    non-ASCII byte (the expression's ``\\d`` and ``\\s`` take Unicode digits and spaces) or a number
    too long to read exactly here; Python reads those.

    The seconds are ``(h * 3600 + m * 60) + s`` with ``s`` one correctly rounded division (as
    ``float("ss.fff")`` is), so the value is Python's to the last bit.
    """
    for k in range(s, e):
        if b[k] >= 128:
            return CLOCK_IN_DOUBT, 0.0
    for p in range(s, e - 5):
        if not (b[p] == 91 and b[p + 1] == 37 and b[p + 2] == 99 and b[p + 3] == 108 and b[p + 4] == 107
                and _SPACE[b[p + 5]]):  # "[%clk" and one space
            continue
        h0 = p + 6
        h1 = _digits_end(b, h0, e)
        if h1 == h0 or h1 >= e or b[h1] != 58:  # :
            continue
        m0 = h1 + 1
        m1 = _digits_end(b, m0, e)
        if m1 == m0 or m1 >= e or b[m1] != 58:
            continue
        s0 = m1 + 1
        s1 = _digits_end(b, s0, e)
        if s1 == s0:
            continue
        f1 = s1
        if s1 < e and b[s1] == 46:  # .
            f1 = _digits_end(b, s1 + 1, e)
        if f1 >= e or b[f1] != 93:  # ]
            continue
        fraction = f1 - s1 - 1 if f1 > s1 else 0
        if h1 - h0 > 9 or m1 - m0 > 9 or s1 - s0 + fraction > 15:
            return CLOCK_IN_DOUBT, 0.0
        whole = 0
        for k in range(h0, h1):
            whole = whole * 10 + b[k] - 48
        minutes = 0
        for k in range(m0, m1):
            minutes = minutes * 10 + b[k] - 48
        digits, scale = 0, 1
        for k in range(s0, s1):
            digits = digits * 10 + b[k] - 48
        for k in range(s1 + 1, f1):
            digits = digits * 10 + b[k] - 48
            scale *= 10
        return CLOCK, float(whole * 3600 + minutes * 60) + float(digits) / float(scale)
    return NO_CLOCK, 0.0


#: What :func:`scan_movetexts` records of a game's first main-line result word other than ``*``.
NO_RESULT, WIN, LOSS, DRAW = 0, 1, 2, 3


@_helper
def _result_word(b: np.ndarray, s: int, e: int) -> int:
    """Which result ``b[s:e]`` is exactly (``1-0``, ``0-1``, ``1/2-1/2``), or NO_RESULT."""
    n = e - s
    if n == 3 and b[s + 1] == 45:
        if b[s] == 49 and b[s + 2] == 48:
            return WIN
        if b[s] == 48 and b[s + 2] == 49:
            return LOSS
    if n == 7 and b[s] == 49 and b[s + 1] == 47 and b[s + 2] == 50 and b[s + 3] == 45 and b[s + 4] == 49 \
            and b[s + 5] == 47 and b[s + 6] == 50:
        return DRAW
    return NO_RESULT


# Bytes that end a word in a movetext: str.split()'s ASCII whitespace, NUL, and { } ( ) ; %.
_BOUNDARY = _SPACE.copy()
_BOUNDARY[[0, 123, 125, 40, 41, 59, 37]] = True


@njit(nogil=True, cache=True)
def scan_movetexts(b: np.ndarray, first: np.ndarray, last: np.ndarray, codes: np.ndarray, bounds: np.ndarray,
                   asks: np.ndarray, refused: np.ndarray, results: np.ndarray, clocks: np.ndarray,
                   clock_doubt: np.ndarray) -> tuple[int, int]:
    """The main-line words of many movetexts (game ``g``'s is ``b[first[g]:last[g]]``, UTF-8 bytes)
    without comments and variations.

    Each game's main-line words (split as ``str.split()`` splits ASCII) that are moves, or that
    :func:`_word_code` leaves to Python, get their code in ``codes``: game ``g``'s are
    ``codes[bounds[g]:bounds[g + 1]]``; an ``ASK`` word's position in ``codes`` and its span go to
    a row of ``asks``. Words that are not moves (move
    numbers, NAGs, results) are passed over; ``results[g]`` is the first main-line result word
    other than ``*`` (``WIN``, ``LOSS``, ``DRAW``, or ``NO_RESULT``). ``{...}`` (to the first
    ``}``) and ``(...)`` (nested) end a word and are dropped, at any depth, as
    :mod:`tokpack.chess.pgn.read`'s expressions dropped them. ``refused[g]`` is set (and the rest
    of game ``g`` skipped) for what python-chess must read: outside comments a ``;``, ``%``,
    ``}``, a stray ``)``, a ``(`` before the game's first move word, a variation or comment
    never closed, a NUL, or a non-ASCII byte in a main-line word. With ``clocks`` as long as
    ``codes`` (else empty), each move word gets the clock of the first main-line comment after
    it that has one (:func:`clock_in`; NaN for none), as python-chess's visitor in
    :mod:`tokpack.chess.pgn.games` reads them; ``clock_doubt[g]``: Python must read game ``g``'s
    clocks. Returns the number of codes and of ``asks`` rows.
    """
    n, n_ask = 0, 0
    timed = len(clocks) > 0
    for game in range(len(first)):
        bounds[game] = n
        results[game] = NO_RESULT
        i, size = first[game], last[game]
        depth, seen_move, s, last_move = 0, False, -1, -1
        while True:
            c = b[i] if i < size else 32  # the end of the game ends its last word
            if not _BOUNDARY[c]:
                if depth == 0 and s < 0:
                    s = i
                i += 1
                continue
            bad = False
            if s >= 0:  # a main-line word ends here
                code = _word_at_depth(b, s, i)
                if code >= 0 or code == ASK:
                    codes[n] = code
                    if timed:
                        clocks[n] = np.nan
                    if code >= 0:
                        seen_move, last_move = True, n
                    else:
                        asks[n_ask, 0], asks[n_ask, 1], asks[n_ask, 2] = n, s, i
                        n_ask += 1
                    n += 1
                elif code == NO_MOVE and results[game] == NO_RESULT:
                    results[game] = _result_word(b, s, i)
                s = -1
                bad = code == -99
            if i >= size:
                if bad or depth > 0:
                    refused[game] = True
                break
            if c == 123:  # {: skip to the first }
                j = i + 1
                while j < size and b[j] != 125 and b[j] != 0:
                    j += 1
                if j == size or b[j] == 0:
                    bad = True
                else:
                    if timed and depth == 0 and last_move >= 0 and np.isnan(clocks[last_move]):
                        found, seconds = clock_in(b, i + 1, j)
                        if found == CLOCK:
                            clocks[last_move] = seconds
                        elif found == CLOCK_IN_DOUBT:
                            clock_doubt[game] = True
                    i = j
            elif c == 40:  # (
                if depth == 0 and not seen_move:
                    bad = True
                depth += 1
            elif c == 41:  # )
                if depth == 0:
                    bad = True
                else:
                    depth -= 1
            elif c == 125 or c == 59 or c == 37 or c == 0:  # } ; % NUL
                bad = True
            if bad:
                refused[game] = True
                break
            i += 1
    bounds[len(first)] = n
    return n, n_ask


@njit(nogil=True, cache=True)
def variations_and_results(b: np.ndarray, first: np.ndarray, last: np.ndarray, parenthesis: np.ndarray,
                           result_text: np.ndarray) -> None:
    """Whether each movetext ``b[first[i]:last[i]]`` holds a ``(`` anywhere (comments too), and for
    those that do, whether it holds ``1-0``, ``0-1`` or ``1/2-1/2`` anywhere (else False)."""
    for i in range(len(first)):
        s, e = first[i], last[i]
        p = s
        while p < e and b[p] != 40:
            p += 1
        parenthesis[i] = p < e
        found = False
        for k in range(s, e if p < e else s):
            c = b[k]
            if k + 2 < e and b[k + 1] == 45 and ((c == 49 and b[k + 2] == 48) or (c == 48 and b[k + 2] == 49)):
                found = True
                break
            if c == 49 and k + 6 < e and b[k + 1] == 47 and b[k + 2] == 50 and b[k + 3] == 45 and b[k + 4] == 49 \
                    and b[k + 5] == 47 and b[k + 6] == 50:
                found = True
                break
        result_text[i] = found
