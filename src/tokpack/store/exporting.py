"""``export``: a pack or sharded dataset written in a format training frameworks load
(``tokpack.export(source, format, out)``), checked against its record first.

Each format's ``write`` is in its module of :mod:`tokpack.store.formats`. Every export streams
(memory flat in the corpus size), appears whole or not at all, and leaves a sidecar record
(``tokpack-export.json`` in a folder, ``OUT.tokpack.json`` beside a Megatron prefix) naming the
vocabulary, so tokpack can reopen and import it exactly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tokpack import _checks as checks
from tokpack.errors import InputError
from tokpack.store.dataset import ShardedDataset
from tokpack.store.formats import FORMATS, WRITTEN
from tokpack.store.formats._writing import ExportOptions, Progress, check_options
from tokpack.store.importing import verify_unless_stamped
from tokpack.store.reader import Pack
from tokpack.store.sidecar import ExportRecord
from tokpack.store.source import TokenSource


def export(source: TokenSource | str | Path, format: str, out: str | Path, *, append_eod: bool = False,
           eod_id: int | None = None, range_name: str | None = None, rows_per_file: int = 1 << 20,
           progress: Progress | None = None, storage_options: dict[str, Any] | None = None) -> ExportRecord:
    """Export ``source`` (a pack or sharded dataset, opened or by path) as ``format`` to ``out``.

    Args:
        format: ``megatron``, ``nanogpt``, ``litdata``, ``mds`` or ``hf``.
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
    if not isinstance(format, str) or format not in WRITTEN:
        raise InputError(f"format must be one of {', '.join(WRITTEN)}, got {format!r}")
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
    write = FORMATS[format].load().write
    if "://" in str(out):
        from tokpack.store.remote import export_to_url

        return export_to_url(write, opened, str(out), options, report, storage_options or {})
    record: ExportRecord = write(opened, Path(out), options, report)
    return record


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
    from tokpack.store.remote import RemoteDataset

    if isinstance(source, (Pack, ShardedDataset)):
        # A dataset's stamp covers its whole-stream checksums too, which the sidecar copies.
        if not source.stamped():
            source.verify()
    elif getattr(getattr(source, "sidecar", None), "files_sha256", None):  # a tokpack export, read in place
        verify_unless_stamped(source)
    elif isinstance(source, RemoteDataset):
        source.check_stream()
    else:
        source.verify()
    return source


__all__ = ["ExportOptions", "Progress", "check_options", "export", "verified"]
