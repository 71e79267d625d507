"""The vocabulary files a pack carries, checked for what they mean against the identity its
record names, not only against the checksums the same record lists.

``meta.json`` lists each carried file's SHA-256, but its seal has no key: anyone can swap a file
and recompute both. So each file must also mean the recorded vocabulary: ``vocabulary.json``
with ``ranks.tiktoken`` hash to the recorded identity; ``tokenizer.json`` reads back (by the
rules :func:`tokpack.vocab.loading.read_vocabulary` shares with Hugging Face) as that same
vocabulary; ``tokenizer_config.json`` and ``special_tokens_map.json`` say what the vocabulary's
special tokens make (:func:`tokpack.vocab.bytelevel.transformers_files`); the folder holds
nothing else (``transformers`` reads more names than tokpack writes); and the padding id is one
of the vocabulary's special tokens (an ordinary token as padding would have every loss ignore a
real token).

Reading a ``tokenizer.json`` back costs a noticeable part of a second for a 50k-id vocabulary, so
a document found to mean an identity (or written from it here, :func:`vouch`) is remembered by
its SHA-256 for the rest of the process: the shards of a dataset, which carry the same bytes,
are read once, and a pack just written is not read at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tokpack.errors import InputError, IntegrityError
from tokpack.store.format import META_FILE, VOCABULARY_DIR
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    from tokpack.vocab.bytelevel import VocabularyRecord

TOKENIZER_JSON = "tokenizer.json"

#: SHA-256 of a ``tokenizer.json`` document -> the vocabulary it was found (or written) to mean.
_KNOWN: dict[str, VocabIdentity] = {}


def vouch(files: Mapping[str, bytes], identity: VocabIdentity) -> None:
    """Remember that ``files`` (a vocabulary's own, as :meth:`~tokpack.vocab.bytelevel.BpeTokenizer.files`
    made them in this process) mean ``identity``, so checking a pack that carries them reads none back."""
    document = files.get(TOKENIZER_JSON)
    if document is not None:
        _KNOWN[hashlib.sha256(document).hexdigest()] = identity


def check_carried(pack: Path, recorded: Mapping[str, str], identity: VocabIdentity, pad_id: int | None) -> None:
    """Check the vocabulary files pack ``pack`` carries (``recorded``: each one's SHA-256 by its
    path in the pack, as ``meta.json`` lists them) against their checksums and against
    ``identity``, and ``pad_id`` against the vocabulary's special tokens (see the module docstring).

    Raises:
        IntegrityError: naming the file that is missing, altered, unlisted, or means another
            vocabulary, or ``meta.json`` for a padding id that is an ordinary token.
    """
    from tokpack.vocab.bytelevel import RANKS_FILE, VOCABULARY_FILE, BpeTokenizer, transformers_files

    if not recorded:
        return
    contents = {}
    for name, expected in recorded.items():
        try:
            contents[name] = (pack / name).read_bytes()
        except FileNotFoundError:
            raise IntegrityError("missing; the pack's vocabulary is incomplete", where=pack / name,
                                 fix="copy the whole pack folder, or rebuild it") from None
        if hashlib.sha256(contents[name]).hexdigest() != expected:
            raise IntegrityError(f"SHA-256 differs from {META_FILE}", where=pack / name,
                                 fix="the pack's vocabulary was altered; restore it or rebuild the pack")
    folder = pack / VOCABULARY_DIR
    if extra := sorted(f"{VOCABULARY_DIR}/{entry.name}" for entry in folder.iterdir()
                       if f"{VOCABULARY_DIR}/{entry.name}" not in recorded):
        raise IntegrityError(f"not one of the vocabulary files {META_FILE} records (a tokenizer loader may read it)",
                             where=pack / extra[0], fix="remove it, or rebuild the pack")
    saved = f"{VOCABULARY_DIR}/{VOCABULARY_FILE}"
    if saved not in recorded or f"{VOCABULARY_DIR}/{RANKS_FILE}" not in recorded:
        raise IntegrityError(f"carries vocabulary files but not {VOCABULARY_FILE} and {RANKS_FILE}, which name "
                             "its identity", where=folder, fix="the record was edited; restore it or rebuild the pack")
    record = _vocabulary_record(pack / saved)
    if record.ranks_file != RANKS_FILE:
        raise IntegrityError(f"names the rank file {record.ranks_file!r}, not the {RANKS_FILE} the pack carries",
                             where=pack / saved, fix="restore it or rebuild the pack")
    # The bytes it hashes first: a vocabulary written by tokpack needs no parse.
    if not BpeTokenizer.saved_as(pack / saved, identity):
        carried = BpeTokenizer.load_saved(pack / saved).identity
        if carried != identity:
            raise IntegrityError(f"records the vocabulary {_shown(identity)}, but the one it carries in "
                                 f"{VOCABULARY_DIR}/ is {_shown(carried)}", where=pack / META_FILE,
                                 fix="the record was edited; restore it or rebuild the pack")
    if pad_id is not None and pad_id not in record.special_tokens.values():
        raise IntegrityError(f"pad_id {pad_id} is an ordinary token of the vocabulary the pack carries, one its "
                             "encoder emits (losses would ignore it)", where=pack / META_FILE,
                             fix="the record was edited; restore it or rebuild the pack")
    document = f"{VOCABULARY_DIR}/{TOKENIZER_JSON}"
    if document in contents:
        _check_tokenizer_json(pack / document, contents[document], identity)
    for name, expected in transformers_files(record.special_tokens).items():
        path = f"{VOCABULARY_DIR}/{name}"
        if path in contents and _json(contents[path]) != json.loads(expected):
            raise IntegrityError("not what the vocabulary's special tokens make (a loader would read other "
                                 "special tokens or settings from it)", where=pack / path,
                                 fix="the pack's vocabulary was altered; restore it or rebuild the pack")


def _check_tokenizer_json(path: Path, content: bytes, identity: VocabIdentity) -> None:
    digest = hashlib.sha256(content).hexdigest()
    if _KNOWN.get(digest) == identity:
        return
    from tokpack.vocab.loading import read_vocabulary

    try:
        found = read_vocabulary(path).identity
    except InputError as error:
        raise IntegrityError(f"not a tokenizer.json of the vocabulary {META_FILE} records ({error.what})", where=path,
                             fix="the pack's vocabulary was altered; restore it or rebuild the pack") from None
    if found != identity:
        raise IntegrityError(f"not the vocabulary {META_FILE} records: it reads as {_shown(found)}, the record says "
                             f"{_shown(identity)}", where=path,
                             fix="the pack's vocabulary was altered; restore it or rebuild the pack")
    _KNOWN[digest] = identity


def _vocabulary_record(path: Path) -> VocabularyRecord:
    from tokpack._schema import read_record
    from tokpack.vocab.bytelevel import VocabularyRecord

    try:
        return read_record(VocabularyRecord, path)
    except InputError as error:
        raise IntegrityError(error.what, where=path, fix="the pack's vocabulary was altered; restore it or rebuild the pack") from None


def _json(content: bytes) -> object:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _shown(vocabulary: VocabIdentity) -> str:
    return f"{vocabulary.scheme} {vocabulary.short} of {vocabulary.n_vocab:,} ids"


__all__ = ["check_carried", "vouch"]
