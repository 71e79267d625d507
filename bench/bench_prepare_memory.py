"""Peak memory of ``tokpack prepare`` as the corpus grows: it must stay flat (the piece caches
and buffers have fixed sizes, and freed memory goes back to the system every 64 MiB of text).

    PYTHONPATH=src .venv/bin/python bench/bench_prepare_memory.py [--baseline /path/to/other/src] \\
        [--copies 3 13 20] [--workers 2]

The corpus is this interpreter's own standard library sources (``*.py`` under ``sysconfig``'s
``stdlib``, in sorted order, about 50 MB), copied ``--copies`` times into one file: code with
documents of uneven sizes, on which glibc's heap grows with the corpus unless freed memory is
returned (figures: BENCHMARKS.md, "prepare's peak memory"). Each run is ``tokpack prepare FILE --vocab
cl100k_base.tiktoken --workers W`` in a fresh process with a fresh cache; peak RSS is the
process's own (``wait4``'s ``ru_maxrss``), with its CPU seconds. With ``--baseline``, the other
checkout runs each corpus right after this one.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib import resources
from pathlib import Path


def stdlib_sources(target: Path) -> int:
    """The standard library's sources as one UTF-8 file (undecodable bytes dropped); its size."""
    root = Path(sysconfig.get_paths()["stdlib"])
    with open(target, "wb") as out:
        for path in sorted(root.rglob("*.py")):
            if "site-packages" in path.parts or not path.is_file():
                continue
            out.write(path.read_bytes().decode("utf-8", "ignore").encode("utf-8"))
    return target.stat().st_size


def cl100k(folder: Path) -> Path:
    path = folder / "cl100k_base.tiktoken"
    if not path.exists():
        packed = resources.files("bpe_openai.data").joinpath("cl100k_base.tiktoken.gz").read_bytes()
        path.write_bytes(gzip.decompress(packed))
    return path


def run(src: Path, corpus: Path, ranks: Path, workers: int, scratch: Path) -> tuple[float, float, float]:
    """Peak RSS (MB), CPU seconds and wall seconds of one prepare in a fresh process and cache."""
    cache = scratch / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    command = [str(Path(sys.executable).parent / "tokpack"), "prepare", str(corpus), "--vocab", str(ranks),
               "--workers", str(workers), "--cache-dir", str(cache), "--json"]
    environment = dict(os.environ, PYTHONPATH=str(src), TOKPACK_CACHE=str(cache))
    start = time.perf_counter()
    child = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{src}: prepare failed: {child.stderr.read().decode()[-2000:] if child.stderr else ''}")
    shutil.rmtree(cache, ignore_errors=True)
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="another checkout's src, run right after this one")
    parser.add_argument("--copies", type=int, nargs="+", default=[3, 13, 20])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1] / "src"
    with tempfile.TemporaryDirectory(prefix="tokpack-memory-") as folder:
        scratch = Path(folder)
        unit = scratch / "stdlib.py.txt"
        unit_bytes = stdlib_sources(unit)
        ranks = cl100k(scratch)
        rows = []
        for copies in args.copies:
            corpus = scratch / "corpus.txt"
            with open(corpus, "wb") as out:
                for _ in range(copies):
                    with open(unit, "rb") as part:
                        shutil.copyfileobj(part, out)
            for name, src in [("this checkout", here)] + ([("baseline", args.baseline)] if args.baseline else []):
                peak, cpu, wall = run(src, corpus, ranks, args.workers, scratch)
                rows.append(f"| {copies * unit_bytes / 1e6:,.0f} | {name} | {peak:,.0f} | {cpu:.2f} | {wall:.2f} |")
                print(rows[-1], flush=True)
            corpus.unlink()
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"--workers {args.workers}, cl100k's ranks; the corpus: the standard library's sources ({unit_bytes / 1e6:.0f} MB) "
          "copied\n")
    print("| corpus (MB) | checkout | peak RSS (MB) | CPU s | wall s |\n|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
