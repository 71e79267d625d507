"""``tokpack prepare`` end to end (read, cut, encode, write, hash, verify) with this checkout
against another checkout (the baseline), each run a fresh CLI process with a fresh cache.

    PYTHONPATH=src .venv/bin/python bench/bench_prepare_end_to_end.py --baseline /path/to/other/src \\
        [--runs 3] [--copies 9] [--workers 1 2] [--warm]

Corpora: "mixed" is one text file of whole ``data/polish`` and ``data/other`` files (shuffled, about
11 MB: Polish prose, numbers and code, English, many scripts, emoji; as ``bench_encode.py``'s);
"mixed xN" is a folder of N copies of it, one file each (N = ``--copies``), so the fixed costs
(imports, the vocabulary, the carried vocabulary files) weigh less. Vocabulary: GPT-2's ranks.

Each run is ``tokpack prepare CORPUS --vocab gpt2.tiktoken --pattern gpt2 --workers W`` in a new
process, with ``--cache-dir`` and ``$TOKPACK_CACHE`` a new empty folder, so nothing a run built
is reused by the next. CPU seconds are the process tree's (``RUSAGE_CHILDREN`` before and after,
user + system, worker processes included); wall is the parent's clock around the process. The
checkouts alternate (this, baseline, baseline, this, ...) so drift on a shared machine hits both;
every figure is a median. The packs' ``tokens.npy`` and ``starts.npy`` must be equal.

``--stages`` instead times, in a fresh process, each step ``prepare`` takes on "mixed" (CPU seconds
of ``time.process_time``, with the ``prepare`` command's process settings where the checkout has
them; run it with another checkout's ``src`` first on the path to compare).

``--warm`` adds rows where the cache is kept between runs (so what a vocabulary leaves in it is
reused) and only the pack is new (``--out`` a new folder): preparing another corpus with a
vocabulary used before.
"""

from __future__ import annotations

import argparse
import hashlib
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from corpus import mixed_documents  # noqa: E402


def mixed_text(megabytes: float) -> str:
    """Whole files of ``data/polish`` and ``data/other``, shuffled, until ``megabytes``, as one text."""
    return "\n".join(mixed_documents(megabytes))


def corpora(scratch: Path, copies: int) -> dict[str, Path]:
    single = scratch / "mixed.txt"
    if not single.exists():
        single.write_text(mixed_text(10.0), encoding="utf-8")
    folder = scratch / f"mixed-x{copies}"
    if not folder.exists():
        building = scratch / f".mixed-x{copies}.partial"
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        for copy in range(copies):
            shutil.copyfile(single, building / f"mixed-{copy:02d}.txt")
        building.rename(folder)
    return {"mixed": single, f"mixed x{copies}": folder}


def run_prepare(src: Path, corpus: Path, ranks: Path, workers: int, cache: Path, out: Path | None) -> dict[str, float | str]:
    """One ``tokpack prepare`` in a fresh process: CPU seconds of its tree, wall seconds, and a
    digest of the pack's ids and starts."""
    tokpack = Path(sys.executable).parent / "tokpack"
    command = [str(tokpack), "prepare", str(corpus), "--vocab", str(ranks), "--pattern", "gpt2",
               "--workers", str(workers), "--cache-dir", str(cache), "--json"]
    if out is not None:
        command += ["--out", str(out)]
    environment = dict(os.environ, PYTHONPATH=str(src), TOKPACK_CACHE=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{src}: prepare failed:\n{done.stderr[-3000:]}")
    import json

    pack = Path(json.loads(done.stdout)["pack"])
    digest = hashlib.sha256()
    for name in ("tokens.npy", "starts.npy"):
        digest.update((pack / name).read_bytes())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall, "ids": digest.hexdigest()[:16]}


def stages(corpus: Path, ranks: Path) -> None:
    """CPU seconds of each step ``prepare`` takes, timed one after another in this process, with
    the command line's process settings where the checkout has them."""
    os.environ["TOKPACK_CACHE"] = tempfile.mkdtemp(prefix="tokpack-stages-")  # verification stamps
    marks: list[tuple[str, float]] = [("start", time.process_time())]

    def mark(name: str) -> None:
        marks.append((name, time.process_time()))

    import tokpack.cli  # noqa: F401

    mark("import tokpack.cli (all of the CLI's imports)")
    try:
        from tokpack.cli.corpus import _as_a_batch_process  # the prepare command's process settings
    except ImportError:  # an older checkout: numba's defaults, the collector's defaults
        settings = None
    else:
        settings = _as_a_batch_process
        settings()
    mark("the command's process settings (collector, numba extensions; imports numba)")
    from tokpack import GPT2_PATTERN, load_vocabulary
    from tokpack.corpus.documents import cut_documents
    from tokpack.store import DocumentCut, Pack, PackWriter, Source
    from tokpack.vocab import BpeTokenizer

    tokenizer = load_vocabulary(ranks, pattern=GPT2_PATTERN)
    _ = tokenizer.identity
    mark("read the rank file, hash the vocabulary's identity")
    import numba  # noqa: F401
    from numba.core import entrypoints

    mark("import numba")
    if settings is None:
        entrypoints.init_all()
    mark("numba's extensions' entry points (none: the command line skips them)" if settings else
         "numba's extensions' entry points")
    tokenizer.files()
    mark("the carried vocabulary files (with numba's first dispatch)")
    _ = tokenizer._compiled
    mark("CompiledBpe(): its tables")
    tokenizer.encode_arrays(["warm up"], num_threads=1)
    mark("first encode call")
    raw = corpus.read_bytes()
    documents = [raw[a:b].decode("utf-8") for a, b in cut_documents(raw, 0, len(raw), 1_048_576)]
    mark("read, cut, decode")
    ids = tokenizer.encode_arrays(documents, num_threads=2)
    mark("encode (2 threads)")
    with tempfile.TemporaryDirectory() as folder:
        saved = tokenizer.save(Path(folder))
        mark("save the vocabulary")
        target = Path(folder) / "pack"
        vouch = {"stamp_verified": True} if "stamp_verified" in PackWriter.commit.__code__.co_varnames else {}
        with PackWriter(target, vocabulary=tokenizer.identity) as writer:
            writer.add_vocabulary_files(tokenizer.files())
            writer.add_documents(ids)
            writer.commit(source=Source(name=corpus.name, sha256="0" * 64, n_bytes=len(raw)),
                          cut=DocumentCut(rule="newline", document_bytes=1_048_576), pad_id=tokenizer.eot_id, **vouch)
        mark("write the pack (uint16, SHA-256 as written, fsync, publish)")
        Pack(target)
        mark("its first open (a verification unless the writer stamped it)")
        if hasattr(BpeTokenizer, "saved_as"):
            assert BpeTokenizer.saved_as(saved, tokenizer.identity)
        else:  # before saved_as: the parse
            BpeTokenizer.load_saved(saved)
        mark("a new pack's check of its carried vocabulary's identity")
    shutil.rmtree(os.environ["TOKPACK_CACHE"], ignore_errors=True)
    print("| stage | CPU s |\n|---|---|")
    for (_, before), (name, after) in zip(marks, marks[1:]):
        print(f"| {name} | {after - before:.3f} |")
    print(f"| total | {marks[-1][1] - marks[0][1]:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="the other checkout's src (needed but with --stages)")
    parser.add_argument("--runs", type=int, default=3, help="runs per row (medians are reported)")
    parser.add_argument("--copies", type=int, default=9, help="copies of the mixed file in the large corpus")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", choices=("small", "large"), help="only one of the two corpora")
    parser.add_argument("--warm", action="store_true", help="also runs that keep the cache (only the pack is new)")
    parser.add_argument("--stages", action="store_true", help="only time each step, in a fresh process")
    parser.add_argument("--stages-child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stages_child:  # before anything imports tokpack, so its imports are timed
        stages(*args.stages_child)
        return
    from registry import gpt2_rank_file
    scratch = Path(tempfile.gettempdir()) / "tokpack-bench-prepare-e2e"
    scratch.mkdir(exist_ok=True)
    ranks = gpt2_rank_file()
    found = corpora(scratch, args.copies)
    if args.stages:
        subprocess.run([sys.executable, __file__, "--stages-child", str(found["mixed"]), str(ranks)], check=True)
        return
    if args.only:
        found = dict([list(found.items())[0 if args.only == "small" else 1]])
    if args.baseline is None:
        parser.error("--baseline is needed")
    checkouts = {"this checkout": REPO / "src", "baseline": args.baseline.resolve()}
    modes = ["cold", "warm"] if args.warm else ["cold"]
    results: dict[tuple[str, str, int, str], list[dict[str, float | str]]] = {}
    loads = []
    warm_caches = {label: Path(tempfile.mkdtemp(prefix="warm-", dir=scratch)) for label in checkouts}
    for run in range(args.runs):
        for name, corpus in found.items():
            for workers in args.workers:
                for mode in modes:
                    order = list(checkouts.items())
                    if run % 2:
                        order.reverse()
                    for label, src in order:
                        if mode == "cold":
                            with tempfile.TemporaryDirectory(dir=scratch) as cache:
                                result = run_prepare(src, corpus, ranks, workers, Path(cache), None)
                        else:
                            cache = warm_caches[label]
                            if not (cache / "seeded").exists():  # one untimed run leaves the vocabulary's caches
                                run_prepare(src, corpus, ranks, workers, cache, cache / "seed-pack")
                                (cache / "seeded").touch()
                            out = cache / f"pack-{time.monotonic_ns()}"
                            result = run_prepare(src, corpus, ranks, workers, cache, out)
                            shutil.rmtree(out)
                        results.setdefault((name, mode, workers, label), []).append(result)
                        loads.append(os.getloadavg()[0])
        print(f"run {run + 1}/{args.runs} done (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    for cache in warm_caches.values():
        shutil.rmtree(cache, ignore_errors=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average (1 min) during the runs: {min(loads):.1f} to {max(loads):.1f}, median {statistics.median(loads):.1f}")
    print(f"{args.runs} runs per row, medians; CPU = the process tree's user + system seconds\n")
    print("| corpus | MB | cache | workers | this checkout: CPU s | wall s | baseline: CPU s | wall s | "
          "speed-up (CPU) | speed-up (wall) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, corpus in found.items():
        megabytes = (corpus.stat().st_size if corpus.is_file()
                     else sum(p.stat().st_size for p in corpus.iterdir())) / 1e6
        for workers in args.workers:
            for mode in modes:
                rows = {label: results[(name, mode, workers, label)] for label in checkouts}
                if len({r["ids"] for rs in rows.values() for r in rs}) != 1:
                    print(f"PACKS DIFFER: {name}, {workers} workers, {mode}", file=sys.stderr)
                cpu = {label: statistics.median(float(r["cpu"]) for r in rs) for label, rs in rows.items()}
                wall = {label: statistics.median(float(r["wall"]) for r in rs) for label, rs in rows.items()}
                print(f"| {name} | {megabytes:.1f} | {mode} | {workers} | {cpu['this checkout']:.2f} | "
                      f"{wall['this checkout']:.2f} | {cpu['baseline']:.2f} | {wall['baseline']:.2f} | "
                      f"{cpu['baseline'] / cpu['this checkout']:.2f}× | {wall['baseline'] / wall['this checkout']:.2f}× |")


if __name__ == "__main__":
    main()
