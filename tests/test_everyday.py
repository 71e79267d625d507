"""Everyday use (issue 13): what a new user on their own corpus relies on."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from conftest import DATA
from tokpack import prepare
from tokpack.cli import app
from tokpack.corpus.sources import open_source

runner = CliRunner()


def _two_halves(folder: Path) -> Path:
    """A folder whose files sort as: 20 documents of Polish, then 20 of Russian (real text)."""
    polish = sorted((DATA / "polish" / "narrative").glob("*.txt"))
    russian = (DATA / "other" / "scripts" / "wesnoth-ru.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    folder.mkdir()
    for index in range(20):
        (folder / f"a{index:02d}.txt").write_bytes(polish[index % len(polish)].read_bytes()[:3000])
        (folder / f"b{index:02d}.txt").write_text("".join(russian[index * 40 : index * 40 + 40]), encoding="utf-8")
    return folder


def test_the_vocabulary_sample_is_spread_over_the_whole_training_range(tmp_path: Path) -> None:
    corpus = _two_halves(tmp_path / "corpus")
    with open_source(corpus, document_bytes=4096) as source:
        total = int(source.unit_bytes(0, source.n_units).sum())
        sample = source.training_sample(total // 3)
        texts = list(sample)
        again = list(source.training_sample(total // 3))
    assert texts == again  # deterministic
    assert 0 < sample.n_bytes <= total // 3 and sample.n_documents == len(texts) >= 8
    # A sample from the first bytes would be Polish only: the spread one has both scripts.
    assert any("ż" in text or "ł" in text for text in texts) and any("ы" in text for text in texts)
    assert sample.describe().endswith("documents spread over the range")

    prepared = prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=400, vocab_sample_bytes=total // 3)
    ids = prepared.tokenizer().encode("ы и ж")
    assert len(ids) < len("ы и ж".encode())  # Cyrillic made it into the merges
    assert prepared.vocabulary_sample is not None and "spread over the range" in prepared.vocabulary_sample


def test_prepare_prints_what_the_vocabulary_was_trained_on(tmp_path: Path) -> None:
    corpus = _two_halves(tmp_path / "corpus")
    result = runner.invoke(app, ["prepare", str(corpus), "--cache-dir", str(tmp_path / "c"), "--vocab-size", "300",
                                 "--vocab-sample-bytes", "20000"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "documents spread over the range" in result.output and "trained on 0.0 of 0.1 MB" in result.output
