"""tokpack's litdata, MDS and Parquet (Hugging Face) exports read back as token sources, so they
import into a pack exactly (see :mod:`tokpack.store.importing`).

These folders are read only with the sidecar (``tokpack-export.json``) tokpack wrote beside them:
it names the vocabulary, the parts (one folder per range) and every file's SHA-256, which
:meth:`ExportedFolder.verify` checks before any id is trusted. Each data file (a litdata chunk,
an MDS shard, a Parquet file) is one part of the stream; its document boundaries are read on
open, its ids when first read, and at most one file's ids are held in memory at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from tokpack.errors import InputError, IntegrityError
from tokpack.store.dataset import PartsStream
from tokpack.store.foreign import ForeignMeta, TokenFile, check_files, check_ids, resolve_vocabulary, verified_what
from tokpack.store.format import Span
from tokpack.store.source import RecordedStream
from tokpack.vocab.loading import VocabularySpec

#: The export formats this module reads (the sidecar's ``format``).
KINDS = ("litdata", "mds", "hf")


class LazyTokenFile(TokenFile):
    """One data file of an export: its document ``starts`` known from the start, its ids read
    by ``load`` when first used and dropped by :meth:`release`."""

    def __init__(self, path: Path, starts: np.ndarray, n_tokens: int, load: Callable[[], np.ndarray]) -> None:
        self._tokens: np.ndarray | None = None
        super().__init__(path, np.zeros(0, np.uint8), starts)
        self.n_tokens, self._load = n_tokens, load

    @property
    def tokens(self) -> np.ndarray:
        tokens = self._tokens
        if tokens is None:
            tokens = self._load()
            if len(tokens) != self.n_tokens:
                raise IntegrityError(f"holds {len(tokens):,} ids, its header said {self.n_tokens:,}", where=self.path)
            self._tokens = tokens
        return tokens

    @tokens.setter
    def tokens(self, value: np.ndarray) -> None:  # TokenFile's constructor sets it; the loader decides
        self._tokens = value if len(value) else None

    def release(self) -> None:
        self._tokens = None
        self._rows.clear()


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


_PARTS: dict[str, Callable[[Path, np.dtype], LazyTokenFile]] = {"litdata": _litdata_part, "mds": _mds_part, "hf": _hf_part}


class ExportedFolder(PartsStream, RecordedStream):
    """A litdata, MDS or Parquet folder that tokpack exported, as one stream of ids (each range
    its named range), read through its sidecar (see the module docstring)."""

    def __init__(self, path: str | Path, *, tokenizer: VocabularySpec | None = None, verify: bool = False) -> None:
        """Raises:
            InputError: no tokpack sidecar, or one of another format.
            IntegrityError: a data file that does not parse as the sidecar says.
            VocabularyMismatch: ``tokenizer`` contradicts the sidecar.
        """
        from tokpack.store.sidecar import SIDECAR, check_export, read_sidecar

        self.path = Path(path)
        sidecar = read_sidecar(self.path / SIDECAR)
        if sidecar is None or sidecar.format not in KINDS:
            raise InputError(f"not a tokpack litdata, mds or hf export (no {SIDECAR} naming one)", where=self.path,
                             fix="these folders are read through the sidecar tokpack wrote beside them")
        self.sidecar = sidecar
        vocabulary = resolve_vocabulary(self.path, tokenizer, sidecar.vocabulary)
        self.dtype = np.dtype(sidecar.dtype)
        read = _PARTS[sidecar.format]
        self.shards: list[LazyTokenFile] = []
        ranges: dict[str, Span] = {}
        docs = tokens = 0
        for name, part in sorted(sidecar.parts.items(), key=lambda item: item[1].documents):
            first = (docs, tokens)
            for file in part.files:
                if file.endswith("index.json"):
                    continue
                try:
                    shard = read(self.path / file, self.dtype)
                except IntegrityError:  # an altered file: say so, rather than how it fails to parse
                    check_files(sidecar, self.path, [file])
                    raise
                self.shards.append(shard)
                docs, tokens = docs + len(shard.starts), tokens + shard.n_tokens
            ranges[name] = Span(documents=(first[0], docs), tokens=(first[1], tokens))
        check_export(sidecar, self.path / SIDECAR, ranges)
        self.offsets = np.concatenate(([0], np.cumsum([p.n_tokens for p in self.shards]))).astype(np.int64)
        self.starts = np.concatenate([p.starts + o for p, o in zip(self.shards, self.offsets)] or [np.zeros(0, np.int64)])
        pad_id = sidecar.pad_id if sidecar.eod_id is None else None
        self.meta = ForeignMeta(schema=sidecar.format, parts=self.shards, vocabulary=vocabulary, pad_id=pad_id,
                                ranges=ranges, dtype=self.dtype.name, files=sorted(sidecar.files_sha256),
                                eod_id=sidecar.eod_id)
        self._held: int | None = None
        if verify:
            self.verify()

    def _reading(self, index: int) -> None:
        """Hold at most one file's ids in memory: drop the previous one."""
        if self._held is not None and self._held != index:
            self.shards[self._held].release()
        self._held = index

    @property
    def verified_what(self) -> str:
        """What :meth:`verify` checks, in words (``tokpack inspect`` prints it)."""
        return verified_what(self.sidecar)

    def verify(self) -> None:
        """Check every file against the SHA-256 the sidecar records, then every id against the vocabulary.

        Raises:
            IntegrityError: a file whose checksum differs from the sidecar's.
            VocabularyMismatch: naming the file and the id.
        """
        from tokpack.store.sidecar import SIDECAR, check_export_vocabulary, check_stream

        check_files(self.sidecar, self.path)
        check_export_vocabulary(self.sidecar, self.path, self.path / SIDECAR)
        for index, shard in enumerate(self.shards):
            self._reading(index)
            check_ids([shard], self.vocabulary.n_vocab)
        check_stream(self, self.sidecar, self.path / SIDECAR)

    def __repr__(self) -> str:
        return f"ExportedFolder({str(self.path)!r}, format={self.sidecar.format!r}, n_docs={self.n_docs})"


__all__ = ["KINDS", "ExportedFolder", "LazyTokenFile"]
