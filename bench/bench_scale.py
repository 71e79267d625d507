"""Parallel prepare() against the usual recipe (nanoGPT's prepare.py) and the encoder-bound limit.

    .venv/bin/pip install -e '.[bench]'      # Hugging Face datasets: a benchmark-only dependency
    .venv/bin/python bench/bench_scale.py --megabytes 50 200 --runs 3

Each measurement runs in a fresh child process (so its memory is its own) on a corpus of real text
(bench/corpus.py: lines of data/ shuffled and repeated), with GPT-2's ranks (PyPI's
openai-whisper sdist, fetched once) as the vocabulary. Every mode encodes the very same documents:
the corpus cut by tokpack's rule (at the last newline within 1 MB, prepare's ``document_bytes``).
The clock starts before the vocabulary is loaded and stops when the output is on disk. Modes:

  tokpack-1        ``prepare(corpus, vocab=ranks, cache_dir=<fresh>, workers=1)``;
  tokpack-2        the same with ``workers=2`` (encoding threads: tiktoken releases the GIL);
  nanogpt-recipe   the usual recipe of nanoGPT's prepare.py, rebuilt from its description: the
                   documents as rows of a Hugging Face ``datasets.Dataset`` (built from a
                   generator, so Arrow files on disk as ``load_dataset`` makes them),
                   ``map(encode_ordinary + <|endoftext|>, num_proc=2)``, then a ``uint16`` memmap of
                   the summed lengths, filled shard by shard (``shard(contiguous=True)``, ids
                   concatenated); no train/validation split (tokpack keeps input order);
  encoder-limit    tiktoken alone: ``encode_ordinary_batch`` over batches of 64 documents on every
                   core, results discarded: what the encoder can do with nothing around it.

Peak memory is reported twice: the largest single process (``ru_maxrss`` of the child and of its
own children, exact), and all the mode's processes together (the sum of their proportional set
sizes, PSS, sampled by this driver every 100 ms: a page shared by forked workers counts once).
Runs are interleaved (run 1 of every mode, then run 2, ...) so drift on a shared machine hits
every mode alike; medians are printed as Markdown tables.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import add_child_arguments, child_command, ran_as_child  # noqa: E402
from corpus import synthetic_corpus  # noqa: E402

MODES = ("tokpack-1", "tokpack-2", "nanogpt-recipe", "encoder-limit")
RECIPE_PROCESSES = 2  # the recipe's num_proc: every core of this machine
RECIPE_MAX_SHARDS = 1024  # nanoGPT writes in 1024 batches; fewer when there are fewer rows
LIMIT_BATCH_DOCUMENTS = 64  # big enough that thread tails do not show, small enough to fit in memory
SAMPLE_SECONDS = 0.1  # reading smaps_rollup costs about 1 ms per 300 MB mapped


def _document_bytes() -> int:
    """prepare()'s default longest document, so every mode cuts the same documents."""
    from tokpack import prepare

    return int(inspect.signature(prepare).parameters["document_bytes"].default)


def _documents(corpus: Path, document_bytes: int) -> Iterator[str]:
    """The corpus's documents in order, cut by tokpack's rule, read through a small window.

    Read with plain reads rather than a memory map so that no mode carries the whole file in its
    resident pages; a window one byte longer than a document tells "end of file" from "cut here".
    """
    from tokpack.corpus.documents import cut_documents

    with open(corpus, "rb") as handle:
        position = 0
        while window := handle.read(document_bytes + 1):
            _, end = next(cut_documents(window, 0, len(window), document_bytes))
            yield window[:end].decode("utf-8")
            position += end
            handle.seek(position)


def _tiktoken_gpt2(ranks: Path) -> Any:
    """A tiktoken Encoding of GPT-2 from the rank file: GPT-2's pattern, ``<|endoftext|>`` last."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tokpack import GPT2_PATTERN

    mergeable = load_tiktoken_bpe(str(ranks))
    return tiktoken.Encoding("gpt2-ranks", pat_str=GPT2_PATTERN, mergeable_ranks=mergeable,
                             special_tokens={"<|endoftext|>": len(mergeable)})


def _run_tokpack(corpus: Path, ranks: Path, workdir: Path, workers: int) -> dict[str, Any]:
    from tokpack import prepare

    start = time.perf_counter()
    meta = prepare(corpus, vocab=ranks, cache_dir=workdir, workers=workers).meta
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "tokens": meta.n_tokens, "documents": meta.n_docs, "ids_sha256": meta.tokens_sha256}


def _encode_row(row: dict[str, str], encoding: Any) -> dict[str, Any]:
    """The recipe's per-document step: ids as a list, ``<|endoftext|>`` appended, and the length."""
    ids = encoding.encode_ordinary(row["text"])
    ids.append(encoding.eot_token)
    return {"ids": ids, "len": len(ids)}


def _rows(corpus: str, document_bytes: int) -> Iterator[dict[str, str]]:
    for text in _documents(Path(corpus), document_bytes):
        yield {"text": text}


def _run_recipe(corpus: Path, ranks: Path, workdir: Path) -> dict[str, Any]:
    import datasets
    import numpy as np

    datasets.disable_progress_bars()  # the recipe shows tqdm bars; drawing them is not the work
    start = time.perf_counter()
    encoding = _tiktoken_gpt2(ranks)
    rows = datasets.Dataset.from_generator(_rows, gen_kwargs={"corpus": str(corpus), "document_bytes": _document_bytes()},
                                           cache_dir=str(workdir / "hf"))
    loaded = time.perf_counter()
    tokenized = rows.map(_encode_row, fn_kwargs={"encoding": encoding}, remove_columns=["text"],
                         num_proc=RECIPE_PROCESSES)
    mapped = time.perf_counter()
    lengths = np.asarray(tokenized.with_format("numpy")["len"], dtype=np.uint64)
    total = int(lengths.sum())
    output = workdir / "train.bin"
    stream = np.memmap(output, dtype=np.uint16, mode="w+", shape=(total,))
    shards, position = min(RECIPE_MAX_SHARDS, len(tokenized)), 0
    for index in range(shards):
        shard = tokenized.shard(num_shards=shards, index=index, contiguous=True).with_format("numpy")
        ids = np.concatenate(list(shard["ids"]))
        stream[position : position + len(ids)] = ids
        position += len(ids)
    stream.flush()
    del stream
    seconds = time.perf_counter() - start
    # Outside the clock: the ids without the separators, hashed as tokpack hashes its pack's
    # tokens, read in small pieces so the check adds nothing to the peak.
    digest = hashlib.sha256()
    with open(output, "rb") as handle:
        for length in lengths.tolist():
            digest.update(handle.read(2 * (int(length) - 1)))
            handle.read(2)
    return {"seconds": seconds, "tokens": total - len(lengths), "documents": len(lengths), "ids_sha256": digest.hexdigest(),
            "phases": {"load": loaded - start, "map": mapped - loaded, "write": seconds - (mapped - start)}}


def _run_limit(corpus: Path, ranks: Path) -> dict[str, Any]:
    start = time.perf_counter()
    encoding = _tiktoken_gpt2(ranks)
    threads, tokens, documents = os.cpu_count() or 1, 0, 0
    batch: list[str] = []
    for text in _documents(corpus, _document_bytes()):
        batch.append(text)
        if len(batch) == LIMIT_BATCH_DOCUMENTS:
            tokens += sum(map(len, encoding.encode_ordinary_batch(batch, num_threads=threads)))
            documents, batch = documents + len(batch), []
    if batch:
        tokens += sum(map(len, encoding.encode_ordinary_batch(batch, num_threads=threads)))
        documents += len(batch)
    return {"seconds": time.perf_counter() - start, "tokens": tokens, "documents": documents}


def child(mode: str, corpus: Path, ranks: Path) -> dict[str, Any]:
    """Run one mode once in this (fresh) process; return its figures."""
    import tokpack  # noqa: F401  imported before the clock in every mode

    with tempfile.TemporaryDirectory(prefix=f"bench-scale-{mode}-") as work:
        if mode.startswith("tokpack-"):
            result = _run_tokpack(corpus, ranks, Path(work), workers=int(mode.rsplit("-", 1)[1]))
        elif mode == "nanogpt-recipe":
            result = _run_recipe(corpus, ranks, Path(work))
        else:
            result = _run_limit(corpus, ranks)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return result | {"process_peak_mib": max(own, children) / 1024}


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process under it (Linux /proc)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    queue.extend(int(child) for child in handle.read().split())
        except OSError:  # gone meanwhile
            continue
    return found


def _pss_kib(pid: int) -> int:
    """Proportional set size: resident pages, each shared page split among its sharers, so the
    pages forked workers share with their parent are counted once in a sum."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(mode: str, corpus: Path) -> dict[str, Any]:
    """Run ``mode`` in a child process, sampling its process tree's resident memory meanwhile."""
    with tempfile.TemporaryFile("w+") as result_file, tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(child_command(__file__, mode, corpus),
                                   stdout=result_file, stderr=errors, env=os.environ | {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
        peak_kib = 0
        while process.poll() is None:
            peak_kib = max(peak_kib, sum(_pss_kib(pid) for pid in _descendants(process.pid)))
            time.sleep(SAMPLE_SECONDS)
        if process.returncode:
            errors.seek(0)
            raise SystemExit(f"{mode} failed ({process.returncode}):\n{errors.read()[-3000:]}")
        result_file.seek(0)
        result: dict[str, Any] = json.loads(result_file.read().strip().splitlines()[-1])
    return result | {"all_peak_mib": peak_kib / 1024}


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def report(corpus: Path, results: dict[str, list[dict[str, Any]]]) -> None:
    """Print one corpus's table of medians, the goals' ratios and the consistency check."""
    megabytes = corpus.stat().st_size / 1e6
    seconds = {mode: _median(runs, "seconds") for mode, runs in results.items()}
    print(f"\n### {megabytes:.0f} MB ({corpus.name}), medians of {len(results[MODES[0]])} runs\n")
    print("| mode | seconds | MB/s | M tokens/s | peak RSS MiB, largest process | peak PSS MiB, all processes |")
    print("|---|---|---|---|---|---|")
    for mode, runs in results.items():
        tokens = runs[0]["tokens"]
        print(f"| {mode} | {seconds[mode]:.1f} | {megabytes / seconds[mode]:.2f} | {tokens / seconds[mode] / 1e6:.2f} "
              f"| {_median(runs, 'process_peak_mib'):.0f} | {_median(runs, 'all_peak_mib'):.0f} |")
    recipe_phases = {phase: statistics.median(run["phases"][phase] for run in results["nanogpt-recipe"])
                     for phase in ("load", "map", "write")}
    print("\nnanogpt-recipe phases (median s): " + ", ".join(f"{k} {v:.1f}" for k, v in recipe_phases.items()))
    print(f"tokpack-2 vs nanogpt-recipe: {seconds['nanogpt-recipe'] / seconds['tokpack-2']:.2f}x (goal >= 1.5)")
    print(f"tokpack-2 vs encoder-limit: {seconds['encoder-limit'] / seconds['tokpack-2']:.2f} (goal >= 0.85)")
    print(f"tokpack-2 vs tokpack-1: {seconds['tokpack-1'] / seconds['tokpack-2']:.2f}x")
    tokens = {mode: {run["tokens"] for run in runs} for mode, runs in results.items()}
    same_ids = {run["ids_sha256"] for mode in ("tokpack-1", "tokpack-2", "nanogpt-recipe") for run in results[mode]}
    print(f"same token count in every mode and run: {len(set().union(*tokens.values())) == 1}; "
          f"same ids (tokpack packs vs recipe memmap without separators): {len(same_ids) == 1}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, nargs="+", default=[50, 200], help="corpus sizes, each measured in turn")
    parser.add_argument("--runs", type=int, default=3, help="runs per mode and size; medians are reported")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                        help="only these modes (prints every run as JSON instead of the tables, which need all four)")
    add_child_arguments(parser, MODES)
    args = parser.parse_args()
    if ran_as_child(args, child):
        return
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average at start {os.getloadavg()[0]:.2f}")
    began = time.perf_counter()
    for megabytes in args.megabytes:
        corpus = synthetic_corpus(megabytes)
        results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in args.modes}
        for _ in range(args.runs):
            for mode in args.modes:  # interleaved, so drift on a noisy machine hits every mode alike
                results[mode].append(measure(mode, corpus))
        if set(args.modes) == set(MODES):
            report(corpus, results)
        else:
            print(json.dumps({corpus.name: results}, indent=1))
    print(f"\nload average at end {os.getloadavg()[0]:.2f}; wall time {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
