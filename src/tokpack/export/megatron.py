"""Megatron-LM's indexed dataset: ``OUT.bin`` (the ids) and ``OUT.idx`` (the index), exactly as
megatron-core's ``IndexedDatasetBuilder`` writes them, one sequence per document.

``OUT.idx``, little-endian::

    b"MMIDIDX\\x00\\x00"      9-byte magic
    uint64  1                version
    uint8   dtype code       8 = uint16, 4 = int32 (Megatron's codes)
    uint64  n_sequences
    uint64  n_documents + 1  length of the document index
    int32[n_sequences]       ids per sequence
    int64[n_sequences]       byte offset of each sequence in OUT.bin
    int64[n_documents + 1]   sequence index where each document starts, then n_sequences

The id type is Megatron's own choice for the vocabulary size (``uint16`` below 65,500 ids, else
``int32``), so a file tokpack writes is the file ``preprocess_data.py`` would have written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from tokpack.errors import InputError
from tokpack.export._stream import (
    ExportOptions,
    Progress,
    check_fits,
    default_eod,
    part_span,
    parts_of,
    record_for,
    replace_into,
    with_separators,
)
from tokpack.store.megatron import DTYPE_CODES, HEADER, MAGIC, VERSION, megatron_paths
from tokpack.store.sidecar import ExportRecord, write_sidecar
from tokpack.store.source import TokenSource, chunks


def megatron_dtype(n_vocab: int) -> np.dtype:
    """The id type megatron-core picks for a vocabulary (its ``DType.optimal_dtype``).

    >>> megatron_dtype(50_257), megatron_dtype(65_536)
    (dtype('uint16'), dtype('int32'))
    """
    return np.dtype(np.uint16) if n_vocab < 65_500 else np.dtype(np.int32)


def code_of(dtype: np.dtype) -> int:
    """Megatron's code for ``dtype``."""
    return next(code for code, known in DTYPE_CODES.items() if known == dtype)


def prefix_of(out: Path, name: str, *, only: bool) -> Path:
    """The prefix range ``name`` is written to: ``out`` itself for ``train`` (or for the one range
    asked for, or the whole stream), ``OUT_NAME`` for another named range.

    >>> [prefix_of(Path("d/web"), n, only=False).name for n in ("train", "validation")]
    ['web', 'web_validation']
    """
    return out if only or name in ("train", "all") else out.with_name(f"{out.name}_{name}")


def write(source: TokenSource, out: Path, options: ExportOptions, progress: Progress) -> ExportRecord:
    """Write ``source`` as the prefix ``out``: its ``train`` range (or everything, or the range
    ``options.range_name``) as ``out.bin``/``out.idx``, every other named range ``NAME`` as
    ``out_NAME.bin``/``out_NAME.idx`` (Megatron's ``--train-data-path``, ``--valid-data-path``,
    ``--test-data-path`` each take one prefix).

    Each ``.bin`` then ``.idx`` is renamed into place when complete, and the sidecar
    (``out.tokpack.json``, listing every part) last, so neither Megatron nor tokpack ever opens
    half an export.

    Raises:
        InputError: the outputs exist, or an id does not fit Megatron's ``int32``.
    """
    parts_wanted = parts_of(source, options.range_name, split=True)
    only = options.range_name is not None or len(parts_wanted) == 1
    sidecar = megatron_paths(out)[2]
    prefixes = {name: prefix_of(Path(out), name, only=only) for name in parts_wanted}
    vocabulary = Path(out).with_name(Path(out).name + ".vocabulary")  # the vocabulary files, beside the prefix
    for existing in [sidecar, vocabulary, *(path for prefix in prefixes.values() for path in megatron_paths(prefix)[:2])]:
        if existing.exists():
            raise InputError("already exists; an export is never overwritten", where=existing, fix="remove it or pick another OUT")
    dtype = megatron_dtype(source.vocabulary.n_vocab)
    eod = default_eod(source, options.eod_id) if options.append_eod else None
    check_fits(source, dtype, eod, "Megatron")
    sidecar.parent.mkdir(parents=True, exist_ok=True)
    parts = {}
    written: list[Path] = []
    try:
        for name, documents in parts_wanted.items():
            bin_path, idx_path, _ = megatron_paths(prefixes[name])
            _write_part(source, documents, bin_path, idx_path, dtype, eod, progress)
            written += [bin_path, idx_path]
            parts[name] = part_span(source, documents, [bin_path.name, idx_path.name])
        record = record_for(source, "megatron", eod_id=eod, dtype=dtype, parts=parts, root=sidecar.parent,
                            vocabulary_dir=vocabulary.name)
    except BaseException:
        for path in written:  # no part without the others
            path.unlink(missing_ok=True)
        shutil.rmtree(vocabulary, ignore_errors=True)
        raise
    write_sidecar(record, sidecar)
    return record


def _write_part(source: TokenSource, documents: tuple[int, int], bin_path: Path, idx_path: Path, dtype: np.dtype,
                eod: int | None, progress: Progress) -> None:
    """Write documents ``[d0, d1)`` as ``bin_path`` and ``idx_path``, each renamed into place when complete."""
    bin_partial, idx_partial = bin_path.with_name(bin_path.name + ".partial"), idx_path.with_name(idx_path.name + ".partial")
    lengths: list[np.ndarray] = []
    try:
        with open(bin_partial, "wb") as handle:
            for ids, sizes in chunks(source, documents):
                ids, sizes = with_separators(ids, sizes, eod)
                handle.write(np.ascontiguousarray(ids, dtype=dtype.newbyteorder("<")).data)
                lengths.append(sizes.astype(np.int32))
                progress(int(sizes.sum()))
        sequence_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
        write_index(idx_partial, sequence_lengths, dtype)
        replace_into(bin_partial, bin_path)
        replace_into(idx_partial, idx_path)
    finally:
        bin_partial.unlink(missing_ok=True)
        idx_partial.unlink(missing_ok=True)


def write_index(path: Path, sequence_lengths: np.ndarray, dtype: np.dtype) -> None:
    """Write the ``.idx`` of sequences of ``sequence_lengths`` ids, one document each."""
    count = len(sequence_lengths)
    pointers = np.zeros(count, dtype=np.int64)
    np.cumsum(sequence_lengths[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
    with open(path, "wb") as handle:
        handle.write(HEADER.pack(MAGIC, VERSION, code_of(dtype), count, count + 1))
        handle.write(sequence_lengths.astype("<i4").tobytes())
        handle.write(pointers.astype("<i8").tobytes())
        handle.write(np.arange(count + 1, dtype="<i8").tobytes())


__all__ = ["megatron_dtype", "prefix_of", "write", "write_index"]
