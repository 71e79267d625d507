"""Interop: every export loaded by the framework's own library; every import round-trips to
byte-identical arrays; datatrove's own writer read by tokpack; packs and datasets on S3 (moto)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokpack import prepare, sample_corpus
from tokpack.cli import app
from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.serve import TokenBatches, Windows
from tokpack.serve.memory import pack_of_documents
from tokpack.store import Pack
from tokpack.store.exporting import export
from tokpack.store.formats import WRITTEN
from tokpack.store.formats.megatron import MegatronDataset
from tokpack.store.formats.nanogpt import NanoGptData
from tokpack.store.importing import import_pack

from conftest import REPO

DOCUMENT_BYTES = 2048


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The bundled Polish sample (real text), with a train/validation split, as a pack."""
    cache = tmp_path_factory.mktemp("interop")
    return prepare(sample_corpus(), cache_dir=cache, vocab_size=700, document_bytes=DOCUMENT_BYTES)


@pytest.fixture(scope="module")
def pack(corpus) -> Pack:  # type: ignore[no-untyped-def]
    return Pack(corpus.tokens_dir, verify=True)


def documents_of(pack: Pack, d0: int = 0, d1: int | None = None) -> list[np.ndarray]:
    return [np.asarray(pack.document(i)) for i in range(d0, pack.n_docs if d1 is None else d1)]


def same_arrays(a: Path, b: Path) -> bool:
    return all((a / f).read_bytes() == (b / f).read_bytes() for f in ("tokens.npy", "starts.npy"))


# --- Megatron --------------------------------------------------------------------------------

@pytest.mark.parametrize("append_eod", [False, True])
def test_megatron_indexed_dataset_returns_the_documents(pack: Pack, tmp_path: Path, append_eod: bool) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    prefix = tmp_path / "polish_text_document"
    export(pack, "megatron", prefix, append_eod=append_eod)
    eod = pack.meta.pad_id
    assert set(pack.meta.ranges) == {"train", "validation"}  # each range its own prefix: PREFIX, PREFIX_validation
    for name, path in (("train", prefix), ("validation", prefix.with_name(prefix.name + "_validation"))):
        dataset = IndexedDataset(str(path))
        d0, d1 = pack.meta.ranges[name].documents
        expected = [np.append(d, eod) if append_eod else d for d in documents_of(pack, d0, d1)]
        assert len(dataset) == len(expected) == d1 - d0
        for index in (0, 1, len(expected) // 2, len(expected) - 1):
            assert np.array_equal(dataset[index], expected[index])
        assert all(np.array_equal(dataset[i], e) for i, e in enumerate(expected))
        assert dataset.index.dtype == np.uint16
        assert list(dataset.document_indices) == list(range(d1 - d0 + 1))
    # Read in place by tokpack: the same ids, as Megatron trains on them, every range in order.
    opened = MegatronDataset(prefix, verify=True)
    expected = [np.append(d, eod) if append_eod else d for d in documents_of(pack)]
    assert opened.vocabulary == pack.vocabulary and opened.n_docs == pack.n_docs
    assert np.array_equal(opened.take(np.arange(opened.n_tokens)), np.concatenate(expected))


def test_megatron_files_are_byte_identical_to_megatron_cores_own_builder(pack: Pack, tmp_path: Path) -> None:
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder

    eod = pack.meta.pad_id
    builder = IndexedDatasetBuilder(str(tmp_path / "theirs.bin"), dtype=DType.optimal_dtype(pack.vocabulary.n_vocab))
    for document in documents_of(pack, *pack.meta.ranges["train"].documents):  # preprocess_data.py --append-eod
        builder.add_document(np.append(document, eod), [len(document) + 1])
    builder.finalize(str(tmp_path / "theirs.idx"))
    export(pack, "megatron", tmp_path / "ours", append_eod=True)
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"ours{suffix}").read_bytes() == (tmp_path / f"theirs{suffix}").read_bytes()


def test_megatron_wide_vocabulary_is_int32_and_megatron_reads_it(tmp_path: Path) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    documents = [[70_000, 1, 65_535], [3], [69_999, 65_536]]
    wide = Pack(pack_of_documents(documents, n_vocab=70_001, directory=tmp_path / "wide", pad_id=2))
    export(wide, "megatron", tmp_path / "wide_out", append_eod=True)
    dataset = IndexedDataset(str(tmp_path / "wide_out"))
    assert dataset.index.dtype == np.int32
    assert [dataset[i].tolist() for i in range(3)] == [d + [2] for d in documents]


def test_megatron_header_is_checked_field_by_field(pack: Pack, tmp_path: Path) -> None:
    prefix = tmp_path / "m"
    export(pack, "megatron", prefix)
    idx = prefix.with_name("m.idx")
    good = idx.read_bytes()
    for offset, value, message in ((0, b"X", "magic"), (9, b"\x02", "version 2"), (17, b"\x06", "dtype code 6")):
        idx.write_bytes(good[:offset] + value + good[offset + 1 :])
        with pytest.raises(InputError, match=message):
            MegatronDataset(prefix)
    idx.write_bytes(good[:-8])
    with pytest.raises(IntegrityError, match="bytes, but its header"):
        MegatronDataset(prefix)
    idx.write_bytes(good)
    prefix.with_name("m.bin").write_bytes(prefix.with_name("m.bin").read_bytes()[:-2])
    with pytest.raises(IntegrityError, match="m.bin"):
        MegatronDataset(prefix)


def test_foreign_files_need_their_vocabulary_and_refuse_another(pack: Pack, corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prefix = tmp_path / "m"
    export(pack, "megatron", prefix)
    prefix.with_name("m.tokpack.json").rename(tmp_path / "sidecar.json")
    with pytest.raises(InputError, match="name the tokenizer"):
        MegatronDataset(prefix)
    assert MegatronDataset(prefix, tokenizer=corpus.vocabulary_path).vocabulary == pack.vocabulary
    (tmp_path / "sidecar.json").rename(prefix.with_name("m.tokpack.json"))
    other = prepare(sample_corpus(), cache_dir=tmp_path / "other", vocab_size=300, document_bytes=DOCUMENT_BYTES)
    with pytest.raises(VocabularyMismatch):
        MegatronDataset(prefix, tokenizer=other.vocabulary_path)


# --- nanoGPT ---------------------------------------------------------------------------------

def test_nanogpt_files_are_the_ids_with_end_of_text_after_each_document(pack: Pack, tmp_path: Path) -> None:
    out = tmp_path / "nanogpt"
    export(pack, "nanogpt", out)
    eot = pack.meta.pad_id
    for name, file in (("train", "train.bin"), ("validation", "val.bin")):
        d0, d1 = pack.meta.ranges[name].documents
        expected = np.concatenate([np.append(d, eot) for d in documents_of(pack, d0, d1)])
        assert np.array_equal(np.memmap(out / file, dtype=np.uint16, mode="r"), expected)
    source = NanoGptData(out, verify=True)
    assert source.meta.ranges["train"].documents == pack.meta.ranges["train"].documents


def test_nanogpt_refuses_a_vocabulary_past_uint16(tmp_path: Path) -> None:
    wide = Pack(pack_of_documents([[70_000]], n_vocab=70_001, directory=tmp_path / "wide", pad_id=2))
    with pytest.raises(InputError, match="uint16"):
        export(wide, "nanogpt", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- Hugging Face datasets --------------------------------------------------------------------

def test_datasets_loads_the_parquet_export_with_the_same_input_ids(pack: Pack, tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "hf"
    export(pack, "hf", out, rows_per_file=25)
    loaded = datasets.load_dataset("parquet", data_dir=str(out), cache_dir=str(tmp_path / "hf-cache"))
    assert set(loaded) == {"train", "validation"}
    for split in ("train", "validation"):
        d0, d1 = pack.meta.ranges[split].documents
        rows = loaded[split]
        assert rows["doc"] == list(range(d0, d1))
        assert [list(r) for r in rows["input_ids"]] == [d.tolist() for d in documents_of(pack, d0, d1)]


# --- litdata and MosaicML streaming ------------------------------------------------------------

def test_litdata_streaming_dataset_serves_the_ids_in_blocks(pack: Pack, tmp_path: Path) -> None:
    from litdata import StreamingDataset
    from litdata.streaming.item_loader import TokensLoader

    out = tmp_path / "litdata"
    export(pack, "litdata", out, append_eod=True)
    eod, block = pack.meta.pad_id, 64
    for name in ("train", "validation"):
        d0, d1 = pack.meta.ranges[name].documents
        stream = np.concatenate([np.append(d, eod) for d in documents_of(pack, d0, d1)])
        index = json.loads((out / name / "index.json").read_text())
        expected, at = [], 0
        for chunk in index["chunks"]:  # TokensLoader drops each chunk's last dim % block ids
            whole = chunk["dim"] // block * block
            expected.append(stream[at : at + whole].reshape(-1, block))
            at += chunk["dim"]
        assert at == len(stream)
        dataset = StreamingDataset(str(out / name), item_loader=TokensLoader(block_size=block), shuffle=False,
                                   cache_dir=str(tmp_path / f"cache-{name}"))
        served = np.stack([np.asarray(dataset[i]) for i in range(len(dataset))])
        assert np.array_equal(served, np.concatenate(expected))


def _torchvision_built_for_another_torch() -> str | None:
    """Why torchvision cannot load here, when the reason is the one docs/interop.md names (a CUDA
    build of torchvision, as PyPI's Linux wheels are, beside a CPU build of torch); else ``None``."""
    import importlib.util
    import re

    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None or torch.version.cuda is not None:
        return None
    version = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    built = re.search(r"__version__ = '([^']*)'", version)
    if built is None or "+cu" not in built.group(1):
        return None
    return (f"torchvision {built.group(1)} is built for CUDA torch, torch here is {torch.__version__}: "
            "install the torchvision built for this torch (docs/interop.md, MosaicML)")


def _import_mosaic_streaming():  # type: ignore[no-untyped-def]
    """The real ``streaming`` (MosaicML), which imports torchvision on import. Only the mismatch
    docs/interop.md documents (a torchvision built for another torch) skips; any other failure fails."""
    try:
        import streaming
    except (ImportError, RuntimeError, OSError) as error:
        reason = _torchvision_built_for_another_torch()
        if reason is None:
            raise
        pytest.skip(f"{reason} ({type(error).__name__}: {error})")
    return streaming


def test_mosaic_streaming_dataset_yields_the_documents(pack: Pack, tmp_path: Path) -> None:
    streaming = _import_mosaic_streaming()
    out = tmp_path / "mds"
    export(pack, "mds", out)
    for name in ("train", "validation"):
        d0, d1 = pack.meta.ranges[name].documents
        dataset = streaming.StreamingDataset(local=str(out), split=name, shuffle=False, batch_size=1)
        served = [np.asarray(dataset[i]["tokens"]) for i in range(dataset.num_samples)]
        expected = documents_of(pack, d0, d1)
        assert len(served) == len(expected)
        assert all(a.dtype == np.uint16 and np.array_equal(a, b) for a, b in zip(served, expected))
        streaming.base.util.clean_stale_shared_memory()


def test_mds_shards_split_at_the_size_limit(pack: Pack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    streaming = _import_mosaic_streaming()
    from tokpack.store.formats import mds

    monkeypatch.setattr(mds, "SHARD_BYTES", 20_000)
    export(pack, "mds", tmp_path / "mds", range_name="train")
    assert len(list((tmp_path / "mds" / "train").glob("shard.*.mds"))) > 3
    dataset = streaming.StreamingDataset(local=str(tmp_path / "mds"), split="train", shuffle=False, batch_size=1)
    served = np.concatenate([dataset[i]["tokens"] for i in range(dataset.num_samples)])
    span = pack.meta.ranges["train"].tokens
    assert np.array_equal(served, np.asarray(pack.tokens[span[0] : span[1]]))
    streaming.base.util.clean_stale_shared_memory()


# --- datatrove -------------------------------------------------------------------------------

def test_a_folder_written_by_datatrove_opens_with_the_same_ids(corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from datatrove.data import Document
    from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer
    from tokenizers import Tokenizer

    from tokpack import BpeTokenizer
    from tokpack.store import DatatroveFolder

    tokenizer = BpeTokenizer.load_saved(corpus.vocabulary_path)
    tokenizer_json = tmp_path / "tokenizer.json"
    tokenizer_json.write_text(tokenizer.to_tokenizer_json(), encoding="utf-8")
    texts = [t for t in sample_corpus().read_text(encoding="utf-8").split("\n\n") if t.strip()][:150]
    step = DocumentTokenizer(str(tmp_path / "dt"), tokenizer_name_or_path=str(tokenizer_json),
                             eos_token="<|endoftext|>", shuffle_documents=False, save_filename="polish")
    step.run(iter([Document(text=t, id=str(i)) for i, t in enumerate(texts)]), rank=0, world_size=1)
    assert list((tmp_path / "dt").glob("*.ds"))
    source = DatatroveFolder(tmp_path / "dt", tokenizer=tokenizer_json, verify=True)
    assert source.vocabulary == tokenizer.identity  # the tokenizer.json is the same vocabulary
    hf = Tokenizer.from_file(str(tokenizer_json))
    expected = [hf.encode(t, add_special_tokens=False).ids + [tokenizer.eot_id] for t in texts]
    assert [tokenizer.encode(t) + [tokenizer.eot_id] for t in texts] == expected
    assert source.n_docs == len(texts)
    assert np.array_equal(source.take(np.arange(source.n_tokens)), np.concatenate(expected))
    assert np.array_equal(source.starts, np.concatenate(([0], np.cumsum([len(e) for e in expected])[:-1])))
    stream = np.concatenate(expected)
    batches = TokenBatches(source, batch=3, length=50)
    modulus = len(stream) - 50 - 1
    for step in (0, 1, 17, 333):  # the schedule's rows: consecutive windows of the stream
        offsets = [(step * 3 * 50 + row * 50) % modulus for row in range(3)]
        assert np.array_equal(batches.ids(step), np.stack([stream[o : o + 51] for o in offsets]))
    assert batches.data_schedule()["vocabulary"]["sha256"] == tokenizer.identity.sha256
    with pytest.raises(ValueError, match="no padding id"):
        Windows(source, block=8)  # every id may be a real token: nothing to pad with
    meta = import_pack(tmp_path / "dt", tmp_path / "pack", tokenizer=tokenizer_json)
    assert meta.n_docs == len(texts) and np.array_equal(Pack(tmp_path / "pack").tokens, np.concatenate(expected))


# --- import ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt, append_eod", [("megatron", False), ("megatron", True), ("nanogpt", False)])
def test_every_import_round_trips_to_byte_identical_arrays(pack: Pack, tmp_path: Path, fmt: str, append_eod: bool) -> None:
    import tokpack

    out = tmp_path / "exported"
    tokpack.export(pack, fmt, out, append_eod=append_eod)
    meta = import_pack(out, tmp_path / "pack")
    assert same_arrays(pack.path, tmp_path / "pack")
    assert meta.ranges == pack.meta.ranges and meta.pad_id == pack.meta.pad_id and meta.vocabulary == pack.vocabulary
    assert meta.counts == pack.meta.counts and "characters" in meta.counts  # characters per token still known


def test_a_sharded_dataset_exports_as_its_stream(pack: Pack, corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tokpack.engines import prepare_sharded

    dataset = prepare_sharded(sample_corpus(), tmp_path / "ds", vocab=corpus.vocabulary_path, shards=3,
                              document_bytes=DOCUMENT_BYTES, processes=1)
    export(dataset, "megatron", tmp_path / "m")
    import_pack(tmp_path / "m", tmp_path / "back")
    assert same_arrays(pack.path, tmp_path / "back")


def test_exports_are_atomic_and_never_overwrite(pack: Pack, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    for fmt in ("nanogpt", "hf"):
        with pytest.raises(InputError, match="already exists"):
            export(pack, fmt, tmp_path / "taken")

    def boom(_: int) -> None:
        raise RuntimeError("interrupted")

    for fmt in WRITTEN:
        with pytest.raises(RuntimeError):
            export(pack, fmt, tmp_path / f"half-{fmt}", progress=boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # nothing half-written, no temporaries


# --- the command line ------------------------------------------------------------------------

def test_cli_exports_imports_and_inspects(pack: Pack, corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(pack.path), str(tmp_path / "m"), "--format", "megatron", "--append-eod"])
    assert result.exit_code == 0, result.output
    assert "--append-eod" in runner.invoke(app, ["export", "--help"]).output
    result = runner.invoke(app, ["import", str(tmp_path / "m.idx"), str(tmp_path / "back")])
    assert result.exit_code == 0, result.output
    assert same_arrays(pack.path, tmp_path / "back")
    result = runner.invoke(app, ["export", str(pack.path), str(tmp_path / "x"), "--format", "parquet"])
    assert result.exit_code == 2 and "--format must be one of megatron" in result.output
    assert "got 'parquet'" in result.output
    result = runner.invoke(app, ["import", str(tmp_path / "nothing"), str(tmp_path / "y")])
    assert result.exit_code == 2


# --- object storage (a real S3 endpoint: moto's server, spoken to by s3fs) -------------------------

@pytest.fixture(scope="module")
def s3_options():  # type: ignore[no-untyped-def]
    """A bucket on moto's S3 server on 127.0.0.1, and the fsspec options that reach it."""
    import s3fs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = {"key": "testing", "secret": "testing", "skip_instance_cache": True,
               "client_kwargs": {"endpoint_url": f"http://{host}:{port}", "region_name": "us-east-1"}}
    # moto, like S3, takes no location constraint for us-east-1, which s3fs always sends: create it plainly.
    s3fs.S3FileSystem(**options).call_s3("create_bucket", Bucket="tokpack")
    yield options
    server.stop()


@pytest.fixture(scope="module")
def sharded(corpus, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tokpack.engines import prepare_sharded

    return prepare_sharded(sample_corpus(), tmp_path_factory.mktemp("sharded") / "ds", vocab=corpus.vocabulary_path,
                           shards=4, document_bytes=DOCUMENT_BYTES, processes=1)


def test_a_dataset_on_s3_serves_the_same_batches_as_locally(sharded, s3_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import torch  # noqa: F401  (the loader below is PyTorch's)

    from tokpack.serve import Windows
    from tokpack.store.remote import open_remote, upload_dataset
    from tokpack.torch import WindowDataset, make_loader

    url = "s3://tokpack/served"
    upload_dataset(sharded.path, url, storage_options=s3_options)
    remote = open_remote(url, storage_options=s3_options, cache_dir=tmp_path / "cache")
    assert remote.meta == sharded.meta and np.array_equal(remote.starts, sharded.starts)
    assert not list((tmp_path / "cache").rglob("tokens.npy"))  # nothing fetched before it is touched
    local, served = TokenBatches(sharded, batch=4, length=100), TokenBatches(remote, batch=4, length=100)
    assert all(np.array_equal(local.ids(step), served.ids(step)) for step in range(0, 300, 7))
    assert local.data_schedule() == served.data_schedule()
    loaders = [make_loader(WindowDataset(Windows(source, block=256)), batch_size=8, seed=3) for source in (sharded, remote)]
    for (x, y), (rx, ry) in zip(*loaders):
        assert torch.equal(x, rx) and torch.equal(y, ry)
    remote.verify()


def test_a_tampered_remote_shard_is_refused(sharded, s3_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import s3fs

    from tokpack.store.remote import open_remote, upload_dataset

    url = "s3://tokpack/tampered"
    upload_dataset(sharded.path, url, storage_options=s3_options)
    fs = s3fs.S3FileSystem(**s3_options)
    name = sharded.meta.shards[2].name
    data = bytearray((sharded.path / name / "tokens.npy").read_bytes())
    data[-2:] = (int.from_bytes(data[-2:], "little") ^ 1).to_bytes(2, "little")
    fs.pipe(f"tokpack/tampered/{name}/tokens.npy", bytes(data))
    remote = open_remote(url, storage_options=s3_options, cache_dir=tmp_path / "cache")
    assert len(remote.shards[0].tokens)  # an untouched shard still serves
    with pytest.raises(IntegrityError, match=f"{name}/tokens.npy: SHA-256 or size differs"):
        _ = remote.shards[2].tokens
    with pytest.raises(IntegrityError):
        TokenBatches(remote, batch=64, length=100).ids(0)
    assert not (tmp_path / "cache" / remote.meta.seal[:32] / name / "tokens.npy").exists()  # nothing refused is kept
    meta = json.loads((sharded.path / name / "meta.json").read_text())
    meta["n_tokens"] += 1
    fs.pipe(f"tokpack/tampered/{name}/meta.json", json.dumps(meta).encode())
    with pytest.raises(ValueError, match="edited after it was written"):  # IntegrityError once the lead converts _schema
        open_remote(url, storage_options=s3_options, cache_dir=tmp_path / "cache2")


def test_a_cache_smaller_than_the_dataset_still_serves(sharded, s3_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tokpack.store.remote import open_remote, upload_dataset

    url = "s3://tokpack/small-cache"
    upload_dataset(sharded.path, url, storage_options=s3_options)
    largest = max((sharded.path / e.name / "tokens.npy").stat().st_size for e in sharded.meta.shards)
    total = sum((sharded.path / e.name / "tokens.npy").stat().st_size for e in sharded.meta.shards)
    remote = open_remote(url, storage_options=s3_options, cache_dir=tmp_path / "cache", cache_bytes=largest + 1)
    assert largest + 1 < total
    local, served = TokenBatches(sharded, batch=4, length=100), TokenBatches(remote, batch=4, length=100)
    for step in range(0, 400, 3):
        assert np.array_equal(local.ids(step), served.ids(step))
        on_disk = sum(p.stat().st_size for p in (tmp_path / "cache").rglob("tokens.npy"))
        assert on_disk <= largest + 1
    remote.verify()


def test_half_uploaded_datasets_never_open_and_exports_upload_the_sidecar_last(pack: Pack, sharded, s3_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import s3fs

    from tokpack.store.remote import open_remote, upload, upload_dataset

    fs = s3fs.S3FileSystem(**s3_options)
    for shard in sharded.meta.shards[:2]:  # an upload that stopped before the record
        upload(sharded.path / shard.name, f"s3://tokpack/half/{shard.name}", storage_options=s3_options)
    with pytest.raises(InputError, match="neither a pack"):
        open_remote("s3://tokpack/half", storage_options=s3_options, cache_dir=tmp_path / "c")
    upload_dataset(pack.path, "s3://tokpack/one-pack", storage_options=s3_options)
    with pytest.raises(InputError, match="never overwritten"):
        upload_dataset(pack.path, "s3://tokpack/one-pack", storage_options=s3_options)
    assert np.array_equal(open_remote("s3://tokpack/one-pack", storage_options=s3_options, cache_dir=tmp_path / "c",
                                      verify=True).take(np.arange(pack.n_tokens)), pack.tokens)
    export(pack, "megatron", "s3://tokpack/exports/polish", append_eod=True, storage_options=s3_options)
    export(pack, "megatron", tmp_path / "polish", append_eod=True)
    for name in ("polish", "polish_validation"):  # every range's prefix is uploaded
        for suffix in (".bin", ".idx"):
            assert fs.cat(f"tokpack/exports/{name}{suffix}") == (tmp_path / f"{name}{suffix}").read_bytes()
    assert json.loads(fs.cat("tokpack/exports/polish.tokpack.json"))["format"] == "megatron"
    result = CliRunner().invoke(app, ["export", "s3://tokpack/one-pack", "s3://tokpack/exports/nano", "--format", "nanogpt",
                                      "--storage-options", json.dumps(s3_options)])
    assert result.exit_code == 0, result.output
    assert fs.cat("tokpack/exports/nano/val.bin") == (export(pack, "nanogpt", tmp_path / "nano") and (tmp_path / "nano" / "val.bin").read_bytes())


def test_an_upload_asks_the_store_for_each_folder_once(sharded, s3_options, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    """On object storage a folder is made by asking for the bucket (a HEAD request): once per
    folder of the dataset, not once per file (moto's server logs each request it serves)."""
    from tokpack.store.remote import upload_dataset

    with caplog.at_level(logging.INFO, logger="werkzeug"):
        upload_dataset(sharded.path, "s3://tokpack/counted", storage_options=s3_options)
    served = [record.getMessage() for record in caplog.records if record.name == "werkzeug"]
    puts = [line for line in served if '"PUT /tokpack/counted/' in line]
    heads = [line for line in served if '"HEAD /tokpack HTTP' in line]
    folders = {line.split('"PUT ', 1)[1].split(" ", 1)[0].rsplit("/", 1)[0] for line in puts}
    assert len(puts) > 2 * len(folders), puts  # several files a folder
    assert 0 < len(heads) <= len(folders) + 1, heads  # the record's existence check, then one a folder


def test_a_pack_upload_and_a_megatron_export_ask_for_their_one_folder_once(pack: Pack, s3_options, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    """A pack's files, and a Megatron export's prefixes and sidecar, all go to one folder: one
    request for it, however many files."""
    from tokpack.store.remote import upload_dataset

    with caplog.at_level(logging.INFO, logger="werkzeug"):
        upload_dataset(pack.path, "s3://tokpack/counted-pack", storage_options=s3_options)
        export(pack, "megatron", "s3://tokpack/counted-megatron/polish", storage_options=s3_options)
    served = [record.getMessage() for record in caplog.records if record.name == "werkzeug"]
    puts = [line for line in served if '"PUT /tokpack/counted-' in line]
    heads = [line for line in served if '"HEAD /tokpack HTTP' in line]
    folders = {line.split('"PUT ', 1)[1].split(" ", 1)[0].rsplit("/", 1)[0] for line in puts}
    assert len(puts) > 2 * len(folders) and len(folders) == 4, puts  # each one's own and its vocabulary's
    assert 0 < len(heads) <= len(folders) + 1, heads  # the pack's record check, then one a folder


def test_an_upload_whose_size_differs_names_the_file_it_uploaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    from tokpack.store.remote import upload

    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "tokens.npy").write_bytes(b"0123456789")
    info = MemoryFileSystem.info
    monkeypatch.setattr(MemoryFileSystem, "info", lambda self, path, **kwargs: {**info(self, path, **kwargs), "size": 3})
    with pytest.raises(IntegrityError, match=r"^memory://sizes/one/tokens\.npy: uploaded size differs"):
        upload(tmp_path / "folder" / "tokens.npy", "memory://sizes/one/tokens.npy")
    with pytest.raises(IntegrityError, match=r"^memory://sizes/all/tokens\.npy: uploaded size differs"):
        upload(tmp_path / "folder", "memory://sizes/all")


def test_inspect_and_report_read_exports_and_foreign_files(pack: Pack, corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    export(pack, "megatron", tmp_path / "m")
    export(pack, "nanogpt", tmp_path / "n")
    runner = CliRunner()
    for target in (tmp_path / "m.idx", tmp_path / "n"):
        result = runner.invoke(app, ["inspect", str(target), "--verify"])
        assert result.exit_code == 0 and f"{pack.n_docs} documents" in result.output, result.output
    (tmp_path / "m.tokpack.json").unlink()  # a Megatron dataset tokpack did not write: name its tokenizer
    result = runner.invoke(app, ["inspect", str(tmp_path / "m"), "--verify"])
    assert result.exit_code == 2 and "name the tokenizer" in result.output
    result = runner.invoke(app, ["inspect", str(tmp_path / "m"), "--tokenizer", str(corpus.vocabulary_path), "--verify"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["report", str(tmp_path / "n"), "-o", str(tmp_path / "report.html")])
    assert result.exit_code == 0, result.output
    assert pack.vocabulary.sha256 in (tmp_path / "report.html").read_text(encoding="utf-8")
    served = TokenBatches(MegatronDataset(tmp_path / "m", tokenizer=corpus.vocabulary_path), batch=2, length=32)
    assert np.array_equal(served.ids(0)[0], np.asarray(pack.tokens[:33]))  # the stream as Megatron stores it


def test_prepare_writes_a_sharded_dataset_to_a_url(sharded, corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import fsspec

    from tokpack.store.remote import open_remote

    url = f"file://{tmp_path}/bucket/polish"
    result = CliRunner().invoke(app, ["prepare", str(sample_corpus()), "--vocab", str(corpus.vocabulary_path), "--shards", "4",
                                      "--out", url, "--workers", "1", "--document-bytes", str(DOCUMENT_BYTES)])
    assert result.exit_code == 0, result.output
    remote = open_remote(url, cache_dir=tmp_path / "cache", verify=True)
    assert remote.meta == sharded.meta  # the same dataset as made locally, byte for byte
    listed = fsspec.filesystem("file").ls(f"{tmp_path}/bucket/polish", detail=False)
    assert sorted(Path(p).name for p in listed if "shard-" in p) == [e.name for e in sharded.meta.shards]


def test_prepare_uploads_to_s3_and_inspect_verifies_it_there(sharded, corpus, s3_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import s3fs

    runner, options = CliRunner(), json.dumps(s3_options)
    url = "s3://tokpack/cli-made"
    made = runner.invoke(app, ["prepare", str(sample_corpus()), "--vocab", str(corpus.vocabulary_path), "--shards", "4",
                               "--out", url, "--workers", "1", "--document-bytes", str(DOCUMENT_BYTES), "--storage-options", options])
    assert made.exit_code == 0, made.output
    inspected = runner.invoke(app, ["inspect", url, "--json", "--storage-options", options, "--cache-dir", str(tmp_path / "c")])
    assert inspected.exit_code == 0, inspected.output
    record = json.loads(inspected.output)
    assert record["verified"] and record["seal"] == sharded.meta.seal  # the same dataset as made locally
    name = sharded.meta.shards[1].name
    fs = s3fs.S3FileSystem(**s3_options)
    data = bytearray(fs.cat(f"tokpack/cli-made/{name}/tokens.npy"))
    data[-1] ^= 1
    fs.pipe(f"tokpack/cli-made/{name}/tokens.npy", bytes(data))
    refused = runner.invoke(app, ["inspect", url, "--storage-options", options, "--cache-dir", str(tmp_path / "c2")])
    assert refused.exit_code == 2 and f"{url}/{name}/tokens.npy: SHA-256 or size differs" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    unreadable = runner.invoke(app, ["inspect", url, "--storage-options", "{endpoint"])
    assert unreadable.exit_code == 2 and "--storage-options: not JSON" in unreadable.output


def test_importing_foreign_megatron_files_strips_a_named_end_of_document_id(pack: Pack, corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    export(pack, "megatron", tmp_path / "m", append_eod=True)
    (tmp_path / "m.tokpack.json").unlink()  # as preprocess_data.py would have left it: no sidecar
    (d0, d1), (t0, t1) = pack.meta.ranges["train"].documents, pack.meta.ranges["train"].tokens  # m.bin: the train range
    kept = import_pack(tmp_path / "m", tmp_path / "kept", tokenizer=corpus.vocabulary_path)
    assert kept.n_tokens == t1 - t0 + d1 - d0 and kept.pad_id is None  # ids as Megatron trains on them
    stripped = import_pack(tmp_path / "m", tmp_path / "stripped", tokenizer=corpus.vocabulary_path, eod_id=pack.meta.pad_id)
    assert np.array_equal(Pack(tmp_path / "stripped").tokens, pack.tokens[t0:t1]) and stripped.pad_id == pack.meta.pad_id


def test_the_readme_snippets_load_every_export(pack: Pack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    export(pack, "megatron", Path("data/polish_text_document"), append_eod=True)
    for fmt in ("nanogpt", "litdata", "mds", "hf"):
        export(pack, fmt, Path(fmt))
    section = (REPO / "docs" / "interop.md").read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    mosaic = "from streaming import" in code
    try:
        _import_mosaic_streaming()
    except pytest.skip.Exception:  # every other snippet still runs; MosaicML's where torchvision loads
        code = "\n".join(line for line in code.splitlines() if "streaming import" not in line and "MosaicDataset(" not in line)
        mosaic = False
    names: dict = {}
    exec(code, names)
    first = np.asarray(pack.document(0))
    assert np.array_equal(names["ids"], np.append(first, pack.meta.pad_id))
    assert np.array_equal(names["train"][: len(first)], first)
    assert names["input_ids"] == first.tolist()
    if mosaic:
        assert np.array_equal(np.asarray(names["first"]), first)
    assert np.array_equal(np.asarray(names["blocks"][0]), np.asarray(pack.tokens[:2049]))  # exported without separators


def test_an_export_never_carries_ids_from_an_altered_shard(sharded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from tokpack.store import ShardedDataset

    copy = tmp_path / "ds"
    shutil.copytree(sharded.path, copy)
    tokens = copy / sharded.meta.shards[1].name / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-2:] = (int.from_bytes(data[-2:], "little") ^ 1).to_bytes(2, "little")  # same size, one id changed
    tokens.write_bytes(bytes(data))
    for fmt in ("megatron", "hf"):
        with pytest.raises(IntegrityError):
            export(ShardedDataset(copy), fmt, tmp_path / f"out-{fmt}")
    assert not list(tmp_path.glob("out-*"))


def test_export_takes_its_format_and_output_by_keyword(pack: Pack, tmp_path: Path) -> None:
    record = export(pack.path, format="nanogpt", out=tmp_path / "n")
    assert record.format == "nanogpt" and (tmp_path / "n" / "train.bin").exists()
    with pytest.raises(InputError, match="^format must be one of megatron.*got 'parquet'"):
        export(pack.path, format="parquet", out=tmp_path / "p")
