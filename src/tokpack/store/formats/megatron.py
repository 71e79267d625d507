"""Megatron-LM's indexed dataset (``PREFIX.bin`` + ``PREFIX.idx``): read in place as a token
source, and written exactly as megatron-core's ``IndexedDatasetBuilder`` writes it, one sequence
per document.

``PREFIX.idx``, little-endian, as megatron-core's ``IndexedDataset`` writes and reads it::

    b"MMIDIDX\\x00\\x00"      9-byte magic
    uint64  1                version
    uint8   dtype code       Megatron's: 8 = uint16, 4 = int32, … (see DTYPE_CODES)
    uint64  S                number of sequences
    uint64  D + 1            length of the document index
    int32[S]                 ids per sequence
    int64[S]                 byte offset of each sequence in PREFIX.bin
    int64[D + 1]             the sequence where each document starts, then S

A tokpack document is a Megatron document (all its sequences); ``--append-eod`` data keeps its
end-of-document ids, as Megatron trains on them. Every header field is checked on open. The id
type written is Megatron's own choice for the vocabulary size (``uint16`` below 65,500 ids, else
``int32``), so a file tokpack writes is the file ``preprocess_data.py`` would have written.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np

from tokpack.errors import InputError, IntegrityError
from tokpack.store.dataset import PartsStream
from tokpack.store.format import Span
from tokpack.store.formats._reading import (
    ForeignMeta,
    TokenFile,
    check_ids,
    require_size,
    resolve_vocabulary,
    verified_what,
)
from tokpack.store.formats._writing import (
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
from tokpack.store.sidecar import (
    ExportRecord,
    check_export,
    check_export_vocabulary,
    check_files,
    check_stream,
    prefix_sidecar,
    read_sidecar,
    write_sidecar,
)
from tokpack.store.source import RecordedStream, TokenSource, chunks
from tokpack.vocab.loading import VocabularySpec

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
#: Megatron's ``DType`` codes (the integer ones; a float code is refused).
DTYPE_CODES: dict[int, np.dtype] = {1: np.dtype(np.uint8), 2: np.dtype(np.int8), 3: np.dtype(np.int16),
                                    4: np.dtype(np.int32), 5: np.dtype(np.int64), 8: np.dtype(np.uint16)}
#: magic, version, dtype code, sequence count, document-index length.
HEADER = struct.Struct("<9sQBQQ")


def megatron_paths(path: str | Path) -> tuple[Path, Path, Path]:
    """``PREFIX.bin``, ``PREFIX.idx`` and the tokpack sidecar ``PREFIX.tokpack.json`` for a
    prefix, or for either file's path.

    >>> [p.name for p in megatron_paths("data/web_text_document.idx")]
    ['web_text_document.bin', 'web_text_document.idx', 'web_text_document.tokpack.json']

    Raises:
        InputError: a path that names no prefix (the root).
    """
    path = Path(path)
    if path.name in ("", ".."):  # a folder named by a path without a name of its own ('.', '/', '..')
        path = path.resolve()
    if path.suffix in (".bin", ".idx"):
        path = path.with_suffix("")
    if not path.name:
        raise InputError("names no file prefix (PREFIX.bin, PREFIX.idx)", where=path)
    return path.with_name(path.name + ".bin"), path.with_name(path.name + ".idx"), prefix_sidecar(path)


class MegatronIndex:
    """The parsed ``.idx``: dtype, sequence lengths and pointers, document index, all checked."""

    def __init__(self, path: Path) -> None:
        """Raises:
            InputError: not a Megatron index (magic, version, dtype code).
            IntegrityError: sizes, pointers or the document index that do not add up.
        """
        self.path = path
        try:
            with open(path, "rb") as handle:
                head = handle.read(HEADER.size)
        except FileNotFoundError:
            raise InputError("missing", where=path, fix="a Megatron dataset is PREFIX.bin and PREFIX.idx") from None
        if len(head) < HEADER.size:
            raise InputError(f"{len(head)} bytes is shorter than a Megatron index header ({HEADER.size})", where=path)
        magic, version, code, sequences, documents = HEADER.unpack(head)
        if magic != MAGIC:
            raise InputError(f"byte 0: magic {magic!r} is not Megatron's {MAGIC!r}", where=path, fix="is it a Megatron .idx file?")
        if version != VERSION:
            raise InputError(f"byte 9: version {version}, only version {VERSION} is known", where=path)
        if code not in DTYPE_CODES:
            raise InputError(f"byte 17: dtype code {code} is not an integer id type ({sorted(DTYPE_CODES)})", where=path)
        if documents < 1:
            raise IntegrityError("byte 26: the document index is empty (it always holds a final entry)", where=path)
        self.dtype = DTYPE_CODES[code]
        require_size(path, HEADER.size + sequences * 12 + documents * 8, f"its header ({sequences} sequences, {documents - 1} documents)")
        self.lengths = np.fromfile(path, dtype="<i4", count=sequences, offset=HEADER.size).astype(np.int64)
        self.pointers = np.fromfile(path, dtype="<i8", count=sequences, offset=HEADER.size + 4 * sequences)
        self.document_index = np.fromfile(path, dtype="<i8", count=documents, offset=HEADER.size + 12 * sequences)
        if len(self.lengths) and self.lengths.min() < 0:
            raise IntegrityError("a sequence length is negative", where=path)
        expected = np.concatenate(([0], np.cumsum(self.lengths)[:-1])) * self.dtype.itemsize
        if not np.array_equal(self.pointers, expected[: len(self.pointers)]):
            bad = int(np.flatnonzero(self.pointers != expected)[0])
            raise IntegrityError(f"sequence {bad} starts at byte {int(self.pointers[bad])} of the .bin, "
                                 f"not {int(expected[bad])}: sequences are not stored back to back", where=path)
        index = self.document_index
        if index[0] != 0 or index[-1] != sequences or (len(index) > 1 and np.any(np.diff(index) < 0)):
            raise IntegrityError(f"the document index must rise from 0 to {sequences} (the sequence count)", where=path)
        self.n_tokens = int(self.lengths.sum())


class MegatronDataset(PartsStream, RecordedStream):
    """``PREFIX.bin``/``PREFIX.idx`` as one stream of ``tokenizer``'s ids, read in place.

    ``tokenizer`` names the vocabulary (any :func:`tokpack.load_vocabulary` spec); it may be
    omitted when tokpack exported the files (the sidecar names it). Without a sidecar all of it is
    the ``train`` range; a tokpack export's sidecar lists every part it wrote (``PREFIX`` for
    ``train``, ``PREFIX_validation`` …), read in order, each its named range. The padding id is
    the exported pack's when no end-of-document ids were appended, else none (every id may then
    be a real token).
    """

    def __init__(self, path: str | Path, *, tokenizer: VocabularySpec | None = None, verify: bool = False) -> None:
        """Raises:
            InputError / IntegrityError: a header field, size or index that is wrong, by name.
            VocabularyMismatch: ``tokenizer`` contradicts the sidecar, or (``verify``) an id outside it.
        """
        bin_path, idx_path, sidecar_path = megatron_paths(path)
        self.path = bin_path.with_suffix("")
        self.sidecar = read_sidecar(sidecar_path)
        vocabulary = resolve_vocabulary(self.path, tokenizer, self.sidecar.vocabulary if self.sidecar else None)
        if self.sidecar is not None:
            ordered = sorted(self.sidecar.parts.items(), key=lambda item: item[1].documents)
            named = [(name, megatron_paths(bin_path.parent / part.files[0])) for name, part in ordered]
        else:
            named = [("train", (bin_path, idx_path, sidecar_path))]
        self.shards, ranges, docs, offset = [], {}, 0, 0
        for name, (part_bin, part_idx, _) in named:
            index = MegatronIndex(part_idx)
            part = _read_part(part_bin, index)
            self.shards.append(part)
            ranges[name] = Span(documents=(docs, docs + len(part.starts)), tokens=(offset, offset + part.n_tokens))
            docs, offset = docs + len(part.starts), offset + part.n_tokens
        if self.sidecar is not None:
            check_export(self.sidecar, sidecar_path, ranges)
        self.sidecar_path = sidecar_path
        self.index = MegatronIndex(idx_path)
        dtypes = {part.tokens.dtype.newbyteorder("<") for part in self.shards}
        if len(dtypes) > 1:
            raise IntegrityError(f"its parts hold different id types ({', '.join(sorted(d.name for d in dtypes))})", where=self.path)
        self.dtype = self.index.dtype
        self.offsets = np.concatenate(([0], np.cumsum([p.n_tokens for p in self.shards]))).astype(np.int64)
        self.starts = np.concatenate([p.starts + o for p, o in zip(self.shards, self.offsets)] or [np.zeros(0, np.int64)])
        eod = self.sidecar.eod_id if self.sidecar else None
        pad_id = self.sidecar.pad_id if self.sidecar and eod is None else None
        self.meta = ForeignMeta(schema="megatron", parts=self.shards, vocabulary=vocabulary, pad_id=pad_id,
                                ranges=ranges, dtype=self.dtype.name,
                                files=[f for _, (b, i, _) in named for f in (b.name, i.name)], eod_id=eod)
        if verify:
            self.verify()

    @property
    def tokens(self) -> np.ndarray:
        """The ids of ``PREFIX.bin``, memory-mapped."""
        return self.shards[0].tokens

    @property
    def verified_what(self) -> str:
        """What :meth:`verify` checks, in words (``tokpack inspect`` prints it)."""
        return verified_what(self.sidecar)

    def verify(self) -> None:
        """Check every file against the SHA-256 the export's sidecar records (when there is one)
        and every id is inside the vocabulary.

        Raises:
            IntegrityError: a file whose checksum differs from the sidecar's, or carried
                vocabulary files that do not mean its vocabulary.
            VocabularyMismatch: naming the file and the id.
        """
        if self.sidecar is not None:
            check_files(self.sidecar, self.path.parent)
            check_export_vocabulary(self.sidecar, self.path.parent, self.sidecar_path)
        check_ids(self.shards, self.vocabulary.n_vocab)
        if self.sidecar is not None:
            check_stream(self, self.sidecar, self.sidecar_path)

    def __repr__(self) -> str:
        return f"MegatronDataset({str(self.path)!r}, n_docs={self.n_docs}, n_tokens={self.n_tokens})"


def _read_part(bin_path: Path, index: MegatronIndex) -> TokenFile:
    """One ``.bin`` as its documents, memory-mapped, after checking its size against ``index``."""
    dtype = index.dtype
    require_size(bin_path, index.n_tokens * dtype.itemsize, f"{index.path.name}")
    tokens = np.memmap(bin_path, dtype=dtype.newbyteorder("<"), mode="r") if index.n_tokens else np.zeros(0, dtype)
    first_sequence = index.document_index[:-1]
    sequence_starts = index.pointers // dtype.itemsize
    doc_starts = np.append(sequence_starts, index.n_tokens)[first_sequence]
    doc_ends = np.append(doc_starts[1:], index.n_tokens)
    starts = doc_starts[doc_ends > doc_starts].astype(np.int64)  # an empty document has no first id
    return TokenFile(bin_path, tokens, starts)


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


def recognizes(path: Path) -> bool:
    """Whether ``path`` is a Megatron prefix (or its ``.bin``/``.idx``): its ``.idx`` exists."""
    return megatron_paths(path)[1].exists()


def read(path: Path, *, tokenizer: VocabularySpec | None = None, eod_id: int | None = None) -> MegatronDataset:
    """``path`` opened in place (``eod_id`` is not needed to find Megatron's documents)."""
    return MegatronDataset(path, tokenizer=tokenizer)


__all__ = ["DTYPE_CODES", "HEADER", "MAGIC", "MegatronDataset", "MegatronIndex", "megatron_dtype", "megatron_paths",
           "prefix_of", "read", "recognizes", "write", "write_index"]
