"""The fast PGN reader against python-chess: real games, 20,000 Lichess-style games, broken games,
compressed inputs and standard input, filters, clocks, and workers byte-identical."""

from __future__ import annotations

import bz2
import gzip
import io
import re
import subprocess
import sys
from pathlib import Path

import chess.pgn
import pyarrow.parquet as pq
import pytest
import zstandard

from tokpack.chess.pgn.convert import REPORT_FILE, convert_pgn, month_parquet
from tokpack.chess.pgn.games import GameFilter, PgnGame, Skipped, judge_headers, read_games
from tokpack.chess.pgn.read import Collector

from cached import cached_lichess_pgn, cached_python_chess_reading

HEADER = '[Event "Rated Blitz game"]\n[Site "https://lichess.org/{id}"]\n[UTCDate "{date}"]\n[Result "{result}"]\n' \
         '[WhiteElo "{white}"]\n[BlackElo "{black}"]\n[TimeControl "{tc}"]\n[Termination "{term}"]\n'


def lichess(id: str, moves: str, result: str = "1-0", date: str = "2016.03.05", white: str = "1500",
            black: str = "1600", tc: str = "180+0", term: str = "Normal") -> str:
    return HEADER.format(id=id, date=date, result=result, white=white, black=black, tc=tc, term=term) + f"\n{moves} {result}\n\n"


def python_chess(text: str) -> list[tuple[list[str], list[str]]]:
    """python-chess's reading of every game: main-line UCI moves and errors (the oracle)."""
    handle, games = io.StringIO(text), []
    while (collector := chess.pgn.read_game(handle, Visitor=Collector)) is not None:  # type: ignore[arg-type]
        games.append((collector.moves, collector.errors))
    return games


def ours(path: Path) -> list[PgnGame | Skipped]:
    return [game for _, game in read_games(path)]


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> tuple[Path, list[str]]:
    """20,000 Lichess-style games (python-chess wrote them) and their main lines (kept across runs)."""
    text, truth = cached_lichess_pgn(pytestconfig, 20_000, seed=15)
    path = tmp_path_factory.mktemp("lichess") / "lichess.pgn"
    path.write_text(text, encoding="utf-8")
    return path, truth


def test_20000_lichess_style_games_read_as_python_chess_reads_them(generated: tuple[Path, list[str]],
                                                                   pytestconfig: pytest.Config) -> None:
    """Every game against the main line python-chess played; the first 2,000 also against read_game."""
    path, truth = generated
    games = ours(path)
    assert len(games) == len(truth) == 20_000
    for index, (game, uci) in enumerate(zip(games, truth, strict=True)):
        assert isinstance(game, PgnGame) and game.uci == uci, index
    text = path.read_text(encoding="utf-8")
    head = text[: [m.start() for m in re.finditer(r"\n\n\[Event", text)][1999] + 2]
    oracle = cached_python_chess_reading(pytestconfig, head)
    assert len(oracle) == 2_000
    for index, (moves, errors) in enumerate(oracle):
        assert not errors and " ".join(moves) == truth[index], index
    for feature in ("=N", "=B", "=R", "=Q", "O-O ", "O-O-O", "#", "(", "$", "!?", "..."):
        assert feature in text, feature  # the corpus holds what a reader gets wrong
    assert any(m.startswith(("e5d6", "d5e6")) for uci in truth for m in uci.split()) or "x" in text


def test_real_games_read_as_python_chess_reads_them(shared_data: Path, pytestconfig: pytest.Config) -> None:
    """The first 3,000 games of the real collection, against python-chess itself."""
    path = shared_data / "chess" / "games.pgn.zst"
    with zstandard.open(path, "rt", encoding="utf-8", errors="surrogateescape", newline="") as handle:
        text = "".join(line for _, line in zip(range(60_000), handle))
    text = text[: text.rindex("\n\n[") + 2]
    games = _read_text(text)
    oracle = cached_python_chess_reading(pytestconfig, text)
    assert len(games) == len(oracle) > 2_000
    for index, (game, (moves, errors)) in enumerate(zip(games, oracle, strict=True)):
        if isinstance(game, PgnGame):
            assert not errors and game.uci == " ".join(moves), index
        elif game.reason == "illegal_move":
            assert errors and game.detail == errors[0], index


def test_every_real_game_reads_as_python_chess_read_it(shared_data: Path) -> None:
    """All 28,499 games of the real collection, against python-chess's reading of the same file,
    recorded once in tests/fixtures/chess_real_oracle.json (python-chess takes minutes on it)."""
    import hashlib
    import json

    oracle = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "chess_real_oracle.json").read_text())
    digest, n = hashlib.sha256(), 0
    for offset, game in read_games(shared_data / oracle["file"]):
        what, detail = (game.uci, None) if isinstance(game, PgnGame) else (game.reason, game.detail)
        digest.update(f"{offset}\t{what}\t{detail}\n".encode("utf-8", "surrogateescape"))
        n += 1
    assert (n, digest.hexdigest()) == (oracle["games"], oracle["sha256"])


def _read_text(text: str) -> list[PgnGame | Skipped]:
    from tokpack.chess.pgn.games import read_chunk

    return [game for _, game in read_chunk(text.encode("utf-8", "surrogateescape"), 0)]  # type: ignore[misc]


BROKEN = {
    "illegal_move": lichess("b0000001", "1. e4 e5 2. Ke3"),
    "ambiguous": lichess("b0000002", "1. Nf3 d5 2. d3 e5 3. Nd2"),
    "no_rating": lichess("b0000003", "1. e4 e5", white="?"),
    "unknown_result": lichess("b0000004", "1. d4 d5", result="2-0"),
    "null_move": lichess("b0000005", "1. d4 -- 2. c4"),
    "pawn_without_file": lichess("b0000006", "1. e4 d5 2. d5"),
    "promotion_missing": lichess("b0000007", "1. a4 b5 2. axb5 a6 3. bxa6 Nc6 4. a7 Nf6 5. a8"),
    "castle_through_check": lichess("b0000008", "1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. d3 Qh4 5. h3 Qxf2+ 6. O-O"),
}


def test_broken_games_are_skipped_as_python_chess_finds_them(tmp_path: Path) -> None:
    text = "".join(BROKEN.values())
    (tmp_path / "broken.pgn").write_text(text, encoding="utf-8")
    games = ours(tmp_path / "broken.pgn")
    oracle = python_chess(text)
    assert len(games) == len(BROKEN)
    for name, game, (_moves, errors) in zip(BROKEN, games, oracle, strict=True):
        assert isinstance(game, Skipped), name
        if errors:
            assert (game.reason, game.detail) == ("illegal_move", errors[0]), name
    assert [g.reason for g in games] == ["illegal_move", "illegal_move", "no_rating", "unknown_result", "null_move",
                                         "illegal_move", "illegal_move", "illegal_move"]


def test_a_missing_rating_is_said_missing_and_an_empty_or_placeholder_one_quoted() -> None:
    """A game without the tag reads ``no WhiteElo tag``; one whose tag is there reads as its value."""
    absent = lichess("m0000001", "1. e4 e5").replace('[WhiteElo "1500"]\n', "")
    games = _read_text(absent + lichess("m0000002", "1. e4 e5", black="") + lichess("m0000003", "1. e4 e5", white="?")
                       + lichess("m0000004", "1. e4 e5").replace('[BlackElo "1600"]\n', ""))
    assert [(g.reason, g.detail) for g in games if isinstance(g, Skipped)] == [
        ("no_rating", "no WhiteElo tag"), ("no_rating", "BlackElo ''"), ("no_rating", "WhiteElo '?'"),
        ("no_rating", "no BlackElo tag")]


def test_header_only_game_is_counted_and_does_not_leak_its_tags(tmp_path: Path) -> None:
    """Issue 12 item 3: python-chess adds a header-only game's tags to the next game."""
    header_only = '[Event "x"]\n[Date "2016.04.01"]\n[WhiteElo "2000"]\n[BlackElo "2100"]\n[Result "1-0"]\n\n'
    next_game = '[Event "y"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n\n'
    (tmp_path / "g.pgn").write_text(header_only + next_game + lichess("c0000001", "1. d4"), encoding="utf-8")
    report = convert_pgn([tmp_path / "g.pgn"], tmp_path / "out")
    assert report.games_read == 3 and report.games_written == 1
    assert report.skipped["header_only"] == 1 and report.first_skipped["header_only"].startswith("g.pgn@0: ")
    assert report.skipped["no_rating"] == 1  # the next game has no ratings of its own


def test_unterminated_comment_ends_at_the_next_game(tmp_path: Path) -> None:
    """Issue 12 item 4: an unterminated '{' used to swallow the rest of the file."""
    text = lichess("d0000001", "1. e4 { never closed e5") + lichess("d0000002", "1. d4 d5") + lichess("d0000003", "1. c4")
    (tmp_path / "g.pgn").write_text(text, encoding="utf-8")
    games = ours(tmp_path / "g.pgn")
    assert isinstance(games[0], Skipped) and games[0].reason == "unreadable_movetext"
    assert [g.uci for g in games[1:]] == ["d2d4 d7d5", "c2c4"]  # type: ignore[union-attr]
    # A comment that spans a blank line is still one comment, as in python-chess.
    spanning = lichess("d0000004", "1. e4 { one\n\ncomment } e5")
    (tmp_path / "s.pgn").write_text(spanning, encoding="utf-8")
    assert [g.uci for g in ours(tmp_path / "s.pgn")] == ["e2e4 e7e5"]  # type: ignore[union-attr]


def test_impossible_dates_and_huge_ratings_are_unreadable_headers(tmp_path: Path) -> None:
    """Issue 12 item 4: Date 2016.13.45 was filed under month=13; a 24-digit Elo aborted the run."""
    assert judge_headers({"Date": "2016.13.45", "WhiteElo": "1", "BlackElo": "1", "Result": "*"}, "") == \
        Skipped("unreadable_header", "Date '2016.13.45' is not a calendar date")
    text = lichess("e0000001", "1. e4", date="2016.13.45") + lichess("e0000002", "1. e4", white="1" * 24) + \
        lichess("e0000003", "1. e4")
    (tmp_path / "g.pgn").write_text(text, encoding="utf-8")
    report = convert_pgn([tmp_path / "g.pgn"], tmp_path / "out")
    assert report.skipped["unreadable_header"] == 2 and report.months == {"2016-03": 1}


def test_utcdate_decides_the_month_and_header_columns_are_kept(tmp_path: Path) -> None:
    text = lichess("f0000001", "1. e4 { [%clk 0:03:00] } e5 { [%clk 0:02:58] } 2. Qh5 Nc6 { [%clk 0:02:50] }",
                   date="2016.05.31", tc="300+3", term="Time forfeit").replace('[UTCDate', '[Date "2016.06.01"]\n[UTCDate')
    (tmp_path / "g.pgn").write_text(text.replace("[Event", '[ECO "C20"]\n[Event'), encoding="utf-8")
    report = convert_pgn([tmp_path / "g.pgn"], tmp_path / "out", clocks=True)
    assert report.months == {"2016-05": 1}
    row = pq.read_table(month_parquet(tmp_path / "out", "2016-05")).to_pylist()[0]
    assert (row["time_control"], row["termination"], row["eco"], row["event"]) == ("300+3", "Time forfeit", "C20",
                                                                                     "Rated Blitz game")
    assert row["clocks"] == [180.0, 178.0, None, 170.0]


def test_clocks_match_python_chess(generated: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, _ = generated
    head = path.read_text(encoding="utf-8")[:400_000]
    head = head[: head.rindex("\n\n[") + 2]
    (tmp_path / "head.pgn").write_text(head, encoding="utf-8")
    from tokpack.chess.pgn.games import ReadOptions

    games = [g for _, g in read_games(tmp_path / "head.pgn", ReadOptions(clocks=True))]
    handle = io.StringIO(head)
    for game in games:
        reference = chess.pgn.read_game(handle)
        assert reference is not None and isinstance(game, PgnGame)
        assert list(game.clocks or ()) == [node.clock() for node in reference.mainline()]


@pytest.mark.parametrize("compress", ["zst", "gz", "bz2", "stdin"])
def test_compressed_inputs_and_stdin_convert_like_plain_pgn(generated: tuple[Path, list[str]], tmp_path: Path,
                                                             compress: str) -> None:
    """Issue 12 item 4: .pgn.zst and .pgn.gz used to give '0 written' with exit 0."""
    path, _ = generated
    data = path.read_bytes()[:300_000]
    data = data[: data.rindex(b"\n\n[") + 2]
    (tmp_path / "plain.pgn").write_bytes(data)
    plain = convert_pgn([tmp_path / "plain.pgn"], tmp_path / "plain")
    assert plain.games_written > 100
    if compress == "stdin":
        out = tmp_path / "stdin"
        code = f"from tokpack.chess.pgn.convert import convert_pgn; convert_pgn(['-'], {str(out)!r})"
        subprocess.run([sys.executable, "-c", code], input=data, check=True,
                       env={"PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")})
    else:
        packed = {"zst": zstandard.ZstdCompressor().compress, "gz": gzip.compress, "bz2": bz2.compress}[compress](data)
        source = tmp_path / f"games.pgn.{compress}"
        source.write_bytes(packed)
        out = tmp_path / compress
        convert_pgn([source], out)
    for month in plain.months:
        assert month_parquet(out, month).read_bytes() == month_parquet(tmp_path / "plain", month).read_bytes()
    assert (out / REPORT_FILE).read_text().replace("-", "").count("games.pgn") <= 1


def test_filters_drop_and_count(tmp_path: Path) -> None:
    text = (lichess("g0000001", "1. e4", white="1400")
            + lichess("g0000002", "1. e4", tc="60+0")
            + lichess("g0000003", "1. e4", term="Abandoned")
            + lichess("g0000004", "1. e4").replace("Rated Blitz", "Casual Blitz")
            + lichess("g0000005", "1. e4", tc="300+2")
            + lichess("g0000006", "1. e4 e5 2. Ke3"))
    (tmp_path / "g.pgn").write_text(text, encoding="utf-8")
    keep = GameFilter(min_elo=1500, rated_only=True, speeds=("blitz", "rapid"), terminations=("normal",))
    report = convert_pgn([tmp_path / "g.pgn"], tmp_path / "out", filters=keep)
    assert report.filtered == {"min_elo": 1, "rated_only": 1, "speed": 1, "termination": 1}
    assert report.games_read == 6 and report.games_written == 1 and report.skipped["illegal_move"] == 1
    assert GameFilter.speed_of("180+2") == "blitz" and GameFilter.speed_of("15+0") == "ultrabullet"
    with pytest.raises(ValueError, match="unknown speed 'hyper'"):
        GameFilter(speeds=("hyper",))


def test_workers_give_byte_identical_output(generated: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, _ = generated
    data = path.read_bytes()[:1_500_000]
    (tmp_path / "g.pgn").write_bytes(data[: data.rindex(b"\n\n[") + 2])
    one = convert_pgn([tmp_path / "g.pgn"], tmp_path / "one", chunk_bytes=100_000, flush_games=500)
    two = convert_pgn([tmp_path / "g.pgn"], tmp_path / "two", chunk_bytes=100_000, flush_games=500, workers=2)
    assert one == two and one.games_written > 1000
    for month in one.months:
        assert month_parquet(tmp_path / "one", month).read_bytes() == month_parquet(tmp_path / "two", month).read_bytes()


def test_spills_and_row_groups_do_not_depend_on_chunk_size(generated: tuple[Path, list[str]], tmp_path: Path) -> None:
    # Games are buffered a chunk at a time; a spill must still come after exactly flush_games games,
    # each spill adding one row group to every month it holds, whatever the chunks are.
    path, _ = generated
    data = path.read_bytes()[:1_500_000]
    (tmp_path / "g.pgn").write_bytes(data[: data.rindex(b"\n\n[") + 2])
    small = convert_pgn([tmp_path / "g.pgn"], tmp_path / "small", chunk_bytes=100_000, flush_games=400)
    whole = convert_pgn([tmp_path / "g.pgn"], tmp_path / "whole", flush_games=400)
    assert small == whole and small.games_written > 1000
    kept = [game.month for _, game in read_games(tmp_path / "g.pgn") if isinstance(game, PgnGame)]
    expected: dict[str, list[int]] = {}
    for start in range(0, len(kept), 400):
        spill: dict[str, int] = {}
        for month in kept[start:start + 400]:
            spill[month] = spill.get(month, 0) + 1
        for month, rows in spill.items():
            expected.setdefault(month, []).append(rows)
    for month in small.months:
        assert month_parquet(tmp_path / "small", month).read_bytes() == month_parquet(tmp_path / "whole", month).read_bytes()
        meta = pq.ParquetFile(month_parquet(tmp_path / "small", month)).metadata
        assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == expected[month]


def test_corrupt_and_truncated_compressed_inputs_are_input_errors(tmp_path: Path) -> None:
    text = lichess("h0000001", "1. e4 e5") * 50
    (tmp_path / "bad.pgn.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"not zstd at all")
    packed = gzip.compress(text.encode())
    (tmp_path / "cut.pgn.gz").write_bytes(packed[: len(packed) // 2])
    for name, message in (("bad.pgn.zst", "not a readable zstd stream"), ("cut.pgn.gz", "cannot be read")):
        with pytest.raises(ValueError, match=f"{name}: .*{message}"):
            convert_pgn([tmp_path / name], tmp_path / f"out-{name}")
        assert not (tmp_path / f"out-{name}").exists()


@pytest.mark.parametrize("line_end", ["\r\n", "\r"])
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_a_games_byte_offset_is_where_its_tags_start_whatever_the_line_ends(line_end: str, bom: str) -> None:
    """A game's offset (what a skip report names) is the byte of its ``[`` in the file, with ``\\r\\n``
    line ends as with ``\\n``, read whole or cut into chunks."""
    from tokpack.chess.pgn.games import read_chunk
    from tokpack.chess.pgn.read import cut_games, cut_games_python
    from tokpack.chess.pgn.stream import pgn_chunks

    games = [lichess("a1", "1. e4 e5"), lichess("a2", "1. d4 d5", white="?"), lichess("a3", "1. c4 Ké5 c5")]
    text = bom + "".join(games).replace("\n", line_end)
    data = text.encode("utf-8")
    starts = [m.start() for m in re.finditer(rb"\[Event ", data)]
    assert [offset for offset, _ in read_chunk(data, 7)] == [7 + start for start in starts]
    assert [game.offset for game in cut_games(text, 7)] == [game.offset for game in cut_games_python(text, 7)] \
        == [7 + start for start in starts]
    chunked = [entry for offset, chunk in pgn_chunks(io.BytesIO(data), "x", 64) for entry in read_chunk(chunk, offset)]
    assert chunked == read_chunk(data, 0)


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r", "\n  ", "\r\n\t", "\r "])
def test_chunks_stay_small_whatever_the_line_ends_and_indents(line_end: str) -> None:
    """A file with ``\\r`` line ends, or whose blank lines hold spaces or tabs, is cut into chunks of
    about ``chunk_bytes`` as any other (not read whole into one chunk), and reads as it does whole."""
    from tokpack.chess.pgn.games import read_chunk
    from tokpack.chess.pgn.stream import pgn_chunks

    text = "".join(lichess(f"c{i}", "1. e4 e5 2. Nf3", white="?" if i % 7 == 0 else "1500") for i in range(300))
    data = text.replace("\n", line_end).encode()
    chunks = list(pgn_chunks(io.BytesIO(data), "x", 4096))
    assert len(chunks) > 10 and max(len(chunk) for _, chunk in chunks) < 2 * 4096
    assert [entry for offset, chunk in chunks for entry in read_chunk(chunk, offset)] == read_chunk(data, 0)
