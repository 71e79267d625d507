"""Sharded datasets: many packs of one vocabulary, listed in ``dataset.json``, read as one stream.

::

    DATASET/
      dataset.json        a :class:`DatasetRecord`: the shards in order with their counts and
                          checksums, the one vocabulary they share, the whole stream's checksums
                          and ranges, and a seal
      shard-00000/ …      one pack per shard (see :mod:`tokpack.store.format`)

Opening checks that exactly the listed shards are there, in order, each matching its entry and the
shared vocabulary, and the global starts against the record; each shard's checksums are verified
when it is first read (and stamped, see :mod:`tokpack.store.stamps`); ``verify()`` also hashes
every shard and the whole stream at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import Field

from tokpack._schema import Record, read_record, write_record
from tokpack.errors import InputError, IntegrityError, VocabularyMismatch
from tokpack.store.format import DATASET_FILE, SHA256, DocumentCut, PackMeta, Source, Span, StreamRecord
from tokpack.store.reader import PACK_FILES, Pack, check_ranges
from tokpack.store.source import RecordedStream
from tokpack.store.stamps import is_stamped, stamp
from tokpack.vocab.identity import VocabIdentity

SHARD_PREFIX = "shard-"
_HASH_CHUNK = 32 << 20


class ShardEntry(Record):
    """One shard as ``dataset.json`` lists it."""

    name: str
    n_docs: int = Field(ge=0)
    n_tokens: int = Field(ge=0)
    tokens_sha256: str = Field(pattern=SHA256)
    starts_sha256: str = Field(pattern=SHA256)


class DatasetRecord(StreamRecord):
    """``dataset.json`` (``"schema": "tokpack.dataset.v1"``): the shards of one stream, in order.

    The other fields are :class:`StreamRecord`'s and describe the whole stream:
    ``tokens_sha256``/``starts_sha256`` hash it exactly as the merged pack's ``meta.json`` would,
    so schedules made on either agree.
    """

    schema_: Literal["tokpack.dataset.v1"] = Field(default="tokpack.dataset.v1", alias="schema")
    shards: list[ShardEntry]


def shard_name(rank: int) -> str:
    """The directory name of shard ``rank``.

    >>> shard_name(3)
    'shard-00003'
    """
    return f"{SHARD_PREFIX}{rank:05d}"


class PartsStream:
    """Reads over a stream stored as consecutive parts (``self.shards``, each with a ``tokens``
    array and ``gather_rows``), at token ``self.offsets``: one gather per part, never a copy of
    the whole."""

    shards: Sequence[Any]
    offsets: np.ndarray
    dtype: np.dtype

    def _reading(self, index: int) -> None:
        """Called before part ``index`` is first read (a dataset verifies the shard there)."""

    def gather_rows(self, origins: np.ndarray, width: int) -> np.ndarray:
        """Rows ``stream[o : o + width]``: one gather per part, and a join for the few rows that
        cross from one part into the next."""
        origins = np.asarray(origins, dtype=np.int64)
        out = np.empty((len(origins), width), dtype=self.dtype)
        part_of = np.searchsorted(self.offsets, origins, side="right") - 1
        local = origins - self.offsets[part_of]
        inside = local + width <= self.offsets[part_of + 1] - self.offsets[part_of]
        for index in np.unique(part_of[inside]):  # a loop over parts, not over rows
            self._reading(int(index))
            rows = inside & (part_of == index)
            out[rows] = self.shards[index].gather_rows(local[rows], width)
        for row in np.flatnonzero(~inside):
            out[row] = self.take(origins[row] + np.arange(width))
        return out

    def read_span(self, start: int, end: int) -> np.ndarray:
        """The ids ``stream[start:end]`` as one array: a slice of each part it covers."""
        first = int(np.searchsorted(self.offsets, start, side="right")) - 1
        pieces = []
        index = first
        while index < len(self.shards) and self.offsets[index] < end:
            lo, hi = max(start, int(self.offsets[index])), min(end, int(self.offsets[index + 1]))
            if hi > lo:
                self._reading(index)
                pieces.append(np.asarray(self.shards[index].tokens[lo - self.offsets[index] : hi - self.offsets[index]]))
            index += 1
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.asarray(self.shards[0].tokens[:0]).dtype)

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The ids at arbitrary stream ``positions``."""
        positions = np.asarray(positions, dtype=np.int64)
        flat = positions.ravel()
        out = np.empty(flat.shape, dtype=self.dtype)
        part_of = np.searchsorted(self.offsets, flat, side="right") - 1
        for index in np.unique(part_of):
            self._reading(int(index))
            chosen = part_of == index
            out[chosen] = self.shards[index].tokens[flat[chosen] - self.offsets[index]]
        return out.reshape(positions.shape)


class ShardedDataset(PartsStream, RecordedStream):
    """A sharded dataset opened as one token stream (see the module docstring)."""

    def __init__(self, path: Path, *, verify: bool | None = None) -> None:
        """Args:
            verify: ``None`` verifies each shard when it is first read (then trusts its stamp);
                ``True`` verifies every shard and the whole stream now; ``False`` never hashes.

        Raises:
            IntegrityError: a missing, extra, reordered or altered shard, two vocabularies, or an
                edited record.
        """
        self.path = Path(path)
        self.meta: DatasetRecord = read_record(DatasetRecord, self.path / DATASET_FILE)
        self.meta.check_seal(self.path / DATASET_FILE)
        listed = [entry.name for entry in self.meta.shards]
        present = sorted(p.name for p in self.path.iterdir() if p.is_dir() and p.name.startswith(SHARD_PREFIX))
        if extra := sorted(set(present) - set(listed)):
            raise IntegrityError(f"shard {extra[0]} is not listed in {DATASET_FILE}", where=self.path)
        if missing := [name for name in listed if name not in present]:
            raise IntegrityError(f"shard {missing[0]} listed in {DATASET_FILE} is missing", where=self.path)
        if listed != sorted(listed) or len(set(listed)) != len(listed):
            raise IntegrityError("shards are not listed once each in shard order "
                                 f"({', '.join(listed[:4])}{', …' if len(listed) > 4 else ''})", where=self.path / DATASET_FILE,
                                 fix="the record was reordered; rebuild it")
        self.shards = [Pack(self.path / entry.name, verify=False) for entry in self.meta.shards]
        self._verified = [verify is False] * len(self.shards)
        for entry, shard in zip(self.meta.shards, self.shards):
            _check_shard(entry, shard, self.meta.vocabulary)
        token_counts = np.array([s.n_tokens for s in self.shards], dtype=np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(token_counts)))
        if self.offsets[-1] != self.meta.n_tokens or sum(s.n_docs for s in self.shards) != self.meta.n_docs:
            raise IntegrityError("shard counts do not add up to the dataset's", where=self.path / DATASET_FILE)
        self.starts = np.concatenate([s.starts + o for s, o in zip(self.shards, self.offsets)] or [np.zeros(0, np.int64)])
        self.dtype = np.dtype(self.meta.dtype)
        if hashlib.sha256(self.starts.astype("<i8").tobytes()).hexdigest() != self.meta.starts_sha256:
            raise IntegrityError("the shards' documents, in the listed order, differ from "
                                 "the record's starts", where=self.path / DATASET_FILE, fix="shards were reordered or replaced; rebuild the dataset")
        check_against_shards(self.path / DATASET_FILE, self.meta, [s.meta for s in self.shards], self.starts)
        if verify:
            self.verify()

    def _reading(self, index: int) -> None:
        if not self._verified[index]:
            shard = self.shards[index]
            if not shard.stamped():
                shard.verify()
            self._verified[index] = True

    def verify(self) -> None:
        """Verify every shard, then hash the whole stream and its starts against the record, and
        leave a verification stamp of the whole dataset (see :meth:`stamped`).

        Raises:
            IntegrityError: naming the shard or file that does not match.
        """
        tokens_sha, starts_sha = stream_hashes(self.shards, verify=True)
        check_documents_once(self.path, self.shards)
        if (tokens_sha, starts_sha) != (self.meta.tokens_sha256, self.meta.starts_sha256):
            raise IntegrityError("the stream's checksums differ from the record", where=self.path / DATASET_FILE,
                                 fix="shards were reordered or replaced, or the record was edited; rebuild the dataset")
        self._verified = [True] * len(self.shards)
        stamp(self.path, self.meta.seal, dataset_files(self.meta.shards, [shard.meta for shard in self.shards]))

    def stamped(self) -> bool:
        """Whether the whole dataset (every shard and the stream's checksums, which schedules and
        exports name the data by) was verified and none of its files changed since."""
        return is_stamped(self.path, self.meta.seal, dataset_files(self.meta.shards, [shard.meta for shard in self.shards]))

    def __repr__(self) -> str:
        return f"ShardedDataset({str(self.path)!r}, shards={len(self.shards)}, n_tokens={self.n_tokens})"


def check_places(where: Path | str, names: Sequence[str], shard_metas: Sequence[PackMeta]) -> None:
    """Check that each shard of a sharded job is where its own record says it belongs: the
    shard named ``shard-0000r`` records rank ``r`` of ``len(names)`` (see
    :class:`~tokpack.store.format.ShardPlace`). Shards that record no place (packs listed by hand)
    are not checked, but a dataset may not mix the two.

    Raises:
        IntegrityError: a shard copied or moved under another rank's name, or from a job of
            another size, naming ``where``, the shard and where it belongs.
    """
    places = [meta.shard for meta in shard_metas]
    if all(place is None for place in places):
        return
    for index, (name, place) in enumerate(zip(names, places)):
        if place is None:
            raise IntegrityError(f"shard {name} records no place in a job while the others do", where=where,
                                 fix="it is not one of this job's shards; remake it with its job, or rebuild the dataset")
        if (place.rank, place.world_size) != (index, len(names)) or name != shard_name(index):
            raise IntegrityError(f"{name} holds shard {place.rank} of a job of {place.world_size}, not shard {index} "
                                 f"of {len(names)} (copied or moved from another rank?)", where=where,
                                 fix=f"delete {name} (and its .done marker) and run its task again to remake it")


def check_documents_once(where: Path | str, shards: Sequence[Pack]) -> None:
    """Check that no two shards hold the same document of the input: their origins (see
    :class:`~tokpack.store.format.Origins`) overlap nowhere. A shard copied under another rank's
    name with its place edited and its seal recomputed (a seal has no key) records that rank, but
    still the documents of the shard it was copied from. Shards that record no origins are not
    compared. Linear in documents (one sort).

    Raises:
        IntegrityError: naming both shards and the span they share.
    """
    from tokpack.store.origins import read_origins

    names: dict[str, int] = {}
    files: list[np.ndarray] = []
    units: list[np.ndarray] = []
    spans: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    kinds: dict[int, str] = {}
    for index, shard in enumerate(shards):
        found = read_origins(shard)
        if found is None or not len(found[1]):
            continue
        record, rows = found
        # A place a shard names more than once is one place (the position scheme makes a document
        # of every position of a game, each naming the game's row): only other shards may not share it.
        rows, kinds[index] = np.unique(np.asarray(rows), axis=0), record.kind
        ids = np.array([names.setdefault(name, len(names)) for name in record.files], np.int64)
        records = record.kind == "records"  # a span of a record's text: the record is part of the place
        files.append(np.full(len(rows), ids[0], np.int64) if records else ids[rows[:, 0]])
        units.append(rows[:, 0] if records else np.full(len(rows), -1, np.int64))
        spans.append(rows[:, 1:])
        owners.append(np.full(len(rows), index, np.int64))
    if not spans:
        return
    file, unit, span, owner = (np.concatenate(parts) for parts in (files, units, spans, owners))
    order = np.lexsort((span[:, 0], unit, file))
    file, unit, span, owner = file[order], unit[order], span[order], owner[order]
    # Sorted by place, any two overlapping spans make some neighbouring pair overlap.
    shared = ((file[1:] == file[:-1]) & (unit[1:] == unit[:-1]) & (span[1:, 0] < span[:-1, 1])
              & (span[1:, 1] > span[1:, 0]))
    if not shared.any():
        return
    at = int(np.argmax(shared)) + 1
    first, second = sorted((int(owner[at - 1]), int(owner[at])))
    name = next(name for name, number in names.items() if number == file[at])
    start, end = int(span[at, 0]), int(span[at, 1])
    place = {"records": f"{name} record {int(unit[at])} bytes [{start}, {end})", "rows": f"{name} row {start}"}.get(
        kinds[second], f"{name} bytes [{start}, {end})")
    a, b = shards[first].path.name, shards[second].path.name
    raise IntegrityError(f"{b} holds {place}, which {a} holds too (one of them copied under another rank's name?)",
                         where=where, fix=f"delete the copy (or both, {a} and {b}) with its .done marker, and run its "
                                          "task again to remake it")


def check_against_shards(where: Path | str, record: DatasetRecord, shard_metas: Sequence[PackMeta],
                         starts: np.ndarray) -> None:
    """Check a dataset's record against its shards' records, as a pack's record is checked
    against its arrays: each shard in its place (:func:`check_places`), the padding id and id
    type every shard records, and every named range on document starts of the whole stream (a
    hand-edited record with a recomputed seal passes the seal, but not this).

    Raises:
        IntegrityError: naming ``where`` and what differs.
    """
    names = [entry.name for entry in record.shards]
    check_places(where, names, shard_metas)
    for index, meta in enumerate(shard_metas):
        name = names[index] if index < len(names) else str(index)
        if meta.pad_id != record.pad_id:
            raise IntegrityError(f"pad_id {record.pad_id} differs from shard {name}'s {meta.pad_id}", where=where,
                                 fix="the record was edited; rebuild the dataset")
        if meta.dtype != record.dtype:
            raise IntegrityError(f"dtype {record.dtype} differs from shard {name}'s {meta.dtype}", where=where,
                                 fix="the record was edited; rebuild the dataset")
    check_ranges(where, record.ranges, starts, record.n_tokens)
    said = shards_say(where, names, shard_metas)
    fix = "the record was edited; rebuild the dataset"
    if record.ranges != said.ranges:
        raise IntegrityError(f"ranges differ from what its shards record ({_shown(record.ranges)}; the shards say "
                             f"{_shown(said.ranges)})", where=where, fix=fix)
    if record.counts != said.counts:
        raise IntegrityError(f"counts differ from what its shards record ({record.counts}; the shards add up to "
                             f"{said.counts})", where=where, fix=fix)
    check_cut_and_source(where, record.cut, record.source, said, fix=fix)


class ShardsSay(NamedTuple):
    """What the shards' records say of the whole stream they make."""

    #: their ranges moved to the stream's offsets and joined by name
    ranges: dict[str, Span]
    #: their counts summed by name
    counts: dict[str, int]
    #: the cut every shard records (``None``: they differ)
    cut: DocumentCut | None
    #: the source every shard records (``None``: they differ, as a chess job's month tables do)
    source: Source | None


def shards_say(where: Path | str, names: Sequence[str], metas: Sequence[PackMeta]) -> ShardsSay:
    """What the records ``metas`` of shards ``names`` (in stream order) say of their stream:
    what a dataset's record must say too (see :class:`ShardsSay`).

    Raises:
        IntegrityError: a range whose parts are not contiguous across shards.
    """
    ranges: dict[str, Span] = {}
    counts: dict[str, int] = {}
    docs = tokens = 0
    for name, meta in zip(names, metas):
        for range_name, span in meta.ranges.items():
            moved = Span(documents=(span.documents[0] + docs, span.documents[1] + docs),
                         tokens=(span.tokens[0] + tokens, span.tokens[1] + tokens))
            if range_name in ranges:
                joined = ranges[range_name]
                if joined.tokens[1] != moved.tokens[0] or joined.documents[1] != moved.documents[0]:
                    raise IntegrityError(f"range {range_name!r} of shard {name} does not continue the one before it",
                                         where=where, fix="the shards are not one job's; rebuild the dataset")
                moved = Span(documents=(joined.documents[0], moved.documents[1]), tokens=(joined.tokens[0], moved.tokens[1]))
            ranges[range_name] = moved
        for key, value in meta.counts.items():
            counts[key] = counts.get(key, 0) + value
        docs, tokens = docs + meta.n_docs, tokens + meta.n_tokens
    cuts = {meta.cut for meta in metas}
    sources = {meta.source for meta in metas}
    return ShardsSay(ranges=ranges, counts=counts, cut=cuts.pop() if len(cuts) == 1 else None,
                     source=sources.pop() if len(sources) == 1 else None)


def check_cut_and_source(where: Path | str, cut: DocumentCut, source: Source, said: ShardsSay, *, fix: str) -> None:
    """A dataset's ``cut`` is the one every shard records; its ``source`` is theirs when they
    share one (a chess job's shards each record their own tables, and the dataset all of them).

    Raises:
        IntegrityError: naming ``where`` and what differs.
    """
    if said.cut is None:
        raise IntegrityError("its shards record different cuts: they are not one job's", where=where, fix=fix)
    if cut != said.cut:
        raise IntegrityError(f"cut differs from what its shards record ({cut.model_dump(exclude_none=True)}; the "
                             f"shards say {said.cut.model_dump(exclude_none=True)})", where=where, fix=fix)
    if said.source is not None and source != said.source:
        raise IntegrityError(f"source differs from what its shards record ({source.name} {source.sha256[:12]}…; the "
                             f"shards say {said.source.name} {said.source.sha256[:12]}…)", where=where, fix=fix)


def _shown(ranges: dict[str, Span]) -> str:
    return ", ".join(f"{name} documents [{span.documents[0]}, {span.documents[1]})" for name, span in ranges.items()) or "none"


def _pieces(tokens: np.ndarray) -> Iterator[np.ndarray]:
    step = max(1, _HASH_CHUNK // tokens.itemsize)
    for offset in range(0, len(tokens), step):
        yield tokens[offset : offset + step]


def _check_shard(entry: ShardEntry, shard: Pack, vocabulary: VocabIdentity) -> None:
    if shard.vocabulary != vocabulary:
        raise VocabularyMismatch(f"vocabulary {shard.vocabulary.short} differs from the dataset's {vocabulary.short}", where=shard.path)
    meta = shard.meta
    if (meta.n_docs, meta.n_tokens, meta.tokens_sha256, meta.starts_sha256) != (
        entry.n_docs, entry.n_tokens, entry.tokens_sha256, entry.starts_sha256):
        raise IntegrityError(f"does not match its entry in {DATASET_FILE} (altered or replaced)", where=shard.path)


def stream_hashes(shards: Sequence[Any], *, verify: bool = False) -> tuple[str, str]:
    """SHA-256 of the concatenated tokens and of the global starts of ``shards`` (each with
    ``tokens``, ``starts`` and ``n_tokens``), streamed. With ``verify`` (packs only), each shard
    is verified in the same single read of its ids.

    Raises:
        IntegrityError: with ``verify``, a shard that does not match its ``meta.json``.
    """
    tokens_hash, starts_hash, offset = hashlib.sha256(), hashlib.sha256(), 0
    for shard in shards:
        if verify:
            shard.verify(stream_hash=tokens_hash)
        else:
            for piece in _pieces(shard.tokens):
                tokens_hash.update(piece.tobytes())
        starts_hash.update((shard.starts + offset).astype("<i8").tobytes())
        offset += shard.n_tokens
    return tokens_hash.hexdigest(), starts_hash.hexdigest()


def write_dataset(path: Path, shard_names: Sequence[str], *, source: Source, cut: DocumentCut) -> DatasetRecord:
    """Write ``dataset.json`` for the complete shards ``shard_names`` (already in ``path``).

    The ranges of the shards, moved to global offsets, are joined by name; a name whose spans
    are not contiguous across shards is refused.

    Raises:
        InputError / IntegrityError: shards of two vocabularies or padding ids, or ranges that do not join.
    """
    path = Path(path)
    shards = [Pack(path / name, verify=False) for name in shard_names]  # verified below, in the pass that hashes the stream
    if not shards:
        raise InputError("a dataset needs at least one shard", where=path)
    check_places(path, [shard.path.name for shard in shards], [shard.meta for shard in shards])
    check_documents_once(path, shards)
    first: PackMeta = shards[0].meta
    for shard in shards[1:]:
        if shard.vocabulary != first.vocabulary or shard.meta.pad_id != first.pad_id:
            raise IntegrityError(f"vocabulary or padding id differs from {shards[0].path.name}'s", where=shard.path)
    said = shards_say(path, [shard.path.name for shard in shards], [shard.meta for shard in shards])
    check_cut_and_source(path, cut, source, said, fix="pass the cut and source the shards were made with")
    ranges, counts = said.ranges, said.counts
    docs, tokens = sum(shard.n_docs for shard in shards), sum(shard.n_tokens for shard in shards)
    tokens_sha, starts_sha = stream_hashes(shards, verify=True)
    record = DatasetRecord(
        n_docs=docs, n_tokens=tokens, dtype=first.dtype, vocabulary=first.vocabulary, source=source, cut=cut,
        ranges=ranges, counts=counts, pad_id=first.pad_id,
        shards=[ShardEntry(name=s.path.name, n_docs=s.n_docs, n_tokens=s.n_tokens,
                           tokens_sha256=s.meta.tokens_sha256, starts_sha256=s.meta.starts_sha256) for s in shards],
        tokens_sha256=tokens_sha, starts_sha256=starts_sha,
    )
    record = record.sealed()
    write_record(record, path / DATASET_FILE)
    # Every shard was verified and the stream hashed in one pass above: the checksums recorded
    # are of what was read, as ShardedDataset.verify() would find them.
    stamp(path, record.seal, dataset_files(record.shards, [shard.meta for shard in shards]))
    return record


def dataset_files(entries: Sequence[ShardEntry], metas: Sequence[PackMeta]) -> list[str]:
    """Every file of a dataset a verification stamp covers: its record and each shard's files."""
    return [DATASET_FILE, *(f"{entry.name}/{name}" for entry, meta in zip(entries, metas)
                            for name in (*PACK_FILES, *meta.vocabulary_files))]


def merge_dataset(dataset: ShardedDataset, destination: Path) -> PackMeta:
    """Concatenate a sharded dataset into one pack, streaming (memory stays flat).

    The merged pack's checksums equal the dataset's, and it carries the vocabulary files its
    first shard carries (checked against that shard's record).
    """
    from tokpack.store.writer import PackWriter

    with PackWriter(destination, vocabulary=dataset.vocabulary) as writer:
        first = dataset.shards[0] if dataset.shards else None
        if first is not None and first.vocabulary_dir is not None:
            first.verify_vocabulary_files()
            writer.add_vocabulary_files({path.name: path.read_bytes() for path in sorted(first.vocabulary_dir.iterdir())
                                         if f"{path.parent.name}/{path.name}" in first.meta.vocabulary_files})
        for shard in dataset.shards:
            writer.append_pack(shard)
        meta = writer.commit(source=dataset.meta.source, cut=dataset.meta.cut, ranges=dataset.meta.ranges,
                             counts=dataset.meta.counts, pad_id=dataset.meta.pad_id)
    return meta


__all__ = ["DatasetRecord", "ShardEntry", "ShardedDataset", "check_against_shards", "check_documents_once", "check_places", "merge_dataset", "shard_name", "write_dataset"]
