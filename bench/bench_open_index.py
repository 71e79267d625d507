"""Opening big data: from nothing to the first batch, for each layout, at 10^7, 10^8 and 10^9 ids.

    PYTHONPATH=src .venv/bin/python bench/bench_open_index.py --ids 1e7,1e8,1e9 --runs 3

For each size a synthetic pack (random ``uint16`` ids, vocabulary of 50,257, log-normal document
lengths with median 493 ids, as ``bench/bench_loader.py`` writes them) is written once under
``--work`` (default ``/tmp/tokpack-bench-open``; 10^9 ids are 2 GB: check ``df`` first). Then,
each in a fresh process with its own ``TOKPACK_CACHE``:

``verify``   the one-time verification of the first open (hashes every byte, checks the ids and
             the padding, writes the stamp): reported beside the layouts, not in them, with its rate.
``stream``, ``documents``, ``bestfit``
             after the imports and one batch of a tiny pack (which loads numba's cached kernels,
             a once-per-process cost reported as ``warm``),
             ``PackedBatches(pack, layout=...)`` then ``batch(0)`` on the stamped pack: opening it,
             building the layout's row index (``bestfit``: with its cache empty), the epoch's
             permutation and the first gather. Wall and CPU seconds, peak resident memory
             (``VmHWM``) and the resident memory after the imports, and the bytes the row index
             holds (arrays the layout keeps, the document starts included).
``bestfit (cached)``
             the same with the index built by the run before (read from ``$TOKPACK_CACHE/layouts``).

Layouts are interleaved run by run; the table gives medians.

    PYTHONPATH=src .venv/bin/python bench/bench_open_index.py sharded --shard-ids 1e8 --shards 10

measures the same layouts over a sharded dataset of ``--shards`` shards, each the ``--shard-ids``
pack (linked, not copied: the dataset machinery's cost per shard, on data whose size is known
from the pack rows above). Shards share their verification stamp there (one file behind the
links), so verification is measured on the pack, not here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loader import synthetic_pack  # noqa: E402  (the same synthetic packs)

MODES = ("stream", "documents", "bestfit", "bestfit (cached)")


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _index_bytes(layout: Any) -> int:
    """Bytes of the numpy arrays a layout keeps in memory (its row index, the document starts it
    copies), not the mapped ids or starts."""
    return sum(value.nbytes for value in vars(layout).values()
               if isinstance(value, np.ndarray) and not isinstance(value, np.memmap))


def _warm(layout: str) -> float:
    """Serve one batch of a tiny pack with ``layout``: imports and numba's cached kernels load here,
    before the clock (a once-per-process cost, like the imports). Returns its seconds."""
    from tokpack.serve import PackedBatches
    from tokpack.serve.memory import pack_of_documents

    started = time.perf_counter()
    tiny = pack_of_documents([list(range(1, 50)), list(range(1, 30))], n_vocab=64, pad_id=0)
    PackedBatches(tiny, layout=layout, length=8, global_batch=2, cu_seqlens=True,
                  layout_options={"cache": False} if layout == "bestfit" else None).batch(0)
    return time.perf_counter() - started


def child(args: argparse.Namespace) -> None:
    """One measurement in this fresh process; prints a JSON line."""
    from tokpack.serve import PackedBatches
    from tokpack.store import open_tokens

    warm = _warm(args.mode.split()[0]) if args.mode != "verify" else 0.0
    before = _status_mib("VmRSS")
    started, cpu = time.perf_counter(), time.process_time()
    if args.mode == "verify":
        source = open_tokens(args.pack)
        for index in range(len(getattr(source, "shards", []))):  # a dataset verifies each shard on first read
            source._reading(index)  # type: ignore[attr-defined]
        wall = time.perf_counter() - started
        print(json.dumps({"mode": "verify", "wall_s": wall, "cpu_s": time.process_time() - cpu,
                          "bytes": int(source.n_tokens * np.dtype(source.meta.dtype).itemsize + source.starts.nbytes)}))
        return
    layout = args.mode.split()[0]
    batches = PackedBatches(args.pack, layout=layout, length=args.length, global_batch=args.global_batch,
                            layout_options={"cache": True} if layout == "bestfit" else None)
    built = time.perf_counter()
    batches.batch(0)
    finished = time.perf_counter()
    index = batches.layouts[0]
    print(json.dumps({"mode": args.mode, "warm_s": warm, "index_s": built - started, "wall_s": finished - started,
                      "cpu_s": time.process_time() - cpu, "rss_before_mib": before,
                      "peak_rss_mib": _status_mib("VmHWM"), "index_mib": _index_bytes(index) / 2**20,
                      "n_rows": index.n_rows, "n_docs": index.last_doc - index.first_doc}))


def run_child(pack: Path, mode: str, cache: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, TOKPACK_CACHE=str(cache))
    output = subprocess.run([sys.executable, __file__, "child", "--pack", str(pack), "--mode", mode, "--length",
                             str(args.length), "--global-batch", str(args.global_batch)],
                            capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(output.strip().splitlines()[-1])


def linked_dataset(work: Path, shard_ids: int, shards: int) -> Path:
    """A sharded dataset of ``shards`` links to one synthetic pack (written once)."""
    from tokpack.store import DocumentCut, Source
    from tokpack.store.dataset import DATASET_FILE, shard_name, write_dataset

    pack = synthetic_pack(work, shard_ids // 1_000_000)
    target = work / f"dataset-{shards}x{pack.name}"
    if (target / DATASET_FILE).exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    names = [shard_name(rank) for rank in range(shards)]
    for name in names:
        (target / name).symlink_to(pack.resolve(), target_is_directory=True)
    write_dataset(target, names, source=Source(name="synthetic", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="log-normal lengths"))
    return target


def sharded_dataset(args: argparse.Namespace) -> None:
    shard_ids = int(float(args.shard_ids))
    dataset = linked_dataset(args.work, shard_ids, args.shards)
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for _ in range(args.runs):
        cache = Path(tempfile.mkdtemp(prefix="cache-", dir=args.work))
        try:
            run_child(dataset, "verify", cache, args)  # stamps the (one) shard
            for mode in MODES:
                results[mode].append(run_child(dataset, mode, cache, args))
                print(results[mode][-1], file=sys.stderr, flush=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
          f"{os.getloadavg()[0]:.1f}; a dataset of {args.shards} shards of {shard_ids:.0e} ids, length {args.length}\n")
    print("| mode | rows, documents | wall s (median) | CPU s | peak RSS over imports, MiB | index MiB | index built, s |")
    print("|---|---|---|---|---|---|---|")
    for mode, runs in results.items():
        print(f"| {mode} | {runs[0]['n_rows']:,} rows, {runs[0]['n_docs']:,} docs | "
              f"{statistics.median(r['wall_s'] for r in runs):.2f} | {statistics.median(r['cpu_s'] for r in runs):.2f} | "
              f"{statistics.median(r['peak_rss_mib'] - r['rss_before_mib'] for r in runs):.0f} | "
              f"{runs[0]['index_mib']:.1f} | {statistics.median(r['index_s'] for r in runs):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("run")
    bench.add_argument("--ids", default="1e7,1e8,1e9", help="pack sizes in ids, comma-separated")
    bench.add_argument("--length", type=int, default=2048)
    bench.add_argument("--global-batch", type=int, default=16)
    bench.add_argument("--runs", type=int, default=3)
    bench.add_argument("--work", type=Path, default=Path("/tmp/tokpack-bench-open"))
    sharded = commands.add_parser("sharded")
    sharded.add_argument("--shard-ids", default="1e8", help="ids per shard (one synthetic pack, linked)")
    sharded.add_argument("--shards", type=int, default=10)
    sharded.add_argument("--length", type=int, default=2048)
    sharded.add_argument("--global-batch", type=int, default=16)
    sharded.add_argument("--runs", type=int, default=3)
    sharded.add_argument("--work", type=Path, default=Path("/tmp/tokpack-bench-open"))
    one = commands.add_parser("child")
    one.add_argument("--pack", type=Path, required=True)
    one.add_argument("--mode", required=True)
    one.add_argument("--length", type=int, required=True)
    one.add_argument("--global-batch", type=int, required=True)
    args = parser.parse_args(sys.argv[1:] if len(sys.argv) > 1 and sys.argv[1] in ("run", "child", "sharded") else
                             ["run", *sys.argv[1:]])
    if args.command == "child":
        child(args)
        return
    if args.command == "sharded":
        sharded_dataset(args)
        return
    sizes = [int(float(size)) for size in args.ids.split(",")]
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; length {args.length}, "
          f"global batch {args.global_batch}, {args.runs} runs\n", flush=True)
    rows = []
    for size in sizes:
        pack = synthetic_pack(args.work, size // 1_000_000)
        results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in ("verify", *MODES)}
        for _ in range(args.runs):
            cache = Path(tempfile.mkdtemp(prefix="cache-", dir=args.work))
            try:
                results["verify"].append(run_child(pack, "verify", cache, args))  # first open: verifies, stamps
                for mode in MODES:  # interleaved; "bestfit (cached)" reads what "bestfit" wrote
                    results[mode].append(run_child(pack, mode, cache, args))
                    print(size, results[mode][-1], file=sys.stderr, flush=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        verify = results["verify"]
        wall = statistics.median(r["wall_s"] for r in verify)
        rate = verify[0]["bytes"] / wall / 1e6
        rows.append(f"| {size:.0e} | verify (first open only) | | {wall:.2f} | "
                    f"{statistics.median(r['cpu_s'] for r in verify):.2f} | | | {rate:,.0f} MB/s, once per pack |")
        for mode in MODES:
            runs = results[mode]
            rows.append(f"| {size:.0e} | {mode} | {runs[0]['n_rows']:,} rows, {runs[0]['n_docs']:,} docs | "
                        f"{statistics.median(r['wall_s'] for r in runs):.2f} | "
                        f"{statistics.median(r['cpu_s'] for r in runs):.2f} | "
                        f"{statistics.median(r['peak_rss_mib'] - r['rss_before_mib'] for r in runs):.0f} | "
                        f"{runs[0]['index_mib']:.1f} | index built {statistics.median(r['index_s'] for r in runs):.2f} s; "
                        f"warm-up {statistics.median(r['warm_s'] for r in runs):.2f} s |")
        print(f"load average {os.getloadavg()[0]:.1f} after {size:.0e}", file=sys.stderr, flush=True)
    print("| ids | mode | rows, documents | wall s (median) | CPU s | peak RSS over imports, MiB | index MiB | note |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
