"""A ``prepare`` killed mid-run (SIGKILL: no clean-up at all) leaves nothing that blocks a rerun:
the lock file it held is taken again (the lock died with its process), and its temporary pack
folder, on this host and of a process that is gone, is removed by the rerun, which writes a
whole pack. The corpus is one word of 6 MB in one document: a second or so of merging to be
killed in (one of more than 2**24 bytes once never finished: test_encoder_long_pieces.py)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tokpack import prepare


def _leftovers(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if ".tmp-" in p.name or p.name.endswith(".lock")]


def test_a_prepare_killed_mid_run_leaves_nothing_that_blocks_a_rerun(gpt2_rank_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "one-word.txt"
    rng = random.Random(0)
    corpus.write_bytes(bytes(rng.choices(b"etaoinshrdlu", k=3_000_000)))
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "tokpack.cli", "prepare", str(corpus), "--vocab", str(gpt2_rank_file),
               "--cache-dir", str(cache), "--document-bytes", "3000000", "--workers", "1"]
    running = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=dict(os.environ, TOKPACK_CACHE=str(tmp_path / "home-cache")))
    try:
        deadline = time.monotonic() + 120
        while not any(".tmp-" in p.name for p in cache.rglob("*")) and running.poll() is None:
            assert time.monotonic() < deadline, "prepare never began writing its pack"
            time.sleep(0.01)
        assert running.poll() is None, "prepare finished before it could be killed mid-run"
    finally:
        running.send_signal(signal.SIGKILL)
        running.wait()
    assert _leftovers(cache), "the killed run left no temporary pack behind (nothing was tested)"
    again = prepare(corpus, vocab=gpt2_rank_file, cache_dir=cache, document_bytes=3_000_000, workers=1)
    assert not _leftovers(cache)
    pack = again.pack()
    assert len(pack.document_bounds()) == 1 and again.meta.n_tokens > 250_000
    assert again.tokenizer.decode_bytes(pack.document(0).tolist()) == corpus.read_bytes()
