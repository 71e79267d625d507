"""The ``prepare`` command tunes its own process (a rarer garbage collector, numba's extensions
not loaded; in the ``tokpack`` script's process, numpy's BLAS on one thread and no pydantic
plugins): settings for the command's run only. A program that runs the command in its own process
(``tokpack.cli.main``, click's test runner) gets its process back as it was when the command
returns."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import tokpack

AFTER_THE_COMMAND = """
import gc
import os
import sys
threshold = gc.get_threshold()
os.environ.pop("OPENBLAS_NUM_THREADS", None)
os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
from tokpack.cli import main
corpus, ranks, cache, mark = sys.argv[1:5]
sys.argv = ["tokpack", "prepare", corpus, "--vocab", ranks, "--pattern", "gpt2", "--cache-dir", cache, "--json"]
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
assert gc.get_threshold() == threshold, (gc.get_threshold(), threshold)
assert "OPENBLAS_NUM_THREADS" not in os.environ, "main() changed the program's environment"
assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ, "main() changed the program's environment"
assert not os.path.exists(mark), "the command loaded the numba extension"
import numba

@numba.njit
def twice(x):
    return 2 * x

assert twice(21) == 42
print(open(mark).read().strip(), file=sys.stderr)
"""

#: A package that registers a numba extension (as awkward does), made in the test: its ``init``
#: leaves a mark when numba loads it.
EXTENSION = {
    "tokpack_test_numba_extension.py": "import os\n\ndef init():\n"
                                       "    with open(os.environ['EXTENSION_MARK'], 'a') as f:\n"
                                       "        f.write('loaded')\n",
    "tokpack_test_numba_extension-0.1.dist-info/METADATA":
        "Metadata-Version: 2.1\nName: tokpack-test-numba-extension\nVersion: 0.1\n",
    "tokpack_test_numba_extension-0.1.dist-info/entry_points.txt":
        "[numba_extensions]\ninit = tokpack_test_numba_extension:init\n",
}


def test_a_program_that_runs_prepare_in_its_own_process_gets_numba_extensions_and_its_collector_back(
        tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nsecond line here\n" * 20, encoding="utf-8")
    ranks = tmp_path / "tiny.tiktoken"  # 256 bytes and two merges: no download
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines += [f"{base64.b64encode(token).decode()} {256 + n}" for n, token in enumerate([b"he", b"ll"])]
    ranks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    site = tmp_path / "site"
    for name, text in EXTENSION.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text, encoding="utf-8")
    mark = tmp_path / "extension-loaded"
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(tokpack.__file__).parents[1]), str(site)]),
                       TOKPACK_CACHE=str(tmp_path / "stamps"), EXTENSION_MARK=str(mark))
    done = subprocess.run([sys.executable, "-c", AFTER_THE_COMMAND, str(corpus), str(ranks), str(tmp_path / "cache"),
                           str(mark)], capture_output=True, text=True, env=environment, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == "loaded"


#: The ``tokpack`` script's own process (:func:`tokpack.cli.script`) running ``prepare``: the
#: threads alive as it exits (OpenBLAS's, started at numpy's import, live to the end).
THE_SCRIPT = """
import atexit
import os
import sys
os.environ.pop("OPENBLAS_NUM_THREADS", None)
os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
import tokpack.cli as cli
assert "numpy" not in sys.modules, "the command line imported numpy before the command ran"
atexit.register(lambda: print(os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")),
                              os.environ.get("PYDANTIC_DISABLE_PLUGINS"), file=sys.stderr))
corpus, ranks, cache = sys.argv[1:4]
sys.argv = ["tokpack", "prepare", corpus, "--vocab", ranks, "--pattern", "gpt2", "--cache-dir", cache, "--json"]
cli.script()
"""


def test_the_tokpack_script_runs_prepare_without_blas_threads_or_pydantic_plugins(tmp_path: Path) -> None:
    if not os.path.isdir("/proc/self/task"):
        import pytest

        pytest.skip("counting a process's threads needs Linux's /proc")
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nsecond line here\n" * 20, encoding="utf-8")
    ranks = tmp_path / "tiny.tiktoken"
    ranks.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)), encoding="utf-8")
    environment = dict(os.environ, PYTHONPATH=str(Path(tokpack.__file__).parents[1]),
                       TOKPACK_CACHE=str(tmp_path / "stamps"))
    done = subprocess.run([sys.executable, "-c", THE_SCRIPT, str(corpus), str(ranks), str(tmp_path / "cache")],
                          capture_output=True, text=True, env=environment, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    setting, threads, plugins = done.stderr.strip().splitlines()[-1].split()
    assert setting == "1" and plugins == "__all__"
    assert threads == "1", f"{threads} threads alive at exit: numpy's BLAS started its own"
