"""Chess packing as a sharded job: the per-shard task that text's executors run, over month tables
cut into row ranges.

A chess job is a folder laid out like a text job (:mod:`tokpack.engines.shard_task`)::

    DATASET/
      job.json         a :class:`ChessJob`: every shard's month table (path, SHA-256, size) and
                       row range, the split, the encoder's identity; written once by whoever
                       starts the job
      encoder.json     the :class:`~tokpack.engines.encoders.EncoderRecord` every worker rebuilds
                       its encoder from (no scheme is special-cased here)
      shard-00000/ …   one pack per shard, renamed into place only when complete
      shard-00000.done the completion marker
      dataset.json     written by the task that completes the last shard

Shards follow the months in order; a month of ``n`` games with ``shard_games`` set is cut into
``ceil(n / shard_games)`` equal contiguous row ranges (one shard per month without it). The
shards depend on the job alone, never on how many processes run it or on which engine, so
the dataset is byte-identical for any number of workers and for local processes, a job array
or Ray. Each table is hashed once, when the job starts; a shard checks the table's size and row
count against the job before it reads it (hashing a month's table again for each of its shards
would cost more than encoding it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from tokpack._schema import Record, SealedRecord, write_record
from tokpack.corpus.cache import locked
from tokpack.corpus.preparation import PrepareProgress
from tokpack.engines.encoders import ENCODER_FILE, read_encoder, write_encoder
from tokpack.engines.shard_task import JOB_FILE, build_shard, finish_dataset, read_job, unit_span
from tokpack.errors import InputError, TokpackError
from tokpack.store.dataset import ShardedDataset, shard_name
from tokpack.store.format import DATASET_FILE, DocumentCut, Source
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    from tokpack.chess.encoders import GameEncoder


class ChessShard(Record):
    """One shard of a chess job: rows ``[rows[0], rows[1])`` of one month's table."""

    games: str  # the table's absolute path
    source: Source  # its month-relative name, SHA-256 and size, as the shard's pack records it
    n_rows: int = Field(ge=0)  # the table's rows when the job began
    rows: tuple[int, int]


class ChessJob(SealedRecord):
    """``job.json`` of a chess job: everything a shard task needs, so any process anywhere packs
    the same shard."""

    schema_: Literal["tokpack.chess.job.v1"] = Field(default="tokpack.chess.job.v1", alias="schema")
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
        tables = list(dict.fromkeys((s.source.name, s.source.sha256, s.source.n_bytes) for s in self.shards))
        digest = hashlib.sha256("\n".join(f"{name} {sha}" for name, sha, _ in tables).encode()).hexdigest()
        first, last = tables[0][0], tables[-1][0]
        name = first if len(tables) == 1 else f"{first} .. {last} ({len(tables)} tables)"
        return Source(name=name, sha256=digest, n_bytes=sum(n for _, _, n in tables))


def plan_shards(tables: Sequence[Path], shard_games: int | None = None) -> list[ChessShard]:
    """The shards of ``tables`` (month tables, in order): one per table, or each table cut into
    ``ceil(rows / shard_games)`` equal row ranges. Each table is hashed once here.

    Raises:
        InputError: a table that is not readable parquet.
    """
    import pyarrow.parquet as pq

    from tokpack.chess.pack import table_source

    shards = []
    for table in tables:
        try:
            n_rows = pq.ParquetFile(table).metadata.num_rows
        except (OSError, ValueError) as error:
            raise InputError(f"{table}: not a readable parquet file ({error})") from None
        pieces = max(1, -(-n_rows // shard_games)) if shard_games else 1
        source = table_source(Path(table))
        shards += [ChessShard(games=str(Path(table).resolve()), source=source, n_rows=n_rows,
                              rows=unit_span(piece, pieces, n_rows)) for piece in range(pieces)]
    return shards


def start_chess_job(tables: Sequence[Path], dataset: Path, encoder: GameEncoder, *, split: str = "train",
                    shard_games: int | None = None, batch_games: int | None = None) -> ChessJob:
    """Write ``job.json`` and ``encoder.json`` into ``dataset`` (or check the ones there, so an
    interrupted job resumes).

    Raises:
        InputError: ``dataset`` is a finished dataset already, or holds another job.
    """
    from tokpack.chess.pack import BATCH_GAMES, SPLITS

    dataset = Path(dataset)
    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if (dataset / DATASET_FILE).exists():
        raise InputError(dataset, "already exists; a pack is never overwritten")
    shards = plan_shards(tables, shard_games)
    job = ChessJob(split=split, batch_games=batch_games or BATCH_GAMES, world_size=len(shards),
                   vocabulary=encoder.identity, shards=shards).sealed()
    dataset.mkdir(parents=True, exist_ok=True)
    with locked(dataset / JOB_FILE):
        if (dataset / JOB_FILE).exists():
            try:
                existing = read_job(ChessJob, dataset)
            except TokpackError:
                existing = None
            if existing != job:
                raise InputError(dataset / JOB_FILE, "another job is in this folder", fix="use a new one")
            return job
        write_encoder(encoder, dataset / ENCODER_FILE)
        write_record(job, dataset / JOB_FILE)
    return job


def run_chess_shard(dataset: Path, rank: int, *, report: Callable[[PrepareProgress], None] | None = None) -> bool:
    """Pack shard ``rank`` of the chess job in ``dataset`` unless it is already done; then, if
    every shard is done, write ``dataset.json``. The task every executor runs (``task=`` of
    :func:`tokpack.engines.run_local` / :func:`~tokpack.engines.run_ray`, or a job array's
    ``tokpack shard run``).

    ``report`` hears ``PrepareProgress(done_bytes=games packed, n_tokens, n_docs)`` after each batch.

    Returns:
        Whether this call wrote the shard.

    Raises:
        InputError: a rank outside the job, a table that changed since the job began, or a game
            that cannot be encoded (naming the table and the row).
    """
    dataset = Path(dataset)
    job = read_job(ChessJob, dataset)
    wrote = build_shard(dataset, rank, job.world_size, lambda: _write_shard(dataset, rank, job, report), job=job.seal)
    finish_chess_job(dataset)
    return wrote


def _write_shard(dataset: Path, rank: int, job: ChessJob, report: Callable[[PrepareProgress], None] | None) -> None:
    import pyarrow.parquet as pq

    from tokpack.chess.pack import pack_games

    encoder: GameEncoder = read_encoder(dataset / ENCODER_FILE, job.vocabulary)
    shard = job.shards[rank]
    table = Path(shard.games)
    try:
        unchanged = (table.stat().st_size == shard.source.n_bytes
                     and pq.ParquetFile(table).metadata.num_rows == shard.n_rows)
    except (OSError, ValueError):
        unchanged = False
    if not unchanged:
        raise InputError(table, f"changed since the job began ({shard.source.sha256[:16]}…)", fix="start a new job")

    def progress(done: int, total: int, tokens: int) -> None:
        if report is not None:
            report(PrepareProgress(stage="encoding", done_bytes=done, total_bytes=total, n_tokens=tokens, n_docs=done))

    pack_games(table, encoder, dataset / shard_name(rank), split=job.split, batch_games=job.batch_games,
               progress=progress, rows=shard.rows, source=shard.source)


def finish_chess_job(dataset: Path) -> ShardedDataset | None:
    """Write a chess job's ``dataset.json`` once every shard is done; return the dataset then."""
    job = read_job(ChessJob, Path(dataset))
    return finish_dataset(Path(dataset), job.world_size, source=job.source(), cut=DocumentCut(rule="game"), job=job.seal)


__all__ = ["ENCODER_FILE", "ChessJob", "ChessShard", "finish_chess_job", "plan_shards", "run_chess_shard",
           "start_chess_job"]
