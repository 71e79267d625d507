"""What ``tokpack chess tokenize`` does, as a library function: BPE, statistics, parity fixture, packs.

:func:`tokenize` reads a :class:`~tokpack.chess.jobs.config.ChessPipelineConfig`. The months it packs
come from :func:`split_months`: one month, a list, every month of ``games_dir`` (``"all"``), and
validation either named or as the latest months holding at least ``val_fraction`` of the games.
Each split is packed as one sharded dataset (:mod:`tokpack.chess.jobs.shards`: shards cut by size,
``shard_mb`` of moves or ``shard_games`` games, each spanning as many months as fit, every month a
named range), run by the same executors as text (local processes,
Ray, or a scheduler's job array), byte-identical for any number of workers; every reader reads
it as one stream. All inputs are checked before anything is written, and a split that fails
removes what this run made, so a rerun starts clean (a killed run resumes its job instead).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tokpack.chess.jobs.config import ChessPipelineConfig
from tokpack.chess.pgn.convert import month_parquet
from tokpack.chess.schemes import SCHEMES, PositionSampling, make_encoder
from tokpack.engines.lifecycle import JOB_FILE
from tokpack.errors import InputError
from tokpack.store.format import DATASET_FILE

if TYPE_CHECKING:
    from tokpack.chess.jobs.stats import ChessStats
    from tokpack.chess.schemes.game_encoder import GameEncoder
    from tokpack.chess.schemes.uci_bpe import BpeEncoder

#: ``progress(label, done, total)``: games packed so far in the split being packed.
Progress = Callable[[str, int, int], None]


@dataclass
class PackedSplit:
    """One split written by :func:`tokenize`: its folder, months and totals."""

    folder: str
    path: Path
    months: list[str]
    n_games: int
    n_tokens: int
    dtype: str
    unknown_moves: int
    n_shards: int


@dataclass
class TokenizeResult:
    """What :func:`tokenize` wrote."""

    encoder: GameEncoder
    written: list[Path] = field(default_factory=list)
    packs: list[PackedSplit] = field(default_factory=list)
    jobs: list[Path] = field(default_factory=list)  # jobs written for a job array (engine "array")
    stats: ChessStats | None = None


def available_months(games_dir: Path) -> list[str]:
    """Every ``YYYY-MM`` with a ``games.parquet`` under ``games_dir``, in order."""
    found = []
    for path in sorted(Path(games_dir).glob("year=*/month=*/games.parquet")):
        found.append(f"{path.parent.parent.name[5:]}-{path.parent.name[6:]}")
    return found


def split_months(cfg: ChessPipelineConfig, *, check: bool = True) -> tuple[list[str], list[str]]:
    """The training and validation months of ``cfg``; with ``check``, every month's table must exist.

    Raises:
        InputError: a missing month, a month in both splits, or nothing left to train on.
    """
    import pyarrow.parquet as pq

    if cfg.train_month is not None:
        train = [cfg.train_month]
    elif cfg.train_months == "all":
        train = available_months(cfg.games_dir)
    else:
        train = list(cfg.train_months or [])
    if cfg.val_month is not None:
        val = [cfg.val_month]
    elif cfg.val_months is not None:
        val = list(cfg.val_months)
    else:
        rows = {m: pq.ParquetFile(month_parquet(cfg.games_dir, m)).metadata.num_rows for m in train
                if month_parquet(cfg.games_dir, m).is_file()}
        total, held, val = sum(rows.values()), 0, []
        for month in sorted(train, reverse=True):  # the latest months: no training on the future
            if held >= (cfg.val_fraction or 0) * total and val:
                break
            val.insert(0, month)
            held += rows.get(month, 0)
        train = [m for m in train if m not in val]
    both = sorted(set(train) & set(val))
    if both and cfg.train_month is None:  # (train_month = val_month is allowed, as it always was)
        raise InputError(f"month {both[0]} is in both the training and the validation months")
    if not train:
        raise InputError("no training month left", where=cfg.games_dir, fix="name train_months or lower val_fraction")
    for month in [*train, *val] if check else ():
        path = month_parquet(cfg.games_dir, month)
        if not path.is_file():
            raise InputError("no such file", where=path, fix=f"convert the games of {month} first (tokpack chess convert)")
    return train, val


def pack_months(cfg: ChessPipelineConfig, months: list[str], encoder: GameEncoder, destination: Path, split: str,
                progress: Callable[[int, int], None] | None = None) -> PackedSplit | None:
    """Pack ``months`` into the sharded dataset ``destination`` with ``cfg``'s engine and workers.

    A job (:mod:`tokpack.chess.jobs.shards`) is written first, then its shards are run: in this
    process for the local engine with one worker, else by the executor named ``cfg.engine``
    (local processes or Ray, as for text). With ``engine = "array"`` only the job is written
    (returns ``None``): a scheduler's job array runs ``tokpack shard run DESTINATION``. An
    interrupted job resumes: the shards already complete are kept.
    """
    from tokpack._progress import PrepareProgress
    from tokpack.chess.jobs.shards import start_chess_job
    from tokpack.engines.executors import EXECUTORS, RunOptions
    from tokpack.engines.lifecycle import finish_job, run_shard

    tables = [month_parquet(cfg.games_dir, month) for month in months]
    job = start_chess_job(tables, destination, encoder, split=split, shard_games=cfg.shard_games,
                          shard_bytes=cfg.shard_bytes)
    if cfg.engine == "array":
        return None
    total = sum(piece.rows[1] - piece.rows[0] for shard in job.shards for piece in shard.pieces)
    done = [0] * job.world_size

    def on_progress(rank: int, games: int, ids: int, documents: int) -> None:
        done[rank] = games
        if progress is not None:
            progress(sum(done), total)

    ranks = list(range(job.world_size))
    if cfg.engine == "local" and cfg.workers == 1:  # no process to spawn: the shards in order, here
        for rank in ranks:
            def report(event: PrepareProgress, rank: int = rank) -> None:
                on_progress(rank, event.done_bytes, event.n_tokens, event.n_docs)

            run_shard(destination, rank, report=report)
    else:
        options = RunOptions(processes=cfg.workers, address=cfg.ray_address, task=run_shard, on_progress=on_progress)
        EXECUTORS[cfg.engine](destination, ranks, options)
    dataset = finish_job(destination)
    if dataset is None:
        raise InputError("not every shard is complete", where=destination, fix="rerun to resume")
    meta = dataset.meta
    return PackedSplit(destination.name, destination, months, meta.counts.get("n_games", meta.n_docs), meta.n_tokens,
                       meta.dtype, meta.counts.get("unknown_moves", 0), len(meta.shards))


def tokenize(cfg: ChessPipelineConfig, scheme: str, *, pack: bool = False, stats: bool = False,
             export_fixture: bool = False, games: Path | None = None, progress: Progress | None = None,
             status: Callable[[str], None] | None = None) -> TokenizeResult:
    """Train the BPE (for ``scheme="bpe"``, or when statistics or the fixture need it), compute
    statistics, export the parity fixture and pack the training and validation months, as asked.

    Raises:
        InputError: an unknown scheme, a missing month, an existing pack, or no fixture_pgn.
    """
    if scheme not in SCHEMES:
        raise InputError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    # Statistics or a BPE from games= need no converted month; packing (or reading the first
    # training month) does.
    train, val = split_months(cfg, check=pack or games is None)
    source = games if games is not None else month_parquet(cfg.games_dir, train[0])
    splits = (("train", "train", train), ("val", "validation", val))
    for folder, _, _ in splits if pack else ():
        destination = cfg.out_dir / scheme / folder
        # Refused now, not after training a BPE; an unfinished job (job.json, no dataset.json) resumes.
        if destination.exists() and (not (destination / JOB_FILE).exists() or (destination / DATASET_FILE).exists()):
            raise InputError("already exists; a pack is never overwritten", where=destination,
                             fix="remove that folder to pack again, or set another out_dir in the config")
    if export_fixture and cfg.fixture_pgn is None:
        raise InputError("export_fixture=True needs fixture_pgn in the config")
    written: list[Path] = []
    bpe = None
    if scheme == "bpe" or stats or export_fixture:
        bpe = _bpe(cfg, source, retrain=scheme == "bpe", written=written, status=status)
    sampling = PositionSampling(sample=cfg.position_sample, seed=cfg.position_seed) if scheme == "position" else None
    result = TokenizeResult(encoder=make_encoder(scheme, bpe, sampling), written=written)
    if stats:
        result.stats = _stats(cfg, source, bpe, status)
        written.append(cfg.out_dir / "stats.json")
    if export_fixture:
        from tokpack.chess.jobs.fixture import build_parity, write_parity

        assert cfg.fixture_pgn is not None
        fixture = build_parity(cfg.fixture_pgn, [make_encoder("uci"), make_encoder("san"), make_encoder("bpe", bpe)])
        write_parity(fixture, cfg.out_dir / "parity.json")
        written.append(cfg.out_dir / "parity.json")
    if pack:
        made: list[Path] = []
        try:
            for folder, split, months in splits:
                destination = cfg.out_dir / scheme / folder
                made.append(destination)
                packed = pack_months(cfg, months, result.encoder, destination, split, _bar(progress, folder))
                if packed is None:  # only its job is written: the dataset is the job array's to write
                    result.jobs.append(destination)
                else:
                    result.packs.append(packed)
                    written.append(destination)
        except BaseException:
            for path in made:  # a failed split leaves no half of the pair behind
                shutil.rmtree(path, ignore_errors=True)
            raise
    return result


def _bar(progress: Progress | None, folder: str) -> Callable[[int, int], None] | None:
    """``progress`` with the split's folder filled in."""
    if progress is None:
        return None
    report = progress
    return lambda done, total: report(folder, done, total)


def _bpe(cfg: ChessPipelineConfig, source: Path, *, retrain: bool, written: list[Path],
         status: Callable[[str], None] | None) -> BpeEncoder:
    """The pipeline's BPE: trained (and saved) when asked or missing, else loaded."""
    from tokpack.chess.schemes.uci_bpe import BpeEncoder, train_bpe_from_parquet

    if not retrain and cfg.bpe_file.is_file():
        return BpeEncoder.load(cfg.bpe_file)
    if status is not None:
        status(f"training a {cfg.bpe_vocab_size}-id BPE on {_first_games(source, cfg.bpe_train_games)} of {source}")
    bpe = train_bpe_from_parquet(source, cfg.bpe_vocab_size, cfg.bpe_train_games)
    reached = bpe.vocab_size()
    if reached < cfg.bpe_vocab_size and not cfg.bpe_allow_smaller_vocab:  # as the text trainers refuse it
        raise InputError(f"the BPE's training games reach only {reached:,} ids of the {cfg.bpe_vocab_size:,} "
                         "asked for (too few pairs occur twice)", where=source,
                         fix=f"set bpe_vocab_size = {reached} or less in the config, train on more games "
                             "(bpe_train_games, games=PATH), or accept fewer with bpe_allow_smaller_vocab=True")
    bpe.save(cfg.bpe_file)
    written.append(cfg.bpe_file)
    return bpe


def _first_games(table: Path, wanted: int) -> str:
    """How many of a month's games a step reads, as a status line says it: ``the first 2,000
    games``, or ``all 1,600 games`` of a month that holds fewer (told by its row count)."""
    import pyarrow.parquet as pq

    held = pq.ParquetFile(table).metadata.num_rows
    return f"the first {wanted:,} games" if held > wanted else f"all {held:,} game{'s' if held != 1 else ''}"


def _stats(cfg: ChessPipelineConfig, source: Path, bpe: BpeEncoder | None, status: Callable[[str], None] | None) -> ChessStats:
    from tokpack._schema import write_record
    from tokpack.chess.jobs.stats import compute_stats

    if status is not None:
        status(f"encoding {_first_games(source, cfg.stats_games)} of {source} with every scheme")
    stats = compute_stats(source, [make_encoder("uci"), make_encoder("san"), make_encoder("bpe", bpe)],
                          cfg.stats_games, cfg.max_len)
    path = cfg.out_dir / "stats.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_record(stats, path)
    return stats
