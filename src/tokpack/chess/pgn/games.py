"""A chunk of PGN read into one Arrow table of its usable games, with why each other game was skipped or filtered.

:func:`chunk_games` puts :mod:`tokpack.chess.pgn.read`'s steps in order over one chunk (no Python
object per game: tags, dates and ratings are read and judged for the whole chunk by compiled code)
and gives a :class:`ChunkGames`: the kept games as one table of :data:`COLUMNS` (plus ``clocks``
with ``clocks=True``), in input order, and each other game's byte offset with its reason
(:data:`SKIP_REASONS`) or the filter (:class:`GameFilter`) that dropped it. The month a game is
filed under is ``UTCDate``'s when it has one, else ``Date``'s; an unknown month (``1984.??.??``)
is ``00``, an unknown year ``0000``. :func:`read_games` gives each game of a file as a
:class:`PgnGame` for callers that want objects; :func:`read_games_strictly` reads a file that
must be whole (the parity fixture) and raises at the first unusable game.
"""

from __future__ import annotations

import gc
import hashlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tokpack.chess.board.results import RESULTS
from tokpack.chess.pgn import _tags_compiled as _tags
from tokpack.chess.pgn import read
from tokpack.chess.pgn._spans import list_array, numbers, string_array
from tokpack.chess.pgn.stream import open_pgn, pgn_chunks
from tokpack.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa


#: Columns of every converted table, in order (``clocks`` follows with ``clocks=True``).
COLUMNS = ("id", "date", "white_elo", "black_elo", "result", "uci", "n_plies", "time_control", "termination",
           "eco", "event")
#: Why a game is skipped, as counted in :attr:`ConversionReport.skipped`.
SKIP_REASONS = ("unreadable_header", "header_only", "no_rating", "unknown_result", "not_standard_start",
                "unreadable_movetext", "illegal_move", "null_move", "no_moves")
#: Lichess's speed classes by estimated duration (base + 40 x increment, seconds): upper bounds.
SPEEDS = {"ultrabullet": 29, "bullet": 179, "blitz": 479, "rapid": 1499, "classical": 10**12}
#: Highest rating read as one (a 24-digit "Elo" is a broken tag, not a rating).
MAX_ELO = 9999

_DATE = re.compile(r"^(\d{4}|\?{4})\.(\d{2}|\?\?)\.(\d{2}|\?\?)$")
_MISSING_RATING = {"", "?", "-", "0"}


@dataclass(frozen=True)
class PgnGame:
    """One readable game: everything a converted row holds."""

    id: str
    date: str
    white_elo: int
    black_elo: int
    result: str
    uci: str
    n_plies: int
    time_control: str | None = None
    termination: str | None = None
    eco: str | None = None
    event: str | None = None
    clocks: tuple[float | None, ...] | None = None

    @property
    def month(self) -> str:
        """``"YYYY-MM"``, with ``0000`` and ``00`` for an unknown year or month."""
        return _month(self.date)


def _month(date: str) -> str:
    """The month of a ``YYYY.MM.DD`` date, ``?`` read as ``0``.

    >>> _month("2016.??.07"), _month("????.??.??")
    ('2016-00', '0000-00')
    """
    return f"{date[:4]}-{date[5:7]}".replace("?", "0")


@dataclass(frozen=True)
class Skipped:
    """A game that cannot be converted: the reason (one of :data:`SKIP_REASONS`) and a detail."""

    reason: str
    detail: str


#: A PGN TimeControl value (the PGN standard, section 9.6): ``?``, ``-``, or ``:``-joined periods
#: ``moves/seconds``, ``seconds``, ``seconds+increment`` or ``*seconds``.
_TIME_CONTROL = re.compile(r"\?|-|(?:\d+/\d+|\d+(?:\+\d+)?|\*\d+)(?::(?:\d+/\d+|\d+(?:\+\d+)?|\*\d+))*")


@dataclass(frozen=True)
class GameFilter:
    """Which readable games to keep; each test that drops a game is counted under its name.

    >>> GameFilter(speeds=("blitz",)).speed_of("180+2"), GameFilter().speed_of("-")
    ('blitz', None)
    """

    min_elo: int | None = None  # both players at least this
    rated_only: bool = False  # Event says "Rated" (Lichess)
    time_controls: tuple[str, ...] = ()  # TimeControl exactly one of these
    speeds: tuple[str, ...] = ()  # Lichess speed class from TimeControl
    terminations: tuple[str, ...] = ()  # Termination one of these (case-insensitive)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.speeds) - set(SPEEDS))
        if unknown:
            raise InputError(f"unknown speed {unknown[0]!r}; use one of {', '.join(SPEEDS)}")
        for control in self.time_controls:  # a typo would otherwise drop every game, silently
            if not _TIME_CONTROL.fullmatch(control):
                raise InputError(f"time_controls: {control!r} is not a PGN TimeControl value",
                                 fix="use values such as 180+2, 300, 40/7200:3600, - or ?")

    @property
    def names(self) -> tuple[str, ...]:
        """The filters in use, in the order they are applied."""
        used = (("min_elo", self.min_elo is not None), ("rated_only", self.rated_only),
                ("time_control", bool(self.time_controls)), ("speed", bool(self.speeds)),
                ("termination", bool(self.terminations)))
        return tuple(name for name, on in used if on)

    @staticmethod
    def speed_of(time_control: str) -> str | None:
        """Lichess's speed class of a ``TimeControl`` tag (``base+increment`` seconds), or None."""
        base, _, increment = time_control.partition("+")
        if not base.isdigit() or not (increment or "0").isdigit():
            return None
        estimate = int(base) + 40 * int(increment or "0")
        return next(name for name, limit in SPEEDS.items() if estimate <= limit)

    def drops(self, white_elo: int, black_elo: int, event: str | None, time_control: str | None,
              termination: str | None) -> str | None:
        """The first filter that drops a game with these ratings and tags (None: absent), or None to keep it.

        >>> GameFilter(min_elo=2000, rated_only=True).drops(2100, 1990, "Rated Blitz game", "180+2", None)
        'min_elo'
        """
        if self.min_elo is not None and min(white_elo, black_elo) < self.min_elo:
            return "min_elo"
        values = {"event": event, "time_control": time_control, "termination": termination}
        for name, tag, test in self._tag_tests():
            if test(values[tag]):
                return name
        return None

    def first_drops(self, white_elo: np.ndarray, black_elo: np.ndarray, tags: dict[str, pa.Array]) -> np.ndarray:
        """:meth:`drops` of many games at once: for each, the index in :attr:`names` of the first
        filter that drops it, or -1. ``tags`` holds the games' ``event``, ``time_control`` and
        ``termination`` columns; each filter on a tag is asked once per distinct value."""
        tests = [np.minimum(white_elo, black_elo) < self.min_elo] if self.min_elo is not None else []
        tests += [_by_value(tags[tag], test) for _, tag, test in self._tag_tests()]
        first = np.full(len(white_elo), -1, dtype=np.int64)
        for number in reversed(range(len(tests))):
            first[tests[number]] = number
        return first

    def _tag_tests(self) -> list[tuple[str, str, Callable[[str | None], bool]]]:
        """The filters in use that read a tag, in order: (name, the tag's column, whether a value drops the game)."""
        terminations = {t.lower() for t in self.terminations}
        tests: list[tuple[str, str, Callable[[str | None], bool]]] = [
            ("rated_only", "event", lambda event: "rated" not in (event or "").lower().split()),
            ("time_control", "time_control", lambda control: (control or "") not in self.time_controls),
            ("speed", "time_control", lambda control: self.speed_of(control or "") not in self.speeds),
            ("termination", "termination", lambda termination: (termination or "").lower() not in terminations)]
        return [test for test in tests if test[0] in self.names]


def _by_value(column: pa.Array, test: Callable[[str | None], bool]) -> np.ndarray:
    """``test`` of each value of a string column, asked once per distinct value (None for null)."""
    encoded = column.dictionary_encode()
    values = encoded.dictionary.to_pylist()
    verdicts = np.array([test(value) for value in [*values, None]], dtype=np.bool_)
    return verdicts[np.asarray(encoded.indices.fill_null(len(values)), dtype=np.int64)]


@dataclass(frozen=True)
class ReadOptions:
    """What :func:`chunk_games` keeps besides the moves (a small record, sent to worker processes)."""

    filters: GameFilter = GameFilter()
    clocks: bool = False


#: One game read: its byte offset, and the game, why it was skipped, or the filter that dropped it.
Entry = tuple[int, "PgnGame | Skipped | str"]


@dataclass
class ChunkGames:
    """The games of one chunk: the readable ones as one table, in input order, and what became of the others."""

    table: pa.Table  # the kept games: COLUMNS, then ``clocks`` if asked
    offsets: np.ndarray  # byte offset of each kept game
    months: np.ndarray  # "YYYY-MM" of each kept game (numpy strings)
    skipped: list[tuple[int, Skipped]]  # (byte offset, why), in input order
    filtered: list[tuple[int, str]]  # (byte offset, the filter that dropped it), in input order

    @property
    def games_read(self) -> int:
        """Games in the chunk: kept, skipped and filtered."""
        return len(self.offsets) + len(self.skipped) + len(self.filtered)

    def entries(self) -> list[Entry]:
        """Every game as ``(byte offset, PgnGame | Skipped | filter name)``, in input order."""
        kept = [PgnGame(**row) for row in self.table.to_pylist()]
        if "clocks" in self.table.column_names:
            kept = [replace(game, clocks=tuple(game.clocks or ())) for game in kept]
        merged: list[Entry] = sorted([*zip(self.offsets.tolist(), kept, strict=True), *self.skipped, *self.filtered],
                                     key=lambda entry: entry[0])
        return merged


def read_chunk(data: bytes, offset: int, options: ReadOptions = ReadOptions()) -> list[Entry]:
    """Every game of one chunk of PGN (as :func:`tokpack.chess.pgn.stream.pgn_chunks` cuts them), in order."""
    return chunk_games(data, offset, options).entries()


def chunk_games(data: bytes, offset: int, options: ReadOptions = ReadOptions()) -> ChunkGames:
    """The games of one chunk of PGN (as :func:`tokpack.chess.pgn.stream.pgn_chunks` cuts them).

    Tags are read and judged (and filters applied) before moves are read, for all games at once
    by compiled code (:func:`tokpack.chess.pgn.read.read_tags`); a game it cannot vouch for is read
    and judged alone by :func:`judge_headers`. The moves of the games left are resolved together,
    and python-chess reads those the fast path does not take on. Python's cycle collector is
    paused meanwhile: a chunk makes tens of thousands of small objects and no cycles, and the
    collector's passes over everything already kept would cost a share of every chunk's time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _chunk_games(data, offset, options)
    finally:
        if enabled:
            gc.enable()


#: Tag columns read for every game: the kept header columns and what the game id is made of.
_KEPT_TAGS = {"time_control": _tags.TIME_CONTROL, "termination": _tags.TERMINATION, "eco": _tags.ECO,
              "event": _tags.EVENT}
_ID_TAGS = (_tags.EVENT, _tags.SITE, _tags.DATE, _tags.ROUND, _tags.WHITE, _tags.BLACK, _tags.RESULT)


def _chunk_games(data: bytes, offset: int, options: ReadOptions) -> ChunkGames:
    import pyarrow as pa

    cut = read.cut_chunk(data, offset)
    headers, skipped = _judge(cut, read.tag_spans(cut.text, cut.tag_start, cut.tag_end))
    usable = np.flatnonzero(headers.usable)
    filtered: list[tuple[int, str]] = []
    if options.filters.names:
        usable, filtered = _filter(options.filters, cut, headers, usable)
    moves = _read_moves(cut, usable, options.clocks, skipped)
    kept = usable[moves.kept]
    columns = {
        "id": _game_ids(headers, kept, moves),
        "date": headers.strings(kept, _DATE_COLUMN),
        "white_elo": headers.white_elo[kept].astype(np.int32),
        "black_elo": headers.black_elo[kept].astype(np.int32),
        "result": _results(cut, headers, kept, moves),
        "uci": moves.uci,
        "n_plies": moves.plies.astype(np.int32),
        **{name: headers.strings(kept, tag) for name, tag in _KEPT_TAGS.items()},
    }
    if options.clocks:
        columns["clocks"] = moves.clocks
    skipped.sort(key=lambda entry: entry[0])
    schema = table_schema(options.clocks)
    table = pa.Table.from_arrays([numbers(column) if isinstance(column, np.ndarray) else column
                                  for column in columns.values()], schema=schema)
    return ChunkGames(table, cut.offsets[kept], headers.months(kept), skipped, filtered)


@cache
def table_schema(clocks: bool) -> pa.Schema:
    """Every converted table's schema (see :func:`_table`)."""
    import pyarrow as pa

    return pa.schema([(name, _column_type(name)) for name in (*COLUMNS, *(["clocks"] if clocks else []))])


def _column_type(name: str) -> pa.DataType:
    """The Arrow type of the converted tables' column ``name``."""
    import pyarrow as pa

    if name == "clocks":
        return pa.list_(pa.float64())
    return pa.int32() if name in ("white_elo", "black_elo", "n_plies") else pa.string()


#: The column of :class:`_Headers` after the tags of :data:`tokpack.chess.pgn._tags_compiled.TAGS`:
#: the date a game is filed under (its ``UTCDate``, else its ``Date``).
_DATE_COLUMN = len(_tags.TAGS)
_STAR = RESULTS.index("*")
#: A movetext's first result word other than ``*``, by :mod:`tokpack.chess.pgn._san_to_uci_compiled`'s
#: code (NO_RESULT, WIN, LOSS, DRAW), as an index in RESULTS.
_RESULT_OF_WORD = np.array([_STAR, RESULTS.index("1-0"), RESULTS.index("0-1"), RESULTS.index("1/2-1/2")])
#: RESULTS spelled one after another, result ``r`` at ``_RESULT_BYTES[_RESULT_BOUNDS[r]:_RESULT_BOUNDS[r + 1]]``.
_RESULT_BYTES = np.frombuffer("".join(RESULTS).encode("ascii"), np.uint8)
_RESULT_BOUNDS = np.cumsum([0, *(len(result) for result in RESULTS)])


@dataclass
class _Headers:
    """A chunk's games' tag values, as spans of ``text`` (the chunk's bytes, then the values of the
    games judged in Python), their dates, ratings and results, and which games are usable.

    ``starts[g, t]``/``ends[g, t]``: game ``g``'s value of tag ``TAGS[t]`` (-1: absent), and in
    column :data:`_DATE_COLUMN` its date; ``result[g]``: an index in RESULTS.
    """

    text: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    white_elo: np.ndarray
    black_elo: np.ndarray
    result: np.ndarray
    usable: np.ndarray
    in_python: np.ndarray  # judged by judge_headers: its values follow the chunk's bytes in text

    def strings(self, games: np.ndarray, column: int) -> pa.Array:
        """Column ``column`` of games ``games`` as an Arrow string array (null where absent)."""
        return string_array(self.text, self.starts[games, column], self.ends[games, column])

    def months(self, games: np.ndarray) -> np.ndarray:
        """``"YYYY-MM"`` of each of ``games`` (see :func:`_month`), as a numpy string array."""
        starts = self.starts[games, _DATE_COLUMN]
        spelled = self.text[starts[:, None] + np.arange(7)] if len(games) else np.empty((0, 7), dtype=np.uint8)
        spelled[:, 4] = ord("-")
        spelled[spelled == ord("?")] = ord("0")
        months = spelled.view("S7").ravel().astype("U7")
        for row in np.flatnonzero(self.in_python[games]).tolist():  # a date judged in Python may be any digits
            g = games[row]
            months[row] = _month(self.text[self.starts[g, _DATE_COLUMN]:self.ends[g, _DATE_COLUMN]].tobytes().decode(
                "utf-8", "surrogateescape"))
        return months

    def value(self, g: int, column: int) -> bytes:
        """Game ``g``'s value in ``column`` as bytes (``b""`` where absent)."""
        s = self.starts[g, column]
        return self.text[s:self.ends[g, column]].tobytes() if s >= 0 else b""


def _judge(cut: read.Cut, tags: read.Tags) -> tuple[_Headers, list[tuple[int, Skipped]]]:
    """Every game's headers, and the reasons of the games unusable by their cut or headers.

    The compiled judge takes most games (:attr:`tokpack.chess.pgn.read.Tags.judged`); the others are
    read by :func:`tokpack.chess.pgn.read.read_headers` and judged by :func:`judge_headers`, and the
    values of those usable are appended to the chunk's bytes.
    """
    n = len(cut)
    starts = np.empty((n, _DATE_COLUMN + 1), dtype=np.int64)
    ends = np.empty_like(starts)
    starts[:, :_DATE_COLUMN], ends[:, :_DATE_COLUMN] = tags.starts, tags.ends
    games = np.arange(n)
    starts[:, _DATE_COLUMN], ends[:, _DATE_COLUMN] = tags.starts[games, tags.date_tag], tags.ends[games, tags.date_tag]
    white_elo, black_elo, result = tags.white_elo.copy(), tags.black_elo.copy(), tags.result.astype(np.int64)
    problems = np.flatnonzero(cut.problems)
    skipped = [(int(cut.offsets[g]), Skipped(*cut.problem(g))) for g in problems.tolist()]  # type: ignore[misc]
    usable, in_python = tags.judged & (cut.problems == 0), np.zeros(n, dtype=np.bool_)
    appended = bytearray()
    for g in np.flatnonzero(~tags.judged & (cut.problems == 0)).tolist():  # games the compiled judge leaves to Python (few)
        game = cut.game(g)
        found, bad = read.read_headers(game)
        verdict = judge_headers(found, bad)
        if isinstance(verdict, Skipped):
            skipped.append((game.offset, verdict))
            continue
        usable[g] = in_python[g] = True
        date, white_elo[g], black_elo[g], outcome = verdict
        result[g] = RESULTS.index(outcome)
        for column, value in enumerate([*(found.get(name) for name in _tags.TAGS), date]):
            if value is None:
                starts[g, column] = ends[g, column] = -1
                continue
            starts[g, column] = len(cut.text) + len(appended)
            appended += value.encode("utf-8", "surrogateescape")
            ends[g, column] = len(cut.text) + len(appended)
    text = np.concatenate([cut.text, np.frombuffer(bytes(appended), np.uint8)]) if appended else cut.text
    return _Headers(text, starts, ends, white_elo, black_elo, result, usable, in_python), skipped


def _filter(filters: GameFilter, cut: read.Cut, headers: _Headers,
            usable: np.ndarray) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """The usable games ``filters`` keep, and the byte offset and filter of each one dropped."""
    tags = {name: headers.strings(usable, tag) for name, tag in
            (("event", _tags.EVENT), ("time_control", _tags.TIME_CONTROL), ("termination", _tags.TERMINATION))}
    first = filters.first_drops(headers.white_elo[usable], headers.black_elo[usable], tags)
    dropped = np.flatnonzero(first >= 0)
    names = filters.names
    filtered = [(offset, names[number]) for offset, number in
                zip(cut.offsets[usable[dropped]].tolist(), first[dropped].tolist(), strict=True)]
    return usable[first < 0], filtered


@dataclass
class _Moves:
    """The moves of a chunk's usable games: which are kept, and the kept ones' moves as columns.

    ``lines`` is the compiled reading (one entry per usable game, in order); ``their_results``
    holds, by game number, the result python-chess read in the movetext of each game it read.
    """

    kept: np.ndarray  # per usable game
    uci: pa.Array  # per kept game
    plies: np.ndarray
    clocks: pa.Array | None
    lines: read.MainLines
    their_results: dict[int, str | None]


def _read_moves(cut: read.Cut, usable: np.ndarray, clocks: bool, skipped: list[tuple[int, Skipped]]) -> _Moves:
    """The main lines of the usable games: resolved together by compiled code, and those it leaves
    read by python-chess; the reasons of the games whose moves cannot be used go to ``skipped``."""
    lines = read.main_lines(cut.text, cut.move_start[usable], cut.move_end[usable], _CODES, clocks=clocks)
    kept = lines.resolved & (lines.plies > 0)
    skipped += [(offset, Skipped("no_moves", "no moves")) for offset in
                cut.offsets[usable[lines.resolved & (lines.plies == 0)]].tolist()]
    uci_starts, uci_ends, plies = lines.bounds[:-1].copy(), lines.bounds[1:].copy(), lines.plies.copy()
    their_moves = bytearray()
    their_results: dict[int, str | None] = {}
    their_clocks: dict[int, list[float | None]] = {}  # by usable game: clocks read in Python
    for i in np.flatnonzero(~lines.resolved).tolist():  # python-chess reads what the compiled path leaves (few)
        game = cut.game(usable[i])
        found, errors, game_clocks, their_results[usable[i]] = read.python_chess_moves(game)
        problem = _moves_problem(found, errors)
        if problem is not None:
            skipped.append((game.offset, problem))
            continue
        kept[i] = True
        uci_starts[i] = len(lines.uci) + len(their_moves)
        their_moves += " ".join(found).encode("ascii")
        uci_ends[i], plies[i] = len(lines.uci) + len(their_moves), len(found)
        their_clocks[i] = game_clocks
    rows = np.flatnonzero(kept)
    source = np.concatenate([lines.uci, np.frombuffer(bytes(their_moves), np.uint8)]) if their_moves else lines.uci
    column = None
    if clocks:
        assert lines.clock_doubt is not None
        for i in np.flatnonzero(kept & lines.resolved & lines.clock_doubt).tolist():  # clocks the scan could not vouch for
            their_clocks[i] = read.clocks_of(read.clock_movetext(cut.game(usable[i]).movetext))
        column = _clocks_column(lines, plies, rows, their_clocks)
    return _Moves(kept, string_array(source, uci_starts[rows], uci_ends[rows]), plies[rows], column, lines, their_results)


def _clocks_column(lines: read.MainLines, plies: np.ndarray, rows: np.ndarray,
                   their_clocks: dict[int, list[float | None]]) -> pa.Array:
    """Each kept game's moves' clocks (``rows``: the kept usable games), as a list column."""
    assert lines.clocks is not None
    starts = np.zeros(len(plies), dtype=np.int64)
    np.cumsum(lines.plies[:-1], out=starts[1:])  # where each resolved game's clocks start
    lengths = plies.copy()
    appended: list[float] = []
    for i, game_clocks in their_clocks.items():
        values = [math.nan if value is None else value for value in game_clocks[:plies[i]]]
        starts[i], lengths[i] = len(lines.clocks) + len(appended), len(values)
        appended += values
    everything = np.concatenate([lines.clocks, np.array(appended, dtype=np.float64)]) if appended else lines.clocks
    return list_array(everything, starts[rows], lengths[rows])


_CODES = read.new_codes()  # per process: distinct SAN tokens are few, each parsed once


def _results(cut: read.Cut, headers: _Headers, kept: np.ndarray, moves: _Moves) -> pa.Array:
    """Each kept game's result: its ``Result`` tag, or, where that is ``*`` or missing, the result
    its movetext gives, as python-chess's game reads it (``*`` if none).

    That is (:func:`_movetext_result`, in Python) ``*`` for a movetext without ``1-0``, ``0-1``
    or ``1/2-1/2`` anywhere; else for one with a ``(`` anywhere, python-chess's reading entering
    the variations (:func:`tokpack.chess.pgn.read.game_result`), as its game builder does (an
    illegal move inside one keeps it there, reading no result after); else the result
    python-chess met in a game it read, or the first main-line result word other than ``*``
    (:func:`tokpack.chess.pgn.read.movetext_result`). For a game the compiled path resolved with
    every word coded by it and no ``(``, that word is the scan's
    (:attr:`tokpack.chess.pgn.read.MainLines.results`), and the rest is not asked.
    """

    from tokpack.chess.pgn._san_to_uci_compiled import variations_and_results

    result = headers.result[kept]
    star = np.flatnonzero(result == _STAR)
    if len(star):
        games = kept[star]
        line = np.flatnonzero(moves.kept)[star]  # each one's place among the usable games
        parenthesis, result_text = np.empty(len(star), dtype=np.bool_), np.empty(len(star), dtype=np.bool_)
        variations_and_results(cut.text, cut.move_start[games], cut.move_end[games], parenthesis, result_text)
        from_scan = moves.lines.resolved[line] & ~moves.lines.asked[line] & ~parenthesis
        result[star[from_scan]] = _RESULT_OF_WORD[moves.lines.results[line[from_scan]]]
        for row in np.flatnonzero(~from_scan & (result_text | ~parenthesis)).tolist():  # read in Python (few)
            g = int(games[row])
            found = _movetext_result(cut.game(g), moves.their_results.get(g), g in moves.their_results)
            result[star[row]] = RESULTS.index(found)
    return string_array(_RESULT_BYTES, _RESULT_BOUNDS[result], _RESULT_BOUNDS[result + 1])


def _movetext_result(game: read.Game, theirs: str | None, read_by_them: bool) -> str:
    """The result a game whose ``Result`` tag is ``*`` or missing is given (see :func:`_results`);
    ``theirs``: the result python-chess met, if ``read_by_them``."""
    movetext = game.movetext
    if not ("1-0" in movetext or "0-1" in movetext or "1/2-1/2" in movetext):  # surely "*": no regex
        return "*"
    if "(" in movetext:
        return read.game_result(game) or "*"
    if read_by_them:
        return theirs or "*"
    return read.movetext_result(movetext) or "*"


def _game_ids(headers: _Headers, kept: np.ndarray, moves: _Moves) -> pa.Array:
    """Each kept game's id: the site's own when the Site tag is a game URL (the last part of its
    path, :func:`tokpack.chess.pgn._tags_compiled.site_ids`), else 16 hex digits of a hash of who,
    where, when and what (its :data:`_ID_TAGS` and its moves)."""
    import pyarrow.compute as pc

    from tokpack.chess.pgn._tags_compiled import site_ids

    id_start, id_end = np.empty(len(kept), dtype=np.int64), np.empty(len(kept), dtype=np.int64)
    site_ids(headers.text, headers.starts[kept, _tags.SITE], headers.ends[kept, _tags.SITE], id_start, id_end)
    ids = string_array(headers.text, id_start, id_end)
    hashed = np.flatnonzero(id_start < 0)
    if not len(hashed):
        return ids
    digests = []
    for row, line in zip(hashed.tolist(), moves.uci.take(numbers(hashed)).to_pylist(), strict=True):
        g = int(kept[row])
        key = b"\n".join([*(headers.value(g, tag) for tag in _ID_TAGS), line.encode("ascii")])
        digests.append(hashlib.sha256(key).hexdigest()[:16])
    starts = np.full(len(kept), -1, dtype=np.int64)  # null where the site gave the id
    starts[hashed] = 16 * np.arange(len(hashed))
    return pc.coalesce(ids, string_array(np.frombuffer("".join(digests).encode("ascii"), np.uint8), starts, starts + 16))


def judge_headers(headers: dict[str, str], bad_header: str) -> Skipped | tuple[str, int, int, str]:
    """``(date, white_elo, black_elo, result)``, or the first reason in :data:`SKIP_REASONS` order not to use the game.

    >>> judge_headers({"UTCDate": "2016.13.45", "Date": "2016.01.01"}, "")
    Skipped(reason='unreadable_header', detail="UTCDate '2016.13.45' is not a calendar date")
    >>> judge_headers({"Date": "2016.01.01", "WhiteElo": "?"}, "")
    Skipped(reason='no_rating', detail="WhiteElo '?'")
    >>> judge_headers({"Date": "2016.01.01", "WhiteElo": "1500"}, "")
    Skipped(reason='no_rating', detail='no BlackElo tag')
    """
    if bad_header:
        return Skipped("unreadable_header", f"malformed tag line {bad_header!r}")
    tag = "UTCDate" if "UTCDate" in headers else "Date"
    date = headers.get(tag, "????.??.??")
    match = _DATE.match(date)
    if not match:
        return Skipped("unreadable_header", f"{tag} {date!r} is not YYYY.MM.DD")
    _, month, day = match.groups()
    if (month != "??" and not 1 <= int(month) <= 12) or (day != "??" and not 1 <= int(day) <= 31):
        return Skipped("unreadable_header", f"{tag} {date!r} is not a calendar date")
    ratings = []
    for name in ("WhiteElo", "BlackElo"):
        if name not in headers:  # said as absent: a quoted '' would read as a tag there but empty
            return Skipped("no_rating", f"no {name} tag")
        value = headers[name].strip()
        if value in _MISSING_RATING:
            return Skipped("no_rating", f"{name} {headers[name]!r}")
        if not (value.isascii() and value.isdigit()):
            return Skipped("unreadable_header", f"{name} {value!r} is not a number")
        if len(value) > 4 or int(value) > MAX_ELO:
            return Skipped("unreadable_header", f"{name} {value[:30]!r} is not a rating (at most {MAX_ELO})")
        ratings.append(int(value))
    result = headers.get("Result", "*")  # python-chess's game has "*" then, or what the movetext says
    if result not in RESULTS:
        return Skipped("unknown_result", f"Result {result!r}")
    variant = headers.get("Variant", "standard").lower()
    if "FEN" in headers or headers.get("SetUp") == "1" or variant not in ("standard", "chess", "normal"):
        return Skipped("not_standard_start", f"Variant {variant!r}, FEN {headers.get('FEN', '-')!r}")
    return date, ratings[0], ratings[1], result


def _moves_problem(moves: list[str], errors: list[str]) -> Skipped | None:
    """Why python-chess's reading of a game's moves cannot be used, or None."""
    if errors:
        return Skipped("illegal_move", errors[0])
    if "0000" in moves:
        return Skipped("null_move", f"ply {moves.index('0000') + 1} is a null move (--)")
    if not moves:
        return Skipped("no_moves", "no moves")
    return None


def read_games(path: Path | str, options: ReadOptions = ReadOptions()) -> Iterator[tuple[int, PgnGame | Skipped]]:
    """Every game of a PGN file (or ``-``) with the byte offset where it starts, or why it cannot be used.

    Raises:
        InputError: the file cannot be opened or decompressed.
    """
    stream, _ = open_pgn(path)
    with stream:
        for offset, data in pgn_chunks(stream, str(path)):
            for entry in read_chunk(data, offset, options):
                if not isinstance(entry[1], str):
                    yield entry  # type: ignore[misc]


def read_games_strictly(path: Path) -> list[PgnGame]:
    """Every game of a PGN file that must be whole (the parity fixture).

    Raises:
        InputError: naming the file, the byte offset and the reason of the first unusable game,
            or an empty file.
    """
    games: list[PgnGame] = []
    for offset, game in read_games(path):
        if isinstance(game, Skipped):
            raise InputError(f"{path}@{offset}: {game.reason}: {game.detail}")
        games.append(game)
    if not games:
        raise InputError("no games", where=path)
    return games


def games_table(games: list[PgnGame], clocks: bool = False) -> pa.Table:
    """The converted table of ``games`` (columns :data:`COLUMNS`, then ``clocks`` if asked), for callers
    holding :class:`PgnGame` objects (the converter builds its tables column-wise)."""
    columns: dict[str, list[Any]] = {name: [getattr(game, name) for game in games] for name in COLUMNS}
    if clocks:
        columns["clocks"] = [None if game.clocks is None else list(game.clocks) for game in games]
    return _table(columns, clocks)


def _table(columns: dict[str, list[Any]], clocks: bool) -> pa.Table:
    """Columns :data:`COLUMNS` (and ``clocks``) as the converted table, with the types it always has."""
    import pyarrow as pa

    arrays = {name: pa.array(columns[name], _column_type(name)) for name in COLUMNS}
    if clocks:
        arrays["clocks"] = pa.array(columns["clocks"], _column_type("clocks"))
    return pa.table(arrays)
