"""The compiled game cutter and tag reader against their specifications in plain Python.

The cutter (:func:`tokpack.chess.pgn.read.cut_games`) must give :func:`cut_games_python`'s games,
offsets and problems on any text: random texts of PGN fragments, blank lines of every kind of
whitespace, ``\\r`` line ends, byte-order marks, non-ASCII and undecodable bytes, real games and
Lichess-style games. The tag reader (:func:`tokpack.chess.pgn.read.read_tags`) must read a plain
game's tags as the tag expression does (the last of a repeated tag wins), and a game it judges
usable must get :func:`judge_headers`'s date, ratings and result; on Lichess-style games it must
take every game, or the converter has silently fallen back to Python.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.chess.pgn._tags_compiled import TAGS
from tokpack.chess.pgn.games import Skipped, judge_headers
from tokpack.chess.pgn.read import TAG, Game, cut_games, cut_games_python, read_headers, read_tags

from cached import cached_lichess_pgn

_FRAGMENTS = ['[Event "x"]\n', '[Site "https://lichess.org/ab"]\n', "[", "]", "{", "}", "(", ")", "%", ";", "\n", "\n",
              "\n\n", "\n \n", "\n\t\n", "\n\xa0\n", "\n\u3000\n", " ", "\t", "\r", "\r\n", "\x0b", "\x85",
              "\ufeff", "é", "中", "\udcff", "1.", "e4", "e5", "1-0", "*", "%clk", "; x\n", "\n% x\n"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40), st.integers(0, 10**9))
def test_compiled_cut_is_the_python_cut(fragments: list[str], offset: int) -> None:
    text = "".join(fragments)
    assert cut_games(text, offset) == cut_games_python(text, offset)


def test_the_compiled_cut_knows_every_whitespace_character() -> None:
    from tokpack.chess.pgn._cut_compiled import _WIDE

    assert _WIDE == [chr(c).encode("utf-8") for c in range(128, 0x110000) if chr(c).isspace()]


def test_compiled_cut_is_the_python_cut_on_real_and_lichess_style_games(shared_data: Path, pytestconfig: pytest.Config) -> None:
    real = zstandard.decompress((shared_data / "chess" / "games.pgn.zst").read_bytes()).decode("utf-8", "surrogateescape")
    lichess = cached_lichess_pgn(pytestconfig, 2_000, seed=3)[0]
    for text in (real, lichess, lichess.replace("\n", "\r\n"), "\ufeff" + lichess):
        games = cut_games(text, 11)
        assert len(games) > 1_000 and games == cut_games_python(text, 11)


_VALUES = st.text(alphabet='ab 1?.-"]\t\xa0é/', max_size=12)
_NAMES = st.sampled_from([*TAGS, "Opening", "UTCTime", "whiteelo", "X_+#=:-", "1"])
# Each: mostly (4 in 5) values a game can be judged by, else ones it must not be.
_DATES = st.one_of(*[st.sampled_from(["2016.03.05", "2016.12.31", "????.??.??", "2016.??.07", "2016.01.??"])] * 4,
                   st.sampled_from(["2016.13.01", "2016.00.10", "2016.01.32", "20?6.01.01", "2016.1.01", "2016-01-01",
                                    "٢٠١٦.01.01", ""]))
_RATINGS = st.one_of(*[st.sampled_from(["1500", "2850", "9", "00"])] * 4,
                     st.sampled_from(["0", "", "?", "-", "12345", " 1500", "15a0", "١٥٠٠"]))
_RESULTS = st.one_of(*[st.sampled_from(["1-0", "0-1", "1/2-1/2", "*"])] * 4, st.sampled_from(["1-0 ", "2-0", ""]))


def _line(draw: st.DrawFn, name: str, value: str) -> str:
    """A tag line, mostly plain; sometimes spaced, quoted or bracketed oddly, or an escape line."""
    form = draw(st.sampled_from(["plain"] * 20 + ["odd space", "odd end", "no quotes", "space first", "escape"]))
    if form == "odd space":
        return f'[{name}{draw(st.sampled_from(["  ", chr(9), chr(11), chr(160), ""]))}"{value}"]'
    if form == "odd end":
        return f'[{name} "{value}"]{draw(st.sampled_from([" ", chr(9), chr(160), "x", chr(34)]))}'
    if form == "no quotes":
        return f"[{name} {value}]"
    if form == "space first":
        return f'[ {name} "{value}"]'
    if form == "escape":
        return f"{draw(st.sampled_from(['%', ';']))} {value}"
    return f'[{name} "{value}"]'


@st.composite
def _tag_lines(draw: st.DrawFn) -> str:
    """A game's tag lines: the ones a verdict needs (valid or not), others, repeats, malformed lines."""
    needed = [(draw(st.sampled_from(["UTCDate", "Date"])), draw(_DATES)), ("WhiteElo", draw(_RATINGS)),
              ("BlackElo", draw(_RATINGS)), ("Result", draw(_RESULTS))]
    if draw(st.integers(0, 3)) == 0:
        needed = draw(st.lists(st.sampled_from(needed), max_size=4, unique=True))
    extra = draw(st.lists(st.tuples(_NAMES, st.one_of(_VALUES, _DATES, _RATINGS, _RESULTS)), max_size=4))
    pairs = draw(st.permutations(needed + extra))
    return "\n".join(_line(draw, name, value) for name, value in pairs) + "\n"


@settings(max_examples=500, deadline=None)  # each example is up to five drawn games' tags
@given(st.lists(_tag_lines(), min_size=1, max_size=5))
def test_compiled_tags_are_the_tag_expression_and_the_judge(sections: list[str]) -> None:
    games = [Game(0, tags, "1. e4 *") for tags in sections]
    tags = read_tags(games)
    for g, game in enumerate(games):
        if not tags.plain[g]:
            continue
        headers, bad = read_headers(game)
        assert not bad
        assert dict(TAG.findall(game.tags)) == headers
        for number, name in enumerate(TAGS):
            assert tags.column(number)[g] == headers.get(name), name
        if tags.judged[g]:
            verdict = judge_headers(headers, bad)
            assert not isinstance(verdict, Skipped)
            date_tag = TAGS[int(tags.date_tag[g])]
            assert (headers[date_tag], int(tags.white_elo[g]), int(tags.black_elo[g]), headers["Result"]) == verdict


def test_every_lichess_style_game_is_read_and_judged_by_the_compiled_code(pytestconfig: pytest.Config) -> None:
    games = cut_games(cached_lichess_pgn(pytestconfig, 500, seed=4)[0], 0)
    tags = read_tags(games)
    assert len(games) == 500 and tags.plain.all() and tags.judged.all()
    for g, game in enumerate(games):
        headers, bad = read_headers(game)
        date_tag = TAGS[int(tags.date_tag[g])]
        verdict = (headers[date_tag], int(tags.white_elo[g]), int(tags.black_elo[g]), headers["Result"])
        assert verdict == judge_headers(headers, bad)
        assert [tags.column(number)[g] for number in range(len(TAGS))] == [headers.get(name) for name in TAGS]
