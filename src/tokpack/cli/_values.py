"""The values of the commands' options, read without pydantic where that gives the same value.

typer (0.2x) reads every option's value that is not a plain bool through a pydantic
``TypeAdapter`` built for it when the command runs: a command of 23 options builds 23 adapters
and imports pydantic's validation machinery for them. tokpack's options are all of a few plain
kinds (a string, a whole or decimal number, a path with typer's default checks, one of an
``Enum``'s values), and a value of those kinds written plainly on the command line is read here
the way typer's adapter reads it; anything else (another kind, a value written some other way, a
number out of its range, a path that exists and cannot be read, a name that is no choice) goes to
typer's own adapter, which reads it or reports it in its own words. tests/cli/test_values.py holds
the two equal on every option of every command.

With a typer that has no such adapters (older ones, on click itself), nothing changes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

#: A whole number as a command line writes one (no sign but ``-``, no leading zero, no ``_``, no
#: spaces), short of Python's limit on the digits it converts.
_WHOLE = re.compile(r"-?(?:0|[1-9][0-9]{0,99})")
#: A decimal number written plainly: digits, at most one point, digits on both sides of it.
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,99})(?:\.[0-9]{1,100})?")
#: What :func:`plain_value` returns for a value it leaves to typer.
NOT_PLAIN: Any = object()


def _path_checks_default(info: Any) -> bool:
    """Whether a path option asks for typer's default checks only (it may be missing; if it
    exists, it must be readable)."""
    return (not info.exists and info.file_okay and info.dir_okay and not info.writable and info.readable
            and not info.resolve_path and not info.allow_dash and info.path_type is None
            and info.parser is None)


def plain_value(annotation: Any, info: Any, value: Any, normalize: Any = None) -> Any:
    """``value`` (a string from the command line, or the option's default) read as an option of
    type ``annotation`` with typer's settings ``info``, when it is of a plain kind written plainly;
    else :data:`NOT_PLAIN` (typer's own adapter reads it). ``normalize`` is the click context's
    token normalizer, if any (choices are compared through it)."""
    if info.parser is not None:
        return NOT_PLAIN
    if annotation is str:
        return value if type(value) is str else NOT_PLAIN
    if annotation is int:
        return _number(value, int, _WHOLE, info)
    if annotation is float:
        return _number(value, float, _DECIMAL, info)
    if annotation is Path:
        if type(value) is not str or not value or "\0" in value or not _path_checks_default(info):
            return NOT_PLAIN
        try:
            os.stat(value)
        except (OSError, ValueError):
            return Path(value)  # missing: allowed
        return Path(value) if os.access(value, os.R_OK) else NOT_PLAIN
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if isinstance(value, annotation):
            return value
        if type(value) is not str or normalize is not None or not info.case_sensitive:
            return NOT_PLAIN
        for member in annotation:
            if str(member.value) == value:
                return member
        return NOT_PLAIN
    return NOT_PLAIN


class _PlainFirst:
    """A typer parameter's coercion: :func:`plain_value`, else typer's own (built on first need)."""

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor
        self._typers: Any = None

    def typers(self) -> Any:
        """typer's own coercion of this parameter."""
        if self._typers is None:
            from typer._coercion import build_runtime_param

            self._typers = build_runtime_param(self.descriptor)
        return self._typers

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if param.nargs == 1 and not param.multiple:
            if value is None:  # as typer's own coercion has it, without building it
                return None
            read = plain_value(self.descriptor.annotation, self.descriptor.parameter_info, value,
                               getattr(ctx, "token_normalize_func", None))
            if read is not NOT_PLAIN:
                return read
        return self.typers().coerce(value, param=param, ctx=ctx)


def _number(value: Any, kind: type[int] | type[float], spelling: re.Pattern[str], info: Any) -> Any:
    """``value`` as ``kind`` when it is one or a string spelled as ``spelling`` allows, within the
    option's bounds and not clamped; else :data:`NOT_PLAIN`."""
    if type(value) is kind:
        number = value
    elif type(value) is str and spelling.fullmatch(value):
        number = kind(value)
    else:
        return NOT_PLAIN
    if info.clamp or (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
        return NOT_PLAIN
    return number


def _read_plainly(params: Iterable[Any]) -> None:
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", NOT_PLAIN) is not None or descriptor.file_annotation is not None:
            continue
        param._runtime_param = _PlainFirst(descriptor)


def read_plainly(command: Any) -> None:
    """Have each typer parameter of the click ``command`` (its help option too, made when first
    asked for) read its value with :func:`plain_value` first; a parameter typer already read, or a
    typer without per-parameter adapters: unchanged."""
    _read_plainly(command.params)
    if getattr(command, "_plain_help_option", False) or not hasattr(command, "get_help_option"):
        return
    made = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = made(ctx)
        _read_plainly([] if option is None else [option])
        return option

    command.get_help_option = get_help_option
    command._plain_help_option = True
