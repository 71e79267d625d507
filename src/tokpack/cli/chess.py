"""``tokpack chess convert`` and ``tokpack chess tokenize``: chess games as a corpus."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tokpack.cli._console import command_group, console, errors
from tokpack.errors import InputError

chess_app = command_group("Chess games as a corpus: PGN to monthly parquet; uci, san and bpe schemes; packs, "
                          "statistics and the parity fixture.")


@chess_app.command("convert")
def convert_command(
    pgn: list[Path] = typer.Argument(..., help="PGN files, read in this order."),
    out: Path = typer.Option(..., "--out", "-o", help="New folder for year=YYYY/month=MM/games.parquet and convert-report.json."),
    flush_games: int = typer.Option(100_000, "--flush-games", min=1,
                                    help="Games held in memory before they are spilled to part files."),
) -> None:
    """Convert PGN games to monthly parquet tables of UCI moves, skipping (and counting) bad games."""
    from tokpack.chess.pgn import convert_pgn

    with _progress("reading", "bytes") as update:
        report = convert_pgn(pgn, out, flush_games=flush_games, progress=update)
    table = Table(title=f"Converted into {out}", show_header=False)
    table.add_row("games read", f"{report.games_read:,}")
    table.add_row("games written", f"{report.games_written:,}")
    table.add_row("months", f"{len(report.months):,}" + (f" ({min(report.months)} .. {max(report.months)})" if report.months else ""))
    for reason, count in report.skipped.items():
        if count:
            table.add_row(f"skipped: {reason}", f"{count:,}  first: {report.first_skipped[reason]}")
    console.print(table)


@chess_app.command("tokenize")
def tokenize_command(
    scheme: str = typer.Option(..., "--scheme", help="Tokenization scheme: uci, san or bpe (bpe (re)trains its BPE first)."),
    pack: bool = typer.Option(False, "--pack", help="Pack the train and validation months into out_dir/<scheme>/{train,val}."),
    stats: bool = typer.Option(False, "--stats", help="Compare the three schemes on the first stats_games games; write out_dir/stats.json."),
    export_fixture: bool = typer.Option(False, "--export-fixture", help="Encode fixture_pgn with every scheme into out_dir/parity.json."),
    games: Optional[Path] = typer.Option(None, "--games", help="Games parquet for BPE training and statistics (default: the training month)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Pipeline config (TOML); default ./tokpack-chess.toml."),
) -> None:
    """Train the BPE, compute statistics, export the parity fixture and pack months, as asked."""
    from tokpack.chess.encoders import SCHEMES  # here, not at the top: the chess extra may be missing

    if scheme not in SCHEMES:
        raise InputError(f"--scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    from tokpack.chess.config import load_config
    from tokpack.chess.encoders import make_encoder
    from tokpack.chess.pgn import month_parquet

    cfg = load_config(config)
    source = games if games is not None else month_parquet(cfg.games_dir, cfg.train_month)
    splits = (("train", "train", cfg.train_month), ("val", "validation", cfg.val_month))
    for folder, _, _ in splits if pack else ():
        if (cfg.out_dir / scheme / folder).exists():  # refuse now, not after training a BPE
            raise InputError(f"{cfg.out_dir / scheme / folder}: already exists; a pack is never overwritten")
    written: list[Path] = []
    bpe = None
    if scheme == "bpe" or stats or export_fixture:
        bpe = _bpe(cfg, source, retrain=scheme == "bpe", written=written)
    if stats:
        written.append(_stats(cfg, source, bpe))
    if export_fixture:
        from tokpack.chess.fixture import build_parity, write_parity

        if cfg.fixture_pgn is None:
            raise InputError(f"{config or 'config'}: --export-fixture needs fixture_pgn")
        fixture = build_parity(cfg.fixture_pgn, [make_encoder("uci"), make_encoder("san"), make_encoder("bpe", bpe)])
        write_parity(fixture, cfg.out_dir / "parity.json")
        written.append(cfg.out_dir / "parity.json")
    encoder = make_encoder(scheme, bpe)
    if pack:
        from tokpack.chess.pack import pack_games

        packed: list[Path] = []
        try:
            for folder, split, month in splits:
                with _progress(f"{scheme} {folder}", "games") as update:
                    meta = pack_games(month_parquet(cfg.games_dir, month), encoder, cfg.out_dir / scheme / folder,
                                      split=split, workers=cfg.workers,
                                      progress=lambda done, total, tokens: update(done, total))
                packed.append(cfg.out_dir / scheme / folder)
                console.print(f"{scheme} {folder} ({month}): {meta.n_docs:,} games, {meta.n_tokens:,} ids ({meta.dtype}), "
                              f"{meta.counts.get('unknown_moves', 0):,} unknown moves")
        except BaseException:
            # The splits are made together or not at all: a train pack left by a failed validation
            # month would make the rerun refuse ("already exists").
            for folder_path in packed:
                shutil.rmtree(folder_path, ignore_errors=True)
            raise
        written.extend(packed)
    console.print(f"scheme:     {scheme}\nvocab_size: {encoder.vocab_size()}\nidentity:   {encoder.identity.sha256}")
    for path in written:
        console.print(f"wrote {path}", highlight=False)


def _bpe(cfg, source: Path, *, retrain: bool, written: list[Path]):  # type: ignore[no-untyped-def]
    """The pipeline's BPE: trained (and saved) when asked or missing, else loaded."""
    from tokpack.chess.bpe import BpeEncoder, train_bpe_from_parquet

    if not retrain and cfg.bpe_file.is_file():
        return BpeEncoder.load(cfg.bpe_file)
    with console.status(f"training a {cfg.bpe_vocab_size}-id BPE on the first {cfg.bpe_train_games:,} games of {source}"):
        bpe = train_bpe_from_parquet(source, cfg.bpe_vocab_size, cfg.bpe_train_games)
    bpe.save(cfg.bpe_file)
    written.append(cfg.bpe_file)
    return bpe


def _stats(cfg, source: Path, bpe) -> Path:  # type: ignore[no-untyped-def]
    from tokpack._schema import write_record
    from tokpack.chess.encoders import make_encoder
    from tokpack.chess.stats import compute_stats

    with console.status(f"encoding the first {cfg.stats_games:,} games of {source} with every scheme"):
        stats = compute_stats(source, [make_encoder("uci"), make_encoder("san"), make_encoder("bpe", bpe)],
                              cfg.stats_games, cfg.max_len)
    path = cfg.out_dir / "stats.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_record(stats, path)
    table = Table(title=f"Tokens per game, first {stats.n_games:,} games of {stats.source} (framing included)")
    for column in ("scheme", "vocabulary", "mean", "p50", "p95", "max", f"% <= {stats.max_len}"):
        table.add_column(column, justify="left" if column == "scheme" else "right")
    for name, row in stats.schemes.items():
        table.add_row(name, f"{row.vocabulary.n_vocab:,}", f"{row.mean:.2f}", f"{row.p50:g}", f"{row.p95:g}",
                      f"{row.max:,}", f"{row.within_max_len:.2f}")
    console.print(table)
    longest = Table(title="Longest BPE tokens")
    for column in ("token", "chars", "moves"):
        longest.add_column(column)
    for token in stats.bpe_longest:
        longest.add_row(token.token, str(token.n_chars), f"{token.moves:g}")
    console.print(longest)
    return path


@contextmanager
def _progress(label: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr, shown from the first ``update(done, total)`` on.

    Nothing is drawn for work refused before it starts, so such an error stays one line.
    """
    columns = [TextColumn(f"{label:>12}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
               TimeElapsedColumn(), TimeRemainingColumn()]
    progress = Progress(*columns, console=errors, transient=False)
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
