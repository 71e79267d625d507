"""Links in a corpus folder: a linked subfolder is read like a real one, and a second way to a
folder or file (a loop, a link into the corpus, two links to one place) stops the run or is
skipped and counted: nothing is dropped or read twice."""

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
    with pytest.raises(InputError, match="a link to .*, which is read in its own place") as refused:
        texts(news)
    assert str(refused.value).startswith(f"{where}: ")
    with open_corpus(news, on_error="skip") as source:
        assert [piece.text for piece in source.pieces()] == ["styczeń\n", "wiadomości dnia\n"]
        assert source.skipped == 1 and str(where) in source.problems[0]
    result = CliRunner().invoke(app, ["prepare", str(news), "--vocab-size", "260", "--cache-dir", str(data / "cache")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


def test_a_link_into_the_corpus_is_the_duplicate_whatever_its_name(data: Path) -> None:
    """A link that sorts before the folder it leads to (``news/0-latest -> news/2024``) is the
    second way to it: the link is named and skipped, the folder is read in its own place."""
    news = data / "news"
    os.symlink(news / "2024", news / "0-latest")
    with pytest.raises(InputError, match="a link to .*2024, which is read in its own place") as refused:
        texts(news)
    assert str(refused.value).startswith(f"{news / '0-latest'}: ")
    with open_corpus(news, on_error="skip") as source:
        assert [piece.text for piece in source.pieces()] == ["styczeń\n", "wiadomości dnia\n"]
        assert source.skipped == 1 and str(news / "0-latest") in source.problems[0]
        assert [file.relative_to(news).as_posix() for file in source.input_files()] == ["2024/b.txt", "a.txt"]


def test_a_file_reached_twice_through_links_is_read_once(data: Path, tmp_path: Path) -> None:
    """A link to a file of the corpus, or two links to one file elsewhere, would read its
    documents twice: refused, or skipped and counted."""
    news = data / "news"
    os.symlink(news / "a.txt", news / "0-copy.txt")
    with pytest.raises(InputError, match="a link to .*a.txt, which is read in its own place"):
        texts(news)
    (news / "0-copy.txt").unlink()
    os.symlink(data / "books" / "c.txt", news / "c1.txt")
    os.symlink(data / "books" / "c.txt", news / "c2.txt")
    with pytest.raises(InputError, match=r"c2.txt: the same file as .*c1.txt, read already"):
        texts(news)
    with open_corpus(news, on_error="skip") as source:
        assert [piece.text for piece in source.pieces()] == ["styczeń\n", "wiadomości dnia\n", "Pan Tadeusz\n"]
        assert source.skipped == 1


def test_a_folder_outside_reached_twice_through_links_is_read_once(data: Path, tmp_path: Path) -> None:
    """Two links to one folder outside the corpus, or a loop inside a linked folder: the second
    way is refused, or skipped and counted."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    os.symlink(data / "books", corpus / "books")
    os.symlink(data / "books", corpus / "library")
    with pytest.raises(InputError, match=r"library: the same folder as .*books, read already \(through a link\)"):
        texts(corpus)
    (corpus / "library").unlink()
    os.symlink(data / "news", corpus / "news")
    os.symlink(data / "news", data / "news" / "2024" / "back")  # a loop, inside the linked folder
    with pytest.raises(InputError, match=r"news/2024/back: the same folder as .*news, read already"):
        texts(corpus)
    with open_corpus(corpus, on_error="skip") as source:
        assert [piece.text for piece in source.pieces()] == ["Pan Tadeusz\n", "styczeń\n", "wiadomości dnia\n"]
        assert source.skipped == 1


def test_a_file_reached_through_a_linked_folder_and_a_link_names_both_links(data: Path, tmp_path: Path) -> None:
    """The walk reads a folder's own files before its subfolders, so the second way to the file is
    the one inside the linked folder, which is no link itself: the fix names the links to remove."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    os.symlink(data / "books", corpus / "books")
    os.symlink(data / "books" / "c.txt", corpus / "extra.txt")
    with pytest.raises(InputError) as refused:
        texts(corpus)
    assert str(refused.value) == (f"{corpus / 'books' / 'c.txt'}: the same file as {corpus / 'extra.txt'}, read already "
                                  "(through a link) (its documents would be read twice); remove one of the two links "
                                  f"to it ({corpus / 'extra.txt'} or {corpus / 'books'}), or leave it out with "
                                  "on_error='skip'")


def test_a_dangling_link_stops_the_run_with_the_fix_or_is_skipped_and_counted(data: Path) -> None:
    os.symlink(data / "gone.txt", data / "news" / "old.txt")
    with pytest.raises(InputError, match=r"news/old.txt: a link to .*gone.txt, which does not exist; remove the link"
                                         r".*on_error='skip'"):
        texts(data)
    result = CliRunner().invoke(app, ["prepare", str(data), "--vocab-size", "260", "--cache-dir", str(data / "cache")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    with open_corpus(data, on_error="skip") as source:
        assert len([piece.text for piece in source.pieces()]) == 3
        assert source.skipped == 1 and "old.txt" in source.problems[0]
