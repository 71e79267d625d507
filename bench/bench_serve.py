"""Serving throughput on one large pack: schedules, window gathers, torch loaders, baselines.

    .venv/bin/python bench/bench_serve.py --million-tokens 200 --runs 3

Builds (once, cached) a synthetic pack of random ids with document lengths drawn around 1,000
ids, then measures, interleaved and repeated, each way of reading a batch of ``--batch`` rows of
``--block`` ids at random positions:

  memmap-copy        bare numpy: one contiguous slice copy of as many ids (the physical limit)
  memmap-copy-int64  the same slice cast to int64, the dtype a model takes (the limit for x, y)
  memmap-slices      bare numpy over the same random windows: one memmap slice copy per window
  TokenBatches.ids   the step schedule (int32 rows of block + 1)
  window_batch       Windows.window_batch over random aligned windows (int64 x and y)
  loader-w0 / -w2    tokpack.torch.make_loader with 0 and 2 workers (whole-batch gathers)
  per-item-loader    the usual recipe: a per-item torch Dataset + DataLoader(batch_size=...)

GB/s counts the token bytes read (2 per uint16 id); ratios are against per-item-loader and
memmap-copy, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import BENCH_CACHE  # noqa: E402

from tokpack.serve import TokenBatches, Windows  # noqa: E402
from tokpack.store import DocumentCut, Pack, PackWriter, Source, Span  # noqa: E402
from tokpack.vocab import VocabIdentity  # noqa: E402


def synthetic_pack(million_tokens: int) -> Path:
    target = BENCH_CACHE / f"pack-{million_tokens}m"
    if target.exists():
        return target
    rng = np.random.default_rng(0)
    identity = VocabIdentity(scheme="random", sha256="f" * 64, n_vocab=50_257)
    total, chunk = million_tokens * 1_000_000, 10_000_000
    with PackWriter(target, vocabulary=identity) as writer:
        while writer.n_tokens < total:
            ids = rng.integers(0, 50_256, size=min(chunk, total - writer.n_tokens), dtype=np.uint16)
            cuts = np.cumsum(rng.integers(200, 1800, size=len(ids) // 200))
            writer.add_documents(np.split(ids, cuts[cuts < len(ids)]))
        span = Span(documents=(0, writer.n_docs), tokens=(0, writer.n_tokens))
        writer.commit(source=Source(name="random", sha256="0" * 64, n_bytes=0), cut=DocumentCut(rule="random"),
                      ranges={"train": span}, pad_id=50_256)
    return target


def measure(read_batch, batches: int, seconds: float) -> float:  # type: ignore[no-untyped-def]
    """Seconds per batch: after one warm-up batch, up to ``batches`` batches or ``seconds``."""
    read_batch(0)
    start, done = time.perf_counter(), 0
    while done < batches and time.perf_counter() - start < seconds:
        done += 1
        read_batch(done)
    return (time.perf_counter() - start) / done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--million-tokens", type=int, default=200)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=5000, help="most batches per measurement")
    parser.add_argument("--seconds", type=float, default=2.0, help="most seconds per measurement")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import torch
    from torch.utils.data import DataLoader, Dataset

    from tokpack.torch import WindowDataset, make_loader

    torch.set_num_threads(1)
    path = synthetic_pack(args.million_tokens)
    pack = Pack(path)
    tokens = pack.tokens
    np.asarray(tokens).sum()  # bring the file into the page cache once, for every mode alike
    windows = Windows(pack, block=args.block)
    schedule = TokenBatches(path, batch=args.batch, length=args.block)
    rng = np.random.default_rng(1)
    plans = [rng.integers(0, len(windows), size=args.batch) for _ in range(1000)]

    class PerItem(Dataset):  # the usual recipe: one window per __getitem__, default collation
        def __len__(self) -> int:
            return len(windows)

        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            origin = int(windows.origins(np.array([index]))[0])
            chunk = np.asarray(tokens[origin : origin + args.block + 1], dtype=np.int64)
            chunk = np.pad(chunk, (0, args.block + 1 - len(chunk)), constant_values=windows.pad_id)
            x, y = torch.from_numpy(chunk[:-1].copy()), torch.from_numpy(chunk[1:].copy())
            y[-1] = windows.pad_id
            return x, y

    span = args.batch * (args.block + 1)

    def memmap_copy(step: int) -> None:
        origin = int(plans[step % len(plans)][0]) * 997 % (len(tokens) - span)
        np.array(tokens[origin : origin + span])  # the same number of ids in one contiguous copy

    slices = np.empty((args.batch, args.block + 1), dtype=tokens.dtype)

    def memmap_slices(step: int) -> None:
        for row, origin in enumerate(windows.origins(plans[step % len(plans)])):
            slices[row] = tokens[origin : origin + args.block + 1]  # the same windows, one slice each

    def memmap_copy_int64(step: int) -> None:
        origin = int(plans[step % len(plans)][0]) * 997 % (len(tokens) - span)
        tokens[origin : origin + span].astype(np.int64)  # ...and cast to what a model takes

    def loader_reader(loader):  # type: ignore[no-untyped-def]
        iterator = iter(loader)

        def read(step: int):  # type: ignore[no-untyped-def]
            nonlocal iterator
            try:
                return next(iterator)
            except StopIteration:  # a new epoch
                iterator = iter(loader)
                return next(iterator)

        return read

    def modes() -> dict:  # type: ignore[type-arg]
        dataset = WindowDataset(windows)
        return {
            "memmap-copy": memmap_copy,
            "memmap-copy-int64": memmap_copy_int64,
            "memmap-slices": memmap_slices,
            "TokenBatches.ids": lambda step: schedule.ids(step * 7919),
            "window_batch": lambda step: windows.window_batch(plans[step % len(plans)]),
            "loader-w0": loader_reader(make_loader(dataset, args.batch, seed=0, workers=0)),
            "loader-w2": loader_reader(make_loader(dataset, args.batch, seed=0, workers=2)),
            "per-item-loader": loader_reader(DataLoader(PerItem(), batch_size=args.batch, shuffle=True,
                                                        generator=torch.Generator().manual_seed(0))),
        }

    results: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for name, read_batch in modes().items():
            results.setdefault(name, []).append(measure(read_batch, args.batches, args.seconds))
    bytes_per_batch = args.batch * (args.block + 1) * 2
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"torch {torch.__version__}; pack {pack.n_tokens / 1e6:.0f} M ids ({pack.n_docs:,} documents), "
          f"batch {args.batch} x {args.block}, up to {args.seconds} s a measurement, {args.runs} runs, medians")
    print("| mode | batches/s | GB/s (ids read) | vs per-item-loader | vs memmap-copy | vs memmap-copy-int64 |")
    print("|---|---|---|---|---|---|")
    per_item = statistics.median(results["per-item-loader"])
    limit = statistics.median(results["memmap-copy"])
    limit64 = statistics.median(results["memmap-copy-int64"])
    for name, seconds_list in results.items():
        seconds = statistics.median(seconds_list)
        print(f"| {name} | {1 / seconds:,.0f} | {bytes_per_batch / seconds / 1e9:.2f} | "
              f"{per_item / seconds:.1f}x | {limit / seconds:.2f}x | {limit64 / seconds:.2f}x |")


if __name__ == "__main__":
    main()
