"""Issue 12: every bad input and fault found so far, each reproduced and refused with a located error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tokpack
from tokpack import prepare
from tokpack.errors import InputError, IntegrityError, TokpackError

from conftest import SAMPLE
from processes import survivors_of_kill_9

SMALL = {"vocab_size": 300, "document_bytes": 4096, "min_frequency": 1, "allow_smaller_vocab": True}  # tiny corpora
GIVEN = {"document_bytes": 4096}  # with vocab=: a given vocabulary has its own size


def jsonl_with_a_bad_record(path: Path) -> Path:
    lines = [json.dumps({"text": f"document {i}: " + "zażółć gęślą jaźń " * 20}) for i in range(30)]
    lines[3] = '{"text": broken'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_skipped_records_are_counted_once_when_prepare_trains_its_vocabulary(tmp_path: Path) -> None:
    corpus = jsonl_with_a_bad_record(tmp_path / "corpus.jsonl")
    trained = prepare(corpus, cache_dir=tmp_path / "a", on_error="skip", **SMALL)  # trains and skips in one run
    assert trained.meta.counts["skipped"] == 1
    # The same pack made with the vocabulary given (so the trainer never reads the corpus) says the same.
    given = prepare(corpus, vocab=trained.vocabulary_path, cache_dir=tmp_path / "b", on_error="skip", **GIVEN)
    assert given.meta.counts == trained.meta.counts


def test_a_pack_made_skipping_is_not_reused_by_a_run_that_raises(tmp_path: Path) -> None:
    corpus = jsonl_with_a_bad_record(tmp_path / "corpus.jsonl")
    skipped = prepare(corpus, cache_dir=tmp_path / "cache", on_error="skip", **SMALL)
    with pytest.raises(ValueError, match=r"corpus\.jsonl"):  # InputError once main converts the site
        prepare(corpus, vocab=skipped.vocabulary_path, cache_dir=tmp_path / "cache", **GIVEN)


# --- Item 2: a corpus that changes while prepare reads it is never published --------------------

def test_a_corpus_rewritten_during_prepare_is_refused_and_nothing_is_cached(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((SAMPLE / "polish.txt").read_bytes()[:200_000])
    vocab = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "v", **SMALL).vocabulary_path

    def rewrite(event: object) -> None:  # same size, other bytes, while encoding
        if event.stage == "encoding" and corpus.read_bytes()[:1] != b"#":
            with open(corpus, "r+b") as handle:
                handle.write(b"#" * 1000)

    with pytest.raises(InputError, match=r"corpus\.txt: changed while it was being read"):
        prepare(corpus, vocab=vocab, cache_dir=tmp_path / "cache", batch_documents=1, progress=rewrite, **GIVEN)
    assert not any((tmp_path / "cache" / "packs").glob("*-d4096")), "a pack of the changed corpus was published"
    # Once the file is still, the pack holds the bytes its record names.
    prepared = prepare(corpus, vocab=vocab, cache_dir=tmp_path / "cache", **GIVEN)
    assert prepared.tokenizer.decode_bytes(prepared.pack().tokens) == corpus.read_bytes()


def test_a_corpus_truncated_during_prepare_is_an_input_error_not_sigbus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((SAMPLE / "polish.txt").read_bytes()[:200_000])
    vocab = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "v", **SMALL).vocabulary_path
    script = f"""
import os, sys
from tokpack import prepare
from tokpack.errors import InputError
def cut(event):
    if event.stage == "encoding" and os.path.getsize({str(corpus)!r}) > 1000:
        os.truncate({str(corpus)!r}, 1000)
try:
    prepare({str(corpus)!r}, vocab={str(vocab)!r}, cache_dir={str(tmp_path / 'cache')!r}, batch_documents=1,
            progress=cut, document_bytes=4096)
except InputError as error:
    print(error)
    sys.exit(2)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(tokpack.__file__).parents[1])})
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])  # -7 was SIGBUS
    assert str(corpus) in run.stdout and ("truncated" in run.stdout or "changed" in run.stdout)


# --- Item 10: a FIFO or a device never blocks ----------------------------------------------------

def test_a_device_or_fifo_as_corpus_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"/dev/zero: not a regular file \(a character device\)"):
        prepare("/dev/zero", cache_dir=tmp_path / "cache", **SMALL)
    fifo = tmp_path / "corpus.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"corpus\.txt: not a regular file \(a FIFO\)"):
        prepare(fifo, cache_dir=tmp_path / "cache", **SMALL)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n")
    os.mkfifo(folder / "b.txt")
    with pytest.raises(InputError, match=r"b\.txt: not a regular file \(a FIFO\)"):
        prepare(folder, cache_dir=tmp_path / "cache", **SMALL)
    assert prepare(folder, cache_dir=tmp_path / "cache", on_error="skip", **SMALL).meta.counts["skipped"] == 1


def test_a_fifo_as_meta_json_is_refused(tmp_path: Path) -> None:
    from tokpack.serve.memory import pack_of_documents
    from tokpack.store import Pack

    pack = pack_of_documents([[1, 2, 3]], n_vocab=8, directory=tmp_path / "pack")
    (pack / "meta.json").unlink()
    os.mkfifo(pack / "meta.json")
    with pytest.raises(TokpackError, match=r"meta\.json: not a regular file \(a FIFO\)"):
        Pack(pack)


# --- Item 5: an unreadable subfolder or file is never dropped silently ---------------------------

def test_an_unreadable_subfolder_stops_the_run_or_is_skipped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "corpus"
    (folder / "locked").mkdir(parents=True)
    (folder / "a.txt").write_text("zażółć gęślą jaźń\n" * 50, encoding="utf-8")
    (folder / "locked" / "b.txt").write_text("hidden text\n" * 50, encoding="utf-8")
    real_scandir = os.scandir

    def scandir(path: object = ".") -> object:  # what chmod 000 does for a user who is not root
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(InputError, match=r"locked: cannot read folder \(Permission denied\).*on_error='skip'"):
        prepare(folder, cache_dir=tmp_path / "cache", **SMALL)
    prepared = prepare(folder, cache_dir=tmp_path / "cache", on_error="skip", **SMALL)
    assert prepared.meta.counts["skipped"] == 1


def test_an_unreadable_file_is_skipped_with_on_error_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("zażółć gęślą jaźń\n" * 50, encoding="utf-8")
    (folder / "b.txt").write_text("hidden text\n" * 50, encoding="utf-8")
    real_open = os.open

    def refuse(path: object, flags: int, *args: object) -> int:
        if str(path).endswith("b.txt"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(InputError, match=r"b\.txt: cannot read \(Permission denied\)"):
        prepare(folder, cache_dir=tmp_path / "cache", **SMALL)
    prepared = prepare(folder, cache_dir=tmp_path / "cache", on_error="skip", **SMALL)
    assert prepared.meta.counts["skipped"] == 1
    assert b"hidden" not in prepared.tokenizer.decode_bytes(prepared.pack().tokens)


# --- Item 1: every reader verifies on first open; a stamp makes later opens free ------------------

@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Verification stamps go to this test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))
    return tmp_path / "stamps"


def reseal(meta_path: Path, **changes: object) -> None:
    """Edit a pack's or dataset's record and seal it again, as a careless tool (or an attacker) would."""
    from tokpack.store import DatasetRecord, PackMeta

    model = DatasetRecord if meta_path.name == "dataset.json" else PackMeta
    record = model.model_validate({**json.loads(meta_path.read_text()), **changes})
    meta_path.write_text(record.sealed().to_json())


def small_pack(directory: Path, **options: object) -> Path:
    from tokpack.serve.memory import pack_of_documents

    documents = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10, 11], [12, 13, 14]]
    return pack_of_documents(documents, n_vocab=20, pad_id=0, directory=directory, **options)  # type: ignore[arg-type]


def flip_a_byte(path: Path, offset: int = 130) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_windows_refuse_a_flipped_byte_without_being_asked_to_verify(tmp_path: Path) -> None:
    from tokpack.serve.fixed import Windows

    pack = small_pack(tmp_path / "pack")
    Windows(pack, block=4)  # verified once, stamped
    flip_a_byte(pack / "tokens.npy")
    with pytest.raises(IntegrityError, match=r"tokens\.npy: SHA-256 differs from meta\.json; the pack was altered; "
                                             r"delete it to rebuild"):
        Windows(pack, block=4)


def test_a_shifted_starts_file_is_refused_on_first_open(tmp_path: Path) -> None:
    from tokpack.serve.fixed import TokenBatches
    from tokpack.store import open_tokens

    pack = small_pack(tmp_path / "pack")
    starts = np.load(pack / "starts.npy")
    (pack / "starts.npy").write_bytes((pack / "starts.npy").read_bytes()[:128] + (starts + [0, 1, 1, 1]).astype("<i8").tobytes())
    with pytest.raises(IntegrityError, match=r"starts\.npy: SHA-256 differs"):
        open_tokens(pack)
    with pytest.raises(IntegrityError, match=r"starts\.npy"):
        TokenBatches(pack, batch=1, length=2)


def test_a_second_open_trusts_the_stamp_and_the_stamp_lives_in_the_cache(tmp_path: Path, own_cache: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from tokpack.store import Pack

    pack = small_pack(tmp_path / "pack")
    before = sorted(p.name for p in pack.iterdir())
    Pack(pack)
    assert sorted(p.name for p in pack.iterdir()) == before  # nothing written into the pack
    assert len(list((own_cache / "verified").glob("*.json"))) == 1
    monkeypatch.setattr(Pack, "verify", lambda self, **_: pytest.fail("verified again"))
    Pack(pack)  # free: the stamp matches size, times and inode
    monkeypatch.undo()
    monkeypatch.setenv("TOKPACK_CACHE", str(own_cache))
    os.utime(pack / "tokens.npy")  # touched: the next open verifies again, and passes
    calls = []
    real = Pack.verify
    monkeypatch.setattr(Pack, "verify", lambda self, **kw: calls.append(1) or real(self, **kw))
    Pack(pack)
    assert calls == [1]


def test_an_id_outside_the_vocabulary_is_refused_on_open_and_in_every_served_batch(tmp_path: Path) -> None:
    from tokpack.serve.fixed import Windows
    from tokpack.store import Pack

    pack = small_pack(tmp_path / "pack")  # ids up to 14
    vocabulary = json.loads((pack / "meta.json").read_text())["vocabulary"]
    reseal(pack / "meta.json", vocabulary={**vocabulary, "n_vocab": 10})  # GPT-2 ids in a smaller vocabulary
    with pytest.raises(IntegrityError, match=r"tokens\.npy: id 14 outside the vocabulary \(n_vocab 10\); the pack was "
                                             r"altered; delete it to rebuild"):
        Pack(pack)
    unverified = Pack(pack, verify=False)
    windows = Windows(unverified, block=3)
    assert windows.window_batch([1])[0].tolist() == [[6, 7, 8]]  # ids below 10 are served
    with pytest.raises(IntegrityError, match=r"pack: id 14 outside the vocabulary \(n_vocab 10\)"):
        windows.window_batch([3])
    with pytest.raises(IntegrityError, match=r"pack: id 1[0-4] outside the vocabulary"):
        _batches_unverified(unverified).ids(5)  # type: ignore[attr-defined]


def _batches_unverified(pack: object) -> object:
    """TokenBatches over a pack opened without verification (its constructor would verify)."""
    from tokpack.serve.fixed import TokenBatches

    batches = TokenBatches.__new__(TokenBatches)
    batches.pack = pack  # type: ignore[attr-defined]
    batches.lo, batches.hi = pack.meta.ranges["train"].tokens  # type: ignore[attr-defined]
    batches.batch, batches.length = 1, 2  # type: ignore[attr-defined]
    batches._modulus = batches.hi - batches.lo - 3  # type: ignore[attr-defined]
    batches._row_steps = np.arange(1, dtype=np.int64) * 2  # type: ignore[attr-defined]
    return batches


def test_inspect_verifies_by_default(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tokpack.cli import app

    pack = small_pack(tmp_path / "pack")
    runner = CliRunner()
    assert runner.invoke(app, ["inspect", str(pack)]).exit_code == 0
    flip_a_byte(pack / "tokens.npy")
    result = runner.invoke(app, ["inspect", str(pack)])
    assert result.exit_code == 2 and "tokens.npy: SHA-256 differs" in result.output
    assert runner.invoke(app, ["inspect", "--no-verify", str(pack)]).exit_code == 0


def sharded(directory: Path) -> Path:
    from tokpack.serve.memory import pack_of_documents
    from tokpack.store import DocumentCut, Source, write_dataset

    shards = [[[1, 2, 3], [4, 5]], [[6, 7, 8, 9]], [[10, 11], [12], [13, 14, 15]]]
    for rank, documents in enumerate(shards):
        pack_of_documents(documents, n_vocab=20, pad_id=0, directory=directory / f"shard-{rank:05d}")
    write_dataset(directory, [f"shard-{rank:05d}" for rank in range(3)], source=Source(name="x", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="list"))
    return directory


def test_shards_reordered_in_dataset_json_are_refused(tmp_path: Path) -> None:
    from tokpack.serve.fixed import Windows

    dataset = sharded(tmp_path / "dataset")
    record = json.loads((dataset / "dataset.json").read_text())
    reseal(dataset / "dataset.json", shards=[record["shards"][i] for i in (1, 0, 2)])
    with pytest.raises(IntegrityError, match=r"dataset\.json: shards are not listed once each in shard order"):
        Windows(dataset, block=2)


def test_shards_renamed_into_another_order_are_refused(tmp_path: Path) -> None:
    from tokpack.serve.fixed import Windows

    dataset = sharded(tmp_path / "dataset")
    record = json.loads((dataset / "dataset.json").read_text())
    for old, new in (("shard-00000", "tmp"), ("shard-00001", "shard-00000"), ("tmp", "shard-00001")):
        (dataset / old).rename(dataset / new)
    entries = record["shards"]
    entries[0]["name"], entries[1]["name"] = "shard-00001", "shard-00000"
    reseal(dataset / "dataset.json", shards=[entries[1], entries[0], entries[2]])  # names in order again
    with pytest.raises(IntegrityError, match=r"dataset\.json: the shards' documents, in the listed order, differ"):
        Windows(dataset, block=2)


def test_a_dataset_verifies_each_shard_when_first_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tokpack.serve.fixed import Windows

    dataset = sharded(tmp_path / "dataset")
    flip_a_byte(dataset / "shard-00002" / "tokens.npy", 128)
    windows = Windows(dataset, block=2, aligned=True)
    assert windows.window_batch([0, 1])[0].tolist() == [[1, 2], [4, 5]]  # shard 0 is sound
    with pytest.raises(IntegrityError, match=r"shard-00002/tokens\.npy: SHA-256 differs"):
        windows.window_batch([4])


# --- Item 8: a record whose ranges or padding id lie is refused ----------------------------------

def test_ranges_that_disagree_with_the_starts_are_refused(tmp_path: Path) -> None:
    from tokpack.store import Pack

    pack = small_pack(tmp_path / "pack", train_documents=2)
    reseal(pack / "meta.json", ranges={"train": {"documents": [0, 2], "tokens": [0, 9]},
                                       "validation": {"documents": [2, 4], "tokens": [9, 14]}})
    with pytest.raises(IntegrityError, match=r"range 'train' says ids \[0, 9\) but its documents \[0, 2\) hold ids \[0, 7\)"):
        Pack(pack, verify=False)


def test_a_padding_id_that_is_a_real_token_is_refused(tmp_path: Path) -> None:
    from tokpack.store import Pack

    pack = small_pack(tmp_path / "pack")
    reseal(pack / "meta.json", pad_id=7)
    with pytest.raises(ValueError, match=r"the padding id 7 occurs 1 times as a real token"):
        Pack(pack)


# --- require_vocabulary / tokenizer_for: one line for anything they cannot read ------------------

def test_require_vocabulary_and_tokenizer_for_refuse_foreign_tokenizers_in_one_line(tmp_path: Path) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    from tokpack import require_vocabulary, tokenizer_for
    from tokpack.serve.memory import pack_of_documents
    from tokpack.store import Pack

    trained = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "cache", **SMALL)
    schedule = trained.batches(length=4, global_batch=1).data_schedule()
    hf = Tokenizer(BPE())
    foreign = {"tokenizers.Tokenizer": hf, "PreTrainedTokenizerFast": PreTrainedTokenizerFast(tokenizer_object=hf),
               "state_dict": {"wte.weight": np.zeros((3, 2)), "lm_head.weight": np.zeros((3, 2))}}
    for name, thing in foreign.items():
        for call in (lambda thing=thing: require_vocabulary(schedule, thing),
                     lambda thing=thing: tokenizer_for(schedule, thing),
                     lambda thing=thing: require_vocabulary(thing, trained.tokenizer),
                     lambda thing=thing: tokenizer_for(thing, trained.vocabulary_path)):
            with pytest.raises(InputError) as caught:
                call()
            assert "\n" not in str(caught.value) and type(caught.value) is InputError, name
    with pytest.raises(InputError, match=r"state_dict"):
        require_vocabulary(foreign["state_dict"], trained.tokenizer)
    with pytest.raises(InputError, match=r"vocabulary identity: n_vocab"):
        require_vocabulary({"sha256": "0" * 64, "n_vocab": "many", "scheme": "x"}, trained.tokenizer)
    looped: dict[str, object] = {}
    looped["vocabulary"] = looped
    with pytest.raises(InputError):
        require_vocabulary(looped, trained.tokenizer)
    assert tokenizer_for(schedule, trained.vocabulary_path).identity == trained.identity
    assert Pack(pack_of_documents([[1]], n_vocab=2)).n_docs == 1


# --- Item 12: processes and leftovers ------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_a_sharded_prepare_leaves_no_worker_running(tmp_path: Path) -> None:
    import time

    (tmp_path / "pids").mkdir()
    script = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).parents[1] / 'support')!r})
from shard_faults import record_pid_and_sleep
import multiprocessing.managers as managers
import tokpack.engines.executors as executors
start = managers.SyncManager.start
def recorded(self, *args, **kwargs):  # the manager's pid too
    start(self, *args, **kwargs)
    open(os.path.join({str(tmp_path / 'pids')!r}, str(self._process.pid)), "w").close()
managers.SyncManager.start = recorded
executors.run_local({str(tmp_path)!r}, [0, 1], processes=2, task=record_pid_and_sleep)
"""
    driver = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(Path(tokpack.__file__).parents[1])})
    deadline = time.monotonic() + 60
    while len(list((tmp_path / "pids").iterdir())) < 3 and time.monotonic() < deadline:  # 2 workers + the manager
        time.sleep(0.2)
    pids = [int(p.name) for p in (tmp_path / "pids").iterdir()]
    assert len(pids) == 3, pids
    assert not survivors_of_kill_9(driver, pids), "workers of a killed job kept running"


def test_a_shard_task_goes_on_when_the_progress_queue_process_is_gone() -> None:
    from tokpack._progress import PrepareProgress
    from tokpack.engines.executors import ShardReporter

    class Gone:
        def put(self, item: object) -> None:
            raise ConnectionRefusedError(111, "Connection refused")

    ShardReporter(Gone(), 0)(PrepareProgress("encoding", 1, 2))  # no error: progress is for show


def test_a_read_only_cache_that_holds_the_pack_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tokpack._cache as cache_module

    first = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "cache", **SMALL)

    def read_only(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "a" in mode or "w" in mode:
            raise OSError(30, "Read-only file system", str(path))
        return open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(cache_module, "open", read_only, raising=False)
    again = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "cache", **SMALL)
    assert again.tokens_dir == first.tokens_dir
    with pytest.raises(InputError, match=r"\.lock: cannot create the lock \(Read-only file system\)"):
        prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "cache", **{**SMALL, "document_bytes": 2048})


def test_temporaries_carry_the_host_and_only_their_own_host_removes_them(tmp_path: Path) -> None:
    import socket

    from tokpack._atomic import remove_abandoned, temporary_sibling

    destination = tmp_path / "pack"
    mine = temporary_sibling(destination)
    assert f"{os.getpid()}@" in mine.name and mine.name.split("@")[1].startswith(socket.gethostname().split(".")[0][:8].replace("-", "_"))
    dead_here = tmp_path / mine.name.replace(f"{os.getpid()}@", "999999999@")
    dead_elsewhere = tmp_path / ".pack.tmp-999999999@another.host-0a0b0c0d"
    dead_here.mkdir()
    dead_elsewhere.mkdir()
    assert remove_abandoned(destination) == 1
    assert mine.exists() and dead_elsewhere.exists() and not dead_here.exists()


def test_a_killed_writers_partial_file_is_removed_by_the_next_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tokpack._atomic import _owner, write_atomically
    from tokpack.bpe.challenge import make_proof, new_challenge, write_proof

    proof_path = tmp_path / "proof.json"
    dead_here = tmp_path / f".proof.json.{_owner().replace(str(os.getpid()), '999999999')}-0a0b0c0d.partial"
    dead_elsewhere = tmp_path / ".proof.json.999999999@another.host-0a0b0c0d.partial"
    alive_here = tmp_path / f".proof.json.{_owner()}-0a0b0c0d.partial"
    for leftover in (dead_here, dead_elsewhere, alive_here):
        leftover.write_text("{")  # what kill -9 mid-write leaves
    write_proof(make_proof(new_challenge(["aaab", "abab"], 2, challenge_id="c")), proof_path)
    assert proof_path.is_file() and not dead_here.exists() and dead_elsewhere.exists() and alive_here.exists()

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "other.json", "{}")
    assert not list(tmp_path.glob(".other.json.*"))


def test_merge_removes_what_a_killed_merge_left_behind(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tokpack._atomic import _owner
    from tokpack.cli import app

    dataset = sharded(tmp_path / "dataset")
    leftover = tmp_path / f".merged.tmp-{_owner().replace(str(os.getpid()), '999999999')}-0a0b0c0d"
    leftover.mkdir()
    (leftover / "tokens.npy").write_bytes(b"half")  # what kill -9 mid-merge leaves
    result = CliRunner().invoke(app, ["merge", str(dataset), str(tmp_path / "merged")])
    assert result.exit_code == 0, result.output
    assert not leftover.exists() and (tmp_path / "merged" / "meta.json").is_file()


# --- Item 13: loaders and arguments ---------------------------------------------------------------

def test_loader_and_schedule_arguments_are_checked(tmp_path: Path) -> None:
    import torch  # noqa: F401  (the loader is torch's)

    from tokpack.serve.fixed import TokenBatches, Windows
    from tokpack.torch import WindowDataset, make_loader

    pack = small_pack(tmp_path / "pack")
    dataset = WindowDataset(Windows(pack, block=2))
    with pytest.raises(InputError, match=r"batch_size 5 is larger than the dataset's 4 windows"):
        make_loader(dataset, batch_size=5)
    assert len(list(make_loader(dataset, batch_size=5, drop_last=False))) == 1
    with pytest.raises(InputError, match=r"block must be an integer of at least 2"):
        Windows(pack, block=2.5)  # type: ignore[arg-type]
    loader = make_loader(dataset, batch_size=2)
    state = loader.state_dict() | {"position": 1.5}
    with pytest.raises(InputError, match=r"position 1\.5"):
        make_loader(dataset, batch_size=2).load_state_dict(state)
    with pytest.raises(InputError, match=r"a batch of 1,000,000,000 rows of 2 ids is larger than the training range \(14 ids\)"):
        TokenBatches(pack, batch=10**9, length=2)  # refused before it allocates
    with pytest.raises(InputError, match=r"step must be a non-negative integer"):
        TokenBatches(pack, batch=1, length=2).ids(1.5)  # type: ignore[arg-type]


def test_a_datatrove_index_with_trailing_bytes_is_refused(tmp_path: Path) -> None:
    from tokpack.store import DatatroveFolder

    vocab = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "v", **SMALL).vocabulary_path
    folder = tmp_path / "datatrove"
    folder.mkdir()
    np.array([1, 2, 3, 4], "<u2").tofile(folder / "000.ds")
    (folder / "000.ds.index").write_bytes(np.array([2, 4], "<u8").tobytes() + b"\x00\x00\x00")
    with pytest.raises(IntegrityError, match=r"000\.ds\.index: 19 bytes is not a whole number of 8-byte document ends"):
        DatatroveFolder(folder, tokenizer=vocab)


def test_an_empty_corpus_does_not_train_a_vocabulary(tmp_path: Path) -> None:
    corpus = tmp_path / "empty.txt"
    corpus.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.txt: no training text to learn 43 merges from"):
        prepare(corpus, cache_dir=tmp_path / "cache", **SMALL)
    assert not list((tmp_path / "cache").glob("vocab/*/vocabulary.json"))


def test_a_proof_with_a_string_frequency_is_refused() -> None:
    from pydantic import ValidationError

    from tokpack.bpe.records import TraceRow

    assert TraceRow.model_validate({"left_id": 97, "right_id": 98, "result_id": 256, "frequency": 5}).frequency == 5
    for bad in ("5", 5.0, True):
        with pytest.raises(ValidationError):
            TraceRow.model_validate({"left_id": 97, "right_id": 98, "result_id": 256, "frequency": bad})


def test_prepare_uses_the_pack_another_node_published_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where flock is node-local, two nodes may build one pack at once: the loser uses the winner's."""
    import shutil

    import tokpack._cache as cache_module
    import tokpack.preparing.preparation as preparation

    reference = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "a", **SMALL)
    monkeypatch.setattr(cache_module.fcntl, "flock", lambda *args: None)  # a lock that locks nothing
    original = preparation.write_pack

    def racing(source: object, tokenizer: object, pack_dir: Path, **options: object) -> None:
        shutil.copytree(reference.tokens_dir, pack_dir)  # the other node finishes first
        original(source, tokenizer, pack_dir, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(preparation, "write_pack", racing)
    prepared = prepare(SAMPLE / "polish.txt", vocab=reference.vocabulary_path, cache_dir=tmp_path / "b", **GIVEN)
    assert prepared.meta == reference.meta


def test_a_failed_validation_month_leaves_no_train_pack_behind(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tokpack.cli import app

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    runner = CliRunner()
    converted = runner.invoke(app, ["chess", "convert", str(fixtures / "chess_games.pgn"), "--out", str(tmp_path / "games")])
    assert converted.exit_code == 0, converted.output
    months = json.loads((tmp_path / "games" / "convert-report.json").read_text(encoding="utf-8"))["months"]
    train = max(months, key=lambda month: months[month])
    config = tmp_path / "pipeline.toml"

    def tokenize(val: str) -> object:
        config.write_text(f'games_dir = "games"\nout_dir = "tokens"\ntrain_month = "{train}"\nval_month = "{val}"\n',
                          encoding="utf-8")
        return runner.invoke(app, ["chess", "tokenize", "--scheme", "uci", "--pack", "--config", str(config)])

    failed = tokenize("2099-01")  # no such month
    assert failed.exit_code == 2, failed.output  # type: ignore[attr-defined]
    assert not (tmp_path / "tokens" / "uci" / "train").exists()
    rerun = tokenize(train)
    assert rerun.exit_code == 0, rerun.output  # type: ignore[attr-defined]


def test_a_padding_id_the_encoder_can_emit_is_refused_even_when_absent_from_the_stream(tmp_path: Path) -> None:
    from tokpack.preparing import TokenizedCorpus

    prepared = prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "cache", **SMALL)
    present = set(np.unique(prepared.pack().tokens).tolist())
    absent = next(i for i in range(256) if i not in present)  # an ordinary byte id the stream does not hold
    reseal(prepared.tokens_dir / "meta.json", pad_id=absent)
    with pytest.raises(IntegrityError, match=rf"pad_id {absent} is an ordinary token of"):
        TokenizedCorpus(prepared.tokens_dir, prepared.vocabulary_path)
    with pytest.raises(IntegrityError, match=rf"pad_id {absent}"):
        prepare(SAMPLE / "polish.txt", cache_dir=tmp_path / "cache", **SMALL)


def test_a_missing_path_is_said_missing_and_a_file_is_no_pack(tmp_path: Path) -> None:
    from tokpack.store import Pack

    with pytest.raises(InputError, match="no such file or folder"):
        Pack(tmp_path / "nowhere")
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="not a pack directory"):
        Pack(tmp_path / "file.txt")
