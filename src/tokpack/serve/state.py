"""The records a run keeps: the loader state (rows served per part, the history of settings,
the data's identity) and the data schedule; reading a saved state (this version or the one
before, converted exactly) and matching its parts to a loader's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from tokpack._schema import Record
from tokpack.errors import InputError
from tokpack.serve.history import Segment
from tokpack.serve.mixture import default_names
from tokpack.vocab.identity import VocabIdentity


class PartState(Record):
    """One part of a loader state: its name, its data's identity, and where it stands."""

    name: str
    data: dict[str, Any]
    #: rows served before the state's step, over all its epochs (epoch = rows // rows_per_epoch)
    rows: int = Field(ge=0)
    rows_per_epoch: int | None = Field(default=None, ge=0)
    #: targets served before the state's step (ids that were a label), over all its epochs
    tokens: int | None = Field(default=None, ge=0)
    #: the step the part joined the run (a part added at a resume: that step); the rows of a
    #: step are interleaved among the parts that had joined by then
    since: int = Field(default=0, ge=0)
    #: of ``rows``, those of steps the run skipped (served to no model)
    skipped_rows: int = Field(default=0, ge=0)
    #: the most epochs the part may serve (``None``: no cap), and the step it stopped at
    max_epochs: int | None = Field(default=None, ge=1)
    capped_at: int | None = Field(default=None, ge=0)

    @model_serializer(mode="wrap")
    def _unset_fields_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A part never skipped or capped leaves these fields out: a record without them reads back as such.
        data: dict[str, Any] = handler(self)
        for key in ("skipped_rows", "max_epochs", "capped_at"):
            if not data.get(key):
                data.pop(key, None)
        return data


class LoaderState(Record):
    """What :meth:`PackedBatches.state_dict` returns: enough to continue, and to refuse other data.

    ``parts`` lists every part the run has served, in the order they first appeared (a part
    removed at a resume stays, with weight 0); ``history`` the settings from step 0 on.
    """

    schema_: Literal["tokpack.loader.v3"] = Field(default="tokpack.loader.v3", alias="schema")
    step: int = Field(ge=0)
    seed: int
    #: the mixture's seed (``None``: a single source, shuffled as with 0)
    mixture_seed: int | None = None
    #: the global batch of ``step`` (the history has them all)
    global_batch: int = Field(ge=1)
    layout: dict[str, Any]
    parts: list[PartState] = Field(min_length=1)
    history: list[Segment] = Field(min_length=1)
    vocabulary: VocabIdentity
    #: the steps ``[start, end)`` the run skipped (their rows served to no model)
    skipped: list[tuple[int, int]] = Field(default_factory=list)
    #: the weights the run was given (its mixture's stages, normalized, in the order of
    #: ``parts``), kept where the history holds weights set while it ran (``set_weights``, a
    #: part that reached its ``max_epochs``): a resume given these same weights continues the
    #: history's, and other weights are a change from the resume's step
    mixture_stages: list[tuple[int, list[float]]] | None = None

    @model_serializer(mode="wrap")
    def _unset_fields_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A run never skipped nor changed while it ran leaves these fields out: a record without them reads back as such.
        data: dict[str, Any] = handler(self)
        for key in ("skipped", "mixture_stages"):
            if not data.get(key):
                data.pop(key, None)
        return data


class LoaderStateV2(Record):
    """The loader state tokpack wrote before the history of settings (read, converted exactly)."""

    schema_: Literal["tokpack.loader.v2"] = Field(alias="schema")
    step: int = Field(ge=0)
    seed: int
    global_batch: int = Field(ge=1)
    layout: dict[str, Any]
    data: list[dict[str, Any]]
    mixture: dict[str, Any] | None = None
    part_rows: list[int] | None = None
    vocabulary: VocabIdentity

    def upgraded(self) -> LoaderState:
        """The same position as a v3 state: its stages become the history (none anchored)."""
        names = default_names([str(record.get("name")) for record in self.data])
        rows = self.part_rows if self.part_rows is not None else [self.step * self.global_batch]
        if len(rows) != len(self.data):
            raise InputError("not a tokpack loader state (part_rows do not match its data)")
        stages: list[Any] = self.mixture["stages"] if self.mixture else [[0, [1.0]]]
        try:
            history = [Segment(step=int(start), global_batch=self.global_batch, weights=[float(w) for w in weights])
                       for start, weights in stages]
        except (TypeError, ValueError) as error:
            raise InputError(f"not a tokpack loader state (its mixture stages: {error})") from None
        return LoaderState(step=self.step, seed=self.seed, mixture_seed=self.mixture["seed"] if self.mixture else None,
                           global_batch=self.global_batch, layout=self.layout, vocabulary=self.vocabulary,
                           parts=[PartState(name=name, data=record, rows=count)
                                  for name, record, count in zip(names, self.data, rows)],
                           history=history)


class ServeSchedule(Record):
    """``data_schedule()``: which data, in which proportions and order, from which vocabulary.

    ``parts`` are every part the run has served (``removed`` for one no longer in it), each with
    its rows served, epochs and tokens (targets) seen at the loader's step; ``history`` the
    settings from step 0 on; ``stages`` the (normalized) weights in force from each step of the
    history, in the order of ``parts``; ``global_batch`` the rows of the loader's step; ``stats``
    each served part's layout statistics, in the loader's order.
    """

    schema_: Literal["tokpack.serve-schedule.v2"] = Field(default="tokpack.serve-schedule.v2", alias="schema")
    vocabulary: VocabIdentity
    parts: list[dict[str, Any]]
    stages: list[tuple[int, list[float]]]
    history: list[Segment]
    step: int
    seed: int
    shuffle: bool
    layout: dict[str, Any]
    global_batch: int
    length: int
    stats: list[dict[str, float]]
    extra: dict[str, Any] = Field(default_factory=dict)
    #: as a loader state records them (see :class:`LoaderState`); left out when unset
    mixture_seed: int | None = None
    skipped: list[tuple[int, int]] = Field(default_factory=list)
    mixture_stages: list[tuple[int, list[float]]] | None = None

    @model_serializer(mode="wrap")
    def _unset_fields_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("mixture_seed", "skipped", "mixture_stages"):
            if data.get(key) is None or data.get(key) == []:
                data.pop(key, None)
        return data

    def loader_state(self) -> LoaderState:
        """The loader state of the schedule's step (what :meth:`PackedBatches.load_state_dict`
        and ``tokpack serve which/when`` read a schedule as).

        Raises:
            InputError: a schedule of several parts written without its mixture seed (their
                order cannot be known).
        """
        if len(self.parts) > 1 and self.mixture_seed is None:
            raise InputError("this data schedule of several parts does not record its mixture seed, so the order "
                             "of its rows cannot be rebuilt", fix="use the loader state saved with it (state_dict())")
        parts = []
        for entry in self.parts:
            try:
                data = {key: entry[key] for key in DATA_KEYS}
                skipped = int(entry.get("skipped_rows", 0))
                parts.append(PartState(name=entry["name"], data=data, rows=int(entry["rows"]) + skipped, skipped_rows=skipped,
                                       rows_per_epoch=entry.get("rows_per_epoch"), tokens=entry.get("tokens"),
                                       since=int(entry.get("since", 0)), max_epochs=entry.get("max_epochs"),
                                       capped_at=entry.get("capped_at")))
            except (KeyError, TypeError, ValueError, ValidationError) as error:
                raise InputError(f"not a tokpack data schedule (part {entry.get('name')!r}: {error})") from None
        return LoaderState(step=self.step, seed=self.seed, mixture_seed=self.mixture_seed, global_batch=self.global_batch,
                           layout=self.layout, parts=parts, history=self.history, vocabulary=self.vocabulary,
                           skipped=self.skipped, mixture_stages=self.mixture_stages)


#: What a part's data record holds (:func:`tokpack.serve.layouts.data_identity` and its range).
DATA_KEYS = ("name", "tokens_sha256", "starts_sha256", "n_tokens", "vocabulary", "range")


#: How a loader state's layout record is named in a message.
SETTING = {"layout": "layout", "length": "length", "split": "split", "options": "layout options", "shuffle": "shuffle"}


def parts_of_sources(saved: LoaderState, sources: list[Any]) -> list[str]:
    """The saved part each of ``sources`` holds (by its ids' checksums), in order.

    Raises:
        InputError: a source that is none of the saved parts, or the same part twice.
    """
    keys = ("tokens_sha256", "starts_sha256")
    names: list[str] = []
    for source in sources:
        found = [part.name for part in saved.parts if [part.data.get(k) for k in keys] == [getattr(source.meta, k) for k in keys]]
        if not found or found[0] in names:
            raise InputError(f"{source.path} is none of the parts the state names ({part_names([p.data for p in saved.parts])})",
                             where=source.path, fix="give the data the run was trained on")
        names.append(found[0])
    return names


def match_parts(saved: list[PartState], names: list[str], records: list[dict[str, Any]],
                 keys: tuple[str, ...]) -> dict[int, int]:
    """This loader's part -> the saved part it continues: the saved part of the same ids
    (checksums and range; of the same name first, where several hold those ids), else the saved
    part of its name (whose data the caller then checks)."""
    matched: dict[int, int] = {}
    taken: set[int] = set()
    identity = [[part.data.get(k) for k in keys] for part in saved]
    for local, record in enumerate(records):
        same = [slot for slot, ids in enumerate(identity) if ids == [record[k] for k in keys] and slot not in taken]
        if same:
            slot = next((s for s in same if saved[s].name == names[local]), same[0])
            matched[local] = slot
            taken.add(slot)
    by_name = {part.name: slot for slot, part in enumerate(saved)}
    for local, name in enumerate(names):
        if local not in matched and name in by_name and by_name[name] not in taken:
            matched[local] = by_name[name]
            taken.add(by_name[name])
    return matched


def distinct_removed_names(slots: list[PartState], local_of: list[int | None]) -> None:
    """Rename (in place) a removed part whose name a served part now carries: ``name~removed``,
    ``name~removed2``, ... (a part is matched by its ids, so the name is only a label)."""
    live = {slot.name for slot, local in zip(slots, local_of) if local is not None}
    used = {slot.name for slot in slots}
    for index, (slot, local) in enumerate(zip(slots, local_of)):
        if local is None and slot.name in live:
            name, n = f"{slot.name}~removed", 2
            while name in used:
                name, n = f"{slot.name}~removed{n}", n + 1
            used.add(name)
            slots[index] = slot.model_copy(update={"name": name})


def parse_state(state: Any) -> LoaderState:
    """A loader state of this version, one of ``tokpack.loader.v2`` converted exactly, or the
    state of a data schedule's step (:meth:`ServeSchedule.loader_state`)."""
    if not isinstance(state, Mapping):
        raise InputError(f"state must be the dict state_dict() returned, got {type(state).__name__}")
    try:
        record = dict(state)
        if record.get("schema") == "tokpack.loader.v2":
            saved = LoaderStateV2.model_validate(record).upgraded()
        elif record.get("schema") == "tokpack.serve-schedule.v2":
            saved = ServeSchedule.model_validate(record).loader_state()
        else:
            saved = LoaderState.model_validate(record)
    except (ValidationError, TypeError) as error:
        raise InputError(f"not a tokpack loader state ({str(error).splitlines()[0]})") from None
    n_parts = len(saved.parts)
    names = [part.name for part in saved.parts]
    for name in names:
        if names.count(name) > 1:
            raise InputError(f"not a tokpack loader state (it names part {name!r} twice)")
    if any(len(s.weights) != n_parts or (s.anchor is not None and len(s.anchor) != n_parts) for s in saved.history):
        raise InputError(f"not a tokpack loader state (its history does not name its {n_parts} parts)")
    if any(not 0 <= start < end for start, end in saved.skipped):
        raise InputError(f"not a tokpack loader state (its skipped steps {saved.skipped} are not ranges)")
    in_force = [s for s in saved.history if s.step <= saved.step]
    if in_force and in_force[-1].global_batch != saved.global_batch:
        raise InputError(f"not a tokpack loader state (global_batch {saved.global_batch}, but its history has "
                         f"{in_force[-1].global_batch} at its step {saved.step})")
    return saved


def difference(saved: dict[str, Any], mine: dict[str, Any]) -> str:
    """What differs between the data a loader state was saved over and this loader's, in words."""
    labels = (("tokens_sha256", "ids (tokens sha256)"), ("starts_sha256", "document starts (sha256)"),
              ("range", "range of ids"))
    for key, label in labels:
        if saved.get(key) != mine.get(key):
            return f"{label} {_shown(saved.get(key))} when it was saved, {_shown(mine.get(key))} in this loader"
    return "the data records differ"


def _shown(value: Any) -> str:
    return value[:16] if isinstance(value, str) else str(value)


def part_names(records: list[dict[str, Any]]) -> str:
    """Parts as ``name (first 16 hex of their ids' sha256)``, for a message."""
    return ", ".join(f"{d.get('name')} ({str(d.get('tokens_sha256'))[:16]})" for d in records)


__all__ = ["SETTING", "LoaderState", "LoaderStateV2", "PartState", "ServeSchedule", "difference",
           "distinct_removed_names", "match_parts", "parts_of_sources", "parse_state", "part_names"]
