"""The ``tokpack`` command line: thin typer commands over the library."""

from __future__ import annotations

import typer

from tokpack.cli import _console, corpus, interop, report
from tokpack.cli.bpe import bpe_app
from tokpack.cli.chess import chess_app
from tokpack.cli.tokenizer import app as tokenizer_app

app = typer.Typer(cls=_console.ReportingGroup, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Turn a raw corpus into training batches that are fast, exact and impossible to mix up.")


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an internal error (a bug) instead of one line."),
) -> None:
    """Turn a raw corpus into training batches that are fast, exact and impossible to mix up.

    A mistake in your input is one line on stderr and exit code 2; a bug in tokpack says so and exits 1.
    """
    if debug:
        _console.debug = True


corpus.register(app)
app.add_typer(tokenizer_app, name="tokenizer")
app.add_typer(chess_app, name="chess")
app.add_typer(bpe_app, name="bpe")
report.register(app, bpe_app)
interop.register(app)


def main() -> None:
    """Entry point of the ``tokpack`` script."""
    app()
