"""tokpack's compiled encoder against tiktoken and gigatoken, and ``prepare`` against another
checkout's, interleaved, one thread and every thread, CPU seconds and wall.

    PYTHONPATH=src .venv/bin/python bench/bench_encode.py [--runs 3] [--megabytes 10]
        [--compare-src /path/to/other/src] [--skip-prepare]

Texts (each file of ``data/`` one document, never cut): ``mixed``, the files of ``data/polish``
and ``data/other`` (Polish prose, dialogue, numbers and code; English; Latin, Cyrillic, Greek,
Hebrew, Arabic, CJK and Hangul scripts; emoji) in a fixed shuffled order up to ``--megabytes``;
``english``, ``data/other/english``; ``code``, ``data/polish/code``.

Vocabularies: GPT-2's ranks (the tests' PyPI fetch) and cl100k's (inside the ``bpe-openai``
package), each with its own pattern. Each measurement is a fresh child process that loads the
vocabulary and warms the encoder up on a few documents (numba's compiled code is loaded from its
cache; neither is timed), then encodes each text once and reports CPU seconds
(``time.process_time``: every thread of the process) and wall seconds. Children run in turns
(tokpack, tiktoken, gigatoken, tokpack, ...) so a shared machine's drift hits each alike. Every
encoder's ids are hashed and must agree.

``prepare`` end to end (hash the file, load the vocabulary, cut, encode on every core, write and
checksum the pack), on the ``mixed`` text written as one file, with GPT-2's ranks: tokpack from
this checkout against ``--compare-src`` (the code before the compiled encoder).

The table prints MB of UTF-8 per CPU second and per wall second (medians), and each encoder's
ratio to tiktoken.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from corpus import mixed_documents  # noqa: E402

ENCODERS = ("tokpack", "tiktoken", "gigatoken")
VOCABS = ("gpt2", "cl100k")
SLICES = ("mixed", "english", "code")
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


def texts(megabytes: float) -> dict[str, list[str]]:
    """The three slices, as lists of documents."""
    data = REPO / "data"
    mixed = mixed_documents(megabytes)
    english = [p.read_text(encoding="utf-8") for p in sorted((data / "other" / "english").iterdir())]
    code = [p.read_text(encoding="utf-8") for p in sorted((data / "polish" / "code").iterdir())]
    return {"mixed": mixed, "english": english, "code": code}


def rank_file(vocab: str, folder: Path) -> Path:
    if vocab == "gpt2":
        from registry import gpt2_rank_file

        return gpt2_rank_file()
    path = folder / "cl100k_base.tiktoken"
    if not path.exists():
        packed = resources.files("bpe_openai.data").joinpath("cl100k_base.tiktoken.gz").read_bytes()
        path.write_bytes(gzip.decompress(packed))
    return path


def child(encoder: str, vocab: str, threads: int, megabytes: float, ranks: Path) -> dict[str, Any]:
    """Encode each slice once; CPU and wall seconds, MB and a digest of the ids for each."""
    import numpy as np

    slices = texts(megabytes)
    if encoder == "tokpack":
        from tokpack import GPT2_PATTERN, load_vocabulary

        # cl100k's published rank file loads with its own pattern (tokpack's spelling of tiktoken's)
        tokenizer = load_vocabulary(ranks, pattern=GPT2_PATTERN) if vocab == "gpt2" else load_vocabulary(ranks)
        assert tokenizer.engine == "compiled"

        def encode(docs: list[str]) -> list[Any]:
            return tokenizer.encode_arrays(docs, num_threads=threads)
    elif encoder == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        from tokpack import GPT2_PATTERN

        encoding = tiktoken.Encoding(name=vocab, pat_str=GPT2_PATTERN if vocab == "gpt2" else CL100K_PATTERN,
                                     mergeable_ranks=load_tiktoken_bpe(str(ranks)), special_tokens={})

        def encode(docs: list[str]) -> list[Any]:
            return encoding.encode_ordinary_batch(docs, num_threads=threads)
    else:
        import gigatoken

        giga = gigatoken.Tokenizer.from_tiktoken(ranks, pretokenizer="gpt2" if vocab == "gpt2" else "cl100k",
                                                 special_tokens={})

        def encode(docs: list[str]) -> list[Any]:
            return giga.encode_batch_list(docs, parallel=threads > 1)
    encode(slices["mixed"][:20])  # warm up: compiled code loaded, tables built
    results = {}
    for name, docs in slices.items():
        cpu, wall = time.process_time(), time.perf_counter()
        ids = encode(docs)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        digest = hashlib.sha256()
        for one in ids:
            digest.update(np.asarray(one, dtype=np.uint32).tobytes() + b"|")
        results[name] = {"cpu": cpu, "wall": wall, "mb": sum(len(d.encode()) for d in docs) / 1e6,
                         "ids": digest.hexdigest()[:16], "tokens": sum(len(one) for one in ids)}
    return results


def prepare_child(corpus: Path, ranks: Path) -> dict[str, Any]:
    from tokpack import prepare

    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as cache:
        cpu, wall = time.process_time(), time.perf_counter()
        prepared = prepare(corpus, vocab=ranks, cache_dir=cache, workers=cores)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        tokens = (prepared.tokens_dir / "tokens.npy").read_bytes() if (prepared.tokens_dir / "tokens.npy").exists() else b""
        return {"cpu": cpu, "wall": wall, "mb": corpus.stat().st_size / 1e6, "tokens": prepared.manifest.n_tokens,
                "ids": hashlib.sha256(tokens).hexdigest()[:16]}


def profile(megabytes: float) -> list[str]:
    """Where tokpack's single-thread time goes on each slice (GPT-2 ranks, one fresh cache as in a
    real run), measured phase by phase in this process: the text to code points, the
    pre-tokenizer alone, the whole encoder, the same again with the cache it left (fewer misses),
    and the whole encoder with a one-row cache (every piece a miss), whence the cost of a miss."""
    import numpy as np

    import tokpack.vocab.compiled as compiled
    from tokpack import GPT2_PATTERN, load_vocabulary
    from tokpack.vocab.pretokenizer import GPT2, split_all

    encoder = compiled.CompiledBpe(load_vocabulary(rank_file("gpt2", Path(tempfile.gettempdir()))).ranks, GPT2_PATTERN)
    encoder.encode(["warm up"])
    lines = ["| text | MB | to code points | pre-tokenizer | whole encoder (CPU s) | pieces: hits / misses | "
             "cut parts: hits / misses | µs per miss (all-miss run) | again, warm cache: CPU s, misses | "
             "every piece a miss: CPU s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, docs in texts(megabytes).items():
        mb = sum(len(d.encode()) for d in docs) / 1e6

        def timed(action: Any) -> float:
            start = time.process_time()
            action()
            return time.process_time() - start

        convert = timed(lambda: compiled.code_points(docs))  # noqa: B023
        cps, ends = compiled.code_points(docs)
        out = np.empty(cps.size + 1, dtype=np.int64)
        split_all(cps[:0], ends[:0], GPT2, *encoder.tables, out)  # compiled before the clock starts
        split = timed(lambda: split_all(cps, ends, GPT2, *encoder.tables, out))  # noqa: B023
        def run(cache: Any) -> None:
            # the encoder's own path (runs of GROUP_CODE_POINTS code points, text to code points
            # included), with this cache
            encoder._pool = queue.SimpleQueue()
            encoder._pool.put(cache)
            encoder.encode(docs)  # noqa: B023

        fresh = encoder.new_cache()  # as a real run starts: filled with the tokens
        whole = timed(lambda: run(fresh))  # noqa: B023
        before = fresh.stats.copy()
        warm = timed(lambda: run(fresh))  # noqa: B023
        warm_misses = int(fresh.stats[1] + fresh.stats[2] - before[1] - before[2])
        fresh.stats[:] = before
        blind = compiled.PieceCache.new(1, 1)
        every = timed(lambda: run(blind))  # noqa: B023
        hits, misses, uncached, part_hits, part_misses = (int(x) for x in fresh.stats)
        per_miss = (every - split - convert) / max(1, int(blind.stats[1] + blind.stats[2]))
        lines.append(f"| {name} | {mb:.1f} | {convert:.3f} | {split:.3f} | {whole:.3f} | {hits} / "
                     f"{misses + uncached} | {part_hits} / {part_misses} | {per_miss * 1e6:.2f} | {warm:.3f}, {warm_misses} | {every:.3f} |")
    return lines


def by_file() -> list[str]:
    """tokpack (one thread, a fresh cache per group) against tiktoken on each group of ``data/``'s
    files, GPT-2 ranks, in this process, interleaved, best of 3: which text is slow, and why (the
    piece cache's misses per MB)."""

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tokpack import GPT2_PATTERN, load_vocabulary

    ranks = rank_file("gpt2", Path(tempfile.gettempdir()))
    tokenizer = load_vocabulary(ranks, pattern=GPT2_PATTERN)
    encoder = tokenizer._compiled  # noqa: SLF001 - its cache counters
    oracle = tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=load_tiktoken_bpe(str(ranks)),
                               special_tokens={})
    data = REPO / "data"
    groups = [p for p in sorted((data / "other" / "scripts").iterdir())] + [
        data / "other" / "english", data / "other" / "emoji", *sorted(p for p in (data / "polish").iterdir() if p.is_dir())]
    lines = ["| text | MB | tokpack MB per CPU-s | tiktoken MB per CPU-s | × tiktoken | tokpack's misses per MB (pieces / cut parts) |",
             "|---|---|---|---|---|---|"]
    tokenizer.encode_arrays(["warm up"], num_threads=1)
    for group in groups:
        docs = [p.read_text(encoding="utf-8") for p in sorted(group.rglob("*")) if p.is_file()] if group.is_dir() \
            else [group.read_text(encoding="utf-8")]
        mb = sum(len(d.encode()) for d in docs) / 1e6
        best = {"tokpack": float("inf"), "tiktoken": float("inf")}
        for _ in range(3):
            encoder._pool, encoder._caches = queue.SimpleQueue(), []  # noqa: SLF001 - a fresh cache
            start = time.process_time()
            tokenizer.encode_arrays(docs, num_threads=1)
            best["tokpack"] = min(best["tokpack"], time.process_time() - start)
            start = time.process_time()
            oracle.encode_ordinary_batch(docs, num_threads=1)
            best["tiktoken"] = min(best["tiktoken"], time.process_time() - start)
        report = encoder.cache_report()
        lines.append(f"| {group.relative_to(data)} | {mb:.2f} | {mb / best['tokpack']:.1f} | {mb / best['tiktoken']:.1f} | "
                     f"{best['tiktoken'] / best['tokpack']:.2f} | {(report.misses + report.uncached) / mb:,.0f} / "
                     f"{report.part_misses / mb:,.0f} |")
    return lines


def run_child(arguments: list[str], src: str) -> dict[str, Any]:
    environment = dict(os.environ, PYTHONPATH=src)
    done = subprocess.run([sys.executable, __file__, *arguments], capture_output=True, text=True, env=environment,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"child {arguments} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--compare-src", help="another checkout's src, for prepare's baseline")
    parser.add_argument("--skip-prepare", action="store_true")
    parser.add_argument("--only-vocab", choices=VOCABS)
    parser.add_argument("--profile", action="store_true", help="only print where tokpack's time goes")
    parser.add_argument("--by-file", action="store_true", help="only compare tokpack and tiktoken on each group of data/'s files")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    scratch = Path(tempfile.gettempdir()) / "tokpack-bench-encode"
    scratch.mkdir(exist_ok=True)
    if args.child:
        kind, *rest = args.child.split(":")
        if kind == "prepare":
            print(json.dumps(prepare_child(Path(rest[0]), Path(rest[1]))))
        else:
            encoder, vocab, threads = rest
            print(json.dumps(child(encoder, vocab, int(threads), args.megabytes, rank_file(vocab, scratch))))
        return
    if args.profile:
        print("\n".join(profile(args.megabytes)))
        return
    if args.by_file:
        print("\n".join(by_file()))
        return
    cores = os.cpu_count() or 1
    ours = str(REPO / "src")
    vocabs = [args.only_vocab] if args.only_vocab else list(VOCABS)
    results: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for run in range(args.runs):
        for vocab in vocabs:
            for threads in (1, cores):
                for encoder in ENCODERS:
                    key = (encoder, vocab, threads)
                    results.setdefault(key, []).append(run_child(
                        ["--child", f"encode:{encoder}:{vocab}:{threads}", "--megabytes", str(args.megabytes)], ours))
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    lines = [f"machine: {platform.processor() or platform.machine()}, {cores} cores, Python "
             f"{platform.python_version()}; load average at the end {os.getloadavg()[0]:.1f}",
             f"command: PYTHONPATH=src python bench/bench_encode.py --runs {args.runs} --megabytes {args.megabytes}", "",
             "| vocabulary | text (MB) | threads | encoder | MB per CPU-s | MB per wall-s | × tiktoken (CPU) | × gigatoken (CPU) |",
             "|---|---|---|---|---|---|---|---|"]
    for vocab in vocabs:
        for name in SLICES:
            for threads in (1, cores):
                rates: dict[str, tuple[float, float]] = {}
                digests = set()
                for encoder in ENCODERS:
                    rows = [r[name] for r in results[(encoder, vocab, threads)]]
                    mb = rows[0]["mb"]
                    rates[encoder] = (mb / statistics.median(r["cpu"] for r in rows),
                                      mb / statistics.median(r["wall"] for r in rows))
                    digests.add(rows[0]["ids"])
                if len(digests) != 1:
                    print(f"IDS DIFFER: {vocab} {name} {threads} threads", file=sys.stderr)
                for encoder in ENCODERS:
                    cpu, wall = rates[encoder]
                    lines.append(f"| {vocab} | {name} ({mb:.1f}) | {threads} | {encoder} | {cpu:.1f} | {wall:.1f} | "
                                 f"{cpu / rates['tiktoken'][0]:.2f} | {cpu / rates['gigatoken'][0]:.2f} |")
    if not args.skip_prepare and args.compare_src:
        corpus = scratch / f"mixed-{args.megabytes}.txt"
        corpus.write_text("\n".join(texts(args.megabytes)["mixed"]), encoding="utf-8")
        ranks = rank_file("gpt2", scratch)
        timings: dict[str, list[dict[str, Any]]] = {"this checkout": [], "baseline": []}
        for _ in range(args.runs):
            for label, src in (("this checkout", ours), ("baseline", args.compare_src)):
                timings[label].append(run_child(["--child", f"prepare:{corpus}:{ranks}"], src))
        if len({t[0]["ids"] for t in timings.values()}) != 1:
            print("PACKS DIFFER", file=sys.stderr)
        lines += ["", f"prepare end to end, {corpus.stat().st_size / 1e6:.1f} MB mixed, GPT-2 ranks, {cores} workers:",
                  "", "| prepare | CPU s | wall s | MB per wall-s |", "|---|---|---|---|"]
        walls = {}
        for label, rows in timings.items():
            cpu = statistics.median(r["cpu"] for r in rows)
            walls[label] = statistics.median(r["wall"] for r in rows)
            lines.append(f"| {label} | {cpu:.2f} | {walls[label]:.2f} | {rows[0]['mb'] / walls[label]:.1f} |")
        lines.append(f"\nprepare speed-up (wall): {walls['baseline'] / walls['this checkout']:.2f}×")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
