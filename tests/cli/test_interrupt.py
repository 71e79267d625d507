"""Ctrl-C: a sharded job run by local processes stops with one line, keeps its complete shards
and leaves nothing half-written; a rerun finishes it. A BPE training counting in worker
processes stops with one line too, and leaves no worker running. SIGTERM and SIGHUP (``timeout``,
Slurm, a closed ssh session) stop a prepare the same way, exit 143 and 129, and a sharded job's
workers with it though they alone go to its process."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tokpack.corpus import sample_corpus
from tokpack.store import ShardedDataset
from tokpack.vocab.bytelevel import BpeTokenizer

from processes import signalled_at_cue, started_as_a_terminal_starts


def _group(pgid: int) -> list[str]:
    """The command lines of the live processes in process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, IndexError, ValueError):
            continue
    return found


def _local_job(folder: Path) -> list[str]:
    """The command of a sharded job of 8 shards, run by 2 local processes, writing ``folder/job``,
    on a corpus and a byte vocabulary it writes into ``folder``: enough text that the job is still
    running when a signal comes (workers start in milliseconds)."""
    corpus = folder / "corpus.txt"
    corpus.write_text(sample_corpus().read_text(encoding="utf-8") * 40, encoding="utf-8")
    BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256}).save(folder / "vocab")
    return [sys.executable, "-m", "tokpack.cli", "prepare", str(corpus), "--vocab", str(folder / "vocab" / "vocabulary.json"),
            "--shards", "8", "--workers", "2", "-o", str(folder / "job"), "--document-bytes", "4096"]


def _interrupt_once_started(job: subprocess.Popen[str], *, processes: int, after: float) -> None:
    """Ctrl-C to ``job``'s process group ``after`` seconds after ``processes`` of multiprocessing's
    processes (a fork server's or spawned ones) run in it; the job must still be running then."""
    deadline = time.monotonic() + 120
    while (sum("spawn_main" in line or "forkserver" in line for line in _group(job.pid)) < processes
           and job.poll() is None and time.monotonic() < deadline):
        time.sleep(0.02)
    time.sleep(after)
    assert job.poll() is None, "the job ended before Ctrl-C: nothing was interrupted (give it more work)"
    os.killpg(job.pid, signal.SIGINT)


def test_ctrl_c_stops_a_local_job_with_one_line_and_a_rerun_finishes_it(tmp_path: Path) -> None:
    command = _local_job(tmp_path)
    # As a terminal does: the job in a process group of its own, SIGINT to every process of it.
    job = started_as_a_terminal_starts(command)
    # The job's processes of multiprocessing (its fork server, or spawned ones): the progress
    # manager and the workers, starting (where each once printed a traceback of its own).
    _interrupt_once_started(job, processes=3, after=0.3)
    _, errors = job.communicate(timeout=120)
    assert job.returncode == 130, errors
    assert errors.strip().splitlines() == ["interrupted: nothing half-written is kept; a sharded job keeps its complete "
                                           "shards and resumes when rerun"], errors
    time.sleep(0.5)
    assert not _group(job.pid), "a worker outlived the job"
    assert not [path.name for path in (tmp_path / "job").iterdir() if ".tmp-" in path.name or path.name.endswith(".partial")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert ShardedDataset(tmp_path / "job", verify=True).n_docs > 0


def test_ctrl_c_of_a_bpe_training_with_worker_processes_says_one_line(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(sample_corpus().read_text(encoding="utf-8") * 40, encoding="utf-8")
    # A regex other than the compiled splitter's: the counting is done by worker processes.
    command = [sys.executable, "-m", "tokpack.cli", "bpe", "train", str(corpus), "-o", str(tmp_path / "vocab"),
               "--pattern", r"[^\s\d]+|\d|\s+", "--workers", "2", "--vocab-size", "600"]
    job = started_as_a_terminal_starts(command)
    _interrupt_once_started(job, processes=3, after=0.2)  # the fork server and the two count workers
    _, errors = job.communicate(timeout=120)
    assert job.returncode == 130, errors
    assert errors.strip().splitlines() == ["interrupted: nothing half-written is kept"], errors
    time.sleep(0.5)
    assert not _group(job.pid), "a worker outlived the job"


def _leftovers(folder: Path) -> list[str]:
    return [path.name for path in folder.rglob("*") if ".tmp-" in path.name or path.name.endswith((".lock", ".partial"))]


def _signal_once_writing(job: subprocess.Popen[str], folder: Path, signum: int) -> None:
    """``signum`` to ``job``'s process alone (as ``timeout`` sends it) once a temporary folder
    appears under ``folder``: the job is writing then."""
    deadline = time.monotonic() + 120
    while not any(".tmp-" in path.name for path in folder.rglob("*")) and job.poll() is None:
        assert time.monotonic() < deadline, "the job never began writing"
        time.sleep(0.01)
    assert job.poll() is None, "the job finished before it could be stopped mid-run (give it more work)"
    job.send_signal(signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_mid_prepare_stops_it_as_ctrl_c_does(gpt2_rank_file: Path, tmp_path: Path, signum: int) -> None:
    corpus = tmp_path / "one-word.txt"
    # One word of 3 MB: a second or so of encoding to be stopped in.
    corpus.write_bytes(bytes(random.Random(0).choices(b"etaoinshrdlu", k=3_000_000)))
    command = [sys.executable, "-m", "tokpack.cli", "prepare", str(corpus), "--vocab", str(gpt2_rank_file),
               "--cache-dir", str(tmp_path / "cache"), "--document-bytes", "3000000", "--workers", "1",
               "-o", str(tmp_path / "out")]
    # The signal's default disposition, as a terminal's job has it: a suite run under nohup would
    # hand on an ignored SIGHUP, which the command rightly keeps ignoring.
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
    try:
        _signal_once_writing(job, tmp_path, signum)
        _, errors = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    name = signal.Signals(signum).name
    assert job.returncode == 128 + signum, errors
    assert errors.strip().splitlines() == [f"interrupted by {name}: nothing half-written is kept; a sharded job keeps "
                                           "its complete shards and resumes when rerun"], errors
    assert not (tmp_path / "out").exists()
    assert not _leftovers(tmp_path)


def test_sigterm_to_a_local_job_alone_stops_its_workers_too(tmp_path: Path) -> None:
    command = _local_job(tmp_path)
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _signal_once_writing(job, tmp_path / "job", signal.SIGTERM)
        _, errors = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 143, errors
    assert errors.strip().splitlines() == ["interrupted by SIGTERM: nothing half-written is kept; a sharded job keeps "
                                           "its complete shards and resumes when rerun"], errors
    time.sleep(0.5)
    assert not _group(job.pid), "a worker outlived the job"
    # As after Ctrl-C: a killed worker's shard lock file may stay (its lock went with the worker,
    # and a rerun takes it); nothing it was writing does.
    assert not [name for name in _leftovers(tmp_path / "job") if not name.endswith(".lock")]


def test_the_command_hears_sigterm_and_sighup_unless_they_were_ignored() -> None:
    from tokpack.cli import Terminated, stop_on_termination

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("handlers are set in the main thread only")
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it
        stop_on_termination()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        with pytest.raises(Terminated) as stopped:
            handler = signal.getsignal(signal.SIGTERM)
            assert callable(handler)
            handler(signal.SIGTERM, None)
        assert isinstance(stopped.value, KeyboardInterrupt)
        assert (str(stopped.value), stopped.value.signum) == ("SIGTERM", 15)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


_SAVE_DRIVER = """
import sys
import time

from tokpack.cli import script
from tokpack.vocab import bytelevel

write_record = bytelevel.write_record


def paused(record, path):
    # The rank file is written by now: the save stops half done, between its two files.
    print("saving", file=sys.stderr, flush=True)
    time.sleep(60)
    write_record(record, path)


bytelevel.write_record = paused
sys.argv = ["tokpack", *sys.argv[1:]]
script()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("before", [False, True], ids=["new-folder", "over-a-vocabulary"])
def test_a_bpe_train_stopped_while_saving_leaves_its_folder_as_it_was(tmp_path: Path, signum: int, before: bool) -> None:
    """``tokpack bpe train -o DIR`` stopped between the two files of its vocabulary: a new DIR is
    not there (it was one holding a rank file without its record), an old DIR's vocabulary is
    whole and unchanged."""
    corpus, folder = tmp_path / "corpus.txt", tmp_path / "vocab"
    corpus.write_text(sample_corpus().read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    if before:
        BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256}).save(folder)
    old = {path.name: path.read_bytes() for path in folder.iterdir()} if before else None
    command = [sys.executable, "-c", _SAVE_DRIVER, "bpe", "train", str(corpus), "-o", str(folder), "--vocab-size", "300"]
    returncode, errors = signalled_at_cue(command, "saving\n", signum, timeout=120)
    assert returncode == 128 + signum, errors
    assert len(errors.strip().splitlines()) == 1 and errors.startswith("interrupted"), errors
    if before:
        assert {path.name: path.read_bytes() for path in folder.iterdir()} == old
        assert BpeTokenizer.load_saved(folder / "vocabulary.json").n_vocab == 257
    else:
        assert not folder.exists(), sorted(path.name for path in folder.iterdir())
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt", *(["vocab"] if before else [])]
