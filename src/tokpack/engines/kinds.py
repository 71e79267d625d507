"""The one registry of sharded-job kinds: a kind's name -> the module that supplies it, imported on use.

The engines own a job's lifecycle (:mod:`tokpack.engines.lifecycle`: start, run a rank, finish);
a kind supplies only what they cannot know, as one :class:`JobSupply` named ``KIND`` in its
module: its ``job.json`` model, how to write one shard, what every shard records, and how its
encoder is written to ``encoder.json`` and rebuilt from it. The engines find a kind by the
``kind`` of an ``encoder.json`` or by the ``schema`` of a ``job.json``, and import its module
only then: a text job never imports chess. Adding a kind is one entry here.

>>> kind_of_job("tokpack.chess.job.v3").name, kind_of_job("tokpack.job.v2").name
('chess', 'text')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any, NamedTuple

from tokpack._progress import PrepareProgress
from tokpack._schema import SealedRecord
from tokpack.errors import InputError
from tokpack.store.format import DocumentCut, Source
from tokpack.vocab.identity import VocabIdentity


class ShardOrigin(NamedTuple):
    """What a job's shard records besides its place, the same in all of them but the source of a
    chess shard (its tables): the input, the document cut, the vocabulary."""

    source: Source
    cut: DocumentCut
    vocabulary: VocabIdentity


class JobOrigins(NamedTuple):
    """A job's records of its input: the whole dataset's ``source`` and each shard's origin, by
    rank (any sequence: a kind whose shards all record the same need not list them)."""

    source: Source
    shards: Sequence[ShardOrigin]


#: ``write_shard(dataset, rank, job, encoder, workers, report)``: write the pack of shard ``rank``
#: at ``dataset/shard-NNNNN`` (renamed into place when complete, recording its place) with the
#: encoder the engines rebuilt from ``encoder.json``.
ShardWriter = Callable[[Path, int, Any, Any, int | None, Callable[[PrepareProgress], None] | None], None]


@dataclass(frozen=True)
class JobSupply:
    """What one kind of job supplies to the engines' lifecycle; the rest (locks, markers, the
    rank<->shard tie, ``dataset.json``) is the engines'."""

    #: the model of its ``job.json`` (a sealed record with ``world_size`` and ``vocabulary``)
    job: type[SealedRecord]
    #: ``write_shard(dataset, rank, job, encoder, workers, report)``: write one shard's pack
    write_shard: ShardWriter
    #: ``origins(job)``: the whole dataset's record of its input and what each shard records
    #: besides its place (one call: the engines ask a kind once per task)
    origins: Callable[[Any], JobOrigins]
    #: ``describe_encoder(encoder) -> dict``: the ``spec`` of its ``encoder.json``
    describe_encoder: Callable[[Any], dict[str, Any]]
    #: ``rebuild_encoder(spec) -> encoder``: the encoder a ``spec`` describes (validated strictly)
    rebuild_encoder: Callable[[dict[str, Any]], Any]
    #: whether a finished job's markers and locks are removed (a task then finds nothing to do);
    #: kept (text), they let a rerun skip each complete shard unread and remake one deleted since
    clears_markers: bool = False


class JobKind(NamedTuple):
    """One kind of sharded job: the module whose ``KIND`` supplies it, and the ``schema`` of every
    ``job.json`` it reads (a previous version's too, which the lifecycle refuses saying why)."""

    name: str
    module: str
    job_schemas: tuple[str, ...]

    def supplier(self) -> JobSupply:
        """The kind's :class:`JobSupply`, its module imported now."""
        supply: JobSupply = import_module(self.module).KIND
        return supply


#: Every kind of sharded job, by name (the ``kind`` of its ``encoder.json``).
KINDS: dict[str, JobKind] = {
    "text": JobKind("text", "tokpack.engines.text_job", ("tokpack.job.v2", "tokpack.job.v1")),
    "chess": JobKind("chess", "tokpack.chess.jobs.shards", ("tokpack.chess.job.v3", "tokpack.chess.job.v2")),
}


def kind_named(name: str) -> JobKind:
    """The kind called ``name``.

    Raises:
        InputError: no kind of that name.
    """
    if name not in KINDS:
        raise InputError(f"unknown encoder kind {name!r}; expected one of {', '.join(KINDS)}")
    return KINDS[name]


def kind_of_job(schema: str) -> JobKind:
    """The kind whose ``job.json`` has this ``schema``.

    Raises:
        InputError: no kind reads it.
    """
    for kind in KINDS.values():
        if schema in kind.job_schemas:
            return kind
    known = [name for kind in KINDS.values() for name in kind.job_schemas]
    raise InputError(f"unknown kind of job {schema!r}; expected one of {', '.join(known)}")


__all__ = ["KINDS", "JobKind", "JobOrigins", "JobSupply", "ShardOrigin", "ShardWriter", "kind_named", "kind_of_job"]
