"""The ``tokpack`` command line: thin typer commands over the library."""

from __future__ import annotations

import copy
import gc
import os
import sys

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


def main() -> None:
    """Run the command line in this process (``sys.argv``); it ends by raising ``SystemExit``."""
    command_line(sys.argv[1:])()


#: The young generation's collection threshold in the ``tokpack`` command's own process (Python's
#: default: 700): above what one ``prepare`` of a 10 MB file makes in container objects (its
#: imports, pydantic's schemas, the records), nearly all alive to the end.
_YOUNG_OBJECTS = 100_000


def single_threaded_blas() -> None:
    """Have numpy's OpenBLAS start no threads of its own in this process (``OPENBLAS_NUM_THREADS=1``
    unless the environment sets it; effective when numpy is imported later, as the command line
    imports it). No tokpack command does linear algebra, and OpenBLAS's threads, started at
    numpy's import, spin waiting for work that never comes: CPU time a short command pays for
    nothing. Processes the command starts inherit the setting."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def no_pydantic_plugins() -> None:
    """Have pydantic look for no plugins in this process (``PYDANTIC_DISABLE_PLUGINS=__all__``
    unless the environment sets it; an empty value looks for them again): the command line
    validates tokpack's own records only, and looking reads the entry points of every installed
    package once a process. Processes the command starts inherit the setting."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def script() -> None:
    """The ``tokpack`` command's own process (the installed script, ``python -m tokpack.cli``):
    :func:`main`, with the cyclic garbage collector set for a short-lived process, numpy's BLAS on
    one thread (:func:`single_threaded_blas`) and no pydantic plugins (:func:`no_pydantic_plugins`).

    - What importing the command line made is frozen (``gc.freeze``) before the command runs, and
      the young generation is collected after 100,000 new objects instead of 700: a ``prepare``
      of 10 MB then runs no collection at all, where dozens of collections would walk the same
      long-lived objects again. The collector still runs, so a long command's memory stays
      bounded.
    - As the process exits, the objects still alive are frozen, so the interpreter's shutdown frees
      them without walking them in several full collections. tokpack closes its files itself, so
      nothing waits on a collection to be flushed.

    Their costs: BENCHMARKS.md, "prepare's fixed cost".

    A program that calls :func:`main` keeps its collector and its environment as they were."""
    single_threaded_blas()
    no_pydantic_plugins()
    gc.freeze()
    gc.set_threshold(_YOUNG_OBJECTS, *gc.get_threshold()[1:])
    try:
        main()
    finally:
        gc.freeze()
