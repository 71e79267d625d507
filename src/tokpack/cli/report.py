"""``tokpack report``: a self-contained HTML report of a pack, dataset, tokenizer or chess statistics."""

from __future__ import annotations

from pathlib import Path

import typer

from tokpack.cli._console import stdout


def report_command(
    target: Path = typer.Argument(..., help="A pack or sharded dataset folder, a tokenizer.json, or chess statistics JSON."),
    output: Path = typer.Option(..., "--out", "-o", "--output", help="The HTML file to write (self-contained: opens from disk, no network)."),
    block: int = typer.Option(1024, "--block", help="Window length for the length histogram and the padding comparison."),
    data: Path | None = typer.Option(None, "--data", help="With a tokenizer: the folder of domain subfolders to grade it on."),
    baseline: list[Path] = typer.Option([], "--baseline", help="With a tokenizer: another grade JSON (tokpack tokenizer grade --json) to compare with; repeatable."),
    min_global: float | None = typer.Option(None, "--min-global", help="With a tokenizer and --data: your target, the least characters per token over all text (none by default; a tokenizer made by the Polish recipe is held to that recipe's)."),
    min_domain: float | None = typer.Option(None, "--min-domain", help="With a tokenizer and --data: your target, the least characters per token in every domain."),
) -> None:
    """Write an HTML report of TARGET with plots: what it is, whether it verifies, what it holds."""
    from tokpack.report import report_for

    _write_page(output, report_for(target, block=block, data=data, baselines=baseline, min_global=min_global,
                                   min_domain=min_domain), "report")


def explore_command(
    texts: list[str] | None = typer.Argument(None, help="The documents, one argument each (e.g. abab abab baba aaaa)."),
    output: Path = typer.Option(..., "--out", "-o", "--output", help="The HTML file to write (opens from disk, no server, no network)."),
    merges: int = typer.Option(10, "--merges", help="How many merges to compute (training stops earlier when no pair is left)."),
    challenge: Path | None = typer.Option(None, "--challenge", help="Start on this challenge.json instead of TEXTS."),
) -> None:
    """Write the BPE lab: the exact rules run in the page, on TEXTS or a challenge, merge by merge;
    predict the winner before the counts show; write and check proof.json."""
    from tokpack.bpe.challenge import check_challenge, read_json_record
    from tokpack.bpe.records import Challenge
    from tokpack.report.explorer import explorer_page

    record = None
    if challenge is not None:
        record = read_json_record(Challenge, challenge)
        check_challenge(record)
    _write_page(output, explorer_page(texts or [], merges, challenge=record), "explorer")


def _write_page(output: Path, html: str, what: str) -> None:
    from tokpack._atomic import write_atomically

    write_atomically(output, html)  # never a half-written page at ``output``
    stdout().print(f"{what} written to {output} ({len(html):,} bytes)")


def register(app: typer.Typer, bpe_app: typer.Typer) -> None:
    """Add ``report`` to the top-level app and ``explore`` to ``tokpack bpe``."""
    app.command("report")(report_command)
    bpe_app.command("explore")(explore_command)
