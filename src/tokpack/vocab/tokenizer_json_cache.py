"""A vocabulary's Hugging Face ``tokenizer.json``, kept in the tokpack cache so each pack made with
the same vocabulary carries the same document without deriving its merges again.

The document depends on the vocabulary alone (its identity names the ranks, the pattern and the
special tokens) and on how tokpack writes it (:data:`~tokpack.vocab.merge_files.TOKENIZER_JSON_LAYOUT`).
It lives at ``$TOKPACK_CACHE/tokenizer-json/<identity's SHA-256>-l<layout>.json`` with a record beside
it (:class:`CachedTokenizerJson`: the identity, the layout, the document's size and SHA-256), both
written after a derivation. A reuse reads both and takes the document only when the record is
whole, names this identity and layout, and the document, a regular file of the recorded size,
hashes to the recorded SHA-256; anything else (a missing, altered, truncated or swapped file, a
FIFO or a device in its place, which is never read, a record of another vocabulary) derives the
document again and writes both anew. The trust is that of the cache's verification
stamps (:mod:`tokpack.store.stamps`): what changes one file is caught, and only a writer who forges
the document and its record together could pass a document off.

A cache that cannot be written costs a derivation per run, nothing else.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from tokpack._schema import Record
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity
from tokpack.vocab.merge_files import TOKENIZER_JSON_LAYOUT

if TYPE_CHECKING:
    from tokpack.vocab.bytelevel import BpeTokenizer

#: The folder of the cache that holds the documents and their records.
FOLDER = "tokenizer-json"


class CachedTokenizerJson(Record):
    """``<identity>-l<layout>.record.json``: what the cached ``tokenizer.json`` beside it is."""

    schema_: Literal["tokpack.cached_tokenizer_json.v1"] = Field(default="tokpack.cached_tokenizer_json.v1",
                                                                  alias="schema")
    identity: VocabIdentity
    layout: int
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def cached_paths(identity: VocabIdentity, cache: Path) -> tuple[Path, Path]:
    """Where the ``tokenizer.json`` of ``identity`` and its record live under ``cache``."""
    stem = f"{identity.sha256}-l{TOKENIZER_JSON_LAYOUT}"
    return cache / FOLDER / f"{stem}.json", cache / FOLDER / f"{stem}.record.json"


def reuse_tokenizer_json(tokenizer: BpeTokenizer, cache: Path) -> bool:
    """Give ``tokenizer`` its ``tokenizer.json`` from ``cache`` when the cached copy checks out
    (see the module docstring), else derive it and keep it there; whether the cached copy was used.

    Raises:
        InputError: as :meth:`~tokpack.vocab.bytelevel.BpeTokenizer.to_tokenizer_json` (a special
            token spelled as a rank's token too, whatever the cache holds).
    """
    if tokenizer.has_tokenizer_json():
        return False
    tokenizer.refuse_spelled_specials()  # what a derivation refuses, a cached copy must not pass off
    from tokpack._schema import read_record

    document, record_path = cached_paths(tokenizer.identity, cache)
    try:
        record = read_record(CachedTokenizerJson, record_path) if record_path.is_file() else None
        content = _read_regular(document, record.size) if record is not None else None
    except (InputError, OSError):
        record = content = None
    if (record is not None and content is not None and record.identity == tokenizer.identity
            and record.layout == TOKENIZER_JSON_LAYOUT and len(content) == record.size
            and hashlib.sha256(content).hexdigest() == record.sha256):
        tokenizer.use_tokenizer_json(content, sha256=record.sha256)
        return True
    derived = tokenizer.tokenizer_json_bytes()
    digest = hashlib.sha256(derived).hexdigest()
    tokenizer.use_tokenizer_json(derived, sha256=digest)  # the same bytes, hashed once for the record and the pack
    from tokpack._atomic import write_atomically
    from tokpack._schema import write_record

    try:  # the document first: a record names only a document already in place
        write_atomically(document, derived)
        write_record(CachedTokenizerJson(identity=tokenizer.identity, layout=TOKENIZER_JSON_LAYOUT, size=len(derived),
                                         sha256=digest), record_path)
    except (OSError, InputError):
        pass  # an unwritable cache: the next run derives it again
    return False


def _read_regular(path: Path, size: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of ``size`` bytes, else ``None``: a FIFO or a
    device put in its place is never read (one would block, ``/dev/zero`` never end), nor a file
    of another size.

    Raises:
        OSError: it cannot be opened or read.
    """
    # Opened without blocking (a FIFO's open would wait for a writer), then told apart by its stat.
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(descriptor, "rb") as handle:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_size != size:
            return None
        return handle.read()
