"""A process that writes several shards of a job (a local worker writes many) builds the encoder's
compiled tables and the carried vocabulary files once, not once per shard, and the shards are
the bytes a fresh encoder writes; a worker that writes shards of several jobs in turn (same ranks
with another pattern or other special tokens, or another vocabulary) never writes one job's shard
with another's encoder."""

from __future__ import annotations

from pathlib import Path

import pytest

import tokpack.engines.encoders as encoders
import tokpack.engines.text_job as text_job
import tokpack.vocab.bytelevel as bytelevel
from tokpack import prepare, sample_corpus
from tokpack.engines import run_shard, start_job
from tokpack.vocab import BpeTokenizer

DOCUMENT_BYTES = 2048
BYTES = {bytes([b]): b for b in range(256)}
MERGES = [b"he", b" t", b"in", b" the", b"an", b"er", b"on", b"re", b" a"]


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
    monkeypatch.setattr(text_job, "_last_encoder", [], raising=False)
    for rank in range(3):
        run_shard(together, rank)
    assert len(built) == 1
    for rank in range(3):  # each shard with an encoder of its own, as three processes would
        monkeypatch.setattr(text_job, "_last_encoder", [], raising=False)
        monkeypatch.setattr(encoders, "_last_read", [], raising=False)
        run_shard(apart, rank)
    assert len(built) == 4
    assert shard_files(together) == shard_files(apart)
    assert (together / "dataset.json").read_bytes() == (apart / "dataset.json").read_bytes()


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
    monkeypatch.setattr(text_job, "_last_encoder", [])
    for rank in range(2):  # interleaved: every shard follows one of another job
        for name in vocabularies:
            run_shard(tmp_path / "together" / name, rank)
    for name in vocabularies:
        for rank in range(2):
            monkeypatch.setattr(text_job, "_last_encoder", [])
            run_shard(tmp_path / "apart" / name, rank)
        together = shard_files(tmp_path / "together" / name)
        assert together and together == shard_files(tmp_path / "apart" / name), name
    records = {shard_files(tmp_path / "together" / name)["shard-00000/meta.json"] for name in vocabularies}
    assert len(records) == len(vocabularies)  # each shard names its own job's vocabulary
    tokens = {name: shard_files(tmp_path / "together" / name)["shard-00000/tokens.npy"] for name in vocabularies}
    assert tokens["fewer"] != tokens["gpt2"]
