"""A pack's or dataset's record edited by hand and resealed (anyone can recompute a seal) is
cross-checked against what it describes: the carried vocabulary, the source bytes, the padding id,
the ranges; refused by ``inspect``, ``export`` and the readers, never served."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.errors import InputError, IntegrityError
from tokpack.serve import EvalBatches
from tokpack.serve.memory import pack_of_documents
from tokpack.store import open_tokens
from tokpack.store.dataset import shard_name, write_dataset
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


def _forge(record: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit a sealed record and recompute its seal, as anyone can (the seal has no key)."""
    fields = json.loads(record.read_text())
    edit(fields)
    fields.pop("seal", None)
    seal = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    record.write_text(json.dumps(fields | {"seal": seal}, indent=2, sort_keys=True) + "\n")


def test_a_forged_padding_id_outside_the_vocabulary_is_refused_not_an_overflow(tmp_path: Path) -> None:
    forged = pack_of_documents([list(range(1, 40)), [4, 5, 6] * 10], n_vocab=50, pad_id=0,
                               directory=tmp_path / "pack", train_documents=1)
    _forge(forged / "meta.json", lambda fields: fields.update(pad_id=100000))
    for open_it in (lambda: EvalBatches(forged, length=4, batch_size=2).batch(0),
                    lambda: open_tokens(forged, verify=True)):
        with pytest.raises((InputError, IntegrityError), match="pad_id 100000"):
            open_it()


def _dataset(folder: Path) -> Path:
    for rank, documents in enumerate(([[1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13]])):
        pack_of_documents(documents, n_vocab=20, pad_id=0, directory=folder / shard_name(rank))
    write_dataset(folder, [shard_name(0), shard_name(1)], source=Source(name="x", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="list"))
    return folder


def test_a_forged_dataset_range_past_the_end_is_refused_not_an_index_error(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path / "dataset")
    assert open_tokens(dataset, verify=True).meta.n_tokens == 13

    def past_the_end(fields: dict[str, Any]) -> None:
        fields["ranges"]["validation"] = {"documents": [3, 9], "tokens": [11, 500], "source_bytes": None}

    _forge(dataset / "dataset.json", past_the_end)
    with pytest.raises((InputError, IntegrityError), match="validation"):
        EvalBatches(dataset, length=2, batch_size=1).batch(0)
