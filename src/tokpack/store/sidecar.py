"""The export sidecar (``tokpack-export.json``): the record written beside every export, so
tokpack reopens the files knowing their vocabulary and an import restores the pack exactly, and
the checks of an export's files against it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from tokpack._atomic import write_atomically
from tokpack._schema import Record, read_record
from tokpack.errors import InputError, IntegrityError
from tokpack.store.carried import Carrier, check_carried
from tokpack.store.dataset import DatasetRecord
from tokpack.store.format import DocumentCut, PackMeta, Source, Span
from tokpack.store.source import TokenSource
from tokpack.vocab.identity import VocabIdentity

#: The sidecar inside a folder export; a Megatron prefix ``OUT`` gets ``OUT`` + :data:`PREFIX_SIDECAR`.
SIDECAR = "tokpack-export.json"
PREFIX_SIDECAR = ".tokpack.json"
EXPORT_SCHEMA = "tokpack.export.v1"
#: Bytes read per step when hashing a file.
_HASH_CHUNK = 32 << 20


class ExportPart(Record):
    """One exported part (a named range of the source, or all of it) and its files."""

    documents: tuple[int, int]
    tokens: tuple[int, int]
    files: list[str]


class ExportRecord(Record):
    """The sidecar (``"schema": "tokpack.export.v1"``) written beside every export, so tokpack
    reopens the files knowing their vocabulary, and an import restores the pack exactly.

    Fields:
        format: the registry name (``megatron``, ``nanogpt``, ``litdata``, ``mds``, ``hf``).
        vocabulary, pad_id, source, cut: the exported pack's.
        source_tokens_sha256 / source_starts_sha256 / source_n_docs: the exported stream's checksums and size.
        eod_id: the id appended after every document (``None``: documents written as they are).
        dtype: the element type of the written ids.
        ranges: the source's named ranges (an import of a whole export restores them).
        parts: what was written, by name, as spans of the source.
        files_sha256: SHA-256 of every written file, by its name in ``parts`` (what ``inspect``
            and ``import`` check the files against; empty when none were recorded),
            and of the vocabulary files carried (``VOCABULARY_DIR/NAME``).
        vocabulary_dir: the folder, beside the sidecar, holding the source pack's vocabulary
            files (``vocabulary`` in a folder export, ``OUT.vocabulary`` beside a Megatron
            prefix), so the ids decode where they are copied; ``None`` when it carried none.
        counts: the exported pack's counts (its characters, skipped inputs, ...), which an import
            of the whole export restores.
        sealed_record: the exported pack's ``meta.json`` (or dataset's ``dataset.json``) as it
            was, seal and all: the sidecar has no seal of its own, so every field above that
            repeats the pack's is checked against it (:func:`check_export`), and an import
            restores it. ``None`` for a source that has no sealed record (another framework's
            files); an export that carries none is held to its parts and files only.
    """

    schema_: Literal["tokpack.export.v1"] = Field(default="tokpack.export.v1", alias="schema")
    format: str
    vocabulary: VocabIdentity
    pad_id: int | None = None
    source: Source
    cut: DocumentCut
    source_tokens_sha256: str
    source_starts_sha256: str
    source_n_docs: int = Field(ge=0)
    eod_id: int | None = None
    dtype: str
    ranges: dict[str, Span] = Field(default_factory=dict)
    parts: dict[str, ExportPart]
    files_sha256: dict[str, str] = Field(default_factory=dict)
    vocabulary_dir: str | None = Field(default=None, pattern=r"^[^/\\]+$")
    counts: dict[str, int] = Field(default_factory=dict)
    sealed_record: PackMeta | DatasetRecord | None = None

    @model_serializer(mode="wrap")
    def _no_optional_field_without_a_value(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when empty: an export of a pack without vocabulary files or counts has no such keys.
        data: dict[str, Any] = handler(self)
        for name in ("vocabulary_dir", "sealed_record", "counts"):
            if not data.get(name):
                data.pop(name, None)
        return data


def check_export(sidecar: ExportRecord, where: Path, found: dict[str, Span]) -> None:
    """Check an export's sidecar (at ``where``), which has no seal, against the exported pack's
    sealed record it carries, and against ``found``: each part's span as its files hold it (what
    a reader counted in them, in stream order).

    Each field the sidecar repeats of the pack (vocabulary, padding id, source, cut, ranges,
    checksums, size) must be the record's, each part the record's range of that name (or the
    whole stream), and each part read must hold in its files as many documents (and ids) as its
    span says: a moved split boundary is refused whether it was moved in the sidecar, in both,
    or not at all but in the files.

    Raises:
        IntegrityError: naming the sidecar and what differs.
    """
    fix = "the export's sidecar was edited; export it again from the pack"
    record = sidecar.sealed_record
    if record is not None:
        if record.seal != record.computed_seal():
            raise IntegrityError("the exported pack's record it carries was edited after it was written (seal mismatch)",
                                 where=where, fix=fix)
        repeated = {"vocabulary": (sidecar.vocabulary, record.vocabulary), "pad_id": (sidecar.pad_id, record.pad_id),
                    "source": (sidecar.source, record.source), "cut": (sidecar.cut, record.cut),
                    "source_tokens_sha256": (sidecar.source_tokens_sha256, record.tokens_sha256),
                    "source_starts_sha256": (sidecar.source_starts_sha256, record.starts_sha256),
                    "source_n_docs": (sidecar.source_n_docs, record.n_docs), "counts": (sidecar.counts, record.counts)}
        for name, (said, recorded) in repeated.items():
            if said != recorded:
                raise IntegrityError(f"{name} {_brief(said)} differs from the exported pack's record ({_brief(recorded)})",
                                     where=where, fix=fix)
        # the vocabulary files go with the pack: the same names and bytes as its record lists
        carried = {name.split("/", 1)[1]: digest for name, digest in record.vocabulary_files.items()} \
            if isinstance(record, PackMeta) else {}
        listed = {name.split("/", 1)[1]: digest for name, digest in sidecar.files_sha256.items()
                  if sidecar.vocabulary_dir is not None and name.startswith(f"{sidecar.vocabulary_dir}/")}
        if isinstance(record, PackMeta) and carried != listed:
            raise IntegrityError(f"the exported pack carries vocabulary files ({', '.join(sorted(carried)) or 'none'}), "
                                 f"the sidecar lists {', '.join(sorted(listed)) or 'none'} (or other bytes)",
                                 where=where, fix=fix)
        if sidecar.ranges != record.ranges:
            raise IntegrityError(f"ranges differ from the exported pack's record ({_spans(sidecar.ranges)}; the record "
                                 f"says {_spans(record.ranges)})", where=where, fix=fix)
        whole = Span(documents=(0, record.n_docs), tokens=(0, record.n_tokens))
        for name, part in sidecar.parts.items():
            expected = record.ranges.get(name, whole if name in ("train", "all") else None)
            if expected is None or not _same_span(part, expected):
                raise IntegrityError(f"part {name!r} (documents [{part.documents[0]}, {part.documents[1]})) is not a range "
                                     "of the exported pack's record", where=where, fix=fix)
    for name, part in sidecar.parts.items():  # a range written as a part is that part
        span = sidecar.ranges.get(name)
        if span is not None and not _same_span(span, part):
            raise IntegrityError(f"range {name!r} differs from the part written for it (documents [{span.documents[0]}, "
                                 f"{span.documents[1]}) against [{part.documents[0]}, {part.documents[1]}))", where=where, fix=fix)
    separators = sidecar.eod_id is not None
    for name, span in found.items():
        written = sidecar.parts.get(name)
        if written is None:
            raise IntegrityError(f"lists no part {name!r}", where=where, fix="the export was altered; export it again from the pack")
        documents = written.documents[1] - written.documents[0]
        tokens = written.tokens[1] - written.tokens[0] + (documents if separators else 0)
        held = (span.documents[1] - span.documents[0], span.tokens[1] - span.tokens[0])
        if held != (documents, tokens):
            if held[0] != documents:
                what, said, unit, why = held[0], documents, "documents", ""
            elif separators:  # the sidecar's eod_id adds an id a document to what its part says
                what, said, unit = held[1], tokens, "ids"
                why = f" ({tokens - documents:,} and its eod_id {sidecar.eod_id} after each of {documents:,} documents)"
            else:
                what, said, unit, why = held[1], tokens, "ids", " (no eod_id: no end-of-document ids)"
            raise IntegrityError(f"the files of part {name!r} hold {what:,} {unit}, the export's sidecar says {said:,} "
                                 f"{unit}{why}", where=where, fix="the export was altered; export it again from the pack")


def check_stream(source: TokenSource, sidecar: ExportRecord, where: Path) -> bool:
    """When an export holds every document of the pack it came from, check that its files hold
    that pack's stream: the ids, less the separator appended to each document (which each must
    end with), hash to the sealed record's ``tokens_sha256`` in its id type, and their starts to
    its ``starts_sha256``. The files' own checksums are the unsealed sidecar's, so this is what
    ties them to the record. Return whether the stream was checked (not for a part of a pack, or
    without a record).

    Raises:
        IntegrityError: naming the sidecar: a document without its separator, or another stream.
    """
    from tokpack.store.source import chunks

    record = sidecar.sealed_record
    if record is None or source.n_docs != record.n_docs or sum(
            part.documents[1] - part.documents[0] for part in sidecar.parts.values()) != record.n_docs:
        return False
    dtype, separator = np.dtype(record.dtype).newbyteorder("<"), sidecar.eod_id
    ids_hash, starts_hash, at, done = hashlib.sha256(), hashlib.sha256(), 0, 0
    for ids, lengths in chunks(source, (0, source.n_docs)):
        if separator is not None:
            ends = np.cumsum(lengths) - 1
            if np.any(ids[ends] != separator):
                document = done + int(np.argmax(ids[ends] != separator))
                raise IntegrityError(f"document {document:,} does not end with the separator {separator} the "
                                     "sidecar names", where=where,
                                     fix="the export was altered; export it again from the pack")
            kept = np.ones(len(ids), dtype=bool)
            kept[ends] = False
            ids, lengths = ids[kept], lengths - 1
        starts_hash.update((at + np.cumsum(lengths) - lengths).astype("<i8").tobytes())
        ids_hash.update(np.ascontiguousarray(ids, dtype=dtype).data)
        at, done = at + int(lengths.sum()), done + len(lengths)
    if (ids_hash.hexdigest(), starts_hash.hexdigest()) != (record.tokens_sha256, record.starts_sha256):
        raise IntegrityError("its files' ids are not the stream of the exported pack (they hash to another SHA-256 "
                             "than its sealed record names)", where=where,
                             fix="the export was altered; export it again from the pack")
    return True


def _same_span(a: Span | ExportPart, b: Span | ExportPart) -> bool:
    """Whether two spans hold the same documents and ids: empty spans hold no ids wherever they
    say those are (an export may give an empty part's as ``(0, 0)``), so only their documents count."""
    if a.documents != b.documents:
        return False
    if a.documents[0] == a.documents[1]:
        return a.tokens[0] == a.tokens[1] and b.tokens[0] == b.tokens[1]
    return a.tokens == b.tokens


def _brief(value: object) -> str:
    short = getattr(value, "short", None)
    if short is not None:
        return str(short)
    if isinstance(value, Source):
        return f"{value.name} {value.sha256[:12]}…"
    return value.model_dump_json(by_alias=True) if isinstance(value, Record) else repr(value)


def _spans(ranges: dict[str, Span]) -> str:
    return ", ".join(f"{name} documents [{span.documents[0]}, {span.documents[1]})" for name, span in ranges.items()) or "none"


def write_sidecar(record: ExportRecord, path: Path) -> Path:
    """Write the sidecar atomically."""
    return write_atomically(path, record.to_json())


def check_files(sidecar: Any, root: Path, names: Sequence[str] | None = None) -> bool:
    """Check every file a tokpack export's ``sidecar`` lists (relative to ``root``; only
    ``names`` if given) against the SHA-256 it records; return whether it records any (an export
    that records none leaves only the ids to be checked).

    Raises:
        InputError: a listed file is missing.
        IntegrityError: naming the file whose checksum differs.
    """
    recorded: dict[str, str] = dict(getattr(sidecar, "files_sha256", {}) or {})
    if names is not None:
        recorded = {name: digest for name, digest in recorded.items() if name in set(names)}
    for name, expected in recorded.items():
        path = Path(root) / name
        if not path.is_file():
            raise InputError("missing, though the export's sidecar lists it", where=path, fix="copy the whole export")
        if file_sha256(path) != expected:
            raise IntegrityError("SHA-256 differs from the export's sidecar (the file was altered)", where=path,
                                 fix="export it again from the pack")
    return bool(recorded)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in bounded chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_HASH_CHUNK):
            digest.update(block)
    return digest.hexdigest()



def prefix_sidecar(path: str | Path) -> Path:
    """The sidecar beside a Megatron prefix (``PREFIX.tokpack.json``), given the prefix or either
    of its files.

    >>> prefix_sidecar("data/web_text_document.idx").name
    'web_text_document.tokpack.json'
    """
    path = Path(path)
    prefix = path.with_suffix("") if path.suffix in (".bin", ".idx") else path
    return prefix.with_name(prefix.name + PREFIX_SIDECAR)


def read_sidecar(path: Path) -> ExportRecord | None:
    """The sidecar at ``path``, or ``None`` when there is none."""
    return read_record(ExportRecord, path) if Path(path).exists() else None


def check_export_vocabulary(sidecar: ExportRecord, root: Path, where: Path) -> None:
    """The vocabulary files an export carries (in ``root``; its sidecar at ``where``) checked as
    a pack's are (:func:`tokpack.store.carried.check_carried`): against the sidecar's checksums,
    for what they mean against its vocabulary, nothing else in their folder, and the padding id
    one of the vocabulary's special tokens.

    Raises:
        IntegrityError: naming the file, or the sidecar, that does not match.
    """
    if sidecar.vocabulary_dir is None:
        return
    folder = str(sidecar.vocabulary_dir)
    names = {name: digest for name, digest in sidecar.files_sha256.items() if name.startswith(f"{folder}/")}
    if not names:
        raise IntegrityError("the export's sidecar records no checksums of its vocabulary files", where=root / folder,
                             fix="export it again from the pack")
    check_carried(Carrier(root, folder, where, "export it again from the pack"), names, sidecar.vocabulary, sidecar.pad_id)
