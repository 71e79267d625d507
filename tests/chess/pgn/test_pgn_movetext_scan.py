"""The compiled movetext scanner (comments, variations, ``;`` and ``%`` lines dropped or refused) against python-chess.

Random legal games are written with what Lichess and other sites put between moves: comments
holding brace-, parenthesis- and escape-like text and non-ASCII letters, nested variations (with
comments and junk words inside), NAGs, ``;`` comments and ``%`` escape lines. Read several at a
time, each game's main line must be python-chess's own (``chess.pgn.read_game``); games without a
``;`` or ``%`` line must be taken by the fast path (not handed back to python-chess), and the
whole reader (tags and all) must give python-chess's answer for every game.
"""

from __future__ import annotations

import io
import random
import re

import chess
import chess.pgn
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.chess.pgn.games import PgnGame, Skipped, read_chunk
from tokpack.chess.pgn.read import Collector, clock_movetext, clocks_of, new_codes, resolve_games

from lichess_games import _pick

# Comment text: brace-like and escape-like characters, non-ASCII letters and spaces (never '}').
_COMMENT_TEXT = st.text(alphabet="ab1 ({[;%)]$.-éß中\u00a0\u2003\n\t", max_size=20)
_JUNK_WORD = st.sampled_from(["e4", "Nf3", "O-O", "1...", "$3", "!?", "xx", "é5", "Qh8#", "1-0", "*", "--"])


@st.composite
def _between(draw: st.DrawFn, depth: int, after_move: bool) -> str:
    """What may stand between two main-line moves (``depth`` 0) or inside a variation."""
    kind = draw(st.sampled_from(["comment", "comment", "variation", "nag", "newline", "semicolon", "escape",
                                 "word"] if depth else ["comment", "comment", "variation", "nag", "newline",
                                                        "semicolon", "escape"]))
    if kind == "comment":
        return "{" + draw(_COMMENT_TEXT) + "}"
    if kind == "variation" and after_move and depth < 3:
        inner = draw(st.lists(_between(depth + 1, True), max_size=4))
        return "(" + " ".join(inner) + ")"
    if kind == "nag":
        return draw(st.sampled_from(["$1", "$14", "!", "?!", "!!"]))
    # A '{' in a ';' or '%' line opens nothing (the game cutter once took it for a comment never closed).
    if kind == "semicolon":
        return "; " + draw(_COMMENT_TEXT).replace("\n", " ") + "\n"
    if kind == "escape":
        return "\n% " + draw(_COMMENT_TEXT).replace("\n", " ") + "\n"
    if kind == "word":
        return draw(_JUNK_WORD)
    return "\n"


# Strategies built once: hypothesis spends most of these tests' time making a new one per draw.
_AFTER_MOVE = st.lists(_between(0, True), max_size=2)
_BLACK_NUMBER = st.booleans()  # a black move written with its number ("3...") or without


@st.composite
def movetexts(draw: st.DrawFn) -> tuple[str, bool]:
    """One game's movetext (a random legal game, python-chess's SAN) and whether it has a ``;``/``%`` line."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    board, parts = chess.Board(), []
    for ply in range(draw(st.integers(0, 40))):
        if board.is_game_over():
            break
        move = _pick(board, rng, mates=ply % 7 == 0)
        number = f"{ply // 2 + 1}." if ply % 2 == 0 else (f"{ply // 2 + 1}..." if draw(_BLACK_NUMBER) else "")
        parts.append(f"{number} {board.san(move)}" if number else board.san(move))
        board.push(move)
        parts.extend(draw(_AFTER_MOVE))
    text = " ".join([*parts, draw(st.sampled_from(["1-0", "0-1", "1/2-1/2", "*"]))])
    text = re.sub(r"\n\s*\n", "\n", text)  # a blank line ends a game
    return text, _odd(text)


def _odd(text: str) -> bool:
    """A ';' or '%' outside comments (python-chess reads those games)."""
    outside = re.sub(r"\{[^}]*\}", " ", text)
    return ";" in outside or "%" in outside


def python_chess(text: str) -> tuple[list[str], list[str]]:
    collector = chess.pgn.read_game(io.StringIO(text), Visitor=Collector)  # type: ignore[arg-type]
    assert collector is not None
    return collector.moves, collector.errors


@settings(max_examples=150, deadline=None)
@given(st.lists(movetexts(), min_size=1, max_size=4))
def test_scanned_main_lines_are_python_chess_main_lines(games: list[tuple[str, bool]]) -> None:
    results = resolve_games([text for text, _ in games], new_codes())
    for (text, odd), result in zip(games, results, strict=True):
        moves, errors = python_chess(text)
        if result is None:
            assert odd or errors or not moves, text  # only a ';' or '%' line or an error goes back to python-chess
            continue
        assert not errors and (result.uci, result.plies) == (" ".join(moves), len(moves)), text


@settings(max_examples=100, deadline=None)
@given(st.lists(movetexts(), min_size=1, max_size=4))
def test_whole_games_read_as_python_chess_reads_them(games: list[tuple[str, bool]]) -> None:
    text = "".join(f'[Event "Rated Blitz game"]\n[Site "https://lichess.org/g{i}"]\n[Result "*"]\n'
                   f'[WhiteElo "1500"]\n[BlackElo "1600"]\n\n{movetext}\n\n' for i, (movetext, _) in enumerate(games))
    ours = [game for _, game in read_chunk(text.encode("utf-8"), 0)]
    assert len(ours) == len(games)
    for game, (movetext, _) in zip(ours, games, strict=True):
        moves, errors = python_chess(movetext)
        if errors:
            assert isinstance(game, Skipped) and (game.reason, game.detail) == ("illegal_move", errors[0])
        elif "0000" in moves:
            assert isinstance(game, Skipped) and game.reason == "null_move"
        elif not moves:
            assert isinstance(game, Skipped) and game.reason == "no_moves"
        else:
            assert isinstance(game, PgnGame) and game.uci == " ".join(moves), movetext


_CLOCKS = st.sampled_from(["[%clk 0:03:00]", "[%clk 1:2:3.5]", "[%clk 0:00:07.]", "[%clk  0:01:00]", "[%clk\t0:01:00]",
                           "[%clk 0:01]", "[%eval 0.3] [%clk 0:00:59]", "[%clk 0:01:00] [%clk 0:02:00]", "[%clk ٠:01:00]",
                           "[%clk 0:01:00.1234567890123456]", "[%clk 99999999999:00:00]", "x[%clk 0:1:2]y", "[%clk 0:0:0.25]"])


_CLOCK_AFTER = st.integers(0, 2)  # a clock comment after two words in three


@st.composite
def timed_movetexts(draw: st.DrawFn) -> str:
    """A movetext of :func:`movetexts` with clock comments (odd ones too) after some of its words."""
    words = draw(movetexts())[0].split(" ")
    return " ".join(word + (" {" + draw(_CLOCKS) + "}" if draw(_CLOCK_AFTER) else "") for word in words)


@settings(max_examples=100, deadline=None)
@given(st.lists(timed_movetexts(), min_size=1, max_size=4))
def test_scanned_clocks_are_python_chess_clocks(texts: list[str]) -> None:
    results = resolve_games(texts, new_codes(), clocks=True)
    for text, result in zip(texts, results, strict=True):
        if result is None:
            continue
        collector = chess.pgn.read_game(io.StringIO(text), Visitor=Collector)  # type: ignore[arg-type]
        assert collector is not None and not collector.errors
        theirs = collector.clocks[:result.plies]
        ours = result.clocks if result.clocks is not None else clocks_of(clock_movetext(text))  # Python reads those
        assert ours == theirs, text
        if result.clocks is None:
            assert not text.isascii() or "1234567890123456" in text or "99999999999" in text, text
