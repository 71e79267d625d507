"""Synthetic benchmark corpora made of real text: shuffled lines of ``data/``, repeated."""

from __future__ import annotations

import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO / "data"
BENCH_CACHE = REPO / ".cache" / "bench"


def real_lines(folders: tuple[str, ...] = ("polish", "other/english", "other/scripts")) -> list[bytes]:
    """Every line of the real text files under ``folders`` (newlines kept)."""
    lines: list[bytes] = []
    for folder in folders:
        for path in sorted((SHARED_DATA / folder).rglob("*.txt")):
            lines.extend(path.read_bytes().splitlines(keepends=True))
    if not lines:
        raise SystemExit(f"no real text under {SHARED_DATA}")
    return lines


def synthetic_corpus(megabytes: int, *, seed: int = 0) -> Path:
    """A corpus of at least ``megabytes`` MB: real lines shuffled, pass after pass (cached)."""
    target = BENCH_CACHE / f"corpus-{megabytes}mb-s{seed}.txt"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lines, rng, written = real_lines(), random.Random(seed), 0
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as handle:
        while written < megabytes * 1_000_000:
            rng.shuffle(lines)
            for line in lines:
                handle.write(line)
                written += len(line)
                if written >= megabytes * 1_000_000:
                    break
    partial.rename(target)
    return target


def mixed_documents(megabytes: float) -> list[str]:
    """Whole files of ``data/polish`` and ``data/other`` (each a document), in a fixed shuffled
    order, until ``megabytes`` MB of UTF-8: the encoder benchmarks' "mixed" text."""
    files = sorted(p for folder in ("polish", "other") for p in (SHARED_DATA / folder).rglob("*") if p.is_file())
    random.Random(0).shuffle(files)
    documents: list[str] = []
    size = 0
    for path in files:
        if size >= megabytes * 1e6:
            break
        text = path.read_text(encoding="utf-8")
        documents.append(text)
        size += len(text.encode())
    return documents
