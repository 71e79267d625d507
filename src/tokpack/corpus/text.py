"""A corpus text file read through a memory map, as decoded documents in file order."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tokpack.corpus.documents import cut_documents


@dataclass(frozen=True)
class Document:
    """One document: its text and the byte offset where it starts in the corpus."""

    offset: int
    n_bytes: int
    text: str


class CorpusText:
    """The bytes of a corpus file, mapped rather than read, so memory stays flat.

    Use as a context manager; :meth:`documents` decodes one document at a time.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._handle = open(self.path, "rb")
        size = self.path.stat().st_size
        self.data: bytes | mmap.mmap = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def documents(self, start: int, end: int, document_bytes: int) -> Iterator[Document]:
        """Decode the documents of bytes ``[start, end)`` (see :func:`cut_documents`).

        Raises:
            ValueError: invalid UTF-8, naming the file and the byte offset.
        """
        for begin, finish in cut_documents(self.data, start, end, document_bytes):
            text = self.decode(begin, finish)
            self._release(begin, finish)
            yield Document(offset=begin, n_bytes=finish - begin, text=text)

    def _release(self, begin: int, end: int) -> None:
        """Drop mapped pages already decoded, so resident memory stays flat on a huge corpus."""
        if not isinstance(self.data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
            return
        first = begin - begin % mmap.PAGESIZE
        last = end - end % mmap.PAGESIZE
        if last > first:
            self.data.madvise(mmap.MADV_DONTNEED, first, last - first)

    def decode(self, begin: int, end: int) -> str:
        """The text of bytes ``[begin, end)``.

        Raises:
            ValueError: invalid UTF-8, naming the file and the byte offset.
        """
        try:
            return self.data[begin:end].decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{self.path}: invalid UTF-8 at byte {begin + error.start}") from None

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        self._handle.close()

    def __enter__(self) -> CorpusText:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()
