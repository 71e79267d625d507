"""Forged records, round three: a hand-edited record with a recomputed seal is cross-checked
against what it describes, through the CLI a user runs."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.store.format import DocumentCut, Source
from tokpack.store.writer import PackWriter
from tokpack.vocab.bytelevel import BpeTokenizer


def _reseal(meta: dict[str, object]) -> None:
    fields = {key: value for key, value in meta.items() if key != "seal"}
    meta["seal"] = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack carrying its byte-level vocabulary, as ``prepare`` writes it."""
    folder = tmp_path_factory.mktemp("vocab-pack")
    tokenizer = BpeTokenizer(ranks={bytes([b]): b for b in range(256)} | {b"ab": 256},
                             special_tokens={"<|endoftext|>": 257})
    tokenizer.save(folder / "vocab")
    files = {path.name: path.read_bytes() for path in sorted((folder / "vocab").iterdir())}
    writer = PackWriter(folder / "pack", vocabulary=tokenizer.identity)
    writer.add_documents([tokenizer.encode(text) for text in ["abc abd", "ba ab ab", "cab"]])
    writer.add_vocabulary_files(files)
    writer.commit(source=Source(name="t.txt", sha256="0" * 64, n_bytes=20), cut=DocumentCut(rule="newline"),
                  pad_id=257)
    return folder / "pack"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("field, value", [("sha256", "0" * 64), ("n_vocab", 60000), ("scheme", "uci")])
def test_a_resealed_vocabulary_identity_must_match_the_carried_vocabulary(
        pack: Path, tmp_path: Path, field: str, value: object) -> None:
    """``meta.json``'s vocabulary identity is what ``require_vocabulary`` and ``merge`` trust:
    an edit with a recomputed seal must not pass ``inspect`` or ``export``."""
    copy = tmp_path / "pack"
    shutil.copytree(pack, copy)
    meta = json.loads((copy / "meta.json").read_text())
    meta["vocabulary"][field] = value
    _reseal(meta)
    (copy / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    code, output = run("inspect", str(copy))
    assert code == 2, output
    assert "vocabulary" in output and str(copy) in output and len(output.strip().splitlines()) == 1
    code, output = run("export", str(copy), str(tmp_path / "out"), "--format", "nanogpt")
    assert code == 2, output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("span", [[20, 0], [-3, 5]])
def test_a_resealed_range_with_reversed_or_negative_source_bytes_is_refused(
        pack: Path, tmp_path: Path, span: list[int]) -> None:
    """A range's bytes of the source are ``[start, end)`` with ``0 <= start <= end``; a record
    saying otherwise describes no part of any file and must not pass ``inspect``."""
    copy = tmp_path / "pack"
    shutil.copytree(pack, copy)
    meta = json.loads((copy / "meta.json").read_text())
    meta["ranges"] = {"train": {"documents": [0, 3], "tokens": [0, meta["n_tokens"]], "source_bytes": span}}
    _reseal(meta)
    (copy / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    code, output = run("inspect", str(copy))
    assert code == 2, output
    assert "source_bytes" in output and "meta.json" in output
