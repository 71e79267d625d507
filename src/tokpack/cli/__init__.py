"""The ``tokpack`` command line: thin typer commands over the library."""

from __future__ import annotations

import typer

from tokpack.cli import _console, corpus, interop, report, serve
from tokpack.cli._console import command_group
from tokpack.cli.bpe import bpe_app
from tokpack.cli.chess import chess_app
from tokpack.cli.tokenizer import app as tokenizer_app

app = command_group("Turn a raw corpus into training batches that are fast, exact and impossible to mix up.")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"tokpack {version('tokpack')}")
        raise typer.Exit()


@app.callback()
def _root(
    # A plain bool (not Optional): typer validates any other type with pydantic, which every
    # command's --help would then import.
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
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
serve.register(app)


def main() -> None:
    """Entry point of the ``tokpack`` script."""
    app()
