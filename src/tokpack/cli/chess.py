"""``tokpack chess convert`` and ``tokpack chess tokenize``: chess games as a corpus."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tokpack.cli._console import EngineName, StorageOptions, command_group, stderr, stdout, storage_options_from
from tokpack.errors import InputError

if TYPE_CHECKING:
    from tokpack.chess.jobs.stats import ChessStats

chess_app = command_group("Chess games as a corpus: PGN or Lichess's Parquet to monthly parquet; uci, san, bpe, char "
                          "and position schemes; packs, statistics, the parity fixture and Karvonen's blocks.")


@chess_app.command("convert")
def convert_command(
    pgn: list[str] = typer.Argument(..., help="PGN files (.pgn, .pgn.zst, .pgn.bz2, .pgn.gz; - reads standard input) or Parquet games "
                                              "(Lichess's Hugging Face shards: .parquet files or a folder of them, local or at an fsspec URL such as "
                                              "hf://datasets/Lichess/standard-chess-games/data/year=2016/month=01), read in this order."),
    out: Path = typer.Option(..., "--out", "-o", help="New folder for year=YYYY/month=MM/games.parquet and convert-report.json."),
    flush_games: int = typer.Option(25_000, "--flush-games", min=1,
                                    help="Games held in memory before they are spilled to part files."),
    workers: int = typer.Option(1, "--workers", min=1, max=256, help="Processes that read chunks of games; output is identical for any number."),
    clocks: bool = typer.Option(False, "--clocks", help="Add a clocks column: each move's [%clk] in seconds (null where missing)."),
    min_elo: int | None = typer.Option(None, "--min-elo", min=0, help="Keep games whose players are both rated at least this."),
    rated_only: bool = typer.Option(False, "--rated-only", help="Keep games whose Event says Rated (Lichess)."),
    time_controls: str | None = typer.Option(None, "--time-control", help="Keep these TimeControl values, comma-separated (180+2,300+0)."),
    speed: str | None = typer.Option(None, "--speed", help="Keep these Lichess speeds, comma-separated: ultrabullet, bullet, blitz, rapid, classical."),
    termination: str | None = typer.Option(None, "--termination", help="Keep these Termination values, comma-separated (normal)."),
    storage_options: str | None = StorageOptions,
) -> None:
    """Convert PGN games (or Lichess's Parquet games) to monthly parquet tables of UCI moves, skipping (and counting) bad games."""
    from rich.table import Table

    from tokpack.chess.pgn.convert import convert_pgn
    from tokpack.chess.pgn.games import GameFilter

    def listed(value: str | None) -> tuple[str, ...]:
        return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()

    filters = GameFilter(min_elo=min_elo, rated_only=rated_only, time_controls=listed(time_controls),
                         speeds=tuple(s.lower() for s in listed(speed)), terminations=listed(termination))
    with _progress("reading", "bytes") as update:
        report = convert_pgn(pgn, out, flush_games=flush_games, progress=update, filters=filters, clocks=clocks,
                             workers=workers, storage_options=storage_options_from(storage_options))
    table = Table(title=f"Converted into {out}", show_header=False)
    table.add_row("games read", f"{report.games_read:,}")
    table.add_row("games written", f"{report.games_written:,}")
    table.add_row("months", f"{len(report.months):,}" + (f" ({min(report.months)} .. {max(report.months)})" if report.months else ""))
    for reason, count in report.skipped.items():
        if count:
            table.add_row(f"skipped: {reason}", f"{count:,}  first: {report.first_skipped[reason]}")
    for name, count in report.filtered.items():
        table.add_row(f"filtered: {name}", f"{count:,}")
    stdout().print(table)


@chess_app.command("tokenize")
def tokenize_command(
    scheme: str = typer.Option(..., "--scheme", help="Tokenization scheme: uci, san, bpe (which (re)trains its BPE first), char (Karvonen's characters) or position (ChessBench's positions and moves)."),
    pack: bool = typer.Option(False, "--pack", help="Pack the train and validation months into out_dir/<scheme>/{train,val}."),
    stats: bool = typer.Option(False, "--stats", help="Compare the three schemes on the first stats_games games; write out_dir/stats.json."),
    export_fixture: bool = typer.Option(False, "--export-fixture", help="Encode fixture_pgn with every scheme into out_dir/parity.json."),
    games: Path | None = typer.Option(None, "--games", help="Games parquet for BPE training and statistics (default: the first training month)."),
    config: Path | None = typer.Option(None, "--config", help="Pipeline config (TOML); default ./tokpack-chess.toml."),
    workers: int | None = typer.Option(None, "--workers", min=1, max=256, help="Shard processes (default: the config's workers, else 1). The bytes do not depend on it."),
    engine: EngineName | None = typer.Option(None, "--engine", help="Who runs the shards: local processes, ray, or array (write the jobs for a scheduler's job array). Default: the config's engine, else local."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="An existing Ray cluster to join (with --engine ray)."),
    shard_mb: float | None = typer.Option(None, "--shard-mb", min=0.000001, max=1e12, help="Close a shard once its games' moves reach this many MB as UCI text (default: the config's, else 64)."),
    shard_games: int | None = typer.Option(None, "--shard-games", min=1, help="Close a shard once it holds this many games (default: the config's, else no limit)."),
    bpe_allow_smaller_vocab: bool = typer.Option(False, "--allow-smaller-vocab", help="Accept a BPE of fewer ids than bpe_vocab_size when the training games cannot reach it (the config's bpe_allow_smaller_vocab)."),
) -> None:
    """Train the BPE, compute statistics, export the parity fixture and pack months, as asked.

    Packing writes each split as one sharded dataset, cut by size (--shard-mb, --shard-games) across
    months, each month a named range; byte-identical for any --workers and --engine.
    """
    from tokpack.chess.jobs.config import load_config
    from tokpack.chess.jobs.pipeline import tokenize
    from tokpack.chess.schemes import SCHEMES

    if scheme not in SCHEMES:  # before the config is even read
        raise InputError(f"--scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")

    cfg = load_config(config)
    overrides = {"workers": workers, "engine": None if engine is None else engine.value, "ray_address": ray_address,
                 "shard_mb": shard_mb, "shard_games": shard_games,
                 "bpe_allow_smaller_vocab": bpe_allow_smaller_vocab or None}
    cfg = cfg.model_validate({**cfg.model_dump(by_alias=True), **{k: v for k, v in overrides.items() if v is not None}})
    bars: dict[str, Callable[[int, int], None]] = {}
    with _progress(f"{scheme} train", "games") as train_bar, _progress(f"{scheme} val", "games") as val_bar:
        bars.update(train=train_bar, val=val_bar)
        result = tokenize(cfg, scheme, pack=pack, stats=stats, export_fixture=export_fixture, games=games,
                          progress=lambda folder, done, total: bars[folder](done, total),
                          status=lambda message: stdout().print(message, highlight=False))
    if result.stats is not None:
        _print_stats(result.stats)
    for packed in result.packs:
        months = packed.months[0] if len(packed.months) == 1 else f"{packed.months[0]} .. {packed.months[-1]}, {len(packed.months)} months"
        stdout().print(f"{scheme} {packed.folder} ({months}): {packed.n_games:,} games, {packed.n_tokens:,} ids ({packed.dtype}), "
                      f"{packed.unknown_moves:,} unknown moves, {packed.n_shards:,} shard{'s' if packed.n_shards != 1 else ''} "
                      f"in {packed.path}", highlight=False)
    for job in result.jobs:
        from tokpack.engines.executors import task_of

        _, world_size = task_of(job)
        stdout().print(f"job written to {job}; run its {world_size} shard{'s' if world_size != 1 else ''} as a job array, e.g. with Slurm:\n"
                      f"  sbatch --array=0-{world_size - 1} --wrap 'tokpack shard run {job}'\n"
                      "the last shard to finish writes dataset.json", highlight=False)
    encoder = result.encoder
    stdout().print(f"scheme:     {scheme}\nvocab_size: {encoder.vocab_size()}\nidentity:   {encoder.identity.sha256}")
    for path in result.written:
        stdout().print(f"wrote {path}", highlight=False)


def _print_stats(stats: ChessStats) -> None:
    from rich.table import Table

    table = Table(title=f"Tokens per game, first {stats.n_games:,} games of {stats.source} (framing included)")
    for column in ("scheme", "vocabulary", "mean", "p50", "p95", "max", f"% <= {stats.max_len}"):
        table.add_column(column, justify="left" if column == "scheme" else "right")
    for name, row in stats.schemes.items():
        table.add_row(name, f"{row.vocabulary.n_vocab:,}", f"{row.mean:.2f}", f"{row.p50:g}", f"{row.p95:g}",
                      f"{row.max:,}", f"{row.within_max_len:.2f}")
    stdout().print(table)
    longest = Table(title="Longest BPE tokens")
    for column in ("token", "chars", "moves"):
        longest.add_column(column)
    for token in stats.bpe_longest:
        longest.add_row(token.token, str(token.n_chars), f"{token.moves:g}")
    stdout().print(longest)


@contextmanager
def _progress(label: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr, shown from the first ``update(done, total)`` on.

    Nothing is drawn for work refused before it starts, so such an error stays one line.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = [TextColumn(f"{label:>12}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
               TimeElapsedColumn(), TimeRemainingColumn()]
    progress = Progress(*columns, console=stderr(), transient=False)
    task = progress.add_task(label, total=None, start=False)

    def update(done: int, total: int) -> None:
        if not progress.live.is_started:
            progress.start()
            progress.start_task(task)
        progress.update(task, completed=done, total=max(total, 1))

    try:
        yield update
    finally:
        if progress.live.is_started:
            progress.stop()


@chess_app.command("export-web")
def export_web_command(
    out: Path = typer.Argument(..., help="New folder for tokpack-chess.js and <scheme>/vocab.json."),
    bpe: Path | None = typer.Option(None, "--bpe", help="The bpe scheme's tokenizer.json (out_dir/bpe/tokenizer.json); without it, uci and san only."),
) -> None:
    """Write the browser twin of the encoders: a dependency-free JS module and each scheme's vocab.json."""
    from tokpack.chess.web import export_web

    trained = None
    if bpe is not None:
        from tokpack.chess.schemes.uci_bpe import BpeEncoder

        trained = BpeEncoder.load(bpe)
    for path in export_web(out, trained):
        stdout().print(f"wrote {path}", highlight=False)


@chess_app.command("blocks")
def blocks_command(
    packed: Path = typer.Argument(..., help="The char scheme's packs (out_dir/char, holding train/ and val/), or one char pack."),
    out: Path = typer.Option(..., "--out", "-o", help="New folder for train.bin, val.bin and meta.pkl."),
) -> None:
    """Write char packs as Adam Karvonen's nanoGPT data: blocks of 1,024 characters, uint8, and his meta.pkl."""
    from tokpack.chess.schemes.char import export_blocks

    written = export_blocks(packed, out)
    for name, blocks in written.items():
        stdout().print(f"wrote {out / (name + '.bin')}: {blocks:,} blocks of 1,024 characters", highlight=False)
    stdout().print(f"wrote {out / 'meta.pkl'}", highlight=False)
