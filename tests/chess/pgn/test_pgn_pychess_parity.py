"""The compiled PGN reader reads as python-chess reads: its own test inputs, game by game, and the
cases where it used not to (a blank line among the tags, the result in the movetext, a ``[`` line
inside a comment, leading whitespace, where a chunk is cut); and compressed input that does not
end cleanly is refused, naming the file and the offset.

The oracle is python-chess's ``chess.pgn.read_game`` (installed). python-chess's inputs are in
``tests/data/python-chess/`` (its ``data/pgn/*.pgn`` files and the PGN strings of its ``test.py``,
GPL-3.0, see SOURCES.md there).
"""

from __future__ import annotations

import bz2
import functools
import gzip
import inspect
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import chess.pgn
import numpy as np
import pyarrow.parquet as pq
import pytest
import zstandard
from typer.testing import CliRunner

import tokpack.chess
from tokpack.chess.pgn import read, stream
from tokpack.chess.pgn.games import SKIP_REASONS, PgnGame, Skipped, judge_headers, read_chunk, read_games
from tokpack.cli import app
from tokpack.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
PYCHESS = ROOT / "tests" / "data" / "python-chess"
FIXTURE = ROOT / "tests" / "fixtures" / "chess_games.pgn"
runner = CliRunner()


# ---------------------------------------------------------------- the oracle

@dataclass
class Seen:
    """What python-chess reads of one game: the tags it visited, the main line, errors, result tokens."""

    headers: dict[str, str] = field(default_factory=dict)
    moves: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    movetext: bool = False  # anything after the tags: a move, comment, NAG, variation or result
    result: str = "*"  # game.headers["Result"] of python-chess's own GameBuilder


class _Oracle(chess.pgn.BaseVisitor):  # type: ignore[type-arg]
    """Everything :class:`Seen` holds (variations skipped, as their moves are not the main line)."""

    def begin_game(self) -> None:
        self.seen = Seen()

    def visit_header(self, tag: str, value: str) -> None:
        self.seen.headers[tag] = value

    def begin_variation(self):  # type: ignore[no-untyped-def]
        self.seen.movetext = True
        return chess.pgn.SKIP

    def visit_move(self, board, move) -> None:  # type: ignore[no-untyped-def]
        self.seen.moves.append(move.uci())
        self.seen.movetext = True

    def visit_comment(self, comment) -> None:  # type: ignore[no-untyped-def]
        self.seen.movetext = True

    def visit_nag(self, nag: int) -> None:
        self.seen.movetext = True

    def visit_result(self, result: str) -> None:
        self.seen.results.append(result)
        self.seen.movetext = True

    def handle_error(self, error: Exception) -> None:
        self.seen.errors.append(str(error).splitlines()[0])
        self.seen.movetext = True

    def result(self) -> Seen:
        return self.seen


def python_chess(text: str) -> list[Seen]:
    """python-chess's reading of every game of ``text``, with the result its GameBuilder gives."""
    seen, handle, builder = [], io.StringIO(text), io.StringIO(text)
    while (one := chess.pgn.read_game(handle, Visitor=_Oracle)) is not None:  # type: ignore[arg-type]
        game = chess.pgn.read_game(builder)
        assert game is not None
        one.result = game.headers["Result"]
        seen.append(one)
    return seen


def expected_reason(seen: Seen) -> str | None:
    """Why tokpack skips a game python-chess read so, by its documented rules, or None to keep it:
    tags with nothing after them (``header_only``), then the tags (:func:`judge_headers`, on the tags
    python-chess read), then the moves (``illegal_move``, ``null_move``: python-chess reads ``0000``,
    a conversion for training skips the game; ``no_moves``)."""
    if seen.headers and not seen.movetext:
        return "header_only"
    verdict = judge_headers(seen.headers, "")
    if isinstance(verdict, Skipped):
        return verdict.reason
    if seen.errors:
        return "illegal_move"
    if "0000" in seen.moves:
        return "null_move"
    return None if seen.moves else "no_moves"


def tokpack_reading(text: str) -> list[tuple[dict[str, str], list[str], PgnGame | Skipped]]:
    """Every game as tokpack reads it: its tags, its main line (the compiled path, or python-chess
    where that path hands the game over), and the converted row or the reason it is skipped."""
    games = read.cut_games(text, 0)
    entries = read_chunk(text.encode("utf-8", "surrogateescape"), 0)
    assert len(entries) == len(games)
    out = []
    for game, (_, entry) in zip(games, entries, strict=True):
        headers, _ = read.read_headers(game)
        line = read.resolve_games([game.movetext], read.new_codes())[0]
        moves = line.uci.split() if line is not None else read.python_chess_moves(game)[0]
        assert not isinstance(entry, str)
        out.append((headers, moves, entry))
    return out


def assert_same_as_python_chess(text: str, oracle_text: str | None = None) -> list[PgnGame | Skipped]:
    """Game by game: the same games, tags, main line and result, and every skip for its documented reason."""
    theirs = python_chess(text if oracle_text is None else oracle_text)
    ours = tokpack_reading(text)
    assert len(ours) == len(theirs), [seen.headers for seen in theirs]
    for number, ((headers, moves, entry), seen) in enumerate(zip(ours, theirs, strict=True)):
        where = f"game {number + 1}: {seen.headers}"
        assert headers == seen.headers, where
        reason = expected_reason(seen)
        if reason is None:
            assert isinstance(entry, PgnGame), (where, entry)
            assert entry.uci.split() == moves == seen.moves, where
            assert entry.result == seen.result, where
            assert entry.n_plies == len(seen.moves) and entry.event == seen.headers.get("Event"), where
        else:
            assert isinstance(entry, Skipped) and entry.reason == reason, (where, entry)
            if not seen.errors and seen.movetext and reason not in ("header_only", "not_standard_start"):
                assert moves == seen.moves, where
    return [entry for _, _, entry in ours]


# ---------------------------------------------------------------- python-chess's own inputs

PGN_FILES = sorted(PYCHESS.glob("*.pgn"))
TEST_STRINGS: dict[str, str] = json.loads((PYCHESS / "test_py_strings.json").read_text(encoding="utf-8"))
#: What becomes of each game of python-chess's inputs with ratings added (:func:`rated`): kept, or
#: skipped for a documented reason (variants and set-up positions, null moves, tags with no moves,
#: their own ratings "?", a game with no moves, an illegal move).
SKIPPED_ON_PURPOSE = {
    "anastasian-lewis.pgn": ['null_move'],
    "antichess-programfox.pgn": ['not_standard_start', 'no_rating'],
    "chessbase-empty-line.pgn": ['kept'],
    "cutechess-fischerrandom.pgn": ['not_standard_start', 'not_standard_start', 'not_standard_start', 'not_standard_start'],
    "kasparov-deep-blue-1997.pgn": ['no_rating', 'no_rating', 'no_rating', 'no_rating', 'no_rating', 'no_rating'],
    "knightvuillaume-jannlee-zh-lichess.pgn": ['not_standard_start'],
    "molinari-bordais-1979.pgn": ['no_rating'],
    "nepomniachtchi-liren-game1.pgn": ['kept'],
    "saturs-jannlee-zh-lichess.pgn": ['not_standard_start'],
    "stockfish-learning.pgn": ['kept'],
    "uci-moves.pgn": ['kept'],
    "utf8-bom.pgn": ['no_moves', 'no_moves'],
}
STRINGS_ON_PURPOSE = {
    "PgnTestCase.test_exporter#2": ['kept'],
    "PgnTestCase.test_exporter#3": ['kept'],
    "PgnTestCase.test_exporter#4": ['kept'],
    "PgnTestCase.test_read_game_with_leading_whitespace_before_header": ['kept'],
    "PgnTestCase.test_read_game_with_multicomment_move": ['kept'],
    "PgnTestCase.test_comment_at_eol": ['kept'],
    "PgnTestCase.test_promotion_without_equals": ['kept'],
    "PgnTestCase.test_special_tag_names": ['header_only'],
    "PgnTestCase.test_chess960_without_fen": ['not_standard_start'],
    "PgnTestCase.test_variation_stack": ['kept'],
    "PgnTestCase.test_variation_stack#2": ['kept'],
    "PgnTestCase.test_game_starting_comment": ['kept'],
    "PgnTestCase.test_game_starting_comment#2": ['no_moves'],
    "PgnTestCase.test_game_starting_variation": ['kept'],
    "PgnTestCase.test_annotation_symbols": ['kept'],
    "PgnTestCase.test_tricky_skip_game": ['kept', 'no_rating', 'no_rating'],
    "PgnTestCase.test_visit_board": ['not_standard_start'],
    "PgnTestCase.test_black_to_move": ['not_standard_start'],
    "PgnTestCase.test_result_termination_marker": ['kept'],
    "PgnTestCase.test_missing_setup_tag": ['not_standard_start'],
    "PgnTestCase.test_errors": ['illegal_move', 'no_rating'],
    "PgnTestCase.test_mainline": ['kept'],
    "PgnTestCase.test_lan": ['kept'],
    "PgnTestCase.test_variants": ['not_standard_start'],
    "PgnTestCase.test_wierd_header": ['header_only'],
    "PgnTestCase.test_semicolon_comment": ['kept'],
    "PgnTestCase.test_no_movetext": ['header_only', 'header_only'],
    "PgnTestCase.test_subgame": ['kept'],
    "PgnTestCase.test_my_game_node": ['kept'],
    "PgnTestCase.test_skip_inner_variation": ['kept'],
    "PgnTestCase.test_skip_inner_variation#2": ['kept'],
    "PgnTestCase.test_recursion": ['illegal_move'],
}


_STRIPS_TAG_LINES = chess.pgn.read_game(io.StringIO(' [Event "E"]\n\n*')).headers["Event"] == "E"  # type: ignore[union-attr]


def _oracle_text(name: str, text: str) -> str | None:
    """The text the installed python-chess must read to give its current reading: tag lines with
    leading whitespace are read since python-chess's commit 1aa08dcd (in no release yet), the
    same as reading them with the whitespace removed."""
    if re.search(r"^[^\S\n]+\[", text, re.MULTILINE) and not _STRIPS_TAG_LINES:
        return re.sub(r"^[^\S\n]+\[", "[", text, flags=re.MULTILINE)
    return None


_GAME_TAGS = re.compile(r"(\n[^\S\n]*\n)(?=[^\S\n]*\[Event )")
_RATINGS = '[WhiteElo "2000"]\n[BlackElo "2100"]\n'


def rated(text: str) -> str:
    """``text`` with both ratings added as the first tags of each game (a game's own ratings come
    later and win): most of python-chess's inputs have no ratings, and a conversion skips those
    (``no_rating``) before it judges anything else. A text without tags gets them as tags of its own."""
    text = text.removeprefix("\ufeff").lstrip()
    if not text.startswith("["):
        return _RATINGS + "\n" + text
    return _RATINGS + _GAME_TAGS.sub(lambda m: m.group(1) + _RATINGS, text)


@pytest.mark.parametrize("path", PGN_FILES, ids=[p.name for p in PGN_FILES])
def test_python_chess_pgn_files_read_alike(path: Path) -> None:
    text = path.read_bytes().decode("utf-8")
    entries = assert_same_as_python_chess(text, _oracle_text(path.name, text))
    streamed = [entry for _, entry in read_games(path)]
    assert streamed == entries  # read as a file, in chunks, the same
    with_ratings = rated(text)
    entries = assert_same_as_python_chess(with_ratings, _oracle_text(path.name, with_ratings))
    assert [entry.reason if isinstance(entry, Skipped) else "kept" for entry in entries] == SKIPPED_ON_PURPOSE[path.name]


@pytest.mark.parametrize("name", sorted(TEST_STRINGS))
def test_python_chess_test_strings_read_alike(name: str) -> None:
    text = TEST_STRINGS[name]
    assert_same_as_python_chess(text, _oracle_text(name, text))
    with_ratings = rated(text)
    entries = assert_same_as_python_chess(with_ratings, _oracle_text(name, with_ratings))
    assert [entry.reason if isinstance(entry, Skipped) else "kept" for entry in entries] == STRINGS_ON_PURPOSE[name]


def test_every_python_chess_input_is_compared() -> None:
    """The inputs are there: 12 files and 32 strings, and their games are mostly kept, not skipped."""
    assert len(PGN_FILES) == 12 and len(TEST_STRINGS) == 32
    kept = sum(isinstance(entry, PgnGame) for path in PGN_FILES
               for entry in assert_same_as_python_chess(rated(path.read_text(encoding="utf-8-sig"))))
    assert kept >= 4


# ---------------------------------------------------------------- the differences, one by one

HEAD = ('[Event "Rated Blitz game"]\n[Site "https://lichess.org/{id}"]\n[Date "2016.03.05"]\n'
        '[White "a"]\n[Black "b"]\n[Result "{result}"]\n[WhiteElo "1500"]\n[BlackElo "1600"]\n')


def _game(id: str, moves: str, result: str = "1-0", tail: str = "") -> str:
    return HEAD.format(id=id, result=result) + f"\n{moves} {tail}\n\n"


def _convert(tmp_path: Path, name: str, text: str | bytes) -> tuple[int, str, dict | None, list[dict]]:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    out = tmp_path / (name + ".out")
    result = runner.invoke(app, ["chess", "convert", str(path), "--out", str(out)])
    if result.exit_code != 0:
        return result.exit_code, result.output, None, []
    report = json.loads((out / "convert-report.json").read_text(encoding="utf-8"))
    rows = [row for part in sorted(out.rglob("games.parquet")) for row in pq.read_table(part).to_pylist()]
    return 0, result.output, report, rows


def test_a_blank_line_among_the_tags_is_one_game(tmp_path: Path) -> None:
    """ChessBase writes a blank line after the Event tag: one game with every tag, as python-chess."""
    text = (PYCHESS / "chessbase-empty-line.pgn").read_text(encoding="utf-8")
    (seen,) = python_chess(text)
    assert len(seen.headers) == 11 and seen.headers["Event"] == "AlphaZero vs. Stockfish"
    ((headers, _, entry),) = tokpack_reading(text)
    assert headers == seen.headers and isinstance(entry, Skipped) and entry.reason == "no_rating"
    rated = text.replace('[Board "1"]', '[WhiteElo "3300"]\n[BlackElo "3400"]')
    code, output, report, rows = _convert(tmp_path, "chessbase.pgn", rated)
    assert code == 0, output
    assert report is not None and report["games_read"] == 1 and report["games_written"] == 1
    assert rows[0]["event"] == "AlphaZero vs. Stockfish" and rows[0]["date"] == "2017.12.04"
    assert rows[0]["uci"].split() == python_chess(rated)[0].moves and rows[0]["result"] == "0-1"


def test_a_header_only_game_before_a_new_game_stays_apart() -> None:
    """Tags with no moves, one blank line, then a game whose tags repeat one of them: two games
    (python-chess would add the first game's tags to the second, the deliberate difference)."""
    first = HEAD.format(id="h1", result="1-0")
    text = first + "\n" + _game("h2", "1. e4 e5")
    entries = read_chunk(text.encode(), 0)
    assert [getattr(e, "reason", None) for _, e in entries] == ["header_only", None]
    assert entries[1][1].id == "h2"  # type: ignore[union-attr]


@pytest.mark.parametrize(("tags", "movetext"), [
    ('[Result "*"]\n', "1. e4 e5 1-0"),
    ("", "1. e4 e5 0-1"),
    ('[Result "*"]\n', "1. e4 { 0-1 } e5 (1... d5 2. d4) * 1/2-1/2"),
    ("", "1. e4 e5"),
    ('[Result "*"]\n', "1. e4 ; 0-1\ne5 1-0"),  # python-chess reads this one itself
    ('[Result "1-0"]\n', "1. e4 e5 0-1"),  # a tag that says: kept
    # An illegal move inside a variation: python-chess's game never leaves the variation, so it
    # reads no result after it and keeps "*" (issue 37); on the compiled path and on its own.
    ('[Result "*"]\n', "1. e4 e5 ( 1... e4 ) 1/2-1/2"),
    ("", "1. e4 e5 ( 1... Ke7 2. d4 ) ( 1... c5 ) 2. Nf3 1-0"),
    ('[Result "*"]\n', "1. e4 ; a note\ne5 ( 1... e4 ) 0-1"),
    ('[Result "*"]\n', "1. e4 e5 ( 1... d5 ) 1/2-1/2"),  # a legal variation: the result is read
])
def test_the_result_comes_from_the_movetext_when_the_tag_is_star_or_missing(tmp_path: Path, tags: str,
                                                                           movetext: str) -> None:
    text = ('[Event "E"]\n[Site "S"]\n[Date "2016.01.02"]\n[WhiteElo "2000"]\n[BlackElo "2100"]\n'
            + tags + "\n" + movetext + "\n\n")
    (seen,) = python_chess(text)
    code, output, report, rows = _convert(tmp_path, "result.pgn", text)
    assert code == 0, output
    assert [row["result"] for row in rows] == [seen.result]
    assert_same_as_python_chess(text)


# Every skip reason, each game of its own, and tags-only games where a chunk could be cut.
REASONS = {
    "unreadable_header": HEAD.format(id="r1", result="1-0").replace("2016.03.05", "2016.13.05") + "\n1. e4 1-0\n\n",
    "header_only": HEAD.format(id="r2", result="1-0") + "\n\n",
    "no_rating": HEAD.format(id="r3", result="1-0").replace('[WhiteElo "1500"]\n', "") + "\n1. e4 1-0\n\n",
    "unknown_result": HEAD.format(id="r4", result="2-0") + "\n1. e4 1-0\n\n",
    "not_standard_start": HEAD.format(id="r5", result="1-0") + '[Variant "Antichess"]\n\n1. e3 1-0\n\n',
    "unreadable_movetext": HEAD.format(id="r6", result="1-0") + "\n1. e4 { never closed e5 1-0\n\n",
    "illegal_move": _game("r7", "1. e5"),
    "null_move": _game("r8", "1. e4 -- 2. d4"),
    "no_moves": HEAD.format(id="r9", result="1-0") + "\n1-0\n\n",
}


def _reasons(entries: list) -> list[str | None]:
    return [entry.reason if isinstance(entry, Skipped) else entry.id for _, entry in entries]


def test_every_skip_reason_whatever_the_chunks(tmp_path: Path) -> None:
    """The reason of each game (tags-only games among them) is the same whole, in chunks cut at every
    place :func:`pgn_chunks` may cut, and through ``tokpack chess convert``."""
    assert set(REASONS) == set(SKIP_REASONS)
    header_only = HEAD.format(id="t1", result="1-0")
    reasons = [reason for reason in REASONS if reason != "unreadable_movetext"]  # its '{' is left open: last
    parts = [_game("k1", "1. e4"), *(REASONS[reason] for reason in reasons), header_only + "\n", _game("k2", "1. d4"),
             header_only + "\n\n", REASONS["no_rating"], REASONS["header_only"],
             _game("k3", '1. c4 { a\n\n[Event "x"]\n}'), REASONS["unreadable_movetext"], _game("k4", "1. Nf3")]
    text = "".join(parts)
    data = text.encode()
    whole = _reasons(read_chunk(data, 0))
    assert whole == ["k1", *reasons, "header_only", "k2", "header_only", "no_rating", "header_only", "k3",
                     "unreadable_movetext", "k4"]
    starts = [m.start() + 2 for m in re.finditer(rb"\n\n\[", data)]  # everywhere a chunk was cut before
    sure = [c for c in starts if stream.last_game_start(data[:c + 1]) == c]
    assert len(sure) >= 12
    for c in sure:  # a cut where a game surely starts reads as the whole
        assert _reasons(read_chunk(data[:c], 0) + read_chunk(data[c:], c)) == whole, c
    cuts = set()
    # Chunk sizes near each other cut the same chunks: each distinct chunk is read once.
    reasons_of = functools.cache(lambda chunk, offset: _reasons(read_chunk(chunk, offset)))
    for chunk_bytes in range(1, len(data) + 1):
        chunks = list(stream.pgn_chunks(io.BytesIO(data), "x.pgn", chunk_bytes))
        assert b"".join(chunk for _, chunk in chunks) == data
        cuts.update(offset for offset, _ in chunks)
        assert [reason for offset, chunk in chunks for reason in reasons_of(chunk, offset)] == whole, chunk_bytes
    assert cuts == {0, *sure}
    code, output, report, _ = _convert(tmp_path, "reasons.pgn", text)
    assert code == 0, output
    assert report is not None and report["games_read"] == len(whole)
    assert report["skipped"] == {reason: whole.count(reason) for reason in SKIP_REASONS}


def test_a_tag_line_inside_a_comment_is_comment_text(tmp_path: Path) -> None:
    """A comment holding a blank line and ``[Event ...]``: one legal game, as python-chess reads it."""
    text = _game("c1", '1. e4 { a game I recall:\n\n[Event "Old"]\n\n1. d4 } e5 2. Nf3', tail="1-0") + _game("c2", "1. d4")
    assert_same_as_python_chess(text)
    code, output, report, rows = _convert(tmp_path, "comment.pgn", text)
    assert code == 0, output
    assert report is not None and report["games_read"] == 2 and sum(report["skipped"].values()) == 0
    assert [row["uci"] for row in rows] == ["e2e4 e7e5 g1f3", "d2d4"]


def test_a_comment_never_closed_still_ends_at_the_next_game() -> None:
    """The deliberate difference kept: a ``{`` whose ``}`` does not come before the next game's own
    comment opens ends at that game's tags, which are read."""
    text = _game("u1", "1. e4 { never closed e5") + _game("u2", "1. d4 { fine } d5") + _game("u3", "1. c4")
    assert _reasons(read_chunk(text.encode(), 0)) == ["unreadable_movetext", "u2", "u3"]


def test_leading_whitespace_before_the_tags(tmp_path: Path) -> None:
    """python-chess's current reading (commit 1aa08dcd, "accept tag pairs with leading whitespace"):
    the tags are tags, not movetext."""
    text = " " + _game("w1", "1. e4 e5").replace('\n[Site', '\n\t [Site')
    (seen,) = python_chess(re.sub(r"^\s+\[", "[", text, flags=re.MULTILINE))
    assert seen.headers["Site"] == "https://lichess.org/w1" and seen.moves == ["e2e4", "e7e5"]
    assert_same_as_python_chess(text, _oracle_text("", text))
    code, output, report, rows = _convert(tmp_path, "indented.pgn", text)
    assert code == 0, output
    assert [(row["id"], row["event"], row["uci"]) for row in rows] == [("w1", "Rated Blitz game", "e2e4 e7e5")]


def test_null_moves_are_skipped_for_training(tmp_path: Path) -> None:
    """python-chess reads ``--`` and ``Z0`` as ``0000``; a conversion for training skips the game."""
    text = _game("n1", "1. e4 -- 2. d4") + _game("n2", "1. e4 Z0 2. d4") + _game("n3", "1. e4")
    assert [seen.moves for seen in python_chess(text)][:2] == [["e2e4", "0000", "d2d4"]] * 2
    code, output, report, _ = _convert(tmp_path, "null.pgn", text)
    assert code == 0, output
    assert report is not None and report["skipped"]["null_move"] == 2 and report["games_written"] == 1


# ---------------------------------------------------------------- compressed input that does not end cleanly

@pytest.fixture(scope="module")
def pgn_bytes() -> bytes:
    return FIXTURE.read_bytes()


def _zstd_cases(data: bytes) -> dict[str, bytes]:
    whole = zstandard.ZstdCompressor().compress(data)
    frames = [zstandard.ZstdCompressor().compress(data[i:i + 4000]) for i in range(0, len(data), 4000)]
    multi = b"".join(frames)
    streamed = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(streamed, closefd=False) as writer:
        for i in range(0, len(data), 1000):
            writer.write(data[i:i + 1000])
            writer.flush(zstandard.FLUSH_BLOCK)
    stream = streamed.getvalue()
    # zstd's command line (and Lichess's files) write each frame's checksum: a damaged byte is found.
    checked = b"".join(zstandard.ZstdCompressor(write_checksum=True).compress(data[i:i + 4000])
                       for i in range(0, len(data), 4000))
    corrupted = bytearray(checked)
    corrupted[len(frames[0]) // 2] ^= 0xFF  # inside the first frame
    return {"half": whole[:len(whole) // 2], "last_byte": whole[:-1], "after_header": whole[:6],
            "multi_frame": multi[:len(frames[0]) + len(frames[1]) // 2],
            "multi_frame_last_byte": multi[:-1], "streamed": stream[:len(stream) * 2 // 3],
            "corrupted_early_frame": bytes(corrupted)}


@pytest.mark.parametrize("case", ["half", "last_byte", "after_header", "multi_frame", "multi_frame_last_byte",
                                  "streamed", "corrupted_early_frame"])
def test_a_zstd_file_that_does_not_end_cleanly_is_refused(tmp_path: Path, pgn_bytes: bytes, case: str) -> None:
    blob = _zstd_cases(pgn_bytes)[case]
    code, output, _, _ = _convert(tmp_path, "games.pgn.zst", blob)
    assert code == 2, output
    line = " ".join(output.split())
    assert "games.pgn.zst" in line and "byte " in line and "zstd" in line, line
    assert not (tmp_path / "games.pgn.zst.out").exists()
    path = tmp_path / "games.pgn.zst"
    with pytest.raises(InputError, match=r"games\.pgn\.zst: byte \d+"):
        list(read_games(path))


def test_a_whole_multi_frame_or_streamed_zstd_file_reads_whole(tmp_path: Path, pgn_bytes: bytes) -> None:
    frames = b"".join(zstandard.ZstdCompressor().compress(pgn_bytes[i:i + 4000]) for i in range(0, len(pgn_bytes), 4000))
    (tmp_path / "a.pgn.zst").write_bytes(frames)
    (tmp_path / "a.pgn").write_bytes(pgn_bytes)
    assert list(read_games(tmp_path / "a.pgn.zst")) == list(read_games(tmp_path / "a.pgn"))


@pytest.mark.parametrize("kind", ["gz", "bz2"])
@pytest.mark.parametrize("case", ["half", "last_byte", "corrupted"])
def test_a_gz_or_bz2_file_that_does_not_end_cleanly_is_refused(tmp_path: Path, pgn_bytes: bytes, kind: str,
                                                               case: str) -> None:
    whole = gzip.compress(pgn_bytes) if kind == "gz" else bz2.compress(pgn_bytes)
    blob = {"half": whole[:len(whole) // 2], "last_byte": whole[:-1]}.get(case)
    if blob is None:
        broken = bytearray(whole)
        broken[len(whole) // 3] ^= 0xFF
        blob = bytes(broken)
    code, output, _, _ = _convert(tmp_path, f"games.pgn.{kind}", blob)
    assert code == 2, output
    line = " ".join(output.split())
    assert f"games.pgn.{kind}" in line and "byte " in line, line


# ---------------------------------------------------------------- one copy of each rule, no import circle

def _chess_imports() -> dict[str, set[str]]:
    """Each module of ``tokpack.chess`` -> the ``tokpack.chess`` modules it imports, at its top or in a function."""
    import ast

    package = Path(tokpack.chess.__file__).parent  # the code under test
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = ("tokpack", "chess", *path.relative_to(package).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tokpack.chess"):
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.startswith("tokpack.chess"))
    for name in graph:
        # A package is imported before any of its modules, so it is no edge of a circle.
        graph[name] = {module for module in graph[name] if module in graph and not name.startswith(f"{module}.")
                       and module != name}
    return graph


def test_the_chess_package_has_no_import_circle() -> None:
    """No module of the chess package reaches itself through imports, lazy ones included."""
    graph = _chess_imports()
    assert {"tokpack.chess.pgn.convert", "tokpack.chess.pgn.read", "tokpack.chess.jobs.pack"} <= set(graph)
    for start in graph:
        paths, seen = [[start, module] for module in graph[start]], set()
        while paths:
            path = paths.pop()
            assert path[-1] != start, f"import circle: {' -> '.join(path)}"
            if path[-1] not in seen:
                seen.add(path[-1])
                paths.extend([*path, module] for module in graph[path[-1]])


def test_one_attack_test_and_one_clock_rule() -> None:
    """The attack test is written once (the lockstep replay asks the compiled one), and a clock
    comment is read by one Python rule (:func:`read.clock_seconds`), which the compiled scan equals."""
    from tokpack.chess.board.mailbox import KING, QUEEN, ROOK, START
    from tokpack.chess.schemes import _uci_to_san as _replay

    package = Path(tokpack.chess.__file__).parent
    sources = {path.relative_to(package).as_posix(): path.read_text(encoding="utf-8") for path in package.rglob("*.py")}
    replay_attack = inspect.getsource(_replay._attacked)
    assert "attacked_on" in replay_attack and "TABLES[" not in replay_attack
    assert [name for name, text in sources.items() if "%clk" in text and "re.compile" in text] == ["pgn/read.py"]
    assert "_CLOCK" not in sources["pgn/convert.py"] + sources["pgn/games.py"]
    boards = np.tile(START, (3, 1))
    boards[1, 12] = 0  # e2 empty: nothing new
    boards[2, 4 + 8] = 0
    boards[2, 60 - 8] = 0
    boards[2, 8 * 7 + 3] = 0
    boards[2, 36] = -QUEEN  # a black queen on e5 sees the white king on e1 down the open file
    assert _replay._attacked(boards, np.arange(3), np.full(3, 4), -1).tolist() == [False, False, True]
    assert _replay._attacked(boards, np.array([0]), np.array([64]), -1).tolist() == [False]  # off the board
    assert boards[0, 4] == KING and boards[0, 0] == ROOK
    assert read.clock_seconds("[%clk 0:03:00.5]") == 180.5 and read.clock_seconds("[%eval 1]") is None
    assert read.clocks_of("1. e4 { [%clk 0:01:00] } e5 { [%clk 1:00:00] }") == [60.0, 3600.0]


@pytest.mark.parametrize("between", ["\ufeff", "\ufeff\n", "\ufeff\n\n", "\r\ufeff"])
def test_a_byte_order_mark_before_a_later_game_is_read_as_python_chess_reads_it(tmp_path: Path, between: str) -> None:
    """Files joined end to end (``cat a.pgn b.pgn``) put ``b``'s byte-order mark before its first game:
    python-chess drops it there, and so does tokpack, read whole or in chunks."""
    first, second = _game("b1", "1. e4 e5"), _game("b2", "1. d4 d5")
    text = "\ufeff" + first + between + second
    if between.startswith("\r"):  # the same with \r\n line ends
        text = ("\ufeff" + first + between[1:] + second).replace("\n", "\r\n")
    entries = assert_same_as_python_chess(text)
    assert [getattr(entry, "id", None) for entry in entries] == ["b1", "b2"]
    path = tmp_path / "joined.pgn"
    path.write_bytes(text.encode("utf-8"))
    assert [entry for _, entry in read_games(path)] == entries
