"""Pack a table of games into a pack store, one whole game per document.

``pack_games(parquet, encoder, destination)`` reads the table batch by batch, encodes each batch
with :meth:`~tokpack.chess.encoders.GameEncoder.encode_batch` and streams the ids into a
:class:`~tokpack.store.PackWriter`, so memory holds one batch (plus, with ``workers > 1``, the
few batches in flight). Games are stored whole: cutting them into training windows is the
loader's job, so a new context length needs no re-tokenization. The pack's ``meta.json`` records
the scheme's vocabulary identity, the source file and its hash, the cut (``"game"``), one range
naming the split, the counts ``n_games`` and ``unknown_moves``, and ``pad_id`` (``<pad>``, 0 in
every scheme, an id no encoder emits), which the loader pads windows with.

The same table, scheme and vocabulary give byte-identical packs whatever ``workers`` is.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from tokpack.chess.encoders import GAME_COLUMNS, EncodedGames, GameEncoder, GameError
from tokpack.corpus.manifest import file_sha256
from tokpack.engines.encoders import EncoderRecord, describe, rebuild
from tokpack.errors import InputError
from tokpack.store import DocumentCut, PackMeta, PackWriter, Source, Span

if TYPE_CHECKING:
    import pyarrow as pa

#: Games encoded per batch: large enough that per-batch costs vanish, small enough to stay flat.
BATCH_GAMES = 16_384
#: The range names a chess pack may carry (readers that train read ``train`` only).
SPLITS = ("train", "validation")


def pack_games(games: Path, encoder: GameEncoder, destination: Path, *, split: str = "train",
               batch_games: int = BATCH_GAMES, workers: int = 1,
               progress: Callable[[int, int, int], None] | None = None,
               rows: tuple[int, int] | None = None, source: Source | None = None) -> PackMeta:
    """Encode every game of the parquet ``games`` (or its rows ``[first, last)``: one shard of a
    month, see :mod:`tokpack.chess.shards`) into a new pack at ``destination``.

    ``source`` is the record of ``games`` to write (default: its name, hashed now), so a job
    that hashed the table once need not hash it again for every shard.

    ``progress(games_done, games_total, tokens_done)`` is called after each batch. With
    ``workers > 1`` the encoding runs in that many spawned processes (the parent reads and writes),
    so a script calling this must guard its entry point with ``if __name__ == "__main__":``.

    Raises:
        ValueError: ``destination`` exists, ``split`` is unknown, the parquet cannot be read or
            lacks a column, or a game cannot be encoded (naming the file and the row).
    """
    import pyarrow.parquet as pq

    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    games = Path(games)
    try:
        # Without pre-buffering: with it, pyarrow keeps every row group it has read until the
        # file is closed, and memory grows with the table.
        reader = pq.ParquetFile(games, pre_buffer=False)
    except (OSError, ValueError) as error:
        raise InputError(f"{games}: not a readable parquet file ({error})") from None
    missing = [c for c in GAME_COLUMNS if c not in reader.schema_arrow.names]
    if missing:
        raise InputError(f"{games}: missing column(s) {', '.join(missing)}")
    n_rows = reader.metadata.num_rows
    first, last = (0, n_rows) if rows is None else rows
    if not 0 <= first <= last <= n_rows:
        raise InputError(games, f"rows {first}..{last} are outside its {n_rows} rows")
    total = last - first
    unknown = done = 0
    with reader, PackWriter(Path(destination), vocabulary=encoder.identity) as writer:
        for first_row, encoded in _encoded_batches(reader, encoder, batch_games, workers, first, last):
            if isinstance(encoded, GameError):
                raise encoded.at(str(games), first_row) from None
            writer.add_flat(encoded.ids, encoded.lengths)
            unknown += encoded.unknown_moves
            done += len(encoded.lengths)
            if progress is not None:
                progress(done, total, writer.n_tokens)
        span = Span(documents=(0, writer.n_docs), tokens=(0, writer.n_tokens))
        return writer.commit(source=source or table_source(games), cut=DocumentCut(rule="game"), ranges={split: span},
                             counts={"n_games": writer.n_docs, "unknown_moves": unknown}, pad_id=encoder.pad_id)


def _row_batches(reader, batch_games: int, first: int, last: int  # type: ignore[no-untyped-def]
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


def _encoded_batches(reader, encoder: GameEncoder, batch_games: int, workers: int,  # type: ignore[no-untyped-def]
                     first: int, last: int) -> Iterator[tuple[int, EncodedGames | GameError]]:
    """``(first row, encoded batch)`` in table order; a batch that fails yields its GameError."""
    first_row = first
    batches = (batch for _, batch in _row_batches(reader, batch_games, first, last))
    if workers <= 1:
        for batch in batches:
            yield first_row, _encode(encoder, batch)
            first_row += batch.num_rows
        return
    import multiprocessing

    # "spawn": a fresh interpreter per worker, never a fork of a process holding threads.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_start_worker, initargs=(describe(encoder),)) as pool:
        in_flight: deque[tuple[int, Future[EncodedGames | GameError]]] = deque()
        for batch in batches:
            in_flight.append((first_row, pool.submit(_encode_in_worker, batch)))
            first_row += batch.num_rows
            if len(in_flight) >= 2 * workers:  # bounded: memory stays flat however long the table
                row, future = in_flight.popleft()
                yield row, future.result()
        while in_flight:
            row, future = in_flight.popleft()
            yield row, future.result()


def _encode(encoder: GameEncoder, batch: pa.RecordBatch) -> EncodedGames | GameError:
    try:
        return encoder.encode_batch(batch)
    except GameError as error:
        return error


_WORKER_ENCODER: GameEncoder | None = None


def _start_worker(record: EncoderRecord) -> None:
    global _WORKER_ENCODER
    _WORKER_ENCODER = rebuild(record)


def _encode_in_worker(batch: pa.RecordBatch) -> EncodedGames | GameError:
    assert _WORKER_ENCODER is not None
    return _encode(_WORKER_ENCODER, batch)


def table_source(path: Path) -> Source:
    """The pack's record of its input: the month-relative name (``year=.../month=.../games.parquet``
    when the file sits in a converted tree, else the file name), its SHA-256 and size."""
    parts = path.resolve().parts
    name = "/".join(parts[-3:]) if len(parts) >= 3 and parts[-3].startswith("year=") else path.name
    return Source(name=name, sha256=file_sha256(path), n_bytes=path.stat().st_size)
