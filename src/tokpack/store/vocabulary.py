"""The vocabulary a user names, a pack's or dataset's included: :func:`load_vocabulary` reads
the files a pack carries (checked against its record) and hands everything else to
:func:`tokpack.vocab.loading.read_vocabulary`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tokpack.errors import InputError, IntegrityError
from tokpack.store.format import DATASET_FILE, META_FILE, VOCABULARY_DIR
from tokpack.store.sidecar import export_sidecar, export_vocabulary_dir
from tokpack.vocab.bytelevel import VOCABULARY_FILE, BpeTokenizer
from tokpack.vocab.identity import require_vocabulary
from tokpack.vocab.loading import VocabularySpec, read_vocabulary, same_pattern


def load_vocabulary(spec: VocabularySpec, *, pattern: str | None = None) -> BpeTokenizer:
    """Load a byte-level BPE vocabulary.

    Args:
        spec: a tiktoken rank file; an ``(encoder.json, vocab.bpe)`` pair; a Hugging Face
            ``tokenizer.json``; a tokpack ``vocabulary.json`` or the directory holding one; a
            pack or sharded dataset (the vocabulary it carries, checked against its record); a
            tokpack export (a folder export, or a Megatron prefix: the vocabulary it carries,
            checked against its sidecar); a
            :class:`BpeTokenizer`; or any object with an ``as_tokenizer()`` method (a trainer's
            result).
        pattern: the pre-tokenizer for a rank file, which carries none, as in
            :func:`tokpack.vocab.loading.read_vocabulary` (never guessed; a format that records
            its pattern refuses a different one).

    Raises:
        InputError: as :func:`~tokpack.vocab.loading.read_vocabulary`, and a pack, dataset or
            export that carries no vocabulary.
        IntegrityError: carried files that do not match the record of the pack, dataset or export.
    """
    if isinstance(spec, (str, os.PathLike)) and not (isinstance(spec, str) and spec == "bytes"):
        path = Path(spec)
        if path.is_dir() and ((path / META_FILE).is_file() or (path / DATASET_FILE).is_file()):
            return same_pattern(carried_vocabulary(path), pattern, str(path))
        if export_sidecar(path) is not None:
            return same_pattern(exported_vocabulary(path), pattern, str(path))
    return read_vocabulary(spec, pattern=pattern)


def exported_vocabulary(path: Path) -> BpeTokenizer:
    """The vocabulary a tokpack export carries (see :func:`tokpack.store.sidecar.export_vocabulary_dir`),
    its files checked against the export's sidecar and its identity against the ids'.

    Raises:
        IntegrityError: an altered, missing or unrecorded file, or a vocabulary that is not the ids'.
        InputError: an export that carries no vocabulary (written before exports carried one).
    """
    found = export_sidecar(path)
    folder = export_vocabulary_dir(path)
    if found is None or folder is None:
        raise InputError("this export carries no vocabulary files (it was written by an older tokpack, or its "
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
        InputError: a pack written without its vocabulary (by tokpack before it kept one).
    """
    from tokpack._schema import read_record
    from tokpack.store.dataset import DatasetRecord
    from tokpack.store.reader import Pack

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
        raise InputError("this pack carries no vocabulary files (it was written by an older tokpack, or "
                         "its vocabulary is not a byte-level BPE)", where=directory,
                         fix="pass the vocabulary file it was made with (its identity is checked), or prepare it again")
    if not pack.stamped():  # a stamp covers the vocabulary files: they were checked and are unchanged since
        pack.verify_vocabulary_files()
    tokenizer = BpeTokenizer.load_saved(pack.vocabulary_dir / VOCABULARY_FILE)
    if tokenizer.identity != pack.vocabulary:
        raise IntegrityError(f"not the vocabulary {META_FILE} records", where=pack.vocabulary_dir, fix="rebuild the pack")
    return tokenizer


def tokenizer_for(model: Any, vocabulary: VocabularySpec) -> BpeTokenizer:
    """Load ``vocabulary`` and return it only if it is the one ``model`` was trained on.

    Raises:
        InputError / VocabularyMismatch: as :func:`load_vocabulary` and :func:`require_vocabulary`.
    """
    tokenizer = load_vocabulary(vocabulary)
    require_vocabulary(model, tokenizer)
    return tokenizer
