"""``prepare`` with a given vocabulary against tiktoken's ``encode_ordinary_batch`` on the same
documents, both on every core, interleaved.

    PYTHONPATH=src .venv/bin/python bench/bench_prepare_vs_tiktoken.py [--megabytes 20] [--runs 5]

Corpus: ``bench/corpus.py``'s shuffled real lines of ``data/polish``, ``data/other/english`` and
``data/other/scripts`` (Latin, Cyrillic, Greek, Hebrew, Arabic, CJK, Hangul), 20 MB by default.
Vocabulary: GPT-2's ranks (PyPI's openai-whisper sdist, fetched once). Each run is a fresh child
process; modes alternate (prepare, tiktoken, prepare, ...) so drift on a shared machine hits both.

Modes (wall time from the call, imports excluded):
  prepare        ``tokpack.prepare(corpus, vocab=ranks)`` into an empty cache: hash the file, load
                 and hash the vocabulary, cut the documents, encode them on every core, write and
                 checksum the pack.
  tiktoken       load the same rank file (``load_tiktoken_bpe``), read the corpus, cut it into the
                 same documents, ``encode_ordinary_batch(documents, num_threads=cores)``; ids kept
                 in memory, nothing written.
  tiktoken-encode  only the ``encode_ordinary_batch`` call of ``tiktoken`` (the floor).

``--compare-src DIR`` adds a third mode, ``prepare-baseline``: the same ``prepare`` call with
tokpack imported from ``DIR`` (e.g. another checkout's ``src``), interleaved with the others.

The figure is throughput relative to tiktoken: ``median(tiktoken seconds) / median(prepare
seconds)``; the goal is at least 0.95.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import add_child_arguments, child_command, ran_as_child  # noqa: E402
from corpus import synthetic_corpus  # noqa: E402

MODES = ("prepare", "tiktoken")
DOCUMENT_BYTES = 1_048_576  # prepare's default cut


def child(mode: str, corpus: Path, ranks: Path) -> dict[str, float]:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tokpack import GPT2_PATTERN, prepare
    from tokpack.corpus.documents import cut_documents

    cores = os.cpu_count() or 1
    if mode in ("prepare", "prepare-baseline"):
        with tempfile.TemporaryDirectory() as cache:
            start = time.perf_counter()
            tokens = prepare(corpus, vocab=ranks, cache_dir=cache, workers=cores).meta.n_tokens
            return {"seconds": time.perf_counter() - start, "tokens": tokens}
    start = time.perf_counter()
    encoding = tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=load_tiktoken_bpe(str(ranks)),
                                 special_tokens={})
    data = corpus.read_bytes()
    documents = [data[a:b].decode("utf-8") for a, b in cut_documents(data, 0, len(data), DOCUMENT_BYTES)]
    encode_start = time.perf_counter()
    tokens = sum(map(len, encoding.encode_ordinary_batch(documents, num_threads=cores)))
    end = time.perf_counter()
    return {"seconds": end - start, "encode_seconds": end - encode_start, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=20, help="corpus size")
    parser.add_argument("--runs", type=int, default=5, help="runs per mode (interleaved); medians are reported")
    parser.add_argument("--compare-src", type=Path, help="another tokpack source tree to time as prepare-baseline")
    add_child_arguments(parser, (*MODES, "prepare-baseline"))
    args = parser.parse_args()
    if ran_as_child(args, child):
        return
    corpus = synthetic_corpus(args.megabytes)
    modes = (*MODES, "prepare-baseline") if args.compare_src else MODES
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for run in range(args.runs):
        for mode in modes if run % 2 == 0 else modes[::-1]:  # alternate which goes first, too
            env = dict(os.environ)
            if mode == "prepare-baseline":
                env["PYTHONPATH"] = str(args.compare_src.resolve())
            out = subprocess.run(child_command(__file__, mode, corpus),
                                 check=True, capture_output=True, text=True, env=env).stdout
            results[mode].append(json.loads(out))
    tokens = {mode: {r["tokens"] for r in rows} for mode, rows in results.items()}
    assert tokens["prepare"] == tokens["tiktoken"], tokens  # the same documents, the same ids
    median = {mode: statistics.median(r["seconds"] for r in rows) for mode, rows in results.items()}
    encode_only = statistics.median(r["encode_seconds"] for r in results["tiktoken"])
    megabytes = corpus.stat().st_size / 1e6
    load = os.getloadavg()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {load:.1f}; corpus {megabytes:.1f} MB, {tokens['prepare'].pop():,} ids; {args.runs} runs per mode")
    print("| mode | median s | MB/s | runs (s) |\n|---|---|---|---|")
    for mode, rows in results.items():
        runs = ", ".join(f"{r['seconds']:.2f}" for r in rows)
        print(f"| {mode} | {median[mode]:.2f} | {megabytes / median[mode]:.1f} | {runs} |")
    print(f"| tiktoken-encode (the batch call alone) | {encode_only:.2f} | {megabytes / encode_only:.1f} | |")
    print(f"\nprepare / tiktoken throughput: {median['tiktoken'] / median['prepare']:.2f} "
          f"(vs the batch call alone: {encode_only / median['prepare']:.2f}); goal >= 0.95")
    if args.compare_src:
        print(f"prepare-baseline / tiktoken throughput: {median['tiktoken'] / median['prepare-baseline']:.2f}; "
              f"prepare is {median['prepare-baseline'] / median['prepare']:.2f}x the baseline's speed")


if __name__ == "__main__":
    main()
