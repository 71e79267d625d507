"""The ``tokpack`` command line: thin typer commands over the library.

The app with every command is :mod:`tokpack.cli._app`'s (``tokpack.cli.app`` imports it on first
use, PEP 562); :func:`command_line`, which :func:`main` runs, imports what the command line it
builds needs. This module imports neither typer nor a command, so the ``tokpack`` script's own
process is set up (:func:`script`) before they are imported.
"""

from __future__ import annotations

import copy
import gc
import os
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING

from tokpack._lazy import lazy_attributes

if TYPE_CHECKING:
    import typer

    from tokpack.cli._app import app

__all__ = ["Terminated", "app", "command_line", "main", "no_pydantic_plugins", "script", "single_threaded_blas",
           "stop_on_termination"]

__getattr__, __dir__ = lazy_attributes(globals(), {"app": "tokpack.cli._app"})

#: The options of the ``tokpack`` group itself that take no value (any other before the command's
#: name, or none at all, builds every command).
_ROOT_FLAGS = frozenset({"--debug"})

#: The top-level names :func:`tokpack.cli.corpus.register` adds (``tests/cli`` holds them equal).
CORPUS_NAMES = frozenset({"prepare", "inspect", "demo", "merge", "shard"})


def command_line(args: list[str]) -> typer.Typer:
    """The app that runs ``tokpack ARGS``: when ``args`` name one command or command group of
    the top level (after the group's own ``--debug`` at most), an app with that one alone, so
    click builds one command's parameters instead of every command's (all the same, as that
    command runs and shows its help the same), and a name of :data:`CORPUS_NAMES` imports no other
    command's module; else :data:`app`, every command (no command, ``--help``, ``--version``, a
    name that is no command: the whole list is what answers them).

    >>> from tokpack.cli import app
    >>> len(command_line(["prepare", "c.txt"]).registered_commands), command_line(["--help"]) is app
    (1, True)
    """
    at = 0
    while at < len(args) and args[at] in _ROOT_FLAGS:
        at += 1
    name = args[at] if at < len(args) and not args[at].startswith("-") else None
    if name in CORPUS_NAMES:
        from tokpack.cli import corpus
        from tokpack.cli._root import new_app

        whole = new_app()
        corpus.register(whole)
    else:
        from tokpack.cli._app import app as whole

        if name is None or whole.registered_callback is None:
            return whole
    commands = [info for info in whole.registered_commands if info.name == name]
    groups = [info for info in whole.registered_groups if info.name == name]
    if len(commands) + len(groups) != 1:
        return whole
    alone = copy.copy(whole)
    alone.registered_commands, alone.registered_groups = commands, groups
    return alone


def main() -> None:
    """Run the command line in this process (``sys.argv``); it ends by raising ``SystemExit``."""
    command_line(sys.argv[1:])()


#: The young generation's collection threshold in the ``tokpack`` command's own process (Python's
#: default: 700): above what one ``prepare`` of a 10 MB file makes in container objects (the
#: command line's imports, the library's, pydantic's schemas, the records), nearly all alive to
#: the end.
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


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (``signum``) in the ``tokpack`` command's own process, raised where it
    lands (:func:`stop_on_termination`). A ``KeyboardInterrupt``, so that every clean-up that runs
    on Ctrl-C runs for it too: temporary folders removed, locks released, worker processes
    stopped, and the command's one ``interrupted`` line."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def stop_on_termination() -> None:
    """Have SIGTERM (``timeout``, Slurm, a batch system's kill) and SIGHUP (a closed terminal or
    ssh session) raise :class:`Terminated` in this process, each unless it is ignored (``nohup``
    ignores SIGHUP; what the parent ignored stays ignored). For the ``tokpack`` command's own
    process: a program that imports tokpack keeps its own signal handling."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _raise_terminated)


def script() -> None:
    """The ``tokpack`` command's own process (the installed script, ``python -m tokpack.cli``):
    :func:`main`, with the cyclic garbage collector set for a short-lived process, numpy's BLAS on
    one thread (:func:`single_threaded_blas`), no pydantic plugins (:func:`no_pydantic_plugins`),
    and SIGTERM and SIGHUP stopping the command as Ctrl-C does
    (:func:`stop_on_termination`: the same clean-up and one line, exit 143 or 129).

    - The young generation is collected after 100,000 new objects instead of 700, from before the
      command line (typer, click, the command) is imported: a ``prepare`` of 10 MB then runs no
      collection at all, where dozens of collections, in those imports and after them, would walk
      the same long-lived objects again. What the command line's import made is frozen
      (``gc.freeze``) before the command runs. The collector still runs, so a long command's
      memory stays bounded.
    - As the process exits, the objects still alive are frozen, so the interpreter's shutdown frees
      them without walking them in several full collections. tokpack closes its files itself, so
      nothing waits on a collection to be flushed.

    Their costs: BENCHMARKS.md, "prepare's fixed cost".

    A program that calls :func:`main` keeps its collector, its environment and its signal handling
    as they were."""
    stop_on_termination()
    try:
        single_threaded_blas()
        no_pydantic_plugins()
        gc.set_threshold(_YOUNG_OBJECTS, *gc.get_threshold()[1:])
        from tokpack.cli import _root  # noqa: F401  (imported here: under the rarer collector, then frozen)

        gc.freeze()
        try:
            main()
        finally:
            gc.freeze()
    except Terminated as stopped:  # outside a command (its imports): nothing to clean up or say
        raise SystemExit(128 + stopped.signum) from None
