"""The default vocabulary sample: the whole training range up to a bound, else pieces of at most
4 KiB spread evenly over the range's bytes, so no long document dominates it; what was sampled,
and what training on the rest would cost, is said."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import app
from tokpack.corpus.sources import SAMPLE_PIECE_BYTES, open_corpus
from tokpack.preparing.options import DEFAULT_VOCAB_SAMPLE_BYTES

from conftest import DATA


@pytest.fixture(scope="module")
def uneven(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real text of very uneven document lengths: hundreds of small Polish files (code, numbers,
    dialogue, prose) beside two English files of 160 KB and 870 KB."""
    folder = tmp_path_factory.mktemp("uneven") / "corpus"
    for name in ("code", "numbers", "narrative", "dialogue"):
        shutil.copytree(DATA / "polish" / name, folder / name)
    shutil.copytree(DATA / "other" / "english", folder / "english")
    return folder


def _held_out_characters_per_token(prepared) -> float:  # type: ignore[no-untyped-def]
    low, high = prepared.meta.ranges["validation"].tokens
    ids = np.asarray(prepared.pack().tokens[low:high]).tolist()
    return len(prepared.tokenizer.decode(ids)) / (high - low)


def test_the_default_trains_on_the_whole_training_range(uneven: Path, tmp_path: Path) -> None:
    split = tmp_path / "split.json"  # the folder's split kept out of the shared folder's parent
    default = prepare(uneven, cache_dir=tmp_path / "cache", vocab_size=1024, validation=0.1, manifest=split)
    used, whole = default.vocabulary_sample_bytes  # type: ignore[misc]
    assert used == whole < DEFAULT_VOCAB_SAMPLE_BYTES
    assert default.vocabulary_sample is not None and default.vocabulary_sample.startswith("trained on all ")
    everything = prepare(uneven, cache_dir=tmp_path / "other", vocab_size=1024, manifest=split, vocab_sample_bytes=10**12)
    assert everything.identity.sha256 == default.identity.sha256
    assert _held_out_characters_per_token(default) == _held_out_characters_per_token(everything)


def test_a_sample_is_pieces_spread_over_the_range_s_bytes(uneven: Path) -> None:
    with open_corpus(uneven) as source:
        total = int(sum(source.unit_bytes(first, last).sum() for name, first, last in source.unit_ranges() if name == "train"))
        budget = total // 5
        sample = source.training_sample(budget)
        texts = list(sample)
        assert texts == list(source.training_sample(budget))  # deterministic
        english = b"".join(path.read_bytes() for path in sorted((uneven / "english").iterdir())).decode()
    sizes = [len(text.encode()) for text in texts]
    assert sum(sizes) == sample.n_bytes <= budget
    assert sample.n_pieces >= len(texts) and sample.n_bytes <= sample.n_pieces * SAMPLE_PIECE_BYTES  # adjacent ones join
    # Each stretch of the range is as likely to be drawn: the 1 MB of English (a fifth of the
    # range) gives about a fifth of the sample, not all of it, and many small files give the rest.
    from_english = sum(size for text, size in zip(texts, sizes) if text in english)
    assert 0.1 < from_english / sample.n_bytes < 0.35
    assert sample.n_documents >= 100
    assert sample.describe() == (f"trained on {sample.n_bytes / 1e6:.1f} of {total / 1e6:.1f} MB ({sample.n_bytes / total:.0%}): "
                                 f"{sample.n_pieces:,} pieces of up to 4 KiB from {sample.n_documents:,} documents, spread "
                                 "evenly over the range")


def test_a_sample_much_smaller_than_the_range_says_what_the_rest_would_cost(uneven: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["prepare", str(uneven), "--vocab-size", "512", "--vocab-sample-bytes", "500000",
                                      "--cache-dir", str(tmp_path / "cache")], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "pieces of up to 4 KiB from" in result.stdout
    (line,) = [line for line in result.stdout.splitlines() if "not trained on" in line]
    assert "MB of the training range: --vocab-sample-bytes " in line and "trains on all of it, about" in line


@pytest.mark.parametrize("piece_bytes", [5, 7, 13, 64, 4096])
def test_every_piece_is_whole_characters_of_the_text(piece_bytes: int, tmp_path: Path) -> None:
    # Long lines of one- to four-byte characters, so pieces end inside lines and inside characters.
    text = ("zażółć 界😀 gęślą jaźń " * 40 + "\n") * 5 + "tail without a newline 😀😀"
    corpus = tmp_path / "mixed.txt"
    corpus.write_text(text, encoding="utf-8")
    with open_corpus(corpus, document_bytes=600) as source:
        for budget in (50, 333, 2000):
            pieces = list(source.training_sample(budget, piece_bytes=piece_bytes))  # decoding would raise
            assert pieces and all(piece in text for piece in pieces)


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
    with open_corpus(corpus, document_bytes=4096) as source:
        total = int(source.unit_bytes(0, source.n_units).sum())
        sample = source.training_sample(total // 3)
        texts = list(sample)
        again = list(source.training_sample(total // 3))
    assert texts == again  # deterministic
    assert 0 < sample.n_bytes <= total // 3 and sample.n_pieces == len(texts) >= 8
    # A sample from the first bytes would be Polish only: the spread one has both scripts.
    assert any("ż" in text or "ł" in text for text in texts) and any("ы" in text for text in texts)
    assert sample.describe().endswith("documents, spread evenly over the range")

    prepared = prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=400, vocab_sample_bytes=total // 3)
    ids = prepared.tokenizer.encode("ы и ж")
    assert len(ids) < len("ы и ж".encode())  # Cyrillic made it into the merges
    assert prepared.vocabulary_sample is not None and "spread evenly over the range" in prepared.vocabulary_sample


def test_prepare_prints_what_the_vocabulary_was_trained_on(tmp_path: Path) -> None:
    corpus = _two_halves(tmp_path / "corpus")
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--cache-dir", str(tmp_path / "c"), "--vocab-size", "300",
                                       "--vocab-sample-bytes", "20000"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "documents, spread evenly over the range" in result.output and "trained on 0.0 of 0.1 MB (" in result.output
