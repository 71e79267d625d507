"""What every command shares: the consoles, the error report (exit 2 for a mistake, 1 for a bug), progress bars."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

try:  # typer 0.2x carries its own copy of click, whose exceptions its parser raises
    from typer._click import exceptions as usage
except ImportError:  # older typer runs on click itself
    from click import exceptions as usage  # type: ignore[no-redef]

from tokpack._extras import missing_extra
from tokpack.cli._flags import Flags, flags_of, in_flags
from tokpack.cli._values import read_plainly
from tokpack.errors import InputError, TokpackError

# rich, pydantic and the library are imported by what uses them, so that ``tokpack --help``
# (and every command's --help) starts without loading them.
if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    from tokpack._progress import PrepareProgress


def _make_console(**options: Any) -> Console:
    """A rich console that takes its width from ``COLUMNS`` (or the terminal) each time it prints.

    rich reads ``COLUMNS`` once, when the console is made; a caller that sets it later (a wrapper
    script, a test runner invoking the app in-process) would be ignored and tables wrapped at the
    width of that moment.
    """
    from rich.console import Console

    console = Console(**options)
    # With no fixed size, rich's `size` asks the terminal and the environment on every call.
    console._width = None
    console._height = None
    return console


def __getattr__(name: str) -> Any:
    """``console`` (stdout) and ``errors`` (stderr): made on first use, then kept."""
    if name not in ("console", "errors"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = globals()[name] = _make_console(stderr=name == "errors")
    return made


if TYPE_CHECKING:
    console: Console
    errors: Console


def stdout() -> Console:
    """The console on stdout (:data:`console`)."""
    made: Console | None = globals().get("console")
    return made if made is not None else __getattr__("console")


def stderr() -> Console:
    """The console on stderr (:data:`errors`): errors, warnings and progress bars."""
    made: Console | None = globals().get("errors")
    return made if made is not None else __getattr__("errors")


def print_line(text: str) -> None:
    """Print ``text`` on stdout as ``stdout().print(text, soft_wrap=True, highlight=False,
    markup=False)`` does, without rich where it would write the text as it is
    (:mod:`tokpack.cli._plain`)."""
    from tokpack.cli import _plain

    if _plain.plain_stream() and _plain.plain_line(text):
        _plain.write(text + "\n")
    else:
        stdout().print(text, soft_wrap=True, highlight=False, markup=False)


def print_summary(title: str, rows: list[tuple[str, str]]) -> None:
    """Print a table of two columns titled ``title``, without a header, on stdout: a label that
    is never wrapped and a value that wraps and folds (a hash is cut onto the next line, never
    with "…"). Without rich where rich would write plain text it is sure of (:mod:`tokpack.cli._plain`)."""
    from tokpack.cli import _plain

    if _plain.plain_stream():
        text = _plain.summary_table(title, rows, _plain.console_width())
        if text is not None:
            _plain.write(text)
            return
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    stdout().print(table)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


#: A user's mistake (a :class:`~tokpack.errors.TokpackError` or a file-system error): one line, this code.
EXIT_BAD_INPUT = 2
#: A bug in tokpack: a short message saying so, the traceback only behind ``--debug``.
EXIT_BUG = 1
#: Stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it (SIGTERM and SIGHUP: 128 + theirs).
EXIT_INTERRUPTED = 130
#: What an interrupted command keeps, by command: the rest of the message.
_RESUMES = {"prepare": "; a sharded job keeps its complete shards and resumes when rerun",
            "shard": "; the job keeps its complete shards"}
#: Set by the root command's ``--debug`` (or ``TOKPACK_DEBUG=1``): let a bug's traceback through.
debug = os.environ.get("TOKPACK_DEBUG", "") not in ("", "0")


def report_failure(error: BaseException, flags: Flags | None = None) -> int:
    """Print ``error`` the way the CLI reports it and return the exit code it deserves.

    A user's mistake is one line (``error: path: byte N: what is wrong``) and exit code 2, the
    Python parameters it names said as the failing command's ``flags``; anything else is a bug,
    reported as one and exit code 1.
    """
    from pydantic import ValidationError
    from rich.markup import escape

    if isinstance(error, ImportError):
        error = missing_extra(error) or error  # a missing optional dependency names its extra
    if isinstance(error, (TokpackError, OSError, ValidationError)):
        line = _first_line(error)
        if flags is not None and isinstance(error, TokpackError):
            line = in_flags(line, flags)
        stderr().print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    stderr().print(f"[bold red]internal error[/] (a bug in tokpack, not your input): {type(error).__name__}: "
                 f"{escape(_first_line(error))}; rerun with --debug for the traceback and please report it",
                 highlight=False, soft_wrap=True)
    return EXIT_BUG


def _interrupted(error: KeyboardInterrupt, command: str | None) -> int:
    """Say that ``command`` was interrupted (by Ctrl-C, or by the signal a
    :class:`tokpack.cli.Terminated` names) and return the exit code: 128 + the signal."""
    signum = getattr(error, "signum", None)
    by = "" if signum is None else f" by {error}"
    try:  # after a SIGHUP the terminal may be gone: the clean-up is done, saying so is a courtesy
        stderr().print(f"interrupted{by}: nothing half-written is kept{_RESUMES.get(command or '', '')}",
                       highlight=False, soft_wrap=True)
    except OSError:
        pass
    return EXIT_INTERRUPTED if signum is None else 128 + signum


def _first_line(error: BaseException) -> str:
    from pydantic import ValidationError

    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def in_command_flags(message: str) -> str:
    """``message`` with the Python parameters it names said as the running command's flags (for a
    command that prints its own errors; every other error is said so by :func:`report_failure`)."""
    try:  # typer 0.2x carries its own copy of click, whose context its commands run in
        from typer._click.globals import get_current_context
    except ImportError:
        from click.globals import get_current_context  # type: ignore[no-redef]
    ctx = get_current_context(silent=True)
    return message if ctx is None else in_flags(message, _failing_flags(ctx))


def _exits() -> tuple[type[BaseException], ...]:
    """The exits a command or click raises on purpose (click's own, and typer's copy of it)."""
    import click

    return (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort,
            typer.Exit, typer.Abort, typer.exceptions.TyperException)


def _failing_flags(ctx: Any) -> dict[str, tuple[str, str | None]]:
    """The flags of the command that failed (the group's invoked subcommand) and of its groups."""
    params = []
    command = ctx.command.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
    if command is not None:
        params.extend(command.params)
    while ctx is not None:
        params.extend(ctx.command.params)
        ctx = ctx.parent
    return flags_of(reversed(params))


class ReportingGroup(TyperGroup):
    """A command group whose every failure goes through :func:`report_failure`, and whose usage
    errors (an unknown option, a value not among the choices) are one line and exit code 2 too.
    Its own options and its commands' read their values without pydantic where that gives the
    same values (:mod:`tokpack.cli._values`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        read_plainly(self)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and not isinstance(command, ReportingGroup):
            read_plainly(command)
        return command

    def invoke(self, ctx: Any) -> Any:  # click's Context, or typer's own copy of it in typer 0.2x
        try:
            if ctx.parent is None:  # the ``tokpack`` group: once around the whole command
                with compiling_noted():
                    return super().invoke(ctx)
            return super().invoke(ctx)
        except KeyboardInterrupt as error:
            if debug:
                raise
            raise typer.Exit(_interrupted(error, ctx.invoked_subcommand)) from None
        except Exception as error:
            if debug or isinstance(error, _exits()):  # the commands' own exits and click's usage errors keep their codes
                raise
            raise typer.Exit(report_failure(error, _failing_flags(ctx))) from None

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except usage.NoArgsIsHelpError as error:
            error.show()
            sys.exit(EXIT_BAD_INPUT)
        except usage.UsageError as error:
            command = error.ctx.command_path if error.ctx is not None else "tokpack"
            message = error.format_message().replace("Value error, ", "")  # pydantic's prefix on a bad choice
            stderr().print(f"[bold red]error:[/] {_escape(message)} (see '{command} -h')", highlight=False, soft_wrap=True)
            sys.exit(EXIT_BAD_INPUT)
        except usage.ClickException as error:
            stderr().print(f"[bold red]error:[/] {_escape(error.format_message())}", highlight=False, soft_wrap=True)
            sys.exit(error.exit_code)
        except typer.Abort as error:
            if isinstance(error.__cause__, KeyboardInterrupt) and hasattr(error.__cause__, "signum"):
                # SIGTERM or SIGHUP outside a command (click makes any interrupt there an Abort)
                sys.exit(_interrupted(error.__cause__, None))
            stderr().print("aborted")
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


#: Every command takes ``-h`` as well as ``--help``.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def command_group(help: str) -> typer.Typer:
    """A typer app with the settings every ``tokpack`` command group shares: ``-h``, errors
    reported by :class:`ReportingGroup`, no shell completion, no rich tracebacks, and plain help
    text (no ``<bool>`` type labels, no markup)."""
    return typer.Typer(cls=ReportingGroup, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, rich_markup_mode=None, context_settings=CONTEXT_SETTINGS,
                       help=help)


StorageOptions: Any = typer.Option(None, "--storage-options", help='fsspec options for URLs, as JSON (e.g. \'{"endpoint_url": "http://127.0.0.1:9000"}\').')


def storage_options_from(text: str | None) -> dict[str, Any]:
    """The ``--storage-options`` JSON object as a dict (empty when not given).

    >>> storage_options_from('{"anon": true}')
    {'anon': True}
    """
    if text is None:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"--storage-options: not JSON ({error.msg})", fix='e.g. \'{"anon": true}\'') from None
    if not isinstance(options, dict):
        raise InputError("--storage-options must be a JSON object")
    return options


class TrainerName(str, Enum):
    """Vocabulary trainers, the same default (``exact``) for every command: the names of
    :data:`tokpack.vocab.trainers.Trainer`, spelled again here because importing that module loads
    the whole vocabulary package, which ``tokpack --help`` must not (a test holds them equal)."""

    exact = "exact"
    hf = "hf"


class OnErrorName(str, Enum):
    """What to do with an unreadable file or record."""

    raise_ = "raise"
    skip = "skip"


class EngineName(str, Enum):
    """Who runs the shards of a sharded job."""

    local = "local"
    ray = "ray"
    array = "array"


def _count_columns() -> tuple[ProgressColumn, ProgressColumn]:
    """Two rich progress columns: tokens per second, and documents and shards done."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class TokensPerSecond(ProgressColumn):
        def render(self, task: Task) -> Text:
            elapsed = task.elapsed or 0.0
            tokens = task.fields.get("tokens", 0)
            rate = f"{tokens / elapsed / 1e6:.2f} M tok/s" if elapsed > 0 and tokens else "- tok/s"
            return Text(rate, style="cyan")

    class Documents(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(f"{task.fields.get('docs', 0):,} docs, {task.fields.get('shards', '')}", style="magenta")

    return TokensPerSecond(), Documents()


#: What a progress bar says while numba compiles the kernels of its stage.
COMPILING = "compiling kernels (first run only)"
#: What a command says on stderr when numba starts compiling and no progress bar is drawn.
COMPILING_NOTE = f"note: {COMPILING}; later runs reuse them"
#: numba's module of events, where a listener of its compilations is registered.
_NUMBA_EVENTS = "numba.core.event"


def _bars_drawn() -> bool:
    """Whether progress bars are drawn on stderr: on a terminal only, as in a log file a redrawn
    bar is noise (and rich is not needed to say so)."""
    from tokpack.cli._plain import plain_stream

    return not plain_stream(sys.stderr) and stderr().is_terminal


@contextmanager
def compiling_noted() -> Iterator[None]:
    """Inside, when numba first starts compiling a kernel in this process (a first run: tens of
    seconds), :data:`COMPILING_NOTE` on stderr, once, unless progress bars are drawn there (on a
    terminal ``prepare``'s bar says it): in a pipe, a log file or a job's output the wait would
    otherwise pass without a word. Never on stdout, which ``--json`` keeps for its JSON. numba is
    not imported for this: the listener is registered when something else imports numba."""
    import threading

    from tokpack._lazy import when_imported

    said, lock = [False], threading.Lock()
    registered: list[tuple[Any, Any]] = []

    def listen(events: Any) -> None:
        class Noted(events.Listener):
            def on_start(self, _event: Any) -> None:
                with lock:
                    if said[0]:
                        return
                    said[0] = True
                if not _bars_drawn():
                    typer.echo(COMPILING_NOTE, err=True)

            def on_end(self, _event: Any) -> None:
                pass

        listener = Noted()
        events.register("numba:compile", listener)
        registered.append((events, listener))

    stop_waiting = when_imported(_NUMBA_EVENTS, listen)
    try:
        yield
    finally:
        stop_waiting()
        for events, listener in registered:
            events.unregister("numba:compile", listener)


@contextmanager
def prepare_progress() -> Iterator[Callable[[PrepareProgress], None]]:
    """A rich progress bar fed by ``prepare()``'s callback: bytes, bytes/s, tokens/s, ETA."""
    if not _bars_drawn():
        yield lambda event: None
        return
    errors = stderr()
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    columns = [TextColumn("{task.description:>9}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               _count_columns()[0], TimeRemainingColumn()]
    with Progress(*columns, console=errors, transient=False) as progress:
        tasks: dict[str, Any] = {}

        def update(event: PrepareProgress) -> None:
            if event.stage not in tasks:
                tasks[event.stage] = progress.add_task(event.stage, total=max(event.total_bytes, 1), tokens=0)
            progress.update(tasks[event.stage], completed=event.done_bytes, total=max(event.total_bytes, 1),
                            tokens=event.n_tokens, description=COMPILING if event.compiling else event.stage)

        yield update


@contextmanager
def shard_progress(total_bytes: int, shards: int) -> Iterator[tuple[Callable[[int], None], Callable[[int, int, int, int], None]]]:
    """One rich progress bar for a whole sharded job, fed by every worker: bytes, bytes/s,
    tokens/s, documents, shards done, ETA. Yields ``(on_done, on_progress)``."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    errors = stderr()
    columns = [TextColumn("{task.description:>9}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               *_count_columns(), TimeRemainingColumn()]
    with Progress(*columns, console=errors, disable=not errors.is_terminal) as progress:
        task = progress.add_task("encoding", total=max(total_bytes, 1), tokens=0, docs=0, shards=f"0/{shards} shards")
        latest: dict[int, tuple[int, int, int]] = {}
        totals = [0, 0, 0]  # kept as events come, so an event costs the same however many shards
        finished: set[int] = set()

        def on_progress(rank: int, done_bytes: int, tokens: int, docs: int) -> None:
            before = latest.get(rank, (0, 0, 0))
            latest[rank] = (done_bytes, tokens, docs)  # a retried shard starts again from zero
            for index, (old, new) in enumerate(zip(before, latest[rank])):
                totals[index] += new - old
            progress.update(task, completed=totals[0], tokens=totals[1], docs=totals[2])

        def on_done(rank: int) -> None:
            finished.add(rank)
            progress.update(task, shards=f"{len(finished)}/{shards} shards")

        yield on_done, on_progress
