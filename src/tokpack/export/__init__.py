"""Export a pack or sharded dataset to the formats training frameworks load.

Each format is one module with a ``write(source, out, options, progress)`` function, listed in
:data:`FORMATS`; adding a format touches that one file and this dict. Every export streams
(memory flat in the corpus size), appears whole or not at all, and leaves a sidecar record
(``tokpack-export.json`` in a folder, ``OUT.tokpack.json`` beside a Megatron prefix) naming the
vocabulary, so tokpack can reopen and import it exactly.

The package itself is callable: ``tokpack.export(source, fmt, out)`` is :func:`export`.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokpack import _checks as checks
from tokpack.errors import InputError
from tokpack.export._stream import ExportOptions, Progress, check_options
from tokpack.store.sidecar import SIDECAR, ExportRecord, read_sidecar
from tokpack.store.source import TokenSource


@dataclass(frozen=True)
class Format:
    """A registered export format: the module (in this package) whose ``write`` it runs, and a
    one-line description for ``--help``. The module is imported on first use, so ``import
    tokpack`` does not pay for pyarrow and the other writers' libraries."""

    module: str
    description: str

    @property
    def write(self) -> Callable[[TokenSource, Path, ExportOptions, Progress], ExportRecord]:
        writer: Callable[[TokenSource, Path, ExportOptions, Progress], ExportRecord]
        writer = importlib.import_module(f"{__name__}.{self.module}").write
        return writer


FORMATS: dict[str, Format] = {
    "megatron": Format("megatron", "OUT.bin + OUT.idx for Megatron-LM's IndexedDataset"),
    "nanogpt": Format("nanogpt", "OUT/train.bin, val.bin: flat uint16, end-of-text after each document"),
    "litdata": Format("litdata", "OUT/RANGE/: litdata chunks for StreamingDataset(item_loader=TokensLoader)"),
    "mds": Format("mds", "OUT/RANGE/: MosaicML MDS shards with a 'tokens' column"),
    "hf": Format("hf", "OUT/RANGE/*.parquet: one row per document, 'input_ids', for datasets.load_dataset"),
}


def export(source: TokenSource | str | Path, fmt: str, out: str | Path, *, append_eod: bool = False,
           eod_id: int | None = None, range_name: str | None = None, rows_per_file: int = 1 << 20,
           progress: Progress | None = None, storage_options: dict[str, Any] | None = None) -> ExportRecord:
    """Export ``source`` (a pack or sharded dataset, opened or by path) as ``fmt`` to ``out``.

    Args:
        append_eod: put the end-of-document id after every document (Megatron, hf; nanoGPT
            always does), as Megatron's ``preprocess_data.py --append-eod``.
        eod_id: that id, when it is not the source's padding id (``<|endoftext|>`` for text).
        range_name: export this range only (default: every range, or the whole stream).
        rows_per_file: documents per output file (hf, mds, litdata).
        progress: called with the ids written at each step.
        out: a local path, or an fsspec URL (``s3://…``): written locally, verified, uploaded,
            the sidecar last.

    The source is checked against its record before anything is written, as every reader checks
    it (see :func:`verified`): an export never carries ids its record does not vouch for.

    Raises:
        InputError: an unknown format, an existing ``out``, ids the format cannot hold, a
            ``rows_per_file`` below 1.
        IntegrityError: the source does not match its record.
    """
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")
    checks.boolean("append_eod", append_eod)
    if eod_id is not None:
        checks.non_negative_int("eod_id", eod_id)
    if range_name is not None:
        checks.text("range_name", range_name)
    if not isinstance(out, (str, os.PathLike)):
        raise InputError(f"out must be a path or URL, got {type(out).__name__}")
    options = ExportOptions(append_eod=append_eod, eod_id=eod_id, range_name=range_name, rows_per_file=rows_per_file)
    check_options(options)
    if isinstance(source, (str, Path)):
        from tokpack.store.remote import open_local_or_remote

        opened = open_local_or_remote(source, storage_options=storage_options, verify=None)
    else:
        opened = source
    verified(opened)
    report: Progress = progress or (lambda _: None)
    if "://" in str(out):
        from tokpack.store.remote import export_to_url

        return export_to_url(FORMATS[fmt].write, opened, str(out), options, report, storage_options or {})
    return FORMATS[fmt].write(opened, Path(out), options, report)


def verified(source: TokenSource) -> TokenSource:
    """``source``, checked against its record the way every reader's default open checks it,
    whatever ``verify=`` it was opened with: a pack's checksums, ids and padding id unless its
    verification stamp shows it unchanged since it was last verified; a dataset's shards and its
    whole stream's checksums (which the export's sidecar copies) the same way; another
    framework's files (a tokpack export) against its sidecar's checksums and the vocabulary; a
    remote dataset's shards as they download, and its whole stream's checksums.

    Raises:
        IntegrityError / VocabularyMismatch: naming the file that does not match.
    """
    from tokpack.store.dataset import ShardedDataset
    from tokpack.store.reader import Pack
    from tokpack.store.remote import RemoteDataset

    if isinstance(source, (Pack, ShardedDataset)):
        # A dataset's stamp covers its whole-stream checksums too, which the sidecar copies.
        if not source.stamped():
            source.verify()
    elif getattr(getattr(source, "sidecar", None), "files_sha256", None):  # a tokpack export, read in place
        from tokpack.store.importing import verify_unless_stamped

        verify_unless_stamped(source)
    elif isinstance(source, RemoteDataset):
        source.check_stream()
    else:
        source.verify()
    return source


class _CallableModule(types.ModuleType):
    """This package, callable: ``tokpack.export(source, "megatron", out)`` is :func:`export`."""

    def __call__(self, *args: Any, **kwargs: Any) -> ExportRecord:
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["FORMATS", "SIDECAR", "ExportOptions", "ExportRecord", "Format", "check_options", "export", "read_sidecar", "verified"]
