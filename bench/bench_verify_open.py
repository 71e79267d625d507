"""What verification on first open costs, and what the stamp saves: open a pack N times.

    PYTHONPATH=src python bench/bench_verify_open.py [--tokens 50000000] [--repeats 5]

Modes, interleaved in each round: ``verify=False`` (counts, sizes, seal: no hashing),
``verify=None`` with no stamp (the first open: hashes everything), ``verify=None`` with a stamp
(every later open). Prints the median of each and the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=50_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tokpack-bench-"))
    os.environ["TOKPACK_CACHE"] = str(folder / "cache")
    from tokpack.serve.memory import pack_of_documents
    from tokpack.store import Pack
    from tokpack.store.stamps import stamp_file

    rng = np.random.default_rng(0)
    ids = rng.integers(1, 50_000, args.tokens, dtype=np.uint16)
    documents = np.split(ids, np.arange(1000, args.tokens, 1000))
    pack = pack_of_documents(documents, n_vocab=50_257, pad_id=0, directory=folder / "pack")
    timings: dict[str, list[float]] = {"counts only (verify=False)": [], "first open (hash)": [], "stamped open": []}
    for _ in range(args.repeats):
        for mode in timings:
            if mode == "first open (hash)":
                stamp_file(pack).unlink(missing_ok=True)
            start = time.perf_counter()
            Pack(pack, verify=False if mode.startswith("counts") else None)
            timings[mode].append(time.perf_counter() - start)
    medians = {mode: statistics.median(values) for mode, values in timings.items()}
    base = medians["counts only (verify=False)"]
    print(f"pack: {args.tokens:,} uint16 ids ({(pack / 'tokens.npy').stat().st_size / 1e6:.0f} MB), "
          f"{args.repeats} interleaved rounds, medians:")
    for mode, median in medians.items():
        print(f"  {mode:28s} {median * 1e3:9.2f} ms  ({median / base:6.1f}x counts only)")


if __name__ == "__main__":
    main()
