"""Sharded jobs as their shards multiply: CPU and wall seconds per shard, text and chess.

    PYTHONPATH=src .venv/bin/python bench/bench_shard_finish.py --shards 100 400 1600 \\
        --chess-games 200 800 --baseline /path/to/other/src --baseline-up-to 400

Each job runs as a user runs it, in a fresh process with a fresh ``TOKPACK_CACHE``:

  text    ``tokpack prepare CORPUS --vocab V --shards N --workers 2 -o OUT``, one corpus for
          every N: four documents for each shard of the largest job (lines of ``data/polish``,
          documents of at most 512 bytes). Every task reads the whole input (it hashes it
          against the job's pins and cuts it to find its units), so a task's own work is the
          same for every N: a job linear in shards costs the same for each further shard;
  chess   ``tokpack chess tokenize --scheme uci --pack --shard-games 1 --workers 2``: one game a
          shard, the first games of ``data/chess/games.parquet`` as one training month (and ten
          more as the validation month).

The vocabulary is the 256 bytes, 64 merges learnt from the sample corpus and ``<|endoftext|>``:
its training is not measured. CPU seconds are the job's process and every process it waited for
(its shard workers), from ``getrusage(RUSAGE_CHILDREN)``. ``--baseline SRC`` runs the same jobs
with another tokpack's ``src`` folder first on ``PYTHONPATH`` (up to ``--baseline-up-to``
shards: the baseline's time grows with the square of the shards), interleaved with this one
run by run; the two datasets' whole-stream checksums (``dataset.json``) must be equal. A job of
two shards of each kind runs first, unmeasured, so each tokpack's kernels are compiled and cached
before the clock starts. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
POLISH = ROOT / "data" / "polish"
GAMES = ROOT / "data" / "chess" / "games.parquet"
DOCUMENT_BYTES = 512
DOCUMENTS_A_SHARD = 4


def make_vocabulary(folder: Path) -> Path:
    """The byte vocabulary and 64 merges of the sample, saved as tokpack saves one."""
    sys.path.insert(0, str(SOURCE))
    from tokpack.bpe.fast import train_bytelevel
    from tokpack.corpus import sample_corpus

    train_bytelevel([sample_corpus().read_text(encoding="utf-8")], vocab_size=320).save(folder / "vocab")
    return folder / "vocab" / "vocabulary.json"


def make_corpus(path: Path, shards: int) -> None:
    """``DOCUMENTS_A_SHARD`` documents of just under ``DOCUMENT_BYTES`` a shard, real Polish lines."""
    lines = [line for file in sorted(POLISH.rglob("*.txt")) for line in file.read_text(encoding="utf-8").splitlines()
             if 20 < len(line.encode("utf-8")) < DOCUMENT_BYTES // 2]
    documents, at = [], 0
    while len(documents) < shards * DOCUMENTS_A_SHARD:
        document = ""
        while len((document + lines[at % len(lines)] + "\n").encode("utf-8")) <= DOCUMENT_BYTES:
            document += lines[at % len(lines)] + "\n"
            at += 1
        documents.append(document)
    path.write_text("".join(documents), encoding="utf-8")


def make_games(folder: Path, games: int) -> Path:
    """A converted tree of two months: ``games`` games to train on, ten to validate; its config."""
    import pyarrow.parquet as pq

    table = pq.read_table(GAMES)
    for month, rows in (("01", table.slice(0, games)), ("02", table.slice(games, 10))):
        (folder / "games" / "year=2016" / f"month={month}").mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, folder / "games" / "year=2016" / f"month={month}" / "games.parquet")
    config = folder / "tokpack-chess.toml"
    config.write_text('games_dir = "games"\nout_dir = "tokens"\ntrain_month = "2016-01"\nval_month = "2016-02"\n')
    return config


def run_job(kind: str, size: int, source: Path, work: Path, vocabulary: Path) -> dict[str, float | str]:
    """One job in a fresh process: its CPU and wall seconds and its stream checksum."""
    cache = work / "cache"
    env = {**os.environ, "PYTHONPATH": str(source), "TOKPACK_CACHE": str(cache)}
    if kind == "text":
        out = work / "dataset"
        command = ["-m", "tokpack.cli", "prepare", str(work.parent / "corpus.txt"), "--vocab", str(vocabulary),
                   "--shards", str(size), "--workers", "2", "-o", str(out), "--document-bytes", str(DOCUMENT_BYTES)]
        cwd = work
    else:
        out = work.parent / f"chess-{size}" / "tokens" / "uci" / "train"
        shutil.rmtree(out.parent, ignore_errors=True)
        command = ["-m", "tokpack.cli", "chess", "tokenize", "--scheme", "uci", "--pack", "--shard-games", "1",
                   "--workers", "2"]
        cwd = work.parent / f"chess-{size}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *command], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{kind} {size} with {source}: exit {done.returncode}\n{done.stderr[-2000:]}")
    record = json.loads((out / "dataset.json").read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shutil.rmtree(cache, ignore_errors=True)
    return {"cpu": cpu, "wall": wall, "stream": record["tokens_sha256"] + record["starts_sha256"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, nargs="*", default=[100, 400, 1600])
    parser.add_argument("--chess-games", type=int, nargs="*", default=[200, 800])
    parser.add_argument("--baseline", type=Path, help="another tokpack's src folder")
    parser.add_argument("--baseline-up-to", type=int, default=400, help="the largest job the baseline runs")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    sources = {"tokpack": SOURCE} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    jobs = [("text", n) for n in args.shards] + [("chess", n) for n in args.chess_games]
    results: dict[tuple[str, int, str], list[dict[str, float | str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        vocabulary = make_vocabulary(work)
        make_corpus(work / "corpus.txt", max(args.shards, default=1))
        for size in args.chess_games:
            make_games(work / f"chess-{size}", size)
        # Unmeasured: each tokpack compiles its kernels once (numba caches them beside its source).
        make_games(work / "chess-2", 2)
        for source in sources.values():
            for kind in ("text", "chess"):
                (work / "warm").mkdir()
                run_job(kind, 2, source, work / "warm", vocabulary)
                shutil.rmtree(work / "warm")
        for _ in range(args.runs):
            for kind, size in jobs:
                for name, source in sources.items():
                    if name == "baseline" and size > args.baseline_up_to:
                        continue
                    job = work / f"{kind}-{size}-{name}"
                    job.mkdir()
                    result = run_job(kind, size, source, job, vocabulary)
                    results.setdefault((kind, size, name), []).append(result)
                    print(f"{kind} {size} {name}: {result['cpu']:.1f} CPU s, {result['wall']:.1f} s", file=sys.stderr)
                    shutil.rmtree(job, ignore_errors=True)
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}; medians of {args.runs} run(s)\n")
    print("| job | shards | tokpack CPU s (per shard) | wall s | baseline CPU s (per shard) | wall s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for kind, size in jobs:
        mine = results[(kind, size, "tokpack")]
        theirs = results.get((kind, size, "baseline"))
        cpu, wall = statistics.median(float(r["cpu"]) for r in mine), statistics.median(float(r["wall"]) for r in mine)
        row = f"| {kind} | {size:,} | {cpu:.1f} ({cpu / size:.3f}) | {wall:.1f} |"
        if theirs:
            if {r["stream"] for r in theirs} != {r["stream"] for r in mine}:
                raise SystemExit(f"{kind} {size}: the baseline's stream differs")
            base = statistics.median(float(r["cpu"]) for r in theirs)
            row += f" {base:.1f} ({base / size:.3f}) | {statistics.median(float(r['wall']) for r in theirs):.1f} | {base / cpu:.2f}x |"
        else:
            row += " - | - | - |"
        print(row)
    print("\nCPU seconds each further shard costs, from one size to the next (constant when linear):\n")
    for name in sources:
        for kind in ("text", "chess"):
            sizes = sorted(size for k, size, n in results if k == kind and n == name)
            cpu = {size: statistics.median(float(r["cpu"]) for r in results[(kind, size, name)]) for size in sizes}
            steps = [f"{a:,} to {b:,}: {(cpu[b] - cpu[a]) / (b - a):.3f}" for a, b in zip(sizes, sizes[1:])]
            if steps:
                print(f"- {name}, {kind}: " + "; ".join(steps))


if __name__ == "__main__":
    main()
