"""``PackedBatches.when`` for every document of a 10^7-document pack: time and memory.

    PYTHONPATH=src .venv/bin/python bench/bench_when.py --documents 10000000 --runs 1

Builds (once, cached under ``.cache/bench``) a pack of ``--documents`` documents of 1 to 11
random ids (mean 6), served in a mixture with a second pack of 10^5 documents (weights 0.7 /
0.3, ``stream``, rows of 1,024, global batch 512, shuffled), and asks ``when(part, document)``
for every document of the big pack (one epoch), one call a document, in a fresh loader: the first
call builds the epoch's tables (each layout row's step and global row).

Baseline, in the same run: what a user does without ``when``: go through every step of the epoch
and map each row's target positions back to documents (the loader's plan of each step, the
rows' origins, one ``searchsorted`` a step; vectorized), keeping the occurrences of a sample of
documents, over the epoch's steps but its last (which begins the next epoch). Both answer the same question; ``when`` answers one document without going through the
epoch. The sample's occurrences are checked equal.

CPU seconds (``time.process_time``) and the peak resident memory (``ru_maxrss``, a fresh process
per mode) are reported; modes alternate run by run.
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
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import BENCH_CACHE  # noqa: E402

from tokpack.serve import Mixture, PackedBatches  # noqa: E402
from tokpack.store import DocumentCut, PackWriter, Source, Span  # noqa: E402
from tokpack.vocab import VocabIdentity  # noqa: E402

IDENTITY = VocabIdentity(scheme="random", sha256="e" * 64, n_vocab=50_257)
LENGTH, GLOBAL_BATCH, SAMPLE = 1024, 512, 20_000


def pack(documents: int, seed: int) -> Path:
    """A cached pack of ``documents`` documents of 1 to 11 random ids."""
    target = BENCH_CACHE / f"when-{documents}-s{seed}"
    if target.exists():
        return target
    rng = np.random.default_rng(seed)
    with PackWriter(target, vocabulary=IDENTITY) as writer:
        for first in range(0, documents, 1_000_000):
            lengths = rng.integers(1, 12, min(1_000_000, documents - first))
            writer.add_flat(rng.integers(0, 50_256, int(lengths.sum())).astype(np.uint16), lengths)
        span = Span(documents=(0, writer.n_docs), tokens=(0, writer.n_tokens))
        writer.commit(source=Source(name="random", sha256="0" * 64, n_bytes=0), cut=DocumentCut(rule="random"),
                      ranges={"train": span}, pad_id=50_256)
    return target


def loader(big: Path, small: Path) -> PackedBatches:
    return PackedBatches(Mixture([(big, 0.7), (small, 0.3)], names=["big", "small"]), length=LENGTH,
                         global_batch=GLOBAL_BATCH, seed=0)


def sample(documents: int) -> np.ndarray:
    return np.sort(np.random.default_rng(1).choice(documents, SAMPLE, replace=False))


def with_when(big: Path, small: Path, documents: int) -> dict:
    batches = loader(big, small)
    started = time.process_time()
    chosen, found, count = set(sample(documents).tolist()), {}, 0
    for document in range(documents):
        occurrences = batches.when("big", document)
        count += len(occurrences)
        if document in chosen:
            found[document] = [(o["step"], o["row"], *o["tokens"]) for o in occurrences]
    return {"seconds": time.process_time() - started, "occurrences": count, "found": found}


def by_scanning(big: Path, small: Path, documents: int) -> dict:
    """Every step of the epoch: each row's target positions mapped back to the sampled documents."""
    batches = loader(big, small)
    started = time.process_time()
    layout = batches.layouts[0]
    starts = np.asarray(batches.sources[0].starts, dtype=np.int64)
    chosen = sample(documents)
    ends = np.append(starts[1:], batches.sources[0].n_tokens)
    found: dict[int, list] = {int(d): [] for d in chosen}
    served, step, count = 0, 0, 0
    while True:
        part_of, row_of = batches._plan(step)  # the loader's plan of the step: (part, layout row) a row
        mine = np.flatnonzero(part_of == 0)
        if served + len(mine) > layout.n_rows:  # the step where the epoch ends also begins the next: stop before
            break
        served += len(mine)
        origins = layout.origins(row_of[mine])
        first, last = origins + 1, np.minimum(origins + LENGTH + 1, layout.hi)  # a row's targets
        low = np.searchsorted(starts, first, side="right") - 1
        high = np.searchsorted(starts, last - 1, side="right") - 1
        count += int((high - low + 1).sum())
        for index in np.flatnonzero(np.isin(chosen, np.arange(low.min(), high.max() + 1))):
            document = int(chosen[index])
            rows = np.flatnonzero((low <= document) & (high >= document))
            for row in rows.tolist():
                a, b = max(int(first[row]), int(starts[document])), min(int(last[row]), int(ends[document]))
                if a < b:
                    found[document].append((step, int(mine[row]), a, b))
        step += 1
    return {"seconds": time.process_time() - started, "occurrences": count, "found": found, "steps": step}


MODES = {"when": with_when, "scan": by_scanning}


def child(mode: str, big: str, small: str, documents: int, out: str) -> None:
    result = MODES[mode](Path(big), Path(small), documents)
    result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["found"] = {str(k): sorted(v) for k, v in result["found"].items()}
    Path(out).write_text(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, big, small, documents, out = args.child
        child(mode, big, small, int(documents), out)
        return
    big, small = pack(args.documents, 0), pack(100_000, 1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}")
    results: dict[str, list[dict]] = {mode: [] for mode in MODES}
    out = BENCH_CACHE / "when-result.json"
    for _ in range(args.runs):
        for mode in MODES:  # alternate the modes, each in a fresh process
            subprocess.run([sys.executable, __file__, "--child", mode, str(big), str(small), str(args.documents), str(out)],
                           check=True)
            results[mode].append(json.loads(out.read_text()))
    last = results["scan"][0]["steps"]  # compared over the steps the scan went through
    assert {d: [o for o in found if o[0] < last] for d, found in results["when"][0]["found"].items()} == \
        results["scan"][0]["found"], "the sampled documents' occurrences differ"
    for mode, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = statistics.median(r["peak_mib"] for r in runs)
        print(f"{mode:5} {seconds:8.1f} CPU s  {seconds / args.documents * 1e6:6.1f} us a document  peak {peak:7.0f} MiB  "
              f"{runs[0]['occurrences']:,} occurrences")
    print(f"sampled {SAMPLE:,} documents: the same occurrences; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
