"""The pre-tokenizer's character-class tables are cached beside the module, and a cached file is
a speed-up, never a source of truth: one altered in place (same shape, so it still loads) is
rebuilt from the regex engine, not read as the classes every piece is cut by."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokpack.vocab import pattern_scanners


def _small_tables() -> pattern_scanners.ScannerTables:
    classes = np.zeros(0x110000, dtype=np.uint8)
    classes[ord("a") : ord("z") + 1] = 1
    fold = np.zeros(0x110000, dtype=np.uint8)
    fold[ord("s")] = 1
    return pattern_scanners.ScannerTables(classes, fold, fold.copy())


def _equal(a: pattern_scanners.ScannerTables, b: pattern_scanners.ScannerTables) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_a_cached_table_altered_in_place_is_rebuilt(tmp_path: Path) -> None:
    built: list[int] = []

    def build() -> pattern_scanners.ScannerTables:
        built.append(1)
        return _small_tables()

    first = pattern_scanners._cached("classes-test", build, folder=tmp_path)
    (cache,) = tmp_path.iterdir()
    assert _equal(pattern_scanners._cached("classes-test", build, folder=tmp_path), first) and len(built) == 1

    # the file with one class changed and its checksum kept: it loads, and is not read
    stored = np.load(cache)
    stored[ord("A")] = 1
    np.save(cache, stored)
    again = pattern_scanners._cached("classes-test", build, folder=tmp_path)
    assert _equal(again, _small_tables()) and len(built) == 2
    assert _equal(pattern_scanners._cached("classes-test", build, folder=tmp_path), first) and len(built) == 2

    # a byte of the file damaged: built again, not an error
    data = bytearray(cache.read_bytes())
    data[len(data) // 2] ^= 1
    cache.write_bytes(bytes(data))
    assert _equal(pattern_scanners._cached("classes-test", build, folder=tmp_path), first) and len(built) == 3


def test_a_table_cached_under_another_name_is_not_read(tmp_path: Path) -> None:
    pattern_scanners._cached("classes-one", _small_tables, folder=tmp_path)
    (cache,) = tmp_path.iterdir()
    cache.rename(cache.with_name(cache.name.replace("classes-one", "classes-two")))
    other = tuple(np.ones(0x110000, dtype=np.uint8) for _ in range(3))
    assert _equal(pattern_scanners._cached("classes-two", lambda: other, folder=tmp_path), other)  # type: ignore[arg-type]
