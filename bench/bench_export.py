"""Export throughput per format, and Megatron's own preprocessing path against tokpack's.

    .venv/bin/python bench/bench_export.py --megabytes 32 --runs 3

Part 1 (export): one pack of real text (GPT-2's ranks, fetched once from PyPI's openai-whisper
sdist) exported to every format, formats interleaved after one untimed warm-up each, each run
into a fresh folder; GB/s counts the ids read (2 bytes each), with the pack in the page cache.

Part 2 (Megatron): the same corpus as JSON Lines (one record a document), turned into Megatron's
``.bin/.idx`` with ``--append-eod`` two ways, each in a fresh child process, interleaved:
  megatron-core   ``preprocess_data.py``'s path: read and ``json.loads`` each line, encode with
                  tiktoken (``encode_ordinary_batch`` on every core, 1,000 documents a batch),
                  feed megatron-core's ``IndexedDatasetBuilder`` one document at a time;
  tokpack         ``tokpack prepare corpus.jsonl --vocab gpt2`` (hash, cut, encode on every
                  core, a verified pack) then ``export --format megatron --append-eod``.
Both outputs are checked byte-identical before any time is reported; imports are not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus as bench_corpus  # noqa: E402

from registry import gpt2_rank_file  # noqa: E402

FORMATS = ("megatron", "nanogpt", "litdata", "mds", "hf")
PATHS = ("megatron-core", "tokpack")


def jsonl_corpus(megabytes: int) -> Path:
    """The synthetic corpus as JSON Lines: records of whole lines, about 4 KB each (cached)."""
    target = bench_corpus.BENCH_CACHE / f"corpus-{megabytes}mb.jsonl"
    if target.exists():
        return target
    text = bench_corpus.synthetic_corpus(megabytes).read_text(encoding="utf-8")
    partial = target.with_suffix(".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        record: list[str] = []
        size = 0
        for line in text.splitlines(keepends=True):
            record.append(line)
            size += len(line)
            if size >= 4000:
                handle.write(json.dumps({"text": "".join(record)}, ensure_ascii=False) + "\n")
                record, size = [], 0
        if record:
            handle.write(json.dumps({"text": "".join(record)}, ensure_ascii=False) + "\n")
    partial.rename(target)
    return target


def child(mode: str, source: Path, ranks: Path, out: Path) -> dict[str, float]:
    # Imports first (megatron.core pulls in torch, seconds of it): the clock times the work only.
    import numpy as np
    import tiktoken
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder
    from tiktoken.load import load_tiktoken_bpe

    from tokpack import GPT2_PATTERN, prepare
    from tokpack.store.exporting import export

    start = time.perf_counter()
    if mode == "megatron-core":
        ranks_table = load_tiktoken_bpe(str(ranks))
        eod = len(ranks_table)
        encoding = tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks_table, special_tokens={})
        builder = IndexedDatasetBuilder(f"{out}.bin", dtype=DType.optimal_dtype(eod + 1))
        tokens = 0

        def flush(texts: list[str]) -> int:
            count = 0
            for ids in encoding.encode_ordinary_batch(texts, num_threads=os.cpu_count() or 1):
                ids.append(eod)
                builder.add_document(np.array(ids), [len(ids)])
                count += len(ids)
            return count

        batch: list[str] = []
        with open(source, encoding="utf-8") as handle:
            for line in handle:
                batch.append(json.loads(line)["text"])
                if len(batch) == 1000:
                    tokens += flush(batch)
                    batch = []
        tokens += flush(batch)
        builder.finalize(f"{out}.idx")
    else:
        with tempfile.TemporaryDirectory() as cache:
            prepared = prepare(source, vocab=ranks, cache_dir=cache)
            record = export(prepared.tokens_dir, "megatron", out, append_eod=True)
            tokens = record.parts["all"].tokens[1] + record.parts["all"].documents[1]
    return {"seconds": time.perf_counter() - start, "tokens": tokens}


def export_runs(pack: Path, runs: int, scratch: Path) -> dict[str, list[float]]:
    from tokpack.store import open_tokens
    from tokpack.store.exporting import export

    source = open_tokens(pack)
    seconds: dict[str, list[float]] = {fmt: [] for fmt in FORMATS}
    for fmt in FORMATS:  # untimed: the first write of a format loads its libraries (pyarrow's Parquet: ~2 s)
        export(source, fmt, scratch / f"{fmt}-warm-up")
    for run in range(runs):
        for fmt in FORMATS:  # interleaved, so noise hits every format alike
            start = time.perf_counter()
            export(source, fmt, scratch / f"{fmt}-{run}")
            seconds[fmt].append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=4, metavar=("MODE", "SOURCE", "RANKS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, source, ranks, out = args.child
        print(json.dumps(child(mode, Path(source), Path(ranks), Path(out))))
        return
    from tokpack import prepare

    ranks = gpt2_rank_file()
    source = jsonl_corpus(args.megabytes)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"corpus {source.stat().st_size / 1e6:.1f} MB of JSON Lines; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        prepared = prepare(source, vocab=ranks, cache_dir=scratch / "cache")
        n_tokens = prepared.manifest.n_tokens
        gigabytes = n_tokens * 2 / 1e9
        seconds = export_runs(prepared.tokens_dir, args.runs, scratch / "exports")
        base = statistics.median(seconds["megatron"])
        print(f"\nexport of {n_tokens:,} ids ({prepared.manifest.n_docs:,} documents), median of {args.runs}:\n")
        print("| format | seconds | GB/s of ids | vs megatron |\n|---|---|---|---|")
        for fmt in FORMATS:
            median = statistics.median(seconds[fmt])
            print(f"| {fmt} | {median:.3f} | {gigabytes / median:.2f} | {base / median:.2f}x |")

        timings: dict[str, list[float]] = {mode: [] for mode in PATHS}
        for run in range(args.runs):
            outputs = {}
            for mode in PATHS:
                out = scratch / f"{mode}-{run}" / "corpus_text_document"
                out.parent.mkdir(parents=True)
                result = subprocess.run([sys.executable, __file__, "--child", mode, str(source), str(ranks), str(out)],
                                        check=True, capture_output=True, text=True)
                timings[mode].append(json.loads(result.stdout.strip().splitlines()[-1])["seconds"])
                outputs[mode] = out
            for suffix in (".bin", ".idx"):
                mine, theirs = (Path(f"{outputs[m]}{suffix}").read_bytes() for m in ("tokpack", "megatron-core"))
                if mine != theirs:
                    raise SystemExit(f"{suffix} files differ between tokpack and megatron-core")
        megabytes = source.stat().st_size / 1e6
        reference = statistics.median(timings["megatron-core"])
        print(f"\ncorpus.jsonl to Megatron .bin/.idx (--append-eod), byte-identical outputs, median of {args.runs}:\n")
        print("| path | seconds | MB/s of JSON Lines | vs megatron-core |\n|---|---|---|---|")
        for mode in PATHS:
            median = statistics.median(timings[mode])
            print(f"| {mode} | {median:.2f} | {megabytes / median:.1f} | {reference / median:.2f}x |")


if __name__ == "__main__":
    main()
