"""The vocabulary files a pack (or an export) carries, checked for what they mean against the
identity its record names, not only against the checksums the same record lists.

A pack's ``meta.json`` (an export's sidecar) lists each carried file's SHA-256, but a seal has no
key: anyone can swap a file and recompute both. So each file must also mean the recorded
vocabulary: ``vocabulary.json`` with ``ranks.tiktoken`` hash to the recorded identity;
``tokenizer.json`` reads back (by the rules :func:`tokpack.vocab.loading.load_vocabulary` shares
with Hugging Face) as that same vocabulary; ``tokenizer_config.json`` and
``special_tokens_map.json`` say what the vocabulary's special tokens make
(:func:`tokpack.vocab.bytelevel.transformers_files`); the folder holds nothing else
(``transformers`` reads more names than tokpack writes); and the padding id is one of the
vocabulary's special tokens (an ordinary token as padding would have every loss ignore a real
token).

Reading a ``tokenizer.json`` back costs a noticeable part of a second for a 50k-id vocabulary, so
a document found to mean an identity (or written from it here, :func:`vouch`) is remembered by
its SHA-256 for the rest of the process: the shards of a dataset, which carry the same bytes,
are read once, and a pack just written is not read at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tokpack._files import file_kind
from tokpack.errors import InputError, IntegrityError
from tokpack.store.format import META_FILE, VOCABULARY_DIR
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    from tokpack.vocab.bytelevel import VocabularyRecord

TOKENIZER_JSON = "tokenizer.json"

#: SHA-256 of a ``tokenizer.json`` document -> the vocabulary it was found (or written) to mean.
_KNOWN: dict[str, VocabIdentity] = {}


def vouch(files: Mapping[str, bytes], identity: VocabIdentity, *, digests: Mapping[str, str] | None = None) -> None:
    """Remember that ``files`` (a vocabulary's own, as :meth:`~tokpack.vocab.bytelevel.BpeTokenizer.files`
    made them in this process) mean ``identity``, so checking a pack that carries them reads none back;
    ``digests``: their SHA-256 by name, when the caller has them (else hashed here)."""
    document = files.get(TOKENIZER_JSON)
    if document is not None:
        digest = digests.get(TOKENIZER_JSON) if digests is not None else None
        _KNOWN[digest or hashlib.sha256(document).hexdigest()] = identity


class Carrier(NamedTuple):
    """Where vocabulary files are carried, and what to say about them: the pack (or export)
    folder ``root``, the ``folder`` in it that holds them, the ``record`` that lists them, and the
    ``remedy`` an error ends with."""

    root: Path
    folder: str
    record: Path
    remedy: str


def pack_carrier(pack: Path) -> Carrier:
    """A pack's carrier: ``vocabulary/`` listed in ``meta.json``."""
    return Carrier(pack, VOCABULARY_DIR, pack / META_FILE, "restore it or rebuild the pack")


def check_carried(carrier: Carrier, recorded: Mapping[str, str], identity: VocabIdentity, pad_id: int | None) -> None:
    """Check the vocabulary files ``carrier`` holds (``recorded``: each one's SHA-256 by its path
    under the root, as its record lists them) against their checksums and against ``identity``,
    and ``pad_id`` against the vocabulary's special tokens (see the module docstring).

    Raises:
        IntegrityError: naming the file that is missing, altered, unlisted, or means another
            vocabulary, or the record for a padding id that is an ordinary token.
    """
    from tokpack.vocab.bytelevel import RANKS_FILE, VOCABULARY_FILE, BpeTokenizer, transformers_files

    root, name_of_record = carrier.root, carrier.record.name
    if not recorded:
        # Files there, listed nowhere, would be what a user loads, checked by nothing.
        if (root / carrier.folder).is_dir() and any((root / carrier.folder).iterdir()):
            raise IntegrityError(f"holds files {name_of_record} does not list", where=root / carrier.folder,
                                 fix=f"the record was edited; {carrier.remedy}")
        return
    altered = f"the vocabulary files were altered; {carrier.remedy}"
    edited = f"the record was edited; {carrier.remedy}"
    contents = {}
    for name, expected in recorded.items():
        try:
            status = os.stat(root / name)
        except FileNotFoundError:
            raise IntegrityError("missing; the carried vocabulary is incomplete", where=root / name,
                                 fix=f"copy the whole folder, or {carrier.remedy}") from None
        if not stat.S_ISREG(status.st_mode):  # a FIFO would block, a device (/dev/zero) never end
            raise IntegrityError(f"not a regular file ({file_kind(status.st_mode)})", where=root / name, fix=altered)
        contents[name] = (root / name).read_bytes()
        if hashlib.sha256(contents[name]).hexdigest() != expected:
            raise IntegrityError(f"SHA-256 differs from {name_of_record}", where=root / name, fix=altered)
    folder = root / carrier.folder
    if extra := sorted(f"{carrier.folder}/{entry.name}" for entry in folder.iterdir()
                       if f"{carrier.folder}/{entry.name}" not in recorded):
        raise IntegrityError(f"not one of the vocabulary files {name_of_record} records (a tokenizer loader may read it)",
                             where=root / extra[0], fix=f"remove it, or {carrier.remedy}")
    saved = f"{carrier.folder}/{VOCABULARY_FILE}"
    if saved not in recorded or f"{carrier.folder}/{RANKS_FILE}" not in recorded:
        raise IntegrityError(f"carries vocabulary files but not {VOCABULARY_FILE} and {RANKS_FILE}, which name "
                             "their identity", where=folder, fix=edited)
    record = _vocabulary_record(root / saved, altered)
    if record.ranks_file != RANKS_FILE:
        raise IntegrityError(f"names the rank file {record.ranks_file!r}, not the {RANKS_FILE} beside it",
                             where=root / saved, fix=altered)
    # The bytes it hashes first: a vocabulary written by tokpack needs no parse.
    if not BpeTokenizer.saved_as(root / saved, identity):
        carried = BpeTokenizer.load_saved(root / saved).identity
        if carried != identity:
            raise IntegrityError(f"records the vocabulary {_shown(identity)}, but the one it carries in "
                                 f"{carrier.folder}/ is {_shown(carried)}", where=carrier.record, fix=edited)
    if pad_id is not None and pad_id not in record.special_tokens.values():
        raise IntegrityError(f"pad_id {pad_id} is an ordinary token of the vocabulary it carries, one its encoder "
                             "emits (losses would ignore it)", where=carrier.record, fix=edited)
    document = f"{carrier.folder}/{TOKENIZER_JSON}"
    if document in contents:
        _check_tokenizer_json(root / document, contents[document], identity, name_of_record, altered)
    for name, expected in transformers_files(record.special_tokens).items():
        path = f"{carrier.folder}/{name}"
        if path in contents and _json(contents[path]) != json.loads(expected):
            raise IntegrityError("not what the vocabulary's special tokens make (a loader would read other "
                                 "special tokens or settings from it)", where=root / path, fix=altered)


def _check_tokenizer_json(path: Path, content: bytes, identity: VocabIdentity, name_of_record: str, fix: str) -> None:
    digest = hashlib.sha256(content).hexdigest()
    if _KNOWN.get(digest) == identity:
        return
    from tokpack.vocab.loading import load_vocabulary

    try:
        found = load_vocabulary(path).identity
    except InputError as error:
        raise IntegrityError(f"not a tokenizer.json of the vocabulary {name_of_record} records ({error.what})",
                             where=path, fix=fix) from None
    if found != identity:
        raise IntegrityError(f"not the vocabulary {name_of_record} records: it reads as {_shown(found)}, the record "
                             f"says {_shown(identity)}", where=path, fix=fix)
    _KNOWN[digest] = identity


def _vocabulary_record(path: Path, fix: str) -> VocabularyRecord:
    from tokpack._schema import read_record
    from tokpack.vocab.bytelevel import VocabularyRecord

    try:
        return read_record(VocabularyRecord, path)
    except InputError as error:
        raise IntegrityError(error.what, where=path, fix=fix) from None


def _json(content: bytes) -> object:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _shown(vocabulary: VocabIdentity) -> str:
    return f"{vocabulary.scheme} {vocabulary.short} of {vocabulary.n_vocab:,} ids"


__all__ = ["Carrier", "check_carried", "pack_carrier", "vouch"]
