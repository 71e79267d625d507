"""PGN to monthly parquet: partitions, skip reasons with byte offsets, streaming, all-or-nothing output."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tokpack.chess.pgn.convert import REPORT_FILE, convert_pgn, month_parquet
from tokpack.chess.pgn.games import COLUMNS, read_games, read_games_strictly

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

GOOD = """[Event "a"]
[Site "https://lichess.org/AbCd1234"]
[Date "2016.03.05"]
[Result "1-0"]
[WhiteElo "1500"]
[BlackElo "1600"]

1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0

"""
BAD = {
    "illegal_move": '[Event "b"]\n[Date "2016.03.06"]\n[Result "1-0"]\n[WhiteElo "1500"]\n[BlackElo "1600"]\n\n1. e4 e5 2. Ke3 1-0\n\n',
    "no_rating": '[Event "c"]\n[Date "2016.03.06"]\n[Result "1-0"]\n[WhiteElo "?"]\n[BlackElo "1600"]\n\n1. e4 e5 1-0\n\n',
    "unreadable_header": '[Event "d\n[Date "2016.03.06"]\n[Result "0-1"]\n[WhiteElo "1500"]\n[BlackElo "1600"]\n\n1. d4 d5 0-1\n\n',
    "unknown_result": '[Event "e"]\n[Date "2016.03.06"]\n[Result "2-0"]\n[WhiteElo "1500"]\n[BlackElo "1600"]\n\n1. d4 d5 *\n\n',
    "null_move": '[Event "f"]\n[Date "2016.03.06"]\n[Result "*"]\n[WhiteElo "1500"]\n[BlackElo "1600"]\n\n1. d4 -- 2. c4 *\n\n',
    "not_standard_start": '[Event "g"]\n[Date "2016.03.06"]\n[Result "*"]\n[WhiteElo "1"]\n[BlackElo "1"]\n[SetUp "1"]\n[FEN "8/8/8/8/8/8/8/K6k w - - 0 1"]\n\n1. Kb1 *\n\n',
}
NO_MONTH = '[Event "h"]\n[Date "2015.??.??"]\n[Result "1/2-1/2"]\n[WhiteElo "2000"]\n[BlackElo "2100"]\n\n1. d4 d5 1/2-1/2\n\n'


def test_conversion_partitions_by_month_and_reports_every_skip(tmp_path: Path) -> None:
    text = GOOD + "".join(BAD.values()) + NO_MONTH
    pgn = tmp_path / "games.pgn"
    pgn.write_text(text, encoding="utf-8")
    report = convert_pgn([pgn], tmp_path / "out")
    assert (report.games_read, report.games_written) == (8, 2)
    assert {reason: n for reason, n in report.skipped.items() if n} == {reason: 1 for reason in BAD}
    for reason, game_text in BAD.items():
        offset = text.encode().index(game_text.encode())
        assert report.first_skipped[reason].startswith(f"games.pgn@{offset}: "), reason
    assert report.months == {"2015-00": 1, "2016-03": 1}
    march = pq.read_table(month_parquet(tmp_path / "out", "2016-03"))
    assert tuple(march.column_names) == COLUMNS
    assert march.to_pylist() == [{"id": "AbCd1234", "date": "2016.03.05", "white_elo": 1500, "black_elo": 1600,
                                  "result": "1-0", "uci": "e2e4 e7e5 d1h5 b8c6 f1c4 g8f6 h5f7", "n_plies": 7,
                                  "time_control": None, "termination": None, "eco": None, "event": "a"}]
    unknown_month = pq.read_table(tmp_path / "out" / "year=2015" / "month=00" / "games.parquet")
    assert unknown_month.column("date").to_pylist() == ["2015.??.??"]
    saved = json.loads((tmp_path / "out" / REPORT_FILE).read_text(encoding="utf-8"))
    assert saved["schema"] == "tokpack.chess.convert.v2" and saved["games_written"] == 2


def test_spilling_to_parts_keeps_every_game_in_order(tmp_path: Path) -> None:
    pgn = FIXTURES / "chess_games.pgn"
    whole = convert_pgn([pgn, pgn], tmp_path / "whole")
    spilled = convert_pgn([pgn, pgn], tmp_path / "spilled", flush_games=3)
    assert whole == spilled and whole.games_written == 40
    for month in whole.months:
        a = pq.read_table(month_parquet(tmp_path / "whole", month))
        b = pq.read_table(month_parquet(tmp_path / "spilled", month))
        assert a.equals(b)
    assert not list((tmp_path / "spilled").rglob(".part-*"))


@pytest.mark.parametrize(("month_writers", "clocks"), [(0, False), (2, False), (0, True), (2, True)])
def test_months_written_straight_or_joined_from_parts_are_the_same_bytes(tmp_path: Path, month_writers: int,
                                                                          clocks: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The first MONTH_WRITERS months go straight to their file, later ones through part files:
    either way each month's file is byte for byte the same, with or without the clocks list column."""
    from tokpack.chess.pgn import convert

    inputs = [FIXTURES / "chess_games.pgn"] * 3  # 20 games over several months, three times
    convert_pgn(inputs, tmp_path / "straight", flush_games=7, clocks=clocks)
    monkeypatch.setattr(convert, "MONTH_WRITERS", month_writers)
    report = convert_pgn(inputs, tmp_path / "mixed", flush_games=7, clocks=clocks)
    assert len(report.months) > month_writers + 1
    for month in report.months:
        straight, mixed = month_parquet(tmp_path / "straight", month), month_parquet(tmp_path / "mixed", month)
        assert straight.read_bytes() == mixed.read_bytes(), month
    assert not list((tmp_path / "mixed").rglob(".part-*"))


def test_output_is_all_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "exists").mkdir()
    with pytest.raises(ValueError, match="already exists"):
        convert_pgn([FIXTURES / "chess_games.pgn"], tmp_path / "exists")
    with pytest.raises(ValueError, match="missing.pgn: not a file"):
        convert_pgn([FIXTURES / "chess_games.pgn", tmp_path / "missing.pgn"], tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exists"]


def test_strict_reading_stops_at_the_first_bad_game(tmp_path: Path) -> None:
    games = read_games_strictly(FIXTURES / "chess_games.pgn")
    assert len(games) == 20 and len({g.id for g in games}) == 20
    corrupt = tmp_path / "corrupt.pgn"
    corrupt.write_text(GOOD + BAD["illegal_move"], encoding="utf-8")
    with pytest.raises(ValueError, match=rf"corrupt.pgn@{len(GOOD.encode())}: illegal_move: illegal san: 'Ke3'"):
        read_games_strictly(corrupt)
    offsets = [offset for offset, _ in read_games(corrupt)]
    assert offsets == [0, len(GOOD.encode())]
