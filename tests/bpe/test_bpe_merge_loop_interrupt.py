"""Ctrl-C while the compiled merge loop runs: ``prepare`` training its vocabulary stops as anywhere
else (one line, exit 130, no lock, nothing written), where boxing the loop's result with the
interrupt pending was a segmentation fault.

The command runs in a subprocess through a driver that changes two private things: every merge
is done in one call of the compiled loop (``fast._MERGES_PER_REPORT``), a long one, and a line
on stderr says that call starts (after numba has loaded or compiled it, and typed its
arguments). Ctrl-C comes when the line does, so it lands inside the compiled loop."""

from __future__ import annotations

import random
import signal
import sys
from pathlib import Path

from processes import signalled_at_cue

_DRIVER = """
import sys

import numba

from tokpack.bpe import fast, merge_loop
from tokpack.cli import script

compiled = merge_loop._merge


def announced(*args):
    # The compiled function itself (from numba's cache, or compiled), before the cue: calling it
    # runs no Python before the loop (the dispatcher's typing of the arguments would).
    loop = compiled.compile(tuple(numba.typeof(arg) for arg in args))
    print("merging", file=sys.stderr, flush=True)
    return loop(*args)


fast._MERGES_PER_REPORT = 1 << 40
merge_loop._merge = announced
sys.argv = ["tokpack", *sys.argv[1:]]
script()
"""


def _words_corpus(path: Path, size: int) -> None:
    """Sentences of made-up words: pairs enough for tens of thousands of merges (a second or more
    of merging, one call of the compiled loop)."""
    rng = random.Random(0)
    syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiouy"] + list("aeiou")
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 5))) for _ in range(100_000)]
    lines, written = [], 0
    while written < size:
        lines.append(" ".join(rng.choices(words, k=12)) + ".\n")
        written += len(lines[-1])
    path.write_text("".join(lines), encoding="utf-8")


def test_ctrl_c_in_the_merge_loop_of_a_prepare_stops_it_cleanly(tmp_path: Path) -> None:
    corpus = tmp_path / "words.txt"
    _words_corpus(corpus, 3_000_000)
    cache, out = tmp_path / "cache", tmp_path / "out"
    command = [sys.executable, "-X", "faulthandler", "-c", _DRIVER, "prepare", str(corpus), "--cache-dir", str(cache),
               "--vocab-size", "30000", "--allow-smaller-vocab", "-o", str(out)]
    returncode, errors = signalled_at_cue(command, "merging\n", signal.SIGINT, timeout=300)
    assert returncode == 130, errors
    assert errors.strip().splitlines() == ["interrupted: nothing half-written is kept; a sharded job keeps its complete "
                                           "shards and resumes when rerun"], errors
    assert not out.exists()
    assert not [path for path in tmp_path.rglob("*") if path.name.endswith(".lock") or ".tmp-" in path.name]
    assert not (cache / "vocab").exists() or not list((cache / "vocab").iterdir()), "a vocabulary was kept"
