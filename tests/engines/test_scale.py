"""Scale: input formats, worker counts, sharded datasets, the three engines, retries, refusals."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tokpack import BpeTokenizer, prepare, sample_corpus
from tokpack.cli import app
from tokpack.engines import prepare_sharded, start_job
from tokpack.serve import TokenBatches, Windows
from tokpack.store import Pack, ShardedDataset, merge_dataset, open_tokens

import shard_faults
from ray_cluster import Cluster, driver

DOCUMENT_BYTES = 2048


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("vocab")
    return prepare(sample_corpus(), cache_dir=cache, vocab_size=500, document_bytes=DOCUMENT_BYTES).vocabulary_path


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory, vocabulary: Path):  # type: ignore[no-untyped-def]
    cache = tmp_path_factory.mktemp("single")
    return prepare(sample_corpus(), vocab=vocabulary, cache_dir=cache, document_bytes=DOCUMENT_BYTES, workers=1)


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def shard_bytes(dataset: Path) -> dict[str, dict[str, bytes]]:
    return {p.name: files_of(p) for p in sorted(dataset.glob("shard-*")) if p.is_dir()}


def lines_of_sample() -> list[str]:
    return [line for line in sample_corpus().read_text(encoding="utf-8").splitlines(keepends=True) if line.strip()][:400]


# --- input formats -------------------------------------------------------------------------

def test_a_folder_of_text_files_packs_each_file_in_sorted_order(tmp_path: Path, vocabulary: Path) -> None:
    folder = tmp_path / "texts"
    (folder / "b").mkdir(parents=True)
    (folder / "b" / "two.txt").write_text("drugi plik\n", encoding="utf-8")
    (folder / "a.txt").write_text("pierwszy plik\n" * 3, encoding="utf-8")
    (folder / ".hidden").write_text("not me", encoding="utf-8")
    prepared = prepare(folder, vocab=vocabulary, cache_dir=tmp_path / "c", document_bytes=DOCUMENT_BYTES)
    pack, tokenizer = prepared.pack(), prepared.tokenizer
    assert pack.n_docs == 2  # documents never span files
    assert tokenizer.decode(pack.document(0)) == "pierwszy plik\n" * 3
    assert tokenizer.decode(pack.document(1)) == "drugi plik\n"


def test_jsonl_and_parquet_give_the_same_ids_as_the_texts(tmp_path: Path, vocabulary: Path) -> None:
    texts = lines_of_sample()
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    table = pa.table({"body": texts})
    pq.write_table(table, tmp_path / "docs.parquet", row_group_size=37)  # many row groups
    tokenizer = BpeTokenizer.load_saved(vocabulary)
    expected = [tokenizer.encode(t) for t in texts]
    for path in (jsonl, tmp_path / "docs.parquet"):
        pack = prepare(path, vocab=vocabulary, cache_dir=tmp_path / "c", text_field="body").pack()
        assert [pack.document(i).tolist() for i in range(pack.n_docs)] == expected, path.name


def test_invalid_input_names_file_and_offset_or_is_skipped_and_counted(tmp_path: Path, vocabulary: Path) -> None:
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "good.txt").write_text("dobry tekst\n", encoding="utf-8")
    (folder / "bad.txt").write_bytes(b"zly \xff tekst\n")
    with pytest.raises(ValueError, match=r"bad\.txt: invalid UTF-8 at byte 4"):
        prepare(folder, vocab=vocabulary, cache_dir=tmp_path / "c")
    skipped = prepare(folder, vocab=vocabulary, cache_dir=tmp_path / "c2", on_error="skip")
    assert skipped.meta.counts == {"skipped": 1, "characters": len("dobry tekst\n")} and skipped.meta.n_docs == 1
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_bytes(b'{"text": "ok"}\n{"text": broken}\n{"text": "also ok"}\n')
    with pytest.raises(ValueError, match=r"docs\.jsonl: record at byte 15 is invalid JSON at its byte 9: expecting value"):
        prepare(jsonl, vocab=vocabulary, cache_dir=tmp_path / "c3")
    counts = prepare(jsonl, vocab=vocabulary, cache_dir=tmp_path / "c4", on_error="skip").meta.counts
    assert counts == {"skipped": 1, "characters": len("ok") + len("also ok")}


def test_cli_reports_skipped_inputs_and_bad_formats_exit_2(tmp_path: Path, vocabulary: Path) -> None:
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_bytes(b'{"text": "ok"}\n{"other": 1}\n')
    result = CliRunner().invoke(app, ["prepare", str(jsonl), "--vocab", str(vocabulary), "--cache-dir", str(tmp_path)])
    assert result.exit_code == 2 and "has no string field 'text'" in result.stderr
    result = CliRunner().invoke(app, ["prepare", str(jsonl), "--vocab", str(vocabulary), "--cache-dir", str(tmp_path),
                                      "--on-error", "maybe"])
    assert result.exit_code == 2 and "--on-error" in result.stderr


# --- workers -------------------------------------------------------------------------------

def test_packs_are_byte_identical_for_any_worker_count(tmp_path: Path, vocabulary: Path, single) -> None:  # type: ignore[no-untyped-def]
    for workers in (2, 3):
        other = prepare(sample_corpus(), vocab=vocabulary, cache_dir=tmp_path / str(workers),
                        document_bytes=DOCUMENT_BYTES, workers=workers, batch_documents=5)
        assert files_of(other.tokens_dir) == files_of(single.tokens_dir)


# --- sharded datasets ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory, vocabulary: Path) -> ShardedDataset:
    out = tmp_path_factory.mktemp("sharded") / "dataset"
    return prepare_sharded(sample_corpus(), out, vocab=vocabulary, shards=3, processes=2,
                           document_bytes=DOCUMENT_BYTES, batch_documents=4)


def test_sharded_dataset_reads_as_the_single_pack(sharded: ShardedDataset, single, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pack = single.pack()
    assert (sharded.n_tokens, sharded.n_docs) == (pack.n_tokens, pack.n_docs)
    assert sharded.meta.tokens_sha256 == pack.meta.tokens_sha256 and sharded.meta.starts_sha256 == pack.meta.starts_sha256
    assert np.array_equal(sharded.starts, pack.starts)
    assert {n: (s.documents, s.tokens) for n, s in sharded.meta.ranges.items()} == {
        n: (s.documents, s.tokens) for n, s in pack.meta.ranges.items()}
    merge_dataset(sharded, tmp_path / "merged")
    assert files_of(tmp_path / "merged")["tokens.npy"] == files_of(single.tokens_dir)["tokens.npy"]
    assert files_of(tmp_path / "merged")["starts.npy"] == files_of(single.tokens_dir)["starts.npy"]
    # every reader sees one stream, rows crossing shard boundaries included
    for a, b in ((TokenBatches(sharded.path, 4, 100), TokenBatches(single.tokens_dir, 4, 100)),):
        assert all(np.array_equal(a.ids(step), b.ids(step)) for step in range(0, 400, 7))
        assert a.data_schedule()["tokens_sha256"] == b.data_schedule()["tokens_sha256"]
    windows_a, windows_b = Windows(sharded.path, block=1500), Windows(single.tokens_dir, block=1500)
    everything = np.arange(len(windows_a))
    assert all(np.array_equal(p, q) for p, q in zip(windows_a.window_batch(everything), windows_b.window_batch(everything)))
    boundaries = sharded.offsets[1:-1]
    crossing = np.flatnonzero((windows_a.origins(everything) < boundaries[0]) & (windows_a.origins(everything) + 1501 > boundaries[0]))
    assert crossing.size  # the comparison above did cover windows that span two shards
    open_tokens(sharded.path, verify=True)


def test_engines_and_job_arrays_give_byte_identical_shards(sharded: ShardedDataset, vocabulary: Path, tmp_path: Path) -> None:
    array = tmp_path / "array"
    start_job(sample_corpus(), array, vocab=vocabulary, shards=3, document_bytes=DOCUMENT_BYTES, batch_documents=4)
    for rank in (2, 0, 1):  # separate processes, any order, as a scheduler would run them
        environment = dict(os.environ, SLURM_ARRAY_TASK_ID=str(rank), SLURM_ARRAY_TASK_COUNT="3")
        done = subprocess.run([sys.executable, "-m", "tokpack.cli", "shard", "run", str(array)], env=environment,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert (array / "dataset.json").exists() == (rank == 1)  # written by the last one only
    assert shard_bytes(array) == shard_bytes(sharded.path)
    assert ShardedDataset(array, verify=True).meta.tokens_sha256 == sharded.meta.tokens_sha256


def test_a_shard_killed_mid_write_is_retried_to_identical_bytes(sharded: ShardedDataset, vocabulary: Path, tmp_path: Path) -> None:
    out = tmp_path / "flaky"
    dataset = prepare_sharded(sample_corpus(), out, vocab=vocabulary, shards=3, processes=2, document_bytes=DOCUMENT_BYTES,
                              batch_documents=4, task=shard_faults.killed_mid_shard_once)
    assert (out / f".killed-once-{shard_faults.VICTIM}").exists()  # it really died once
    assert shard_bytes(out) == shard_bytes(sharded.path)
    assert not [p for p in out.iterdir() if p.name.startswith(".shard-")]  # its half-written shard is gone
    assert dataset.meta.tokens_sha256 == sharded.meta.tokens_sha256


def test_a_rerun_skips_complete_shards(sharded: ShardedDataset, tmp_path: Path, vocabulary: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sharded.path, copy)
    (copy / "dataset.json").unlink()
    shutil.rmtree(copy / "shard-00001")
    (copy / "shard-00001.done").unlink()
    stamps = {p.name: p.stat().st_mtime_ns for p in copy.glob("shard-0000[02]/tokens.npy")}
    resumed = prepare_sharded(sample_corpus(), copy, vocab=vocabulary, shards=3, processes=1, document_bytes=DOCUMENT_BYTES,
                              batch_documents=4)
    assert {p.name: p.stat().st_mtime_ns for p in copy.glob("shard-0000[02]/tokens.npy")} == stamps
    assert shard_bytes(copy) == shard_bytes(sharded.path) and resumed.n_tokens == sharded.n_tokens


def test_sharded_datasets_refuse_missing_extra_altered_and_mixed_shards(sharded: ShardedDataset, tmp_path: Path) -> None:
    def fresh() -> Path:
        target = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        shutil.copytree(sharded.path, target)
        return target

    missing = fresh()
    shutil.rmtree(missing / "shard-00001")
    with pytest.raises(ValueError, match="shard-00001 listed in dataset.json is missing"):
        ShardedDataset(missing)
    extra = fresh()
    shutil.copytree(extra / "shard-00002", extra / "shard-00003")
    with pytest.raises(ValueError, match="shard-00003 is not listed"):
        ShardedDataset(extra)
    swapped = fresh()
    shutil.rmtree(swapped / "shard-00000")
    shutil.copytree(swapped / "shard-00002", swapped / "shard-00000")
    with pytest.raises(ValueError, match="does not match its entry"):
        ShardedDataset(swapped)
    altered = fresh()
    tokens = altered / "shard-00001" / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-3] ^= 1
    tokens.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        ShardedDataset(altered, verify=True)
    mixed = fresh()
    other = prepare(sample_corpus(), cache_dir=tmp_path / "other", vocab_size=300, document_bytes=DOCUMENT_BYTES)
    shutil.rmtree(mixed / "shard-00002")
    shutil.copytree(other.tokens_dir, mixed / "shard-00002")
    with pytest.raises(ValueError, match="vocabulary .* differs from the dataset's"):
        ShardedDataset(mixed)
    edited = fresh()
    record = json.loads((edited / "dataset.json").read_text())
    record["n_tokens"] += 1
    (edited / "dataset.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="seal mismatch"):
        ShardedDataset(edited)


def test_a_job_folder_refuses_another_job(sharded: ShardedDataset, vocabulary: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="another job"):
        start_job(sample_corpus(), sharded.path, vocab=vocabulary, shards=4, document_bytes=DOCUMENT_BYTES, batch_documents=4)


def test_every_shard_is_encoded_with_the_one_recorded_encoder(sharded: ShardedDataset, vocabulary: Path,
                                                              tmp_path: Path) -> None:
    """A text job ships ``encoder.json``, the record chess jobs ship too; an edited one stops every shard."""
    from tokpack.engines import run_shard
    from tokpack.engines.encoders import read_encoder
    from tokpack.errors import IntegrityError

    tokenizer = BpeTokenizer.load_saved(vocabulary)
    assert not (sharded.path / "vocabulary").exists()
    assert read_encoder(sharded.path / "encoder.json", tokenizer.identity).encode("Zażółć") == tokenizer.encode("Zażółć")
    job = tmp_path / "job"
    start_job(sample_corpus(), job, vocab=vocabulary, shards=2, document_bytes=DOCUMENT_BYTES, batch_documents=4)
    record = json.loads((job / "encoder.json").read_text(encoding="utf-8"))
    record["spec"]["ranks"] = record["spec"]["ranks"].replace(" 300\n", " 9999\n")  # one rank moved
    (job / "encoder.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(IntegrityError, match="encoder.json: rebuilds vocabulary"):
        run_shard(job, 0)
    assert not (job / "shard-00000").exists() and not (job / "shard-00000.done").exists()


def test_cli_shards_merges_and_inspects(tmp_path: Path, vocabulary: Path, sharded: ShardedDataset) -> None:
    runner = CliRunner()
    out = tmp_path / "cli"
    result = runner.invoke(app, ["prepare", str(sample_corpus()), "--vocab", str(vocabulary), "--shards", "3", "--out",
                                 str(out), "--document-bytes", str(DOCUMENT_BYTES), "--workers", "2"])
    assert result.exit_code == 0, result.stderr
    assert ShardedDataset(out).meta.tokens_sha256 == sharded.meta.tokens_sha256
    result = runner.invoke(app, ["inspect", str(out), "--verify"])
    assert result.exit_code == 0 and "tokpack.dataset.v1" in result.stdout
    result = runner.invoke(app, ["merge", str(out), str(tmp_path / "merged")])
    assert result.exit_code == 0 and Pack(tmp_path / "merged", verify=True).meta.tokens_sha256 == sharded.meta.tokens_sha256
    result = runner.invoke(app, ["prepare", str(sample_corpus()), "--shards", "2", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "--vocab" in result.stderr


# --- Ray -------------------------------------------------------------------------------------

def test_ray_engine_gives_byte_identical_shards_and_retries_a_killed_task(sharded: ShardedDataset, vocabulary: Path,
                                                                          ray_cluster: Cluster, tmp_path: Path) -> None:
    # (a run without a fault, from the command line: test_ray_cluster.py)
    with driver(ray_cluster):
        flaky = prepare_sharded(sample_corpus(), tmp_path / "ray-flaky", vocab=vocabulary, shards=3, engine="ray",
                                document_bytes=DOCUMENT_BYTES, batch_documents=4, task=shard_faults.killed_mid_shard_once)
    assert (tmp_path / "ray-flaky" / f".killed-once-{shard_faults.VICTIM}").exists()
    assert shard_bytes(flaky.path) == shard_bytes(sharded.path)


# --- datatrove -------------------------------------------------------------------------------

def write_datatrove_file(path: Path, documents: list[list[int]], itemsize: int = 2) -> None:
    """A ``.ds`` file and its ``.ds.index``, written from datatrove's format description."""
    ids = np.concatenate([np.asarray(d, dtype=f"<u{itemsize}") for d in documents])
    path.write_bytes(ids.tobytes())
    ends = np.cumsum([len(d) for d in documents]).astype("<u8")
    path.with_name(path.name + ".index").write_bytes(ends.tobytes())


# Reading a folder that datatrove itself wrote: tests/store/formats/test_formats_interop.py.


def test_a_datatrove_folder_is_refused_when_inconsistent(tmp_path: Path, vocabulary: Path) -> None:
    from tokpack.store import DatatroveFolder

    folder = tmp_path / "d"
    folder.mkdir()
    with pytest.raises(ValueError, match="no datatrove .ds files"):
        DatatroveFolder(folder, tokenizer=vocabulary)
    write_datatrove_file(folder / "a.ds", [[1, 2, 3], [4, 5]])
    (folder / "a.ds.index").write_bytes(np.array([3, 6], "<u8").tobytes())
    with pytest.raises(ValueError, match="last document ends at 6, the file has 5"):
        DatatroveFolder(folder, tokenizer=vocabulary)
    (folder / "a.ds.index").unlink()
    with pytest.raises(ValueError, match=r"a\.ds\.index: missing"):
        DatatroveFolder(folder, tokenizer=vocabulary)
    write_datatrove_file(folder / "a.ds", [[1, 2, 3], [4, 60_000]])
    with pytest.raises(ValueError, match="past the tokenizer's"):
        DatatroveFolder(folder, tokenizer=vocabulary, verify=True)


def test_cli_inspects_a_datatrove_folder(tmp_path: Path, vocabulary: Path) -> None:
    write_datatrove_file(tmp_path / "x.ds", [[1, 2, 3], [4, 5]])
    result = CliRunner().invoke(app, ["inspect", str(tmp_path), "--datatrove-tokenizer", str(vocabulary), "--verify"])
    assert result.exit_code == 0 and "2 documents, 5 ids" in result.stdout


def test_workers_feed_one_progress_record(tmp_path: Path, vocabulary: Path) -> None:
    heard: dict[int, tuple[int, int, int]] = {}
    finished: list[int] = []
    dataset = prepare_sharded(sample_corpus(), tmp_path / "p", vocab=vocabulary, shards=3, processes=2,
                              document_bytes=DOCUMENT_BYTES, batch_documents=4, on_done=finished.append,
                              on_progress=lambda rank, b, t, d: heard.__setitem__(rank, (b, t, d)))
    assert sorted(finished) == [0, 1, 2] and sorted(heard) == [0, 1, 2]
    assert sum(b for b, _, _ in heard.values()) == sample_corpus().stat().st_size
    assert sum(t for _, t, _ in heard.values()) == dataset.n_tokens
    assert sum(d for _, _, d in heard.values()) == dataset.n_docs


def test_cli_prepares_a_folder_and_says_how_many_inputs_were_skipped(tmp_path: Path, vocabulary: Path) -> None:
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "good.txt").write_text("dobry tekst, całkiem długi\n" * 20, encoding="utf-8")
    (folder / "bad.txt").write_bytes(b"zly \xff tekst\n")
    result = CliRunner().invoke(app, ["prepare", str(folder), "--vocab", str(vocabulary), "--cache-dir",
                                      str(tmp_path / "c"), "--on-error", "skip"])
    assert result.exit_code == 0, result.stderr
    assert "1 unreadable file or record" in result.stdout
    characters = len("dobry tekst, całkiem długi\n" * 20)
    tokens = len(BpeTokenizer.load_saved(vocabulary).encode("dobry tekst, całkiem długi\n" * 20))
    assert f"{characters / tokens:.2f} characters per token" in result.stdout
