"""A chunk of PGN cut into games by numba: each game's tag lines, movetext and byte offset, as spans.

:func:`cut_spans` is :func:`tokpack.chess.pgn.read.cut_games_python` (the specification, kept in
Python and tested against this) run over the UTF-8 bytes of the text itself: paragraphs are
split at blank lines (lines of whitespace only, as ``str.isspace`` defines it; a whitespace
character outside ASCII is recognised by its bytes, :func:`_space_length`); a tag line is a
line whose first non-whitespace character is ``[``; a paragraph of tag lines with no moves takes
the paragraph after one blank line as more tag lines (unless they repeat one of its tags: a new
game) or as its movetext (python-chess allows one blank line there); and a brace comment left
open takes in the paragraphs after it, except one starting with a tag line when a ``{`` comes
before the next ``}``. A game's tag lines and movetext are each one contiguous span of the bytes,
so no string is built here, and a span's position is its byte offset.

Every rule compares ASCII bytes, and an ASCII byte is never part of a longer UTF-8 sequence, so
byte positions stand in for character positions; a span starts after a line end and ends before
one, where the bytes decode (``surrogateescape``) to the characters the Python cutter slices.

It does in one compiled pass what the Python cutter (:func:`tokpack.chess.pgn.read.cut_games_python`,
its specification) does with a regular-expression split and a loop per paragraph; BENCHMARKS.md,
"Chess: converting PGN", gives what each costs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Problems found while cutting, by code (0: none); :mod:`tokpack.chess.pgn.read` words them.
_HEADER_ONLY, _UNREADABLE = 1, 2
#: ``str.isspace`` for the ASCII bytes.
_ASCII_SPACE = np.array([chr(c).isspace() for c in range(128)], dtype=np.bool_)
#: The UTF-8 bytes of every other character ``str.isspace`` holds (U+0085, U+00A0, U+1680, ...,
#: U+3000), zero-padded to 3; all of them are 2 or 3 bytes long. None lies above U+3000 (a test
#: holds this to the whole of Unicode), so the search stops there: the whole range costs 0.05-0.08
#: CPU s at every import.
_WIDE = [chr(c).encode("utf-8") for c in range(128, 0x3001) if chr(c).isspace()]
_WIDE_SPACES = np.array([list(w.ljust(3, b"\0")) for w in _WIDE], dtype=np.uint8)
_WIDE_LENGTHS = np.array([len(w) for w in _WIDE], dtype=np.int64)


@njit(nogil=True, cache=True)
def _space_length(b: np.ndarray, i: int, e: int) -> int:
    """The length in bytes of the whitespace character starting at ``b[i]`` (before ``e``), or 0.

    A byte that continues a longer sequence never starts one of these, so ``i`` may be any byte.
    """
    c = b[i]
    if c < 128:
        return 1 if _ASCII_SPACE[c] else 0
    for k in range(len(_WIDE_LENGTHS)):
        n = _WIDE_LENGTHS[k]
        if i + n > e or c != _WIDE_SPACES[k, 0]:
            continue
        if b[i + 1] == _WIDE_SPACES[k, 1] and (n == 2 or b[i + 2] == _WIDE_SPACES[k, 2]):
            return n
    return 0


_ONES, _HIGHS, _NEWLINES = (np.uint64(0x0101010101010101 * byte) for byte in (1, 0x80, 10))


@njit(nogil=True, cache=True)
def _line_ends(b: np.ndarray) -> np.ndarray:
    """The position of every ``\\n`` in ``b``, then ``len(b)`` (where the last line ends).

    ``b`` is read 8 bytes at a time, and only a word holding a ``\\n`` byte by byte (the
    "has a zero byte" test of the word xor ``\\n\\n...``).
    """
    count = 0
    for i in range(len(b)):
        if b[i] == 10:
            count += 1
    out = np.empty(count + 1, dtype=np.int64)
    words = b[:len(b) // 8 * 8].view(np.uint64)
    n = 0
    for k in range(len(words)):
        x = words[k] ^ _NEWLINES
        if ((x - _ONES) & ~x & _HIGHS) != 0:
            for i in range(8 * k, 8 * k + 8):
                if b[i] == 10:
                    out[n] = i
                    n += 1
    for i in range(8 * len(words), len(b)):
        if b[i] == 10:
            out[n] = i
            n += 1
    out[n] = len(b)
    return out


@njit(nogil=True, cache=True)
def _escape_lines_only(b: np.ndarray, s: int, e: int) -> bool:
    """Whether every line of ``b[s:e]`` (an empty one after a final newline too) starts with % or ;."""
    at_line_start = True
    for i in range(s, e):
        if at_line_start and b[i] != 37 and b[i] != 59:
            return False
        at_line_start = b[i] == 10
    return not at_line_start


@njit(nogil=True, cache=True)
def _comment_state(b: np.ndarray, s: int, e: int, state: int) -> int:
    """The comment state after ``b[s:e]``, from ``state`` (0 outside, 1 in ``{}``, 2 in a ``;`` or ``%`` line).

    ``{`` opens a comment to the first ``}``; outside one, ``;`` and a ``%`` at a line's start
    open a comment to the end of the line. ``b[s]`` is at a line's start.
    """
    i = s
    while i < e:
        c = b[i]
        if state == 1:
            while i < e and b[i] != 125:  # the comment's text, to its '}'
                i += 1
            if i < e:
                state = 0
        elif state == 2:
            if c == 10:
                state = 0
        elif c == 123:
            state = 1
        elif c == 59 or (c == 37 and (i == s or b[i - 1] == 10)):
            state = 2
        i += 1
    return state


@njit(nogil=True, cache=True)
def _escapes(b: np.ndarray, line_ends: np.ndarray) -> np.ndarray:
    """The positions of every ``;`` and every ``%`` at a line's start (usually none: counted first)."""
    count = 0
    for i in range(len(b)):
        if b[i] == 59:
            count += 1
    if len(b) and b[0] == 37:
        count += 1
    for j in range(len(line_ends) - 1):
        if line_ends[j] + 1 < len(b) and b[line_ends[j] + 1] == 37:
            count += 1
    out = np.empty(count, dtype=np.int64)
    n = 0
    for i in range(len(b) if count else 0):
        if b[i] == 59 or (b[i] == 37 and (i == 0 or b[i - 1] == 10)):
            out[n] = i
            n += 1
    return out


@njit(nogil=True, cache=True)
def _state_after(b: np.ndarray, escapes: np.ndarray, braces: bool, s: int, e: int, state: int) -> int:
    """:func:`_comment_state` (from state 0 or 1), quickly where ``b[s:e]`` holds none of the
    ``escapes`` (:func:`_escapes`): then only braces change the state, and the last one decides
    (``braces``: whether the text holds a ``{`` at all)."""
    if not braces:
        return state
    j = np.searchsorted(escapes, s)
    if j < len(escapes) and escapes[j] < e:
        return _comment_state(b, s, e, state)
    k = e - 1
    while k >= s and b[k] != 123 and b[k] != 125:
        k -= 1
    if k < s:
        return state
    return 1 if b[k] == 123 else 0


@njit(nogil=True, cache=True)
def _tag_start(b: np.ndarray, s: int, e: int) -> bool:
    """Whether the line at ``b[s]`` is a tag line: ``[`` after any whitespace (python-chess strips it)."""
    while s < e and b[s] != 10:
        n = _space_length(b, s, e)
        if n == 0:
            break
        s += n
    return s < e and b[s] == 91


@njit(nogil=True, cache=True)
def _tag_lines_end(b: np.ndarray, line_ends: np.ndarray, s: int, e: int) -> int:
    """The end of the tag lines (and ``%``/``;`` escape lines among them) that start ``b[s:e]``
    (``line_ends``: :func:`_line_ends`)."""
    q = s
    j = np.searchsorted(line_ends, s)
    while q < e and (b[q] == 37 or b[q] == 59 or _tag_start(b, q, e)):
        while line_ends[j] < q:
            j += 1
        if line_ends[j] >= e:
            return e
        q = line_ends[j] + 1
    return q


@njit(nogil=True, cache=True)
def _name_end(b: np.ndarray, s: int, e: int) -> int:
    """The end of the tag name of the line at ``b[s]`` (from its ``[``), or -1 for no tag line."""
    while s < e and b[s] != 10:
        n = _space_length(b, s, e)
        if n == 0:
            break
        s += n
    if s >= e or b[s] != 91:
        return -1
    k = s + 1
    while k < e and b[k] != 10 and b[k] != 34 and b[k] != 93 and _space_length(b, k, e) == 0:
        k += 1
    return k


@njit(nogil=True, cache=True)
def _repeats_tag(b: np.ndarray, s: int, q: int, s2: int, q2: int) -> bool:
    """Whether a tag line of ``b[s2:q2]`` names a tag that a tag line of ``b[s:q]`` names."""
    a = s2
    while a < q2:
        a_end = _name_end(b, a, q2)
        if a_end >= 0:
            a_start = a
            while b[a_start] != 91:
                a_start += 1
            c = s
            while c < q:
                c_end = _name_end(b, c, q)
                if c_end >= 0:
                    c_start = c
                    while b[c_start] != 91:
                        c_start += 1
                    if c_end - c_start == a_end - a_start:
                        same = True
                        for k in range(c_end - c_start):
                            if b[c_start + k] != b[a_start + k]:
                                same = False
                                break
                        if same:
                            return True
                while c < q and b[c] != 10:
                    c += 1
                c += 1
        while a < q2 and b[a] != 10:
            a += 1
        a += 1
    return False


@njit(nogil=True, cache=True)
def _closes_first(b: np.ndarray, s: int, e: int) -> int:
    """Where a ``}`` in ``b[s:e]`` comes before any ``{``, or -1: read as the inside of an open
    comment, the text up to it is comment text, ``[`` lines included."""
    for k in range(s, e):
        if b[k] == 125:
            return k
        if b[k] == 123:
            return -1
    return -1


@njit(nogil=True, cache=True)
def _blank_to(b: np.ndarray, q: int, size: int) -> int:
    """Where the line at ``b[q]`` ends (its ``\\n``) if it holds only whitespace, else -1."""
    while q < size and b[q] != 10:
        n = _space_length(b, q, size)
        if n == 0:
            return -1
        q += n
    return q if q < size else -1


@njit(nogil=True, cache=True)
def _grown(a: np.ndarray) -> np.ndarray:
    out = np.empty(2 * len(a), dtype=a.dtype)
    out[:len(a)] = a
    return out


@njit(nogil=True, cache=True)
def cut_spans(b: np.ndarray, byte_offset: int) -> np.ndarray:
    """The games of ``b``, the UTF-8 bytes of a text with ``\\n`` line ends, one column each: the
    start and end in ``b`` of its tag lines and of its movetext, its byte offset, its problem code.

    ``byte_offset`` is the byte offset of ``b[0]`` in its file; a game's offset is where its first
    paragraph starts. The text is read as if a line end came before it (as ``"\\n" + text``),
    so blank lines at its start separate nothing from the first paragraph.
    """
    size = len(b)
    line_ends = _line_ends(b)
    escapes = _escapes(b, line_ends)
    braces = False
    for i in range(size):
        if b[i] == 123:
            braces = True
    starts = np.empty(size // 512 + 64, dtype=np.int64)
    ends = np.empty_like(starts)
    newlines = np.empty_like(starts)  # in the separator after each paragraph
    # Paragraphs: text between a line end and the next line end followed by blank lines; the
    # line end at -1 is the one read before the text.
    n, paragraph, p, j = 0, -1, -1, 0
    while p < size:  # b[p] is a line end
        q, last, count = p + 1, -1, 1
        while True:
            r = _blank_to(b, q, size)
            if r < 0:
                break
            last, q, count = r, r + 1, count + 1
        if last >= 0:
            if n + 1 >= len(starts):
                starts, ends, newlines = _grown(starts), _grown(ends), _grown(newlines)
            starts[n], ends[n], newlines[n] = paragraph, p, count
            n += 1
            paragraph, p = last + 1, last
        while line_ends[j] <= p:  # the next line end
            j += 1
        p = line_ends[j]
    starts[n], ends[n], newlines[n] = paragraph, size, 0
    n += 1
    games_out = np.empty((6, n), dtype=np.int64)  # a game at most per paragraph
    tag_start, tag_end, move_start, move_end, offsets, problems = (
        games_out[0], games_out[1], games_out[2], games_out[3], games_out[4], games_out[5])
    i = 0
    if ends[0] == -1:  # text starts with blank lines
        i = 1
    else:
        starts[0] = 0
    games = 0
    while i < n:
        s, e = starts[i], ends[i]
        i += 1
        if s == e or (b[s] == 37 or b[s] == 59) and _escape_lines_only(b, s, e):
            continue
        k = s
        while k < e:
            step = _space_length(b, k, e)
            if step == 0:
                break
            k += step
        if k >= e:  # whitespace only
            continue
        q = _tag_lines_end(b, line_ends, s, e)
        ms, me, problem = q, e, 0
        while q > s and ms == me:  # tags and no movetext: after one blank line, more tags or the moves
            if i < n and newlines[i - 1] == 2 and starts[i] < ends[i]:
                following, e2 = starts[i], ends[i]
                i += 1
                if _tag_start(b, following, e2):
                    if _repeats_tag(b, s, q, following, _tag_lines_end(b, line_ends, following, e2)):
                        i -= 1  # a new game's tags: this one has none of its own moves
                        problem = _HEADER_ONLY
                        break
                    q = _tag_lines_end(b, line_ends, following, e2)
                    ms, me = q, e2
                    continue
                ms, me = following, e2
            else:
                problem = _HEADER_ONLY
            break
        state = _state_after(b, escapes, braces, ms, me, 0)
        closed_at = -1  # where the open comment is known to close, before any '{'
        while state == 1:
            if i < n and _tag_start(b, starts[i], ends[i]) and starts[i] > closed_at:
                closed_at = _closes_first(b, starts[i], size)
            if i < n and (not _tag_start(b, starts[i], ends[i]) or starts[i] < closed_at):
                state = _state_after(b, escapes, braces, me, ends[i], state)
                me = ends[i]
                i += 1
            else:
                problem = _UNREADABLE
                break
        tag_start[games], tag_end[games], move_start[games], move_end[games] = s, q, ms, me
        offsets[games], problems[games] = byte_offset + s, problem
        games += 1
    return games_out[:, :games]
