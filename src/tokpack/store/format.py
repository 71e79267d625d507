"""The pack format: one directory, three files, every field documented here.

A pack holds the token ids of many documents, concatenated, with an index of where each document
starts and a record of the vocabulary that made the ids::

    PACK/
      tokens.npy   1-D ``uint16`` (when the vocabulary has at most 65,536 ids) or ``uint32``:
                   every document's ids, in document order, nothing between them. A standard
                   ``.npy`` file (format 1.0, 128-byte header), so ``numpy.load(path,
                   mmap_mode="r")`` reads it without copying.
      starts.npy   1-D ``int64``: the offset in ``tokens.npy`` of each document's first id;
                   strictly increasing, the first 0 (empty documents are not stored).
      meta.json    a :class:`PackMeta`: counts, dtype, vocabulary identity, source, how documents
                   were cut, named ranges, SHA-256 of both arrays' payloads, and a seal.
      vocabulary/  (text packs) the vocabulary the ids come from, as a user loads it: Hugging
                   Face's ``tokenizer.json`` (with ``tokenizer_config.json`` and
                   ``special_tokens_map.json``), tiktoken's ``ranks.tiktoken`` and tokpack's
                   ``vocabulary.json`` (its pattern and special tokens); each file's SHA-256 is
                   in ``meta.json``. A pack whose ``meta.json`` lists no such files has none.
      origins.npy  ``int64`` ``(n_docs, 3)``: where each document came from, ``(unit, start,
                   end)``, read as ``meta.json``'s :class:`Origins` says (a file and its bytes, a
                   record and the bytes of its text, a table and its row). A pack whose
                   ``meta.json`` records no origins (one imported from another format) has none.

A pack directory only ever appears complete: writers build it in a temporary sibling and rename
it into place. Readers check counts, sizes and the seal on open; the full checksums on request.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import numpy as np
from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from tokpack._schema import Record, SealedRecord
from tokpack.corpus.manifest import Source, SplitName
from tokpack.vocab.identity import VocabIdentity

PACK_SCHEMA = "tokpack.pack.v1"
TOKENS_FILE = "tokens.npy"
STARTS_FILE = "starts.npy"
META_FILE = "meta.json"
DATASET_FILE = "dataset.json"  # a sharded dataset's record
#: Every tokpack ``.npy`` header is this long, whatever the length, so it can be rewritten in place.
NPY_HEADER_BYTES = 128
SHA256 = r"^[0-9a-f]{64}$"
#: The named ranges that split a stream: no document is in two of them.
SPLIT_NAMES: tuple[str, ...] = get_args(SplitName)


class DocumentCut(Record):
    """How the source was cut into documents.

    ``rule`` names the rule (``"newline"``: at the last newline at or before ``document_bytes``,
    see :mod:`tokpack.corpus.documents`; ``"game"``: one chess game a document). ``separator``,
    when set, is the text that ended each document and appears in none (written only when set,
    so the records of cuts without one are unchanged).
    """

    rule: str
    document_bytes: int | None = Field(default=None, ge=1)
    separator: str | None = Field(default=None, min_length=1)

    @model_serializer(mode="wrap")
    def _no_separator_field_without_one(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("separator") is None:
            data.pop("separator", None)
        return data


class Span(Record):
    """A half-open range ``[start, end)`` of documents, tokens and (for text) source bytes."""

    documents: tuple[int, int]
    tokens: tuple[int, int]
    source_bytes: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        # Every reader takes these as slices: a reversed or negative one describes nothing.
        for name in ("documents", "tokens", "source_bytes"):
            bounds = getattr(self, name)
            if bounds is not None and not 0 <= bounds[0] <= bounds[1]:
                raise ValueError(f"{name} [{bounds[0]}, {bounds[1]}) is not a range (0 <= start <= end); the record was edited: restore it or rebuild")
        return self


class StreamRecord(SealedRecord):
    """What a pack's ``meta.json`` and a sharded dataset's ``dataset.json`` both record about
    their one stream of ids.

    Fields:
        n_docs / n_tokens: how many documents (``starts.npy``) and ids (``tokens.npy``).
        dtype: ``"uint16"`` or ``"uint32"``, the element type of the ids.
        vocabulary: identity of the vocabulary every id comes from.
        source, cut: the input and how it was cut into documents.
        ranges: named spans (``train``, ``validation``, ``test``) in document order; readers
            that train read ``train`` only.
        counts: what the encoder counted besides ids (e.g. unknown moves), by name.
        pad_id: the id readers pad windows with and losses ignore: a vocabulary id the encoder
            never emits (``<pad>`` in chess, ``<|endoftext|>`` in text); ``None`` when the
            vocabulary has none, and then readers refuse to pad.
        tokens_sha256 / starts_sha256: SHA-256 of the ids' and the starts' payloads (the
            little-endian bytes, no header), of the whole stream.
        seal: SHA-256 of every other field, so a hand-edited record is refused on open.
    """

    n_docs: int = Field(ge=0)
    n_tokens: int = Field(ge=0)
    dtype: Literal["uint16", "uint32"]
    vocabulary: VocabIdentity
    source: Source
    cut: DocumentCut
    ranges: dict[str, Span] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    pad_id: int | None = Field(default=None, ge=0)
    tokens_sha256: str = Field(pattern=SHA256)
    starts_sha256: str = Field(pattern=SHA256)

    @model_validator(mode="after")
    def _consistent(self) -> StreamRecord:
        # A record's seal has no key: a forged record with a recomputed seal must still describe
        # a stream its readers can serve (a padding id that fits the ids, ranges inside it).
        if self.pad_id is not None and self.pad_id >= self.vocabulary.n_vocab:
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabulary (n_vocab {self.vocabulary.n_vocab})")
        for name, span in self.ranges.items():
            (d0, d1), (t0, t1) = span.documents, span.tokens
            if not (0 <= d0 <= d1 <= self.n_docs and 0 <= t0 <= t1 <= self.n_tokens):
                raise ValueError(f"range {name!r} (documents {d0}-{d1}, ids {t0}-{t1}) lies outside the stream "
                                 f"({self.n_docs} documents, {self.n_tokens} ids)")
        # A document in two splits would be trained on and evaluated on (other named ranges, such
        # as a chess dataset's months, are selections inside the splits and may overlap them).
        splits = sorted((span.documents, name) for name, span in self.ranges.items()
                        if name in SPLIT_NAMES and span.documents[1] > span.documents[0])
        for ((a0, a1), first), ((b0, b1), second) in zip(splits, splits[1:]):
            if b0 < a1:
                raise ValueError(f"ranges {first!r} (documents {a0}-{a1}) and {second!r} (documents {b0}-{b1}) overlap: "
                                 "a split's documents belong to it alone")
        needed = token_dtype(self.vocabulary.n_vocab)
        if self.dtype != needed.name:
            raise ValueError(f"dtype {self.dtype} is not the id type of a vocabulary of {self.vocabulary.n_vocab:,} ids "
                             f"({needed.name})")
        return self


#: The folder of a pack that holds its vocabulary's files.
VOCABULARY_DIR = "vocabulary"
#: The file of a pack that says where each document came from (see :class:`Origins`).
ORIGINS_FILE = "origins.npy"
#: How a row ``(unit, start, end)`` of ``origins.npy`` is read (see :class:`Origins`).
OriginKind = Literal["bytes", "records", "rows"]


class Origins(Record):
    """Where each document of a pack came from: ``origins.npy`` holds one row ``(unit, start,
    end)`` a document, read by ``kind``:

    - ``bytes``: bytes ``[start, end)`` of the file ``files[unit]`` (a text file, a file of a
      folder): the document's ids decode to exactly those bytes;
    - ``records``: bytes ``[start, end)`` of the UTF-8 text of record ``unit`` (a JSON Lines
      line, a Parquet row, counted from 0) of ``files[0]``;
    - ``rows``: row ``start`` (``end`` is ``start + 1``) of the table ``files[unit]`` (a chess
      game of a month table).

    ``files`` are names, not paths (packs move): a text file's name, ``FOLDER/relative/path`` for
    a folder's files. ``sha256``: of ``origins.npy``'s payload (little-endian ``int64``, no
    header), so an edited file is refused.
    """

    kind: OriginKind
    files: list[str]
    sha256: str = Field(pattern=SHA256)


class ShardPlace(Record):
    """Where a shard of a sharded job belongs: shard ``rank`` of ``world_size``. Recorded (and
    sealed) in the shard's own ``meta.json``, so a shard copied or moved under another rank's name
    is refused rather than taken for that rank's documents.

    >>> ShardPlace(rank=1, world_size=4)
    ShardPlace(rank=1, world_size=4)
    """

    rank: int = Field(ge=0)
    world_size: int = Field(ge=1)

    @model_validator(mode="after")
    def _inside(self) -> ShardPlace:
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is outside a job of {self.world_size} shards")
        return self


class PackMeta(StreamRecord):
    """``meta.json`` (``"schema": "tokpack.pack.v1"``): everything a reader needs to trust
    ``tokens.npy`` and ``starts.npy``; the fields are :class:`StreamRecord`'s, and
    ``vocabulary_files``: the SHA-256 of each file the pack carries of its vocabulary, by its path
    inside the pack (``vocabulary/tokenizer.json``, ...); empty when it carries none;
    ``origins``: where each document came from (``origins.npy``, see :class:`Origins`), or
    ``None``. ``shard``: for a shard of a sharded job, its :class:`ShardPlace`; ``None`` for any
    other pack."""

    schema_: Literal["tokpack.pack.v1"] = Field(default="tokpack.pack.v1", alias="schema")
    vocabulary_files: dict[str, Annotated[str, Field(pattern=SHA256)]] = Field(default_factory=dict)
    origins: Origins | None = None
    shard: ShardPlace | None = None

    @model_serializer(mode="wrap")
    def _no_empty_optional_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when empty, from the JSON and from the seal alike: the record of a pack without
        # vocabulary files or origins, or that is no shard, holds no such field, so one sealed
        # without them opens.
        data: dict[str, Any] = handler(self)
        for optional in ("vocabulary_files", "origins", "shard"):
            if not data.get(optional):
                data.pop(optional, None)
        return data


def token_dtype(n_vocab: int) -> np.dtype:
    """The narrowest id type that holds ``n_vocab`` ids.

    >>> token_dtype(65_536), token_dtype(65_537)
    (dtype('uint16'), dtype('uint32'))
    """
    return np.dtype(np.uint16) if n_vocab <= 1 << 16 else np.dtype(np.uint32)


def npy_header(dtype: np.dtype, length: int, *, columns: int | None = None) -> bytes:
    """A ``.npy`` 1.0 header for a 1-D little-endian array (``columns``: a C-ordered 2-D one of
    that many columns), padded to :data:`NPY_HEADER_BYTES`.

    >>> header = npy_header(np.dtype(np.uint16), 3)
    >>> len(header), header[:8]
    (128, b'\\x93NUMPY\\x01\\x00')
    """
    # Spelled as numpy spells it, so the file equals what ``numpy.save`` writes for the same array.
    shape = f"({length},)" if columns is None else f"({length}, {columns})"
    text = f"{{'descr': '{dtype.newbyteorder('<').str}', 'fortran_order': False, 'shape': {shape}, }}"
    text = text.ljust(NPY_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin-1")
