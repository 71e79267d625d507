"""What running the suite in parallel (pytest-xdist) relies on, and what a user relies on with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

# The app imported while COLUMNS says 80 (as an xdist worker's environment does), then invoked
# in-process with COLUMNS=200, as a wrapper script or typer's CliRunner does.
_SCRIPT = """
import os
os.environ["COLUMNS"] = "80"
from rich.table import Table
from tokpack.cli._console import console
os.environ["COLUMNS"] = "200"
table = Table(show_header=False)
table.add_column(no_wrap=True)
table.add_column(overflow="fold")
table.add_row("vocabulary sample", "trained on 10.0 of 18.5 MB, 412 documents spread over the range " + "x" * 60)
console.print(table)
print(console.width)
"""


def test_the_console_takes_its_width_when_it_prints_not_when_imported() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("COLUMNS", None)
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[-1] == "200", out
    assert any("spread over the range " + "x" * 60 in line for line in lines), out  # one line, not folded at 80


def test_the_files_that_took_longest_start_first_and_keep_their_tests_in_order(tmp_path: Path) -> None:
    """With whole files handed to workers as they free up, a long file started last leaves the
    other worker idle: the last run's seconds per file (pytest's cache) order the next run."""
    for name, seconds in (("test_short.py", 0.0), ("test_long.py", 0.6)):
        (tmp_path / name).write_text(f"import time\n\ndef test_one():\n    time.sleep({seconds})\n\n\n"
                                     "def test_two():\n    pass\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(REPO / 'tests' / 'support')!r})\n"
                                          "from file_order import pytest_collection_modifyitems, pytest_runtest_logreport, "
                                          "pytest_sessionfinish\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def order() -> list[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-v",
                              "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
        return [line.split(" ")[0] for line in out.splitlines() if " PASSED" in line]

    collected = order()  # no record yet: as collected
    assert collected == ["test_long.py::test_one", "test_long.py::test_two", "test_short.py::test_one",
                         "test_short.py::test_two"], collected
    (tmp_path / "test_short.py").write_text((tmp_path / "test_short.py").read_text().replace("sleep(0.0)", "sleep(1.2)"))
    order()  # the record: short took 1.2 s
    assert order()[:2] == ["test_short.py::test_one", "test_short.py::test_two"]
