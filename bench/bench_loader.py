"""The training path's loader against the usual ones, and the cost of each layout's row index.

    .venv/bin/python bench/bench_loader.py throughput --million-ids 200 --runs 5
    .venv/bin/python bench/bench_loader.py index --million-ids 1000

``throughput``: tokens per second one rank receives (rank 0 of 2, ``global_batch / 2`` rows of
``length`` inputs a step, as contiguous ``int64`` torch tensors ``input_ids`` and ``labels``),
each mode from its own iterator kept across rounds, the modes interleaved round by round, and
medians over rounds:

  tokpack-stream[-docs]   tokpack.torch.make_batch_loader(PackedBatches(layout="stream")); "-docs"
  tokpack-bestfit[-docs]  also asks for position_ids, cu_seqlens and document_ids (and bestfit)
  per-item-loader         the usual recipe: a map-style torch Dataset returning one shuffled row,
                          torch.utils.data.DataLoader(batch_size=...) stacking them
  litdata                 litdata.StreamingDataset(item_loader=TokensLoader(block_size=length+1),
                          shuffle=True) + StreamingDataLoader, over the same ids written by
                          litdata.optimize (uint16, as in the pack)

Every loader runs in the measuring process (``num_workers=0``): the figure is the cost of making
a batch, not of hiding it behind worker processes on a shared 2-core machine.

``index``: for a pack of ``--million-ids`` ids, each layout's time and peak memory from nothing
to the first batch (``PackedBatches(...)`` then ``batch(0)``: opening the pack, building the
row index with no cache, the first permutation and gather), each in a fresh process: wall and CPU
seconds, the peak resident memory (``VmHWM``) and the resident memory before the build (imports).

Synthetic packs (random ids, vocabulary of 50,257; document lengths log-normal, median 493
ids, mean ~810, as web text) are written once by tokpack's ``PackWriter`` under ``--work``
(default ``/tmp/tokpack-bench-loader``), never into the repository.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import Progress

from tokpack.store import DocumentCut, Pack, PackWriter, Source, Span
from tokpack.vocab import VocabIdentity

N_VOCAB = 50_257  # GPT-2's size; the last id pads
MEDIAN_LOG, SIGMA_LOG = 6.2, 1.0  # log-normal document lengths: median e^6.2 = 493 ids


def synthetic_pack(work: Path, million_ids: int, *, seed: int = 0) -> Path:
    """A pack of ``million_ids`` million random ids in log-normal documents (written once)."""
    target = work / f"pack-{million_ids}m-s{seed}"
    if (target / "meta.json").exists():
        return target
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    identity = VocabIdentity(scheme="synthetic", sha256=hashlib.sha256(b"bench_loader").hexdigest(), n_vocab=N_VOCAB)
    total = million_ids * 1_000_000
    with PackWriter(target, vocabulary=identity) as writer, Progress() as progress:
        task = progress.add_task(f"writing {target.name}", total=total)
        while writer.n_tokens < total:
            lengths = np.maximum(1, rng.lognormal(MEDIAN_LOG, SIGMA_LOG, size=50_000)).astype(np.int64)
            room = total - writer.n_tokens
            ends = np.cumsum(lengths)
            if ends[-1] > room:  # the last document ends exactly at the total
                keep = int(np.searchsorted(ends, room))
                lengths = lengths[: keep + 1]
                lengths[-1] = room - (int(ends[keep - 1]) if keep else 0)
            ids = rng.integers(0, N_VOCAB - 1, size=int(lengths.sum()), dtype=np.uint16)
            writer.add_flat(ids, lengths)
            progress.update(task, completed=writer.n_tokens)
        span = Span(documents=(0, writer.n_docs), tokens=(0, writer.n_tokens))
        writer.commit(source=Source(name="synthetic", sha256="0" * 64, n_bytes=0),
                      cut=DocumentCut(rule="log-normal lengths"), ranges={"train": span}, pad_id=N_VOCAB - 1)
    return target


# ---------------------------------------------------------------------------------------------
# throughput
# ---------------------------------------------------------------------------------------------


def _litdata_piece(index: int, *, pack: str, piece: int) -> Iterator[Any]:
    import torch

    tokens = Pack(Path(pack)).tokens
    yield torch.from_numpy(np.array(tokens[index * piece : (index + 1) * piece]))


def litdata_copy(work: Path, pack_dir: Path, length: int) -> Path:
    """The pack's ids written by ``litdata.optimize`` with its ``TokensLoader`` (once)."""
    from litdata import TokensLoader, optimize

    target = work / f"litdata-{pack_dir.name}-b{length + 1}"
    if (target / "index.json").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    pack = Pack(pack_dir)
    piece = 8_000_000
    started = time.perf_counter()
    optimize(fn=functools.partial(_litdata_piece, pack=str(pack_dir), piece=piece),
             inputs=list(range(-(-pack.n_tokens // piece))), output_dir=str(target),
             chunk_size=(length + 1) * 4096, item_loader=TokensLoader(), num_workers=1, reorder_files=False)
    print(f"litdata.optimize: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return target


def make_modes(pack_dir: Path, litdata_dir: Path, *, length: int, global_batch: int, seed: int,
               cache: Path) -> dict[str, Callable[[], Iterator[tuple[Any, Any]]]]:
    """Each mode: a function starting a fresh iterator of rank 0's ``(input_ids, labels)``."""
    import torch
    from litdata import StreamingDataLoader, StreamingDataset, TokensLoader
    from torch.utils.data import DataLoader, Dataset

    from tokpack.serve import PackedBatches
    from tokpack.torch import make_batch_loader

    rows = global_batch // 2

    def tokpack_mode(layout: str, boundaries: bool) -> Callable[[], Iterator[tuple[Any, Any]]]:
        def start() -> Iterator[tuple[Any, Any]]:
            batches = PackedBatches(pack_dir, layout=layout, length=length, global_batch=global_batch, seed=seed,
                                    rank=0, world_size=2, position_ids=boundaries, cu_seqlens=boundaries,
                                    document_ids=boundaries, layout_options={"cache": cache} if layout == "bestfit" else None)
            for batch in make_batch_loader(batches):
                yield batch["input_ids"], batch["labels"]
        return start

    tokens = Pack(pack_dir).tokens

    class Rows(Dataset[torch.Tensor]):
        """The usual per-item dataset: row ``i`` of the stream as an int64 tensor."""

        def __len__(self) -> int:
            return (len(tokens) - 1) // length

        def __getitem__(self, index: int) -> torch.Tensor:
            return torch.from_numpy(tokens[index * length : (index + 1) * length + 1].astype(np.int64))

    def per_item() -> Iterator[tuple[Any, Any]]:
        generator = torch.Generator().manual_seed(seed)
        for batch in DataLoader(Rows(), batch_size=rows, shuffle=True, drop_last=True, generator=generator):
            yield batch[:, :-1].contiguous(), batch[:, 1:].contiguous()

    def litdata() -> Iterator[tuple[Any, Any]]:
        dataset = StreamingDataset(str(litdata_dir), item_loader=TokensLoader(block_size=length + 1), shuffle=True,
                                   drop_last=True, seed=seed)
        for batch in StreamingDataLoader(dataset, batch_size=rows, num_workers=0, drop_last=True):
            batch = batch.to(torch.int64)  # litdata hands back the stored uint16
            yield batch[:, :-1].contiguous(), batch[:, 1:].contiguous()

    return {
        "tokpack-stream": tokpack_mode("stream", False),
        "tokpack-stream-docs": tokpack_mode("stream", True),
        "tokpack-bestfit": tokpack_mode("bestfit", False),
        "tokpack-bestfit-docs": tokpack_mode("bestfit", True),
        "per-item-loader": per_item,
        "litdata": litdata,
    }


def throughput(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    pack_dir = synthetic_pack(args.work, args.million_ids)
    litdata_dir = litdata_copy(args.work, pack_dir, args.length)
    for folder in (pack_dir, litdata_dir):  # the page cache holds both, as it would after an epoch
        for path in folder.rglob("*"):
            if path.is_file():
                with open(path, "rb") as handle:
                    while handle.read(64 << 20):
                        pass
    modes = make_modes(pack_dir, litdata_dir, length=args.length, global_batch=args.global_batch, seed=args.seed,
                       cache=args.work / "layouts")
    iterators = {name: start() for name, start in modes.items()}
    for name in modes:  # warm up: the index built, the first batch made
        next(iterators[name])
    rates: dict[str, list[float]] = {name: [] for name in modes}
    for round_ in range(args.runs):
        for name in modes:
            delivered, started = 0, time.perf_counter()
            while time.perf_counter() - started < args.seconds:
                try:
                    input_ids, labels = next(iterators[name])
                except StopIteration:
                    iterators[name] = modes[name]()
                    continue
                assert input_ids.is_contiguous() and labels.is_contiguous() and input_ids.dtype == torch.int64
                delivered += input_ids.numel()
            rates[name].append(delivered / (time.perf_counter() - started))
        print(f"round {round_ + 1}: " + ", ".join(f"{n} {r[-1] / 1e6:.1f}" for n, r in rates.items()), file=sys.stderr)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
          f"{os.getloadavg()[0]:.1f}; pack {args.million_ids}M ids, length {args.length}, global batch "
          f"{args.global_batch} (rank 0 of 2: {args.global_batch // 2} rows), {args.runs} rounds of {args.seconds} s\n")
    print("| mode | M tokens/s per rank (median) | min-max | vs litdata | vs per-item-loader |")
    print("|---|---|---|---|---|")
    for name, median in medians.items():
        print(f"| {name} | {median / 1e6:.1f} | {min(rates[name]) / 1e6:.1f}-{max(rates[name]) / 1e6:.1f} | "
              f"{median / medians['litdata']:.2f}x | {median / medians['per-item-loader']:.2f}x |")


# ---------------------------------------------------------------------------------------------
# index build
# ---------------------------------------------------------------------------------------------


def _status_mib(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (its peak) of this process, in MiB. The kernel's
    ``ru_maxrss`` would not do: after fork and exec it keeps the parent's peak."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def index_child(args: argparse.Namespace) -> None:
    """One layout from nothing to the first batch, in this (fresh) process; prints a JSON line."""
    from tokpack.serve import PackedBatches

    before = _status_mib("VmRSS")
    started, cpu = time.perf_counter(), time.process_time()
    batches = PackedBatches(args.pack, layout=args.layout, length=args.length, global_batch=args.global_batch,
                            layout_options={"cache": False} if args.layout == "bestfit" else None)
    built = time.perf_counter()
    batches.batch(0)
    finished = time.perf_counter()
    print(json.dumps({"layout": args.layout, "index_s": built - started, "first_batch_s": finished - started,
                      "cpu_s": time.process_time() - cpu,
                      "rss_before_mib": before, "peak_rss_mib": _status_mib("VmHWM"),
                      "n_rows": batches.layouts[0].n_rows, "stats": batches.stats[0]}))


def index(args: argparse.Namespace) -> None:
    pack_dir = synthetic_pack(args.work, args.million_ids)
    pack = Pack(pack_dir)
    lengths = np.diff(np.append(pack.starts, pack.n_tokens))
    print(f"pack: {pack.n_tokens:,} ids, {pack.n_docs:,} documents; lengths median {np.median(lengths):.0f}, "
          f"mean {lengths.mean():.0f}, p99 {np.percentile(lengths, 99):.0f}, longer than a row "
          f"{(lengths > args.length + 1).mean():.1%}", file=sys.stderr)
    results: dict[str, list[dict[str, Any]]] = {layout: [] for layout in ("stream", "documents", "bestfit")}
    for _ in range(args.runs):
        for layout, runs in results.items():  # interleaved, each in a fresh process
            output = subprocess.run([sys.executable, __file__, "index-child", "--pack", str(pack_dir), "--layout", layout,
                                     "--length", str(args.length), "--global-batch", str(args.global_batch)],
                                    capture_output=True, text=True, check=True).stdout
            runs.append(json.loads(output.strip().splitlines()[-1]))
            print(runs[-1], file=sys.stderr)
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
          f"{os.getloadavg()[0]:.1f}; pack of {pack.n_tokens:,} ids in {pack.n_docs:,} documents, length "
          f"{args.length}, {args.runs} runs each\n")
    print("| layout | rows | index built, s (median) | to first batch, s | CPU s | peak RSS MiB | RSS before MiB | stats |")
    print("|---|---|---|---|---|---|---|---|")
    for layout, runs in results.items():
        stats = ", ".join(f"{k} {v:.3f}" for k, v in runs[0]["stats"].items())
        print(f"| {layout} | {runs[0]['n_rows']:,} | {statistics.median(r['index_s'] for r in runs):.2f} | "
              f"{statistics.median(r['first_batch_s'] for r in runs):.2f} | "
              f"{statistics.median(r['cpu_s'] for r in runs):.2f} | "
              f"{statistics.median(r['peak_rss_mib'] for r in runs):.0f} | "
              f"{statistics.median(r['rss_before_mib'] for r in runs):.0f} | {stats} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("throughput", "index"):
        command = commands.add_parser(name)
        command.add_argument("--million-ids", type=int, default=200 if name == "throughput" else 1000)
        command.add_argument("--length", type=int, default=2048)
        command.add_argument("--global-batch", type=int, default=16)
        command.add_argument("--runs", type=int, default=5 if name == "throughput" else 3)
        command.add_argument("--work", type=Path, default=Path("/tmp/tokpack-bench-loader"))
        if name == "throughput":
            command.add_argument("--seconds", type=float, default=2.0, help="seconds per mode per round")
            command.add_argument("--seed", type=int, default=0)
    child = commands.add_parser("index-child")
    child.add_argument("--pack", type=Path, required=True)
    child.add_argument("--layout", required=True)
    child.add_argument("--length", type=int, required=True)
    child.add_argument("--global-batch", type=int, required=True)
    args = parser.parse_args()
    {"throughput": throughput, "index": index, "index-child": index_child}[args.command](args)


if __name__ == "__main__":
    main()
