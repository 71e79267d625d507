"""prepare's settings as records: passed whole, or built from its keywords; each checked when made,
and the CLI's prepare checks nothing the records do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokpack
from tokpack import CorpusReading, Execution, VocabularyRequest
from tokpack.cli import app
from tokpack.errors import InputError


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("options") / "c.txt"
    path.write_text("".join(f"line {i} of a small corpus, said again\n" for i in range(300)), encoding="utf-8")
    return path


def test_records_and_keywords_make_the_same_pack(corpus: Path, tmp_path: Path) -> None:
    by_keywords = tokpack.prepare(corpus, vocab_size=270, document_bytes=256, workers=1, cache_dir=tmp_path / "a")
    by_records = tokpack.prepare(corpus, cache_dir=tmp_path / "b", reading=CorpusReading(document_bytes=256),
                                 vocabulary=VocabularyRequest(vocab_size=270), execution=Execution(workers=1))
    assert by_records.pack().meta.tokens_sha256 == by_keywords.pack().meta.tokens_sha256
    assert by_records.pack().meta.vocabulary == by_keywords.pack().meta.vocabulary


def test_a_setting_given_both_ways_is_refused(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^vocab_size given beside vocabulary=; give them in vocabulary= or"):
        tokpack.prepare(corpus, vocab_size=270, vocabulary=VocabularyRequest(vocab_size=280), cache_dir=tmp_path)
    assert not tmp_path.joinpath("packs").exists()


@pytest.mark.parametrize(("record", "message"), [
    (lambda: VocabularyRequest(vocab_size=100), "vocab_size must be an integer in \\[257"),
    (lambda: VocabularyRequest(trainer="fast"), "trainer must be one of"),
    (lambda: CorpusReading(document_bytes=2), "document_bytes must be an integer of at least 4"),
    (lambda: CorpusReading(on_error="ignore"), "on_error must be one of"),
    (lambda: CorpusReading(separator=""), "separator: must be a non-empty string"),
    (lambda: Execution(workers=0), "workers must be"),
    (lambda: VocabularyRequest(vocab="tokenizer.json", trainer="hf"),
     "trainer is for training a vocabulary; vocab= gives one .*; drop trainer, or vocab="),
])
def test_each_record_checks_its_settings_when_made(record, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=f"^{message}"):
        record()


def test_every_training_setting_beside_a_vocabulary_is_named_in_python_and_in_flags(corpus: Path, tmp_path: Path) -> None:
    vocab = tokpack.prepare(corpus, vocab_size=270, cache_dir=tmp_path).vocabulary_path
    with pytest.raises(InputError, match=r"^vocab_size, min_frequency, allow_smaller_vocab are for training a "
                                         r"vocabulary; vocab= gives one \(with its own size\); drop vocab_size, "
                                         r"min_frequency, allow_smaller_vocab, or vocab=$"):
        tokpack.prepare(corpus, vocab=vocab, vocab_size=270, min_frequency=3, allow_smaller_vocab=True, cache_dir=tmp_path)
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(vocab), "--vocab-size", "270",
                                      "--min-frequency", "3", "--shards", "2", "-o", str(tmp_path / "ds")])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == ("error: --vocab-size, --min-frequency are for training a vocabulary; --vocab gives "
                                     "one (with its own size); drop --vocab-size, --min-frequency, or --vocab")
    assert not (tmp_path / "ds").exists()


def test_a_share_out_of_range_is_the_library_s_message_in_flags(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="^validation must be"):
        tokpack.prepare(corpus, validation=1.5, cache_dir=tmp_path)
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--validation", "1.5", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.startswith("error: --validation must be"), result.output
