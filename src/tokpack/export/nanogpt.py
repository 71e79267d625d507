"""nanoGPT's (and llm.c's starter) data files: one flat ``uint16`` file per range (``train.bin``,
``val.bin``, ``test.bin``) of every document's ids, each followed by the end-of-text id, as
nanoGPT's ``prepare.py`` writes them; ``numpy.memmap(path, dtype=numpy.uint16)`` reads one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokpack._atomic import building
from tokpack.errors import InputError
from tokpack.export._stream import ExportOptions, Progress, check_fits, default_eod, part_span, parts_of, record_for
from tokpack.store.sidecar import SIDECAR, ExportRecord, write_sidecar
from tokpack.store.source import TokenSource, chunks

DTYPE = np.dtype("<u2")
#: The file each range goes to: nanoGPT's names.
FILE_NAMES = {"train": "train.bin", "validation": "val.bin", "test": "test.bin"}


def file_name(range_name: str) -> str:
    """``train.bin``, ``val.bin``, ``test.bin``, or ``NAME.bin`` for another range."""
    return FILE_NAMES.get(range_name, f"{range_name}.bin")


def write(source: TokenSource, out: Path, options: ExportOptions, progress: Progress) -> ExportRecord:
    """Write the folder ``out``: one file per range, the end-of-text id after every document.

    Raises:
        InputError: ``out`` exists, or the vocabulary does not fit ``uint16``.
    """
    out = Path(out)
    if out.exists():
        raise InputError("already exists; an export is never overwritten", where=out, fix="remove it or pick another OUT")
    eod = default_eod(source, options.eod_id)
    check_fits(source, np.dtype(np.uint16), eod, "nanoGPT")
    parts = {}
    with building(out) as folder:
        for name, documents in parts_of(source, options.range_name, split=True).items():
            with open(folder / file_name(name), "wb") as handle:
                for ids, lengths in chunks(source, documents):
                    handle.write(np.ascontiguousarray(np.insert(ids, np.cumsum(lengths), eod), dtype=DTYPE).data)
                    progress(int(lengths.sum()))  # ids read from the source, as the bar's total counts them
            parts[name] = part_span(source, documents, [file_name(name)])
        record = record_for(source, "nanogpt", eod_id=eod, dtype=np.dtype(np.uint16), parts=parts,
                            root=folder)
        write_sidecar(record, folder / SIDECAR)
    return record


__all__ = ["FILE_NAMES", "file_name", "write"]
