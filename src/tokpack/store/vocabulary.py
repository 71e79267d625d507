"""The vocabulary a pack, a sharded dataset or a tokpack export carries, read and checked against
its record (:func:`tokpack.load_vocabulary` reads it for such a path), and the files of it an
export copies."""

from __future__ import annotations

from pathlib import Path

from tokpack._schema import read_record
from tokpack.errors import InputError, IntegrityError
from tokpack.store.dataset import DatasetRecord, ShardedDataset
from tokpack.store.format import DATASET_FILE, META_FILE, VOCABULARY_DIR
from tokpack.store.reader import Pack
from tokpack.store.sidecar import SIDECAR, ExportRecord, check_export_vocabulary, check_files, prefix_sidecar, read_sidecar
from tokpack.store.source import TokenSource
from tokpack.vocab.bytelevel import VOCABULARY_FILE, BpeTokenizer


def carried_by(path: Path) -> BpeTokenizer:
    """The vocabulary ``path`` carries under a record: a pack's or a sharded dataset's
    (:func:`carried_vocabulary`), else a tokpack export's (:func:`exported_vocabulary`). It is
    what :func:`tokpack.load_vocabulary` reads for a path that holds such a record.

    Raises:
        InputError / IntegrityError: as those two.
    """
    path = Path(path)
    if path.is_dir() and ((path / META_FILE).is_file() or (path / DATASET_FILE).is_file()):
        return carried_vocabulary(path)
    return exported_vocabulary(path)


def exported_vocabulary(path: Path) -> BpeTokenizer:
    """The vocabulary a tokpack export carries (see :func:`export_vocabulary_dir`),
    its files checked against the export's sidecar and its identity against the ids'.

    Raises:
        IntegrityError: an altered, missing or unrecorded file, or a vocabulary that is not the ids'.
        InputError: an export that carries no vocabulary files.
    """
    found = export_sidecar(path)
    folder = export_vocabulary_dir(path)
    if found is None or folder is None:
        raise InputError("this export carries no vocabulary files (it was written without them, or its "
                         "pack carried none)", where=path,
                         fix="pass the vocabulary file it was made with (its identity is checked), or export it again")
    tokenizer = BpeTokenizer.load_saved(folder / VOCABULARY_FILE)
    if tokenizer.identity != found[0].vocabulary:
        raise IntegrityError("not the vocabulary the export's sidecar records", where=folder,
                             fix="export it again from the pack")
    return tokenizer


def carried_vocabulary(directory: Path) -> BpeTokenizer:
    """The vocabulary a pack or a sharded dataset carries (see :mod:`tokpack.store.format`), its
    files checked against the pack's ``meta.json`` and its identity against the ids'.

    Raises:
        IntegrityError: an altered or missing file, or a vocabulary that is not the ids'.
        InputError: a pack written without its vocabulary files.
    """
    directory = Path(directory)
    if not (directory / META_FILE).is_file():
        dataset = read_record(DatasetRecord, directory / DATASET_FILE)
        dataset.check_seal(directory / DATASET_FILE)
        if not dataset.shards:
            raise InputError("a dataset without shards carries no vocabulary", where=directory)
        tokenizer = carried_vocabulary(directory / dataset.shards[0].name)
        if tokenizer.identity != dataset.vocabulary:
            raise IntegrityError(f"not the vocabulary {DATASET_FILE} records",
                                 where=directory / dataset.shards[0].name / VOCABULARY_DIR, fix="rebuild the dataset")
        return tokenizer
    pack = Pack(directory, verify=False)  # the seal and the counts; the vocabulary files are checked below
    if pack.vocabulary_dir is None:
        raise InputError("this pack carries no vocabulary files (it was written without them, or "
                         "its vocabulary is not a byte-level BPE)", where=directory,
                         fix="pass the vocabulary file it was made with (its identity is checked), or prepare it again")
    if not pack.stamped():  # a stamp covers the vocabulary files: they were checked and are unchanged since
        pack.verify_vocabulary_files()
    tokenizer = BpeTokenizer.load_saved(pack.vocabulary_dir / VOCABULARY_FILE)
    if tokenizer.identity != pack.vocabulary:
        raise IntegrityError(f"not the vocabulary {META_FILE} records", where=pack.vocabulary_dir, fix="rebuild the pack")
    return tokenizer


def carried_vocabulary_files(source: TokenSource) -> dict[str, bytes]:
    """The vocabulary files ``source`` carries (a pack's ``vocabulary/``, a dataset's first
    shard's, or a tokpack export's own), checked against their record; empty when it has none."""
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
    names = [name for name in sidecar.files_sha256 if name.startswith(f"{folder}/")]
    check_files(sidecar, Path(root), names)
    return {name.split("/", 1)[1]: (Path(root) / name).read_bytes() for name in sorted(names)}


def export_sidecar(path: Path) -> tuple[ExportRecord, Path] | None:
    """The sidecar of the tokpack export at ``path`` (a folder holding :data:`SIDECAR`, or a
    Megatron prefix, or its ``.bin``/``.idx``, with ``PREFIX.tokpack.json`` beside it) and the
    folder its file names are relative to; ``None`` when ``path`` is no tokpack export."""
    path = Path(path)
    if path.is_dir():
        return None if (record := read_sidecar(path / SIDECAR)) is None else (record, path)
    return None if (record := read_sidecar(prefix_sidecar(path))) is None else (record, path.parent)


def export_vocabulary_dir(path: Path) -> Path | None:
    """The folder of vocabulary files the tokpack export at ``path`` carries (``vocabulary/`` in a
    folder export, ``PREFIX.vocabulary`` beside a Megatron prefix), checked as
    :func:`~tokpack.store.sidecar.check_export_vocabulary` checks it; ``None`` when ``path`` is no tokpack export or
    carries none.

    Raises:
        IntegrityError: a carried file missing, altered, added, or not recorded in the sidecar,
            or one that means another vocabulary.
    """
    found = export_sidecar(path)
    if found is None or found[0].vocabulary_dir is None:
        return None
    sidecar, root = found
    where = Path(path) / SIDECAR if Path(path).is_dir() else prefix_sidecar(path)
    check_export_vocabulary(sidecar, root, where)
    return root / str(sidecar.vocabulary_dir)




__all__ = ["carried_by", "carried_vocabulary", "carried_vocabulary_files", "export_sidecar", "export_vocabulary_dir",
           "exported_vocabulary"]
