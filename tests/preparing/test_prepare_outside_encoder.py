"""What ``prepare`` spends outside the encoder, asserted as behaviour (no timings): the pack it
writes is stamped as verified by the writer (its checksums are of the bytes written), so its own
first open does not read and hash them again, while a later change is still refused; and the
command line's process collects garbage rarely (the vocabulary's tables and files and numba's
first call make hundreds of thousands of lasting objects) and does not load the numba extensions of
unrelated packages (awkward's)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tokpack
from tokpack import prepare
from tokpack.errors import IntegrityError
from tokpack.store import Pack

TEXT = "Ala ma kota, a kot ma Alę. The cat sat on the mat; 12345 + 678 = 13023.\n" * 200


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification stamps go to this test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))


def test_prepare_does_not_hash_the_pack_it_just_wrote_again(tmp_path: Path, gpt2_rank_file: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    monkeypatch.setattr(Pack, "verify", lambda self, **_: pytest.fail("the new pack was hashed again"))
    prepared = prepare(corpus, vocab=gpt2_rank_file, pattern="gpt2", cache_dir=tmp_path / "cache", document_bytes=512)
    assert prepared.meta.n_tokens > 0 and prepared.pack().stamped()
    monkeypatch.undo()
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "stamps"))
    tokens = prepared.tokens_dir / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-2] ^= 0x01
    tokens.write_bytes(bytes(data))
    status = tokens.stat()
    os.utime(tokens, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))  # unlike the stamp's, whatever the tick
    with pytest.raises(IntegrityError, match=r"tokens\.npy: SHA-256 differs"):
        Pack(prepared.tokens_dir)


LOADED = """
import gc
import sys
default = gc.get_threshold()[0]
from pathlib import Path
corpus, ranks, cache, how = sys.argv[1:5]
during = {default}  # the collector's threshold at each collection while tokpack runs
gc.callbacks.append(lambda phase, info: during.add(gc.get_threshold()[0]))
import tokpack.store.writer as writer  # the threshold as the pack is committed (a run may collect nothing)
commit = writer.PackWriter.commit
writer.PackWriter.commit = lambda self, *args, **kwargs: during.add(gc.get_threshold()[0]) or commit(self, *args, **kwargs)
if how == "cli":
    from tokpack.cli import main
    sys.argv = ["tokpack", "prepare", corpus, "--vocab", ranks, "--pattern", "gpt2", "--cache-dir", cache, "--json"]
    try:
        main()
    except SystemExit as stop:
        assert not stop.code, stop.code
else:
    from tokpack import prepare
    # Training runs numba's kernels (encoding with given ranks no longer does): its rule applies.
    assert prepare(corpus, vocab_size=270, cache_dir=cache).meta.n_tokens > 0
gc.callbacks.clear()
print("awkward" in sys.modules, max(during) == default and "default" or max(during), file=sys.stderr)
"""


def test_the_command_line_collects_garbage_rarely_and_loads_no_unrelated_numba_extension_but_the_api_does(
        tmp_path: Path, gpt2_rank_file: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    environment = dict(os.environ, PYTHONPATH=str(Path(tokpack.__file__).parents[1]), TOKPACK_CACHE=str(tmp_path / "stamps"))
    loaded = {}
    for how in ("cli", "api"):
        done = subprocess.run([sys.executable, "-c", LOADED, str(corpus), str(gpt2_rank_file), str(tmp_path / how), how],
                              capture_output=True, text=True, env=environment, check=False, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        loaded[how] = done.stderr.strip().splitlines()[-1]
    # The command's process runs tokpack's kernels only; a program using the API keeps numba's
    # rule (extensions load before its first compiled call), as its own compiled code may need
    # them, and its own garbage collector's settings.
    registers = importlib.util.find_spec("awkward") is not None  # a package that registers a numba extension
    assert loaded == {"cli": "False 50000", "api": f"{registers} default"}


def test_prepare_encodes_little_text_on_one_thread_and_more_on_every_core(
        tmp_path: Path, gpt2_rank_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second thread brings a cold piece cache of its own: below ``ONE_THREAD_BYTES`` of text
    ``prepare`` encodes on one, from there on every core, and ``workers`` decides when given."""
    from tokpack.preparing import options
    from tokpack.vocab.bytelevel import BpeTokenizer

    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    asked: list[int | None] = []
    encode_arrays = BpeTokenizer.encode_arrays

    def counted(self: BpeTokenizer, texts: list[str], *, num_threads: int | None = None) -> object:
        asked.append(num_threads)
        return encode_arrays(self, texts, num_threads=num_threads)

    monkeypatch.setattr(BpeTokenizer, "encode_arrays", counted)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    settings = {"vocab": gpt2_rank_file, "pattern": "gpt2", "document_bytes": 512}
    ids = prepare(corpus, cache_dir=tmp_path / "small", **settings).pack().tokens[:]
    assert asked and set(asked) == {1}
    asked.clear()
    monkeypatch.setattr(options, "ONE_THREAD_BYTES", len(TEXT))  # the corpus is this large: every core
    assert (prepare(corpus, cache_dir=tmp_path / "large", **settings).pack().tokens[:] == ids).all()
    assert asked and set(asked) == {3}
    asked.clear()
    prepare(corpus, cache_dir=tmp_path / "given", workers=2, **settings)
    assert asked and set(asked) == {2}


IMPORTED = """
import sys
from tokpack.cli import main
sys.argv = ["tokpack", "prepare", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
print(sorted(name for name in sys.modules if name.startswith("tokpack.store") or name in ("concurrent.futures", "logging")),
      file=sys.stderr)
"""


def test_prepare_of_one_pack_imports_neither_sharded_datasets_nor_exports_nor_an_executor(tmp_path: Path,
                                                                                         gpt2_rank_file: Path) -> None:
    """``tokpack prepare FILE --vocab RANKS`` writes and opens one pack: the modules of sharded
    datasets, exports and foreign formats (their records' models too) stay unimported, and the
    summary still names the vocabulary the pack carries; encoding on one thread, ahead of the
    writer on another, imports neither ``concurrent.futures`` nor the ``logging`` it imports."""
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    environment = dict(os.environ, PYTHONPATH=str(Path(tokpack.__file__).parents[1]), TOKPACK_CACHE=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", IMPORTED, str(corpus), "--vocab", str(gpt2_rank_file), "--pattern", "gpt2",
                           "-o", str(tmp_path / "pack")], capture_output=True, text=True, env=environment, check=False,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"vocabulary in the pack: {tmp_path / 'pack' / 'vocabulary'}" in done.stdout
    imported = set(ast.literal_eval(done.stderr.strip().splitlines()[-1]))
    assert {"tokpack.store.writer", "tokpack.store.reader"} <= imported
    assert not imported & {"tokpack.store.dataset", "tokpack.store.sidecar", "tokpack.store.vocabulary",
                           "tokpack.store.formats", "tokpack.store.opening", "concurrent.futures", "logging"}


def test_no_encoding_outlives_a_prepare_whose_writer_fails(tmp_path: Path, gpt2_rank_file: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The next batch is encoded while the writer takes the last one: when the writer fails, the
    prepare raises only once that encoding is over, as an executor's block ends."""
    import threading
    import time

    from tokpack.store import writer
    from tokpack.vocab.bytelevel import BpeTokenizer

    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    calls: list[int] = []
    running: list[int] = []
    encode_arrays = BpeTokenizer.encode_arrays

    def slow(self: BpeTokenizer, texts: list[str], *, num_threads: int | None = None) -> object:
        calls.append(1)
        running.append(1)
        try:
            if len(calls) > 1:  # the batches after the first, encoding while the writer fails
                time.sleep(0.5)
            return encode_arrays(self, texts, num_threads=num_threads)
        finally:
            running.pop()

    def failing(self: object, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk is gone")

    monkeypatch.setattr(BpeTokenizer, "encode_arrays", slow)
    monkeypatch.setattr(writer.PackWriter, "add_documents", failing)
    with pytest.raises(RuntimeError, match="the disk is gone"):
        prepare(corpus, vocab=gpt2_rank_file, pattern="gpt2", document_bytes=512, batch_documents=2,
                cache_dir=tmp_path / "cache")
    assert len(calls) == 2 and running == []
    assert not [thread for thread in threading.enumerate() if thread.name == "tokpack-encode"]
