"""``encoder.json``: the one record from which any worker rebuilds a job's encoder, text or chess.

A job writes the record once; every worker, on any machine, rebuilds the very same encoder from
it, and :func:`rebuild` refuses one whose identity is not the recorded one, so no shard is ever
encoded with another vocabulary. The packers never special-case an encoder: they call
:func:`describe` and :func:`rebuild`, and the kind's own module holds the rest.

A kind of encoder is a kind of job (:data:`tokpack.engines.kinds.KINDS`): its
:class:`~tokpack.engines.kinds.JobSupply` has ``describe_encoder(encoder) -> dict`` and
``rebuild_encoder(dict) -> encoder`` (which validates the dict with its own strict model), and the
encoder class a ``record_kind`` attribute naming the kind.

>>> from tokpack.chess.schemes import make_encoder
>>> record = describe(make_encoder("san"))
>>> record.kind, rebuild(record).identity == make_encoder("san").identity
('chess', True)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field

from tokpack._schema import Record, read_record, write_record
from tokpack.engines.kinds import kind_named
from tokpack.errors import InputError, IntegrityError
from tokpack.vocab.identity import HasIdentity, VocabIdentity

ENCODER_FILE = "encoder.json"

class Describable(HasIdentity, Protocol):
    """What an encoder needs to be written to ``encoder.json``: its identity, and its kind."""

    @property
    def record_kind(self) -> str:
        """The key of :data:`tokpack.engines.kinds.KINDS` that rebuilds it."""
        ...


class EncoderRecord(Record):
    """``encoder.json``: the encoder's kind, its identity, and what its kind needs to rebuild it."""

    schema_: Literal["tokpack.encoder.v1"] = Field(default="tokpack.encoder.v1", alias="schema")
    kind: str
    identity: VocabIdentity
    spec: dict[str, Any]


def describe(encoder: Describable) -> EncoderRecord:
    """The record :func:`rebuild` turns back into ``encoder``."""
    spec = kind_named(encoder.record_kind).supplier().describe_encoder(encoder)
    return EncoderRecord(kind=encoder.record_kind, identity=encoder.identity, spec=spec)


def rebuild(record: EncoderRecord, *, where: str | Path | None = None) -> Any:
    """The encoder ``record`` describes.

    Raises:
        InputError: an unknown kind, or a spec its kind refuses (naming ``where``).
        IntegrityError: the rebuilt encoder's identity is not the recorded one (an edited record).
    """
    try:
        encoder = kind_named(record.kind).supplier().rebuild_encoder(record.spec)
    except InputError as error:
        raise InputError(str(error), where=where) from None
    if encoder.identity != record.identity:
        raise IntegrityError(f"rebuilds vocabulary {encoder.identity.short}, not the recorded "
                             f"{record.identity.short}", where=where, fix="the file was edited; restart the job")
    return encoder


def write_encoder(encoder: Describable, path: Path) -> None:
    """Write ``encoder``'s record to ``path`` atomically."""
    write_record(describe(encoder), path)


def read_encoder(path: Path, expected: VocabIdentity) -> Any:
    """Rebuild the encoder recorded in ``path``, which must have ``expected``'s vocabulary (the
    identity names the scheme too, so a chess record never passes for a text job's).

    Raises:
        InputError: a missing or malformed file.
        IntegrityError: another vocabulary than ``expected`` (a job's record and its encoder disagree).
    """
    try:
        status = os.stat(path)
        state = (str(Path(path).absolute()), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
    except OSError:
        state = None
    if state is not None and _last_read and _last_read[0] == state:
        encoder = _last_read[1]
    else:
        encoder = rebuild(read_record(EncoderRecord, path), where=path)
        if state is not None:
            _last_read[:] = [state, encoder]
    if encoder.identity != expected:
        raise IntegrityError(f"holds vocabulary {encoder.identity.short}, not the job's {expected.short}", where=path, fix="start a new job")
    return encoder


#: The encoder this process rebuilt last, with its file's state (path, size, times, inode) then: a
#: worker running many shards of one job rebuilds it once (a chess scheme's tables take tens of
#: milliseconds), and again whenever the file changed.
_last_read: list[Any] = []


__all__ = ["ENCODER_FILE", "Describable", "EncoderRecord", "describe", "read_encoder", "rebuild",
           "write_encoder"]
