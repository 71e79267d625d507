"""``building``: a Ctrl-C anywhere from the temporary folder's making to its rename into place
leaves nothing behind (Python raises it wherever the interpreter next looks, between any two
steps), and ``replace=True`` puts the new folder in the old one's place."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpack import _atomic
from tokpack._atomic import building


def test_a_ctrl_c_as_the_temporary_folder_is_made_leaves_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mkdir = Path.mkdir

    def interrupted_once_made(path: Path, *args: object, **kwargs: object) -> None:
        mkdir(path, *args, **kwargs)  # type: ignore[arg-type]
        if ".tmp-" in path.name:
            raise KeyboardInterrupt

    monkeypatch.setattr(Path, "mkdir", interrupted_once_made)
    with pytest.raises(KeyboardInterrupt):
        with building(tmp_path / "out"):
            pass
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("replace", [False, True], ids=["new", "replacing"])
def test_a_ctrl_c_as_the_folder_is_published_leaves_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replace: bool) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_atomic, "publish", interrupted)
    monkeypatch.setattr(_atomic, "replace_directory", interrupted)
    if replace:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "old").write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with building(tmp_path / "out", replace=replace) as folder:
            (folder / "new").write_text("new")
    assert [path.name for path in tmp_path.iterdir()] == (["out"] if replace else [])
    if replace:
        assert [path.name for path in (tmp_path / "out").iterdir()] == ["old"]


def test_replace_puts_the_new_folder_in_the_old_ones_place(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old").write_text("old")
    with building(tmp_path / "out", replace=True) as folder:
        (folder / "new").write_text("new")
    assert [path.name for path in tmp_path.iterdir()] == ["out"]
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["new"]
