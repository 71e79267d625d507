"""Chess packing as sharded jobs run by text's executors: shards cut by size across months,
byte-identical for 1, 2 and 3 workers, local processes, a job array and Ray; read by the loaders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tokpack.chess.jobs.config import ChessPipelineConfig
from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.jobs.pipeline import available_months, tokenize
from tokpack.chess.jobs.shards import ChessJob, plan_shards, start_chess_job
from tokpack.chess.pgn.convert import convert_pgn, month_parquet
from tokpack.chess.schemes import make_encoder
from tokpack.engines import run_shard
from tokpack.engines.executors import run_array_task
from tokpack.errors import InputError
from tokpack.serve import PackedBatches, Windows
from tokpack.serve.torch import make_batch_loader
from tokpack.store import Pack, merge_dataset
from tokpack.store.dataset import ShardedDataset

from ray_cluster import Cluster, driver

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SHARD_GAMES = 7  # small enough that the fixture's months are cut into several row ranges


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("games") / "games"
    convert_pgn([FIXTURES / "chess_games.pgn"], out)
    return out


def config(games: Path, out: Path, **fields: object) -> ChessPipelineConfig:
    months = available_months(games)
    return ChessPipelineConfig.model_validate({"games_dir": games, "out_dir": out, "train_months": months[:-1],
                                               "val_months": months[-1:], "shard_games": SHARD_GAMES, **fields})


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file of a dataset folder and its bytes (lock files and verification stamps aside)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and ".stamp" not in p.name}


@pytest.fixture(scope="module")
def one_worker(games: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("w1") / "tokens"
    tokenize(config(games, out, workers=1), "san", pack=True)
    return out / "san"


def test_months_are_cut_into_row_ranges_and_read_as_the_whole_months(games: Path, one_worker: Path,
                                                                     tmp_path: Path) -> None:
    months = available_months(games)[:-1]
    rows = [pq.ParquetFile(month_parquet(games, m)).metadata.num_rows for m in months]
    dataset = ShardedDataset(one_worker / "train", verify=True)
    # Shards of shard_games games each, across month boundaries; every month is a named range.
    assert [s.n_docs for s in dataset.shards] == [SHARD_GAMES] * (sum(rows) // SHARD_GAMES) + [sum(rows) % SHARD_GAMES] * (sum(rows) % SHARD_GAMES > 0)
    assert sorted(dataset.meta.ranges) == sorted(["train", *months]) and dataset.n_docs == sum(rows)
    # The shards' stream is exactly each whole month packed alone, one after the other.
    encoder = make_encoder("san")
    for month in months:
        pack_games(month_parquet(games, month), encoder, tmp_path / month)
    wholes = [Pack(tmp_path / month) for month in months]
    assert np.array_equal(np.concatenate([dataset.shards[i].tokens for i in range(len(dataset.shards))]),
                          np.concatenate([p.tokens for p in wholes]))
    assert np.array_equal(dataset.starts, np.concatenate([p.starts + o for p, o in
                                                          zip(wholes, np.cumsum([0] + [p.n_tokens for p in wholes]))]))
    val = ShardedDataset(one_worker / "val", verify=True)
    assert sorted(val.meta.ranges) == [available_months(games)[-1], "validation"] and val.meta.vocabulary == dataset.meta.vocabulary


@pytest.mark.parametrize("workers", [2, 3])
def test_local_processes_give_byte_identical_datasets(games: Path, one_worker: Path, tmp_path: Path, workers: int) -> None:
    result = tokenize(config(games, tmp_path / "tokens", workers=workers), "san", pack=True)
    assert [p.folder for p in result.packs] == ["train", "val"]
    for folder in ("train", "val"):
        assert files_of(tmp_path / "tokens" / "san" / folder) == files_of(one_worker / folder)


def test_a_job_array_gives_the_same_bytes_in_any_order(games: Path, one_worker: Path, tmp_path: Path) -> None:
    result = tokenize(config(games, tmp_path / "tokens", engine="array"), "san", pack=True)
    assert result.packs == [] and [p.name for p in result.jobs] == ["train", "val"]
    job = tmp_path / "tokens" / "san" / "train"
    world = ChessJob.model_validate_json((job / "job.json").read_text()).world_size
    assert not (job / "dataset.json").exists()
    for rank in reversed(range(world)):  # separate processes, any order, as a scheduler runs them
        environment = dict(os.environ, TOKPACK_RANK=str(rank), TOKPACK_WORLD_SIZE=str(world))
        done = subprocess.run([sys.executable, "-m", "tokpack.cli", "shard", "run", str(job)], env=environment,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert (job / "dataset.json").exists() == (rank == 0)  # the last one writes it
    assert files_of(job) == files_of(one_worker / "train")
    val = tmp_path / "tokens" / "san" / "val"
    for rank in range(ChessJob.model_validate_json((val / "job.json").read_text()).world_size):
        assert run_array_task(val, rank)[2]  # the library entry point, in this process
    assert files_of(val) == files_of(one_worker / "val")
    with pytest.raises(InputError, match="tasks but the job"):
        run_array_task(job, environment={"TOKPACK_RANK": "0", "TOKPACK_WORLD_SIZE": "1"})


def test_ray_gives_byte_identical_datasets(games: Path, one_worker: Path, ray_cluster: Cluster, tmp_path: Path) -> None:
    with driver(ray_cluster):
        tokenize(config(games, tmp_path / "tokens", engine="ray"), "san", pack=True)
    for folder in ("train", "val"):
        assert files_of(tmp_path / "tokens" / "san" / folder) == files_of(one_worker / folder)


def test_a_killed_job_resumes_and_a_changed_table_is_refused(games: Path, one_worker: Path, tmp_path: Path) -> None:
    cfg = config(games, tmp_path / "tokens")
    job = tmp_path / "tokens" / "san" / "train"
    tables = [month_parquet(games, m) for m in available_months(games)[:-1]]
    start_chess_job(tables, job, make_encoder("san"), shard_games=SHARD_GAMES)
    assert run_shard(job, 0) and not run_shard(job, 0)  # as a run killed after one shard left it
    tokenize(cfg, "san", pack=True)  # resumes the job
    assert files_of(job) == files_of(one_worker / "train")
    with pytest.raises(InputError, match="already exists"):
        tokenize(cfg, "san", pack=True)
    start_chess_job(tables[:1], tmp_path / "other", make_encoder("san"))
    with pytest.raises(InputError, match="another job"):
        start_chess_job(tables, tmp_path / "other", make_encoder("san"))
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(tables[0].read_bytes())
    moved = tmp_path / "moved"
    start_chess_job([copy], moved, make_encoder("uci"))
    pq.write_table(pq.read_table(copy).slice(0, 3), copy)
    with pytest.raises(InputError, match="changed since the job began"):
        run_shard(moved, 0)
    assert [[p.rows for p in s.pieces] for s in plan_shards([tables[0]], 1_000_000)] == [
        [(0, pq.ParquetFile(tables[0]).metadata.num_rows)]]


def test_the_loaders_read_the_sharded_dataset_as_its_merged_pack(one_worker: Path, tmp_path: Path) -> None:
    dataset = ShardedDataset(one_worker / "train")
    merge_dataset(dataset, tmp_path / "merged")
    merged = Pack(tmp_path / "merged")
    windows, reference = Windows(dataset.path, block=512), Windows(merged.path, block=512)
    everything = np.arange(len(windows))
    assert len(windows) == len(reference) == dataset.n_docs
    for ours, theirs in zip(windows.window_batch(everything), reference.window_batch(everything)):
        assert np.array_equal(ours, theirs)
    options = {"layout": "documents", "length": 64, "global_batch": 4, "seed": 3}
    batches, expected = PackedBatches(dataset.path, **options), PackedBatches(merged.path, **options)
    loader = make_batch_loader(batches)
    for step, batch in zip(range(5), loader):
        assert np.array_equal(np.asarray(batch["input_ids"]), np.asarray(expected.batch(step)["input_ids"]))


def test_an_interrupted_job_of_the_previous_format_is_refused_with_the_fix(games: Path, tmp_path: Path) -> None:
    """A ``tokpack.chess.job.v2`` job (its shards record no rank, so a shard under another rank's
    name cannot be told apart) is refused, saying why and what to do, by its tasks and by a rerun
    of the command, never taken for a copied shard."""
    import json

    from typer.testing import CliRunner

    from tokpack.cli import app
    from tokpack.store.format import PackMeta

    tables = [month_parquet(games, m) for m in available_months(games)[:-1]]
    job = tmp_path / "tokens" / "san" / "train"
    start_chess_job(tables, job, make_encoder("san"), shard_games=SHARD_GAMES)
    assert run_shard(job, 0)
    # As that format left it: its job.json, and a finished shard whose record holds no place.
    record = json.loads((job / "job.json").read_text())
    (job / "job.json").write_text(json.dumps(record | {"schema": "tokpack.chess.job.v2"}))
    meta = PackMeta.model_validate_json((job / "shard-00000" / "meta.json").read_text())
    placeless = meta.model_copy(update={"shard": None}).sealed()
    (job / "shard-00000" / "meta.json").write_text(placeless.to_json())
    marker = json.loads((job / "shard-00000.done").read_text())
    (job / "shard-00000.done").write_text(json.dumps(marker | {"seal": placeless.seal}))
    for rank in (0, 1):
        with pytest.raises(InputError, match="is a tokpack.chess.job.v2 job, which this tokpack does not resume") as refused:
            run_shard(job, rank)
        assert "new folder" in str(refused.value) and "rank" in str(refused.value)
    result = CliRunner().invoke(app, ["chess", "tokenize", "--scheme", "san", "--pack", "--config",
                                      str(_config_file(games, tmp_path))])
    assert result.exit_code == 2 and "tokpack.chess.job.v2" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def _config_file(games: Path, folder: Path) -> Path:
    months = available_months(games)
    path = folder / "tokpack-chess.toml"
    path.write_text(f'games_dir = "{games}"\nout_dir = "{folder / "tokens"}"\ntrain_months = {months[:-1]!r}\n'
                    f'val_months = {months[-1:]!r}\nshard_games = {SHARD_GAMES}\n'.replace("'", '"'))
    return path


def test_a_recorded_chess_job_resumes_to_the_same_dataset(tmp_path: Path) -> None:
    """tests/fixtures/chess_job holds a chess job's job.json and encoder.json (3 shards of one month
    of 12 games, scheme uci) as tokpack at commit fc62fb8 wrote them, and the dataset.json its
    tasks wrote (expected_dataset.json): the job resumes here, and finishes to the same bytes."""
    import json
    import shutil

    from tokpack.engines import finish_job

    fixture = FIXTURES / "chess_job"
    shutil.copytree(fixture / "games", tmp_path / "games")
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(fixture / "encoder.json", job / "encoder.json")
    # The job names its tables by absolute path: moved here, with the seal made again for it.
    record = json.loads((fixture / "job.json").read_text(encoding="utf-8").replace("/tmp/chessfx", str(tmp_path)))
    (job / "job.json").write_text(ChessJob.model_validate(record).sealed().to_json(), encoding="utf-8")
    assert [run_shard(job, rank) for rank in (2, 0, 1)] == [True, True, True]
    assert (job / "dataset.json").read_bytes() == (fixture / "expected_dataset.json").read_bytes()
    assert finish_job(job) is not None and not list(job.glob("*.done")) and not list(job.glob("*.lock"))
