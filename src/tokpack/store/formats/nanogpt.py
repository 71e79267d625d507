"""nanoGPT's (and llm.c's starter) flat ``uint16`` files (``train.bin``, ``val.bin``,
``test.bin``): read in place as a token source, and written as nanoGPT's ``prepare.py`` writes
them; ``numpy.memmap(path, dtype=numpy.uint16)`` reads one.

A file is every document's ids, each followed by the end-of-text id, nothing else; a document
starts after each end-of-text id. A folder with several of them (as ``prepare.py`` or ``tokpack
export --format nanogpt`` writes) reads as one stream, ``train.bin`` then ``val.bin`` then
``test.bin``, each its named range. The end-of-text ids stay in the stream: they are what a
nanoGPT model trained on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokpack._atomic import building
from tokpack.errors import InputError
from tokpack.store.dataset import PartsStream
from tokpack.store.format import Span
from tokpack.store.formats._reading import ForeignMeta, TokenFile, check_ids, resolve_vocabulary, verified_what
from tokpack.store.formats._writing import ExportOptions, Progress, check_fits, default_eod, part_span, parts_of, record_for
from tokpack.store.sidecar import (
    SIDECAR,
    ExportRecord,
    check_export,
    check_export_vocabulary,
    check_files,
    check_stream,
    read_sidecar,
    write_sidecar,
)
from tokpack.store.source import RecordedStream, TokenSource, chunks
from tokpack.vocab.loading import VocabularySpec, load_vocabulary

DTYPE = np.dtype("<u2")
#: File name → range name, in stream order (nanoGPT's names).
RANGE_OF_FILE = {"train.bin": "train", "val.bin": "validation", "test.bin": "test"}
#: The file each range goes to.
FILE_NAMES = {name: file for file, name in RANGE_OF_FILE.items()}
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
        if self.sidecar is not None:
            check_files(self.sidecar, self.folder, [p.path.relative_to(self.folder).as_posix() for p in self.shards])
            check_export_vocabulary(self.sidecar, self.folder, self.folder / SIDECAR)
        check_ids(self.shards, self.vocabulary.n_vocab)
        if self.sidecar is not None:
            check_stream(self, self.sidecar, self.folder / SIDECAR)

    def __repr__(self) -> str:
        return f"NanoGptData({str(self.path)!r}, n_docs={self.n_docs}, n_tokens={self.n_tokens})"


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


def recognizes(path: Path) -> bool:
    """Whether ``path`` is a nanoGPT ``.bin`` file, or a folder holding ``train.bin`` or ``val.bin``."""
    if path.is_file():
        return path.suffix == ".bin"
    return path.is_dir() and any((path / name).exists() for name in ("train.bin", "val.bin"))


def read(path: Path, *, tokenizer: VocabularySpec | None = None, eod_id: int | None = None) -> NanoGptData:
    """``path`` opened in place, its documents found by ``eod_id``."""
    return NanoGptData(path, tokenizer=tokenizer, eod_id=eod_id)


__all__ = ["FILE_NAMES", "NanoGptData", "file_name", "read", "recognizes", "write"]
