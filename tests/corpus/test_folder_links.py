"""Links in a corpus folder: a linked subfolder is read like a real one, and a link to a folder
read already (a loop) stops the run or is skipped and counted, never dropped or read twice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.corpus.sources import open_corpus
from tokpack.errors import InputError
from tokpack.vocab.bytelevel import BpeTokenizer


def texts(folder: Path, **options: object) -> list[str]:
    with open_corpus(folder, **options) as source:  # type: ignore[arg-type]
        return [piece.text for piece in source.pieces()]


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    """Two data folders outside the corpus, one with a subfolder of its own."""
    (tmp_path / "data" / "news" / "2024").mkdir(parents=True)
    (tmp_path / "data" / "books").mkdir()
    (tmp_path / "data" / "news" / "a.txt").write_text("wiadomości dnia\n", encoding="utf-8")
    (tmp_path / "data" / "news" / "2024" / "b.txt").write_text("styczeń\n", encoding="utf-8")
    (tmp_path / "data" / "books" / "c.txt").write_text("Pan Tadeusz\n", encoding="utf-8")
    return tmp_path / "data"


def test_a_folder_of_links_to_data_folders_reads_them_all(data: Path, tmp_path: Path) -> None:
    linked, copied = tmp_path / "linked", tmp_path / "copied"
    linked.mkdir()
    copied.mkdir()
    for name in ("news", "books"):
        os.symlink(data / name, linked / name)
        os.symlink(data / name, copied / name)
    (copied / "books").unlink()  # one of them a real folder, to compare with
    (copied / "books").mkdir()
    (copied / "books" / "c.txt").write_text("Pan Tadeusz\n", encoding="utf-8")
    assert texts(linked) == texts(copied) == ["Pan Tadeusz\n", "styczeń\n", "wiadomości dnia\n"]
    tokenizer = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}, special_tokens={"<|endoftext|>": 256})
    tokenizer.save(tmp_path / "vocab")
    result = CliRunner().invoke(app, ["prepare", str(linked), "--vocab", str(tmp_path / "vocab" / "vocabulary.json"),
                                      "--cache-dir", str(tmp_path / "cache"), "--json"])
    assert result.exit_code == 0, result.output
    assert '"n_docs": 3' in result.output


@pytest.mark.parametrize("link", ["loop", "twice"])
def test_a_link_to_a_folder_read_already_stops_the_run_or_is_skipped_and_counted(data: Path, link: str) -> None:
    news = data / "news"
    if link == "loop":
        os.symlink(news, news / "2024" / "back")  # news/2024/back -> news
        where = news / "2024" / "back"
    else:
        os.symlink(news / "2024", news / "latest")  # a second way to the same folder
        where = news / "latest"
    with pytest.raises(InputError, match="a link to a folder read already") as refused:
        texts(news)
    assert str(refused.value).startswith(f"{where}: ")
    with open_corpus(news, on_error="skip") as source:
        assert [piece.text for piece in source.pieces()] == ["styczeń\n", "wiadomości dnia\n"]
        assert source.skipped == 1 and str(where) in source.problems[0]
    result = CliRunner().invoke(app, ["prepare", str(news), "--vocab-size", "260", "--cache-dir", str(data / "cache")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
