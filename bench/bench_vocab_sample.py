"""The default vocabulary sample: held-out characters per token against training time and memory,
for several sample sizes, with this checkout and another (the baseline), on two corpora of this
machine's text (``bench/machine_corpora.py``: ``system``, documentation in many languages; ``code``,
Python sources and C headers).

    PYTHONPATH=src .venv/bin/python bench/bench_vocab_sample.py --baseline /path/to/other/src \\
        [--sizes 10 30 100 all] [--baseline-sizes 10 100] [--runs 3]

Every tenth file of a corpus (in sorted order) is held out; the rest is the training range (two
folders of hard links, so both checkouts read the same files). Each run is a fresh process that
trains the vocabulary ``prepare`` would train on the training folder (``vocab_size`` 50,257, the
exact trainer, every default but ``vocab_sample_bytes``; ``all`` is a bound above the range, so
the whole range) and then encodes the held-out files, cut into documents as ``prepare`` cuts them,
with that vocabulary. It reports the CPU seconds of the training (``time.process_time`` around
reading the sample and training, every thread of the process), the process's peak RSS after it,
what the vocabulary says it was trained on, and the held-out characters per token. Runs alternate
between the checkouts and sizes; times are medians, and the held-out figures of repeated runs
must be equal.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from machine_corpora import MACHINE, assemble, describe  # noqa: E402

#: ``vocab_sample_bytes`` that stands for "the whole training range".
ALL = 10**12


def split(name: str, megabytes: float) -> tuple[Path, Path]:
    """The corpus's training folder and held-out folder (every tenth file), as hard links."""
    corpus = assemble(name, megabytes)
    train, held_out = MACHINE / f"{name}-train", MACHINE / f"{name}-heldout"
    if not train.is_dir():
        for folder in (train, held_out):
            folder.mkdir()
        for index, path in enumerate(sorted(corpus.iterdir())):
            os.link(path, (held_out if index % 10 == 9 else train) / path.name)
    return train, held_out


def child(train: Path, held_out: Path, sample_bytes: int, piece_bytes: int | None = None) -> dict[str, object]:
    """Train as ``prepare`` does with ``vocab_sample_bytes=sample_bytes`` (and pieces of
    ``piece_bytes``, when given), then encode the held-out files."""
    import functools

    from tokpack.corpus.sources import open_corpus
    from tokpack.preparing.options import CorpusReading, VocabularyRequest
    from tokpack.preparing.preparation import _trained_vocabulary

    cache = Path(tempfile.mkdtemp(prefix="bench-vocab-sample-"))
    with CorpusReading().open(train) as source:
        if piece_bytes is not None:
            source.training_sample = functools.partial(source.training_sample, piece_bytes=piece_bytes)  # type: ignore[method-assign]
        start = time.process_time()
        tokenizer, vocabulary_json = _trained_vocabulary(source, "0" * 64, cache, VocabularyRequest(sample_bytes=sample_bytes),
                                                         lambda _: None)
        seconds = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    trained_on = json.loads(Path(vocabulary_json).read_text())["trained_on"]
    sample = (f"{int(trained_on['sample_bytes_used']) / 1e6:.1f} MB, {int(trained_on['sample_documents']):,} documents"
              + (f" ({int(trained_on['sample_pieces']):,} pieces)" if "sample_pieces" in trained_on else ""))
    characters = tokens = 0
    with open_corpus(held_out) as source:
        batch: list[str] = []
        for piece in source.pieces():
            batch.append(piece.text)
            if len(batch) == 64:
                tokens += sum(len(ids) for ids in tokenizer.encode_arrays(batch))
                characters += sum(len(text) for text in batch)
                batch = []
        tokens += sum(len(ids) for ids in tokenizer.encode_arrays(batch)) if batch else 0
        characters += sum(len(text) for text in batch)
    return {"seconds": seconds, "peak_mib": peak, "sample": sample, "n_vocab": tokenizer.n_vocab,
            "characters": characters, "tokens": tokens}


def run_child(src: Path, train: Path, held_out: Path, sample_bytes: int, piece_bytes: int | None = None) -> dict[str, object]:
    environment = dict(os.environ, PYTHONPATH=str(src))
    command = [sys.executable, __file__, "--child", str(train), str(held_out), str(sample_bytes)]
    command += [] if piece_bytes is None else ["--piece-bytes", str(piece_bytes)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{src}: the child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="another checkout's src/ (omit: this checkout only)")
    parser.add_argument("--sizes", nargs="+", default=["10", "30", "100", "all"], help="sample sizes in MB, or all")
    parser.add_argument("--baseline-sizes", nargs="+", default=["10", "100"])
    parser.add_argument("--corpora", nargs="+", default=["system", "code"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=float, default=250.0, help="the most a corpus holds (bench/machine_corpora.py)")
    parser.add_argument("--piece-kib", nargs="+", type=int, default=[None],
                        help="with this checkout, also sample pieces of these sizes (KiB) instead of the default 64")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--piece-bytes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), Path(args.child[1]), int(args.child[2]), args.piece_bytes)))
        return

    def size_bytes(size: str) -> int:
        return ALL if size == "all" else int(float(size) * 1e6)

    this = REPO / "src"
    plan: list[tuple[Path, str, str, int | None]] = [
        (this, "this" if kib is None else f"this, {kib} KiB pieces", size, None if kib is None else kib << 10)
        for kib in args.piece_kib for size in args.sizes if kib is None or size != "all"]
    if args.baseline is not None:
        plan += [(args.baseline, "baseline", size, None) for size in args.baseline_sizes]
    print(f"# {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    for name in args.corpora:
        train, held_out = split(name, args.megabytes)
        print(f"# {describe(name)}; held out: {sum(1 for _ in held_out.iterdir()):,} files, "
              f"{sum(p.stat().st_size for p in held_out.iterdir()) / 1e6:.1f} MB", flush=True)
        results: dict[tuple[str, str], list[dict[str, object]]] = {}
        for run in range(args.runs):
            order = plan if run % 2 == 0 else plan[::-1]
            for src, label, size, piece_bytes in order:
                result = run_child(src, train, held_out, size_bytes(size), piece_bytes)
                results.setdefault((label, size), []).append(result)
                print(f"#   run {run}: {label} {size}: {result['seconds']:.2f} CPU s, "
                      f"{result['characters'] / result['tokens']:.4f} chars/token", flush=True)
        whole = results.get(("this", "all"))
        reference = whole[0]["characters"] / whole[0]["tokens"] if whole else None  # type: ignore[operator]
        print("\n| corpus | checkout | sample MB | training CPU s | peak RSS MiB | held-out chars/token | vs whole range | trained on |")
        print("|---|---|---|---|---|---|---|---|")
        for (label, size), runs in results.items():
            held = {(r["characters"], r["tokens"]) for r in runs}
            assert len(held) == 1, f"{label} {size}: held-out figures differ between runs: {held}"
            ratio = runs[0]["characters"] / runs[0]["tokens"]  # type: ignore[operator]
            print(f"| {name} | {label} | {size} | {statistics.median(r['seconds'] for r in runs):.2f} | "  # type: ignore[misc]
                  f"{statistics.median(r['peak_mib'] for r in runs):.0f} | {ratio:.4f} | "  # type: ignore[misc]
                  f"{'' if reference is None else f'{ratio / reference:.3f}x'} | {runs[0]['sample']} |", flush=True)


if __name__ == "__main__":
    main()
