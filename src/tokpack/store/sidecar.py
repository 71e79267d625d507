"""The export sidecar (``tokpack-export.json``): the record written beside every export, so
tokpack reopens the files knowing their vocabulary and an import restores the pack exactly; and
the vocabulary files a token source carries, which an export copies and an import restores."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from tokpack._atomic import write_atomically
from tokpack._schema import Record, read_record
from tokpack.errors import IntegrityError
from tokpack.store.format import DocumentCut, Source, Span
from tokpack.store.source import TokenSource
from tokpack.vocab.identity import VocabIdentity

#: The sidecar inside a folder export; a Megatron prefix ``OUT`` gets ``OUT.tokpack.json``.
SIDECAR = "tokpack-export.json"
EXPORT_SCHEMA = "tokpack.export.v1"


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
            and ``import`` check the files against; empty in exports written before it existed),
            and of the vocabulary files carried (``VOCABULARY_DIR/NAME``).
        vocabulary_dir: the folder, beside the sidecar, holding the source pack's vocabulary
            files (``vocabulary`` in a folder export, ``OUT.vocabulary`` beside a Megatron
            prefix), so the ids decode where they are copied; ``None`` when it carried none.
        counts: the exported pack's counts (its characters, skipped inputs, ...), which an import
            of the whole export restores.
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

    @model_serializer(mode="wrap")
    def _no_vocabulary_dir_field_without_one(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Written only when set, so exports of packs without vocabulary files (or counts) stay as they were.
        data: dict[str, Any] = handler(self)
        if data.get("vocabulary_dir") is None:
            data.pop("vocabulary_dir", None)
        if not data.get("counts"):
            data.pop("counts", None)
        return data


def carried_vocabulary_files(source: TokenSource) -> dict[str, bytes]:
    """The vocabulary files ``source`` carries (a pack's ``vocabulary/``, a dataset's first
    shard's, or a tokpack export's own), checked against their record; empty when it has none."""
    from tokpack.store.dataset import ShardedDataset
    from tokpack.store.reader import Pack

    pack = source if isinstance(source, Pack) else source.shards[0] if isinstance(source, ShardedDataset) and source.shards else None
    if isinstance(pack, Pack):
        if pack.vocabulary_dir is None:
            return {}
        pack.verify_vocabulary_files()
        return {Path(name).name: (pack.path / name).read_bytes() for name in sorted(pack.meta.vocabulary_files)}
    sidecar = getattr(source, "sidecar", None)
    folder = getattr(sidecar, "vocabulary_dir", None)
    if sidecar is None or folder is None:
        return {}
    where = Path(source.path)
    root = getattr(source, "folder", None) or (where if where.is_dir() else where.parent)
    from tokpack.store.foreign import check_files

    names = [name for name in sidecar.files_sha256 if name.startswith(f"{folder}/")]
    check_files(sidecar, Path(root), names)
    return {name.split("/", 1)[1]: (Path(root) / name).read_bytes() for name in sorted(names)}


def write_sidecar(record: ExportRecord, path: Path) -> Path:
    """Write the sidecar atomically."""
    return write_atomically(path, record.to_json())


def read_sidecar(path: Path) -> ExportRecord | None:
    """The sidecar at ``path``, or ``None`` when there is none."""
    return read_record(ExportRecord, path) if Path(path).exists() else None


def export_sidecar(path: Path) -> tuple[ExportRecord, Path] | None:
    """The sidecar of the tokpack export at ``path`` (a folder holding :data:`SIDECAR`, or a
    Megatron prefix, or its ``.bin``/``.idx``, with ``PREFIX.tokpack.json`` beside it) and the
    folder its file names are relative to; ``None`` when ``path`` is no tokpack export."""
    from tokpack.store.megatron import megatron_paths

    path = Path(path)
    if path.is_dir():
        return None if (record := read_sidecar(path / SIDECAR)) is None else (record, path)
    bin_path, _, sidecar_path = megatron_paths(path)
    return None if (record := read_sidecar(sidecar_path)) is None else (record, bin_path.parent)


def export_vocabulary_dir(path: Path) -> Path | None:
    """The folder of vocabulary files the tokpack export at ``path`` carries (``vocabulary/`` in a
    folder export, ``PREFIX.vocabulary`` beside a Megatron prefix), every file checked against
    the SHA-256 its sidecar records; ``None`` when ``path`` is no tokpack export or carries none.

    Raises:
        InputError: a carried file is missing.
        IntegrityError: a carried file was altered, added, or is not recorded in the sidecar.
    """
    found = export_sidecar(path)
    if found is None or found[0].vocabulary_dir is None:
        return None
    sidecar, root = found
    folder = root / str(sidecar.vocabulary_dir)
    names = [name for name in sidecar.files_sha256 if name.startswith(f"{sidecar.vocabulary_dir}/")]
    if not names:
        raise IntegrityError("the export's sidecar records no checksums of its vocabulary files", where=folder,
                             fix="export it again from the pack")
    from tokpack.store.foreign import check_files

    check_files(sidecar, root, names)
    # A file put beside the recorded ones would be read as if the export carried it.
    present = {f"{sidecar.vocabulary_dir}/{entry.name}" for entry in folder.iterdir()} if folder.is_dir() else set()
    if extra := sorted(present - set(names)):
        raise IntegrityError(f"{extra[0]} is not one of the vocabulary files the export's sidecar records",
                             where=root / extra[0], fix="remove it, or export again from the pack")
    return folder
