"""A sharded job's lifecycle, once for every kind: start it, run a rank, finish it.

A kind of job (:mod:`tokpack.engines.kinds`: text's :mod:`tokpack.engines.text_job`, chess's
:mod:`tokpack.chess.jobs.shards`) plans its shards and writes one; everything else is here: the
job's records, the locks, the rank<->shard tie, the completion markers and ``dataset.json``.
:func:`run_shard` is the task every engine runs, ``(dataset, rank) -> shard``, pure and
restartable, and :func:`finish_job` the one finish, whichever kind ``job.json`` names.

A sharded job is a folder::

    DATASET/
      job.json           the kind's sealed job record: everything a task needs (the input and
                         what pins it, the vocabulary, the cut, the number of shards); written
                         once by whoever starts the job (:func:`write_job`)
      encoder.json       the encoder every shard is encoded with, which every worker rebuilds
                         (:mod:`tokpack.engines.encoders`)
      shard-00000/ …     one pack per shard, each renamed into place only when complete; its
                         ``meta.json`` records its rank (a shard under another rank's name is refused)
      shard-00000.done   the completion marker: written after the shard is verified; kept once the
                         job is finished unless its kind clears them (chess does), so that a rerun
                         skips every complete shard by it and remakes only one deleted since
      dataset.json       written when every shard is done (see :mod:`tokpack.store.dataset`)

Finishing costs each task a look at a few markers (at most one listing of the folder), and the
task that completes the last one pass over the shards: linear in shards.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field

from tokpack._cache import locked
from tokpack._files import regular_file
from tokpack._progress import PrepareProgress
from tokpack._schema import Record, SealedRecord, read_record, write_record
from tokpack.engines.encoders import ENCODER_FILE, Describable, read_encoder, write_encoder
from tokpack.engines.kinds import JobKind, JobSupply, ShardOrigin, kind_of_job
from tokpack.errors import InputError, IntegrityError, TokpackError
from tokpack.store.dataset import SHARD_PREFIX, DatasetRecord, ShardedDataset, shard_name, write_dataset
from tokpack.store.format import DATASET_FILE, META_FILE, DocumentCut, PackMeta, Source
from tokpack.store.reader import Pack
from tokpack.vocab.identity import VocabIdentity

JOB_FILE = "job.json"
JobT = TypeVar("JobT", bound=SealedRecord)


def run_shard(dataset: str | Path, rank: int, *, workers: int | None = None,
              report: Callable[[PrepareProgress], None] | None = None) -> bool:
    """Make shard ``rank`` of the job in ``dataset`` (of whichever kind its ``job.json`` names)
    unless it is already done; then, if every shard is done, write ``dataset.json``. The task
    every executor runs (``task=`` of :func:`tokpack.engines.run_local` /
    :func:`~tokpack.engines.run_ray`, or a job array's ``tokpack shard run``).

    ``workers``: the processes a text shard encodes with; ``report`` hears the shard's progress.

    Returns:
        Whether this call wrote the shard.

    Raises:
        InputError: a rank outside the job, an input that changed since the job began, or
            whatever the kind's writer refuses.
        IntegrityError: see :func:`build_shard`.
    """
    dataset = Path(dataset)
    supply, job = read_any_job(dataset)
    _check_rank(rank, job.world_size)
    if supply.clears_markers and (dataset / DATASET_FILE).exists():  # finished: nothing to do (nor to lock)
        origins = supply.origins(job)
        _check_recorded(dataset, job.world_size, origins.source, origins.shards[0].cut, job.vocabulary)
        return False

    def write() -> None:
        encoder = read_encoder(dataset / ENCODER_FILE, job.vocabulary)
        supply.write_shard(dataset, rank, job, encoder, workers, report)

    wrote = build_shard(dataset, rank, job.world_size, write, job=job.seal, origin=supply.origins(job).shards[rank])
    finish_job(dataset, rank)
    return wrote


def finish_job(dataset: str | Path, rank: int | None = None) -> ShardedDataset | None:
    """Write the job's ``dataset.json`` once every shard is done (see :func:`finish_dataset`;
    ``rank``: the task that asks, if one does); return the dataset then. A kind that clears its
    markers (chess) removes the completion markers and lock files then: every shard is listed
    and sealed in ``dataset.json``, and a retried task sees it and takes no lock."""
    dataset = Path(dataset)
    supply, job = read_any_job(dataset)
    origins = supply.origins(job)
    finished = finish_dataset(dataset, job.world_size, source=origins.source, cut=origins.shards[0].cut,
                              job=job.seal, rank=rank, origin_of=origins.shards.__getitem__)
    if finished is not None and supply.clears_markers:
        for leftover in [*dataset.glob(f"{SHARD_PREFIX}*.done"), *dataset.glob("*.lock")]:
            leftover.unlink(missing_ok=True)
    return finished


def read_any_job(dataset: Path) -> tuple[JobSupply, Any]:
    """The kind of the job in ``dataset`` (by its ``job.json``'s ``schema``) and the job, its seal checked.

    Raises:
        InputError: no readable ``job.json``, or a kind of job this tokpack does not know.
        IntegrityError: see :func:`read_job`.
    """
    path = Path(dataset) / JOB_FILE
    cached = _cached_job(path)
    if cached is not None:
        return kind_of_job(cached.schema_).supplier(), cached
    supply = kind_of_job(job_header(path)[0]).supplier()
    return supply, read_job(supply.job, dataset)


def job_header(path: Path) -> tuple[str, int]:
    """The ``schema`` and ``world_size`` of the ``job.json`` at ``path``, read without its model.

    Raises:
        InputError: no readable ``job.json``, or a kind of job this tokpack does not know.
    """
    if path.exists():  # a FIFO would block the read forever; a missing file is said below
        regular_file(path, "input")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        schema, world_size = record["schema"], int(record["world_size"])
        if not isinstance(schema, str):
            raise TypeError(f"schema is {schema!r}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise InputError(f"not a sharded job ({error.__class__.__name__}: {error})", where=path,
                         fix="start the job first (tokpack.engines.start_job, or chess's tokenize with engine='array')") from None
    try:
        kind_of_job(schema)
    except InputError as error:
        raise InputError(error.what, where=path) from None
    return schema, world_size


def _check_rank(rank: int, world_size: int) -> None:
    if not 0 <= rank < world_size:
        raise InputError(f"rank {rank} is outside the job's {world_size} shards",
                         fix=f"give a rank from 0 to {world_size - 1}")


class ShardDone(Record):
    """``shard-NNNNN.done``: the marker of a complete, verified shard."""

    schema_: Literal["tokpack.shard-done.v1"] = Field(default="tokpack.shard-done.v1", alias="schema")
    rank: int
    world_size: int
    seal: str
    #: the seal of the job.json this shard was made for (a job's tasks refuse a marker without it)
    job: str | None = None



def marker_path(dataset: Path, rank: int) -> Path:
    return dataset / f"{shard_name(rank)}.done"



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
        InputError: no readable record of ``model``'s kind and version (see
            :func:`refuse_other_version`), saying the fix.
        IntegrityError: the job was edited after it was written.
    """
    path = Path(dataset) / JOB_FILE
    state = _file_state(path)
    if state is not None and _last_job and _last_job[0] == state and isinstance(_last_job[1], model):
        return _last_job[1]
    try:
        job = read_record(model, path)
    except InputError as error:
        refuse_other_version(model, path)
        if error.fix is not None or not path.is_file():
            raise
        # tokpack writes job.json whole, once: a record that does not read was edited or damaged.
        raise InputError(error.what, where=path, fix="the record was edited or damaged: start a new job in a new "
                                                     "folder") from None
    if job.seal != job.computed_seal():
        raise IntegrityError("edited after the job began (seal mismatch): its shards were cut for the job "
                             "as written", where=path, fix="start a new job in a new folder")
    if state is not None:
        _last_job[:] = [state, job]
    return job


def _file_state(path: Path) -> tuple[Any, ...] | None:
    """What tells a file's versions apart without reading it: path, size, times, inode."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return str(path.absolute()), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino


def _cached_job(path: Path) -> Any:
    """The job :func:`read_job` read last, if ``path`` is its file, unchanged; else ``None``."""
    state = _file_state(path)
    return _last_job[1] if state is not None and _last_job and _last_job[0] == state else None


#: The job this process read last, with its file's state (path, size, times, inode) then: a worker
#: that runs many tasks of one job reads job.json once (a chess job lists every shard: reading it
#: in every task would cost time quadratic in shards), and again whenever the file changed.
_last_job: list[Any] = []


def refuse_other_version(model: type[SealedRecord], path: Path) -> None:
    """Refuse a ``job.json`` of another kind (a chess job where a text job is asked for), or of
    this kind in another version of its format (its shards cannot be checked against what it did
    not pin), with a message that says so rather than a field error.

    Raises:
        InputError: the file's ``schema`` is another kind's, or this kind's in another version.
    """
    expected = model.model_fields["schema_"].default
    try:
        if not path.is_file():  # missing, or a FIFO whose read would block: read_record says which
            return
        found = json.loads(path.read_bytes()).get("schema")
    except (OSError, ValueError, AttributeError, RecursionError):
        return  # missing or unreadable: read_record says what is wrong
    mine, theirs = kind_of_job(expected), _kind_or_none(found)
    if theirs is not None and theirs.name != mine.name:
        raise InputError(f"holds a {theirs.name} job ({found}), not a {mine.name} job", where=path,
                         fix=f"write the {mine.name} job into a folder of its own")
    if isinstance(found, str) and found != expected and found.rpartition(".v")[0] == expected.rpartition(".v")[0]:
        why = _OTHER_VERSIONS.get(found, "its format is not the one this tokpack reads")
        if (path.parent / DATASET_FILE).exists():  # finished: the dataset stands on its own records
            raise InputError(f"is a {found} job, which this tokpack does not rerun ({expected} jobs only): {why}; "
                             f"it is finished, and its {DATASET_FILE} opens as it is", where=path,
                             fix="use the dataset as it is, or delete the folder to make it again")
        raise InputError(f"is a {found} job, which this tokpack does not resume ({expected} jobs only): {why}",
                         where=path, fix="start the job again in a new folder (or delete this one): its shards are "
                                         "remade from the inputs")


def _kind_or_none(schema: object) -> JobKind | None:
    """The kind whose ``job.json`` has this ``schema``, or ``None`` (not a kind's, or no text)."""
    if not isinstance(schema, str):
        return None
    try:
        return kind_of_job(schema)
    except InputError:
        return None


#: Why a job of another version of its format is not resumed, by its ``schema``.
_OTHER_VERSIONS = {"tokpack.job.v1": "it pinned neither the manifest nor each input's SHA-256, so its shards could "
                                     "not be checked against what they read",
                   "tokpack.chess.job.v2": "its shards do not record their rank, so a shard copied under another "
                                           "rank's name could not be told from that rank's own"}



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
            with _remade_if_damaged(dataset):
                _mark(dataset, rank, world_size, _made_from(Pack(shard, verify=True), origin), job)
    return wrote


@contextmanager
def _remade_if_damaged(dataset: Path) -> Iterator[None]:
    """Say, of an error about a shard of ``dataset`` or a file in it (damaged, truncated, gone),
    or about its marker, what remakes it: deleting both and running that rank's task again (a
    shard depends on the job alone). Other errors pass as they are."""
    try:
        yield
    except (InputError, IntegrityError) as error:
        rank = _rank_of(dataset, error.where)
        if rank is None:
            raise
        name = shard_name(rank)
        raise type(error)(error.what, where=error.where, byte=error.byte, line=error.line, game=error.game,
                          fix=f"delete {name} (and its .done marker) and run the task of rank {rank} again") from None


def _rank_of(dataset: Path, where: object) -> int | None:
    """The rank whose shard or marker ``where`` is in ``dataset``, if it is one."""
    if not isinstance(where, (str, os.PathLike)):
        return None
    try:
        first = Path(where).relative_to(dataset).parts[0]
    except (ValueError, IndexError):
        return None
    found = re.fullmatch(rf"{SHARD_PREFIX}(\d+)(?:\.done)?", first)
    return None if found is None else int(found.group(1))


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
        _check_recorded(dataset, world_size, source, cut, None if origin_of is None else origin_of(0).vocabulary)
        return None if rank is not None else ShardedDataset(dataset)
    if not _all_marked(dataset, world_size, rank):
        return None
    with locked(dataset / DATASET_FILE):
        if not (dataset / DATASET_FILE).exists():
            if not all(_complete(dataset, rank, world_size, job, None if origin_of is None else origin_of(rank))
                       for rank in range(world_size)):
                return None
            with _remade_if_damaged(dataset):
                write_dataset(dataset, [shard_name(rank) for rank in range(world_size)], source=source, cut=cut)
    return ShardedDataset(dataset)


def _check_recorded(dataset: Path, world_size: int, source: Source, cut: DocumentCut,
                    vocabulary: VocabIdentity | None = None) -> None:
    """Refuse a ``dataset.json`` this job did not write: unreadable, edited, or recording other
    shards, another input, cut or vocabulary (copied in from another job). One read of the
    record, by a task that runs after the job finished.

    Raises:
        InputError / IntegrityError: naming the record and the fix.
    """
    path = dataset / DATASET_FILE
    fix = "delete it and run any task of the job again: the one that finds every shard done writes it"
    try:
        record = read_record(DatasetRecord, path)
        record.check_seal(path)
    except (InputError, IntegrityError) as error:
        raise type(error)(error.what, where=path, byte=error.byte, line=error.line, fix=fix) from None
    differs = [name for name, theirs, ours in (
        ("shards", [entry.name for entry in record.shards], [shard_name(rank) for rank in range(world_size)]),
        ("input", record.source, source), ("document cut", record.cut, cut),
        ("vocabulary", record.vocabulary, record.vocabulary if vocabulary is None else vocabulary)) if theirs != ours]
    if differs:
        raise IntegrityError(f"records another {', '.join(differs)} than this job's (copied in from another job?)",
                             where=path, fix=fix)


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
    with _remade_if_damaged(dataset):
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
    with _remade_if_damaged(shard.parent):
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



__all__ = ["JOB_FILE", "ShardDone", "build_shard", "finish_dataset", "finish_job", "job_header", "marker_path", "read_any_job",
           "read_job", "refuse_other_version", "run_shard", "shards_done", "write_job"]
