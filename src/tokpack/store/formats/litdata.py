"""Lightning's litdata: ``OUT/RANGE/index.json`` and ``chunk-0-N.bin`` files that
``litdata.StreamingDataset(OUT/RANGE, item_loader=TokensLoader(block_size=N))`` serves as blocks
of ``N`` ids.

A chunk, as litdata's ``BinaryWriter`` lays it out (little-endian)::

    uint32 n            items (here: documents) in the chunk
    uint32[n + 1]       byte offset of each item (and of the end) in the file
    ids                 the documents' ids back to back (``no_header_numpy``: raw uint16/uint32)

``TokensLoader`` cuts each chunk into whole blocks and drops the chunk's last ``dim % N`` ids, so
chunks are large (:data:`CHUNK_BYTES`) and always end at a document boundary. Written natively
(no ``litdata`` import), vectorized per chunk; a folder tokpack wrote is read back through its
sidecar (:class:`LitdataFolder`).
"""

from __future__ import annotations

import json
import time
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
    split_rows,
    with_separators,
)
from tokpack.store.sidecar import SIDECAR, ExportRecord, write_sidecar
from tokpack.store.source import TokenSource, chunks
from tokpack.vocab.loading import VocabularySpec

#: Bytes of ids per chunk (a longer document makes a longer chunk).
CHUNK_BYTES = 1 << 26
#: litdata's index of numpy dtypes in ``no_header_numpy:<index>``.
DTYPE_INDEX = {"uint16": 5, "uint32": 6}
#: The tree spec litdata records for an item that is one array (a leaf).
LEAF_SPEC = json.dumps([1, {"type": None, "context": None, "children_spec": []}])


def write(source: TokenSource, out: Path, options: ExportOptions, progress: Progress) -> ExportRecord:
    """Write the folder ``out``: ``RANGE/index.json`` and its chunks, one item per document, at
    most ``options.rows_per_file`` documents a chunk.

    Raises:
        InputError: ``out`` exists.
    """
    out = Path(out)
    if out.exists():
        raise InputError("already exists; an export is never overwritten", where=out, fix="remove it or pick another OUT")
    dtype = token_dtype(source.vocabulary.n_vocab)
    eod = default_eod(source, options.eod_id) if options.append_eod else None
    parts = {}
    with building(out) as folder:
        for name, documents in parts_of(source, options.range_name, split=True).items():
            (folder / name).mkdir()
            entries: list[dict[str, Any]] = []
            pieces = (piece for ids, lengths in chunks(source, documents, chunk_tokens=CHUNK_BYTES // dtype.itemsize)
                      for piece in split_rows(*with_separators(ids, lengths, eod), options.rows_per_file))
            for ids, lengths in pieces:  # a chunk holds at most rows_per_file documents
                header_bytes = 4 * (len(lengths) + 2)
                offsets = header_bytes + np.concatenate(([0], np.cumsum(lengths) * dtype.itemsize))
                filename = f"chunk-0-{len(entries)}.bin"
                with open(folder / name / filename, "wb") as handle:
                    handle.write(np.array([len(lengths)], "<u4").tobytes())
                    handle.write(offsets.astype("<u4").tobytes())
                    handle.write(np.ascontiguousarray(ids, dtype=dtype.newbyteorder("<")).data)
                entries.append({"chunk_bytes": int(offsets[-1]), "chunk_size": len(lengths), "dim": int(lengths.sum()),
                                "filename": filename})
                progress(int(lengths.sum()))
            config = {"chunk_bytes": CHUNK_BYTES, "chunk_size": None, "compression": None, "compression_batch_size": None,
                      "compression_level": None, "data_format": [f"no_header_numpy:{DTYPE_INDEX[dtype.name]}"],
                      "data_spec": LEAF_SPEC, "encryption": None, "ipc_compression": None,
                      "item_loader": "TokensLoader", "types": "json"}
            index = {"chunks": entries, "config": config, "updated_at": str(time.time())}
            (folder / name / "index.json").write_text(json.dumps(index, sort_keys=True))
            parts[name] = part_span(source, documents, [f"{name}/{e['filename']}" for e in entries] + [f"{name}/index.json"])
        record = record_for(source, "litdata", eod_id=eod, dtype=dtype, parts=parts, root=folder)
        write_sidecar(record, folder / SIDECAR)
    return record


def _litdata_part(path: Path, dtype: np.dtype) -> LazyTokenFile:
    """A litdata chunk: ``uint32 n``, ``uint32[n + 1]`` byte offsets of the items, the ids."""
    head = np.fromfile(path, dtype="<u4", count=1)
    if len(head) != 1:
        raise IntegrityError("shorter than a litdata chunk header", where=path)
    offsets = np.fromfile(path, dtype="<u4", count=int(head[0]) + 1, offset=4).astype(np.int64)
    size = path.stat().st_size
    if len(offsets) != int(head[0]) + 1 or offsets[-1] != size or np.any(np.diff(offsets) % dtype.itemsize) \
            or np.any(np.diff(offsets) <= 0) or offsets[0] != 4 * (len(offsets) + 1):
        raise IntegrityError("its item offsets do not describe the file", where=path, fix="export it again")
    lengths = np.diff(offsets) // dtype.itemsize
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    n_tokens = int(lengths.sum())
    return LazyTokenFile(path, starts, n_tokens, lambda: np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r",
                                                                   offset=int(offsets[0]), shape=(n_tokens,)))


class LitdataFolder(ExportedFolder):
    """A litdata folder tokpack exported, read back through its sidecar."""

    FORMAT = "litdata"
    read_part = staticmethod(_litdata_part)


def recognizes(path: Path) -> bool:
    """Never from the files alone: a litdata folder is read through the sidecar tokpack wrote beside it."""
    return False


def read(path: Path, *, tokenizer: VocabularySpec | None = None, eod_id: int | None = None) -> LitdataFolder:
    """The tokpack export at ``path``, through its sidecar."""
    return LitdataFolder(path, tokenizer=tokenizer)


__all__ = ["CHUNK_BYTES", "LitdataFolder", "read", "recognizes", "write"]
