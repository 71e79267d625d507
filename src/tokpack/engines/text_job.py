"""The text kind of sharded job: its ``job.json`` (:class:`ShardJob`), its shards cut on input
units, and how one is written; the engines' lifecycle (:mod:`tokpack.engines.lifecycle`) does
the rest.

Shard ``r`` of ``W`` encodes input units ``[r*U//W, (r+1)*U//W)``; units come from
:mod:`tokpack.corpus.sources` in a fixed order, so the shards, and every byte of them, are the
same whichever engine, machine or retry computes them. Every task compares the inputs with what
``job.json`` pinned before it reads them: a file or manifest that changed, appeared or went
meanwhile would cut the units differently, so the task refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, overload

from pydantic import Field

from tokpack._progress import PrepareProgress
from tokpack._schema import SealedRecord
from tokpack.corpus.sources import Format, InputFile, OnError, Pins, open_corpus
from tokpack.engines.kinds import JobOrigins, JobSupply, ShardOrigin
from tokpack.errors import InputError
from tokpack.preparing.options import Execution
from tokpack.preparing.preparation import write_pack
from tokpack.store.dataset import shard_name
from tokpack.store.format import DocumentCut, ShardPlace, Source
from tokpack.vocab.bytelevel import BpeTokenizer, encoder_from_spec, encoder_spec
from tokpack.vocab.identity import VocabIdentity


class ShardJob(SealedRecord):
    """``job.json``: everything a shard task needs, so any process anywhere computes the same shard.

    Sealed: a job is never edited once shards are made from it (every shard marker names the
    seal of the job it belongs to, and a marker of another job is refused). ``pins`` holds the
    SHA-256 of every file the documents come from and of the manifest that splits them (or its
    absence), as they were when the job began; a task that finds any of them otherwise refuses."""

    schema_: Literal["tokpack.job.v2"] = Field(default="tokpack.job.v2", alias="schema")
    corpus: str
    format: Format
    source: Source
    text_field: str = "text"
    on_error: OnError = "raise"
    document_bytes: int = Field(ge=4)
    batch_documents: int = Field(ge=1)
    world_size: int = Field(ge=1)
    vocabulary: VocabIdentity
    separator: str | None = Field(default=None, min_length=1, description="the text that ends a document, if any")
    manifest: str | None = Field(default=None, description="a text file's manifest, when not the one beside it")
    pins: Pins



def unit_span(rank: int, world_size: int, n_units: int) -> tuple[int, int]:
    """The units of shard ``rank``: as equal as integers allow, contiguous, covering all.

    >>> [unit_span(r, 3, 10) for r in range(3)]
    [(0, 3), (3, 6), (6, 10)]
    """
    return rank * n_units // world_size, (rank + 1) * n_units // world_size



#: The encoder the last shard of this process was written with (a worker process writes many).
_last_encoder: list[BpeTokenizer] = []


def _reused(tokenizer: BpeTokenizer) -> BpeTokenizer:
    """``tokenizer``, or the equal one (same identity: the same ranks, pattern and special tokens)
    this process wrote its last shard with, so a worker builds the compiled encoder's tables and
    the carried vocabulary files once, not once per shard. Its piece caches are exact, so the ids
    are the same either way. Only the last one is kept."""
    if _last_encoder and _last_encoder[0].identity == tokenizer.identity:
        return _last_encoder[0]
    _last_encoder[:] = [tokenizer]
    return tokenizer


def _write_shard(dataset: Path, rank: int, job: ShardJob, encoder: BpeTokenizer, workers: int | None,
                 report: Callable[[PrepareProgress], None] | None) -> None:
    tokenizer = _reused(encoder)
    with open_corpus(job.corpus, document_bytes=job.document_bytes, on_error=job.on_error,
                     text_field=job.text_field, format=job.format, separator=job.separator, manifest=job.manifest) as source:
        check_pins(job, source.pins(), source.record)
        first, last = unit_span(rank, job.world_size, source.n_units)
        write_pack(source, tokenizer, dataset / shard_name(rank), first_unit=first, last_unit=last,
                   execution=Execution(batch_documents=job.batch_documents, workers=workers, report=report),
                   shard=ShardPlace(rank=rank, world_size=job.world_size))



def check_pins(job: ShardJob, pins: Pins, record: Source) -> None:
    """Refuse to cut the corpus for ``job`` when anything it reads (``pins``, ``record``: a source's
    :meth:`~tokpack.corpus.sources.DocumentSource.pins` and record now) differs from what the job
    pinned: an input file changed, added or removed, or the manifest that splits it changed,
    appeared or went (its units would be cut otherwise, and a shard would drop or repeat
    documents).

    Raises:
        InputError: naming the first file that differs, and the fix.
    """
    fix = "restore it as it was when the job began, or start a new job in a new folder"
    was, now = job.pins.manifest, pins.manifest
    if now is not None and was is None:
        raise InputError("appeared since the job began, which read the corpus without a manifest (all of it "
                         "training); the shards still to make would be cut by its ranges", where=now.path,
                         fix="move it away until the job is done, or start a new job in a new folder")
    if was is not None and now is None:
        raise InputError("is gone since the job began, whose ranges came from it", where=was.path, fix=fix)
    if was is not None and now is not None and was != now:
        if was.path != now.path:
            raise InputError(f"the job's ranges came from this manifest; {now.path} applies now instead",
                             where=was.path, fix=fix)
        raise InputError(f"changed since the job began (SHA-256 {_short(was)}, now {_short(now)}): the shards still to "
                         "make would be cut by other ranges", where=now.path, fix=fix)
    if pins.inputs != job.pins.inputs:
        before, after = {entry.path: entry for entry in job.pins.inputs}, {entry.path: entry for entry in pins.inputs}
        where = Path(job.corpus)
        for path in sorted(before.keys() | after.keys()):
            if before.get(path) != after.get(path):
                named = where / path if job.format == "directory" else Path(path)
                what = ("appeared since the job began" if path not in before else "is gone since the job began"
                        if path not in after else f"changed since the job began (SHA-256 {_short(before[path])}, "
                        f"now {_short(after[path])})")
                raise InputError(what, where=named, fix=fix)
    if record != job.source:  # the same files, hashed the same: only the options could differ
        raise InputError(f"changed since the job began ({job.source.sha256[:16]}…)", where=job.corpus, fix=fix)


def _short(entry: InputFile) -> str:
    return "none (unreadable)" if entry.sha256 is None else f"{entry.sha256[:16]}…"



def _origins(job: ShardJob) -> JobOrigins:
    """A text job's records: every shard records the whole input's (each is a span of it), the
    cut and the vocabulary besides its place."""
    return JobOrigins(job.source, _Repeated(ShardOrigin(job.source, _cut_of(job), job.vocabulary), job.world_size))


class _Repeated(Sequence[ShardOrigin]):
    """``origin``, ``count`` times, without a list of them: a task asks for its own shard's, and
    a job's count is whatever its ``job.json`` says (a forged one may say a billion)."""

    def __init__(self, origin: ShardOrigin, count: int) -> None:
        self._origin, self._size = origin, count

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> ShardOrigin: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ShardOrigin]: ...

    def __getitem__(self, index: int | slice) -> ShardOrigin | Sequence[ShardOrigin]:
        if isinstance(index, slice):
            return _Repeated(self._origin, len(range(*index.indices(self._size))))
        if not -self._size <= index < self._size:
            raise IndexError(f"shard {index} of {self._size}")
        return self._origin


def _cut_of(job: ShardJob) -> DocumentCut:
    """The document cut every shard of a text job records."""
    return DocumentCut(rule="newline", document_bytes=job.document_bytes, separator=job.separator)



#: The text kind, as the engines' lifecycle runs it.
KIND = JobSupply(job=ShardJob, write_shard=_write_shard, origins=_origins,
                 describe_encoder=encoder_spec, rebuild_encoder=encoder_from_spec)

__all__ = ["KIND", "ShardJob", "check_pins", "unit_span"]
