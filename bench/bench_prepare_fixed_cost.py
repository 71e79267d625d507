"""What one ``tokpack prepare FILE --vocab RANKS`` process costs, whole, against a minimal
gigatoken script that encodes the same file and saves its ids with numpy; and where prepare's CPU
goes outside the encoder.

    PYTHONPATH=src .venv/bin/python bench/bench_prepare_fixed_cost.py [--runs 7]
        [--corpus FILE] [--vocab cl100k|o200k] [--ranks FILE] [--baseline COMMIT]
    PYTHONPATH=src .venv/bin/python bench/bench_prepare_fixed_cost.py --pairs 20 [--baseline COMMIT]
        [--stub-encoder] [--without-pydantic]
    PYTHONPATH=src .venv/bin/python bench/bench_prepare_fixed_cost.py --breakdown
    PYTHONPATH=src .venv/bin/python bench/bench_prepare_fixed_cost.py --imports [--runs 11]

Corpus: ``FILE``, else 10 MB of the encoder benchmarks' "mixed" text (whole files of
``data/polish`` and ``data/other``) written as one file. Ranks: ``--ranks``, else the published
cl100k or o200k file inside PyPI's ``bpe-openai`` package (gigatoken runs with the same
pre-tokenizer). gigatoken comes with the ``bench`` extra.

Each run is a new process, its bytecode written by the first and reused by the others (as an
installed package has it); CPU seconds are user + system of that process and its threads
(``RUSAGE_CHILDREN`` before and after). Modes run in turns (gigatoken, tokpack with a warm cache,
tokpack with a cold cache, ...) so a shared machine's drift falls on all alike; figures are
medians:

- ``gigatoken script``: ``Tokenizer.from_tiktoken(RANKS, pretokenizer=...)``, ``tok.encode(bytes)``
  of the whole file, ``numpy.save`` of the ids (gigatoken's fastest documented call), with numpy's
  BLAS on one thread as the ``tokpack`` script sets it (idle BLAS threads would bill it CPU).
- ``tokpack prepare, warm cache``: ``tokpack prepare FILE --vocab RANKS -o OUT``, OUT new each
  run, ``TOKPACK_CACHE`` kept from an earlier run (what a second corpus with the same vocabulary
  costs).
- ``tokpack prepare, cold cache``: the same with a new empty ``TOKPACK_CACHE`` each run (the first
  use of a vocabulary). numba's compiled kernels are loaded from their cache in both (they live
  beside the sources, not in ``TOKPACK_CACHE``).
- with ``--baseline COMMIT`` (or another checkout's ``src`` folder), the tokpack modes again with
  those sources (a commit is checked out into a detached git worktree, its C extension built
  there, removed afterwards); their kernels are compiled or loaded once, untimed, first.

``--pairs N`` runs pairs of processes instead, N a cache mode (warm, cold): this tree's prepare
and the gigatoken script (or, with ``--baseline``, the baseline's prepare; ``--stub-encoder``:
both sides stubbed), back to back, which one first alternating; it prints the medians and the
mean of the pairs' differences with its standard error: on a shared machine, what separates two
sides whose medians the load blurs. ``--without-pydantic`` (a what-if, against the gigatoken
script): this tree's prepare with pydantic replaced by ``bench/what_if/pydantic``, a stand-in that
costs nothing to import and validates nothing, to say what a records' library that cost nothing
would save (its packs are for no use: their records are not the real models' JSON).

Checked, outside the clock: the pack's ids equal gigatoken's on the same documents (prepare cuts
the file into documents of at most 1 MiB at a newline; gigatoken's ``encode_batch`` of those
documents must give the same ids), and the baseline's pack equals this tree's.

``--imports`` splits each side's whole process into what it imports and what it then does: fresh
processes that only import what the side's process imports, in rows that add one group of
libraries at a time (the interpreter alone; numpy; the script's numpy and gigatoken; prepare's
numpy, then pydantic, then typer, then every module a prepare imports, and the same with the record
schemas a prepare builds built), interleaved with the two whole processes (prepare with a warm
cache). Which modules and schemas a prepare has is read from one untimed prepare first; the
import-only processes of prepare's side have the settings the ``tokpack`` script gives its process
(one BLAS thread, no pydantic plugins, the rarer young-generation collection), the script's side
one BLAS thread as its own process has it.

``--breakdown`` runs one ``prepare`` (warm cache, ``--workers 1``; ``--cold``: a new cache;
``--stub-encoder``: the stub above; ``--baseline``, a ``src`` folder: that checkout's) in a fresh
process with each step's CPU seconds and minor page faults counted exclusively, per thread
(``time.thread_time``, ``RUSAGE_THREAD``): the imports by package, the command line, the corpus, the vocabulary, its carried files, the pack; and
the encoder apart (its setup and its calls, on the encoding thread), so what remains is prepare's
fixed cost outside the encoder. It counts until the command returns (not the interpreter's exit).
"""

from __future__ import annotations

import argparse
import builtins
import gzip
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))

#: gigatoken's minimal script: load the ranks, encode the file's bytes, save the ids. It prints
#: the CPU seconds of the encode call alone (the process's threads), read outside the clock.
GIGATOKEN_SCRIPT = """
import sys, time, numpy as np, gigatoken
tok = gigatoken.Tokenizer.from_tiktoken(sys.argv[1], pretokenizer=sys.argv[4], special_tokens={})
data = open(sys.argv[2], "rb").read()
before = time.process_time()
ids = tok.encode(data)
encode = time.process_time() - before
np.save(sys.argv[3], ids)
print(encode)
"""
ENTRY = "import sys, tokpack.cli as cli; sys.argv[0] = 'tokpack'; getattr(cli, 'script', cli.main)()"
#: ``tokpack prepare`` with its encoder replaced by a stub that gives every third byte its
#: single-byte id (not the real ids, but about as many: 2.8 bytes a token on the mixed text, with
#: cl100k's ranks; about 0.02 CPU s for 10 MB): what prepare costs outside the encoder, as a whole
#: process. It replaces what the encoder is reached by (``encode_arrays``, and what says
#: which engine runs), so nothing of the encoder is imported.
STUBBED = """
import os
import sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the tokpack script has it before numpy's import
import numpy as np
from tokpack.vocab.bytelevel import BpeTokenizer

def encode_arrays(self, texts, *, num_threads=None):
    table = self.__dict__.get("_stub_table")
    tokens = self.__dict__.get("_table")  # the rank file's table, where the tree has one: no dict made
    if table is None and tokens is not None:
        one = np.diff(tokens.ends, prepend=0) == 1
        table = np.zeros(256, np.uint32)
        table[np.frombuffer(tokens.joined, np.uint8)[tokens.ends[one] - 1]] = tokens.ids[one]
        self.__dict__["_stub_table"] = table
    if table is None:
        table = self.__dict__["_stub_table"] = np.array([self.ranks[bytes([b])] for b in range(256)], np.uint32)
    # (a text is a str, or, from trees that hand the encoder the bytes read, those bytes)
    return [table[np.frombuffer(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"),
                                np.uint8)[::3]] for text in texts]

BpeTokenizer.encode_arrays = encode_arrays
BpeTokenizer._compilable = True
BpeTokenizer.fallback_reason = None
BpeTokenizer.encoder_report = lambda self: {"engine": "stub"}
import tokpack.cli as cli
sys.argv[0] = "tokpack"
getattr(cli, "script", cli.main)()
"""


#: Written by a prepare's process as it exits (``--imports``), to the file named by
#: ``TOKPACK_BENCH_IMPORTED``: every module it imported, in the order imported, and the record
#: models whose schemas it built.
IMPORTED = """
import atexit, os, sys

def _imported():
    import json
    models = []
    main = sys.modules.get("pydantic.main")
    if main is not None:
        def walk(cls):
            for sub in cls.__subclasses__():
                yield sub
                yield from walk(sub)
        models = sorted({(model.__module__, model.__qualname__) for model in walk(main.BaseModel)
                         if model.__dict__.get("__pydantic_complete__") and model.__module__.startswith("tokpack")})
    with open(os.environ["TOKPACK_BENCH_IMPORTED"], "w") as file:
        json.dump({"modules": list(sys.modules), "models": models}, file)

atexit.register(_imported)
""" + ENTRY

#: A process that imports the modules named in a file (``sys.argv[1]``, one a line, each tried:
#: a private one that cannot be imported on its own is skipped) and builds the record schemas
#: named after them (``module:qualname``), with the ``tokpack`` script's settings when
#: ``sys.argv[2]`` is ``script``.
IMPORT_ONLY = """
import gc, importlib, os, sys
if sys.argv[2] == "script":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    gc.set_threshold(100_000, *gc.get_threshold()[1:])
for line in open(sys.argv[1]).read().split():
    module, _, model = line.partition(":")
    try:
        loaded = importlib.import_module(module)
    except Exception:
        continue
    if model:
        cls = loaded
        for part in model.split("."):
            cls = getattr(cls, part)
        cls.model_rebuild(force=True)
"""


def default_corpus(scratch: Path) -> Path:
    from corpus import mixed_documents

    path = scratch / "mixed-10mb.txt"
    if not path.exists():
        path.write_text("\n".join(mixed_documents(10.0)), encoding="utf-8")
    return path


def published_ranks(vocab: str, scratch: Path) -> Path:
    path = scratch / f"{vocab}_base.tiktoken"
    if not path.exists():
        packed = resources.files("bpe_openai.data").joinpath(f"{vocab}_base.tiktoken.gz").read_bytes()
        path.write_bytes(gzip.decompress(packed))
    return path


def inputs(args: argparse.Namespace, prefix: str) -> tuple[Path, Path, Path]:
    """The corpus and the rank file a run measures (``--corpus`` and ``--ranks``, else the
    defaults, made once in the scratch folder), and a new work folder for the run."""
    scratch = Path(tempfile.gettempdir()) / "tokpack-bench-fixed-cost"
    scratch.mkdir(exist_ok=True)
    corpus = args.corpus or default_corpus(scratch)
    ranks = args.ranks or published_ranks(args.vocab, scratch)
    return corpus, ranks, Path(tempfile.mkdtemp(prefix=prefix, dir=scratch))


def cpu_of(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """User + system CPU seconds of one process (and its threads), and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def prepare_command(corpus: Path, ranks: Path, out: Path, *, stubbed: bool = False) -> list[str]:
    return [sys.executable, "-c", STUBBED if stubbed else ENTRY, "prepare", str(corpus), "--vocab", str(ranks),
            "-o", str(out)]


def environment(src: Path | None = None, cache: Path | None = None, *, without_pydantic: bool = False) -> dict[str, str]:
    """The children's environment: bytecode written and reused (as an installed package has it;
    ``PYTHONDONTWRITEBYTECODE`` would make every run compile every module it imports), and the
    sources and cache given (and, ``without_pydantic``, the stand-in for pydantic before them)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    path = [str(REPO / "bench" / "what_if")] * without_pydantic + ([] if src is None else [str(src)])
    return env | ({"PYTHONPATH": os.pathsep.join(path)} if path else {}) | ({} if cache is None else {"TOKPACK_CACHE": str(cache)})


def pack_ids(pack: Path) -> tuple[Any, Any]:
    import numpy as np

    return np.load(pack / "tokens.npy"), np.load(pack / "starts.npy")


def check_ids(pack: Path, corpus: Path, ranks: Path, pretokenizer: str) -> None:
    """The pack's ids are gigatoken's on the documents prepare cut (outside the clock)."""
    import gigatoken
    import numpy as np

    from tokpack.corpus.sources import open_corpus

    tokens, starts = pack_ids(pack)
    with open_corpus(corpus) as source:
        documents = [piece.text for piece in source.pieces()]
    tok = gigatoken.Tokenizer.from_tiktoken(str(ranks), pretokenizer=pretokenizer, special_tokens={})
    theirs = [np.asarray(ids, dtype=np.int64) for ids in tok.encode_batch_list(documents)]
    ours = np.split(tokens.astype(np.int64), starts[1:])
    if len(ours) != len(theirs) or any(not np.array_equal(a, b) for a, b in zip(ours, theirs)):
        raise SystemExit(f"{pack}: the ids differ from gigatoken's on the same documents")


def checkout(commit: str, tree: Path) -> Path:
    """``commit`` checked out into a detached git worktree at ``tree``, its C extension built
    there (the built ``.so`` is not in git: without it that checkout would encode with tiktoken)."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), commit], check=True)
    subprocess.run([sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"], cwd=tree, check=True,
                   capture_output=True)
    return tree


def measure(args: argparse.Namespace) -> None:
    corpus, ranks, work = inputs(args, "run-")
    sides = {"this tree": REPO / "src"}
    tree = None
    if args.baseline and Path(args.baseline).is_dir():  # another checkout's sources
        sides[args.baseline] = Path(args.baseline).resolve()
    elif args.baseline:
        tree = checkout(args.baseline, work / "baseline")
        sides[args.baseline] = tree / "src"
    times: dict[str, list[float]] = defaultdict(list)
    kept: dict[str, Path] = {}
    try:
        warm = {side: work / f"warm-cache-{number}" for number, side in enumerate(sides)}
        for side, src in sides.items():  # compile or load the kernels, fill the warm cache: untimed
            cpu_of(prepare_command(corpus, ranks, work / f"first-{len(kept)}"), environment(src, warm[side]))
            kept[side] = work / f"first-{len(kept)}"
        count = 0
        for _ in range(args.runs):
            total, printed = cpu_of([sys.executable, "-c", GIGATOKEN_SCRIPT, str(ranks), str(corpus),
                                     str(work / "ids.npy"), args.vocab],
                                    # numpy's BLAS on one thread, as the tokpack script has it: at its best
                                    environment() | {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")})
            times["gigatoken script"].append(total)
            times["gigatoken script without its encode call"].append(total - float(printed))
            for side, src in sides.items():
                for stubbed in (False, True):
                    for mode in ("warm", "cold"):
                        count += 1
                        out, cache = work / f"out-{count}", warm[side] if mode == "warm" else work / f"cold-{count}"
                        label = f"{side}: prepare, {mode} cache" + (", encoder stubbed" if stubbed else "")
                        times[label].append(cpu_of(prepare_command(corpus, ranks, out, stubbed=stubbed),
                                                   environment(src, cache))[0])
                        shutil.rmtree(out)
                        if mode == "cold":
                            shutil.rmtree(cache)
        check_ids(kept["this tree"], corpus, ranks, args.vocab)
        if tree is not None:
            import numpy as np

            ours, theirs = pack_ids(kept["this tree"]), pack_ids(kept[args.baseline])
            if not all(np.array_equal(a, b) for a, b in zip(ours, theirs)):
                raise SystemExit("the baseline's pack differs from this tree's")
    finally:
        if tree is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    size = corpus.stat().st_size
    print(f"{corpus.name} ({size / 1e6:.1f} MB), {ranks.name}; CPU seconds (user + system) of one process, "
          f"median of {args.runs}, modes interleaved; Python {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    giga = statistics.median(times["gigatoken script"])
    print("| process | CPU s (median) | runs | ÷ gigatoken script |")
    print("|---|---:|---|---:|")
    for mode, values in times.items():
        runs = ", ".join(f"{value:.2f}" for value in values)
        print(f"| {mode} | {statistics.median(values):.3f} | {runs} | {statistics.median(values) / giga:.2f} |")


def pairs(args: argparse.Namespace) -> None:
    """``args.pairs`` pairs of processes for each cache mode: this tree's prepare and the gigatoken
    script, or with ``--baseline`` the baseline's prepare (encoder stubbed on both sides with
    ``--stub-encoder``), the two run back to back, which one first alternating."""
    import math

    corpus, ranks, work = inputs(args, "pairs-")
    tree = None
    if args.without_pydantic and args.baseline:
        raise SystemExit("--without-pydantic measures this tree against the gigatoken script: no --baseline")
    stand_in = args.without_pydantic
    try:
        sides = {"this tree": REPO / "src"}
        if args.baseline and Path(args.baseline).is_dir():
            sides["baseline"] = Path(args.baseline).resolve()
        elif args.baseline:
            tree = checkout(args.baseline, work / "baseline")
            sides["baseline"] = tree / "src"
        warm = {side: work / f"warm-cache-{side}" for side in sides}
        for side, src in sides.items():  # compile or load the kernels, fill the warm cache: untimed
            cpu_of(prepare_command(corpus, ranks, work / f"first-{side}"),
                   environment(src, warm[side], without_pydantic=stand_in))
        gigatoken = ([sys.executable, "-c", GIGATOKEN_SCRIPT, str(ranks), str(corpus), str(work / "ids.npy"), args.vocab],
                     environment() | {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")})
        count = 0

        def prepare_cpu(side: str, mode: str) -> float:
            nonlocal count
            count += 1
            out, cache = work / f"out-{count}", warm[side] if mode == "warm" else work / f"cold-{count}"
            seconds = cpu_of(prepare_command(corpus, ranks, out, stubbed=args.stub_encoder),
                             environment(sides[side], cache, without_pydantic=stand_in))[0]
            shutil.rmtree(out)
            if mode == "cold":
                shutil.rmtree(cache)
            return seconds

        other = "baseline" if "baseline" in sides else "gigatoken script"
        times: dict[tuple[str, str], list[float]] = defaultdict(list)
        for number in range(args.pairs):
            for mode in ("warm", "cold"):
                for side in ("this tree", other) if number % 2 == 0 else (other, "this tree"):
                    times[side, mode].append(cpu_of(*gigatoken)[0] if side == "gigatoken script"
                                             else prepare_cpu(side, mode))
    finally:
        if tree is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{corpus.name} ({corpus.stat().st_size / 1e6:.1f} MB), {ranks.name}; {args.pairs} pairs a mode, CPU s "
          f"(user + system) of one process{', encoder stubbed' if args.stub_encoder else ''}"
          f"{', pydantic replaced by a stand-in (what-if)' if stand_in else ''}; this tree against "
          f"{args.baseline or other}; load average {os.getloadavg()[0]:.1f}\n")
    print(f"| cache | this tree (median) | {other} (median) | difference, mean ± standard error | ratio of medians |")
    print("|---|---:|---:|---:|---:|")
    for mode in ("warm", "cold"):
        ours, theirs = times["this tree", mode], times[other, mode]
        differences = [a - b for a, b in zip(ours, theirs)]
        error = statistics.stdev(differences) / math.sqrt(len(differences)) if len(differences) > 1 else float("nan")
        print(f"| {mode} | {statistics.median(ours):.3f} | {statistics.median(theirs):.3f} | "
              f"{statistics.mean(differences):+.3f} ± {error:.3f} | {statistics.median(ours) / statistics.median(theirs):.2f} |")


#: The library groups ``--imports`` adds one at a time to prepare's side, by top-level package.
PYDANTIC = frozenset({"pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typing_extensions"})
TYPER = frozenset({"typer", "click", "shellingham", "annotated_doc", "rich"})


def imports(args: argparse.Namespace) -> None:
    """Each side's whole process beside processes that only import what it imports (see the
    module's docstring), interleaved, ``args.runs`` of each."""
    import json

    corpus, ranks, work = inputs(args, "imports-")
    try:
        env, cache = environment(REPO / "src"), work / "warm-cache"
        cpu_of(prepare_command(corpus, ranks, work / "first"), environment(REPO / "src", cache))  # fills the cache
        seen = work / "seen.json"
        cpu_of([sys.executable, "-c", IMPORTED, "prepare", str(corpus), "--vocab", str(ranks), "-o", str(work / "seen")],
               environment(REPO / "src", cache) | {"TOKPACK_BENCH_IMPORTED": str(seen)})
        record = json.loads(seen.read_text())
        modules = [name for name in record["modules"] if name != "__main__"]

        def top(name: str) -> str:
            return name.split(".")[0]

        def listed(name: str, chosen: list[str]) -> Path:
            path = work / f"{name}.txt"
            path.write_text("\n".join(chosen) + "\n")
            return path

        numpy_only = [name for name in modules if top(name) == "numpy"]
        with_pydantic = numpy_only + [name for name in modules if top(name) in PYDANTIC]
        with_typer = with_pydantic + [name for name in modules if top(name) in TYPER]
        schemas = [f"{module}:{qualname}" for module, qualname in record["models"]]
        rows: dict[str, list[str]] = {
            "interpreter alone": [sys.executable, "-c", "pass"],
            "script's imports: numpy": [sys.executable, "-c", IMPORT_ONLY, str(listed("numpy", ["numpy"])), "plain"],
            "script's imports: numpy, gigatoken": [sys.executable, "-c", IMPORT_ONLY,
                                                   str(listed("script", ["numpy", "gigatoken"])), "plain"],
            "prepare's imports: numpy": [sys.executable, "-c", IMPORT_ONLY, str(listed("p-numpy", numpy_only)), "script"],
            "prepare's imports: numpy, pydantic": [sys.executable, "-c", IMPORT_ONLY,
                                                   str(listed("p-pydantic", with_pydantic)), "script"],
            "prepare's imports: numpy, pydantic, typer": [sys.executable, "-c", IMPORT_ONLY,
                                                          str(listed("p-typer", with_typer)), "script"],
            "prepare's imports: all": [sys.executable, "-c", IMPORT_ONLY, str(listed("p-all", modules)), "script"],
            f"prepare's imports: all, and its {len(schemas)} record schemas built": [
                sys.executable, "-c", IMPORT_ONLY, str(listed("p-schemas", modules + schemas)), "script"],
        }
        script_env = environment() | {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
        times: dict[str, list[float]] = defaultdict(list)
        for run in range(args.runs):
            times["gigatoken script, whole"].append(cpu_of([sys.executable, "-c", GIGATOKEN_SCRIPT, str(ranks),
                                                            str(corpus), str(work / "ids.npy"), args.vocab],
                                                           script_env)[0])
            out = work / f"out-{run}"
            times["prepare, warm cache, whole"].append(cpu_of(prepare_command(corpus, ranks, out),
                                                              environment(REPO / "src", cache))[0])
            shutil.rmtree(out)
            for label, command in rows.items():
                times[label].append(cpu_of(command, script_env if "script's" in label else env)[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{corpus.name} ({corpus.stat().st_size / 1e6:.1f} MB), {ranks.name}; CPU s (user + system) of one "
          f"process, median of {args.runs}, interleaved; {len(modules)} modules in a prepare's process; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| process | CPU s (median) | runs |")
    print("|---|---:|---|")
    medians = {label: statistics.median(values) for label, values in times.items()}
    for label, values in times.items():
        print(f"| {label} | {medians[label]:.3f} | {', '.join(f'{value:.2f}' for value in values)} |")
    script_imports = medians["script's imports: numpy, gigatoken"]
    prepare_imports = medians[list(rows)[-1]]
    print(f"\nimports: prepare's {prepare_imports:.3f} − the script's {script_imports:.3f} = "
          f"{prepare_imports - script_imports:+.3f}; after them: prepare "
          f"{medians['prepare, warm cache, whole'] - prepare_imports:.3f}, the script "
          f"{medians['gigatoken script, whole'] - script_imports:.3f}")


class Phases:
    """CPU seconds (``time.thread_time``) and minor page faults (``RUSAGE_THREAD``) per label,
    each counted exclusively: what a nested labelled call spends goes to that call's label, per
    thread."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.faults: dict[str, int] = defaultdict(int)
        self._local = threading.local()

    @staticmethod
    def _now() -> tuple[float, int]:
        return time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

    def _stack(self) -> list[list[Any]]:
        if not hasattr(self._local, "stack"):
            self._local.stack = [["other (" + threading.current_thread().name + ")", *self._now()]]
        return self._local.stack

    def inside(self, prefix: str) -> bool:
        """Whether this thread is inside a call labelled ``prefix...``."""
        return any(entry[0].startswith(prefix) for entry in self._stack())

    def _count(self, entry: list[Any], now: tuple[float, int]) -> None:
        self.seconds[entry[0]] += now[0] - entry[1]
        self.faults[entry[0]] += now[1] - entry[2]
        entry[1:] = now

    def enter(self, label: str) -> None:
        stack, now = self._stack(), self._now()
        self._count(stack[-1], now)
        stack.append([label, *now])

    def leave(self) -> None:
        stack, now = self._stack(), self._now()
        self._count(stack.pop(), now)
        stack[-1][1:] = now

    def close(self) -> None:
        stack = self._stack()
        self._count(stack[-1], self._now())

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Count calls of ``owner.name`` (a function, or a cached property's function) under
        ``label``; nothing when ``owner`` has no such name (another checkout's sources)."""
        original = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if original is None:
            return
        target = getattr(original, "func", original)  # functools.cached_property
        phases = self

        def counted(*args: Any, **kwargs: Any) -> Any:
            phases.enter(label)
            try:
                return target(*args, **kwargs)
            finally:
                phases.leave()

        if hasattr(original, "func"):
            original.func = counted
        else:
            setattr(owner, name, counted)


def breakdown_child(corpus: Path, ranks: Path, out: Path, stubbed: bool) -> None:
    """One ``prepare`` in this process, each step's CPU counted (see :class:`Phases`); with
    ``stubbed``, the encoder replaced as :data:`STUBBED` replaces it."""
    phases = Phases()
    phases.seconds["interpreter start"] = time.process_time()
    phases.faults["interpreter start"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    phases._stack()[0][1:] = phases._now()
    phases._stack()[0][0] = "other (main thread)"
    importing = builtins.__import__

    def counted_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        whole = name if not level else ((globals or {}).get("__package__") or "") + "." + name
        if whole in sys.modules or phases.inside("ENCODER"):  # the encoder's imports are its own
            return importing(name, globals, locals, fromlist, level)
        top = whole.strip(".").split(".")[0]
        phases.enter(f"import {top}" if top != "tokpack" else "import tokpack's own modules")
        try:
            return importing(name, globals, locals, fromlist, level)
        finally:
            phases.leave()

    builtins.__import__ = counted_import
    import tokpack.cli  # noqa: F401

    for setting in ("single_threaded_blas", "no_pydantic_plugins"):  # as the tokpack script's process has them
        if hasattr(tokpack.cli, setting):
            getattr(tokpack.cli, setting)()
    if stubbed:  # the stub's definitions, without running the command (numpy imported after the settings)
        exec(STUBBED.split("import tokpack.cli as cli")[0], {})
    from tokpack.corpus import sources
    from tokpack.preparing import options, preparation
    from tokpack.store import vocabulary, writer
    from tokpack.vocab import bytelevel

    phases.wrap(options, "open_corpus", "corpus: open (stat, hash, manifest, document cut)")
    phases.wrap(sources.TextFile, "pieces", "corpus: decode documents")
    phases.wrap(vocabulary, "load_vocabulary", "vocabulary: read the rank file")
    phases.wrap(preparation, "load_vocabulary", "vocabulary: read the rank file")
    phases.wrap(bytelevel.BpeTokenizer, "identity", "vocabulary: identity")
    phases.wrap(preparation, "cached_vocabulary", "vocabulary: the cache's copy")
    phases.wrap(preparation, "carried_files", "vocabulary: the pack's carried files")
    phases.wrap(preparation, "reuse_tokenizer_json", "vocabulary: tokenizer.json, the cache's copy or derived")
    phases.wrap(bytelevel.BpeTokenizer, "files", "vocabulary: the pack's carried files")
    phases.wrap(writer.PackWriter, "add_vocabulary_files", "pack: write the carried files")
    phases.wrap(writer.PackWriter, "add_documents", "pack: check, write and hash the ids")
    phases.wrap(writer.PackWriter, "commit", "pack: commit (starts, meta, stamp)")
    phases.wrap(preparation, "TokenizedCorpus", "pack: open the result")
    phases.wrap(bytelevel.BpeTokenizer, "encode_arrays",
                "ENCODER (stubbed): its calls" if stubbed else "ENCODER: its calls (setup included)")
    for name in ("_compiled", "_encoding"):
        if name in bytelevel.BpeTokenizer.__dict__:
            phases.wrap(bytelevel.BpeTokenizer, name, "ENCODER: setup (imports, tables)")
    import typer.core
    import typer.main

    phases.wrap(typer.main, "get_command", "command line: typer builds every command")
    phases.wrap(typer.core._TyperParameter, "process_value", "command line: typer checks each option")
    phases.wrap(sources, "reading_cut", "command line: the corpus's manifest (its cut)")
    import tokpack.cli.corpus as command
    for name in ("_summary", "summary_record"):
        phases.wrap(command, name, "command line: the summary")
    phases.wrap(command, "prepare_progress", "command line: progress display")
    sys.argv = ["tokpack", "prepare", str(corpus), "--vocab", str(ranks), "-o", str(out), "--workers", "1"]
    with open(os.devnull, "w") as quiet:
        sys.stdout = quiet
        try:
            tokpack.cli.main()
        except SystemExit as exit_:
            if exit_.code:
                raise
        finally:
            sys.stdout = sys.__stdout__
    phases.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    counted = sum(phases.seconds.values())
    rest = "other threads, system time not in thread clocks"
    phases.seconds[rest] = max(total - counted, 0.0)
    phases.faults[rest] = max(usage.ru_minflt - sum(phases.faults.values()), 0)
    encoder = sum(value for label, value in phases.seconds.items() if label.startswith("ENCODER"))
    print("| step | CPU s | page faults |\n|---|---:|---:|")
    for label, value in sorted(phases.seconds.items(), key=lambda item: -item[1]):
        if value >= 0.0005:
            print(f"| {label} | {value:.3f} | {phases.faults[label]:,} |")
    print(f"| **the process, until the command returned** | **{total:.3f}** | **{usage.ru_minflt:,}** |")
    print(f"| **the same without the encoder** | **{total - encoder:.3f}** | |")


def breakdown(args: argparse.Namespace) -> None:
    corpus, ranks, work = inputs(args, "breakdown-")
    try:
        src = Path(args.baseline).resolve() if args.baseline else REPO / "src"  # another checkout's, if given
        env = environment(src, work / "cache")
        if not args.cold:  # fill the cache and load the kernels first, untimed
            cpu_of(prepare_command(corpus, ranks, work / "first"), env)
        subprocess.run([sys.executable, __file__, "--breakdown-child", str(corpus), str(ranks), str(work / "out"),
                        *(["--stub-encoder"] if args.stub_encoder else [])], env=env, check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs of each mode (medians are reported)")
    parser.add_argument("--corpus", type=Path, help="the text file (default: 10 MB of mixed text)")
    parser.add_argument("--vocab", choices=("cl100k", "o200k"), default="cl100k",
                        help="the published vocabulary (its pre-tokenizer for gigatoken; its ranks unless --ranks)")
    parser.add_argument("--ranks", type=Path, help="the rank file (default: the published one, from bpe-openai)")
    parser.add_argument("--baseline", help="also measure this commit's sources (checked out for the run), or "
                                           "another checkout's src folder")
    parser.add_argument("--pairs", type=int, help="instead of the table: this many pairs of processes a cache "
                                                  "mode, this tree against the gigatoken script (or --baseline)")
    parser.add_argument("--breakdown", action="store_true", help="where one prepare's CPU goes, step by step")
    parser.add_argument("--imports", action="store_true",
                        help="each side's whole process beside processes that only import what it imports")
    parser.add_argument("--cold", action="store_true", help="with --breakdown: a new, empty cache")
    parser.add_argument("--stub-encoder", action="store_true",
                        help="with --breakdown or --pairs: the encoder replaced by a stub (single-byte ids; not the real ids)")
    parser.add_argument("--without-pydantic", action="store_true",
                        help="with --pairs: pydantic replaced by a stand-in that validates nothing (a what-if)")
    parser.add_argument("--breakdown-child", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.breakdown_child:
        breakdown_child(*args.breakdown_child, stubbed=args.stub_encoder)
    elif args.breakdown:
        breakdown(args)
    elif args.imports:
        imports(args)
    elif args.pairs:
        pairs(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
