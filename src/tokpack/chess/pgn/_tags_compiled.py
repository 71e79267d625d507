"""The tag lines of a chunk's games, read and judged by numba: the values a conversion keeps, without doubt.

:func:`scan_tags` reads every line starting with ``[`` of every game as
:data:`tokpack.chess.pgn.read.TAG` does, but only in the plain form Lichess and most databases
write (``[Name "value"]``, spaces or tabs around, before it too): any other ``[`` line leaves its game *not
plain*, and the caller reads that game's tags with the regular expression instead. So a plain
game's tags are exactly the expression's, and the last of a repeated tag wins, as in python-chess.

:func:`judge_plain` then takes on the plain games whose verdict needs no words: a date of
``UTCDate`` (else ``Date``) that is ``YYYY.MM.DD`` with ASCII digits or ``?`` in range, two
ratings of one to four ASCII digits, a result of :data:`tokpack.chess.board.results.RESULTS`, and no
``Variant``, ``FEN`` or ``SetUp`` tag. Every other game is judged by
:func:`tokpack.chess.pgn.games.judge_headers`, which words the reason a game is skipped.

This scan does in one compiled pass what a regular expression over every tag line, a dict per
game and the judge in Python would; BENCHMARKS.md, "Chess: converting PGN", gives what each costs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokpack.chess.board.results import RESULTS

#: The tags a conversion reads, in the order of :func:`scan_tags`'s columns.
TAGS = ("Event", "Site", "Date", "Round", "White", "Black", "Result", "UTCDate", "WhiteElo", "BlackElo",
        "TimeControl", "Termination", "ECO", "Variant", "FEN", "SetUp")
EVENT, SITE, DATE, ROUND, WHITE, BLACK, RESULT, UTC_DATE, WHITE_ELO, BLACK_ELO = range(10)
TIME_CONTROL, TERMINATION, ECO, VARIANT, FEN, SET_UP = range(10, 16)
NAMES = np.zeros((len(TAGS), max(map(len, TAGS))), dtype=np.uint8)
for _row, _name in enumerate(TAGS):
    NAMES[_row, :len(_name)] = np.frombuffer(_name.encode("ascii"), np.uint8)
NAME_LENGTHS = np.array([len(name) for name in TAGS], dtype=np.int64)

_NAME_FIRST = np.zeros(128, dtype=np.bool_)  # [A-Za-z0-9]
for _range in (b"AZ", b"az", b"09"):
    _NAME_FIRST[_range[0]:_range[1] + 1] = True
_NAME_REST = _NAME_FIRST.copy()  # [A-Za-z0-9_+#=:-]
_NAME_REST[list(b"_+#=:-")] = True


@njit(nogil=True, cache=True)
def _blank(c: int) -> bool:
    return c == 32 or c == 9


@njit(nogil=True, cache=True)
def scan_tags(b: np.ndarray, first: np.ndarray, last: np.ndarray, starts: np.ndarray, ends: np.ndarray,
              plain: np.ndarray) -> None:
    """Value spans of :data:`TAGS` in each game's tag lines, and whether each game is plain.

    ``b`` holds UTF-8 bytes; game ``g``'s tag lines are ``b[first[g]:last[g]]``, lines ending at
    ``\\n`` (the last one may end at ``last[g]``). ``starts[g, t]``/``ends[g, t]`` get tag
    ``t``'s value span (``-1`` when absent); ``plain[g]`` is False when a ``[`` line is not
    ``[Name<spaces or tabs>"value"]<spaces or tabs>``. Every byte compared is ASCII, so the spans
    are those of the characters the tag expression reads.
    """
    n_tags = NAMES.shape[0]
    for g in range(len(first)):
        starts[g, :] = -1
        ends[g, :] = -1
        ok = True
        i, stop = first[g], last[g]
        while i < stop:
            j = i
            while j < stop and b[j] != 10:
                j += 1
            t = i
            while t < j and _blank(b[t]):  # python-chess strips a tag line's leading whitespace
                t += 1
            if t < j and b[t] != 91 and (t > i or (b[t] != 37 and b[t] != 59)):
                ok = False  # not a tag or escape line (other whitespace first?): the expression reads it
                break
            if t < j and b[t] == 91:  # [
                k = t + 1
                if k >= j or b[k] >= 128 or not _NAME_FIRST[b[k]]:
                    ok = False
                    break
                while k < j and b[k] < 128 and _NAME_REST[b[k]]:
                    k += 1
                name_end = k
                if k >= j or not _blank(b[k]):
                    ok = False
                    break
                while k < j and _blank(b[k]):
                    k += 1
                e = j
                while e > k and _blank(b[e - 1]):
                    e -= 1
                # The value runs from the first quote to the last '"]' (the expression is greedy).
                if k >= j or b[k] != 34 or e - 2 <= k or b[e - 1] != 93 or b[e - 2] != 34:
                    ok = False
                    break
                length = name_end - t - 1
                name_start = t + 1
                for t in range(n_tags):
                    if NAME_LENGTHS[t] != length:
                        continue
                    same = True
                    for c in range(length):
                        if b[name_start + c] != NAMES[t, c]:
                            same = False
                            break
                    if same:
                        starts[g, t] = k + 1
                        ends[g, t] = e - 2
                        break
            i = j + 1
        plain[g] = ok


@njit(nogil=True, cache=True)
def _digits(b: np.ndarray, s: int, n: int) -> int:
    """The number written by ``n`` ASCII digits at ``b[s]``, or -1."""
    value = 0
    for i in range(s, s + n):
        if b[i] < 48 or b[i] > 57:
            return -1
        value = value * 10 + b[i] - 48
    return value


@njit(nogil=True, cache=True)
def _rating(b: np.ndarray, s: int, e: int) -> int:
    """A rating of one to four ASCII digits (not a lone ``0``, which means none), or -1."""
    if s < 0 or not 1 <= e - s <= 4 or (e - s == 1 and b[s] == 48):
        return -1
    return _digits(b, s, e - s)


@njit(nogil=True, cache=True)
def _unknown(b: np.ndarray, s: int, n: int) -> bool:
    for i in range(s, s + n):
        if b[i] != 63:  # ?
            return False
    return True


@njit(nogil=True, cache=True)
def _same(b: np.ndarray, s: int, e: int, r: int) -> bool:
    """Whether ``b[s:e]`` is result number ``r``."""
    if e - s != _RESULT_LENGTHS[r]:
        return False
    for i in range(e - s):
        if b[s + i] != _RESULT_TEXTS[r, i]:
            return False
    return True


#: The results a ``Result`` tag may hold, in :data:`tokpack.chess.board.results.RESULTS`'s order.
_RESULT_TEXTS = np.zeros((4, 7), dtype=np.uint8)
_RESULT_LENGTHS = np.array([len(r) for r in RESULTS], dtype=np.int64)
for _row, _result in enumerate(RESULTS):
    _RESULT_TEXTS[_row, :len(_result)] = np.frombuffer(_result.encode("ascii"), np.uint8)


@njit(nogil=True, cache=True)
def judge_plain(b: np.ndarray, starts: np.ndarray, ends: np.ndarray, plain: np.ndarray, judged: np.ndarray,
                date_tag: np.ndarray, white_elo: np.ndarray, black_elo: np.ndarray, result: np.ndarray) -> None:
    """Which plain games are surely usable (``judged``), the tag their date comes from, their ratings
    and their result (its index in :data:`tokpack.chess.board.results.RESULTS`).

    A game left unjudged may still be usable: :func:`tokpack.chess.pgn.games.judge_headers` decides.
    """
    for g in range(len(plain)):
        judged[g] = False
        if not plain[g] or starts[g, VARIANT] >= 0 or starts[g, FEN] >= 0 or starts[g, SET_UP] >= 0:
            continue
        tag = UTC_DATE if starts[g, UTC_DATE] >= 0 else DATE
        s = starts[g, tag]
        if s < 0 or ends[g, tag] - s != 10 or b[s + 4] != 46 or b[s + 7] != 46:
            continue
        if _digits(b, s, 4) < 0 and not _unknown(b, s, 4):
            continue
        month, day = _digits(b, s + 5, 2), _digits(b, s + 8, 2)
        if not (1 <= month <= 12 or (month < 0 and _unknown(b, s + 5, 2))):
            continue
        if not (1 <= day <= 31 or (day < 0 and _unknown(b, s + 8, 2))):
            continue
        white, black = _rating(b, starts[g, WHITE_ELO], ends[g, WHITE_ELO]), _rating(b, starts[g, BLACK_ELO], ends[g, BLACK_ELO])
        if white < 0 or black < 0:
            continue
        s, e = starts[g, RESULT], ends[g, RESULT]
        if s < 0:
            continue
        outcome = -1
        for r in range(len(_RESULT_LENGTHS)):
            if _same(b, s, e, r):
                outcome = r
        if outcome < 0:
            continue
        judged[g] = True
        date_tag[g] = tag
        white_elo[g], black_elo[g] = white, black
        result[g] = outcome


_HTTPS, _HTTP = (np.frombuffer(prefix, np.uint8).copy() for prefix in (b"https://", b"http://"))


@njit(nogil=True, cache=True)
def _starts_with(b: np.ndarray, s: int, e: int, prefix: np.ndarray) -> bool:
    if e - s < len(prefix):
        return False
    for i in range(len(prefix)):
        if b[s + i] != prefix[i]:
            return False
    return True


@njit(nogil=True, cache=True)
def site_ids(b: np.ndarray, starts: np.ndarray, ends: np.ndarray, id_start: np.ndarray, id_end: np.ndarray) -> None:
    """The span of each ``Site`` value's last part when it is a URL (``https://`` or ``http://``):
    what comes after its last ``/`` once trailing ``/`` are dropped (the whole value without them
    if none is left); ``id_start`` -1 where the value is absent, not a URL, or its part empty."""
    for i in range(len(starts)):
        s, e = starts[i], ends[i]
        id_start[i], id_end[i] = -1, -1
        if s < 0 or not (_starts_with(b, s, e, _HTTPS) or _starts_with(b, s, e, _HTTP)):
            continue
        while e > s and b[e - 1] == 47:  # /
            e -= 1
        k = e
        while k > s and b[k - 1] != 47:
            k -= 1
        if k < e:
            id_start[i], id_end[i] = k, e
