"""``tokpack report``: a self-contained HTML report of a pack, dataset, tokenizer or chess statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tokpack.cli._console import console, one_line_errors


@one_line_errors
def report_command(
    target: Path = typer.Argument(..., help="A pack or sharded dataset folder, a tokenizer.json, or chess statistics JSON."),
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write (self-contained: opens from disk, no network)."),
    block: int = typer.Option(1024, "--block", help="Window length for the length histogram and the padding comparison."),
    data: Optional[Path] = typer.Option(None, "--data", help="With a tokenizer: the folder of domain subfolders to grade it on."),
    baseline: list[Path] = typer.Option([], "--baseline", help="With a tokenizer: another grade JSON (tokpack tokenizer grade --json) to compare with; repeatable."),
) -> None:
    """Write an HTML report of TARGET with plots: what it is, whether it verifies, what it holds."""
    from tokpack.report import report_for

    html = report_for(target, block=block, data=data, baselines=baseline)
    partial = output.with_name(f".{output.name}.partial")
    partial.write_text(html, encoding="utf-8")
    partial.replace(output)
    console.print(f"report written to {output} ({len(html):,} bytes)")


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
