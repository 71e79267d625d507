"""Output that rich would write as plain text, written without importing rich.

Where a command's output goes to no terminal (a pipe, a file, a test runner's buffer), rich
writes no styles, and what it writes for a line of text or for the two-column table of
``prepare``'s summary is fixed text: this module writes that text itself, so such a command
does not import rich (its cost: BENCHMARKS.md, "prepare's fixed cost"). It does so only when it
is sure of rich's result: a stream rich would not treat as a terminal (no ``FORCE_COLOR`` or
``TTY_COMPATIBLE``, no Jupyter, no Windows console), encoded in UTF-8, text with no markup, emoji
code or control character, a table of printable ASCII as wide as the console's width allows;
anything else goes to rich. tests/cli/test_plain_output.py holds the two equal.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from typing import IO, Any

#: Text rich would read as something else: markup (``[``), an emoji code (``:name:``).
_RICH_SYNTAX = re.compile(r"\[|:\S*:")
#: What rich's text wrapping calls a word: the word and the spaces after it.
_WORD = re.compile(r"\s*\S+\s*")


def plain_stream(stream: IO[str] | None = None) -> bool:
    """Whether rich's console on ``stream`` (default: ``sys.stdout``) would write it plain text:
    no terminal, nothing that makes rich treat it as one, and UTF-8. ``False`` when unsure."""
    stream = sys.stdout if stream is None else stream
    if stream is None or sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return False
    if any(name in os.environ for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")):
        return False
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return False
    try:
        if stream.isatty():
            return False
    except (AttributeError, ValueError):
        return False
    return str(getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf")


def console_width() -> int:
    """The width rich's console takes when nothing sets its own: the first of stdin, stdout and
    stderr that is a terminal, ``COLUMNS`` over it, else 80."""
    width = None
    for descriptor in (0, 1, 2):
        try:
            width = os.get_terminal_size(descriptor).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return width or 80


def plain_line(text: str) -> bool:
    """Whether rich writes ``text`` (printed with ``soft_wrap``, no markup, no highlighting) as
    it is."""
    return text.isprintable() and not _RICH_SYNTAX.search(text)


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` (printable ASCII, one line) cut into lines of at most ``width`` as rich's
    ``overflow="fold"`` cuts it: at the starts of words, and a word longer than a line folded."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group(0)
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            chunks = [word[at:at + width] for at in range(0, len(word), width)]
            for number, chunk in enumerate(chunks):
                if start:
                    breaks.append(start)
                if number == len(chunks) - 1:
                    offset = len(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    bounds = [0, *breaks, len(text)]
    return [text[begin:end][:width] if len(text[begin:end]) > width else text[begin:end]
            for begin, end in zip(bounds, bounds[1:])]


def summary_table(title: str, rows: list[tuple[str, str]], width: int) -> str | None:
    """The text rich writes, on a console of ``width`` columns that is no terminal, for
    ``Table(title=title, show_header=False)`` with a first column that does not wrap and a
    second that folds (``overflow="fold"``), holding ``rows``; ``None`` where this cannot be sure
    of it (text that is not printable ASCII or that rich would read as markup, a console too
    narrow for the first column and a few characters of the second)."""
    cells = [title, *(cell for row in rows for cell in row)]
    if not rows or not all(cell.isascii() and cell.isprintable() and not _RICH_SYNTAX.search(cell) for cell in cells):
        return None
    first = max(len(label) for label, _ in rows) + 2
    second = max(len(value) for _, value in rows) + 2
    room = width - 3  # three borders
    if first + second > room:
        second = room - first
        if second < 3:
            return None
    table_width = first + second + 3
    if len(title) > table_width or not title.strip() or title != title.strip():
        return None
    left = (table_width - len(title)) // 2
    lines = [" " * left + title + " " * (table_width - len(title) - left),
             "┌" + "─" * first + "┬" + "─" * second + "┐"]
    for label, value in rows:
        values = _wrapped(value, second - 2) if value else [""]
        for number, line in enumerate(values):
            shown = label if number == 0 else ""
            lines.append(f"│ {shown.ljust(first - 2)} │ {line.ljust(second - 2)} │")
    lines.append("└" + "─" * first + "┴" + "─" * second + "┘")
    return "\n".join(lines) + "\n"


def write(text: str, stream: Any = None) -> None:
    """Write ``text`` to ``stream`` (default: ``sys.stdout``) and flush it, as rich does."""
    stream = sys.stdout if stream is None else stream
    stream.write(text)
    stream.flush()
