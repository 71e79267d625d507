"""Megatron-LM's indexed dataset (``PREFIX.bin`` + ``PREFIX.idx``) read in place as a token source.

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
end-of-document ids, as Megatron trains on them. Every header field is checked on open.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from tokpack.errors import InputError, IntegrityError
from tokpack.store.dataset import PartsStream
from tokpack.store.foreign import ForeignMeta, TokenFile, check_ids, require_size, resolve_vocabulary
from tokpack.store.format import Span
from tokpack.store.source import RecordedStream
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
    """
    path = Path(path)
    if path.suffix in (".bin", ".idx"):
        path = path.with_suffix("")
    return tuple(path.with_name(path.name + suffix) for suffix in (".bin", ".idx", ".tokpack.json"))  # type: ignore[return-value]


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
            raise InputError(path, "missing", fix="a Megatron dataset is PREFIX.bin and PREFIX.idx") from None
        if len(head) < HEADER.size:
            raise InputError(path, f"{len(head)} bytes is shorter than a Megatron index header ({HEADER.size})")
        magic, version, code, sequences, documents = HEADER.unpack(head)
        if magic != MAGIC:
            raise InputError(path, f"byte 0: magic {magic!r} is not Megatron's {MAGIC!r}", fix="is it a Megatron .idx file?")
        if version != VERSION:
            raise InputError(path, f"byte 9: version {version}, only version {VERSION} is known")
        if code not in DTYPE_CODES:
            raise InputError(path, f"byte 17: dtype code {code} is not an integer id type ({sorted(DTYPE_CODES)})")
        if documents < 1:
            raise IntegrityError(path, "byte 26: the document index is empty (it always holds a final entry)")
        self.dtype = DTYPE_CODES[code]
        require_size(path, HEADER.size + sequences * 12 + documents * 8, f"its header ({sequences} sequences, {documents - 1} documents)")
        self.lengths = np.fromfile(path, dtype="<i4", count=sequences, offset=HEADER.size).astype(np.int64)
        self.pointers = np.fromfile(path, dtype="<i8", count=sequences, offset=HEADER.size + 4 * sequences)
        self.document_index = np.fromfile(path, dtype="<i8", count=documents, offset=HEADER.size + 12 * sequences)
        if len(self.lengths) and self.lengths.min() < 0:
            raise IntegrityError(path, "a sequence length is negative")
        expected = np.concatenate(([0], np.cumsum(self.lengths)[:-1])) * self.dtype.itemsize
        if not np.array_equal(self.pointers, expected[: len(self.pointers)]):
            bad = int(np.flatnonzero(self.pointers != expected)[0])
            raise IntegrityError(path, f"sequence {bad} starts at byte {int(self.pointers[bad])} of the .bin, "
                                 f"not {int(expected[bad])}: sequences are not stored back to back")
        index = self.document_index
        if index[0] != 0 or index[-1] != sequences or (len(index) > 1 and np.any(np.diff(index) < 0)):
            raise IntegrityError(path, f"the document index must rise from 0 to {sequences} (the sequence count)")
        self.n_tokens = int(self.lengths.sum())


class MegatronDataset(PartsStream, RecordedStream):
    """``PREFIX.bin``/``PREFIX.idx`` as one stream of ``tokenizer``'s ids, read in place.

    ``tokenizer`` names the vocabulary (any :func:`tokpack.load_vocabulary` spec); it may be
    omitted when tokpack exported the files (the sidecar names it). All of it is the ``train``
    range. The padding id is the exported pack's when no end-of-document ids were appended, else
    none (every id may then be a real token).
    """

    def __init__(self, path: str | Path, *, tokenizer: VocabularySpec | None = None, verify: bool = False) -> None:
        """Raises:
            InputError / IntegrityError: a header field, size or index that is wrong, by name.
            VocabularyMismatch: ``tokenizer`` contradicts the sidecar, or (``verify``) an id outside it.
        """
        from tokpack.export._stream import read_sidecar

        bin_path, idx_path, sidecar_path = megatron_paths(path)
        self.path = bin_path.with_suffix("")
        self.index = MegatronIndex(idx_path)
        self.sidecar = read_sidecar(sidecar_path)
        vocabulary = resolve_vocabulary(self.path, tokenizer, self.sidecar.vocabulary if self.sidecar else None)
        self.dtype = self.index.dtype
        require_size(bin_path, self.index.n_tokens * self.dtype.itemsize, f"{idx_path.name}")
        tokens = (np.memmap(bin_path, dtype=self.dtype.newbyteorder("<"), mode="r") if self.index.n_tokens
                  else np.zeros(0, self.dtype))
        first_sequence = self.index.document_index[:-1]
        sequence_starts = self.index.pointers // self.dtype.itemsize
        doc_starts = np.append(sequence_starts, self.index.n_tokens)[first_sequence]
        doc_ends = np.append(doc_starts[1:], self.index.n_tokens)
        self.starts = doc_starts[doc_ends > doc_starts].astype(np.int64)  # an empty document has no first id
        self.shards = [TokenFile(bin_path, tokens, self.starts)]
        self.offsets = np.array([0, self.index.n_tokens], dtype=np.int64)
        eod = self.sidecar.eod_id if self.sidecar else None
        pad_id = self.sidecar.pad_id if self.sidecar and eod is None else None
        n = self.index.n_tokens
        self.meta = ForeignMeta(schema="megatron", parts=self.shards, vocabulary=vocabulary, pad_id=pad_id,
                                ranges={"train": Span(documents=(0, len(self.starts)), tokens=(0, n))},
                                dtype=self.dtype.name, files=[bin_path.name, idx_path.name], eod_id=eod)
        if verify:
            self.verify()

    @property
    def tokens(self) -> np.ndarray:
        """The ids, memory-mapped."""
        return self.shards[0].tokens

    def verify(self) -> None:
        """Check every id is inside the vocabulary.

        Raises:
            VocabularyMismatch: naming the file and the id.
        """
        check_ids(self.shards, self.vocabulary.n_vocab)

    def __repr__(self) -> str:
        return f"MegatronDataset({str(self.path)!r}, n_docs={self.n_docs}, n_tokens={self.n_tokens})"


__all__ = ["DTYPE_CODES", "HEADER", "MAGIC", "MegatronDataset", "MegatronIndex", "megatron_paths"]
