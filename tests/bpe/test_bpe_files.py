"""Training from files: a folder, JSON Lines and Parquet streamed through spawned workers give the
merges of training on the same documents in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_bpe_data import real_texts

from tokpack.bpe import BpeProgress, train_fast
from tokpack.bpe.fast import train_from_files
from tokpack.corpus.sources import open_corpus
from tokpack.errors import InputError
from tokpack.vocab import GPT4_PATTERN

MERGES = 400


@pytest.fixture(scope="module")
def texts() -> list[str]:
    # Real Polish text, plus what splitting must keep apart: an empty document, emoji, a repeat.
    return [*real_texts("polish", 400_000), "", "🙂🙂 🙂", "zażółć gęślą jaźń", "zażółć gęślą jaźń"]


@pytest.fixture(scope="module", params=["directory", "jsonl", "parquet"])
def corpus(request: pytest.FixtureRequest, texts: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "directory":
        for index, text in enumerate(texts):
            (root / f"{index:04d}.txt").write_text(text, encoding="utf-8")
        return root
    if request.param == "jsonl":
        path = root / "corpus.jsonl"
        path.write_text("".join(json.dumps({"id": i, "body": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)),
                        encoding="utf-8")
        return path
    path = root / "corpus.parquet"
    pq.write_table(pa.table({"body": texts}), path, row_group_size=7)
    return path


def test_streamed_training_equals_in_memory_training(corpus: Path) -> None:
    field = "text" if corpus.is_dir() else "body"
    with open_corpus(corpus, document_bytes=1 << 20, text_field=field) as source:
        documents = [piece.text for piece in source.pieces()]
    in_memory = train_fast(documents, MERGES, pattern=GPT4_PATTERN, workers=1)
    reports: list[BpeProgress] = []
    streamed = train_from_files(corpus, MERGES, pattern=GPT4_PATTERN, text_field=field, workers=2,
                                progress=reports.append)
    assert streamed.training.trace == in_memory.trace
    assert len(streamed.training.merges) == MERGES
    assert streamed.n_bytes == sum(len(d.encode("utf-8")) for d in documents)
    counting = [r for r in reports if r.stage == "count"]
    assert counting[-1].done == streamed.n_bytes and [r.done for r in counting] == sorted(r.done for r in counting)
    merging = [r for r in reports if r.stage == "merge"]
    assert merging[-1].done == MERGES and merging[-1].unit == "merges"


@pytest.mark.parametrize("kind", ["text file", "folder"])
def test_held_out_documents_are_never_trained_on(kind: str, texts: list[str], tmp_path: Path) -> None:
    """A corpus whose manifest holds out validation and test (as ``prepare --validation`` writes
    it) is trained on its training range only, as prepare trains: the merges of training on those
    documents alone, and not those of the whole."""
    from tokpack.corpus.sources import hold_out

    if kind == "folder":
        corpus = tmp_path / "folder"
        corpus.mkdir()
        for index, text in enumerate(texts):
            (corpus / f"{index:04d}.txt").write_text(text, encoding="utf-8")
    else:
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("\n".join(texts), encoding="utf-8")
    whole = train_from_files(corpus, MERGES, pattern=GPT4_PATTERN, workers=1, document_bytes=1 << 14)
    hold_out(corpus, validation=0.2, test=0.1, document_bytes=1 << 14)
    with open_corpus(corpus, document_bytes=1 << 14) as source:
        (_, first, last), = [ranges for ranges in source.unit_ranges() if ranges[0] == "train"]
        assert last < source.n_units
        training = [piece.text for piece in source.pieces(first, last)]
    held = train_from_files(corpus, MERGES, pattern=GPT4_PATTERN, workers=2, document_bytes=1 << 14)
    assert held.held_out and not whole.held_out
    assert held.training.trace == train_fast(training, MERGES, pattern=GPT4_PATTERN, workers=1).trace
    assert held.training.trace != whole.training.trace
    assert held.n_bytes == sum(len(text.encode("utf-8")) for text in training) < whole.n_bytes


def test_a_bad_record_is_an_input_error_or_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "abab abab"}\n{"body": 1}\n{"text": "abab"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl: record at byte 22 has no string field 'text'"):
        train_from_files(path, 3, workers=1)
    result = train_from_files(path, 3, workers=1, on_error="skip")
    assert result.skipped == 1 and result.training.trace == train_fast(["abab abab", "abab"], 3, pattern=GPT4_PATTERN).trace


def test_a_missing_corpus_and_bad_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope: no such corpus file or folder"):
        train_from_files(tmp_path / "nope", 3)
    with pytest.raises(InputError, match="num_merges"):
        train_from_files(tmp_path, -1)


def test_cli_trains_a_vocabulary_of_the_size_asked_for(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tokpack import load_vocabulary
    from tokpack.cli import app

    folder = tmp_path / "corpus"
    folder.mkdir()
    texts = real_texts("polish", 100_000)
    for index, text in enumerate(texts):
        (folder / f"{index}.txt").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["bpe", "train", str(folder), "-o", str(tmp_path / "vocab"), "--vocab-size", "600"])
    assert result.exit_code == 0, result.output
    vocabulary = load_vocabulary(tmp_path / "vocab")
    assert vocabulary.n_vocab == 600
    expected = train_fast(texts, 600 - 257, pattern=GPT4_PATTERN, min_frequency=2).as_tokenizer()
    assert vocabulary.ranks == expected.ranks
    missing = CliRunner().invoke(app, ["bpe", "train", str(tmp_path / "nope"), "-o", str(tmp_path / "v2")])
    assert missing.exit_code == 2 and "nope: no such corpus" in missing.output


def test_cli_skips_a_folder_s_binary_file_with_on_error_skip(tmp_path: Path) -> None:
    """A folder of sources with compiled files among them: the refusal's fix is a flag the command
    has, and with it the binary file is counted and its text-free bytes learn no merge."""
    from typer.testing import CliRunner

    from tokpack.cli import app

    folder = tmp_path / "code"
    (folder / "__pycache__").mkdir(parents=True)
    texts = ["def f(x):\n    return x + x\n" * 20, "def g(y):\n    return y * y\n" * 20]
    for index, text in enumerate(texts):
        (folder / f"m{index}.py").write_text(text, encoding="utf-8")
    (folder / "__pycache__" / "m0.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\x00\x00\x00\x00" + bytes(range(256)))
    refused = CliRunner().invoke(app, ["bpe", "train", str(folder), "-o", str(tmp_path / "v1"), "--vocab-size", "270"])
    assert refused.exit_code == 2 and "--on-error skip" in refused.output and "on_error" not in refused.output, \
        refused.output
    result = CliRunner().invoke(app, ["bpe", "train", str(folder), "-o", str(tmp_path / "v2"), "--vocab-size", "270",
                                      "--on-error", "skip", "--allow-smaller-vocab"])
    assert result.exit_code == 0 and "1 file or record skipped" in result.output, result.output
    expected = train_fast(texts, 270 - 257, pattern=GPT4_PATTERN, min_frequency=2).as_tokenizer()
    from tokpack import load_vocabulary
    assert load_vocabulary(tmp_path / "v2").ranks == expected.ranks


def test_cli_a_corpus_with_no_pair_to_merge_suggests_no_size_the_option_refuses(tmp_path: Path) -> None:
    """Three bytes reach 257 ids (bytes and <|endoftext|>, no merge); --vocab-size takes 258 at
    least, so the fix names what can help instead of --vocab-size 257."""
    from typer.testing import CliRunner

    from tokpack.cli import app

    (tmp_path / "tiny.txt").write_text("abc", encoding="utf-8")
    result = CliRunner().invoke(app, ["bpe", "train", str(tmp_path / "tiny.txt"), "-o", str(tmp_path / "v")])
    assert result.exit_code == 2, result.output
    assert "reaches only 257 ids" in result.output and "--vocab-size 257" not in result.output
    assert "--allow-smaller-vocab" in result.output
