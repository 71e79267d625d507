"""The per-shard task every engine runs: ``(dataset, rank) -> shard``, pure and restartable.

:func:`build_shard` and :func:`finish_dataset` are the protocol every kind of job follows (text's
:func:`run_shard` here, chess's :func:`tokpack.chess.jobs.shards.run_chess_shard`): lock, skip a
complete shard, write, verify, mark; the last task writes ``dataset.json``. This module is also
the text kind of :data:`tokpack.engines.kinds.KINDS` (its task, and its encoder's record).

A sharded job is a folder::

    DATASET/
      job.json           a :class:`ShardJob`: the input, the SHA-256 of every file it reads (the
                         manifest that splits it included, or its absence), the vocabulary, the
                         cut, the number of shards; written once by whoever starts the job
      encoder.json       the encoder every shard is encoded with, which every worker rebuilds
                         (:mod:`tokpack.engines.encoders`; chess jobs write the same file)
      shard-00000/ …     one pack per shard, each renamed into place only when complete; its
                         ``meta.json`` records its rank (a shard under another rank's name is refused)
      shard-00000.done   the completion marker: written after the shard is verified
      dataset.json       written when every shard is done (see :mod:`tokpack.store.dataset`)

Shard ``r`` of ``W`` encodes input units ``[r*U//W, (r+1)*U//W)``; units come from
:mod:`tokpack.corpus.sources` in a fixed order, so the shards, and every byte of them, are the
same whichever engine, machine or retry computes them. Every task compares the inputs with what
``job.json`` pinned before it reads them: a file or manifest that changed, appeared or went
meanwhile would cut the units differently, so the task refuses.

Finishing costs each task a look at a few markers (at most one listing of the folder), and the
task that completes the last one pass over the shards: linear in shards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import Field

from tokpack._cache import locked
from tokpack._progress import PrepareProgress
from tokpack._schema import Record, SealedRecord, read_record, write_record
from tokpack.corpus.sources import Format, InputFile, OnError, Pins, open_corpus
from tokpack.engines.encoders import ENCODER_FILE, Describable, read_encoder, write_encoder
from tokpack.errors import InputError, IntegrityError, TokpackError
from tokpack.preparing.options import Execution
from tokpack.preparing.preparation import write_pack
from tokpack.store.dataset import ShardedDataset, shard_name, write_dataset
from tokpack.store.format import DATASET_FILE, META_FILE, DocumentCut, PackMeta, ShardPlace, Source
from tokpack.store.reader import Pack
from tokpack.vocab.bytelevel import BpeTokenizer
from tokpack.vocab.bytelevel import encoder_from_spec as encoder_from_spec  # the text kind's encoder record
from tokpack.vocab.bytelevel import encoder_spec as encoder_spec
from tokpack.vocab.identity import VocabIdentity

JOB_FILE = "job.json"
JobT = TypeVar("JobT", bound=SealedRecord)


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


class ShardDone(Record):
    """``shard-NNNNN.done``: the marker of a complete, verified shard."""

    schema_: Literal["tokpack.shard-done.v1"] = Field(default="tokpack.shard-done.v1", alias="schema")
    rank: int
    world_size: int
    seal: str
    #: the seal of the job.json this shard was made for (a job's tasks refuse a marker without it)
    job: str | None = None


def unit_span(rank: int, world_size: int, n_units: int) -> tuple[int, int]:
    """The units of shard ``rank``: as equal as integers allow, contiguous, covering all.

    >>> [unit_span(r, 3, 10) for r in range(3)]
    [(0, 3), (3, 6), (6, 10)]
    """
    return rank * n_units // world_size, (rank + 1) * n_units // world_size


def marker_path(dataset: Path, rank: int) -> Path:
    return dataset / f"{shard_name(rank)}.done"


def run_shard(dataset: Path, rank: int, *, workers: int | None = None,
              report: Callable[[PrepareProgress], None] | None = None) -> bool:
    """Make shard ``rank`` of the job in ``dataset`` unless it is already done; then, if every
    shard is done, write ``dataset.json``.

    Returns:
        Whether this call wrote the shard (``False``: it was already complete).

    Raises:
        InputError: a rank outside the job, an input that changed since the job began, or any
            input error (with its file and byte offset).
    """
    dataset = Path(dataset)
    job = read_job(ShardJob, dataset)
    wrote = build_shard(dataset, rank, job.world_size,
                        lambda: _write_shard(dataset, rank, job, workers=workers, report=report), job=job.seal,
                        origin=_origin_of(job))
    finish_if_complete(dataset, rank)
    return wrote


def write_job(dataset: Path, job: JobT, encoder: Describable, *, resume: Callable[[Path], JobT]) -> JobT:
    """Start ``job`` in the folder ``dataset`` (which exists): under the job's lock, write
    ``encoder.json`` then ``job.json``; where a ``job.json`` is there already, return
    ``resume(dataset)`` instead, the kind's check that it is this job (it raises if not).

    ``encoder.json`` is written first, atomically: a node whose lock is node-local may start the
    same job too, and both write the same bytes.
    """
    with locked(dataset / JOB_FILE):
        if (dataset / JOB_FILE).exists():
            return resume(dataset)
        write_encoder(encoder, dataset / ENCODER_FILE)
        write_record(job, dataset / JOB_FILE)
    return job


def read_job(model: type[JobT], dataset: Path) -> JobT:
    """``dataset/job.json`` as ``model``, its seal checked.

    Raises:
        IntegrityError: the job was edited after it was written.
    """
    path = Path(dataset) / JOB_FILE
    try:
        status = os.stat(path)
        state = (str(path.absolute()), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
    except OSError:
        state = None
    if state is not None and _last_job and _last_job[0] == state and isinstance(_last_job[1], model):
        return _last_job[1]
    try:
        job = read_record(model, path)
    except InputError:
        refuse_other_version(model, path)
        raise
    if job.seal != job.computed_seal():
        raise IntegrityError("edited after the job began (seal mismatch): its shards were cut for the job "
                             "as written", where=path, fix="start a new job in a new folder")
    if state is not None:
        _last_job[:] = [state, job]
    return job


#: The job this process read last, with its file's state (path, size, times, inode) then: a worker
#: that runs many tasks of one job reads job.json once (a chess job lists every shard: reading it
#: in every task would cost time quadratic in shards), and again whenever the file changed.
_last_job: list[Any] = []


def refuse_other_version(model: type[SealedRecord], path: Path) -> None:
    """Refuse a ``job.json`` of this kind in another version of its format with a message that
    says so (its shards cannot be checked against what it did not pin), rather than a field
    error.

    Raises:
        InputError: the file's ``schema`` is this kind's, in another version.
    """
    expected = model.model_fields["schema_"].default
    try:
        if not path.is_file():  # missing, or a FIFO whose read would block: read_record says which
            return
        found = json.loads(path.read_bytes()).get("schema")
    except (OSError, ValueError, AttributeError, RecursionError):
        return  # missing or unreadable: read_record says what is wrong
    if isinstance(found, str) and found != expected and found.rpartition(".v")[0] == expected.rpartition(".v")[0]:
        why = _OTHER_VERSIONS.get(found, "its format is not the one this tokpack reads")
        if (path.parent / DATASET_FILE).exists():  # finished: the dataset stands on its own records
            raise InputError(f"is a {found} job, which this tokpack does not rerun ({expected} jobs only): {why}; "
                             f"it is finished, and its {DATASET_FILE} opens as it is", where=path,
                             fix="use the dataset as it is, or delete the folder to make it again")
        raise InputError(f"is a {found} job, which this tokpack does not resume ({expected} jobs only): {why}",
                         where=path, fix="start the job again in a new folder (or delete this one): its shards are "
                                         "remade from the inputs")


#: Why a job of another version of its format is not resumed, by its ``schema``.
_OTHER_VERSIONS = {"tokpack.job.v1": "it pinned neither the manifest nor each input's SHA-256, so its shards could "
                                     "not be checked against what they read",
                   "tokpack.chess.job.v2": "its shards do not record their rank, so a shard copied under another "
                                           "rank's name could not be told from that rank's own"}


class ShardOrigin(NamedTuple):
    """What a job's shard records besides its place, the same in all of them but the source of a
    chess shard (its tables): the input, the document cut, the vocabulary."""

    source: Source
    cut: DocumentCut
    vocabulary: VocabIdentity


def build_shard(dataset: Path, rank: int, world_size: int, write: Callable[[], None], *, job: str | None = None,
                origin: ShardOrigin | None = None) -> bool:
    """The protocol every shard task follows (text's and chess's): under the shard's lock, skip a
    complete shard; else clear an abandoned half-written one, ``write()`` the pack at
    ``dataset/shard-NNNNN`` (renamed into place when complete, recording its
    :class:`~tokpack.store.format.ShardPlace`), verify it, check it records ``origin`` and write
    its marker.

    Returns:
        Whether ``write`` ran (``False``: the shard was already complete).

    Raises:
        InputError: a rank outside ``[0, world_size)``; a folder in the shard's place that holds
            no pack; whatever ``write`` raises.
        IntegrityError: the shard's marker names another job than ``job`` (the seal of job.json)
            or another rank, or the shard records another place than rank ``rank`` of
            ``world_size``, or another input, cut or vocabulary than ``origin``.
    """
    if not 0 <= rank < world_size:
        raise InputError(f"rank {rank} is outside the job's {world_size} shards",
                         fix=f"give a rank from 0 to {world_size - 1}")
    shard = dataset / shard_name(rank)
    with locked(shard):
        wrote = not _complete(dataset, rank, world_size, job, origin) and not shard.exists()
        if wrote:  # the writer clears what a killed attempt left (tokpack._atomic.temporary_sibling)
            try:
                write()
            except TokpackError:
                # Where flock is node-local, a task on another node may have written this shard
                # meanwhile: its rename won, ours was refused. Shards are deterministic, so keep
                # its shard, verified below; anything else is a real error.
                if not shard.exists():
                    raise
            _mark(dataset, rank, world_size, _made_from(Pack(shard, verify=True), origin), job)
        elif not _complete(dataset, rank, world_size, job, origin):  # renamed into place, its marker never written
            if not (shard / META_FILE).exists():  # not ours: left for its owner, never deleted
                raise InputError(f"holds no shard (no {META_FILE}); a shard is renamed into place complete, so "
                                 "this folder is not one this job wrote", where=shard,
                                 fix=f"delete {shard.name} (or move it away) and run the task of rank {rank} again")
            _mark(dataset, rank, world_size, _made_from(Pack(shard, verify=True), origin), job)
    return wrote


def _made_from(shard: Pack, origin: ShardOrigin | None) -> Pack:
    """``shard``, once it is known to record ``origin`` (a shard of another job with the same
    place, copied in, is not marked as this job's).

    Raises:
        IntegrityError: naming what differs.
    """
    _check_origin(shard.meta, origin, shard.path)
    return shard


def _check_origin(meta: PackMeta, origin: ShardOrigin | None, shard: Path) -> None:
    """Refuse a shard whose record (``meta``) names another input, cut or vocabulary than
    ``origin`` (``None``: nothing to compare).

    Raises:
        IntegrityError: naming the shard and what differs.
    """
    if origin is not None and (meta.source, meta.cut, meta.vocabulary) != tuple(origin):
        differs = [name for name, mine, theirs in zip(("input", "document cut", "vocabulary"),
                                                      (meta.source, meta.cut, meta.vocabulary), origin) if mine != theirs]
        raise IntegrityError(f"was made from another {' and '.join(differs)} than this job's (copied in from another "
                             "job?)", where=shard,
                             fix=f"delete {shard.name} (and its .done marker) and run its task again to remake it")


def finish_dataset(dataset: Path, world_size: int, *, source: Source, cut: DocumentCut,
                   job: str | None = None, rank: int | None = None,
                   origin_of: Callable[[int], ShardOrigin] | None = None) -> ShardedDataset | None:
    """Write ``dataset.json`` once all ``world_size`` shards are done; return the dataset then.

    Safe to call from every task (``rank``: the task's own): the first to see all markers writes
    it, under a lock. Until every marker is there, a call opens nothing (it looks for a few
    markers, at most lists the folder once); the call that finds them all checks each shard
    once (its marker names ``job`` and its rank, its record its place and ``origin_of(rank)``):
    finishing a job is linear in its shards. A task that finds ``dataset.json`` written already
    opens nothing and returns ``None``: the caller without a rank opens the dataset, once every
    task (remaking any shard gone since) is over.
    """
    if (dataset / DATASET_FILE).exists():
        return None if rank is not None else ShardedDataset(dataset)
    if not _all_marked(dataset, world_size, rank):
        return None
    with locked(dataset / DATASET_FILE):
        if not (dataset / DATASET_FILE).exists():
            if not all(_complete(dataset, rank, world_size, job, None if origin_of is None else origin_of(rank))
                       for rank in range(world_size)):
                return None
            write_dataset(dataset, [shard_name(rank) for rank in range(world_size)], source=source, cut=cut)
    return ShardedDataset(dataset)


def _all_marked(dataset: Path, world_size: int, rank: int | None = None) -> bool:
    """Whether every rank's marker is in ``dataset``, nothing opened. The ranks after ``rank``
    (the task's own) are looked at first, a few of them: shards mostly finish in rank order, so
    one of them is usually not done yet and the answer costs a few ``stat`` calls; else one
    listing of the folder."""
    start = 0 if rank is None else rank + 1
    for step in range(min(_LOOK_AHEAD, world_size)):
        if not marker_path(dataset, (start + step) % world_size).exists():
            return False
    with os.scandir(dataset) as entries:
        marked = {entry.name for entry in entries if entry.name.endswith(".done")}
    return len(marked) >= world_size and all(marker_path(dataset, rank).name in marked for rank in range(world_size))


def shards_done(dataset: Path, world_size: int) -> int:
    """How many of the job's ``world_size`` shards have their completion marker in ``dataset``
    (one listing of the folder, nothing opened): what a task reports while others still run."""
    with os.scandir(dataset) as entries:
        marked = {entry.name for entry in entries if entry.name.endswith(".done")}
    return sum(marker_path(dataset, rank).name in marked for rank in range(world_size))


#: How many markers :func:`_all_marked` looks for before it lists the folder.
_LOOK_AHEAD = 8


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


def _write_shard(dataset: Path, rank: int, job: ShardJob, *, workers: int | None,
                 report: Callable[[PrepareProgress], None] | None) -> None:
    tokenizer = _reused(read_encoder(dataset / ENCODER_FILE, job.vocabulary))
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


def _complete(dataset: Path, rank: int, world_size: int, job: str | None = None,
              origin: ShardOrigin | None = None) -> bool:
    """Whether shard ``rank`` is complete: its marker and its folder are there, and they agree
    with each other, with the job (and ``origin``) and with the rank.

    Raises:
        IntegrityError: a marker of another job or rank, or a shard recording another place,
            input, cut or vocabulary.
    """
    marker, shard = marker_path(dataset, rank), dataset / shard_name(rank)
    if not marker.exists() or not shard.exists():
        if shard.exists() and (shard / META_FILE).exists():
            _check_place(shard, rank, world_size)
        return False
    done = read_record(ShardDone, marker)
    if job is not None and done.job != job:
        # Its units were cut for another job.json (or one it does not name): reusing it would
        # duplicate or drop documents.
        named = "it names no job" if done.job is None else f"job {done.job[:16]}, world size {done.world_size}"
        raise IntegrityError(f"shard {rank} was made for another job ({named}); {JOB_FILE} is job {job[:16]} (world "
                             f"size {world_size})", where=marker,
                             fix=f"delete it and {shard.name}, and run the task of rank {rank} again (or, if job.json "
                                 "changed after shards were made, start a new job in a new folder)")
    if done.rank != rank:
        raise IntegrityError(f"is the marker of shard {done.rank}, not of shard {rank} (copied?)", where=marker,
                             fix=f"delete it and {shard.name}, and run the task of rank {rank} again")
    meta = _check_place(shard, rank, world_size)
    _check_origin(meta, origin, shard)
    return done.world_size == world_size and done.seal == meta.seal


def _check_place(shard: Path, rank: int, world_size: int) -> PackMeta:
    """The shard's record, once it is known to hold shard ``rank`` of ``world_size``.

    Raises:
        IntegrityError: it records another place, or none (a pack copied in from elsewhere).
    """
    meta = read_record(PackMeta, shard / META_FILE)
    meta.check_seal(shard / META_FILE)
    place = meta.shard
    if place is None or (place.rank, place.world_size) != (rank, world_size):
        held = "no shard of any job" if place is None else f"shard {place.rank} of a job of {place.world_size}"
        raise IntegrityError(f"holds {held}, not shard {rank} of {world_size} (copied or moved here?)", where=shard,
                             fix=f"delete {shard.name} (and its .done marker) and run the task of rank {rank} again")
    return meta


def _mark(dataset: Path, rank: int, world_size: int, shard: Pack, job: str | None = None) -> None:
    write_record(ShardDone(rank=rank, world_size=world_size, seal=shard.meta.seal, job=job), marker_path(dataset, rank))


def finish_if_complete(dataset: Path, rank: int | None = None) -> ShardedDataset | None:
    """Write a text job's ``dataset.json`` once every shard is done (see :func:`finish_dataset`;
    ``rank``: the task that asks, if one does)."""
    dataset = Path(dataset)
    job = read_job(ShardJob, dataset)
    origin = _origin_of(job)
    return finish_dataset(dataset, job.world_size, source=job.source, cut=_cut_of(job), job=job.seal, rank=rank,
                          origin_of=lambda _: origin)


def _origin_of(job: ShardJob) -> ShardOrigin:
    """What every shard of a text job records besides its place: the whole input's record (each
    shard is a span of it), the cut and the vocabulary."""
    return ShardOrigin(job.source, _cut_of(job), job.vocabulary)


def _cut_of(job: ShardJob) -> DocumentCut:
    """The document cut every shard of a text job records."""
    return DocumentCut(rule="newline", document_bytes=job.document_bytes, separator=job.separator)
