"""A sharded job's faults: a bad file spanning shards is skipped and counted once, a killed progress
manager never fails the job, and an edited ``job.json`` (even resealed) is refused before a shard
duplicates documents."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tokpack
from tokpack.errors import IntegrityError
from tokpack.store import open_tokens
from tokpack.store.dataset import shard_name

from conftest import SAMPLE


def _forge(record: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit a sealed record and recompute its seal, as anyone can (the seal has no key)."""
    fields = json.loads(record.read_text())
    edit(fields)
    fields.pop("seal", None)
    seal = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    record.write_text(json.dumps(fields | {"seal": seal}, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def folder_with_a_bad_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three text files; the middle one (long enough to fall in every shard) has invalid UTF-8."""
    folder = tmp_path_factory.mktemp("corpus") / "in"
    folder.mkdir()
    lines = (SAMPLE / "polish.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    text = "".join(lines[:40])
    (folder / "a.txt").write_text(text[:6000], encoding="utf-8")
    (folder / "b.txt").write_bytes((text * 3).encode("utf-8")[:30000] + b"\n\x80 the bad byte\n")
    (folder / "c.txt").write_text(text[:6000], encoding="utf-8")
    return folder


def test_a_bad_file_spanning_shards_is_counted_once(folder_with_a_bad_file: Path, prepared: tokpack.TokenizedCorpus,
                                                    tmp_path: Path) -> None:
    from tokpack.engines import prepare_sharded

    single = tokpack.prepare(folder_with_a_bad_file, vocab=prepared.vocabulary_path, on_error="skip",
                             document_bytes=4096, cache_dir=tmp_path / "cache")
    assert single.meta.counts["skipped"] == 1
    dataset = prepare_sharded(folder_with_a_bad_file, tmp_path / "ds", vocab=prepared.vocabulary_path, shards=3,
                              processes=1, document_bytes=4096, on_error="skip")
    shards_skipping = [open_tokens(tmp_path / "ds" / shard_name(r)).meta.counts.get("skipped", 0) for r in range(3)]
    assert sum(shards_skipping) == 1, shards_skipping
    assert dataset.meta.counts["skipped"] == 1
    assert not list((tmp_path / "ds").glob("*.lock")), "lock files are left beside the dataset"


def _kill_the_progress_manager(rank: int) -> None:
    for child in multiprocessing.active_children():
        if child.name.startswith("SyncManager"):
            child.kill()
            child.join()


def test_a_killed_progress_manager_does_not_fail_the_job(folder_with_a_bad_file: Path,
                                                         prepared: tokpack.TokenizedCorpus, tmp_path: Path) -> None:
    from tokpack.engines import prepare_sharded

    heard: list[int] = []
    dataset = prepare_sharded(folder_with_a_bad_file, tmp_path / "ds", vocab=prepared.vocabulary_path, shards=3,
                              processes=1, document_bytes=4096, on_error="skip", on_done=_kill_the_progress_manager,
                              on_progress=lambda rank, *_: heard.append(rank))
    assert len(dataset.shards) == 3 and dataset.meta.counts["skipped"] == 1
    assert heard  # progress was heard before the manager died


def test_an_edited_job_refuses_instead_of_duplicating_documents(folder_with_a_bad_file: Path,
                                                                 prepared: tokpack.TokenizedCorpus,
                                                                 tmp_path: Path) -> None:
    from tokpack.engines import run_shard, start_job
    from tokpack.engines.lifecycle import JOB_FILE

    job = tmp_path / "job"
    start_job(folder_with_a_bad_file, job, vocab=prepared.vocabulary_path, shards=2, document_bytes=4096,
              on_error="skip")
    run_shard(job, 0)
    # a plain edit breaks the seal
    record = job / JOB_FILE
    original = record.read_text()
    record.write_text(original.replace('"world_size": 2', '"world_size": 3'))
    with pytest.raises(IntegrityError, match="job.json: edited"):
        run_shard(job, 1)
    # an edit with a recomputed seal: shard 0's marker names the job it was made for
    record.write_text(original)
    _forge(record, lambda fields: fields.update(world_size=3))
    with pytest.raises(IntegrityError, match="shard 0 was made for another job"):
        for rank in (1, 2, 0):
            run_shard(job, rank)
    assert not (job / "dataset.json").exists()
