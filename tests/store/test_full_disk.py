"""A full disk is said with the path being written and the fix, never a bare ``[Errno 28]``: a
pack's folder, a corpus decompressed into ``$TMPDIR``. The disk is a real one: a small tmpfs
(skipped where mounting is not allowed)."""

from __future__ import annotations

import gzip
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokpack import prepare
from tokpack.cli import app
from tokpack.errors import InputError

from conftest import DATA


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 96 KiB file system, mounted for the test."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode(errors='replace').strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_bytes(b"".join(p.read_bytes() for p in sorted((DATA / "polish" / "technical").rglob("*.txt")))[:600_000])
    return path


def test_a_pack_on_a_full_disk_names_its_folder_and_the_fix(small_disk: Path, corpus: Path, tmp_path: Path) -> None:
    out = small_disk / "pack"
    with pytest.raises(InputError) as caught:
        prepare(corpus, cache_dir=tmp_path / "cache", vocab_size=300, out=out)
    assert str(caught.value) == (f"{out}: no space left on its disk (No space left on device); free space on that disk, "
                                 "or write to another one")
    assert not out.exists() and [p.name for p in small_disk.iterdir() if not p.name.endswith(".lock")] == []
    result = CliRunner().invoke(app, ["prepare", str(corpus), "--vocab-size", "300", "--cache-dir", str(tmp_path / "cache"),
                                      "-o", str(out)])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [f"error: {caught.value}"]


def test_a_compressed_corpus_that_does_not_fit_in_tmpdir_says_so(small_disk: Path, corpus: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(corpus.read_bytes()))
    monkeypatch.setattr(tempfile, "tempdir", str(small_disk))  # $TMPDIR, as tempfile read it
    with pytest.raises(InputError, match=f"^{small_disk}: no space left on its disk .*; a compressed corpus is "
                                         "decompressed there to be read: set TMPDIR to a folder on a disk with room for "
                                         "corpus.txt.gz's text$"):
        prepare(packed, cache_dir=tmp_path / "cache", vocab_size=300)


def test_a_pack_above_the_file_size_limit_names_its_folder_and_leaves_nothing(tmp_path: Path) -> None:
    """A file the file system or ``ulimit -f`` cannot take (``EFBIG``: FAT32's 4 GiB, a batch
    system's limit) is said as a full disk is, and the pack's half-written folder is removed."""
    import base64
    import random
    import resource
    import sys

    ranks = tmp_path / "ranks.tiktoken"
    ranks.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    corpus = tmp_path / "corpus.txt"
    rng = random.Random(0)
    corpus.write_text("".join(rng.choice("abcdefgh ") for _ in range(60_000)) + "\n")  # its ids: 240 KB
    out = tmp_path / "packs" / "pack"
    limit = 32 << 10  # above every file but tokens.npy

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = subprocess.run([sys.executable, "-c", "from tokpack.cli import script; script()", "prepare", str(corpus), "--vocab", str(ranks), "--pattern", "gpt2",
                          "--cache-dir", str(tmp_path / "cache"), "-o", str(out)],
                         capture_output=True, text=True, preexec_fn=limited, check=False)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"error: {out}: too large for its file system, or above this process's file size limit (File too large); "
        "write to a file system that takes larger files, or raise the limit (ulimit -f)"]
    assert not out.exists() and [p.name for p in out.parent.iterdir() if not p.name.endswith(".lock")] == []
