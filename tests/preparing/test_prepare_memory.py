"""``prepare`` hands the memory it freed back to the system as it goes (glibc's arenas otherwise
grew with the corpus: see :mod:`tokpack._memory`), asserted as behaviour; the peak memory it
keeps on large corpora is measured in ``bench/bench_prepare_memory.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

import tokpack.preparing.preparation as preparation
import tokpack.vocab.rank_files as rank_files
from tokpack import prepare


def test_prepare_returns_freed_memory_once_per_stretch_of_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Ala ma kota, a kot ma Alę.\n" * 20_000, encoding="utf-8")  # 540 KB
    rank_file = tmp_path / "bytes.tiktoken"
    rank_file.write_bytes(rank_files.rank_file_lines({bytes([b]): b for b in range(256)}))
    calls: list[int] = []
    monkeypatch.setattr(preparation, "_TRIM_BYTES", 128 << 10)
    monkeypatch.setattr(preparation, "return_freed_memory", lambda: calls.append(1))
    prepared = prepare(corpus, vocab=rank_file, pattern="gpt2", cache_dir=tmp_path / "cache", document_bytes=4096,
                       batch_documents=8)
    assert prepared.meta.n_docs > 100
    assert len(calls) == corpus.stat().st_size // (128 << 10)  # each 128 KiB boundary crossed, once

