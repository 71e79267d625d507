"""The ``tokpack`` app: its commands registered, and :func:`command_line`, the app that runs one
command line. Read through :mod:`tokpack.cli` (``tokpack.cli.app``, ``tokpack.cli.command_line``),
which imports this module when first asked for them, or when its :func:`~tokpack.cli.script` sets up
the command's own process."""

from __future__ import annotations

import copy

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


#: The options of the ``tokpack`` group itself that take no value (any other before the command's
#: name, or none at all, builds every command).
_ROOT_FLAGS = frozenset({"--debug"})


def command_line(args: list[str]) -> typer.Typer:
    """The app that runs ``tokpack ARGS``: when ``args`` name one command or command group of
    the top level (after the group's own ``--debug`` at most), :data:`app` with that one alone, so
    click builds one command's parameters instead of every command's (all the same, as that
    command runs and shows its help the same); else :data:`app` itself (no command, ``--help``,
    ``--version``, a name that is no command: the whole list is what answers them).

    >>> len(command_line(["prepare", "c.txt"]).registered_commands), command_line(["--help"]) is app
    (1, True)
    """
    at = 0
    while at < len(args) and args[at] in _ROOT_FLAGS:
        at += 1
    if at >= len(args) or args[at].startswith("-") or app.registered_callback is None:
        return app
    name = args[at]
    commands = [info for info in app.registered_commands if info.name == name]
    groups = [info for info in app.registered_groups if info.name == name]
    if len(commands) + len(groups) != 1:
        return app
    alone = copy.copy(app)
    alone.registered_commands, alone.registered_groups = commands, groups
    return alone
