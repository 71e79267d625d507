"""Document sources: the input formats a corpus can come in, each read as numbered units."""

from tokpack.corpus.sources.text_directory import (
    FORMATS,
    SAMPLE_PIECE_BYTES,
    SUFFIXES,
    DocumentSource,
    Format,
    InputFile,
    JsonLines,
    OnError,
    ParquetTexts,
    Piece,
    Pins,
    TextDirectory,
    TextFile,
    TrainingSample,
    check_separator,
    describe_sample,
    format_of,
    hold_out,
    json_spellings,
    manifest_outside,
    not_text,
    open_corpus,
    reading_cut,
    split_documents,
    spread_evenly,
    warn_spelled_special_tokens,
)

__all__ = [
    "FORMATS", "SAMPLE_PIECE_BYTES", "SUFFIXES", "DocumentSource", "Format", "InputFile", "JsonLines", "OnError",
    "ParquetTexts", "Piece", "Pins", "TextDirectory", "TextFile", "TrainingSample", "check_separator",
    "describe_sample", "format_of", "hold_out", "json_spellings", "manifest_outside", "not_text", "open_corpus",
    "reading_cut", "split_documents", "spread_evenly", "warn_spelled_special_tokens",
]
