"""Document sources: the input formats a corpus can come in, each read as numbered units.

A unit is the piece a source is split by when packing runs in shards: a document of a text
file (cut by :mod:`tokpack.corpus.documents`), a document of one file of a directory, a line of
JSON Lines, a row of parquet. Each unit yields one or more documents (a record longer than
``document_bytes`` is cut by the same rule), in a fixed order, so shard ``r`` of ``W`` (units
``[r*U/W, (r+1)*U/W)``) is the same whoever computes it.

One module per format (:mod:`.text_file`, :mod:`.text_directory`, :mod:`.json_lines`,
:mod:`.parquet_texts`) on :mod:`.base`; :mod:`.opening` holds the registry of formats
(:data:`FORMATS`): adding a format touches its module and one line there.
"""

from tokpack.corpus.sources.base import DocumentSource, Format, InputFile, OnError, Piece, Pins, Utf8Piece
from tokpack.corpus.sources.decoding import not_text
from tokpack.corpus.sources.json_lines import JsonLines
from tokpack.corpus.sources.opening import (
    FORMATS,
    SUFFIXES,
    check_exists,
    check_separator,
    format_of,
    hold_out,
    open_corpus,
    reading_cut,
    split_documents,
)
from tokpack.corpus.sources.parquet_texts import ParquetTexts
from tokpack.corpus.sources.spellings import json_spellings, warn_spelled_special_tokens
from tokpack.corpus.sources.text_directory import TextDirectory, manifest_outside
from tokpack.corpus.sources.text_file import TextFile
from tokpack.corpus.sources.training_sample import SAMPLE_PIECE_BYTES, TrainingSample, describe_sample, spread_evenly

__all__ = [
    "FORMATS", "SAMPLE_PIECE_BYTES", "SUFFIXES", "DocumentSource", "Format", "InputFile", "JsonLines", "OnError",
    "ParquetTexts", "Pins", "Piece", "TextDirectory", "TextFile", "TrainingSample", "Utf8Piece", "check_exists",
    "check_separator",
    "describe_sample", "format_of", "hold_out", "json_spellings", "manifest_outside", "not_text", "open_corpus",
    "reading_cut", "split_documents", "spread_evenly", "warn_spelled_special_tokens",
]
