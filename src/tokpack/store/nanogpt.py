"""nanoGPT's flat ``uint16`` files (``train.bin``, ``val.bin``) read in place as a token source.

A file is every document's ids, each followed by the end-of-text id, nothing else; a document
starts after each end-of-text id. A folder with several of them (as ``prepare.py`` or ``tokpack
export --format nanogpt`` writes) reads as one stream, ``train.bin`` then ``val.bin`` then
``test.bin``, each its named range. The end-of-text ids stay in the stream: they are what a
nanoGPT model trained on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokpack.errors import InputError
from tokpack.store.dataset import PartsStream
from tokpack.store.foreign import ForeignMeta, TokenFile, check_files, check_ids, resolve_vocabulary, verified_what
from tokpack.store.format import Span
from tokpack.store.source import RecordedStream
from tokpack.store.vocabulary import load_vocabulary
from tokpack.vocab.loading import VocabularySpec

DTYPE = np.dtype("<u2")
#: File name → range name, in stream order.
RANGE_OF_FILE = {"train.bin": "train", "val.bin": "validation", "test.bin": "test"}
_SCAN_CHUNK = 16 << 20


def _document_starts(tokens: np.ndarray, eod_id: int) -> np.ndarray:
    """Offsets where a document starts: 0, and after every end-of-text id but the last one."""
    found = [np.zeros(1, np.int64)] if len(tokens) else []
    for offset in range(0, len(tokens), _SCAN_CHUNK):  # bounded pieces: memory stays flat
        found.append(np.flatnonzero(tokens[offset : offset + _SCAN_CHUNK] == eod_id).astype(np.int64) + offset + 1)
    starts = np.concatenate(found) if found else np.zeros(0, np.int64)
    return starts[starts < len(tokens)]


class NanoGptData(PartsStream, RecordedStream):
    """A nanoGPT ``.bin`` file, or a folder of them, as one stream of ``tokenizer``'s ids."""

    def __init__(self, path: str | Path, *, tokenizer: VocabularySpec | None = None, eod_id: int | None = None,
                 verify: bool = False) -> None:
        """Args:
            tokenizer: the vocabulary (optional when tokpack exported the folder: the sidecar names it).
            eod_id: the end-of-text id between documents (default: the sidecar's, else the
                tokenizer's ``<|endoftext|>``).

        Raises:
            InputError: no ``.bin`` files, an odd file size, no end-of-text id to split on.
            VocabularyMismatch: ``tokenizer`` contradicts the sidecar, or (``verify``) an id outside it.
        """
        from tokpack.store.sidecar import SIDECAR, check_export, read_sidecar

        self.path = Path(path)
        folder = self.folder = self.path if self.path.is_dir() else self.path.parent
        self.sidecar = read_sidecar(folder / SIDECAR)
        vocabulary = resolve_vocabulary(self.path, tokenizer, self.sidecar.vocabulary if self.sidecar else None)
        if eod_id is None:
            eod_id = self.sidecar.eod_id if self.sidecar else None
        if eod_id is None and tokenizer is not None:
            eod_id = load_vocabulary(tokenizer).eot_id
        if eod_id is None:
            raise InputError("no end-of-text id to find documents by", where=self.path, fix="pass eod_id=ID")
        self.eod_id = eod_id
        if self.path.is_dir():
            named = self._files_in(self.path)
        elif self.path.exists():
            exported = [name for name, part in self.sidecar.parts.items() if part.files[0] == self.path.name] if self.sidecar else []
            named = [(self.path, exported[0] if exported else RANGE_OF_FILE.get(self.path.name, "train"))]
        else:
            raise InputError("missing", where=self.path)
        self.dtype = DTYPE
        self.shards, ranges, docs, tokens = [], {}, 0, 0
        for file, name in named:
            size = file.stat().st_size
            if size % DTYPE.itemsize:
                raise InputError(f"{size:,} bytes is not a whole number of uint16 ids", where=file)
            ids = np.memmap(file, dtype=DTYPE, mode="r") if size else np.zeros(0, DTYPE)
            part = TokenFile(file, ids, _document_starts(ids, eod_id))
            self.shards.append(part)
            ranges[name] = Span(documents=(docs, docs + len(part.starts)), tokens=(tokens, tokens + part.n_tokens))
            docs, tokens = docs + len(part.starts), tokens + part.n_tokens
        if self.sidecar is not None:
            check_export(self.sidecar, folder / SIDECAR, ranges)
        self.offsets = np.concatenate(([0], np.cumsum([p.n_tokens for p in self.shards]))).astype(np.int64)
        self.starts = np.concatenate([p.starts + o for p, o in zip(self.shards, self.offsets)])
        self.meta = ForeignMeta(schema="nanogpt", parts=self.shards, vocabulary=vocabulary, pad_id=None,
                                ranges=ranges, dtype="uint16", files=[str(p.path.name) for p in self.shards],
                                eod_id=eod_id)
        if verify:
            self.verify()

    def _files_in(self, folder: Path) -> list[tuple[Path, str]]:
        if self.sidecar is not None:  # in stream order, as the export wrote them
            ordered = sorted(self.sidecar.parts.items(), key=lambda item: item[1].documents)
            named = [(folder / part.files[0], name) for name, part in ordered]
        else:
            named = [(folder / file, name) for file, name in RANGE_OF_FILE.items() if (folder / file).exists()]
        if not named:
            raise InputError("no nanoGPT files (train.bin, val.bin, test.bin)", where=folder)
        return named

    @property
    def verified_what(self) -> str:
        """What :meth:`verify` checks, in words (``tokpack inspect`` prints it)."""
        return verified_what(self.sidecar)

    def verify(self) -> None:
        """Check every file against the SHA-256 the export's sidecar records (when there is one)
        and every id is inside the vocabulary.

        Raises:
            IntegrityError: a file whose checksum differs from the sidecar's.
            VocabularyMismatch: naming the file and the id.
        """
        from tokpack.store.sidecar import SIDECAR, check_export_vocabulary, check_stream

        if self.sidecar is not None:
            check_files(self.sidecar, self.folder, [p.path.relative_to(self.folder).as_posix() for p in self.shards])
            check_export_vocabulary(self.sidecar, self.folder, self.folder / SIDECAR)
        check_ids(self.shards, self.vocabulary.n_vocab)
        if self.sidecar is not None:
            check_stream(self, self.sidecar, self.folder / SIDECAR)

    def __repr__(self) -> str:
        return f"NanoGptData({str(self.path)!r}, n_docs={self.n_docs}, n_tokens={self.n_tokens})"


__all__ = ["NanoGptData"]
