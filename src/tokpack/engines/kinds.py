"""The one registry of sharded-job kinds: a kind's name -> the module that supplies it, imported on use.

A kind's module supplies what the engines cannot know: its shard task (``task(dataset, rank, *,
report=None) -> bool``, which writes one shard through :func:`tokpack.engines.shard_task.build_shard`
and finishes through :func:`~tokpack.engines.shard_task.finish_dataset`), and how its encoder is
written to ``encoder.json`` and rebuilt from it (``encoder_spec(encoder) -> dict`` and
``encoder_from_spec(dict) -> encoder``). The engines find a kind by the ``kind`` of an
``encoder.json`` or by the ``schema`` of a ``job.json``, and import its module only then: a
text job never imports chess. Adding a kind is one entry here.

>>> kind_of_job("tokpack.chess.job.v3").name, kind_of_job("tokpack.job.v2").name
('chess', 'text')
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, NamedTuple

from tokpack.errors import InputError


class JobKind(NamedTuple):
    """One kind of sharded job: the module that supplies it, its shard task's name there, and the
    ``schema`` of every ``job.json`` it reads (a previous version's too, which its task refuses
    saying why)."""

    name: str
    module: str
    task: str
    job_schemas: tuple[str, ...]

    def supplier(self) -> Any:
        """The kind's module, imported now."""
        return import_module(self.module)


#: Every kind of sharded job, by name (the ``kind`` of its ``encoder.json``).
KINDS: dict[str, JobKind] = {
    "text": JobKind("text", "tokpack.engines.shard_task", "run_shard", ("tokpack.job.v2", "tokpack.job.v1")),
    "chess": JobKind("chess", "tokpack.chess.jobs.shards", "run_chess_shard",
                     ("tokpack.chess.job.v3", "tokpack.chess.job.v2")),
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


__all__ = ["KINDS", "JobKind", "kind_named", "kind_of_job"]
