"""The base of every JSON file tokpack reads or writes: strict pydantic models."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tokpack._words import json_reason
from tokpack.errors import InputError, IntegrityError

ModelT = TypeVar("ModelT", bound="Record")
SealedT = TypeVar("SealedT", bound="SealedRecord")


class Record(BaseModel):
    """A JSON record: unknown fields are refused and instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    def to_json(self) -> str:
        """Serialize deterministically (sorted keys, two-space indent, trailing newline)."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2, sort_keys=True) + "\n"


class SealedRecord(Record):
    """A record with a ``seal``: the SHA-256 of all its other fields, so a hand edit is caught."""

    seal: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")

    def computed_seal(self) -> str:
        """The SHA-256 of every field but ``seal``, as compact sorted JSON."""
        fields = self.model_dump(mode="json", by_alias=True, exclude={"seal"})
        return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def sealed(self: SealedT) -> SealedT:
        """A copy with ``seal`` filled in."""
        return self.model_copy(update={"seal": self.computed_seal()})

    def check_seal(self, where: Path) -> None:
        """Raises:
            IntegrityError: the record was edited after it was sealed.
        """
        if self.seal != self.computed_seal():
            raise IntegrityError("edited after it was written (seal mismatch)", where=where)


def read_record(model: type[ModelT], path: Path) -> ModelT:
    """Read and validate ``path`` as ``model``.

    Raises:
        InputError: the file is missing or unreadable, is not UTF-8 or not JSON (with the byte
            offset), or does not match the model; the one-line message names the file.
    """
    from tokpack._files import regular_file

    regular_file(Path(path), "input")  # a FIFO or device would block forever
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("missing", where=path) from None
    except OSError as error:
        raise InputError(f"cannot read ({error.strerror or error})", where=path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"byte {error.start}: not UTF-8", where=path) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        offset = len(text[: error.pos].encode("utf-8"))
        raise InputError(f"byte {offset}: invalid JSON ({json_reason(error)})", where=path) from None
    except RecursionError:  # thousands of nested brackets: no record of ours nests that deep
        raise InputError("JSON nested too deeply to be a tokpack record", where=path) from None
    except ValueError as error:  # a number past Python's 4,300-digit limit
        raise InputError(f"unreadable JSON ({str(error).split(':')[0]})", where=path) from None
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise InputError(first_problem(error), where=path) from None


def first_problem(error: ValidationError) -> str:
    """The first validation problem as ``field.path: message``."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    return f"{where}: {first['msg']}"


def write_record(record: Record, path: Path) -> None:
    """Write ``record`` as deterministic JSON, atomically (a reader never sees half of it)."""
    from tokpack._atomic import write_atomically

    write_atomically(path, record.to_json())
