"""The shard task: a job pins everything it reads, a shard belongs to its rank, and finishing a
job costs time linear in its shards."""

from __future__ import annotations

import cProfile
import json
import pstats
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.corpus.manifest import split_manifest
from tokpack.corpus.sources import open_corpus
from tokpack.engines import prepare_sharded, run_shard, start_job
from tokpack.errors import InputError, IntegrityError
from tokpack.store import Pack, ShardedDataset
from tokpack.vocab.bytelevel import BpeTokenizer

DOCUMENT_BYTES = 64


@pytest.fixture(scope="module")
def tokenizer() -> BpeTokenizer:
    return BpeTokenizer(ranks={bytes([b]): b for b in range(256)} | {b"an": 256, b"ka": 257},
                        special_tokens={"<|endoftext|>": 258})


def lines(count: int, word: str = "kanapka") -> str:
    return "".join(f"{word} {number} ma kota i psa\n" for number in range(count))


def shard_run(dataset: Path, rank: int) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["shard", "run", str(dataset), "--rank", str(rank)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


# --- a job pins what it reads --------------------------------------------------------------

def test_a_manifest_written_between_two_tasks_is_refused(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """A job that began with no manifest cut every unit as training; one written by ``prepare
    --validation`` before the next task would cut the rest by other ranges, dropping documents."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(60), encoding="utf-8")
    start_job(corpus, tmp_path / "job", vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES)
    run_shard(tmp_path / "job", 0)
    split_manifest(corpus, validation=0.3, document_bytes=DOCUMENT_BYTES)  # what prepare --validation writes
    with pytest.raises(InputError, match="appeared since the job began") as refused:
        run_shard(tmp_path / "job", 1)
    assert "corpus.txt.manifest.json" in str(refused.value)
    code, output = shard_run(tmp_path / "job", 2)
    assert code == 2 and len(output.strip().splitlines()) == 1 and "manifest.json" in output, output
    assert not (tmp_path / "job" / "dataset.json").exists()
    # Moved away, the job goes on as it began and finishes whole.
    (tmp_path / "corpus.txt.manifest.json").unlink()
    run_shard(tmp_path / "job", 1)
    run_shard(tmp_path / "job", 2)
    with open_corpus(corpus, document_bytes=DOCUMENT_BYTES) as whole:
        assert ShardedDataset(tmp_path / "job", verify=True).n_docs == whole.n_units


def test_a_rerun_of_a_job_whose_corpus_changed_names_the_change(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(30), encoding="utf-8")
    start_job(corpus, tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    run_shard(tmp_path / "job", 0)
    corpus.write_text(lines(31), encoding="utf-8")
    with pytest.raises(InputError, match=f"{corpus}: changed since the job began"):
        start_job(corpus, tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)


@pytest.mark.parametrize("change", ["rewritten", "removed"])
def test_a_manifest_changed_or_removed_between_two_tasks_is_refused(tmp_path: Path, tokenizer: BpeTokenizer,
                                                                    change: str) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(60), encoding="utf-8")
    manifest = split_manifest(corpus, validation=0.3, document_bytes=DOCUMENT_BYTES)
    start_job(corpus, tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    run_shard(tmp_path / "job", 0)
    beside = tmp_path / "corpus.txt.manifest.json"
    if change == "removed":
        beside.unlink()
    else:  # the same corpus, held out elsewhere
        start = manifest.ranges["validation"][0] - 2 * len("kanapka 1 ma kota i psa\n")
        edited = manifest.model_copy(update={"ranges": {"train": (0, start), "validation": (start, manifest.n_bytes)},
                                             "made_by": None})
        beside.write_text(edited.to_json(), encoding="utf-8")
    with pytest.raises(InputError, match="gone since the job began" if change == "removed" else "changed since") as refused:
        run_shard(tmp_path / "job", 1)
    assert str(beside) in str(refused.value)


def test_a_file_of_a_folder_changed_between_two_tasks_is_named(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    folder = tmp_path / "texts"
    (folder / "b").mkdir(parents=True)
    for name in ("a.txt", "b/c.txt", "d.txt"):
        (folder / name).write_text(lines(10, name[0]), encoding="utf-8")
    start_job(folder, tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    run_shard(tmp_path / "job", 0)
    (folder / "b" / "c.txt").write_text(lines(11, "c"), encoding="utf-8")
    with pytest.raises(InputError, match="changed since the job began") as refused:
        run_shard(tmp_path / "job", 1)
    assert str(folder / "b" / "c.txt") in str(refused.value)
    (folder / "b" / "c.txt").write_text(lines(10, "b"), encoding="utf-8")  # as it was
    (folder / "e.txt").write_text("nowy\n", encoding="utf-8")
    with pytest.raises(InputError, match="appeared since the job began") as refused:
        run_shard(tmp_path / "job", 1)
    assert str(folder / "e.txt") in str(refused.value)


def test_a_job_of_the_first_version_is_refused_with_the_fix(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """``tokpack.job.v1`` pinned neither the manifest nor each input: an interrupted job of that
    version is refused, saying why and what to do, by the task and by a rerun of prepare."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(30), encoding="utf-8")
    start_job(corpus, tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    record = json.loads((tmp_path / "job" / "job.json").read_text())
    del record["pins"]
    record["schema"] = "tokpack.job.v1"
    (tmp_path / "job" / "job.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    code, output = shard_run(tmp_path / "job", 0)
    assert code == 2 and len(output.strip().splitlines()) == 1, output
    assert "tokpack.job.v1" in output and "new folder" in output
    tokenizer.save(tmp_path / "vocab")
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(tmp_path / "vocab" / "vocabulary.json"),
                                      "--shards", "2", "-o", str(tmp_path / "job"), "--document-bytes", str(DOCUMENT_BYTES)])
    assert result.exit_code == 2 and "tokpack.job.v1" in result.output, result.output
    assert not list((tmp_path / "job").glob("shard-*"))


def test_a_finished_job_of_the_first_version_opens_and_a_rerun_says_so(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """Its dataset stands on its own records: it opens, and a rerun of prepare says it is
    finished rather than to start again."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(30), encoding="utf-8")
    tokenizer.save(tmp_path / "vocab")
    command = ["prepare", str(corpus), "--vocab", str(tmp_path / "vocab" / "vocabulary.json"), "--shards", "2",
               "-o", str(tmp_path / "job"), "--document-bytes", str(DOCUMENT_BYTES)]
    assert CliRunner().invoke(app, command).exit_code == 0
    record = json.loads((tmp_path / "job" / "job.json").read_text())
    del record["pins"]
    record["schema"] = "tokpack.job.v1"
    (tmp_path / "job" / "job.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    assert ShardedDataset(tmp_path / "job", verify=True).n_docs > 0
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "tokpack.job.v1" in result.output and "finished" in result.output and "as it is" in result.output


# --- a shard belongs to its rank -----------------------------------------------------------

def test_a_shard_deleted_from_a_finished_job_is_made_again_by_a_rerun(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """A finished job's rerun (or that rank's task) remakes a shard that went missing, the same
    bytes as its record in dataset.json says, rather than failing in whichever task looked first."""
    (tmp_path / "corpus.txt").write_text(lines(30), encoding="utf-8")
    job = tmp_path / "job"
    made = prepare_sharded(tmp_path / "corpus.txt", job, vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES,
                           processes=1)
    tokens = (job / "shard-00001" / "tokens.npy").read_bytes()
    # A finished text job keeps its markers (docs/formats.md): by them the rerun skips the others.
    assert sorted(marker.name for marker in job.glob("*.done")) == [f"shard-0000{rank}.done" for rank in range(3)]
    stamps = {rank: (job / f"shard-0000{rank}" / "tokens.npy").stat().st_mtime_ns for rank in (0, 2)}
    shutil.rmtree(job / "shard-00001")
    again = prepare_sharded(tmp_path / "corpus.txt", job, vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES,
                            processes=1)
    assert (job / "shard-00001" / "tokens.npy").read_bytes() == tokens
    assert {rank: (job / f"shard-0000{rank}" / "tokens.npy").stat().st_mtime_ns for rank in (0, 2)} == stamps
    assert ShardedDataset(job, verify=True).meta == again.meta == made.meta
    shutil.rmtree(job / "shard-00002")
    assert shard_run(job, 0)[0] == 0 and not (job / "shard-00002").exists()  # another rank leaves it be
    assert shard_run(job, 2)[0] == 0
    ShardedDataset(job, verify=True)


def test_a_shard_copied_under_another_rank_is_refused(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """``shard-00001/`` copied to ``shard-00002/`` with its marker's rank edited must not complete
    the job with shard 1 twice and shard 2 missing."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(30), encoding="utf-8")
    job = tmp_path / "job"
    start_job(corpus, job, vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES)
    run_shard(job, 0)
    run_shard(job, 1)
    shutil.copytree(job / "shard-00001", job / "shard-00002")
    marker = json.loads((job / "shard-00001.done").read_text())
    (job / "shard-00002.done").write_text(json.dumps(marker | {"rank": 2}))
    with pytest.raises(IntegrityError, match="shard-00002: holds shard 1 of a job of 3, not shard 2 of 3"):
        run_shard(job, 2)
    code, output = shard_run(job, 2)
    assert code == 2 and "delete shard-00002" in output, output
    assert not (job / "dataset.json").exists()
    # A marker copied alone is refused too.
    shutil.rmtree(job / "shard-00002")
    with pytest.raises(IntegrityError, match="marker of shard 1, not of shard 2"):
        shutil.copytree(job / "shard-00001", job / "shard-00002")
        (job / "shard-00002.done").write_text(json.dumps(marker))
        run_shard(job, 2)


def test_a_shard_of_another_job_copied_in_before_its_marker_is_refused(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """The same place in a job of the same size, from another corpus: its sealed record names
    rank 1 of 2, but not this job's input, so it is not marked as this job's shard."""
    for name, word in (("mine", "kanapka"), ("theirs", "herbata")):
        (tmp_path / f"{name}.txt").write_text(lines(20, word), encoding="utf-8")
        start_job(tmp_path / f"{name}.txt", tmp_path / name, vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    run_shard(tmp_path / "theirs", 1)
    shutil.copytree(tmp_path / "theirs" / "shard-00001", tmp_path / "mine" / "shard-00001")
    with pytest.raises(IntegrityError, match="shard-00001: was made from another input than this job's"):
        run_shard(tmp_path / "mine", 1)
    assert not (tmp_path / "mine" / "shard-00001.done").exists()


def test_a_folder_in_a_shards_place_that_holds_no_pack_is_named_with_the_fix(tmp_path: Path,
                                                                              tokenizer: BpeTokenizer) -> None:
    """Something else under a shard's name (an empty folder, a copy cut short) is neither taken
    for the shard nor deleted: the task says what it is and what to do."""
    (tmp_path / "corpus.txt").write_text(lines(20), encoding="utf-8")
    start_job(tmp_path / "corpus.txt", tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    (tmp_path / "job" / "shard-00001").mkdir()
    (tmp_path / "job" / "shard-00001" / "notes.txt").write_text("mine\n", encoding="utf-8")
    code, output = shard_run(tmp_path / "job", 1)
    assert code == 2 and len(output.strip().splitlines()) == 1, output
    assert "shard-00001: holds no shard (no meta.json)" in output and "delete shard-00001" in output, output
    assert (tmp_path / "job" / "shard-00001" / "notes.txt").exists()
    shutil.rmtree(tmp_path / "job" / "shard-00001")
    assert shard_run(tmp_path / "job", 1)[0] == 0


def test_a_shard_and_marker_of_another_job_copied_in_are_refused(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """The same place in a job of the same size, from another corpus, with its marker: the marker
    names the other job, none (its ``job`` field deleted) or this one (edited); whichever, the
    shard is not taken for this job's, and the job does not finish with another corpus's
    documents."""
    for name, word in (("mine", "kanapka"), ("theirs", "herbata")):
        (tmp_path / f"{name}.txt").write_text(lines(20, word), encoding="utf-8")
        start_job(tmp_path / f"{name}.txt", tmp_path / name, vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
        run_shard(tmp_path / name, 1)
    run_shard(tmp_path / "theirs", 0)
    mine = json.loads((tmp_path / "mine" / "shard-00001.done").read_text())["job"]
    edits = [(lambda marker: marker, "shard 1 was made for another job"),
             (lambda marker: {key: value for key, value in marker.items() if key != "job"},
              r"shard 1 was made for another job \(it names no job\)"),
             (lambda marker: marker | {"job": mine}, "shard-00001: was made from another input than this job's")]
    for edit, refusal in edits:
        shutil.rmtree(tmp_path / "mine" / "shard-00001")
        shutil.copytree(tmp_path / "theirs" / "shard-00001", tmp_path / "mine" / "shard-00001")
        marker = json.loads((tmp_path / "theirs" / "shard-00001.done").read_text())
        (tmp_path / "mine" / "shard-00001.done").write_text(json.dumps(edit(marker)))
        with pytest.raises(IntegrityError, match=refusal):
            run_shard(tmp_path / "mine", 0)
        assert not (tmp_path / "mine" / "dataset.json").exists()


def test_a_dataset_recorded_over_a_copied_shard_is_refused_by_inspect(tmp_path: Path, tokenizer: BpeTokenizer,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a ``dataset.json`` recomputed over the copy (every seal and checksum redone, as
    ``write_dataset`` would without its check) does not pass ``inspect``: the copy's own sealed
    record names its rank."""
    from tokpack.store import dataset as datasets

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(30), encoding="utf-8")
    job = tmp_path / "job"
    start_job(corpus, job, vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES)
    for rank in range(3):
        run_shard(job, rank)
    shutil.rmtree(job / "shard-00002")
    shutil.copytree(job / "shard-00001", job / "shard-00002")
    (job / "dataset.json").unlink()
    meta = Pack(job / "shard-00000").meta
    monkeypatch.setattr(datasets, "check_places", lambda *args: None, raising=False)
    monkeypatch.setattr(datasets, "check_documents_once", lambda *args: None)
    datasets.write_dataset(job, ["shard-00000", "shard-00001", "shard-00002"], source=meta.source, cut=meta.cut)
    monkeypatch.undo()
    result = CliRunner().invoke(app, ["inspect", str(job)])
    assert result.exit_code == 2, result.output
    assert "shard-00002 holds shard 1" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_shard_copied_under_another_rank_and_resealed_is_refused(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """The seal has no key: ``shard-00001/`` copied to ``shard-00002/`` with the rank in its
    ``meta.json`` edited and the seal recomputed records rank 2, but it holds the documents shard
    1 holds, which no job writes twice; the job does not finish with them, nor does ``inspect``
    pass a dataset over them."""
    from tokpack.store.format import PackMeta

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(30), encoding="utf-8")
    job = tmp_path / "job"
    start_job(corpus, job, vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES)
    run_shard(job, 0)
    run_shard(job, 1)
    shutil.copytree(job / "shard-00001", job / "shard-00002")
    meta_path = job / "shard-00002" / "meta.json"
    meta = PackMeta.model_validate_json(meta_path.read_text())
    assert meta.shard is not None
    meta_path.write_text(meta.model_copy(update={"shard": meta.shard.model_copy(update={"rank": 2})}).sealed().to_json())
    with pytest.raises(IntegrityError, match="shard-00002 holds corpus.txt bytes .* which shard-00001 holds too"):
        run_shard(job, 2)
    code, output = shard_run(job, 2)
    assert code == 2 and len(output.strip().splitlines()) == 1 and "run its task again" in output, output
    assert not (job / "dataset.json").exists()
    # A dataset.json written over it anyway (as write_dataset would without its check) fails inspect.
    from tokpack.store import dataset as datasets

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(datasets, "check_documents_once", lambda *args: None)
        datasets.write_dataset(job, ["shard-00000", "shard-00001", "shard-00002"], source=meta.source, cut=meta.cut)
    result = CliRunner().invoke(app, ["inspect", str(job)])
    assert result.exit_code == 2 and "shard-00002 holds corpus.txt bytes" in result.output, result.output


# --- finishing is linear in shards ---------------------------------------------------------

def _opens_to_finish(tmp_path: Path, tokenizer: BpeTokenizer, shards: int) -> int:
    """How many packs and records a whole job of ``shards`` shards opens, its tasks run one after
    the other in this process as a job array's would."""
    corpus = tmp_path / f"corpus-{shards}.txt"
    corpus.write_text(lines(2 * shards), encoding="utf-8")
    job = tmp_path / f"job-{shards}"
    start_job(corpus, job, vocab=tokenizer, shards=shards, document_bytes=DOCUMENT_BYTES)
    profile = cProfile.Profile()
    profile.enable()
    for rank in range(shards):
        run_shard(job, rank)
    profile.disable()
    assert (job / "dataset.json").exists()
    counted = {("reader.py", "__init__"), ("_schema.py", "read_record")}
    return sum(calls for (file, _, name), (_, calls, *_) in pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
               if (Path(file).name, name) in counted)


def test_finishing_a_job_opens_each_shard_a_bounded_number_of_times(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """Each task may finish the job, but only the one that completes the last shard checks every
    shard: four times the shards cost about four times the opens (checking every earlier shard
    after every task would open 20,900 packs for 200 shards)."""
    few, many = _opens_to_finish(tmp_path, tokenizer, 5), _opens_to_finish(tmp_path, tokenizer, 20)
    assert many <= 4.5 * few, (few, many)


def test_a_recorded_job_and_encoder_resume_to_the_same_shards(tmp_path: Path) -> None:
    """tests/fixtures/text_job holds a job.json and encoder.json as tokpack at commit 1dd4141 wrote
    them for its corpus.txt (2 shards): the job resumes, and its shards are those of a job started
    now."""
    from tokpack.engines.encoders import read_encoder
    from tokpack.engines.text_job import ShardJob

    from conftest import REPO

    fixture = REPO / "tests" / "fixtures" / "text_job"
    written = tmp_path / "written"
    written.mkdir()
    shutil.copy(fixture / "corpus.txt", tmp_path / "corpus.txt")
    shutil.copy(fixture / "encoder.json", written / "encoder.json")
    # The job names its corpus by absolute path: moved here, with the seal made again for it.
    record = json.loads((fixture / "job.json").read_text(encoding="utf-8").replace(
        "/tmp/jobs_main/job_fixture", str(tmp_path)))
    (written / "job.json").write_text(ShardJob.model_validate(record).sealed().to_json(), encoding="utf-8")
    run_shard(written, 1)
    run_shard(written, 0)
    fresh = tmp_path / "fresh"
    tokenizer = read_encoder(written / "encoder.json", ShardJob.model_validate(record).vocabulary)
    dataset = prepare_sharded(tmp_path / "corpus.txt", fresh, vocab=tokenizer, shards=2, document_bytes=256,
                              engine="local", processes=1)
    assert (written / "dataset.json").read_bytes() == (fresh / "dataset.json").read_bytes()
    for rank in range(2):
        for name in ("tokens.npy", "starts.npy", "meta.json"):
            shard = f"shard-{rank:05d}/{name}"
            assert (written / shard).read_bytes() == (fresh / shard).read_bytes(), shard
    assert dataset.meta.n_docs > 0


def test_a_job_of_another_kind_in_the_folder_is_named_with_the_fix(tmp_path: Path, tokenizer: BpeTokenizer) -> None:
    """A text job started (or resumed) where a chess job is says so, not which field the text
    job's record lacks; a text job's record whose schema names the chess kind is refused with the fix."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "chess_job"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(20), encoding="utf-8")
    chess = tmp_path / "chess"
    chess.mkdir()
    for name in ("job.json", "encoder.json"):
        shutil.copy(fixture / name, chess / name)
    with pytest.raises(InputError, match=r"job\.json: holds a chess job \(tokpack\.chess\.job\.v3\), not a text job; "
                                         r"write the text job into a folder of its own"):
        start_job(corpus, chess, vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab", str(tokenizer.save(tmp_path / "v")),
                                      "--shards", "2", "-o", str(chess)])
    assert result.exit_code == 2 and "holds a chess job" in result.output, result.output
    start_job(corpus, tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    record = json.loads((tmp_path / "job" / "job.json").read_text(encoding="utf-8"))
    (tmp_path / "job" / "job.json").write_text(json.dumps({**record, "schema": "tokpack.chess.job.v3"}), encoding="utf-8")
    with pytest.raises(InputError, match=r"job\.json: .*; the record was edited or damaged: start a new job in a new folder"):
        run_shard(tmp_path / "job", 0)
    code, output = shard_run(tmp_path / "job", 0)
    assert code == 2 and len(output.strip().splitlines()) == 1 and "start a new job" in output, output


def _garbage(path: Path) -> None:
    path.write_text("garbage", encoding="utf-8")


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-8])


def _flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("damaged", "damage"), [
    ("shard-00001.done", _garbage), ("shard-00001/meta.json", Path.unlink), ("shard-00001/meta.json", _truncated),
    ("shard-00001/tokens.npy", _truncated), ("shard-00001/tokens.npy", _flipped), ("shard-00001/starts.npy", Path.unlink),
])
def test_a_marked_shard_damaged_before_the_job_finishes_names_the_task_that_remakes_it(
        tmp_path: Path, tokenizer: BpeTokenizer, damaged: str, damage: Callable[[Path], None]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(60), encoding="utf-8")
    whole = prepare_sharded(corpus, tmp_path / "whole", vocab=tokenizer, shards=3, processes=1,
                            document_bytes=DOCUMENT_BYTES)
    job = tmp_path / "job"
    start_job(corpus, job, vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES)
    run_shard(job, 0)
    run_shard(job, 1)
    damage(job / damaged)
    fix = "delete shard-00001 (and its .done marker) and run the task of rank 1 again"
    with pytest.raises((InputError, IntegrityError), match=f"{job / damaged}: .*; {re.escape(fix)}"):
        run_shard(job, 2)
    code, output = shard_run(job, 2)
    assert code == 2 and len(output.strip().splitlines()) == 1 and fix in " ".join(output.split()), output
    assert not (job / "dataset.json").exists()
    shutil.rmtree(job / "shard-00001")
    (job / "shard-00001.done").unlink()
    assert run_shard(job, 1)
    assert ShardedDataset(job, verify=True).meta.tokens_sha256 == whole.meta.tokens_sha256


def _cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


@pytest.mark.parametrize("damage", ["another job's", "cut short"])
def test_a_dataset_record_not_of_this_job_is_refused_by_every_task_with_the_fix(
        tmp_path: Path, tokenizer: BpeTokenizer, damage: str) -> None:
    """A task never reports a job complete on a ``dataset.json`` it did not write: one copied in
    from another job (or cut short) is named, with the fix, and the job then finishes whole."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(60), encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text(lines(30, "pies"), encoding="utf-8")
    whole = prepare_sharded(corpus, tmp_path / "whole", vocab=tokenizer, shards=3, processes=1,
                            document_bytes=DOCUMENT_BYTES)
    foreign = prepare_sharded(other, tmp_path / "foreign", vocab=tokenizer, shards=3, processes=1,
                              document_bytes=DOCUMENT_BYTES)
    job = tmp_path / "job"
    start_job(corpus, job, vocab=tokenizer, shards=3, document_bytes=DOCUMENT_BYTES)
    run_shard(job, 0)
    if damage == "cut short":
        shutil.copy(whole.path / "dataset.json", job / "dataset.json")
        _cut_short(job / "dataset.json")
    else:
        shutil.copy(foreign.path / "dataset.json", job / "dataset.json")
    fix = "delete it and run any task of the job again: the one that finds every shard done writes it"
    with pytest.raises((InputError, IntegrityError), match=f"{job / 'dataset.json'}: .*; {fix}"):
        run_shard(job, 1)
    code, output = shard_run(job, 2)
    assert code == 2 and len(output.strip().splitlines()) == 1 and fix in " ".join(output.split()), output
    (job / "dataset.json").unlink()
    for rank in range(3):
        run_shard(job, rank)
    assert ShardedDataset(job, verify=True).meta.tokens_sha256 == whole.meta.tokens_sha256


def test_a_text_job_s_shard_origins_cost_the_same_for_any_number_of_shards(tmp_path: Path,
                                                                          tokenizer: BpeTokenizer) -> None:
    """Every shard of a text job records the same origin: the task of a job of a billion shards
    (a forged ``job.json`` may say so) never lists them."""
    import sys

    from tokpack.engines.text_job import KIND

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(lines(20), encoding="utf-8")
    job = start_job(corpus, tmp_path / "job", vocab=tokenizer, shards=2, document_bytes=DOCUMENT_BYTES)
    huge = job.model_copy(update={"world_size": 10**9}).sealed()
    origins = KIND.origins(huge)
    assert len(origins.shards) == 10**9 and sys.getsizeof(origins.shards) < 1000
    assert origins.shards[10**9 - 1] == origins.shards[0] == KIND.origins(job).shards[1]
    with pytest.raises(IndexError):
        origins.shards[10**9]
