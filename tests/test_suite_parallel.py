"""What running the suite in parallel (pytest-xdist) relies on, and what a user relies on with it."""

from __future__ import annotations

import os
import subprocess
import sys

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
