"""The reader tokpack's litdata, MDS and Parquet (Hugging Face) exports share: a folder read back
through its sidecar as one token source, so it imports into a pack exactly (see
:mod:`tokpack.store.importing`); each of those formats' modules says how one of its files reads.

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
from tokpack.store.format import Span
from tokpack.store.formats._reading import ForeignMeta, TokenFile, check_ids, resolve_vocabulary, verified_what
from tokpack.store.sidecar import SIDECAR, check_export, check_export_vocabulary, check_files, check_stream, read_sidecar
from tokpack.store.source import RecordedStream
from tokpack.vocab.loading import VocabularySpec


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


class ExportedFolder(PartsStream, RecordedStream):
    """A folder that tokpack exported in :attr:`FORMAT`, as one stream of ids (each range its
    named range), read through its sidecar (see the module docstring); a format's subclass names
    itself and how one of its data files reads (:meth:`read_part`)."""

    #: The sidecar's ``format`` this reader reads.
    FORMAT: str = ""

    @staticmethod
    def read_part(path: Path, dtype: np.dtype) -> LazyTokenFile:
        """One data file of the export: its document starts now, its ids when first read.

        Raises:
            IntegrityError: a file that does not parse as the format lays it out.
        """
        raise NotImplementedError

    def __init__(self, path: str | Path, *, tokenizer: VocabularySpec | None = None, verify: bool = False) -> None:
        """Raises:
            InputError: no tokpack sidecar, or one of another format.
            IntegrityError: a data file that does not parse as the sidecar says.
            VocabularyMismatch: ``tokenizer`` contradicts the sidecar.
        """
        self.path = Path(path)
        sidecar = read_sidecar(self.path / SIDECAR)
        if sidecar is None or sidecar.format != self.FORMAT:
            raise InputError(f"not a tokpack {self.FORMAT} export (no {SIDECAR} naming one)", where=self.path,
                             fix="these folders are read through the sidecar tokpack wrote beside them")
        self.sidecar = sidecar
        vocabulary = resolve_vocabulary(self.path, tokenizer, sidecar.vocabulary)
        self.dtype = np.dtype(sidecar.dtype)
        self.shards: list[LazyTokenFile] = []
        ranges: dict[str, Span] = {}
        docs = tokens = 0
        for name, part in sorted(sidecar.parts.items(), key=lambda item: item[1].documents):
            first = (docs, tokens)
            for file in part.files:
                if file.endswith("index.json"):
                    continue
                try:
                    shard = self.read_part(self.path / file, self.dtype)
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
        check_files(self.sidecar, self.path)
        check_export_vocabulary(self.sidecar, self.path, self.path / SIDECAR)
        for index, shard in enumerate(self.shards):
            self._reading(index)
            check_ids([shard], self.vocabulary.n_vocab)
        check_stream(self, self.sidecar, self.path / SIDECAR)

    def __repr__(self) -> str:
        return f"ExportedFolder({str(self.path)!r}, format={self.sidecar.format!r}, n_docs={self.n_docs})"


__all__ = ["ExportedFolder", "LazyTokenFile"]
