"""A pack's record must describe a stream its readers can serve as it says, whoever sealed it
(anyone can recompute a seal): its splits never share a document, and its id type is the one
its vocabulary needs."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.serve import PackedBatches
from tokpack.serve.memory import pack_of_documents
from tokpack.store import Pack, ShardedDataset, write_dataset
from tokpack.store.dataset import DatasetRecord
from tokpack.store.format import DocumentCut, PackMeta, Source, Span
from tokpack.vocab.identity import VocabIdentity

DOCUMENTS = [[1 + (i * 7 + j) % 90 for j in range(1 + i % 5)] for i in range(40)]


def run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def reseal(path: Path, **changes: object) -> None:
    meta = PackMeta.model_validate_json(path.read_text())
    path.write_text(meta.model_copy(update=changes).sealed().to_json())


def refused(pack: Path, expected: str) -> None:
    for verify in (None, True, False):
        with pytest.raises(InputError, match=re.escape(expected)):
            Pack(pack, verify=verify)
    with pytest.raises(InputError, match=re.escape(expected)):
        PackedBatches(pack, layout="stream", length=4, global_batch=2, seed=0)
    code, output = run("inspect", pack)
    assert code == 2 and expected in output and "meta.json" in output and len(output.strip().splitlines()) == 1, output


def test_a_resealed_train_range_overlapping_validation_is_refused(tmp_path: Path) -> None:
    """``train`` moved to end 4 documents into ``validation`` (both on document starts) and
    re-sealed would have those documents trained on and evaluated on: refused on open."""
    pack = pack_of_documents(DOCUMENTS, n_vocab=100, pad_id=0, directory=tmp_path / "pack", train_documents=32)
    starts = Pack(pack).starts
    reseal(pack / "meta.json", ranges={**PackMeta.model_validate_json((pack / "meta.json").read_text()).ranges,
                                       "train": Span(documents=(0, 36), tokens=(0, int(starts[36])))})
    refused(pack, "ranges 'train' (documents 0-36) and 'validation' (documents 32-40) overlap")


def test_a_resealed_dataset_with_overlapping_splits_is_refused(tmp_path: Path) -> None:
    first = pack_of_documents(DOCUMENTS[:20], n_vocab=100, pad_id=0, directory=tmp_path / "ds" / "shard-00000")
    second = pack_of_documents(DOCUMENTS[20:], n_vocab=100, pad_id=0, directory=tmp_path / "ds" / "shard-00001",
                               train_documents=12)
    write_dataset(tmp_path / "ds", [first.name, second.name], source=Source(name="t", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="list"))
    record = DatasetRecord.model_validate_json((tmp_path / "ds" / "dataset.json").read_text())
    starts = ShardedDataset(tmp_path / "ds").starts
    forged = {**record.ranges, "train": Span(documents=(0, 35), tokens=(0, int(starts[35])))}
    (tmp_path / "ds" / "dataset.json").write_text(record.model_copy(update={"ranges": forged}).sealed().to_json())
    with pytest.raises(InputError, match="ranges 'train' .* and 'validation' .* overlap"):
        ShardedDataset(tmp_path / "ds")


def test_a_resealed_id_type_too_narrow_for_the_vocabulary_is_refused(tmp_path: Path) -> None:
    """A record of 100,277 ids (cl100k's size) re-sealed as ``uint16`` is refused: ``uint16``
    holds no id above 65,535."""
    pack = pack_of_documents(DOCUMENTS, n_vocab=100, pad_id=0, directory=tmp_path / "pack")
    wide = VocabIdentity(scheme="list", sha256=hashlib.sha256(b"list:100277").hexdigest(), n_vocab=100_277)
    reseal(pack / "meta.json", vocabulary=wide)
    refused(pack, "dtype uint16 is not the id type of a vocabulary of 100,277 ids (uint32)")


def test_a_resealed_id_type_wider_than_the_writer_chose_is_refused(tmp_path: Path) -> None:
    pack = pack_of_documents(DOCUMENTS, n_vocab=100, pad_id=0, directory=tmp_path / "pack")
    reseal(pack / "meta.json", dtype="uint32")
    refused(pack, "dtype uint32 is not the id type of a vocabulary of 100 ids (uint16)")
