"""The ``prepare`` command tunes its own process (a rarer garbage collector, numba's extensions
not loaded): settings for the command's run only. A program that runs the command in its own
process (``tokpack.cli.main``, click's test runner) gets its process back as it was when the
command returns."""

from __future__ import annotations

import base64
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tokpack

AFTER_THE_COMMAND = """
import gc
import sys
threshold = gc.get_threshold()
from tokpack.cli import main
corpus, ranks, cache = sys.argv[1:4]
sys.argv = ["tokpack", "prepare", corpus, "--vocab", ranks, "--pattern", "gpt2", "--cache-dir", cache, "--json"]
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
assert gc.get_threshold() == threshold, (gc.get_threshold(), threshold)
import awkward
import numba

@numba.njit
def total(rows):
    s = 0
    for row in rows:
        for x in row:
            s += x
    return s

print("total", total(awkward.Array([[1, 2], [3]])), file=sys.stderr)
"""


@pytest.mark.skipif(importlib.util.find_spec("awkward") is None, reason="needs a package that registers a numba extension")
def test_a_program_that_runs_prepare_in_its_own_process_gets_numba_extensions_and_its_collector_back(
        tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nsecond line here\n" * 20, encoding="utf-8")
    ranks = tmp_path / "tiny.tiktoken"  # 256 bytes and two merges: no download
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines += [f"{base64.b64encode(token).decode()} {256 + n}" for n, token in enumerate([b"he", b"ll"])]
    ranks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    environment = dict(os.environ, PYTHONPATH=str(Path(tokpack.__file__).parents[1]), TOKPACK_CACHE=str(tmp_path / "stamps"))
    done = subprocess.run([sys.executable, "-c", AFTER_THE_COMMAND, str(corpus), str(ranks), str(tmp_path / "cache")],
                          capture_output=True, text=True, env=environment, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == "total 6"
