"""Write a pack as a stream: documents in, one complete pack directory out, or nothing at all."""

from __future__ import annotations

import hashlib
import os
import shutil
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from tokpack._atomic import full_disk, publish, temporary_sibling
from tokpack._schema import write_record
from tokpack._signals import held
from tokpack.errors import InputError, VocabularyMismatch
from tokpack.store.carried import vouch
from tokpack.store.format import (
    META_FILE,
    ORIGINS_FILE,
    STARTS_FILE,
    TOKENS_FILE,
    VOCABULARY_DIR,
    DocumentCut,
    OriginKind,
    Origins,
    PackMeta,
    ShardPlace,
    Source,
    Span,
    npy_header,
    token_dtype,
)
from tokpack.store.reader import PACK_FILES, Pack
from tokpack.store.stamps import stamp
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    from tokpack.vocab.bytelevel import BpeTokenizer

_COPY_CHUNK = 32 << 20  # bytes per copy when appending a whole pack

class PackWriter:
    """Stream documents' ids into a new pack at ``destination``.

    Memory holds one batch of ids at a time plus the starts index (8 bytes a document). The pack
    is built in a hidden temporary sibling and renamed into place by :meth:`commit`; leaving the
    ``with`` block by an exception, or dying, leaves no directory at ``destination``.

    >>> import tempfile, pathlib
    >>> from tokpack.vocab.identity import VocabIdentity
    >>> vocabulary = VocabIdentity(scheme="demo", sha256="0" * 64, n_vocab=10)
    >>> source = Source(name="demo.txt", sha256="1" * 64, n_bytes=5)
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "pack"
    >>> with PackWriter(target, vocabulary=vocabulary) as writer:
    ...     writer.add_documents([[1, 2, 3], [], [4]])
    ...     meta = writer.commit(source=source, cut=DocumentCut(rule="demo"))
    >>> meta.n_docs, meta.n_tokens, meta.dtype
    (2, 4, 'uint16')
    """

    def __init__(self, destination: Path, *, vocabulary: VocabIdentity,
                 origins: tuple[OriginKind, Sequence[str]] | None = None) -> None:
        """Open a temporary sibling of ``destination`` for writing.

        ``origins``: the kind and the files of the documents' origins (see
        :class:`~tokpack.store.format.Origins`), when every batch added gives each document's
        ``(unit, start, end)``; the pack then records them in ``origins.npy``.

        Raises:
            InputError: ``destination`` already exists.
        """
        self.destination = Path(destination)
        if self.destination.exists():
            raise InputError("already exists; a pack is never overwritten", where=self.destination)
        self.vocabulary = vocabulary
        self.dtype = token_dtype(vocabulary.n_vocab)
        temporary: Path | None = None
        try:
            # Signals wait while the folder is made and opened, then come inside this try: a
            # Ctrl-C before ``with`` holds the writer takes the folder with it.
            with held():
                temporary = self._temporary = temporary_sibling(self.destination)
                self._tokens = open(temporary / TOKENS_FILE, "wb")
                self._tokens.write(npy_header(self.dtype, 0))
        except BaseException:
            if temporary is not None:
                if hasattr(self, "_tokens"):
                    self._tokens.close()
                shutil.rmtree(temporary, ignore_errors=True)
            raise
        self._tokens_hash = hashlib.sha256()
        self._starts = array("q")
        self._files: dict[str, str] = {}
        # The carried files add_vocabulary made from the pack's own vocabulary, and that
        # vocabulary's special ids: what commit() can vouch for without reading them back.
        self._made_files: set[str] = set()
        self._made_special_ids: set[int] = set()
        # Each document's origin, while every batch gives them (a batch without makes a pack without).
        self._origin_kind: OriginKind | None = origins[0] if origins is not None else None
        self._origin_files: list[str] = list(origins[1]) if origins is not None else []
        self._origins: array | None = array("q") if origins is not None else None
        self.n_tokens = 0
        # The highest id written, each one checked on the way in (None once a whole pack was
        # appended unchecked): what lets commit() vouch for the ids without reading them again.
        self._highest: int | None = -1

    @property
    def n_docs(self) -> int:
        """Documents written so far (empty ones are skipped)."""
        return len(self._starts)

    def add_documents(self, documents: Iterable[Sequence[int] | np.ndarray], *,
                      origins: np.ndarray | Sequence[tuple[int, int, int]] | None = None) -> None:
        """Append documents' ids, in order, with one write for the whole batch; ``origins``:
        each document's ``(unit, start, end)`` (an empty document's is dropped with it).

        Raises:
            InputError: an id outside ``[0, n_vocab)``, or a document that is not one flat
                sequence of ids.
        """
        arrays = [np.asarray(document) for document in documents]
        for number, array_ in enumerate(arrays):
            if array_.ndim != 1:  # len() of a 2-D array is its rows: its ids would be miscounted
                raise InputError(f"document {number} of the batch is a {array_.ndim}-D array, not a flat sequence of ids",
                                 fix="give each document as one flat sequence of ids")
        lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
        kept = [a for a in arrays if len(a)]
        if not kept:
            return
        if any(a.dtype.kind not in "iu" or a.ndim != 1 for a in kept) or len({a.dtype for a in kept}) > 1:
            self.add_flat(np.concatenate(kept), lengths, origins=origins)  # add_flat refuses or promotes them
            return
        # Checked array by array, then joined straight into the pack's dtype: no joined copy in the
        # encoder's wider dtype is ever made (the ids of a batch are hundreds of MB at scale).
        self._check_range(min(int(a.min()) for a in kept) if kept[0].dtype.kind == "i" else 0,
                          max(int(a.max()) for a in kept))
        stored = self.dtype.newbyteorder("<")
        if kept[0].dtype == stored:  # already the pack's bytes (the encoder's uint32): written as they are, not joined
            self._append(kept, lengths, origins)
        else:
            self._append([np.concatenate(kept, dtype=stored, casting="unsafe")], lengths, origins)

    def add_flat(self, ids: np.ndarray, lengths: np.ndarray, *,
                 origins: np.ndarray | Sequence[tuple[int, int, int]] | None = None) -> None:
        """Append documents given as one flat array of ids and their lengths (the fast path for
        batch encoders: no per-document arrays). Empty documents are skipped; ``origins`` as
        :meth:`add_documents` takes them.

        Raises:
            InputError: an id outside ``[0, n_vocab)``, ``ids`` not one flat array, or lengths that
                do not add up to ``ids``.
        """
        ids, lengths = np.asarray(ids), np.asarray(lengths, dtype=np.int64)  # ids stay in the encoder's dtype
        if ids.ndim != 1:  # len() of a 2-D array is its rows: its ids would be miscounted
            raise InputError(f"ids must be one flat array, got a {ids.ndim}-D array",
                             fix="pass the documents' ids joined end to end, and their lengths")
        if int(lengths.sum()) != len(ids) or (len(lengths) and lengths.min() < 0):
            raise InputError(f"document lengths add up to {int(lengths.sum())}, not to the {len(ids)} ids given")
        if not len(ids):
            return
        if ids.dtype.kind not in "iu":
            raise InputError(f"ids must be integers, got {ids.dtype}")
        self._check_range(int(ids.min()) if ids.dtype.kind == "i" else 0, int(ids.max()))
        self._append([ids.astype(self.dtype.newbyteorder("<"), copy=False)], lengths, origins)

    def _check_range(self, low: int, high: int) -> None:
        """Refuse ids outside ``[0, n_vocab)``; remember the highest id written."""
        if low < 0 or high >= self.vocabulary.n_vocab:
            bad = low if low < 0 else high
            raise InputError(f"id {bad} is outside the vocabulary (n_vocab {self.vocabulary.n_vocab})")
        if self._highest is not None:
            self._highest = max(self._highest, high)

    def _append(self, payloads: list[np.ndarray], lengths: np.ndarray,
                origins: np.ndarray | Sequence[tuple[int, int, int]] | None) -> None:
        """Write ``payloads`` (checked ids, in the pack's dtype, one after another), the starts
        of ``lengths`` and the origins of the documents kept."""
        offsets = self.n_tokens + np.concatenate(([0], np.cumsum(lengths)[:-1]))
        self._starts.frombytes(offsets[lengths > 0].astype(np.int64).tobytes())
        if self._origins is not None:
            rows = None if origins is None else np.asarray(origins, dtype=np.int64).reshape(-1, 3)
            if rows is None or len(rows) != len(lengths):
                self._origins = None  # a batch without them: the pack records none
            else:
                self._origins.frombytes(np.ascontiguousarray(rows[lengths > 0]).tobytes())
        for payload in payloads:
            contiguous = np.ascontiguousarray(payload)
            self._tokens.write(memoryview(contiguous))  # type: ignore[arg-type]
            self._tokens_hash.update(memoryview(contiguous))  # type: ignore[arg-type]
            self.n_tokens += len(contiguous)

    def add_vocabulary_files(self, files: dict[str, bytes]) -> None:
        """Store the vocabulary's files (by name, e.g. ``tokenizer.json``) in the pack's
        ``vocabulary/`` folder; ``meta.json`` records each one's SHA-256, so the pack is published
        with them or not at all, and a reader refuses an altered one.

        Raises:
            InputError: a name that is not a plain file name.
        """
        self._write_vocabulary_files(files, {name: hashlib.sha256(content).hexdigest() for name, content in files.items()})

    def _write_vocabulary_files(self, files: dict[str, bytes], digests: dict[str, str]) -> None:
        """:meth:`add_vocabulary_files`, each file's SHA-256 given in ``digests``."""
        folder = self._temporary / VOCABULARY_DIR
        folder.mkdir(exist_ok=True)
        for name, content in files.items():
            if not name or "/" in name or "\\" in name or name.startswith("."):
                raise InputError(f"vocabulary file name {name!r} is not a plain file name")
            with open(folder / name, "wb") as handle:
                handle.write(content)
                _close_durably(handle)
            self._files[f"{VOCABULARY_DIR}/{name}"] = digests[name]
            self._made_files.discard(f"{VOCABULARY_DIR}/{name}")  # written as given: checked at commit

    def add_vocabulary(self, tokenizer: BpeTokenizer) -> None:
        """Store ``tokenizer``'s own files (:meth:`~tokpack.vocab.bytelevel.BpeTokenizer.files`)
        as :meth:`add_vocabulary_files` does. Made from the vocabulary here, they are known to
        mean it: opening the pack in this process does not read them back to check.

        Raises:
            VocabularyMismatch: ``tokenizer`` is not the vocabulary the ids come from.
        """
        if tokenizer.identity != self.vocabulary:
            raise VocabularyMismatch(f"vocabulary {tokenizer.identity.short} is not the pack's {self.vocabulary.short}")
        files, known = tokenizer.files(), tokenizer.file_digests()
        digests = {name: known.get(name) or hashlib.sha256(content).hexdigest() for name, content in files.items()}  # once each
        vouch(files, tokenizer.identity, digests=digests)
        self._write_vocabulary_files(files, digests)
        self._made_files |= {f"{VOCABULARY_DIR}/{name}" for name in files}
        self._made_special_ids |= set(tokenizer.special_tokens.values())

    def append_pack(self, pack: Pack) -> None:
        """Append every document of ``pack`` (same vocabulary), copying in bounded pieces.

        Raises:
            VocabularyMismatch: ``pack`` has another vocabulary.
        """
        if pack.vocabulary != self.vocabulary:
            raise VocabularyMismatch(f"vocabulary {pack.vocabulary.short} differs from {self.vocabulary.short}", where=pack.path)
        self._highest = None  # its ids are copied, not checked: commit() cannot vouch for them
        self._append_origins(pack)
        self._starts.extend((pack.starts + self.n_tokens).tolist())
        step = max(1, _COPY_CHUNK // pack.tokens.itemsize)
        for offset in range(0, pack.n_tokens, step):
            payload = np.ascontiguousarray(pack.tokens[offset : offset + step]).astype(self.dtype.newbyteorder("<"), copy=False)
            self._tokens.write(memoryview(payload))  # type: ignore[arg-type]
            self._tokens_hash.update(memoryview(payload))  # type: ignore[arg-type]
        self.n_tokens += pack.n_tokens

    def _append_origins(self, pack: Pack) -> None:
        """Carry ``pack``'s origins over (its files joined to this pack's by name), or record
        none when it has none or another kind (the first pack of a writer without origins sets them)."""
        from tokpack.store.origins import read_origins

        theirs = read_origins(pack)
        if self._origin_kind is None and not self.n_docs and theirs is not None:
            self._origin_kind, self._origins = theirs[0].kind, array("q")
        if self._origins is None or theirs is None or theirs[0].kind != self._origin_kind:
            self._origins = None
            return
        record, rows = theirs
        rows = np.array(rows)
        if record.kind != "records":  # units are files: renumbered into this pack's list
            index = {name: number for number, name in enumerate(self._origin_files)}
            for name in record.files:
                index.setdefault(name, len(self._origin_files))
                if index[name] == len(self._origin_files):
                    self._origin_files.append(name)
            rows[:, 0] = np.array([index[name] for name in record.files], dtype=np.int64)[rows[:, 0]]
        elif self._origin_files != record.files and self._origin_files:
            self._origins = None  # records of two files cannot share one list
            return
        else:
            self._origin_files = list(record.files)
        self._origins.frombytes(np.ascontiguousarray(rows, dtype=np.int64).tobytes())

    def _write_origins(self) -> Origins | None:
        """Write ``origins.npy`` (files no document names left out) and return its record."""
        if self._origins is None or self._origin_kind is None or len(self._origins) != 3 * self.n_docs:
            return None
        rows = np.frombuffer(self._origins, dtype=np.int64).reshape(-1, 3).copy()
        files = self._origin_files
        if self._origin_kind != "records" and len(rows):
            # (bincount, not unique: np.unique imports numpy.ma, a hundredth of a second a process)
            used = np.flatnonzero(np.bincount(rows[:, 0]))
            files = [files[i] for i in used.tolist()]
            rows[:, 0] = np.searchsorted(used, rows[:, 0])
        payload = rows.astype("<i8").tobytes()
        with open(self._temporary / ORIGINS_FILE, "wb") as handle:
            handle.write(npy_header(np.dtype("<i8"), len(rows), columns=3))
            handle.write(payload)
            _close_durably(handle)
        return Origins(kind=self._origin_kind, files=files, sha256=hashlib.sha256(payload).hexdigest())

    def commit(
        self,
        *,
        source: Source,
        cut: DocumentCut,
        ranges: dict[str, Span] | None = None,
        counts: dict[str, int] | None = None,
        pad_id: int | None = None,
        stamp_verified: bool = False,
        shard: ShardPlace | None = None,
    ) -> PackMeta:
        """Finish the files, write ``meta.json`` and rename the pack into place.

        Args:
            source, cut, ranges, counts, shard: recorded as given (see :class:`PackMeta`).
            pad_id: the vocabulary's padding id; it must be one the stream never holds.
            stamp_verified: leave the verification stamp (:mod:`tokpack.store.stamps`) a first
                :class:`Pack` open would leave, so that open does not hash the files again, when
                the writer can vouch for every check of :meth:`Pack.verify`: the checksums are of
                the bytes it wrote, each id was checked below ``n_vocab`` as it was added, and
                every id is below ``pad_id`` (so the padding id never occurs). The carried
                files are checked as an open checks them, unless :meth:`add_vocabulary` made
                every one of them from the pack's own vocabulary (which makes them mean it, with
                the checksums of the bytes written) and ``pad_id`` is one of its special tokens.
                Otherwise (a pack appended whole, a padding id among the ids' range) the first
                open verifies as usual.

        Raises:
            InputError: ``pad_id`` outside the vocabulary, or ``destination`` appeared meanwhile.
        """
        if pad_id is not None and not 0 <= pad_id < self.vocabulary.n_vocab:
            raise InputError(f"pad_id {pad_id} is outside the vocabulary (n_vocab {self.vocabulary.n_vocab})")
        self._tokens.seek(0)
        self._tokens.write(npy_header(self.dtype, self.n_tokens))
        _close_durably(self._tokens)
        starts = np.frombuffer(self._starts, dtype=np.int64) if self._starts else np.zeros(0, np.int64)
        starts_payload = starts.astype("<i8").tobytes()
        with open(self._temporary / STARTS_FILE, "wb") as handle:
            handle.write(npy_header(np.dtype("<i8"), len(starts)))
            handle.write(starts_payload)
            _close_durably(handle)
        meta = PackMeta(
            n_docs=self.n_docs,
            n_tokens=self.n_tokens,
            dtype=self.dtype.name,
            vocabulary=self.vocabulary,
            source=source,
            cut=cut,
            ranges=ranges or {},
            counts=counts or {},
            pad_id=pad_id,
            tokens_sha256=self._tokens_hash.hexdigest(),
            starts_sha256=hashlib.sha256(starts_payload).hexdigest(),
            vocabulary_files=dict(sorted(self._files.items())),
            origins=self._write_origins(),
            shard=shard,
        ).sealed()
        write_record(meta, self._temporary / META_FILE)
        publish(self._temporary, self.destination)
        highest = self._highest
        if stamp_verified and highest is not None and (pad_id is None or highest < pad_id):
            published = Pack(self.destination, verify=False)  # the seal, headers, sizes and starts
            made = set(self._files) == self._made_files and (pad_id is None or pad_id in self._made_special_ids)
            if not made:  # files given as bytes: read back and checked for what they mean
                published.verify_vocabulary_files()
            stamp(self.destination, meta.seal, (*PACK_FILES, *meta.vocabulary_files))
        return meta

    def abort(self) -> None:
        """Drop everything written so far."""
        try:
            if not self._tokens.closed:
                self._tokens.close()
        except OSError:
            pass  # what it still buffered could not be written (the error being raised already): it goes too
        finally:
            shutil.rmtree(self._temporary, ignore_errors=True)

    def __enter__(self) -> PackWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        if self._temporary.exists():
            self.abort()
        if (full := full_disk(error, self.destination)) is not None:  # a full disk's error names no file
            raise full from error


def _close_durably(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
