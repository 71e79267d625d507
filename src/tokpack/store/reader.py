"""Open a pack, refusing anything that does not match its ``meta.json``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tokpack._schema import read_record
from tokpack.errors import InputError, IntegrityError
from tokpack.store.carried import check_carried, pack_carrier
from tokpack.store.format import (
    META_FILE,
    NPY_HEADER_BYTES,
    STARTS_FILE,
    TOKENS_FILE,
    VOCABULARY_DIR,
    PackMeta,
    npy_header,
)
from tokpack.store.source import RecordedStream
from tokpack.store.stamps import is_stamped, stamp

#: The files a verification stamp covers.
PACK_FILES = (META_FILE, TOKENS_FILE, STARTS_FILE)

#: Bytes hashed per step by :meth:`Pack.verify`: large enough to be fast, small enough to stay flat.
_VERIFY_CHUNK = 64 << 20


class Pack(RecordedStream):
    """A pack opened for reading: ``tokens`` is a read-only memory map, ``starts`` an array.

    Opening checks the seal of ``meta.json``, both files' headers and sizes against its counts,
    the starts index (first 0, strictly increasing, inside the stream) and that every named range
    falls on document starts. The first open also runs :meth:`verify` (hashes both payloads,
    checks every id is inside the vocabulary and the padding id never occurs) and leaves a
    verification stamp (:mod:`tokpack.store.stamps`), so later opens of the unchanged files cost
    nothing.
    """

    def __init__(self, path: Path, *, verify: bool | None = None) -> None:
        """Open the pack directory ``path``.

        Args:
            verify: ``None`` (the default) verifies on the first open and whenever a file changed
                since; ``True`` verifies now whatever the stamp says; ``False`` checks counts,
                sizes and the seal only (for a caller that verifies in its own pass).

        Raises:
            IntegrityError: naming the file and the mismatch, for anything inconsistent.
        """
        self.path = Path(path)
        if not self.path.is_dir():
            said = "not a pack directory" if self.path.exists() else "no such file or folder"
            raise InputError(said, where=self.path)
        self.meta: PackMeta = read_record(PackMeta, self.path / META_FILE)
        self.meta.check_seal(self.path / META_FILE)
        for name in self.meta.vocabulary_files:
            parts = name.split("/")
            if len(parts) != 2 or parts[0] != VOCABULARY_DIR or parts[1] in ("", ".", ".."):
                raise IntegrityError(f"vocabulary file {name!r} is not inside {VOCABULARY_DIR}/", where=self.path / META_FILE)
        self.tokens: np.ndarray = _open_array(self.path / TOKENS_FILE, np.dtype(self.meta.dtype), self.meta.n_tokens)
        self.starts: np.ndarray = np.array(_open_array(self.path / STARTS_FILE, np.dtype(np.int64), self.meta.n_docs))
        self._check_starts()
        self._rows: dict[int, np.ndarray] = {}
        if verify or (verify is None and not self.stamped()):
            self.verify()

    def stamped(self) -> bool:
        """Whether this pack was verified earlier and none of its files changed since."""
        return is_stamped(self.path, self.meta.seal, self._files())

    def _files(self) -> tuple[str, ...]:
        return (*PACK_FILES, *self.meta.vocabulary_files)

    @property
    def vocabulary_dir(self) -> Path | None:
        """The folder of the vocabulary files this pack carries (see :mod:`tokpack.store.format`),
        or ``None`` for a pack that carries none (written without them, or a vocabulary that
        has no such files, as chess's)."""
        return self.path / VOCABULARY_DIR if self.meta.vocabulary_files else None

    def verify_vocabulary_files(self) -> None:
        """Check the vocabulary files against ``meta.json``: their checksums, and that each one
        means the recorded vocabulary, with the padding id one of its special tokens (see
        :mod:`tokpack.store.carried`).

        Raises:
            IntegrityError: a missing, altered or unlisted file, or a record they contradict.
        """
        check_carried(pack_carrier(self.path), self.meta.vocabulary_files, self.meta.vocabulary, self.meta.pad_id)

    def document_bounds(self) -> np.ndarray:
        """``(n_docs, 2)`` array of each document's ``[start, end)`` in the stream."""
        ends = np.append(self.starts[1:], self.n_tokens)
        return np.stack([self.starts, ends], axis=1)

    def document(self, index: int) -> np.ndarray:
        """The ids of document ``index`` (a view into the memory map).

        Raises:
            IndexError: ``index`` outside ``[0, n_docs)``.
        """
        if not 0 <= index < self.n_docs:
            raise IndexError(f"document {index} outside [0, {self.n_docs})")
        end = self.starts[index + 1] if index + 1 < self.n_docs else self.n_tokens
        return self.tokens[self.starts[index] : end]

    def gather_rows(self, origins: np.ndarray, width: int) -> np.ndarray:
        """Rows ``tokens[o : o + width]`` for each origin, in the stream's dtype, in one gather.

        Every origin must satisfy ``0 <= o`` and ``o + width <= n_tokens``.
        """
        rows = self._rows.get(width)
        if rows is None:  # a view, not a copy: rows of any width cost nothing to keep
            rows = self._rows[width] = sliding_window_view(self.tokens, width)
        return rows[origins]

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The ids at arbitrary stream ``positions`` (any shape)."""
        # Indexed as a plain ndarray view: np.memmap's own __getitem__ costs more than the gather
        # of a batch's few thousand positions.
        return np.asarray(self.tokens)[positions]

    def read_span(self, start: int, end: int) -> np.ndarray:
        """The ids ``tokens[start:end]`` as one array."""
        return np.asarray(self.tokens[start:end])

    def verify(self, *, stream_hash: Any = None) -> None:
        """Hash both payloads against ``meta.json``, check every id is below ``n_vocab`` and that
        the padding id never occurs.

        Args:
            stream_hash: a ``hashlib`` object that is also fed the ids, so a dataset can hash its
                whole stream in the same pass that verifies each shard.

        Raises:
            IntegrityError: naming the file whose checksum or ids do not match.
        """
        tokens_hash, highest, pads = hashlib.sha256(), -1, 0
        step = max(1, _VERIFY_CHUNK // self.tokens.itemsize)
        pad_id = self.meta.pad_id
        for offset in range(0, self.n_tokens, step):
            chunk = np.asarray(self.tokens[offset : offset + step])  # a contiguous view of the map: no copy
            payload = memoryview(chunk)  # type: ignore[arg-type]
            tokens_hash.update(payload)
            if stream_hash is not None:
                stream_hash.update(payload)
            chunk_highest = int(chunk.max())
            highest = max(highest, chunk_highest)
            if pad_id is not None and pad_id <= chunk_highest:  # above every id of the chunk: none is it
                pads += int(np.count_nonzero(chunk == pad_id))
        altered = "the pack was altered; delete it to rebuild"
        if tokens_hash.hexdigest() != self.meta.tokens_sha256:
            raise IntegrityError(f"SHA-256 differs from {META_FILE}", where=self.path / TOKENS_FILE, fix=altered)
        if highest >= self.vocabulary.n_vocab:
            raise IntegrityError(f"id {highest} outside the vocabulary (n_vocab {self.vocabulary.n_vocab})",
                                 where=self.path / TOKENS_FILE, fix=altered)
        if pads:
            raise IntegrityError(f"the padding id {self.meta.pad_id} occurs {pads} times as a real token",
                                 where=self.path / TOKENS_FILE, fix=altered)
        if hashlib.sha256(self.starts.astype("<i8").tobytes()).hexdigest() != self.meta.starts_sha256:
            raise IntegrityError(f"SHA-256 differs from {META_FILE}", where=self.path / STARTS_FILE, fix=altered)
        self.verify_vocabulary_files()
        stamp(self.path, self.meta.seal, self._files())

    def _check_starts(self) -> None:
        where = self.path / STARTS_FILE
        starts = self.starts
        if len(starts):
            if starts[0] != 0:
                raise IntegrityError(f"first start is {starts[0]}, not 0", where=where)
            if len(starts) > 1 and not bool(np.all(np.diff(starts) > 0)):
                raise IntegrityError("starts are not strictly increasing", where=where)
            if starts[-1] >= self.n_tokens:
                raise IntegrityError(f"start {starts[-1]} is past the end of the stream ({self.n_tokens} ids)", where=where)
        check_ranges(self.path / META_FILE, self.meta.ranges, starts, self.n_tokens)

    def __repr__(self) -> str:
        return f"Pack({str(self.path)!r}, n_docs={self.n_docs}, n_tokens={self.n_tokens})"


def check_ranges(where: Path | str, ranges: dict[str, Any], starts: np.ndarray, n_tokens: int) -> None:
    """Every named range lies inside the stream and its ids are exactly its documents' ids (it
    begins and ends on document starts), or a reader would serve one split's ids as another's.

    Raises:
        IntegrityError: naming ``where`` (the record) and the range.
    """
    n_docs = len(starts)
    bounds = np.append(starts, n_tokens)  # where document d starts; n_docs: the end
    for name, span in ranges.items():
        (d0, d1), (t0, t1) = span.documents, span.tokens
        if not (0 <= d0 <= d1 <= n_docs and 0 <= t0 <= t1 <= n_tokens):
            raise IntegrityError(f"range {name!r} lies outside the stream", where=where)
        if (t0, t1) != (int(bounds[d0]), int(bounds[d1])):
            raise IntegrityError(f"range {name!r} says ids [{t0}, {t1}) but its documents "
                                 f"[{d0}, {d1}) hold ids [{int(bounds[d0])}, {int(bounds[d1])}) in {STARTS_FILE}", where=where)


def _open_array(path: Path, dtype: np.dtype, length: int) -> np.ndarray:
    """Memory-map a 1-D ``.npy`` after checking its header and size against the expected ones."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise IntegrityError("missing", where=path) from None
    except OSError as error:  # a loop of symlinks, no permission: the user's files, not a bug
        raise InputError(f"cannot read ({error.strerror or error})", where=path) from None
    expected = NPY_HEADER_BYTES + length * dtype.itemsize
    if size != expected:
        raise IntegrityError(f"{size} bytes, expected {expected} ({length} {dtype.name} ids after the header)", where=path)
    try:
        with open(path, "rb") as handle:
            header = handle.read(NPY_HEADER_BYTES)
    except OSError as error:
        raise InputError(f"cannot read ({error.strerror or error})", where=path) from None
    if header != npy_header(dtype, length):
        # numpy reads the ids from where the file's own header ends: a shorter one would shift
        # every id past what the checksums (of the bytes after 128) vouch for.
        raise IntegrityError(f"its .npy header is not the one {META_FILE} implies ({NPY_HEADER_BYTES} bytes, "
                             f"{dtype.name}, {length:,} ids)", where=path, fix="the pack was altered; restore it or rebuild it")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as error:
        raise IntegrityError(f"unreadable .npy header ({error})", where=path) from None
    except OSError as error:
        raise InputError(f"cannot read ({error.strerror or error})", where=path) from None
    if array.dtype != dtype.newbyteorder("<") or array.shape != (length,):
        raise IntegrityError(f"holds {array.dtype} {array.shape}, meta.json says {dtype.name} ({length},)", where=path)
    return array
