"""What the command line writes without rich (:mod:`tokpack.cli._plain`) is what rich writes, to
the byte, wherever it writes it; and ``prepare`` writing to no terminal does not import rich."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

import tokpack
from tokpack.cli import _plain

#: Rows as prepare's summary has them.
SUMMARY = [("documents", "11"), ("tokens", "4,056,994 (uint32)"), ("  train", "documents 0-11, tokens 0-4,056,994"),
           ("vocabulary", "bytelevel-bpe sha256 25e6c9bd3f583101454a3a9c739ea31d46f193a6cbb6c17ea2a5d2574c835560"),
           ("n_vocab", "100,277"), ("encoder", "compiled (tiktoken's ids)"),
           ("compression", "2.00 characters per token")]


def _richs_table(title: str, rows: list[tuple[str, str]], width: int) -> str:
    out = io.StringIO()
    table = Table(title=title, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(file=out, width=width).print(table)
    return out.getvalue()


@pytest.mark.parametrize("width", range(1, 241))
def test_the_summary_is_richs_at_every_width(width: int) -> None:
    mine = _plain.summary_table("Prepared corpus", SUMMARY, width)
    assert mine is None or mine == _richs_table("Prepared corpus", SUMMARY, width)
    if width >= 40:  # a console of 40 columns or more: written here
        assert mine is not None


# Words of letters, punctuation and runs of spaces, some longer than any line.
_CELL = st.text(st.sampled_from("ab-,.()'0189 "), max_size=90) | st.text(st.sampled_from("x "), max_size=200)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.text(st.sampled_from("abc _-"), min_size=0, max_size=16), _CELL), min_size=1, max_size=6),
       st.integers(min_value=1, max_value=160),
       st.sampled_from(["Prepared corpus", "T", "a title longer than some tables are wide"]))
def test_any_table_is_richs_or_left_to_rich(rows: list[tuple[str, str]], width: int, title: str) -> None:
    mine = _plain.summary_table(title, rows, width)
    assert mine is None or mine == _richs_table(title, rows, width)


@pytest.mark.parametrize("cell", ["[bold]x[/]", "a :smile: b", "tab\there", "é", "line\nbreak"])
def test_text_rich_reads_otherwise_is_left_to_rich(cell: str) -> None:
    assert _plain.summary_table("T", [("label", cell)], 80) is None


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60))
def test_a_plain_line_is_what_rich_writes(text: str) -> None:
    if not _plain.plain_line(text):
        return
    out = io.StringIO()
    Console(file=out, width=20).print(text, soft_wrap=True, highlight=False, markup=False)
    assert out.getvalue() == text + "\n"


@pytest.mark.parametrize("columns", [None, "57", "200", "abc", ""])
def test_the_width_is_richs(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    console = Console(file=io.StringIO())
    console._width = None  # as the command line's consoles have it: the size asked each time
    console._height = None
    assert _plain.console_width() == console.size.width


class _Stream(io.StringIO):
    def __init__(self, *, tty: bool, encoding: str) -> None:
        super().__init__()
        self._tty, self._encoding = tty, encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


@pytest.mark.parametrize(("tty", "encoding", "environment", "plain"), [
    (False, "utf-8", {}, True), (False, "UTF-8", {}, True), (True, "utf-8", {}, False), (False, "ascii", {}, False),
    (False, "utf-8", {"FORCE_COLOR": "1"}, False), (False, "utf-8", {"FORCE_COLOR": ""}, False),
    (False, "utf-8", {"TTY_COMPATIBLE": "1"}, False), (False, "utf-8", {"TTY_COMPATIBLE": "0"}, False),
])
def test_a_stream_is_plain_only_where_rich_writes_it_plain(tty: bool, encoding: str, environment: dict[str, str],
                                                          plain: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    stream = _Stream(tty=tty, encoding=encoding)
    assert _plain.plain_stream(stream) is plain
    if plain:
        console = Console(file=stream)
        assert not console.is_terminal and not console.options.ascii_only


PREPARE = """
import atexit, sys
import tokpack.cli as cli
atexit.register(lambda: print("RICH", any(name.startswith("rich") for name in sys.modules), file=sys.stderr))
sys.argv = ["tokpack", *sys.argv[1:]]
cli.script()
"""


@pytest.mark.parametrize("columns", ["50", "120"])
def test_prepare_writes_richs_text_without_rich(columns: str, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nsecond line here\n" * 20, encoding="utf-8")
    ranks = tmp_path / "tiny.tiktoken"
    ranks.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)), encoding="utf-8")
    said = {}
    for way, extra in [("plain", {}), ("rich", {"TTY_COMPATIBLE": "0"})]:  # the setting sends it to rich, no terminal
        environment = {name: value for name, value in os.environ.items()
                       if name not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
        environment |= {"PYTHONPATH": str(Path(tokpack.__file__).parents[1]), "COLUMNS": columns,
                        "TOKPACK_CACHE": str(tmp_path / "cache"), **extra}
        done = subprocess.run([sys.executable, "-c", PREPARE, "prepare", str(corpus), "--vocab", str(ranks), "--pattern",
                               "gpt2", "-o", str(tmp_path / way), "--document-bytes", "64"],
                              capture_output=True, text=True, env=environment, check=False, timeout=600, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr[-3000:]
        said[way] = (done.stdout.replace(str(tmp_path / way), "OUT"), done.stderr.strip().splitlines()[-1])
    assert said["plain"][0] == said["rich"][0] and "Prepared corpus" in said["plain"][0]
    assert said["plain"][1] == "RICH False" and said["rich"][1] == "RICH True"
