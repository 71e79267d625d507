"""Hugging Face ``datasets``: Parquet files with one row per document, ``input_ids`` (its ids)
and ``doc`` (its index in the source), one folder per range (``train/``, ``validation/``,
``test/``), so ``datasets.load_dataset("parquet", data_dir=OUT)`` finds the splits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpack._atomic import building
from tokpack.errors import InputError
from tokpack.export._stream import (
    ExportOptions,
    Progress,
    default_eod,
    part_span,
    parts_of,
    record_for,
    with_separators,
)
from tokpack.store.format import token_dtype
from tokpack.store.sidecar import SIDECAR, ExportRecord, write_sidecar
from tokpack.store.source import TokenSource, chunks

#: No dictionary pages or statistics for the ids (3x faster to write, and a vocabulary-sized
#: dictionary buys little); zstd keeps the files near the dictionary-encoded size.
PARQUET_OPTIONS: dict = {"use_dictionary": ["doc"], "compression": "zstd", "write_statistics": ["doc"]}


def write(source: TokenSource, out: Path, options: ExportOptions, progress: Progress) -> ExportRecord:
    """Write the folder ``out``: ``RANGE/part-NNNNN.parquet``, ``options.rows_per_file`` documents a file.

    Raises:
        InputError: ``out`` exists.
    """
    out = Path(out)
    if out.exists():
        raise InputError("already exists; an export is never overwritten", where=out, fix="remove it or pick another OUT")
    dtype = token_dtype(source.vocabulary.n_vocab)
    eod = default_eod(source, options.eod_id) if options.append_eod else None
    schema = pa.schema([("doc", pa.int64()), ("input_ids", pa.list_(pa.from_numpy_dtype(dtype)))])
    parts = {}
    with building(out) as folder:
        for name, documents in parts_of(source, options.range_name, split=True).items():
            (folder / name).mkdir()
            files: list[str] = []
            writer: pq.ParquetWriter | None = None
            rows_in_file = 0
            doc = documents[0]
            for ids, lengths in chunks(source, documents):
                ids, lengths = with_separators(ids, lengths, eod)
                offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32 if len(ids) < 2**31 else np.int64)
                taken = 0
                while taken < len(lengths):  # a chunk may straddle files: cut it at the row limit
                    if writer is None or rows_in_file >= options.rows_per_file:
                        if writer is not None:
                            writer.close()
                        files.append(f"{name}/part-{len(files):05d}.parquet")
                        writer, rows_in_file = pq.ParquetWriter(folder / files[-1], schema, **PARQUET_OPTIONS), 0
                    take = min(len(lengths) - taken, options.rows_per_file - rows_in_file)
                    window = offsets[taken : taken + take + 1]
                    values = pa.array(ids[window[0] : window[-1]].astype(dtype, copy=False))
                    column = (pa.LargeListArray if window.dtype == np.int64 else pa.ListArray).from_arrays(
                        pa.array(window - window[0]), values)
                    table = pa.Table.from_arrays([pa.array(np.arange(doc, doc + take, dtype=np.int64)), column],
                                                 schema=schema)
                    writer.write_table(table)
                    doc, taken, rows_in_file = doc + take, taken + take, rows_in_file + take
                progress(int(lengths.sum()))
            if writer is not None:
                writer.close()
            parts[name] = part_span(source, documents, files)
        record = record_for(source, "hf", eod_id=eod, dtype=dtype, parts=parts, root=folder)
        write_sidecar(record, folder / SIDECAR)
    return record


__all__ = ["write"]
