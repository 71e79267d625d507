"""A worker that writes shards of several jobs in turn (same ranks, another pattern or other
special tokens; another vocabulary) never writes one job's shard with another's encoder: each
shard is the bytes a fresh encoder writes."""

from __future__ import annotations

from pathlib import Path

import pytest

import tokpack.engines.shard_task as shard_task
from tokpack import sample_corpus
from tokpack.engines import run_shard, start_job
from tokpack.vocab import BpeTokenizer

DOCUMENT_BYTES = 2048
BYTES = {bytes([b]): b for b in range(256)}
MERGES = [b"he", b" t", b"in", b" the", b"an", b"er", b"on", b"re", b" a"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))


def shard_files(dataset: Path) -> dict[str, bytes]:
    return {str(p.relative_to(dataset)): p.read_bytes() for p in sorted(dataset.glob("shard-*/**/*")) if p.is_file()}


def test_jobs_of_other_patterns_special_tokens_or_ranks_in_one_worker(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ranks = BYTES | {token: 256 + n for n, token in enumerate(MERGES)}
    fewer = BYTES | {token: 256 + n for n, token in enumerate(MERGES[:4])}
    vocabularies = {
        "gpt2": BpeTokenizer(ranks=ranks, pattern="gpt2"),
        "gpt4": BpeTokenizer(ranks=ranks, pattern="gpt4"),
        "special": BpeTokenizer(ranks=ranks, pattern="gpt2", special_tokens={"<|endoftext|>": 300}),
        "fewer": BpeTokenizer(ranks=fewer, pattern="gpt2"),
    }
    for name, vocabulary in vocabularies.items():
        for kind in ("together", "apart"):
            start_job(sample_corpus(), tmp_path / kind / name, vocab=vocabulary, shards=2,
                      document_bytes=DOCUMENT_BYTES, batch_documents=4)
    monkeypatch.setattr(shard_task, "_last_encoder", [])
    for rank in range(2):  # interleaved: every shard follows one of another job
        for name in vocabularies:
            run_shard(tmp_path / "together" / name, rank)
    for name in vocabularies:
        for rank in range(2):
            monkeypatch.setattr(shard_task, "_last_encoder", [])
            run_shard(tmp_path / "apart" / name, rank)
        together = shard_files(tmp_path / "together" / name)
        assert together and together == shard_files(tmp_path / "apart" / name), name
    records = {shard_files(tmp_path / "together" / name)["shard-00000/meta.json"] for name in vocabularies}
    assert len(records) == len(vocabularies)  # each shard names its own job's vocabulary
    tokens = {name: shard_files(tmp_path / "together" / name)["shard-00000/tokens.npy"] for name in vocabularies}
    assert tokens["fewer"] != tokens["gpt2"]
