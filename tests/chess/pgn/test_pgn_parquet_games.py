"""`chess convert` reads Parquet games (Lichess's Hugging Face shards) as it reads PGN: the same
games table from the repository's games written as Parquet, a Lichess-shaped folder (its column
names and types, its ``year=``/``month=`` folders) converted without options, local or on S3, and
one-line errors naming the file and the row."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from typer.testing import CliRunner

from tokpack.chess.pgn.convert import convert_pgn
from tokpack.cli import app
from tokpack.errors import InputError

from cached import cached_lichess_pgn

runner = CliRunner()
_TAG = re.compile(r'^\[([A-Za-z0-9_]+) "(.*)"\]$')


def pgn_rows(text: str) -> list[tuple[dict[str, str], str]]:
    """Each game of a clean PGN text (tags, one blank line, movetext, one blank line) as its tags
    and its movetext: how a table of games holds them."""
    games = []
    for block in re.split(r"\n\n(?=\[)", text.strip("\n")):
        head, _, movetext = block.partition("\n\n")
        tags = dict(_TAG.match(line).groups() for line in head.split("\n"))  # type: ignore[union-attr]
        games.append((tags, movetext.strip("\n")))
    return games


def as_table(games: list[tuple[dict[str, str], str]]) -> pa.Table:
    """Every tag a column of text (null where a game lacks it), beside ``movetext``."""
    names = sorted({name for tags, _ in games for name in tags})
    columns = {name: pa.array([tags.get(name) for tags, _ in games], pa.string()) for name in names}
    return pa.table({**columns, "movetext": [movetext for _, movetext in games]})


def lichess_table(games: list[tuple[dict[str, str], str]]) -> pa.Table:
    """The columns and types of Lichess's Hugging Face dataset (``Lichess/standard-chess-games``)."""
    def text(name: str) -> pa.Array:
        return pa.array([tags.get(name) for tags, _ in games], pa.string())

    def number(name: str) -> pa.Array:
        return pa.array([int(tags[name]) if name in tags else None for tags, _ in games], pa.int16())

    dates = [datetime.date(*map(int, tags["UTCDate"].split("."))) for tags, _ in games]
    times = [datetime.time(*map(int, tags["UTCTime"].split(":"))) for tags, _ in games]
    return pa.table({
        "Event": text("Event"), "Site": text("Site"), "White": text("White"), "Black": text("Black"),
        "Result": text("Result"), "WhiteTitle": text("WhiteTitle"), "BlackTitle": text("BlackTitle"),
        "WhiteElo": number("WhiteElo"), "BlackElo": number("BlackElo"),
        "WhiteRatingDiff": number("WhiteRatingDiff"), "BlackRatingDiff": number("BlackRatingDiff"),
        "UTCDate": pa.array(dates, pa.date32()), "UTCTime": pa.array(times, pa.time32("s")),
        "ECO": text("ECO"), "Opening": text("Opening"), "Termination": text("Termination"),
        "TimeControl": text("TimeControl"), "movetext": pa.array([m for _, m in games], pa.string()),
    })


def converted(out: Path) -> dict[str, bytes]:
    """Every games table of a conversion, by its month folder, as bytes."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("games.parquet"))}


def report(out: Path) -> dict:
    return json.loads((out / "convert-report.json").read_text(encoding="utf-8"))


def convert(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, ["chess", "convert", *args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def lichess(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> tuple[Path, Path]:
    """1,500 Lichess-style games as PGN, and the same games as a Lichess-shaped Parquet folder:
    ``data/year=2016/month=MM/train-0000K-of-0000N.parquet``, a month's games in two shards."""
    folder = tmp_path_factory.mktemp("lichess")
    text, _ = cached_lichess_pgn(pytestconfig, 1500, seed=11)
    games = pgn_rows(text)
    # Lichess-style Date tags are sometimes '????.MM.DD'; the dataset has no Date column, and a
    # converted game's date is its UTCDate.
    pgn = folder / "games.pgn"
    pgn.write_text(text, encoding="utf-8")
    by_month: dict[str, list[int]] = {}
    for number, (tags, _) in enumerate(games):
        by_month.setdefault(tags["UTCDate"][5:7], []).append(number)
    for month, numbers in sorted(by_month.items()):
        half = len(numbers) // 2
        for shard, part in enumerate((numbers[:half], numbers[half:])):
            target = folder / "data" / "year=2016" / f"month={month}" / f"train-{shard:05d}-of-00002.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(lichess_table([games[i] for i in part]), target, row_group_size=100)
    return pgn, folder / "data"


def test_the_repositorys_games_as_parquet_convert_to_the_same_table(shared_data: Path, tmp_path: Path) -> None:
    text = zstandard.decompress((shared_data / "chess" / "games.pgn.zst").read_bytes()).decode("utf-8")
    games = pgn_rows(text)
    assert len(games) > 28_000
    pgn, table = tmp_path / "games.pgn", tmp_path / "games.parquet"
    pgn.write_text(text, encoding="utf-8")
    pq.write_table(as_table(games), table, row_group_size=5_000)
    from_pgn = convert_pgn([pgn], tmp_path / "from-pgn")
    from_parquet = convert_pgn([table], tmp_path / "from-parquet")
    assert converted(tmp_path / "from-parquet") == converted(tmp_path / "from-pgn")
    assert from_parquet.games_written == from_pgn.games_written > 28_000
    assert (from_parquet.skipped, from_parquet.filtered, from_parquet.months) == (from_pgn.skipped, from_pgn.filtered, from_pgn.months)


def test_a_lichess_shaped_folder_converts_without_options(lichess: tuple[Path, Path], tmp_path: Path) -> None:
    pgn, data = lichess
    code, output = convert([str(data), "-o", str(tmp_path / "from-parquet")])
    assert code == 0, output
    code, output = convert([str(pgn), "-o", str(tmp_path / "from-pgn")])
    assert code == 0, output
    tables = converted(tmp_path / "from-parquet")
    assert len(tables) == 12 and tables == converted(tmp_path / "from-pgn")
    ours, theirs = report(tmp_path / "from-parquet"), report(tmp_path / "from-pgn")
    assert ours["inputs"] == ["data"] and ours["games_read"] == theirs["games_read"] == 1500
    assert ours["skipped"] == theirs["skipped"] and ours["months"] == theirs["months"]
    # A skipped game is named by its file and row (Lichess-style games include '*' results, but
    # their ratings are all there: give one game no rating to see the row named).
    first = sorted(data.rglob("*.parquet"))[0]
    table = pq.read_table(first)
    ratings = table.column("WhiteElo").to_pylist()
    ratings[3] = None
    table = table.set_column(table.schema.get_field_index("WhiteElo"), "WhiteElo", pa.array(ratings, pa.int16()))
    pq.write_table(table, tmp_path / "one.parquet")
    code, output = convert([str(tmp_path / "one.parquet"), "-o", str(tmp_path / "one")])
    assert code == 0, output
    assert report(tmp_path / "one")["first_skipped"]["no_rating"] == f"{tmp_path / 'one.parquet'}@row 3: no WhiteElo tag"


def test_filters_and_clocks_read_parquet_as_they_read_pgn(lichess: tuple[Path, Path], tmp_path: Path) -> None:
    pgn, data = lichess
    options = ["--clocks", "--min-elo", "1200", "--speed", "blitz,rapid", "--termination", "normal", "--workers", "2"]
    assert convert([str(data), "-o", str(tmp_path / "a"), *options])[0] == 0
    assert convert([str(pgn), "-o", str(tmp_path / "b"), *options])[0] == 0
    assert converted(tmp_path / "a") == converted(tmp_path / "b")
    assert report(tmp_path / "a")["filtered"] == report(tmp_path / "b")["filtered"]
    assert sum(report(tmp_path / "a")["filtered"].values()) > 0


def test_parquet_on_object_storage_converts_as_locally(lichess: tuple[Path, Path], tmp_path: Path) -> None:
    import s3fs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"key": "testing", "secret": "testing", "skip_instance_cache": True,
                   "client_kwargs": {"endpoint_url": f"http://{host}:{port}", "region_name": "us-east-1"}}
        fs = s3fs.S3FileSystem(**options)
        fs.call_s3("create_bucket", Bucket="games")
        _, data = lichess
        for path in sorted(data.rglob("*.parquet")):
            fs.put_file(str(path), f"games/lichess/data/{path.relative_to(data).as_posix()}")
        code, output = convert(["s3://games/lichess/data", "-o", str(tmp_path / "remote"),
                                "--storage-options", json.dumps(options)])
        assert code == 0, output
        assert convert([str(data), "-o", str(tmp_path / "local")])[0] == 0
        assert converted(tmp_path / "remote") == converted(tmp_path / "local")
        assert report(tmp_path / "remote")["inputs"] == ["s3://games/lichess/data"]
        code, output = convert(["s3://games/nothing-here", "-o", str(tmp_path / "none"), "--storage-options", json.dumps(options)])
        assert code == 2 and "s3://games/nothing-here: no such file or folder" in output
    finally:
        server.stop()


def test_parquet_a_converter_cannot_read_is_one_line(tmp_path: Path) -> None:
    pq.write_table(pa.table({"uci": ["e2e4"], "WhiteElo": [1500]}), tmp_path / "uci.parquet")
    code, output = convert([str(tmp_path / "uci.parquet"), "-o", str(tmp_path / "a")])
    assert code == 2 and f"{tmp_path / 'uci.parquet'}: no 'movetext' column (columns: uci, WhiteElo)" in output
    assert len(output.strip().splitlines()) == 1 and not (tmp_path / "a").exists()
    (tmp_path / "empty").mkdir()
    code, output = convert([str(tmp_path / "empty"), "-o", str(tmp_path / "b")])
    assert code == 2 and "a folder without .parquet files" in output
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    code, output = convert([str(tmp_path / "broken.parquet"), "-o", str(tmp_path / "c")])
    assert code == 2 and "not a readable Parquet file" in output and not (tmp_path / "c").exists()
    pq.write_table(pa.table({"movetext": pa.array([1, 2])}), tmp_path / "numbers.parquet")
    with pytest.raises(InputError, match="numbers.parquet: the 'movetext' column holds int64, not text"):
        convert_pgn([tmp_path / "numbers.parquet"], tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_a_header_value_across_lines_and_blank_lines_in_movetext_stay_one_game(tmp_path: Path) -> None:
    table = pa.table({"Event": ["Rated\nBlitz game", None], "Site": ["https://lichess.org/abcd1234", "x"],
                      "Clocks": [[1.0, 2.0], None],  # lists are no header: left out
                      "WhiteElo": [1500, 1600], "BlackElo": [1700, 1800], "Result": ["1-0", "0-1"],
                      "UTCDate": [datetime.date(2016, 1, 2)] * 2,
                      "movetext": pa.array(["1. e4 e5\n\n\n2. Nf3 1-0", "1. d4 d5 0-1"], pa.large_string())})
    pq.write_table(table, tmp_path / "odd.parquet")
    result = convert_pgn([tmp_path / "odd.parquet"], tmp_path / "out")
    assert result.games_read == result.games_written == 2
    rows = pq.read_table(tmp_path / "out" / "year=2016" / "month=01" / "games.parquet").to_pylist()
    assert [row["uci"] for row in rows] == ["e2e4 e7e5 g1f3", "d2d4 d7d5"]
    assert [row["event"] for row in rows] == ["Rated Blitz game", None] and rows[0]["id"] == "abcd1234"


def test_timestamp_date_and_time_columns_read_as_the_tags_they_name(tmp_path: Path) -> None:
    # pandas writes dates as timestamps: UTCDate is the day, UTCTime the time of day (in UTC)
    moment = datetime.datetime(2016, 1, 2, 23, 30, 5)
    common = {"Site": ["https://lichess.org/abcd1234"], "WhiteElo": [1500], "BlackElo": [1600], "Result": ["1-0"],
              "movetext": ["1. e4 e5 1-0"]}
    pq.write_table(pa.table({**common, "UTCDate": pa.array([moment.date()], pa.date32()),
                             "UTCTime": pa.array([moment.time()], pa.time32("s"))}), tmp_path / "dates.parquet")
    paris = pa.array([moment.replace(tzinfo=datetime.timezone.utc)], pa.timestamp("ms", tz="UTC")).cast(
        pa.timestamp("ms", tz="Europe/Paris"))  # the same instant, stored with another zone
    pq.write_table(pa.table({**common, "UTCDate": pa.array([moment], pa.timestamp("ns")), "UTCTime": paris}),
                   tmp_path / "timestamps.parquet")
    assert convert_pgn([tmp_path / "dates.parquet"], tmp_path / "a").games_written == 1
    result = convert_pgn([tmp_path / "timestamps.parquet"], tmp_path / "b")
    assert result.games_written == 1, result.skipped
    assert converted(tmp_path / "b") == converted(tmp_path / "a")


def test_a_parquet_file_naming_a_column_twice_is_one_line(tmp_path: Path) -> None:
    table = pa.Table.from_arrays([pa.array(["w"]), pa.array(["x"]), pa.array(["1. e4 1-0"])], names=["White", "White", "movetext"])
    pq.write_table(table, tmp_path / "twice.parquet")
    code, output = convert([str(tmp_path / "twice.parquet"), "-o", str(tmp_path / "a")])
    assert code == 2 and f"{tmp_path / 'twice.parquet'}: column 'White' appears twice" in output
    assert len(output.strip().splitlines()) == 1 and not (tmp_path / "a").exists()
