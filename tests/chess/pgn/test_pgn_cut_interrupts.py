"""Ctrl-C while the compiled cut of a chunk of PGN runs raises ``KeyboardInterrupt``: the cut
returns one array, whose boxing passes a pending interrupt on (a tuple's made a ``SystemError``:
tests/serve/test_layout_interrupts.py), so it is called without holding signals, once a chunk."""

from __future__ import annotations

from interrupted_calls import interrupted_calls

from conftest import REPO


def test_ctrl_c_while_a_chunk_of_pgn_is_cut_raises_keyboard_interrupt() -> None:
    games = REPO / "tests" / "data" / "python-chess" / "cutechess-fischerrandom.pgn"
    outcomes = interrupted_calls(f"""
        from pathlib import Path

        from tokpack.chess.pgn.read import cut_chunk

        data = Path({str(games)!r}).read_bytes() * 100

        def call():
            cut_chunk(data, 0)
    """)
    assert set(outcomes) == {"KeyboardInterrupt"}, outcomes
