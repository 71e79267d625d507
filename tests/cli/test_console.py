"""The progress bar ``tokpack prepare`` draws on a terminal from ``prepare``'s callback."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tokpack._progress import PrepareProgress
from tokpack.cli import _console


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
