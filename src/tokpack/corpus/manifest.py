"""``manifest.json``: a corpus file's hash, length and train/validation/test byte ranges."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from tokpack._schema import Record, read_record
from tokpack.errors import InputError

MANIFEST_FILE = "manifest.json"
SPLITS = ("train", "validation", "test")
SplitName = Literal["train", "validation", "test"]


class CorpusManifest(Record):
    """A corpus file's identity and split.

    ``ranges`` maps ``train`` (required), ``validation`` and ``test`` to half-open byte ranges
    ``[start, end)`` that, sorted by start, tile the whole file with no gap or overlap.

    >>> CorpusManifest(sha256="0" * 64, n_bytes=10, ranges={"train": (0, 8), "validation": (8, 10)}).ranges["train"]
    (0, 8)
    """

    schema_: Literal["tokpack.corpus.v1"] = Field(default="tokpack.corpus.v1", alias="schema")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    n_bytes: int = Field(ge=0)
    ranges: dict[SplitName, tuple[int, int]]

    @model_validator(mode="after")
    def _ranges_tile_the_file(self) -> CorpusManifest:
        if "train" not in self.ranges:
            raise InputError("ranges must include 'train'")
        position = 0
        for name, (start, end) in sorted(self.ranges.items(), key=lambda item: item[1]):
            if start != position or end < start:
                raise InputError(f"range {name!r} [{start}, {end}) leaves a gap or overlaps at byte {position}")
            position = end
        if position != self.n_bytes:
            raise InputError(f"ranges end at byte {position}, the file has {self.n_bytes}")
        return self

    def ordered_ranges(self) -> list[tuple[str, int, int]]:
        """``(name, start, end)`` in file order."""
        return [(name, *span) for name, span in sorted(self.ranges.items(), key=lambda item: item[1])]


def file_sha256(path: Path, *, chunk_bytes: int = 8 << 20) -> str:
    """SHA-256 of a file, read in chunks (memory stays flat)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def corpus_manifest(corpus: Path, sha256: str) -> CorpusManifest:
    """The manifest beside ``corpus``, checked against the file; or all-training when none.

    Args:
        corpus: the corpus text file.
        sha256: its SHA-256 (already computed by the caller, who needs it too).

    Raises:
        ValueError: the manifest is malformed, or its hash or length differs from the file.
    """
    n_bytes = corpus.stat().st_size
    path = corpus.parent / MANIFEST_FILE
    if not path.exists():
        return CorpusManifest(sha256=sha256, n_bytes=n_bytes, ranges={"train": (0, n_bytes)})
    manifest = read_record(CorpusManifest, path)
    if manifest.n_bytes != n_bytes:
        raise InputError(f"{corpus}: {n_bytes} bytes, but {path} says {manifest.n_bytes}")
    if manifest.sha256 != sha256:
        raise InputError(f"{corpus}: SHA-256 {sha256[:16]}… differs from {path} ({manifest.sha256[:16]}…)")
    with open(corpus, "rb") as handle:  # a boundary inside a character would be blamed on the corpus
        for name, start, _ in manifest.ordered_ranges():
            handle.seek(start)
            if 0 < start < n_bytes and handle.read(1)[0] & 0xC0 == 0x80:
                raise InputError(path, f"range {name!r} starts at byte {start}, inside a UTF-8 character of {corpus.name}",
                                 fix="move the boundary to the start of a character")
    return manifest
