"""A sharded dataset's ``dataset.json`` must say what its shards' own records say (ranges,
counts, cut, source, padding id, id type), and its whole-stream checksum is checked before an
export copies it: a record edited with a recomputed seal (anyone can recompute one) is refused
wherever the dataset is opened, inspected, merged or exported."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import tokpack
from tokpack.cli import app
from tokpack.errors import IntegrityError
from tokpack.store import ShardedDataset, write_dataset
from tokpack.store.dataset import DatasetRecord
from tokpack.store.format import DocumentCut, Source, Span
from tokpack.store.writer import PackWriter
from tokpack.vocab.identity import VocabIdentity

N_VOCAB = 300
PAD = N_VOCAB - 1
VOCABULARY = VocabIdentity(scheme="list", sha256="1" * 64, n_vocab=N_VOCAB)
SOURCE = Source(name="corpus.txt", sha256="2" * 64, n_bytes=4000)
CUT = DocumentCut(rule="newline", document_bytes=64)


def write_shard(folder: Path, seed: int, ranges: dict[str, int]) -> str:
    """A shard as a text job writes it: the corpus's source and cut, its part of each range
    (``ranges``: documents of each, in order) and its count of characters."""
    rng = np.random.default_rng(seed)
    with PackWriter(folder, vocabulary=VOCABULARY) as writer:
        spans = {}
        for name, count in ranges.items():
            first = (writer.n_docs, writer.n_tokens)
            writer.add_documents([rng.integers(0, PAD, size=int(rng.integers(1, 40))) for _ in range(count)])
            spans[name] = Span(documents=(first[0], writer.n_docs), tokens=(first[1], writer.n_tokens))
        writer.commit(source=SOURCE, cut=CUT, ranges=spans, counts={"characters": 100 * seed}, pad_id=PAD)
    return folder.name


def make_dataset(folder: Path) -> Path:
    """Three shards: training data, then the train/validation boundary inside the last shard."""
    names = [write_shard(folder / "shard-00000", 1, {"train": 12}), write_shard(folder / "shard-00001", 2, {"train": 12}),
             write_shard(folder / "shard-00002", 3, {"train": 4, "validation": 8})]
    write_dataset(folder, names, source=SOURCE, cut=CUT)
    return folder


def run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def reseal(path: Path, **changes: object) -> None:
    record = DatasetRecord.model_validate_json(path.read_text())
    path.write_text(record.model_copy(update=changes).sealed().to_json())


def _validation_made_training(record: DatasetRecord, dataset: Path) -> dict[str, object]:
    """5 validation documents made training data, both ranges on document starts."""
    validation = record.ranges["validation"]
    moved_to = validation.documents[0] + 5
    token = int(ShardedDataset(dataset).starts[moved_to])
    return {"ranges": {"train": Span(documents=(0, moved_to), tokens=(0, token)),
                       "validation": Span(documents=(moved_to, validation.documents[1]), tokens=(token, validation.tokens[1]))}}


def _range_dropped(record: DatasetRecord, dataset: Path) -> dict[str, object]:
    return {"ranges": {"train": record.ranges["train"]}}


def _counts(record: DatasetRecord, dataset: Path) -> dict[str, object]:
    return {"counts": {"characters": 1}}


def _cut(record: DatasetRecord, dataset: Path) -> dict[str, object]:
    return {"cut": DocumentCut(rule="newline", document_bytes=4096)}


def _source(record: DatasetRecord, dataset: Path) -> dict[str, object]:
    return {"source": Source(name="other.txt", sha256="3" * 64, n_bytes=4000)}


@pytest.mark.parametrize("edit, expected", [
    (_validation_made_training, "ranges differ from what its shards record"),
    (_range_dropped, "ranges differ from what its shards record"),
    (_counts, "counts differ from what its shards record"),
    (_cut, "cut differs from what its shards record"),
    (_source, "source differs from what its shards record"),
])
def test_a_resealed_dataset_record_must_say_what_its_shards_say(tmp_path: Path, edit, expected: str) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(tmp_path / "ds")
    reseal(dataset / "dataset.json", **edit(DatasetRecord.model_validate_json((dataset / "dataset.json").read_text()), dataset))
    for verify in (None, True, False):
        with pytest.raises(IntegrityError, match=expected):
            ShardedDataset(dataset, verify=verify)
    for command in (["inspect", dataset], ["inspect", dataset, "--no-verify"], ["merge", dataset, tmp_path / "merged"],
                    ["export", dataset, tmp_path / "out", "--format", "nanogpt"]):
        code, output = run(*command)
        assert code == 2 and expected in output and "dataset.json" in output, (command, output)
        assert len(output.strip().splitlines()) == 1, output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_write_dataset_refuses_a_cut_or_source_its_shards_do_not_record(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    names = [write_shard(folder / "shard-00000", 1, {"train": 3}), write_shard(folder / "shard-00001", 2, {"train": 3})]
    with pytest.raises(IntegrityError, match="cut differs from what its shards record"):
        write_dataset(folder, names, source=SOURCE, cut=DocumentCut(rule="game"))
    with pytest.raises(IntegrityError, match="source differs from what its shards record"):
        write_dataset(folder, names, source=Source(name="x", sha256="0" * 64, n_bytes=0), cut=CUT)
    assert not (folder / "dataset.json").exists()


def test_an_export_never_copies_a_forged_stream_checksum(tmp_path: Path) -> None:
    """``dataset.json`` re-sealed with another stream's SHA-256 is not copied into an export's
    sidecar (``source_tokens_sha256``), where an import would "match" the forged value."""
    dataset = make_dataset(tmp_path / "ds")
    reseal(dataset / "dataset.json", tokens_sha256="4" * 64)
    for fmt in ("nanogpt", "megatron", "hf"):
        code, output = run("export", dataset, tmp_path / f"out-{fmt}", "--format", fmt)
        assert code == 2 and re.search(r"dataset\.json: the stream's checksums differ from the record", output), output
        with pytest.raises(IntegrityError, match="the stream's checksums differ"):
            tokpack.export(ShardedDataset(dataset, verify=False), fmt, tmp_path / f"api-{fmt}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_a_dataset_verified_once_is_exported_without_hashing_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole stream is hashed when the dataset is written (or verified) and stamped then: an
    export of the unchanged dataset reads each id once, to write it."""
    from tokpack.store import dataset as dataset_module

    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "cache"))
    dataset = make_dataset(tmp_path / "ds")
    calls = []
    monkeypatch.setattr(dataset_module, "stream_hashes", lambda *a, **k: calls.append(1) or ("", ""))
    tokpack.export(dataset, "nanogpt", tmp_path / "out")
    assert not calls


@pytest.mark.parametrize("fmt", ["megatron", "nanogpt"])
def test_an_exported_datasets_ids_are_held_to_its_sealed_record(tmp_path: Path, fmt: str) -> None:
    """An export of a whole dataset carries ``dataset.json`` as sealed: one id changed in its
    files, with the sidecar's file checksum recomputed, is not the dataset's stream, for
    ``inspect`` and ``import``."""
    import hashlib
    import json

    dataset = make_dataset(tmp_path / "ds")
    out = tmp_path / "out"
    assert run("export", dataset, out, "--format", fmt)[0] == 0
    sidecar_path = out / "tokpack-export.json" if fmt == "nanogpt" else tmp_path / "out.tokpack.json"
    sidecar = json.loads(sidecar_path.read_text())
    name = next(file for file in sidecar["parts"]["train"]["files"] if file.endswith(".bin"))
    data = sidecar_path.parent / name
    ids = np.fromfile(data, dtype=np.uint16)
    ids[5] = (ids[5] + 1) % PAD
    ids.tofile(data)
    sidecar["files_sha256"][name] = hashlib.sha256(data.read_bytes()).hexdigest()
    sidecar_path.write_text(json.dumps(sidecar))
    for command in (("inspect", out), ("import", out, tmp_path / "back")):
        code, output = run(*command)
        assert code == 2 and "not the stream of the exported pack" in output, output
    assert not (tmp_path / "back").exists()
