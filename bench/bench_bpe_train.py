"""Benchmark BPE trainers side by side: tokpack's exact trainer, Hugging Face ``tokenizers``,
``rustbpe`` and ``bpeasy``, and the exact trainer against the reference core.

Every measurement runs in a fresh child process that builds the corpus first and then times only
the training call (the result converted to ranks included). The child loads nothing but the
corpus and the trainer's own package (the pattern is handed over by the parent, which also runs
the held-out check), so its peak memory is the training's. The parent samples the proportional
resident memory (PSS) of the child and all its descendants every 50 ms, so worker processes count
too, without counting pages they share with their parent twice. Each figure is the median of
``--repeats`` runs, the trainers interleaved.

Corpus: every file of ``data/polish/`` and ``data/other/``, every tenth one held
out for the compression check; the rest shuffled (seeded) and repeated until the size is reached,
the last document cut to fit. Pattern: ``tokpack.vocab.GPT4_PATTERN`` for every trainer.

    .venv/bin/pip install -e ".[bench]"                             # rustbpe and bpeasy
    .venv/bin/python bench/bench_bpe_train.py                        # 10 and 50 MB, 8192 and 32768 merges
    .venv/bin/python bench/bench_bpe_train.py --reference-only       # exact vs reference, 1 MB
    .venv/bin/python bench/bench_bpe_train.py --sizes 10 --merges 8192 --repeats 1 --trainers exact hf
    .venv/bin/python bench/bench_bpe_train.py --files-gb 1 --merges 32768 --trainers exact rustbpe   # from files

``--files-gb`` writes the same text, repeated, as a folder of ~4 MB files and trains from the
folder: tokpack with :func:`tokpack.bpe.train_from_files` (streamed through its workers),
rustbpe from an iterator that reads one file at a time, so neither holds the corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"
TRAINERS = ("exact", "hf", "rustbpe", "bpeasy")
PATTERN_VARIABLE = "TOKPACK_BENCH_PATTERN"


def _pattern() -> str:
    from tokpack.vocab import GPT4_PATTERN

    return GPT4_PATTERN  # spelled so that regex, tiktoken and HF's Oniguruma cut alike


def _child_pattern() -> str:
    """The pattern in a child: handed over by the parent, so a child never imports tokpack for it."""
    return os.environ.get(PATTERN_VARIABLE) or _pattern()


def _corpus(size_mb: float, data: Path) -> tuple[list[str], list[str]]:
    paths = sorted([*data.glob("polish/**/*.txt"), *data.glob("other/**/*.txt")])
    if not paths:
        raise SystemExit(f"no text files under {data}")
    held_out = [p.read_text(encoding="utf-8") for p in paths[::10]]
    pool = [p.read_text(encoding="utf-8") for i, p in enumerate(paths) if i % 10]
    target = int(size_mb * 1_000_000)
    rng = random.Random(0)
    texts: list[str] = []
    size = 0
    while size < target:
        shuffled = pool[:]
        rng.shuffle(shuffled)
        for text in shuffled:
            encoded = text.encode("utf-8")[: target - size]
            texts.append(encoded.decode("utf-8", errors="ignore"))  # the last one is cut to fit
            size += len(encoded)
            if size >= target:
                break
    return texts, held_out


def _train(trainer: str, texts: list[str], merges: int, pattern: str) -> tuple[dict[bytes, int], dict[str, float]]:
    """Train; return ranks ({token bytes: rank}) and phase timings where the trainer has them."""
    if trainer == "exact":
        from tokpack.bpe import train_fast

        training = train_fast(texts, merges, pattern=pattern, min_frequency=2)
        return training.ranks(), training.seconds
    if trainer == "hf":
        from tokpack.vocab import train_hf_bytelevel

        return train_hf_bytelevel(texts, vocab_size=256 + merges, pattern=pattern).ranks, {}
    if trainer == "rustbpe":
        import rustbpe

        tokenizer = rustbpe.Tokenizer()
        tokenizer.train_from_iterator(iter(texts), 256 + merges, pattern=pattern)
        ranks: dict[bytes, int] = {}
        for token, rank in sorted(tokenizer.get_mergeable_ranks(), key=lambda item: item[1]):
            ranks.setdefault(bytes(token), rank)
        return ranks, {}
    if trainer == "bpeasy":
        import bpeasy

        return dict(bpeasy.train_bpe(iter(texts), pattern, 128, 256 + merges)), {}
    raise SystemExit(f"unknown trainer {trainer}")


def _child(trainer: str, size_mb: float, merges: int, output: Path, data: Path) -> None:
    # Nothing but the corpus and the trainer's own package is loaded here: the pattern comes from
    # the parent, and the held-out check runs there, so the peak measured is the training's.
    pattern = _child_pattern()
    texts, _ = _corpus(size_mb, data)
    started = time.perf_counter()
    ranks, phases = _train(trainer, texts, merges, pattern)
    seconds = time.perf_counter() - started
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    output.write_text(json.dumps({"seconds": seconds, "phases": phases, "n_ranks": len(ranks),
                                  "ranks": [[token.hex(), rank] for token, rank in ordered],
                                  "tokens": [token.hex() for token, _ in ordered if len(token) > 1]}))


def _held_out_check(run: dict[str, Any], held_out: list[str]) -> tuple[float, int]:
    """Characters per token, and tokens, of the held-out texts under a run's ranks (in the parent)."""
    from tokpack.vocab import BpeTokenizer

    tokenizer = BpeTokenizer(ranks={bytes.fromhex(token): rank for token, rank in run["ranks"]}, pattern=_pattern())
    tokens = sum(len(ids) for ids in tokenizer.encode_batch(held_out))
    return sum(map(len, held_out)) / tokens, tokens


def _tree_rss(pid: int) -> int:
    """Proportional resident bytes (PSS) of ``pid`` and every descendant (0 for processes gone).

    PSS, not RSS: forked workers map their parent's pages, and summing RSS would count the
    corpus once per worker.
    """
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                total += sum(_tree_rss(int(child)) for child in children.read().split())
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return total


def _measure(trainer: str, size_mb: float, merges: int, data: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "result.json"
        command = [sys.executable, __file__, "--child", trainer, str(size_mb), str(merges), str(output), "--data", str(data)]
        return _measure_command(command, output)


def _first_difference(ours: list[str], theirs: list[str]) -> int | None:
    return next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)


def _run_trainers(args: argparse.Namespace) -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| size | merges | trainer | seconds (median) | split+count / index / merge s | peak PSS MiB | time vs hf | memory vs hf | held-out chars/token (tokens) | first merge differing from exact |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    held_out: list[str] | None = None
    for size in args.sizes:
        for merges in args.merges:
            results: dict[str, list[dict[str, Any]]] = {trainer: [] for trainer in args.trainers}
            # Interleaved (a, b, c, a, b, c, ...): load from other users of the machine then hits
            # every trainer alike instead of one whole series.
            for _ in range(args.repeats):
                for trainer in args.trainers:
                    results[trainer].append(_measure(trainer, size, merges, args.data))
            hf = results.get("hf")
            hf_seconds = statistics.median(r["seconds"] for r in hf) if hf else None
            hf_rss = statistics.median(r["peak_rss_mib"] for r in hf) if hf else None
            exact_tokens = results["exact"][0]["tokens"] if "exact" in results else None
            if held_out is None:
                held_out = _corpus(0, args.data)[1]  # the same for every size: built once, no training text
            for trainer, runs in results.items():
                seconds = statistics.median(r["seconds"] for r in runs)
                rss = statistics.median(r["peak_rss_mib"] for r in runs)
                phases = runs[0]["phases"]
                phase_text = " / ".join(f"{statistics.median(r['phases'][k] for r in runs):.2f}" for k in ("split_count", "index", "merge")) if phases else "-"
                differs = "-"
                if exact_tokens is not None and trainer != "exact":
                    first = _first_difference(exact_tokens, runs[0]["tokens"])
                    differs = "none" if first is None else str(first + 1)
                time_ratio = f"{seconds / hf_seconds:.2f}x" if hf_seconds else "-"
                rss_ratio = f"{rss / hf_rss:.2f}x" if hf_rss else "-"
                chars_per_token, held_out_tokens = _held_out_check(runs[0], held_out)
                print(
                    f"| {size} MB | {merges} | {trainer} | {seconds:.2f} | {phase_text} | {rss:.0f} | {time_ratio} | {rss_ratio} "
                    f"| {chars_per_token:.4f} ({held_out_tokens}) | {differs} |",
                    flush=True,
                )


def _write_folder(size_gb: float, data: Path, folder: Path) -> int:
    """The benchmark corpus, repeated to ``size_gb``, as files of about 4 MB; returns bytes written."""
    texts, _ = _corpus(min(size_gb * 1000, 50), data)  # at most 50 MB distinct order, then repeated
    folder.mkdir(parents=True, exist_ok=True)
    target, written, number = int(size_gb * 1e9), 0, 0
    block: list[str] = []
    block_size = 0
    while written < target:
        for text in texts:
            block.append(text)
            block_size += len(text.encode("utf-8"))
            if block_size >= 4_000_000 or written + block_size >= target:
                (folder / f"{number:05d}.txt").write_text("\n".join(block), encoding="utf-8")
                written += block_size
                number, block, block_size = number + 1, [], 0
                if written >= target:
                    break
    return written


def _files_child(trainer: str, folder: Path, merges: int, output: Path) -> None:
    pattern = _child_pattern()
    started = time.perf_counter()
    if trainer == "exact":
        from tokpack.bpe import train_from_files

        result = train_from_files(folder, merges, pattern=pattern, min_frequency=2)
        ranks, phases, n_bytes = result.training.ranks(), result.training.seconds, result.n_bytes
    elif trainer == "rustbpe":
        import rustbpe

        def documents() -> Any:
            for path in sorted(folder.glob("*.txt")):
                yield path.read_text(encoding="utf-8")

        tokenizer = rustbpe.Tokenizer()
        tokenizer.train_from_iterator(documents(), 256 + merges, pattern=pattern)
        ranks = {}
        for token, rank in sorted(tokenizer.get_mergeable_ranks(), key=lambda item: item[1]):
            ranks.setdefault(bytes(token), rank)
        phases, n_bytes = {}, sum(p.stat().st_size for p in folder.glob("*.txt"))
    else:
        raise SystemExit(f"--files-gb runs exact and rustbpe, not {trainer}")
    seconds = time.perf_counter() - started
    ordered = [token.hex() for token, rank in sorted(ranks.items(), key=lambda item: item[1]) if len(token) > 1]
    output.write_text(json.dumps({"seconds": seconds, "phases": phases, "n_bytes": n_bytes, "tokens": ordered}))


def _measure_command(command: list[str], output: Path) -> dict[str, Any]:
    process = subprocess.Popen(command, env=os.environ | {PATTERN_VARIABLE: _pattern()})
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(process.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    done.set()
    sampler.join()
    if code != 0:
        raise SystemExit(f"{command} failed with exit code {code}")
    result = json.loads(output.read_text())
    result["peak_rss_mib"] = peak / 2**20
    return result


def _run_files(args: argparse.Namespace) -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        folder = Path(scratch) / "corpus"
        written = _write_folder(args.files_gb, args.data, folder)
        print(f"corpus: {written / 1e9:.2f} GB in {len(list(folder.glob('*.txt')))} files under {folder}")
        print("| corpus | merges | trainer | seconds (median) | split+count / index / merge s | peak PSS MiB | first merge differing from exact |")
        print("|---|---|---|---|---|---|---|")
        for merges in args.merges:
            results: dict[str, list[dict[str, Any]]] = {trainer: [] for trainer in args.trainers}
            for _ in range(args.repeats):
                for trainer in args.trainers:
                    output = Path(scratch) / f"{trainer}.json"
                    command = [sys.executable, __file__, "--files-child", trainer, str(folder), str(merges), str(output)]
                    run = _measure_command(command, output)
                    results[trainer].append(run)
                    # Each run as it ends too: a 1 GB run is long, and the machine may be shared.
                    print(f"  run: {trainer} {run['seconds']:.1f} s, peak PSS {run['peak_rss_mib']:.0f} MiB, "
                          f"phases {run['phases']}, load average {os.getloadavg()[0]:.1f}", flush=True)
            exact_tokens = results["exact"][0]["tokens"] if "exact" in results else None
            for trainer, runs in results.items():
                seconds = statistics.median(r["seconds"] for r in runs)
                rss = statistics.median(r["peak_rss_mib"] for r in runs)
                phases = runs[0]["phases"]
                phase_text = " / ".join(f"{statistics.median(r['phases'][k] for r in runs):.1f}" for k in ("split_count", "index", "merge")) if phases else "-"
                differs = "-"
                if exact_tokens is not None and trainer != "exact":
                    first = _first_difference(exact_tokens, runs[0]["tokens"])
                    differs = "none" if first is None else str(first + 1)
                print(f"| {written / 1e9:.2f} GB, files | {merges} | {trainer} | {seconds:.1f} | {phase_text} | {rss:.0f} | {differs} |", flush=True)


def _reference_child(size_mb: float, merges: int, which: str, output: Path, data: Path) -> None:
    from tokpack.bpe import train_bpe, train_fast

    texts, _ = _corpus(size_mb, data)
    started = time.perf_counter()
    if which == "reference":
        _, trace = train_bpe(texts, merges)
    else:
        trace = train_fast(texts, merges).trace
    seconds = time.perf_counter() - started
    output.write_text(json.dumps({"seconds": seconds, "trace": [row.model_dump() for row in trace]}))


def _run_reference(args: argparse.Namespace) -> None:
    size, merges = args.reference_mb, args.reference_merges
    runs: dict[str, list[dict[str, Any]]] = {"reference": [], "exact": []}
    with tempfile.TemporaryDirectory() as scratch:
        for which, repeats in (("reference", args.reference_repeats), ("exact", args.repeats)):
            for run in range(repeats):
                output = Path(scratch) / f"{which}{run}.json"
                command = [sys.executable, __file__, "--reference-child", which, str(size), str(merges), str(output), "--data", str(args.data)]
                subprocess.run(command, check=True)
                runs[which].append(json.loads(output.read_text()))
    assert runs["reference"][0]["trace"] == runs["exact"][0]["trace"], "the fast trainer's trace differs from the reference"
    reference = statistics.median(r["seconds"] for r in runs["reference"])
    exact = statistics.median(r["seconds"] for r in runs["exact"])
    print(f"| {size} MB, no pattern, {merges} merges | reference {reference:.1f} s ({len(runs['reference'])} run) "
          f"| exact {exact:.3f} s (median of {len(runs['exact'])}) | {reference / exact:.0f}x | traces identical |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=float, nargs="+", default=[10, 50], help="corpus sizes in MB")
    parser.add_argument("--merges", type=int, nargs="+", default=[8192, 32768], help="merge counts")
    parser.add_argument("--trainers", nargs="+", default=list(TRAINERS), choices=TRAINERS)
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median reported)")
    parser.add_argument("--reference-mb", type=float, default=1.0, help="corpus size of the reference comparison")
    parser.add_argument("--reference-merges", type=int, default=512, help="merges of the reference comparison")
    parser.add_argument("--reference-repeats", type=int, default=1, help="runs of the (slow) reference core")
    parser.add_argument("--reference-only", action="store_true", help="only compare against the reference core")
    parser.add_argument("--skip-reference", action="store_true", help="skip the reference comparison")
    parser.add_argument("--data", type=Path, default=DATA, help="the data folder (data/ in the repository)")
    parser.add_argument("--files-gb", type=float, help="train from a folder of this many GB instead (exact, rustbpe)")
    parser.add_argument("--scratch", type=Path, default=None, help="where --files-gb writes its folder (default: temp)")
    parser.add_argument("--files-child", nargs=4, metavar=("TRAINER", "FOLDER", "MERGES", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=4, metavar=("TRAINER", "MB", "MERGES", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--reference-child", nargs=4, metavar=("WHICH", "MB", "MERGES", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.files_child:
        trainer, folder, merges, output = args.files_child
        _files_child(trainer, Path(folder), int(merges), Path(output))
    elif args.files_gb:
        _run_files(args)
    elif args.child:
        trainer, size, merges, output = args.child
        _child(trainer, float(size), int(merges), Path(output), args.data)
    elif args.reference_child:
        which, size, merges, output = args.reference_child
        _reference_child(float(size), int(merges), which, Path(output), args.data)
    else:
        if not args.skip_reference:
            _run_reference(args)
        if not args.reference_only:
            _run_trainers(args)


if __name__ == "__main__":
    main()
