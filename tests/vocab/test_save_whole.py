"""``BpeTokenizer.save(folder)`` writes the folder whole: a save stopped part way (a failed write,
a full disk, Ctrl-C) leaves a new folder absent, an empty one empty and a vocabulary saved there
before whole and unchanged; a reader sees the old vocabulary or the new one, never parts of both;
a folder holding other files too keeps them, and is written file by file, the record last."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tokpack.errors import InputError
from tokpack.vocab import BpeTokenizer
from tokpack.vocab.loading import load_vocabulary
from tokpack.vocab.patterns import GPT2_PATTERN

_SINGLE = {bytes([b]): b for b in range(256)}
BEFORE = BpeTokenizer(ranks=_SINGLE | {b"ab": 256}, pattern=GPT2_PATTERN)
AFTER = BpeTokenizer(ranks=_SINGLE | {b"ab": 256, b"abab": 257}, pattern=GPT2_PATTERN)


def _contents(folder: Path) -> dict[str, bytes] | None:
    """Every file of ``folder`` by name, hidden ones included; ``None`` when it does not exist."""
    if not folder.exists():
        return None
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def _stop_at_the_record(monkeypatch: pytest.MonkeyPatch, folder: Path, stop: BaseException) -> list[Path]:
    """Have the save raise ``stop`` where it writes ``vocabulary.json``, its second file (the rank
    file written already); return where that write went."""
    import tokpack.vocab.bytelevel as bytelevel

    seen: list[Path] = []

    def stopped(record: object, path: Path) -> None:
        seen.append(path)
        assert (path.parent / "ranks.tiktoken").read_bytes() == AFTER.rank_lines
        raise stop

    monkeypatch.setattr(bytelevel, "write_record", stopped)
    return seen


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), OSError(errno.EIO, "Input/output error")],
                         ids=["ctrl-c", "failed-write"])
def test_a_save_stopped_after_the_rank_file_leaves_a_new_folder_absent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: BaseException) -> None:
    folder = tmp_path / "vocab"
    seen = _stop_at_the_record(monkeypatch, folder, stop)
    with pytest.raises(type(stop)):
        AFTER.save(folder)
    assert not folder.exists(), _contents(folder)
    assert list(tmp_path.iterdir()) == []  # nor the temporary folder
    # It was written beside the folder (the same file system), not into it nor into /tmp.
    assert seen and seen[0].parent.parent == tmp_path and seen[0].parent.name.startswith(".vocab.tmp-")


def test_a_save_that_fills_the_disk_leaves_an_empty_folder_empty_and_says_which(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "vocab"
    folder.mkdir()
    _stop_at_the_record(monkeypatch, folder, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(InputError, match="no space left on its disk") as raised:
        AFTER.save(folder)
    assert str(folder) in str(raised.value)
    assert _contents(folder) == {}
    assert [path.name for path in tmp_path.iterdir()] == ["vocab"]


def test_a_save_stopped_over_a_saved_vocabulary_leaves_it_whole_and_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "vocab"
    saved = BEFORE.save(folder)
    before = _contents(folder)
    _stop_at_the_record(monkeypatch, folder, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        AFTER.save(folder)
    monkeypatch.undo()
    assert _contents(folder) == before
    assert load_vocabulary(saved).identity == BEFORE.identity
    assert [path.name for path in tmp_path.iterdir()] == ["vocab"]


def test_a_reader_sees_the_old_vocabulary_or_the_new_one_never_parts_of_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the folder holds before and after every rename of the save."""
    folder = tmp_path / "vocab"
    BEFORE.save(folder)
    (folder / "ranks.tiktoken").chmod(0o600)  # not what a save writes: shows the files were replaced
    folder.chmod(0o750)
    old = _contents(folder)
    states = [old]
    rename = os.rename

    def watched(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        rename(source, destination)
        states.append(_contents(folder))

    monkeypatch.setattr(os, "rename", watched)
    AFTER.save(folder)
    monkeypatch.undo()
    new = _contents(folder)
    assert new is not None and new != old and load_vocabulary(folder).identity == AFTER.identity
    assert all(state in (old, None, new) for state in states), states
    assert states[-1] == new
    assert (folder.stat().st_mode & 0o777) == 0o750  # the folder's permissions are kept
    assert [path.name for path in tmp_path.iterdir()] == ["vocab"]


def test_a_save_replaces_what_a_killed_save_of_the_old_code_left(tmp_path: Path) -> None:
    """A rank file without its record (what a save into the folder itself left when stopped) is a
    vocabulary's file: replaced, not refused."""
    folder = tmp_path / "vocab"
    folder.mkdir()
    (folder / "ranks.tiktoken").write_bytes(BEFORE.rank_lines[:100])
    (folder / ".vocabulary.json.1@elsewhere-0000.partial").write_text("{")
    AFTER.save(folder)
    assert sorted(_contents(folder) or {}) == ["ranks.tiktoken", "vocabulary.json"]
    assert load_vocabulary(folder).identity == AFTER.identity


def test_a_save_into_a_symbolic_link_replaces_the_folder_it_leads_to(tmp_path: Path) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    BEFORE.save(real)
    link.symlink_to(real, target_is_directory=True)
    AFTER.save(link)
    assert link.is_symlink() and load_vocabulary(real).identity == AFTER.identity


def test_a_folder_holding_other_files_keeps_them_and_a_stopped_save_is_refused_on_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's folder: its files stay; a save stopped between the rank file and its record
    leaves a vocabulary that load refuses (the record's SHA-256), never half a file."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    BEFORE.save(folder)
    AFTER.save(folder)
    assert (folder / "config.json").read_text() == "{}"
    assert load_vocabulary(folder).identity == AFTER.identity
    import tokpack.vocab.bytelevel as bytelevel

    def stopped(record: object, path: Path) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(bytelevel, "write_record", stopped)
    with pytest.raises(KeyboardInterrupt):
        BEFORE.save(folder)
    assert sorted(os.listdir(folder)) == ["config.json", "ranks.tiktoken", "vocabulary.json"]
    with pytest.raises(InputError):
        BpeTokenizer.load_saved(folder / "vocabulary.json")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="exists and is not a folder"):
        AFTER.save(tmp_path / "file")


def test_a_folder_holding_a_tokenizer_json_is_refused_untouched(tmp_path: Path) -> None:
    """A model's folder with a tokenizer.json: Hugging Face would load that one, another
    vocabulary than the one saved beside it, so the save is refused and writes nothing."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(InputError, match=r"holds a tokenizer\.json") as raised:
        AFTER.save(folder)
    assert str(raised.value).startswith(f"{folder}: ")
    assert sorted(os.listdir(folder)) == ["config.json", "tokenizer.json"]


def test_a_save_into_the_working_folder_writes_into_it_and_keeps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bpe train -o .`` in an empty folder (or one holding only a vocabulary): replacing the
    folder whole would leave the caller's shell, whose working folder it is, in a deleted one."""
    folder = tmp_path / "vocab"
    folder.mkdir()
    monkeypatch.chdir(folder)
    before = folder.stat().st_ino
    BEFORE.save(Path("."))
    AFTER.save(Path("."))
    assert folder.stat().st_ino == before and os.path.samefile(os.getcwd(), folder)
    assert sorted(os.listdir(".")) == ["ranks.tiktoken", "vocabulary.json"]
    assert load_vocabulary(folder).identity == AFTER.identity
    assert [path.name for path in tmp_path.iterdir()] == ["vocab"]


def test_a_save_into_a_folder_that_is_not_writable_is_refused_and_leaves_it_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder made read-only (chmod a-w) is refused, as writing into it would be: replacing it
    whole would get round that, and leave the old folder, undeletable, beside it."""
    import tokpack.vocab.bytelevel as bytelevel

    folder = tmp_path / "vocab"
    BEFORE.save(folder)
    before = _contents(folder)
    folder.chmod(0o555)
    # Root may write anywhere, so the permission is asked of os.access as a user would be answered.
    access = os.access
    monkeypatch.setattr(bytelevel.os, "access", lambda path, mode, **kw: not (
        mode & os.W_OK and os.path.samefile(path, folder)) and access(path, mode, **kw))
    try:
        with pytest.raises(InputError, match="not writable") as raised:
            AFTER.save(folder)
        assert str(folder) in str(raised.value)
        assert _contents(folder) == before
        assert [path.name for path in tmp_path.iterdir()] == ["vocab"]
    finally:
        folder.chmod(0o755)
