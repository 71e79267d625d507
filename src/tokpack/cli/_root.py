"""The ``tokpack`` group itself: its help, ``--version`` and ``--debug``, as an app of no command
yet (:func:`new_app`), which :mod:`tokpack.cli._app` gives every command and
:func:`tokpack.cli.command_line` one."""

from __future__ import annotations

import typer

from tokpack.cli import _console
from tokpack.cli._console import command_group

#: What ``tokpack --help`` says first.
SUMMARY = "Turn a raw corpus into training batches that are fast, exact and impossible to mix up."


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"tokpack {version('tokpack')}")
        raise typer.Exit()


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


def new_app() -> typer.Typer:
    """The ``tokpack`` group with its own options and help, and no command yet."""
    app = command_group(SUMMARY)
    app.callback()(_root)
    return app
