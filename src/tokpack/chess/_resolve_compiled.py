"""SAN to UCI for many games, compiled by numba: one mailbox board per game, one scalar pass per move.

Each game starts from the standard position on a 65-cell board (squares as python-chess numbers
them, plus an off-board cell that ends every ray; see :mod:`tokpack.chess._replay`). A parsed SAN
move (packed by :func:`tokpack.chess._resolve.pack`) names a piece kind, a target square and
optionally the file, rank and promotion; the candidates are the side's pieces of that kind that
reach the target (knight jumps, the first piece along each ray, king steps, pawn pushes and
captures including en passant), filtered by file, rank and promotion exactly as python-chess's
``Board.parse_san`` filters its legal moves. Each candidate is played and taken back on the board,
and kept only when its own king is not attacked afterwards; the move resolves when exactly one
candidate is left. Castling needs the right, the king and rook at home, the squares between them
empty and the king's squares (with the king lifted) unattacked. Anything else (no candidate,
several, an unusual token) stops the game there and marks it unresolved, so the caller hands it to
python-chess and a resolved game is always python-chess's own answer.

Measured (BENCHMARKS.md, chess): the lockstep numpy boards this replaces took ~75 % of a
conversion; this loop takes ~4 % (about 350 ns a move), and :func:`scan_words`, which codes the
movetext words in place of a Python dict lookup per word, ~2 %. :func:`scan_movetexts` does the
same over a whole chunk's movetexts as bytes while dropping comments and variations (about 3 ns a
byte), in place of two regular-expression substitutions per game that cost about as much as
resolving; :func:`uci_text` writes the UCI strings. With ``--clocks`` the same scan reads each
move's ``[%clk]`` comment (:func:`clock_in`), in place of a regular-expression pass per game.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokpack.chess._board import _START, _T, BISHOP, KING, KNIGHT, PAWN, QUEEN, ROOK, SENTINEL
from tokpack.chess._words import ASK, LONG_CASTLE, NO_MOVE, NORMAL, SEPARATOR, SHORT_CASTLE, UNUSUAL

_RAY = np.ascontiguousarray(_T["ray"][:64, :, :7])  # [square, direction (4 orthogonal first), step]
_KNIGHT = np.ascontiguousarray(_T["knight"][:64])
_KING = np.ascontiguousarray(_T["king"][:64])
_PAWN_ATTACKERS = np.ascontiguousarray(_T["pawn_attackers"][:, :64])  # [attacker colour, target, 2]
_CORNER = np.ascontiguousarray(_T["corner_rights"][:64].astype(np.int64))
_BOARD = _START.copy()


@njit(nogil=True, cache=True)
def _attacked(board: np.ndarray, square: int, by: int) -> bool:
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
    attack test of :mod:`tokpack.chess._replay`'s lockstep boards (the off-board cell never is)."""
    out = np.zeros(len(rows), dtype=np.bool_)
    for i in range(len(rows)):
        if squares[i] < SENTINEL:
            out[i] = _attacked(boards[rows[i]], squares[i], by)
    return out


@njit(nogil=True, cache=True)
def _legal_after(board: np.ndarray, side: int, frm: int, to: int, en_passant: int, king: int) -> bool:
    """Whether moving ``frm`` to ``to`` leaves the side's king unattacked (the board is restored)."""
    moving, taken = board[frm], board[to]
    takes_en_passant = moving == side * PAWN and to == en_passant and frm % 8 != to % 8
    behind = to - 8 * side
    board[to], board[frm] = moving, 0
    if takes_en_passant:
        board[behind] = 0
    safe = not _attacked(board, to if moving == side * KING else king, -side)
    board[frm], board[to] = moving, taken
    if takes_en_passant:
        board[behind] = -side * PAWN
    return safe


@njit(nogil=True, cache=True)
def _find(board: np.ndarray, side: int, piece: int, to: int, from_file: int, from_rank: int, promotion: int,
          en_passant: int, king: int, candidates: np.ndarray) -> int:
    """The one legal origin of a SAN move, or -1 (none or several); ``candidates`` is scratch (8 cells)."""
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
        if _legal_after(board, side, origin, to, en_passant, king):
            found, count = origin, count + 1
    return found if count == 1 else -1


@njit(nogil=True, cache=True)
def _castle(board: np.ndarray, side: int, short: bool, rights: int) -> int:
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
    safe = not (_attacked(board, home, -side) or _attacked(board, home + step, -side) or _attacked(board, home + 2 * step, -side))
    board[home] = side * KING
    return home + 2 * step if safe else -1


@njit(nogil=True, cache=True)
def resolve_games_compiled(moves: np.ndarray, counts: np.ndarray, start: np.ndarray, end: np.ndarray,
                           promo: np.ndarray, resolved: np.ndarray) -> None:
    """Fill ``start``/``end``/``promo`` per move and ``resolved`` per game (see :func:`resolve_san`)."""
    board = np.empty(65, dtype=np.int8)
    candidates = np.empty(8, dtype=np.int64)
    first = 0
    for g in range(len(counts)):
        board[:] = _BOARD
        white_king, black_king = 4, 60
        rights, en_passant, ok = 15, -1, True
        for i in range(first, first + counts[g]):
            side = 1 if (i - first) % 2 == 0 else -1
            move = moves[i]  # fields as tokpack.chess._resolve.pack lays them out
            k = move & 3
            p = 0
            if k == NORMAL:
                t = (move >> 5) & 63
                p = (move >> 19) & 7
                f = _find(board, side, (move >> 2) & 7, t, ((move >> 11) & 15) - 1, ((move >> 15) & 15) - 1, p,
                          en_passant, white_king if side > 0 else black_king, candidates)
            elif k == UNUSUAL:
                f = -1
                t = 0
            else:
                f = 4 if side > 0 else 60
                t = _castle(board, side, k == SHORT_CASTLE, rights)
                if t < 0:
                    f = -1
            if f < 0:
                ok = False
                break
            moving = board[f] * side
            if moving == PAWN and t == en_passant and f % 8 != t % 8:
                board[t - 8 * side] = 0
            board[f] = 0
            board[t] = (p if p > 0 else moving) * side
            if moving == KING:
                if side > 0:
                    white_king = t
                else:
                    black_king = t
                rights &= ~(3 if side > 0 else 12)
                if t - f == 2:
                    board[f + 3], board[f + 1] = 0, side * ROOK
                elif f - t == 2:
                    board[f - 4], board[f - 1] = 0, side * ROOK
            rights &= ~(_CORNER[f] | _CORNER[t])
            en_passant = f + 8 * side if moving == PAWN and abs(t - f) == 16 else -1
            start[i], end[i], promo[i] = f, t, p
        resolved[g] = ok
        first += counts[g]


# Byte classes for scan_words: str.split()'s ASCII whitespace, SAN pieces, promotion letters.
_SPACE = np.zeros(256, dtype=np.bool_)
_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
_PIECE_OF = np.zeros(256, dtype=np.int64)
for _letter, _piece in zip(b"NBRQK", (KNIGHT, BISHOP, ROOK, QUEEN, KING), strict=True):
    _PIECE_OF[_letter] = _piece
_PROMOTION_OF = _PIECE_OF.copy()
_PROMOTION_LETTER = np.frombuffer(b"\0pnbrqk", np.uint8)  # by piece number
for _letter, _piece in zip(b"nbrqk", (KNIGHT, BISHOP, ROOK, QUEEN, KING), strict=True):
    _PROMOTION_OF[_letter] = _piece


@njit(nogil=True, cache=True)
def _word_code(b: np.ndarray, s: int, e: int) -> int:
    """The code of word ``b[s:e]`` as :class:`tokpack.chess._resolve.SanCodes` gives it, or ASK.

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


@njit(nogil=True, cache=True)
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
    """The first ``[%clk h:mm:ss(.f)]`` in the comment ``b[s:e]``, read as :data:`tokpack.chess.reader._CLOCK`
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


@njit(nogil=True, cache=True)
def scan_movetexts(b: np.ndarray, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   refused: np.ndarray, clocks: np.ndarray, clock_doubt: np.ndarray) -> int:
    """Words of many movetexts (UTF-8 bytes, games separated by a NUL byte) without comments and variations.

    Each game's main-line words (split as ``str.split()`` splits ASCII) get their code and span;
    a SEPARATOR word stands between games. ``{...}`` (to the first ``}``) and ``(...)`` (nested)
    end a word and are dropped, at any depth, as :mod:`tokpack.chess.reader`'s expressions dropped
    them. ``refused[g]`` is set (and the rest of game ``g`` skipped) for what python-chess must
    read: outside comments a ``;``, ``%``, ``}``, a stray ``)``, a ``(`` before the game's first
    move word, a variation or comment never closed, or a non-ASCII byte in a main-line word.
    With ``clocks`` as long as ``codes`` (else empty), each move word gets the clock of the first
    main-line comment after it that has one (:func:`clock_in`; NaN for none), as python-chess's
    visitor in :mod:`tokpack.chess.pgn` reads them; ``clock_doubt[g]``: Python must read game
    ``g``'s clocks. Returns the number of words.
    """
    n, i, size, game = 0, 0, len(b), 0
    depth, seen_move, s, last_move = 0, False, -1, -1
    timed = len(clocks) > 0
    while i <= size:
        c = b[i] if i < size else 0
        boundary = c == 0 or _SPACE[c] or c == 123 or c == 125 or c == 40 or c == 41 or c == 59 or c == 37
        if not boundary:
            if depth == 0 and s < 0:
                s = i
            i += 1
            continue
        bad = False
        if s >= 0:  # a main-line word ends here
            code = _word_at_depth(b, s, i)
            codes[n], starts[n], ends[n] = code, s, i
            if timed:
                clocks[n] = np.nan
            if code >= 0:
                seen_move, last_move = True, n
            n += 1
            s = -1
            bad = code == -99
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
        elif c == 125 or c == 59 or c == 37:  # } ; %
            bad = True
        if c == 0 and depth > 0:
            bad = True
        if bad:
            refused[game] = True
            while i < size and b[i] != 0:
                i += 1
            c = 0
        if c == 0:  # the end of a game
            if i >= size:
                break
            codes[n], starts[n], ends[n] = SEPARATOR, i, i + 1
            n += 1
            game += 1
            depth, seen_move, last_move = 0, False, -1
        i += 1
    return n


@njit(nogil=True, cache=True)
def uci_text(start: np.ndarray, end: np.ndarray, promo: np.ndarray, counts: np.ndarray, out: np.ndarray,
             bounds: np.ndarray) -> None:
    """Every game's UCI moves as ASCII, space-separated, into ``out``; game ``g`` is ``out[bounds[g]:bounds[g + 1]]``.

    ``out`` holds at least ``6 * len(start)`` bytes; ``bounds`` ``len(counts) + 1`` ints.
    """
    p, m = 0, 0
    bounds[0] = 0
    for g in range(len(counts)):
        for k in range(counts[g]):
            if k:
                out[p] = 32
                p += 1
            a, b = start[m], end[m]
            out[p] = 97 + a % 8
            out[p + 1] = 49 + a // 8
            out[p + 2] = 97 + b % 8
            out[p + 3] = 49 + b // 8
            p += 4
            if promo[m]:
                out[p] = _PROMOTION_LETTER[promo[m]]
                p += 1
            m += 1
        bounds[g + 1] = p
