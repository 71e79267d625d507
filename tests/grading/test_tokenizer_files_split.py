"""corpus_files lists only usable text and says why anything else was left out; the split is
deterministic, per domain, dedup'd across the parts, and never lets validation into training."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.grading.files import corpus_files, read_document
from tokpack.grading.split import SPLIT_FILE, plan_split, write_split

from tokenizer_fixtures import ARTIFACT, POLISH, require_data

runner = CliRunner()


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def test_corpus_files_reports_every_unusable_file_with_its_reason(tmp_path: Path) -> None:
    _write(tmp_path / "prose" / "b.txt", "Zażółć gęślą jaźń.\n")
    _write(tmp_path / "prose" / "a.txt", "Łódź\r\n")
    _write(tmp_path / "prose" / "empty.txt", b"")
    _write(tmp_path / "prose" / "blank.txt", " \n\t\n")
    _write(tmp_path / "prose" / "latin2.txt", "ok ".encode() + "żółw".encode("iso-8859-2"))
    _write(tmp_path / "prose" / "binary.bin", b"PK\x03\x04\x00\x00")
    _write(tmp_path / "prose" / ".hidden.txt", "sekret")
    _write(tmp_path / ".git" / "HEAD", "ref: main")
    os.symlink(tmp_path / "prose" / "a.txt", tmp_path / "prose" / "link.txt")
    os.mkfifo(tmp_path / "prose" / "pipe")

    listing = corpus_files(tmp_path)

    assert [listing.relative(p) for p in listing] == ["prose/a.txt", "prose/b.txt"]
    reasons = {listing.relative(s.path): s.reason for s in listing.skipped}
    assert reasons == {
        ".git": "hidden folder",
        "prose/.hidden.txt": "hidden file",
        "prose/binary.bin": "binary (NUL byte at offset 4)",
        "prose/blank.txt": "only whitespace",
        "prose/empty.txt": "empty",
        "prose/latin2.txt": "not UTF-8 (invalid byte at offset 3)",
        "prose/link.txt": "symbolic link (not followed)",
        "prose/pipe": "not a regular file",
    }
    assert read_document(tmp_path / "prose" / "a.txt") == "Łódź\r\n"  # line endings kept


def test_corpus_files_order_is_by_path_not_by_creation(tmp_path: Path) -> None:
    for name in ("z.txt", "B.txt", "a.txt", "ą.txt"):
        _write(tmp_path / "d" / name, "tekst")
    _write(tmp_path / "top.txt", "tekst")
    listing = corpus_files(tmp_path)
    assert [listing.relative(p) for p in listing] == ["d/B.txt", "d/a.txt", "d/z.txt", "d/ą.txt", "top.txt"]
    assert listing.domain_of(listing.files[-1]) == "."


def test_corpus_files_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        corpus_files(tmp_path / "nope")


def test_every_real_data_file_is_usable() -> None:
    require_data()
    for folder in (POLISH, POLISH.parent / "other"):
        listing = corpus_files(folder)
        assert listing.skipped == ()
        assert len(listing) > 0


def _corpus(root: Path) -> Path:
    long_line = "To jest długi wiersz, który powtarza się w dwóch dokumentach tego korpusu.\n"
    for index in range(20):
        _write(root / "prose" / f"doc{index:02}.txt", f"Dokument numer {index}.\nTreść {index * 7}.\n")
    _write(root / "prose" / "copy.txt", "  DOKUMENT numer 3.\r\nTREŚĆ   21.\n")  # same normalized text as doc03
    for index in range(6):
        _write(root / "code" / f"m{index}.py", f"x_{index} = {index}\n" + long_line)
    return root


def test_split_is_deterministic_per_domain_and_disjoint(tmp_path: Path) -> None:
    first = plan_split(_corpus(tmp_path / "one"), validation=0.2)
    # The same documents created in another order give the same split.
    other = tmp_path / "two"
    for path in sorted((tmp_path / "one").rglob("*"), reverse=True):
        if path.is_file():
            _write(other / path.relative_to(tmp_path / "one"), path.read_bytes())
    second = plan_split(other, validation=0.2)
    assert (first.train, first.validation) == (second.train, second.validation)
    assert not set(first.train) & set(first.validation)
    assert first.domains["prose"].validation == 4  # 20 distinct prose documents after dedup
    assert first.domains["code"].near_duplicates == 1  # ranked into validation, but all training text
    assert plan_split(tmp_path / "one", validation=0.2, seed="inny").validation != first.validation


def test_split_removes_exact_duplicates_and_moves_near_duplicates(tmp_path: Path) -> None:
    record = plan_split(_corpus(tmp_path), validation=0.5)
    reasons = {removed.path: removed.reason for removed in record.removed}
    assert reasons["prose/doc03.txt"] == "exact duplicate of prose/copy.txt"
    assert record.domains["prose"].exact_duplicates == 1
    kept = set(record.train) | set(record.validation)
    assert "prose/doc03.txt" not in kept and "prose/copy.txt" in kept
    # Every code file is mostly one shared long line: those ranked into validation moved to training.
    assert record.domains["code"].validation == 0
    assert record.domains["code"].near_duplicates == 3
    moved = [path for path, reason in reasons.items() if reason.startswith("near duplicate")]
    assert len(moved) == 3 and set(moved) <= set(record.train)


def test_write_split_copies_bytes_and_refuses_to_overwrite(tmp_path: Path) -> None:
    data = _corpus(tmp_path / "data")
    record = plan_split(data)
    out = tmp_path / "split"
    write_split(record, out)
    copied = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    expected = sorted([f"train/{p}" for p in record.train] + [f"validation/{p}" for p in record.validation] + [SPLIT_FILE])
    assert copied == expected
    assert (out / "train" / "prose" / "copy.txt").read_bytes() == (data / "prose" / "copy.txt").read_bytes()
    with pytest.raises(ValueError, match="already exists"):
        write_split(record, out)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing half-written left


def test_split_cli_reports_counts_and_bad_input(tmp_path: Path) -> None:
    data = _corpus(tmp_path / "data")
    result = runner.invoke(app, ["tokenizer", "split", str(data), "--out", str(tmp_path / "s"), "--validation", "0.2"])
    assert result.exit_code == 0, result.output
    assert "prose" in result.output and "near" in result.output
    assert json.loads((tmp_path / "s" / SPLIT_FILE).read_text())["schema"] == "tokpack.split.v1"
    result = runner.invoke(app, ["tokenizer", "split", str(tmp_path / "missing"), "--out", str(tmp_path / "t")])
    assert result.exit_code == 2
    assert "missing: not a directory" in result.output
    result = runner.invoke(app, ["tokenizer", "split", str(data), "--out", str(tmp_path / "t"), "--validation", "1.5"])
    assert result.exit_code == 2 and "validation fraction" in result.output


def test_the_artifact_validation_split_is_reproduced_from_the_data() -> None:
    """The shipped manifest names its validation files; the split made now from the data agrees."""
    require_data()
    manifest = json.loads((ARTIFACT / "manifest.json").read_text(encoding="utf-8"))
    split = manifest["split"]
    record = plan_split(POLISH, validation=split["validation_fraction"], seed=split["seed"])
    assert record.validation == split["validation_files"]
    trained_on = {source["path"] for source in manifest["sources"]}
    assert trained_on == set(record.train)
    assert not trained_on & set(record.validation)
