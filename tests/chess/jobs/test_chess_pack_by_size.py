"""Packing many months: shards cut by size across months (``--shard-mb``, ``--shard-games``), each
month a named range the loaders select, no lock or marker file left in a finished dataset, small
months encoded together; and ``tokpack chess convert`` without the BPE trainer's modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.jobs.shards import UCI_BYTES_PER_PLY, plan_shards
from tokpack.chess.pgn.convert import month_parquet
from tokpack.chess.schemes import make_encoder
from tokpack.cli import app
from tokpack.engines import run_shard
from tokpack.errors import InputError
from tokpack.serve import PackedBatches, Windows
from tokpack.store import Pack
from tokpack.store.dataset import ShardedDataset

ROOT = Path(__file__).resolve().parents[3]
REAL_GAMES = ROOT / "data" / "chess" / "games.parquet"
N_GAMES, N_MONTHS = 6_000, 156
runner = CliRunner()


def month_of(index: int) -> str:
    return f"{1990 + index // 12}-{index % 12 + 1:02d}"


@pytest.fixture(scope="module")
def many_months(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 6,000 real games as a converted tree of 156 month tables (game i in month i % 156)."""
    games = tmp_path_factory.mktemp("months") / "games"
    table = pq.read_table(REAL_GAMES).slice(0, N_GAMES)
    month = np.arange(N_GAMES) % N_MONTHS
    for index in range(N_MONTHS):
        target = month_parquet(games, month_of(index))
        target.parent.mkdir(parents=True)
        pq.write_table(table.take(np.flatnonzero(month == index)), target)
    return games


def write_config(folder: Path, games: Path, **fields: object) -> Path:
    lines = [f'games_dir = "{games.as_posix()}"', 'out_dir = "tokens"', 'train_months = "all"', "val_fraction = 0.05"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    config = folder / "tokpack-chess.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def tokenize(config: Path, *options: str) -> str:
    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "uci", "--pack", "--config", str(config), *options])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def packed(many_months: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tokpack chess tokenize --scheme uci --pack`` of every month, with the default shard size."""
    folder = tmp_path_factory.mktemp("packed")
    tokenize(write_config(folder, many_months))
    return folder / "tokens" / "uci"


def test_many_months_pack_into_few_shards_and_the_finished_folder_holds_no_lock_or_marker(packed: Path) -> None:
    train, val = ShardedDataset(packed / "train", verify=True), ShardedDataset(packed / "val", verify=True)
    assert train.n_docs + val.n_docs == N_GAMES
    assert len(train.shards) + len(val.shards) <= 4  # 6,000 games are far below one 64 MB shard
    for folder in (packed / "train", packed / "val"):
        assert sorted(p.name for p in folder.iterdir()) == [
            "dataset.json", "encoder.json", "job.json", *(f"shard-{i:05d}" for i in range(len(ShardedDataset(folder).shards)))]


def test_each_month_is_a_named_range_the_loaders_select(packed: Path, many_months: Path, tmp_path: Path) -> None:
    train = ShardedDataset(packed / "train")
    months = [month_of(i) for i in range(N_MONTHS)]
    training_months = [m for m in months if m in train.meta.ranges]
    assert sorted(train.meta.ranges) == sorted(["train", *training_months]) and len(training_months) > 100
    month = training_months[37]
    alone = tmp_path / "alone"
    pack_games(month_parquet(many_months, month), make_encoder("uci"), alone)
    reference = Pack(alone)
    span = train.meta.ranges[month]
    assert span.documents[1] - span.documents[0] == reference.n_docs
    assert np.array_equal(train.take(np.arange(*span.tokens)), reference.tokens)
    # The README's way to read one month: split=<the month>.
    windows, expected = Windows(packed / "train", block=64, split=month), Windows(alone, block=64)
    assert len(windows) == len(expected) == reference.n_docs
    everything = np.arange(len(windows))
    for ours, theirs in zip(windows.window_batch(everything), expected.window_batch(everything)):
        assert np.array_equal(ours, theirs)
    rows = PackedBatches(packed / "train", layout="documents", length=32, global_batch=2, split=month, seed=1)
    assert set(np.unique(rows.batch(0)["input_ids"])) <= set(np.unique(reference.tokens))


def cut(plies: np.ndarray, limit_bytes: float, limit_games: int | None = None) -> list[int]:
    """Games per shard, the rule spelled out: whole games until their moves reach ``limit_bytes``
    as UCI text or the shard holds ``limit_games``."""
    sizes, held, games = [], 0, 0
    for n in plies:
        held, games = held + int(n) * UCI_BYTES_PER_PLY, games + 1
        if held >= limit_bytes or games == limit_games:
            sizes.append(games)
            held, games = 0, 0
    return sizes + ([games] if games else [])


def test_shard_mb_and_shard_games_cut_shards_at_game_boundaries_across_months(many_months: Path, tmp_path: Path) -> None:
    tables = [month_parquet(many_months, month_of(i)) for i in range(N_MONTHS)]
    plies = {t: pq.read_table(t, columns=["n_plies"]).column(0).to_numpy() for t in tables}
    every = np.concatenate(list(plies.values()))
    limit = 250_000  # bytes of moves as UCI text: 0.25 MB

    def games_per_shard(shards: list) -> list[int]:  # type: ignore[type-arg]
        return [sum(p.rows[1] - p.rows[0] for p in s.pieces) for s in shards]

    by_bytes = plan_shards(tables, shard_bytes=limit)
    assert games_per_shard(by_bytes) == cut(every, limit)
    assert len(by_bytes) > 4 and any(len(s.pieces) > 10 for s in by_bytes)  # shards span many months
    assert games_per_shard(plan_shards(tables, shard_games=300, shard_bytes=limit)) == cut(every, limit, 300)
    # Through the CLI: --shard-mb, and --shard-games still there.
    for options, expected in ((["--shard-mb", "0.25"], None), (["--shard-games", "500"], 500)):
        folder = tmp_path / options[0].strip("-")
        folder.mkdir()
        tokenize(write_config(folder, many_months), *options)
        train = ShardedDataset(folder / "tokens" / "uci" / "train", verify=True)
        sizes = [s.n_docs for s in train.shards]
        if expected is None:
            months = [t for i, t in enumerate(tables) if month_of(i) in train.meta.ranges]
            assert sizes == cut(np.concatenate([plies[t] for t in months]), limit)
        else:
            assert sizes[:-1] == [expected] * (len(sizes) - 1) and 0 < sizes[-1] <= expected
        assert len(sizes) > 4


def test_a_task_rerun_on_a_finished_dataset_does_nothing_and_leaves_nothing(packed: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "train"
    shutil.copytree(packed / "train", copy)
    before = {p.name: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert run_shard(copy, 0) is False  # as a scheduler's retry of a task that had finished
    assert {p.name: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    with pytest.raises(InputError, match="outside the job"):
        run_shard(copy, 5)


def test_a_bad_game_is_named_by_its_month_table_and_row(many_months: Path, tmp_path: Path) -> None:
    """Small months share an encoding batch; an error still names the month's own file and row."""
    import shutil

    games = tmp_path / "games"
    shutil.copytree(many_months, games)
    broken = month_parquet(games, month_of(40))
    table = pq.read_table(broken)
    uci = table.column("uci").to_pylist()
    uci[3] = "e2e4 e7e5 e1e8"
    pq.write_table(table.set_column(table.schema.get_field_index("uci"), "uci", pa.array(uci)), broken)
    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "san", "--pack", "--config", str(write_config(tmp_path, games))])
    assert result.exit_code == 2, result.output
    assert f"{broken}: row 3: ply 3" in result.output.replace("\n", "")
    assert not (tmp_path / "tokens" / "san" / "train").exists()


CONVERT_IMPORTS = """
import sys
from tokpack.cli import main
sys.argv = ["tokpack", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    assert not done.code, done.code
print("BPE MODULES:", sorted(m for m in sys.modules if m == "tokpack.bpe" or m.startswith("tokpack.bpe.")))
"""


@pytest.mark.parametrize("arguments", [["chess", "convert", "--help"], ["chess", "convert", "GAMES", "--out", "OUT"]])
def test_chess_convert_imports_no_bpe_module(arguments: list[str], tmp_path: Path) -> None:
    pgn = tmp_path / "games.pgn"
    pgn.write_text((ROOT / "tests" / "fixtures" / "chess_games.pgn").read_text(encoding="utf-8"), encoding="utf-8")
    arguments = [str(pgn) if a == "GAMES" else str(tmp_path / "out") if a == "OUT" else a for a in arguments]
    done = subprocess.run([sys.executable, "-c", CONVERT_IMPORTS, *arguments], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "BPE MODULES: []" in done.stdout, done.stdout[-500:]


def test_bpe_commands_still_state_and_apply_the_challenge_limits(tmp_path: Path) -> None:
    """The limits are read when a bpe command runs (so other commands never load the trainer):
    their help states the library's values."""
    from tokpack.bpe.challenge import MAX_CORPUS_BYTES, MAX_MERGES

    for command in ("proof", "verify"):
        shown = " ".join(runner.invoke(app, ["bpe", command, "--help"], terminal_width=200).output.split())
        assert f"default {MAX_CORPUS_BYTES:,}" in shown and f"default {MAX_MERGES:,}" in shown


def test_a_month_listed_twice_is_refused_before_anything_is_written(many_months: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, many_months)
    text = config.read_text(encoding="utf-8").replace('train_months = "all"', 'train_months = ["1990-01", "1990-02", "1990-01"]')
    config.write_text(text.replace("val_fraction = 0.05", 'val_months = ["1990-03"]'), encoding="utf-8")
    result = runner.invoke(app, ["chess", "tokenize", "--scheme", "uci", "--pack", "--config", str(config)])
    assert result.exit_code == 2 and "month=01/games.parquet: is listed twice" in result.output.replace("\n", "")
    assert not (tmp_path / "tokens" / "uci" / "train").exists()


def test_an_export_writes_the_split_once_and_a_month_when_named(packed: Path, tmp_path: Path) -> None:
    """Month ranges lie inside the split: an export's splits are train/validation/test only."""
    result = runner.invoke(app, ["export", str(packed / "train"), str(tmp_path / "hf"), "--format", "hf"])
    assert result.exit_code == 0, result.output
    train = ShardedDataset(packed / "train")
    assert sorted(p.name for p in (tmp_path / "hf").iterdir() if p.is_dir()) == ["train"]
    rows = pq.read_table(tmp_path / "hf" / "train").column("doc").to_pylist()
    assert rows == list(range(train.n_docs))  # every game once
    month = sorted(name for name in train.meta.ranges if name != "train")[5]
    result = runner.invoke(app, ["export", str(packed / "train"), str(tmp_path / "one"), "--format", "hf", "--range", month])
    assert result.exit_code == 0, result.output
    first, last = train.meta.ranges[month].documents
    assert pq.read_table(tmp_path / "one" / month).column("doc").to_pylist() == list(range(first, last))
