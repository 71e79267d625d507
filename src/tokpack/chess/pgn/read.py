"""A chunk of PGN read by compiled code: cut into games, tags judged, SAN main lines resolved to UCI.

A chunk's games are read together (:func:`tokpack.chess.pgn.games.chunk_games` puts the steps in
order), each step one pass of compiled code over the chunk's bytes, which are never decoded:
every step keeps spans (offsets) of them in numpy arrays, and the converter gathers the values it
keeps straight into Arrow columns.

- :func:`cut_chunk`: a game is a paragraph of tag lines and the paragraph of movetext after it
  (blank lines separate paragraphs; one blank line may come among the tags; a comment may span
  them). :func:`cut_games_python` is the same cut in plain Python, kept as its specification.
- :func:`tag_spans`: the tag values a conversion keeps, and which games are surely usable; a game
  whose tag lines or values it cannot vouch for is read by :func:`read_headers` (python-chess's
  tag expression, :data:`TAG`) and judged in Python.
- :func:`main_lines`: the movetexts scanned (comments and variations dropped, the main-line words
  coded and, if asked, each move's ``[%clk]`` read), every game's SAN moves resolved on its board
  and written as UCI text.

:func:`cut_games`, :func:`read_tags` and :func:`resolve_games` run the same steps on strings.
Each step is one compiled pass in place of Python per game (regular expressions, a dict of tags,
a loop per paragraph); see BENCHMARKS.md, "Chess: converting PGN". Whatever that fast path does not take on exactly (a ``;`` comment, an
``%`` escape, a variation before the first move, a null move, an illegal or ambiguous move) is
read by python-chess (``chess.pgn.read_game``), so every game's moves are python-chess's main line.

Where PGN is loose it reads as python-chess does: tag lines may start with whitespace, one blank
line may come among the tags, and a brace comment may hold blank lines and ``[`` lines. Two
differences on broken input are deliberate: a paragraph of tags with no moves followed by tags that
repeat one of its own is a game of its own (``header_only``), not tags added to the next game; and
a comment whose ``}`` does not come before the next game's own ``{`` ends at that game's tags
(``unreadable_movetext``) instead of swallowing it. A byte-order mark after a blank line (files joined end to
end) is dropped wherever python-chess drops it, at the first line it reads for a game, and also
after more blank lines, where python-chess reads the game's tags as moves. The chunks come from
:mod:`tokpack.chess.pgn.stream`.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import NamedTuple

import chess.pgn
import numpy as np

from tokpack.chess.board.results import RESULTS
from tokpack.chess.pgn._san_to_uci import SanCodes

#: What cutting finds wrong with a game: (skip reason, detail).
HEADER_ONLY = ("header_only", "tags with no moves")
COMMENT_LEFT_OPEN = ("unreadable_movetext", "a comment '{' is never closed")
_PROBLEMS = (None, HEADER_ONLY, COMMENT_LEFT_OPEN)  # by the compiled cutter's codes

# python-chess's, per line, after the leading whitespace it strips from a tag line.
TAG = re.compile(r'^[^\S\n]*\[([A-Za-z0-9][A-Za-z0-9_+#=:-]*)\s+"([^\r\n]*)"\][^\S\n]*$', re.MULTILINE)
_TAG_LINE = re.compile(r"^[^\S\n]*\[", re.MULTILINE)
_TAG_NAME = re.compile(r'^[^\S\n]*\[([^\s"\]]*)', re.MULTILINE)
_TAG_LINES = re.compile(r"(?:(?:[^\S\n]*\[|[%;])[^\n]*(?:\n|\Z))*")
_PARAGRAPHS = re.compile(r"(\n(?:[^\S\n]*\n)+)")
COMMENT = re.compile(r"\{[^}]*\}")
# Left to right, whichever starts first: a brace comment (its '}' may be missing), a ';' comment to
# the end of its line, a '%' escape line; so a '{' inside a ';' comment opens nothing, as in PGN.
_COMMENTS = re.compile(r"\{[^}]*\}?|;[^\n]*|^%[^\n]*", re.MULTILINE)
_VARIATION = re.compile(r"\([^()]*\)")
# python-chess's MOVETEXT_REGEX with only the move alternatives captured: the same tokens, in order.
_TOKENS = re.compile(r"""([NBKRQ]?[a-h]?[1-8]?[\-x]?[a-h][1-8](?:=?[nbrqkNBRQK])?|[PNBRQK]?@[a-h][1-8]|--|Z0|0000|@@@@
    |O-O(?:-O)?|0-0(?:-0)?)|\$[0-9]+|\(|\)|\*|1-0|0-1|1/2-1/2|[\?!]{1,2}""", re.VERBOSE)
_CLOCK_TOKENS = re.compile(r"""([NBKRQ]?[a-h]?[1-8]?[\-x]?[a-h][1-8](?:=?[nbrqkNBRQK])?|[PNBRQK]?@[a-h][1-8]|--|Z0|0000|@@@@
    |O-O(?:-O)?|0-0(?:-0)?)|\{([^}]*)\}|\$[0-9]+|\(|\)|\*|1-0|0-1|1/2-1/2|[\?!]{1,2}""", re.VERBOSE)
_CLOCK = re.compile(r"\[%clk\s(\d+):(\d+):(\d+(?:\.\d*)?)\]")


@dataclass
class Game:
    """One game's text as the reader cut it: where it starts, its tags and its movetext."""

    offset: int
    tags: str
    movetext: str
    problem: tuple[str, str] | None = None  # (skip reason, detail) found while cutting


@dataclass
class Cut:
    """A chunk's games as spans of its bytes (``text``: UTF-8, line ends ``\\n``, no byte-order
    mark), one entry per game: its tag lines ``text[tag_start:tag_end]``, its movetext
    ``text[move_start:move_end]``, its byte offset in the file and its problem code (0: none, else
    an index in :data:`_PROBLEMS`)."""

    text: np.ndarray
    tag_start: np.ndarray
    tag_end: np.ndarray
    move_start: np.ndarray
    move_end: np.ndarray
    offsets: np.ndarray
    problems: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)

    def problem(self, g: int) -> tuple[str, str] | None:
        """What cutting found wrong with game ``g``: (skip reason, detail), or None."""
        return _PROBLEMS[self.problems[g]]

    def game(self, g: int) -> Game:
        """Game ``g`` as strings (undecodable bytes as ``surrogateescape`` reads them)."""
        text = self.text
        return Game(int(self.offsets[g]), _decode(text[self.tag_start[g]:self.tag_end[g]]),
                    _decode(text[self.move_start[g]:self.move_end[g]]), _PROBLEMS[self.problems[g]])


def _decode(span: np.ndarray) -> str:
    return span.tobytes().decode("utf-8", "surrogateescape")


def cut_chunk(data: bytes, offset: int) -> Cut:
    """The games of a chunk of PGN bytes (line ends ``\\n``, ``\\r\\n`` or ``\\r``), with byte offsets.

    Compiled (:func:`tokpack.chess.pgn._cut_compiled.cut_spans`), over the bytes themselves: no string
    is made. :func:`cut_games_python` is the same cut written plainly, and the tests hold the two equal.
    """
    from tokpack.chess.pgn._cut_compiled import cut_spans

    original, returns = data, b"\r" in data
    if returns:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if b"\xef" in data:  # files joined end to end: a byte-order mark after a blank line is spaces, as the same length
        data = data.replace(b"\n\n\xef\xbb\xbf", b"\n\n   ")
    skip = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a byte-order mark
    text = np.frombuffer(data, np.uint8, offset=skip)
    tag_start, tag_end, move_start, move_end, offsets, problems = cut_spans(text, offset + skip)
    if returns:
        offsets = _in_original(original, offsets, offset)
    return Cut(text, tag_start, tag_end, move_start, move_end, offsets, problems)


def _in_original(data: bytes, offsets: np.ndarray, offset: int) -> np.ndarray:
    """Byte offsets into ``data`` with its ``\\r\\n`` line ends made ``\\n`` (as the cut reads it),
    moved to where they are in ``data`` itself: past every ``\\r`` removed before them.

    >>> _in_original(b"[a]\\r\\n\\r\\n[b]", np.array([10, 15]), 10).tolist()
    [10, 17]
    """
    raw = np.frombuffer(data, np.uint8)
    removed = np.flatnonzero((raw[:-1] == 13) & (raw[1:] == 10))
    # Where the "\n" after each removed "\r" is in the text the cut read; a game after it moves by one.
    after = removed - np.arange(len(removed))
    return offsets + np.searchsorted(after, offsets - offset, side="left")


def cut_games(text: str, offset: int) -> list[Game]:
    """The games of a chunk of text (line ends ``\\n``, ``\\r\\n`` or ``\\r``), with byte offsets:
    :func:`cut_chunk` of its bytes, as strings."""
    cut = cut_chunk(text.encode("utf-8", "surrogateescape"), offset)
    return [cut.game(g) for g in range(len(cut))]


def _normalise(text: str, offset: int) -> tuple[str, int]:
    """Line ends made ``\\n``, a byte-order mark at the start dropped (its 3 bytes added to ``offset``)
    and one after a blank line made 3 spaces (what python-chess drops before a game, where files
    were joined end to end)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):
        text, offset = text[1:], offset + 3
    return text.replace("\n\n\ufeff", "\n\n   "), offset


def cut_games_python(text: str, offset: int) -> list[Game]:
    """:func:`cut_games` in plain Python: the specification of the compiled cut, kept for the tests."""
    original = text.encode("utf-8", "surrogateescape")
    games = _cut_normalised(*_normalise(text, offset))
    moved = _in_original(original, np.array([game.offset for game in games], dtype=np.int64), offset).tolist()
    return [Game(at, game.tags, game.movetext, game.problem) for at, game in zip(moved, games, strict=True)]


def _cut_normalised(text: str, offset: int) -> list[Game]:
    """:func:`cut_games_python` of a text with ``\\n`` line ends and no byte-order mark."""
    parts = _PARAGRAPHS.split("\n" + text)  # the "\n" added makes leading blank lines a separator
    position = -1  # character position of parts[i] in text
    if not parts[0]:
        position += len(parts[1])
        parts = parts[2:]
    else:
        parts[0] = parts[0][1:]
        position += 1
    ascii_text = text.isascii()
    games: list[Game] = []
    i = 0

    counted = [0, offset]  # a character position and its byte offset: games come in order

    def at(pos: int) -> int:
        if ascii_text:
            return offset + pos
        counted[1] += len(text[counted[0]:pos].encode("utf-8", "surrogateescape"))
        counted[0] = pos
        return counted[1]

    while i < len(parts):
        paragraph = parts[i]
        start = position
        position += len(paragraph) + (len(parts[i + 1]) if i + 1 < len(parts) else 0)
        if not paragraph or paragraph.isspace() or paragraph.startswith(("%", ";")) and all(line.startswith(("%", ";")) for line in paragraph.split("\n")):
            i += 2
            continue
        tags, movetext = _split_tags(paragraph)
        i += 2
        problem = None
        while tags and not movetext:  # after one blank line, more tags or the moves
            separator = parts[i - 1] if i - 1 < len(parts) else ""
            if i < len(parts) and separator.count("\n") == 2 and parts[i]:
                following = parts[i]
                if _is_tags(following):
                    more, rest = _split_tags(following)
                    if set(_TAG_NAME.findall(more)) & set(_TAG_NAME.findall(tags)):
                        problem = HEADER_ONLY  # a new game's tags: this one has no moves of its own
                        break
                    tags, movetext = tags + separator + more, rest
                    position += len(parts[i]) + (len(parts[i + 1]) if i + 1 < len(parts) else 0)
                    i += 2
                    continue
                position += len(parts[i]) + (len(parts[i + 1]) if i + 1 < len(parts) else 0)
                i += 2
                movetext = following
            else:
                problem = HEADER_ONLY
            break
        while _comment_left_open(movetext):
            if i < len(parts) and (not _is_tags(parts[i]) or _closes_first("".join(parts[i:]))):
                movetext += parts[i - 1] + parts[i]
                position += len(parts[i]) + (len(parts[i + 1]) if i + 1 < len(parts) else 0)
                i += 2
            else:
                problem = COMMENT_LEFT_OPEN
                break
        games.append(Game(at(start), tags, movetext, problem))
    return games


def _comment_left_open(movetext: str) -> bool:
    """Whether ``movetext`` ends inside a brace comment (a '{' never closed).

    >>> _comment_left_open("1. e4 { best"), _comment_left_open("1. e4 ; see {this\\n1... e5")
    (True, False)
    """
    if ";" not in movetext and "\n%" not in movetext and not movetext.startswith("%"):
        # The common case, Lichess's "{ [%clk 0:03:00] }" included: the last '{' decides.
        return movetext.rfind("{") > movetext.rfind("}")
    last = None
    for last in _COMMENTS.finditer(movetext):  # noqa: B007 (the loop keeps the last match)
        pass
    return last is not None and last.group().startswith("{") and not last.group().endswith("}")


def _is_tags(paragraph: str) -> bool:
    """Whether a paragraph starts with a tag line (leading whitespace allowed, as python-chess reads)."""
    return paragraph.lstrip().startswith("[")


def _closes_first(text: str) -> bool:
    """Whether, read as the inside of an open brace comment, ``text`` closes it before a ``{`` opens
    another: then its ``[`` lines are comment text, not the next game's tags."""
    close, opened = text.find("}"), text.find("{")
    return close >= 0 and (opened < 0 or close < opened)


def _split_tags(paragraph: str) -> tuple[str, str]:
    """A paragraph's leading tag lines (and escapes among them), and the movetext after them."""
    if not (_is_tags(paragraph) or paragraph.startswith(("%", ";"))):
        return "", paragraph
    end = _TAG_LINES.match(paragraph).end()  # type: ignore[union-attr]
    return paragraph[:end], paragraph[end:]


def bad_tag_line(tags: str) -> str:
    """The first line starting with ``[`` that is not a well-formed tag (cut to 60 characters), or ``""``."""
    for line in tags.split("\n"):
        if line.lstrip().startswith("[") and not TAG.match(line):
            return line.strip()[:60]
    return ""


def read_headers(game: Game) -> tuple[dict[str, str], str]:
    """A game's tags as python-chess reads them, and its first malformed tag line (or ``""``)."""
    pairs = TAG.findall(game.tags)
    bad = ""
    if len(_TAG_LINE.findall(game.tags)) != len(pairs):
        bad = bad_tag_line(game.tags)
    return dict(pairs), bad


@dataclass
class Tags:
    """The tags of :data:`tokpack.chess.pgn._tags_compiled.TAGS` of a chunk's games, as spans of ``text``.

    ``plain[g]``: game ``g``'s tag lines were read without doubt, so its spans are the tag
    expression's (:data:`TAG`) reading; otherwise :func:`read_headers` must read them. ``judged[g]``:
    a plain game surely usable, its date from tag ``date_tag[g]``, its ratings ``white_elo[g]``,
    ``black_elo[g]`` and its result ``result[g]`` (an index in
    :data:`tokpack.chess.board.results.RESULTS`; see :func:`tokpack.chess.pgn._tags_compiled.judge_plain`).
    """

    text: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    plain: np.ndarray
    judged: np.ndarray
    date_tag: np.ndarray
    white_elo: np.ndarray
    black_elo: np.ndarray
    result: np.ndarray

    def dates(self) -> list[str | None]:
        """Every judged game's date (its ``UTCDate``, else its ``Date``); None for the others."""
        rows = np.arange(len(self.judged))
        starts, ends = self.starts[rows, self.date_tag].tolist(), self.ends[rows, self.date_tag].tolist()
        text = self.text
        return [_decode(text[s:e]) if judged else None for s, e, judged in zip(starts, ends, self.judged.tolist(), strict=True)]

    def column(self, tag: int) -> list[str | None]:
        """Every game's value of tag number ``tag`` (None where absent; meaningful for plain games)."""
        text = self.text
        return [_decode(text[s:e]) if s >= 0 else None for s, e in zip(self.starts[:, tag].tolist(), self.ends[:, tag].tolist(), strict=True)]


def tag_spans(text: np.ndarray, first: np.ndarray, last: np.ndarray) -> Tags:
    """The tags of every game (game ``g``'s tag lines are ``text[first[g]:last[g]]``), read and
    judged together by compiled code (see :class:`Tags`)."""
    from tokpack.chess.pgn._tags_compiled import TAGS, judge_plain, scan_tags

    n = len(first)
    starts, ends = np.empty((n, len(TAGS)), dtype=np.int64), np.empty((n, len(TAGS)), dtype=np.int64)
    plain, judged = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)
    date_tag, white_elo, black_elo = (np.zeros(n, dtype=np.int64) for _ in range(3))
    result = np.zeros(n, dtype=np.int8)
    if n:
        scan_tags(text, first, last, starts, ends, plain)
        judge_plain(text, starts, ends, plain, judged, date_tag, white_elo, black_elo, result)
    return Tags(text, starts, ends, plain, judged, date_tag, white_elo, black_elo, result)


def read_tags(games: list[Game]) -> Tags:
    """:func:`tag_spans` of games given as strings."""
    texts = [game.tags.encode("utf-8", "surrogateescape") for game in games]
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(text) + 1 for text in texts], out=bounds[1:])
    text = np.frombuffer(b"\n".join(texts) + b"\n", np.uint8)  # each game's tag lines end at a line end
    return tag_spans(text, bounds[:-1], bounds[1:] - 1)


@dataclass
class MainLines:
    """The main lines of many games, read from their movetexts by compiled code (:func:`main_lines`).

    ``resolved[g]``: game ``g``'s moves are ``uci[bounds[g]:bounds[g + 1]]`` (ASCII, UCI moves
    separated by spaces), ``plies[g]`` of them; otherwise python-chess must read the game.
    ``results[g]``: its first main-line result word other than ``*`` (a code of
    :mod:`tokpack.chess.pgn._san_to_uci_compiled`, ``NO_RESULT`` for none); ``asked[g]``: a word of its
    main line was coded in Python, so that result is in doubt. With clocks, ``clocks`` holds the
    resolved games' moves' clocks in seconds (NaN: none), game after game, and ``clock_doubt[g]``:
    Python must read game ``g``'s clocks.
    """

    resolved: np.ndarray
    plies: np.ndarray
    uci: np.ndarray
    bounds: np.ndarray
    results: np.ndarray
    asked: np.ndarray
    clocks: np.ndarray | None
    clock_doubt: np.ndarray | None


def main_lines(text: np.ndarray, first: np.ndarray, last: np.ndarray, codes: SanCodes, *, clocks: bool = False) -> MainLines:
    """The main lines of games whose movetexts are ``text[first[g]:last[g]]`` (UTF-8 bytes).

    One compiled scan drops comments and variations and codes the main-line words
    (:func:`tokpack.chess.pgn._san_to_uci_compiled.scan_movetexts`; a word it leaves to Python is coded by
    ``codes``), and one compiled pass resolves every move on its game's board and writes the UCI
    text (:func:`tokpack.chess.pgn._san_to_uci_compiled.resolve_main_lines`). A game is left to
    python-chess (``resolved`` False) for an unusual, illegal or ambiguous move, and for what the
    scan refuses: a ``;`` comment, an ``%`` escape, a stray ``}`` or ``)``, a variation before the
    first move or never closed, a comment never closed, a NUL or a non-ASCII byte outside comments.
    """
    from tokpack.chess.pgn._san_to_uci_compiled import resolve_main_lines, scan_movetexts

    n = len(first)
    size = int((last - first).sum()) if n else 0
    capacity = size // 2 + n + 1  # a word is a byte and a separator at least
    words = np.empty(capacity, dtype=np.int64)
    bounds = np.empty(n + 1, dtype=np.int64)
    asks = np.empty((capacity, 3), dtype=np.int64)
    refused = np.zeros(n, dtype=np.bool_)
    results = np.empty(n, dtype=np.int8)
    word_clocks = np.empty(capacity if clocks else 0, dtype=np.float64)
    clock_doubt = np.zeros(n if clocks else 0, dtype=np.bool_)
    count, asked_count = scan_movetexts(text, first, last, words, bounds, asks, refused, results, word_clocks, clock_doubt)
    asks = asks[:asked_count]
    for at, s, e in asks.tolist():  # words the scan leaves to Python (few; each distinct one parsed once)
        words[at] = codes[text[s:e].tobytes().decode("ascii")]
    asked = np.zeros(n, dtype=np.bool_)
    asked[np.searchsorted(bounds, asks[:, 0], side="right") - 1] = True
    uci = np.empty(6 * count, dtype=np.uint8)
    uci_bounds = np.empty(n + 1, dtype=np.int64)
    plies = np.empty(n, dtype=np.int64)
    resolved = np.empty(n, dtype=np.bool_)
    ply_clocks = np.empty(count if clocks else 0, dtype=np.float64)
    resolve_main_lines(words, bounds, refused, word_clocks, uci, uci_bounds, plies, resolved, ply_clocks)
    return MainLines(resolved, plies, uci[:uci_bounds[-1]], uci_bounds, results, asked,
                     ply_clocks[:int(plies.sum())] if clocks else None, clock_doubt if clocks else None)


class MainLine(NamedTuple):
    """A game's main line: UCI moves separated by spaces, their number, and each move's clock (seconds)."""

    uci: str
    plies: int
    clocks: list[float | None] | None = None  # None: not asked for, or Python must read them


def resolve_games(movetexts: list[str], codes: SanCodes, *, clocks: bool = False) -> list[MainLine | None]:
    """The main line of each game's movetext (comments, variations and all), or ``None`` where
    python-chess must decide: :func:`main_lines` of movetexts given as strings. With ``clocks``, a
    game whose clocks the scan leaves in doubt gets ``clocks=None``, for :func:`clocks_of` to read.
    """
    texts = [movetext.encode("utf-8", "surrogateescape") for movetext in movetexts]
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(text) for text in texts], out=bounds[1:])
    lines = main_lines(np.frombuffer(b"".join(texts), np.uint8), bounds[:-1], bounds[1:], codes, clocks=clocks)
    text = lines.uci.tobytes().decode("ascii")
    ends = lines.bounds.tolist()
    first_clock = np.concatenate([[0], np.cumsum(lines.plies)]).tolist()
    out: list[MainLine | None] = []
    for g, (ok, plies) in enumerate(zip(lines.resolved.tolist(), lines.plies.tolist(), strict=True)):
        if not ok:
            out.append(None)
            continue
        game_clocks = None
        if lines.clocks is not None and lines.clock_doubt is not None and not lines.clock_doubt[g]:
            game_clocks = [None if value != value else value for value in lines.clocks[first_clock[g]:first_clock[g + 1]].tolist()]
        out.append(MainLine(text[ends[g]:ends[g + 1]], plies, game_clocks))
    return out


def clock_seconds(comment: str) -> float | None:
    """The first ``[%clk h:mm:ss(.f)]`` of a comment in seconds, or None (the one clock rule in Python;
    the compiled scanner's :func:`tokpack.chess.pgn._san_to_uci_compiled.clock_in` is tested equal to it).

    >>> clock_seconds("[%eval 0.2] [%clk 1:02:03.5]"), clock_seconds("no clock")
    (3723.5, None)
    """
    found = _CLOCK.search(comment)
    if not found:
        return None
    hours, minutes, seconds = found.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def clocks_of(movetext: str) -> list[float | None]:
    """Each main-line move's clock (seconds) from the ``[%clk h:mm:ss]`` comment after it."""
    clocks: list[float | None] = []
    for move, comment in _CLOCK_TOKENS.findall(movetext):
        if move:
            clocks.append(None)
        elif comment and clocks and clocks[-1] is None:
            clocks[-1] = clock_seconds(comment)
    return clocks


def clock_movetext(movetext: str) -> str:
    """Movetext without variations (comments kept), for :func:`clocks_of`."""
    text = movetext
    while "(" in text:
        hidden = COMMENT.sub(lambda m: m.group(0).replace("(", " ").replace(")", " "), text)
        reduced = _VARIATION.sub(" ", hidden)
        if reduced == hidden:
            break
        text = reduced
    return text


class Collector(chess.pgn.BaseVisitor):
    """A python-chess visitor that keeps only headers, mainline moves, their clocks, the result it
    reads in the movetext and errors."""

    def begin_game(self) -> None:
        self.headers: dict[str, str] = {}
        self.moves: list[str] = []
        self.clocks: list[float | None] = []
        self.errors: list[str] = []
        self.results: list[str] = []  # main-line result tokens, in order

    def visit_header(self, tag: str, value: str) -> None:
        self.headers[tag] = value

    def begin_variation(self) -> chess.pgn.SkipType:
        return chess.pgn.SKIP

    def visit_move(self, board: chess.Board, move: chess.Move) -> None:
        self.moves.append(move.uci())
        self.clocks.append(None)

    def visit_comment(self, comment: str | list[str]) -> None:
        if not isinstance(comment, str):  # python-chess after 1.11 gives a move's comments as a list
            comment = " ".join(comment)
        if self.clocks and self.clocks[-1] is None:
            self.clocks[-1] = clock_seconds(comment)

    def visit_result(self, result: str) -> None:
        self.results.append(result)

    def handle_error(self, error: Exception) -> None:
        self.errors.append(str(error).splitlines()[0])

    def result(self) -> Collector:
        return self


def python_chess_moves(game: Game) -> tuple[list[str], list[str], list[float | None], str | None]:
    """python-chess's reading of one game: main-line UCI moves, errors, clocks, and the result its
    movetext gives to a game whose ``Result`` tag is ``*`` or missing (:func:`movetext_result`)."""
    # Tag lines lose their leading whitespace, as python-chess reads them since it strips it.
    tags = _TAG_LINE.sub("[", game.tags)
    collector = chess.pgn.read_game(io.StringIO(tags + "\n" + game.movetext), Visitor=Collector)
    if collector is None:
        return [], [], [], None
    return collector.moves, collector.errors, collector.clocks, _first_result(collector.results)


class _Results(chess.pgn.BaseVisitor):
    """The result tokens python-chess's game builder meets: variations are entered, not skipped.

    python-chess reads a result token only outside every variation. After an illegal move inside a
    variation it stops reading that variation but never leaves it (python-chess 1.11.2 does not pop
    the variation's board at its ``)``), so every later result token is read as a move: its game
    keeps ``*``. Skipping variations, as :class:`Collector` does for the main line, would miss that.
    """

    def begin_game(self) -> None:
        self.results: list[str] = []

    def visit_result(self, result: str) -> None:
        self.results.append(result)

    def handle_error(self, error: Exception) -> None:
        pass  # an illegal move: the game builder records it and reads on, as here

    def result(self) -> list[str]:
        return self.results


def game_result(game: Game) -> str | None:
    """The result python-chess's game puts in a ``*`` or missing ``Result`` tag, for a movetext with
    variations (:class:`_Results`; without variations :func:`movetext_result` says the same, faster).

    >>> game_result(Game(0, "", "1. e4 e5 ( 1... e4 ) 1/2-1/2")), game_result(Game(0, "", "1. e4 e5 ( 1... d5 ) 0-1"))
    (None, '0-1')
    """
    tags = _TAG_LINE.sub("[", game.tags)
    tokens = chess.pgn.read_game(io.StringIO(tags + "\n" + game.movetext), Visitor=_Results)
    return _first_result(tokens or [])


def _first_result(tokens: list[str]) -> str | None:
    """What python-chess's game puts in a ``*`` or missing ``Result`` tag: the first main-line result token that is
    not ``*`` (``*`` if all are, None if there is none)."""
    for token in tokens:
        if token != "*":
            return token
    return tokens[0] if tokens else None


def movetext_result(movetext: str) -> str | None:
    """The result a movetext gives, read as python-chess reads it, for a game whose ``Result`` tag is
    ``*`` or missing: its first main-line result token other than ``*``, else ``*`` if it has one,
    else None. For movetext the compiled path reads (no ``;`` or ``%`` comment, variations after
    a move); python-chess's own reading gives the same through :class:`Collector`.

    >>> movetext_result("1. e4 { 1-0 } e5 (1... d5 0-1) * 1/2-1/2"), movetext_result("1. e4")
    ('1/2-1/2', None)
    """
    text = COMMENT.sub(" ", movetext)
    while "(" in text:
        reduced = _VARIATION.sub(" ", text)
        if reduced == text:
            break
        text = reduced
    return _first_result([token for token in (m.group(0) for m in _TOKENS.finditer(text)) if token in RESULTS])


def new_codes() -> SanCodes:
    """An empty word table for :func:`resolve_games`."""
    return SanCodes(_TOKENS, "\x00")
