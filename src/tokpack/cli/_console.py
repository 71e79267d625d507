"""What every command shares: the consoles, one-line errors with exit code 2, the progress bar."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperGroup

try:  # typer 0.2x carries its own copy of click, whose exceptions its parser raises
    from typer._click import exceptions as usage
except ImportError:  # older typer runs on click itself
    from click import exceptions as usage  # type: ignore[no-redef]
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.markup import escape
from rich.text import Text

from tokpack.corpus.preparation import PrepareProgress

console = Console()
errors = Console(stderr=True)
Command = TypeVar("Command", bound=Callable[..., Any])

#: A bad input is reported as one line and this exit code, never a traceback.
EXIT_BAD_INPUT = 2

#: Every command takes ``-h`` as well as ``--help``.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


class _OneLineUsageErrors(TyperGroup):
    """A command group whose usage errors (an unknown option, a value not among the choices) are
    one line and exit code 2, like every other error of the user's."""

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
            errors.print(f"[bold red]error:[/] {escape(message)} (see '{command} -h')", highlight=False,
                         soft_wrap=True, markup=True)
            sys.exit(EXIT_BAD_INPUT)
        except usage.ClickException as error:
            errors.print(f"[bold red]error:[/] {error.format_message()}", highlight=False, soft_wrap=True)
            sys.exit(error.exit_code)
        except typer.Abort:
            errors.print("aborted")
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


def command_group(help: str) -> typer.Typer:
    """A typer app with the settings every ``tokpack`` command group shares: ``-h``, one-line
    usage errors, no shell completion, no rich tracebacks, and plain help text (no ``<bool>``
    type labels, no markup)."""
    return typer.Typer(cls=_OneLineUsageErrors, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, rich_markup_mode=None, context_settings=CONTEXT_SETTINGS,
                       help=help)


class TrainerName(str, Enum):
    """Vocabulary trainers, the same default (``exact``) for every command."""

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


def one_line_errors(command: Command) -> Command:
    """Turn the library's input errors into ``error: …`` on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (ValueError, OSError, ImportError) as error:
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            errors.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None

    return wrapper  # type: ignore[return-value]


class _TokensPerSecond(ProgressColumn):
    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        tokens = task.fields.get("tokens", 0)
        rate = f"{tokens / elapsed / 1e6:.2f} M tok/s" if elapsed > 0 and tokens else "- tok/s"
        return Text(rate, style="cyan")


@contextmanager
def prepare_progress() -> Iterator[Callable[[PrepareProgress], None]]:
    """A rich progress bar fed by ``prepare()``'s callback: bytes, bytes/s, tokens/s, ETA."""
    columns = [TextColumn("{task.description:>9}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               _TokensPerSecond(), TimeRemainingColumn()]
    # Drawn only on a terminal: in a log file a redrawn bar is noise.
    with Progress(*columns, console=errors, transient=False, disable=not errors.is_terminal) as progress:
        tasks: dict[str, Any] = {}

        def update(event: PrepareProgress) -> None:
            if event.stage not in tasks:
                tasks[event.stage] = progress.add_task(event.stage, total=max(event.total_bytes, 1), tokens=0)
            progress.update(tasks[event.stage], completed=event.done_bytes, tokens=event.n_tokens)

        yield update


class _Documents(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(f"{task.fields.get('docs', 0):,} docs, {task.fields.get('shards', '')}", style="magenta")


@contextmanager
def shard_progress(total_bytes: int, shards: int) -> Iterator[tuple[Callable[[int], None], Callable[[int, int, int, int], None]]]:
    """One rich progress bar for a whole sharded job, fed by every worker: bytes, bytes/s,
    tokens/s, documents, shards done, ETA. Yields ``(on_done, on_progress)``."""
    columns = [TextColumn("{task.description:>9}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               _TokensPerSecond(), _Documents(), TimeRemainingColumn()]
    with Progress(*columns, console=errors, disable=not errors.is_terminal) as progress:
        task = progress.add_task("encoding", total=max(total_bytes, 1), tokens=0, docs=0, shards=f"0/{shards} shards")
        latest: dict[int, tuple[int, int, int]] = {}
        finished: set[int] = set()

        def on_progress(rank: int, done_bytes: int, tokens: int, docs: int) -> None:
            latest[rank] = (done_bytes, tokens, docs)  # a retried shard starts again from zero
            totals = [sum(values) for values in zip(*latest.values())]
            progress.update(task, completed=totals[0], tokens=totals[1], docs=totals[2])

        def on_done(rank: int) -> None:
            finished.add(rank)
            progress.update(task, shards=f"{len(finished)}/{shards} shards")

        yield on_done, on_progress
