"""The progress bar ``tokpack prepare`` draws on a terminal from ``prepare``'s callback, and the
line a command says instead, where no bar is drawn, when numba compiles on a first run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from numba import njit
from rich.console import Console
from typer.testing import CliRunner

from tokpack import BpeTokenizer
from tokpack._progress import PrepareProgress
from tokpack.cli import _console, app
from tokpack.preparing import preparation


def _drawn(monkeypatch: pytest.MonkeyPatch, *events: PrepareProgress) -> str:
    screen = io.StringIO()
    monkeypatch.setenv("FORCE_COLOR", "1")  # draw as on a terminal
    monkeypatch.setattr(_console, "errors", Console(file=screen, force_terminal=True, width=160, color_system=None))
    with _console.prepare_progress() as update:
        for event in events:
            update(event)
    return screen.getvalue().rsplit("\r", 1)[-1]  # the last drawing


def test_the_training_bar_counts_what_training_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = _drawn(monkeypatch, PrepareProgress("training", 0, 2_000_000),
                   PrepareProgress("training", 1_000_000, 2_000_000))
    assert "training" in drawn and "1.0/2.0 MB" in drawn


def test_the_bar_says_while_kernels_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = _drawn(monkeypatch, PrepareProgress("training", 0, 2_000_000),
                   PrepareProgress("training", 2_000_000, 2_000_000, compiling=True))
    assert "compiling kernels (first run only)" in drawn and "2.0/2.0 MB" in drawn
    drawn = _drawn(monkeypatch, PrepareProgress("training", 0, 2_000_000, compiling=True),
                   PrepareProgress("training", 2_000_000, 2_000_000))
    assert "compiling" not in drawn and "training" in drawn


def test_a_total_that_changes_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = _drawn(monkeypatch, PrepareProgress("training", 0, 500_000_000), PrepareProgress("training", 300_000, 300_000))
    assert "300.0/300.0 kB" in drawn and "500" not in drawn


NOTE = "note: compiling kernels (first run only); later runs reuse them"


def _prepare_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """``tokpack prepare --json`` with a given vocabulary (no training), during which numba compiles
    two kernels, as a first run does (two fresh ones: no cache, small, compiled in a moment);
    its stdout and stderr."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Ala ma kota.\nKot ma Alę.\n", encoding="utf-8")
    vocabulary = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).save(tmp_path / "vocabulary")
    fresh = [njit(lambda x: x + 1), njit(lambda x: x * 2)]
    warn = preparation.warn_spelled_special_tokens

    def compiling_first(*args: object, **kwargs: object) -> None:
        assert [kernel(1) for kernel in fresh] == [2, 2]
        warn(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(preparation, "warn_spelled_special_tokens", compiling_first)
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(vocabulary), "--cache-dir",
                                      str(tmp_path / "cache"), "--json"])
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_a_first_run_s_compiling_is_one_line_on_stderr_where_no_bar_is_drawn(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capfd: pytest.CaptureFixture[str]) -> None:
    out, err = _prepare_compiling(tmp_path, monkeypatch)
    assert err.splitlines().count(NOTE) == 1
    assert json.loads(out)["n_docs"] == 1  # stdout stays the JSON
    capfd.readouterr()
    assert njit(lambda x: x - 1)(1) == 0  # after the command: nobody says it
    assert capfd.readouterr() == ("", "")


def test_where_the_bar_is_drawn_it_says_the_compiling_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    monkeypatch.setenv("FORCE_COLOR", "1")  # as on a terminal
    monkeypatch.setattr(_console, "errors", Console(file=screen, force_terminal=True, width=160, color_system=None))
    _, err = _prepare_compiling(tmp_path, monkeypatch)
    assert NOTE not in err
