"""Pack a table of games into a pack store, one whole game per document.

``pack_games(parquet, encoder, destination)`` reads the table batch by batch, encodes each batch
with :meth:`~tokpack.chess.schemes.game_encoder.GameEncoder.encode_batch` and streams the ids into a
:class:`~tokpack.store.PackWriter`, so memory holds one batch (plus, with ``workers > 1``, the
few batches in flight). Games are stored whole: cutting them into training windows is the
loader's job, so a new context length needs no re-tokenization. The pack's ``meta.json`` records
the scheme's vocabulary identity, the source file and its hash, the cut (``"game"``), one range
naming the split (and, for :func:`pack_tables`, one named after each month), the counts ``n_games`` and ``unknown_moves``, and ``pad_id`` (``<pad>``, 0 in
every scheme, an id no encoder emits), which the loader pads windows with.

The same table, scheme and vocabulary give byte-identical packs whatever ``workers`` is.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tokpack._pool import ordered_map, process_pool
from tokpack.chess.schemes.game_encoder import GAME_COLUMNS, EncodedGames, GameEncoder, GameError
from tokpack.corpus.manifest import file_sha256
from tokpack.engines.encoders import EncoderRecord, describe, rebuild
from tokpack.errors import InputError
from tokpack.store import DocumentCut, PackMeta, PackWriter, Source, Span
from tokpack.store.format import ShardPlace

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

#: Games encoded per batch: large enough that per-batch costs vanish, small enough to stay flat.
BATCH_GAMES = 16_384
#: The range names a chess pack may carry (readers that train read ``train`` only).
SPLITS = ("train", "validation")


class TableRows(NamedTuple):
    """Rows ``[rows[0], rows[1])`` of the parquet ``games`` (``None``: all of them), recorded as
    ``source``, and ``month``: the name of the range its games get (``None``: none)."""

    games: Path
    rows: tuple[int, int] | None = None
    source: Source | None = None
    month: str | None = None


def pack_games(games: Path, encoder: GameEncoder, destination: Path, *, split: str = "train",
               batch_games: int = BATCH_GAMES, workers: int = 1,
               progress: Callable[[int, int, int], None] | None = None,
               rows: tuple[int, int] | None = None, source: Source | None = None) -> PackMeta:
    """Encode every game of the parquet ``games`` (or its rows ``[first, last)``) into a new pack
    at ``destination``.

    ``source`` is the record of ``games`` to write (default: its name, hashed now), so a job
    that hashed the table once need not hash it again.

    ``progress(games_done, games_total, tokens_done)`` is called after each batch. With
    ``workers > 1`` the encoding runs in that many worker processes (the parent reads and writes),
    so a script calling this must guard its entry point with ``if __name__ == "__main__":``.

    Raises:
        InputError: ``destination`` exists, ``split`` is unknown, the parquet cannot be read or
            lacks a column, or a game cannot be encoded (naming the file and the row).
    """
    return pack_tables([TableRows(Path(games), rows, source)], encoder, destination, split=split,
                       batch_games=batch_games, workers=workers, progress=progress)


def pack_tables(tables: Sequence[TableRows], encoder: GameEncoder, destination: Path, *, split: str = "train",
                batch_games: int = BATCH_GAMES, workers: int = 1,
                progress: Callable[[int, int, int], None] | None = None, source: Source | None = None,
                shard: ShardPlace | None = None) -> PackMeta:
    """Encode the rows of several tables, in order, into one new pack at ``destination`` (one
    shard of a chess job, see :mod:`tokpack.chess.jobs.shards`), as :func:`pack_games` does one.

    Besides the ``split`` range over every game, each table with a ``month`` gives its games a
    range of that name. ``source`` is the pack's record of its input: needed for several tables
    (:func:`tokpack.chess.jobs.shards.joined_source` joins theirs); for one, its record by default.
    ``shard``: the place of a chess job's shard, recorded in its ``meta.json``.

    Raises:
        InputError: as :func:`pack_games`, for any of the tables.
    """
    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if not tables:
        raise InputError("a pack needs at least one table of games", where=destination)
    if source is None and len(tables) > 1:
        raise InputError("a pack of several tables needs the record of its input (source=)", where=destination)
    opened, spans = [], []
    try:
        for table in tables:
            reader, first, last = _open_table(Path(table.games), table.rows)
            opened.append(reader)
            spans.append((first, last))
        total = sum(last - first for first, last in spans)
        unknown = done = 0
        tokens_of = [0] * len(tables)  # each table's ids
        documents_of = [0] * len(tables)  # each table's documents (a game each, or a scheme's several)
        with PackWriter(Path(destination), vocabulary=encoder.identity,
                        origins=("rows", [table_name(Path(table.games)) for table in tables])) as writer:
            for parts, encoded in _encoded_batches(opened, spans, encoder, batch_games, workers):
                if isinstance(encoded, GameError):
                    index, shift = _part_of(parts, encoded.row)
                    raise encoded.at(str(tables[index].games), shift) from None
                per_game = encoded.documents_per_game()
                # A game's origin once for each document it made (a position scheme makes several).
                writer.add_flat(encoded.ids, encoded.lengths, origins=np.repeat(_origins(parts), per_game, axis=0))
                # Each part's documents, then its ids (a part may have no documents left: sampled out).
                game_ends = np.cumsum([n for _, _, n in parts])
                document_ends = np.concatenate(([0], np.cumsum(per_game)))[game_ends]
                token_ends = np.concatenate(([0], np.cumsum(encoded.lengths, dtype=np.int64)))[document_ends]
                for part, (index, _, _) in enumerate(parts):
                    documents_of[index] += int(document_ends[part] - (document_ends[part - 1] if part else 0))
                    tokens_of[index] += int(token_ends[part] - (token_ends[part - 1] if part else 0))
                unknown += encoded.unknown_moves
                done += int(game_ends[-1])
                if progress is not None:
                    progress(done, total, writer.n_tokens)
            ranges = {split: Span(documents=(0, writer.n_docs), tokens=(0, writer.n_tokens))}
            doc_ends = np.cumsum(documents_of)
            token_ends = np.cumsum(tokens_of)
            for index, table in enumerate(tables):
                if table.month is not None:
                    ranges[table.month] = Span(
                        documents=(int(doc_ends[index - 1]) if index else 0, int(doc_ends[index])),
                        tokens=(int(token_ends[index - 1]) if index else 0, int(token_ends[index])))
            source = source or tables[0].source or table_source(Path(tables[0].games))
            return writer.commit(source=source, cut=DocumentCut(rule="game"), ranges=ranges,
                                 counts={"n_games": done, "unknown_moves": unknown}, pad_id=encoder.pad_id,
                                 shard=shard)
    finally:
        for reader in opened:
            reader.close()


def _open_table(games: Path, rows: tuple[int, int] | None) -> tuple[pq.ParquetFile, int, int]:
    """The parquet reader of ``games`` and the rows to read, checked."""
    import pyarrow.parquet as pq

    try:
        # Without pre-buffering: with it, pyarrow keeps every row group it has read until the
        # file is closed, and memory grows with the table.
        reader = pq.ParquetFile(games, pre_buffer=False)
    except (OSError, ValueError) as error:
        raise InputError(f"not a readable parquet file ({error})", where=games) from None
    missing = [c for c in GAME_COLUMNS if c not in reader.schema_arrow.names]
    if missing:
        reader.close()
        raise InputError(f"missing column(s) {', '.join(missing)}", where=games)
    n_rows = reader.metadata.num_rows
    first, last = (0, n_rows) if rows is None else rows
    if not 0 <= first <= last <= n_rows:
        reader.close()
        raise InputError(f"rows {first}..{last} are outside its {n_rows} rows", where=games)
    return reader, first, last


def _row_batches(reader: pq.ParquetFile, batch_games: int, first: int, last: int
                 ) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``(row, batch)`` covering rows ``[first, last)`` of the table: only the row groups that
    hold them are read, and the first and last batches are sliced to the range."""
    groups, start = [], 0
    for index in range(reader.metadata.num_row_groups):
        end = start + reader.metadata.row_group(index).num_rows
        if start < last and end > first:
            groups.append(index)
        start = end
    if not groups or first == last:
        return
    row = sum(reader.metadata.row_group(i).num_rows for i in range(groups[0]))
    for batch in reader.iter_batches(batch_size=batch_games, columns=list(GAME_COLUMNS), row_groups=groups):
        low, high = max(first - row, 0), min(last - row, batch.num_rows)
        if high > low:
            yield row + low, batch.slice(low, high - low)
        row += batch.num_rows
        if row >= last:
            return


#: ``(table index, first row, rows)``: the parts of an encoding batch, in order.
Parts = list[tuple[int, int, int]]


def _table_batches(readers: Sequence, spans: Sequence[tuple[int, int]],
                   batch_games: int) -> Iterator[tuple[Parts, pa.Table | pa.RecordBatch]]:
    """The rows of every table, in order, in batches of ``batch_games`` games: a batch may join
    the ends of several tables, so many small months cost as few encoder calls as one big one."""

    pending: list[pa.RecordBatch] = []
    parts: Parts = []
    held = 0
    for index, (reader, (first, last)) in enumerate(zip(readers, spans)):
        for row, batch in _row_batches(reader, batch_games, first, last):
            while batch.num_rows:
                take = min(batch.num_rows, batch_games - held)
                pending.append(batch.slice(0, take))
                parts.append((index, row, take))
                held, row, batch = held + take, row + take, batch.slice(take)
                if held == batch_games:
                    yield parts, _joined(pending)
                    pending, parts, held = [], [], 0
    if held:
        yield parts, _joined(pending)


def _origins(parts: Parts) -> np.ndarray:
    """Each game's origin in the pack's record: ``(table, row, row + 1)``."""
    rows = [np.column_stack([np.full(n, index), np.arange(first, first + n), np.arange(first + 1, first + n + 1)])
            for index, first, n in parts]
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 3), np.int64)


def _joined(batches: list[pa.RecordBatch]) -> pa.Table | pa.RecordBatch:
    """One table of ``batches`` (from tables whose column types may differ slightly: promoted)."""
    import pyarrow as pa

    if len(batches) == 1:
        return batches[0]
    return pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive").combine_chunks()


def _part_of(parts: Parts, row: int) -> tuple[int, int]:
    """The table that row ``row`` of a batch made of ``parts`` comes from, and what to add to
    ``row`` for its row in that table."""
    before = 0
    for index, first, n_rows in parts:
        if row < before + n_rows:
            return index, first - before
        before += n_rows
    raise AssertionError("a row past the batch")  # pragma: no cover - encoders report rows they were given


def _encoded_batches(readers: Sequence, spans: Sequence[tuple[int, int]],
                     encoder: GameEncoder, batch_games: int, workers: int
                     ) -> Iterator[tuple[Parts, EncodedGames | GameError]]:
    """``(parts, encoded batch)`` in order; a batch that fails yields its GameError, whose row is
    its index in the batch."""
    batches = _table_batches(readers, spans, batch_games)
    if workers <= 1:
        for parts, batch in batches:
            yield parts, _encode(encoder, batch)
        return
    in_flight: deque[Parts] = deque()  # the parts of the batches handed to the pool, not read back yet

    def handed() -> Iterator[tuple[pa.Table | pa.RecordBatch]]:
        for parts, batch in batches:
            in_flight.append(parts)
            yield (batch,)

    # Bounded: memory stays flat however long the table.
    with process_pool(workers, _start_worker, (describe(encoder),), preload=(__name__,)) as pool:
        for encoded in ordered_map(pool, _encode_in_worker, handed(), ahead=2 * workers):
            yield in_flight.popleft(), encoded


def _encode(encoder: GameEncoder, batch: pa.Table | pa.RecordBatch) -> EncodedGames | GameError:
    try:
        return encoder.encode_batch(batch)
    except GameError as error:
        return error


_WORKER_ENCODER: GameEncoder | None = None


def _start_worker(record: EncoderRecord) -> None:
    global _WORKER_ENCODER
    _WORKER_ENCODER = rebuild(record)


def _encode_in_worker(batch: pa.Table | pa.RecordBatch) -> EncodedGames | GameError:
    assert _WORKER_ENCODER is not None
    return _encode(_WORKER_ENCODER, batch)


def table_source(path: Path) -> Source:
    """The pack's record of its input: its :func:`table_name`, its SHA-256 and size."""
    return Source(name=table_name(path), sha256=file_sha256(path), n_bytes=path.stat().st_size)


def table_name(path: Path) -> str:
    """A table's name in a pack's records: month-relative (``year=.../month=.../games.parquet``)
    when the file sits in a converted tree, else the file name."""
    parts = Path(path).resolve().parts
    return "/".join(parts[-3:]) if len(parts) >= 3 and parts[-3].startswith("year=") else Path(path).name
