"""JSON Lines as a corpus: one record a line, its text field the document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import ClassVar

import numpy as np

from tokpack._files import open_bytes
from tokpack._words import json_reason
from tokpack.corpus.manifest import (
    Source,
)
from tokpack.corpus.sources.base import DocumentSource, Format, OnError, Piece
from tokpack.corpus.sources.decoding import line_ends, not_text
from tokpack.corpus.sources.spellings import json_spellings, spelled_in
from tokpack.errors import InputError

_SKIP_RECORDS = "skip such records with on_error='skip'"


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words.

    >>> _json_kind(5), _json_kind(None), _json_kind(["a"])
    ('a number (int)', 'null', 'an array')
    """
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"a number ({type(value).__name__})"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


class JsonLines(DocumentSource):
    """JSON Lines: one record a line, its ``text_field`` the document (cut if longer than the limit)."""

    format: Format = "jsonl"
    takes_text_field: ClassVar[bool] = True

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", text_field: str = "text",
                 separator: str | None = None, manifest: Path | None = None) -> None:
        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self.text_field = text_field
        self._data = open_bytes(self.path)  # a compressed file's decompressed lines
        ends, size = line_ends(self._data), len(self._data)
        if size and (not len(ends) or ends[-1] != size):
            ends = np.append(ends, size)
        self._line_starts = np.concatenate(([0], ends[:-1])).astype(np.int64) if len(ends) else np.zeros(0, np.int64)
        self._line_ends = ends.astype(np.int64)
        # Unit i is record _records[i] of the file: whole records held out come after the training ones.
        self._records = np.arange(len(self._line_starts), dtype=np.int64)
        if (held_out := self._held_out(manifest)) is not None:
            self._records = self._ranges_of(held_out)
            self._line_starts, self._line_ends = self._line_starts[self._records], self._line_ends[self._records]

    @cached_property
    def record(self) -> Source:
        # A compressed file is named as it is, and identified by the text it holds.
        return Source(name=f"{self.path.name}#{self.text_field}", sha256=self._data.sha256(), n_bytes=len(self._data))

    def close(self) -> None:
        self._data.close()

    @property
    def n_units(self) -> int:
        return len(self._line_starts)

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        return self._line_ends[first:last] - self._line_starts[first:last]  # the record's JSON line

    def spelled(self, tokens: list[str]) -> dict[str, tuple[int, str]]:
        # Searched in the JSON text, as the token is written there by any common encoder.
        spellings = {token: json_spellings(token) for token in tokens}
        seen = spelled_in([(self._data, self._data.where)], [spelling for token in tokens for spelling in spellings[token]])
        found: dict[str, tuple[int, str]] = {}
        for token in tokens:
            hits = [seen[spelling] for spelling in spellings[token] if spelling in seen]
            if hits:
                found[token] = (sum(count for count, _ in hits), hits[0][1])
        return found

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        for record, start, end in zip(self._records[first:last].tolist(), self._line_starts[first:last].tolist(),
                                      self._line_ends[first:last].tolist()):
            line = self._data[start:end]
            if not line.strip():
                continue
            text = self._text_of(line, start)
            if text is not None:
                yield from self._cut_text(text, f"{self._data.where} record at byte {start}", record=record)

    def _no_text_field(self, value: object, offset: int) -> InputError:
        """The error of a record without a string ``text_field``: what it holds, and the fix (the
        first record names the field to read; a later one is a bad record, to fix or skip; a field
        that is there but no string is to make one, or skip)."""
        if isinstance(value, dict) and self.text_field in value:
            return InputError(f"field {self.text_field!r} of the record at byte {offset} is "
                              f"{_json_kind(value[self.text_field])}, not a string", where=self._data.where,
                              fix=f"make it a string, or {_SKIP_RECORDS}")
        if isinstance(value, dict):
            names = [repr(name) for name in list(value)[:8]] + (["…"] if len(value) > 8 else [])
            holds = f"its fields: {', '.join(names)}" if names else "it has no fields"
        else:
            holds = f"it is {_json_kind(value)}, not an object"
        if offset == 0:
            fix = "name the field with text_field=NAME"
        else:
            fix = f"fix the record, or {_SKIP_RECORDS}"
        return InputError(f"record at byte {offset} has no string field {self.text_field!r} ({holds})",
                          where=self._data.where, fix=fix)

    def _text_of(self, line: bytes, offset: int) -> str | None:
        try:
            try:
                decoded = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise not_text(self._data, self._data.where) or InputError(
                    f"invalid UTF-8 at byte {offset + error.start}", where=self._data.where,
                    fix=f"fix the record, or {_SKIP_RECORDS}") from None
            try:
                value = json.loads(decoded)
            except json.JSONDecodeError as error:
                inner = len(decoded[: error.pos].encode("utf-8"))
                raise InputError(f"record at byte {offset} is invalid JSON at its byte {inner}: {json_reason(error)}",
                                 where=self._data.where, fix=f"fix or remove that record, or {_SKIP_RECORDS}") from None
            except RecursionError:
                raise InputError("JSON nested too deeply", where=self._data.where, byte=offset) from None
            except ValueError as error:  # e.g. a number past Python's 4,300-digit limit
                raise InputError(f"unreadable JSON ({str(error).split(':')[0]})", where=self._data.where, byte=offset) from None
            text = value.get(self.text_field) if isinstance(value, dict) else None
            if not isinstance(text, str):
                raise self._no_text_field(value, offset)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:  # JSON may escape a lone surrogate; no encoder can take it
                raise InputError(f"field {self.text_field!r} holds a lone surrogate "
                                 f"(U+{ord(text[error.start]):04X}), which is not text", where=self._data.where, byte=offset,
                                 fix=f"fix the record, or {_SKIP_RECORDS}") from None
            return text
        except ValueError as error:
            if self.on_error == "skip":
                self._skip(str(error))
                return None
            raise

