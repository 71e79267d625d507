"""MosaicML streaming's MDS format: ``OUT/RANGE/index.json`` and ``shard.NNNNN.mds`` files with
one sample per document and one column, ``tokens`` (encoding ``ndarray:uint16`` or
``ndarray:uint32``: a 1-D array of the document's ids), which ``streaming.StreamingDataset(
local=OUT, split=RANGE)`` opens.

A shard file, as ``MDSWriter`` lays it out (little-endian)::

    uint32 n                   samples in the shard
    uint32[n + 1]              byte offset of each sample (and of the end) in the file
    config JSON                the writer's settings, sorted keys
    samples                    per sample: uint32 size of the tokens field, then the field:
                               one byte (ndim << 2 | shape type), the shape, the ids

Written natively (no ``streaming`` import), shard by shard, at most :data:`SHARD_BYTES` each; a
folder tokpack wrote is read back through its sidecar (:class:`MdsFolder`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tokpack._atomic import building
from tokpack.errors import InputError, IntegrityError
from tokpack.store.format import token_dtype
from tokpack.store.formats._exported import ExportedFolder, LazyTokenFile
from tokpack.store.formats._writing import (
    ExportOptions,
    Progress,
    default_eod,
    part_span,
    parts_of,
    record_for,
    with_separators,
)
from tokpack.store.sidecar import SIDECAR, ExportRecord, write_sidecar
from tokpack.store.source import TokenSource, chunks
from tokpack.vocab.loading import VocabularySpec

#: MDSWriter's default size limit: a new shard starts before one would pass 64 MiB.
SHARD_BYTES = 1 << 26
#: The shape's element type code and dtype, by the largest length it must hold (MDS's rule).
_SHAPE_TYPES = ((1 << 8, 0, "<u1"), (1 << 16, 1, "<u2"), (1 << 32, 2, "<u4"), (1 << 64, 3, "<u8"))


def _config(encoding: str) -> dict[str, Any]:
    return {"version": 2, "format": "mds", "compression": None, "hashes": [], "size_limit": SHARD_BYTES,
            "column_names": ["tokens"], "column_encodings": [encoding], "column_sizes": [None]}


def _field_prefix(length: int) -> bytes:
    """The NDArray encoding's dynamic-shape header of a 1-D array of ``length`` ids."""
    for bound, code, dtype in _SHAPE_TYPES:
        if length < bound:
            return bytes([(1 << 2) | code]) + np.array([length], dtype=dtype).tobytes()
    raise InputError(f"a document of {length} ids is too long for MDS")


class _ShardWriter:
    """Collects encoded samples and writes ``shard.NNNNN.mds`` files of at most ``limit`` bytes and ``rows`` samples."""

    def __init__(self, folder: Path, encoding: str, limit: int, rows: int) -> None:
        self.folder, self.limit, self.rows = folder, limit, rows
        self.config = _config(encoding)
        self.config_bytes = json.dumps(self.config, sort_keys=True).encode("utf-8")
        self.samples: list[bytes] = []
        self.size = 8 + len(self.config_bytes)
        self.shards: list[dict[str, Any]] = []

    def add(self, sample: bytes) -> None:
        if self.samples and (self.size + len(sample) + 4 > self.limit or len(self.samples) >= self.rows):
            self.flush()
        self.samples.append(sample)
        self.size += len(sample) + 4

    def flush(self) -> None:
        if not self.samples:
            return
        sizes = np.fromiter((len(s) for s in self.samples), dtype=np.int64, count=len(self.samples))
        header_bytes = 4 + 4 * (len(self.samples) + 1) + len(self.config_bytes)
        offsets = (np.concatenate(([0], np.cumsum(sizes))) + header_bytes).astype("<u4")
        name = f"shard.{len(self.shards):05d}.mds"
        data = b"".join([np.uint32(len(self.samples)).astype("<u4").tobytes(), offsets.tobytes(), self.config_bytes, *self.samples])
        (self.folder / name).write_bytes(data)
        self.shards.append({"samples": len(self.samples), "raw_data": {"basename": name, "bytes": len(data), "hashes": {}},
                            "zip_data": None, **self.config})
        self.samples, self.size = [], 8 + len(self.config_bytes)

    def finish(self) -> list[str]:
        self.flush()
        (self.folder / "index.json").write_text(json.dumps({"version": 2, "shards": self.shards}, sort_keys=True))
        return [s["raw_data"]["basename"] for s in self.shards] + ["index.json"]


def write(source: TokenSource, out: Path, options: ExportOptions, progress: Progress) -> ExportRecord:
    """Write the folder ``out``: ``RANGE/index.json`` and its shards, one sample per document, at
    most ``options.rows_per_file`` samples a shard.

    Raises:
        InputError: ``out`` exists.
    """
    out = Path(out)
    if out.exists():
        raise InputError("already exists; an export is never overwritten", where=out, fix="remove it or pick another OUT")
    dtype = token_dtype(source.vocabulary.n_vocab)
    eod = default_eod(source, options.eod_id) if options.append_eod else None
    encoding = f"ndarray:{dtype.name}"
    parts = {}
    with building(out) as folder:
        for name, documents in parts_of(source, options.range_name, split=True).items():
            (folder / name).mkdir()
            writer = _ShardWriter(folder / name, encoding, SHARD_BYTES, options.rows_per_file)
            for ids, lengths in chunks(source, documents):
                ids, lengths = with_separators(ids, lengths, eod)
                payload = memoryview(ids.astype(dtype.newbyteorder("<"), copy=False).tobytes())
                ends = np.cumsum(lengths) * dtype.itemsize
                begin = 0
                for length, end in zip(lengths.tolist(), ends.tolist()):  # a loop per document, not per id
                    field = _field_prefix(length) + payload[begin:end]
                    writer.add(np.uint32(len(field)).astype("<u4").tobytes() + field)
                    begin = end
                progress(int(lengths.sum()))
            files = writer.finish()
            parts[name] = part_span(source, documents, [f"{name}/{f}" for f in files])
        record = record_for(source, "mds", eod_id=eod, dtype=dtype, parts=parts, root=folder)
        write_sidecar(record, folder / SIDECAR)
    return record


def _mds_layout(path: Path, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An MDS shard's raw bytes, and each sample's first id byte and id count."""
    raw = np.fromfile(path, dtype=np.uint8)
    if len(raw) < 4:
        raise IntegrityError("shorter than an MDS shard header", where=path)
    count = int(raw[:4].view("<u4")[0])
    if len(raw) < 4 * (count + 2):
        raise IntegrityError(f"too short for its {count:,} samples' offsets", where=path)
    offsets = raw[4 : 4 * (count + 2)].view("<u4").astype(np.int64)
    if offsets[-1] != len(raw) or np.any(np.diff(offsets) < 6):
        raise IntegrityError("its sample offsets do not describe the file", where=path, fix="export it again")
    kinds = raw[offsets[:-1] + 4]  # per sample: a uint32 size, then (ndim << 2 | shape type), shape, ids
    if np.any(kinds >> 2 != 1):
        raise IntegrityError("a sample is not a 1-D array of ids", where=path)
    begins = offsets[:-1] + 5 + (1 << (kinds & 3).astype(np.int64))
    id_bytes = offsets[1:] - begins
    if np.any(id_bytes < 0) or np.any(id_bytes % dtype.itemsize):
        raise IntegrityError("a sample's size is not a whole number of ids", where=path)
    return raw, begins, id_bytes // dtype.itemsize


def _mds_part(path: Path, dtype: np.dtype) -> LazyTokenFile:
    _, _, lengths = _mds_layout(path, dtype)

    def load() -> np.ndarray:
        raw, begins, counts = _mds_layout(path, dtype)
        sizes = counts * dtype.itemsize
        # Every id byte's position, vectorized: each sample's run [begin, begin + size).
        runs = np.repeat(begins - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes)
        return raw[np.arange(int(sizes.sum()), dtype=np.int64) + runs].view(dtype.newbyteorder("<"))

    return LazyTokenFile(path, np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64), int(lengths.sum()), load)


class MdsFolder(ExportedFolder):
    """An MDS folder tokpack exported, read back through its sidecar."""

    FORMAT = "mds"
    read_part = staticmethod(_mds_part)


def recognizes(path: Path) -> bool:
    """Never from the files alone: an MDS folder is read through the sidecar tokpack wrote beside it."""
    return False


def read(path: Path, *, tokenizer: VocabularySpec | None = None, eod_id: int | None = None) -> MdsFolder:
    """The tokpack export at ``path``, through its sidecar."""
    return MdsFolder(path, tokenizer=tokenizer)


__all__ = ["MdsFolder", "SHARD_BYTES", "read", "recognizes", "write"]
