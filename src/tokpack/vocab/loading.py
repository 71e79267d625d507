"""Turn the vocabulary a user names (a file, a tokenizer object, or a pack, dataset or export that
carries one) into a :class:`BpeTokenizer`: :func:`load_vocabulary`, the one loader."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path
from typing import Any, Union

from tokpack.errors import InputError, IntegrityError
from tokpack.vocab.bytelevel import VOCABULARY_FILE, BpeTokenizer, VocabularyRecord
from tokpack.vocab.identity import require_vocabulary
from tokpack.vocab.merge_files import read_gpt2_pair, read_tokenizer_json
from tokpack.vocab.patterns import END_OF_TEXT, GPT2_PATTERN, resolve_pattern, same_meaning
from tokpack.vocab.published import PUBLISHED
from tokpack.vocab.rank_files import parse_rank_text

#: What ``--pattern`` / ``pattern=`` accept by name (see :data:`tokpack.vocab.patterns.NAMED_PATTERNS`).
PATTERN_CHOICES = "gpt2, gpt4, polish, polish-phrase, or a regex"

PathLike = Union[str, "os.PathLike[str]"]
VocabularySpec = Union[PathLike, tuple[PathLike, PathLike], BpeTokenizer, Any]

#: The records under which a folder carries its vocabulary: a pack's ``meta.json``, a sharded
#: dataset's ``dataset.json``, a folder export's sidecar.
CARRYING_RECORDS = ("meta.json", "dataset.json", "tokpack-export.json")
#: The sidecar beside a Megatron prefix ``PREFIX`` (``PREFIX.tokpack.json``), which carries one too.
PREFIX_SIDECAR = ".tokpack.json"
#: The function that reads a vocabulary carried under one of those records, checked against it.
#: The pack store is a higher layer: named here, it is imported only when such a record is found.
CARRIED_READER = "tokpack.store.vocabulary:carried_by"


def load_vocabulary(spec: VocabularySpec, *, pattern: str | None = None) -> BpeTokenizer:
    """Load a byte-level BPE vocabulary.

    Args:
        spec: a tiktoken rank file; an ``(encoder.json, vocab.bpe)`` pair; a Hugging Face
            ``tokenizer.json``; a tokpack ``vocabulary.json`` or the directory holding one; a
            pack or sharded dataset (the vocabulary it carries, checked against its record); a
            tokpack export (a folder export, or a Megatron prefix: the vocabulary it carries,
            checked against its sidecar); a :class:`BpeTokenizer`; or any object with an
            ``as_tokenizer()`` method (a trainer's result).
        pattern: the pre-tokenizer for a rank file, which carries none. A rank file takes its
            pattern and special tokens from the ``vocabulary.json`` beside it that names it,
            else from the published vocabulary it is byte for byte (r50k/GPT-2, p50k, cl100k,
            o200k; see :mod:`tokpack.vocab.published`), else from ``pattern``: it is never
            guessed. A GPT-2 pair is GPT-2's (its pattern by default). Formats that record
            their pattern refuse a different one.

    Raises:
        InputError: ``"bytes"`` (byte-level training needs no vocabulary), an unreadable or
            inconsistent file, a rank file whose pattern is unknown and not given, a
            ``pattern`` that contradicts the file's own, or a pack, dataset or export that
            carries no vocabulary.
        IntegrityError: carried files that do not match the record of the pack, dataset or export.
    """
    if isinstance(spec, str) and spec == "bytes":
        raise InputError("'bytes' is not a vocabulary: byte-level training needs none")
    if isinstance(spec, (str, os.PathLike)) and _carries_record(Path(spec)):
        module, name = CARRIED_READER.split(":")
        return same_pattern(getattr(importlib.import_module(module), name)(Path(spec)), pattern, str(spec))
    if pattern is not None:
        pattern = resolve_pattern(pattern, "pattern")
    if isinstance(spec, BpeTokenizer):
        return same_pattern(spec, pattern, "the given tokenizer")
    if hasattr(spec, "as_tokenizer"):
        return same_pattern(spec.as_tokenizer(), pattern, type(spec).__name__)  # type: ignore[union-attr]
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise InputError("a GPT-2 vocabulary is a pair (encoder.json, vocab.bpe)")
        ranks, specials = read_gpt2_pair(Path(spec[0]), Path(spec[1]))
        if END_OF_TEXT not in specials:
            specials[END_OF_TEXT] = max([*ranks.values(), *specials.values()]) + 1
        return BpeTokenizer(ranks=ranks, pattern=pattern or GPT2_PATTERN, special_tokens=specials)
    if not isinstance(spec, (str, os.PathLike)):  # a tokenizers.Tokenizer, a transformers tokenizer, a dict…
        raise InputError(f"cannot read a vocabulary from a {type(spec).__name__}",
                         fix="give a file: a rank file, tokenizer.json or vocabulary.json (a Hugging Face tokenizer "
                             "writes tokenizer.json with .save(path) or .save_pretrained(folder))")
    path = Path(spec)
    if path.is_dir():
        if not (path / VOCABULARY_FILE).is_file():
            raise InputError(f"a folder holding no vocabulary: no {VOCABULARY_FILE}, and no pack, sharded dataset or "
                             "export", where=path, fix="give a rank file, a tokenizer.json, a vocabulary.json, or a "
                                                       "pack's folder")
        path = path / VOCABULARY_FILE
    if not path.is_file():
        raise InputError("no such vocabulary file", where=path)
    if path.suffix == ".json":
        if is_tokpack_record(path):
            return same_pattern(BpeTokenizer.load_saved(path), pattern, str(path))
        ranks, file_pattern, specials = read_tokenizer_json(path)
        if END_OF_TEXT not in specials:
            specials[END_OF_TEXT] = max([*ranks.values(), *specials.values()]) + 1
        tokenizer = BpeTokenizer(ranks=ranks, pattern=file_pattern, special_tokens=specials, source=path)
        return same_pattern(tokenizer, pattern, str(path))
    with path.open("rb") as file:
        if file.read(6) == b"\x93NUMPY":  # a pack's tokens.npy or starts.npy: its folder was meant
            raise InputError("a NumPy array (a pack's ids or document starts), not a vocabulary", where=path,
                             fix="give the pack's folder, which holds its vocabulary, or a rank file, a "
                                 "tokenizer.json or a vocabulary.json")
    return _rank_file_vocabulary(path, pattern)


def _carries_record(path: Path) -> bool:
    """Whether ``path`` is a folder holding one of :data:`CARRYING_RECORDS`, or a Megatron prefix
    (or its ``.bin``/``.idx``) with its sidecar beside it."""
    if path.is_dir():
        return any((path / record).is_file() for record in CARRYING_RECORDS)
    prefix = path.with_suffix("") if path.suffix in (".bin", ".idx") else path
    return prefix.with_name(prefix.name + PREFIX_SIDECAR).is_file()


def tokenizer_for(model: Any, vocabulary: VocabularySpec) -> BpeTokenizer:
    """Load ``vocabulary`` and return it only if it is the one ``model`` was trained on.

    Raises:
        InputError / VocabularyMismatch: as :func:`load_vocabulary` and :func:`require_vocabulary`.
    """
    tokenizer = load_vocabulary(vocabulary)
    require_vocabulary(model, tokenizer)
    return tokenizer


def _rank_file_vocabulary(path: Path, pattern: str | None) -> BpeTokenizer:
    try:
        text = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read ({error.strerror or error})", where=path) from None
    digest = hashlib.sha256(text).hexdigest()  # what tiktoken publishes: the file's hash
    record = _record_beside(path, digest)
    if record is not None:
        tokenizer = BpeTokenizer.from_rank_text(text, pattern=record.pattern, special_tokens=record.special_tokens,
                                                source=path, text_sha256=digest)
        if tokenizer.identity != record.identity:
            raise IntegrityError("recorded identity does not match the vocabulary", where=path.parent / VOCABULARY_FILE,
                                 fix=f"restore {path.name} and {VOCABULARY_FILE} together")
        return same_pattern(tokenizer, pattern, str(path.parent / VOCABULARY_FILE))
    published = PUBLISHED.get(digest)
    if published is not None:
        if pattern is not None and not same_meaning(pattern, published.pattern):  # tiktoken's own spelling is fine
            raise InputError(f"is {published.name}, whose pre-tokenizer pattern is published; "
                             "pattern= contradicts it", where=path,
                             fix="drop pattern=: the published pattern is the one these ranks were made with")
        return BpeTokenizer.from_rank_text(text, pattern=published.pattern, special_tokens=published.special_tokens,
                                           source=path, text_sha256=digest)
    if pattern is None:
        parse_rank_text(text, where=path)  # a file that is no rank file says so first
        names = ", ".join(sorted(p.name for p in PUBLISHED.values()))
        raise InputError(f"a rank file records no pre-tokenizer pattern, and this one has no {VOCABULARY_FILE} "
                         f"beside it and is no published vocabulary ({names})", where=path,
                         fix=f"name its pattern with pattern= ({PATTERN_CHOICES}), or give the tokenizer.json or "
                             f"{VOCABULARY_FILE} it came with")
    return BpeTokenizer.from_rank_text(text, pattern=pattern, source=path, text_sha256=digest)


def _record_beside(path: Path, digest: str) -> VocabularyRecord | None:
    """The ``vocabulary.json`` beside a rank file, if it describes that file.

    Raises:
        IntegrityError: it names this file but records other bytes for it.
    """
    from tokpack._schema import read_record

    beside = path.parent / VOCABULARY_FILE
    if not beside.is_file() or not is_tokpack_record(beside):
        return None
    record = read_record(VocabularyRecord, beside)
    if record.ranks_sha256 == digest:
        return record
    if record.ranks_file == path.name:
        raise IntegrityError(f"SHA-256 differs from the one {VOCABULARY_FILE} beside it records", where=path,
                             fix="restore the rank file, or remove the stale vocabulary.json and pass pattern=")
    return None


def same_pattern(tokenizer: BpeTokenizer, pattern: str | None, where: str) -> BpeTokenizer:
    """``tokenizer``, unless ``pattern`` is given and means something else than its own (an
    equivalent spelling, see :func:`~tokpack.vocab.patterns.canonical_pattern`, is its own).

    Raises:
        InputError: naming ``where``: the recorded pattern is the one its ids were made with.
    """
    if pattern is not None:
        pattern = resolve_pattern(pattern, "pattern")
    if pattern is not None and not same_meaning(pattern, tokenizer.pattern):
        raise InputError("records its own pre-tokenizer pattern; pattern= contradicts it", where=where,
                         fix="drop pattern=: the recorded pattern is the one its ids were made with")
    return tokenizer


def is_tokpack_record(path: Path) -> bool:
    """Whether a JSON file is one of tokpack's own records (its ``schema`` starts ``tokpack.``).

    Raises:
        InputError: the file is not JSON.
    """
    try:
        with open(path, "rb") as handle:
            head = json.loads(handle.read())
    except (OSError, ValueError, RecursionError) as error:  # ValueError: JSON, UTF-8, a 5,000-digit number
        raise InputError(f"not JSON ({str(error).split(';')[0]})", where=path) from None
    return isinstance(head, dict) and str(head.get("schema", "")).startswith("tokpack.")
