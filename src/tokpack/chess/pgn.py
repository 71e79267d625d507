"""PGN files to monthly parquet tables of UCI games, streaming, with a report of what was skipped.

``convert_pgn(pgn_files, out)`` writes ``out/year=YYYY/month=MM/games.parquet`` with one row per
game (columns :data:`COLUMNS`) and ``out/convert-report.json`` (a :class:`ConversionReport`).
A date's unknown month (``1984.??.??``) files the game under ``month=00``, an unknown year
under ``year=0000``. Rows keep the input order (file by file, game by game).

A bulk conversion never stops on a bad game: it skips it and counts why (:data:`SKIP_REASONS`),
keeping the file and byte offset of the first game skipped for each reason. Reading a file that
must be whole (the parity fixture) uses :func:`read_games_strictly`, which raises instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import chess.pgn
from pydantic import Field

from tokpack._atomic import building
from tokpack._schema import Record, write_record
from tokpack.chess.uci import RESULTS
from tokpack.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

#: Columns of every converted table, in order.
COLUMNS = ("id", "date", "white_elo", "black_elo", "result", "uci", "n_plies")
#: Why a game is skipped, as counted in :attr:`ConversionReport.skipped`.
SKIP_REASONS = ("unreadable_header", "no_rating", "unknown_result", "not_standard_start", "illegal_move",
                "null_move", "no_moves")
REPORT_FILE = "convert-report.json"
GAMES_FILE = "games.parquet"

_TAG = re.compile(r'^\[([A-Za-z0-9][A-Za-z0-9_+#=:-]*)\s+"(.*)"\]\s*$')
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

    @property
    def month(self) -> str:
        """``"YYYY-MM"``, with ``0000`` and ``00`` for an unknown year or month."""
        year, month, _ = self.date.split(".")
        return f"{year.replace('?', '0')}-{month.replace('?', '0')}"


@dataclass(frozen=True)
class Skipped:
    """A game that cannot be converted: the reason (one of :data:`SKIP_REASONS`) and a detail."""

    reason: str
    detail: str


class ConversionReport(Record):
    """``convert-report.json``: what a conversion read, wrote and skipped."""

    schema_: Literal["tokpack.chess.convert.v1"] = Field(default="tokpack.chess.convert.v1", alias="schema")
    inputs: list[str]
    games_read: int
    games_written: int
    skipped: dict[str, int]
    first_skipped: dict[str, str] = Field(description="reason -> 'FILE@BYTE: detail' of its first game")
    months: dict[str, int]


def read_games(path: Path) -> Iterator[tuple[int, PgnGame | Skipped]]:
    """Every game of a PGN file with the byte offset where it starts, or why it cannot be used.

    Raises:
        ValueError: the file cannot be opened.
    """
    try:
        handle = open(path, encoding="utf-8", errors="surrogateescape", newline="")
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from None
    with handle:
        lines = _Lines(handle)
        while True:
            lines.next_game()
            visitor = chess.pgn.read_game(lines, Visitor=_Collector)  # type: ignore[arg-type,call-overload]
            if visitor is None:
                return
            yield lines.game_offset, visitor.judge(lines.bad_header)


def read_games_strictly(path: Path) -> list[PgnGame]:
    """Every game of a PGN file that must be whole (the parity fixture).

    Raises:
        ValueError: naming the file, the byte offset and the reason of the first unusable game,
            or an empty file.
    """
    games: list[PgnGame] = []
    for offset, game in read_games(path):
        if isinstance(game, Skipped):
            raise InputError(f"{path}@{offset}: {game.reason}: {game.detail}")
        games.append(game)
    if not games:
        raise InputError(f"{path}: no games")
    return games


def month_parquet(root: Path, month: str) -> Path:
    """Where :func:`convert_pgn` puts month ``"YYYY-MM"`` under ``root``.

    Raises:
        ValueError: ``month`` is not ``YYYY-MM``.

    >>> month_parquet(Path("games"), "2016-03").as_posix()
    'games/year=2016/month=03/games.parquet'
    """
    if not re.fullmatch(r"\d{4}-\d{2}", month):
        raise InputError(f"month {month!r} is not YYYY-MM")
    year, number = month.split("-")
    return Path(root) / f"year={year}" / f"month={number}" / GAMES_FILE


def convert_pgn(pgn_files: list[Path], out: Path, *, flush_games: int = 100_000,
                progress: Callable[[int, int], None] | None = None) -> ConversionReport:
    """Convert PGN files into ``out/year=YYYY/month=MM/games.parquet`` and a report.

    Memory holds at most ``flush_games`` games: beyond that, the buffered games are written to
    part files, which are joined month by month at the end. ``out`` appears complete or not at
    all. ``progress(bytes_done, bytes_total)`` is called as the input is read.

    Raises:
        ValueError: ``out`` exists, or an input file cannot be read.
    """
    out = Path(out)
    if out.exists():
        raise InputError(f"{out}: already exists; a conversion never writes into an old one")
    sizes = []
    for path in pgn_files:
        if not Path(path).is_file():
            raise InputError(f"{path}: not a file")
        sizes.append(Path(path).stat().st_size)
    total, done_before = sum(sizes), 0
    skipped = {reason: 0 for reason in SKIP_REASONS}
    first_skipped: dict[str, str] = {}
    months: dict[str, int] = {}
    read = 0
    with building(out) as staging:
        parts = _MonthParts(staging, flush_games)
        for path, size in zip(pgn_files, sizes, strict=True):
            for offset, game in read_games(Path(path)):
                read += 1
                if isinstance(game, Skipped):
                    skipped[game.reason] += 1
                    first_skipped.setdefault(game.reason, f"{Path(path).name}@{offset}: {game.detail}")
                else:
                    parts.add(game)
                    months[game.month] = months.get(game.month, 0) + 1
                if progress is not None and read % 256 == 0:
                    progress(done_before + offset, total)
            done_before += size
        parts.finish()
        report = ConversionReport(inputs=[Path(p).name for p in pgn_files], games_read=read,
                                  games_written=sum(months.values()), skipped=skipped,
                                  first_skipped=first_skipped, months=dict(sorted(months.items())))
        write_record(report, staging / REPORT_FILE)
    if progress is not None:
        progress(total, total)
    return report


def games_table(games: list[PgnGame]) -> pa.Table:
    """The converted table of ``games`` (columns :data:`COLUMNS`)."""
    import pyarrow as pa

    return pa.table({
        "id": pa.array([g.id for g in games], pa.string()),
        "date": pa.array([g.date for g in games], pa.string()),
        "white_elo": pa.array([g.white_elo for g in games], pa.int32()),
        "black_elo": pa.array([g.black_elo for g in games], pa.int32()),
        "result": pa.array([g.result for g in games], pa.string()),
        "uci": pa.array([g.uci for g in games], pa.string()),
        "n_plies": pa.array([g.n_plies for g in games], pa.int32()),
    })


class _MonthParts:
    """Buffers games by month; spills every month's buffer to a numbered part file when full."""

    def __init__(self, root: Path, flush_games: int) -> None:
        self.root, self.flush_games = root, max(1, flush_games)
        self.buffers: dict[str, list[PgnGame]] = {}
        self.parts: dict[str, list[Path]] = {}
        self.buffered = 0

    def add(self, game: PgnGame) -> None:
        self.buffers.setdefault(game.month, []).append(game)
        self.buffered += 1
        if self.buffered >= self.flush_games:
            self._spill()

    def _spill(self) -> None:
        import pyarrow.parquet as pq

        for month, games in self.buffers.items():
            directory = month_parquet(self.root, month).parent
            directory.mkdir(parents=True, exist_ok=True)
            part = directory / f".part-{len(self.parts.get(month, [])):05d}.parquet"
            pq.write_table(games_table(games), part, compression="zstd")
            self.parts.setdefault(month, []).append(part)
        self.buffers, self.buffered = {}, 0

    def finish(self) -> None:
        """Spill what is left, then make each month's parts one ``games.parquet``."""
        import pyarrow.parquet as pq

        self._spill()
        for month, parts in self.parts.items():
            target = month_parquet(self.root, month)
            if len(parts) == 1:
                parts[0].rename(target)
                continue
            with pq.ParquetWriter(target, pq.read_schema(parts[0]), compression="zstd") as writer:
                for part in parts:  # one part in memory at a time
                    writer.write_table(pq.read_table(part))
                    part.unlink()


class _Lines:
    """A text handle for python-chess that also knows byte offsets and spots malformed tags."""

    def __init__(self, handle) -> None:  # type: ignore[no-untyped-def]
        self.handle = handle
        self.offset = 0
        self.next_game()

    def next_game(self) -> None:
        self.game_offset = -1
        self.in_headers = True
        self.bad_header = ""

    def readline(self) -> str:
        line = self.handle.readline()
        if self.game_offset < 0 and line and not line.isspace():
            self.game_offset = self.offset
        self.offset += len(line.encode("utf-8", "surrogateescape"))
        if self.in_headers and line and not line.isspace():
            if line.startswith("["):
                if not _TAG.match(line) and not self.bad_header:
                    self.bad_header = line.strip()[:60]
            elif not line.startswith(("%", ";")):
                self.in_headers = False
        return line


class _Collector(chess.pgn.BaseVisitor):  # type: ignore[type-arg]
    """A python-chess visitor that keeps only headers, mainline moves and errors (no game tree)."""

    def begin_game(self) -> None:
        self.headers: dict[str, str] = {}
        self.moves: list[str] = []
        self.errors: list[str] = []

    def visit_header(self, tag: str, value: str) -> None:
        self.headers[tag] = value

    def begin_variation(self):  # type: ignore[no-untyped-def]
        return chess.pgn.SKIP

    def visit_move(self, board, move) -> None:  # type: ignore[no-untyped-def]
        self.moves.append(move.uci())

    def handle_error(self, error: Exception) -> None:
        self.errors.append(str(error).splitlines()[0])

    def result(self) -> _Collector:
        return self

    def judge(self, bad_header: str) -> PgnGame | Skipped:
        """The game, or the first reason (in :data:`SKIP_REASONS` order) it cannot be used."""
        headers = self.headers
        if bad_header:
            return Skipped("unreadable_header", f"malformed tag line {bad_header!r}")
        date = headers.get("Date", "????.??.??")
        if not _DATE.match(date):
            return Skipped("unreadable_header", f"Date {date!r} is not YYYY.MM.DD")
        ratings = []
        for tag in ("WhiteElo", "BlackElo"):
            value = headers.get(tag, "").strip()
            if value in _MISSING_RATING:
                return Skipped("no_rating", f"{tag} {value!r}")
            if not value.isdigit():
                return Skipped("unreadable_header", f"{tag} {value!r} is not a number")
            ratings.append(int(value))
        result = headers.get("Result", "")
        if result not in RESULTS:
            return Skipped("unknown_result", f"Result {result!r}")
        variant = headers.get("Variant", "standard").lower()
        if "FEN" in headers or headers.get("SetUp") == "1" or variant not in ("standard", "chess", "normal"):
            return Skipped("not_standard_start", f"Variant {variant!r}, FEN {headers.get('FEN', '-')!r}")
        if self.errors:
            return Skipped("illegal_move", self.errors[0])
        if "0000" in self.moves:
            return Skipped("null_move", f"ply {self.moves.index('0000') + 1} is a null move (--)")
        if not self.moves:
            return Skipped("no_moves", "no moves")
        uci = " ".join(self.moves)
        return PgnGame(id=_game_id(headers, uci), date=date, white_elo=ratings[0], black_elo=ratings[1],
                       result=result, uci=uci, n_plies=len(self.moves))


def _game_id(headers: dict[str, str], uci: str) -> str:
    """The site's own id when the Site tag is a game URL, else a hash of who, where, when and what.

    >>> _game_id({"Site": "https://lichess.org/AbCd1234"}, "e2e4")
    'AbCd1234'
    """
    site = headers.get("Site", "")
    if site.startswith(("https://", "http://")) and site.rstrip("/").rsplit("/", 1)[-1]:
        return site.rstrip("/").rsplit("/", 1)[-1]
    key = "\n".join([*(headers.get(t, "") for t in ("Event", "Site", "Date", "Round", "White", "Black", "Result")), uci])
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
