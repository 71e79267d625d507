"""``prepare_sharded`` and ``start_job`` take ``prepare``'s option records, or their fields as keywords."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpack.engines import prepare_sharded, start_job
from tokpack.errors import InputError
from tokpack.preparing.options import CorpusReading, Execution, VocabularyRequest
from tokpack.vocab.bytelevel import BpeTokenizer

BYTES = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256})


def files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()
            and path.suffix not in (".lock", ".done")}


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("Ala ma kota.\nKot ma Alę.\n" * 40, encoding="utf-8")
    return path


def test_records_and_keywords_make_the_same_dataset(tmp_path: Path, corpus: Path) -> None:
    flat = prepare_sharded(corpus, tmp_path / "flat", vocab=BYTES, shards=3, processes=1, document_bytes=64,
                           batch_documents=4, separator="\n\n")
    records = prepare_sharded(corpus, tmp_path / "records", shards=3, processes=1,
                              reading=CorpusReading(document_bytes=64, separator="\n\n"),
                              vocabulary=VocabularyRequest(vocab=BYTES), execution=Execution(batch_documents=4, workers=1))
    assert files(flat.path) == files(records.path) and flat.meta.n_docs == records.meta.n_docs > 0


def test_the_document_size_is_a_mebibyte_unless_given(tmp_path: Path, corpus: Path) -> None:
    assert start_job(corpus, tmp_path / "job", vocab=BYTES, shards=2).document_bytes == 1_048_576


def test_a_setting_given_both_ways_or_no_vocabulary_is_refused_before_anything_is_written(tmp_path: Path,
                                                                                            corpus: Path) -> None:
    with pytest.raises(InputError, match="document_bytes given beside reading="):
        prepare_sharded(corpus, tmp_path / "both", shards=2, vocab=BYTES, document_bytes=64,
                        reading=CorpusReading(document_bytes=128))
    with pytest.raises(InputError, match="a sharded job needs vocab="):
        prepare_sharded(corpus, tmp_path / "none", shards=2)
    with pytest.raises(InputError, match=r"^vocabulary\.vocab is None: .*; give it as vocabulary=VocabularyRequest\(vocab=PATH\)"):
        prepare_sharded(corpus, tmp_path / "none", shards=2, vocabulary=VocabularyRequest(vocab_size=300))
    with pytest.raises(InputError, match=r"^vocabulary\.vocab is None"):
        start_job(corpus, tmp_path / "none", shards=2, vocabulary=VocabularyRequest())
    with pytest.raises(InputError, match="on_progress"):
        prepare_sharded(corpus, tmp_path / "report", shards=2, vocab=BYTES, execution=Execution(report=print))
    assert not (tmp_path / "both").exists() and not (tmp_path / "none").exists() and not (tmp_path / "report").exists()


def test_held_out_shares_are_written_before_the_job(tmp_path: Path, corpus: Path) -> None:
    dataset = prepare_sharded(corpus, tmp_path / "held", vocab=BYTES, shards=2, processes=1, validation=0.25)
    assert (tmp_path / "corpus.txt.manifest.json").exists() and "validation" in dataset.meta.ranges


@pytest.mark.parametrize("shares", [{"validation": 1.5}, {"test": -0.1}, {"validation": float("nan")},
                                    {"validation": 0.5, "test": 0.5}])
def test_held_out_shares_out_of_range_are_refused_naming_them(tmp_path: Path, corpus: Path,
                                                              shares: dict[str, float]) -> None:
    named = " and ".join(sorted(shares)) if len(shares) > 1 else next(iter(shares))
    with pytest.raises(InputError, match=named.split(" and ")[0]):
        start_job(corpus, tmp_path / "job", vocab=BYTES, shards=2, **shares)
    with pytest.raises(InputError, match=named.split(" and ")[0]):
        prepare_sharded(corpus, tmp_path / "job", vocab=BYTES, shards=2, **shares)
    assert not (tmp_path / "job").exists() and not (tmp_path / "corpus.txt.manifest.json").exists()


@pytest.mark.parametrize(("options", "named"), [
    ({"processes": 0}, "processes must be at least 1, got 0"), ({"processes": -3}, "processes must be at least 1"),
    ({"retries": -1}, "retries must be"), ({"retries": 1.5}, "retries must be"),
    ({"ray_address": "10.0.0.5:6379"}, "ray_address is for engine='ray'"),
    ({"ray_cpus": 4}, "ray_cpus is for engine='ray'"),
    ({"engine": "ray", "ray_cpus": 0}, "ray_cpus must be at least 1, got 0"),
])
def test_execution_settings_out_of_range_or_for_another_engine_are_refused(tmp_path: Path, corpus: Path,
                                                                           options: dict[str, object], named: str) -> None:
    with pytest.raises(InputError, match=named):
        prepare_sharded(corpus, tmp_path / "job", vocab=BYTES, shards=2, **options)  # type: ignore[arg-type]
    assert not (tmp_path / "job").exists()
