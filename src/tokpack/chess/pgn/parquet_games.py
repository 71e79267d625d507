"""Games stored as Parquet rows, read as chunks of PGN text for the converter.

Lichess publishes its games on Hugging Face (``Lichess/standard-chess-games``) as Parquet shards
under ``data/year=YYYY/month=MM/``: one row a game, the PGN movetext in a ``movetext`` column
and one column per header tag (``Event``, ``Site``, ``White``, ``Black``, ``Result``,
``WhiteElo`` and ``BlackElo`` as ``int16``, ``UTCDate`` as ``date32``, ``UTCTime`` as
``time32[s]``, ``ECO``, ``Opening``, ``Termination``, ``TimeControl``, ...). Each row is spelled
back as the PGN game it came from: a tag line for every column named like a PGN tag whose value
is not null (integers in decimal, dates ``YYYY.MM.DD``, times ``HH:MM:SS``; a column of lists,
structs or bytes is no header and is left out), a blank line, the movetext. The converter then reads that text exactly as it reads a PGN file, so a Parquet input
gets the same games table, filters, skip reasons and python-chess fallback. Building the text
is Arrow's compute functions over a whole batch of rows; nothing is done per row in Python.

A source is a ``.parquet`` file or a folder holding them (searched recursively, in path order,
``year=``/``month=`` partition folders included), on local disk or at an fsspec URL (``s3://``,
``gs://``, ``hf://``, ...). A chunk holds about :data:`tokpack.chess.pgn.stream.CHUNK_BYTES` of
text; a skipped game is named by its file and row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tokpack.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

#: The column holding each game's PGN movetext.
MOVETEXT = "movetext"
SUFFIX = ".parquet"
#: A column is a tag when its name is one python-chess reads as a tag name.
_TAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+#=:-]*")


def is_url(source: str | Path) -> bool:
    """Whether ``source`` is a URL (``s3://…``) rather than a local path.

    >>> is_url("s3://bucket/data"), is_url("games.pgn")
    (True, False)
    """
    return "://" in str(source)


@dataclass(frozen=True)
class ParquetFile:
    """One Parquet file of a source: the file system that holds it, its path there, and its name in messages."""

    fs: Any
    path: str
    name: str

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return int(self.fs.size(self.path))


def parquet_files(source: str | Path, storage_options: dict[str, Any] | None = None) -> list[ParquetFile] | None:
    """The Parquet files ``source`` names (a ``.parquet`` file, or a folder holding them), or None
    when it names something else (a PGN file, ``-``).

    Raises:
        InputError: a URL that cannot be reached, or a folder without Parquet files.
    """
    text = str(source)
    if text == "-":
        return None
    if not is_url(text):
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file() and not _hidden(p.relative_to(path)))
            if not found:
                raise InputError("a folder without .parquet files (and not a PGN file)", where=path,
                                 fix="name PGN files, .parquet files, or a folder of Parquet shards such as Lichess's data/")
            return [ParquetFile(_local_fs(), str(p), str(p)) for p in found]
        if path.suffix == SUFFIX:
            if not path.is_file():
                raise InputError("not a file", where=path)
            return [ParquetFile(_local_fs(), str(path), str(path))]
        return None
    fs, root = _filesystem(text, storage_options)
    try:
        if fs.isdir(root):
            keys = sorted(str(k) for k in fs.find(root) if k.endswith(SUFFIX) and not _hidden(Path(k[len(root):].lstrip("/"))))
            if not keys:
                raise InputError("no .parquet files under this URL", where=text)
            protocol = text.split("://", 1)[0]
            return [ParquetFile(fs, key, f"{protocol}://{key}") for key in keys]
        if not fs.exists(root):
            raise InputError("no such file or folder", where=text)
    except InputError:
        raise
    except Exception as error:  # the store's own errors: credentials, an unreachable endpoint
        raise InputError(f"cannot reach the store ({type(error).__name__}: {_first_line(error)})", where=text,
                         fix="check the URL, the credentials and storage_options") from None
    if not root.endswith(SUFFIX):
        raise InputError("a URL must name .parquet files or a folder of them", where=text,
                         fix="download PGN files and name them locally")
    return [ParquetFile(fs, root, text)]


def _hidden(relative: Path) -> bool:
    """Files and folders starting with ``.`` or ``_`` (``_SUCCESS``, ``.cache``) are not data."""
    return any(part.startswith((".", "_")) for part in relative.parts)


def _local_fs() -> Any:
    import fsspec.implementations.local as local

    return local.LocalFileSystem()


def _filesystem(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise InputError("reading URLs needs fsspec", where=url, fix="pip install 'tokpack[remote]' (and s3fs for s3://)") from None
    try:
        return url_to_fs(url, **(storage_options or {}))
    except ImportError as error:  # fsspec knows the protocol, but its package is not installed
        raise InputError(f"no file system for this URL ({error})", where=url) from None
    except (ValueError, TypeError) as error:
        raise InputError(f"cannot open ({_first_line(error)})", where=url,
                         fix="check the URL's protocol and storage_options") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@dataclass
class Chunk:
    """PGN text of consecutive rows of one file: it starts at byte ``offset`` of the file's text,
    and row ``first_row + i`` starts at byte ``starts[i]``."""

    offset: int
    data: bytes
    first_row: int
    starts: np.ndarray
    done: float  # the share of the file's rows read with this chunk

    def row_at(self, offset: int) -> int:
        """The row whose game starts at byte ``offset`` of the file's text."""
        return self.first_row + int(np.searchsorted(self.starts, offset, side="right")) - 1


def parquet_chunks(file: ParquetFile, chunk_bytes: int, offset: int = 0) -> Iterator[Chunk]:
    """The rows of ``file`` as PGN text, a chunk of whole games at a time (:mod:`this module <tokpack.chess.pgn.parquet_games>`).

    ``offset`` is the byte where the file's text starts (so offsets stay distinct across files).

    Raises:
        InputError: not a readable Parquet file, or one without a ``movetext`` column.
    """
    import pyarrow.parquet as pq

    try:
        handle = file.fs.open(file.path, "rb")
    except OSError as error:
        raise InputError(f"cannot be read ({_first_line(error)})", where=file.name) from None
    with handle:
        try:
            reader = pq.ParquetFile(handle, pre_buffer=False)
        except Exception as error:  # ArrowInvalid and OSError alike: not Parquet
            raise InputError(f"not a readable Parquet file ({_first_line(error)})", where=file.name) from None
        names = reader.schema_arrow.names
        twice = next((name for number, name in enumerate(names) if name in names[:number]), None)
        if twice is not None:  # a column read by name must be one column
            raise InputError(f"column {twice!r} appears twice", where=file.name,
                             fix="write the games with one column a tag")
        if MOVETEXT not in names:
            raise InputError(f"no {MOVETEXT!r} column (columns: {', '.join(names[:8])}{', …' if len(names) > 8 else ''})",
                             where=file.name, fix="convert Parquet holding each game's PGN movetext in a 'movetext' column, "
                                                  "as Lichess's Hugging Face dataset does")
        schema = reader.schema_arrow
        tags = [name for name in names if name != MOVETEXT and _TAG_NAME.fullmatch(name) and _is_tag_type(schema.field(name).type)]
        metadata = reader.metadata
        rows_total = metadata.num_rows
        if rows_total == 0:
            return
        row_bytes = max(1, sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)) // rows_total)
        batch_rows = max(1, chunk_bytes // row_bytes)
        row = 0
        try:
            batches = reader.iter_batches(batch_size=batch_rows, columns=[*tags, MOVETEXT], use_threads=False)
            for batch in batches:
                text = pgn_text(batch, tags, file.name)
                ends = np.frombuffer(text.buffers()[1], dtype=np.int32, count=len(text) + 1, offset=text.offset * 4)
                first, last = int(ends[0]), int(ends[-1])
                data = text.buffers()[2].to_pybytes()[first:last] if last > first else b""
                row += batch.num_rows
                yield Chunk(offset, data, row - batch.num_rows, offset + ends[:-1].astype(np.int64) - first, row / rows_total)
                offset += len(data)
        except InputError:
            raise
        except Exception as error:  # a damaged page or footer, a store that fails mid-read
            raise InputError(f"cannot be read at row {row} ({_first_line(error)})", where=file.name) from None


def pgn_text(batch: pa.RecordBatch, tags: list[str], where: str) -> pa.Array:
    """One PGN game per row of ``batch``: its tag lines (columns ``tags``, nulls left out), a blank
    line, its movetext (blank lines inside it closed up, as a game's text cannot hold one), a blank line.
    A line end inside a header value (no PGN tag can hold one) becomes a space.

    Raises:
        InputError: a ``movetext`` column that holds no text.

    >>> import pyarrow as pa
    >>> batch = pa.record_batch({"WhiteElo": pa.array([1500, None], pa.int16()), "movetext": ["1. e4 1-0", None]})
    >>> pgn_text(batch, ["WhiteElo"], "x.parquet").to_pylist()
    ['[WhiteElo "1500"]\\n\\n1. e4 1-0\\n\\n', '\\n\\n\\n']
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    for name in tags:
        values = _tag_values(batch.column(name), name)
        parts.append(pc.binary_join_element_wise(f'[{name} "', values, '"]\n', "", null_handling="emit_null").fill_null(""))
    movetext = batch.column(MOVETEXT)
    if pa.types.is_dictionary(movetext.type):
        movetext = movetext.cast(movetext.type.value_type)
    if not (pa.types.is_string(movetext.type) or pa.types.is_large_string(movetext.type)):
        raise InputError(f"the {MOVETEXT!r} column holds {movetext.type}, not text", where=where)
    movetext = movetext.cast(pa.string())  # a batch is a few MB: 32-bit offsets hold it
    movetext = pc.replace_substring_regex(movetext.fill_null(""), r"\n[^\S\n]*\n(?:[^\S\n]*\n)*", "\n")
    joined = pc.binary_join_element_wise(*parts, "\n", movetext, "\n\n", "", null_handling="replace")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _is_tag_type(kind: pa.DataType) -> bool:
    """Whether a column of this type holds tag values: text, numbers, booleans, dates, times
    (lists, structs and bytes do not: such a column is left out, as it is no header)."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return any(test(kind) for test in (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer,
                                       pa.types.is_floating, pa.types.is_boolean, pa.types.is_date,
                                       pa.types.is_time, pa.types.is_timestamp))


def _tag_values(column: pa.Array, name: str) -> pa.Array:
    """A column's values (of a type :func:`_is_tag_type` accepts) as the values of PGN tag ``name``:
    strings on one line, nulls kept. Times are whole seconds; a timestamp (as pandas writes a
    date) is the day in a tag named ``...Date`` (``UTCDate``), the time of day in one named
    ``...Time``, both otherwise; one with a time zone is read in UTC (Lichess's tags are)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_date(kind):
        return pc.strftime(column, format="%Y.%m.%d")
    if pa.types.is_time(kind):
        return pc.strftime(column.cast(pa.time32("s"), safe=False), format="%H:%M:%S")
    if pa.types.is_timestamp(kind):
        seconds = column.cast(pa.timestamp("s", tz="UTC" if kind.tz else None), safe=False)
        spelled = "%Y.%m.%d" if name.endswith("Date") else "%H:%M:%S" if name.endswith("Time") else "%Y.%m.%d %H:%M:%S"
        return pc.strftime(seconds, format=spelled)
    if pa.types.is_dictionary(kind):
        column = column.cast(kind.value_type)
        kind = column.type
    if not pa.types.is_string(kind):
        column = column.cast(pa.string())
    # A tag is one line: a line end inside a value (no PGN file can hold one) is read as a space.
    return pc.replace_substring_regex(column, r"\r\n|[\r\n]", " ")
