"""Where ``tokpack prepare`` may write: an output that already holds other data (a pack, a sharded
dataset) or lies inside the corpus folder, and an absurd shard count, are each refused with one
line and exit 2 before anything is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokpack
from tokpack.cli import _console, app

from conftest import SAMPLE

runner = CliRunner()


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_console, "debug", False)


def corpus_folder(root: Path) -> Path:
    folder = root / "corpus"
    folder.mkdir()
    text = (SAMPLE / "polish.txt").read_text(encoding="utf-8")
    for i in range(3):
        (folder / f"part{i}.txt").write_text(text[i * 2000:(i + 1) * 2000], encoding="utf-8")
    return folder


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def refused(args: list[str], *needles: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_shards_into_an_existing_pack_is_refused_and_writes_nothing(
        tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    pack = tmp_path / "pack1"
    shutil.copytree(prepared.tokens_dir, pack)
    before = listing(pack)
    refused(["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path), "--shards", "2",
             "-o", str(pack)], "pack1", "already a pack", "--out")
    assert listing(pack) == before
    assert tokpack.Pack(pack).meta.n_tokens == tokpack.Pack(prepared.tokens_dir).meta.n_tokens


def test_a_pack_into_a_sharded_dataset_is_refused(tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    dataset = tmp_path / "ds"
    ok = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path),
                             "--document-bytes", "4096", "--shards", "2", "-o", str(dataset)])
    assert ok.exit_code == 0, ok.output
    before = listing(dataset)
    refused(["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path), "-o", str(dataset)],
            "ds", "sharded dataset", "--out")
    assert listing(dataset) == before


@pytest.mark.parametrize("where", [".", "sub/ds"])
def test_shards_into_the_corpus_folder_is_refused_and_leaves_it_untouched(
        tmp_path: Path, prepared: tokpack.TokenizedCorpus, where: str) -> None:
    corpus = corpus_folder(tmp_path)
    before = listing(corpus)
    refused(["prepare", str(corpus), "--vocab", str(prepared.vocabulary_path), "--shards", "2",
             "-o", str(corpus / where)], "inside the corpus", "--out")
    assert listing(corpus) == before


def test_a_pack_into_the_corpus_folder_is_refused(tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    corpus = corpus_folder(tmp_path)
    before = listing(corpus)
    refused(["prepare", str(corpus), "--vocab", str(prepared.vocabulary_path), "-o", str(corpus / "pack")],
            "inside the corpus", "--out")
    assert listing(corpus) == before


def test_a_huge_shard_count_is_refused_before_writing(tmp_path: Path, prepared: tokpack.TokenizedCorpus) -> None:
    out = tmp_path / "x6"
    refused(["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path), "--shards",
             "99999999999", "-o", str(out)], "shards", "99999999999")
    assert not out.exists() or listing(out) == []
    # the corrected rerun is not blocked by leftovers
    ok = runner.invoke(app, ["prepare", str(SAMPLE / "polish.txt"), "--vocab", str(prepared.vocabulary_path),
                             "--document-bytes", "4096", "--shards", "2", "-o", str(out)])
    assert ok.exit_code == 0, ok.output


