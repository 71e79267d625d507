"""A chunk of PGN cut into games by numba: each game's tag lines, movetext and byte offset, as spans.

:func:`cut_spans` is :func:`tokpack.chess.reader.cut_games_python` (the specification, kept in
Python and tested against this) run over the code points of ``"\\n" + text``: paragraphs are
split at blank lines (lines of whitespace only, as ``str.isspace`` defines it); a tag line is a
line whose first non-whitespace character is ``[``; a paragraph of tag lines with no moves takes
the paragraph after one blank line as more tag lines (unless they repeat one of its tags: a new
game) or as its movetext (python-chess allows one blank line there); and a brace comment left
open takes in the paragraphs after it, except one starting with a tag line when a ``{`` comes
before the next ``}``. A game's tag lines and movetext are each one contiguous span of the text,
so no string is built here.

Measured (BENCHMARKS.md, chess): the Python cutter, a regular-expression split and a loop per
paragraph, took about 15 us a Lichess-style game; this takes under 1 us, and slicing the spans
into strings about 1 more.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Problems found while cutting, by code (0: none); :mod:`tokpack.chess.reader` words them.
_HEADER_ONLY, _UNREADABLE = 1, 2
#: ``str.isspace`` for every code point up to the last whitespace one (U+3000); none above it.
SPACE = np.array([chr(c).isspace() for c in range(0x3001)], dtype=np.bool_)


@njit(nogil=True, cache=True)
def _space(c: int) -> bool:
    return c < 0x3001 and SPACE[c]


@njit(nogil=True, cache=True)
def _utf8_length(c: int) -> int:
    """Bytes of code point ``c`` in UTF-8 with ``surrogateescape`` (U+DC80..U+DCFF are one raw byte).

    Other lone surrogates cannot occur: the text was decoded with ``surrogateescape``.
    """
    if c < 0x80 or 0xDC80 <= c <= 0xDCFF:
        return 1
    if c < 0x800:
        return 2
    return 3 if c < 0x10000 else 4


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
    for i in range(s, e):
        c = b[i]
        if state == 1:
            if c == 125:
                state = 0
        elif state == 2:
            if c == 10:
                state = 0
        elif c == 123:
            state = 1
        elif c == 59 or (c == 37 and (i == s or b[i - 1] == 10)):
            state = 2
    return state


@njit(nogil=True, cache=True)
def _tag_start(b: np.ndarray, s: int, e: int) -> bool:
    """Whether the line at ``b[s]`` is a tag line: ``[`` after any whitespace (python-chess strips it)."""
    while s < e and b[s] != 10 and _space(b[s]):
        s += 1
    return s < e and b[s] == 91


@njit(nogil=True, cache=True)
def _tag_lines_end(b: np.ndarray, s: int, e: int) -> int:
    """The end of the tag lines (and ``%``/``;`` escape lines among them) that start ``b[s:e]``."""
    q = s
    while q < e and (b[q] == 37 or b[q] == 59 or _tag_start(b, q, e)):
        while q < e and b[q] != 10:
            q += 1
        if q < e:
            q += 1
    return q


@njit(nogil=True, cache=True)
def _name_end(b: np.ndarray, s: int, e: int) -> int:
    """The end of the tag name of the line at ``b[s]`` (from its ``[``), or -1 for no tag line."""
    while s < e and b[s] != 10 and _space(b[s]):
        s += 1
    if s >= e or b[s] != 91:
        return -1
    k = s + 1
    while k < e and b[k] != 10 and b[k] != 34 and b[k] != 93 and not _space(b[k]):
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
def cut_spans(b: np.ndarray, byte_offset: int) -> np.ndarray:
    """The games of ``b``, the code points of ``"\\n" + text``, one column each: the start and end
    in ``b`` of its tag lines and of its movetext, its byte offset, its problem code.

    ``byte_offset`` is the byte offset of ``text`` in its file; a game's offset is where its first
    paragraph starts. ``b`` is ``uint8`` for ASCII text (a byte a code point), else ``uint32``.
    """
    size = len(b)
    lines = 1
    for i in range(size):
        lines += b[i] == 10
    games_out = np.empty((6, lines), dtype=np.int64)  # a paragraph at most per line
    tag_start, tag_end, move_start, move_end, offsets, problems = (
        games_out[0], games_out[1], games_out[2], games_out[3], games_out[4], games_out[5])
    ascii_text = b.itemsize == 1
    starts = np.empty(lines, dtype=np.int64)
    ends = np.empty_like(starts)
    newlines = np.zeros_like(starts)  # in the separator after each paragraph
    n, paragraph, p = 0, 0, 0
    while p < size:
        if b[p] == 10:
            q, last, count = p + 1, -1, 1
            while True:
                r = q
                while r < size and b[r] != 10 and _space(b[r]):
                    r += 1
                if r < size and b[r] == 10:
                    last, q, count = r, r + 1, count + 1
                else:
                    break
            if last >= 0:
                starts[n], ends[n], newlines[n] = paragraph, p, count
                n += 1
                paragraph = p = last + 1
                continue
        p += 1
    starts[n], ends[n], newlines[n] = paragraph, size, 0
    n += 1
    i = 0
    if ends[0] == 0:  # text starts with blank lines
        i = 1
    else:
        starts[0] = 1  # the "\n" put before the text
    games, done_chars, done_bytes = 0, 1, byte_offset
    while i < n:
        s, e = starts[i], ends[i]
        i += 1
        if s == e or (b[s] == 37 or b[s] == 59) and _escape_lines_only(b, s, e):
            continue
        blank = True
        for k in range(s, e):
            if not _space(b[k]):
                blank = False
                break
        if blank:
            continue
        q = _tag_lines_end(b, s, e)
        ms, me, problem = q, e, 0
        while q > s and ms == me:  # tags and no movetext: after one blank line, more tags or the moves
            if i < n and newlines[i - 1] == 2 and starts[i] < ends[i]:
                following, e2 = starts[i], ends[i]
                i += 1
                if _tag_start(b, following, e2):
                    if _repeats_tag(b, s, q, following, _tag_lines_end(b, following, e2)):
                        i -= 1  # a new game's tags: this one has none of its own moves
                        problem = _HEADER_ONLY
                        break
                    q = _tag_lines_end(b, following, e2)
                    ms, me = q, e2
                    continue
                ms, me = following, e2
            else:
                problem = _HEADER_ONLY
            break
        state = _comment_state(b, ms, me, 0)
        closed_at = -1  # where the open comment is known to close, before any '{'
        while state == 1:
            if i < n and _tag_start(b, starts[i], ends[i]) and starts[i] > closed_at:
                closed_at = _closes_first(b, starts[i], size)
            if i < n and (not _tag_start(b, starts[i], ends[i]) or starts[i] < closed_at):
                state = _comment_state(b, me, ends[i], state)
                me = ends[i]
                i += 1
            else:
                problem = _UNREADABLE
                break
        if ascii_text:
            done_bytes += s - done_chars
        else:
            for k in range(done_chars, s):
                done_bytes += _utf8_length(b[k])
        done_chars = s
        tag_start[games], tag_end[games], move_start[games], move_end[games] = s, q, ms, me
        offsets[games], problems[games] = done_bytes, problem
        games += 1
    return games_out[:, :games]
