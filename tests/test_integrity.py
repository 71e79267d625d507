"""Issue 12: every bad input and fault found so far, each reproduced and refused with a located error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokpack import prepare
from tokpack.errors import InputError, IntegrityError, TokpackError

from conftest import SAMPLE

SMALL = {"vocab_size": 300, "document_bytes": 4096, "min_frequency": 1}


def jsonl_with_a_bad_record(path: Path) -> Path:
    lines = [json.dumps({"text": f"document {i}: " + "zażółć gęślą jaźń " * 20}) for i in range(30)]
    lines[3] = '{"text": broken'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_skipped_records_are_counted_once_when_prepare_trains_its_vocabulary(tmp_path: Path) -> None:
    corpus = jsonl_with_a_bad_record(tmp_path / "corpus.jsonl")
    trained = prepare(corpus, cache_dir=tmp_path / "a", on_error="skip", **SMALL)  # trains and skips in one run
    assert trained.manifest.counts["skipped"] == 1
    # The same pack made with the vocabulary given (so the trainer never reads the corpus) says the same.
    given = prepare(corpus, vocab=trained.vocabulary_path, cache_dir=tmp_path / "b", on_error="skip", **SMALL)
    assert given.manifest.counts == trained.manifest.counts


def test_a_pack_made_skipping_is_not_reused_by_a_run_that_raises(tmp_path: Path) -> None:
    corpus = jsonl_with_a_bad_record(tmp_path / "corpus.jsonl")
    skipped = prepare(corpus, cache_dir=tmp_path / "cache", on_error="skip", **SMALL)
    with pytest.raises(ValueError, match=r"corpus\.jsonl"):  # InputError once main converts the site
        prepare(corpus, vocab=skipped.vocabulary_path, cache_dir=tmp_path / "cache", **SMALL)
