"""tokpack's compiled encoder against gigatoken and tiktoken, each through its fastest call: one
thread, a fresh tokenizer per text, the first pass (cold) and the second (warm) apart, CPU seconds
and wall, children interleaved, medians; and ``prepare`` of a 10 MB file against a minimal
gigatoken script, whole process.

    PYTHONPATH=src .venv/bin/python bench/bench_encode.py [--runs 5] [--vocabs cl100k o200k]
        [--kinds english python ...] [--prepare-megabytes 10] [--skip-prepare]

Texts: ``bench/encode_texts.py`` (about 2 MB each of English prose, Python, C, JSON, minified
JavaScript, CSV, Polish and CJK, none of it this repository's; sources and licences there).
Vocabularies: cl100k's and o200k's published rank files (inside the ``bpe-openai`` package), with
their own patterns.

The calls (each tool's documented batch calls; the fastest of each is what the ratios use):

- tokpack: ``BpeTokenizer.encode_arrays(docs, num_threads=1)`` (``uint32`` arrays, views of one
  buffer), on the documents as ``str``, and on their UTF-8 as ``bytes`` (made before the clock
  starts, as gigatoken's ``BytesSource`` is given its UTF-8: checked as UTF-8, then read in place).
- gigatoken: ``Tokenizer.encode_batch(docs, parallel=False)`` (one flat ``uint32`` buffer with
  offsets, an awkward array), and ``encode_batch(BytesSource([utf8], separator))``, the same call on
  the documents' UTF-8 joined by a separator (made before the clock starts: the UTF-8 is given to it).
- tiktoken: ``Encoding.encode_ordinary_batch(docs, num_threads=1)`` (lists of ints) and
  ``encode_to_numpy(doc)`` per document (``uint32`` arrays; the encoding has no special tokens).

Each child process loads one tool and one vocabulary; for each text it builds a fresh tokenizer
and encodes one short word (neither timed: code loaded, tables and caches made), then times the
first pass over the text (cold), frees its output outside the clock, times a second pass (warm),
and hashes each pass's ids outside the clock. CPU seconds are ``time.process_time`` (every thread
of the process), wall seconds ``time.perf_counter``. Children run in turns (tokpack, gigatoken,
gigatoken-bytes, tiktoken, ...) so a shared machine's drift hits each alike; each figure is the
median over ``--runs``. The ratios to gigatoken's faster call are taken of those medians, and run
by run (a run's children run back to back), whose median, least and greatest say how far the
ratio moves from process to process; the load average is sampled after each child. Every tool's
ids must equal tiktoken's on every text and pass (checked by the hashes; a difference is printed
and fails the run).

``prepare``: ``tokpack prepare FILE --vocab cl100k_base.tiktoken --document-bytes SIZE`` (the file one
document, as the script encodes it) in a fresh process with fresh caches, against a script that loads gigatoken, encodes the same file (``Tokenizer.encode`` of its
bytes) and saves the ids with ``numpy.save``; whole-process CPU seconds (``RUSAGE_CHILDREN``),
medians, interleaved. The file is the eight texts repeated to ``--prepare-megabytes``.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from encode_texts import KINDS, texts  # noqa: E402

TOOLS = ("tokpack", "tokpack-bytes", "gigatoken", "gigatoken-bytes", "tiktoken-batch", "tiktoken-numpy")
#: What each tool row is, for the table.
CALLS = {
    "tokpack": "encode_arrays(docs, num_threads=1)",
    "tokpack-bytes": "encode_arrays(utf8 docs, num_threads=1)",
    "gigatoken": "encode_batch(docs, parallel=False)",
    "gigatoken-bytes": "encode_batch(BytesSource(utf8, separator), parallel=False)",
    "tiktoken-batch": "encode_ordinary_batch(docs, num_threads=1)",
    "tiktoken-numpy": "encode_to_numpy(doc) per document",
}
VOCABS = ("cl100k", "o200k")
SEPARATOR = b"\x00\x01\x00"  # in no text


def rank_file(vocab: str) -> Path:
    """The published rank file, unpacked from the ``bpe-openai`` package."""
    path = Path(tempfile.gettempdir()) / "tokpack-bench-encode" / f"{vocab}_base.tiktoken"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        packed = resources.files("bpe_openai.data").joinpath(f"{vocab}_base.tiktoken.gz").read_bytes()
        partial = path.with_suffix(".partial")
        partial.write_bytes(gzip.decompress(packed))
        partial.replace(path)
    return path


def _digest(ids: list[Any]) -> str:
    import numpy as np

    digest = hashlib.sha256()
    for one in ids:
        digest.update(np.asarray(one, dtype=np.uint32).tobytes() + b"|")
    return digest.hexdigest()[:16]


def _maker(tool: str, vocab: str) -> Any:
    """A function that makes a fresh tokenizer and returns its encode of a list of documents (and a
    function that turns its output into per-document id sequences, outside the clock)."""
    path = rank_file(vocab)
    if tool.startswith("tokpack"):
        from tokpack import load_vocabulary

        base = load_vocabulary(path)  # the published file: its own pattern

        def make() -> Any:
            from tokpack.vocab import BpeTokenizer

            tokenizer = BpeTokenizer(ranks=base.ranks, pattern=base.pattern, special_tokens=base.special_tokens)
            assert tokenizer.engine == "compiled", tokenizer.fallback_reason
            return lambda docs: tokenizer.encode_arrays(docs, num_threads=1), list
        return make
    if tool.startswith("gigatoken"):
        import awkward as ak
        import gigatoken

        def unpack(out: Any) -> list[Any]:
            flat = ak.to_numpy(ak.flatten(out))
            ends = ak.to_numpy(ak.num(out)).cumsum()
            return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)]

        def make() -> Any:
            giga = gigatoken.Tokenizer.from_tiktoken(path, pretokenizer=vocab, special_tokens={})
            if tool == "gigatoken":
                return lambda docs: giga.encode_batch(docs, parallel=False), unpack
            return lambda source: giga.encode_batch(source, parallel=False), unpack
        return make
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tokpack.vocab.patterns import CL100K_PATTERN
    from tokpack.vocab.published import O200K_PATTERN

    ranks = load_tiktoken_bpe(str(path))
    pattern = CL100K_PATTERN if vocab == "cl100k" else O200K_PATTERN

    def make() -> Any:
        encoding = tiktoken.Encoding(name=vocab, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        if tool == "tiktoken-batch":
            return lambda docs: encoding.encode_ordinary_batch(docs, num_threads=1), list
        return lambda docs: [encoding.encode_to_numpy(doc) for doc in docs], list
    return make


def child(tool: str, vocab: str, kinds: list[str]) -> dict[str, Any]:
    """Each text: a fresh tokenizer, a cold pass and a warm pass, timed apart."""
    make = _maker(tool, vocab)
    results = {}
    for kind, docs in texts(kinds).items():
        encode, unpack = make()
        given: Any = docs
        if tool == "tokpack-bytes":
            given = [doc.encode("utf-8") for doc in docs]
            encode([b"warm"])
        elif tool == "gigatoken-bytes":
            import gigatoken

            given = gigatoken.BytesSource([SEPARATOR.join(doc.encode("utf-8") for doc in docs)],
                                          separator=SEPARATOR)
            encode(gigatoken.BytesSource([b"warm"]))
        else:
            encode(["warm"])
        passes = []
        for _ in range(2):
            gc.collect()
            cpu, wall = time.process_time(), time.perf_counter()
            out = encode(given)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            ids = unpack(out)
            passes.append({"cpu": cpu, "wall": wall, "ids": _digest(ids), "tokens": sum(len(one) for one in ids)})
            del out, ids  # freed outside the clock
        results[kind] = {"mb": sum(len(d.encode("utf-8")) for d in docs) / 1e6, "cold": passes[0], "warm": passes[1]}
    return results


def run_child(arguments: list[str]) -> Any:
    environment = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, __file__, *arguments], capture_output=True, text=True, env=environment,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"child {arguments} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


GIGA_SCRIPT = """import sys, numpy as np, gigatoken
tok = gigatoken.Tokenizer.from_tiktoken(sys.argv[1], pretokenizer="cl100k", special_tokens={})
np.save(sys.argv[3], tok.encode(open(sys.argv[2], "rb").read()))
"""


def whole_process(command: list[str], cwd: Path) -> float:
    """CPU seconds (user + system) of a command's whole process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, cwd=cwd, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(REPO / "src"), TOKPACK_CACHE=str(cwd / "cache")))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def prepare_rows(runs: int, megabytes: float) -> list[str]:
    """``tokpack prepare FILE --vocab`` against a minimal gigatoken script, whole process."""
    import numpy as np

    scratch = Path(tempfile.mkdtemp(prefix="tokpack-bench-prepare-"))
    corpus = scratch / "corpus.txt"
    joined = "\n".join(doc for docs in texts().values() for doc in docs).encode("utf-8")
    corpus.write_bytes((joined * int(megabytes * 1e6 // len(joined) + 1))[:int(megabytes * 1e6)].decode(
        "utf-8", errors="ignore").encode("utf-8"))
    script = scratch / "giga.py"
    script.write_text(GIGA_SCRIPT)
    ranks = rank_file("cl100k")
    tokpack = str(Path(sys.executable).with_name("tokpack"))
    times: dict[str, list[float]] = {"tokpack prepare": [], "gigatoken script": []}
    for run in range(runs):
        work = scratch / f"run{run}"
        work.mkdir()
        times["tokpack prepare"].append(whole_process(
            [tokpack, "prepare", str(corpus), "--vocab", str(ranks), "--cache-dir", str(work / "packs"), "--workers",
             "1", "--document-bytes", str(corpus.stat().st_size + 1)], work))
        times["gigatoken script"].append(whole_process([sys.executable, str(script), str(ranks), str(corpus),
                                                        str(work / "ids.npy")], work))
    packs = list((scratch / "run0" / "packs").rglob("tokens.npy"))
    same = bool(packs) and np.array_equal(np.load(packs[0]).astype(np.uint32), np.load(scratch / "run0" / "ids.npy"))
    mb = corpus.stat().st_size / 1e6
    lines = ["", f"prepare of one {mb:.1f} MB file (the eight texts repeated), cl100k, one worker, whole process "
             f"(ids equal: {same}):", "", "| command | CPU s (median) | runs |", "|---|---|---|"]
    for name, values in times.items():
        lines.append(f"| {name} | {statistics.median(values):.3f} | {', '.join(f'{v:.3f}' for v in values)} |")
    ratio = statistics.median(times["gigatoken script"]) / statistics.median(times["tokpack prepare"])
    lines.append(f"\ngigatoken script / tokpack prepare (CPU): {ratio:.2f}x")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--vocabs", nargs="+", choices=VOCABS, default=list(VOCABS))
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--prepare-megabytes", type=float, default=10.0)
    parser.add_argument("--skip-prepare", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tool, vocab = args.child.split(":")
        print(json.dumps(child(tool, vocab, args.kinds)))
        return
    texts(args.kinds)  # assembled (and cached) before any child
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    loads = []
    for run in range(args.runs):
        for vocab in args.vocabs:
            for tool in args.tools:
                results.setdefault((tool, vocab), []).append(
                    run_child(["--child", f"{tool}:{vocab}", "--kinds", *args.kinds]))
                loads.append(os.getloadavg()[0])
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    import tiktoken

    giga_version = "?"
    try:
        from importlib.metadata import version

        giga_version = version("gigatoken")
    except Exception:  # noqa: BLE001 - only the table's heading
        pass
    lines = [f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, tiktoken "
             f"{tiktoken.__version__}, gigatoken {giga_version}; load average (1 min, after each child) "
             f"{min(loads):.1f}-{max(loads):.1f}, median {statistics.median(loads):.1f}",
             f"command: PYTHONPATH=src python bench/bench_encode.py --runs {args.runs}", "",
             "MB of UTF-8 per CPU second (median of the runs); cold: the first pass of a fresh tokenizer, warm: the "
             "second. Ratios: tokpack's faster call / gigatoken's faster call, CPU: of the medians, and run by run (each "
             "run's children back to back: the faster of tokpack's cold rates over the faster of gigatoken's in that run; the median "
             "and the least and greatest, how far the ratio moves from process to process).", "",
             "| vocabulary | text (MB) | " + " | ".join(f"{tool} cold / warm" for tool in args.tools)
             + " | × gigatoken cold / warm | cold × gigatoken run by run: median (least-greatest) "
             "| wall × gigatoken cold |",
             "|---|---|" + "---|" * len(args.tools) + "---|---|---|"]
    failed = False
    for vocab in args.vocabs:
        for kind in args.kinds:
            rate: dict[str, dict[str, float]] = {}
            wall: dict[str, float] = {}
            digests: dict[str, set[str]] = {}
            for tool in args.tools:
                rows = [r[kind] for r in results[(tool, vocab)]]
                mb = rows[0]["mb"]
                rate[tool] = {p: mb / statistics.median(r[p]["cpu"] for r in rows) for p in ("cold", "warm")}
                wall[tool] = mb / statistics.median(r["cold"]["wall"] for r in rows)
                digests[tool] = {r[p]["ids"] for r in rows for p in ("cold", "warm")}
            # tiktoken's ids are the oracle; without a tiktoken tool in the run, the tools' ids must
            # at least agree with each other
            oracle = digests.get("tiktoken-batch") or digests.get("tiktoken-numpy")
            named = "tiktoken's" if oracle else f"{args.tools[0]}'s"
            for tool, found in digests.items():
                if found != (oracle or digests[args.tools[0]]):
                    print(f"IDS DIFFER from {named}: {tool} {vocab} {kind}", file=sys.stderr)
                    failed = True
            cells = [f"{rate[t]['cold']:.1f} / {rate[t]['warm']:.1f}" for t in args.tools]
            gigas = [t for t in ("gigatoken", "gigatoken-bytes") if t in rate]
            ours = [t for t in ("tokpack", "tokpack-bytes") if t in rate]
            if ours and gigas:
                # each side's faster call, for the medians and run by run
                ratio = (f"{max(rate[t]['cold'] for t in ours) / max(rate[t]['cold'] for t in gigas):.2f} / "
                         f"{max(rate[t]['warm'] for t in ours) / max(rate[t]['warm'] for t in gigas):.2f}")
                wall_ratio = f"{max(wall[t] for t in ours) / max(wall[t] for t in gigas):.2f}"
                per_run = [min(results[(t, vocab)][run][kind]["cold"]["cpu"] for t in gigas)
                           / min(results[(t, vocab)][run][kind]["cold"]["cpu"] for t in ours) for run in range(args.runs)]
                spread = f"{statistics.median(per_run):.2f} ({min(per_run):.2f}-{max(per_run):.2f})"
            else:
                ratio = wall_ratio = spread = "-"
            lines.append(f"| {vocab} | {kind} ({mb:.1f}) | " + " | ".join(cells)
                         + f" | {ratio} | {spread} | {wall_ratio} |")
    if not args.skip_prepare:
        lines += prepare_rows(args.runs, args.prepare_megabytes)
    print("\n".join(lines))
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
