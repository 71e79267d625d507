"""CPU seconds of ``tokpack --help`` (and a group's and a command's --help), against a baseline commit.

The baseline's sources are checked out into a detached git worktree (removed afterwards) and both
run with the same interpreter, each with its own ``src`` first on ``PYTHONPATH``; runs alternate
(baseline, current, baseline, ...) so that the machine's load falls on both alike. CPU time (user
+ system) of each child process, from ``resource.getrusage(RUSAGE_CHILDREN)``, the median of N:

    python bench/bench_startup.py                 # against 551f05c, 10 runs each
    python bench/bench_startup.py --baseline HEAD~3 --runs 20

Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The last commit before the command line loaded its commands' libraries lazily.
BASELINE = "551f05c"
COMMANDS = (["--help"], ["bpe", "--help"], ["prepare", "--help"])
# The installed console script runs `tokpack.cli:script` (`main` before it existed); `-c` does the
# same without depending on which tree the script was installed from.
ENTRY = "import sys, tokpack.cli as cli; sys.argv[0] = 'tokpack'; getattr(cli, 'script', cli.main)()"


def cpu_seconds(src: Path, args: list[str]) -> float:
    """User + system CPU seconds of one ``tokpack ARGS`` process running the sources in ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "100"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", ENTRY, *args], env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="Commit to compare with (default: %(default)s).")
    parser.add_argument("--runs", type=int, default=10, help="Runs of each command on each side (default: %(default)s).")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="tokpack-bench-startup-"))
    tree = scratch / "baseline"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), args.baseline], check=True)
    try:
        sides = {"baseline": tree / "src", "tokpack": REPO / "src"}
        for src in sides.values():  # warm the file cache and the bytecode of both sides once
            cpu_seconds(src, ["--help"])
        rows = []
        for command in COMMANDS:
            times: dict[str, list[float]] = {side: [] for side in sides}
            for _ in range(args.runs):
                for side, src in sides.items():
                    times[side].append(cpu_seconds(src, command))
            median = {side: statistics.median(values) for side, values in times.items()}
            rows.append((command, median["baseline"], median["tokpack"]))
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"CPU seconds (user + system) of one process, median of {args.runs}, interleaved; "
          f"Python {platform.python_version()}, {os.cpu_count()} cores; baseline {args.baseline}\n")
    print(f"| command | {args.baseline} | this tree | ratio |")
    print("|---|---:|---:|---:|")
    for command, old, new in rows:
        print(f"| `tokpack {' '.join(command)}` | {old:.3f} | {new:.3f} | {old / new:.1f}x |")


if __name__ == "__main__":
    main()
