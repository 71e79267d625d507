"""Opening a corpus in its format (the registry of formats), and holding out its validation and test shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokpack._atomic import write_atomically
from tokpack._compressed import COMPRESSED_SUFFIXES
from tokpack._files import regular_file
from tokpack._schema import read_record
from tokpack.corpus.manifest import (
    DEFAULT_DOCUMENT_BYTES,
    DocumentSplit,
    HeldOutShares,
    held_out_ranges,
    manifest_beside,
    recorded_cut,
    split_manifest,
)
from tokpack.corpus.sources.base import DocumentSource, Format, OnError
from tokpack.corpus.sources.json_lines import JsonLines
from tokpack.corpus.sources.parquet_texts import ParquetTexts
from tokpack.corpus.sources.text_directory import TextDirectory, manifest_outside
from tokpack.corpus.sources.text_file import TextFile
from tokpack.errors import InputError


def check_exists(corpus: Path) -> None:
    """Refuse a corpus that is not there, as a pack that is not there is refused.

    Raises:
        InputError: no such file or folder, named.
    """
    if not corpus.exists():
        raise InputError("no such corpus file or folder", where=corpus)


def open_corpus(path: str | Path, *, document_bytes: int | None = None, on_error: OnError = "raise", text_field: str = "text",
                format: Format | None = None, separator: str | None = None, manifest: str | Path | None = None) -> DocumentSource:
    """Open ``path`` in its format: a folder is a directory of text files, ``.jsonl``/``.ndjson``
    JSON Lines, ``.parquet`` parquet, anything else one text file (with its manifest: ``manifest``,
    else the one found beside it).

    Args:
        document_bytes: the longest document; ``None``: a text file's manifest's (see
            :func:`reading_cut`), else 1 MiB.
        separator: text that ends a document and belongs to none (see :mod:`tokpack.corpus.documents`);
            ``None``: a text file's manifest's, else none.

    Raises:
        InputError: no such file or folder (:func:`check_exists`), a bad option (a ``text_field``
            other than ``"text"`` for a text file or a folder, which have no fields), or a corpus
            that does not match its manifest.
    """
    path = Path(path)
    check_exists(path)
    if on_error not in ("raise", "skip"):
        raise InputError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    check_separator(separator)
    if not path.is_dir():
        regular_file(path, "input")  # a FIFO or device (/dev/zero) would block or never end
    kind = format or format_of(path)
    if kind not in FORMATS:
        raise InputError(f"unknown corpus format {kind!r}", fix=f"use one of {', '.join(FORMATS)}")
    source_type = FORMATS[kind]
    if not source_type.takes_text_field and text_field != "text":
        # A field asked for is a sign the file holds records: read as text, its JSON syntax would
        # be packed as the documents, and the field never read.
        read_as, fix = (("a folder of text files", "give the JSON Lines or Parquet file itself, or drop text_field")
                        if kind == "directory" else
                        ("one text file (by its name: .jsonl, .ndjson and .parquet are read as records)",
                         "if it holds JSON Lines, name it .jsonl; else drop text_field"))
        raise InputError(f"text_field={text_field!r} names a field of JSON Lines or Parquet records, but this is read "
                         f"as {read_as}", where=path, fix=fix)
    if source_type.split_by_bytes:
        document_bytes, separator = recorded_cut(path, document_bytes=document_bytes, separator=separator,
                                                 manifest=None if manifest is None else Path(manifest))
    elif document_bytes is None:
        document_bytes = DEFAULT_DOCUMENT_BYTES
    given = None if manifest is None else Path(manifest)
    if source_type.takes_text_field:
        return source_type(path, document_bytes=document_bytes, on_error=on_error, text_field=text_field,  # type: ignore[call-arg]
                           separator=separator, manifest=given)
    return source_type(path, document_bytes=document_bytes, on_error=on_error, separator=separator, manifest=given)  # type: ignore[call-arg]


def hold_out(path: str | Path, *, validation: float, test: float, document_bytes: int, separator: str | None = None,
             manifest: str | Path | None = None, text_field: str = "text", on_error: OnError = "raise") -> None:
    """Hold out shares of a corpus as validation and test, recorded in its manifest (beside it, or
    at ``manifest``): a text file's last bytes, cut on document boundaries (see
    :func:`tokpack.corpus.manifest.split_manifest`); whole files of a folder, records of JSON
    Lines or rows of Parquet, spread evenly over it (see :func:`split_documents`). A manifest
    already there is kept when it records the same split.

    Raises:
        InputError: shares that hold out nothing or everything, a manifest there with another
            split, or one that cannot be written.
    """
    path = Path(path)
    given = None if manifest is None else Path(manifest)
    if FORMATS[format_of(path)].split_by_bytes:
        split_manifest(path, validation=validation, test=test, document_bytes=document_bytes, separator=separator,
                       manifest=given)
    else:
        split_documents(path, validation=validation, test=test, manifest=given, text_field=text_field, on_error=on_error)


def split_documents(path: Path, *, validation: float, test: float, manifest: Path | None = None, text_field: str = "text",
                    on_error: OnError = "raise") -> DocumentSplit:
    """Write the :class:`~tokpack.corpus.manifest.DocumentSplit` of a folder, JSON Lines or
    Parquet corpus: ``validation`` and ``test`` shares of its files, records or rows, whole, chosen
    by :func:`~tokpack.corpus.manifest.held_out_ranges` (deterministic, evenly spread, so every
    part of a corpus sorted by source has its share held out). Beside the corpus
    (``FOLDER.manifest.json``) or at ``manifest``.

    Raises:
        InputError: see :func:`hold_out`.
    """
    if validation + test <= 0 or validation + test >= 1:
        raise InputError(f"validation {validation} and test {test} must hold out a share between 0 and 1")
    target = manifest or manifest_beside(path)
    if Path(path).is_dir():
        manifest_outside(Path(path), target)
    with open_corpus(path, text_field=text_field, on_error=on_error, manifest=target if target.exists() else None) as source:
        units, sha256, kind = source.split_units(), source.record.sha256, source.format
    shares = HeldOutShares(validation=validation, test=test)
    ranges = np.bincount(held_out_ranges(units, validation, test), minlength=3).tolist()
    counts = {name: ranges[k] for k, name in enumerate(("train", "validation", "test")) if k == 0 or (validation, test)[k - 1]}
    made = DocumentSplit(file=path.name, format=kind, sha256=sha256, units=units, counts=counts, made_by=shares)  # type: ignore[arg-type]
    if target.exists():
        existing = read_record(DocumentSplit, target)
        if existing != made:
            raise InputError(f"already there with another split (validation {existing.made_by.validation:g}, "
                             f"test {existing.made_by.test:g})", where=target,
                             fix="delete it to split the corpus again, or drop validation= and test= to use it")
        return existing
    try:
        write_atomically(target, made.to_json())
    except OSError as error:
        raise InputError(f"cannot write the split ({error.strerror or error})", where=target,
                         fix="give manifest= a path in a folder you can write") from None
    return made


def reading_cut(path: str | Path, *, document_bytes: int | None, separator: str | None,
                manifest: str | Path | None = None) -> tuple[int, str | None]:
    """The ``(document_bytes, separator)`` :func:`open_corpus` reads ``path`` by: those given; for a
    text file, what is ``None`` comes from the rule its manifest recorded (see
    :func:`tokpack.corpus.manifest.recorded_cut`); else 1 MiB and no separator.

    Raises:
        InputError: a manifest given that is missing, unreadable or names another file.
    """
    path = Path(path)
    if path.exists() and FORMATS[format_of(path)].split_by_bytes:
        return recorded_cut(path, document_bytes=document_bytes, separator=separator,
                            manifest=None if manifest is None else Path(manifest))
    return (DEFAULT_DOCUMENT_BYTES if document_bytes is None else document_bytes), separator


def check_separator(separator: str | None) -> None:
    """Refuse a separator that is not text to find: empty, or not encodable as UTF-8.

    Raises:
        InputError: naming ``separator`` and the fix.
    """
    if separator is None:
        return
    if not isinstance(separator, str) or not separator:
        raise InputError(f"must be a non-empty string, got {separator!r}", where="separator",
                         fix="e.g. separator='<|endoftext|>', or separator='\\n\\n' for a blank line")
    try:
        separator.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{separator!r} is not valid text (a lone surrogate)", where="separator") from None


#: Every input format by name: adding one is its module in this package, a line here (a suffix below
#: if files of it are told by one) and its name in :data:`~tokpack.corpus.sources.base.Format`.
FORMATS: dict[str, type[DocumentSource]] = {
    "text": TextFile, "directory": TextDirectory, "jsonl": JsonLines, "parquet": ParquetTexts,
}
#: File name suffixes that select a record format; any other file is one text file.
SUFFIXES: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def format_of(path: Path) -> str:
    """The format :func:`open_corpus` reads ``path`` in: a folder is ``directory``, else by suffix,
    read through a compression's (a file's compression itself is told by its bytes).

    >>> format_of(Path("a.ndjson")), format_of(Path("a.txt")), format_of(Path("a.jsonl.zst"))
    ('jsonl', 'text', 'jsonl')
    """
    if path.is_dir():
        return "directory"
    name = path.name
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return SUFFIXES.get(Path(name).suffix, "text")

