"""A stand-in for pydantic, for one measurement only: what a ``tokpack prepare`` process would cost
if its records' library cost nothing to import (``bench_prepare_fixed_cost.py --pairs N
--without-pydantic`` puts this folder first on the children's ``PYTHONPATH``).

It gives the names tokpack imports from pydantic just enough behaviour for one prepare to run:
a model's fields from its annotations and defaults, nested records made from dicts, dumps, copies.
It validates nothing and writes records the real models would refuse (a seal over other JSON), so
no pack it makes is for use, and nothing outside that one measurement may import it.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from pathlib import PurePath
from typing import Any


class ValidationError(ValueError):
    pass


def ConfigDict(**settings: Any) -> dict[str, Any]:
    return settings


class FieldInfo:
    def __init__(self, default: Any = ..., *, default_factory: Any = None, alias: str | None = None, **_: Any) -> None:
        self.default, self.default_factory, self.alias = default, default_factory, alias


def Field(default: Any = ..., **settings: Any) -> Any:
    return FieldInfo(default, **settings)


SerializerFunctionWrapHandler = typing.Any


def model_validator(*_: Any, **__: Any) -> Any:
    return lambda function: function


def model_serializer(*_: Any, **__: Any) -> Any:
    return lambda function: function


class _Field:
    def __init__(self, module: str, annotation: Any, value: Any) -> None:
        self.module, self.annotation, self.factory, self.key = module, annotation, None, None
        if isinstance(value, FieldInfo):
            self.factory, self.key = value.default_factory, value.alias
            value = value.default
        self.default = value


class BaseModel:
    model_config: dict[str, Any] = {}
    model_fields: dict[str, _Field] = {}
    _types: dict[str, Any] | None = None

    def __init_subclass__(cls, **_: Any) -> None:
        fields: dict[str, _Field] = {}
        for klass in reversed(cls.__mro__[:cls.__mro__.index(BaseModel)]):
            for name, annotation in klass.__dict__.get("__annotations__", {}).items():
                if name == "model_config" or "ClassVar" in str(annotation):
                    continue
                inherited = fields[name].default if name in fields else ...
                fields[name] = _Field(klass.__module__, annotation, klass.__dict__.get(name, inherited))
        cls.model_fields, cls._types = fields, None

    @classmethod
    def _resolved(cls) -> dict[str, Any]:
        if cls._types is None:
            resolved = {}
            for name, field in cls.model_fields.items():
                try:
                    resolved[name] = (eval(field.annotation, vars(sys.modules[field.module]))
                                      if isinstance(field.annotation, str) else field.annotation)
                except Exception:
                    resolved[name] = Any
            cls._types = resolved
        return cls._types

    def __init__(self, **data: Any) -> None:
        resolved = type(self)._resolved()
        for name, field in self.model_fields.items():
            if field.key is not None and field.key in data:
                value = data[field.key]
            elif name in data:
                value = data[name]
            elif field.factory is not None:
                value = field.factory()
            elif field.default is not ...:
                value = field.default
            else:
                raise ValidationError(f"{type(self).__name__}.{name}: missing")
            object.__setattr__(self, name, _made(value, resolved[name]))

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(repr(sorted(self.__dict__.items())))

    @classmethod
    def model_validate(cls, document: Any) -> Any:
        return document if isinstance(document, cls) else cls(**document)

    def model_dump(self, *, mode: str = "python", by_alias: bool = False, exclude: Any = None) -> dict[str, Any]:
        return {(field.key or name) if by_alias else name: _dumped(getattr(self, name), by_alias)
                for name, field in self.model_fields.items() if not exclude or name not in exclude}

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Any:
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__, **(update or {}))
        return copy


def _dumped(value: Any, by_alias: bool) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=by_alias)
    if isinstance(value, (list, tuple)):
        return [_dumped(item, by_alias) for item in value]
    if isinstance(value, dict):
        return {key: _dumped(item, by_alias) for key, item in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    return str(value) if isinstance(value, PurePath) else value


def _made(value: Any, annotation: Any) -> Any:
    """``value`` as the annotation's record, tuple or dict of records, where it came as JSON."""
    if isinstance(value, dict) and isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation(**value)
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _made(value, arguments[0])
    if origin in (typing.Union, types.UnionType):
        for argument in arguments:
            if isinstance(value, dict) and isinstance(argument, type) and issubclass(argument, BaseModel):
                return argument(**value)
            if isinstance(value, list) and typing.get_origin(argument) is tuple:
                return tuple(value)
        return value
    if origin is dict and isinstance(value, dict) and len(arguments) == 2:
        return {key: _made(item, arguments[1]) for key, item in value.items()}
    if origin is tuple and isinstance(value, list):
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return tuple(_made(item, arguments[0]) for item in value)
        return tuple(value)
    return value
