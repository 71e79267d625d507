"""Hugging Face ``datasets``: Parquet files with one row per document, ``input_ids`` (its ids)
and ``doc`` (its index in the source), one folder per range (``train/``, ``validation/``,
``test/``), so ``datasets.load_dataset("parquet", data_dir=OUT)`` finds the splits; a folder
tokpack wrote is read back through its sidecar (:class:`ParquetFolder`)."""

from __future__ import annotations

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

#: No dictionary pages or statistics for the ids (faster to write, see BENCHMARKS.md, "Exporting",
#: and a vocabulary-sized dictionary buys little); zstd keeps the files near the
#: dictionary-encoded size.
PARQUET_OPTIONS: dict = {"use_dictionary": ["doc"], "compression": "zstd", "write_statistics": ["doc"]}


def write(source: TokenSource, out: Path, options: ExportOptions, progress: Progress) -> ExportRecord:
    """Write the folder ``out``: ``RANGE/part-NNNNN.parquet``, ``options.rows_per_file`` documents a file.

    Raises:
        InputError: ``out`` exists.
    """
    import pyarrow as pa  # here, not at the top: finding a format imports every format's module
    import pyarrow.parquet as pq

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
            writer: Any = None
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


def _parquet_ids(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    try:
        column = pq.read_table(path, columns=["input_ids"]).column("input_ids").combine_chunks()
    except (OSError, KeyError, ValueError) as error:
        raise IntegrityError(f"not a Parquet file with an 'input_ids' column ({error})", where=path) from None
    offsets = column.offsets.to_numpy().astype(np.int64)
    values = column.values.to_numpy(zero_copy_only=False)
    return values[offsets[0] : offsets[-1]], np.diff(offsets)


def _hf_part(path: Path, dtype: np.dtype) -> LazyTokenFile:
    _, lengths = _parquet_ids(path)
    return LazyTokenFile(path, np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64), int(lengths.sum()),
                         lambda: _parquet_ids(path)[0].astype(dtype, copy=False))


class ParquetFolder(ExportedFolder):
    """A Parquet (Hugging Face) folder tokpack exported, read back through its sidecar."""

    FORMAT = "hf"
    read_part = staticmethod(_hf_part)


def recognizes(path: Path) -> bool:
    """Never from the files alone: a Parquet folder is read through the sidecar tokpack wrote beside it."""
    return False


def read(path: Path, *, tokenizer: VocabularySpec | None = None, eod_id: int | None = None) -> ParquetFolder:
    """The tokpack export at ``path``, through its sidecar."""
    return ParquetFolder(path, tokenizer=tokenizer)


__all__ = ["ParquetFolder", "read", "recognizes", "write"]
