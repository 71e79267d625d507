"""``tokpack report``: a self-contained HTML report of a pack, dataset, tokenizer or chess statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tokpack._atomic import write_atomically
from tokpack.cli._console import console


def report_command(
    target: Path = typer.Argument(..., help="A pack or sharded dataset folder, a tokenizer.json, or chess statistics JSON."),
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write (self-contained: opens from disk, no network)."),
    block: int = typer.Option(1024, "--block", help="Window length for the length histogram and the padding comparison."),
    data: Optional[Path] = typer.Option(None, "--data", help="With a tokenizer: the folder of domain subfolders to grade it on."),
    baseline: list[Path] = typer.Option([], "--baseline", help="With a tokenizer: another grade JSON (tokpack tokenizer grade --json) to compare with; repeatable."),
) -> None:
    """Write an HTML report of TARGET with plots: what it is, whether it verifies, what it holds."""
    from tokpack.report import report_for

    _write_page(output, report_for(target, block=block, data=data, baselines=baseline), "report")


def explore_command(
    texts: list[str] = typer.Argument(..., help="The documents, one argument each (e.g. abab abab baba aaaa)."),
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write (opens from disk, no server, no network)."),
    merges: int = typer.Option(10, "--merges", help="How many merges to compute (training stops earlier when no pair is left)."),
) -> None:
    """Write the BPE explorer: step through the exact rules on TEXTS, merge by merge, in a browser."""
    from tokpack.report.explorer import explorer_page

    _write_page(output, explorer_page(texts, merges), "explorer")


def _write_page(output: Path, html: str, what: str) -> None:
    write_atomically(output, html)  # never a half-written page at ``output``
    console.print(f"{what} written to {output} ({len(html):,} bytes)")


def register(app: typer.Typer, bpe_app: typer.Typer) -> None:
    """Add ``report`` to the top-level app and ``explore`` to ``tokpack bpe``."""
    app.command("report")(report_command)
    bpe_app.command("explore")(explore_command)
