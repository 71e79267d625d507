"""Nothing is exported, imported, inspected as verified, merged or served that was not checked
against its record: export verifies its source, exports record and check their files' checksums,
every format imports back byte-identical, a refused import leaves nothing, a dataset's record is
checked against its shards', a remote check reads the remote, and bad export options are refused.
Through the command line, as a user runs them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_formats_interop import s3_options  # noqa: F401  (moto's S3 server, shared)
from typer.testing import CliRunner

import tokpack
from tokpack.cli import app
from tokpack.errors import InputError, IntegrityError
from tokpack.serve.memory import pack_of_documents
from tokpack.store import Pack, ShardedDataset, write_dataset
from tokpack.store.dataset import DatasetRecord
from tokpack.store.format import DocumentCut, PackMeta, Source

N_VOCAB = 500
PAD = N_VOCAB - 1
FORMATS = ("megatron", "nanogpt", "litdata", "mds", "hf")


def _documents(seed: int, count: int) -> list[list[int]]:
    """Random documents of ids below the padding id (what an encoder emits)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, PAD - 1, size=int(rng.integers(1, 60))).tolist() for _ in range(count)]


def make_pack(folder: Path, seed: int = 0, count: int = 40) -> Path:
    """A pack with a train and a validation range and a padding id."""
    return pack_of_documents(_documents(seed, count), n_vocab=N_VOCAB, pad_id=PAD, directory=folder,
                             train_documents=count - 8)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def reseal(path: Path, model: type, **changes: object) -> None:
    """Edit a record and recompute its seal, as anyone can (the seal has no key)."""
    record = model.model_validate_json(path.read_text())
    path.write_text(record.model_copy(update=changes).sealed().to_json())


def flip(path: Path, byte: int, mask: int = 1) -> None:
    data = bytearray(path.read_bytes())
    data[byte] ^= mask
    path.write_bytes(bytes(data))


def same_pack(a: Path, b: Path) -> bool:
    return all((a / f).read_bytes() == (b / f).read_bytes() for f in ("tokens.npy", "starts.npy"))


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pack(tmp_path_factory.mktemp("trust") / "pack")


# --- export and import: ranges kept apart, every format back byte-identical ----------------------

def test_megatron_export_writes_each_range_to_its_own_prefix(pack: Path, tmp_path: Path) -> None:
    code, output = run("export", pack, tmp_path / "text_document", "--format", "megatron")
    assert code == 0, output
    assert "train (32 documents), validation (8 documents)" in output
    opened = Pack(pack)
    for prefix, name in (("text_document", "train"), ("text_document_validation", "validation")):
        t0, t1 = opened.meta.ranges[name].tokens
        assert np.array_equal(np.fromfile(tmp_path / f"{prefix}.bin", dtype="<u2"), opened.tokens[t0:t1])
    assert not (tmp_path / "text_document_train.bin").exists()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("append_eod", [False, True])
def test_every_format_imports_back_byte_identical(pack: Path, tmp_path: Path, fmt: str, append_eod: bool) -> None:
    out = tmp_path / "exported"
    code, output = run("export", pack, out, "--format", fmt, "--rows-per-file", "3", *(["--append-eod"] if append_eod else []))
    assert code == 0, output
    code, output = run("import", out, tmp_path / "back")
    assert code == 0, output
    assert same_pack(pack, tmp_path / "back")
    back, original = Pack(tmp_path / "back"), Pack(pack)
    assert back.meta.ranges == original.meta.ranges and back.meta.pad_id == original.meta.pad_id
    assert back.vocabulary == original.vocabulary


def test_mds_and_litdata_honour_rows_per_file(pack: Path, tmp_path: Path) -> None:
    for fmt, key in (("mds", "samples"), ("litdata", "chunk_size")):
        code, output = run("export", pack, tmp_path / fmt, "--format", fmt, "--rows-per-file", "5")
        assert code == 0, output
        for name, count in (("train", 32), ("validation", 8)):
            entries = json.loads((tmp_path / fmt / name / "index.json").read_text())
            rows = [entry[key] for entry in entries["shards" if fmt == "mds" else "chunks"]]
            assert max(rows) == 5 and sum(rows) == count


@pytest.mark.parametrize("rows", ["0", "-3", "many"])
def test_an_export_refuses_rows_per_file_below_one(pack: Path, tmp_path: Path, rows: str) -> None:
    # A real process with a timeout: --rows-per-file 0 must not write empty files forever.
    command = [sys.executable, "-m", "tokpack.cli", "export", str(pack), str(tmp_path / "out"), "--format", "hf",
               "--rows-per-file", rows]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 2, done.stderr
    assert "--rows-per-file" in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
    if rows != "many":
        with pytest.raises(InputError, match="rows_per_file"):
            tokpack.export(pack, "mds", tmp_path / "api", rows_per_file=int(rows))
        assert not (tmp_path / "api").exists()


# --- export verifies its source -------------------------------------------------------------------

def _flip_an_id(copy: Path) -> None:
    flip(copy / "tokens.npy", 128 + 2 * 7)  # the 8th id's low bit: still inside the vocabulary


def _flip_a_start(copy: Path) -> None:
    flip(copy / "starts.npy", 128 + 8 * 20)  # document 20 starts one id later or earlier: still increasing


def _id_past_vocabulary(copy: Path) -> None:
    tokens = np.load(copy / "tokens.npy")
    tokens[3] = N_VOCAB + 1
    np.save(copy / "tokens.npy", tokens)
    reseal(copy / "meta.json", PackMeta, tokens_sha256=hashlib.sha256(tokens.astype("<u2").tobytes()).hexdigest())


def _padding_in_stream(copy: Path) -> None:
    tokens = np.load(copy / "tokens.npy")
    tokens[3] = PAD
    np.save(copy / "tokens.npy", tokens)
    reseal(copy / "meta.json", PackMeta, tokens_sha256=hashlib.sha256(tokens.astype("<u2").tobytes()).hexdigest())


TAMPERINGS = {"flipped id": _flip_an_id, "flipped start": _flip_a_start, "id past the vocabulary": _id_past_vocabulary,
              "padding id in the stream": _padding_in_stream}


@pytest.mark.parametrize("tamper", TAMPERINGS)
def test_export_refuses_a_pack_that_does_not_match_its_record(pack: Path, tmp_path: Path, tamper: str) -> None:
    copy = tmp_path / "pack"
    shutil.copytree(pack, copy)
    Pack(copy)  # verified and stamped while intact: the stamp must not vouch for what changed after
    TAMPERINGS[tamper](copy)
    for fmt in FORMATS:
        code, output = run("export", copy, tmp_path / f"out-{fmt}", "--format", fmt)
        assert code == 2, (fmt, output)
        assert str(copy) in output and len(output.strip().splitlines()) == 1
        with pytest.raises(IntegrityError):
            tokpack.export(Pack(copy, verify=False), fmt, tmp_path / f"api-{fmt}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]  # nothing written


def make_dataset(folder: Path) -> Path:
    """A sharded dataset of two packs (the validation range in the second)."""
    first = pack_of_documents(_documents(1, 20), n_vocab=N_VOCAB, pad_id=PAD, directory=folder / "shard-00000")
    second = pack_of_documents(_documents(2, 20), n_vocab=N_VOCAB, pad_id=PAD, directory=folder / "shard-00001",
                               train_documents=12)
    write_dataset(folder, [first.name, second.name], source=Source(name="t", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="list"))
    return folder


def test_export_refuses_a_dataset_with_an_altered_shard(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "ds")
    ShardedDataset(dataset, verify=True)
    flip(dataset / "shard-00001" / "tokens.npy", 128 + 2 * 30)
    for fmt in FORMATS:
        code, output = run("export", dataset, tmp_path / f"out-{fmt}", "--format", fmt)
        assert code == 2 and "shard-00001" in output, (fmt, output)
        with pytest.raises(IntegrityError):
            tokpack.export(ShardedDataset(dataset, verify=False), fmt, tmp_path / f"api-{fmt}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


# --- inspecting an export checks its files ----------------------------------------------------------

@pytest.mark.parametrize("fmt, data_file", [("nanogpt", "out/train.bin"), ("megatron", "out.bin"), ("hf", "out/train/part-00000.parquet"),
                                            ("litdata", "out/train/chunk-0-0.bin"), ("mds", "out/train/shard.00000.mds")])
def test_inspect_of_an_altered_export_fails(pack: Path, tmp_path: Path, fmt: str, data_file: str) -> None:
    assert run("export", pack, tmp_path / "out", "--format", fmt)[0] == 0
    code, output = run("inspect", tmp_path / "out")
    assert code == 0 and "every file's SHA-256 matches the export's sidecar" in output, output
    assert "checksums verified" not in output
    flip(tmp_path / data_file, (tmp_path / data_file).stat().st_size - 2)  # an id's low bit: still in the vocabulary
    code, output = run("inspect", tmp_path / "out")
    assert code == 2 and "SHA-256 differs from the export's sidecar" in output and data_file.split("/")[-1] in output


# --- a refused import leaves nothing -------------------------------------------------------------

def test_a_refused_import_leaves_nothing_behind(pack: Path, tmp_path: Path) -> None:
    assert run("export", pack, tmp_path / "m", "--format", "megatron")[0] == 0
    sidecar = tmp_path / "m.tokpack.json"
    record = json.loads(sidecar.read_text())
    del record["files_sha256"]  # no file checksums: only the stream's checksum catches it
    sidecar.write_text(json.dumps(record))
    flip(tmp_path / "m.bin", 2 * 5)
    code, output = run("import", tmp_path / "m", tmp_path / "back")
    assert code == 2 and "not the stream of the exported pack" in output, output
    assert not (tmp_path / "back").exists() and not list(tmp_path.glob(".back*"))
    code, output = run("import", tmp_path / "m", tmp_path / "back")  # and again: nothing in the way
    assert code == 2 and "not the stream of the exported pack" in output


# --- a dataset's record is checked against its shards' -----------------------------------------------

def _pad_is_a_real_token(record: Path) -> None:
    reseal(record, DatasetRecord, pad_id=32)


def _validation_inside_a_document(record: Path) -> None:
    meta = DatasetRecord.model_validate_json(record.read_text())
    span = meta.ranges["validation"]
    moved = span.model_copy(update={"tokens": (span.tokens[0] + 7, span.tokens[1])})  # 7 ids into its first document
    reseal(record, DatasetRecord, ranges={**meta.ranges, "validation": moved})


@pytest.mark.parametrize("edit", [_pad_is_a_real_token, _validation_inside_a_document])
def test_an_edited_dataset_record_is_refused_everywhere(tmp_path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(tmp_path / "ds")
    edit(dataset / "dataset.json")
    expected = "pad_id 32 differs from shard" if edit is _pad_is_a_real_token else "range 'validation' says ids"
    for verify in (None, True, False):
        with pytest.raises(IntegrityError, match=expected):
            ShardedDataset(dataset, verify=verify)
    for command in (["inspect", dataset], ["merge", dataset, tmp_path / "merged"],
                    ["export", dataset, tmp_path / "out", "--format", "hf"]):
        code, output = run(*command)
        assert code == 2 and expected in output and "dataset.json" in output, (command, output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


# --- a remote check reads the remote ---------------------------------------------------------------

def test_inspect_of_a_url_checks_the_remote_not_the_cache(tmp_path: Path, s3_options) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    import s3fs

    from tokpack.store.remote import upload_dataset

    dataset = make_dataset(tmp_path / "ds")
    url = "s3://tokpack/trust-remote"
    upload_dataset(dataset, url, storage_options=s3_options)
    options = json.dumps(s3_options)
    code, output = run("inspect", url, "--storage-options", options, "--cache-dir", tmp_path / "cache")
    assert code == 0 and "downloaded again" in output, output
    assert list((tmp_path / "cache").rglob("tokens.npy"))  # verified copies are cached
    data = bytearray((dataset / "shard-00001" / "tokens.npy").read_bytes())
    data[-2] ^= 1
    s3fs.S3FileSystem(**s3_options).pipe("tokpack/trust-remote/shard-00001/tokens.npy", bytes(data))
    code, output = run("inspect", url, "--storage-options", options, "--cache-dir", tmp_path / "cache")
    assert code == 2 and "shard-00001/tokens.npy: SHA-256 or size differs" in output, output


@pytest.mark.parametrize("fmt, data_file", [("nanogpt", "train.bin"), ("mds", "train/shard.00000.mds"), ("megatron", "")])
def test_batches_are_never_served_from_an_altered_export(pack: Path, tmp_path: Path, fmt: str, data_file: str) -> None:
    from tokpack.serve import TokenBatches

    out = tmp_path / "out"
    tokpack.export(pack, fmt, out)
    TokenBatches(str(out), batch=2, length=8).ids(0)  # verified against the sidecar, then stamped
    target = tmp_path / "out.bin" if fmt == "megatron" else out / data_file
    flip(target, target.stat().st_size - 2)
    with pytest.raises(IntegrityError, match="SHA-256 differs from the export's sidecar"):
        TokenBatches(str(out), batch=2, length=8)
