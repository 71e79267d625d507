"""A Parquet file's text column as a corpus, read row group by row group."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tokpack._compressed import file_compression
from tokpack.corpus.sources.base import DocumentSource, Format, OnError, Piece
from tokpack.corpus.sources.training_sample import span_of
from tokpack.errors import InputError


class ParquetTexts(DocumentSource):
    """A parquet file's text column, read row group by row group (memory holds one group)."""

    format: Format = "parquet"
    takes_text_field: ClassVar[bool] = True

    def __init__(self, path: Path, *, document_bytes: int, on_error: OnError = "raise", text_field: str = "text",
                 separator: str | None = None, manifest: Path | None = None) -> None:
        import pyarrow.parquet as pq

        super().__init__(path, document_bytes=document_bytes, on_error=on_error, separator=separator)
        self.text_field = text_field
        if (compression := file_compression(self.path)) is not None:
            raise InputError(f"is {compression}-compressed; Parquet compresses its own pages and is read as it is",
                             where=self.path, fix="decompress it first")
        try:
            self._file = pq.ParquetFile(self.path)
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(f"not a readable Parquet file ({str(error).splitlines()[0]})", where=self.path) from None
        if text_field not in self._file.schema_arrow.names:
            raise InputError(f"no column {text_field!r} (has {self._file.schema_arrow.names})", where=self.path)
        counts = [self._file.metadata.row_group(i).num_rows for i in range(self._file.num_row_groups)]
        self._group_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._last_column: tuple[int, Any] | None = None
        self._last_values: tuple[int, list[Any]] | None = None
        held_out = self._held_out(manifest)
        # Unit i is row _rows[i]: whole rows held out come after the training ones.
        self._rows = np.arange(self.n_units, dtype=np.int64) if held_out is None else self._ranges_of(held_out)

    @property
    def n_units(self) -> int:
        return int(self._group_starts[-1])

    def unit_bytes(self, first: int, last: int) -> np.ndarray:
        rows = self._rows[first:last]
        groups = np.searchsorted(self._group_starts, rows, side="right") - 1
        return self._row_bytes[groups] if len(rows) else np.zeros(0, np.int64)

    @cached_property
    def _row_bytes(self) -> np.ndarray:
        """Each row group's estimate of a row's bytes: its text column's uncompressed size over its rows."""
        column = self._file.schema_arrow.names.index(self.text_field)
        metadata = self._file.metadata
        per_row = [metadata.row_group(g).column(column).total_uncompressed_size / max(metadata.row_group(g).num_rows, 1)
                   for g in range(self._file.num_row_groups)]
        return np.maximum(np.asarray(per_row, dtype=np.float64), 1).astype(np.int64)

    def unit_text(self, unit: int, start: int, stop: int) -> str:
        # One row's value, read from the group's cached column (pieces() would cut the row into documents).
        row = int(self._rows[unit])
        group = int(np.searchsorted(self._group_starts, row, side="right") - 1)
        try:
            if self._last_values is None or self._last_values[0] != group:
                self._last_values = (group, self._column(group).to_pylist())  # one conversion a group
            value = self._last_values[1][row - int(self._group_starts[group])]
        except (OSError, ValueError):  # an unreadable group: the pass that encodes reports (or skips) it
            return ""
        try:
            data = value if isinstance(value, bytes) else value.encode("utf-8") if isinstance(value, str) else None
            if data is not None:
                data.decode("utf-8")  # a row of invalid UTF-8 is the encoding pass's to report
        except (UnicodeDecodeError, UnicodeEncodeError):
            data = None
        return "" if data is None else span_of(data, start, stop, int(self._row_bytes[group]))

    def _column(self, group: int) -> Any:
        """Row group ``group``'s text column as bytes (decoded row by row by the caller, so invalid
        UTF-8 is reported with its row); the last one read is kept, so a vocabulary sample's rows
        of one group, asked for one at a time, read it once."""
        import pyarrow as pa

        if self._last_column is None or self._last_column[0] != group:
            column = self._file.read_row_group(group, columns=[self.text_field]).column(0)
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
            self._last_column = (group, column)
        return self._last_column[1]

    def spelled(self, tokens: list[str]) -> dict[str, tuple[int, str]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        found: dict[str, tuple[int, str]] = {}
        for group in range(self._file.num_row_groups):
            try:
                column = self._file.read_row_group(group, columns=[self.text_field]).column(0)
                if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                    continue  # not text: the pass that encodes says so
                for token in tokens:
                    counts = pc.count_substring(column, token).to_numpy(zero_copy_only=False)
                    if (count := int(np.nansum(counts))) == 0:
                        continue
                    place = f"{self.path}: row {int(self._group_starts[group]) + int(np.flatnonzero(counts > 0)[0])}"
                    found[token] = (found[token][0] + count, found[token][1]) if token in found else (count, place)
            except (OSError, ValueError):  # unreadable: the pass that encodes reports (or skips) it
                continue
        return found

    def pieces(self, first: int = 0, last: int | None = None) -> Iterator[Piece]:
        import pyarrow as pa

        rows = self._rows[first:last]
        groups = np.searchsorted(self._group_starts, rows, side="right") - 1
        # Rows of one row group that follow each other here are read with one read of the group.
        for run in np.split(np.arange(len(rows)), np.flatnonzero(np.diff(groups)) + 1) if len(rows) else []:
            group = int(groups[run[0]])
            low, high = int(self._group_starts[group]), int(self._group_starts[group + 1])
            wanted = rows[run]
            problem: str | None
            try:
                values = self._column(group).take(pa.array(wanted - low)).to_pylist()
            except (OSError, ValueError) as error:
                problem = f"{self.path}: row group {group} (rows {low}-{high - 1}) unreadable ({str(error).splitlines()[0]})"
                if self.on_error == "skip":
                    self._skip(problem)
                    continue
                raise InputError(problem) from None
            for row, value in zip(wanted.tolist(), values):
                problem = None
                if isinstance(value, bytes):
                    try:
                        value = value.decode("utf-8")
                    except UnicodeDecodeError as error:
                        problem = f"{self.path}: row {row}: invalid UTF-8 at byte {error.start} of column {self.text_field!r}"
                if problem is None and not isinstance(value, str):
                    problem = f"{self.path}: row {row} has no text in column {self.text_field!r}"
                if problem is not None:
                    if self.on_error == "skip":
                        self._skip(problem)
                        continue
                    raise InputError(problem, fix="fix the row, or skip such rows with on_error='skip'")
                yield from self._cut_text(value, f"{self.path} row {row}", record=row)

