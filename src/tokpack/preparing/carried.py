"""The files a pack carries for its vocabulary, with the one slow to make (``tokenizer.json``,
whose merges are derived from the ranks) kept in the cache by the vocabulary's identity.

Deriving ``tokenizer.json`` costs a tenth of a second or more for a 100k-rank vocabulary, in
every ``prepare`` that writes a pack; reading a kept copy, a few milliseconds. The copy lives in
``$TOKPACK_CACHE/tokenizer-json/<identity>/`` beside ``kept.json``, which records the vocabulary it
was made from, the version of the text and its SHA-256. A copy is used only when all three match
(the vocabulary's full identity, this version, the bytes' hash) and it reads back as that
vocabulary (a hash anyone can recompute is no proof; the pack's own check of its carried files
would read it back anyway, and remembers that it did); anything else is made again from the
vocabulary and the copy replaced: the cache saves time, it never decides what a pack holds.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from tokpack._atomic import building, remove_abandoned
from tokpack._cache import locked
from tokpack._schema import Record, read_record, write_record
from tokpack.errors import InputError
from tokpack.store.carried import means
from tokpack.vocab.bytelevel import BpeTokenizer
from tokpack.vocab.files import TOKENIZER_JSON_VERSION
from tokpack.vocab.identity import VocabIdentity

TOKENIZER_JSON = "tokenizer.json"
KEPT_RECORD = "kept.json"


class KeptTokenizerJson(Record):
    """``kept.json``: the vocabulary a kept ``tokenizer.json`` was made from, the version of its
    text (:data:`~tokpack.vocab.files.TOKENIZER_JSON_VERSION`) and its SHA-256."""

    schema_: Literal["tokpack.kept-tokenizer-json.v1"] = Field(default="tokpack.kept-tokenizer-json.v1",
                                                               alias="schema")
    vocabulary: VocabIdentity
    version: int
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def carried_files(tokenizer: BpeTokenizer, cache: Path) -> dict[str, bytes]:
    """The files a pack of ``tokenizer`` carries (:meth:`BpeTokenizer.files`), its
    ``tokenizer.json`` read from ``cache`` when a checked copy is there, else made and kept there
    for the next pack (a cache that cannot be written only costs that pack the time)."""
    directory = kept_directory(tokenizer.identity, cache)
    kept = _kept(directory, tokenizer.identity)
    if kept is not None:
        return tokenizer.files(tokenizer_json=kept)
    files = tokenizer.files()
    try:
        _keep(directory, tokenizer.identity, files[TOKENIZER_JSON])
    except (OSError, InputError):  # read-only or full: the next pack makes it again
        pass
    return files


def kept_directory(identity: VocabIdentity, cache: Path) -> Path:
    """Where the ``tokenizer.json`` of the vocabulary ``identity`` is kept in ``cache``."""
    return cache / "tokenizer-json" / identity.short


def _kept(directory: Path, identity: VocabIdentity) -> bytes | None:
    """The kept ``tokenizer.json`` of ``identity``, or ``None`` (none, another vocabulary's or
    version's, unreadable, bytes that are not the ones recorded, or a document that reads as
    another vocabulary)."""
    try:
        record = read_record(KeptTokenizerJson, directory / KEPT_RECORD)
        if record.vocabulary != identity or record.version != TOKENIZER_JSON_VERSION:
            return None
        text = (directory / TOKENIZER_JSON).read_bytes()
    except (OSError, InputError):
        return None
    if hashlib.sha256(text).hexdigest() != record.sha256 or not means(directory / TOKENIZER_JSON, identity):
        return None
    return text


def _keep(directory: Path, identity: VocabIdentity, text: bytes) -> None:
    """Publish ``text`` and its record at ``directory`` (whole or not at all), replacing what is
    there: a copy that did not check out."""
    with locked(directory):
        if _kept(directory, identity) == text:  # another process kept it meanwhile
            return
        shutil.rmtree(directory, ignore_errors=True)
        remove_abandoned(directory)
        with building(directory) as temporary:
            (temporary / TOKENIZER_JSON).write_bytes(text)
            record = KeptTokenizerJson(vocabulary=identity, version=TOKENIZER_JSON_VERSION,
                                       sha256=hashlib.sha256(text).hexdigest())
            write_record(record, temporary / KEPT_RECORD)
