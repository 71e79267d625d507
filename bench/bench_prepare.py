"""prepare() throughput and peak memory against tiktoken encoding the same corpus alone.

    .venv/bin/python bench/bench_prepare.py --megabytes 64 --runs 3

Each measurement runs in a fresh child process (so peak RSS is its own), with GPT-2's ranks
(fetched once from PyPI's openai-whisper sdist) as the vocabulary, and prints a Markdown table
of medians. Modes:
  prepare          tokpack.prepare: hash, cut documents, encode on all cores, stream the pack;
  tiktoken-1       tiktoken alone: read the file, one encode_ordinary call, one thread;
  tiktoken-batch   tiktoken alone: encode_ordinary_batch over 1 MB pieces on all cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import add_child_arguments, child_command, ran_as_child  # noqa: E402
from corpus import synthetic_corpus  # noqa: E402

MODES = ("prepare", "tiktoken-1", "tiktoken-batch")


def child(mode: str, corpus: Path, ranks: Path) -> dict[str, float]:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tokpack import GPT2_PATTERN, prepare

    if mode != "prepare":
        encoding = tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=load_tiktoken_bpe(str(ranks)), special_tokens={})
    start = time.perf_counter()
    if mode == "prepare":
        with tempfile.TemporaryDirectory() as cache:
            tokens = prepare(corpus, vocab=ranks, cache_dir=cache).meta.n_tokens
            seconds = time.perf_counter() - start
    else:
        text = corpus.read_text(encoding="utf-8")
        if mode == "tiktoken-1":
            tokens = len(encoding.encode_ordinary(text))
        else:
            pieces = [text[i : i + 1_000_000] for i in range(0, len(text), 1_000_000)]
            tokens = sum(map(len, encoding.encode_ordinary_batch(pieces, num_threads=os.cpu_count() or 1)))
        seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "tokens": tokens, "peak_mib": peak_kib / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=64, help="corpus size (at least 50 for the issue's figure)")
    parser.add_argument("--runs", type=int, default=3, help="runs per mode; medians are reported")
    add_child_arguments(parser, MODES)
    args = parser.parse_args()
    if ran_as_child(args, child):
        return
    corpus = synthetic_corpus(args.megabytes)
    megabytes = corpus.stat().st_size / 1e6
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.runs):
        for mode in MODES:  # interleaved, so drift on a noisy machine hits every mode alike
            out = subprocess.run(child_command(__file__, mode, corpus),
                                 check=True, capture_output=True, text=True).stdout
            results[mode].append(json.loads(out))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"corpus {megabytes:.1f} MB, {args.runs} runs, medians")
    print("| mode | MB/s | M tokens/s | peak RSS MiB | throughput vs tiktoken-1 |")
    print("|---|---|---|---|---|")
    base = statistics.median(r["seconds"] for r in results["tiktoken-1"])
    for mode, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        tokens = runs[0]["tokens"]
        peak = statistics.median(r["peak_mib"] for r in runs)
        print(f"| {mode} | {megabytes / seconds:.1f} | {tokens / seconds / 1e6:.2f} | {peak:.0f} | {base / seconds:.2f}x |")


if __name__ == "__main__":
    main()
