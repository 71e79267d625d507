"""The chess kind of sharded job: month tables cut into shards by size, and how one shard is packed;
the engines' lifecycle (:mod:`tokpack.engines.lifecycle`) runs and finishes it as it does a text job.

A chess job is a folder laid out like a text job (:mod:`tokpack.engines.lifecycle`)::

    DATASET/
      job.json         a :class:`ChessJob`: every shard's pieces (a month table's path, SHA-256,
                       size and row range), the split, the encoder's identity; written once by
                       whoever starts the job
      encoder.json     the :class:`~tokpack.engines.encoders.EncoderRecord` every worker rebuilds
                       its encoder from (no scheme is special-cased here)
      shard-00000/ …   one pack per shard, renamed into place only when complete
      dataset.json     written by the task that completes the last shard

While the job runs, ``shard-NNNNN.done`` markers and ``*.lock`` files sit beside the shards; the
task that writes ``dataset.json`` removes them (a finished dataset needs neither).

Shards are cut by size, never by month: the games of the month tables, in order, are taken whole
until a shard's moves reach ``shard_bytes`` as UCI text (:data:`UCI_BYTES_PER_PLY` bytes a ply,
from the ``n_plies`` column) or it holds ``shard_games`` games, so a shard spans as many months
as fit and a large month is spread over several shards. Each month stays selectable: every pack
records, besides the split's range, a range named after each month it holds (``"2016-01"``),
joined across shards in ``dataset.json``. The shards depend on the job alone, never on how many
processes run it or on which engine, so the dataset is byte-identical for any number of workers
and for local processes, a job array or Ray. Each table is hashed once, when the job starts; a
shard checks each table's size and row count against the job before it reads it (hashing a
month's table again for each of its shards would cost more than encoding it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from tokpack._progress import PrepareProgress
from tokpack._schema import Record, SealedRecord
from tokpack.chess.schemes import encoder_from_spec, encoder_spec
from tokpack.engines.kinds import JobOrigins, JobSupply, ShardOrigin
from tokpack.engines.lifecycle import JOB_FILE, read_job, refuse_other_version, write_job
from tokpack.errors import InputError, TokpackError
from tokpack.store.dataset import shard_name
from tokpack.store.format import DATASET_FILE, DocumentCut, ShardPlace, Source
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    from tokpack.chess.schemes.game_encoder import GameEncoder


#: The default shard size: games are added to a shard until their moves reach this as UCI text.
SHARD_BYTES = 64_000_000
#: A ply written as UCI text with its separator (``e2e4 ``): how ``n_plies`` counts as bytes.
UCI_BYTES_PER_PLY = 5
#: The largest shard size (and game count) a plan takes: its sums are 64-bit integers.
_MOST_BYTES = 1 << 62


class TablePiece(Record):
    """Rows ``[rows[0], rows[1])`` of one month's table: part of a shard."""

    games: str  # the table's absolute path
    source: Source  # its month-relative name, SHA-256 and size, as the shard's pack records it
    n_rows: int = Field(ge=0)  # the table's rows when the job began
    rows: tuple[int, int]
    month: str | None = None  # "YYYY-MM" of a table in a converted tree: the range its games get


class ChessShard(Record):
    """One shard of a chess job: consecutive pieces of consecutive month tables."""

    pieces: list[TablePiece] = Field(min_length=1)


class ChessJob(SealedRecord):
    """``job.json`` of a chess job: everything a shard task needs, so any process anywhere packs
    the same shard."""

    schema_: Literal["tokpack.chess.job.v3"] = Field(default="tokpack.chess.job.v3", alias="schema")
    split: str
    batch_games: int = Field(ge=1)
    world_size: int = Field(ge=1)
    vocabulary: VocabIdentity
    shards: list[ChessShard]

    @model_validator(mode="after")
    def _one_entry_a_shard(self) -> ChessJob:
        if len(self.shards) != self.world_size:
            raise ValueError(f"{len(self.shards)} shards listed for a world size of {self.world_size}")
        return self

    def source(self) -> Source:
        """The whole dataset's record of its input: the tables in order, hashed together."""
        return joined_source([piece.source for shard in self.shards for piece in shard.pieces])


def joined_source(sources: Sequence[Source]) -> Source:
    """One record for several tables (each counted once, in order): the first table's name (and
    the last's, with their number), the SHA-256 of their names and hashes, their total size."""
    tables = list(dict.fromkeys((s.name, s.sha256, s.n_bytes) for s in sources))
    if len(tables) == 1:
        name, sha, n_bytes = tables[0]
        return Source(name=name, sha256=sha, n_bytes=n_bytes)
    digest = hashlib.sha256("\n".join(f"{name} {sha}" for name, sha, _ in tables).encode()).hexdigest()
    name = f"{tables[0][0]} .. {tables[-1][0]} ({len(tables)} tables)"
    return Source(name=name, sha256=digest, n_bytes=sum(n for _, _, n in tables))


def table_month(path: Path) -> str | None:
    """``"YYYY-MM"`` of a table at ``.../year=YYYY/month=MM/games.parquet``, else ``None``."""
    parts = Path(path).resolve().parts
    if len(parts) >= 3 and parts[-3].startswith("year=") and parts[-2].startswith("month="):
        return f"{parts[-3][5:]}-{parts[-2][6:]}"
    return None


def plan_shards(tables: Sequence[Path], shard_games: int | None = None,
                shard_bytes: int = SHARD_BYTES) -> list[ChessShard]:
    """The shards of ``tables`` (month tables, in order): whole games in table order, a shard
    closing once its moves reach ``shard_bytes`` as UCI text or it holds ``shard_games`` games
    (see the module docstring). Each table is hashed once here; only its ``n_plies`` column is read.

    Raises:
        InputError: a table listed twice, not readable parquet, or without an ``n_plies`` column.
    """
    import numpy as np
    import pyarrow.parquet as pq

    from tokpack import _checks as checks
    from tokpack.chess.jobs.pack import table_source

    checks.positive_int("shard_bytes", shard_bytes, high=_MOST_BYTES)
    if shard_games is not None:
        checks.positive_int("shard_games", shard_games, high=_MOST_BYTES)
    seen = [Path(table).resolve() for table in tables]
    if len(set(seen)) < len(seen):  # its games would be packed twice, and its month range would not join
        twice = next(path for path in seen if seen.count(path) > 1)
        raise InputError("is listed twice", where=twice, fix="name each month once")
    shards: list[ChessShard] = []
    pieces: list[TablePiece] = []
    have_bytes = have_games = 0  # of the shard being filled
    for table in tables:
        try:
            reader = pq.ParquetFile(table)
        except (OSError, ValueError) as error:
            raise InputError(f"not a readable parquet file ({error})", where=table) from None
        if "n_plies" not in reader.schema_arrow.names:
            raise InputError("has no n_plies column", where=table, fix="convert the games with tokpack chess convert")
        n_rows, source = reader.metadata.num_rows, table_source(Path(table))
        piece = {"games": str(Path(table).resolve()), "source": source, "n_rows": n_rows, "month": table_month(table)}
        first = row = 0  # the open piece's first row; the batch's first row
        with reader:
            for batch in reader.iter_batches(batch_size=1 << 16, columns=["n_plies"]):
                plies = batch.column(0).to_numpy(zero_copy_only=False)
                sizes = np.concatenate(([0], np.cumsum(np.asarray(plies, dtype=np.int64) * UCI_BYTES_PER_PLY)))
                at = 0  # rows of the batch already placed
                while at < batch.num_rows:
                    # The first row that fills the shard (by bytes, then by games), searched at once.
                    end = int(np.searchsorted(sizes, shard_bytes - have_bytes + sizes[at], side="left"))
                    end = max(end, at + 1)
                    if shard_games is not None:
                        end = min(end, at + shard_games - have_games)
                    if end > batch.num_rows:  # the shard is not full at the end of this batch
                        have_bytes += int(sizes[-1] - sizes[at])
                        have_games += batch.num_rows - at
                        break
                    pieces.append(TablePiece(**piece, rows=(first, row + end)))
                    shards.append(ChessShard(pieces=pieces))
                    pieces, have_bytes, have_games, first, at = [], 0, 0, row + end, end
                row += batch.num_rows
        if first < n_rows:  # the table's rest opens the next shard
            pieces.append(TablePiece(**piece, rows=(first, n_rows)))
        elif n_rows == 0:  # an empty table keeps its month's range, in the shard being filled or the last one
            if pieces or not shards:
                pieces.append(TablePiece(**piece, rows=(0, 0)))
            else:  # a shard of no games of its own would be opened for it
                shards[-1] = ChessShard(pieces=[*shards[-1].pieces, TablePiece(**piece, rows=(0, 0))])
    if pieces:
        shards.append(ChessShard(pieces=pieces))
    return shards


def start_chess_job(tables: Sequence[Path], dataset: Path, encoder: GameEncoder, *, split: str = "train",
                    shard_games: int | None = None, shard_bytes: int = SHARD_BYTES,
                    batch_games: int | None = None) -> ChessJob:
    """Write ``job.json`` and ``encoder.json`` into ``dataset`` (or check the ones there, so an
    interrupted job resumes).

    Raises:
        InputError: ``dataset`` is a finished dataset already, or holds another job.
    """
    from tokpack.chess.jobs.pack import BATCH_GAMES, SPLITS

    dataset = Path(dataset)
    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if (dataset / DATASET_FILE).exists():
        raise InputError("already exists; a pack is never overwritten", where=dataset,
                         fix="remove that folder to pack again, or write to another one")
    shards = plan_shards(tables, shard_games, shard_bytes)
    job = ChessJob(split=split, batch_games=batch_games or BATCH_GAMES, world_size=len(shards),
                   vocabulary=encoder.identity, shards=shards).sealed()
    dataset.mkdir(parents=True, exist_ok=True)

    def resume(folder: Path) -> ChessJob:
        refuse_other_version(ChessJob, folder / JOB_FILE)  # says why such a job is not resumed
        try:
            existing = read_job(ChessJob, folder)
        except TokpackError:
            existing = None
        if existing != job:
            raise InputError("another job is in this folder", where=folder / JOB_FILE, fix="use a new one")
        return job

    return write_job(dataset, job, encoder, resume=resume)


def _write_shard(dataset: Path, rank: int, job: ChessJob, encoder: GameEncoder, workers: int | None,
                 report: Callable[[PrepareProgress], None] | None) -> None:
    """Pack shard ``rank`` (one process: ``workers`` is text's); ``report`` hears
    ``PrepareProgress(done_bytes=games packed, n_tokens, n_docs)`` after each batch.

    Raises:
        InputError: a table that changed since the job began, or a game that cannot be encoded
            (naming the table and the row).
    """
    import pyarrow.parquet as pq

    from tokpack.chess.jobs.pack import TableRows, pack_tables

    tables = []
    for piece in job.shards[rank].pieces:
        table = Path(piece.games)
        try:
            unchanged = (table.stat().st_size == piece.source.n_bytes
                         and pq.ParquetFile(table).metadata.num_rows == piece.n_rows)
        except (OSError, ValueError):
            unchanged = False
        if not unchanged:
            raise InputError(f"changed since the job began ({piece.source.sha256[:16]}…)", where=table, fix="start a new job")
        tables.append(TableRows(table, piece.rows, piece.source, piece.month))
    source = joined_source([piece.source for piece in job.shards[rank].pieces])

    def progress(done: int, total: int, tokens: int) -> None:
        if report is not None:
            report(PrepareProgress(stage="encoding", done_bytes=done, total_bytes=total, n_tokens=tokens, n_docs=done))

    pack_tables(tables, encoder, dataset / shard_name(rank), split=job.split, batch_games=job.batch_games,
                progress=progress, source=source, shard=ShardPlace(rank=rank, world_size=job.world_size))


def _origins(job: ChessJob) -> JobOrigins:
    """A chess job's records: the tables in order for the dataset; for each shard its own tables'
    joined record, the game cut and the vocabulary."""
    cut = DocumentCut(rule="game")
    return JobOrigins(job.source(), tuple(ShardOrigin(joined_source([piece.source for piece in shard.pieces]), cut,
                                                      job.vocabulary) for shard in job.shards))


#: The chess kind, as the engines' lifecycle runs it (a finished job's markers and locks removed).
KIND = JobSupply(job=ChessJob, write_shard=_write_shard, origins=_origins,
                 describe_encoder=encoder_spec, rebuild_encoder=encoder_from_spec, clears_markers=True)


__all__ = ["KIND", "SHARD_BYTES", "ChessJob", "ChessShard", "TablePiece", "plan_shards", "start_chess_job"]
