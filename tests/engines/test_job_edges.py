"""Sizes at the edges of a sharded job: ranks far outside it, shard sizes of no end. A user's
mistake, so one line and exit 2, never an internal error."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tokpack.chess.jobs.shards import plan_shards
from tokpack.cli import app
from tokpack.engines import run_shard, start_job
from tokpack.errors import InputError
from tokpack.vocab.bytelevel import BpeTokenizer

from conftest import DATA


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def one_line_mistake(code: int, output: str, *words: str) -> None:
    assert code == 2 and len(output.strip().splitlines()) == 1 and "internal error" not in output, output
    for word in words:
        assert word in output, output


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A converted tree of two months of real games, and its config."""
    folder = tmp_path_factory.mktemp("chess")
    table = pq.read_table(DATA / "chess" / "games.parquet")
    for month, rows in (("01", table.slice(0, 30)), ("02", table.slice(30, 5))):
        (folder / "games" / "year=2016" / f"month={month}").mkdir(parents=True)
        pq.write_table(rows, folder / "games" / "year=2016" / f"month={month}" / "games.parquet")
    (folder / "tokpack-chess.toml").write_text('games_dir = "games"\nout_dir = "tokens"\ntrain_month = "2016-01"\n'
                                               'val_month = "2016-02"\nshard_games = 10\n')
    return folder


@pytest.mark.parametrize("rank", ["4294967295", "-1", str(1 << 70)])
def test_a_rank_outside_a_text_job_is_a_mistake(tmp_path: Path, rank: str) -> None:
    (tmp_path / "corpus.txt").write_text("Ala ma kota.\n" * 30, encoding="utf-8")
    start_job(tmp_path / "corpus.txt", tmp_path / "job", shards=2, document_bytes=64,
              vocab=BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256}))
    one_line_mistake(*run("shard", "run", str(tmp_path / "job"), "--rank", rank), "outside the job's 2 shards")
    one_line_mistake(*run("shard", "run", str(tmp_path / "job"), env={"TOKPACK_RANK": rank, "TOKPACK_WORLD_SIZE": "2"}),
                     "outside the job's 2 shards")
    assert not list((tmp_path / "job").glob("shard-*"))


@pytest.mark.parametrize("tasks", ["0", "3"])
def test_an_array_of_another_size_than_the_job_says_how_to_run_it(tmp_path: Path, tasks: str) -> None:
    (tmp_path / "corpus.txt").write_text("Ala ma kota.\n" * 30, encoding="utf-8")
    start_job(tmp_path / "corpus.txt", tmp_path / "job", shards=2, document_bytes=64,
              vocab=BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256}))
    one_line_mistake(*run("shard", "run", str(tmp_path / "job"), env={"TOKPACK_RANK": "1", "TOKPACK_WORLD_SIZE": tasks}),
                     f"the job array has {tasks} tasks but the job has 2 shards", "an array of 2 tasks", "--array=0-1")


def test_a_rank_outside_a_chess_job_and_shard_sizes_of_no_end_are_mistakes(games: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(games)
    for size in ("inf", "nan", "1e300"):
        one_line_mistake(*run("chess", "tokenize", "--scheme", "uci", "--pack", "--shard-mb", size), "--shard-mb")
    config = games / "tokpack-chess.toml"
    text = config.read_text()
    for size in ("inf", "nan", "1e300"):
        config.write_text(text + f"shard_mb = {size}\n")
        one_line_mistake(*run("chess", "tokenize", "--scheme", "uci", "--pack"), "shard_mb")
    config.write_text(text + 'engine = "array"\n')
    code, output = run("chess", "tokenize", "--scheme", "uci", "--pack")
    assert code == 0, output
    one_line_mistake(*run("shard", "run", str(games / "tokens" / "uci" / "train"), "--rank", "4294967295"), "outside")
    with pytest.raises(InputError, match="shard_bytes must be an integer in"):
        plan_shards([games / "games" / "year=2016" / "month=01" / "games.parquet"], shard_bytes=1 << 70)


@pytest.fixture
def deadline() -> Iterator[None]:
    """Fail, rather than hang the suite, when a call blocks for 20 seconds (reading a FIFO does);
    the timer fires again every 20 seconds, for each blocked call."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError("blocked for 20 seconds")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, 20, 20)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_a_job_record_that_is_no_file_is_a_mistake_not_a_hang(tmp_path: Path, deadline: None) -> None:
    (tmp_path / "corpus.txt").write_text("Ala ma kota.\n" * 30, encoding="utf-8")
    vocab = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256})
    start_job(tmp_path / "corpus.txt", tmp_path / "job", shards=2, document_bytes=64, vocab=vocab)
    (tmp_path / "job" / "job.json").unlink()
    os.mkfifo(tmp_path / "job" / "job.json")
    one_line_mistake(*run("shard", "run", str(tmp_path / "job"), "--rank", "0"), "job.json", "FIFO")
    with pytest.raises(InputError, match="FIFO"):
        run_shard(tmp_path / "job", 0)
    with pytest.raises(InputError, match="FIFO"):
        start_job(tmp_path / "corpus.txt", tmp_path / "job", shards=2, document_bytes=64, vocab=vocab)


@pytest.mark.parametrize("kind", ["FIFO", "directory"])
def test_a_lock_that_is_no_file_is_a_mistake_naming_it_not_a_hang(tmp_path: Path, deadline: None, kind: str) -> None:
    (tmp_path / "corpus.txt").write_text("Ala ma kota.\n" * 30, encoding="utf-8")
    vocab = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256})
    start_job(tmp_path / "corpus.txt", tmp_path / "job", shards=2, document_bytes=64, vocab=vocab)
    lock = tmp_path / "job" / "shard-00001.lock"
    os.mkfifo(lock) if kind == "FIFO" else lock.mkdir()
    one_line_mistake(*run("shard", "run", str(tmp_path / "job"), "--rank", "1"), str(lock), kind, "delete it")
    with pytest.raises(InputError, match=f"{lock}: .*{kind}.*; delete it"):
        run_shard(tmp_path / "job", 1)
    assert not (tmp_path / "job" / "shard-00001").exists()
    lock.unlink() if kind == "FIFO" else lock.rmdir()
    assert run_shard(tmp_path / "job", 1) and run_shard(tmp_path / "job", 0)
    assert (tmp_path / "job" / "dataset.json").exists()


def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path: Path) -> None:
    # Workers import the script that started them (as spawn does): its unguarded top level starts
    # a job again inside the worker, which multiprocessing refuses, and the job's process only
    # sees its progress process end.
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text("from tokpack.engines.executors import run_local\n"
                      f"run_local({str(tmp_path)!r}, [0], processes=1, task=print)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tokpack.errors.WorkerDied") and "if __name__ == \"__main__\":" in last, done.stderr[-2000:]
