"""The ``tokpack`` command line: thin typer commands over the library."""

from __future__ import annotations

import typer

from tokpack.cli import corpus, interop, report
from tokpack.cli.bpe import bpe_app
from tokpack.cli.chess import chess_app
from tokpack.cli.tokenizer import app as tokenizer_app

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Turn a raw corpus into training batches that are fast, exact and impossible to mix up.")
corpus.register(app)
app.add_typer(tokenizer_app, name="tokenizer")
app.add_typer(chess_app, name="chess")
app.add_typer(bpe_app, name="bpe")
report.register(app, bpe_app)
interop.register(app)


def main() -> None:
    """Entry point of the ``tokpack`` script."""
    app()
