"""PGN files (or Parquet games) to monthly parquet tables of UCI games, streaming, with a report of what was skipped.

``convert_pgn(pgn_files, out)`` writes ``out/year=YYYY/month=MM/games.parquet`` with one row per
game (columns :data:`COLUMNS`, plus ``clocks`` with ``clocks=True``) and ``out/convert-report.json``
(a :class:`ConversionReport`). Inputs are ``.pgn``, ``.pgn.zst``, ``.pgn.bz2``, ``.pgn.gz`` or
``-`` (standard input), read as streams (:mod:`tokpack.chess.pgn.stream`), or Parquet games
(Lichess's Hugging Face shards), whose rows :mod:`tokpack.chess.pgn.parquet_games` spells as the
PGN they came from; a game's moves are python-chess's main line. The month is ``UTCDate``'s when
the game has one, else ``Date``'s; an unknown month (``1984.??.??``) files the game under
``month=00``, an unknown year under ``year=0000``. Rows keep the input order (file by file, game
by game), whatever ``workers`` is.

A bulk conversion never stops on a bad game: it skips it and counts why
(:data:`tokpack.chess.pgn.games.SKIP_REASONS`), keeping the file and byte offset of the first game
skipped for each reason. Filters (:class:`~tokpack.chess.pgn.games.GameFilter`) drop readable
games and are counted apart. A chunk is read by :func:`tokpack.chess.pgn.games.chunk_games` into
one Arrow table of its usable games, with the reasons the others were skipped or filtered.

Memory is flat in the input's size: chunks of :data:`tokpack.chess.pgn.stream.CHUNK_BYTES` are read
one at a time (``2 * workers`` in flight), their games are buffered as Arrow tables, and every
``flush_games`` games are spilled: straight into the month's ``games.parquet`` for the first
:data:`MONTH_WRITERS` months, to part files joined at the end for any later month. Peak RSS:
flat from 30 k to 1 M Lichess-style games (BENCHMARKS.md, "Chess: converting PGN").
"""

from __future__ import annotations

import re
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from tokpack._atomic import building
from tokpack._pool import ordered_map, process_pool
from tokpack._schema import Record, write_record
from tokpack.chess.pgn._spans import numbers
from tokpack.chess.pgn.games import SKIP_REASONS, ChunkGames, GameFilter, ReadOptions, chunk_games, table_schema
from tokpack.chess.pgn.stream import CHUNK_BYTES, open_pgn, pgn_chunks
from tokpack.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tokpack.chess.pgn.parquet_games import Chunk, ParquetFile

REPORT_FILE = "convert-report.json"
GAMES_FILE = "games.parquet"
#: Months written straight to their ``games.parquet`` during a conversion (one open file each);
#: the games of any month met after these are spilled to part files and joined at the end.
MONTH_WRITERS = 64

class ConversionReport(Record):
    """``convert-report.json``: what a conversion read, wrote, skipped and filtered."""

    schema_: Literal["tokpack.chess.convert.v2"] = Field(default="tokpack.chess.convert.v2", alias="schema")
    inputs: list[str]
    games_read: int
    games_written: int
    skipped: dict[str, int]
    first_skipped: dict[str, str] = Field(description="reason -> 'FILE@BYTE: detail' of its first game ('FILE@row N: detail' in Parquet)")
    filtered: dict[str, int] = Field(default_factory=dict, description="filter -> games it dropped")
    months: dict[str, int]



def month_parquet(root: Path, month: str) -> Path:
    """Where :func:`convert_pgn` puts month ``"YYYY-MM"`` under ``root``.

    Raises:
        InputError: ``month`` is not ``YYYY-MM``.

    >>> month_parquet(Path("games"), "2016-03").as_posix()
    'games/year=2016/month=03/games.parquet'
    """
    if not re.fullmatch(r"\d{4}-\d{2}", month):
        raise InputError(f"month {month!r} is not YYYY-MM")
    year, number = month.split("-")
    return Path(root) / f"year={year}" / f"month={number}" / GAMES_FILE


def convert_pgn(pgn_files: Sequence[Path | str], out: Path, *, flush_games: int = 25_000,
                progress: Callable[[int, int], None] | None = None, filters: GameFilter = GameFilter(),
                clocks: bool = False, workers: int = 1, chunk_bytes: int = CHUNK_BYTES,
                storage_options: dict[str, Any] | None = None) -> ConversionReport:
    """Convert games into ``out/year=YYYY/month=MM/games.parquet`` and a report.

    Each input is a PGN file (``.pgn``, ``.pgn.zst``, ``.pgn.bz2``, ``.pgn.gz``), ``-`` (standard
    input), or Parquet games such as Lichess's Hugging Face shards: a ``.parquet`` file or a folder
    of them, local or at an fsspec URL (``storage_options`` are the file system's options), read
    as the PGN their rows spell (:mod:`tokpack.chess.pgn.parquet_games`).

    Memory holds at most ``flush_games`` games (plus ``2 * workers`` chunks in flight): beyond
    that, the buffered games are written out, a row group per month (see :class:`_MonthParts`). ``out`` appears complete or not at all, and is byte-identical for any ``workers``
    (chunks are read by worker processes, their games kept in input order).
    ``progress(bytes_done, bytes_total)`` counts bytes of the input files as stored.

    Raises:
        InputError: ``out`` exists, or an input file cannot be opened, decompressed or read.
    """
    out = Path(out)
    if out.exists():
        raise InputError("already exists; a conversion never writes into an old one", where=out,
                         fix="remove it or pick another out=PATH")
    inputs = [_input(source, storage_options) for source in pgn_files]
    total, done_before = sum(size for _, files in inputs for _, size in files), 0
    skipped = {reason: 0 for reason in SKIP_REASONS}
    filtered = {name: 0 for name in filters.names}
    first_skipped: dict[str, str] = {}
    months: Counter[str] = Counter()
    read = 0
    options = ReadOptions(filters, clocks)
    with building(out) as staging, _chunk_pool(workers) as pool, _MonthParts(staging, flush_games, clocks) as parts:
        for _, files in inputs:
            for source, size in files:
                for chunk, where, done in _chunks_of(source, size, pool, options, workers, chunk_bytes):
                    read += chunk.games_read
                    for _, dropped in chunk.filtered:
                        filtered[dropped] += 1
                    for offset, game in chunk.skipped:
                        skipped[game.reason] += 1
                        if game.reason not in first_skipped:
                            first_skipped[game.reason] = f"{where(offset)}: {game.detail}"
                    names, counts = np.unique(chunk.months, return_counts=True)
                    months.update(dict(zip(names.tolist(), counts.tolist(), strict=True)))
                    parts.add(chunk.table, chunk.months)
                    if progress is not None and size:
                        progress(done_before + done(), total)
                done_before += size
        parts.finish()
        report = ConversionReport(inputs=[name for name, _ in inputs], games_read=read,
                                  games_written=sum(months.values()), skipped=skipped, first_skipped=first_skipped,
                                  filtered=filtered, months=dict(sorted(months.items())))
        write_record(report, staging / REPORT_FILE)
    if progress is not None:
        progress(total, total)
    return report


#: One input file: a PGN path (``-`` for standard input) or a Parquet file, and its size.
_Source = tuple["Path | str | ParquetFile", int]


def _input(source: Path | str, storage_options: dict[str, Any] | None) -> tuple[str, list[_Source]]:
    """An input's name in the report and its files, checked before anything is written."""
    from tokpack.chess.pgn.parquet_games import is_url, parquet_files

    found = parquet_files(source, storage_options)
    if found is not None:
        name = str(source) if is_url(source) else Path(source).name
        return name, [(file, file.size) for file in found]
    if str(source) == "-":
        return "-", [("-", 0)]
    if is_url(source):
        raise InputError("a URL must name .parquet files or a folder of them", where=str(source),
                         fix="download PGN files and name them locally")
    if not Path(source).is_file():
        raise InputError("not a file", where=source)
    return Path(source).name, [(Path(source), Path(source).stat().st_size)]


def _chunks_of(source: Path | str | ParquetFile, size: int, pool: ProcessPoolExecutor | None, options: ReadOptions,
               workers: int, chunk_bytes: int) -> Iterator[tuple[ChunkGames, Callable[[int], str], Callable[[], int]]]:
    """Every chunk of one input file, read, in order: the chunk, what names its byte offsets in the
    report (``file@byte`` for PGN, ``file@row N`` for Parquet), and the bytes of the file read so far."""
    from tokpack.chess.pgn.parquet_games import ParquetFile, parquet_chunks

    if isinstance(source, ParquetFile):
        in_flight: deque[Chunk] = deque()  # the chunks handed to _in_order and not read back yet

        def cut() -> Iterator[tuple[int, bytes]]:
            for piece in parquet_chunks(source, chunk_bytes):
                in_flight.append(piece)
                yield piece.offset, piece.data
                piece.data = b""  # handed over: only its rows' offsets are needed now

        for chunk in _in_order(pool, cut(), options, workers):
            piece = in_flight.popleft()
            yield chunk, partial(_row_of, source.name, piece), partial(_share, size, piece.done)
        return
    name = "-" if str(source) == "-" else Path(source).name
    stream, raw = open_pgn(source)
    with stream:
        sniff = _PgnSniff(pgn_chunks(stream, str(source), chunk_bytes))
        for chunk in _in_order(pool, iter(sniff), options, workers):
            yield chunk, lambda offset: f"{name}@{offset}", lambda: _position(raw, size)
    sniff.check(source)


def _row_of(name: str, chunk: Chunk, offset: int) -> str:
    return f"{name}@row {chunk.row_at(offset)}"


def _share(size: int, done: float) -> int:
    return int(size * done)


#: A PGN tag line (``[Name "value"]``) or a numbered first move (``1. e4``, ``1.Nf3``), at a line's start.
_PGN_SIGN = re.compile(rb'(?m)^[ \t]*(?:\[[A-Za-z0-9_]+[ \t]+"|1\.[ \t]*(?:[a-h][1-8]|[NBRQK][a-h1-8x]|O-O))')


class _PgnSniff:
    """Passes a file's chunks on, noting whether any of them holds a tag line or a first move.

    A file without either (an HTML error page saved under a ``.pgn`` name, an empty file) yields
    no game at all, so converting it is refused instead of "succeeding" with every game skipped.
    The search stops at the first sign of PGN, so a real file costs one regex search of its start.
    """

    def __init__(self, chunks: Iterator[tuple[int, bytes]]) -> None:
        self._chunks, self._head, self._seen_text, self.looks_pgn = chunks, b"", False, False

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        for offset, data in self._chunks:
            if not self._seen_text:
                self._head, self._seen_text = data.lstrip()[:200], bool(data.strip())
            if not self.looks_pgn:
                self.looks_pgn = _PGN_SIGN.search(data) is not None
            yield offset, data

    def check(self, path: Path | str) -> None:
        """Raise :class:`~tokpack.errors.InputError` if the file held no PGN at all."""
        if self.looks_pgn:
            return
        where = "standard input" if str(path) == "-" else path
        fix = "check the file (download with curl -f so an error page is not saved as the file)"
        if not self._seen_text:
            raise InputError("is empty (no PGN game)", where=where, fix=fix)
        first = self._head.split(b"\n", 1)[0][:40].decode("utf-8", "replace").strip()
        raise InputError(f"starts with {first!r}: not PGN (no tag line, no numbered moves)", where=where, fix=fix)


def _position(raw: object, size: int) -> int:
    try:
        return min(int(raw.tell()), size)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        return 0


class _chunk_pool:
    """Worker processes for :func:`chunk_games` (none for one worker)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._opened: ExitStack = ExitStack()

    def __enter__(self) -> ProcessPoolExecutor | None:
        return self._opened.enter_context(process_pool(self.workers, preload=(__name__,))) if self.workers > 1 else None

    def __exit__(self, *exc: object) -> None:
        self._opened.close()


def _in_order(pool: ProcessPoolExecutor | None, chunks: Iterator[tuple[int, bytes]], options: ReadOptions,
              workers: int) -> Iterator[ChunkGames]:
    """:func:`chunk_games` of every chunk, in order; at most ``2 * workers`` chunks in flight."""
    if pool is None:
        for offset, data in chunks:
            yield chunk_games(data, offset, options)
        return
    yield from ordered_map(pool, chunk_games, ((data, offset, options) for offset, data in chunks), ahead=2 * workers)


class _MonthParts:
    """Buffers games as Arrow tables; when full, writes every month's games to its file or a part file.

    A chunk's games arrive as one Arrow table, and each month keeps only the row numbers of its
    games (an ``array`` of int64), so no Python object per game is buffered: ``PgnGame`` objects
    (about 1 KiB each) among each chunk's short-lived objects would keep the heap they share from
    shrinking. One table per chunk, not per chunk and month, because an Arrow table costs about
    8 KiB however few rows it has: with hundreds of months in a chunk (an over-the-board database)
    per-month tables would outweigh the games. Spills happen after exactly ``flush_games`` games,
    so the row groups of the output do not depend on how the input is cut into chunks.

    The first :data:`MONTH_WRITERS` months met (in input order) are written straight into their
    ``games.parquet`` (one row group a spill); a month met after them is spilled to part files
    joined at the end, with the same schema, which gives the same bytes. Reading the parts back and
    writing them again is work for the main process, and the main process is what bounds
    ``workers`` (BENCHMARKS.md, "Chess: converting PGN").
    """

    def __init__(self, root: Path, flush_games: int, clocks: bool = False) -> None:
        self.root, self.flush_games, self.clocks = root, max(1, flush_games), clocks
        self.tables: list[pa.Table] = []
        self.rows: dict[str, array[int]] = {}  # month -> its games' rows in the buffered tables
        self.writers: dict[str, pq.ParquetWriter] = {}  # the first MONTH_WRITERS months: written straight
        self.parts: dict[str, list[Path]] = {}  # any other month: part files, joined at the end
        self.buffered = 0
        self.schema = table_schema(clocks)  # every file's

    def add(self, table: pa.Table, months: np.ndarray) -> None:
        """Buffer the games of ``table`` (in input order; ``months`` is each row's), spilling whenever
        ``flush_games`` are buffered."""
        start = 0
        while start < table.num_rows:
            batch = table.slice(start, self.flush_games - self.buffered)
            names, first, month_of_row = np.unique(months[start:start + batch.num_rows], return_index=True,
                                                   return_inverse=True)
            rows = np.arange(self.buffered, self.buffered + batch.num_rows, dtype=np.int64)
            for number in np.argsort(first).tolist():  # months in the order they are met
                self.rows.setdefault(str(names[number]), array("q")).extend(rows[month_of_row == number].tolist())
            self.tables.append(batch)
            self.buffered += batch.num_rows
            start += batch.num_rows
            if self.buffered >= self.flush_games:
                self._spill()

    def _spill(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.tables:
            return
        buffered = pa.concat_tables(self.tables).combine_chunks()
        self.tables = []
        for month, rows in self.rows.items():
            target = month_parquet(self.root, month)
            target.parent.mkdir(parents=True, exist_ok=True)
            whole = len(rows) == buffered.num_rows  # one month: no copy
            table = buffered if whole else buffered.take(numbers(np.frombuffer(rows, dtype=np.int64))).combine_chunks()
            if month not in self.writers and month not in self.parts and len(self.writers) < MONTH_WRITERS:
                self.writers[month] = pq.ParquetWriter(target, self.schema, compression="zstd")
            if month in self.writers:
                self.writers[month].write_table(table)
                continue
            part = target.parent / f".part-{len(self.parts.get(month, [])):05d}.parquet"
            with pq.ParquetWriter(part, self.schema, compression="zstd") as writer:
                writer.write_table(table)
            self.parts.setdefault(month, []).append(part)
        del buffered, table  # before the pool is released below
        self.rows, self.buffered = {}, 0
        pa.default_memory_pool().release_unused()  # Arrow's pool keeps freed blocks: give them back

    def finish(self) -> None:
        """Spill what is left, close the months' files and make each other month's parts one ``games.parquet``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._spill()
        self.close()
        for month, parts in self.parts.items():
            target = month_parquet(self.root, month)
            if len(parts) == 1:
                parts[0].rename(target)
                continue
            # The schema read back from a part names a list's items "element", not "item": use ours.
            with pq.ParquetWriter(target, self.schema, compression="zstd") as writer:
                for part in parts:  # one part in memory at a time
                    writer.write_table(pq.read_table(part, use_threads=False))
                    part.unlink()
                    pa.default_memory_pool().release_unused()

    def __enter__(self) -> _MonthParts:
        return self

    def __exit__(self, error_type: type[BaseException] | None, *exc: object) -> None:
        try:
            self.close()
        except Exception:
            if error_type is None:
                raise  # else the error under way is the one to report; the files are deleted

    def close(self) -> None:
        """Close every month's open file, each even if closing another fails."""
        writers, self.writers = self.writers, {}
        with ExitStack() as stack:
            for writer in writers.values():
                stack.callback(writer.close)
