"""A process that writes several shards of a job (a local worker writes many) builds the encoder's
compiled tables and the carried vocabulary files once, not once per shard, and the shards are
the bytes a fresh encoder writes."""

from __future__ import annotations

from pathlib import Path

import pytest

import tokpack.engines.encoders as encoders
import tokpack.engines.shard_task as shard_task
import tokpack.vocab.bytelevel as bytelevel
from tokpack import prepare, sample_corpus
from tokpack.engines import run_shard, start_job

DOCUMENT_BYTES = 2048


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification stamps go to this test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))


def shard_files(dataset: Path) -> dict[str, bytes]:
    return {str(p.relative_to(dataset)): p.read_bytes() for p in sorted(dataset.glob("shard-*/**/*")) if p.is_file()}


def test_one_process_builds_a_jobs_encoder_once_for_all_its_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vocabulary = prepare(sample_corpus(), cache_dir=tmp_path / "cache", vocab_size=400,
                         document_bytes=DOCUMENT_BYTES).vocabulary_path
    built = []
    real = bytelevel.tokenizer_json_bytes
    monkeypatch.setattr(bytelevel, "tokenizer_json_bytes",
                        lambda *args, **kwargs: built.append(1) or real(*args, **kwargs))
    together, apart = tmp_path / "together", tmp_path / "apart"
    for dataset in (together, apart):
        start_job(sample_corpus(), dataset, vocab=vocabulary, shards=3, document_bytes=DOCUMENT_BYTES, batch_documents=4)
    monkeypatch.setattr(shard_task, "_last_encoder", [], raising=False)
    for rank in range(3):
        run_shard(together, rank)
    assert len(built) == 1
    for rank in range(3):  # each shard with an encoder of its own, as three processes would
        monkeypatch.setattr(shard_task, "_last_encoder", [], raising=False)
        monkeypatch.setattr(encoders, "_last_read", [], raising=False)
        run_shard(apart, rank)
    assert len(built) == 4
    assert shard_files(together) == shard_files(apart)
    assert (together / "dataset.json").read_bytes() == (apart / "dataset.json").read_bytes()
